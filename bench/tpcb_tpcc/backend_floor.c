/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend_floor.c -- "undo-floor": an undo log's persist order and nothing
 * else, the bound libvista's undo log is measured against
 *
 * Design:
 *  1. One rio pool per stream, "undo-floor.<stream>.pool" in the work
 *     directory: the database, then a commit line, then a 2 MiB ring of
 *     records (libvista's lane size in tpcbench).  The domain is forced
 *     with the pool's RIO_FORCE_* flag, as for vista.
 *  2. set_ranges appends one record at the ring's cursor -- a 16-byte
 *     header {seq, n}, n descriptors {offset, length}, the before-images
 *     -- writes its lines back and fences (F1): the before-images are
 *     durable before the caller stores into the ranges.  commit writes
 *     back every declared range and the commit line {seq}, and fences
 *     (F2): the transaction is durable when commit returns.  Two fences,
 *     the order every undo log over ordinary memory needs.
 *  3. What it leaves out is what makes a log recoverable: no checksum
 *     (a torn record cannot be told from a whole one), no generation in
 *     the records, no coalescing, no range lookup.  So it is a bound,
 *     not a design, as "none" is: it reopens only a pool it closed with
 *     every transaction committed, and refuses any other (it cannot
 *     recover a crash).  It cannot abort (can_abort false).
 *  4. (undo-floor - none) / fence latency is what an undo log's own
 *     persist order costs on this machine, the before-image loads that
 *     fence F1 waits for included; libvista's undo log minus undo-floor
 *     is what its checks and bookkeeping cost.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rio.h"
#include "tpcbench.h"

#define FL_RING (2u << 20)
#define FL_MAGIC 0x726f6f6c66646e75ull /* "undflroo" */

struct fl_commit { /* the commit line */
	uint64_t magic;
	uint64_t seq;      /* newest committed transaction */
	uint64_t last_rec; /* seq of the newest record (written at close) */
	uint8_t pad[40];
};

struct fl_ctx {
	rio_pool *pool;
	char *db, *ring;
	struct fl_commit *cl;
	size_t size, cur;
	uint64_t seq;
	uint64_t fences, lines;
	size_t nr;
	struct tb_range r[64];
	char path[4200];
};

static char dir[4096];

static int
flfail(const char *what, int rc)
{
	tb_err("undo-floor: %s: %s: %s", what, rio_strerror(rc),
		rio_errormsg());
	return -1;
}

static int
fl_setup(const struct tb_opts *o)
{
	return tb_workdir(o, dir, sizeof(dir), o->pmem_dir);
}

static int
fl_teardown(bool remove)
{
	if (remove)
		tb_rmtree(dir);
	return 0;
}

static void
fl_flush(struct fl_ctx *c, const void *p, size_t n)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)63;
	rio_flush(c->pool, p, n);
	c->lines += ((uintptr_t)p + n - a + 63) / 64;
}

static void
fl_drain(struct fl_ctx *c)
{
	rio_drain(c->pool);
	c->fences++;
}

static int
fl_open(const struct tb_opts *o, int stream, bool create, void **ctx,
	void **db)
{
	struct fl_ctx *c = calloc(1, sizeof(*c));
	size_t size = (o->db_size + 63) & ~(size_t)63;
	int rc;

	if (c == NULL)
		return -1;
	snprintf(c->path, sizeof(c->path), "%s/undo-floor.%d.pool", dir,
		stream);
	if (create)
		rc = rio_pool_create(c->path, (RIO_POOL_HDR_SIZE + size + 64 +
			FL_RING + 4095) & ~(size_t)4095,
			tb_rio_force_flag(o->domain) | RIO_NO_SIGNALS, &c->pool);
	else
		rc = rio_pool_open(c->path,
			tb_rio_force_flag(o->domain) | RIO_NO_SIGNALS, &c->pool);
	if (rc) {
		free(c);
		return flfail(create ? "creating the pool" : "opening the pool",
			rc);
	}
	if (rio_pool_size(c->pool) < size + 64 + FL_RING) {
		tb_err("undo-floor: %s holds %zu bytes, not the %zu it needs",
			c->path, rio_pool_size(c->pool), size + 64 + FL_RING);
		rio_pool_close(c->pool);
		free(c);
		return -1;
	}
	c->size = o->db_size;
	c->db = rio_pool_base(c->pool);
	c->cl = (void *)(c->db + size);
	c->ring = (char *)(c->cl + 1);
	if (create) {
		c->cl->magic = FL_MAGIC;
		/* The commit line says "undo-floor, nothing committed" before
		 * the pool is used: a reopen tells it from a foreign pool. */
		rio_persist(c->pool, c->cl, sizeof(*c->cl));
	} else if (c->cl->magic != FL_MAGIC || c->cl->seq != c->cl->last_rec) {
		tb_err("undo-floor: %s was not closed with every transaction "
			"committed, and undo-floor cannot recover a crash (it "
			"keeps no checksums)", c->path);
		rio_pool_close(c->pool);
		free(c);
		return -1;
	}
	c->seq = c->cl->seq;
	*ctx = c;
	*db = c->db;
	return 0;
}

static int
fl_loaded(void *ctx)
{
	struct fl_ctx *c = ctx;
	/* The populated database is durable before the first transaction,
	 * whose undo records only cover what it changes. */
	rio_persist(c->pool, c->db, c->size);
	return 0;
}

static int
fl_begin(void *ctx)
{
	struct fl_ctx *c = ctx;
	c->nr = 0;
	return 0;
}

static int
fl_set_ranges(void *ctx, size_t n, const struct tb_range *r)
{
	struct fl_ctx *c = ctx;
	size_t len = 16 + 16 * n;

	if (c->nr + n > sizeof(c->r) / sizeof(c->r[0])) {
		tb_err("undo-floor: more than %zu ranges in a transaction",
			sizeof(c->r) / sizeof(c->r[0]));
		return -1;
	}
	for (size_t i = 0; i < n; i++)
		len += (r[i].len + 7) & ~(size_t)7;
	if (len > FL_RING) {
		tb_err("undo-floor: a %zu-byte record does not fit", len);
		return -1;
	}
	if (c->cur + len > FL_RING)
		c->cur = 0;
	char *rec = c->ring + c->cur;
	uint64_t *w = (uint64_t *)(void *)rec;
	char *img = rec + 16 + 16 * n;
	w[0] = c->seq + 1;
	w[1] = n;
	for (size_t i = 0; i < n; i++) {
		w[2 + 2 * i] = (uint64_t)((char *)r[i].addr - c->db);
		w[3 + 2 * i] = r[i].len;
		memcpy(img, r[i].addr, r[i].len);
		img += (r[i].len + 7) & ~(size_t)7;
		c->r[c->nr++] = r[i];
	}
	/* F1: the before-images are durable before the caller stores into
	 * the ranges. */
	fl_flush(c, rec, len);
	fl_drain(c);
	c->cur = (c->cur + len + 63) & ~(size_t)63;
	return 0;
}

static int
fl_commit(void *ctx)
{
	struct fl_ctx *c = ctx;

	if (c->nr == 0)
		return 0;
	for (size_t i = 0; i < c->nr; i++)
		fl_flush(c, c->r[i].addr, c->r[i].len);
	c->cl->seq = ++c->seq;
	fl_flush(c, &c->cl->seq, sizeof(c->cl->seq));
	/* F2: the stores and the commit line are durable before commit
	 * returns. */
	fl_drain(c);
	return 0;
}

static int
fl_abort(void *ctx)
{
	(void)ctx;
	tb_err("undo-floor: no abort (a bound, not a design)");
	return -1;
}

static void
fl_stats(void *ctx, struct tb_bstats *out)
{
	struct fl_ctx *c = ctx;
	*out = (struct tb_bstats){ .has_fences = true, .fences = c->fences,
		.flushes = c->lines };
}

static int
fl_close(void *ctx)
{
	struct fl_ctx *c = ctx;
	/* Every transaction committed: say so, for the next open. */
	c->cl->last_rec = c->seq;
	rio_persist(c->pool, &c->cl->last_rec, sizeof(c->cl->last_rec));
	int rc = rio_pool_close(c->pool);
	free(c);
	return rc ? flfail("closing the pool", rc) : 0;
}

static int
fl_files(void *ctx, const char **paths, int max)
{
	struct fl_ctx *c = ctx;
	if (max < 1)
		return 0;
	paths[0] = c->path;
	return 1;
}

const struct tb_backend tb_backend_undo_floor = {
	.name = "undo-floor",
	.setup = fl_setup,
	.teardown = fl_teardown,
	.open = fl_open,
	.loaded = fl_loaded,
	.begin = fl_begin,
	.set_ranges = fl_set_ranges,
	.commit = fl_commit,
	.abort = fl_abort,
	.stats = fl_stats,
	.close = fl_close,
	.files = fl_files,
};
