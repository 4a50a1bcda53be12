/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tree_spawn_prog.c -- system(), popen() and posix_spawnp() in a process
 *                      tree (dc-run --tree; tests/discount tree_kill.sh)
 *
 *   dc-tree-spawn STEPS
 *
 * glibc makes each of these children with clone(CLONE_VM | CLONE_VFORK)
 * on a stack of its own, and learns the exec's error from the child's
 * write to its own stack (tree.c V1-V5).  Each step i:
 *   system("echo system i")             the shell prints its line; then
 *                                       "system i: status 0";
 *   popen("expr i \* 7", "r")           the child's output read back:
 *                                       "popen i: 7i, status 0";
 *   posix_spawnp(a missing program)     "spawnp missing i: No such file or
 *                                       directory" (the exec's ENOENT as
 *                                       posix_spawnp's return value);
 *   posix_spawnp("sh -c 'echo i >> spawned'"), waited for:
 *                                       "spawn i: status 0";
 * and the process appends "i" to the file log itself.  A failure-free
 * run's output and files are always the same.  Exit 0; 1 when a result
 * is not what it must be.
 */
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static int bad;

/* one line, one write to standard output (a visible event) */
#define say(...) \
	do { \
		if (dprintf(1, __VA_ARGS__) < 0) \
			_exit(3); \
	} while (0)

static void
expect(int ok, const char *what)
{
	if (!ok) {
		fprintf(stderr, "dc-tree-spawn: %s\n", what);
		bad = 1;
	}
}

int
main(int argc, char **argv)
{
	int steps = argc > 1 ? atoi(argv[1]) : 4;
	char cmd[128], line[128];
	for (int i = 1; i <= steps; i++) {
		snprintf(cmd, sizeof(cmd), "echo system %d", i);
		int st = system(cmd);
		say("system %d: status %d\n", i, st);
		expect(st == 0, "system: status");

		snprintf(cmd, sizeof(cmd), "expr %d \\* 7", i);
		FILE *f = popen(cmd, "r");
		expect(f != NULL, "popen failed");
		line[0] = 0;
		if (f && fgets(line, sizeof(line), f) == NULL)
			line[0] = 0;
		line[strcspn(line, "\n")] = 0;
		st = f ? pclose(f) : -1;
		say("popen %d: %s, status %d\n", i, line, st);
		expect(atoi(line) == 7 * i && st == 0, "popen: output");

		pid_t c;
		char *miss[] = { "dc-tree-spawn-no-such-program", NULL };
		int rc = posix_spawnp(&c, miss[0], NULL, NULL, miss, environ);
		say("spawnp missing %d: %s\n", i, strerror(rc));
		expect(rc == ENOENT, "posix_spawnp of a missing program");

		snprintf(cmd, sizeof(cmd), "echo %d >> spawned", i);
		char *sh[] = { "sh", "-c", cmd, NULL };
		rc = posix_spawnp(&c, "sh", NULL, NULL, sh, environ);
		st = -1;
		if (rc == 0 && waitpid(c, &st, 0) != c)
			st = -1;
		say("spawn %d: %s, status %d\n", i, rc ? strerror(rc) : "ok",
			st);
		expect(rc == 0 && st == 0, "posix_spawnp sh");

		int fd = open("log", O_WRONLY | O_CREAT | O_APPEND, 0644);
		snprintf(line, sizeof(line), "%d\n", i);
		expect(fd >= 0 && write(fd, line, strlen(line)) ==
			(ssize_t)strlen(line), "log");
		if (fd >= 0)
			close(fd);
	}
	say("done\n");
	return bad;
}
