/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * io.c -- the one place where the RVM baseline touches its files
 *
 * Design:
 *  1. Every open, read, write, sync, extend, close and unlink of the log
 *     and the data files goes through the table rvm__io (rvm_io.h).  The
 *     default is POSIX; the crash test installs a table that models what
 *     a power failure keeps (only what was fdatasync'd), and RVM-Rio
 *     (bench/tpcb_tpcc/backend_rvm.c) one that calls the Rio file cache.
 *  2. rvm_set_io() swaps tables only while RVM is not initialized: a
 *     descriptor belongs to the table that opened it.
 *  3. rvm__read_full/rvm__write_full retry short transfers and EINTR, so
 *     callers see all-or-error.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rvm_int.h"

static int
posix_open(const char *path, int flags, mode_t mode)
{
	int fd = open(path, flags | O_CLOEXEC, mode);
	return fd < 0 ? -errno : fd;
}

static off_t
posix_size(int fd)
{
	struct stat st;
	return fstat(fd, &st) ? -errno : st.st_size;
}

static int
posix_ftruncate(int fd, off_t len)
{
	return ftruncate(fd, len) ? -errno : 0;
}

static int
posix_fdatasync(int fd)
{
	return fdatasync(fd) ? -errno : 0;
}

static int
posix_close(int fd)
{
	return close(fd) ? -errno : 0;
}

static int
posix_unlink(const char *path)
{
	return unlink(path) ? -errno : 0;
}

const struct rvm_io_ops rvm_io_posix = {
	.open = posix_open,
	.pread = pread,
	.pwrite = pwrite,
	.fdatasync = posix_fdatasync,
	.ftruncate = posix_ftruncate,
	.size = posix_size,
	.close = posix_close,
	.unlink = posix_unlink,
};

const struct rvm_io_ops *rvm__io = &rvm_io_posix;

rvm_return_t
rvm_set_io(const struct rvm_io_ops *ops)
{
	struct rvm__state *g = &rvm__g;
	pthread_mutex_lock(&g->lock);
	bool busy = g->initialized;
	if (!busy)
		rvm__io = ops != NULL ? ops : &rvm_io_posix;
	pthread_mutex_unlock(&g->lock);
	return busy ? rvm__err(RVM_EINIT, "rvm_set_io: RVM is initialized; "
		"call it before rvm_initialize or after rvm_terminate") :
		RVM_SUCCESS;
}

/* Transfer all len bytes, retrying short transfers and EINTR. */
static int
xfer(int fd, void *buf, size_t len, uint64_t off, bool write)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = write ? rvm__io->pwrite(fd, p, len, (off_t)off) :
			rvm__io->pread(fd, p, len, (off_t)off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO; /* file shorter than its format says */
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int
rvm__read_full(int fd, void *buf, size_t len, uint64_t off)
{
	return xfer(fd, buf, len, off, false);
}

int
rvm__write_full(int fd, const void *buf, size_t len, uint64_t off)
{
	return xfer(fd, (void *)buf, len, off, true);
}

int
rvm__sync(int fd)
{
	rvm__g.stats.n_syncs++;
	return rvm__io->fdatasync(fd);
}
