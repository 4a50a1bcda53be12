/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_save_loop.c -- the safe-save pattern, many times, as an ordinary
 * program run under librio-fs.so by fs_shim_test.cpp:
 *
 *   fc_save_loop DIR N
 *
 * Save i writes a temporary file (beside the target, or in DIR/sub for a
 * rename across directories), fsyncs and closes it, and renames it over
 * DIR/target -- every third time while a descriptor of the target is
 * open, which must go on reading the old contents.  The target is checked
 * after each save.  Exits 0 if every check passed.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void
die(const char *what, long i)
{
	fprintf(stderr, "fc_save_loop: save %ld: %s: errno %d %s\n", i, what,
		errno, strerror(errno));
	exit(1);
}

static size_t
content(long i, char *buf, size_t cap)
{
	size_t n = (size_t)(i * 7919 % 9000) + 1;

	if (n > cap)
		n = cap;
	for (size_t k = 0; k < n; k++)
		buf[k] = (char)('a' + (i + (long)k) % 26);
	return n;
}

int
main(int argc, char **argv)
{
	static char want[9100], got[9200], old[9200];
	char target[PATH_MAX], tmp[2][PATH_MAX];
	long n;

	if (argc != 3) {
		fprintf(stderr, "usage: fc_save_loop DIR N\n");
		return 2;
	}
	n = atol(argv[2]);
	snprintf(target, sizeof(target), "%s/target", argv[1]);
	snprintf(tmp[0], sizeof(tmp[0]), "%s/target.tmp", argv[1]);
	snprintf(tmp[1], sizeof(tmp[1]), "%s/sub", argv[1]);
	if (mkdir(tmp[1], 0755) != 0 && errno != EEXIST)
		die("mkdir", 0);
	snprintf(tmp[1], sizeof(tmp[1]), "%s/sub/target.tmp", argv[1]);
	for (long i = 1; i <= n; i++) {
		const char *t = tmp[i % 2];
		size_t len = content(i, want, sizeof(want)), oldlen = 0;
		int fd, keep = -1;
		ssize_t r;

		if (i % 3 == 0) {
			keep = open(target, O_RDONLY);
			if (keep < 0 && i > 1)
				die("open target", i);
			oldlen = content(i - 1, old, sizeof(old));
		}
		fd = open(t, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0)
			die("open tmp", i);
		if (write(fd, want, len) != (ssize_t)len)
			die("write tmp", i);
		if (fsync(fd) != 0)
			die("fsync tmp", i);
		if (close(fd) != 0)
			die("close tmp", i);
		if (rename(t, target) != 0)
			die("rename", i);
		if (keep >= 0) {
			/* The replaced file, still open. */
			r = pread(keep, got, sizeof(got), 0);
			if (r != (ssize_t)oldlen || memcmp(got, old, oldlen) != 0)
				die("read the replaced file", i);
			close(keep);
		}
		fd = open(target, O_RDONLY);
		if (fd < 0)
			die("open target after rename", i);
		r = read(fd, got, sizeof(got));
		if (r != (ssize_t)len || memcmp(got, want, len) != 0)
			die("target contents", i);
		close(fd);
	}
	printf("%ld saves\n", n);
	return 0;
}
