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
 *   L1. Every record of the lane's current transaction carries gen ==
 *       hdr->gen, and the records of a transaction are contiguous from the
 *       start of the record area.
 *   L2. A record is complete and durable before the caller stores to what
 *       it describes: the caller drains after vista__log_close() and only
 *       then returns to the program (or changes heap metadata).  Hence a
 *       record that does not verify can only be the newest one, and only
 *       if nothing it describes was stored yet.
 *   L3. Truncation is one aligned 8-byte store (hdr->gen + 1) made
 *       durable; every record of the old generation is then stale, in
 *       place, and is never replayed.
 *   L4. check is stored last.  Checksummed records (cacheline and page
 *       domains, where lines reach memory in any order) verify with
 *       rio_checksum; sealed records (byte domain, where stores persist in
 *       program order) verify with a seal over gen, position and header.
 *   L5. A record line this process wrote is durable with its content
 *       once the record was fenced (L2), and a record is written only
 *       after every earlier one was fenced; below lane->clean the record
 *       area holds only such lines.  There a long image is stored and
 *       flushed only where its bytes differ from what the lane holds: a
 *       line left alone already holds, durably, what the record needs.
 *       What an earlier process left (it may have died before its fence)
 *       is never trusted so.
 */
#include <errno.h>
#include <string.h>

#include "vista_int.h"

#define VISTA__MAX_DESC_LEN (1u << 30) /* bytes per descriptor */

uint64_t
vista__log_seed(uint64_t salt, unsigned lane)
{
	return salt ^ ((uint64_t)lane << 48) ^ 0x9e3779b97f4a7c15ull;
}

/* The seal of a sealed record at byte offset pos of the record area.  w2
 * and w3 are the header's words at offsets 16 and 24, passed in registers
 * (reading them back right after storing them piecewise would stall). */
static inline uint64_t
seal_of(uint64_t seed, uint64_t pos, uint64_t gen, uint64_t w2, uint64_t w3)
{
	return rio_mix64(gen ^ seed ^ (pos << 8) ^ (w2 * 0x9e3779b97f4a7c15ull) ^
		(w3 * 0xc2b2ae3d27d4eb4full));
}

static inline uint64_t
word_at(const void *p, size_t off)
{
	uint64_t w;
	memcpy(&w, (const char *)p + off, 8);
	return w;
}

static inline uint64_t
checksum_of(uint64_t seed, uint64_t pos, const struct vista_rec *r)
{
	return rio_checksum((const char *)r + 8, r->len - 8, seed ^ pos);
}

static inline size_t
pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

/* Header words 16..31 (len, type, count; prev, flags, reserved). */
static inline uint64_t
w2_of(size_t len, uint16_t type, uint16_t count)
{
	return (uint64_t)len | ((uint64_t)type << 32) | ((uint64_t)count << 48);
}

static inline uint64_t
w3_of(const struct vista_lane *l)
{
	return (uint64_t)l->last |
		((uint64_t)(l->v->sealed ? VISTA_REC_F_SEALED : 0) << 32);
}

/* Fill a record header at l->cur (check comes last, in close()). */
static inline struct vista_rec *
rec_start(struct vista_lane *l, uint64_t w2, uint64_t w3)
{
	struct vista_rec *r = (void *)l->cur;

	memcpy((char *)r + 8, &l->gen, 8);
	memcpy((char *)r + 16, &w2, 8);
	memcpy((char *)r + 24, &w3, 8);
	return r;
}

/* Seal or checksum the record (L4), start its write-back, advance. */
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
static void
copy_image_diff(struct vista_lane *l, struct plan *f, char *dst,
	const char *src, size_t n)
{
	uintptr_t d = (uintptr_t)dst, end = d + n;

	while (d < end) {
		/* One line of the lane, or the part of it in the image. */
		uintptr_t e = ((d + 64) & ~(uintptr_t)63) < end ?
			(d + 64) & ~(uintptr_t)63 : end;
		const char *sx = src + (d - (uintptr_t)dst);
		if (memcmp((const void *)d, sx, e - d) != 0) {
			memcpy((void *)d, sx, e - d);
			plan_add(l, f, d, e);
		}
		d = e;
	}
}

/* Seal or checksum the record (L4) and advance; the caller flushes. */
VISTA__INLINE void
seal_rec(struct vista_lane *l, struct vista_rec *r, uint64_t w2,
	uint64_t w3)
{
	uint64_t pos = (uint64_t)((char *)r - l->rec0);
	size_t len = (uint32_t)w2;
	size_t stride = (len + VISTA_REC_ALIGN - 1) &
		~(size_t)(VISTA_REC_ALIGN - 1);

	if (w3 & ((uint64_t)VISTA_REC_F_SEALED << 32)) {
		/* Byte domain: every store above reaches the persistence
		 * domain before this one (L4); the compiler must not sink
		 * them below it. */
		__asm__ volatile("" ::: "memory");
		__atomic_store_n(&r->check, seal_of(l->seed, pos, l->gen, w2, w3),
			__ATOMIC_RELAXED);
	} else {
		r->check = checksum_of(l->seed, pos, r);
	}
	if ((char *)r + len > l->clean) /* L5, once the caller fences */
		l->clean = (char *)r + len;
	l->cur += stride;
	l->last = (uint32_t)stride;
	l->nrec++;
}

/* Seal or checksum the record (L4), start its write-back, advance. */
VISTA__INLINE void
close_rec(struct vista_lane *l, struct vista_rec *r, uint64_t w2,
	uint64_t w3)
{
	struct plan f = { (uintptr_t)r, (uintptr_t)r + (uint32_t)w2, 0 };

	seal_rec(l, r, w2, w3);
	plan_flush(l, &f);
}

bool
vista__log_valid(uint64_t seed, uint64_t gen, const char *rec0,
	const char *end, const char *pos)
{
	const struct vista_rec *r = (const void *)pos;
	uint64_t off = (uint64_t)(pos - rec0);
	size_t len, need;

	if ((size_t)(end - pos) < sizeof(*r) ||
	    __atomic_load_n(&r->gen, __ATOMIC_RELAXED) != gen)
		return false;
	len = r->len;
	if (len < sizeof(*r) || len > (size_t)(end - pos) || r->reserved ||
	    (r->flags & ~VISTA_REC_F_SEALED) || r->count == 0)
		return false;
	if (r->prev % VISTA_REC_ALIGN || r->prev > off)
		return false;
	if (r->flags & VISTA_REC_F_SEALED) {
		if (r->check != seal_of(seed, off, r->gen, word_at(r, 16),
				    word_at(r, 24)))
			return false;
	} else if (r->check != checksum_of(seed, off, r)) {
		return false;
	}
	/* The check vouches for the bytes; now their shape. */
	switch (r->type) {
	case VISTA_REC_RANGES: {
		const struct vista_rdesc *d = (const void *)(pos + sizeof(*r));
		need = sizeof(*r) + (size_t)r->count * sizeof(*d);
		if (need > len)
			return false;
		for (unsigned i = 0; i < r->count; i++) {
			if (d[i].len == 0 || d[i].reserved)
				return false;
			need += pad8(d[i].len);
		}
		return need == len;
	}
	case VISTA_REC_ALLOC:
	case VISTA_REC_FREE:
		return len == sizeof(*r) +
			(size_t)r->count * sizeof(struct vista_robj);
	default:
		return false;
	}
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

int
vista__log_one(struct vista_lane *l, struct vista_segment *seg, uintptr_t lo,
	size_t n)
{
	size_t len = sizeof(struct vista_rec) + sizeof(struct vista_rdesc) +
		pad8(n);
	uint64_t w2, w3, d0, d1;
	struct vista_rec *r;

	if (VISTA__UNLIKELY(n > VISTA__MAX_DESC_LEN)) {
		struct vista__span s = { lo, lo + n, seg };
		return vista__log_ranges(l, &s, 1);
	}
	if (VISTA__UNLIKELY(vista__log_room(l, len) == NULL))
		return log_full(l, len);
	w2 = w2_of(len, VISTA_REC_RANGES, 1);
	w3 = w3_of(l);
	r = rec_start(l, w2, w3);
	d0 = lo - (uintptr_t)seg->base;
	d1 = (uint64_t)n | ((uint64_t)seg->idx << 32);
	memcpy(r + 1, &d0, 8);
	memcpy((char *)(r + 1) + 8, &d1, 8);
	copy_image((char *)(r + 1) + sizeof(struct vista_rdesc),
		(const char *)lo, n);
	close_rec(l, r, w2, w3);
	VISTA__STAT_ADD(l, bytes_logged, n);
	return 0;
}

int
vista__log_ranges(struct vista_lane *l, const struct vista__span *s,
	uint32_t n)
{
	size_t ndesc = 0, len = sizeof(struct vista_rec), bytes = 0;
	struct plan f = { 0, 0, 0 };
	struct vista_rdesc *d;
	struct vista_rec *r;
	uint64_t w2, w3;
	char *data;

	for (uint32_t i = 0; i < n; i++) {
		size_t sl = s[i].hi - s[i].lo;
		size_t k = (sl + VISTA__MAX_DESC_LEN - 1) / VISTA__MAX_DESC_LEN;
		ndesc += k;
		len += k * sizeof(*d) + pad8(sl); /* chunks are 8-byte multiples */
		bytes += sl;
	}
	if (ndesc > UINT16_MAX)
		return vista__err(-E2BIG,
			"%zu ranges in one call: at most %u", ndesc,
			UINT16_MAX);
	if (vista__log_room(l, len) == NULL)
		return log_full(l, len);
	w2 = w2_of(len, VISTA_REC_RANGES, (uint16_t)ndesc);
	w3 = w3_of(l);
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
			d->off = a - (uintptr_t)s[i].seg->base;
			d->len = (uint32_t)cl;
			d->seg = s[i].seg->idx;
			d->reserved = 0;
			if (cl >= 256 && data + cl <= l->clean) {
				copy_image_diff(l, &f, data, (const void *)a, cl);
			} else {
				copy_image(data, (const void *)a, cl);
				plan_add(l, &f, (uintptr_t)data,
					(uintptr_t)data + pad8(cl));
			}
			data += pad8(cl);
			a += cl;
			d++;
		}
	}
	plan_flush(l, &f);
	seal_rec(l, r, w2, w3);
	f = (struct plan){ (uintptr_t)r, f.floor, 0 };
	plan_flush(l, &f);
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
	w3 = w3_of(l);
	r = rec_start(l, w2, w3);
	memcpy(r + 1, o, n * sizeof(*o));
	close_rec(l, r, w2, w3);
	return 0;
}
