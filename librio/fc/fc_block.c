/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_block.c -- reading and writing file blocks in the cache: the
 * copy-on-write block write that makes each block write atomic
 *
 * A write of block fbn of file f (rio_fc_pwrite, write_chunk):
 *   1. take a reserved block B (its descriptor is durably FREE);
 *   2. build the whole new block in B: the new bytes, and around them the
 *      old bytes from the current copy (or from disk, or zeros);
 *   3. write B's descriptor fields -- seq (fresh, higher than any on
 *      media), fbn, file, gen, fsize (the file size once the write is
 *      done), checksum -- leaving its state word FREE;
 *   4. drain: B's data and fields are durable              (fence 1)
 *   5. store DIRTY to B's state word (one aligned 8-byte store), drain:
 *      the commit point                                    (fence 2)
 *   6. switch the index to B; the old copy goes to the stale list and is
 *      freed later, in a batch (fc_alloc.c).
 * A crash before 5 leaves B FREE (the old copy current: the write did not
 * happen); after 5, B's seq is the highest for (f, fbn) and recovery takes
 * it (the write happened, with its size).  Several blocks of one call share
 * the two fences; each block is atomic on its own.
 *
 * Invariants
 *   B1. Bytes of a cached copy past the file's size are zero; bytes of the
 *       disk copy at or past disk_limit are never read as file content.
 *   B2. A block pinned by a mapping is written in place (the mapping must
 *       keep seeing it); such a write is not block-atomic, and a size it
 *       extends is recorded with a file-state record.
 *   B3. Truncation (rio__fc_truncate) commits with a file-state record
 *       (size, seq) first, then makes the descriptors past the end durably
 *       FREE before returning, so at recovery only the newest file-state
 *       record can have dead descriptors to filter (L5).
 *
 * Deliberately broken build (crash test only): RIO_BROKEN_FC_NOPERSIST
 * copies the data without flushing it, so a write is acknowledged before
 * its bytes are durable.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>

#include "fc_int.h"

#define FC_MAX_BYTES (FC_MAX_FBN * FC_BS)

static void note_fbn(struct fc_file *f, uint64_t fbn);

uint64_t
rio__fc_desc_checksum(const struct rio_fc_desc *d)
{
	return rio_checksum((const char *)d + 8, 48, RIO_FC_DESC_CSUM_SEED);
}

/* Copy into a block that no state word names yet, flushed: fence 1 (the
 * caller's drain) makes it durable before the commit. */
static void
copy_in(rio_fc_cache *c, void *dst, const void *src, size_t n)
{
#ifdef RIO_BROKEN_FC_NOPERSIST
	(void)c;
	memcpy(dst, src, n); /* broken: never flushed */
#else
	rio_memcpy_nodrain(c->pool, dst, src, n);
#endif
}

static void
zero_in(rio_fc_cache *c, void *dst, size_t n)
{
	memset(dst, 0, n);
#ifndef RIO_BROKEN_FC_NOPERSIST
	/* As copy_in: durable at the caller's fence 1. */
	rio_flush(c->pool, dst, n);
#else
	(void)c;
#endif
}

void
rio__fc_desc_fill(rio_fc_cache *c, struct fc_file *f, uint32_t b,
	uint64_t fbn, uint64_t fsize)
{
	struct rio_fc_desc *d = fc_desc(c, b);
	struct fc_blk *blk = &c->blks[b];

	/* L1: only the fields; the state word still says FREE (step 3 of a
	 * write: B is a reserved block, step 1). */
	RIO_ASSERT(blk->state == FC_B_RESERVED &&
		fc_load8(&d->state) == RIO_FC_D_FREE, "L1");
	d->seq = fc_next_seq(c);
	d->fbn = fbn;
	d->fsize = fsize;
	d->file = f->slot;
	d->file_gen = f->gen;
	memset(d->reserved, 0, sizeof(d->reserved));
	d->checksum = rio__fc_desc_checksum(d);
	/* Durable at the caller's drain, before the state names them. */
	rio_flush(c->pool, &d->seq, sizeof(*d) - sizeof(d->state));
	blk->seq = d->seq;
	blk->fbn = fbn;
	blk->file = f->slot;
}

/* Read disk bytes [pos, pos+n) of f that are file content (B1). */
static int
read_disk(rio_fc_cache *c, struct fc_file *f, uint64_t pos, char *dst,
	size_t n)
{
	size_t got = 0, want = 0;
	int rc;

	if (pos < f->disk_limit)
		want = f->disk_limit - pos < n ? (size_t)(f->disk_limit - pos) : n;
	if (want > 0 && (rc = rio__fc_file_fd(c, f, false)) != 0)
		return rc;
	while (got < want) {
		ssize_t r = rio__sys.pread(f->fd, dst + got, want - got,
			(off_t)(pos + got));
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return rio__errno("read %s at %llu", f->abs,
				(unsigned long long)(pos + got));
		if (r == 0)
			break; /* shorter on disk: the rest reads as zeros */
		got += (size_t)r;
	}
	memset(dst + got, 0, n - got);
	return 0;
}

int
rio__fc_fill_from_disk(rio_fc_cache *c, struct fc_file *f, uint64_t fbn,
	uint32_t b)
{
	char *dst = fc_data(c, b);
	int rc = read_disk(c, f, fbn * FC_BS, dst, FC_BS);

	if (rc == 0) {
#ifndef RIO_BROKEN_FC_NOPERSIST
		/* The copy read in: durable at the caller's next drain,
		 * which precedes the state store naming it. */
		rio_flush(c->pool, dst, FC_BS);
#endif
	}
	return rc;
}

/* Keep a copy of block fbn that was missing, if a block can be had at
 * once.  f->lock held shared. */
static uint32_t
populate(rio_fc_cache *c, struct fc_file *f, uint64_t fbn, int *rc)
{
	struct rio_fc_desc *d;
	uint32_t b;

	*rc = 0;
	pthread_mutex_lock(&f->pop_lock);
	b = rio__fc_lookup(c, f->slot, fbn);
	if (b != FC_NONE)
		goto out;
	b = rio__fc_try_reserve(c);
	if (b == FC_NONE)
		goto out;
	*rc = rio__fc_fill_from_disk(c, f, fbn, b);
	if (*rc) {
		rio__fc_unreserve(c, &b, 1);
		b = FC_NONE;
		goto out;
	}
	rio__fc_desc_fill(c, f, b, fbn, f->size);
	/* The copy and its fields are durable before CLEAN names them. */
	rio_drain(c->pool);
	d = fc_desc(c, b);
	fc_store8(&d->state, RIO_FC_D_CLEAN);
	/* No drain needed: a copy of the disk may be lost in a crash. */
	rio_flush(c->pool, &d->state, sizeof(d->state));
	rio__fc_index_add(c, b);
	note_fbn(f, fbn);
	pthread_mutex_lock(&c->lock);
	rio__fc_mark_clean(c, f, b);
	f->ncached++;
	pthread_mutex_unlock(&c->lock);
out:
	pthread_mutex_unlock(&f->pop_lock);
	return b;
}

int
rio_fc_pread(rio_fc_file *h, void *buf, size_t n, uint64_t off,
	size_t *nread)
{
	rio_fc_cache *c = h->c;
	struct fc_file *f = h->f;
	char *dst = buf;
	size_t done = 0;
	uint64_t size;
	int rc;

	if (nread)
		*nread = 0;
	rc = rio__fc_check(c);
	if (rc)
		return rc;
	if (h->accmode == O_WRONLY)
		return rio__err(-EBADF, "read %s: opened write-only", f->abs);
	if (buf == NULL && n > 0)
		return rio__err(-EINVAL, "read %s: NULL buffer", f->abs);
	FC_STAT_ADD(c, reads, 1);
	pthread_rwlock_rdlock(&f->lock);
	size = f->size;
	if (off < size && n > size - off)
		n = (size_t)(size - off);
	while (off < size && done < n) {
		uint64_t pos = off + done, fbn = pos / FC_BS;
		size_t boff = (size_t)(pos % FC_BS);
		size_t len = FC_BS - boff < n - done ? FC_BS - boff : n - done;
		uint32_t b = rio__fc_lookup(c, f->slot, fbn);

		if (b == FC_NONE) {
			b = populate(c, f, fbn, &rc);
			if (rc)
				break;
			if (b == FC_NONE) {
				FC_STAT_ADD(c, read_misses, 1);
				rc = read_disk(c, f, pos, dst + done, len);
				if (rc)
					break;
				done += len;
				continue;
			}
			FC_STAT_ADD(c, read_misses, 1);
		} else {
			FC_STAT_ADD(c, read_hits, 1);
			rio__fc_touch(c, b);
		}
		memcpy(dst + done, fc_data(c, b) + boff, len);
		done += len;
	}
	pthread_rwlock_unlock(&f->lock);
	if (nread)
		*nread = done;
	return rc;
}

/* One chunk of a write: at most `cnt` blocks, f->lock held exclusively. */
static int
write_chunk(rio_fc_cache *c, struct fc_file *f, const char *src, uint64_t off,
	uint64_t len, const uint32_t *res, uint32_t *used)
{
	uint32_t newb[FC_RESERVE_CHUNK], oldb[FC_RESERVE_CHUNK];
	uint32_t inplace[FC_RESERVE_CHUNK];
	uint32_t k = 0, ni = 0;
	uint64_t end = off + len, pos = off;
	uint64_t newsize = f->size > end ? f->size : end;
	const rio_pool *p = c->pool;
	int rc;

	while (pos < end) {
		uint64_t fbn = pos / FC_BS;
		size_t boff = (size_t)(pos % FC_BS);
		size_t blen = FC_BS - boff < end - pos ? FC_BS - boff :
							(size_t)(end - pos);
		uint32_t old = rio__fc_lookup(c, f->slot, fbn), b;

		if (old != FC_NONE && c->blks[old].pins > 0) {
			/* B2: mapped: in place. */
			copy_in(c, fc_data(c, old) + boff, src + (pos - off),
				blen);
			inplace[ni++] = old;
			pos += blen;
			continue;
		}
		b = res[(*used)++];
		if (blen < FC_BS) {
			char *dst = fc_data(c, b);
			if (old != FC_NONE) {
				copy_in(c, dst, fc_data(c, old), boff);
				copy_in(c, dst + boff + blen,
					fc_data(c, old) + boff + blen,
					FC_BS - boff - blen);
			} else if ((rc = rio__fc_fill_from_disk(c, f, fbn, b))) {
				/* Nothing committed: every reserved block
				 * goes back, its descriptor still FREE. */
				*used = 0;
				return rc;
			}
		}
		copy_in(c, fc_data(c, b) + boff, src + (pos - off), blen);
		rio__fc_desc_fill(c, f, b, fbn, newsize);
		newb[k] = b;
		oldb[k] = old;
		k++;
		pos += blen;
	}
	/* Fence 1: the new copies and their descriptor fields are durable
	 * before any state word names them (L1, L2). */
	rio_drain(p);
	for (uint32_t i = 0; i < k; i++) {
		struct rio_fc_desc *d = fc_desc(c, newb[i]);
		/* L2, step 5: a new copy goes from FREE straight to DIRTY;
		 * the block it replaces is another one. */
		RIO_ASSERT(fc_load8(&d->state) == RIO_FC_D_FREE &&
			newb[i] != oldb[i], "L2");
		fc_store8(&d->state, RIO_FC_D_DIRTY);
		rio_flush(p, &d->state, sizeof(d->state)); /* fence 2 */
	}
	for (uint32_t i = 0; i < ni; i++) {
		struct rio_fc_desc *d = fc_desc(c, inplace[i]);
		if (fc_load8(&d->state) != RIO_FC_D_DIRTY) {
			fc_store8(&d->state, RIO_FC_D_DIRTY);
			/* A mapped clean block now differs from the disk:
			 * durable at fence 2, with the bytes. */
			rio_flush(p, &d->state, sizeof(d->state));
		}
	}
	/* Fence 2: the commit.  Each new copy is now the copy of its block
	 * with the highest seq on media; the write is durable. */
	rio_drain(p);
	if (ni > 0 && newsize > f->size)
		rio__fc_fst_write(c, f, newsize, f->disk_limit, NULL); /* B2 */
	rio_durable_point(p, "rio_fc_pwrite");

	for (uint32_t i = 0; i < k; i++) {
		if (oldb[i] != FC_NONE)
			rio__fc_index_replace(c, oldb[i], newb[i]);
		else
			rio__fc_index_add(c, newb[i]);
		note_fbn(f, c->blks[newb[i]].fbn);
	}
	pthread_mutex_lock(&c->lock);
	for (uint32_t i = 0; i < k; i++) {
		if (oldb[i] != FC_NONE)
			rio__fc_supersede(c, oldb[i]);
		else
			f->ncached++;
		rio__fc_mark_dirty(c, f, newb[i]);
	}
	for (uint32_t i = 0; i < ni; i++)
		if (c->blks[inplace[i]].state != FC_B_DIRTY)
			rio__fc_mark_dirty(c, f, inplace[i]);
	pthread_mutex_unlock(&c->lock);
	f->size = newsize;
	FC_STAT_ADD(c, block_writes, k + ni);
	return 0;
}

int
rio_fc_pwrite(rio_fc_file *h, const void *buf, size_t n, uint64_t off)
{
	rio_fc_cache *c = h->c;
	struct fc_file *f = h->f;
	const char *src = buf;
	int rc;

	rc = rio__fc_check(c);
	if (rc)
		return rc;
	if (h->accmode == O_RDONLY)
		return rio__err(-EBADF, "write %s: opened read-only", f->abs);
	if (n == 0)
		return 0;
	if (buf == NULL)
		return rio__err(-EINVAL, "write %s: NULL buffer", f->abs);
	if (off > FC_MAX_BYTES || n > FC_MAX_BYTES - off)
		return rio__err(-EFBIG,
			"write %s: %zu bytes at %llu go past the largest "
			"file the cache keeps (%llu bytes)", f->abs, n,
			(unsigned long long)off,
			(unsigned long long)FC_MAX_BYTES);
	rc = rio__fc_size_limit(c, f, off + n, "write");
	if (rc)
		return rc;
	FC_STAT_ADD(c, writes, 1);
	while (n > 0) {
		uint32_t res[FC_RESERVE_CHUNK], used = 0;
		uint64_t first = off / FC_BS, last = (off + n - 1) / FC_BS;
		uint32_t cnt = last - first + 1 < FC_RESERVE_CHUNK ?
			(uint32_t)(last - first + 1) : FC_RESERVE_CHUNK;
		uint64_t len = (first + cnt) * FC_BS - off;

		if (len > n)
			len = n;
		/* A3: reserve before the file lock. */
		rc = rio__fc_reserve(c, cnt, true, res);
		if (rc)
			return rc;
		pthread_rwlock_wrlock(&f->lock);
		rc = write_chunk(c, f, src, off, len, res, &used);
		pthread_rwlock_unlock(&f->lock);
		/* Blocks not committed are still durably FREE. */
		rio__fc_unreserve(c, res + used, cnt - used);
		if (rc)
			return rc;
		src += len;
		off += len;
		n -= (size_t)len;
	}
	return 0;
}

int
rio_fc_fsync(rio_fc_file *h)
{
	int rc = rio__fc_check(h->c);

	if (rc == 0)
		FC_STAT_ADD(h->c, fsyncs, 1);
	return rc;
}

int
rio_fc_size(rio_fc_file *h, uint64_t *size)
{
	/* Relaxed: a snapshot of one word, stored whole under the file's
	 * lock; the caller orders nothing by it. */
	*size = __atomic_load_n(&h->f->size, __ATOMIC_RELAXED);
	return 0;
}

void
rio__fc_drop_blocks(rio_fc_cache *c, struct fc_file *f, uint64_t from)
{
	if (f->ncached > 0 && from < f->fbn_end) {
		if (f->fbn_end - from < c->nblocks / 4) {
			/* A small file: look its blocks up. */
			for (uint64_t fbn = from; fbn < f->fbn_end; fbn++) {
				uint32_t b = rio__fc_lookup(c, f->slot, fbn);
				if (b != FC_NONE)
					rio__fc_drop(c, b);
			}
		} else {
			for (uint32_t b = 0; b < c->nblocks; b++) {
				struct fc_blk *blk = &c->blks[b];
				if (blk->in_index && blk->file == f->slot &&
				    blk->fbn >= from)
					rio__fc_drop(c, b);
			}
		}
	}
	if (f->fbn_end > from)
		f->fbn_end = from;
}

/* A block of f is now in the index. */
static void
note_fbn(struct fc_file *f, uint64_t fbn)
{
	if (fbn >= f->fbn_end)
		f->fbn_end = fbn + 1;
}

/* Is any block at or past fbn mapped?  f->lock held. */
static bool
mapped_from(rio_fc_cache *c, struct fc_file *f, uint64_t fbn)
{
	if (f->nmapped == 0)
		return false;
	for (uint32_t b = 0; b < c->nblocks; b++) {
		struct fc_blk *blk = &c->blks[b];
		if (blk->in_index && blk->file == f->slot && blk->fbn >= fbn &&
		    blk->pins > 0)
			return true;
	}
	return false;
}

/* Zero the tail of the block holding the new end, copy-on-write. */
static void
zero_tail(rio_fc_cache *c, struct fc_file *f, uint64_t size, uint32_t nb)
{
	uint64_t fbn = size / FC_BS;
	size_t keep = (size_t)(size % FC_BS);
	uint32_t old = rio__fc_lookup(c, f->slot, fbn);
	struct rio_fc_desc *d = fc_desc(c, nb);

	copy_in(c, fc_data(c, nb), fc_data(c, old), keep);
	zero_in(c, fc_data(c, nb) + keep, FC_BS - keep);
	rio__fc_desc_fill(c, f, nb, fbn, size);
	/* The zeroed copy and its fields, then its commit (as a write). */
	rio_drain(c->pool);
	fc_store8(&d->state, RIO_FC_D_DIRTY);
	rio_persist(c->pool, &d->state, sizeof(d->state));
	rio__fc_index_replace(c, old, nb);
	pthread_mutex_lock(&c->lock);
	rio__fc_supersede(c, old);
	rio__fc_mark_dirty(c, f, nb);
	pthread_mutex_unlock(&c->lock);
}

int
rio__fc_truncate(rio_fc_cache *c, struct fc_file *f, uint64_t size)
{
	uint32_t res = FC_NONE;
	bool tail = size % FC_BS != 0;
	int rc = 0;

	if (size > FC_MAX_BYTES)
		return rio__err(-EFBIG, "truncate %s to %llu: larger than the "
					"largest file the cache keeps", f->abs,
			(unsigned long long)size);
	if (size > f->size && (rc = rio__fc_size_limit(c, f, size,
				       "truncate")) != 0)
		return rc;
	if (tail && (rc = rio__fc_reserve(c, 1, true, &res)) != 0)
		return rc;
	pthread_rwlock_wrlock(&f->lock);
	if (size < f->size) {
		uint64_t cut = (size + FC_BS - 1) / FC_BS;
		uint64_t limit = f->disk_limit < size ? f->disk_limit : size;

		if (mapped_from(c, f, size / FC_BS)) {
			rc = rio__err(-EBUSY, "truncate %s to %llu: blocks "
					      "past the new end are mapped",
				f->abs, (unsigned long long)size);
			goto out;
		}
		/* B3: the commit of the truncate... */
		rio__fc_fst_write(c, f, size, limit, NULL);
		f->size = size;
		f->disk_limit = limit;
		if (f->wb_low > size)
			f->wb_low = size;
		/* ...then the dead copies durably FREE before we return. */
		pthread_mutex_lock(&c->lock);
		rio__fc_reclaim_stale(c);
		rio__fc_drop_blocks(c, f, cut);
		rio__fc_reclaim_stale(c);
		pthread_mutex_unlock(&c->lock);
		if (tail && rio__fc_lookup(c, f->slot, size / FC_BS) != FC_NONE) {
			zero_tail(c, f, size, res); /* B1 */
			res = FC_NONE;
		}
	} else if (size > f->size) {
		/* Growing: the new bytes read as zeros already (B1). */
		rio__fc_fst_write(c, f, size, f->disk_limit, NULL);
		f->size = size;
	}
	rio_durable_point(c->pool, "rio_fc_truncate");
out:
	pthread_rwlock_unlock(&f->lock);
	if (res != FC_NONE)
		rio__fc_unreserve(c, &res, 1);
	return rc;
}

int
rio_fc_truncate(rio_fc_file *h, uint64_t size)
{
	int rc = rio__fc_check(h->c);

	if (rc)
		return rc;
	if (h->accmode == O_RDONLY)
		return rio__err(-EBADF, "truncate %s: opened read-only",
			h->f->abs);
	return rio__fc_truncate(h->c, h->f, size);
}
