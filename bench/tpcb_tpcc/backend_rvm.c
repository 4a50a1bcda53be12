/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend_rvm.c -- the RVM baseline, on disk ("rvm") and on the Rio file
 * cache ("rvm-rio")
 *
 * Design:
 *  1. Written against rvm.h only (RVM 1.3's interface), so the real RVM
 *     could be linked instead of the baseline.
 *  2. Configuration as in the thesis: one log whose record area is 10% of
 *     the database, truncated when it is full; every transaction begins in
 *     restore mode; commits are flush mode, or -- group commit of G --
 *     G-1 no_flush commits followed by one flush commit, which writes all
 *     G records with one write and one fdatasync.
 *  3. Each stream maps its own data file; the streams share the one log,
 *     as RVM's threads do.
 *  4. rvm-rio runs the same code with its files in the Rio file cache.
 *     Until the file cache is available it runs on tmpfs and is labelled
 *     so in every output (tb_rvm_rio_label); the RVM library's file access
 *     is all in rvm/io.c, the one place to switch.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rvm.h"
#include "tpcbench.h"

const char *const tb_rvm_rio_label = "rvm-tmpfs (file cache not yet available)";

static struct {
	char dir[4096];
	char log[4200];
	int group;
	size_t db_size;
	uint64_t log_size;
	int streams;
} R;

struct rvm_ctx {
	rvm_region_t region;
	rvm_tid_t tid;
	char path[4200];
	uint64_t commits;
	int stream;
};

static int
fail(const char *what, rvm_return_t rc)
{
	tb_err("rvm: %s: %s: %s", what, rvm_return(rc), rvm_errormsg());
	return -1;
}

static int
setup_in(const struct tb_opts *o, const char *base)
{
	if (tb_workdir(R.dir, sizeof(R.dir), base))
		return -1;
	snprintf(R.log, sizeof(R.log), "%s/log", R.dir);
	R.group = o->group > 0 ? o->group : 1;
	long page = sysconf(_SC_PAGESIZE);
	R.db_size = (o->db_size + (size_t)page - 1) / (size_t)page * (size_t)page;
	R.streams = o->threads;
	rvm_options_t opt;
	rvm_init_options(&opt);
	opt.log_dev = R.log;
	opt.truncate = 100; /* truncate when the next write does not fit */
	opt.create_log_file = rvm_true;
	uint64_t log = R.db_size * (uint64_t)R.streams / 10;
	log = log < 64 * 1024 ? 64 * 1024 : (log + 7) & ~7ull;
	opt.create_log_size = RVM_MK_OFFSET(0, log);
	R.log_size = log;
	rvm_return_t rc = RVM_INIT(&opt);
	return rc ? fail("rvm_initialize", rc) : 0;
}

static int
rvm_setup_disk(const struct tb_opts *o)
{
	return setup_in(o, o->rvm_dir);
}

static int
rvm_setup_rio(const struct tb_opts *o)
{
	return setup_in(o, o->rio_dir);
}

static int
rvm_teardown(bool remove)
{
	rvm_return_t rc = rvm_terminate();
	if (remove)
		tb_rmtree(R.dir);
	return rc ? fail("rvm_terminate", rc) : 0;
}

static int
rvm_open(const struct tb_opts *o, int stream, bool create, void **ctx,
	void **db)
{
	(void)o;
	(void)create; /* the data file is the database either way */
	struct rvm_ctx *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -1;
	snprintf(c->path, sizeof(c->path), "%s/data.%d", R.dir, stream);
	rvm_init_region(&c->region);
	c->region.data_dev = c->path;
	c->region.length = R.db_size;
	rvm_init_tid(&c->tid);
	c->stream = stream;
	rvm_return_t rc = rvm_map(&c->region, NULL);
	if (rc) {
		free(c);
		return fail("rvm_map", rc);
	}
	*ctx = c;
	*db = c->region.vmaddr;
	return 0;
}

/* The populated database goes to the data file through RVM itself:
 * no_restore transactions of 1 MiB, then a flush and a truncation. */
static int
rvm_loaded(void *ctx)
{
	struct rvm_ctx *c = ctx;
	/* Records well inside the log (it is 10% of the database). */
	size_t chunk = R.log_size / 4 < (1 << 20) ? R.log_size / 4 : 1 << 20;
	chunk &= ~(size_t)4095;
	for (size_t off = 0; off < R.db_size; off += chunk) {
		size_t n = R.db_size - off < chunk ? R.db_size - off : chunk;
		rvm_return_t rc = rvm_begin_transaction(&c->tid, no_restore);
		if (rc == RVM_SUCCESS)
			rc = rvm_set_range(&c->tid, c->region.vmaddr + off, n);
		if (rc == RVM_SUCCESS)
			rc = rvm_end_transaction(&c->tid, no_flush);
		if (rc)
			return fail("loading the database", rc);
	}
	rvm_return_t rc = rvm_truncate();
	return rc ? fail("rvm_truncate", rc) : 0;
}

static int
rvm_begin(void *ctx)
{
	struct rvm_ctx *c = ctx;
	rvm_return_t rc = rvm_begin_transaction(&c->tid, restore);
	return rc ? fail("rvm_begin_transaction", rc) : 0;
}

static int
rvm_ranges(void *ctx, size_t n, const struct tb_range *r)
{
	struct rvm_ctx *c = ctx;
	for (size_t i = 0; i < n; i++) {
		rvm_return_t rc = rvm_set_range(&c->tid, r[i].addr, r[i].len);
		if (rc)
			return fail("rvm_set_range", rc);
	}
	return 0;
}

static int
rvm_commit(void *ctx)
{
	struct rvm_ctx *c = ctx;
	rvm_mode_t mode = ++c->commits % (uint64_t)R.group == 0 ? flush :
		no_flush;
	rvm_return_t rc = rvm_end_transaction(&c->tid, mode);
	return rc ? fail("rvm_end_transaction", rc) : 0;
}

static int
rvm_abort(void *ctx)
{
	struct rvm_ctx *c = ctx;
#ifndef TB_BROKEN_NO_ABORT
	rvm_return_t rc = rvm_abort_transaction(&c->tid);
#else
	/* Broken on purpose (bench-smoke proves the invariant checks catch
	 * it): an "abort" that keeps the transaction's stores. */
	rvm_return_t rc = rvm_end_transaction(&c->tid, no_flush);
#endif
	return rc ? fail("rvm_abort_transaction", rc) : 0;
}

static void
rvm_stats(void *ctx, struct tb_bstats *out)
{
	struct rvm_ctx *c = ctx;
	*out = (struct tb_bstats){ 0 };
	rvm_statistics_t s;
	if (c->stream != 0 || rvm_statistics(RVM_STATISTICS_VERSION, &s))
		return; /* one log: stream 0 reports it */
	out->has_log = out->has_syncs = true;
	out->bytes_logged = s.bytes_logged;
	out->syncs = s.n_syncs;
	out->log_writes = s.n_flush;
	out->truncations = s.n_truncation;
}

static int
rvm_close(void *ctx)
{
	struct rvm_ctx *c = ctx;
	rvm_return_t rc = rvm_unmap(&c->region);
	free(c);
	return rc ? fail("rvm_unmap", rc) : 0;
}

static int
rvm_files(void *ctx, const char **paths, int max)
{
	struct rvm_ctx *c = ctx;
	int n = 0;
	if (max > n)
		paths[n++] = c->path;
	if (c->stream == 0 && max > n)
		paths[n++] = R.log;
	return n;
}

/* rvm and rvm-rio differ only in where their files are. */
#define RVM_BACKEND(NAME, SETUP)                                        \
	{                                                               \
		.name = NAME, .can_abort = true, .setup = SETUP,        \
		.teardown = rvm_teardown, .open = rvm_open,             \
		.loaded = rvm_loaded, .begin = rvm_begin,               \
		.set_ranges = rvm_ranges, .commit = rvm_commit,         \
		.abort = rvm_abort, .stats = rvm_stats,                 \
		.close = rvm_close, .files = rvm_files,                 \
	}

const struct tb_backend tb_backend_rvm = RVM_BACKEND("rvm", rvm_setup_disk);
const struct tb_backend tb_backend_rvm_rio =
	RVM_BACKEND("rvm-rio", rvm_setup_rio);
