/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * oe_client.c -- the client driver of the order-entry server
 *                (oe_server.c; held_tpcc.sh)
 *
 *   dc-bench-oe-client PORT SECONDS CONNS WINDOW [check [DRAIN_S]]
 *
 * CONNS connections (terminals) to 127.0.0.1:PORT, each with WINDOW
 * transaction requests in flight (answered in order), no think time, for
 * SECONDS; prints one line:
 *
 *   conns=C window=W tx=N tx_per_s=R lat_mean_us=M lat_p50_us=P
 *   lat_p99_us=Q max_gap_ms=G errors=E [unanswered=U check=ok|failed]
 *
 * lat: from a request's send to its answer; max_gap_ms: the longest time
 * no answer at all arrived (with the server killed and recovered
 * meanwhile: its time back to service); errors: connections that ended
 * or failed (a reset), and answers that break exactly-once: a count
 * other than seq + 1 (a transaction lost or run twice) or a hash that
 * does not follow from the nonces received (an answer of a lost
 * interval got out).  "check": after SECONDS every answer is awaited
 * (up to DRAIN_S seconds, default 60; the requests still unanswered then
 * are counted, a lost request), then the server checks its database
 * (OE_CHECK).
 * Exit 0 if no errors and the check (if asked) passed.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "oe_proto.h"

#define MAXC 2048
#define MAXW 1024
#define MAXS 4000000

struct conn {
	int fd;
	bool dead;
	uint64_t sent, got, hash;
	double t[MAXW];       /* send times of the requests in flight */
	size_t outl, outo, inl;
	char out[sizeof(struct oe_req) * MAXW];
	char in[sizeof(struct oe_rep) * MAXW];
};

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void
queue(struct conn *k, uint32_t op, uint64_t seq)
{
	struct oe_req q = { .magic = OE_REQ, .op = op, .seq = seq };
	memcpy(k->out + k->outl, &q, sizeof(q));
	k->outl += sizeof(q);
}

int
main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: dc-bench-oe-client PORT SECONDS CONNS "
			"WINDOW [check]\n");
		return 2;
	}
	int port = atoi(argv[1]), nc = atoi(argv[3]), w = atoi(argv[4]);
	double secs = atof(argv[2]);
	bool check = argc > 5 && !strcmp(argv[5], "check");
	double drain = argc > 6 ? atof(argv[6]) : 60;
	if (nc < 1 || nc > MAXC || w < 1 || w > MAXW || secs <= 0)
		return 2;
	static struct conn c[MAXC];
	static double lat[MAXS];
	size_t nlat = 0;
	for (int i = 0; i < nc; i++) {
		c[i].fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET,
			.sin_port = htons((uint16_t)port),
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		if (connect(c[i].fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
			perror("connect");
			return 1;
		}
		int one = 1;
		setsockopt(c[i].fd, IPPROTO_TCP, TCP_NODELAY, &one,
			sizeof(one));
		c[i].hash = TE_HASH0;
	}
	uint64_t tx = 0, errors = 0;
	double t0 = now(), last = t0, gap = 0, end = t0 + secs;
	double drain_end = end + (check ? drain : 0);
	int checking = 0; /* 1: OE_CHECK sent on connection 0, 2: answered */
	uint32_t check_result = 1;
	for (;;) {
		double t = now();
		bool sending = t < end, pending = false;
		if (t >= drain_end || checking == 2)
			break;
		struct pollfd p[MAXC];
		for (int i = 0; i < nc; i++) {
			struct conn *k = &c[i];
			/* top the window up */
			while (sending && !k->dead &&
			       k->sent - k->got < (uint64_t)w) {
				queue(k, OE_TX, k->sent);
				k->t[k->sent % MAXW] = t;
				k->sent++;
			}
			if (!k->dead && k->got < k->sent)
				pending = true;
			p[i] = (struct pollfd){ k->dead ? -1 : k->fd, POLLIN |
				(k->outo < k->outl ? POLLOUT : 0), 0 };
		}
		if (!sending && !check)
			break;
		if (!sending && !pending && checking == 0) {
			if (c[0].dead)
				break;
			queue(&c[0], OE_CHECK, c[0].sent);
			checking = 1;
			continue;
		}
		poll(p, (nfds_t)nc, 2);
		t = now();
		for (int i = 0; i < nc; i++) {
			struct conn *k = &c[i];
			if (p[i].revents & POLLOUT) {
				ssize_t r = send(k->fd, k->out + k->outo,
					k->outl - k->outo, MSG_DONTWAIT |
					MSG_NOSIGNAL);
				if (r > 0)
					k->outo += (size_t)r;
				if (k->outo == k->outl)
					k->outo = k->outl = 0;
			}
			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t r = recv(k->fd, k->in + k->inl,
				sizeof(k->in) - k->inl, MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno != EAGAIN)) {
				fprintf(stderr, "oe-client: connection %d %s "
					"after %llu answers\n", i, r ? strerror(
					errno) : "ended", (unsigned long long)
					k->got);
				k->dead = true;
				errors++;
				continue;
			}
			if (r > 0)
				k->inl += (size_t)r;
			size_t used = 0;
			while (k->inl - used >= sizeof(struct oe_rep)) {
				struct oe_rep a;
				memcpy(&a, k->in + used, sizeof(a));
				used += sizeof(a);
				if (a.magic == OE_REP && a.op == OE_CHECK &&
				    checking == 1 && i == 0) {
					check_result = a.result;
					checking = 2;
					break;
				}
				uint64_t h = te_chain(k->hash, a.nonce, a.seq);
				if (a.magic != OE_REP || a.op != OE_TX ||
				    a.seq != k->got || a.count != a.seq + 1 ||
				    a.hash != h) {
					fprintf(stderr, "oe-client: connection "
						"%d: answer %llu: seq %llu "
						"count %llu%s\n", i,
						(unsigned long long)k->got,
						(unsigned long long)a.seq,
						(unsigned long long)a.count,
						a.hash != h ? ", hash does "
						"not follow" : "");
					k->dead = true;
					errors++;
					break;
				}
				k->hash = h;
				if (t < end) {
					if (nlat < MAXS)
						lat[nlat++] = t -
							k->t[k->got % MAXW];
					tx++;
				}
				k->got++;
				if (t - last > gap)
					gap = t - last;
				last = t;
			}
			memmove(k->in, k->in + used, k->inl - used);
			k->inl -= used;
		}
	}
	double el = (now() < end ? now() : end) - t0, sum = 0;
	for (size_t i = 0; i < nlat; i++)
		sum += lat[i];
	qsort(lat, nlat, sizeof(double), cmp);
	printf("conns=%d window=%d tx=%llu tx_per_s=%.0f lat_mean_us=%.0f "
		"lat_p50_us=%.0f lat_p99_us=%.0f max_gap_ms=%.1f errors=%llu",
		nc, w, (unsigned long long)tx, (double)tx / el,
		nlat ? sum / (double)nlat * 1e6 : 0,
		nlat ? lat[nlat / 2] * 1e6 : 0,
		nlat ? lat[nlat * 99 / 100] * 1e6 : 0, gap * 1e3,
		(unsigned long long)errors);
	uint64_t unanswered = 0, answered = 0;
	for (int i = 0; i < nc; i++) {
		unanswered += c[i].dead ? 0 : c[i].sent - c[i].got;
		answered += c[i].got;
	}
	if (check)
		printf(" answered=%llu unanswered=%llu check=%s",
			(unsigned long long)answered,
			(unsigned long long)unanswered,
			checking != 2 ? "unanswered" :
			check_result == 0 ? "ok" : "failed");
	printf("\n");
	if (check && (unanswered || checking != 2 || check_result != 0))
		return 1;
	return errors ? 1 : 0;
}
