/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ring_buffer.c -- a persistent ring: slot first, then the head
 *
 * 16 one-line slots; the producer fills slot head % 16 and makes it
 * durable, then advances head and makes that durable.  The ring's header
 * says how many of the newest slots a reader may trust (`window`).  The
 * slot being filled is the oldest, so the window must leave it out: 15.
 * Invariant: the last min(head, window) slots hold sequence numbers
 * head-window .. head-1 with good checksums.
 *
 * Variants:
 *   BUG_MARKER_FIRST   the head is made durable before the slot
 *   BUG_MISSING_FLUSH  the slot is never flushed
 *   BUG_FULL_WINDOW    window = 16: the slot being overwritten is still
 *                      trusted (docs/pmemtest-walkthrough.md finds it)
 */
#include "example.h"

#define SLOTS 16
#define STEPS 40

struct slot {
	uint64_t seq;
	uint64_t data[6];
	uint64_t csum;
};

struct root {
	uint64_t head;
	uint64_t window; /* trusted newest slots */
	uint8_t pad[EX_LINE - 16];
	struct slot s[SLOTS];
};

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

#ifdef BUG_FULL_WINDOW
	r->window = SLOTS;
#else
	r->window = SLOTS - 1; /* the slot being filled is not trusted */
#endif
	/* The ring's shape is durable before it is used. */
	rio_persist(p, &r->window, sizeof(r->window));
	for (uint64_t i = 0; i < STEPS; i++) {
		struct slot *s = &r->s[r->head % SLOTS];
		s->seq = r->head;
		for (int k = 0; k < 6; k++)
			s->data[k] = i ^ (uint64_t)k;
		s->csum = ex_csum(s, offsetof(struct slot, csum));
#ifdef BUG_MARKER_FIRST
		r->head++;
		rio_persist(p, &r->head, sizeof(r->head));
		rio_persist(p, s, sizeof(*s));
		continue;
#endif
#ifndef BUG_MISSING_FLUSH
		/* The slot is durable before the head covers it. */
		rio_persist(p, s, sizeof(*s));
#endif
		r->head++;
		rio_persist(p, &r->head, sizeof(r->head));
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *r = (const struct root *)base;
	uint64_t from = r->head > r->window ? r->head - r->window : 0;

	(void)p;
	if (r->window > SLOTS)
		EX_FAIL("ring_buffer: window %llu", (unsigned long long)r->window);
	for (uint64_t q = from; q < r->head; q++) {
		const struct slot *s = &r->s[q % SLOTS];
		if (s->seq != q ||
		    s->csum != ex_csum(s, offsetof(struct slot, csum)))
			EX_FAIL("ring_buffer: slot of seq %llu holds seq %llu "
				"(head %llu)", (unsigned long long)q,
				(unsigned long long)s->seq,
				(unsigned long long)r->head);
	}
	return 0;
}
