/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * neighbour_persist.c -- two counters on one page, each persisted alone
 *
 * `hits` and `misses` live in two lines of the same 4 KiB page.  Each
 * step updates and persists one, then the other.  Nothing about the
 * crash states is wrong in either variant; the variant wastes a flush.
 *
 * Variant:
 *   BUG_REDUNDANT_PERSIST  persists `hits` again after `misses`: no store
 *                          to `hits` since its last flush, but a store to
 *                          its page (`misses`) -- tracked per page, that
 *                          store hides the redundant flush; per line it
 *                          does not
 */
#include "example.h"

#define STEPS 16

struct root {
	uint64_t hits;
	uint8_t pad[EX_LINE - 8];
	uint64_t misses;
	uint8_t pad2[EX_LINE - 8];
};

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t i = 1; i <= STEPS; i++) {
		r->hits = i;
		/* hits is durable before misses passes it. */
		rio_persist(p, &r->hits, sizeof(r->hits));
		r->misses = i;
		/* misses, the step's last word, is durable. */
		rio_persist(p, &r->misses, sizeof(r->misses));
#ifdef BUG_REDUNDANT_PERSIST
		rio_persist(p, &r->hits, sizeof(r->hits)); /* BUG-SITE */
#endif
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *r = (const struct root *)base;

	(void)p;
	if (r->misses > r->hits || r->hits > r->misses + 1)
		EX_FAIL("neighbour_persist: hits %llu, misses %llu",
			(unsigned long long)r->hits,
			(unsigned long long)r->misses);
	return 0;
}
