/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fs_shim_stat.c -- librio-fs.so: stat and its forms: the size of a cached
 * file is the cache's
 */
#include "fs_shim_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/sysmacros.h>

/* ---- stat: the size of a cached file is the cache's ---- */

static void
patch_size(struct stat *st)
{
	uint64_t size;

	/* Relaxed: an early test only; the cache is used under
	 * rio__fs_cache_lock below. */
	if (rio__fs_forked || !S_ISREG(st->st_mode) ||
	    __atomic_load_n(&rio__fs_cache, __ATOMIC_RELAXED) == NULL)
		return;
	pthread_rwlock_rdlock(&rio__fs_cache_lock);
	if (rio__fs_cache != NULL &&
	    rio__fc_size_by_id(rio__fs_cache, (uint64_t)st->st_dev,
		    (uint64_t)st->st_ino, &size)) {
		st->st_size = (off_t)size;
		st->st_blocks = (blkcnt_t)((size + 511) / 512);
	}
	pthread_rwlock_unlock(&rio__fs_cache_lock);
}

static int
do_fstat(int fd, struct stat *st)
{
	struct ofd *o;
	int r;

	REAL(fstat);
	r = rio__fs_real.fstat(fd, st);
	if (r != 0)
		return r;
	o = rio__fs_ofd_get(fd);
	if (o != NULL) {
		if (o->kind == OFD_FILE) {
			uint64_t size = rio__fs_file_size(o);
			st->st_size = (off_t)size;
			st->st_blocks = (blkcnt_t)((size + 511) / 512);
		}
		rio__fs_ofd_put();
	}
	return 0;
}

SHIM_EXPORT int
fstat(int fd, struct stat *st)
{
	return do_fstat(fd, st);
}

SHIM_EXPORT int
fstat64(int fd, struct stat64 *st)
{
	return do_fstat(fd, ST(st));
}

static int
do_statat(int dirfd, const char *path, struct stat *st, int flags)
{
	int r;

	REAL(fstatat);
	if (path != NULL && path[0] == '\0' && (flags & AT_EMPTY_PATH))
		return do_fstat(dirfd, st);
	r = rio__fs_real.fstatat(dirfd, path, st, flags);
	if (r == 0 && rio__fs_depth == 0)
		patch_size(st);
	return r;
}

SHIM_EXPORT int
stat(const char *path, struct stat *st)
{
	return do_statat(AT_FDCWD, path, st, 0);
}

SHIM_EXPORT int
stat64(const char *path, struct stat64 *st)
{
	return do_statat(AT_FDCWD, path, ST(st), 0);
}

SHIM_EXPORT int
lstat(const char *path, struct stat *st)
{
	return do_statat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

SHIM_EXPORT int
lstat64(const char *path, struct stat64 *st)
{
	return do_statat(AT_FDCWD, path, ST(st), AT_SYMLINK_NOFOLLOW);
}

SHIM_EXPORT int
fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	return do_statat(dirfd, path, st, flags);
}

SHIM_EXPORT int
fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	return do_statat(dirfd, path, ST(st), flags);
}

/* The pre-2.33 glibc entry points, still called by older binaries. */
SHIM_EXPORT int
__fxstat(int ver, int fd, struct stat *st)
{
	(void)ver;
	return do_fstat(fd, st);
}

SHIM_EXPORT int
__fxstat64(int ver, int fd, struct stat64 *st)
{
	(void)ver;
	return do_fstat(fd, ST(st));
}

SHIM_EXPORT int
__xstat(int ver, const char *path, struct stat *st)
{
	(void)ver;
	return do_statat(AT_FDCWD, path, st, 0);
}

SHIM_EXPORT int
__xstat64(int ver, const char *path, struct stat64 *st)
{
	(void)ver;
	return do_statat(AT_FDCWD, path, ST(st), 0);
}

SHIM_EXPORT int
__lxstat(int ver, const char *path, struct stat *st)
{
	(void)ver;
	return do_statat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

SHIM_EXPORT int
__lxstat64(int ver, const char *path, struct stat64 *st)
{
	(void)ver;
	return do_statat(AT_FDCWD, path, ST(st), AT_SYMLINK_NOFOLLOW);
}

SHIM_EXPORT int
__fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	(void)ver;
	return do_statat(dirfd, path, st, flags);
}

SHIM_EXPORT int
__fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st,
	int flags)
{
	(void)ver;
	return do_statat(dirfd, path, ST(st), flags);
}

SHIM_EXPORT int
statx(int dirfd, const char *path, int flags, unsigned mask,
	struct statx *stx)
{
	struct stat st;
	int r;

	REAL(statx);
	r = rio__fs_real.statx(dirfd, path, flags, mask, stx);
	if (r != 0 || rio__fs_depth > 0 || !S_ISREG(stx->stx_mode))
		return r;
	st.st_mode = stx->stx_mode;
	st.st_dev = makedev(stx->stx_dev_major, stx->stx_dev_minor);
	st.st_ino = (ino_t)stx->stx_ino;
	st.st_size = -1;
	patch_size(&st);
	if (st.st_size >= 0) {
		stx->stx_size = (uint64_t)st.st_size;
		stx->stx_blocks = (uint64_t)st.st_blocks;
	}
	return r;
}
