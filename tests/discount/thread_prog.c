/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * thread_prog.c -- worker threads updating shared state under a mutex,
 *                  with held output, killed at random (thread_kill.sh)
 *
 *   dc-test-thread THREADS N [SLEEP_EVERY]
 *
 * THREADS workers (pthread_create) each make N updates.  An update, under
 * one mutex: the next sequence number k, a hash chained over every
 * update before it, h(k) = (h(k-1) * 31 + t * 100003 + i) mod 1000000007,
 * the worker's own count, and one line written to standard output,
 * "k t i h", inside the critical section -- so the lines are in k order
 * and a checker recomputes the chain (thread_check.awk).  Every
 * SLEEP_EVERY updates (default 64) a worker sleeps 200 us outside the
 * lock, so rounds find threads in nanosleep, on the mutex's futex, and
 * in program code.  The main thread waits in pthread_join.
 *
 * At its end each worker checks that gettid() still answers the id it
 * had at its start, and the main thread that every worker made N updates
 * and that the memory's chain is the last one printed; then it prints
 * "done THREADS*N h".
 *
 * Exit: 0 done, 2 bad arguments, 3 a check failed (said on stderr).
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAXT 8

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static uint64_t seq, chain;
static unsigned long count[MAXT];
static long nper, sleep_every = 64;

static void
fail(const char *what, long t)
{
	fprintf(stderr, "check failed: %s (thread %ld)\n", what, t);
	exit(3);
}

static void *
worker(void *arg)
{
	long t = (long)(intptr_t)arg;
	long tid = syscall(SYS_gettid);
	char line[96];
	for (long i = 0; i < nper; i++) {
		pthread_mutex_lock(&mu);
		if (count[t] != (unsigned long)i)
			fail("an update made twice or lost", t);
		uint64_t k = seq++;
		chain = (chain * 31 + (uint64_t)t * 100003 + (uint64_t)i) %
			1000000007ull;
		count[t]++;
		int n = snprintf(line, sizeof(line), "%lu %ld %ld %lu\n",
			(unsigned long)k, t, i, (unsigned long)chain);
		if (write(1, line, (size_t)n) != n)
			fail("write", t);
		pthread_mutex_unlock(&mu);
		if (sleep_every > 0 && i % sleep_every == sleep_every - 1) {
			struct timespec ts = { 0, 200000 };
			nanosleep(&ts, NULL);
		}
	}
	if (syscall(SYS_gettid) != tid)
		fail("gettid changed", t);
	return (void *)(intptr_t)(t + 1);
}

int
main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	long nt = atol(argv[1]);
	nper = atol(argv[2]);
	if (argc > 3)
		sleep_every = atol(argv[3]);
	if (nt < 1 || nt > MAXT || nper < 1)
		return 2;
	pthread_t th[MAXT];
	for (long t = 0; t < nt; t++)
		if (pthread_create(&th[t], NULL, worker, (void *)(intptr_t)t))
			fail("pthread_create", t);
	for (long t = 0; t < nt; t++) {
		void *r;
		if (pthread_join(th[t], &r) || r != (void *)(intptr_t)(t + 1))
			fail("pthread_join", t);
	}
	for (long t = 0; t < nt; t++)
		if (count[t] != (unsigned long)nper)
			fail("updates missing", t);
	printf("done %lu %lu\n", (unsigned long)seq, (unsigned long)chain);
	return 0;
}
