/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend_pmemobj.c -- PMDK libpmemobj transactions, the peer a user
 * would pick today
 *
 * Design:
 *  1. The database is the pool's root object; a transaction is
 *     pmemobj_tx_begin, pmemobj_tx_add_range_direct per range (PMDK
 *     snapshots the range into its undo log), stores in place, and
 *     pmemobj_tx_commit + pmemobj_tx_end (PMDK flushes the ranges, then
 *     discards the log).  A range the workload inserts (tb_range.fresh)
 *     goes to pmemobj_tx_xadd_range_direct with POBJ_XADD_NO_SNAPSHOT:
 *     no snapshot, flushed at commit -- what vista_set_ranges_new does
 *     for vista, so both get the same ranges for free.
 *  2. The pool lives on the same file system as vista's (--pmem-dir,
 *     /dev/shm).  The persistence domain is PMDK's own choice, steered by
 *     its environment variables, which must be set before libpmem
 *     initializes: tpcbench re-executes itself with them (tpcbench.c):
 *       byte       PMEM_IS_PMEM_FORCE=1 PMEM_NO_FLUSH=1 (fences, no flushes)
 *       cacheline  PMEM_IS_PMEM_FORCE=1 (clwb/clflushopt + sfence)
 *       page       PMEM_IS_PMEM_FORCE=0 (msync)
 */
#include <errno.h>
#include <libpmemobj.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tpcbench.h"

#define LAYOUT "tpcbench"

struct pobj_ctx {
	PMEMobjpool *pop;
	void *db;
	size_t size;
	char path[4200];
};

static char dir[4096];

static int
pobj_setup(const struct tb_opts *o)
{
	return tb_workdir(o, dir, sizeof(dir), o->pmem_dir);
}

static int
pobj_teardown(bool remove)
{
	if (remove)
		tb_rmtree(dir);
	return 0;
}

static int
pobj_open(const struct tb_opts *o, int stream, bool create, void **ctx,
	void **db)
{
	struct pobj_ctx *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -1;
	snprintf(c->path, sizeof(c->path), "%s/pool.%d", dir, stream);
	c->size = o->db_size;
	/* Heap metadata, lanes and undo logs: PMDK needs room beside the
	 * root object. */
	size_t pool = c->size + c->size / 16 + (32u << 20);
	if (create)
		c->pop = pmemobj_create(c->path, LAYOUT, pool, 0600);
	else
		c->pop = pmemobj_open(c->path, LAYOUT);
	if (c->pop == NULL) {
		tb_err("pmemobj: %s %s: %s", create ? "create" : "open",
			c->path, pmemobj_errormsg());
		free(c);
		return -1;
	}
	PMEMoid root = pmemobj_root(c->pop, c->size);
	if (OID_IS_NULL(root)) {
		tb_err("pmemobj: root object of %zu bytes: %s", c->size,
			pmemobj_errormsg());
		pmemobj_close(c->pop);
		free(c);
		return -1;
	}
	c->db = pmemobj_direct(root);
	*ctx = c;
	*db = c->db;
	return 0;
}

static int
pobj_loaded(void *ctx)
{
	struct pobj_ctx *c = ctx;
	/* The freshly written database, durable in PMDK's domain. */
	pmemobj_persist(c->pop, c->db, c->size);
	return 0;
}

static int
pobj_begin(void *ctx)
{
	struct pobj_ctx *c = ctx;
	int rc = pmemobj_tx_begin(c->pop, NULL, TX_PARAM_NONE);
	if (rc) {
		tb_err("pmemobj_tx_begin: %s", pmemobj_errormsg());
		return -1;
	}
	return 0;
}

static int
pobj_ranges(void *ctx, size_t n, const struct tb_range *r)
{
	(void)ctx;
	for (size_t i = 0; i < n; i++)
		if (r[i].fresh ? pmemobj_tx_xadd_range_direct(r[i].addr,
				      r[i].len, POBJ_XADD_NO_SNAPSHOT) :
				 pmemobj_tx_add_range_direct(r[i].addr,
				      r[i].len)) {
			tb_err("pmemobj_tx_add_range_direct: %s",
				pmemobj_errormsg());
			pmemobj_tx_end();
			return -1;
		}
	return 0;
}

static int
pobj_commit(void *ctx)
{
	(void)ctx;
	pmemobj_tx_commit();
	int rc = pmemobj_tx_end();
	if (rc) {
		tb_err("pmemobj_tx_end: %s", strerror(rc));
		return -1;
	}
	return 0;
}

static int
pobj_abort(void *ctx)
{
	(void)ctx;
	pmemobj_tx_abort(ECANCELED);
	int rc = pmemobj_tx_end();
	if (rc != ECANCELED) {
		tb_err("pmemobj abort: %s", strerror(rc));
		return -1;
	}
	return 0;
}

static void
pobj_stats(void *ctx, struct tb_bstats *out)
{
	(void)ctx;
	*out = (struct tb_bstats){ 0 }; /* PMDK counts no fences for us */
}

static int
pobj_close(void *ctx)
{
	struct pobj_ctx *c = ctx;
	pmemobj_close(c->pop);
	free(c);
	return 0;
}

static int
pobj_files(void *ctx, const char **paths, int max)
{
	struct pobj_ctx *c = ctx;
	if (max < 1)
		return 0;
	paths[0] = c->path;
	return 1;
}

const struct tb_backend tb_backend_pmemobj = {
	.name = "pmemobj",
	.can_abort = true,
	.setup = pobj_setup,
	.teardown = pobj_teardown,
	.open = pobj_open,
	.loaded = pobj_loaded,
	.begin = pobj_begin,
	.set_ranges = pobj_ranges,
	.commit = pobj_commit,
	.abort = pobj_abort,
	.stats = pobj_stats,
	.close = pobj_close,
	.files = pobj_files,
};
