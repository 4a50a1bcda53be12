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
#include "stripe.h"

#define STEPS 6

struct root {
	uint64_t committed;
	uint8_t pad[EX_LINE - 8];
	struct sline l[NDATA + 1]; /* l[NDATA] is the parity */
};

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

	(void)p;
	recover(r);
	return stripe_check("parity_stripe", r->l, r->committed);
}
