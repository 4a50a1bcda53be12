/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * list_insert.c -- push nodes on a persistent singly linked list
 *
 * Nodes come from a bump arena in the pool (offsets, not pointers).  A
 * node is initialized and made durable, then the head is pointed at it and
 * made durable.  Invariant: walking from the head finds only valid nodes
 * (magic, checksum), values strictly decreasing, no more than were made.
 *
 * Variants:
 *   BUG_MISSING_FLUSH   the node is never flushed
 *   BUG_MISSING_FENCE   the node is flushed, the head stored before a fence
 *   BUG_WRONG_RANGE     the flush covers the previous node, not this one
 */
#include "example.h"

#define MAGIC 0x4e4f4445u /* "NODE" */
#define NODES 16

struct node {
	uint32_t magic;
	uint32_t pad;
	uint64_t value;
	uint64_t next; /* offset in the user area, 0 = end */
	uint64_t csum;
	uint8_t fill[EX_LINE - 32];
};

struct root {
	uint64_t head;
	uint64_t count; /* nodes allocated (the arena's bump pointer) */
	uint8_t pad[EX_LINE - 16];
	struct node arena[NODES];
};

static uint64_t
node_csum(const struct node *n)
{
	return ex_csum(n, offsetof(struct node, csum));
}

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t i = 1; i <= NODES; i++) {
		struct node *n = &r->arena[r->count];
		/* The arena's bump pointer first: a node below it is never
		 * handed out twice. */
		r->count++;
		rio_persist(p, &r->count, sizeof(r->count));
		n->magic = MAGIC;
		n->value = i;
		n->next = r->head;
		n->csum = node_csum(n);
#if defined(BUG_MISSING_FLUSH)
#elif defined(BUG_MISSING_FENCE)
		rio_flush(p, n, sizeof(*n));
#elif defined(BUG_WRONG_RANGE)
		rio_persist(p, n - (i > 1), sizeof(*n));
#else
		/* The node must be durable before the head points at it. */
		rio_persist(p, n, sizeof(*n));
#endif
		r->head = (uint64_t)((uint8_t *)n - base);
		/* Publish. */
		rio_persist(p, &r->head, sizeof(r->head));
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *r = (const struct root *)base;
	uint64_t off = r->head, last = UINT64_MAX, seen = 0;

	(void)p;
	while (off != 0) {
		const struct node *n = (const struct node *)(base + off);
		if (off < offsetof(struct root, arena) ||
		    off >= sizeof(struct root) || ++seen > NODES)
			EX_FAIL("list_insert: bad link %#llx",
				(unsigned long long)off);
		if (n->magic != MAGIC || n->csum != node_csum(n))
			EX_FAIL("list_insert: node at %#llx is not initialized "
				"(magic %#x)", (unsigned long long)off,
				n->magic);
		if (n->value >= last)
			EX_FAIL("list_insert: values out of order");
		last = n->value;
		off = n->next;
	}
	return 0;
}
