/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tree_bad_prog.c -- what a tree under dc-run --tree refuses
 * (tests/discount tree_refuse.sh)
 *
 *   dc-tree-bad thread   pthread_create: refused (a thread shares memory)
 *   dc-tree-bad many     forks children that wait on a pipe until a fork
 *                        fails: the tree holds 64 processes at most
 *   dc-tree-bad odirect  pipe2(O_DIRECT): refused (a packet pipe)
 *
 * Prints one line saying what happened; exit 0 when the refusal came as
 * expected (an error code, the program going on), 1 otherwise.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *
run(void *arg)
{
	return arg;
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
	fprintf(stderr, "usage: %s thread|many|odirect\n", argv[0]);
	return 2;
}
