/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ranges.c -- the set of address ranges a transaction has declared
 *
 * Coalescing: a range declared again, or overlapping what is declared, is
 * logged only for the bytes not declared yet (vista__ranges_gaps), and the
 * set merges overlapping and adjacent ranges, so commit flushes each cache
 * line once.
 *
 * Most transactions declare a handful of ranges, usually in increasing
 * address order: the set is then a sorted array (flat), an insertion a
 * binary search and (rarely) a short memmove.  A transaction that declares
 * thousands of scattered cells would pay a memmove of the whole array for
 * each one, O(n^2) in all; so once the set holds VISTA__RFLAT intervals it
 * is cut into chunks of at most VISTA__RCHUNK (chunked), found by a binary
 * search over the chunks, and an insertion moves at most one chunk's tail
 * (a full chunk is split in two first).  Either form is read as runs in
 * order (vista__ranges_runs).  The set is flat again when cleared.
 *
 * Invariants
 *   R1. The intervals, in run order, are sorted by lo, and each one's hi is
 *       below the next one's lo (disjoint and not adjacent: adjacent ranges
 *       are merged), each lo < hi.
 *   R2. Intervals of different segments never merge (they are never
 *       adjacent: segment arenas are separated by headers).
 *   R3. Only the owning thread changes the set, and never from a signal
 *       handler; vista__ranges_contains() is safe in the fault hook because
 *       the hook interrupts user stores, never this code.
 *   R4. Chunked: every chunk holds 1..VISTA__RCHUNK intervals, n is their
 *       sum, and spare[] has room for every chunk owned (spcap >= nc +
 *       nspare), so chunks are put back without allocating.
 *   R5. After vista__ranges_reserve(r, m) returns 0, the next m additions
 *       do not allocate: flat, the array has room for them (or, cut into
 *       chunks on the way, the spares and directory do: owed is what is
 *       still promised); chunked, an addition allocates only to split a
 *       full chunk, and the spares cover every split m additions can
 *       cause (chunks_for).  A merge never allocates for itself, but an
 *       addition to a flat set of VISTA__RFLAT or more first tries to cut
 *       it into chunks, and stays flat if that finds no memory.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "vista_int.h"

/* Intervals and additions, at most: the doubling cannot overflow. */
#define RMAX (UINT32_MAX / 4)
/* A chunk split in two, or made from a flat set, holds this many. */
#define RHALF (VISTA__RCHUNK / 2)
/* Free chunks kept from one transaction for the next. */
#define RKEEP 64u

/* Free the spare chunks beyond RKEEP. */
static void
trim_spares(struct vista_ranges *r)
{
	while (r->nspare > RKEEP)
		free(r->spare[--r->nspare]);
}

void
vista__ranges_init(struct vista_ranges *r)
{
	*r = (struct vista_ranges){ .v = r->inl, .cap = 16 };
	_Static_assert(sizeof(r->inl) / sizeof(r->inl[0]) == 16, "inl");
}

void
vista__ranges_fini(struct vista_ranges *r)
{
	vista__ranges_unchunk(r);
	while (r->nspare > 0)
		free(r->spare[--r->nspare]);
	free(r->spare);
	if (r->v != r->inl)
		free(r->v);
	vista__ranges_init(r);
}

/* Chunked -> flat and empty: the chunks go back to spare[] (R4), all but
 * RKEEP of them freed. */
void
vista__ranges_unchunk(struct vista_ranges *r)
{
	for (uint32_t k = 0; k < r->nc; k++)
		r->spare[r->nspare++] = r->c[k].v; /* R4: room */
	trim_spares(r);
	free(r->c);
	r->c = NULL;
	r->nc = r->ccap = 0;
	r->n = 0;
}

/* p's array of `size`-byte elements, grown by doubling (from 16) to hold
 * `need`, *cap updated; NULL (p and *cap unchanged) if out of memory. */
static void *
grow(void *p, uint32_t *cap, uint32_t need, size_t size)
{
	uint32_t c = *cap ? *cap : 16;

	while (c < need)
		c *= 2;
	p = realloc(p, size * c);
	if (p != NULL)
		*cap = c;
	return p;
}

/* Room in the directory for `dir` more chunks and `chunks` spare chunks
 * (R4).  0 or -ENOMEM; what was allocated stays, the set is unchanged. */
static int
chunk_room(struct vista_ranges *r, uint32_t dir, uint32_t chunks)
{
	if (r->nc + dir > r->ccap) {
		void *c = grow(r->c, &r->ccap, r->nc + dir, sizeof(*r->c));
		if (c == NULL)
			return -ENOMEM;
		r->c = c;
	}
	while (r->nspare < chunks) {
		struct vista_ival *ch;
		if (r->nc + r->nspare + 1 > r->spcap) {
			void *sp = grow(r->spare, &r->spcap,
				r->nc + r->nspare + 1, sizeof(*r->spare));
			if (sp == NULL)
				return -ENOMEM;
			r->spare = sp;
		}
		ch = malloc(sizeof(*ch) * VISTA__RCHUNK);
		if (ch == NULL)
			return -ENOMEM;
		r->spare[r->nspare++] = ch;
	}
	return 0;
}

/* Chunks that `more` additions may need: each splits at most one chunk,
 * and a split chunk (RHALF and RHALF + 1) fills again only after RHALF - 1
 * more, so at most the nc chunks there are now, plus more / (RHALF - 1),
 * plus the one an append past a full last chunk starts. */
static uint32_t
chunks_for(uint32_t nc, uint32_t more)
{
	uint32_t need = nc + more / (RHALF - 1) + 1;

	return need < more ? need : more;
}

/* Flat -> chunked, each chunk RHALF full, with room for `more` additions
 * after.  The flat array is kept for when the set is flat again.  0 or
 * -ENOMEM (still flat then). */
static int
chunk_all(struct vista_ranges *r, uint32_t more)
{
	uint32_t n = r->n, k = 0, nch = (n + RHALF - 1) / RHALF;
	uint32_t need = nch + chunks_for(nch, more);

	if (chunk_room(r, need, need)) {
		free(r->c); /* flat: no directory */
		r->c = NULL;
		r->ccap = 0;
		trim_spares(r); /* as a clear would keep */
		return -ENOMEM;
	}
	for (uint32_t i = 0; i < n; i += RHALF, k++) {
		uint32_t m = n - i < RHALF ? n - i : RHALF;
		struct vista_ival *ch = r->spare[--r->nspare];
		memcpy(ch, r->v + i, sizeof(*ch) * m);
		r->c[k] = (struct vista_rrun){ ch, m };
	}
	r->nc = k;
	return 0;
}

/* Room in the flat array for `more` additions.  0 or -ENOMEM. */
static int
flat_room(struct vista_ranges *r, uint32_t more)
{
	struct vista_ival *nv;
	uint32_t cap = r->cap;

	if (more > RMAX - r->n)
		return -ENOMEM;
	if (r->n + more <= cap)
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

int
vista__ranges_reserve(struct vista_ranges *r, uint32_t more)
{
	uint32_t owed = more > r->owed ? more : r->owed, need;

	if (VISTA__UNLIKELY(more > RMAX - r->n))
		return -ENOMEM;
	if (VISTA__LIKELY(r->c == NULL)) {
		if (VISTA__LIKELY(r->n + more <= r->cap &&
		    r->n < VISTA__RFLAT)) {
			r->owed = owed;
			return 0;
		}
		/* Large: chunked from now on, if there is memory for it. */
		if (r->n < VISTA__RFLAT || chunk_all(r, owed) != 0) {
			if (flat_room(r, more))
				return -ENOMEM;
			r->owed = owed;
			return 0;
		}
	}
	need = chunks_for(r->nc, owed);
	if (chunk_room(r, need, need))
		return -ENOMEM;
	r->owed = owed;
	return 0;
}

/* First index i of v[0..n) with v[i].hi > a (or >= a when `adjacent`). */
static uint32_t
first_reaching(const struct vista_ival *v, uint32_t n, uintptr_t a,
	bool adjacent)
{
	uint32_t lo = 0, hi = n;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		uintptr_t h = v[mid].hi;
		if (h > a || (adjacent && h == a))
			hi = mid;
		else
			lo = mid + 1;
	}
	return lo;
}

/* A place in the runs: interval i of run k. */
struct rpos {
	uint32_t k, i;
};

/* The first interval whose hi is above a (at a, when `adjacent`): k == nr
 * when there is none past the runs' ends, else i may be rr[k].n only
 * when nr == 1. */
static struct rpos
reaching(const struct vista_rrun *rr, uint32_t nr, uintptr_t a,
	bool adjacent)
{
	uint32_t lo = 0, hi = nr;

	if (nr > 1) {
		/* chunked: the runs are not empty (R4) */
		while (lo < hi) {
			uint32_t mid = lo + (hi - lo) / 2;
			uintptr_t h = rr[mid].v[rr[mid].n - 1].hi;
			if (h > a || (adjacent && h == a))
				hi = mid;
			else
				lo = mid + 1;
		}
		if (lo == nr)
			return (struct rpos){ nr, 0 };
	}
	if (nr == 0)
		return (struct rpos){ 0, 0 };
	return (struct rpos){ lo, first_reaching(rr[lo].v, rr[lo].n, a,
		adjacent) };
}

uint32_t
vista__ranges_gaps(const struct vista_ranges *r, uintptr_t lo, uintptr_t hi,
	struct vista_gap *g, uint32_t maxg)
{
	const struct vista_rrun *rr;
	struct vista_rrun one;
	uint32_t nr = vista__ranges_runs(r, &rr, &one), ng = 0;
	struct rpos p = reaching(rr, nr, lo, false);
	uintptr_t cur = lo;

	for (uint32_t k = p.k, i = p.i; k < nr; k++, i = 0) {
		for (; i < rr[k].n; i++) {
			const struct vista_ival *iv = &rr[k].v[i];
			if (iv->lo >= hi)
				goto tail;
			if (iv->lo > cur) {
				if (ng == maxg)
					return maxg + 1;
				g[ng++] = (struct vista_gap){ cur, iv->lo };
			}
			if (iv->hi > cur)
				cur = iv->hi;
			if (cur >= hi)
				return ng;
		}
	}
tail:
	if (cur < hi) {
		if (ng == maxg)
			return maxg + 1;
		g[ng++] = (struct vista_gap){ cur, hi };
	}
	return ng;
}

/* Insert iv at interval i of chunk k, splitting the chunk first if it is
 * full (the only addition that takes a spare chunk and a directory slot,
 * R5).  0 or -ENOMEM (the set is unchanged then). */
static int
chunk_insert(struct vista_ranges *r, uint32_t k, uint32_t i,
	struct vista_ival iv)
{
	struct vista_rrun *cr = &r->c[k];

	if (cr->n == VISTA__RCHUNK) {
		struct vista_ival *ch;
		if (chunk_room(r, 1, 1))
			return -ENOMEM;
		cr = &r->c[k]; /* the directory may have moved */
		ch = r->spare[--r->nspare];
		memmove(&r->c[k + 2], &r->c[k + 1],
			sizeof(r->c[0]) * (r->nc - k - 1));
		r->nc++;
		if (i == VISTA__RCHUNK) {
			/* past a full chunk's end: a chunk of its own */
			r->c[k + 1] = (struct vista_rrun){ ch, 0 };
			k++;
			i = 0;
		} else {
			memcpy(ch, cr->v + RHALF,
				sizeof(*ch) * (VISTA__RCHUNK - RHALF));
			r->c[k + 1] = (struct vista_rrun){ ch,
				VISTA__RCHUNK - RHALF };
			cr->n = RHALF;
			if (i > RHALF) {
				k++;
				i -= RHALF;
			}
		}
		cr = &r->c[k];
	}
	memmove(cr->v + i + 1, cr->v + i, sizeof(cr->v[0]) * (cr->n - i));
	cr->v[i] = iv;
	cr->n++;
	r->n++;
	return 0;
}

/* vista__ranges_add() on a chunked set. */
static int
chunk_add(struct vista_ranges *r, uintptr_t lo, uintptr_t hi,
	struct vista_segment *seg)
{
	struct rpos p = reaching(r->c, r->nc, lo, true);
	struct vista_ival *f;
	uint32_t k, i;

	if (p.k == r->nc) /* above everything */
		return chunk_insert(r, r->nc - 1, r->c[r->nc - 1].n,
			(struct vista_ival){ lo, hi, seg });
	if (p.i == r->c[p.k].n || r->c[p.k].v[p.i].lo > hi)
		return chunk_insert(r, p.k, p.i,
			(struct vista_ival){ lo, hi, seg });
	/* The intervals from p on that overlap or touch [lo, hi) merge into
	 * the first (R1); they are all of seg (R2). */
	f = &r->c[p.k].v[p.i];
	VISTA_ASSERT(f->seg == seg, "R2");
	if (f->lo < lo)
		lo = f->lo;
	if (f->hi > hi)
		hi = f->hi;
	for (k = p.k, i = p.i + 1; k < r->nc; i = 0) {
		struct vista_rrun *cr = &r->c[k];
		uint32_t j = i, n0 = cr->n;
		while (j < n0 && cr->v[j].lo <= hi)
			j++;
		if (j > i) {
			VISTA_ASSERT(cr->v[j - 1].seg == seg, "R2");
			if (cr->v[j - 1].hi > hi)
				hi = cr->v[j - 1].hi;
			memmove(cr->v + i, cr->v + j,
				sizeof(cr->v[0]) * (n0 - j));
			cr->n -= j - i;
			r->n -= j - i;
		}
		if (j < n0)
			break;
		if (cr->n == 0) { /* emptied, and not f's: put back (R4) */
			r->spare[r->nspare++] = cr->v;
			memmove(cr, cr + 1, sizeof(*cr) * (r->nc - k - 1));
			r->nc--;
		} else {
			k++;
		}
	}
	*f = (struct vista_ival){ lo, hi, seg };
	return 0;
}

int
vista__ranges_add(struct vista_ranges *r, uintptr_t lo, uintptr_t hi,
	struct vista_segment *seg)
{
	uint32_t i, j;

	VISTA_ASSERT(lo < hi, "R1");
	/* Large: chunked from now on if there is memory for it, with room
	 * for what is still promised (R5); flat as it was if not. */
	if (VISTA__UNLIKELY(r->c == NULL && r->n >= VISTA__RFLAT))
		(void)chunk_all(r, r->owed > 0 ? r->owed : 1);
	if (r->owed > 0)
		r->owed--;
	if (VISTA__UNLIKELY(r->c != NULL))
		return chunk_add(r, lo, hi, seg);
	/* Fast path: above everything declared so far, not adjacent. */
	if (r->n == 0 || r->v[r->n - 1].hi < lo) {
		if (VISTA__UNLIKELY(r->n == r->cap) && flat_room(r, 1))
			return -ENOMEM;
		r->v[r->n++] = (struct vista_ival){ lo, hi, seg };
		return 0;
	}
	/* v[i..j) overlap or touch [lo, hi); they merge into one (R1).  They
	 * are all of seg (R2). */
	i = first_reaching(r->v, r->n, lo, true);
	for (j = i; j < r->n && r->v[j].lo <= hi; j++)
		;
	/* R2: what merges is of the same segment. */
	VISTA_ASSERT(i == j || (r->v[i].seg == seg && r->v[j - 1].seg == seg),
		"R2");
	if (i == j) {
		if (VISTA__UNLIKELY(r->n == r->cap) && flat_room(r, 1))
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
	const struct vista_rrun *rr;
	struct vista_rrun one;
	uint32_t nr = vista__ranges_runs(r, &rr, &one);
	struct rpos p = reaching(rr, nr, addr, false);

	return p.k < nr && p.i < rr[p.k].n && rr[p.k].v[p.i].lo <= addr;
}
