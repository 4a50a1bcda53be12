/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tree_prog.c -- a process tree for dc-run --tree (tests/discount
 *                tree_kill.sh)
 *
 *   dc-tree-prog ROUNDS [PAUSE_MS]
 *
 * Each round the parent makes two pipes and forks a child; it writes two
 * numbers down at once (the second stays unread in the pipe while the
 * child prints the first: a commit of the tree then holds it), closes
 * its end, and waits for the answer and the child's exit.  With
 * PAUSE_MS, each child waits PAUSE_MS / 3 before its first read (a
 * commit of its parent's comes first) and PAUSE_MS after printing
 * the first number (a moment for a test to kill it there).  Every other
 * round the child forks a grandchild that answers over a third pipe.
 * Each process prints what it received, in an order the pipes fix, so a
 * failure-free run's output is always the same.  Exit 0; 1 when an
 * answer or an exit status is not what it must be.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int pause_ms;

static void
say(const char *fmt, ...)
{
	char b[256];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(b, sizeof(b), fmt, ap);
	va_end(ap);
	if (write(1, b, (size_t)n) != n)
		_exit(3);
}

static void
put(int fd, long v)
{
	if (write(fd, &v, sizeof(v)) != (ssize_t)sizeof(v))
		_exit(4);
}

/* The next number, or -1 at the end of the pipe. */
static long
get(int fd)
{
	long v;
	size_t got = 0;
	while (got < sizeof(v)) {
		ssize_t r = read(fd, (char *)&v + got, sizeof(v) - got);
		if (r == 0 && got == 0)
			return -1;
		if (r <= 0)
			_exit(5);
		got += (size_t)r;
	}
	return v;
}

static int
child(int i, int down, int up)
{
	if (pause_ms)
		usleep((useconds_t)pause_ms * 1000 / 3);
	long x = get(down);
	say("child %d got %ld\n", i, x);
	if (pause_ms)
		usleep((useconds_t)pause_ms * 1000);
	long y = get(down);
	say("child %d got %ld\n", i, y);
	if (get(down) != -1)
		_exit(6);
	long sum = x + y;
	if (i % 2) {
		int g[2];
		if (pipe(g) != 0)
			_exit(7);
		pid_t gc = fork();
		if (gc < 0)
			_exit(8);
		if (gc == 0) {
			close(g[0]);
			say("grandchild %d works\n", i);
			put(g[1], x * y);
			_exit(9);
		}
		close(g[1]);
		long v = get(g[0]);
		int st;
		if (waitpid(gc, &st, 0) != gc || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != 9 || v != x * y)
			_exit(10);
		say("child %d: grandchild said %ld\n", i, v);
		sum += v;
	}
	put(up, sum);
	return i % 5 + 1;
}

int
main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 10;
	pause_ms = argc > 2 ? atoi(argv[2]) : 0;
	for (int i = 0; i < rounds; i++) {
		int down[2], up[2];
		if (pipe(down) != 0 || pipe(up) != 0) {
			perror("pipe");
			return 1;
		}
		pid_t c = fork();
		if (c < 0) {
			perror("fork");
			return 1;
		}
		if (c == 0) {
			close(down[1]);
			close(up[0]);
			_exit(child(i, down[0], up[1]));
		}
		close(down[0]);
		close(up[1]);
		long x = i, y = 3L * i + 1;
		say("parent %d sends %ld %ld\n", i, x, y);
		put(down[1], x);
		put(down[1], y);
		close(down[1]);
		long r = get(up[0]);
		long want = x + y + (i % 2 ? x * y : 0);
		if (get(up[0]) != -1 || r != want) {
			say("parent %d: answer %ld, want %ld\n", i, r, want);
			return 1;
		}
		close(up[0]);
		say("parent %d got %ld\n", i, r);
		int st;
		if (waitpid(c, &st, 0) != c || !WIFEXITED(st) ||
		    WEXITSTATUS(st) != i % 5 + 1) {
			say("parent %d: child status %x\n", i, st);
			return 1;
		}
		say("parent %d: child exited %d\n", i, WEXITSTATUS(st));
	}
	say("done\n");
	return 0;
}
