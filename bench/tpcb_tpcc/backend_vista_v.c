/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend_vista_v.c -- Vista's Versions 0, 1, 2 (vversions.c) as backends
 *
 * Design:
 *  1. Three backends, "vista-v0", "vista-v1", "vista-v2", named on the
 *     command line "vista:v0" .. "vista:v2" (and "vista:v3", today's
 *     libvista, is "vista"), with a domain after them: "vista:v1:byte".
 *     tb_vista_version_spec() does the renaming for tpcbench and tb_crash
 *     (and of "vista:redo", "vista:snap" to backend_vista.c's
 *     "vista-redo", "vista-snap").
 *  2. Each stream is one pool, "vista-vN.<stream>.pool" in the work
 *     directory, holding the database (and the mirror or the heap).  The
 *     domain is forced with the pool's RIO_FORCE_* flag, as for vista.
 *  3. The fence and line counters are the module's own (vv_get_stats);
 *     bytes_logged is before-image bytes (V0) or mirror bytes (V1, V2).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rio.h"
#include "tpcbench.h"
#include "vversions.h"


struct vv_ctx {
	vv *v;
	char path[4200];
};

static char dir[3][4096];

static int
vvfail(const char *what, int rc)
{
	tb_err("vista: %s: %s: %s", what, rio_strerror(rc), rio_errormsg());
	return -1;
}

static int
vv_setup_n(const struct tb_opts *o, int n)
{
	return tb_workdir(o, dir[n], sizeof(dir[n]), o->pmem_dir);
}

static int vv_setup0(const struct tb_opts *o) { return vv_setup_n(o, 0); }
static int vv_setup1(const struct tb_opts *o) { return vv_setup_n(o, 1); }
static int vv_setup2(const struct tb_opts *o) { return vv_setup_n(o, 2); }

static int
vv_teardown_n(bool remove, int n)
{
	if (remove)
		tb_rmtree(dir[n]);
	return 0;
}

static int vv_teardown0(bool r) { return vv_teardown_n(r, 0); }
static int vv_teardown1(bool r) { return vv_teardown_n(r, 1); }
static int vv_teardown2(bool r) { return vv_teardown_n(r, 2); }

static int
vv_open_n(const struct tb_opts *o, int stream, bool create, void **ctx,
	void **db, enum vv_version ver)
{
	struct vv_ctx *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -1;
	snprintf(c->path, sizeof(c->path), "%s/vista-%s.%d.pool", dir[ver],
		vv_version_name(ver), stream);
	unsigned flags = tb_rio_force_flag(o->domain) | RIO_NO_SIGNALS;
	int rc;
	if (create) {
		/* V0's heap holds one transaction's records and before-images
		 * (each in a power-of-two block); V1/V2's array 4096 ranges. */
		struct vv_opts vo = {
			.version = ver,
			.db_size = o->db_size,
			.heap_size = 4 * o->tx_size + (4u << 20),
			.rio_flags = flags,
		};
		rc = vv_create(c->path, &vo, &c->v);
	} else {
		rc = vv_open(c->path, ver, flags, &c->v);
	}
	if (rc) {
		free(c);
		return vvfail(create ? "creating the pool" : "opening the pool",
			rc);
	}
	*ctx = c;
	*db = vv_db(c->v);
	return 0;
}

static int
vv_open0(const struct tb_opts *o, int s, bool cr, void **ctx, void **db)
{
	return vv_open_n(o, s, cr, ctx, db, VV_V0);
}

static int
vv_open1(const struct tb_opts *o, int s, bool cr, void **ctx, void **db)
{
	return vv_open_n(o, s, cr, ctx, db, VV_V1);
}

static int
vv_open2(const struct tb_opts *o, int s, bool cr, void **ctx, void **db)
{
	return vv_open_n(o, s, cr, ctx, db, VV_V2);
}

static int
b_loaded(void *ctx)
{
	struct vv_ctx *c = ctx;
	int rc = vv_loaded(c->v);
	return rc ? vvfail("loaded", rc) : 0;
}

static int
b_begin(void *ctx)
{
	struct vv_ctx *c = ctx;
	int rc = vv_begin(c->v);
	return rc ? vvfail("begin", rc) : 0;
}

static int
b_ranges(void *ctx, size_t n, const struct tb_range *r)
{
	struct vv_ctx *c = ctx;
	struct vv_range s[64];
	if (n > sizeof(s) / sizeof(s[0])) {
		tb_err("vista-vN: %zu ranges in one call (at most 64)", n);
		return -1;
	}
	for (size_t i = 0; i < n; i++) /* every range snapshotted */
		s[i] = (struct vv_range){ r[i].addr, r[i].len };
	int rc = vv_set_ranges(c->v, n, s);
	return rc ? vvfail("set_ranges", rc) : 0;
}

static int
b_commit(void *ctx)
{
	struct vv_ctx *c = ctx;
	int rc = vv_commit(c->v);
	return rc ? vvfail("commit", rc) : 0;
}

static int
b_abort(void *ctx)
{
	struct vv_ctx *c = ctx;
	int rc = vv_abort(c->v);
	return rc ? vvfail("abort", rc) : 0;
}

static void
b_stats(void *ctx, struct tb_bstats *out)
{
	struct vv_ctx *c = ctx;
	struct vv_stats s;
	vv_get_stats(c->v, &s);
	*out = (struct tb_bstats){ .has_fences = true, .has_log = true,
		.fences = s.fences, .flushes = s.lines,
		.bytes_logged = s.bytes_logged };
}

static int
b_close(void *ctx)
{
	struct vv_ctx *c = ctx;
	int rc = vv_close(c->v);
	free(c);
	return rc ? vvfail("close", rc) : 0;
}

static int
b_files(void *ctx, const char **paths, int max)
{
	struct vv_ctx *c = ctx;
	if (max < 1)
		return 0;
	paths[0] = c->path;
	return 1;
}

#define VV_BACKEND(N)                                                        \
	const struct tb_backend tb_backend_vista_v##N = {                    \
		.name = "vista-v" #N,                                        \
		.can_abort = true,                                           \
		.setup = vv_setup##N,                                        \
		.teardown = vv_teardown##N,                                  \
		.open = vv_open##N,                                          \
		.loaded = b_loaded,                                          \
		.begin = b_begin,                                            \
		.set_ranges = b_ranges,                                      \
		.commit = b_commit,                                          \
		.abort = b_abort,                                            \
		.stats = b_stats,                                            \
		.close = b_close,                                            \
		.files = b_files,                                            \
	};
VV_BACKEND(0)
VV_BACKEND(1)
VV_BACKEND(2)

int
tb_vista_version_spec(const char *spec, char *out, size_t n)
{
	if ((!strncmp(spec, "vista:redo", 10) ||
		    !strncmp(spec, "vista:snap", 10)) &&
	    (spec[10] == '\0' || spec[10] == ':')) {
		snprintf(out, n, "vista-%.4s%s", spec + 6, spec + 10);
		return 0;
	}
	if (strncmp(spec, "vista:v", 7)) {
		snprintf(out, n, "%s", spec);
		return 0;
	}
	char v = spec[7];
	const char *rest = spec + 8;
	if (v < '0' || v > '3' || (*rest && *rest != ':')) {
		tb_err("backend %s: versions are vista:v0 .. vista:v3", spec);
		return -1;
	}
	if (v == '3')
		snprintf(out, n, "vista%s", rest);
	else
		snprintf(out, n, "vista-v%c%s", v, rest);
	return 0;
}
