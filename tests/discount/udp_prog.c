/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * udp_prog.c -- a datagram sender under the buffered protocol, killed at
 *               random (held_test.cpp, [held-udp])
 *
 *   dc-test-udp DIR PORT N INTERVAL_MS STOP REPORT [errors|echo]
 *
 * Sends datagrams 0..N-1 to 127.0.0.1:PORT, each naming its number, with
 * checkpoints every INTERVAL_MS: one in three by sendto on an unconnected
 * socket, one by sendmsg on it, one by write on a socket connected to the
 * port; one in eight pairs goes by one sendmmsg.  A pause of 1 ms every
 * 8 datagrams keeps the receiver ahead.  A run resumed from a checkpoint
 * that finds the file STOP writes the number of datagrams it had sent at
 * the checkpoint to REPORT, takes a checkpoint (which sends what was
 * held) and waits to be killed (held_prog.c's report).  "errors": three
 * sends the kernel would refuse, each refused at the call with its
 * errno (no destination, too large, ancillary data), instead.  "echo":
 * "hello" to PORT, then every datagram received sent back to its
 * sender, until "quit": held datagrams must go out while the program
 * waits for input.
 *
 * Exit: 0 done, 1 dc_init failed, 2 bad arguments or a failed call, 3 a
 * refusal not as expected.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <dc.h>

#include "held_report.h"

static void
fill(unsigned char *b, uint64_t i)
{
	memcpy(b, &i, sizeof(i));
	for (int j = 8; j < 64; j++)
		b[j] = (unsigned char)(i * 7 + (uint64_t)j);
}

int
main(int argc, char **argv)
{
	if (argc < 7)
		return 2;
	struct dc_opts o = { .dir = argv[1], .protocol = DC_BUFFERED,
		.interval_ms = (unsigned)atoi(argv[4]) };
	int rc = dc_init(&o);
	if (rc) {
		fprintf(stderr, "dc_init: %s: %s\n", dc_strerror(rc),
			dc_errormsg());
		return 1;
	}
	struct sockaddr_in to = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)atoi(argv[2])),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int u = socket(AF_INET, SOCK_DGRAM, 0);
	int c = socket(AF_INET, SOCK_DGRAM, 0);
	if (u < 0 || c < 0 ||
	    connect(c, (struct sockaddr *)&to, sizeof(to)) != 0) {
		perror("socket");
		return 2;
	}
	if (argc > 7 && !strcmp(argv[7], "echo")) {
		/* a datagram held, then a wait for input: the answer to
		 * each datagram received, until "quit" */
		if (sendto(u, "hello", 5, 0, (struct sockaddr *)&to,
			    sizeof(to)) != 5)
			return 2;
		for (;;) {
			char m[64];
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			ssize_t k = recvfrom(u, m, sizeof(m), 0,
				(struct sockaddr *)&from, &fl);
			if (k == 4 && !memcmp(m, "quit", 4))
				return 0;
			if (k < 0 || sendto(u, m, (size_t)k, 0,
				(struct sockaddr *)&from, fl) != k)
				return 2;
		}
	}
	if (argc > 7 && !strcmp(argv[7], "errors")) {
		/* what the kernel would refuse is refused at the call */
		static char big[70000];
		int z = socket(AF_INET, SOCK_DGRAM, 0);
		ssize_t r1 = write(z, big, 8);
		int e1 = errno;
		ssize_t r2 = sendto(u, big, sizeof(big), 0,
			(struct sockaddr *)&to, sizeof(to));
		int e2 = errno;
		char cbuf[CMSG_SPACE(sizeof(int))] = { 0 };
		struct iovec v = { big, 8 };
		struct msghdr h = { .msg_name = &to, .msg_namelen = sizeof(to),
			.msg_iov = &v, .msg_iovlen = 1, .msg_control = cbuf,
			.msg_controllen = sizeof(cbuf) };
		struct cmsghdr *cm = CMSG_FIRSTHDR(&h);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &z, sizeof(int));
		ssize_t r3 = sendmsg(u, &h, 0);
		int e3 = errno;
		printf("errors: %zd %s; %zd %s; %zd %s\n", r1, strerror(e1), r2,
			strerror(e2), r3, strerror(e3));
		return r1 == -1 && e1 == EDESTADDRREQ && r2 == -1 &&
			e2 == EMSGSIZE && r3 == -1 && e3 == EOPNOTSUPP ? 0 : 3;
	}
	uint64_t n = strtoull(argv[3], NULL, 10);
	if (access(argv[5], F_OK) == 0)
		report(argv[6], argv[5], 0);
	unsigned char b[2][64];
	for (uint64_t i = 0; i < n; i++) {
		if (dc_recovered() && access(argv[5], F_OK) == 0)
			report(argv[6], argv[5], i);
		fill(b[0], i);
		ssize_t r;
		if (i % 8 == 5 && i + 1 < n) {
			fill(b[1], i + 1);
			struct iovec v[2] = { { b[0], 64 }, { b[1], 64 } };
			struct mmsghdr mm[2] = {
				{ .msg_hdr = { .msg_name = &to,
					.msg_namelen = sizeof(to),
					.msg_iov = &v[0], .msg_iovlen = 1 } },
				{ .msg_hdr = { .msg_name = &to,
					.msg_namelen = sizeof(to),
					.msg_iov = &v[1], .msg_iovlen = 1 } } };
			r = sendmmsg(u, mm, 2, 0) == 2 && mm[0].msg_len == 64 &&
				mm[1].msg_len == 64 ? 64 : -1;
			i++;
		} else if (i % 3 == 0) {
			r = sendto(u, b[0], 64, 0, (struct sockaddr *)&to,
				sizeof(to));
		} else if (i % 3 == 1) {
			struct iovec v[2] = { { b[0], 20 }, { b[0] + 20, 44 } };
			struct msghdr h = { .msg_name = &to,
				.msg_namelen = sizeof(to), .msg_iov = v,
				.msg_iovlen = 2 };
			r = sendmsg(u, &h, 0);
		} else {
			r = write(c, b[0], 64);
		}
		if (r != 64) {
			printf("datagram %lu: %zd\n", (unsigned long)i, r);
			return 2;
		}
		if (i % 8 == 7) {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
	}
	return 0;
}
