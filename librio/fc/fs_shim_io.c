/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fs_shim_io.c -- librio-fs.so: the data calls of a cached file (read,
 * write, their positional and vector forms, lseek, fsync, truncate,
 * fallocate), served by its cache handle
 */
#include "fs_shim_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

/* ---- data ---- */

/* A poisoned or foreign-process descriptor: every data call fails. */
bool
rio__fs_unusable(struct ofd *o, const char *what)
{
	if (o->kind == OFD_POISON) {
		rio__fs_ofd_put();
		rio__fs_refuse(EBADF, what, o->path);
		rio__fs_say("librio-fs: (the descriptor was inherited over "
		    "exec from the process that opened it through the cache, "
		    "or the cache was closed at exit)");
		return true;
	}
	return false;
}

static ssize_t
cached_pread(struct ofd *o, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	int rc;

	if ((o->flags & O_ACCMODE) == O_WRONLY) {
		errno = EBADF;
		return -1;
	}
	rio__fs_depth++;
	rc = rio_fc_pread(o->h, buf, n, off, &got);
	rio__fs_depth--;
	if (rc)
		return rio__fs_fail(rc, "read", o->path);
	return (ssize_t)got;
}

static ssize_t
cached_pwrite(struct ofd *o, const void *buf, size_t n, uint64_t off)
{
	int rc;

	if ((o->flags & O_ACCMODE) == O_RDONLY) {
		errno = EBADF;
		return -1;
	}
	rio__fs_depth++;
	rc = rio_fc_pwrite(o->h, buf, n, off);
	rio__fs_depth--;
	if (rc)
		return rio__fs_fail(rc, "write", o->path);
	return (ssize_t)n;
}

uint64_t
rio__fs_file_size(struct ofd *o)
{
	uint64_t size = 0;

	rio_fc_size(o->h, &size);
	return size;
}

/* read and write: at the descriptor's offset, which they move (a write
 * to an O_APPEND file moves it to the end first).  wr: write wbuf, else
 * read into rbuf. */
static ssize_t
rw_at_pos(int fd, void *rbuf, const void *wbuf, size_t n, bool wr)
{
	struct ofd *o;
	ssize_t r;

	if (wr)
		REAL(write);
	else
		REAL(read);
	o = rio__fs_ofd_get(fd);
	if (o != NULL && o->kind == OFD_DIR) {
		rio__fs_ofd_put();
		o = NULL;
	}
	if (o == NULL)
		return wr ? rio__fs_real.write(fd, wbuf, n) :
			    rio__fs_real.read(fd, rbuf, n);
	if (rio__fs_unusable(o, wr ? "write" : "read"))
		return -1;
	pthread_mutex_lock(&o->lock);
	if (wr && (o->flags & O_APPEND))
		o->pos = rio__fs_file_size(o);
	r = wr ? cached_pwrite(o, wbuf, n, o->pos) :
		 cached_pread(o, rbuf, n, o->pos);
	if (r > 0)
		o->pos += (uint64_t)r;
	pthread_mutex_unlock(&o->lock);
	rio__fs_ofd_put();
	return r;
}

SHIM_EXPORT ssize_t
read(int fd, void *buf, size_t n)
{
	return rw_at_pos(fd, buf, NULL, n, false);
}

SHIM_EXPORT ssize_t
write(int fd, const void *buf, size_t n)
{
	return rw_at_pos(fd, NULL, buf, n, true);
}

/* pread and pwrite, at off (Linux appends a pwrite to an O_APPEND file;
 * so do we).  wr: write wbuf, else read into rbuf. */
static ssize_t
rw_at(int fd, void *rbuf, const void *wbuf, size_t n, off_t off, bool wr)
{
	struct ofd *o;
	ssize_t r;

	if (wr)
		REAL(pwrite);
	else
		REAL(pread);
	o = rio__fs_ofd_get(fd);
	if (o == NULL)
		return wr ? rio__fs_real.pwrite(fd, wbuf, n, off) :
			    rio__fs_real.pread(fd, rbuf, n, off);
	if (rio__fs_unusable(o, wr ? "pwrite" : "pread"))
		return -1;
	if (o->kind == OFD_DIR || off < 0) {
		rio__fs_ofd_put();
		errno = o->kind == OFD_DIR ? EISDIR : EINVAL;
		return -1;
	}
	if (!wr)
		r = cached_pread(o, rbuf, n, (uint64_t)off);
	else if (o->flags & O_APPEND)
		r = cached_pwrite(o, wbuf, n, rio__fs_file_size(o));
	else
		r = cached_pwrite(o, wbuf, n, (uint64_t)off);
	rio__fs_ofd_put();
	return r;
}

SHIM_EXPORT ssize_t
pread(int fd, void *buf, size_t n, off_t off)
{
	return rw_at(fd, buf, NULL, n, off, false);
}

SHIM_EXPORT ssize_t pread64(int fd, void *buf, size_t n, off_t off)
	SHIM_ALIAS(pread);

SHIM_EXPORT ssize_t
pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return rw_at(fd, NULL, buf, n, off, true);
}

SHIM_EXPORT ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
	SHIM_ALIAS(pwrite);

SHIM_EXPORT ssize_t
__read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		abort(); /* as glibc's __chk_fail */
	return read(fd, buf, n);
}

SHIM_EXPORT ssize_t
__pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen)
		abort();
	return rw_at(fd, buf, NULL, n, off, false);
}

SHIM_EXPORT ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off,
	size_t buflen) SHIM_ALIAS(__pread_chk);

/* Vectors: one call per element, at consecutive offsets (each block of
 * each element atomic, as a sequence of pwrites would be). */
static ssize_t
vec_io(struct ofd *o, const struct iovec *iov, int cnt, uint64_t off,
	bool wr, bool move)
{
	ssize_t total = 0;

	if (cnt < 0 || cnt > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	for (int i = 0; i < cnt; i++) {
		ssize_t r = wr ? cached_pwrite(o, iov[i].iov_base,
					 iov[i].iov_len, off + (uint64_t)total) :
				 cached_pread(o, iov[i].iov_base, iov[i].iov_len,
					 off + (uint64_t)total);
		if (r < 0)
			return total > 0 ? total : -1;
		total += r;
		if ((size_t)r < iov[i].iov_len)
			break;
	}
	if (move)
		o->pos = off + (uint64_t)total;
	return total;
}

static ssize_t
do_rwv(int fd, const struct iovec *iov, int cnt, off_t off, bool wr,
	bool positional, int vflags)
{
	struct ofd *o;
	ssize_t r;
	uint64_t at;

	REAL(readv);
	o = rio__fs_ofd_get(fd);
	if (o == NULL) {
		if (positional && vflags != 0)
			return wr ? rio__fs_real.pwritev2(fd, iov, cnt, off,
					    vflags) :
				    rio__fs_real.preadv2(fd, iov, cnt, off,
					    vflags);
		if (positional)
			return wr ? rio__fs_real.pwritev(fd, iov, cnt, off) :
				    rio__fs_real.preadv(fd, iov, cnt, off);
		return wr ? rio__fs_real.writev(fd, iov, cnt) :
			    rio__fs_real.readv(fd, iov, cnt);
	}
	if (rio__fs_unusable(o, wr ? "writev" : "readv"))
		return -1;
	if (o->kind == OFD_DIR) {
		rio__fs_ofd_put();
		errno = EISDIR;
		return -1;
	}
	/* preadv2/pwritev2 with offset -1 use and move the file offset. */
	if (positional && off == -1 && vflags != -1)
		positional = false;
	pthread_mutex_lock(&o->lock);
	if (wr && (o->flags & O_APPEND))
		at = rio__fs_file_size(o);
	else
		at = positional ? (uint64_t)off : o->pos;
	r = vec_io(o, iov, cnt, at, wr, !positional);
	pthread_mutex_unlock(&o->lock);
	rio__fs_ofd_put();
	return r;
}

SHIM_EXPORT ssize_t
readv(int fd, const struct iovec *iov, int cnt)
{
	return do_rwv(fd, iov, cnt, 0, false, false, 0);
}

SHIM_EXPORT ssize_t
writev(int fd, const struct iovec *iov, int cnt)
{
	return do_rwv(fd, iov, cnt, 0, true, false, 0);
}

SHIM_EXPORT ssize_t
preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return do_rwv(fd, iov, cnt, off, false, true, -1);
}

SHIM_EXPORT ssize_t preadv64(int fd, const struct iovec *iov, int cnt,
	off_t off) SHIM_ALIAS(preadv);

SHIM_EXPORT ssize_t
pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return do_rwv(fd, iov, cnt, off, true, true, -1);
}

SHIM_EXPORT ssize_t pwritev64(int fd, const struct iovec *iov, int cnt,
	off_t off) SHIM_ALIAS(pwritev);

SHIM_EXPORT ssize_t
preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	return do_rwv(fd, iov, cnt, off, false, true, flags);
}

SHIM_EXPORT ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt,
	off_t off, int flags) SHIM_ALIAS(preadv2);

SHIM_EXPORT ssize_t
pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	return do_rwv(fd, iov, cnt, off, true, true, flags);
}

SHIM_EXPORT ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt,
	off_t off, int flags) SHIM_ALIAS(pwritev2);

static off_t
do_lseek(int fd, off_t off, int whence)
{
	struct ofd *o;
	int64_t base, pos;
	uint64_t size;

	REAL(lseek);
	o = rio__fs_ofd_get(fd);
	if (o == NULL)
		return rio__fs_real.lseek(fd, off, whence);
	if (rio__fs_unusable(o, "lseek"))
		return -1;
	if (o->kind == OFD_DIR) {
		rio__fs_ofd_put();
		return rio__fs_real.lseek(fd, off, whence);
	}
	pthread_mutex_lock(&o->lock);
	size = rio__fs_file_size(o);
	switch (whence) {
	case SEEK_SET:
		base = 0;
		break;
	case SEEK_CUR:
		base = (int64_t)o->pos;
		break;
	case SEEK_END:
		base = (int64_t)size;
		break;
	case SEEK_DATA: /* the whole file is data */
	case SEEK_HOLE:
		if (off < 0 || (uint64_t)off >= size) {
			pthread_mutex_unlock(&o->lock);
			rio__fs_ofd_put();
			errno = ENXIO;
			return -1;
		}
		base = 0;
		if (whence == SEEK_HOLE)
			off = (off_t)size;
		break;
	default:
		pthread_mutex_unlock(&o->lock);
		rio__fs_ofd_put();
		errno = EINVAL;
		return -1;
	}
	pos = base + off;
	if (pos < 0) {
		pthread_mutex_unlock(&o->lock);
		rio__fs_ofd_put();
		errno = EINVAL;
		return -1;
	}
	o->pos = (uint64_t)pos;
	pthread_mutex_unlock(&o->lock);
	rio__fs_ofd_put();
	return (off_t)pos;
}

SHIM_EXPORT off_t
lseek(int fd, off_t off, int whence)
{
	return do_lseek(fd, off, whence);
}

SHIM_EXPORT off_t lseek64(int fd, off_t off, int whence) SHIM_ALIAS(lseek);

/* fsync and fdatasync: free for cached files; a directory's is real only
 * if the directory changed in a way the cache does not record. */
static int
do_sync(int fd, bool data)
{
	struct ofd *o;
	int rc;

	REAL(fsync);
	o = rio__fs_ofd_get(fd);
	if (o == NULL)
		return data ? rio__fs_real.fdatasync(fd) :
			      rio__fs_real.fsync(fd);
	if (rio__fs_unusable(o, "fsync"))
		return -1;
	if (o->kind == OFD_DIR) {
		/* Acquire: pairs with meta_changed()'s release add, so the
		 * name change it counts is done before this fsync decides;
		 * the release CAS below clears only the count it saw (a
		 * change made meanwhile keeps it nonzero). */
		unsigned long m = __atomic_load_n(&rio__fs_meta_dirty,
			__ATOMIC_ACQUIRE);
		rio__fs_ofd_put();
		if (m == 0)
			return 0; /* creations/removals are the cache's */
		rc = data ? rio__fs_real.fdatasync(fd) : rio__fs_real.fsync(fd);
		if (rc == 0)
			__atomic_compare_exchange_n(&rio__fs_meta_dirty, &m, 0,
				false, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
		return rc;
	}
	rio__fs_depth++;
	rc = rio_fc_fsync(o->h);
	rio__fs_depth--;
	rio__fs_ofd_put();
	return rc ? rio__fs_fail(rc, "fsync", o->path) : 0;
}

SHIM_EXPORT int
fsync(int fd)
{
	return do_sync(fd, false);
}

SHIM_EXPORT int
fdatasync(int fd)
{
	return do_sync(fd, true);
}

SHIM_EXPORT int
sync_file_range(int fd, off_t off, off_t n, unsigned flags)
{
	struct ofd *o;

	REAL(sync_file_range);
	o = rio__fs_ofd_get(fd);
	if (o == NULL)
		return rio__fs_real.sync_file_range(fd, off, n, flags);
	rio__fs_ofd_put();
	return 0;
}

static int
do_ftruncate(int fd, off_t len)
{
	struct ofd *o;
	int rc;

	REAL(ftruncate);
	o = rio__fs_ofd_get(fd);
	if (o == NULL)
		return rio__fs_real.ftruncate(fd, len);
	if (rio__fs_unusable(o, "ftruncate"))
		return -1;
	if (o->kind == OFD_DIR || len < 0 ||
	    (o->flags & O_ACCMODE) == O_RDONLY) {
		rio__fs_ofd_put();
		errno = len < 0 ? EINVAL : o->kind == OFD_DIR ? EISDIR : EINVAL;
		return -1;
	}
	rio__fs_depth++;
	rc = rio_fc_truncate(o->h, (uint64_t)len);
	rio__fs_depth--;
	rio__fs_ofd_put();
	return rc ? rio__fs_fail(rc, "ftruncate", o->path) : 0;
}

SHIM_EXPORT int
ftruncate(int fd, off_t len)
{
	return do_ftruncate(fd, len);
}

SHIM_EXPORT int ftruncate64(int fd, off_t len) SHIM_ALIAS(ftruncate);

static int
do_truncate(const char *path, off_t len)
{
	char full[PATH_MAX];
	rio_fc_cache *c;
	rio_fc_file *h;
	int rc;

	REAL(truncate);
	if (!rio__fs_ours_at(AT_FDCWD, path, full))
		return rio__fs_real.truncate(path, len);
	if (len < 0) {
		errno = EINVAL;
		return -1;
	}
	c = rio__fs_get_cache("truncate", full);
	if (c == NULL)
		return -1;
	rio__fs_depth++;
	rc = rio_fc_open(c, full, O_WRONLY, &h);
	if (rc == 0) {
		rc = rio_fc_truncate(h, (uint64_t)len);
		rio_fc_close(h);
	}
	rio__fs_depth--;
	rio__fs_put_cache();
	return rc ? rio__fs_fail(rc, "truncate", full) : 0;
}

SHIM_EXPORT int
truncate(const char *path, off_t len)
{
	return do_truncate(path, len);
}

SHIM_EXPORT int truncate64(const char *path, off_t len) SHIM_ALIAS(truncate);

static int
do_fallocate(int fd, int mode, off_t off, off_t len, bool posix)
{
	struct ofd *o;
	int rc = 0;

	REAL(fallocate);
	o = rio__fs_ofd_get(fd);
	if (o == NULL)
		return posix ? rio__fs_real.posix_fallocate(fd, off, len) :
			       rio__fs_real.fallocate(fd, mode, off, len);
	if (rio__fs_unusable(o, "fallocate"))
		return posix ? EBADF : -1;
	if (mode != 0 || o->kind != OFD_FILE) {
		rio__fs_ofd_put();
		rc = rio__fs_refuse(EOPNOTSUPP, "fallocate (with a mode)",
			o->path);
		return posix ? EOPNOTSUPP : rc;
	}
	/* Mode 0 only promises the space and the size; the cache has the
	 * space by construction. */
	if (off < 0 || len <= 0) {
		rio__fs_ofd_put();
		errno = EINVAL;
		return posix ? EINVAL : -1;
	}
	rio__fs_depth++;
	if ((uint64_t)(off + len) > rio__fs_file_size(o))
		rc = rio_fc_truncate(o->h, (uint64_t)(off + len));
	rio__fs_depth--;
	rio__fs_ofd_put();
	if (rc) {
		rio__fs_fail(rc, "fallocate", o->path);
		return posix ? errno : -1;
	}
	return 0;
}

SHIM_EXPORT int
fallocate(int fd, int mode, off_t off, off_t len)
{
	return do_fallocate(fd, mode, off, len, false);
}

SHIM_EXPORT int fallocate64(int fd, int mode, off_t off, off_t len)
	SHIM_ALIAS(fallocate);

SHIM_EXPORT int
posix_fallocate(int fd, off_t off, off_t len)
{
	return do_fallocate(fd, 0, off, len, true);
}

SHIM_EXPORT int posix_fallocate64(int fd, off_t off, off_t len)
	SHIM_ALIAS(posix_fallocate);
