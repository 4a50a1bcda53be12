/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wl_debit_credit.c -- debit-credit, the thesis' TPC-B variant
 *
 * Database (offsets from the start of the area, 100-byte records):
 *   header (64 B): the history head
 *   branches[B], tellers[10 B], accounts[A]: A fills the database, at
 *   100,000 accounts per branch as in TPC-B (at least one branch)
 *   history: a circular buffer of 50-byte records, 2 MiB (1/8 of a small
 *   database), holding the last cap - 1 records: the slot at the head is
 *   free, and the next transaction inserts its record there (a range
 *   declared fresh: nobody reads it unless that transaction commits)
 * Each transaction picks a random teller, its branch, and an account of
 * that branch (85%) or of any branch (15%), adds a random delta in
 * [-999999, 999999] to the three balances and appends a history record:
 * five ranges declared together, then the stores in place.
 *
 * Invariants checked after every run:
 *  1. sum(accounts) = sum(tellers) = sum(branches) = the running total of
 *     every committed delta (kept in volatile memory by the driver);
 *  2. the history head counts the committed transactions;
 *  3. the deltas in the history buffer sum to the last `cap - 1`
 *     committed deltas (a volatile ring mirrors them), and name valid
 *     rows.
 * After a crash (dc_recovered, no driver's totals): the three sums are
 * equal; each of the last `cap - 1` history records names valid rows and
 * holds its own sequence number; and while the buffer has not wrapped,
 * the history deltas sum to the balances.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpcbench.h"

#define DC_MAGIC 0x746964657263ull
#define ACCOUNTS_PER_BRANCH 100000
#define TELLERS_PER_BRANCH 10

struct dc_hdr {
	uint64_t magic;
	uint64_t hist_head; /* records ever appended */
	uint8_t pad[48];
};

struct __attribute__((packed)) dc_row { /* branch, teller, account */
	int64_t balance;
	uint32_t id;
	uint32_t branch;
	char filler[84];
};
_Static_assert(sizeof(struct dc_row) == 100, "100-byte records");

struct __attribute__((packed)) dc_hist {
	uint32_t account, teller, branch;
	int64_t delta;
	uint64_t seq;
	char filler[22];
};
_Static_assert(sizeof(struct dc_hist) == 50, "50-byte history records");

struct dc {
	uint64_t branches, tellers, accounts, hist_cap;
	size_t off_branch, off_teller, off_account, off_hist;
	uint64_t rng;
	int64_t total;      /* sum of committed deltas */
	uint64_t committed;
	int64_t *ring;      /* the last hist_cap - 1 committed deltas */
	int64_t ring_sum;
};

#define AT(db, off, type, i) ((type *)((char *)(db) + (off)) + (i))

static int
dc_init(const struct tb_opts *o, size_t size, uint64_t seed, void **out)
{
	(void)o;
	struct dc *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -1;
	size_t hist = size / 8 < (2u << 20) ? size / 8 : 2u << 20;
	w->hist_cap = hist / sizeof(struct dc_hist);
	size_t rows = (size - sizeof(struct dc_hdr) - hist) / sizeof(struct dc_row);
	/* rows = B + 10 B + A with A <= 100000 B */
	w->branches = (rows + ACCOUNTS_PER_BRANCH + TELLERS_PER_BRANCH) /
		(ACCOUNTS_PER_BRANCH + TELLERS_PER_BRANCH + 1);
	w->tellers = TELLERS_PER_BRANCH * w->branches;
	if (rows < w->branches + w->tellers + w->branches) {
		tb_err("debit-credit: a %zu-byte database is too small", size);
		free(w);
		return -1;
	}
	w->accounts = rows - w->branches - w->tellers;
	w->off_branch = sizeof(struct dc_hdr);
	w->off_teller = w->off_branch + w->branches * sizeof(struct dc_row);
	w->off_account = w->off_teller + w->tellers * sizeof(struct dc_row);
	w->off_hist = w->off_account + w->accounts * sizeof(struct dc_row);
	if (w->hist_cap < 2) {
		tb_err("debit-credit: a %zu-byte database is too small", size);
		free(w);
		return -1;
	}
	w->ring = calloc(w->hist_cap - 1, sizeof(*w->ring));
	if (w->ring == NULL) {
		free(w);
		return -1;
	}
	w->rng = seed;
	*out = w;
	return 0;
}

static void
dc_populate(void *wl, void *db)
{
	struct dc *w = wl;
	struct dc_hdr *h = db;
	h->magic = DC_MAGIC;
	h->hist_head = 0;
	for (uint64_t i = 0; i < w->branches; i++)
		*AT(db, w->off_branch, struct dc_row, i) =
			(struct dc_row){ .id = (uint32_t)i, .branch = (uint32_t)i };
	for (uint64_t i = 0; i < w->tellers; i++)
		*AT(db, w->off_teller, struct dc_row, i) = (struct dc_row){
			.id = (uint32_t)i,
			.branch = (uint32_t)(i / TELLERS_PER_BRANCH) };
	uint64_t per = (w->accounts + w->branches - 1) / w->branches;
	for (uint64_t i = 0; i < w->accounts; i++)
		*AT(db, w->off_account, struct dc_row, i) = (struct dc_row){
			.id = (uint32_t)i, .branch = (uint32_t)(i / per) };
}

static int
dc_tx(void *wl, void *db, const struct tb_backend *b, void *ctx)
{
	struct dc *w = wl;
	struct dc_hdr *h = db;
	uint64_t t = tb_below(&w->rng, w->tellers);
	uint64_t br = t / TELLERS_PER_BRANCH;
	uint64_t per = (w->accounts + w->branches - 1) / w->branches;
	uint64_t a;
	if (tb_below(&w->rng, 100) < 85) {
		uint64_t first = br * per;
		uint64_t n = first + per <= w->accounts ? per : w->accounts - first;
		a = first + tb_below(&w->rng, n);
	} else {
		a = tb_below(&w->rng, w->accounts);
	}
	int64_t delta = (int64_t)tb_below(&w->rng, 1999999) - 999999;
	struct dc_row *acct = AT(db, w->off_account, struct dc_row, a);
	struct dc_row *tel = AT(db, w->off_teller, struct dc_row, t);
	struct dc_row *bra = AT(db, w->off_branch, struct dc_row, br);
	struct dc_hist *hr = AT(db, w->off_hist, struct dc_hist,
		h->hist_head % w->hist_cap);
	struct tb_range r[5] = {
		{ &acct->balance, sizeof(acct->balance) },
		{ &tel->balance, sizeof(tel->balance) },
		{ &bra->balance, sizeof(bra->balance) },
		{ hr, sizeof(*hr), true }, /* inserted: the ring's free slot */
		{ &h->hist_head, sizeof(h->hist_head) },
	};
	if (b->begin(ctx) || b->set_ranges(ctx, 5, r))
		return -1;
	acct->balance += delta;
	tel->balance += delta;
	bra->balance += delta;
	hr->account = (uint32_t)a;
	hr->teller = (uint32_t)t;
	hr->branch = (uint32_t)br;
	hr->delta = delta;
	hr->seq = h->hist_head;
	h->hist_head++;
	if (b->commit(ctx))
		return -1;
	/* Committed: the driver's own account of what the database holds. */
	size_t slot = w->committed % (w->hist_cap - 1);
	w->ring_sum += delta - w->ring[slot];
	w->ring[slot] = delta;
	w->total += delta;
	w->committed++;
	return 0;
}

#define FAIL(...) (snprintf(why, n, __VA_ARGS__), -1)

static int
dc_sum(const struct dc *w, const void *db, struct tb_dc_sums *s, char *why,
	size_t n)
{
	const struct dc_hdr *h = db;
	*s = (struct tb_dc_sums){ 0 };
	if (h->magic != DC_MAGIC)
		return FAIL("bad database magic");
	for (uint64_t i = 0; i < w->accounts; i++)
		s->accounts += AT(db, w->off_account, const struct dc_row, i)->balance;
	for (uint64_t i = 0; i < w->tellers; i++)
		s->tellers += AT(db, w->off_teller, const struct dc_row, i)->balance;
	for (uint64_t i = 0; i < w->branches; i++)
		s->branches += AT(db, w->off_branch, const struct dc_row, i)->balance;
	uint64_t head = h->hist_head;
	s->head = head;
	/* The slot at the head is free (the next insert), not read. */
	s->used = head < w->hist_cap - 1 ? head : w->hist_cap - 1;
	for (uint64_t k = head - s->used; k < head; k++) {
		const struct dc_hist *r = AT(db, w->off_hist,
			const struct dc_hist, k % w->hist_cap);
		if (r->account >= w->accounts || r->teller >= w->tellers ||
		    r->branch >= w->branches || r->seq != k)
			return FAIL("history record %llu is malformed",
				(unsigned long long)k);
		s->history += r->delta;
	}
	return 0;
}

int
tb_dc_judge_run(const struct tb_dc_sums *s, int64_t total,
	uint64_t committed, int64_t ring_sum, char *why, size_t n)
{
	if (s->accounts != total || s->tellers != total ||
	    s->branches != total)
		return FAIL("balances: accounts %lld, tellers %lld, branches "
			"%lld, committed deltas %lld", (long long)s->accounts,
			(long long)s->tellers, (long long)s->branches,
			(long long)total);
	if (s->head != committed)
		return FAIL("history head %llu, committed %llu",
			(unsigned long long)s->head,
			(unsigned long long)committed);
	if (s->history != ring_sum)
		return FAIL("history deltas sum to %lld, the last %llu committed "
			"deltas to %lld", (long long)s->history,
			(unsigned long long)s->used, (long long)ring_sum);
	return 0;
}

int
tb_dc_judge_recovered(const struct tb_dc_sums *s, uint64_t hist_cap,
	char *why, size_t n)
{
	if (s->accounts != s->tellers || s->tellers != s->branches)
		return FAIL("balances: accounts %lld, tellers %lld, branches "
			"%lld", (long long)s->accounts, (long long)s->tellers,
			(long long)s->branches);
	if (s->head <= hist_cap && s->history != s->accounts)
		return FAIL("history deltas sum to %lld, the balances to %lld",
			(long long)s->history, (long long)s->accounts);
	return 0;
}

static int
dc_check(void *wl, const void *db, char *why, size_t n)
{
	const struct dc *w = wl;
	struct tb_dc_sums s;
	if (dc_sum(w, db, &s, why, n))
		return -1;
	return tb_dc_judge_run(&s, w->total, w->committed, w->ring_sum, why,
		n);
}

static int
dc_recovered(void *wl, const void *db, uint64_t *committed, char *why,
	size_t n)
{
	const struct dc *w = wl;
	struct tb_dc_sums s;
	if (dc_sum(w, db, &s, why, n) ||
	    tb_dc_judge_recovered(&s, w->hist_cap - 1, why, n))
		return -1;
	*committed = s.head;
	return 0;
}

static void
dc_fini(void *wl)
{
	struct dc *w = wl;
	free(w->ring);
	free(w);
}

const struct tb_workload tb_debit_credit = {
	.name = "debit-credit",
	.init = dc_init,
	.populate = dc_populate,
	.tx = dc_tx,
	.check = dc_check,
	.check_recovered = dc_recovered,
	.fini = dc_fini,
};
