/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_index.c -- the volatile block index: (file slot, block number) -> the
 * block holding the current copy
 *
 * A liburcu lock-free hash table (cds_lfht) tied to the bulletproof RCU
 * flavour (urcu-bp), so any thread -- the application's, the write-back
 * thread -- can look up without registering.  The nodes are embedded in
 * the per-block array (struct fc_blk), so the index allocates nothing after
 * open.  The table has one bucket per data block and never resizes (no
 * resize worker thread, no call_rcu thread).
 *
 * Invariants
 *   X1. A block is in the index iff it holds the current copy of its
 *       (file, fbn): its descriptor is DIRTY or CLEAN and no live
 *       descriptor of the same block has a higher seq.
 *   X2. Entries of a file are added, replaced and removed only by a thread
 *       holding that file's lock exclusively (or at open, single-threaded);
 *       lookups are made under the file's lock, shared or exclusive, so the
 *       block found stays the current copy while the lock is held.
 *   X3. A node removed from the table (by replace or del) is not inserted
 *       again before an RCU grace period (rio__fc_index_sync), because a
 *       concurrent lookup of another file may still be walking through it.
 *       fc_alloc.c guarantees it: removed blocks go to the stale lists and
 *       reach the free list only after a grace period.
 */
#include <errno.h>
#include <stddef.h>

#include "fc_int.h"

struct fc_key {
	uint32_t slot;
	uint64_t fbn;
};

static unsigned long
key_hash(uint32_t slot, uint64_t fbn)
{
	uint64_t z = ((uint64_t)slot << 40) ^ fbn;

	z += 0x9e3779b97f4a7c15ull; /* splitmix64 finaliser */
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return (unsigned long)(z ^ (z >> 31));
}

static struct fc_blk *
node_blk(struct cds_lfht_node *n)
{
	return caa_container_of(n, struct fc_blk, node);
}

static int
key_match(struct cds_lfht_node *n, const void *key)
{
	const struct fc_key *k = key;
	const struct fc_blk *b = node_blk(n);

	return b->file == k->slot && b->fbn == k->fbn;
}

int
rio__fc_index_init(rio_fc_cache *c)
{
	unsigned long size = 1;

	while (size < c->nblocks)
		size <<= 1;
	c->index = cds_lfht_new_flavor(size, size, size, 0, &urcu_bp_flavor,
		NULL);
	if (c->index == NULL)
		return rio__err(-ENOMEM, "out of memory for the block index");
	return 0;
}

void
rio__fc_index_fini(rio_fc_cache *c)
{
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;

	if (c->index == NULL)
		return;
	urcu_bp_read_lock();
	cds_lfht_for_each(c->index, &it, n)
		cds_lfht_del(c->index, n);
	urcu_bp_read_unlock();
	/* No reader can be left: the cache is closing. */
	urcu_bp_synchronize_rcu();
	cds_lfht_destroy(c->index, NULL);
	c->index = NULL;
}

uint32_t
rio__fc_lookup(rio_fc_cache *c, uint32_t slot, uint64_t fbn)
{
	struct fc_key k = { slot, fbn };
	struct cds_lfht_iter it;
	struct cds_lfht_node *n;
	uint32_t b = FC_NONE;

	urcu_bp_read_lock();
	cds_lfht_lookup(c->index, key_hash(slot, fbn), key_match, &k, &it);
	n = cds_lfht_iter_get_node(&it);
	if (n != NULL)
		b = (uint32_t)(node_blk(n) - c->blks);
	urcu_bp_read_unlock();
	/* X2: the caller holds the file's lock, so b stays current. */
	return b;
}

void
rio__fc_index_add(rio_fc_cache *c, uint32_t b)
{
	struct fc_blk *blk = &c->blks[b];

	cds_lfht_node_init(&blk->node);
	urcu_bp_read_lock();
	cds_lfht_add(c->index, key_hash(blk->file, blk->fbn), &blk->node);
	urcu_bp_read_unlock();
	blk->in_index = true;
}

void
rio__fc_index_replace(rio_fc_cache *c, uint32_t old_b, uint32_t new_b)
{
	struct fc_blk *o = &c->blks[old_b], *n = &c->blks[new_b];
	struct fc_key k = { o->file, o->fbn };
	unsigned long h = key_hash(o->file, o->fbn);
	struct cds_lfht_iter it;

	cds_lfht_node_init(&n->node);
	urcu_bp_read_lock();
	cds_lfht_lookup(c->index, h, key_match, &k, &it);
	/* The old node is there (X1, X2): replace it in one step, so a
	 * lookup sees the old copy or the new, never neither. */
	if (cds_lfht_replace(c->index, &it, h, key_match, &k, &n->node) != 0)
		cds_lfht_add(c->index, h, &n->node);
	urcu_bp_read_unlock();
	o->in_index = false;
	n->in_index = true;
}

void
rio__fc_index_del(rio_fc_cache *c, uint32_t b)
{
	struct fc_blk *blk = &c->blks[b];

	if (!blk->in_index)
		return;
	urcu_bp_read_lock();
	cds_lfht_del(c->index, &blk->node);
	urcu_bp_read_unlock();
	blk->in_index = false;
}

void
rio__fc_index_sync(void)
{
	urcu_bp_synchronize_rcu();
}
