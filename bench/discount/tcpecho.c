/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcpecho.c -- the client of the TCP network micro-benchmark of the
 *              buffered protocol (held_tcp.sh), for the echo server
 *              tests/discount/tcp_echo_prog.c
 *
 *   dc-bench-tcpecho PORT SIZE SECONDS CONNS WINDOW [THINK_US]
 *
 * CONNS connections to 127.0.0.1:PORT, each with WINDOW requests of SIZE
 * payload bytes in flight (answered in order), for SECONDS; prints one
 * line:
 *
 *   size=S conns=C window=W msgs=N msgs_per_s=R mbit_per_s=T
 *   rtt_mean_us=M rtt_p50_us=P rtt_p99_us=Q max_gap_ms=G errors=E
 *
 * rtt: from a request's send to its whole answer; max_gap_ms: the
 * longest time no answer at all arrived (with the server killed and
 * recovered meanwhile: its time back to service); errors: connections
 * that ended or failed (a reset), answers malformed.  THINK_US: after
 * each answer a pause drawn from [0, THINK_US) before the next request
 * (WINDOW 1), so requests fall anywhere between checkpoints.
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

#include "tcp_echo.h"

#define MAXC 64
#define MAXW 64
#define MAXS 2000000

struct conn {
	int fd;
	bool dead;
	uint64_t sent, got;
	double t[MAXW];       /* send times of the requests in flight */
	double next_at;       /* THINK: no request before */
	size_t outl, outo, inl;
	char *out, *in;
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

int
main(int argc, char **argv)
{
	if (argc < 6) {
		fprintf(stderr, "usage: dc-bench-tcpecho PORT SIZE SECONDS "
			"CONNS WINDOW [THINK_US]\n");
		return 2;
	}
	int port = atoi(argv[1]), nc = atoi(argv[4]), w = atoi(argv[5]);
	uint32_t size = (uint32_t)atoi(argv[2]);
	double secs = atof(argv[3]);
	double think = argc > 6 ? atof(argv[6]) / 1e6 : 0;
	if (nc < 1 || nc > MAXC || w < 1 || w > MAXW || size > TE_MAXLEN)
		return 2;
	static struct conn c[MAXC];
	static double rtt[MAXS];
	size_t nrtt = 0;
	size_t rl = sizeof(struct te_rep) + size;
	size_t ql = sizeof(struct te_req) + size;
	srand((unsigned)getpid());
	unsigned cid0 = (unsigned)getpid() % (TE_MAXCID - MAXC);
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
		c[i].out = malloc(ql * MAXW);
		c[i].in = malloc(rl * 2);
	}
	uint64_t msgs = 0, errors = 0;
	double t0 = now(), last = t0, gap = 0, end = t0 + secs;
	while (now() < end) {
		struct pollfd p[MAXC];
		double t = now();
		for (int i = 0; i < nc; i++) {
			struct conn *k = &c[i];
			/* top the window up */
			while (!k->dead && k->sent - k->got < (uint64_t)w &&
			       t >= k->next_at && k->outl < ql * MAXW) {
				struct te_req q = { .magic = TE_REQ,
					.cid = cid0 + (unsigned)i,
					.seq = k->sent, .len = size };
				memcpy(k->out + k->outl, &q, sizeof(q));
				memset(k->out + k->outl + sizeof(q), 'x', size);
				k->outl += ql;
				k->t[k->sent % MAXW] = t;
				k->sent++;
			}
			p[i] = (struct pollfd){ k->dead ? -1 : k->fd, POLLIN |
				(k->outo < k->outl ? POLLOUT : 0), 0 };
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
			ssize_t r = recv(k->fd, k->in + k->inl, rl * 2 - k->inl,
				MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno != EAGAIN)) {
				k->dead = true;
				errors++;
				continue;
			}
			if (r > 0)
				k->inl += (size_t)r;
			while (k->inl >= rl) {
				struct te_rep a;
				memcpy(&a, k->in, sizeof(a));
				if (a.magic != TE_REP || a.seq != k->got) {
					k->dead = true;
					errors++;
					break;
				}
				if (nrtt < MAXS)
					rtt[nrtt++] = t - k->t[k->got % MAXW];
				k->got++;
				msgs++;
				if (t - last > gap)
					gap = t - last;
				last = t;
				memmove(k->in, k->in + rl, k->inl - rl);
				k->inl -= rl;
				if (think > 0)
					k->next_at = t + think * (rand() /
						(RAND_MAX + 1.0));
			}
		}
	}
	double el = now() - t0, sum = 0;
	for (size_t i = 0; i < nrtt; i++)
		sum += rtt[i];
	qsort(rtt, nrtt, sizeof(double), cmp);
	printf("size=%u conns=%d window=%d msgs=%llu msgs_per_s=%.0f "
		"mbit_per_s=%.2f rtt_mean_us=%.0f rtt_p50_us=%.0f "
		"rtt_p99_us=%.0f max_gap_ms=%.1f errors=%llu\n", size, nc, w,
		(unsigned long long)msgs, (double)msgs / el,
		(double)msgs * size * 8 / el / 1e6,
		nrtt ? sum / (double)nrtt * 1e6 : 0,
		nrtt ? rtt[nrtt / 2] * 1e6 : 0,
		nrtt ? rtt[nrtt * 99 / 100] * 1e6 : 0, gap * 1e3,
		(unsigned long long)errors);
	return errors ? 1 : 0;
}
