/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ranges.c -- the set of address ranges a transaction has declared
 *
 * Coalescing: a range declared again, or overlapping what is declared, is
 * logged only for the bytes not declared yet (vista__ranges_gaps), and the
 * set merges overlapping and adjacent ranges, so commit flushes each cache
 * line once.  The set is a sorted array; transactions declare a handful of
 * ranges, usually in increasing address order, so an insertion is a binary
 * search and (rarely) a short memmove.
 *
 * Invariants
 *   R1. v[0..n) are sorted by lo, and v[i].hi < v[i+1].lo (disjoint and
 *       not adjacent: adjacent ranges are merged), each lo < hi.
 *   R2. Intervals of different segments never merge (they are never
 *       adjacent: segment arenas are separated by headers).
 *   R3. Only the owning thread changes the set, and never from a signal
 *       handler; vista__ranges_contains() is safe in the fault hook because
 *       the hook interrupts user stores, never this code.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vista_int.h"

void
vista__ranges_init(struct vista_ranges *r)
{
	r->v = r->inl;
	r->n = 0;
	r->cap = sizeof(r->inl) / sizeof(r->inl[0]);
}

void
vista__ranges_fini(struct vista_ranges *r)
{
	if (r->v != r->inl)
		free(r->v);
	vista__ranges_init(r);
}

int
vista__ranges_reserve(struct vista_ranges *r, uint32_t more)
{
	struct vista_ival *nv;
	uint32_t cap = r->cap;

	if (VISTA__LIKELY(r->n + more <= r->cap))
		return 0;
	while (cap < r->n + more)
		cap *= 2;
	nv = malloc(sizeof(*nv) * cap);
	if (nv == NULL)
		return -ENOMEM;
	memcpy(nv, r->v, sizeof(*nv) * r->n);
	if (r->v != r->inl)
		free(r->v);
	r->v = nv;
	r->cap = cap;
	return 0;
}

/* First index i with v[i].hi > a (or >= a when `adjacent`). */
static uint32_t
first_reaching(const struct vista_ranges *r, uintptr_t a, bool adjacent)
{
	uint32_t lo = 0, hi = r->n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		uintptr_t h = r->v[mid].hi;
		if (h > a || (adjacent && h == a))
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

uint32_t
vista__ranges_gaps(const struct vista_ranges *r, uintptr_t lo, uintptr_t hi,
	struct vista_gap *g, uint32_t maxg)
{
	uint32_t i = first_reaching(r, lo, false), ng = 0;
	uintptr_t cur = lo;

	for (; i < r->n && r->v[i].lo < hi; i++) {
		if (r->v[i].lo > cur) {
			if (ng == maxg)
				return maxg + 1;
			g[ng++] = (struct vista_gap){ cur, r->v[i].lo };
		}
		if (r->v[i].hi > cur)
			cur = r->v[i].hi;
		if (cur >= hi)
			return ng;
	}
	if (cur < hi) {
		if (ng == maxg)
			return maxg + 1;
		g[ng++] = (struct vista_gap){ cur, hi };
	}
	return ng;
}

int
vista__ranges_add(struct vista_ranges *r, uintptr_t lo, uintptr_t hi,
	struct vista_segment *seg)
{
	uint32_t i, j;

	VISTA_ASSERT(lo < hi, "R1");
	/* Fast path: above everything declared so far, not adjacent. */
	if (r->n == 0 || r->v[r->n - 1].hi < lo) {
		if (vista__ranges_reserve(r, 1))
			return -ENOMEM;
		r->v[r->n++] = (struct vista_ival){ lo, hi, seg };
		return 0;
	}
	/* v[i..j) overlap or touch [lo, hi); they merge into one (R1).  They
	 * are all of seg (R2). */
	i = first_reaching(r, lo, true);
	for (j = i; j < r->n && r->v[j].lo <= hi; j++)
		;
	/* R2: what merges is of the same segment. */
	VISTA_ASSERT(i == j || (r->v[i].seg == seg && r->v[j - 1].seg == seg),
		"R2");
	if (i == j) {
		if (vista__ranges_reserve(r, 1))
			return -ENOMEM;
		memmove(&r->v[i + 1], &r->v[i], sizeof(r->v[0]) * (r->n - i));
		r->v[i] = (struct vista_ival){ lo, hi, seg };
		r->n++;
		return 0;
	}
	if (r->v[i].lo < lo)
		lo = r->v[i].lo;
	if (r->v[j - 1].hi > hi)
		hi = r->v[j - 1].hi;
	r->v[i] = (struct vista_ival){ lo, hi, seg };
	memmove(&r->v[i + 1], &r->v[j], sizeof(r->v[0]) * (r->n - j));
	r->n -= j - i - 1;
	/* R1, around the merged interval. */
	VISTA_ASSERT((i == 0 || r->v[i - 1].hi < r->v[i].lo) &&
		(i + 1 == r->n || r->v[i].hi < r->v[i + 1].lo), "R1");
	return 0;
}

bool
vista__ranges_contains(const struct vista_ranges *r, uintptr_t addr)
{
	uint32_t i = first_reaching(r, addr, false);
	return i < r->n && r->v[i].lo <= addr;
}
