/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.c -- the in-line undo log of a lane (Amza et al., "Version 3")
 *
 * A record is appended by bumping a pointer: header, descriptors, then the
 * before-images themselves, in line (log_layout.h).  Records start at
 * 64-byte boundaries, so no two records share a cache line and a record is
 * flushed without touching its neighbours.
 *
 * Invariants
 *   L1. Every record of the lane's current transaction carries the
 *       lane's running generation (lane->gen >= hdr->gen, the floor), and
 *       the records of a transaction are contiguous from where it began.
 *   L2. A record is complete and durable before the caller stores to what
 *       it describes: the caller drains after vista__log_close() and only
 *       then returns to the program (or changes heap metadata).  Hence a
 *       record that does not verify can only be the newest one, and only
 *       if nothing it describes was stored yet.
 *   L3. Truncation is one aligned 8-byte store (hdr->gen, the floor,
 *       to gen + 1, after its check) made durable; every record of the
 *       old generation is then stale, in place, and is never replayed.
 *       The floor never passes the running generation (lane->gen), which
 *       also moves past a commit that stored no floor (L7).
 *   L4. Every record carries check = rio_checksum of everything after
 *       its tag (header words, descriptors, before-images), in every
 *       domain, and its tag is stored last in program order, with no
 *       fence before it (format 5): the record's lines are written back
 *       together and the caller's one fence (L2) makes them durable.
 *       Only aligned 8-byte stores are failure-atomic, so a crash before
 *       that fence may leave the tag without the rest: a record whose tag
 *       is present but whose check fails is torn -- it stored nothing --
 *       when nothing of its transaction follows it, and corrupt
 *       otherwise (recover.c C2).  The byte domain stores in program
 *       order, so there a present tag means a complete record.
 *   L5. A record line this process wrote is durable with its content
 *       once the record was fenced (L2), and a record is written only
 *       after every earlier one was fenced; below lane->clean the record
 *       area holds only such lines.  There a long image is stored and
 *       flushed only where its bytes differ from what the lane holds: a
 *       line left alone already holds, durably, what the record needs.
 *       What an earlier process left (it may have died before its fence)
 *       is never trusted so.  Copying a line whole is always correct, so
 *       after an image with no line in common with the lane the next
 *       VISTA__DIFF_BACKOFF long images are copied without comparing.
 *   L6. A lazy truncation (tx.c, commit_lazy, more than one lane) is
 *       stored and its line written back, with no fence: until a later
 *       fence completes it, the records of the old generation
 *       [old_lo, old_hi) stay alive on media beside their commit record,
 *       and nothing may be stored over them or over what they describe.
 *       Hence the lane's next transaction starts after them (or at the
 *       start of the area, if they do not begin there), an append that
 *       would reach them settles first (vista__log_room), and the first
 *       fence of every lane's transaction -- the one before its program
 *       stores -- also writes back the lane header of every other lane
 *       with a lazy truncation (vista__lazy_cover): a transaction of
 *       another thread can change bytes the commit record vouches for
 *       only after that fence.
 *   L7. With one lane (v->solo) the commit stores no truncation at all:
 *       the lane's next transaction ends the old generation G by its
 *       first record of G + 1 -- its tag, stored after G's commit fence,
 *       ends G even if the rest is torn (recover.c C7) -- and no other
 *       lane exists to store
 *       first.  Until then the records of G stay alive as in L6, so
 *       lazy stays set for the whole next transaction (an append that
 *       would reach them settles first), and whatever needs G ended
 *       without a next transaction -- vista_unmap, vista_fini, a new
 *       owner of the lane -- stores the floor lazy_gen and fences
 *       (vista__lazy_settle).  The floor is stored under hdr_busy and
 *       only raised, so the thread settling and the owner truncating
 *       never leave a header that reads lower than both.
 *   L8. Until its generation is ended on media (L6, L7), a lazily
 *       committed transaction is kept by recovery only while the bytes
 *       its records describe still match its commit record's checksum
 *       (recover.c C6).  A store outside transactions into those bytes
 *       would make recovery roll it back after its commit returned.  So
 *       such a store comes after vista_settle() (tx.c), which ends the
 *       generation as vista__lazy_settle does -- the floor stored with
 *       one lane, the truncation's line written back again with more,
 *       and a fence -- or after a fenced record of the thread's next
 *       transaction, which ends it as well (L6, L7; vista_settle then
 *       does nothing).  Stores inside a transaction need nothing: their
 *       range is logged, and that record ends the old generation first.
 */
#include <errno.h>
#include <string.h>

#include "vista_int.h"

#define VISTA__MAX_DESC_LEN VISTA_RDESC_MAX_LEN /* bytes per descriptor */

uint64_t
vista__log_seed(uint64_t salt, unsigned lane)
{
	return salt ^ ((uint64_t)lane << 48) ^ 0x9e3779b97f4a7c15ull;
}

static inline uint64_t
csum_seed(uint64_t seed, uint64_t gen, uint64_t pos)
{
	return seed ^ (gen * 0xc2b2ae3d27d4eb4full) ^ pos;
}

static inline uint64_t
checksum_of(uint64_t seed, uint64_t gen, uint64_t pos,
	const struct vista_rec *r, size_t len)
{
	return rio_checksum((const char *)r + 16, len - 16,
		csum_seed(seed, gen, pos));
}

static inline size_t
pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Header words 16..31 (len, type, count; prev, flags, nnew). */
static inline uint64_t
w2_of(size_t len, uint16_t type, uint16_t count)
{
	return (uint64_t)len | ((uint64_t)type << 32) | ((uint64_t)count << 48);
}

static inline uint64_t
w3_of(const struct vista_lane *l, uint16_t nnew)
{
	return (uint64_t)l->last | ((uint64_t)nnew << 48); /* flags: zero */
}

/* Fill a record header at l->cur (check and tag come last, L4). */
static inline struct vista_rec *
rec_start(struct vista_lane *l, uint64_t w2, uint64_t w3)
{
	struct vista_rec *r = (void *)l->cur;

	memcpy((char *)r + 16, &w2, 8);
	memcpy((char *)r + 24, &w3, 8);
	return r;
}

/*
 * The lines of a record's data to flush, in address order, each once (L5),
 * flushed as soon as a run of them is complete.  Lines below `floor` hold
 * the header too, whose check is stored last: they are flushed after it,
 * not here.  A plan with hi == 0 is empty.
 */
struct plan {
	uintptr_t lo, hi, floor;
};

static inline void
plan_flush(struct vista_lane *l, struct plan *f)
{
#ifndef VISTA_BROKEN_NO_LOG_PERSIST
	/* Start writing the record back; the caller's drain completes it
	 * before anything the record describes is stored (L2). */
	if (f->hi > f->lo)
		vista__flush(l, l->v->log, (void *)f->lo, f->hi - f->lo);
#else
	(void)l;
#endif
	f->lo = f->hi = 0;
}

/* Add [a, b) (ranges come in increasing address order). */
static inline void
plan_add(struct vista_lane *l, struct plan *f, uintptr_t a, uintptr_t b)
{
	a &= ~(uintptr_t)63;
	b = (b + 63) & ~(uintptr_t)63;
	if (a < f->floor)
		a = f->floor;
	if (a >= b)
		return;
	if (f->hi != 0 && a <= f->hi) {
		if (b > f->hi)
			f->hi = b;
		return;
	}
	plan_flush(l, f);
	f->lo = a;
	f->hi = b;
}

/*
 * Copy a long before-image into the record, storing only the lines of the
 * lane that do not hold those bytes already (L5): a page logged again at
 * the position where the lane logged it last time -- an automatic
 * transaction repeating itself, a chained one keeping its pages -- then
 * costs the lines that changed, not the page.
 */
static size_t
copy_image_diff(struct vista_lane *l, struct plan *f, char *dst,
	const char *src, size_t n)
{
	uintptr_t d = (uintptr_t)dst, end = d + n;
	size_t same = 0;

	while (d < end) {
		/* One line of the lane, or the part of it in the image. */
		uintptr_t e = ((d + 64) & ~(uintptr_t)63) < end ?
			(d + 64) & ~(uintptr_t)63 : end;
		const char *sx = src + (d - (uintptr_t)dst);
		if (memcmp((const void *)d, sx, e - d) != 0) {
			memcpy((void *)d, sx, e - d);
			plan_add(l, f, d, e);
		} else {
			same++;
		}
		d = e;
	}
	return same;
}

/*
 * Whether to compare a long image with the lane (L5).  The comparison
 * reads lines a write-back may have evicted, and pays only where the
 * lane holds the same bytes at the same place (a page logged again by
 * an automatic transaction); rows of a workload that logs other rows at
 * each position never match.  After an image with no line in common,
 * the next VISTA__DIFF_BACKOFF long images are copied without looking.
 */
#define VISTA__DIFF_BACKOFF 64
static inline bool
diff_worth(struct vista_lane *l)
{
	if (l->diff_skip == 0)
		return true;
	l->diff_skip--;
	return false;
}

/*
 * Checksum the record, then store its tag last (L4), and advance.  The
 * lines of data above `floor` were stored and their write-back started
 * already; [r, floor) holds the header (and descriptors) still to flush.
 * The caller's drain completes the record (L2).
 */
VISTA__INLINE void
seal_rec(struct vista_lane *l, struct vista_rec *r, uint64_t w2,
	uintptr_t floor)
{
	uint64_t pos = (uint64_t)((char *)r - l->rec0);
	size_t len = (uint32_t)w2;
	size_t stride = (len + VISTA_REC_ALIGN - 1) &
		~(size_t)(VISTA_REC_ALIGN - 1);
	uint64_t tag = vista_rec_tag(l->seed, l->gen, pos);

	/* L1: appended at the cursor, inside the lane, in the running
	 * generation (at or above the header's floor), by a transaction. */
	VISTA_ASSERT((char *)r == l->cur && (char *)r + len <= l->end, "L1");
	VISTA_ASSERT(l->gen >= l->hdr->gen && l->state != VISTA__TX_IDLE,
		"L1");
	VISTA_ASSERT((l->nrec == 0) == (l->cur == l->start), "L1");
	r->check = checksum_of(l->seed, l->gen, pos, r, len);
	if (l->v->sealed) {
		/* Byte domain: every store above reaches the persistence
		 * domain before the tag; the compiler must not sink them
		 * below it. */
		__asm__ volatile("" ::: "memory");
		/* relaxed: an 8-byte store that must not tear.  With the
		 * compiler barrier above it comes after the record's stores
		 * because x86 makes stores visible (and under eADR durable)
		 * in program order; a weaker ISA would need a release
		 * store. */
		__atomic_store_n(&r->tag, tag, __ATOMIC_RELAXED);
	} else {
		/* The transaction's first fence -- the caller's, after this
		 * record -- also completes lazy truncations (L6): this
		 * lane's, whose line its commit wrote back, and other
		 * lanes', written back here. */
		if (l->nrec == l->nrec0 &&
		    VISTA__UNLIKELY(l->v->lanes_seen > 1))
			vista__lazy_cover(l);
		/* lazy stays set until this transaction ends (the commit's
		 * or the truncation's fence): a caller may append another
		 * record before it fences, so no record here knows that
		 * the fence after the first one has run. */
		/* A record of this transaction appended with no fence
		 * after it yet (auto.c logs page groups so) is durable
		 * before this one's tag can be: a record of the
		 * transaction beyond a torn one would be corruption (L4). */
		if (VISTA__UNLIKELY(l->unfenced))
			vista__drain(l);
		/* relaxed: an 8-byte store that must not tear.  No fence
		 * before it (L4): lines persist in any order, so the tag
		 * may reach media before the rest of the record; the check
		 * then fails and recovery takes the record for torn. */
		__atomic_store_n(&r->tag, tag, __ATOMIC_RELAXED);
#ifndef VISTA_BROKEN_NO_LOG_PERSIST
		/* The header's lines (tag, words, descriptors) are written
		 * back with the data lines started above; the caller's
		 * drain makes the whole record durable before the program
		 * stores to what it describes (L2). */
		vista__flush(l, l->v->log, r, floor - (uintptr_t)r);
#else
		(void)floor;
#endif
		l->unfenced = true;
	}
	if ((char *)r + len > l->clean) /* L5, once the caller fences */
		l->clean = (char *)r + len;
	l->cur += stride;
	l->last = (uint32_t)stride;
	l->nrec++;
}

/* A record written in one piece: seal it, flush it whole. */
VISTA__INLINE void
close_rec(struct vista_lane *l, struct vista_rec *r, uint64_t w2)
{
	seal_rec(l, r, w2, (uintptr_t)r + (uint32_t)w2);
}

int
vista__log_check(uint64_t seed, uint64_t gen, const char *rec0,
	const char *end, const char *pos, const char **why)
{
	const struct vista_rec *r = (const void *)pos;
	uint64_t off = (uint64_t)(pos - rec0);
	uint64_t tag;
	size_t len, need;

	*why = NULL;
	if ((size_t)(end - pos) < sizeof(*r))
		return VISTA__REC_END;
	/* relaxed: the tag is read whole (stored whole by seal_rec());
	 * recovery and the checker read a log no thread is writing. */
	tag = __atomic_load_n(&r->tag, __ATOMIC_RELAXED) ^
		vista_rec_tag(seed, gen, off);
	if ((unsigned)__builtin_popcountll(tag) > VISTA_TAG_SLACK)
		return VISTA__REC_END; /* never written, or its tag was not */
	*why = "its tag has flipped bits";
	if (tag != 0)
		return VISTA__REC_BAD; /* an 8-byte store never tears */
	/* The tag was stored, but the rest of the record may not have
	 * reached media with it (L4): a record that fails from here on is
	 * torn, or corrupt; recovery tells the two apart by what else the
	 * lane holds (recover.c C2). */
	len = r->len;
	*why = "its header fields are invalid";
	if (len < sizeof(*r) || len > (size_t)(end - pos) ||
	    r->nnew > r->count ||
	    (r->nnew != 0 && r->type != VISTA_REC_RANGES) ||
	    r->flags || r->count == 0 || r->prev % VISTA_REC_ALIGN ||
	    r->prev > off)
		return VISTA__REC_TORN;
	*why = "its checksum does not match its contents";
#ifndef VISTA_BROKEN_TORN_TRUSTED
	if (r->check != checksum_of(seed, gen, off, r, len))
		return VISTA__REC_TORN;
#endif
	/* The check vouches for the bytes; now their shape. */
	*why = "its descriptors do not add up to its length";
	switch (r->type) {
	case VISTA_REC_RANGES: {
		const struct vista_rdesc *d = (const void *)(pos + sizeof(*r));
		need = sizeof(*r) + (size_t)r->count * sizeof(*d);
		if (need > len)
			return VISTA__REC_BAD;
		for (unsigned i = 0; i < r->count; i++) {
			if (d[i].len == 0)
				return VISTA__REC_BAD;
			/* New ranges (the last nnew) carry no data. */
			if (i < vista_rec_nold(r))
				need += pad8(d[i].len);
		}
		break;
	}
	case VISTA_REC_ALLOC:
	case VISTA_REC_FREE:
		need = sizeof(*r) + (size_t)r->count * sizeof(struct vista_robj);
		break;
	default:
		*why = "its type is unknown";
		return VISTA__REC_BAD;
	}
	if (need != len)
		return VISTA__REC_BAD;
	*why = NULL;
	return VISTA__REC_OK;
}

VISTA__COLD static int
log_full(struct vista_lane *l, size_t len)
{
	return vista__err(VISTA_ELOGFULL,
		"log lane %u is full: a %zu-byte record does not fit in the "
		"%zu bytes left (lane size %zu); the transaction can still be "
		"committed or aborted",
		l->idx, len, (size_t)(l->end - l->cur), l->v->lane_size);
}

/* Copy n bytes of before-image, reading nothing outside the range. */
static inline void
copy_image(char *dst, const char *src, size_t n)
{
	if (n == 8) {
		memcpy(dst, src, 8);
	} else if (n >= 8 && n <= 16) {
		memcpy(dst, src, 8);
		memcpy(dst + n - 8, src + n - 8, 8);
	} else {
		memcpy(dst, src, n);
	}
}

/* A descriptor word (log_layout.h: off bits 0-39, len 40-55, seg 56-63),
 * built with shifts: a bit-field assignment reads the word back. */
static inline uint64_t
rdesc_word(uint64_t off, uint64_t len, unsigned seg)
{
	return off | (len << 40) | ((uint64_t)seg << 56);
}

int
vista__log_one(struct vista_lane *l, struct vista_segment *seg, uintptr_t lo,
	size_t n)
{
	size_t len = sizeof(struct vista_rec) + sizeof(struct vista_rdesc) +
		pad8(n);
	uint64_t w2, w3, d;
	struct vista_rec *r;

	if (VISTA__UNLIKELY(n > VISTA__MAX_DESC_LEN)) {
		struct vista__span s = { lo, lo + n, seg };
		return vista__log_ranges(l, &s, 1, 0);
	}
	if (VISTA__UNLIKELY(vista__log_room(l, len) == NULL))
		return log_full(l, len);
	w2 = w2_of(len, VISTA_REC_RANGES, 1);
	w3 = w3_of(l, 0);
	r = rec_start(l, w2, w3);
	d = rdesc_word(lo - (uintptr_t)seg->base, n, seg->idx);
	memcpy(r + 1, &d, sizeof(d));
	copy_image((char *)(r + 1) + sizeof(struct vista_rdesc),
		(const char *)lo, n);
	close_rec(l, r, w2);
	VISTA__STAT_ADD(l, bytes_logged, n);
	return 0;
}

int
vista__log_batch(struct vista_lane *l, struct vista_segment *seg,
	const struct vista_gap *g, uint32_t n, uint32_t nnew)
{
	size_t len = sizeof(struct vista_rec) + n * sizeof(struct vista_rdesc);
	size_t bytes = 0;
	uintptr_t base = (uintptr_t)seg->base;
	uint64_t w2, w3, *d;
	struct vista_rec *r;
	char *data;

	for (uint32_t i = 0; i < n - nnew; i++) {
		bytes += g[i].hi - g[i].lo;
		len += pad8(g[i].hi - g[i].lo);
	}
	if (VISTA__UNLIKELY(vista__log_room(l, len) == NULL))
		return log_full(l, len);
	w2 = w2_of(len, VISTA_REC_RANGES, (uint16_t)n);
	w3 = w3_of(l, (uint16_t)nnew);
	r = rec_start(l, w2, w3);
	d = (uint64_t *)(void *)(r + 1);
	data = (char *)(d + n);
	for (uint32_t i = 0; i < n; i++) {
		size_t sl = g[i].hi - g[i].lo;
		d[i] = rdesc_word(g[i].lo - base, sl, seg->idx);
		if (i >= n - nnew)
			continue; /* a new range: its coordinates only */
		copy_image(data, (const void *)g[i].lo, sl);
		data += pad8(sl);
	}
	/* A few lines: all written back after the tag (seal_rec). */
	close_rec(l, r, w2);
	VISTA__STAT_ADD(l, bytes_logged, bytes);
	return 0;
}

int
vista__log_ranges(struct vista_lane *l, const struct vista__span *s,
	uint32_t n, uint32_t nnew)
{
	size_t ndesc = 0, dnew = 0, len = sizeof(struct vista_rec), bytes = 0;
	struct plan f = { 0, 0, 0 };
	struct vista_rdesc *d;
	struct vista_rec *r;
	uint64_t w2, w3;
	bool sealed = l->v->sealed;
	char *data;

	for (uint32_t i = 0; i < n; i++) {
		size_t sl = s[i].hi - s[i].lo;
		size_t k = VISTA__LIKELY(sl <= VISTA__MAX_DESC_LEN) ? 1 :
			(sl + VISTA__MAX_DESC_LEN - 1) / VISTA__MAX_DESC_LEN;
		ndesc += k;
		len += k * sizeof(*d);
		if (i >= n - nnew) {
			dnew += k; /* a new range: no data */
			continue;
		}
		len += pad8(sl); /* chunks are 8-byte multiples */
		bytes += sl;
	}
	if (ndesc > UINT16_MAX)
		return vista__err(-E2BIG,
			"%zu ranges in one call: at most %u", ndesc,
			UINT16_MAX);
	if (vista__log_room(l, len) == NULL)
		return log_full(l, len);
	w2 = w2_of(len, VISTA_REC_RANGES, (uint16_t)ndesc);
	w3 = w3_of(l, (uint16_t)dnew);
	r = rec_start(l, w2, w3);
	d = (void *)(r + 1);
	data = (char *)(d + ndesc);
	/* The lines of header and descriptors go last, after the check. */
	f.floor = ((uintptr_t)data + 63) & ~(uintptr_t)63;
	for (uint32_t i = 0; i < n; i++) {
		uintptr_t a = s[i].lo;
		while (a < s[i].hi) {
			size_t cl = s[i].hi - a;
			if (cl > VISTA__MAX_DESC_LEN)
				cl = VISTA__MAX_DESC_LEN;
			uint64_t x = rdesc_word(a - (uintptr_t)s[i].seg->base,
				cl, s[i].seg->idx);
			memcpy(d, &x, sizeof(x));
			a += cl;
			d++;
			if (i >= n - nnew)
				continue; /* a new range: its coordinates only */
			if (cl >= 256 && data + cl <= l->clean &&
			    diff_worth(l)) {
				if (copy_image_diff(l, &f, data,
					    (const void *)(a - cl), cl) == 0)
					l->diff_skip = VISTA__DIFF_BACKOFF;
			} else {
				copy_image(data, (const void *)(a - cl), cl);
				/* The byte domain writes nothing back. */
				if (!sealed)
					plan_add(l, &f, (uintptr_t)data,
						(uintptr_t)data + pad8(cl));
			}
			data += pad8(cl);
		}
	}
	plan_flush(l, &f);
	seal_rec(l, r, w2, f.floor);
	VISTA__STAT_ADD(l, bytes_logged, bytes);
	return 0;
}

int
vista__log_objs(struct vista_lane *l, uint16_t type,
	const struct vista_robj *o, uint32_t n)
{
	size_t len = sizeof(struct vista_rec) + n * sizeof(*o);
	uint64_t w2, w3;
	struct vista_rec *r;

	if (vista__log_room(l, len) == NULL)
		return log_full(l, len);
	w2 = w2_of(len, type, (uint16_t)n);
	w3 = w3_of(l, 0);
	r = rec_start(l, w2, w3);
	memcpy(r + 1, o, n * sizeof(*o));
	close_rec(l, r, w2);
	return 0;
}

void
vista__floor_store(struct vista_lane *l, uint64_t g)
{
	struct vista_lane_hdr *h = l->hdr;

	/* L7: one store of the floor at a time, and only upwards; the
	 * caller writes it back and fences.  acquire
	 * / release: the header words stored under the flag are seen by
	 * the next thread that takes it. */
	while (__atomic_exchange_n(&l->hdr_busy, 1, __ATOMIC_ACQUIRE))
		__builtin_ia32_pause();
	/* relaxed: 8-byte stores that must not tear, check first; their
	 * durability is the caller's flush and drain. */
	if (g > __atomic_load_n(&h->gen, __ATOMIC_RELAXED)) {
		__atomic_store_n(&h->gen_check,
			vista_lane_gen_check(l->seed, g), __ATOMIC_RELAXED);
		/* The floor may jump by more than one here (past lazy
		 * commits that stored none): the check is durable before
		 * gen changes, so a crash between them leaves the new
		 * check beside the old gen, which recovery completes from
		 * the commit records (log_layout.h), never the old check
		 * beside a new gen.  A step of one needs no such fence: a
		 * check within one of gen is read either way. */
		if (g > __atomic_load_n(&h->gen, __ATOMIC_RELAXED) + 1) {
			vista__flush(l, l->v->log, h, sizeof(*h));
			vista__drain(l);
		}
		__atomic_store_n(&h->gen, g, __ATOMIC_RELAXED);
	}
	__atomic_store_n(&l->hdr_busy, 0, __ATOMIC_RELEASE);
}

void
vista__lazy_settle(struct vista_lane *l)
{
	/* L7: with one lane the truncation was never stored: store it. */
	if (l->v->solo)
		/* relaxed: lazy_gen was read after the acquire of lazy by
		 * the caller, or is this thread's own. */
		vista__floor_store(l, __atomic_load_n(&l->lazy_gen,
			__ATOMIC_RELAXED));
	/* L6: the truncation a commit stored without a fence (its line is
	 * written back again: another thread may have stored it) is
	 * durable before its records are written over. */
	vista__flush(l, l->v->log, l->hdr, sizeof(*l->hdr));
	vista__drain(l);
	/* release: as in seal_rec(). */
	__atomic_store_n(&l->lazy, false, __ATOMIC_RELEASE);
}

void
vista__lazy_cover(struct vista_lane *l)
{
	vista *v = l->v;
	/* relaxed: lanes_seen only grows, under v->lock; a lane taken after
	 * this load began its transactions after ours was declared. */
	unsigned n = __atomic_load_n(&v->lanes_seen, __ATOMIC_RELAXED);

	for (unsigned i = 0; i < n; i++) {
		struct vista_lane *o = &v->lanes[i];
		/* acquire: pairs with the release in commit_lazy(), so the
		 * truncation stored before the flag is the line written back.
		 * Written back here, durable at the caller's fence (L6). */
		if (o != l && __atomic_load_n(&o->lazy, __ATOMIC_ACQUIRE))
			vista__flush(l, v->log, o->hdr, sizeof(*o->hdr));
	}
}

uint64_t
vista__after_csum(const struct vista_lane *l, const char *base, unsigned seg,
	bool *other)
{
	uint64_t h = l->seed ^ (l->gen * 0x9e3779b97f4a7c15ull) ^
		VISTA_COMMIT_CSUM_SEED;

	*other = false;
	for (const char *pos = l->start; pos < l->cur;) {
		const struct vista_rec *r = (const void *)pos;
		if (r->type == VISTA_REC_RANGES) {
			const struct vista_rdesc *d = (const void *)(r + 1);
			for (unsigned i = 0; i < r->count; i++) {
				if (d[i].seg != seg) {
					*other = true;
					continue;
				}
#ifdef VISTA_BROKEN_NEW_UNSUMMED
				/* wrong: a new range's bytes are left out, so
				 * the record vouches without them */
				if (i >= vista_rec_nold(r))
					continue;
#endif
				h = rio_checksum(base + d[i].off, d[i].len, h);
			}
		} else {
			*other = true;
		}
		pos += (r->len + VISTA_REC_ALIGN - 1) &
			~(size_t)(VISTA_REC_ALIGN - 1);
	}
	return h;
}
