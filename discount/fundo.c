/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fundo.c -- undoing file changes: before-images of the interval
 *
 * Files are process state (thesis 5.2.2): a write to a regular file is
 * undone after a crash, like a store to memory.  Before the change, the
 * bytes it overwrites (and the old size, when it extends or truncates the
 * file) are appended to `fundo`; a file created by the interval is
 * recorded as "remove"; a rename (and the hidden rename that delays an
 * unlink) as "rename back".  Recovery applies the interval's entries newest
 * first, which leaves every file as it was at the checkpoint.
 *
 * Invariants:
 *  1. An entry is durable before the change it guards is made.
 *  2. Entries carry (generation, incarnation).  Recovery applies the
 *     entries of (committed + 1, incarnation) newest first, cutting each
 *     off the log once applied (log.c invariant 3), then bumps the
 *     incarnation: an entry is never applied again after an older one
 *     was (renames and removals do not commute: a rename back applied a
 *     second time could move a restored file over another).  Each entry
 *     alone is idempotent -- the one a crash interrupted is applied again
 *     -- and so is an entry whose change never happened (a crash between
 *     logging and doing): writing old bytes, truncating to the old size,
 *     removing a missing file, renaming back a name that is gone.
 *  3. Each entry's `b` is the offset of the previous entry (-1 for the
 *     first), so the undo walks backwards without an index.
 *  4. Where a crash of the machine could lose it (a checkpoint directory
 *     that is not memory), an entry's undo is synced before the entry is
 *     cut off.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dc_int.h"

static int64_t last_off = -1; /* offset of the previous entry, this run */

int
dc__fu_log(int type, int64_t a, const char *p1, const char *p2,
	const void *data, uint64_t len)
{
	char names[2 * DC__PATH];
	size_t l1 = strlen(p1) + 1, l2 = p2 ? strlen(p2) + 1 : 0;
	if (l1 > DC__PATH || l2 > DC__PATH)
		return dc__err(-ENAMETOOLONG, "path too long to log");
	/* a member of a tree: named by a committed round first (tree.c
	 * invariant 6) */
	int trc = dc__tree_before_change();
	if (trc < 0)
		return trc;
	memcpy(names, p1, l1);
	if (l2)
		memcpy(names + l1, p2, l2);
	if (dc__vol.fu_off == 0)
		last_off = -1;
	int64_t here = (int64_t)dc__vol.fu_off;
	struct dc_log_ent h = { .type = (uint16_t)type,
		.gen = dc__open_gen(), .inc = dc__vol.incarnation,
		.a = a, .b = last_off, .c = (int64_t)(l1 + l2) };
	int rc = dc__log_append(dc__vol.fundo_fd, NULL, 0, &dc__vol.fu_off,
		&dc__vol.fu_seq, &h, names, l1 + l2, data, len);
	if (rc)
		return dc__err(rc, "fundo append: %s", strerror(-rc));
	last_off = here;
	return 0;
}

/* Log what a write of len bytes at off into descriptor fd will change. */
int
dc__fu_before_write(int fd, int64_t off, uint64_t len)
{
	int d = dc__desc_of(fd);
	if (d < 0 || len == 0)
		return 0;
	const char *path = dc__st.desc[d].path;
	struct stat st;
	if (fstat(fd, &st) != 0)
		return dc__err(-errno, "fstat %d: %s", fd, strerror(errno));
	int64_t size = st.st_size;
	int rc;
	if (off + (int64_t)len > size &&
	    (rc = dc__fu_log(DC_FU_SIZE, size, path, NULL, NULL, 0)))
		return rc;
	int64_t end = off + (int64_t)len < size ? off + (int64_t)len : size;
	if (off >= end)
		return 0;
	/* a write-only descriptor cannot read the old bytes: read them
	 * through a second, read-only open of the same file */
	int rfd = fd;
	int fl = fcntl(fd, F_GETFL);
	if (fl >= 0 && (fl & O_ACCMODE) == O_WRONLY) {
		char link[64];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		rfd = open(link, O_RDONLY | O_CLOEXEC);
		if (rfd < 0)
			return dc__err(-errno, "%s: cannot read the bytes a "
				"write will overwrite: %s", path,
				strerror(errno));
	}
	rc = 0;
	for (int64_t o = off; o < end && rc == 0;) {
		int64_t k = end - o;
		if (k > (int64_t)sizeof(dc__vol.buf))
			k = (int64_t)sizeof(dc__vol.buf);
		ssize_t got = pread(rfd, dc__vol.buf, (size_t)k, o);
		if (got < 0)
			rc = dc__err(-errno, "%s: cannot read the bytes a "
				"write will overwrite: %s", path,
				strerror(errno));
		if (got <= 0)
			break;
		rc = dc__fu_log(DC_FU_BYTES, o, path, NULL, dc__vol.buf,
			(uint64_t)got);
		o += got;
	}
	if (rfd != fd)
		close(rfd);
	return rc;
}

/* Invariant 4: the undo of one entry reaches the device before the entry
 * is cut off the log: the file's data, or the directory of a name. */
static int
sync_undo(const char *path, bool name)
{
	if (dc__vol.dir_is_mem)
		return 0;
	char dir[DC__PATH];
	if (name) {
		snprintf(dir, sizeof(dir), "%s", path);
		char *sl = strrchr(dir, '/');
		if (sl == NULL)
			return 0;
		*(sl == dir ? sl + 1 : sl) = '\0';
		path = dir;
	}
	int fd = open(path, (name ? O_DIRECTORY : 0) | O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : dc__err(-errno, "undo: open %s "
			"to sync: %s", path, strerror(errno));
	int rc = (name ? fsync(fd) : fdatasync(fd)) == 0 ? 0 :
		dc__err(-errno, "undo: sync %s: %s", path, strerror(errno));
	close(fd);
	return rc;
}

static int
undo_one(const struct dc_log_ent *e, const char *pl)
{
	const char *p1 = pl;
	const char *p2 = pl + strlen(pl) + 1;
	const char *data = pl + e->c;
	uint64_t dlen = e->len - (uint64_t)e->c;
	int fd;
	switch (e->type) {
	case DC_FU_BYTES:
		fd = open(p1, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return dc__err(-errno, "undo: open %s: %s", p1,
				strerror(errno));
		if (pwrite(fd, data, dlen, e->a) != (ssize_t)dlen) {
			int er = errno;
			close(fd);
			return dc__err(-er, "undo: write %s", p1);
		}
		close(fd);
		return sync_undo(p1, false);
	case DC_FU_SIZE:
		if (truncate(p1, e->a) != 0 && errno != ENOENT)
			return dc__err(-errno, "undo: truncate %s: %s", p1,
				strerror(errno));
		return sync_undo(p1, false);
	case DC_FU_CREATE:
		if (unlink(p1) != 0 && errno != ENOENT)
			return dc__err(-errno, "undo: remove %s: %s", p1,
				strerror(errno));
		return sync_undo(p1, true);
	case DC_FU_RENAME:
		if (rename(p2, p1) != 0 && errno != ENOENT)
			return dc__err(-errno, "undo: rename %s back to %s: %s",
				p2, p1, strerror(errno));
		return sync_undo(p1, true);
	}
	return dc__err(DC_ECORRUPT, "undo: unknown entry type %u", e->type);
}

/* Recovery: undo the interval's file changes, newest first. */
static int
fu_apply(const struct dc_log_ent *e, const char *pl)
{
	if ((uint64_t)e->c > e->len)
		return dc__err(DC_ECORRUPT, "fundo entry: paths longer than "
			"the entry");
	return undo_one(e, pl);
}

int
dc__fu_undo(void)
{
	uint64_t n;
	return dc__log_undo_pop(dc__vol.fundo_fd, dc__vol.committed + 1,
		dc__vol.incarnation, sizeof(dc__vol.io), fu_apply, "fundo",
		&n);
}
