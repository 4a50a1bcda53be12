/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * flag_after_flush.c -- data flushed, then a flag on the same page
 *
 * Each step writes a two-line record, flushes it, and then sets the
 * record's flag, a word in another line of the same page, and persists
 * it.  The flag may reach memory only after the data: the data's flush
 * must be fenced before the flag is stored.  Invariant: a flagged record
 * holds its data.
 *
 * Variants:
 *   BUG_MISSING_FENCE  rio_flush of the data, no drain: the flag may reach
 *                      memory before the data (the fix is a fence, not a
 *                      flush: the data lines are flushed)
 *   BUG_MISSING_FLUSH  no flush of the data at all
 */
#include "example.h"

#define STEPS 12

struct rec {
	uint64_t w[16]; /* two lines: (step + 1) * 100 + index */
};

struct root {
	uint64_t flag[STEPS];
	uint8_t pad[EX_LINE * 2 - 8 * STEPS];
	struct rec r[STEPS];
};

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *root = (struct root *)base;

	for (uint64_t i = 0; i < STEPS; i++) {
		struct rec *x = &root->r[i];
		for (int j = 0; j < 16; j++)
			x->w[j] = (i + 1) * 100 + (uint64_t)j; /* BUG-SITE flush */
#if defined(BUG_MISSING_FENCE)
		rio_flush(p, x, sizeof(*x)); /* BUG-SITE fence */
#elif !defined(BUG_MISSING_FLUSH)
		/* The record is durable before its flag is stored. */
		rio_flush(p, x, sizeof(*x));
		rio_drain(p);
#endif
		root->flag[i] = 1;
		/* The flag is durable: the record is published. */
		rio_persist(p, &root->flag[i], sizeof(root->flag[i]));
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *root = (const struct root *)base;

	(void)p;
	for (uint64_t i = 0; i < STEPS; i++) {
		const struct rec *x = &root->r[i];
		if (root->flag[i] == 0)
			continue;
		for (int j = 0; j < 16; j++)
			if (x->w[j] != (i + 1) * 100 + (uint64_t)j)
				EX_FAIL("flag_after_flush: record %llu flagged, "
					"w[%d] = %llu", (unsigned long long)i,
					j, (unsigned long long)x->w[j]);
	}
	return 0;
}
