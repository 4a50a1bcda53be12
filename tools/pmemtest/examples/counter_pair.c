/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * counter_pair.c -- two counters in two cache lines, a always ahead of b
 *
 * Each step makes a = i durable, then b = i.  Invariant after any crash:
 * a == b or a == b + 1 (b never passes a).
 *
 * Variants:
 *   BUG_MISSING_FLUSH     a is stored but never flushed
 *   BUG_MISSING_FENCE     a is flushed, but b is stored before a fence
 *   BUG_MARKER_FIRST      b (the "commit" counter) is made durable first
 *   BUG_REDUNDANT_FLUSH   (lint) a is persisted twice: consistent, wasteful
 *   BUG_NO_FINAL_PERSIST  (lint) the last b is never flushed: consistent,
 *                         but the last step is not durable at exit
 */
#include "example.h"

struct root {
	uint64_t a;
	uint8_t pad_a[EX_LINE - 8];
	uint64_t b;
	uint8_t pad_b[EX_LINE - 8];
};

#define STEPS 20

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t i = 1; i <= STEPS; i++) {
#ifdef BUG_MARKER_FIRST
		r->b = i;
		rio_persist(p, &r->b, sizeof(r->b));
		r->a = i;
		rio_persist(p, &r->a, sizeof(r->a));
		continue;
#endif
		r->a = i;
#if defined(BUG_MISSING_FLUSH)
		/* nothing: a stays in the cache */
#elif defined(BUG_MISSING_FENCE)
		rio_flush(p, &r->a, sizeof(r->a));
#else
		/* a must be durable before b may pass it. */
		rio_persist(p, &r->a, sizeof(r->a));
#endif
#ifdef BUG_REDUNDANT_FLUSH
		rio_persist(p, &r->a, sizeof(r->a));
#endif
		r->b = i;
#ifdef BUG_NO_FINAL_PERSIST
		if (i == STEPS)
			break;
#endif
		/* b follows a. */
		rio_persist(p, &r->b, sizeof(r->b));
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *r = (const struct root *)base;

	(void)p;
	if (r->a != r->b && r->a != r->b + 1)
		EX_FAIL("counter_pair: a=%llu b=%llu: b must never pass a, "
			"nor a run ahead by more than one",
			(unsigned long long)r->a, (unsigned long long)r->b);
	return 0;
}
