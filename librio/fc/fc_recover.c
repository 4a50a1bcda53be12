/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_recover.c -- opening a cache: validate everything, rebuild the
 * volatile state, and after a crash write every dirty block back
 *
 * rio__fc_load() reads the whole pool and writes nothing: a record or a
 * descriptor that is not exactly one of its legal states fails the open
 * with RIO_ECORRUPT, leaving the pool as it was.  It rebuilds the index
 * by taking, for each (file, fbn), the live descriptor with the highest
 * seq (L2); the others are stale.  It then applies L5: a file's size is
 * its newest file-state record's, raised by the fsize of descriptors
 * newer than that record, and descriptors older than that record past its
 * size are dead (a truncate that crashed before freeing them, B3).
 *
 * rio__fc_recover() then, in this order:
 *   1. marks the superblock MOUNTED (the first write of an open);
 *   2. frees the stale and dead descriptors (stale first, A2);
 *   3. finishes interrupted unlinks (F4): the name is removed only if it
 *      still reaches the recorded inode;
 *   4. writes back every file with dirty blocks or a changed size -- unless
 *      its disk copy changed behind the cache: identity differs from the
 *      newest file-state record and the record does not say WB_ACTIVE (our
 *      own write-back was interrupted), or the pool came from its image
 *      (an image may be older than the disk).  Such a file is a conflict:
 *      its blocks are kept, and opening it fails until rio_fc_forget().
 *      A file whose write-back fails (a full disk, EIO) keeps its blocks
 *      and is retried by the write-back thread (W4): one file never keeps
 *      the cache from opening, nor the other files from recovery;
 *   5. after a crash, drops every clean block (the cache starts cold) of
 *      the files written back;
 *   6. fsyncs the directories of UNLINKED and NEW records (settle).
 * Invariants
 *   V1. Nothing is written before every record and descriptor has been
 *       validated (a corrupt pool is left as it was).
 *   V2. Recovery is idempotent: a crash during it is recovered by running
 *       it again (write-back rewrites whole blocks; nothing is freed
 *       before its data is on disk, or before the copies it supersedes).
 *   V3. A disk copy that changed behind the cache is never overwritten.
 *
 * Deliberately broken build (crash test only): RIO_BROKEN_FC_ORDER keeps
 * the copy with the lowest seq when a block has several.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fc_int.h"

static int
corrupt(const rio_fc_cache *c, const char *fmt, uint64_t a, uint64_t b)
{
	char what[160];

	snprintf(what, sizeof(what), fmt, (unsigned long long)a,
		(unsigned long long)b);
	return rio__err(RIO_ECORRUPT, "file cache %s: %s; nothing was changed",
		rio_pool_path(c->pool), what);
}

static bool
path_ok(const struct rio_fc_frec *r)
{
	const char *p = r->path;
	size_t n = r->path_len;

	if (n == 0 || n >= RIO_FC_PATH_MAX || p[n] != '\0' ||
	    memchr(p, '\0', n) != NULL || p[0] == '/')
		return false;
	for (size_t i = n; i < RIO_FC_PATH_MAX; i++)
		if (p[i] != '\0')
			return false;
	/* N2: no "." or ".." components, no empty ones. */
	for (const char *s = p; s != NULL && *s;) {
		const char *e = strchr(s, '/');
		size_t len = e ? (size_t)(e - s) : strlen(s);
		if (len == 0 || (len == 1 && s[0] == '.') ||
		    (len == 2 && s[0] == '.' && s[1] == '.'))
			return false;
		s = e ? e + 1 : NULL;
	}
	return true;
}

static int
load_files(rio_fc_cache *c, uint64_t *maxseq)
{
	for (uint32_t s = 0; s < c->nfiles; s++) {
		const struct rio_fc_frec *r = &c->frecs[s];
		uint64_t st = fc_load8(&r->state);
		struct rio_fc_fstate fs;
		struct fc_file *f;
		int k;

		if (st == RIO_FC_F_FREE)
			continue;
		if (st != RIO_FC_F_LIVE && st != RIO_FC_F_UNLINKED)
			return corrupt(c, "file record %llu has state %016llx",
				s, st);
		if (r->checksum != rio__fc_frec_checksum(r))
			return corrupt(c, "file record %llu: checksum "
					  "mismatch (%016llx)", s, r->checksum);
		if (!path_ok(r) || (r->flags & ~RIO_FC_FF_KNOWN) ||
		    r->seq == 0)
			return corrupt(c, "file record %llu: invalid fields "
					  "(flags %llx)", s, r->flags);
		k = rio__fc_fst_pick(r, &fs);
		if (k < 0)
			return corrupt(c, "file record %llu: no valid file "
					  "state (%llu)", s, 0);
		f = rio__fc_file_new(c, s, r->path);
		if (f == NULL)
			return rio__err(-ENOMEM, "out of memory");
		f->gen = r->gen;
		f->rec_seq = r->seq;
		f->fst = fs;
		f->fst_slot = k;
		f->size = fs.size;
		f->disk_limit = fs.disk_limit;
		f->unlinked = st == RIO_FC_F_UNLINKED;
		c->files[s] = f;
		c->nfiles_used++;
		if (!f->unlinked) {
			if (rio__fc_file_find(c, f->rel) != NULL)
				return corrupt(c, "file record %llu names a file "
						  "another record names (%llu)",
					s, 0);
			rio__fc_file_hash_add(c, f);
		}
		if (r->seq > *maxseq)
			*maxseq = r->seq;
		if (fs.seq > *maxseq)
			*maxseq = fs.seq;
	}
	return 0;
}

/* Is copy b newer than the current copy cur of the same block?  L2. */
static bool
wins(const rio_fc_cache *c, uint32_t b, uint32_t cur)
{
	bool newer = c->blks[b].seq > c->blks[cur].seq;
#ifdef RIO_BROKEN_FC_ORDER
	newer = !newer; /* broken: the older copy is replayed */
#endif
	return newer;
}

static int
load_descs(rio_fc_cache *c, uint64_t *maxseq)
{
	for (uint32_t b = 0; b < c->nblocks; b++) {
		const struct rio_fc_desc *d = fc_desc(c, b);
		struct fc_blk *blk = &c->blks[b];
		uint64_t st = fc_load8(&d->state);
		struct fc_file *f;
		uint32_t cur;
		bool zero = true;

		blk->file = FC_NONE;
		blk->prev = blk->next = FC_NONE;
		if (st == RIO_FC_D_FREE) {
			blk->state = FC_B_FREE;
			rio__fc_list_push(c, &c->free, FC_L_FREE, b);
			continue;
		}
		if (st != RIO_FC_D_DIRTY && st != RIO_FC_D_CLEAN)
			return corrupt(c, "block descriptor %llu has state "
					  "%016llx", b, st);
		if (d->checksum != rio__fc_desc_checksum(d))
			return corrupt(c, "block descriptor %llu: checksum "
					  "mismatch (%016llx)", b, d->checksum);
		for (size_t i = 0; i < sizeof(d->reserved); i++)
			zero = zero && d->reserved[i] == 0;
		f = d->file < c->nfiles ? c->files[d->file] : NULL;
		if (f == NULL || f->gen != d->file_gen || d->fbn >= FC_MAX_FBN ||
		    d->seq == 0 || !zero)
			return corrupt(c, "block descriptor %llu names no live "
					  "file record (file %llu)", b, d->file);
		blk->fbn = d->fbn;
		blk->seq = d->seq;
		blk->file = d->file;
		blk->state = st == RIO_FC_D_DIRTY ? FC_B_DIRTY : FC_B_CLEAN;
		if (d->seq > *maxseq)
			*maxseq = d->seq;
		/* L5: a write newer than the file-state record committed
		 * its size with its block. */
		if (d->seq > f->fst.seq && d->fsize > f->size)
			f->size = d->fsize;
		cur = rio__fc_lookup(c, d->file, d->fbn);
		if (cur == FC_NONE) {
			rio__fc_index_add(c, b);
		} else if (c->blks[cur].seq == d->seq) {
			return corrupt(c, "block descriptors %llu and %llu "
					  "have the same seq", b, cur);
		} else if (wins(c, b, cur)) {
			rio__fc_index_replace(c, cur, b);
			c->blks[cur].state = FC_B_STALE;
			rio__fc_list_push(c, &c->stale, FC_L_STALE, cur);
		} else {
			blk->state = FC_B_STALE;
			rio__fc_list_push(c, &c->stale, FC_L_STALE, b);
		}
	}
	return 0;
}

int
rio__fc_load(rio_fc_cache *c)
{
	uint64_t maxseq = 0;
	int rc;

	rc = load_files(c, &maxseq);
	if (rc == 0)
		rc = load_descs(c, &maxseq);
	if (rc)
		return rc;
	for (uint32_t b = 0; b < c->nblocks; b++) {
		struct fc_blk *blk = &c->blks[b];
		struct fc_file *f;

		if (!blk->in_index)
			continue;
		f = c->files[blk->file];
		if (blk->seq < f->fst.seq && blk->fbn * FC_BS >= f->fst.size) {
			/* B3: truncated away before the crash. */
			rio__fc_index_del(c, b);
			blk->state = FC_B_STALE;
			rio__fc_list_push(c, &c->dropped, FC_L_DROPPED, b);
			continue;
		}
		f->ncached++;
		if (blk->fbn >= f->fbn_end)
			f->fbn_end = blk->fbn + 1;
		if (blk->state == FC_B_DIRTY) {
			rio__fc_list_push(c, &f->dirty, FC_L_DIRTY, b);
			c->ndirty++;
		} else {
			rio__fc_list_push(c, &c->clean, FC_L_CLEAN, b);
		}
	}
	c->seq = maxseq;
	return 0;
}

/* F4: finish an unlink interrupted by the crash. */
static void
finish_unlink(rio_fc_cache *c, struct fc_file *f)
{
	struct stat st;

	if (rio__sys.lstat(f->abs, &st) == 0 &&
	    (uint64_t)st.st_ino == f->fst.ino &&
	    (uint64_t)st.st_dev == f->fst.dev &&
	    rio__sys.unlink(f->abs) != 0)
		rio__notice("file cache: could not finish removing %s: %s",
			f->abs, strerror(errno));
	pthread_mutex_lock(&c->lock);
	rio__fc_file_get(f); /* R1: dropped by file_drop */
	pthread_mutex_unlock(&c->lock);
	rio__fc_file_drop(c, f, true);
}

static void
conflict(rio_fc_cache *c, struct fc_file *f, const char *why)
{
	f->conflict = true;
	FC_STAT_ADD(c, conflicts, 1);
	rio__notice("file cache: %s %s; its %llu unwritten blocks are kept "
		    "(rio_fc_open fails with RIO_ECHANGED; rio_fc_forget "
		    "drops them)", f->abs, why,
		(unsigned long long)f->dirty.n);
}

/* Step 4 for one file. */
static int
replay(rio_fc_cache *c, struct fc_file *f)
{
	uint64_t flags = fc_load8(&c->frecs[f->slot].flags);
	uint64_t n = f->dirty.n;
	struct stat st;
	int rc;

	if (rio__sys.stat(f->abs, &st) != 0) {
		if (errno != ENOENT || !(flags & RIO_FC_FF_NEW)) {
			conflict(c, f, "is missing on disk");
			return 0;
		}
		/* F5: made by the cache, its name not yet durable. */
		if (rio__fc_file_fd(c, f, true) != 0) {
			conflict(c, f, "cannot be recreated");
			return 0;
		}
	} else if (!rio__fc_fst_matches(&f->fst, &st) &&
		   (!(flags & RIO_FC_FF_WB_ACTIVE) || c->restored)) {
		conflict(c, f, c->restored && (flags & RIO_FC_FF_WB_ACTIVE) ?
				"was being written back when the cache image "
				"was taken, and has changed since" :
				"changed on disk since the cache last wrote it");
		return 0;
	}
	rc = rio__fc_wb_file(c, f);
	if (rc) {
		/* W4: this file's blocks stay in the cache, retried by the
		 * write-back thread; the others are recovered all the same
		 * and the cache opens. */
		rio__notice("file cache: recovery could not write %s back "
			    "(%s); its %llu blocks stay in the cache",
			f->abs, rio_errormsg(), (unsigned long long)n);
		return 0;
	}
	FC_STAT_ADD(c, recovered_blocks, n);
	FC_STAT_ADD(c, recovered_files, 1);
	return 0;
}

int
rio__fc_recover(rio_fc_cache *c)
{
	uint64_t st = fc_load8(&c->sb->state);
	bool crashed = st != RIO_FC_SB_CLEAN;
	int rc = 0;

	/* 1. The first write: the cache is in use until a clean close. */
	fc_store8(&c->sb->state, RIO_FC_SB_MOUNTED);
	rio_persist(c->pool, &c->sb->state, sizeof(c->sb->state));
	/* 2. */
	pthread_mutex_lock(&c->lock);
	rio__fc_reclaim_stale(c);
	pthread_mutex_unlock(&c->lock);
	/* 3, 4. */
	for (uint32_t s = 0; s < c->nfiles && rc == 0; s++) {
		struct fc_file *f = c->files[s];
		if (f == NULL)
			continue;
		if (f->unlinked)
			finish_unlink(c, f);
		else if (rio__fc_wb_needed(f))
			rc = replay(c, f);
	}
	if (rc)
		return rc;
	/* 5. Clean copies may hold stale bytes past a size that a crashed
	 * truncate left (B3): start cold rather than reason about them. */
	if (crashed) {
		for (uint32_t s = 0; s < c->nfiles; s++) {
			struct fc_file *f = c->files[s];
			if (f == NULL || f->conflict || f->unlinked ||
			    f->wb_error)
				continue; /* their blocks are their data */
			pthread_rwlock_wrlock(&f->lock);
			pthread_mutex_lock(&c->lock);
			rio__fc_drop_blocks(c, f, 0);
			pthread_mutex_unlock(&c->lock);
			pthread_rwlock_unlock(&f->lock);
		}
		pthread_mutex_lock(&c->lock);
		rio__fc_reclaim_stale(c);
		pthread_mutex_unlock(&c->lock);
	}
	/* 6. */
	rc = rio__fc_settle_dirs(c);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	for (uint32_t s = 0; s < c->nfiles; s++) {
		struct fc_file *f = c->files[s];
		if (f != NULL && f->fd >= 0 && !f->conflict) {
			rio__sys.close(f->fd);
			f->fd = -1;
		}
	}
	pthread_mutex_unlock(&c->lock);
	c->stats.recovered = crashed;
	if (crashed && c->stats.recovered_blocks)
		rio__notice("file cache %s: recovered after a crash: %llu "
			    "blocks of %llu files written back",
			rio_pool_path(c->pool),
			(unsigned long long)c->stats.recovered_blocks,
			(unsigned long long)c->stats.recovered_files);
	return 0;
}
