/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * undo_log.c -- update a three-line record in place under an undo log
 *
 * Every word of the record holds the version v.  To move to v + 1: copy
 * the record to the undo area and make it durable; set `valid` and make it
 * durable; update the record in place and make it durable; clear `valid`
 * and make that durable.  Recovery copies the undo image back while
 * `valid` is set.  Invariant after recovery: all words equal.
 *
 * Variants:
 *   BUG_MARKER_FIRST   the before-image and `valid` are persisted together
 *                      (valid may be durable before the image)
 *   BUG_MISSING_FENCE  the before-image is flushed, not fenced, before
 *                      `valid` is set
 *   BUG_NO_LOG         the record is updated in place with no log at all
 *   BUG_RECOVERY_ORDER recovery drops the log before the restored record
 *                      is durable (found by tracing the recovery: run
 *                      with EX_STOP_AT=N, then `pmemtest run --pool POOL
 *                      ... -- PROG check POOL`)
 */
#include "example.h"

#define WORDS 24 /* three lines */
#define STEPS 8

struct root {
	uint64_t rec[WORDS];
	uint64_t undo[WORDS];
	uint64_t valid;
	uint8_t pad[EX_LINE - 8];
};

static void
recover(rio_pool *p, struct root *r)
{
	if (!r->valid)
		return;
	memcpy(r->rec, r->undo, sizeof(r->rec));
#ifdef BUG_RECOVERY_ORDER
	r->valid = 0;
	rio_flush(p, &r->valid, sizeof(r->valid));
	rio_persist(p, r->rec, sizeof(r->rec));
#else
	/* The record is restored before the log is dropped. */
	rio_persist(p, r->rec, sizeof(r->rec));
	r->valid = 0;
	rio_persist(p, &r->valid, sizeof(r->valid));
#endif
}

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t v = 1; v <= STEPS; v++) {
#ifndef BUG_NO_LOG
		memcpy(r->undo, r->rec, sizeof(r->rec));
#if defined(BUG_MARKER_FIRST)
		r->valid = 1;
		rio_flush(p, r->undo, sizeof(r->undo));
		rio_persist(p, &r->valid, sizeof(r->valid));
#else
#ifdef BUG_MISSING_FENCE
		rio_flush(p, r->undo, sizeof(r->undo));
#else
		/* The before-image is durable before it is declared valid. */
		rio_persist(p, r->undo, sizeof(r->undo));
#endif
		r->valid = 1;
		/* The log is valid before the record changes. */
		rio_persist(p, &r->valid, sizeof(r->valid));
#endif
#endif
		for (int i = 0; i < WORDS; i++) {
			r->rec[i] = v;
			if (i == WORDS / 2)
				ex_maybe_stop(v); /* half updated, log valid */
		}
		/* The new record is durable before the log is dropped. */
		rio_persist(p, r->rec, sizeof(r->rec));
#ifndef BUG_NO_LOG
		r->valid = 0;
		/* Drop the log. */
		rio_persist(p, &r->valid, sizeof(r->valid));
#endif
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	recover(p, r);
	return ex_words_equal("undo_log", r->rec, WORDS);
}
