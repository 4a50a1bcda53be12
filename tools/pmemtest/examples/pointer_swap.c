/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pointer_swap.c -- copy-on-write: build the new version aside, then swap
 *
 * Two four-line buffers; `cur` (one 8-byte word) says which is live.  An
 * update fills the other buffer, makes it durable, then flips `cur` and
 * makes that durable.  Invariant: the live buffer is whole (every word
 * equal, checksum good); a buffer never written (all zero) is version 0.
 *
 * Variants:
 *   BUG_MISSING_FLUSH   the new buffer is never flushed
 *   BUG_MISSING_FENCE   the new buffer is flushed, not fenced, before the
 *                       flip
 */
#include "example.h"

#define WORDS 31 /* + checksum = four lines */
#define STEPS 10

struct buf {
	uint64_t w[WORDS];
	uint64_t csum;
};

struct root {
	uint64_t cur;
	uint8_t pad[EX_LINE - 8];
	struct buf b[2];
};

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t v = 1; v <= STEPS; v++) {
		struct buf *nb = &r->b[!r->cur];
		for (int i = 0; i < WORDS; i++)
			nb->w[i] = v;
		nb->csum = ex_csum(nb->w, sizeof(nb->w));
#if defined(BUG_MISSING_FLUSH)
#elif defined(BUG_MISSING_FENCE)
		rio_flush(p, nb, sizeof(*nb));
#else
		/* The new version is durable before it becomes live. */
		rio_persist(p, nb, sizeof(*nb));
#endif
		r->cur = !r->cur;
		/* The swap: one atomic 8-byte store. */
		rio_persist(p, &r->cur, sizeof(r->cur));
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *r = (const struct root *)base;
	const struct buf *b;

	(void)p;
	if (r->cur > 1)
		EX_FAIL("pointer_swap: cur = %llu", (unsigned long long)r->cur);
	b = &r->b[r->cur];
	if (b->csum == 0 && b->w[0] == 0 && b->w[WORDS - 1] == 0)
		return 0; /* version 0 */
	if (b->csum != ex_csum(b->w, sizeof(b->w)))
		EX_FAIL("pointer_swap: live buffer %llu is torn",
			(unsigned long long)r->cur);
	for (int i = 1; i < WORDS; i++)
		if (b->w[i] != b->w[0])
			EX_FAIL("pointer_swap: live buffer mixes versions");
	return 0;
}
