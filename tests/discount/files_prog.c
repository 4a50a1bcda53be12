/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * files_prog.c -- a linked program whose file changes of one interval must
 *                 be undone by recovery (unit_test.cpp, [files])
 *
 *   dc-test-files DIR WORKDIR
 *
 * Creates seven files (one deleted while it stays open), takes a
 * checkpoint, then changes them in every way libdc undoes (create a new
 * file, overwrite, extend, truncate, unlink, rename, rename over a file,
 * O_TRUNC, a journal created and deleted twice) and kills itself.  Run again, it is
 * resumed at the checkpoint and prints the directory: it must be exactly
 * as at the checkpoint.  Built against the crash-point build of libdc, so
 * DC_CRASH_AT can also kill it inside a commit.
 *
 * Invariants: the listing is printed only by a resumed run ("resumed"
 * first), sorted by name, one "name=content" line per file.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dc.h>

#include "prog_util.h"

static void
put(const char *name, const char *s, int flags)
{
	int fd = open(name, O_WRONLY | O_CREAT | flags, 0644);
	if (fd < 0 || write(fd, s, strlen(s)) != (ssize_t)strlen(s)) {
		perror(name);
		exit(2);
	}
	close(fd);
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static void
list(void)
{
	char *names[64];
	int n = 0;
	DIR *d = opendir(".");
	struct dirent *e;
	while (d && (e = readdir(d)) != NULL && n < 64)
		if (e->d_name[0] != '.')
			names[n++] = strdup(e->d_name);
	if (d)
		closedir(d);
	qsort(names, (size_t)n, sizeof(names[0]), by_name);
	for (int i = 0; i < n; i++) {
		char buf[256] = "";
		int fd = open(names[i], O_RDONLY);
		ssize_t k = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
		buf[k > 0 ? k : 0] = '\0';
		if (fd >= 0)
			close(fd);
		printf("%s=%s|\n", names[i], buf);
	}
}

int
main(int argc, char **argv)
{
	dc_test_start(argc, argv);
	if (chdir(argv[2]) != 0)
		return 2;
	put("keep", "original", O_TRUNC);
	put("grow", "abc", O_TRUNC);
	put("shrink", "0123456789", O_TRUNC);
	put("gone", "still here", O_TRUNC);
	put("moved", "m", O_TRUNC);
	put("emptied", "full", O_TRUNC);
	put("victim", "v", O_TRUNC);
	/* deleted while open: a delayed deletion the checkpoint holds, the
	 * file reopened by its hidden name at recovery */
	int held = open("held", O_RDWR | O_CREAT | O_TRUNC, 0644);
	if (held < 0 || write(held, "h", 1) != 1 || unlink("held") != 0)
		return 2;
	int rc = dc_checkpoint();
	if (rc < 0)
		return 1;
	if (rc == 1) {
		char h[4] = "";
		if (pread(held, h, sizeof(h) - 1, 0) != 1)
			return 4;
		printf("resumed (held %s)\n", h);
		list();
		close(held);
		return 0;
	}
	/* the interval that recovery must undo */
	put("new", "created", O_EXCL);
	int fd = open("keep", O_WRONLY);
	if (fd < 0 || pwrite(fd, "XY", 2, 3) != 2)
		return 2;
	close(fd);
	put("grow", "defgh", O_APPEND);
	if (truncate("shrink", 3) != 0 || unlink("gone") != 0 ||
	    rename("moved", "renamed") != 0)
		return 2;
	put("emptied", "", O_TRUNC);
	put("new", " and extended", O_APPEND);
	/* a rollback journal twice over: created, written, its header
	 * rewritten, deleted (the undo brings it back, then removes it) */
	for (int i = 0; i < 2; i++) {
		put("journal", "header+pages", O_TRUNC);
		fd = open("journal", O_WRONLY);
		if (fd < 0 || pwrite(fd, "HEADER", 6, 0) != 6)
			return 2;
		close(fd);
		if (unlink("journal") != 0)
			return 2;
	}
	/* a rename into a name freed by an earlier rename, and one over an
	 * existing file */
	put("src", "s", O_EXCL);
	if (rename("keep", "moved") != 0 || rename("src", "victim") != 0)
		return 2;
	kill(getpid(), SIGKILL);
	return 3;
}
