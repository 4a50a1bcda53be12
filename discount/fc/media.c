/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * media.c -- stable storage for slots and the log: a file or a rio pool
 *
 * A file is written with pwrite and made durable with fdatasync.  A rio
 * pool is written with stores, flushed per write (rio_flush) and made
 * durable by one drain (rio_drain) at ckr__media_sync: the writer's copies
 * then cost memory bandwidth only.  Either way the caller orders its writes
 * with ckr__media_sync; nothing here reorders or skips a sync.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckr_int.h"

#define CKR_POOL_LAYOUT "ckr"

int
ckr__media_open(struct ckr_media *m, const char *dir, const char *name,
	enum ckr_storage kind, uint64_t size, uint32_t rio_flags, bool create,
	bool *created)
{
	struct rio_pool_opts po;
	struct stat sb;
	int rc;

	memset(m, 0, sizeof(*m));
	m->fd = -1;
	m->kind = kind;
	*created = false;
	if (kind == CKR_STORAGE_FILE) {
		snprintf(m->path, sizeof(m->path), "%s/%s", dir, name);
		m->fd = open(m->path, O_RDWR | O_CLOEXEC);
		if (m->fd < 0 && errno == ENOENT && create) {
			/* made whole under another name, then renamed: a
			 * crash never leaves the name on a file of the wrong
			 * size (which a later open refuses as another
			 * state's) */
			char tmp[sizeof(m->path) + 8];
			snprintf(tmp, sizeof(tmp), "%s.new", m->path);
			m->fd = open(tmp, O_RDWR | O_CREAT | O_TRUNC |
				O_CLOEXEC, 0644);
			if (m->fd >= 0 &&
			    (ftruncate(m->fd, (off_t)size) != 0 ||
			     rename(tmp, m->path) != 0)) {
				rc = ckr__errno("make %s of %llu bytes",
					m->path, (unsigned long long)size);
				close(m->fd);
				unlink(tmp);
				return rc;
			}
			*created = m->fd >= 0;
		}
		if (m->fd < 0)
			return ckr__errno("open %s", m->path);
		if (fstat(m->fd, &sb) != 0) {
			rc = ckr__errno("fstat %s", m->path);
			ckr__media_close(m);
			return rc;
		}
		m->size = (uint64_t)sb.st_size;
		return 0;
	}
	snprintf(m->path, sizeof(m->path), "%s/%s.pool", dir, name);
	memset(&po, 0, sizeof(po));
	po.layout = CKR_POOL_LAYOUT;
	rc = rio_pool_open_opts(m->path, rio_flags, &po, &m->pool);
	if (rc == -ENOENT && create) {
		uint64_t psz = (size + RIO_POOL_HDR_SIZE + 4095) &
			~(uint64_t)4095;
		rc = rio_pool_create_opts(m->path, psz, rio_flags, &po,
			&m->pool);
		*created = rc == 0;
	}
	if (rc != 0)
		return ckr__err(rc, "%s: %s", m->path, rio_errormsg());
	m->base = rio_pool_base(m->pool);
	m->size = rio_pool_size(m->pool);
	return 0;
}

void
ckr__media_close(struct ckr_media *m)
{
	if (m->fd >= 0)
		close(m->fd);
	m->fd = -1;
	if (m->pool != NULL)
		rio_pool_close(m->pool);
	m->pool = NULL;
}

int
ckr__media_write(struct ckr_media *m, uint64_t off, const void *buf,
	size_t len)
{
	const char *p = buf;

	if (off + len > m->size)
		return ckr__err(-ENOSPC, "%s: write of %zu bytes at %llu past "
			"its end %llu", m->path, len, (unsigned long long)off,
			(unsigned long long)m->size);
	if (m->kind == CKR_STORAGE_POOL) {
		/* flushed here, drained by ckr__media_sync */
		rio_memcpy_nodrain(m->pool, m->base + off, buf, len);
		return 0;
	}
	while (len > 0) {
		ssize_t n = pwrite(m->fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (n == 0)
				errno = ENOSPC;
			return ckr__errno("pwrite %s at %llu", m->path,
				(unsigned long long)off);
		}
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int
ckr__media_sync(struct ckr_media *m)
{
	if (m->kind == CKR_STORAGE_POOL) {
		/* Every line this thread flushed in ckr__media_write is
		 * durable once this drain returns. */
		rio_drain(m->pool);
		return 0;
	}
	/* The data of every pwrite before it is on the device. */
	if (fdatasync(m->fd) != 0)
		return ckr__errno("fdatasync %s", m->path);
	return 0;
}

int
ckr__media_read(struct ckr_media *m, uint64_t off, void *buf, size_t len)
{
	char *p = buf;

	if (off + len > m->size)
		return ckr__err(CKR_ESIZE, "%s: read of %zu bytes at %llu past "
			"its end %llu", m->path, len, (unsigned long long)off,
			(unsigned long long)m->size);
	if (m->kind == CKR_STORAGE_POOL) {
		memcpy(buf, m->base + off, len);
		return 0;
	}
	while (len > 0) {
		ssize_t n = pread(m->fd, p, len, (off_t)off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return ckr__errno("pread %s at %llu", m->path,
				(unsigned long long)off);
		if (n == 0)
			return ckr__err(CKR_ESIZE, "%s: short read at %llu",
				m->path, (unsigned long long)off);
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}
