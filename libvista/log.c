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

static inline uint64_t
mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* The seal of a sealed record at byte offset pos of the record area. */
static inline uint64_t
seal_of(uint64_t seed, uint64_t pos, const struct vista_rec *r)
{
	uint64_t w2, w3;

	memcpy(&w2, (const char *)r + 16, 8);
	memcpy(&w3, (const char *)r + 24, 8);
	return mix64(r->gen ^ seed ^ (pos << 8) ^
		mix64(w2 ^ ((w3 << 1) | (w3 >> 63))));
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

void
vista__log_close(struct vista_lane *l, struct vista_rec *r)
{
	uint64_t pos = (uint64_t)((char *)r - l->rec0);
	size_t stride = (r->len + VISTA_REC_ALIGN - 1) &
		~(size_t)(VISTA_REC_ALIGN - 1);

	if (r->flags & VISTA_REC_F_SEALED) {
		/* Byte domain: every store above reaches the persistence
		 * domain before this one (L4); the compiler must not sink
		 * them below it. */
		__asm__ volatile("" ::: "memory");
		__atomic_store_n(&r->check, seal_of(l->seed, pos, r),
			__ATOMIC_RELAXED);
	} else {
		r->check = checksum_of(l->seed, pos, r);
	}
#ifndef VISTA_BROKEN_NO_LOG_PERSIST
	/* Start writing the record back; the caller's drain completes it
	 * before anything the record describes is stored (L2). */
	vista__flush(l, l->v->log, r, r->len);
#endif
	l->cur += stride;
	l->last = (uint32_t)stride;
	l->nrec++;
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
		if (r->check != seal_of(seed, off, r))
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

/* Fill a record header at l->cur. */
static struct vista_rec *
rec_start(struct vista_lane *l, size_t len, uint16_t type, uint16_t count)
{
	struct vista_rec *r = (void *)l->cur;

	r->gen = l->gen;
	r->len = (uint32_t)len;
	r->type = type;
	r->count = count;
	r->prev = l->last;
	r->flags = l->v->sealed ? VISTA_REC_F_SEALED : 0;
	r->reserved = 0;
	return r;
}

static int
log_full(struct vista_lane *l, size_t len)
{
	return vista__err(VISTA_ELOGFULL,
		"log lane %u is full: a %zu-byte record does not fit in the "
		"%zu bytes left (lane size %zu); the transaction can still be "
		"committed or aborted",
		l->idx, len, (size_t)(l->end - l->cur), l->v->lane_size);
}

int
vista__log_ranges(struct vista_lane *l, const struct vista__span *s,
	uint32_t n)
{
	size_t ndesc = 0, len = sizeof(struct vista_rec), bytes = 0;
	struct vista_rdesc *d;
	struct vista_rec *r;
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
	r = rec_start(l, len, VISTA_REC_RANGES, (uint16_t)ndesc);
	d = (void *)(r + 1);
	data = (char *)(d + ndesc);
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
			memcpy(data, (const void *)a, cl);
			data += pad8(cl);
			a += cl;
			d++;
		}
	}
	vista__log_close(l, r);
	VISTA__STAT_ADD(l, bytes_logged, bytes);
	return 0;
}

int
vista__log_objs(struct vista_lane *l, uint16_t type,
	const struct vista_robj *o, uint32_t n)
{
	size_t len = sizeof(struct vista_rec) + n * sizeof(*o);
	struct vista_rec *r;

	if (vista__log_room(l, len) == NULL)
		return log_full(l, len);
	r = rec_start(l, len, type, (uint16_t)n);
	memcpy(r + 1, o, n * sizeof(*o));
	vista__log_close(l, r);
	return 0;
}

void
vista__log_truncate(struct vista_lane *l)
{
	/* L3: one 8-byte store discards the whole transaction... */
	__atomic_store_n(&l->hdr->gen, l->gen + 1, __ATOMIC_RELAXED);
	/* ...once durable: nothing after this may assume the old records
	 * are still live, and the next transaction's records (gen + 1) must
	 * not become valid before the old ones are dead. */
	vista__flush(l, l->v->log, &l->hdr->gen, sizeof(l->hdr->gen));
	vista__drain(l);
	l->gen++;
}

void
vista__log_reset(struct vista_lane *l)
{
	l->cur = l->rec0;
	l->last = 0;
	l->nrec = 0;
	l->nfree_recs = 0;
	l->nalloc_recs = 0;
}
