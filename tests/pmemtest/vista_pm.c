/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vista_pm.c -- libvista workloads for pmemtest (suite crash-pm)
 *
 *   vista_pm SCENARIO run DIR     create DIR/log, DIR/seg0 (DIR/seg1) and run
 *   vista_pm SCENARIO check DIR   recover (vista_init + vista_map) and
 *                                 check the scenario's invariant
 * and, for --check-lib, pm_check_SCENARIO(image, dir).
 *
 * Scenarios (each a few dozen transactions: every fence is a crash point):
 *   one_range     one set_range over two lines per transaction; a == b
 *   many_ranges   3 set_range calls, or one vista_set_ranges, moving value
 *                 between 16 counters on their own lines; the sum is fixed
 *   multi_segment a transfer between a counter in each of two segments
 *   heap          vista_malloc / vista_free in committed and aborted
 *                 transactions; the list in the root object is whole and
 *                 the heap's own check passes
 *   abort         garbage stored under set ranges, then aborted, between
 *                 committed updates; a == b
 *   abort_persisted  the same, the garbage made durable before the abort
 *                 (rio_persist: what an eviction of the lines can do at
 *                 any time, which pmemtest models at fences only); the
 *                 restored images must be durable before the truncation
 *   auto          VISTA_TX_AUTO: no set_range, stores on two pages; a == b
 *   auto_chain    the same as one chain of automatic transactions
 *                 (vista_chain_transaction), with aborted links and a page
 *                 touched once
 *   scattered     800 scattered 4- and 8-byte cells a transaction, in
 *                 four vista_set_ranges batches, so that the declared set
 *                 outgrows its flat array and is chunked (ranges.c); the
 *                 second of three transactions aborts; the cells' sum is
 *                 the stored total
 *   redo          redo mode (VISTA_MODE_REDO) on a 4 KiB ring: four
 *                 counters (sum fixed) and a 200-byte block that each
 *                 transaction fills with its number, so the ring wraps
 *                 and a checkpoint runs every six transactions; aborted
 *                 transactions between
 * (Debit-credit runs as tpcbench's own code: bench/tpcb_tpcc/tb_crash.c.)
 * $VPM_STOP_AT=N ends the writer (_exit) in the middle of transaction N:
 * a process crash, leaving recovery work for a traced `check`.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rio.h>
#include <vista.h>

#define EXPORT __attribute__((visibility("default")))
#define SEG0 ((void *)0x5a0000000000ull)
#define SEG1 ((void *)0x5b0000000000ull)
#define SEG_SIZE (256u * 1024)
#define LINE 64

#define FAIL(...)                                     \
	do {                                          \
		fprintf(stderr, __VA_ARGS__);         \
		fputc('\n', stderr);                  \
		return 1;                             \
	} while (0)
#define OK(call)                                                         \
	do {                                                             \
		int rc_ = (call);                                        \
		if (rc_) {                                               \
			fprintf(stderr, "%s: %s: %s\n", #call,           \
				vista_strerror(rc_), vista_errormsg());  \
			return 1;                                        \
		}                                                        \
	} while (0)

struct env {
	vista *v;
	vista_segment *s[2];
	uint8_t *b[2];
};

static void
maybe_stop(unsigned tx)
{
	const char *s = getenv("VPM_STOP_AT");
	if (s != NULL && (unsigned)atoi(s) == tx)
		_exit(0);
}

static int
open_env(const char *dir, int nseg, unsigned mode, struct env *e)
{
	char log[4096], seg[4096];
	struct vista_opts o = { .log_path = log, .log_size = 1u << 20,
		.lanes = 2, .mode = mode };
	void *addr[2] = { SEG0, SEG1 };

	snprintf(log, sizeof(log), "%s/log", dir);
	if (mode == VISTA_MODE_REDO)
		o.log_size = 4096 + 8192 + 4096; /* a 4 KiB ring */
	OK(vista_init(&o, &e->v));
	for (int i = 0; i < nseg; i++) {
		snprintf(seg, sizeof(seg), "%s/seg%d", dir, i);
		OK(vista_map(e->v, seg, addr[i], SEG_SIZE, VISTA_CREATE,
			&e->s[i]));
		e->b[i] = vista_segment_base(e->s[i]);
	}
	return 0;
}

/* ---- one_range, abort, auto: a and b, on different lines or pages ---- */

struct pair {
	uint64_t a;
	uint8_t pad[LINE - 8];
	uint64_t b;
};

static int
run_pair(struct env *e, bool with_abort, bool automatic, bool durable_garbage)
{
	struct pair *p = (struct pair *)e->b[0];
	uint64_t *b2 = (uint64_t *)(e->b[0] + 8192); /* another page */

	for (unsigned t = 1; t <= 12; t++) {
		if (with_abort && t % 3 == 0) {
			OK(vista_begin_transaction(e->v, 0));
			OK(vista_set_range(e->v, p, sizeof(*p)));
			p->a = 0xdead;
			p->b = 0xbeef;
			if (durable_garbage)
				rio_persist(vista_segment_pool(e->s[0]), p,
					sizeof(*p));
			OK(vista_abort_transaction(e->v));
		}
		OK(vista_begin_transaction(e->v, automatic ? VISTA_TX_AUTO : 0));
		if (automatic) {
			p->a++;
			maybe_stop(t);
			*b2 = p->a;
		} else {
			OK(vista_set_range(e->v, p, sizeof(*p)));
			p->a++;
			maybe_stop(t);
			p->b++;
		}
		OK(vista_end_transaction(e->v));
	}
	return 0;
}

/* auto_chain: pages stay open from one transaction to the next. */
static int
run_chain(struct env *e)
{
	struct pair *p = (struct pair *)e->b[0];
	uint64_t *b2 = (uint64_t *)(e->b[0] + 8192); /* another page */
	uint64_t *once = (uint64_t *)(e->b[0] + 16384);

	OK(vista_begin_transaction(e->v, VISTA_TX_AUTO));
	for (unsigned t = 1; t <= 12; t++) {
		p->a++;
		maybe_stop(t);
		*b2 = p->a;
		if (t == 3)
			*once = t; /* kept once, then protected again */
		if (t % 5 == 0) {
			OK(vista_abort_transaction(e->v));
			OK(vista_begin_transaction(e->v, VISTA_TX_AUTO));
			continue;
		}
		if (t == 12)
			OK(vista_end_transaction(e->v));
		else
			OK(vista_chain_transaction(e->v));
	}
	return 0;
}

static int
check_pair(struct env *e, bool automatic)
{
	struct pair *p = (struct pair *)e->b[0];
	uint64_t b = automatic ? *(uint64_t *)(e->b[0] + 8192) : p->b;

	if (p->a != b || p->a > 12)
		FAIL("pair: a = %llu, b = %llu", (unsigned long long)p->a,
			(unsigned long long)b);
	return 0;
}

/* ---- many_ranges: 16 counters, sum 1600 ---- */

struct counters {
	struct {
		uint64_t v;
		uint8_t pad[LINE - 8];
	} c[16];
};

static int
run_many(struct env *e)
{
	struct counters *c = (struct counters *)e->b[0];

	OK(vista_begin_transaction(e->v, 0));
	OK(vista_set_range(e->v, c, sizeof(*c)));
	for (int i = 0; i < 16; i++)
		c->c[i].v = 100;
	OK(vista_end_transaction(e->v));
	for (unsigned t = 1; t <= 16; t++) {
		unsigned x = (t * 5) % 16, y = (t * 7 + 1) % 16,
			 z = (t * 11 + 2) % 16;
		OK(vista_begin_transaction(e->v, 0));
		if (t % 2) {
			OK(vista_set_range(e->v, &c->c[x].v, 8));
			OK(vista_set_range(e->v, &c->c[y].v, 8));
			OK(vista_set_range(e->v, &c->c[z].v, 8));
		} else {
			struct vista_range r[3] = { { &c->c[x].v, 8 },
				{ &c->c[y].v, 8 }, { &c->c[z].v, 8 } };
			OK(vista_set_ranges(e->v, 3, r));
		}
		c->c[x].v -= 3;
		maybe_stop(t);
		c->c[y].v += 2;
		c->c[z].v += 1;
		OK(vista_end_transaction(e->v));
	}
	return 0;
}

static int
check_many(struct env *e)
{
	struct counters *c = (struct counters *)e->b[0];
	uint64_t sum = 0;

	for (int i = 0; i < 16; i++)
		sum += c->c[i].v;
	if (sum != 1600 && sum != 0)
		FAIL("many_ranges: sum %llu", (unsigned long long)sum);
	return 0;
}

/* ---- scattered: 800 cells a transaction, the set chunked ---- */

#define SC_SLOTS 16384 /* 8-byte slots, a 4-byte cell at the start of each */
#define SC_BATCH 200
#define SC_BATCHES 4   /* the fourth batch finds 600 declared: chunked */

struct scattered {
	uint64_t sum;
	uint8_t pad[LINE - 8];
	uint32_t slot[2 * SC_SLOTS];
};

static int
run_scattered(struct env *e)
{
	struct scattered *s = (struct scattered *)e->b[0];
	struct vista_range r[SC_BATCH];
	uint64_t x = 0x9e3779b97f4a7c15ull;

	for (unsigned t = 1; t <= 3; t++) {
		uint64_t add = 0;
		OK(vista_begin_transaction(e->v, 0));
		for (int b = 0; b < SC_BATCHES; b++) {
			for (int i = 0; i < SC_BATCH; i++) {
				x ^= x << 13, x ^= x >> 7, x ^= x << 17;
				/* one in eight declares its whole slot, which
				 * touches the next slot's cell: they merge */
				r[i].addr = &s->slot[2 * (x % SC_SLOTS)];
				r[i].len = (x >> 32) % 8 == 0 ? 8 : 4;
			}
			OK(vista_set_ranges(e->v, SC_BATCH, r));
			for (int i = 0; i < SC_BATCH; i++) {
				*(uint32_t *)r[i].addr += t;
				add += t;
			}
		}
		OK(vista_set_range(e->v, &s->sum, 8));
		s->sum += add;
		maybe_stop(t);
		if (t == 2)
			OK(vista_abort_transaction(e->v));
		else
			OK(vista_end_transaction(e->v));
	}
	return 0;
}

static int
check_scattered(struct env *e)
{
	struct scattered *s = (struct scattered *)e->b[0];
	uint64_t sum = 0;

	for (int k = 0; k < SC_SLOTS; k++)
		sum += s->slot[2 * k];
	if (sum != s->sum)
		FAIL("scattered: cells sum to %llu, the total says %llu",
			(unsigned long long)sum, (unsigned long long)s->sum);
	return 0;
}

/* ---- redo: counters and a block, in redo mode ---- */

#define BLOCK_OFF 4096
#define BLOCK_LEN 200

static int
run_redo(struct env *e)
{
	struct counters *c = (struct counters *)e->b[0];
	uint8_t *blk = e->b[0] + BLOCK_OFF;
	struct vista_range init[4];

	/* Four counters: few dirty lines at a checkpoint, few images. */
	for (int i = 0; i < 4; i++)
		init[i] = (struct vista_range){ &c->c[i].v, 8 };
	OK(vista_begin_transaction(e->v, 0));
	OK(vista_set_ranges(e->v, 4, init));
	for (int i = 0; i < 4; i++)
		c->c[i].v = 100;
	OK(vista_end_transaction(e->v));
	for (unsigned t = 1; t <= 16; t++) {
		unsigned x = t % 4, y = (t * 3 + 1) % 4;
		struct vista_range r[3] = { { &c->c[x].v, 8 },
			{ &c->c[y].v, 8 }, { blk, BLOCK_LEN } };
		OK(vista_begin_transaction(e->v, 0));
		OK(vista_set_ranges(e->v, 3, r));
		c->c[x].v -= 3;
		maybe_stop(t);
		c->c[y].v += 3;
		memset(blk, (int)t, BLOCK_LEN);
		if (t % 4 == 2)
			OK(vista_abort_transaction(e->v));
		else
			OK(vista_end_transaction(e->v));
	}
	return 0;
}

static int
check_redo(struct env *e)
{
	const struct counters *c = (const struct counters *)e->b[0];
	const uint8_t *blk = e->b[0] + BLOCK_OFF;
	uint64_t sum = 0;

	for (int i = 1; i < BLOCK_LEN; i++)
		if (blk[i] != blk[0])
			FAIL("redo: block byte %d is %u, byte 0 is %u", i,
				blk[i], blk[0]);
	if (blk[0] % 4 == 2)
		FAIL("redo: the block holds aborted transaction %u", blk[0]);
	for (int i = 0; i < 4; i++)
		sum += c->c[i].v;
	if (sum != 400 && sum != 0)
		FAIL("redo: sum %llu", (unsigned long long)sum);
	return 0;
}

/* ---- multi_segment ---- */

static int
run_multi(struct env *e)
{
	uint64_t *a = (uint64_t *)e->b[0], *b = (uint64_t *)e->b[1];

	OK(vista_begin_transaction(e->v, 0));
	OK(vista_set_range(e->v, a, 8));
	*a = 1000;
	OK(vista_end_transaction(e->v));
	for (unsigned t = 1; t <= 12; t++) {
		OK(vista_begin_transaction(e->v, 0));
		OK(vista_set_range(e->v, a, 8));
		OK(vista_set_range(e->v, b, 8));
		*a -= t;
		maybe_stop(t);
		*b += t;
		OK(vista_end_transaction(e->v));
	}
	return 0;
}

static int
check_multi(struct env *e)
{
	uint64_t a = *(uint64_t *)e->b[0], b = *(uint64_t *)e->b[1];

	if (a + b != 1000 && !(a == 0 && b == 0))
		FAIL("multi_segment: %llu + %llu", (unsigned long long)a,
			(unsigned long long)b);
	return 0;
}

/* ---- heap ---- */

#define NODE_MAGIC 0x6e6f6465u
struct node {
	uint32_t magic;
	uint32_t id;
	struct node *next;
	uint8_t body[100];
};
struct hroot {
	struct node *head;
	uint64_t count;
	uint64_t next_id;
};

static int
run_heap(struct env *e)
{
	struct hroot *r;

	OK(vista_root(e->s[0], sizeof(*r), (void **)&r));
	for (unsigned t = 1; t <= 16; t++) {
		struct node *n;
		OK(vista_begin_transaction(e->v, 0));
		if (t % 4 == 0 && r->head != NULL) {
			struct node *old = r->head;
			OK(vista_set_range(e->v, r, sizeof(*r)));
			r->head = old->next;
			r->count--;
			OK(vista_free(e->s[0], old));
		} else {
			OK(vista_malloc(e->s[0], sizeof(*n), (void **)&n));
			OK(vista_set_range(e->v, n, sizeof(*n)));
			n->magic = NODE_MAGIC;
			n->id = (uint32_t)r->next_id;
			memset(n->body, (int)t, sizeof(n->body));
			OK(vista_set_range(e->v, r, sizeof(*r)));
			n->next = r->head;
			r->head = n;
			r->count++;
			r->next_id++;
		}
		maybe_stop(t);
		if (t % 3 == 0)
			OK(vista_abort_transaction(e->v)); /* undo malloc/free */
		else
			OK(vista_end_transaction(e->v));
	}
	return 0;
}

static int
check_heap(struct env *e)
{
	struct hroot *r;
	uint64_t n = 0;

	OK(vista_root(e->s[0], sizeof(*r), (void **)&r));
	for (struct node *x = r->head; x != NULL; x = x->next) {
		if ((uint8_t *)x < e->b[0] ||
		    (uint8_t *)x >= e->b[0] + vista_segment_size(e->s[0]))
			FAIL("heap: node pointer %p outside the segment",
				(void *)x);
		if (x->magic != NODE_MAGIC || ++n > r->count)
			FAIL("heap: list broken at node %llu",
				(unsigned long long)n);
	}
	if (n != r->count)
		FAIL("heap: %llu nodes, count says %llu",
			(unsigned long long)n, (unsigned long long)r->count);
	OK(vista_heap_check(e->s[0], NULL));
	return 0;
}

/* ---- dispatch ---- */

struct scenario {
	const char *name;
	int nseg;
	unsigned mode;
	int (*run)(struct env *e);
	int (*check)(struct env *e);
};

static int run_one(struct env *e) { return run_pair(e, false, false, false); }
static int run_abort(struct env *e) { return run_pair(e, true, false, false); }
static int
run_abort_persisted(struct env *e)
{
	return run_pair(e, true, false, true);
}
static int run_auto(struct env *e) { return run_pair(e, false, true, false); }
static int check_one(struct env *e) { return check_pair(e, false); }
static int check_auto(struct env *e) { return check_pair(e, true); }

static const struct scenario scenarios[] = {
	{ "one_range", 1, 0, run_one, check_one },
	{ "many_ranges", 1, 0, run_many, check_many },
	{ "multi_segment", 2, 0, run_multi, check_multi },
	{ "heap", 1, 0, run_heap, check_heap },
	{ "abort", 1, 0, run_abort, check_one },
	{ "abort_persisted", 1, 0, run_abort_persisted, check_one },
	{ "auto", 1, 0, run_auto, check_auto },
	{ "auto_chain", 1, 0, run_chain, check_auto },
	{ "redo", 1, VISTA_MODE_REDO, run_redo, check_redo },
	{ "scattered", 1, 0, run_scattered, check_scattered },
};

static const struct scenario *
find(const char *name)
{
	for (size_t i = 0; i < sizeof(scenarios) / sizeof(scenarios[0]); i++)
		if (strcmp(scenarios[i].name, name) == 0)
			return &scenarios[i];
	return NULL;
}

static int
check(const struct scenario *sc, const char *dir)
{
	struct env e = { 0 };
	int rc;

	/* What the application does at every start: map with VISTA_CREATE
	 * (a crash before or during creation is finished here). */
	rc = open_env(dir, sc->nseg, sc->mode, &e);
	if (rc == 0)
		rc = sc->check(&e);
	if (e.v != NULL && vista_fini(e.v) != 0 && rc == 0)
		FAIL("vista_fini: %s", vista_errormsg());
	return rc;
}

#define CHECKER(name)                                                    \
	EXPORT int pm_check_##name(const char *image, const char *dir);  \
	EXPORT int pm_check_##name(const char *image, const char *dir)   \
	{                                                                \
		(void)image;                                             \
		return check(find(#name), dir);                          \
	}
CHECKER(one_range)
CHECKER(many_ranges)
CHECKER(multi_segment)
CHECKER(heap)
CHECKER(abort)
CHECKER(abort_persisted)
CHECKER(auto)
CHECKER(auto_chain)
CHECKER(redo)
CHECKER(scattered)

#ifndef VPM_MODULE
int
main(int argc, char **argv)
{
	const struct scenario *sc = argc == 4 ? find(argv[1]) : NULL;
	struct env e = { 0 };
	char path[4096];
	int rc;

	if (sc == NULL || (strcmp(argv[2], "run") && strcmp(argv[2], "check"))) {
		fprintf(stderr, "usage: %s SCENARIO run|check DIR\n", argv[0]);
		return 2;
	}
	if (strcmp(argv[2], "check") == 0)
		return check(sc, argv[3]) ? 1 : 0;
	snprintf(path, sizeof(path), "%s/log", argv[3]);
	unlink(path);
	for (int i = 0; i < 2; i++) {
		snprintf(path, sizeof(path), "%s/seg%d", argv[3], i);
		unlink(path);
	}
	rc = open_env(argv[3], sc->nseg, sc->mode, &e);
	if (rc == 0)
		rc = sc->run(&e);
	if (e.v != NULL && vista_fini(e.v) != 0)
		rc = 1;
	return rc ? 1 : 0;
}
#endif
