/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vversions.c -- Vista's standalone Versions 0, 1, 2 (Amza et al. sec. 4)
 *
 * Design (the layout and recovery rules are in vv_layout.h):
 *  1. One database per rio pool; the pool's domain (RIO_FORCE_*) decides
 *     what rio_flush / rio_drain cost.  Every drain is counted as a fence,
 *     every flushed (or non-temporally written) line as a line.
 *  2. Stores into the database happen in place, between vv_set_ranges()
 *     and vv_commit(); the caller never stores into an undeclared range.
 *  3. A transaction's state is volatile (in_tx, nr, the ranges) plus the
 *     durable structures of its version; recovery needs only the latter.
 *
 * Persist order, Version 0 (linked-list undo records in the heap):
 *   set_ranges (per call of n ranges)
 *     S1  per range: allocate a record block and a buffer block; copy the
 *         range's before-image into the buffer; fill the record (next =
 *         the list head so far) and flush buffer and record.
 *     F1  fence: records and buffers durable before the head names them
 *         (a crash then finds only complete records on the list).
 *     S2  head = newest record; flush.
 *     F2  fence: the head durable before the caller stores into the
 *         ranges (a store that reached memory is always undoable).
 *   commit
 *     C1  flush every range on the list (the in-place stores).
 *     F3  fence: the new values durable before the commit flag.
 *     C2  head = 0 (the commit flag: nothing left to undo); flush.
 *     F4  fence: committed; the records may be freed and reused only now
 *         (a record overwritten while still on the durable list would be
 *         followed by recovery).  Then free every record and buffer.
 *   abort
 *     A1  copy every buffer back, newest record first; flush.
 *     F5  fence: the restored values durable before the list is dropped.
 *     A2  head = 0; flush.   F6  fence: before the blocks are reused.
 *   recovery: A1..F6 from the durable head, then the heap is reset (its
 *   metadata is never flushed: nothing in it outlives a transaction).
 *
 * Persist order, Versions 1 and 2 (mirror; g = finished transactions):
 *   set_ranges
 *     S1  per range: entry {off, len, gen = g + 1}, seal stored last;
 *         flush.
 *     F1  fence: the coordinates durable before the caller stores into
 *         the ranges.  It also makes the previous commit's or abort's
 *         IDLE word (M3 / B2) durable: no store of this transaction can
 *         reach memory while recovery would still roll the last one
 *         forward over these ranges.
 *   commit
 *     C1  flush every range (the in-place stores).
 *     F2  fence: the new values durable before the commit mark.
 *     C2  state = (g + 1, COMMITTED); flush.
 *     F3  fence: the commit point.  From here recovery rolls forward.
 *     M1  V1: copy each range database -> mirror (non-temporal for large
 *         ranges, else store + flush).  V2: compare each range with the
 *         mirror, store and flush only the runs of bytes that differ.
 *     F4  fence: the mirror durable before M3 retires the entries (else a
 *         crash could leave the mirror behind the database outside every
 *         live range, and a later undo would restore stale bytes).
 *     M3  state = (g + 1, IDLE); flush, no fence: the next F1 (or B1's
 *         fence, or close) makes it durable; until then recovery rolls
 *         the same transaction forward again, which changes nothing.
 *   abort
 *     B1  copy each range mirror -> database; flush.  Fence: the old
 *         values durable before the entries are retired.
 *     B2  state = (g + 1, IDLE); flush, no fence (as M3: until durable,
 *         recovery repeats the undo, which changes nothing).
 *   recovery: COMMITTED g: M1 over the entries of g, F4, M3 + fence.
 *             IDLE g: B1 over the entries of g + 1, B2 + fence.
 *
 * Fences per transaction of one set_ranges call: V0 4, V1 and V2 4
 * (V2: 3 when no byte changed).  Deliberately broken builds, each caught
 * by a crash test (tests/bench/meson.build):
 *   VV_BROKEN_V0_LINK_EARLY    V0 links records without F1;
 *   VV_BROKEN_V1_MIRROR_FIRST  V1 copies into the mirror before C2;
 *   VV_BROKEN_V2_DIFF_NO_PERSIST  V2's diff stores without flushing;
 *   VV_BROKEN_LATE_MARK        every version writes its commit mark
 *                              only when the next transaction begins (or
 *                              at close): commit returns before the
 *                              transaction is durable.
 */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rio.h"
#include "vv_layout.h"
#include "vversions.h"

#define LINE 64u

struct vv_vrange {
	uint64_t off, len;
};

struct vv {
	rio_pool *pool;
	char *base;            /* user area */
	struct vv_hdr *hdr;
	struct vv_state *state;
	char *db, *aux;
	struct vv_entry *log;  /* V1, V2 */
	struct vv_heap *heap;  /* V0 */
	char *blocks;          /* V0: heap block area */
	uint64_t blocks_size;
	enum vv_version ver;
	size_t db_size;
	uint64_t gen;          /* V1, V2: finished transactions */
	uint64_t head;         /* V0: list head (volatile copy) */
	uint64_t seq;          /* V0: records made */
	bool in_tx;
	bool count_lines;      /* not the byte domain */
	bool late;             /* VV_BROKEN_LATE_MARK: a commit half done */
	int fatal;
	size_t nr, cap;        /* declared ranges (volatile copy) */
	struct vv_vrange *r;
	struct vv_stats st;
};

/* ---- counted persistence primitives ---- */

/* Lines [addr, addr + len) covers, counted where lines are written back
 * (not in the byte domain, which flushes nothing, as libvista counts). */
static inline void
count_lines(vv *v, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr & ~(uintptr_t)(LINE - 1);
	if (v->count_lines && len)
		v->st.lines += ((uintptr_t)addr + len - a + LINE - 1) / LINE;
}

static inline void
vflush(vv *v, const void *addr, size_t len)
{
	rio_flush(v->pool, addr, len);
	count_lines(v, addr, len);
}

static inline void
vdrain(vv *v)
{
	rio_drain(v->pool);
	v->st.fences++;
}

static inline void
vcopy(vv *v, void *dst, const void *src, size_t len)
{
	/* rio_memcpy_nodrain flushes (or writes around the cache); count
	 * its lines as vflush does. */
	rio_memcpy_nodrain(v->pool, dst, src, len);
	count_lines(v, dst, len);
}

static int
fatal(vv *v, int rc, const char *what)
{
	v->fatal = RIO_EFATAL;
	return rio_seterr(rc, "vista %s: %s: %s", vv_version_name(v->ver),
		what, rio_errormsg());
}

const char *
vv_version_name(enum vv_version ver)
{
	return ver == VV_V0 ? "v0" : ver == VV_V1 ? "v1" : ver == VV_V2 ?
		"v2" : "v?";
}

static const char *
layout_name(enum vv_version ver)
{
	return ver == VV_V0 ? "vista.v0" : ver == VV_V1 ? "vista.v1" :
		"vista.v2";
}

#define ROUND(x) (((uint64_t)(x) + 4095) & ~(uint64_t)4095)

static int
attach(vv *v)
{
	struct vv_hdr *h = v->hdr;
	v->db = v->base + h->db_off;
	v->aux = v->base + h->aux_off;
	v->db_size = h->db_size;
	v->count_lines = rio_pool_domain(v->pool) != RIO_DOMAIN_BYTE;
	if (v->ver == VV_V0) {
		v->heap = (struct vv_heap *)(void *)v->aux;
		v->blocks = v->aux + VV_HEAP_BLOCKS;
		v->blocks_size = h->aux_size - VV_HEAP_BLOCKS;
		v->cap = 64;
	} else {
		v->log = (struct vv_entry *)(void *)(v->base + h->log_off);
		v->cap = h->log_cap;
	}
	v->r = malloc(v->cap * sizeof(*v->r));
	return v->r ? 0 : rio_seterr(-ENOMEM, "vista %s: range array",
		vv_version_name(v->ver));
}

int
vv_create(const char *path, const struct vv_opts *o, vv **out)
{
	*out = NULL;
	if (o == NULL || o->version > VV_V2 || o->db_size == 0 ||
	    (o->version == VV_V0 && o->heap_size < 2 * VV_HEAP_BLOCKS))
		return rio_seterr(-EINVAL, "vista: create %s: bad options",
			path);
	size_t cap = o->max_ranges ? o->max_ranges : 4096;
	uint64_t db = ROUND(o->db_size);
	uint64_t aux = o->version == VV_V0 ? ROUND(o->heap_size) : db;
	uint64_t logb = o->version == VV_V0 ? 0 : ROUND(cap * 32);
	uint64_t size = RIO_POOL_HDR_SIZE + VV_DB_OFF + db + aux + logb;
	vv *v = calloc(1, sizeof(*v));
	if (v == NULL)
		return rio_seterr(-ENOMEM, "vista: create %s", path);
	v->ver = o->version;
	struct rio_pool_opts po = { .layout = layout_name(o->version) };
	int rc = rio_pool_create_opts(path, size, o->rio_flags, &po, &v->pool);
	if (rc) {
		free(v);
		return rc;
	}
	v->base = rio_pool_base(v->pool);
	v->hdr = (struct vv_hdr *)(void *)v->base;
	v->state = (struct vv_state *)(void *)(v->base + VV_STATE_OFF);
	struct vv_hdr *h = v->hdr;
	h->major = VV_MAJOR;
	h->minor = VV_MINOR;
	h->version = (uint32_t)o->version;
	h->db_off = VV_DB_OFF;
	h->db_size = o->db_size;
	h->aux_off = VV_DB_OFF + db;
	h->aux_size = aux;
	h->log_off = logb ? VV_DB_OFF + db + aux : 0;
	h->log_cap = logb ? cap : 0;
	h->checksum = vv_hdr_checksum(h);
	/* The header's body durable before its magic: a crash in between
	 * leaves magic zero, "never finished" (RIO_EBADMAGIC at open). */
	rio_persist(v->pool, h, sizeof(*h));
	memcpy(h->magic, VV_MAGIC, 8);
	/* The magic durable: the pool is complete. */
	rio_persist(v->pool, h, 8);
	if ((rc = attach(v))) {
		rio_pool_close(v->pool);
		free(v);
		return rc;
	}
	*out = v;
	return 0;
}

static int recover(vv *v);

int
vv_open(const char *path, enum vv_version version, unsigned rio_flags,
	vv **out)
{
	*out = NULL;
	if (version > VV_V2)
		return rio_seterr(-EINVAL, "vista: open %s: bad version", path);
	vv *v = calloc(1, sizeof(*v));
	if (v == NULL)
		return rio_seterr(-ENOMEM, "vista: open %s", path);
	v->ver = version;
	struct rio_pool_opts po = { .layout = layout_name(version) };
	int rc = rio_pool_open_opts(path, rio_flags, &po, &v->pool);
	if (rc) {
		free(v);
		return rc;
	}
	v->base = rio_pool_base(v->pool);
	v->hdr = (struct vv_hdr *)(void *)v->base;
	v->state = (struct vv_state *)(void *)(v->base + VV_STATE_OFF);
	const struct vv_hdr *h = v->hdr;
	uint64_t psize = rio_pool_size(v->pool);
	if (memcmp(h->magic, VV_MAGIC, 8))
		rc = rio_seterr(RIO_EBADMAGIC, "vista %s: %s: no header "
			"(never finished)", vv_version_name(version), path);
	else if (h->major != VV_MAJOR)
		rc = rio_seterr(RIO_EVERSION, "vista %s: %s: major %u, this "
			"build reads %u", vv_version_name(version), path,
			h->major, VV_MAJOR);
	else if (h->checksum != vv_hdr_checksum(h))
		rc = rio_seterr(RIO_EBADCSUM, "vista %s: %s: header checksum",
			vv_version_name(version), path);
	else if (h->version != (uint32_t)version || h->db_off != VV_DB_OFF ||
		 h->db_size == 0 || h->aux_off < h->db_off + h->db_size ||
		 h->aux_off + h->aux_size > psize ||
		 (version == VV_V0 ? h->aux_size < 2 * VV_HEAP_BLOCKS :
		  h->aux_size < h->db_size || h->log_cap == 0 ||
		  h->log_off < h->aux_off + h->aux_size ||
		  h->log_off + h->log_cap * 32 > psize) ||
		 h->reserved[0] | h->reserved[1] | h->reserved[2] |
		 h->reserved[3] | h->reserved[4] | h->reserved[5] |
		 h->reserved[6])
		rc = rio_seterr(RIO_EBADHDR, "vista %s: %s: header fields out "
			"of range", vv_version_name(version), path);
	if (rc == 0)
		rc = attach(v);
	if (rc == 0)
		rc = recover(v);
	if (rc) {
		rio_pool_close(v->pool);
		free(v->r);
		free(v);
		return rc;
	}
	*out = v;
	return 0;
}

void *
vv_db(vv *v)
{
	return v->db;
}

size_t
vv_db_size(const vv *v)
{
	return v->db_size;
}

rio_pool *
vv_pool(vv *v)
{
	return v->pool;
}

int
vv_loaded(vv *v)
{
	if (v->fatal)
		return rio_seterr(v->fatal, "vista: handle in error state");
	vflush(v, v->db, v->db_size);
	if (v->ver != VV_V0)
		vcopy(v, v->aux, v->db, v->db_size);
	/* The populated database (and its mirror, equal to it) durable
	 * before the first transaction relies on them. */
	vdrain(v);
	return 0;
}

static int v0_commit_tail(vv *v);
static int v12_commit_tail(vv *v);

/* The commit mark and what follows it (C2 .. ; V0 from C2, V1/V2 from C2). */
static int
commit_tail(vv *v)
{
	int rc = v->ver == VV_V0 ? v0_commit_tail(v) : v12_commit_tail(v);
	v->nr = 0;
	return rc;
}

int
vv_begin(vv *v)
{
	if (v->fatal)
		return rio_seterr(v->fatal, "vista: handle in error state");
	if (v->in_tx)
		return rio_seterr(-EINVAL, "vista %s: begin inside a "
			"transaction", vv_version_name(v->ver));
#ifdef VV_BROKEN_LATE_MARK
	if (v->late) {
		v->late = false;
		int rc = commit_tail(v);
		if (rc)
			return rc;
	}
#endif
	v->in_tx = true;
	v->nr = 0;
	return 0;
}

/* ---- Version 0: the heap ---- */

static unsigned
class_of(uint64_t bytes)
{
	unsigned c = 0;
	while (((uint64_t)64 << c) < bytes && c + 1 < VV_CLASSES)
		c++;
	return c;
}

/* A block's payload offset (from the user area), or 0 when full. */
static uint64_t
heap_alloc(vv *v, uint64_t payload)
{
	unsigned c = class_of(payload + sizeof(struct vv_block));
	uint64_t size = (uint64_t)64 << c;
	if (size < payload + sizeof(struct vv_block))
		return 0;
	struct vv_heap *hp = v->heap;
	uint64_t b;
	if (hp->free[c]) {
		b = hp->free[c] - 1;
		hp->free[c] = ((struct vv_block *)(void *)(v->blocks + b))
			->next_free;
	} else {
		if (hp->bump + size > v->blocks_size)
			return 0;
		b = hp->bump;
		hp->bump += size;
	}
	struct vv_block *blk = (struct vv_block *)(void *)(v->blocks + b);
	blk->cls = c;
	blk->next_free = 0;
	return (uint64_t)(v->blocks - v->base) + b + sizeof(*blk);
}

static void
heap_free(vv *v, uint64_t payload_off)
{
	uint64_t b = payload_off - sizeof(struct vv_block) -
		(uint64_t)(v->blocks - v->base);
	struct vv_block *blk = (struct vv_block *)(void *)(v->blocks + b);
	blk->next_free = v->heap->free[blk->cls];
	v->heap->free[blk->cls] = b + 1;
}

static struct vv_undo *
undo_at(vv *v, uint64_t off)
{
	return (struct vv_undo *)(void *)(v->base + off);
}

/* Is off a record a correct run could have linked?  (Recovery's check.) */
static bool
undo_valid(vv *v, uint64_t off)
{
	uint64_t lo = (uint64_t)(v->blocks - v->base) + sizeof(struct vv_block);
	uint64_t hi = lo + v->blocks_size;
	if (off < lo || off + sizeof(struct vv_undo) > hi ||
	    (off - lo) % 64 != 0)
		return false;
	const struct vv_undo *u = undo_at(v, off);
	return u->seal == vv_undo_seal(u) && u->off + u->len <= v->db_size &&
		u->off + u->len >= u->off && u->buf >= lo &&
		(u->buf - lo) % 64 == 0 && u->buf + u->len <= hi &&
		u->buf + u->len >= u->buf;
}

static int
v0_set_ranges(vv *v, size_t n, const struct vv_range *r)
{
	uint64_t head = v->head;
	size_t nr0 = v->nr;
	for (size_t i = 0; i < n; i++) {
		if (r[i].len == 0)
			continue;
		uint64_t off = (uint64_t)((char *)r[i].addr - v->db);
		uint64_t rec = heap_alloc(v, sizeof(struct vv_undo));
		uint64_t buf = rec ? heap_alloc(v, r[i].len) : 0;
		if (buf == 0) {
			/* Heap full: give back this call's blocks (none is on
			 * the durable list yet); the transaction goes on. */
			if (rec)
				heap_free(v, rec);
			for (uint64_t h = head; h != v->head;) {
				struct vv_undo *u = undo_at(v, h);
				uint64_t next = u->next;
				heap_free(v, u->buf);
				heap_free(v, h);
				h = next;
			}
			v->nr = nr0;
			return rio_seterr(-ENOSPC, "vista v0: heap of %llu bytes "
				"full (range of %zu bytes)",
				(unsigned long long)v->blocks_size, r[i].len);
		}
		/* S1: the before-image into its own buffer, then the record. */
		vcopy(v, v->base + buf, v->db + off, r[i].len);
		struct vv_undo *u = undo_at(v, rec);
		u->next = head;
		u->off = off;
		u->len = r[i].len;
		u->buf = buf;
		u->seq = ++v->seq;
		u->seal = vv_undo_seal(u);
		vflush(v, u, sizeof(*u));
		v->st.bytes_logged += r[i].len;
		v->nr++;
		head = rec;
	}
	if (head == v->head)
		return 0;
#ifndef VV_BROKEN_V0_LINK_EARLY
	/* F1: the records and their buffers durable before the head names
	 * them: recovery follows only complete records. */
	vdrain(v);
#endif
	v->state->word = head; /* S2 */
	vflush(v, v->state, 8);
	/* F2: the head durable before the caller stores into the ranges. */
	vdrain(v);
	v->head = head;
	return 0;
}

/* Undo every record on the list from head (newest first) and drop it:
 * abort and recovery.  free_blocks: give the blocks back (abort). */
static int
v0_undo(vv *v, uint64_t head, bool check, bool free_blocks)
{
	/* Recovery checks the whole list before it writes anything: a
	 * corrupt record (or a cycle: more records than the heap holds)
	 * leaves the pool as it found it. */
	uint64_t most = v->blocks_size / 64;
	for (uint64_t h = head, k = 0; check && h; h = undo_at(v, h)->next)
		if (!undo_valid(v, h) || ++k > most)
			return rio_seterr(-EBADMSG, "vista v0: undo record at "
				"%llu (number %llu of the list) fails its check",
				(unsigned long long)h, (unsigned long long)k);
	for (uint64_t h = head; h;) {
		struct vv_undo *u = undo_at(v, h);
		/* A1: the before-image back into the database. */
		vcopy(v, v->db + u->off, v->base + u->buf, u->len);
		h = u->next;
	}
	/* F5: the restored values durable before the list is dropped. */
	vdrain(v);
	v->state->word = 0; /* A2 */
	vflush(v, v->state, 8);
	/* F6: the empty list durable before its blocks can be reused. */
	vdrain(v);
	if (free_blocks)
		for (uint64_t h = head; h;) {
			struct vv_undo *u = undo_at(v, h);
			uint64_t next = u->next;
			heap_free(v, u->buf);
			heap_free(v, h);
			h = next;
		}
	return 0;
}

static void
v0_commit_head(vv *v)
{
	if (v->head == 0)
		return;
	/* C1: the in-place stores, walking the list as Vista does. */
	for (uint64_t h = v->head; h;) {
		struct vv_undo *u = undo_at(v, h);
		vflush(v, v->db + u->off, u->len);
		h = u->next;
	}
	/* F3: the new values durable before the commit flag. */
	vdrain(v);
}

static int
v0_commit_tail(vv *v)
{
	if (v->head == 0)
		return 0;
	v->state->word = 0; /* C2: the commit flag */
	vflush(v, v->state, 8);
	/* F4: committed; only now may the records be freed and reused. */
	vdrain(v);
	rio_durable_point(v->pool, "vista v0 commit");
	if (rio_pool_error(v->pool))
		return fatal(v, rio_pool_error(v->pool), "commit");
	for (uint64_t h = v->head; h;) {
		struct vv_undo *u = undo_at(v, h);
		uint64_t next = u->next;
		heap_free(v, u->buf);
		heap_free(v, h);
		h = next;
	}
	v->head = 0;
	return 0;
}

/* ---- Versions 1 and 2: the range array and the mirror ---- */

static int
v12_set_ranges(vv *v, size_t n, const struct vv_range *r)
{
	if (v->nr + n > v->cap)
		return rio_seterr(-ENOSPC, "vista %s: more than %zu ranges in "
			"one transaction", vv_version_name(v->ver), v->cap);
	uint64_t g = v->gen + 1;
	for (size_t i = 0; i < n; i++) {
		uint64_t off = (uint64_t)((char *)r[i].addr - v->db);
		v->r[v->nr] = (struct vv_vrange){ off, r[i].len };
		/* S1: the coordinates, the seal last (one line). */
		struct vv_entry *e = &v->log[v->nr];
		e->off = off;
		e->len = r[i].len;
		e->gen = g;
		__atomic_store_n(&e->seal, vv_entry_seal(off, r[i].len, g),
			__ATOMIC_RELEASE);
		vflush(v, e, sizeof(*e));
		v->nr++;
	}
	/* F1: the coordinates durable before the caller stores into the
	 * ranges (and the last IDLE word before this transaction's stores). */
	vdrain(v);
	return 0;
}

/* V2's M1 for one range: store only the bytes that differ, and flush
 * each line holding one of them once, after its last store (a line
 * flushed and then stored to again would be written back twice). */
static void
diff_range(vv *v, uint64_t off, uint64_t len)
{
	const unsigned char *d = (const unsigned char *)v->db + off;
	unsigned char *m = (unsigned char *)v->aux + off;
	uintptr_t span_lo = 0, span_hi = 0; /* lines stored, not flushed */
	uint64_t i = 0;
	while (i < len) {
		/* Skip equal 8-byte words, then equal bytes. */
		while (i + 8 <= len) {
			uint64_t a, b;
			memcpy(&a, d + i, 8);
			memcpy(&b, m + i, 8);
			if (a != b)
				break;
			i += 8;
		}
		while (i < len && d[i] == m[i])
			i++;
		if (i == len)
			break;
		uint64_t j = i + 1;
		while (j < len && d[j] != m[j])
			j++;
		memcpy(m + i, d + i, j - i);
		v->st.bytes_logged += j - i;
		uintptr_t lo = (uintptr_t)(m + i) & ~(uintptr_t)(LINE - 1);
		uintptr_t hi = (uintptr_t)(m + j);
		if (span_hi != 0 && lo > span_hi) {
#ifndef VV_BROKEN_V2_DIFF_NO_PERSIST
			vflush(v, (void *)span_lo, span_hi - span_lo);
#endif
			span_hi = 0;
		}
		if (span_hi == 0)
			span_lo = lo;
		span_hi = hi;
		i = j;
	}
#ifndef VV_BROKEN_V2_DIFF_NO_PERSIST
	/* The last lines stored; F4 (the caller's fence) completes them. */
	if (span_hi != 0)
		vflush(v, (void *)span_lo, span_hi - span_lo);
#else
	(void)span_lo; /* broken on purpose: the mirror is never flushed */
#endif
}

/* M1 over ranges [0, n): V1 copies, V2 diffs.  Returns mirror bytes. */
static uint64_t
mirror_ranges(vv *v, const struct vv_vrange *r, size_t n)
{
	uint64_t before = v->st.bytes_logged;
	for (size_t i = 0; i < n; i++) {
		if (v->ver == VV_V1) {
			vcopy(v, v->aux + r[i].off, v->db + r[i].off, r[i].len);
			v->st.bytes_logged += r[i].len;
		} else {
			diff_range(v, r[i].off, r[i].len);
		}
	}
	return v->st.bytes_logged - before;
}

/* B1: mirror -> database over n ranges, then the fence that makes the
 * old values durable before B2 retires the entries (abort, recovery). */
static void
v12_undo(vv *v, const struct vv_vrange *r, size_t n)
{
	for (size_t i = 0; i < n; i++)
		vcopy(v, v->db + r[i].off, v->aux + r[i].off, r[i].len);
	vdrain(v);
}

/* M3 / B2: generation g finished; flushed, fenced by the caller or (M3,
 * B2 of abort) by the next F1, abort fence or close. */
static void
v12_idle(vv *v, uint64_t g)
{
	v->state->word = VV_WORD(g, VV_IDLE);
	vflush(v, v->state, 8);
	v->gen = g;
}

static void
v12_commit_head(vv *v)
{
	if (v->nr == 0)
		return;
#ifdef VV_BROKEN_V1_MIRROR_FIRST
	/* Broken on purpose: the mirror takes the new values before the
	 * commit mark; a crash between leaves a mirror that no longer holds
	 * the before-images recovery undoes from. */
	if (v->ver == VV_V1) {
		mirror_ranges(v, v->r, v->nr);
		vdrain(v);
	}
#endif
	/* C1: the in-place stores. */
	for (size_t i = 0; i < v->nr; i++)
		vflush(v, v->db + v->r[i].off, v->r[i].len);
	/* F2: the new values durable before the commit mark. */
	vdrain(v);
}

static int
v12_commit_tail(vv *v)
{
	if (v->nr == 0)
		return 0;
	uint64_t g = v->gen + 1;
	v->state->word = VV_WORD(g, VV_COMMITTED); /* C2 */
	vflush(v, v->state, 8);
	/* F3: the commit point; from here recovery rolls forward. */
	vdrain(v);
	rio_durable_point(v->pool, "vista mirror commit");
	if (rio_pool_error(v->pool))
		return fatal(v, rio_pool_error(v->pool), "commit");
	uint64_t wrote = 0;
#ifdef VV_BROKEN_V1_MIRROR_FIRST
	if (v->ver != VV_V1)
#endif
		wrote = mirror_ranges(v, v->r, v->nr); /* M1 */
	/* F4: the mirror durable before M3 retires the entries (V2 with
	 * nothing changed stored nothing to wait for). */
	if (wrote)
		vdrain(v);
	/* M3, no fence: the next F1, abort fence or close orders it. */
	v12_idle(v, g);
	return 0;
}

static int
v12_abort(vv *v)
{
	if (v->nr == 0)
		return 0;
	v12_undo(v, v->r, v->nr);
	v12_idle(v, v->gen + 1); /* B2, no fence: as M3 */
	return 0;
}

/* The run of entries of generation g from index 0, into v->r; -EBADMSG
 * for an entry that carries g and its seal but lies outside the database. */
static int
v12_entries(vv *v, uint64_t g, size_t *n)
{
	size_t i = 0;
	for (; i < v->cap; i++) {
		const struct vv_entry *e = &v->log[i];
		if (e->gen != g || e->seal != vv_entry_seal(e->off, e->len, g))
			break;
		if (e->off + e->len > v->db_size || e->off + e->len < e->off)
			return rio_seterr(-EBADMSG, "vista %s: entry %zu of "
				"generation %llu outside the database",
				vv_version_name(v->ver), i,
				(unsigned long long)g);
		v->r[i] = (struct vv_vrange){ e->off, e->len };
	}
	*n = i;
	return 0;
}

/* ---- recovery ---- */

static int
recover(vv *v)
{
	if (v->ver == VV_V0) {
		int rc = v0_undo(v, v->state->word, true, false);
		if (rc)
			return rc;
		/* Nothing in the heap outlives a transaction: start it over
		 * (its metadata was never made durable). */
		memset(v->heap, 0, sizeof(*v->heap));
		return 0;
	}
	uint64_t w = v->state->word, g = w >> 2;
	size_t n;
	int rc;
	if ((w & 3) == VV_COMMITTED) {
		if ((rc = v12_entries(v, g, &n)))
			return rc;
		/* M1 again: the committed values into the mirror. */
		enum vv_version ver = v->ver;
		v->ver = VV_V1; /* a straight copy, whatever the version */
		mirror_ranges(v, v->r, n);
		v->ver = ver;
		/* F4: the mirror durable before M3. */
		vdrain(v);
		v12_idle(v, g);
		/* Recovered: durable before the first transaction. */
		vdrain(v);
		return 0;
	}
	if ((w & 3) != VV_IDLE)
		return rio_seterr(-EBADMSG, "vista %s: state word %#llx has no "
			"phase", vv_version_name(v->ver), (unsigned long long)w);
	if ((rc = v12_entries(v, g + 1, &n)))
		return rc;
	v12_undo(v, v->r, n); /* B1 and its fence */
	/* B2, even with no entry: generation g + 1 is used up, so an entry
	 * of it that was flushed but never fenced (beyond the run) can never
	 * pass for one of the next transaction's. */
	v12_idle(v, g + 1);
	/* Recovered: durable before the first transaction. */
	vdrain(v);
	return 0;
}

/* ---- the calls ---- */

/* 0 if a call that needs an open transaction may go on, else the code
 * (a handle in error state, or no transaction) with its message. */
static int
in_tx_check(vv *v, const char *call)
{
	if (v->fatal)
		return rio_seterr(v->fatal, "vista: handle in error state");
	if (!v->in_tx)
		return rio_seterr(-EINVAL, "vista %s: %s outside a transaction",
			vv_version_name(v->ver), call);
	return 0;
}

int
vv_set_ranges(vv *v, size_t n, const struct vv_range *r)
{
	int rc = in_tx_check(v, "set_ranges");
	if (rc)
		return rc;
	for (size_t i = 0; i < n; i++) {
		uintptr_t a = (uintptr_t)r[i].addr, d = (uintptr_t)v->db;
		if (a < d || a - d > v->db_size || r[i].len > v->db_size -
		    (a - d))
			return rio_seterr(RIO_ERANGE, "vista %s: range %zu "
				"(%p, %zu bytes) is not inside the database "
				"(%p, %zu bytes)", vv_version_name(v->ver), i,
				r[i].addr, r[i].len, (void *)v->db, v->db_size);
	}
	return v->ver == VV_V0 ? v0_set_ranges(v, n, r) :
		v12_set_ranges(v, n, r);
}

int
vv_commit(vv *v)
{
	int rc = in_tx_check(v, "commit");
	if (rc)
		return rc;
	if (v->ver == VV_V0)
		v0_commit_head(v);
	else
		v12_commit_head(v);
	v->in_tx = false;
#ifdef VV_BROKEN_LATE_MARK
	/* Broken on purpose: the mark waits for the next begin or close,
	 * and commit returns before the transaction is durable. */
	v->late = true;
	return 0;
#else
	return commit_tail(v);
#endif
}

int
vv_abort(vv *v)
{
	int rc = in_tx_check(v, "abort");
	if (rc)
		return rc;
	if (v->ver == VV_V0) {
		if (v->head)
			rc = v0_undo(v, v->head, false, true);
		v->head = 0;
	} else {
		rc = v12_abort(v);
	}
	v->in_tx = false;
	v->nr = 0;
	return rc;
}

int
vv_close(vv *v)
{
	if (v == NULL)
		return 0;
#ifdef VV_BROKEN_LATE_MARK
	if (v->late)
		commit_tail(v);
#endif
	/* The lazy IDLE word (M3, B2) durable before the pool goes. */
	vdrain(v);
	int rc = rio_pool_close(v->pool);
	free(v->r);
	free(v);
	return rc;
}

void
vv_get_stats(const vv *v, struct vv_stats *out)
{
	*out = v->st;
}
