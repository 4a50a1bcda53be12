/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend_vista.c -- libvista: undo-log transactions in persistent memory
 *
 * Design:
 *  1. Each stream is its own vista instance (its own log pool) with one
 *     segment mapped at a fixed address; the database is the segment's
 *     root object.  Independent instances are independent "servers" in
 *     Amza et al.'s sense (section 8).
 *  2. The persistence domain is forced with vista_opts.rio_flags
 *     (RIO_FORCE_BYTE / _CACHELINE / _PAGE), so every domain can be
 *     measured on any machine; the pools live in --pmem-dir (/dev/shm).
 *  3. A workload's ranges go to vista_set_ranges_new in one call: one
 *     persist barrier for all of a transaction's before-images; the rows
 *     it inserts (tb_range.fresh) go last, as new ranges, logged without
 *     a before-image.  "vista-snap" ("vista:snap[:DOMAIN]") declares every
 *     range with its before-image (vista_set_ranges), as before new
 *     ranges existed: the comparison.  Redo mode keeps every before-image
 *     in DRAM and takes no new ranges.
 *  4. The freshly populated database is made durable with one
 *     rio_persist over it (librio's choke point), outside any transaction.
 *  5. --group N (N > 1): transactions begin with VISTA_TX_NO_FLUSH and
 *     every N-th commit is followed by vista_flush(), so N transactions
 *     share one durable commit (RVM's --group, with libvista's no-flush
 *     promise: a crash rolls back the group since the last flush).
 *  6. --replica MODE: setup forks one backup process per stream
 *     (replica.c), loaded() attaches the stream to it once the database
 *     is durable, and commits go through libvista_replica; close waits
 *     for the backup and compares its copy with the database.
 *  7. "vista-redo" (named "vista:redo" on the command line, with a
 *     domain after it: "vista:redo:byte"): the same calls on an instance
 *     opened with VISTA_MODE_REDO.  The database is the whole user area
 *     of the segment (redo mode has no heap), the transactions run on its
 *     DRAM copy, and the redo log's ring holds 16 MiB plus eight of the
 *     largest transactions (a checkpoint writes the dirty lines home each
 *     time half of it is used).  No --group, no --replica.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tb_replica.h"
#include "vista.h"


struct vista_ctx {
	vista *v;
	vista_segment *seg;
	void *db;
	size_t size;
	int group;          /* transactions per vista_flush (1: none) */
	uint64_t ended;
	int stream;
	const struct tb_opts *o;
	struct tb_repl *rep; /* --replica: attached at loaded() */
	struct tb_vgeom g;
	bool redo;          /* vista-redo */
	bool snap;          /* every range with its before-image */
};

static char dir[4096];

static int
vfail(const char *what, int rc)
{
	tb_err("vista: %s: %s: %s", what, vista_strerror(rc), vista_errormsg());
	return -1;
}

/* Stream i's pools (prefix "DIR/vista": ours; "DIR/backup": its backup's)
 * and where they are mapped. */
static void
v_geom(const struct tb_opts *o, int stream, const char *prefix,
	struct tb_vgeom *g)
{
	snprintf(g->log, sizeof(g->log), "%s.%d.log", prefix, stream);
	snprintf(g->seg, sizeof(g->seg), "%s.%d.seg", prefix, stream);
	/* A thread keeps its lane until it exits, and with --threads the
	 * database is created by the main thread but run by a stream
	 * thread: two lanes.  One stream runs on the main thread: one lane,
	 * where the one-fence commit stores no truncation at all (libvista
	 * log.c L7).  Each lane holds the largest transaction's
	 * before-images; together they stay inside the one-copy memory
	 * budget. */
	g->lanes = o->threads > 1 ? 2 : 1;
	size_t lane = 2 * o->tx_size + (2u << 20);
	g->log_size = g->lanes * ((lane + 4095) & ~(size_t)4095);
	g->rio_flags = tb_rio_force_flag(o->domain) | RIO_NO_SIGNALS;
	/* Room for the heap's own metadata beside the root object. */
	g->seg_size = (o->db_size + o->db_size / 16 + (4u << 20) + 4095) &
		~(size_t)4095;
	g->addr = (void *)(uintptr_t)(0x200000000000ull +
		(uint64_t)stream * 0x2000000000ull);
}

static int
v_setup(const struct tb_opts *o)
{
	if (tb_workdir(o, dir, sizeof(dir), o->pmem_dir))
		return -1;
	return tb_repl_setup(o, dir, v_geom);
}

static int
v_teardown(bool remove)
{
	tb_repl_teardown();
	if (remove)
		tb_rmtree(dir);
	return 0;
}

static int
v_open_mode(const struct tb_opts *o, int stream, bool create, void **ctx,
	void **db, bool redo, bool snap)
{
	if (redo && (o->replica || o->group > 1)) {
		tb_err("vista-redo: no --replica and no --group");
		return -1;
	}
	struct vista_ctx *c = calloc(1, sizeof(*c));
	char prefix[4200];
	if (c == NULL)
		return -1;
	snprintf(prefix, sizeof(prefix), "%s/%s", dir,
		redo ? "vista-redo" : snap ? "vista-snap" : "vista");
	v_geom(o, stream, prefix, &c->g);
	c->redo = redo;
	c->snap = snap || redo;
	if (redo) {
		c->g.log_size = (16u << 20) + 4096 * 3 +
			((8 * o->tx_size + 4095) & ~(size_t)4095);
		c->g.seg_size = (o->db_size + 4095) & ~(size_t)4095;
	}
	c->size = o->db_size;
	c->group = o->group > 1 ? o->group : 1;
	c->stream = stream;
	c->o = o;
	struct vista_opts vo = {
		.log_path = c->g.log,
		.log_size = c->g.log_size,
		.lanes = c->g.lanes,
		.rio_flags = c->g.rio_flags,
		.mode = redo ? VISTA_MODE_REDO : VISTA_MODE_UNDO,
	};
	int rc = vista_init(&vo, &c->v);
	if (rc) {
		free(c);
		return vfail("vista_init", rc);
	}
	rc = vista_map(c->v, c->g.seg, c->g.addr, c->g.seg_size,
		create ? VISTA_CREATE | VISTA_EXCL : 0, &c->seg);
	if (rc == 0 && redo)
		c->db = vista_segment_base(c->seg);
	else if (rc == 0)
		rc = vista_root(c->seg, c->size, &c->db);
	if (rc) {
		vfail(create ? "creating the segment" : "mapping the segment",
			rc);
		vista_fini(c->v);
		free(c);
		return -1;
	}
#ifdef TB_BROKEN_REPL_ATTACH_EARLY
	/* Broken on purpose (tpcbench-replica-smoke must catch it): the
	 * stream is replicated before the population, whose stores are no
	 * transaction's and so never reach an active backup. */
	if (create && o->replica && tb_repl_attach(o, stream, &c->g, c->v,
		    c->seg, c->db, c->size, &c->rep)) {
		vista_fini(c->v);
		free(c);
		return -1;
	}
#endif
	*ctx = c;
	*db = c->db;
	return 0;
}

static int
v_open(const struct tb_opts *o, int stream, bool create, void **ctx,
	void **db)
{
	return v_open_mode(o, stream, create, ctx, db, false, false);
}

static int
v_open_snap(const struct tb_opts *o, int stream, bool create, void **ctx,
	void **db)
{
	return v_open_mode(o, stream, create, ctx, db, false, true);
}

static int
v_open_redo(const struct tb_opts *o, int stream, bool create, void **ctx,
	void **db)
{
	return v_open_mode(o, stream, create, ctx, db, true, false);
}

static int
v_loaded(void *ctx)
{
	struct vista_ctx *c = ctx;
	/* The populated database, durable before the first transaction
	 * (redo mode: copied from DRAM to the segment's home first). */
	int rc = vista_segment_persist(c->seg, c->db, c->size);
	if (rc)
		return vfail("vista_segment_persist", rc);
	if (c->o->replica && c->rep == NULL)
		return tb_repl_attach(c->o, c->stream, &c->g, c->v, c->seg,
			c->db, c->size, &c->rep);
	return 0;
}

static int
v_begin(void *ctx)
{
	struct vista_ctx *c = ctx;
	int rc = vista_begin_transaction(c->v,
		c->group > 1 ? VISTA_TX_NO_FLUSH : 0);
	return rc ? vfail("vista_begin_transaction", rc) : 0;
}

static int
v_ranges(void *ctx, size_t n, const struct tb_range *r)
{
	struct vista_ctx *c = ctx;
#ifdef TB_BROKEN_MISSED_RANGE
	/* Broken on purpose (crash-pm must catch it): the last range of a
	 * transaction is not declared, so its stores are neither logged nor
	 * made durable by the commit. */
	n -= n > 1;
#endif
	struct vista_range s[64];
	size_t k = 0, n_old;
	if (n > sizeof(s) / sizeof(s[0])) {
		tb_err("vista: %zu ranges in one call (at most 64)", n);
		return -1;
	}
	/* The old ranges first, then the new ones (vista_set_ranges_new). */
	for (size_t i = 0; i < n; i++)
		if (!r[i].fresh || c->snap)
			s[k++] = (struct vista_range){ r[i].addr, r[i].len };
	n_old = k;
	for (size_t i = 0; i < n && k < n; i++)
		if (r[i].fresh)
			s[k++] = (struct vista_range){ r[i].addr, r[i].len };
	int rc = n_old == n ? vista_set_ranges(c->v, n, s) :
		vista_set_ranges_new(c->v, n, n_old, s);
	return rc ? vfail(n_old == n ? "vista_set_ranges" :
		"vista_set_ranges_new", rc) : 0;
}

static int
v_commit(void *ctx)
{
	struct vista_ctx *c = ctx;
	if (c->rep)
		return tb_repl_commit(c->rep, c->v);
	int rc = vista_end_transaction(c->v);
	if (rc)
		return vfail("vista_end_transaction", rc);
	if (c->group > 1 && ++c->ended % (uint64_t)c->group == 0 &&
	    (rc = vista_flush(c->v)) != 0)
		return vfail("vista_flush", rc);
	return 0;
}

static int
v_abort(void *ctx)
{
	struct vista_ctx *c = ctx;
	int rc = vista_abort_transaction(c->v);
	return rc ? vfail("vista_abort_transaction", rc) : 0;
}

static void
v_stats(void *ctx, struct tb_bstats *out)
{
	struct vista_ctx *c = ctx;
	struct vista_stats s;
	*out = (struct tb_bstats){ 0 };
	if (vista_stats(c->v, &s))
		return;
	out->has_fences = out->has_log = true;
	out->fences = s.fences;
	out->flushes = s.flushes;
	out->bytes_logged = s.bytes_logged;
	if (c->rep)
		tb_repl_stats(c->rep, out);
}

static int
v_close(void *ctx)
{
	struct vista_ctx *c = ctx;
	int rrc = c->rep ? tb_repl_detach(c->rep) : 0;
	int rc = vista_fini(c->v);
	free(c);
	return rc ? vfail("vista_fini", rc) : rrc;
}

static int
v_files(void *ctx, const char **paths, int max)
{
	struct vista_ctx *c = ctx;
	int n = 0;
	if (max > n)
		paths[n++] = c->g.seg;
	if (max > n)
		paths[n++] = c->g.log;
	return n;
}

/* The two modes differ only in how a stream is opened. */
#define V_BACKEND(var, name_, open_)                                     \
	const struct tb_backend var = {                                  \
		.name = name_,                                           \
		.can_abort = true,                                       \
		.setup = v_setup,                                        \
		.teardown = v_teardown,                                  \
		.open = open_,                                           \
		.loaded = v_loaded,                                      \
		.begin = v_begin,                                        \
		.set_ranges = v_ranges,                                  \
		.commit = v_commit,                                      \
		.abort = v_abort,                                        \
		.stats = v_stats,                                        \
		.close = v_close,                                        \
		.files = v_files,                                        \
	};
V_BACKEND(tb_backend_vista, "vista", v_open)
V_BACKEND(tb_backend_vista_redo, "vista-redo", v_open_redo)
V_BACKEND(tb_backend_vista_snap, "vista-snap", v_open_snap)
