/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe_intent.c -- a parity stripe repaired on recovery only when its
 * update was announced, beside a payload recovery never reads
 *
 * As parity_stripe.c: seven data lines and their XOR parity line, each
 * holding its generation, six values and a checksum stored last.  An
 * update to generation g + 1 stores, in one epoch (one flush per range,
 * one fence): an intent line naming g + 1, the eight stripe lines, and a
 * 32-line payload on pages of its own (the update's record, for readers
 * other than recovery); then the commit line says g + 1.  Recovery (in
 * ex_check) counts the whole lines of generation g + 1: all eight commit;
 * seven, with the intent in memory, rebuild the eighth from the others;
 * anything else leaves the lines as they are.  Invariant after recovery:
 * every whole line holds the values of its generation, the committed one
 * or the next; a committed stripe is whole and its parity right.
 *
 * The bug shows only in the crash states with exactly seven of the eight
 * stripe lines in memory and the intent line not: two pending lines
 * missing and seven in, of 41 pending lines.  Subsets of at most k lines,
 * all but one line, and random subsets (1 in 64 of them) rarely build it;
 * read-driven exploration finds it for certain: recovery reads the page of
 * the intent and the stripe, never the payload's, so it branches on those
 * nine lines only and covers every state of the 41.
 *
 * Variant (a recovery bug; the writer is the same):
 *   BUG_UNANNOUNCED  the repair runs without the intent too, and seals the
 *                    rebuilt line with the intent's generation (the old
 *                    one then): its values are of the new
 */
#include "stripe.h"

#define STEPS 3
#define PAYLOAD 32

struct root {
	uint64_t committed;
	uint8_t pad[EX_LINE - 8];
	uint64_t intent; /* the generation being written */
	uint8_t pad2[EX_LINE - 8];
	struct sline l[NDATA + 1]; /* l[NDATA] is the parity */
	uint8_t pad3[4096 - 2 * EX_LINE - (NDATA + 1) * EX_LINE];
	uint64_t payload[PAYLOAD][EX_LINE / 8]; /* pages of its own */
};

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t g = 1; g <= STEPS; g++) {
		r->intent = g;
		for (int i = 0; i < PAYLOAD; i++)
			for (int w = 0; w < EX_LINE / 8; w++)
				r->payload[i][w] = val(g, 100 + i, w);
		for (int i = 0; i < NDATA; i++) {
			for (int w = 0; w < WORDS; w++)
				r->l[i].v[w] = val(g, i, w);
			seal(&r->l[i], g);
		}
		xor_of(&r->l[NDATA], r->l, NDATA);
		seal(&r->l[NDATA], g);
		/* Intent, stripe and payload are durable before the commit
		 * names the generation: one fence for the three. */
		rio_flush(p, &r->intent, sizeof(r->intent));
		rio_flush(p, r->l, sizeof(r->l));
		rio_flush(p, r->payload, sizeof(r->payload));
		rio_drain(p); /* BUG-SITE */
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
		/* Rebuild the stale line: the XOR of the seven others, if
		 * the update was announced. */
#ifdef BUG_UNANNOUNCED
		xor_of(&r->l[stale], r->l, stale);
		seal(&r->l[stale], r->intent);
		r->committed = r->intent;
#else
		if (r->intent != next)
			return;
		xor_of(&r->l[stale], r->l, stale);
		seal(&r->l[stale], next);
		r->committed = next;
#endif
	}
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	(void)p;
	recover(r);
	return stripe_check("stripe_intent", r->l, r->committed);
}
