/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * syscost.c -- the cost of one system call by kind (syscost.sh): run
 *              natively and under dc-run, trapped ($DC_DIRECT=0) or
 *              through libdc's direct path
 *
 *   dc-bench-syscost [N]
 *
 * Each kind is called N times (default 200,000) in a loop and its mean
 * wall time per call printed as "kind ns":
 *   getpid      libc's wrapper, which libdc does not wrap: always traps
 *   getrandom   16 bytes (a nonce)
 *   read        1 byte of a socket pair with a byte in it (MSG_PEEK
 *               would not be a read: the byte is written back each time,
 *               so the figure is a read plus a write)
 *   write-null  1 byte to /dev/null
 *   epoll_wait  an empty set, timeout 0
 *   poll        one descriptor with no event, timeout 0
 * Timed with CLOCK_MONOTONIC read twice a kind (a clock read is itself a
 * call under dc-run).
 */
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void
die(const char *what)
{
	perror(what);
	exit(1);
}

int
main(int argc, char **argv)
{
	long n = argc > 1 ? atol(argv[1]) : 200000;
	if (n <= 0) {
		fprintf(stderr, "usage: dc-bench-syscost [N > 0]\n");
		return 2;
	}
	int sp[2], nul = open("/dev/null", O_WRONLY), ep = epoll_create1(0);
	if (socketpair(AF_UNIX, SOCK_STREAM, 0, sp) != 0 || nul < 0 || ep < 0)
		die("setup");
	struct pollfd pf = { .fd = sp[0], .events = POLLIN };
	struct epoll_event ev;
	char b[16] = "x";
	if (write(sp[1], b, 1) != 1)
		die("write");
	for (int kind = 0; kind < 6; kind++) {
		static const char *name[] = { "getpid", "getrandom",
			"read+write", "write-null", "epoll_wait", "poll" };
		double t0 = now();
		for (long i = 0; i < n; i++) {
			long r = 0;
			switch (kind) {
			case 0: r = getpid() > 0 ? 0 : -1; break;
			case 1: r = getrandom(b, 16, 0) == 16 ? 0 : -1; break;
			case 2:
				r = read(sp[0], b, 1) == 1 &&
					write(sp[1], b, 1) == 1 ? 0 : -1;
				break;
			case 3: r = write(nul, b, 1) == 1 ? 0 : -1; break;
			case 4: r = epoll_wait(ep, &ev, 1, 0); break;
			case 5: r = poll(&pf, 1, 0) == 1 ? 0 : -1; break;
			}
			if (r != 0)
				die(name[kind]);
		}
		printf("%s %.0f\n", name[kind], (now() - t0) / (double)n);
	}
	return 0;
}
