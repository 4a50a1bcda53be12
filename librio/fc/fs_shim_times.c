/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fs_shim_times.c -- librio-fs.so: utimensat, futimens and the older time
 * calls on cached files, set once the file is written back
 */
#include "fs_shim_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/time.h>
#include <utime.h>

/* ---- times ---- */

/* One utimensat or futimens, applied by rio__fc_set_times* once the
 * cached file is written back (F7 in fc_file.c). */
struct times_call {
	int fd;                   /* futimens, or -1 */
	const char *path;         /* utimensat: absolute */
	const struct timespec *ts;
	int flags;
};

static int
apply_times(void *arg)
{
	const struct times_call *t = arg;

	return t->fd >= 0 ? rio__fs_real.futimens(t->fd, t->ts) :
			    rio__fs_real.utimensat(AT_FDCWD, t->path, t->ts,
				    t->flags);
}

static int
do_futimens(int fd, const struct timespec *ts)
{
	struct times_call t = { fd, NULL, ts, 0 };
	struct ofd *o;
	int rc;

	REAL(futimens);
	o = rio__fs_ofd_get(fd);
	if (o == NULL)
		return rio__fs_real.futimens(fd, ts);
	if (rio__fs_unusable(o, "futimens"))
		return -1;
	if (o->kind != OFD_FILE) {
		rio__fs_ofd_put();
		return rio__fs_real.futimens(fd, ts);
	}
	rio__fs_depth++;
	rc = rio__fc_set_times(o->h, apply_times, &t);
	rio__fs_depth--;
	rio__fs_ofd_put();
	return rc ? rio__fs_fail(rc, "futimens", o->path) : 0;
}

static int
do_utimensat(int dirfd, const char *path, const struct timespec *ts,
	int flags)
{
	char full[PATH_MAX];
	struct times_call t = { -1, full, ts, flags };
	struct stat st;
	rio_fc_cache *c;
	int rc;

	REAL(utimensat);
	if (path == NULL) /* Linux: the file of dirfd itself */
		return do_futimens(dirfd, ts);
	if (!rio__fs_ours_at(dirfd, path, full) ||
	    rio__fs_real.lstat(full, &st) != 0 ||
	    !S_ISREG(st.st_mode))
		return rio__fs_real.utimensat(dirfd, path, ts, flags);
	c = rio__fs_get_cache("utimensat", full);
	if (c == NULL)
		return -1;
	rio__fs_depth++;
	rc = rio__fc_set_times_path(c, full, apply_times, &t);
	rio__fs_depth--;
	rio__fs_put_cache();
	return rc ? rio__fs_fail(rc, "utimensat", full) : 0;
}

/* The older calls, as timespecs (glibc implements them with an internal
 * utimensat that the shim would not see). */
static const struct timespec *
from_timevals(const struct timeval *tv, struct timespec ts[2])
{
	if (tv == NULL)
		return NULL;
	for (int i = 0; i < 2; i++) {
		ts[i].tv_sec = tv[i].tv_sec;
		ts[i].tv_nsec = tv[i].tv_usec * 1000;
	}
	return ts;
}

SHIM_EXPORT int
utimensat(int dirfd, const char *path, const struct timespec ts[2],
	int flags)
{
	return do_utimensat(dirfd, path, ts, flags);
}

SHIM_EXPORT int
futimens(int fd, const struct timespec ts[2])
{
	return do_futimens(fd, ts);
}

SHIM_EXPORT int
utimes(const char *path, const struct timeval tv[2])
{
	struct timespec ts[2];

	return do_utimensat(AT_FDCWD, path, from_timevals(tv, ts), 0);
}

SHIM_EXPORT int
lutimes(const char *path, const struct timeval tv[2])
{
	struct timespec ts[2];

	return do_utimensat(AT_FDCWD, path, from_timevals(tv, ts),
		AT_SYMLINK_NOFOLLOW);
}

SHIM_EXPORT int
futimes(int fd, const struct timeval tv[2])
{
	struct timespec ts[2];

	return do_futimens(fd, from_timevals(tv, ts));
}

SHIM_EXPORT int
futimesat(int dirfd, const char *path, const struct timeval tv[2])
{
	struct timespec ts[2];

	return do_utimensat(dirfd, path, from_timevals(tv, ts), 0);
}

SHIM_EXPORT int
utime(const char *path, const struct utimbuf *b)
{
	struct timespec ts[2];

	if (b == NULL)
		return do_utimensat(AT_FDCWD, path, NULL, 0);
	ts[0].tv_sec = b->actime;
	ts[1].tv_sec = b->modtime;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	return do_utimensat(AT_FDCWD, path, ts, 0);
}
