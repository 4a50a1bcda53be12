/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap.c -- the persistent heap of a segment: vista_malloc, vista_free
 *
 * Layout (heap_layout.h): the arena is cut into pages; small objects (up to
 * 2048 bytes, 24 size classes) live in one-page runs of one class with a
 * 256-bit allocation bitmap; larger objects take whole pages.  The page
 * map and bitmaps sit in their own pages before the arena (thesis Fig.
 * 3.3).  A DRAM index (free-page bitmap, per-class lists of runs with free
 * blocks) is rebuilt from the metadata when the segment is mapped.
 *
 * Logging is logical (thesis 3.4): an ALLOC record names the block a
 * transaction allocated, a FREE record the block it will free.  Undo of an
 * ALLOC frees the block; a FREE is applied only at commit, so abort keeps
 * the block, and undo of a FREE (after a crash in the middle of a commit)
 * marks it allocated again.  Physical before-images of the metadata would
 * be wrong here: two transactions may allocate in the same run, and
 * restoring one's before-image would erase the other's allocation.
 *
 * Invariants (besides H1-H3 of heap_layout.h)
 *   A1. An ALLOC record is durable before the metadata marks its block
 *       allocated; a FREE record is durable before commit clears it.
 *   A2. Every allocation declares (for the commit flush) its block and
 *       what it changed in the metadata: its bitmap word and its run's
 *       page map entry, whose check covers the bitmap (small), its page
 *       map entries (large).  A run's kind and class are durable from the
 *       moment the run exists (A4), so an allocation from a run that
 *       another transaction created needs nothing of that transaction's
 *       commit.
 *   A6. A run's check follows its bitmap: whoever changes a bit stores
 *       the entry with the new check under the heap lock and makes both
 *       durable before its record dies.  So the only bits a crash can
 *       leave out of step with the check are bits that a live record
 *       names, and rollback sets each of those (vista__heap_precheck
 *       verifies the rest before it stores anything).
 *   A3. A block whose allocation or free is not durable and final is never
 *       handed out: the metadata change and the DRAM index update that
 *       makes the block available happen under the heap lock, and commit
 *       and abort hold it from their first metadata change until the log
 *       is truncated (vista__heap_lock .. vista__heap_after).
 *   A4. Runs are created without a log record or fence of their own: an
 *       empty RUN page and a FREE page are both consistent, so the page
 *       map store is flushed with the first allocation's ALLOC record and
 *       made durable by that record's fence, under the heap lock; an
 *       abort leaves the run (empty) in place.  Empty runs go back to FREE
 *       only when pages are short, under the lock, when no transaction can
 *       hold a block in them (all bits zero).
 *   A5. An aborted or rolled-back allocation gives its block back with
 *       rio_durable_discard(): what the transaction stored there is not
 *       state and is never flushed (the block's next owner flushes it
 *       whole at its commit).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vista_int.h"

static unsigned
class_of(size_t size)
{
	unsigned lo = 0, hi = VISTA_NCLASSES - 1;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (vista_class_size[mid] >= size)
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

static inline unsigned
nblocks(unsigned cls)
{
	return VISTA_PAGE / vista_class_size[cls];
}

static inline char *
page_addr(const struct vista_segment *seg, uint32_t page)
{
	return seg->user + (size_t)page * VISTA_PAGE;
}

/*
 * ld() and st(): every access to a persistent metadata word (page map
 * entry, bitmap word) goes through them.  relaxed: an 8-byte access that
 * must not tear -- a crash keeps a word old or new, never mixed (H1-H3).
 * Between threads the heap lock orders the words (A3): every access
 * holds it, or runs while the segment is being mapped, before it is
 * published (vista__heap_open(), recovery's vista__heap_precheck()).
 * Durability's order comes from the flushes and drains that follow (A1,
 * A4, A6), not from these accesses.
 */
static inline uint64_t
ld(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_RELAXED);
}

/* Persistent metadata words are changed with single 8-byte stores. */
static inline void
st(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELAXED);
}

/* ---- DRAM index ---- */

static inline bool
fm_test(const struct vista_heap *h, uint32_t p)
{
	return (h->freemap[p / 64] >> (p % 64)) & 1;
}

static inline void
fm_set(struct vista_heap *h, uint32_t p, uint32_t n, bool on)
{
	for (uint32_t i = p; i < p + n; i++) {
		if (on)
			h->freemap[i / 64] |= 1ull << (i % 64);
		else
			h->freemap[i / 64] &= ~(1ull << (i % 64));
	}
	if (on)
		h->nfree_pages += n;
	else
		h->nfree_pages -= n;
}

static void
list_add(struct vista_heap *h, unsigned cls, uint32_t p)
{
	if (h->lprev[p] != VISTA__UNLISTED)
		return;
	h->lprev[p] = VISTA__NIL;
	h->lnext[p] = h->head[cls];
	if (h->head[cls] != VISTA__NIL)
		h->lprev[h->head[cls]] = p;
	h->head[cls] = p;
}

static void
list_del(struct vista_heap *h, unsigned cls, uint32_t p)
{
	if (h->lprev[p] == VISTA__UNLISTED)
		return;
	if (h->lprev[p] == VISTA__NIL)
		h->head[cls] = h->lnext[p];
	else
		h->lnext[h->lprev[p]] = h->lnext[p];
	if (h->lnext[p] != VISTA__NIL)
		h->lprev[h->lnext[p]] = h->lprev[p];
	h->lprev[p] = VISTA__UNLISTED;
}

/* First free block of run p, or -1. */
static int
run_free_block(const struct vista_heap *h, uint32_t p, unsigned cls)
{
	unsigned nb = nblocks(cls);

	for (unsigned w = 0; w * 64 < nb; w++) {
		uint64_t x = ~ld(&h->bits[p][w]);
		if (w * 64 + 64 > nb)
			x &= (1ull << (nb - w * 64)) - 1;
		if (x)
			return (int)(w * 64 + (unsigned)__builtin_ctzll(x));
	}
	return -1;
}

/* The page map entry of a run of class cls whose bitmap is row, now (A6). */
static uint64_t
run_entry(const uint64_t *row, unsigned cls)
{
	uint64_t b[VISTA_RUN_WORDS];

	for (unsigned w = 0; w < VISTA_RUN_WORDS; w++)
		b[w] = ld(&row[w]);
	return vista_pg_make(VISTA_PG_RUN, cls, vista_run_check(b));
}

static bool
run_empty(const struct vista_heap *h, uint32_t p)
{
	for (unsigned w = 0; w < VISTA_RUN_WORDS; w++)
		if (ld(&h->bits[p][w]))
			return false;
	return true;
}

/* n consecutive FREE pages, next fit from the hint; VISTA__NIL if none. */
static uint32_t
find_pages(struct vista_heap *h, uint32_t n)
{
	uint32_t np = h->npages;

	if (n == 0 || n > h->nfree_pages)
		return VISTA__NIL;
	for (int pass = 0; pass < 2; pass++) {
		uint32_t start = pass == 0 ? h->hint : 0;
		uint32_t stop = pass == 0 ? np : h->hint;
		uint32_t run = 0, first = 0;

		for (uint32_t p = start; p < stop; p++) {
			if (run == 0 && p % 64 == 0 && h->freemap[p / 64] == 0 &&
			    p + 64 <= stop) {
				p += 63;
				continue;
			}
			if (!fm_test(h, p)) {
				run = 0;
				continue;
			}
			if (run++ == 0)
				first = p;
			if (run == n) {
				h->hint = first + n < np ? first + n : 0;
				return first;
			}
		}
	}
	return VISTA__NIL;
}

/* A4: give empty runs back to the page pool.  Under the heap lock. */
static uint32_t
reclaim_empty_runs(struct vista_lane *l, struct vista_segment *seg)
{
	struct vista_heap *h = &seg->heap;
	uint32_t n = 0;

	for (unsigned c = 0; c < VISTA_NCLASSES; c++) {
		uint32_t p = h->head[c];
		while (p != VISTA__NIL) {
			uint32_t next = h->lnext[p];
			if (run_empty(h, p)) {
				list_del(h, c, p);
				st(&h->pmap[p], vista_pg_make(VISTA_PG_FREE, 0, 0));
				/* No drain: FREE and empty RUN are both
				 * consistent; whoever reuses the page flushes
				 * its entry again at commit. */
				vista__flush(l, seg->pool, &h->pmap[p], 8);
				fm_set(h, p, 1, true);
				n++;
			}
			p = next;
		}
	}
	return n;
}

/* ---- pending frees (open addressing, backward-shift deletion) ---- */

static inline uint32_t
pend_slot(const struct vista_heap *h, uint64_t key)
{
	return (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) &
		(h->pend_cap - 1);
}

static bool
pend_has(const struct vista_heap *h, uint64_t key)
{
	if (h->pend_cap == 0)
		return false;
	for (uint32_t i = pend_slot(h, key);; i = (i + 1) & (h->pend_cap - 1)) {
		if (h->pend[i] == key)
			return true;
		if (h->pend[i] == 0)
			return false;
	}
}

static void
pend_put(struct vista_heap *h, uint64_t key)
{
	uint32_t i = pend_slot(h, key);

	while (h->pend[i] != 0 && h->pend[i] != key)
		i = (i + 1) & (h->pend_cap - 1);
	if (h->pend[i] == 0)
		h->pend_n++;
	h->pend[i] = key;
}

/* Room for one more key; may allocate.  0 or -ENOMEM. */
static int
pend_reserve(struct vista_heap *h)
{
	uint64_t *old = h->pend;
	uint32_t oldcap = h->pend_cap, cap;

	if ((h->pend_n + 1) * 2 <= h->pend_cap)
		return 0;
	cap = oldcap ? oldcap * 2 : 64;
	h->pend = calloc(cap, sizeof(*h->pend));
	if (h->pend == NULL) {
		h->pend = old;
		return -ENOMEM;
	}
	h->pend_cap = cap;
	h->pend_n = 0;
	for (uint32_t i = 0; i < oldcap; i++)
		if (old[i])
			pend_put(h, old[i]);
	free(old);
	return 0;
}

static void
pend_del(struct vista_heap *h, uint64_t key)
{
	uint32_t mask = h->pend_cap - 1, i, j;

	if (h->pend_cap == 0)
		return;
	for (i = pend_slot(h, key); h->pend[i] != key; i = (i + 1) & mask)
		if (h->pend[i] == 0)
			return;
	h->pend[i] = 0;
	h->pend_n--;
	/* Shift back the entries whose probe sequence crossed slot i. */
	for (j = (i + 1) & mask; h->pend[j] != 0; j = (j + 1) & mask) {
		uint32_t home = pend_slot(h, h->pend[j]);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			h->pend[i] = h->pend[j];
			h->pend[j] = 0;
			i = j;
		}
	}
}

static inline uint64_t
obj_key(const struct vista_robj *o)
{
	uint64_t off = (uint64_t)o->page * VISTA_PAGE;
	if (o->kind == VISTA_OBJ_SMALL)
		off += (uint64_t)o->n * vista_class_size[o->cls];
	return off + 1;
}

/* ---- walking and checking ---- */

struct walk {
	struct vista_heap_info info;
	int (*fn)(void *ptr, size_t size, void *arg);
	void *arg;
	bool build;
};

static int
corrupt(const struct vista_segment *seg, uint32_t page, const char *what)
{
	return vista__err(VISTA_ECORRUPT,
		"heap of segment %s: page %u: %s", rio_pool_path(seg->pool),
		page, what);
}

static int
walk_heap(struct vista_segment *seg, struct walk *w)
{
	struct vista_heap *h = &seg->heap;
	uint32_t p = 0;
	int rc;

	memset(&w->info, 0, sizeof(w->info));
	w->info.pages = h->npages;
	while (p < h->npages) {
		uint64_t e = ld(&h->pmap[p]);
		unsigned kind = vista_pg_kind(e), cls = vista_pg_class(e);
		uint32_t n = vista_pg_n(e);

		if (!vista_pg_ok(e))
			return corrupt(seg, p, "page map entry fails its check");
		switch (kind) {
		case VISTA_PG_FREE:
			if (e != 0 || !run_empty(h, p))
				return corrupt(seg, p,
					"free page with fields or bits set");
			w->info.free_pages++;
			if (w->build)
				fm_set(h, p, 1, true);
			p++;
			break;
		case VISTA_PG_RUN: {
			unsigned nb, used = 0;
			if (cls >= VISTA_NCLASSES)
				return corrupt(seg, p, "run with a bad class");
			if (e != run_entry(h->bits[p], cls))
				return corrupt(seg, p, "run bitmap fails its "
						       "check (a flipped "
						       "allocation bit)");
			nb = nblocks(cls);
			for (unsigned b = 0; b < VISTA_RUN_WORDS * 64; b++) {
				if (!((ld(&h->bits[p][b / 64]) >> (b % 64)) & 1))
					continue;
				if (b >= nb)
					return corrupt(seg, p,
						"bitmap claims a block past the "
						"end of the run");
				used++;
				w->info.bytes += vista_class_size[cls];
				if (w->fn != NULL &&
				    (rc = w->fn(page_addr(seg, p) +
						    b * vista_class_size[cls],
					     vista_class_size[cls], w->arg)) != 0)
					return rc;
			}
			w->info.blocks += used;
			w->info.run_pages++;
			if (w->build && used < nb)
				list_add(h, cls, p);
			p++;
			break;
		}
		case VISTA_PG_LARGE:
			if (n == 0 || cls != 0 || n > h->npages - p)
				return corrupt(seg, p, "large object of a bad "
						       "length");
			if (!run_empty(h, p))
				return corrupt(seg, p, "large object page "
						       "with bitmap bits");
			for (uint32_t i = 1; i < n; i++)
				if (ld(&h->pmap[p + i]) !=
					    vista_pg_make(VISTA_PG_CONT, 0, i) ||
				    !run_empty(h, p + i))
					return corrupt(seg, p + i,
						"bad continuation page of a "
						"large object");
			w->info.blocks++;
			w->info.large_pages += n;
			w->info.bytes += (uint64_t)n * VISTA_PAGE;
			if (w->fn != NULL &&
			    (rc = w->fn(page_addr(seg, p),
				     (size_t)n * VISTA_PAGE, w->arg)) != 0)
				return rc;
			p += n;
			break;
		default:
			return corrupt(seg, p, kind == VISTA_PG_CONT ?
					"continuation page outside a large "
					"object" :
					"unknown page kind");
		}
	}
	return 0;
}

/* The object at ptr: 0, or VISTA_EBADPTR with a message. */
static int
locate(const struct vista_segment *seg, const void *ptr,
	struct vista_robj *o, size_t *size)
{
	const struct vista_heap *h = &seg->heap;
	uintptr_t a = (uintptr_t)ptr, u = (uintptr_t)seg->user;
	uint32_t page, bo;
	uint64_t e;

	if (a < u || a - u >= seg->user_size)
		return vista__err(VISTA_EBADPTR,
			"%p is not in the heap of segment %s [%p, +%zu)", ptr,
			rio_pool_path(seg->pool), (void *)seg->user,
			seg->user_size);
	page = (uint32_t)((a - u) / VISTA_PAGE);
	bo = (uint32_t)((a - u) % VISTA_PAGE);
	e = ld(&h->pmap[page]);
	memset(o, 0, sizeof(*o));
	o->page = page;
	o->seg = seg->idx;
	if (vista_pg_kind(e) == VISTA_PG_RUN) {
		unsigned cls = vista_pg_class(e), sz = vista_class_size[cls];
		unsigned b = bo / sz;
		if (bo % sz || b >= nblocks(cls) ||
		    !((ld(&h->bits[page][b / 64]) >> (b % 64)) & 1))
			return vista__err(VISTA_EBADPTR,
				"%p is not an allocated block of segment %s",
				ptr, rio_pool_path(seg->pool));
		o->kind = VISTA_OBJ_SMALL;
		o->cls = (uint8_t)cls;
		o->n = b;
		*size = sz;
		return 0;
	}
	if (vista_pg_kind(e) == VISTA_PG_LARGE && bo == 0) {
		o->kind = VISTA_OBJ_LARGE;
		o->n = vista_pg_n(e);
		*size = (size_t)o->n * VISTA_PAGE;
		return 0;
	}
	return vista__err(VISTA_EBADPTR,
		"%p is not an allocated block of segment %s", ptr,
		rio_pool_path(seg->pool));
}

bool
vista__heap_obj_ok(const struct vista_segment *seg, const struct vista_robj *o)
{
	uint64_t np = seg->hdr->npages;

	if (o->reserved || o->page >= np)
		return false;
	if (o->kind == VISTA_OBJ_SMALL)
		return o->cls < VISTA_NCLASSES && o->n < nblocks(o->cls);
	if (o->kind == VISTA_OBJ_LARGE)
		return o->cls == 0 && o->n >= 1 && o->n <= np - o->page;
	return false;
}

/* ---- open / close ---- */

static int
hh_verify(const struct vista_segment *seg, const struct vista_heap_hdr *hh)
{
	for (unsigned i = 0; i < 5; i++)
		if (hh->reserved[i])
			return vista__err(VISTA_ECORRUPT,
				"heap of segment %s: reserved header words are "
				"not zero", rio_pool_path(seg->pool));
	if (hh->check != vista_heap_hdr_check(hh))
		return vista__err(VISTA_ECORRUPT,
			"heap of segment %s: the heap header (root offset %llu, "
			"%llu bytes) fails its check", rio_pool_path(seg->pool),
			(unsigned long long)hh->root_off,
			(unsigned long long)hh->root_size);
	return 0;
}

/* Most named bits of one run whose states are tried (2^k checks); a run
 * with more in flight at the crash is not prechecked. */
#define VISTA__RUN_TRY_MAX 12u

/*
 * Is check the run check of row with the bits of mask (k of them) set some
 * way?  The durable entry may be from before or after any of those bits
 * changed, in any combination (A6).
 */
static bool
run_check_reachable(const uint64_t *row, const uint64_t mask[VISTA_RUN_WORDS],
	unsigned k, uint32_t check)
{
	unsigned pos[VISTA__RUN_TRY_MAX], np = 0;

	if (k > VISTA__RUN_TRY_MAX)
		return true;
	for (unsigned b = 0; b < VISTA_RUN_WORDS * 64; b++)
		if ((mask[b / 64] >> (b % 64)) & 1)
			pos[np++] = b;
	for (uint32_t s = 0; s < (1u << np); s++) {
		uint64_t t[VISTA_RUN_WORDS];
		for (unsigned w = 0; w < VISTA_RUN_WORDS; w++)
			t[w] = ld(&row[w]) & ~mask[w];
		for (unsigned i = 0; i < np; i++)
			if ((s >> i) & 1)
				t[pos[i] / 64] |= 1ull << (pos[i] % 64);
		if (vista_run_check(t) == check)
			return true;
	}
	return false;
}

int
vista__heap_precheck(const struct vista_segment *seg,
	const unsigned char hhb[VISTA_HEAP_HDR_SIZE], const uint64_t *named,
	size_t nnamed)
{
	char *meta = seg->base + seg->hdr->heap_off;
	const uint64_t *pm = (const uint64_t *)(const void *)(meta +
		VISTA_HEAP_HDR_SIZE);
	const uint64_t (*bits)[VISTA_RUN_WORDS] = (const void *)(meta +
		vista_heap_bits_off(seg->hdr->npages));
	struct vista_heap_hdr hh;
	size_t j = 0;

	memcpy(&hh, hhb, sizeof(hh));
	for (uint64_t p = 0; p < seg->hdr->npages; p++) {
		uint64_t e = ld(&pm[p]), mask[VISTA_RUN_WORDS] = { 0 };
		unsigned k = 0;

		if (!vista_pg_ok(e))
			return corrupt(seg, (uint32_t)p,
				"page map entry fails its check");
		while (j < nnamed && named[j] / 256 < p)
			j++;
		if (vista_pg_kind(e) != VISTA_PG_RUN)
			continue;
		for (; j < nnamed && named[j] / 256 == p; j++) {
			unsigned b = (unsigned)(named[j] % 256);
			if (!((mask[b / 64] >> (b % 64)) & 1))
				k++;
			mask[b / 64] |= 1ull << (b % 64);
		}
		if (!run_check_reachable(bits[p], mask, k, vista_pg_n(e)))
			return corrupt(seg, (uint32_t)p, "run bitmap fails its "
				"check (a flipped allocation bit)");
	}
	return hh_verify(seg, &hh);
}

int
vista__heap_open(struct vista_segment *seg)
{
	struct vista_heap *h = &seg->heap;
	char *meta = seg->base + seg->hdr->heap_off;
	struct walk w = { .build = true };
	int rc;

	memset(h, 0, sizeof(*h));
	pthread_mutex_init(&h->lock, NULL);
	h->inited = true;
	h->npages = (uint32_t)seg->hdr->npages;
	h->hh = (void *)meta;
	h->pmap = (void *)(meta + VISTA_HEAP_HDR_SIZE);
	h->bits = (void *)(meta + vista_heap_bits_off(h->npages));
	h->freemap = calloc((h->npages + 63) / 64, sizeof(uint64_t));
	h->lnext = malloc(sizeof(uint32_t) * h->npages);
	h->lprev = malloc(sizeof(uint32_t) * h->npages);
	if (h->freemap == NULL || h->lnext == NULL || h->lprev == NULL)
		return vista__err(-ENOMEM, "out of memory for the heap index "
					   "of %u pages", h->npages);
	for (unsigned c = 0; c < VISTA_NCLASSES; c++)
		h->head[c] = VISTA__NIL;
	for (uint32_t p = 0; p < h->npages; p++)
		h->lprev[p] = VISTA__UNLISTED;
	rc = hh_verify(seg, h->hh);
	if (rc == 0)
		rc = walk_heap(seg, &w);
	if (rc)
		return rc;
	if (h->hh->root_off) {
		struct vista_robj o;
		size_t sz;
		uint64_t ro = h->hh->root_off;
		if (ro < seg->hdr->user_off ||
		    ro - seg->hdr->user_off >= seg->user_size ||
		    locate(seg, seg->base + ro, &o, &sz) != 0 ||
		    sz < h->hh->root_size)
			return vista__err(VISTA_ECORRUPT,
				"heap of segment %s: the root object (offset "
				"%llu, %llu bytes) is not an allocated block",
				rio_pool_path(seg->pool),
				(unsigned long long)ro,
				(unsigned long long)h->hh->root_size);
	}
	return 0;
}

void
vista__heap_close(struct vista_segment *seg)
{
	struct vista_heap *h = &seg->heap;

	if (!h->inited)
		return;
	free(h->freemap);
	free(h->lnext);
	free(h->lprev);
	free(h->pend);
	pthread_mutex_destroy(&h->lock);
	memset(h, 0, sizeof(*h));
}

/* ---- allocation ---- */

static int
no_room(const struct vista_segment *seg, size_t size)
{
	return vista__err(VISTA_ENOMEM,
		"segment %s: no room for %zu bytes (%u of %u pages free); the "
		"transaction can still be committed or aborted",
		rio_pool_path(seg->pool), size, seg->heap.nfree_pages,
		seg->heap.npages);
}

/* Under the heap lock.  On failure nothing has changed (but the log may
 * hold nothing more than before either: the record is the first step). */
static int
alloc_locked(struct vista_lane *l, struct vista_segment *seg, size_t size,
	void **ptr)
{
	struct vista_heap *h = &seg->heap;
	struct vista_robj o;
	char *block;
	size_t bsize;
	int rc;

	memset(&o, 0, sizeof(o));
	o.seg = seg->idx;
	rc = vista__ranges_reserve(&l->ranges, 3);
	if (rc)
		return vista__err(rc, "out of memory");
	if (size <= VISTA_SMALL_MAX) {
		unsigned cls = class_of(size);
		uint32_t p = h->head[cls];
		bool fresh = p == VISTA__NIL;
		int b;

		if (fresh) {
			p = find_pages(h, 1);
			if (p == VISTA__NIL && reclaim_empty_runs(l, seg))
				p = find_pages(h, 1);
			if (p == VISTA__NIL)
				return no_room(seg, size);
			b = 0;
		} else {
			b = run_free_block(h, p, cls);
			/* A run on its class's list has a free block. */
			VISTA_ASSERT(b >= 0, "A3");
		}
		o.kind = VISTA_OBJ_SMALL;
		o.cls = (uint8_t)cls;
		o.page = p;
		o.n = (uint32_t)b;
		rc = vista__log_objs(l, VISTA_REC_ALLOC, &o, 1);
		if (rc)
			return rc;
		if (fresh) {
			VISTA_ASSERT(vista_pg_kind(ld(&h->pmap[p])) ==
				VISTA_PG_FREE, "A4");
			/* A4: an empty run is as consistent as a free page,
			 * so the new run's entry needs no record; it rides on
			 * the record's fence below, and is durable before any
			 * transaction can allocate from the run. */
			st(&h->pmap[p], vista_pg_make(VISTA_PG_RUN, cls, 0));
			vista__flush(l, seg->pool, &h->pmap[p], 8);
		}
		/* A1: the record is durable before the bitmap says
		 * allocated. */
		vista__drain(l);
		if (fresh) {
			fm_set(h, p, 1, false);
			list_add(h, cls, p);
		}
		/* A3: the block handed out is free, its bit clear. */
		VISTA_ASSERT(!((ld(&h->bits[p][b / 64]) >> (b % 64)) & 1), "A3");
		st(&h->bits[p][b / 64], ld(&h->bits[p][b / 64]) | (1ull << (b % 64)));
		st(&h->pmap[p], run_entry(h->bits[p], cls)); /* A6 */
		if (run_free_block(h, p, cls) < 0)
			list_del(h, cls, p);
		bsize = vista_class_size[cls];
		block = page_addr(seg, p) + (size_t)b * bsize;
		/* A2 */
		vista__declare(l, seg, &h->bits[p][b / 64], 8, false);
#ifndef VISTA_BROKEN_RUN_CHECK_NO_FLUSH
		vista__declare(l, seg, &h->pmap[p], 8, false);
#endif
	} else {
		uint32_t n = (uint32_t)((size + VISTA_PAGE - 1) / VISTA_PAGE);
		uint32_t p;

		if (size > seg->user_size)
			return no_room(seg, size);
		p = find_pages(h, n);
		if (p == VISTA__NIL && reclaim_empty_runs(l, seg))
			p = find_pages(h, n);
		if (p == VISTA__NIL)
			return no_room(seg, size);
		o.kind = VISTA_OBJ_LARGE;
		o.page = p;
		o.n = n;
		rc = vista__log_objs(l, VISTA_REC_ALLOC, &o, 1);
		if (rc)
			return rc;
		/* A1 */
		vista__drain(l);
		/* A3: the first page handed out is free (find_pages). */
		VISTA_ASSERT(vista_pg_kind(ld(&h->pmap[p])) == VISTA_PG_FREE,
			"A3");
		st(&h->pmap[p], vista_pg_make(VISTA_PG_LARGE, 0, n));
		for (uint32_t i = 1; i < n; i++)
			st(&h->pmap[p + i], vista_pg_make(VISTA_PG_CONT, 0, i));
		fm_set(h, p, n, false);
		bsize = (size_t)n * VISTA_PAGE;
		block = page_addr(seg, p);
		vista__declare(l, seg, &h->pmap[p], 8 * (size_t)n, false); /* A2 */
	}
	/* The new block needs no before-image, only the commit flush. */
	vista__declare(l, seg, block, bsize, false);
	vista__bit_set(l->allocd, seg->idx);
	l->nalloc_recs++;
	*ptr = block;
	return 0;
}

/*
 * Run op inside the calling thread's transaction on seg's instance, or in
 * a transaction of its own when none is active.  *own tells the caller to
 * end it.
 */
static int
heap_tx(struct vista_segment *seg, struct vista_lane **lp, bool *own)
{
	vista *v = seg->v;
	struct vista_lane *l = vista__lane_fast(v);
	int rc;

	*own = false;
	if (l == NULL) {
		l = vista__lane_get(v, &rc);
		if (l == NULL)
			return rc;
	}
	if (l->state != VISTA__TX_IDLE && (l->flags & VISTA_TX_NO_FLUSH))
		return vista__err(-EINVAL, "heap operations need a durable "
			"transaction (this one is VISTA_TX_NO_FLUSH)");
	if (l->state == VISTA__TX_IDLE) {
		rc = vista_begin_transaction(v, 0);
		if (rc)
			return rc;
		*own = true;
	}
	*lp = l;
	return 0;
}

static int
heap_tx_end(vista *v, bool own, int rc)
{
	if (!own)
		return rc;
	if (rc) {
		(void)vista_abort_transaction(v);
		return rc;
	}
	return vista_end_transaction(v);
}

/* In an explicit transaction on a protected segment, the program must be
 * able to store into what it allocated. */
static int
open_block(struct vista_lane *l, struct vista_segment *seg, void *p,
	size_t n)
{
	/* relaxed: as in vista_set_range() (tx.c): a stale false leaves the
	 * block's pages closed, and the first store opens them through
	 * the fault hook. */
	if (!__atomic_load_n(&seg->prot, __ATOMIC_RELAXED) ||
	    (l->flags & VISTA_TX_AUTO))
		return 0;
	return vista__open_pages(l, seg, (uintptr_t)p, (uintptr_t)p + n, false);
}

int
vista_malloc(vista_segment *seg, size_t size, void **ptr)
{
	struct vista_lane *l;
	bool own;
	int rc;

	if (seg != NULL && seg->v->redo != NULL)
		return vista__redo_refuse("vista_malloc");

	if (seg == NULL || ptr == NULL)
		return vista__err(-EINVAL, "vista_malloc: NULL argument");
	*ptr = NULL;
	if (size == 0)
		return vista__err(-EINVAL, "vista_malloc: size 0");
	rc = heap_tx(seg, &l, &own);
	if (rc)
		return rc;
	pthread_mutex_lock(&seg->heap.lock);
	rc = alloc_locked(l, seg, size, ptr);
	pthread_mutex_unlock(&seg->heap.lock);
	if (rc == 0)
		rc = open_block(l, seg, *ptr, size);
	if (rc == 0)
		VISTA__STAT_ADD(l, heap_allocs, 1);
	rc = heap_tx_end(seg->v, own, rc);
	if (rc)
		*ptr = NULL;
	return rc;
}

int
vista_free(vista_segment *seg, void *ptr)
{
	struct vista_heap *h;
	struct vista_lane *l;
	struct vista_robj o;
	size_t sz;
	bool own;

	if (seg != NULL && seg->v->redo != NULL)
		return vista__redo_refuse("vista_free");
	int rc;

	if (seg == NULL)
		return vista__err(-EINVAL, "vista_free: NULL segment");
	if (ptr == NULL)
		return 0;
	rc = heap_tx(seg, &l, &own);
	if (rc)
		return rc;
	h = &seg->heap;
	pthread_mutex_lock(&h->lock);
	rc = locate(seg, ptr, &o, &sz);
	if (rc == 0 && pend_has(h, obj_key(&o)))
		rc = vista__err(VISTA_EBADPTR,
			"%p is already freed by a transaction that has not "
			"committed", ptr);
	if (rc == 0 && pend_reserve(h) != 0)
		rc = vista__err(-ENOMEM, "out of memory");
	if (rc == 0)
		rc = vista__log_objs(l, VISTA_REC_FREE, &o, 1);
	if (rc == 0) {
		/* A1: the FREE record is durable before commit may clear
		 * the block. */
		vista__drain(l);
		pend_put(h, obj_key(&o));
		vista__bit_set(l->freed, seg->idx);
		if (!vista__bit_test(l->touched, seg->idx))
			vista__bit_set(l->touched, seg->idx);
		l->nfree_recs++;
		VISTA__STAT_ADD(l, heap_frees, 1);
	}
	pthread_mutex_unlock(&h->lock);
	return heap_tx_end(seg->v, own, rc);
}

int
vista_root(vista_segment *seg, size_t size, void **root)
{
	struct vista_heap *h;
	struct vista_lane *l;
	void *p = NULL;
	bool own;
	int rc;

	if (seg != NULL && seg->v->redo != NULL)
		return vista__redo_refuse("vista_root");

	if (seg == NULL || root == NULL)
		return vista__err(-EINVAL, "vista_root: NULL argument");
	*root = NULL;
	if (size == 0)
		return vista__err(-EINVAL, "vista_root: size 0");
	rc = heap_tx(seg, &l, &own);
	if (rc)
		return rc;
	h = &seg->heap;
	pthread_mutex_lock(&h->lock);
	if (h->hh->root_off) {
		if (size > h->hh->root_size)
			rc = vista__err(VISTA_ERANGE,
				"vista_root(%zu): the root object of %s has "
				"%llu bytes", size, rio_pool_path(seg->pool),
				(unsigned long long)h->hh->root_size);
		else
			p = seg->base + h->hh->root_off;
		pthread_mutex_unlock(&h->lock);
		*root = p;
		return heap_tx_end(seg->v, own, rc);
	}
	rc = alloc_locked(l, seg, size, &p);
	if (rc == 0)
		rc = open_block(l, seg, p, size);
	if (rc == 0)
		rc = vista__declare(l, seg, h->hh, sizeof(*h->hh), true);
	if (rc == 0) {
		/* Inside the transaction: an abort or a crash frees the
		 * block and puts the root and its check back. */
		memset(p, 0, size);
		h->hh->root_off = (uint64_t)((char *)p - seg->base);
		h->hh->root_size = size;
		h->hh->check = vista_heap_hdr_check(h->hh);
		VISTA__STAT_ADD(l, heap_allocs, 1);
	}
	pthread_mutex_unlock(&h->lock);
	rc = heap_tx_end(seg->v, own, rc);
	if (rc == 0)
		*root = p;
	return rc;
}

size_t
vista_usable_size(const vista_segment *seg, const void *ptr)
{
	struct vista_heap *h = (struct vista_heap *)&seg->heap;
	struct vista_robj o;
	size_t sz = 0;

	if (seg->v->redo != NULL)
		return 0;
	pthread_mutex_lock(&h->lock);
	if (locate(seg, ptr, &o, &sz) != 0)
		sz = 0;
	pthread_mutex_unlock(&h->lock);
	return sz;
}

int
vista_heap_check(vista_segment *seg, struct vista_heap_info *info)
{
	struct walk w = { .build = false };
	int rc;

	if (seg == NULL)
		return vista__err(-EINVAL, "vista_heap_check: NULL segment");
	if (seg->v->redo != NULL)
		return vista__redo_refuse("vista_heap_check");
	pthread_mutex_lock(&seg->heap.lock);
	rc = hh_verify(seg, seg->heap.hh);
	if (rc == 0)
		rc = walk_heap(seg, &w);
	pthread_mutex_unlock(&seg->heap.lock);
	if (rc == 0 && info != NULL)
		*info = w.info;
	return rc;
}

int
vista_heap_walk(vista_segment *seg, int (*fn)(void *ptr, size_t size,
	void *arg), void *arg)
{
	struct walk w = { .fn = fn, .arg = arg };
	int rc;

	if (seg != NULL && seg->v->redo != NULL)
		return vista__redo_refuse("vista_heap_walk");

	if (seg == NULL || fn == NULL)
		return vista__err(-EINVAL, "vista_heap_walk: NULL argument");
	pthread_mutex_lock(&seg->heap.lock);
	rc = walk_heap(seg, &w);
	pthread_mutex_unlock(&seg->heap.lock);
	return rc;
}

/* ---- commit, abort and recovery of heap records ---- */

void
vista__heap_undo(struct vista_lane *l, struct vista_segment *seg,
	uint16_t type, const struct vista_robj *o, bool recovering)
{
	/* From the header: recovery runs before the DRAM heap exists. */
	uint64_t *pm = (uint64_t *)(void *)(seg->base + seg->hdr->heap_off +
		VISTA_HEAP_HDR_SIZE);
	uint64_t (*bits)[VISTA_RUN_WORDS] = (void *)(seg->base +
		seg->hdr->heap_off + vista_heap_bits_off(seg->hdr->npages));
	char *arena = seg->base + seg->hdr->user_off;
	uint32_t p = o->page;

	if (type == VISTA_REC_FREE && !recovering)
		return; /* never applied: commit applies frees */
	if (o->kind == VISTA_OBJ_SMALL) {
		uint64_t *w = &bits[p][o->n / 64], bit = 1ull << (o->n % 64);
		/* A1: an abort undoes an allocation this process made, so
		 * its bit is set (after a crash it may never have been). */
		VISTA_ASSERT(recovering || type != VISTA_REC_ALLOC ||
			(ld(w) & bit) != 0, "A1");
		st(w, type == VISTA_REC_ALLOC ? ld(w) & ~bit : ld(w) | bit);
		/* The run's check follows its bitmap (A6).  For a FREE the
		 * block was allocated when it was freed, so its page is a
		 * run of this class: this says so again, in case the
		 * allocating transaction was this one and its page map
		 * store never reached memory (A2). */
		st(&pm[p], run_entry(bits[p], o->cls));
		/* Flushed at the end of the undo; the caller's fence
		 * (abort, recovery) makes them durable before the log record
		 * that describes them dies. */
		vista__undo_note(l, seg, w, 8);
		vista__undo_note(l, seg, &pm[p], 8);
		if (type == VISTA_REC_ALLOC) /* A5 */
			rio_durable_discard(seg->pool, arena + (size_t)p *
				VISTA_PAGE + (size_t)o->n *
				vista_class_size[o->cls],
				vista_class_size[o->cls]);
		return;
	}
	for (uint32_t i = 0; i < o->n; i++) {
		uint64_t e = 0;
		if (type == VISTA_REC_FREE)
			e = i == 0 ? vista_pg_make(VISTA_PG_LARGE, 0, o->n) :
				     vista_pg_make(VISTA_PG_CONT, 0, i);
		st(&pm[p + i], e);
	}
	/* Flushed at the end of the undo, durable at the caller's fence,
	 * before the record dies. */
	vista__undo_note(l, seg, &pm[p], 8 * (size_t)o->n);
	if (type == VISTA_REC_ALLOC) /* A5 */
		rio_durable_discard(seg->pool, arena + (size_t)p * VISTA_PAGE,
			(size_t)o->n * VISTA_PAGE);
}

/* Walk the objects of the lane's ALLOC/FREE records, oldest first. */
static void
each_obj(struct vista_lane *l, void (*fn)(struct vista_lane *l,
	uint16_t type, const struct vista_robj *o, bool flag), bool flag)
{
	for (char *pos = l->rec0; pos < l->cur;) {
		const struct vista_rec *r = (const void *)pos;
		if (r->type == VISTA_REC_ALLOC || r->type == VISTA_REC_FREE) {
			const struct vista_robj *o = (const void *)(r + 1);
			for (unsigned i = 0; i < r->count; i++)
				fn(l, r->type, &o[i], flag);
		}
		pos += (r->len + VISTA_REC_ALIGN - 1) & ~(VISTA_REC_ALIGN - 1);
	}
}

void
vista__heap_lock(struct vista_lane *l, bool aborting)
{
	/* In segment order, set bits only. */
	for (unsigned w = 0; w < VISTA__SEGWORDS; w++) {
		uint64_t m = l->freed[w] | (aborting ? l->allocd[w] : 0);
		/* A3: held once, from commit or abort to heap_after. */
		VISTA_ASSERT(l->locked[w] == 0, "A3");
		l->locked[w] = m;
		for (; m; m &= m - 1)
			pthread_mutex_lock(&l->v->byidx[w * 64 +
				(unsigned)__builtin_ctzll(m)]->heap.lock);
	}
}

static void
apply_free(struct vista_lane *l, uint16_t type, const struct vista_robj *o,
	bool flag)
{
	struct vista_segment *seg = l->v->byidx[o->seg];
	struct vista_heap *h = &seg->heap;
	uint32_t p = o->page;

	(void)flag; /* each_obj's, not needed here */
	if (type != VISTA_REC_FREE)
		return;
	if (o->kind == VISTA_OBJ_SMALL) {
		uint64_t *w = &h->bits[p][o->n / 64];
		/* A3: the block freed is still allocated when its free
		 * becomes final (a second free is refused, pend_has). */
		VISTA_ASSERT((ld(w) >> (o->n % 64)) & 1, "A3");
		st(w, ld(w) & ~(1ull << (o->n % 64)));
		st(&h->pmap[p], run_entry(h->bits[p], o->cls)); /* A6 */
		/* Both durable with the transaction's data, before the
		 * truncation commits it (T2); undone from the FREE record if
		 * the truncation never happens. */
		vista__flush(l, seg->pool, w, 8);
#ifndef VISTA_BROKEN_RUN_CHECK_NO_FLUSH
		vista__flush(l, seg->pool, &h->pmap[p], 8);
#endif
		return;
	}
	/* H1: a large block freed starts at its LARGE head of n pages. */
	VISTA_ASSERT(vista_pg_kind(ld(&h->pmap[p])) == VISTA_PG_LARGE &&
		vista_pg_n(ld(&h->pmap[p])) == o->n, "H1");
	for (uint32_t i = 0; i < o->n; i++)
		st(&h->pmap[p + i], vista_pg_make(VISTA_PG_FREE, 0, 0));
	/* As above: durable with the data, before the truncation. */
	vista__flush(l, seg->pool, &h->pmap[p], 8 * (size_t)o->n);
}

void
vista__heap_commit_frees(struct vista_lane *l)
{
	each_obj(l, apply_free, false);
}

static void
dram_after(struct vista_lane *l, uint16_t type, const struct vista_robj *o,
	bool committed)
{
	struct vista_segment *seg = l->v->byidx[o->seg];
	struct vista_heap *h = &seg->heap;
	bool released = committed ? type == VISTA_REC_FREE :
				    type == VISTA_REC_ALLOC;

	if (type == VISTA_REC_FREE)
		pend_del(h, obj_key(o));
	if (!released)
		return;
	if (o->kind == VISTA_OBJ_SMALL) {
		/* The run may have been reclaimed meanwhile only if it was
		 * empty, which it was not while this block was in use. */
		list_add(h, o->cls, o->page);
		return;
	}
	fm_set(h, o->page, o->n, true);
}

void
vista__heap_after(struct vista_lane *l, bool committed)
{
	each_obj(l, dram_after, committed);
	/* In reverse segment order, set bits only. */
	for (unsigned w = VISTA__SEGWORDS; w-- > 0;) {
		for (uint64_t m = l->locked[w]; m;) {
			unsigned b = 63 - (unsigned)__builtin_clzll(m);
			pthread_mutex_unlock(&l->v->byidx[w * 64 + b]->heap.lock);
			m &= ~(1ull << b);
		}
		l->locked[w] = 0;
	}
}
