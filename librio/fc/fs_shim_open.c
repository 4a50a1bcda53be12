/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fs_shim_open.c -- librio-fs.so: open, openat, creat and their twins
 */
#include "fs_shim_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>

/* ---- open ---- */

/* Open a path below the directory through the cache. */
int
rio__fs_open_cached(const char *full, int flags, mode_t mode)
{
	struct stat st;
	rio_fc_cache *c;
	rio_fc_file *h = NULL;
	struct ofd *o;
	int fd, rc;

	if ((flags & __O_TMPFILE) == __O_TMPFILE)
		return rio__fs_refuse(EOPNOTSUPP, "open(O_TMPFILE)", full);
	/* Directories, devices, FIFOs, O_PATH: not file data. */
	if ((flags & (O_DIRECTORY | O_PATH)) ||
	    (rio__fs_real.stat(full, &st) == 0 && !S_ISREG(st.st_mode))) {
		fd = rio__fs_real.open(full, flags, mode);
		if (fd >= 0 && rio__fs_real.fstat(fd, &st) == 0 &&
		    S_ISDIR(st.st_mode)) {
			o = rio__fs_ofd_new(OFD_DIR, NULL, full, flags);
			pthread_rwlock_wrlock(&rio__fs_tab_lock);
			if (o == NULL || rio__fs_slot_set(fd, o) != 0)
				free(o); /* then a plain directory fd */
			pthread_rwlock_unlock(&rio__fs_tab_lock);
		}
		return fd;
	}
	c = rio__fs_get_cache("open", full);
	if (c == NULL)
		return -1;
	/* The cache does O_CREAT, O_EXCL and O_TRUNC (through itself); the
	 * program's descriptor is opened on the existing file. */
	rio__fs_depth++;
	rc = rio_fc_open_mode(c, full, flags, mode, &h);
	rio__fs_depth--;
	if (rc) {
		rio__fs_put_cache();
		return rio__fs_fail(rc, "open", full);
	}
	fd = rio__fs_real.open(full, flags & ~(O_CREAT | O_EXCL | O_TRUNC),
		mode);
	if (fd < 0) {
		int e = errno;
		rio__fs_depth++;
		rio_fc_close(h);
		rio__fs_depth--;
		rio__fs_put_cache();
		errno = e;
		return -1;
	}
	o = rio__fs_ofd_new(OFD_FILE, h, full, flags);
	pthread_rwlock_wrlock(&rio__fs_tab_lock);
	rc = o == NULL ? -ENOMEM : rio__fs_slot_set(fd, o);
	if (rc) {
		if (o != NULL) {
			rio__fs_ofd_unref(o);
		} else {
			rio__fs_depth++;
			rio_fc_close(h);
			rio__fs_depth--;
		}
	}
	pthread_rwlock_unlock(&rio__fs_tab_lock);
	rio__fs_put_cache();
	if (rc) {
		rio__fs_real.close(fd);
		errno = -rc;
		return -1;
	}
	return fd;
}

static int
do_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	char full[PATH_MAX];

	REAL(openat);
	switch (rio__fs_where_at(dirfd, path, full)) {
	case 1:
		return rio__fs_open_cached(full, flags, mode);
	case 2:
		/* The directory itself: an unnamed file there is refused;
		 * its fsync is the cache's business (open_cached records
		 * the descriptor as a directory's). */
		if ((flags & __O_TMPFILE) == __O_TMPFILE)
			return rio__fs_refuse(EOPNOTSUPP, "open(O_TMPFILE)",
				full);
		return rio__fs_open_cached(full, flags, mode);
	default:
		break;
	}
	return rio__fs_real.openat(dirfd, path, flags, mode);
}

static mode_t
mode_arg(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ?
		(mode_t)va_arg(ap, int) : 0;
}

/* open and openat (open64 and openat64: the same on LP64). */
#define SHIM_COMMA ,
#define SHIM_OPENAT(name, dirfd_param, dirfd_arg)                       \
	SHIM_EXPORT int name(dirfd_param const char *path, int flags, ...) \
	{                                                               \
		va_list ap;                                             \
		mode_t m;                                               \
		va_start(ap, flags);                                    \
		m = mode_arg(flags, ap);                                \
		va_end(ap);                                             \
		return do_openat(dirfd_arg, path, flags, m);            \
	}
SHIM_OPENAT(open, , AT_FDCWD)
SHIM_OPENAT(openat, int dirfd SHIM_COMMA, dirfd)
SHIM_EXPORT int open64(const char *path, int flags, ...) SHIM_ALIAS(open);
SHIM_EXPORT int openat64(int dirfd, const char *path, int flags, ...)
	SHIM_ALIAS(openat);

SHIM_EXPORT int
__open_2(const char *path, int flags)
{
	return do_openat(AT_FDCWD, path, flags, 0);
}

SHIM_EXPORT int __open64_2(const char *path, int flags) SHIM_ALIAS(__open_2);

SHIM_EXPORT int
__openat_2(int dirfd, const char *path, int flags)
{
	return do_openat(dirfd, path, flags, 0);
}

SHIM_EXPORT int __openat64_2(int dirfd, const char *path, int flags)
	SHIM_ALIAS(__openat_2);

SHIM_EXPORT int
creat(const char *path, mode_t mode)
{
	return do_openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}

SHIM_EXPORT int creat64(const char *path, mode_t mode) SHIM_ALIAS(creat);
