/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend_pword.c -- Trinity and Quadra: the old value and a sequence
 * number beside every persistent word (Ramalhete, Felber, Correia,
 * "Efficient Algorithms for Persistent Transactional Memory", PPoPP'21),
 * reimplemented from the paper's description as baselines for tpcbench
 *
 * These designs do not log ranges of ordinary memory: every persistent
 * word is a 32-byte *pword* {main, back, seq, count[2]}, two to a cache
 * line, and a program stores through pw_store().  So they cannot run the
 * workloads' set_ranges-then-store transactions in place; they bring their
 * own debit-credit (tb_backend.layout), with the same transaction mix and
 * invariants over a word-per-slot layout, and run order-entry word by
 * word over a volatile image (its section below, O1-O4):
 *
 *   pool user area: line 0 header {magic, design, slots}, line 1 the
 *   committed sequence (Trinity's p_seq, alone in its line), then
 *   `slots` pwords from byte 128:
 *     slot 0 the database magic, slot 1 the history head;
 *     rows (branches, tellers, accounts), 4 slots = 128 B each:
 *       {balance, id | branch << 32, filler, filler};
 *     history, 4 slots = 128 B each: {account | teller << 32, branch,
 *       delta, seq}, 2 MiB or 1/8 of the database.
 *   A row is 128 B where the range-based backends' is 100 B, so a
 *   database of the same size holds about 78% as many accounts.
 *   A transaction stores 8 words in 6 lines (3 balances, the history
 *   record's 2 lines, the head's line).
 *
 * The designs rely on one hardware property vista does not: stores to one
 * cache line reach the persistence domain in program order (x86-TSO with
 * whole-line write-back), so a line never holds a newer `main` with an
 * older `back`/`seq`.  Their crash test (tests/bench/pword_crash_test.cpp)
 * models lines as persisting whole or not at all; under vista's stricter
 * model (any subset of a line's 8-byte words) they are not crash-safe.
 *
 * Invariants (both designs):
 *  P1. A pword whose seq names the running transaction holds in `back`
 *      its value before the transaction; stores set back, then seq, then
 *      main, in one line, in program order (volatile stores).
 *  P2. The first store of a transaction to a word copies main to back;
 *      later stores change main only.
 *
 * Trinity (2 fences per transaction), persist order:
 *  1. each store: back, seq = p_seq, main; clwb its line (no fence);
 *  2. F1 (drain): every word of the transaction durable;
 *  3. p_seq + 1 stored and written back;
 *  4. F2 (drain): the commit durable; the call returns.
 *  Crash before F1 completes p_seq: words with seq == p_seq are undone
 *  (main = back, seq = 0).  After 3 is durable: nothing to undo.
 *  Recovery scans every slot.
 *
 * Quadra (1 fence per transaction), persist order:
 *  1. each first store: back, count[seq & 1] = 0, seq; every store: main
 *     (no flush yet; the addresses go to a volatile list);
 *  2. count[seq & 1] = the transaction's word count, in every word;
 *  3. clwb each written line once;
 *  4. F (drain): the transaction committed and durable.
 *  There is no commit record: recovery finds the highest seq among all
 *  slots, and keeps that transaction only if every word carrying it has
 *  the same count and the number of such words equals it; otherwise it
 *  undoes those words (main = back).  All lower sequences are durable by
 *  their own fence.  The volatile sequence restarts at highest + 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rio.h"
#include "tpcbench.h"

#define PW_MAGIC 0x64726f7770ull /* "pword" */
#define PW_HDR 128u               /* header line + p_seq line */
#ifndef TB_PW_MAX_LOG            /* a test build sets a smaller one */
#define TB_PW_MAX_LOG 512
#endif
#define PW_MAX_LOG TB_PW_MAX_LOG  /* words per transaction */
#define PW_LINES 1024             /* Quadra's written-lines set (> 2 x log) */

enum pw_design { PW_TRINITY = 1, PW_QUADRA = 2 };

struct pword {
	uint64_t main, back, seq;
	uint32_t count[2];
};
_Static_assert(sizeof(struct pword) == 32, "two pwords per cache line");

struct pw_hdr {
	uint64_t magic, design, slots;
	uint8_t pad[40];
	uint64_t p_seq; /* Trinity: the transaction running or next */
	uint8_t pad2[56];
};
_Static_assert(sizeof(struct pw_hdr) == PW_HDR, "header is two lines");

struct pw_ctx {
	enum pw_design design;
	rio_pool *pool;
	struct pw_hdr *hdr;
	struct pword *w;
	uint64_t slots, seq;
	struct pword *log[PW_MAX_LOG];
	int n;
	/* Quadra's commit: the lines already written back, stamped with the
	 * transaction's sequence (open addressing, never cleared). */
	uintptr_t line[PW_LINES];
	uint64_t line_seq[PW_LINES];
	uint64_t fences, flushes;
#ifdef TB_BROKEN_PWORD_EARLY_ACK
	bool pending; /* a returned commit whose commit point waits */
#endif
	char path[4200];
};

static char dir[4096];

/* Program-order stores into one line (P1): the compiler must not reorder
 * them; x86 keeps them in order to memory. */
#define PW_SET(lv, v) (*(volatile __typeof__(lv) *)&(lv) = (v))

static uint64_t
pw_slots(size_t db_size)
{
	return (db_size - PW_HDR) / sizeof(struct pword);
}

static void
pw_flush(struct pw_ctx *c, const void *p)
{
	rio_flush(c->pool, p, sizeof(struct pword));
	c->flushes++;
}

static void
pw_drain(struct pw_ctx *c)
{
	rio_drain(c->pool);
	c->fences++;
}

/* One store inside a transaction (P1, P2). */
static inline void
pw_store(struct pw_ctx *c, struct pword *w, uint64_t v)
{
	if (w->seq != c->seq) {
		PW_SET(w->back, w->main);
		if (c->design == PW_QUADRA)
			PW_SET(w->count[c->seq & 1], 0);
		PW_SET(w->seq, c->seq);
		if (c->n < PW_MAX_LOG)
			c->log[c->n] = w;
		c->n++;
	}
	PW_SET(w->main, v);
	if (c->design == PW_TRINITY)
		/* Trinity step 1: the line (back, seq, main) starts on its
		 * way; F1 at commit waits for it. */
		pw_flush(c, w);
}

/* The design's commit point (Trinity steps 2-4, Quadra steps 2-4): when
 * it returns, the transaction is durable and recovery keeps it. */
static void
pw_commit_point(struct pw_ctx *c)
{
	if (c->design == PW_TRINITY) {
#ifndef TB_BROKEN_TRINITY_ONE_FENCE
		/* F1: every word the transaction stored (back, seq, main;
		 * flushed by pw_store) is durable before p_seq moves past
		 * it, or a crash after the move would keep a partial
		 * transaction. */
		pw_drain(c);
#endif
		PW_SET(c->hdr->p_seq, c->seq + 1);
		rio_flush(c->pool, &c->hdr->p_seq, sizeof(c->hdr->p_seq));
		c->flushes++;
		/* F2: the new p_seq is durable before the commit returns
		 * (durability, and the next transaction's words must not
		 * carry a sequence recovery would still undo). */
		pw_drain(c);
		c->seq++;
		c->n = 0;
		return;
	}
	uint32_t n = (uint32_t)c->n;
	for (int i = 0; i < c->n; i++)
		PW_SET(c->log[i]->count[c->seq & 1], n);
	/* Quadra step 3: each written line once (pwords two to a line). */
	for (int i = 0; i < c->n; i++) {
		uintptr_t line = (uintptr_t)c->log[i] & ~(uintptr_t)63;
		size_t h = (size_t)((line >> 6) * 0x9e3779b97f4a7c15ull >> 54);
		while (c->line_seq[h] == c->seq && c->line[h] != line)
			h = (h + 1) % PW_LINES;
		if (c->line_seq[h] == c->seq)
			continue; /* written back already */
		c->line[h] = line;
		c->line_seq[h] = c->seq;
		pw_flush(c, c->log[i]);
	}
	/* The one fence: every word with its count durable; from here
	 * recovery finds them all carrying this sequence and keeps the
	 * transaction. */
	pw_drain(c);
	c->seq++;
	c->n = 0;
}

#ifdef TB_BROKEN_PWORD_EARLY_ACK
/* Broken on purpose: a commit returns (and the program acknowledges it)
 * before its commit point, which runs at the next begin or at close; a
 * crash in between undoes an acknowledged transaction. */
static void
pw_settle(struct pw_ctx *c)
{
	if (c->pending)
		pw_commit_point(c);
	c->pending = false;
}
#else
static void
pw_settle(struct pw_ctx *c)
{
	(void)c; /* every commit reached its commit point before returning */
}
#endif

static int
pw_begin(void *ctx)
{
	struct pw_ctx *c = ctx;
	pw_settle(c);
	c->n = 0;
	return 0;
}

static int
pw_commit(void *ctx)
{
	struct pw_ctx *c = ctx;
	if (c->n > PW_MAX_LOG) {
		tb_err("%s: a transaction of %d words (at most %d)",
			c->design == PW_TRINITY ? "trinity" : "quadra", c->n,
			PW_MAX_LOG);
		return -1;
	}
#ifdef TB_BROKEN_PWORD_EARLY_ACK
	c->pending = true;
#else
	pw_commit_point(c);
#endif
	return 0;
}

static int
pw_no_ranges(void *ctx, size_t n, const struct tb_range *r)
{
	(void)ctx;
	(void)n;
	(void)r;
	tb_err("trinity/quadra store words (pw_store), not declared ranges");
	return -1;
}

static int
pw_no_abort(void *ctx)
{
	(void)ctx;
	tb_err("trinity/quadra: abort is not implemented here");
	return -1;
}

/* ---- recovery ---- */

static void
trinity_recover(struct pw_ctx *c)
{
	uint64_t s = c->hdr->p_seq;
	bool any = false;
	for (uint64_t i = 0; i < c->slots; i++) {
		struct pword *w = &c->w[i];
		if (w->seq != s)
			continue;
		PW_SET(w->main, w->back);
		PW_SET(w->seq, 0);
		pw_flush(c, w);
		any = true;
	}
	/* The undone words are durable before any new transaction reuses
	 * p_seq (which then names its words again). */
	if (any)
		pw_drain(c);
	c->seq = s;
}

static void
quadra_recover(struct pw_ctx *c)
{
	uint64_t high = 0;
	for (uint64_t i = 0; i < c->slots; i++)
		if (c->w[i].seq > high)
			high = c->w[i].seq;
	c->seq = high + 1;
	if (high == 0)
		return;
	uint32_t want = 0;
	uint64_t have = 0;
	bool bad = false;
	for (uint64_t i = 0; i < c->slots; i++) {
		const struct pword *w = &c->w[i];
		if (w->seq != high)
			continue;
		uint32_t k = w->count[high & 1];
		if (have++ == 0)
			want = k;
		else if (k != want)
			bad = true;
	}
#ifdef TB_BROKEN_QUADRA_NO_COUNT
	/* Broken on purpose: the highest transaction is kept whatever its
	 * words say. */
	bad = false;
	have = want;
#endif
	if (!bad && have == want)
		return;
	for (uint64_t i = 0; i < c->slots; i++) {
		struct pword *w = &c->w[i];
		if (w->seq != high)
			continue;
		PW_SET(w->main, w->back);
		pw_flush(c, w);
	}
	/* The undone transaction is durable before a new one runs: a later
	 * crash must not find its words again with fresher values. */
	pw_drain(c);
}

/* ---- the backend ---- */

static int
pw_setup(const struct tb_opts *o)
{
	return tb_workdir(o, dir, sizeof(dir), o->pmem_dir);
}

static int
pw_teardown(bool remove)
{
	if (remove)
		tb_rmtree(dir);
	return 0;
}

static int
pw_open(enum pw_design d, const struct tb_opts *o, int stream, bool create,
	void **ctx, void **db)
{
	const char *name = d == PW_TRINITY ? "trinity" : "quadra";
	if (o->db_size < (1u << 20)) {
		tb_err("%s: a database of at least 1 MiB", name);
		return -1;
	}
	struct pw_ctx *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -1;
	c->design = d;
	snprintf(c->path, sizeof(c->path), "%s/%s.%d.pool", dir, name, stream);
	size_t size = (o->db_size + RIO_POOL_HDR_SIZE + 4095) & ~(size_t)4095;
	unsigned flags = tb_rio_force_flag(o->domain) | RIO_NO_SIGNALS;
	struct rio_pool_opts po = { .layout = name };
	int rc = create ? rio_pool_create_opts(c->path, size, flags, &po,
			&c->pool) :
		rio_pool_open_opts(c->path, flags, &po, &c->pool);
	if (rc) {
		tb_err("%s: %s: %s", name, c->path, rio_strerror(rc));
		free(c);
		return -1;
	}
	c->hdr = rio_pool_base(c->pool);
	c->w = (struct pword *)((char *)c->hdr + PW_HDR);
	c->slots = pw_slots(o->db_size);
	if (create) {
		c->hdr->magic = PW_MAGIC;
		c->hdr->design = d;
		c->hdr->slots = c->slots;
		c->hdr->p_seq = 1; /* every slot starts at seq 0 */
		c->seq = 1;
	} else if (c->hdr->magic != PW_MAGIC || c->hdr->design != d ||
		   c->hdr->slots != c->slots) {
		tb_err("%s: %s is not a %s database of %llu slots", name,
			c->path, name, (unsigned long long)c->slots);
		rio_pool_close(c->pool);
		free(c);
		return -1;
	} else if (d == PW_TRINITY) {
		trinity_recover(c);
	} else {
		quadra_recover(c);
	}
	*ctx = c;
	*db = c->w;
	return 0;
}

static int
trinity_open(const struct tb_opts *o, int stream, bool create, void **ctx,
	void **db)
{
	return pw_open(PW_TRINITY, o, stream, create, ctx, db);
}

static int
quadra_open(const struct tb_opts *o, int stream, bool create, void **ctx,
	void **db)
{
	return pw_open(PW_QUADRA, o, stream, create, ctx, db);
}

static int
pw_loaded(void *ctx)
{
	struct pw_ctx *c = ctx;
	/* The populated database and header, durable before the first
	 * transaction. */
	rio_persist(c->pool, c->hdr, PW_HDR + c->slots * sizeof(struct pword));
	return 0;
}

static void
pw_stats(void *ctx, struct tb_bstats *out)
{
	struct pw_ctx *c = ctx;
	*out = (struct tb_bstats){ .has_fences = true, .fences = c->fences,
		.flushes = c->flushes };
}

static int
pw_close(void *ctx)
{
	struct pw_ctx *c = ctx;
	pw_settle(c);
	int rc = rio_pool_close(c->pool);
	free(c);
	if (rc) {
		tb_err("pword pool close: %s", rio_strerror(rc));
		return -1;
	}
	return 0;
}

static int
pw_files(void *ctx, const char **paths, int max)
{
	struct pw_ctx *c = ctx;
	if (max < 1)
		return 0;
	paths[0] = c->path;
	return 1;
}

/* ---- debit-credit over pwords (wl_debit_credit.c's mix and checks) ---- */

#define DC_MAGIC 0x746964657263ull
#define ACCOUNTS_PER_BRANCH 100000
#define TELLERS_PER_BRANCH 10
#define ROW 4 /* slots per row and per history record */

struct pdc {
	uint64_t branches, tellers, accounts, hist_cap;
	uint64_t s_branch, s_teller, s_account, s_hist; /* first slots */
	uint64_t rng;
	int64_t total;
	uint64_t committed;
	int64_t *ring;
	int64_t ring_sum;
};

static int
pdc_init(const struct tb_opts *o, size_t size, uint64_t seed, void **out)
{
	(void)o;
	struct pdc *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -1;
	uint64_t slots = pw_slots(size);
	size_t hist = size / 8 < (2u << 20) ? size / 8 : 2u << 20;
	w->hist_cap = hist / (ROW * sizeof(struct pword));
	uint64_t rows = (slots - 2 - w->hist_cap * ROW) / ROW;
	w->branches = (rows + ACCOUNTS_PER_BRANCH + TELLERS_PER_BRANCH) /
		(ACCOUNTS_PER_BRANCH + TELLERS_PER_BRANCH + 1);
	w->tellers = TELLERS_PER_BRANCH * w->branches;
	if (rows < w->branches + w->tellers + w->branches) {
		tb_err("debit-credit (pwords): a %zu-byte database is too small",
			size);
		free(w);
		return -1;
	}
	w->accounts = rows - w->branches - w->tellers;
	w->s_branch = 2;
	w->s_teller = w->s_branch + w->branches * ROW;
	w->s_account = w->s_teller + w->tellers * ROW;
	w->s_hist = w->s_account + w->accounts * ROW;
	w->ring = calloc(w->hist_cap, sizeof(*w->ring));
	if (w->ring == NULL) {
		free(w);
		return -1;
	}
	w->rng = seed;
	*out = w;
	return 0;
}

static void
pdc_populate(void *wl, void *db)
{
	struct pdc *w = wl;
	struct pword *s = db;
	s[0].main = DC_MAGIC;
	s[1].main = 0;
	uint64_t per = (w->accounts + w->branches - 1) / w->branches;
	for (uint64_t i = 0; i < w->branches; i++)
		s[w->s_branch + i * ROW + 1].main = i | i << 32;
	for (uint64_t i = 0; i < w->tellers; i++)
		s[w->s_teller + i * ROW + 1].main =
			i | (i / TELLERS_PER_BRANCH) << 32;
	for (uint64_t i = 0; i < w->accounts; i++)
		s[w->s_account + i * ROW + 1].main = i | (i / per) << 32;
}

static int
pdc_tx(void *wl, void *db, const struct tb_backend *b, void *ctx)
{
	(void)b;
	struct pdc *w = wl;
	struct pword *s = db;
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
	struct pw_ctx *c = ctx;
	struct pword *acct = &s[w->s_account + a * ROW];
	struct pword *tel = &s[w->s_teller + t * ROW];
	struct pword *bra = &s[w->s_branch + br * ROW];
	uint64_t head = s[1].main;
	struct pword *hr = &s[w->s_hist + (head % w->hist_cap) * ROW];
	pw_begin(c);
	pw_store(c, acct, acct->main + (uint64_t)delta);
	pw_store(c, tel, tel->main + (uint64_t)delta);
	pw_store(c, bra, bra->main + (uint64_t)delta);
	pw_store(c, &hr[0], a | t << 32);
	pw_store(c, &hr[1], br);
	pw_store(c, &hr[2], (uint64_t)delta);
	pw_store(c, &hr[3], head);
	pw_store(c, &s[1], head + 1);
	if (pw_commit(c))
		return -1;
	size_t slot = w->committed % w->hist_cap;
	w->ring_sum += delta - w->ring[slot];
	w->ring[slot] = delta;
	w->total += delta;
	w->committed++;
	return 0;
}

#define FAIL(...) (snprintf(why, n, __VA_ARGS__), -1)

static int
pdc_sum(const struct pdc *w, const void *db, struct tb_dc_sums *r, char *why,
	size_t n)
{
	const struct pword *s = db;
	*r = (struct tb_dc_sums){ 0 };
	if (s[0].main != DC_MAGIC)
		return FAIL("bad database magic");
	for (uint64_t i = 0; i < w->accounts; i++)
		r->accounts += (int64_t)s[w->s_account + i * ROW].main;
	for (uint64_t i = 0; i < w->tellers; i++)
		r->tellers += (int64_t)s[w->s_teller + i * ROW].main;
	for (uint64_t i = 0; i < w->branches; i++)
		r->branches += (int64_t)s[w->s_branch + i * ROW].main;
	uint64_t head = s[1].main;
	r->head = head;
	r->used = head < w->hist_cap ? head : w->hist_cap;
	for (uint64_t i = 0; i < r->used; i++) {
		const struct pword *h = &s[w->s_hist + i * ROW];
		uint64_t acct = h[0].main & 0xffffffffu, tel = h[0].main >> 32;
		uint64_t seq = h[3].main;
		if (acct >= w->accounts || tel >= w->tellers ||
		    h[1].main >= w->branches || seq % w->hist_cap != i ||
		    seq >= head || seq + w->hist_cap < head)
			return FAIL("history record %llu is malformed",
				(unsigned long long)i);
		r->history += (int64_t)h[2].main;
	}
	return 0;
}

static int
pdc_check(void *wl, const void *db, char *why, size_t n)
{
	const struct pdc *w = wl;
	struct tb_dc_sums r;
	if (pdc_sum(w, db, &r, why, n))
		return -1;
	return tb_dc_judge_run(&r, w->total, w->committed, w->ring_sum, why,
		n);
}

static int
pdc_recovered(void *wl, const void *db, uint64_t *committed, char *why,
	size_t n)
{
	const struct pdc *w = wl;
	struct tb_dc_sums r;
	if (pdc_sum(w, db, &r, why, n) ||
	    tb_dc_judge_recovered(&r, w->hist_cap, why, n))
		return -1;
	*committed = r.head;
	return 0;
}

static void
pdc_fini(void *wl)
{
	struct pdc *w = wl;
	free(w->ring);
	free(w);
}

static const struct tb_workload pw_debit_credit = {
	.name = "debit-credit",
	.init = pdc_init,
	.populate = pdc_populate,
	.tx = pdc_tx,
	.check = pdc_check,
	.check_recovered = pdc_recovered,
	.fini = pdc_fini,
};

/* ---- order-entry over pwords (wl_order_entry.c, word by word) ----
 *
 * Order-entry's rows are structs of mixed fields (a customer is 568 B, an
 * order with its 15 order-lines 872 B), written by plain C stores.  Here
 * its database is a sequence of 8-byte words, word k kept in pword slot k
 * (`main`, with its own back / seq / count): every row is the run of
 * pwords holding its bytes, so a row of B bytes takes B / 8 pwords,
 * B x 4 bytes of the pool, and a database of the same size holds about a
 * quarter of the range-based backends' warehouses, customers and items.
 * The new-order and order rings, the history ring and their allocation
 * (district heads and tails, the header's history head) are the
 * workload's own, stored in words like every other field.
 *
 * The workload's code (transaction mix, rows, checks: wl_order_entry.c)
 * runs unchanged on a volatile image of those words (`img`), with this
 * section as its backend:
 *  O1. img[k] equals slot k's `main` whenever no transaction is open:
 *      populate scatters the image into the slots, and a check or the
 *      first transaction after an open gathers it from them;
 *  O2. set_ranges records the declared ranges; commit stores each word of
 *      them whose image differs from `main` through pw_store() (P1, P2:
 *      back, seq, main, in the design's order) and then runs the design's
 *      commit (Trinity's two fences, Quadra's counts and one fence); no
 *      other store reaches the slots, so a crash keeps or undoes the
 *      whole transaction by the design's own recovery;
 *  O3. a transaction of more than PW_MAX_LOG changed words is refused
 *      before its first pw_store (the image is restored: nothing lost);
 *  O4. abort restores the declared ranges of the image from `main`
 *      (nothing of the transaction reached the slots).
 * The checks (after a run, after a crash) judge the gathered slots, not
 * the image.  The costs this adds to the designs' own: reading the image
 * beside `main` for the declared words at commit, and gathering the image
 * once per open.
 */

#define POE_RANGES 64

struct poe {
	void *wl;          /* wl_order_entry.c's state */
	uint64_t words;    /* the database's words = the slots */
	uint64_t *img;     /* O1 */
	struct pword *at;  /* the slots img mirrors (NULL: gather first) */
	struct pw_ctx *c;  /* the open transaction's */
	size_t n;
	struct tb_range r[POE_RANGES];
};

static int
poe_init(const struct tb_opts *o, size_t size, uint64_t seed, void **out)
{
	struct poe *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return -1;
	p->words = pw_slots(size);
	p->img = calloc(p->words, sizeof(*p->img));
	if (p->img == NULL ||
	    tb_order_entry.init(o, p->words * sizeof(uint64_t), seed, &p->wl)) {
		if (p->img != NULL)
			tb_err("order-entry (pwords): a %zu-byte database holds "
				"%llu words, a %llu-byte order-entry database",
				size, (unsigned long long)p->words,
				(unsigned long long)p->words * 8);
		free(p->img);
		free(p);
		return -1;
	}
	*out = p;
	return 0;
}

static void
poe_gather(struct poe *p, const struct pword *s)
{
	for (uint64_t k = 0; k < p->words; k++)
		p->img[k] = s[k].main;
	p->at = (struct pword *)s;
}

static void
poe_populate(void *wl, void *db)
{
	struct poe *p = wl;
	struct pword *s = db;
	tb_order_entry.populate(p->wl, p->img);
	for (uint64_t k = 0; k < p->words; k++)
		s[k].main = p->img[k];
	p->at = s;
}

/* The words [*lo, *hi) holding range r; false if it is not in the image. */
static bool
poe_words(const struct poe *p, const struct tb_range *r, uint64_t *lo,
	uint64_t *hi)
{
	uintptr_t a = (uintptr_t)r->addr, base = (uintptr_t)p->img;
	if (a < base || r->len > p->words * 8 - (a - base))
		return false;
	*lo = (a - base) / 8;
	*hi = (a - base + r->len + 7) / 8;
	return true;
}

static int
poe_begin(void *ctx)
{
	struct poe *p = ctx;
	p->n = 0;
	return pw_begin(p->c);
}

static int
poe_set_ranges(void *ctx, size_t n, const struct tb_range *r)
{
	struct poe *p = ctx;
	uint64_t lo = 0, hi = 0;
	for (size_t i = 0; i < n; i++) {
		if (p->n == POE_RANGES) {
			tb_err("order-entry (pwords): more than %d ranges in a "
				"transaction", POE_RANGES);
			return -1;
		}
		if (!poe_words(p, &r[i], &lo, &hi)) {
			tb_err("order-entry (pwords): range %p + %zu is not in "
				"the database", r[i].addr, r[i].len);
			return -1;
		}
		p->r[p->n++] = r[i];
	}
	return 0;
}

/* O4, and O3's refusal: the declared words of the image back to `main`. */
static int
poe_abort(void *ctx)
{
	struct poe *p = ctx;
	uint64_t lo = 0, hi = 0;
	for (size_t i = 0; i < p->n; i++) {
		poe_words(p, &p->r[i], &lo, &hi);
		for (uint64_t k = lo; k < hi; k++)
			p->img[k] = p->at[k].main;
	}
	p->n = 0;
	p->c->n = 0;
	return 0;
}

static int
poe_commit(void *ctx)
{
	struct poe *p = ctx;
	uint64_t lo = 0, hi = 0, changed = 0;
	/* O3: count first (ranges may overlap: a word counts per range, an
	 * upper bound). */
	for (size_t i = 0; i < p->n; i++) {
		poe_words(p, &p->r[i], &lo, &hi);
		for (uint64_t k = lo; k < hi; k++)
			changed += p->img[k] != p->at[k].main;
	}
	if (changed > PW_MAX_LOG) {
		poe_abort(p);
		tb_err("order-entry (pwords): a transaction of %llu words (at "
			"most %d); rolled back", (unsigned long long)changed,
			PW_MAX_LOG);
		return -1;
	}
	/* O2: every changed word through the design's store. */
	bool first = true;
	for (size_t i = 0; i < p->n; i++) {
		poe_words(p, &p->r[i], &lo, &hi);
		for (uint64_t k = lo; k < hi; k++) {
			if (p->img[k] == p->at[k].main)
				continue;
#ifdef TB_BROKEN_PWORD_RAW_TAIL
			/* Broken on purpose: after the first changed word,
			 * `main` is stored without back and seq, so recovery
			 * cannot undo the rest of an unfinished transaction. */
			if (!first) {
				PW_SET(p->at[k].main, p->img[k]);
				pw_flush(p->c, &p->at[k]);
				continue;
			}
#endif
			pw_store(p->c, &p->at[k], p->img[k]);
			first = false;
		}
	}
	(void)first;
	p->n = 0;
	return pw_commit(p->c);
}

/* The workload's backend: its transactions' ranges land here. */
static const struct tb_backend poe_words_backend = {
	.name = "pwords",
	.can_abort = true,
	.begin = poe_begin,
	.set_ranges = poe_set_ranges,
	.commit = poe_commit,
	.abort = poe_abort,
};

static int
poe_tx(void *wl, void *db, const struct tb_backend *b, void *ctx)
{
	(void)b;
	struct poe *p = wl;
	if (p->at != db)
		poe_gather(p, db); /* O1: the first transaction after an open */
	p->c = ctx;
	return tb_order_entry.tx(p->wl, p->img, &poe_words_backend, p);
}

static int
poe_check(void *wl, const void *db, char *why, size_t n)
{
	struct poe *p = wl;
	poe_gather(p, db);
	return tb_order_entry.check(p->wl, p->img, why, n);
}

static int
poe_recovered(void *wl, const void *db, uint64_t *committed, char *why,
	size_t n)
{
	struct poe *p = wl;
	poe_gather(p, db);
	return tb_order_entry.check_recovered(p->wl, p->img, committed, why,
		n);
}

static void
poe_fini(void *wl)
{
	struct poe *p = wl;
	tb_order_entry.fini(p->wl);
	free(p->img);
	free(p);
}

static const struct tb_workload pw_order_entry = {
	.name = "order-entry",
	.init = poe_init,
	.populate = poe_populate,
	.tx = poe_tx,
	.check = poe_check,
	.check_recovered = poe_recovered,
	.fini = poe_fini,
};

static const struct tb_workload *
pw_layout(const char *workload)
{
	return !strcmp(workload, "debit-credit") ? &pw_debit_credit :
		!strcmp(workload, "order-entry") ? &pw_order_entry : NULL;
}

const struct tb_backend tb_backend_trinity = {
	.name = "trinity",
	.setup = pw_setup,
	.teardown = pw_teardown,
	.open = trinity_open,
	.loaded = pw_loaded,
	.begin = pw_begin,
	.set_ranges = pw_no_ranges,
	.commit = pw_commit,
	.abort = pw_no_abort,
	.stats = pw_stats,
	.close = pw_close,
	.files = pw_files,
	.layout = pw_layout,
};

const struct tb_backend tb_backend_quadra = {
	.name = "quadra",
	.setup = pw_setup,
	.teardown = pw_teardown,
	.open = quadra_open,
	.loaded = pw_loaded,
	.begin = pw_begin,
	.set_ranges = pw_no_ranges,
	.commit = pw_commit,
	.abort = pw_no_abort,
	.stats = pw_stats,
	.close = pw_close,
	.files = pw_files,
	.layout = pw_layout,
};
