/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wl_synthetic.c -- the synthetic benchmark: one random location per
 * transaction
 *
 * Each transaction declares one range of --tx-size bytes at a random
 * 8-byte-aligned offset of the database and adds the same random value to
 * every 8-byte word in it.  Overhead per transaction of a backend is its
 * time per transaction minus that of "none" (thesis section 3.5.1).
 *
 * Invariant checked after every run: the words of the database sum
 * (mod 2^64) to the running total of value x words over the committed
 * transactions.
 */
#include <stdio.h>
#include <stdlib.h>

#include "tpcbench.h"

struct syn {
	size_t size, tx;
	uint64_t rng;
	uint64_t total;
};

static int
syn_init(const struct tb_opts *o, size_t size, uint64_t seed, void **out)
{
	size_t tx = o->tx_size ? o->tx_size : 8;
	if (tx % 8 || tx > size) {
		tb_err("synthetic: --tx-size %zu must be a multiple of 8 and at "
			"most the database", tx);
		return -1;
	}
	struct syn *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -1;
	w->size = size / 8 * 8;
	w->tx = tx;
	w->rng = seed;
	*out = w;
	return 0;
}

static void
syn_populate(void *wl, void *db)
{
	(void)wl;
	(void)db; /* the database starts zeroed */
}

static int
syn_tx(void *wl, void *db, const struct tb_backend *b, void *ctx)
{
	struct syn *w = wl;
	uint64_t words = (w->size - w->tx) / 8 + 1;
	uint64_t *p = (uint64_t *)db + tb_below(&w->rng, words);
	uint64_t v = tb_rand(&w->rng) | 1;
	struct tb_range r = { p, w->tx };
	if (b->begin(ctx) || b->set_ranges(ctx, 1, &r))
		return -1;
	size_t n = w->tx / 8;
	for (size_t i = 0; i < n; i++)
		p[i] += v;
	if (b->commit(ctx))
		return -1;
	w->total += v * n;
	return 0;
}

static int
syn_check(void *wl, const void *db, char *why, size_t n)
{
	const struct syn *w = wl;
	const uint64_t *p = db;
	uint64_t sum = 0;
	for (size_t i = 0; i < w->size / 8; i++)
		sum += p[i];
	if (sum != w->total) {
		snprintf(why, n, "database words sum to %llu, committed "
			"transactions added %llu", (unsigned long long)sum,
			(unsigned long long)w->total);
		return -1;
	}
	return 0;
}

static void
syn_fini(void *wl)
{
	free(wl);
}

const struct tb_workload tb_synthetic = {
	.name = "synthetic",
	.init = syn_init,
	.populate = syn_populate,
	.tx = syn_tx,
	.check = syn_check,
	.fini = syn_fini,
};
