/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * line_flag.c -- a record and its valid flag in one cache line
 *
 * Each record is one cache line: a valid flag, a sequence number and six
 * data words, written once and made durable with one rio_persist.  Inside
 * one line no flush is needed between the data and the flag: x86 writes a
 * line's stores back in program order, so the flag, stored last, never
 * reaches memory before the data.  The fence epoch has one flush and one
 * fence; only per-store crash states tell the two orders apart.
 * Invariant: a valid record holds its sequence number and its data.
 *
 * Variant:
 *   BUG_FLAG_FIRST  the flag is stored first: the line can be evicted
 *                   between the flag and the data (crash state: flag set,
 *                   data old)
 */
#include "example.h"

#define NREC 32

struct rec {
	uint64_t valid;
	uint64_t seq;
	uint64_t data[6];
};

struct root {
	struct rec r[NREC];
};

/* The compiler must keep the program order of the stores below. */
#define ORDER() __asm__ volatile("" ::: "memory")

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *root = (struct root *)base;

	for (uint64_t i = 0; i < NREC; i++) {
		struct rec *x = &root->r[i];
#ifdef BUG_FLAG_FIRST
		x->valid = 1; /* BUG-SITE */
		ORDER();
#endif
		x->seq = i + 1;
		for (int j = 0; j < 6; j++)
			x->data[j] = (i + 1) * 100 + (uint64_t)j;
#ifndef BUG_FLAG_FIRST
		ORDER();
		x->valid = 1; /* same line, last: persists after the data */
#endif
		/* The record, flag included, is durable before the next. */
		rio_persist(p, x, sizeof(*x));
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *root = (const struct root *)base;

	(void)p;
	for (uint64_t i = 0; i < NREC; i++) {
		const struct rec *x = &root->r[i];
		if (x->valid == 0)
			continue;
		if (x->seq != i + 1)
			EX_FAIL("line_flag: record %llu valid with seq %llu",
				(unsigned long long)i,
				(unsigned long long)x->seq);
		for (int j = 0; j < 6; j++)
			if (x->data[j] != (i + 1) * 100 + (uint64_t)j)
				EX_FAIL("line_flag: record %llu valid, data[%d] "
					"= %llu", (unsigned long long)i, j,
					(unsigned long long)x->data[j]);
	}
	return 0;
}
