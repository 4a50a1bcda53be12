/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cceh_split.c -- an extendible hash with segment splits (the shape of
 * CCEH, as RECIPE and the Jaaru and Witcher papers describe it), written
 * here against librio
 *
 * A directory of 2^depth entries names segments (by index); a segment is
 * SLOTS slots of one line each and a local depth.  A slot is {value, key}
 * in one line, key stored last (key 0 = free).  insert(k): the directory
 * entry of k's low `depth` bits names the segment; k goes into the first
 * free slot.  A full segment splits: a new segment gets the keys whose
 * next hash bit is 1 and is made durable; then the directory entries that
 * now belong to it are pointed at it and made durable; then the moved
 * keys are cleared from the old segment (a key in both is found in
 * either).  The directory doubles first if the segment's local
 * depth equals the global one: entries copied, made durable, then the
 * global depth.  Invariants: every key inserted before the last durable
 * `count` is found through the directory; every key found through the
 * directory has its value.
 *
 * Variants:
 *   BUG_SEGMENT_UNPERSISTED  the new segment is not made durable before
 *                            the directory names it (a missing flush)
 *   BUG_KEY_FIRST            a slot's key is stored before its value, in
 *                            the same line (a store-order bug inside one
 *                            line: only per-store crash states show it)
 */
#include "example.h"

#define SLOTS 4
#define MAXSEG 16
#define MAXDIR 16
#define KEYS 24

/* The compiler must keep the program order of the stores. */
#define ORDER() __asm__ volatile("" ::: "memory")

struct slot {
	uint64_t value;
	uint64_t key;
	uint8_t pad[EX_LINE - 16];
};

struct segment {
	uint64_t local;
	uint8_t pad[EX_LINE - 8];
	struct slot s[SLOTS];
};

struct root {
	uint64_t depth;    /* global depth */
	uint64_t nseg;     /* segments in use */
	uint64_t count;    /* keys inserted (1..count are in) */
	uint8_t pad[EX_LINE - 24];
	uint64_t dir[MAXDIR]; /* segment index per entry: two lines */
	struct segment seg[MAXSEG];
};

static uint64_t
hash(uint64_t k)
{
	return k * 0x9e3779b97f4a7c15ull >> 7;
}

static uint64_t
value_of(uint64_t k)
{
	return k * 7 + 1;
}

static void
put(rio_pool *p, struct slot *s, uint64_t k)
{
#ifdef BUG_KEY_FIRST
	s->key = k; /* BUG-SITE */
	ORDER();
	s->value = value_of(k);
#else
	s->value = value_of(k);
	ORDER();
	s->key = k; /* same line, last: the slot is taken with its value */
#endif
	/* The slot is durable before the count says k is in. */
	rio_persist(p, s, 16);
}

static int
split(rio_pool *p, struct root *r, uint64_t e)
{
	struct segment *old = &r->seg[r->dir[e]];
	struct segment *nw;
	uint64_t bit, oi = r->dir[e];
	int n = 0;

	if (r->nseg == MAXSEG)
		return -1;
	if (old->local == r->depth) {
		uint64_t half = 1ull << r->depth;
		if (half * 2 > MAXDIR)
			return -1;
		for (uint64_t i = 0; i < half; i++)
			r->dir[half + i] = r->dir[i];
		/* The new half of the directory is durable before the depth
		 * makes it reachable. */
		rio_persist(p, &r->dir[half], half * sizeof(r->dir[0]));
		r->depth++;
		rio_persist(p, &r->depth, sizeof(r->depth));
	}
	bit = 1ull << old->local;
	nw = &r->seg[r->nseg];
	memset(nw, 0, sizeof(*nw));
	for (int i = 0; i < SLOTS; i++)
		if (old->s[i].key && hash(old->s[i].key) & bit) {
			nw->s[n++] = old->s[i]; /* BUG-SITE flush */
		}
	nw->local = old->local + 1;
#ifndef BUG_SEGMENT_UNPERSISTED
	/* The new segment is durable before the directory names it. */
	rio_persist(p, nw, sizeof(*nw));
#endif
	r->nseg++;
	rio_persist(p, &r->nseg, sizeof(r->nseg));
	uint64_t lo = MAXDIR, hi = 0;
	for (uint64_t i = 0; i < (1ull << r->depth); i++)
		if (r->dir[i] == oi && (i & bit)) {
			r->dir[i] = r->nseg - 1;
			lo = i < lo ? i : lo;
			hi = i + 1;
		}
	/* The directory names the new segment (durable) before the moved
	 * keys leave the old one. */
	rio_persist(p, &r->dir[lo], (hi - lo) * sizeof(r->dir[0]));
	old->local++;
	rio_flush(p, &old->local, sizeof(old->local));
	for (int i = 0; i < SLOTS; i++)
		if (old->s[i].key && hash(old->s[i].key) & bit) {
			old->s[i].key = 0;
			rio_flush(p, &old->s[i], sizeof(old->s[i]));
		}
	/* The old segment drops the moved keys, durably. */
	rio_drain(p);
	return 0;
}

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	r->nseg = 1;
	/* One empty segment, directory depth 0: durable before any key. */
	rio_persist(p, r, EX_LINE);
	for (uint64_t k = 1; k <= KEYS; k++) {
		for (;;) {
			uint64_t e = hash(k) & ((1ull << r->depth) - 1);
			struct segment *sg = &r->seg[r->dir[e]];
			int i;
			for (i = 0; i < SLOTS && sg->s[i].key; i++)
				;
			if (i < SLOTS) {
				put(p, &sg->s[i], k);
				break;
			}
			if (split(p, r, e) != 0)
				return 0; /* full: the run ends */
		}
		r->count = k;
		/* k is in, durably. */
		rio_persist(p, &r->count, sizeof(r->count));
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *r = (const struct root *)base;

	(void)p;
	if (r->depth > 4 || r->nseg > MAXSEG)
		EX_FAIL("cceh_split: depth %llu, %llu segments",
			(unsigned long long)r->depth,
			(unsigned long long)r->nseg);
	for (uint64_t e = 0; e < (1ull << r->depth); e++) {
		const struct segment *sg;
		if (r->dir[e] >= MAXSEG)
			continue; /* reported below if a key needs it */
		sg = &r->seg[r->dir[e]];
		for (int i = 0; i < SLOTS; i++)
			if (sg->s[i].key &&
			    sg->s[i].value != value_of(sg->s[i].key))
				EX_FAIL("cceh_split: segment %llu slot %d: key "
					"%llu with value %llu",
					(unsigned long long)r->dir[e], i,
					(unsigned long long)sg->s[i].key,
					(unsigned long long)sg->s[i].value);
	}
	for (uint64_t k = 1; k <= r->count; k++) {
		uint64_t e = hash(k) & ((1ull << r->depth) - 1);
		const struct segment *sg;
		int i;
		if (r->dir[e] >= (r->nseg ? r->nseg : 1))
			EX_FAIL("cceh_split: entry %llu names segment %llu of "
				"%llu", (unsigned long long)e,
				(unsigned long long)r->dir[e],
				(unsigned long long)r->nseg);
		sg = &r->seg[r->dir[e]];
		for (i = 0; i < SLOTS && sg->s[i].key != k; i++)
			;
		if (i == SLOTS)
			EX_FAIL("cceh_split: key %llu lost (segment %llu)",
				(unsigned long long)k,
				(unsigned long long)r->dir[e]);
		if (sg->s[i].value != value_of(k))
			EX_FAIL("cceh_split: key %llu has value %llu",
				(unsigned long long)k,
				(unsigned long long)sg->s[i].value);
	}
	return 0;
}
