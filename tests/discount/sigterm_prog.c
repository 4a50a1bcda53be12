/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sigterm_prog.c -- a server's way to stop: a SIGTERM handler sets a
 * flag that the loop around epoll_wait checks (sigterm.sh)
 *
 *   sigterm PIDFILE
 *
 * Prints "waiting" (under the buffered protocol: output held), writes
 * its pid to PIDFILE, waits in epoll_wait on an empty set until the
 * handler has run, prints "stopped" and exits 0.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <unistd.h>

static volatile sig_atomic_t stop;

static void
on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: sigterm PIDFILE\n");
		return 2;
	}
	struct sigaction sa = { .sa_handler = on_term };
	sigaction(SIGTERM, &sa, NULL);
	int ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		perror("epoll_create1");
		return 1;
	}
	printf("waiting\n");
	fflush(stdout);
	FILE *f = fopen(argv[1], "w");
	if (f == NULL || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f)) {
		perror(argv[1]);
		return 1;
	}
	struct epoll_event ev;
	while (!stop)
		if (epoll_wait(ep, &ev, 1, -1) < 0 && errno != EINTR) {
			perror("epoll_wait");
			return 1;
		}
	printf("stopped\n");
	return 0;
}
