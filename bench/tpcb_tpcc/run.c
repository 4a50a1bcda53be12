/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * run.c -- one configuration: build the databases, run, check, record
 *
 * Design:
 *  1. One process runs one (workload, backend, domain, group, tx size,
 *     threads) configuration, so its RSS is its own and the backend's
 *     environment (PMDK's) is set before anything loads.
 *  2. Each stream gets its own database (backend open + workload
 *     populate + backend loaded); the R runs continue on the same
 *     databases, so the later runs are in steady state (RVM's truncations
 *     included).  Streams run as threads started together; a run's wall
 *     time is from the common start to the last stream's end.
 *  3. After every run each stream's invariants are checked (untimed); a
 *     violation prints why and exits 2.  At the end the databases are
 *     closed, reopened through the backend's recovery path and checked
 *     again (durability), unless the backend is "none".
 *  4. A run appends one CSV row (report.c's columns) to the row file.
 *  5. --per-range gives the workloads a copy of the backend whose
 *     set_ranges declares one range per call, as the thesis' benchmarks
 *     called vista_set_range once per range.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tpcbench.h"
#include "tpcbench_int.h"
#include "tb_replica.h"

struct stream {
	int idx;
	void *ctx, *db, *wl;
	const struct tb_backend *b;
	const struct tb_workload *w;
	const struct tb_opts *o;
	uint64_t start, deadline, end;
	uint64_t tx, aborts;
	int failed;
	pthread_t th;
};

static void *
stream_run(void *arg)
{
	struct stream *s = arg;
	const struct tb_workload *w = s->w;
	const struct tb_backend *b = s->b;
	uint64_t limit = s->o->ntx ? s->o->ntx : UINT64_MAX;
	uint64_t tx = 0, aborts = 0, now = tb_now_ns();
	while (tx < limit) {
		int rc = w->tx(s->wl, s->db, b, s->ctx);
		if (rc < 0) {
			s->failed = 1;
			break;
		}
		aborts += (uint64_t)rc;
		tx++;
		if (!s->o->ntx && (tx & 15) == 0 && (now = tb_now_ns()) >= s->deadline)
			break;
	}
	s->end = tb_now_ns();
	s->tx = tx;
	s->aborts = aborts;
	return NULL;
}

static int
check_all(struct stream *st, int n, const char *when)
{
	char why[512];
	for (int i = 0; i < n; i++)
		if (st[i].w->check(st[i].wl, st[i].db, why, sizeof(why))) {
			fprintf(stderr, "tpcbench: INVARIANT VIOLATED (%s, %s, "
				"stream %d, %s): %s\n", st[i].w->name,
				st[i].b->name, i, when, why);
			return -1;
		}
	return 0;
}

static void
sum_stats(struct stream *st, int n, struct tb_bstats *out)
{
	*out = (struct tb_bstats){ 0 };
	for (int i = 0; i < n; i++) {
		struct tb_bstats s;
		st[i].b->stats(st[i].ctx, &s);
		out->has_fences |= s.has_fences;
		out->has_log |= s.has_log;
		out->has_syncs |= s.has_syncs;
		out->fences += s.fences;
		out->flushes += s.flushes;
		out->bytes_logged += s.bytes_logged;
		out->syncs += s.syncs;
		out->log_writes += s.log_writes;
		out->truncations += s.truncations;
		out->has_repl |= s.has_repl;
		out->repl_records += s.repl_records;
		out->repl_data += s.repl_data;
		out->repl_undo += s.repl_undo;
		out->repl_meta += s.repl_meta;
		out->repl_sent += s.repl_sent;
		for (unsigned k = 0; k < TB_LAT_BUCKETS; k++)
			out->lat[k] += s.lat[k];
	}
}

static uint64_t
footprint(struct stream *st, int n, uint64_t anon)
{
	uint64_t m = anon;
	for (int i = 0; i < n; i++) {
		const char *paths[TB_MAX_FILES];
		int k = st[i].b->files(st[i].ctx, paths, TB_MAX_FILES);
		for (int j = 0; j < k; j++)
			m += tb_cached(paths[j]);
	}
	return m;
}

static int
open_all(struct stream *st, int n, bool create)
{
	for (int i = 0; i < n; i++) {
		if (st[i].b->open(st[i].o, i, create, &st[i].ctx, &st[i].db))
			return -1;
		if (create) {
			st[i].w->populate(st[i].wl, st[i].db);
			if (st[i].b->loaded(st[i].ctx))
				return -1;
		}
	}
	return 0;
}

static int
close_all(struct stream *st, int n)
{
	int rc = 0;
	for (int i = 0; i < n; i++)
		if (st[i].ctx && st[i].b->close(st[i].ctx))
			rc = -1;
	for (int i = 0; i < n; i++)
		st[i].ctx = NULL;
	return rc;
}

static int (*batch_set_ranges)(void *, size_t, const struct tb_range *);

static int
one_by_one(void *ctx, size_t n, const struct tb_range *r)
{
	for (size_t i = 0; i < n; i++)
		if (batch_set_ranges(ctx, 1, &r[i]))
			return -1;
	return 0;
}

int
tb_run_config(const struct tb_opts *o, const struct tb_backend *b,
	const struct tb_workload *w, const struct tb_row *proto, FILE *rows)
{
	static struct tb_backend per_range;
	if (o->per_range) {
		per_range = *b;
		batch_set_ranges = b->set_ranges;
		per_range.set_ranges = one_by_one;
		b = &per_range;
	}
	int n = o->threads;
	struct stream st[TB_MAX_STREAMS];
	memset(st, 0, sizeof(st));
	int rc = 2;
	if (b->setup && b->setup(o))
		return 2;
	for (int i = 0; i < n; i++) {
		st[i] = (struct stream){ .idx = i, .b = b, .w = w, .o = o };
		if (w->init(o, o->db_size, o->seed + 0x1000193ull * (uint64_t)i,
			    &st[i].wl))
			goto out;
	}
	if (open_all(st, n, true) || check_all(st, n, "after population"))
		goto out;

	for (int r = 0; r < o->runs; r++) {
		static struct tb_bstats s0, s1;
		sum_stats(st, n, &s0);
		uint64_t start = tb_now_ns();
		uint64_t deadline = start + (uint64_t)(o->seconds * 1e9);
		for (int i = 0; i < n; i++) {
			st[i].start = start;
			st[i].deadline = deadline;
		}
		if (n == 1) {
			stream_run(&st[0]);
		} else {
			for (int i = 0; i < n; i++)
				pthread_create(&st[i].th, NULL, stream_run, &st[i]);
			for (int i = 0; i < n; i++)
				pthread_join(st[i].th, NULL);
		}
		uint64_t end = start, tx = 0, aborts = 0;
		int failed = 0;
		for (int i = 0; i < n; i++) {
			end = st[i].end > end ? st[i].end : end;
			tx += st[i].tx;
			aborts += st[i].aborts;
			failed |= st[i].failed;
		}
		if (failed) {
			tb_err("%s on %s: a transaction failed (above)", w->name,
				b->name);
			goto out;
		}
		sum_stats(st, n, &s1);
		if (check_all(st, n, "after a run"))
			goto out;
		struct tb_row row = *proto;
		row.run = r + 1;
		row.tx = tx;
		row.aborts = aborts;
		row.seconds = (double)(end - start) / 1e9;
		row.has_fences = s1.has_fences;
		row.has_log = s1.has_log;
		row.has_syncs = s1.has_syncs;
		row.fences = s1.fences - s0.fences;
		row.flushes = s1.flushes - s0.flushes;
		row.bytes_logged = s1.bytes_logged - s0.bytes_logged;
		row.syncs = s1.syncs - s0.syncs;
		row.log_writes = s1.log_writes - s0.log_writes;
		row.truncations = s1.truncations - s0.truncations;
		row.has_repl = s1.has_repl;
		if (s1.has_repl) {
			/* This run's bytes sent and commit latencies. */
			row.sent_data = s1.repl_data - s0.repl_data;
			row.sent_undo = s1.repl_undo - s0.repl_undo;
			row.sent_meta = s1.repl_meta - s0.repl_meta;
			row.sent_total = s1.repl_sent - s0.repl_sent;
			for (unsigned k = 0; k < TB_LAT_BUCKETS; k++)
				s1.lat[k] -= s0.lat[k];
			row.lat_med_us = tb_lat_quantile(s1.lat, 0.5) / 1e3;
			row.lat_p99_us = tb_lat_quantile(s1.lat, 0.99) / 1e3;
		}
		uint64_t anon;
		tb_rss(&row.rss, &anon);
		row.mem = footprint(st, n, anon);
		tb_row_write(rows, &row);
		if (!o->quiet)
			fprintf(stderr, "  %-14s %-44s run %d: %10.0f tx/s "
				"(%llu tx in %.2f s)\n", w->name, row.label, r + 1,
				(double)tx / row.seconds, (unsigned long long)tx,
				row.seconds);
	}

	if (!o->no_reopen && strcmp(b->name, "none")) {
		/* Durability: close, reopen through recovery, check again. */
		if (close_all(st, n) || (b->teardown && b->teardown(false)) ||
		    (b->setup && b->setup(o)) || open_all(st, n, false) ||
		    check_all(st, n, "after reopening"))
			goto out;
	}
	rc = 0;
out:
	if (close_all(st, n))
		rc = 2;
	for (int i = 0; i < n; i++)
		if (st[i].wl)
			w->fini(st[i].wl);
	if (b->teardown && b->teardown(true))
		rc = 2;
	return rc;
}
