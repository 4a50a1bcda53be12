/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sysops.c -- the system calls librio's durability depends on, and those
 * the file cache makes on the files it caches, behind one table whose
 * entries tests swap to inject failures (rio_testhook.h; SQLite's
 * aSyscall[] idea)
 *
 * The file cache's calls are behind it for two reasons: the preload shim
 * (librio/fc/fs_shim.c) defines open, pwrite, ... itself and points this
 * table at the next definitions (libc's), so the cache never calls back
 * into the shim; and tests replace entries to make the disk fail (a full
 * disk during write-back, an EIO from fdatasync).
 *
 * Invariant
 *   Y1. Every system call the file cache makes on a cached file or its
 *       directory goes through rio__sys (realpath(3) and faccessat(2)
 *       excepted: the shim does not interpose them).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rio_int.h"

struct rio__sysops rio__sys = {
	.pwrite = pwrite,
	.pread = pread,
	.fdatasync = fdatasync,
	.fsync = fsync,
	.mprotect = mprotect,
	.msync = msync,
	.open = open,
	.close = close,
	.ftruncate = ftruncate,
	.fstat = fstat,
	.stat = stat,
	.lstat = lstat,
	.unlink = unlink,
	.rename = rename,
	.lseek = lseek,
};

/*
 * rio_testhook.h: swap one entry.  Plain loads and stores, as the table's
 * readers make: the caller guarantees no other thread uses the entry
 * meanwhile (the header's contract).
 */
rio_testhook_fn
rio_testhook_swap(enum rio_testhook_call which, rio_testhook_fn fn)
{
	rio_testhook_fn old;

	switch (which) {
#define RIO__SYSOPS_SWAP(NAME, name, ret, args)                        \
	case RIO_SYS_##NAME:                                            \
		old = (rio_testhook_fn)rio__sys.name;                   \
		if (fn != NULL)                                         \
			rio__sys.name = (rio_sys_##name##_fn)fn;        \
		return old;
		RIO_TESTHOOK_SYSCALLS(RIO__SYSOPS_SWAP)
#undef RIO__SYSOPS_SWAP
	case RIO_SYS_NCALLS:
		break;
	}
	return NULL;
}

/* Async-signal-safe: used by the fatal-signal safe sync. */
int
rio__pwrite_all(int fd, const void *buf, size_t n, off_t off)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t w = rio__sys.pwrite(fd, p, n, off);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (w == 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}

int
rio__pread_all(int fd, void *buf, size_t n, off_t off)
{
	char *p = buf;

	while (n > 0) {
		ssize_t r = rio__sys.pread(fd, p, n, off);
		if (r < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (r == 0)
			return -EIO; /* short file */
		p += r;
		n -= (size_t)r;
		off += r;
	}
	return 0;
}

int
rio__fsync_dir_of(const char *path)
{
	char buf[PATH_MAX];
	int fd, rc = 0;

	if (strlen(path) >= sizeof(buf))
		return -ENAMETOOLONG;
	strcpy(buf, path);
	fd = open(dirname(buf), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (rio__sys.fsync(fd) != 0 && errno != EINVAL)
		rc = -errno;
	close(fd);
	return rc;
}
