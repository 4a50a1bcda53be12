/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_crash_writer.c -- the crash test's writer as an ordinary program:
 * plain open/pwrite/ftruncate/fsync/unlink/rename on the cached directory, run
 * under librio-fs.so and killed with SIGKILL at a random point.
 *
 *   fc_crash_writer DIR SEED FIRST_OP ACK_FD
 *
 * Performs operations FIRST_OP, FIRST_OP+1, ... (fc_crash_ops.h) forever,
 * writing the number of each to ACK_FD once it has returned.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fc_crash_ops.h"

static void
die(const char *what, int file)
{
	fprintf(stderr, "fc_crash_writer: %s file %d: errno %d\n", what, file,
		errno);
	exit(3);
}

int
main(int argc, char **argv)
{
	static unsigned char buf[FCX_SAVE_MAX];
	int fds[FCX_FILES];
	char path[FCX_FILES][PATH_MAX];
	char tmp[PATH_MAX];
	uint64_t seed, k;
	int ack;

	if (argc != 5) {
		fprintf(stderr, "usage: fc_crash_writer DIR SEED FIRST ACKFD\n");
		return 2;
	}
	seed = strtoull(argv[2], NULL, 0);
	k = strtoull(argv[3], NULL, 0);
	ack = atoi(argv[4]);
	for (int i = 0; i < FCX_FILES; i++) {
		snprintf(path[i], PATH_MAX, "%s/f%d", argv[1], i);
		fds[i] = -1;
	}
	snprintf(tmp, PATH_MAX, "%s/" FCX_SUBDIR, argv[1]);
	if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
		die("mkdir", -1);
	for (;; k++) {
		struct fcx_op op;
		int *fd;

		fcx_op(seed, k, &op);
		fd = &fds[op.file];
		if (op.kind == FCX_SAVE) {
			/* Rename over the target while it is open here. */
			int t;
			fcx_tmp_name(&op, tmp, sizeof(tmp), argv[1]);
			fcx_data(seed, k, buf, op.len);
			t = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
			if (t < 0)
				die("open tmp", op.file);
			if (write(t, buf, op.len) != (ssize_t)op.len)
				die("write tmp", op.file);
			if (fsync(t) != 0 || close(t) != 0)
				die("fsync tmp", op.file);
			if (rename(tmp, path[op.file]) != 0)
				die("rename", op.file);
			if (*fd >= 0)
				close(*fd);
			*fd = -1;
		} else if (op.kind == FCX_UNLINK) {
			if (*fd >= 0)
				close(*fd);
			*fd = -1;
			if (unlink(path[op.file]) != 0 && errno != ENOENT)
				die("unlink", op.file);
		} else {
			if (*fd < 0 &&
			    (*fd = open(path[op.file], O_RDWR | O_CREAT, 0644)) < 0)
				die("open", op.file);
			if (op.kind == FCX_WRITE) {
				fcx_data(seed, k, buf, op.len);
				if (pwrite(*fd, buf, op.len, (off_t)op.off) !=
				    (ssize_t)op.len)
					die("pwrite", op.file);
			} else if (op.kind == FCX_TRUNC) {
				if (ftruncate(*fd, (off_t)op.size) != 0)
					die("ftruncate", op.file);
			} else if (fsync(*fd) != 0) {
				die("fsync", op.file);
			}
		}
		if (write(ack, &k, sizeof(k)) != sizeof(k))
			return 4;
	}
}
