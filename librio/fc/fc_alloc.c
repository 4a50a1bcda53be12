/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_alloc.c -- data blocks: lists, reservation, eviction, reclaiming
 * stale copies, and backpressure
 *
 * Every block is on exactly one list, or reserved by a writer:
 *   free      descriptor durably FREE, not in the index, no reader can be
 *             walking through its index node (X3);
 *   clean     current copy equal to the disk's; eviction candidates, in
 *             CLOCK order (reads set a reference bit instead of taking
 *             c->lock to move the block);
 *   dirty     current copy newer than the disk's, on its file's list;
 *   stale     a superseded copy: its descriptor still says DIRTY or CLEAN
 *             on media, with a lower seq than the current copy;
 *   dropped   a current copy taken out of the cache (evicted, truncated
 *             away, its file unlinked or forgotten).
 *
 * Invariants
 *   A1. A block leaves `free` only through a reservation, and returns only
 *       through rio__fc_reclaim_stale (or unreserve, unused).
 *   A2. (L3) rio__fc_reclaim_stale makes every stale descriptor durably
 *       FREE before any dropped one: the copy that was current can never
 *       lose to an older one at recovery.
 *   A3. Writers reserve before taking their file's lock, so a writer that
 *       waits for write-back holds no file lock and write-back can always
 *       make progress.  A writer waits while the dirty blocks (other than
 *       those pinned by writable mappings) would exceed dirty_max.
 *   A4. A reservation that cannot be met after a write-back pass fails
 *       with that pass's error (a failing disk) or -ENOSPC (everything is
 *       pinned): writers never wait forever and never lose data.
 *
 * Batching: superseded copies are not freed one by one (that would cost a
 * third fence per write); they collect on `stale` and are freed together
 * when the free list runs dry, with two fences and one RCU grace period
 * per batch.
 */
#include <errno.h>

#include "fc_int.h"

struct fc_list *
rio__fc_list_of(rio_fc_cache *c, uint32_t b)
{
	struct fc_blk *blk = &c->blks[b];

	switch (blk->list) {
	case FC_L_FREE:
		return &c->free;
	case FC_L_CLEAN:
		return &c->clean;
	case FC_L_STALE:
		return &c->stale;
	case FC_L_DROPPED:
		return &c->dropped;
	case FC_L_DIRTY:
		return &c->files[blk->file]->dirty;
	default:
		return NULL;
	}
}

void
rio__fc_list_push(rio_fc_cache *c, struct fc_list *l, uint8_t id, uint32_t b)
{
	struct fc_blk *blk = &c->blks[b];

	blk->list = id;
	blk->prev = l->tail;
	blk->next = FC_NONE;
	if (l->tail != FC_NONE)
		c->blks[l->tail].next = b;
	else
		l->head = b;
	l->tail = b;
	l->n++;
}

void
rio__fc_list_remove(rio_fc_cache *c, struct fc_list *l, uint32_t b)
{
	struct fc_blk *blk = &c->blks[b];

	if (blk->prev != FC_NONE)
		c->blks[blk->prev].next = blk->next;
	else
		l->head = blk->next;
	if (blk->next != FC_NONE)
		c->blks[blk->next].prev = blk->prev;
	else
		l->tail = blk->prev;
	blk->prev = blk->next = FC_NONE;
	blk->list = FC_L_NONE;
	l->n--;
}

static void
unlist(rio_fc_cache *c, uint32_t b)
{
	struct fc_list *l = rio__fc_list_of(c, b);

	if (l != NULL)
		rio__fc_list_remove(c, l, b);
}

void
rio__fc_reclaim_stale(rio_fc_cache *c)
{
	const rio_pool *p = c->pool;
	struct fc_list *lists[2] = { &c->stale, &c->dropped };
	uint32_t b;

	if (c->stale.n == 0 && c->dropped.n == 0)
		return;
	for (int k = 0; k < 2; k++) {
		for (b = lists[k]->head; b != FC_NONE; b = c->blks[b].next) {
			struct rio_fc_desc *d = fc_desc(c, b);
			fc_store8(&d->state, RIO_FC_D_FREE);
			/* Durable at the drain below. */
			rio_flush(p, &d->state, sizeof(d->state));
		}
		/* k == 0: the superseded copies are durably FREE before any
		 * current copy is (A2): a crash between the two drains
		 * leaves the current copies, which win by seq anyway.
		 * k == 1: the dropped copies are durably FREE before their
		 * blocks can be reserved and overwritten. */
		rio_drain(p);
	}
	/* X3: no lookup still walks through these blocks' index nodes. */
	rio__fc_index_sync();
	for (int k = 0; k < 2; k++) {
		while ((b = lists[k]->head) != FC_NONE) {
			/* A2: only stale and dropped copies, durably FREE
			 * by the drains above. */
			RIO_ASSERT(c->blks[b].state == FC_B_STALE, "A2");
			rio__fc_list_remove(c, lists[k], b);
			c->blks[b].state = FC_B_FREE;
			c->blks[b].file = FC_NONE;
			c->blks[b].ref = 0;
			rio__fc_list_push(c, &c->free, FC_L_FREE, b);
		}
	}
	pthread_cond_broadcast(&c->space_cond);
}

/*
 * Take up to `want` (at least one batch) clean blocks out of the cache.
 * A victim's file lock is only tried: the caller may hold c->lock and
 * (a reader populating) its own file's lock.
 */
static uint64_t
evict_clean(rio_fc_cache *c, uint64_t want)
{
	uint64_t n = 0, scanned = 0, limit = c->clean.n * 2;
	uint32_t b, next;

	if (want < FC_EVICT_BATCH)
		want = FC_EVICT_BATCH;
	/* A2 needs the superseded copies gone before current ones go. */
	rio__fc_reclaim_stale(c);
	for (b = c->clean.head; b != FC_NONE && n < want && scanned < limit;
		b = next, scanned++) {
		struct fc_blk *blk = &c->blks[b];
		struct fc_file *f = c->files[blk->file];

		next = blk->next;
		if (blk->pins)
			continue;
		/* Relaxed: ref is a hint set by readers without the lock
		 * (rio__fc_touch); a stale value only moves a block's
		 * eviction by one pass. */
		if (__atomic_load_n(&blk->ref, __ATOMIC_RELAXED)) {
			/* second chance */
			__atomic_store_n(&blk->ref, 0, __ATOMIC_RELAXED);
			rio__fc_list_remove(c, &c->clean, b);
			rio__fc_list_push(c, &c->clean, FC_L_CLEAN, b);
			if (next == FC_NONE)
				next = c->clean.head;
			continue;
		}
		if (pthread_rwlock_trywrlock(&f->lock) != 0)
			continue;
		rio__fc_drop(c, b);
		pthread_rwlock_unlock(&f->lock);
		n++;
	}
	if (n) {
		FC_STAT_ADD(c, evictions, n);
		rio__fc_reclaim_stale(c);
	}
	return n;
}

static void
take(rio_fc_cache *c, uint32_t n, uint32_t *out)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t b = c->free.head;
		/* A1: the free list holds FREE blocks only. */
		RIO_ASSERT(b != FC_NONE && c->blks[b].state == FC_B_FREE, "A1");
		rio__fc_list_remove(c, &c->free, b);
		c->blks[b].state = FC_B_RESERVED;
		out[i] = b;
	}
	c->nreserved += n;
}

static uint64_t
dirty_effective(const rio_fc_cache *c)
{
	return c->ndirty > c->nwpinned ? c->ndirty - c->nwpinned : 0;
}

/* Try to have n free blocks without waiting for write-back. */
static bool
space_for(rio_fc_cache *c, uint32_t n, bool writer)
{
	if (writer && dirty_effective(c) + n > c->dirty_max)
		return false;
	if (c->free.n < n)
		rio__fc_reclaim_stale(c);
	if (c->free.n < n)
		evict_clean(c, n - c->free.n);
	return c->free.n >= n;
}

int
rio__fc_reserve(rio_fc_cache *c, uint32_t n, bool writer, uint32_t *out)
{
	uint64_t last_dirty = UINT64_MAX, last_room = UINT64_MAX;
	bool waited = false;
	int stalled = 0, rc;

	pthread_mutex_lock(&c->lock);
	for (;;) {
		uint64_t passes;

		rc = rio__fc_check(c);
		if (rc)
			break;
		if (space_for(c, n, writer)) {
			take(c, n, out);
			break;
		}
		if (waited && c->wb_pass_error) {
			/* A4: the disk cannot take the dirty blocks. */
			rc = rio__err(c->wb_pass_error,
				"file cache full (%llu of %llu blocks dirty) "
				"and write-back fails: %s",
				(unsigned long long)c->ndirty,
				(unsigned long long)c->nblocks,
				rio_strerror(c->wb_pass_error));
			break;
		}
		if (waited && dirty_effective(c) == 0 && c->clean.n == 0 &&
		    c->nreserved == 0) {
			rc = rio__err(-ENOSPC,
				"file cache full: %llu blocks pinned by "
				"mappings", (unsigned long long)c->nwpinned);
			break;
		}
		/* A4: passes that change nothing (the dirty blocks belong to
		 * files in conflict, or are pinned) end the wait. */
		if (waited && c->ndirty == last_dirty &&
		    c->free.n + c->clean.n == last_room) {
			if (++stalled >= 3) {
				rc = rio__err(-ENOSPC,
					"file cache full: %llu dirty blocks "
					"cannot be written back (files "
					"changed behind the cache, or "
					"mapped)", (unsigned long long)c->ndirty);
				break;
			}
		} else {
			stalled = 0;
		}
		last_dirty = c->ndirty;
		last_room = c->free.n + c->clean.n;
		if (!waited)
			FC_STAT_ADD(c, waits, 1);
		waited = true;
		/* A3: we hold no file lock; write-back can run. */
		passes = c->wb_passes;
		if (c->wb_on) {
			c->space_waiters++;
			rio__fc_wb_kick(c);
			while (c->wb_passes == passes && c->wb_on)
				pthread_cond_wait(&c->space_cond, &c->lock);
			c->space_waiters--;
		} else {
			pthread_mutex_unlock(&c->lock);
			rio__fc_wb_pass(c, true);
			pthread_mutex_lock(&c->lock);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

uint32_t
rio__fc_try_reserve(rio_fc_cache *c)
{
	uint32_t b = FC_NONE;

	pthread_mutex_lock(&c->lock);
	if (space_for(c, 1, false))
		take(c, 1, &b);
	pthread_mutex_unlock(&c->lock);
	return b;
}

void
rio__fc_unreserve(rio_fc_cache *c, const uint32_t *b, uint32_t n)
{
	if (n == 0)
		return;
	pthread_mutex_lock(&c->lock);
	for (uint32_t i = 0; i < n; i++) {
		/* Its descriptor was never published: still durably FREE. */
		RIO_ASSERT(c->blks[b[i]].state == FC_B_RESERVED &&
			fc_load8(&fc_desc(c, b[i])->state) == RIO_FC_D_FREE,
			"A1");
		c->blks[b[i]].state = FC_B_FREE;
		c->blks[b[i]].file = FC_NONE;
		rio__fc_list_push(c, &c->free, FC_L_FREE, b[i]);
	}
	c->nreserved -= n;
	pthread_cond_broadcast(&c->space_cond);
	pthread_mutex_unlock(&c->lock);
}

void
rio__fc_mark_dirty(rio_fc_cache *c, struct fc_file *f, uint32_t b)
{
	struct fc_blk *blk = &c->blks[b];

	/* L2: DIRTY in DRAM only once the commit word says DIRTY (the
	 * caller's fence 2), and never for a copy that is not live. */
	RIO_ASSERT(blk->state != FC_B_FREE && blk->state != FC_B_STALE, "L2");
	RIO_ASSERT(fc_load8(&fc_desc(c, b)->state) == RIO_FC_D_DIRTY, "L2");
	if (blk->state == FC_B_RESERVED)
		c->nreserved--;
	else
		unlist(c, b);
	blk->state = FC_B_DIRTY;
	rio__fc_list_push(c, &f->dirty, FC_L_DIRTY, b);
	c->ndirty++;
	if (f->dirty.n == 1)
		f->first_dirty_ns = rio_now_ns(CLOCK_MONOTONIC);
}

void
rio__fc_mark_clean(rio_fc_cache *c, struct fc_file *f, uint32_t b)
{
	struct fc_blk *blk = &c->blks[b];

	/* L1: CLEAN in DRAM only once the commit word says CLEAN (a copy
	 * read in, or written back: W1). */
	RIO_ASSERT(blk->state != FC_B_FREE && blk->state != FC_B_STALE, "L1");
	RIO_ASSERT(fc_load8(&fc_desc(c, b)->state) == RIO_FC_D_CLEAN, "L1");
	if (blk->state == FC_B_RESERVED) {
		c->nreserved--;
	} else {
		if (blk->state == FC_B_DIRTY)
			c->ndirty--;
		unlist(c, b);
	}
	(void)f;
	blk->state = FC_B_CLEAN;
	blk->ref = 0;
	rio__fc_list_push(c, &c->clean, FC_L_CLEAN, b);
	if (c->space_waiters)
		pthread_cond_broadcast(&c->space_cond);
}

void
rio__fc_supersede(rio_fc_cache *c, uint32_t b)
{
	struct fc_blk *blk = &c->blks[b];

	/* L2: only a live copy is superseded. */
	RIO_ASSERT(blk->state == FC_B_CLEAN || blk->state == FC_B_DIRTY, "L2");
	if (blk->state == FC_B_DIRTY)
		c->ndirty--;
	unlist(c, b);
	blk->state = FC_B_STALE;
	blk->in_index = false;
	rio__fc_list_push(c, &c->stale, FC_L_STALE, b);
}

void
rio__fc_drop(rio_fc_cache *c, uint32_t b)
{
	struct fc_blk *blk = &c->blks[b];
	struct fc_file *f = c->files[blk->file];

	rio__fc_index_del(c, b);
	if (blk->state == FC_B_DIRTY)
		c->ndirty--;
	unlist(c, b);
	blk->state = FC_B_STALE;
	rio__fc_list_push(c, &c->dropped, FC_L_DROPPED, b);
	if (f != NULL && f->ncached > 0)
		f->ncached--;
}

void
rio__fc_touch(rio_fc_cache *c, uint32_t b)
{
	/* Relaxed: a second-chance hint the evictor reads without order. */
	__atomic_store_n(&c->blks[b].ref, 1, __ATOMIC_RELAXED);
}
