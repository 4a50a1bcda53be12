/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fs_shim_names.c -- librio-fs.so: unlink, remove, rmdir, mkdir, rename
 * and link of paths below the directory
 */
#include "fs_shim_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

/* ---- names ---- */

static void
meta_changed(void)
{
	/* Release: the name change before the count a directory fsync reads
	 * with acquire (fs_shim_io.c). */
	__atomic_add_fetch(&rio__fs_meta_dirty, 1, __ATOMIC_RELEASE);
}

static int
do_unlinkat(int dirfd, const char *path, int flags)
{
	char full[PATH_MAX];
	struct stat st;
	rio_fc_cache *c;
	bool in;
	int rc;

	REAL(unlinkat);
	in = rio__fs_ours_at(dirfd, path, full);
	if (!in || (flags & AT_REMOVEDIR) ||
	    (rio__fs_real.lstat(full, &st) == 0 && !S_ISREG(st.st_mode))) {
		/* Not a cached file's data: the disk's business, and the
		 * directory's next fsync must be real. */
		rc = rio__fs_real.unlinkat(dirfd, path, flags);
		if (rc == 0 && in)
			meta_changed();
		return rc;
	}
	c = rio__fs_get_cache("unlink", full);
	if (c == NULL)
		return -1;
	rio__fs_depth++;
	rc = rio_fc_unlink(c, full);
	rio__fs_depth--;
	rio__fs_put_cache();
	return rc ? rio__fs_fail(rc, "unlink", full) : 0;
}

SHIM_EXPORT int
unlink(const char *path)
{
	return do_unlinkat(AT_FDCWD, path, 0);
}

SHIM_EXPORT int
unlinkat(int dirfd, const char *path, int flags)
{
	return do_unlinkat(dirfd, path, flags);
}

SHIM_EXPORT int
remove(const char *path)
{
	struct stat st;

	REAL(lstat);
	if (rio__fs_real.lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return do_unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
	return do_unlinkat(AT_FDCWD, path, 0);
}

SHIM_EXPORT int
rmdir(const char *path)
{
	return do_unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
}

SHIM_EXPORT int
mkdir(const char *path, mode_t mode)
{
	char full[PATH_MAX];
	int rc;

	REAL(mkdir);
	rc = rio__fs_real.mkdir(path, mode);
	if (rc == 0 && rio__fs_ours_at(AT_FDCWD, path, full))
		meta_changed();
	return rc;
}

static int
do_renameat2(int fa, const char *from, int fb, const char *to, unsigned flags)
{
	char a[PATH_MAX], b[PATH_MAX];
	bool oa, ob;
	rio_fc_cache *c;
	int rc;

	REAL(renameat2);
	oa = rio__fs_ours_at(fa, from, a);
	ob = rio__fs_ours_at(fb, to, b);
	if (!oa && !ob)
		return flags ? rio__fs_real.renameat2(fa, from, fb, to, flags) :
			       rio__fs_real.renameat(fa, from, fb, to);
	if (flags != 0)
		return rio__fs_refuse(EINVAL, "renameat2 with flags",
			oa ? a : b);
	if (!oa)
		rio__fs_at_path(fa, from, a);
	if (!ob)
		rio__fs_at_path(fb, to, b);
	c = rio__fs_get_cache("rename", oa ? a : b);
	if (c == NULL)
		return -1;
	rio__fs_depth++;
	rc = rio_fc_rename(c, a, b);
	rio__fs_depth--;
	rio__fs_put_cache();
	if (rc)
		return rio__fs_fail(rc, "rename", a);
	meta_changed();
	return 0;
}

SHIM_EXPORT int
rename(const char *from, const char *to)
{
	return do_renameat2(AT_FDCWD, from, AT_FDCWD, to, 0);
}

SHIM_EXPORT int
renameat(int fa, const char *from, int fb, const char *to)
{
	return do_renameat2(fa, from, fb, to, 0);
}

SHIM_EXPORT int
renameat2(int fa, const char *from, int fb, const char *to, unsigned flags)
{
	return do_renameat2(fa, from, fb, to, flags);
}

SHIM_EXPORT int
link(const char *from, const char *to)
{
	char a[PATH_MAX], b[PATH_MAX];

	REAL(link);
	if (rio__fs_ours_at(AT_FDCWD, from, a) ||
	    rio__fs_ours_at(AT_FDCWD, to, b))
		return rio__fs_refuse(EPERM, "link", from);
	return rio__fs_real.link(from, to);
}

SHIM_EXPORT int
linkat(int fa, const char *from, int fb, const char *to, int flags)
{
	char a[PATH_MAX], b[PATH_MAX];

	REAL(linkat);
	if (rio__fs_ours_at(fa, from, a) || rio__fs_ours_at(fb, to, b))
		return rio__fs_refuse(EPERM, "link", from);
	return rio__fs_real.linkat(fa, from, fb, to, flags);
}
