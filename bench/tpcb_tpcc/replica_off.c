/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replica_off.c -- tpcbench without libvista_replica (-Dreplica=false):
 * --replica is refused before anything runs
 */
#include "tb_replica.h"

const char tb_repl_modes[] = "(none: libvista_replica is not part of this "
	"build)";

int
tb_repl_parse(const char *mode, enum tb_repl_kind *kind, int *vr_mode)
{
	(void)mode;
	*kind = TB_REPL_OFF;
	*vr_mode = 0;
	return -1;
}

int
tb_repl_setup(const struct tb_opts *o, const char *dir, tb_vgeom_fn geom)
{
	(void)dir;
	(void)geom;
	if (o->replica == NULL)
		return 0;
	tb_err("--replica: libvista_replica is not part of this build");
	return -1;
}

int
tb_repl_attach(const struct tb_opts *o, int stream,
	const struct tb_vgeom *g, vista *v, vista_segment *seg, void *db,
	size_t db_size, struct tb_repl **out)
{
	(void)o, (void)stream, (void)g, (void)v, (void)seg, (void)db;
	(void)db_size, (void)out;
	return tb_repl_setup(o, NULL, NULL);
}

int
tb_repl_commit(struct tb_repl *r, vista *v)
{
	(void)r, (void)v;
	return -1;
}

void
tb_repl_stats(struct tb_repl *r, struct tb_bstats *out)
{
	(void)r, (void)out;
}

int
tb_repl_detach(struct tb_repl *r)
{
	(void)r;
	return -1;
}

void
tb_repl_teardown(void)
{
}

int
tb_rtt(const char *host, int n, double *med_us, double *p99_us)
{
	(void)host, (void)n, (void)med_us, (void)p99_us;
	return -1;
}

int
tb_peer_check(const char *host)
{
	(void)host;
	return 0;
}
