/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bitmap_alloc.c -- an allocator bitmap, blocks, and roots that use them
 *
 * To allocate: set the block's bit and make the bitmap durable; fill the
 * block and make it durable; store its index in a root slot and make that
 * durable.  Invariant: every block named by a root has its bit set and
 * holds what was written into it, and no two roots name the same block.
 *
 * Variants:
 *   BUG_MISSING_FENCE  the bitmap is flushed but the root is stored and
 *                      persisted without a fence in between
 *   BUG_MARKER_FIRST   the root is made durable before the block's content
 */
#include "example.h"

#define BLOCKS 32
#define ROOTS 16

struct block {
	uint64_t owner; /* root slot + 1 */
	uint64_t data[6];
	uint64_t csum;
};

struct root {
	uint64_t bitmap;
	uint8_t pad[EX_LINE - 8];
	uint64_t slot[ROOTS]; /* block index + 1, 0 = empty (two lines) */
	struct block b[BLOCKS];
};

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t s = 0; s < ROOTS; s++) {
		uint64_t i = (s * 5) % BLOCKS; /* scattered, all distinct */
		struct block *b = &r->b[i];
		r->bitmap |= 1ull << i;
#ifdef BUG_MISSING_FENCE
		rio_flush(p, &r->bitmap, sizeof(r->bitmap));
#else
		/* The block is ours before anything points at it. */
		rio_persist(p, &r->bitmap, sizeof(r->bitmap));
#endif
		b->owner = s + 1;
		for (int k = 0; k < 6; k++)
			b->data[k] = s * 10 + (uint64_t)k;
		b->csum = ex_csum(b, offsetof(struct block, csum));
#ifdef BUG_MARKER_FIRST
		r->slot[s] = i + 1;
		rio_persist(p, &r->slot[s], sizeof(r->slot[s]));
		rio_persist(p, b, sizeof(*b));
		continue;
#endif
#ifdef BUG_MISSING_FENCE
		rio_flush(p, b, sizeof(*b));
#else
		/* Its content is durable before a root names it. */
		rio_persist(p, b, sizeof(*b));
#endif
		r->slot[s] = i + 1;
		rio_persist(p, &r->slot[s], sizeof(r->slot[s]));
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *r = (const struct root *)base;
	uint64_t used = 0;

	(void)p;
	for (uint64_t s = 0; s < ROOTS; s++) {
		uint64_t i = r->slot[s];
		const struct block *b;
		if (i == 0)
			continue;
		if (i > BLOCKS)
			EX_FAIL("bitmap_alloc: root %llu names block %llu",
				(unsigned long long)s, (unsigned long long)i);
		i--;
		b = &r->b[i];
		if (!(r->bitmap & (1ull << i)))
			EX_FAIL("bitmap_alloc: root %llu names block %llu, "
				"which is free in the bitmap",
				(unsigned long long)s, (unsigned long long)i);
		if (used & (1ull << i))
			EX_FAIL("bitmap_alloc: block %llu named twice",
				(unsigned long long)i);
		used |= 1ull << i;
		if (b->owner != s + 1 ||
		    b->csum != ex_csum(b, offsetof(struct block, csum)))
			EX_FAIL("bitmap_alloc: block %llu of root %llu holds "
				"no valid content", (unsigned long long)i,
				(unsigned long long)s);
	}
	return 0;
}
