/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tree_bad_prog.c -- what a tree under dc-run --tree refuses
 * (tests/discount tree_refuse.sh)
 *
 *   dc-tree-bad thread   pthread_create: refused (a thread shares memory)
 *   dc-tree-bad many     forks children that wait on a pipe until a fork
 *                        fails: the tree holds 64 processes at most
 *   dc-tree-bad odirect  pipe2(O_DIRECT): refused (a packet pipe)
 *   dc-tree-bad errno    a child computes with errno = 0 while its parent's
 *                        writes make rounds of the tree (each one libdc's
 *                        signal in the child): errno must stay 0
 *   dc-tree-bad static P an execve of P (a static program): refused
 *   dc-tree-bad sharevm  clone(CLONE_VM) without CLONE_VFORK (a process
 *                        sharing its parent's memory, which goes on):
 *                        refused, the call fails
 *
 * Prints one line saying what happened; exit 0 when the refusal came as
 * expected (an error code, the program going on), 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void *
run(void *arg)
{
	return arg;
}

static int
run_int(void *arg)
{
	(void)arg;
	return 0;
}

int
main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "";
	if (!strcmp(mode, "thread")) {
		pthread_t t;
		int rc = pthread_create(&t, NULL, run, NULL);
		printf("thread: %s\n", rc ? strerror(rc) : "created");
		return rc ? 0 : 1;
	}
	if (!strcmp(mode, "odirect")) {
		int p[2];
		int rc = pipe2(p, O_DIRECT);
		printf("pipe2 O_DIRECT: %s\n", rc ? strerror(errno) : "made");
		return rc ? 0 : 1;
	}
	if (!strcmp(mode, "many")) {
		int gate[2];
		if (pipe(gate) != 0)
			return 1;
		int n = 0, err = 0;
		for (;;) {
			pid_t c = fork();
			if (c == 0) {
				char b;
				close(gate[1]);
				_exit(read(gate[0], &b, 1) == 0 ? 0 : 2);
			}
			if (c < 0) {
				err = errno;
				break;
			}
			if (++n > 200)
				break;
		}
		close(gate[1]);
		int ok = 0, st;
		while (wait(&st) > 0)
			ok += WIFEXITED(st) && WEXITSTATUS(st) == 0;
		printf("forked %d children (%d ended well), then: %s\n", n, ok,
			err ? strerror(err) : "no failure");
		return err == EAGAIN && ok == n ? 0 : 1;
	}
	if (!strcmp(mode, "errno")) {
		pid_t c = fork();
		if (c == 0) {
			volatile int *e = &errno;
			volatile unsigned long x = 0;
			int seen = 0;
			*e = 0;
			/* 3 s of computing, time enough for several of the
			 * parent's rounds to reach this process however
			 * loaded the machine (clock_gettime fails for no
			 * reason, so it leaves errno alone) */
			struct timespec t0, t;
			clock_gettime(CLOCK_MONOTONIC, &t0);
			for (unsigned long i = 0; !seen; i++) {
				x += i;
				seen = *e;
				if ((i & 0xfffff) == 0) {
					clock_gettime(CLOCK_MONOTONIC, &t);
					if (t.tv_sec - t0.tv_sec >= 3)
						break;
				}
			}
			printf("child: errno %s%s\n", seen ? "changed to " :
				"kept", seen ? strerror(seen) : "");
			return seen != 0;
		}
		for (int i = 0; i < 30 && waitpid(c, NULL, WNOHANG) == 0; i++) {
			printf("parent: line %d\n", i);
			fflush(stdout);
			usleep(10000);
		}
		int st;
		waitpid(c, &st, 0);
		return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
	}
	if (!strcmp(mode, "sharevm")) {
		static char stack[64 << 10] __attribute__((aligned(16)));
		int c = clone(run_int, stack + sizeof(stack),
			CLONE_VM | SIGCHLD, NULL);
		printf("clone CLONE_VM: %s\n", c < 0 ? strerror(errno) :
			"made");
		if (c > 0)
			waitpid(c, NULL, 0);
		return c < 0 ? 0 : 1;
	}
	if (!strcmp(mode, "static") && argc > 2) {
		execv(argv[2], argv + 2);
		printf("execve %s: %s\n", argv[2], strerror(errno));
		return errno == EPERM ? 0 : 1;
	}
	fprintf(stderr, "usage: %s thread|many|odirect|errno|sharevm|static P\n",
		argv[0]);
	return 2;
}
