/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tick_eintr_prog.c -- a program that takes EINTR for an error, run under
 *                      dc-run --interval by tick_eintr.sh
 *
 *   dc-tick-eintr ROUNDS [thread]
 *
 * Installs no signal handler, so no call of it may end in EINTR.  Each
 * round waits 30 ms in each of epoll_wait (an empty set), poll (no
 * descriptor), nanosleep, clock_nanosleep and sigtimedwait (SIGUSR1,
 * blocked, never sent), each of which must end by its timeout: 0, or
 * EAGAIN for sigtimedwait.  Under dc-run's interval the checkpoint's
 * tick (and, for a second thread, the checkpoint's stop) comes during
 * the waits; libdc must make each call again with what is left of its
 * timeout.  thread: the rounds run in a second thread, the main one
 * waiting in pthread_join.  Prints "ok N" and exits 0; else names the
 * call and its error and exits 1.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>

#define WAIT_MS 30

static int rounds;

static void
bad(const char *call, long r)
{
	fprintf(stderr, "tick-eintr: %s returned %ld: %s\n", call, r,
		r < 0 ? strerror(errno) : "not its timeout");
	exit(1);
}

static void *
run(void *arg)
{
	(void)arg;
	int ep = epoll_create1(0);
	if (ep < 0)
		bad("epoll_create1", -1);
	sigset_t us;
	sigemptyset(&us);
	sigaddset(&us, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &us, NULL);
	const struct timespec ts = { 0, WAIT_MS * 1000000l };
	for (int i = 0; i < rounds; i++) {
		struct epoll_event ev;
		long r = epoll_wait(ep, &ev, 1, WAIT_MS);
		if (r != 0)
			bad("epoll_wait", r);
		if ((r = poll(NULL, 0, WAIT_MS)) != 0)
			bad("poll", r);
		if ((r = nanosleep(&ts, NULL)) != 0)
			bad("nanosleep", r);
		/* returns the error number itself */
		if ((r = clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, NULL)) != 0) {
			errno = (int)r;
			bad("clock_nanosleep", -1);
		}
		r = sigtimedwait(&us, NULL, &ts);
		if (r != -1 || errno != EAGAIN)
			bad("sigtimedwait", r);
	}
	return NULL;
}

int
main(int argc, char **argv)
{
	if (argc < 2 || (rounds = atoi(argv[1])) < 1) {
		fprintf(stderr, "usage: dc-tick-eintr ROUNDS [thread]\n");
		return 2;
	}
	if (argc > 2 && !strcmp(argv[2], "thread")) {
		pthread_t t;
		int e = pthread_create(&t, NULL, run, NULL);
		if (e != 0) {
			fprintf(stderr, "tick-eintr: pthread_create: %s\n",
				strerror(e));
			return 1;
		}
		pthread_join(t, NULL);
	} else {
		run(NULL);
	}
	printf("ok %d\n", rounds);
	return 0;
}
