/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * netecho.c -- the network micro-benchmark of the buffered protocol
 *              (held_net.sh): a UDP echo server and its client
 *
 *   dc-bench-netecho server PORT
 *   dc-bench-netecho client PORT SIZE SECONDS WINDOW [THINK_US]
 *
 * The server (run under dc-run, or alone) sends every datagram it
 * receives back to its sender.  The client keeps WINDOW datagrams of
 * SIZE bytes in flight to 127.0.0.1:PORT for SECONDS, each carrying its
 * send time, and prints one line:
 *
 *   size=S window=W msgs=N lost=L msgs_per_s=R mbit_per_s=T
 *   rtt_mean_us=M rtt_p50_us=P rtt_p99_us=Q
 *
 * A datagram not answered within 2 s is counted lost and replaced.
 * THINK_US: after each answer, a pause drawn uniformly from [0, THINK_US)
 * before the next request, so requests do not arrive in step with the
 * server's checkpoints (a closed loop without it sends each request just
 * after the checkpoint that released the previous answer).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXSZ 65000
#define MAXW 64
#define MAXRTT 2000000

static uint64_t
now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int
server(int port)
{
	static char b[MAXSZ + 64];
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) != 0) {
		perror("bind");
		return 2;
	}
	for (;;) {
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(s, b, sizeof(b), 0,
			(struct sockaddr *)&from, &fl);
		if (n < 0)
			continue;
		if (n == 4 && !memcmp(b, "quit", 4))
			return 0;
		sendto(s, b, (size_t)n, 0, (struct sockaddr *)&from, fl);
	}
}

static int
cmp_u32(const void *x, const void *y)
{
	uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
	return a < b ? -1 : a > b;
}

struct slot {
	uint64_t seq, sent;
};

static int
client(int port, size_t size, double secs, int w, unsigned think)
{
	static char b[MAXSZ + 64], r[MAXSZ + 64];
	static uint32_t rtt[4000000];
	if (size < 16 || size > MAXSZ || w < 1 || w > MAXW)
		return 2;
	int s = socket(AF_INET, SOCK_DGRAM, 0);
	int big = 4 << 20;
	setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	struct sockaddr_in a = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)port),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) != 0)
		return 2;
	memset(b, 'x', sizeof(b));
	struct slot fl[MAXW];
	uint64_t seq = 0, n = 0, lost = 0, t0 = now_ns();
	uint64_t end = t0 + (uint64_t)(secs * 1e9);
	for (int i = 0; i < w; i++) {
		fl[i] = (struct slot){ seq++, now_ns() };
		memcpy(b, &fl[i].seq, 8);
		send(s, b, size, 0);
	}
	while (now_ns() < end) {
		struct pollfd p = { s, POLLIN, 0 };
		if (poll(&p, 1, 100) > 0) {
			ssize_t k = recv(s, r, sizeof(r), 0);
			if (k < 8)
				continue;
			uint64_t q;
			memcpy(&q, r, 8);
			for (int i = 0; i < w; i++) {
				if (fl[i].seq != q)
					continue;
				uint64_t t = now_ns();
				uint64_t us = (t - fl[i].sent) / 1000;
				if (n < sizeof(rtt) / sizeof(rtt[0]))
					rtt[n] = (uint32_t)(us < MAXRTT ? us :
						MAXRTT);
				n++;
				if (think) {
					struct timespec ts = { 0, (long)(
						(unsigned)rand() % think) *
						1000 };
					nanosleep(&ts, NULL);
					t = now_ns();
				}
				fl[i] = (struct slot){ seq++, t };
				memcpy(b, &fl[i].seq, 8);
				send(s, b, size, 0);
				break;
			}
		}
		uint64_t t = now_ns();
		for (int i = 0; i < w; i++)
			if (t - fl[i].sent > 2000000000ull) {
				lost++;
				fl[i] = (struct slot){ seq++, t };
				memcpy(b, &fl[i].seq, 8);
				send(s, b, size, 0);
			}
	}
	double el = (double)(now_ns() - t0) / 1e9;
	uint64_t m = n < sizeof(rtt) / sizeof(rtt[0]) ? n :
		sizeof(rtt) / sizeof(rtt[0]);
	double mean = 0;
	for (uint64_t i = 0; i < m; i++)
		mean += rtt[i];
	mean = m ? mean / (double)m : 0;
	qsort(rtt, m, sizeof(rtt[0]), cmp_u32);
	printf("size=%zu window=%d msgs=%lu lost=%lu msgs_per_s=%.0f "
	       "mbit_per_s=%.2f rtt_mean_us=%.0f rtt_p50_us=%u "
	       "rtt_p99_us=%u\n", size, w, (unsigned long)n,
		(unsigned long)lost, (double)n / el,
		(double)n * (double)size * 8 / el / 1e6, mean,
		m ? rtt[m / 2] : 0, m ? rtt[m * 99 / 100] : 0);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "server"))
		return server(atoi(argv[2]));
	if ((argc == 6 || argc == 7) && !strcmp(argv[1], "client"))
		return client(atoi(argv[2]), strtoul(argv[3], NULL, 10),
			atof(argv[4]), atoi(argv[5]),
			argc == 7 ? (unsigned)atoi(argv[6]) : 0);
	fprintf(stderr, "usage: dc-bench-netecho server PORT | client PORT "
		"SIZE SECONDS WINDOW [THINK_US]\n");
	return 2;
}
