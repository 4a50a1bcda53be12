/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redo_log.c -- update a three-line record through a redo log
 *
 * The new record goes to the log and is made durable; `committed` is set
 * and made durable (the transaction is decided); the record is updated in
 * place and made durable; `committed` is cleared.  Recovery replays the log
 * while `committed` is set.  After each transaction the program declares a
 * durability point (rio_durable_point).  Invariant: all words equal.
 *
 * Variants:
 *   BUG_MARKER_FIRST       the log and `committed` are persisted together
 *   BUG_MISSING_FLUSH      the in-place update is not flushed before
 *                          `committed` is cleared
 *   BUG_DPOINT_EARLY       (lint) the durability point is declared before
 *                          clearing `committed` is persisted (recovery
 *                          would replay an applied log: consistent, but
 *                          the transaction is not finished when it says)
 */
#include "example.h"

#define WORDS 24
#define STEPS 8

struct root {
	uint64_t rec[WORDS];
	uint64_t redo[WORDS];
	uint64_t committed;
	uint8_t pad[EX_LINE - 8];
};

static void
recover(rio_pool *p, struct root *r)
{
	if (!r->committed)
		return;
	memcpy(r->rec, r->redo, sizeof(r->rec));
	/* The replayed record is durable before the log is dropped. */
	rio_persist(p, r->rec, sizeof(r->rec));
	r->committed = 0;
	rio_persist(p, &r->committed, sizeof(r->committed));
}

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t v = 1; v <= STEPS; v++) {
		for (int i = 0; i < WORDS; i++)
			r->redo[i] = v;
#ifdef BUG_MARKER_FIRST
		r->committed = 1;
		rio_flush(p, r->redo, sizeof(r->redo));
		rio_persist(p, &r->committed, sizeof(r->committed));
#else
		/* The log is durable before the commit record. */
		rio_persist(p, r->redo, sizeof(r->redo));
		r->committed = 1;
		/* Decided: from here recovery redoes. */
		rio_persist(p, &r->committed, sizeof(r->committed));
#endif
		memcpy(r->rec, r->redo, sizeof(r->rec));
#ifndef BUG_MISSING_FLUSH
		/* Applied durably before the log may go. */
		rio_persist(p, r->rec, sizeof(r->rec));
#endif
		r->committed = 0;
#ifdef BUG_DPOINT_EARLY
		rio_durable_point(p, "redo_log transaction");
#endif
		/* Drop the log: the transaction is over. */
		rio_persist(p, &r->committed, sizeof(r->committed));
#ifndef BUG_DPOINT_EARLY
		rio_durable_point(p, "redo_log transaction");
#endif
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	recover(p, r);
	return ex_words_equal("redo_log", r->rec, WORDS);
}
