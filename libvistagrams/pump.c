/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pump.c -- the event loop: sockets in, timers out, vista_select, vg_poll
 *
 * There is no thread and no signal: the network is served whenever the
 * program is inside a waiting call (vista_receive_*, vista_select,
 * vg_poll).  One turn of the loop
 *   1. runs the timers (the first turn of a call only looks at them):
 *      held datagrams of the fault injector, retransmissions with
 *      backoff, lone acknowledgements, acknowledged responses to forget;
 *   2. checks whether the caller's condition holds (then returns);
 *   3. sleeps in ppoll() until a socket is readable or the earliest timer
 *      or the caller's deadline;
 *   4. reads one datagram from each readable socket, parses it (wire.c)
 *      and hands it to the client or server side (which keep it, answer
 *      it, or drop and count it).
 * A request/response cycle thus costs each side one ppoll and one recvmsg
 * per datagram, besides the sendmsg.
 *
 * Invariants
 *   P1. A datagram is parsed before anything looks at it; a refused one
 *       only increments its drop counter.
 *   P2. One datagram per readable socket and turn: a flood on one socket
 *       cannot starve the timers or the other socket.
 *   P3. Receive buffers come from a fixed pool; when it is empty datagrams
 *       are read into a scratch buffer and dropped (nobuf_dropped): the
 *       sender retransmits, memory stays bounded.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "vg_int.h"

#define VG__STACK_EPS 8

void
vg__pkt_free(vg_endpoint *ep, struct vg__pkt *p)
{
	p->next = ep->free_pkts;
	ep->free_pkts = p;
}

static void
count_refused(vg_endpoint *ep, enum vg__wire_verdict v)
{
	switch (v) {
	case VG__WIRE_OK:
		break;
	case VG__WIRE_MALFORMED:
		ep->st.malformed_dropped++;
		break;
	case VG__WIRE_TRUNCATED:
		ep->st.truncated_dropped++;
		break;
	case VG__WIRE_OVERSIZED:
		ep->st.oversized_dropped++;
		break;
	case VG__WIRE_CHECKSUM:
		ep->st.checksum_dropped++;
		break;
	}
}

/* Read one datagram from fd, parse it, hand it over.  False if none. */
static bool
receive_one(vg_endpoint *ep, int fd, bool retrans)
{
	size_t cap = ep->pkt_size - sizeof(struct vg__pkt);
	struct vg__pkt *p = ep->free_pkts;
	struct sockaddr_storage from;
	struct iovec iov = { p ? p->data : ep->scratch, cap };
	struct msghdr m;
	ssize_t got;

	memset(&m, 0, sizeof(m));
	m.msg_name = &from;
	m.msg_namelen = sizeof(from);
	m.msg_iov = &iov;
	m.msg_iovlen = 1;
	do
		got = recvmsg(fd, &m, MSG_DONTWAIT | MSG_TRUNC);
	while (got < 0 && errno == EINTR);
	if (got < 0)
		return false; /* EAGAIN: drained; anything else: try later */
	ep->st.received++;
	if (p == NULL) {
		ep->st.nobuf_dropped++; /* P3 */
		return true;
	}
	if ((size_t)got > cap) {
		ep->st.oversized_dropped++;
		return true;
	}
	enum vg__wire_verdict v = vg__wire_parse(p->data, (size_t)got,
		ep->max_message, &p->w);
	if (v != VG__WIRE_OK) {
		count_refused(ep, v); /* P1 */
		return true;
	}
	ep->free_pkts = p->next;
	p->next = NULL;
	p->len = (uint32_t)got;
	p->retrans = retrans;
	p->from = from;
	p->fromlen = m.msg_namelen;
	switch (p->w.type) {
	case VG_PKT_REQUEST:
		vg__server_on_request(ep, p);
		break;
	case VG_PKT_RESPONSE:
		vg__client_on_response(ep, p);
		break;
	default:
		vg__server_on_ack(ep, p);
		break;
	}
	return true;
}

/* Timers of one endpoint (none runs at now == 0: a peek); the next due
 * time. */
static uint64_t
timers(vg_endpoint *ep, uint64_t now)
{
	uint64_t next = vg__net_tick(ep, now), t;

	t = vg__client_timers(ep, now);
	next = t < next ? t : next;
	t = vg__server_timers(ep, now);
	return t < next ? t : next;
}

int
vg__wait(vg_endpoint *const *eps, size_t n, int timeout_ms,
	bool (*ready)(vg_endpoint *const *eps, size_t n, void *arg), void *arg)
{
	struct pollfd stack_fds[2 * VG__STACK_EPS], *fds = stack_fds;
	uint64_t deadline = timeout_ms < 0 ? UINT64_MAX
		: rio_now_ns(CLOCK_MONOTONIC) +
			(uint64_t)timeout_ms * 1000000ull;
	int rc = -ETIMEDOUT;

	if (n > VG__STACK_EPS) {
		fds = calloc(2 * n, sizeof(*fds));
		if (fds == NULL)
			return vg__err(-ENOMEM, "poll set of %zu endpoints", n);
	}
	for (size_t i = 0; i < n; i++) {
		fds[2 * i] = (struct pollfd){ eps[i]->net.fd, POLLIN, 0 };
		fds[2 * i + 1] = (struct pollfd){ eps[i]->net.rfd, POLLIN, 0 };
	}
	/* The first turn only peeks at the timers: a retransmission falls
	 * due while the response waits in the socket buffer, unread. */
	for (bool fire = false;; fire = true) {
		uint64_t now = rio_now_ns(CLOCK_MONOTONIC), next = deadline;
		for (size_t i = 0; i < n; i++) {
			if ((rc = vg__check(eps[i])) != 0)
				goto out;
			uint64_t t = timers(eps[i], fire ? now : 0);
			if (t < next)
				next = t;
		}
		if (ready(eps, n, arg)) {
			rc = 0;
			goto out;
		}
		if (now >= deadline) {
			rc = vg__err(-ETIMEDOUT, "nothing to deliver within %d "
				"ms", timeout_ms);
			goto out;
		}
		/* One system call to wait, one per datagram to read (P2). */
		struct timespec ts, *tsp = NULL;
		if (next != UINT64_MAX) {
			uint64_t d = next > now ? next - now : 0;
			ts.tv_sec = (time_t)(d / 1000000000ull);
			ts.tv_nsec = (long)(d % 1000000000ull);
			tsp = &ts;
		}
		int nready = ppoll(fds, 2 * n, tsp, NULL);
		if (nready < 0 && errno != EINTR) {
			rc = vg__errno("ppoll");
			goto out;
		}
		for (size_t i = 0; nready > 0 && i < 2 * n; i++)
			if (fds[i].revents)
				(void)receive_one(eps[i / 2], fds[i].fd, i & 1);
	}
out:
	if (fds != stack_fds)
		free(fds);
	return rc;
}

static bool
select_ready(vg_endpoint *const *eps, size_t n, void *arg)
{
	unsigned *ready = arg;
	bool any = false;

	for (size_t i = 0; i < n; i++) {
		ready[i] = (vg__server_ready(eps[i]) ? VG_READY_REQUEST : 0) |
			(vg__client_ready(eps[i]) ? VG_READY_RESPONSE : 0);
		any |= ready[i] != 0;
	}
	return any;
}

int
vista_select(vg_endpoint *const *eps, size_t n, unsigned *ready,
	int timeout_ms)
{
	if (eps == NULL || ready == NULL || n == 0)
		return vg__err(-EINVAL, "vista_select: no endpoints");
	for (size_t i = 0; i < n; i++)
		if (eps[i] == NULL)
			return vg__err(-EINVAL, "vista_select: endpoint %zu is "
				"NULL", i);
	return vg__wait(eps, n, timeout_ms, select_ready, ready);
}

static bool
never(vg_endpoint *const *eps, size_t n, void *arg)
{
	(void)eps;
	(void)n;
	(void)arg;
	return false;
}

int
vg_poll(vg_endpoint *ep, int timeout_ms)
{
	int rc;

	if (ep == NULL)
		return vg__err(-EINVAL, "vg_poll: no endpoint");
	rc = vg__wait(&ep, 1, timeout_ms, never, NULL);
	return rc == -ETIMEDOUT ? 0 : rc;
}
