/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * multi_line_record.c -- a record larger than a line, updated atomically
 *
 * The record (three lines: a sequence number, payload, checksum) has two
 * copies.  An update writes the copy that does not hold the newest valid
 * sequence, makes it durable, and is done: recovery picks the valid copy
 * with the highest sequence; then `done` (its own line) records the
 * sequence as complete.  A copy never written (all zero) is valid with
 * sequence 0: the fresh pool.  Invariant: the newest valid copy is at
 * least as new as `done`.
 *
 * Variant:
 *   BUG_NO_LOG   one copy, updated in place (no log, no second copy):
 *                a crash between its lines leaves it torn
 */
#include "example.h"

#define STEPS 10

struct rec {
	uint64_t seq;
	uint64_t data[20];
	uint64_t csum;
	uint8_t pad[3 * EX_LINE - 22 * 8];
};

struct root {
	struct rec c[2];
	uint64_t done;
	uint8_t pad[EX_LINE - 8];
};

static bool
valid(const struct rec *r)
{
	static const struct rec zero;
	return r->csum == ex_csum(r, offsetof(struct rec, csum)) ||
		memcmp(r, &zero, sizeof(zero)) == 0;
}

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t s = 1; s <= STEPS; s++) {
#ifdef BUG_NO_LOG
		struct rec *w = &r->c[0];
#else
		/* Overwrite the older copy; the newer one stays intact. */
		struct rec *w = &r->c[r->c[0].seq > r->c[1].seq];
#endif
		w->seq = s;
		for (int i = 0; i < 20; i++)
			w->data[i] = s * 1000 + (uint64_t)i;
		w->csum = ex_csum(w, offsetof(struct rec, csum));
		/* The new copy is whole before it is declared done. */
		rio_persist(p, w, sizeof(*w));
		r->done = s;
		rio_persist(p, &r->done, sizeof(r->done));
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *r = (const struct root *)base;
	uint64_t newest = 0;
	bool any = false;

	(void)p;
	for (int k = 0; k < 2; k++)
		if (valid(&r->c[k]) && (!any || r->c[k].seq > newest)) {
			newest = r->c[k].seq;
			any = true;
		}
	if (!any || newest < r->done)
		EX_FAIL("multi_line_record: newest valid copy has seq %llu, "
			"but seq %llu was complete", (unsigned long long)newest,
			(unsigned long long)r->done);
	return 0;
}
