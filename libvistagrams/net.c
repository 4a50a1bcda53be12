/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net.c -- UDP sockets, stored addresses, and the injectable lossy network
 *
 * An endpoint owns two non-blocking UDP sockets bound to the same address:
 * the normal port P (first transmissions, responses, acknowledgements) and
 * the retransmit port P + 1 (retransmitted requests only).  Everything is
 * sent from the normal socket.
 *
 * Fault injection (struct vg_faults) stands between the protocol and
 * sendmsg(): each outgoing datagram is, independently, dropped, delayed
 * (held until a random due time), reordered (held until the next datagram
 * has left, or a due time), and duplicated (a second copy with a random
 * delay).  Held datagrams are copies, released by vg__net_tick() from the
 * event loop, whose poll timeout includes the next due time.  The
 * generator is splitmix64 seeded from the options, so a run replays.
 *
 * Invariants
 *   N1. A send never blocks and never fails the caller: EAGAIN, ENOBUFS
 *       and the like are losses, which retransmission repairs.
 *   N2. Stored addresses (struct vg_addr) are family 4 or 6 with a
 *       non-zero port; anything else is refused before it reaches a table.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "vg_int.h"

struct vg__held {
	struct vg__held *next;
	uint64_t due;
	bool after_next;     /* reordered: released once another one left */
	struct sockaddr_storage to;
	socklen_t tolen;
	size_t len;
	uint8_t data[];
};

#define DEFAULT_DELAY_MAX_US 2000u
#define PORT_TRIES 64
#define RCVBUF_BYTES (4 << 20)

/* ---- addresses ---- */

bool
vg__addr_valid(const struct vg_addr *a)
{
	return (a->family == 4 || a->family == 6) && a->port != 0;
}

int
vg__addr_from_sockaddr(const struct sockaddr *sa, socklen_t len,
	struct vg_addr *out)
{
	memset(out, 0, sizeof(*out));
	if (sa == NULL)
		return vg__err(VG_EADDR, "no address");
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const void *)sa;
		out->family = 4;
		out->port = ntohs(in->sin_port);
		memcpy(out->addr, &in->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6 &&
		   len >= sizeof(struct sockaddr_in6)) {
		const struct sockaddr_in6 *in6 = (const void *)sa;
		out->family = 6;
		out->port = ntohs(in6->sin6_port);
		out->scope_id = in6->sin6_scope_id;
		memcpy(out->addr, &in6->sin6_addr, 16);
	} else {
		return vg__err(VG_EADDR,
			"address family %d (length %u) is not IPv4 or IPv6",
			sa->sa_family, (unsigned)len);
	}
	if (out->port == 0)
		return vg__err(VG_EADDR, "address has port 0");
	return 0;
}

socklen_t
vg__addr_to_sockaddr(const struct vg_addr *a, unsigned port_add,
	struct sockaddr_storage *out)
{
	memset(out, 0, sizeof(*out));
	if (a->family == 4) {
		struct sockaddr_in *in = (void *)out;
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)(a->port + port_add));
		memcpy(&in->sin_addr, a->addr, 4);
		return sizeof(*in);
	}
	struct sockaddr_in6 *in6 = (void *)out;
	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons((uint16_t)(a->port + port_add));
	in6->sin6_scope_id = a->scope_id;
	memcpy(&in6->sin6_addr, a->addr, 16);
	return sizeof(*in6);
}

/* ---- sockets ---- */

static int
udp_socket(vg_endpoint *ep, const struct sockaddr *sa, socklen_t len, int *fd)
{
	int s = socket(sa->sa_family, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC,
		0);
	int rcv = RCVBUF_BYTES;

	(void)ep;
	if (s < 0)
		return vg__errno("socket");
	/* A deeper queue rides out bursts; the kernel may cap it. */
	(void)setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	if (bind(s, sa, len) < 0) {
		int rc = -errno;
		close(s);
		return rc;
	}
	*fd = s;
	return 0;
}

static void
set_port(struct sockaddr_storage *ss, uint16_t port)
{
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
}

static uint16_t
get_port(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)ss)->sin_port);
	return ntohs(((const struct sockaddr_in6 *)ss)->sin6_port);
}

int
vg__net_open(vg_endpoint *ep, const char *host, uint16_t port)
{
	struct vg__net *n = &ep->net;
	struct addrinfo hints, *ai = NULL;
	struct sockaddr_storage ss;
	socklen_t sslen;
	int rc;

	n->fd = n->rfd = -1;
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_DGRAM;
	hints.ai_flags = AI_NUMERICHOST | AI_PASSIVE;
	rc = getaddrinfo(host, NULL, &hints, &ai);
	if (rc != 0 || ai == NULL)
		return vg__err(VG_EADDR, "host '%s' is not a numeric IPv4 or "
			"IPv6 address: %s", host, gai_strerror(rc));
	memcpy(&ss, ai->ai_addr, ai->ai_addrlen);
	sslen = ai->ai_addrlen;
	freeaddrinfo(ai);
	if (port == 65535)
		return vg__err(-EINVAL, "port 65535 leaves no room for the "
			"retransmit port (port + 1)");

	for (int tries = 0; tries < PORT_TRIES; tries++) {
		set_port(&ss, port);
		rc = udp_socket(ep, (struct sockaddr *)&ss, sslen, &n->fd);
		if (rc)
			return vg__err(rc, "bind %s port %u: %s", host, port,
				strerror(-rc));
		n->selflen = sizeof(n->self);
		if (getsockname(n->fd, (struct sockaddr *)&n->self,
			    &n->selflen) < 0) {
			rc = vg__errno("getsockname");
			close(n->fd);
			n->fd = -1;
			return rc;
		}
		uint16_t p = get_port(&n->self);
		struct sockaddr_storage rs = n->self;
		if (p == 65535) {
			rc = -EADDRINUSE;
		} else {
			set_port(&rs, (uint16_t)(p + 1));
			rc = udp_socket(ep, (struct sockaddr *)&rs, n->selflen,
				&n->rfd);
		}
		if (rc == 0)
			return 0;
		close(n->fd);
		n->fd = -1;
		/* A chosen port whose neighbour is taken: choose again. */
		if (port != 0 || rc != -EADDRINUSE)
			return vg__err(rc, "bind %s retransmit port %u: %s",
				host, (unsigned)p + 1, strerror(-rc));
	}
	return vg__err(-EADDRINUSE, "no free pair of ports (P, P+1) on %s "
		"after %d tries", host, PORT_TRIES);
}

void
vg__net_close(vg_endpoint *ep)
{
	vg__net_drop_held(ep);
	if (ep->net.fd >= 0)
		close(ep->net.fd);
	if (ep->net.rfd >= 0)
		close(ep->net.rfd);
	ep->net.fd = ep->net.rfd = -1;
}

/* ---- sending, through the fault injector ---- */

static void
raw_send(vg_endpoint *ep, const struct sockaddr *to, socklen_t tolen,
	struct iovec *iov, int iovcnt)
{
	struct msghdr m;

	memset(&m, 0, sizeof(m));
	m.msg_name = (void *)to;
	m.msg_namelen = tolen;
	m.msg_iov = iov;
	m.msg_iovlen = (size_t)iovcnt;
	/* N1: a loss, if it fails; retransmission repairs it. */
	if (sendmsg(ep->net.fd, &m, MSG_DONTWAIT) >= 0)
		ep->st.sent++;
}

static uint64_t
rng_next(struct vg__net *n)
{
	uint64_t z = (n->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static bool
chance(struct vg__net *n, double p)
{
	if (p <= 0)
		return false;
	return (double)(rng_next(n) >> 11) * 0x1.0p-53 < p;
}

static uint64_t
random_delay_ns(struct vg__net *n)
{
	uint32_t max = n->f.delay_max_us ? n->f.delay_max_us
					 : DEFAULT_DELAY_MAX_US;
	return (rng_next(n) % ((uint64_t)max + 1)) * 1000;
}

static void
hold(vg_endpoint *ep, const struct sockaddr *to, socklen_t tolen,
	const struct iovec *iov, int iovcnt, uint64_t due, bool after_next)
{
	size_t len = 0;
	struct vg__held *h, **pp;

	for (int i = 0; i < iovcnt; i++)
		len += iov[i].iov_len;
	h = malloc(sizeof(*h) + len);
	if (h == NULL)
		return; /* a loss */
	h->due = due;
	h->after_next = after_next;
	memcpy(&h->to, to, tolen);
	h->tolen = tolen;
	h->len = 0;
	for (int i = 0; i < iovcnt; i++) {
		memcpy(h->data + h->len, iov[i].iov_base, iov[i].iov_len);
		h->len += iov[i].iov_len;
	}
	for (pp = &ep->net.held; *pp && (*pp)->due <= due; pp = &(*pp)->next)
		;
	h->next = *pp;
	*pp = h;
}

static void
release(vg_endpoint *ep, struct vg__held **pp)
{
	struct vg__held *h = *pp;
	struct iovec iov = { h->data, h->len };

	*pp = h->next;
	raw_send(ep, (struct sockaddr *)&h->to, h->tolen, &iov, 1);
	free(h);
}

/* Reordered datagrams go out right after the next one. */
static void
release_after_next(vg_endpoint *ep)
{
	struct vg__held **pp = &ep->net.held;

	while (*pp) {
		if ((*pp)->after_next)
			release(ep, pp);
		else
			pp = &(*pp)->next;
	}
}

void
vg__net_send(vg_endpoint *ep, const struct sockaddr *to, socklen_t tolen,
	const void *a, size_t alen, const void *b, size_t blen, const void *c,
	size_t clen)
{
	struct vg__net *n = &ep->net;
	struct iovec iov[3];
	int cnt = 0;

	iov[cnt++] = (struct iovec){ (void *)a, alen };
	if (blen)
		iov[cnt++] = (struct iovec){ (void *)b, blen };
	if (clen)
		iov[cnt++] = (struct iovec){ (void *)c, clen };
	if (!n->faulty) {
		raw_send(ep, to, tolen, iov, cnt);
		return;
	}

	uint64_t now = rio_now_ns(CLOCK_MONOTONIC);
	if (chance(n, n->f.drop)) {
		ep->st.fault_dropped++;
		return;
	}
	if (chance(n, n->f.delay)) {
		ep->st.fault_delayed++;
		hold(ep, to, tolen, iov, cnt, now + random_delay_ns(n), false);
	} else if (chance(n, n->f.reorder)) {
		ep->st.fault_reordered++;
		/* Out after the next datagram, or after a delay if none. */
		hold(ep, to, tolen, iov, cnt, now + random_delay_ns(n), true);
		return;
	} else {
		raw_send(ep, to, tolen, iov, cnt);
		release_after_next(ep);
	}
	if (chance(n, n->f.duplicate)) {
		ep->st.fault_duplicated++;
		hold(ep, to, tolen, iov, cnt, now + random_delay_ns(n), false);
	}
}

uint64_t
vg__net_tick(vg_endpoint *ep, uint64_t now)
{
	while (ep->net.held && ep->net.held->due <= now)
		release(ep, &ep->net.held);
	return ep->net.held ? ep->net.held->due : UINT64_MAX;
}

void
vg__net_drop_held(vg_endpoint *ep)
{
	while (ep->net.held) {
		struct vg__held *h = ep->net.held;
		ep->net.held = h->next;
		free(h);
	}
}
