/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tid_prog.c -- thread ids across a recovery (thread.c invariant 3), run
 *               by tid_reserve.sh under dc-run --protocol periodic
 *
 *   dc-tid DIR
 *
 * First run: makes thread A (it sleeps until told to end) and keeps the
 * id A's gettid answers, writes that id to DIR/armed and waits for
 * DIR/go -- the script SIGKILLs it there, once a checkpoint holds A.
 * The recovered run, in a pid namespace of its own, waits there too;
 * the script sets the namespace's last pid to A's id minus one and
 * makes DIR/go, so the next thread the program makes, B, gets from the
 * kernel the very id A had in its first run.  B's gettid must differ
 * from A's and from the process's, and a signal sent to B with
 * pthread_kill must run its handler in B (not in A).  Prints "ok" and
 * exits 0; exit 1 with what went wrong; 3 when B's kernel id was not
 * A's first one (the case was not made).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_int a_tid, b_tid, got_tid, stop_a, b_real;
static const char *dir;

static void
nap(long ms)
{
	struct timespec t = { ms / 1000, (ms % 1000) * 1000000l };
	while (nanosleep(&t, &t) != 0 && errno == EINTR)
		;
}

static void
on_usr1(int sig)
{
	(void)sig;
	got_tid = gettid();
}

static void *
thread_a(void *arg)
{
	(void)arg;
	a_tid = gettid();
	while (!stop_a)
		nap(1);
	return NULL;
}

static void *
thread_b(void *arg)
{
	(void)arg;
	char l[64];
	ssize_t n = readlink("/proc/thread-self", l, sizeof(l) - 1);
	if (n > 0) {
		l[n] = '\0';
		const char *t = strrchr(l, '/');
		b_real = t ? atoi(t + 1) : 0;
	}
	b_tid = gettid();
	for (int i = 0; i < 2000 && got_tid == 0; i++)
		nap(1);
	return NULL;
}

static bool
exists(const char *name)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/%s", dir, name);
	return access(p, F_OK) == 0;
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: dc-tid DIR\n");
		return 2;
	}
	dir = argv[1];
	signal(SIGUSR1, on_usr1);
	pthread_t a, b;
	if (pthread_create(&a, NULL, thread_a, NULL) != 0)
		return 1;
	while (a_tid == 0)
		nap(1);
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/armed", dir);
	int fd = open(p, O_WRONLY | O_CREAT, 0644);
	if (fd < 0 || dprintf(fd, "%d\n", a_tid) < 0)
		return 1;
	close(fd);
	while (!exists("go"))
		nap(2);
	/* recovered: the kernel's next id is A's first one */
	if (pthread_create(&b, NULL, thread_b, NULL) != 0)
		return 1;
	while (b_tid == 0)
		nap(1);
	pthread_kill(b, SIGUSR1);
	pthread_join(b, NULL);
	stop_a = 1;
	pthread_join(a, NULL);
	printf("tid: process %d, A %d, B %d (its kernel id %d), SIGUSR1 "
		"for B ran in %d\n", getpid(), a_tid, b_tid, b_real, got_tid);
	if (b_real != a_tid) {
		fprintf(stderr, "tid: B's kernel id is not A's first id: the "
			"case was not made\n");
		return 3;
	}
	if (b_tid == a_tid || b_tid == getpid()) {
		fprintf(stderr, "tid: B has the id of %s\n", b_tid == a_tid ?
			"the recovered thread A" : "the process");
		return 1;
	}
	if (got_tid != b_tid) {
		fprintf(stderr, "tid: B's signal ran in thread %d\n", got_tid);
		return 1;
	}
	printf("ok\n");
	return 0;
}
