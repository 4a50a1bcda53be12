/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pstack.c -- a persistent stack of nodes linked by offset (the shape of
 * PMDK's pmreorder stack test, written here against librio)
 *
 * push: take the next free node, write its value and the old top, make
 * the node durable, then point `top` at it and make `top` durable.  pop:
 * move `top` to the node's successor and make it durable.  The checker
 * walks the stack from `top`: every node on it is a node (magic), each
 * one's value is one less than the one above, and the bottom one's is 1.
 *
 * Variants:
 *   BUG_NODE_UNPERSISTED  the node is stored but not made durable before
 *                         `top` names it (a missing flush of the node)
 *   BUG_TOP_EARLY         `top` is stored and persisted before the node
 *                         is written (the publish comes first)
 */
#include "example.h"

#define NNODES 24
#define PUSHES 20
#define NODE_MAGIC 0x4e4f4445ull

struct node {
	uint64_t magic;
	uint64_t value; /* depth: 1 at the bottom */
	uint64_t next;  /* offset of the node below, 0 = none */
	uint8_t pad[EX_LINE - 24];
};

struct root {
	uint64_t top; /* offset of the top node, 0 = empty */
	uint8_t pad[EX_LINE - 8];
	struct node n[NNODES];
};

static uint64_t
off_of(const struct root *r, const struct node *x)
{
	return (uint64_t)((const uint8_t *)x - (const uint8_t *)r);
}

static void
push(rio_pool *p, struct root *r, uint64_t depth)
{
	struct node *x = &r->n[depth % NNODES];
	uint64_t old = r->top;

#ifdef BUG_TOP_EARLY
	r->top = off_of(r, x);
	rio_persist(p, &r->top, sizeof(r->top)); /* BUG-SITE */
#endif
	*x = (struct node){ .magic = NODE_MAGIC, .value = depth, .next = old }; /* BUG-SITE flush */
#ifndef BUG_NODE_UNPERSISTED
	/* The node is durable before `top` names it. */
	rio_persist(p, x, sizeof(*x));
#endif
#ifndef BUG_TOP_EARLY
	r->top = off_of(r, x);
	/* The push is durable. */
	rio_persist(p, &r->top, sizeof(r->top));
#endif
}

static void
pop(rio_pool *p, struct root *r)
{
	const struct node *x = (const struct node *)((uint8_t *)r + r->top);

	r->top = x->next;
	/* The pop is durable. */
	rio_persist(p, &r->top, sizeof(r->top));
}

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;
	uint64_t depth = 0;

	for (int i = 0; i < PUSHES; i++) {
		push(p, r, ++depth);
		if (i % 4 == 3) {
			pop(p, r);
			depth--;
		}
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *r = (const struct root *)base;
	uint64_t off = r->top, want = 0, steps = 0;

	(void)p;
	while (off != 0) {
		const struct node *x;
		if (off < sizeof(r->top) + sizeof(r->pad) ||
		    off + sizeof(*x) > sizeof(*r) || ++steps > NNODES)
			EX_FAIL("pstack: bad node offset %llu",
				(unsigned long long)off);
		x = (const struct node *)(base + off);
		if (x->magic != NODE_MAGIC || (want && x->value != want))
			EX_FAIL("pstack: node at %llu: magic %llx value %llu, "
				"expected depth %llu", (unsigned long long)off,
				(unsigned long long)x->magic,
				(unsigned long long)x->value,
				(unsigned long long)want);
		want = x->value - 1;
		off = x->next;
	}
	if (want != 0)
		EX_FAIL("pstack: stack ends at depth %llu",
			(unsigned long long)want);
	return 0;
}
