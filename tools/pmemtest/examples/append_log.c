/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * append_log.c -- an append-only log: entries, then the tail that commits
 *
 * An entry is two cache lines (seq, payload, checksum).  Appending writes
 * the entry past the tail, makes it durable, then advances the tail (one
 * 8-byte store) and makes that durable.  Invariant: every entry below the
 * tail verifies and has seq == its index.  $EX_STEPS entries (default 24).
 * With $EX_FILL set, the space after them is first filled with a pattern
 * and made durable: a pool full of data (for measuring pmemtest).
 *
 * Variants:
 *   BUG_MISSING_FLUSH   the entry is never flushed
 *   BUG_MISSING_FENCE   the entry is flushed but not fenced before the tail
 *   BUG_MARKER_FIRST    the tail is made durable before the entry
 *   BUG_WRONG_RANGE     only the entry's first line is flushed
 *   BUG_UNFENCED_TAIL   (lint) the last tail flush is never fenced
 */
#include "example.h"

struct entry {
	uint64_t seq;
	uint64_t payload[14];
	uint64_t csum; /* of seq and payload */
};

struct log {
	uint64_t tail;
	uint8_t pad[EX_LINE - 8];
	struct entry e[];
};

static uint64_t
steps(void)
{
	const char *s = getenv("EX_STEPS");
	return s ? strtoull(s, NULL, 0) : 24;
}

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct log *l = (struct log *)base;
	uint64_t cap = (rio_pool_size(p) - sizeof(*l)) / sizeof(struct entry);
	uint64_t n = steps();

	if (getenv("EX_FILL") != NULL && n < cap) {
		memset(&l->e[n], 0xa5, (cap - n) * sizeof(struct entry));
		/* Never read (beyond any tail this run reaches). */
		rio_persist(p, &l->e[n], (cap - n) * sizeof(struct entry));
	}
	for (uint64_t i = 0; i < n && i < cap; i++) {
		struct entry *e = &l->e[l->tail];
		e->seq = l->tail;
		for (int k = 0; k < 14; k++)
			e->payload[k] = i * 100 + (uint64_t)k;
		e->csum = ex_csum(e, offsetof(struct entry, csum));
#if defined(BUG_MARKER_FIRST)
		l->tail++;
		rio_persist(p, &l->tail, sizeof(l->tail));
		rio_persist(p, e, sizeof(*e));
		continue;
#elif defined(BUG_MISSING_FLUSH)
#elif defined(BUG_MISSING_FENCE)
		rio_flush(p, e, sizeof(*e));
#elif defined(BUG_WRONG_RANGE)
		rio_persist(p, e, EX_LINE);
#else
		/* The entry must be durable before the tail covers it. */
		rio_persist(p, e, sizeof(*e));
#endif
		l->tail++;
#ifdef BUG_UNFENCED_TAIL
		if (i + 1 == n) {
			rio_flush(p, &l->tail, sizeof(l->tail));
			break;
		}
#endif
		/* Commit: the tail now covers the entry. */
		rio_persist(p, &l->tail, sizeof(l->tail));
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct log *l = (const struct log *)base;
	uint64_t cap = (rio_pool_size(p) - sizeof(*l)) / sizeof(struct entry);

	if (l->tail > cap)
		EX_FAIL("append_log: tail %llu beyond capacity",
			(unsigned long long)l->tail);
	for (uint64_t i = 0; i < l->tail; i++) {
		const struct entry *e = &l->e[i];
		if (e->seq != i ||
		    e->csum != ex_csum(e, offsetof(struct entry, csum)))
			EX_FAIL("append_log: entry %llu of %llu is torn or "
				"missing (seq %llu)", (unsigned long long)i,
				(unsigned long long)l->tail,
				(unsigned long long)e->seq);
	}
	return 0;
}
