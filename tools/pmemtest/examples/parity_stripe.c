/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * parity_stripe.c -- seven data lines and a parity line, repaired on
 * recovery when exactly one of them is stale
 *
 * A stripe is seven data lines and their XOR parity line; each line holds
 * its generation, six values and a checksum (stored last: a line whose
 * checksum does not match was torn by a crash).  An update writes all
 * eight lines in place with generation g + 1 (one flush each, one fence),
 * then the commit line says g + 1.  Recovery (in ex_check) counts the
 * whole lines of generation g + 1: if all eight reached memory it commits;
 * if exactly seven did, it rebuilds the eighth from the other seven (their
 * XOR) and commits; with fewer the update is lost (an in-place update
 * interrupted early: each line keeps whatever it holds).  Invariant after
 * recovery: every whole line holds the values of its generation, which is
 * the committed one or the next; a committed stripe is whole and its
 * parity right.
 *
 * The repair runs only for crash states with seven of the eight pending
 * lines in memory: images with at most k lines, or all of them, never
 * reach it.
 *
 * Variant (a recovery bug; the writer is the same):
 *   BUG_REPAIR_SELF  the rebuild XORs all eight lines, the stale one
 *                    included, instead of the seven others
 */
#include "example.h"

#define STEPS 6
#define NDATA 7
#define WORDS 6

struct sline {
	uint64_t gen;
	uint64_t v[WORDS];
	uint64_t csum; /* of gen and v */
};

struct root {
	uint64_t committed;
	uint8_t pad[EX_LINE - 8];
	struct sline l[NDATA + 1]; /* l[NDATA] is the parity */
};

/* The compiler must keep the program order of the stores. */
#define ORDER() __asm__ volatile("" ::: "memory")

static uint64_t
val(uint64_t gen, int line, int w)
{
	return gen * 1000003u + (uint64_t)line * 101u + (uint64_t)w;
}

static bool
whole(const struct sline *l)
{
	static const struct sline zero;
	return l->csum == ex_csum(l, offsetof(struct sline, csum)) ||
		memcmp(l, &zero, sizeof(zero)) == 0;
}

/* Generation and values, then the checksum: inside one line the stores
 * persist in this order. */
static void
seal(struct sline *l, uint64_t gen)
{
	l->gen = gen;
	ORDER();
	l->csum = ex_csum(l, offsetof(struct sline, csum));
}

static void
xor_of(struct sline *out, const struct sline *l, int skip)
{
	for (int w = 0; w < WORDS; w++) {
		uint64_t x = 0;
		for (int i = 0; i <= NDATA; i++)
			if (i != skip)
				x ^= l[i].v[w];
		out->v[w] = x;
	}
}

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t g = 1; g <= STEPS; g++) {
		for (int i = 0; i < NDATA; i++) {
			for (int w = 0; w < WORDS; w++)
				r->l[i].v[w] = val(g, i, w);
			seal(&r->l[i], g);
		}
		xor_of(&r->l[NDATA], r->l, NDATA);
		seal(&r->l[NDATA], g);
		/* The whole stripe is durable before the commit names it. */
		rio_persist(p, r->l, sizeof(r->l));
		r->committed = g;
		rio_persist(p, &r->committed, sizeof(r->committed));
	}
	return 0;
}

static void
recover(struct root *r)
{
	uint64_t next = r->committed + 1;
	int fresh = 0, stale = -1;

	for (int i = 0; i <= NDATA; i++) {
		if (whole(&r->l[i]) && r->l[i].gen == next)
			fresh++;
		else
			stale = i;
	}
	if (fresh == NDATA + 1) {
		r->committed = next;
	} else if (fresh == NDATA) {
		/* Rebuild the stale line: the XOR of the seven others. */
#ifdef BUG_REPAIR_SELF
		xor_of(&r->l[stale], r->l, -1);
#else
		xor_of(&r->l[stale], r->l, stale);
#endif
		seal(&r->l[stale], next);
		r->committed = next;
	}
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;
	struct sline par;
	int same = 0;

	(void)p;
	recover(r);
	for (int i = 0; i <= NDATA; i++) {
		const struct sline *l = &r->l[i];
		if (!whole(l) || l->gen == 0)
			continue;
		if (l->gen != r->committed && l->gen != r->committed + 1)
			EX_FAIL("parity_stripe: line %d has generation %llu, "
				"committed %llu", i, (unsigned long long)l->gen,
				(unsigned long long)r->committed);
		same += l->gen == r->committed;
		for (int w = 0; i < NDATA && w < WORDS; w++)
			if (l->v[w] != val(l->gen, i, w))
				EX_FAIL("parity_stripe: line %d word %d wrong "
					"for generation %llu", i, w,
					(unsigned long long)l->gen);
	}
	if (r->committed == 0)
		return 0;
	xor_of(&par, r->l, NDATA);
	if (same == NDATA + 1 &&
	    memcmp(par.v, r->l[NDATA].v, sizeof(par.v)) != 0)
		EX_FAIL("parity_stripe: parity of generation %llu wrong",
			(unsigned long long)r->committed);
	return 0;
}
