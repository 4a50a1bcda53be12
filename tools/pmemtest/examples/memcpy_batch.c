/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * memcpy_batch.c -- several copies share one fence, then a commit word
 *
 * Each batch copies a 512-byte record (non-temporal stores in the
 * cacheline domain) and a 48-byte record (cached stores + flush) with
 * rio_memcpy_nodrain, drains once, then sets the batch number and makes it
 * durable.  Invariant: both records of every batch up to the batch number
 * are present.
 *
 * Variant:
 *   BUG_MISSING_FENCE  no drain between the copies and the commit word
 */
#include "example.h"

#define BATCHES 8
#define BIG 512
#define SMALL 48

struct root {
	uint64_t done;
	uint8_t pad[EX_LINE - 8];
	uint8_t big[BATCHES][BIG];
	uint8_t small[BATCHES][EX_LINE];
};

static void
fill(uint8_t *b, size_t n, uint64_t batch)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (uint8_t)(batch * 31 + i + 1);
}

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;
	uint8_t big[BIG], small[SMALL];

	for (uint64_t b = 1; b <= BATCHES; b++) {
		fill(big, BIG, b);
		fill(small, SMALL, b);
		rio_memcpy_nodrain(p, r->big[b - 1], big, BIG);
		rio_memcpy_nodrain(p, r->small[b - 1], small, SMALL);
#ifndef BUG_MISSING_FENCE
		/* Both copies are durable before the batch is committed. */
		rio_drain(p);
#endif
		r->done = b;
		rio_persist(p, &r->done, sizeof(r->done));
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *r = (const struct root *)base;
	uint8_t big[BIG], small[SMALL];

	(void)p;
	if (r->done > BATCHES)
		EX_FAIL("memcpy_batch: done = %llu",
			(unsigned long long)r->done);
	for (uint64_t b = 1; b <= r->done; b++) {
		fill(big, BIG, b);
		fill(small, SMALL, b);
		if (memcmp(r->big[b - 1], big, BIG) != 0 ||
		    memcmp(r->small[b - 1], small, SMALL) != 0)
			EX_FAIL("memcpy_batch: batch %llu committed but its "
				"data is missing", (unsigned long long)b);
	}
	return 0;
}
