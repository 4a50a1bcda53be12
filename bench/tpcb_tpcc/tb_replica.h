/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tb_replica.h -- tpcbench --replica: a vista stream kept on a backup
 * process by libvista_replica (replica.c)
 */
#ifndef TB_REPLICA_H
#define TB_REPLICA_H

#include "tpcbench.h"
#include "vista.h"

/* replica.c: --replica (a vista backend's stream replicated by
 * libvista_replica to a backup process this program forks). */
enum tb_repl_kind { TB_REPL_OFF, TB_REPL_ACTIVE, TB_REPL_PASSIVE };
/* The modes, comma-separated, for the usage text. */
extern const char tb_repl_modes[];
/* mode -> kind and vr_mode (VR_1SAFE...); 0, or -1 for an unknown mode. */
int tb_repl_parse(const char *mode, enum tb_repl_kind *kind, int *vr_mode);
/* Where a stream's vista instance lives; the backend computes it for its
 * own pools and the backup's (tb_repl_setup forks before any is mapped). */
struct tb_vgeom {
	char log[4200], seg[4200];
	size_t log_size, seg_size;
	unsigned lanes, rio_flags;
	void *addr;
};
typedef void (*tb_vgeom_fn)(const struct tb_opts *o, int stream,
	const char *prefix, struct tb_vgeom *g);
/* Before any stream is opened: one backup process per stream, each
 * waiting for its primary's port.  Once per process; 0 or -1. */
int tb_repl_setup(const struct tb_opts *o, const char *dir, tb_vgeom_fn geom);
struct tb_repl;
/* The primary side of stream i, after its database is loaded: serve on
 * --peer, hand the port to the backup, wait for its full copy. */
int tb_repl_attach(const struct tb_opts *o, int stream,
	const struct tb_vgeom *g, vista *v, vista_segment *seg, void *db,
	size_t db_size, struct tb_repl **out);
/* Commit the calling thread's transaction, replicated; 0 or -1. */
int tb_repl_commit(struct tb_repl *r, vista *v);
void tb_repl_stats(struct tb_repl *r, struct tb_bstats *out);
/* Wait for the backup to hold everything, stop it, and compare its copy
 * of the database with ours (not passive 1-safe: its queue may be
 * dropped); 0, or -1 (reported) when they differ or it failed. */
int tb_repl_detach(struct tb_repl *r);
/* The backups of streams never attached: told to go, and waited for. */
void tb_repl_teardown(void);
/* A 64-byte TCP ping-pong with a child process over host: median and p99
 * round trip in us; 0 or -1 (reported). */
int tb_rtt(const char *host, int n, double *med_us, double *p99_us);
/* Can this host listen on `host`?  0, or -1 (reported). */
int tb_peer_check(const char *host);

#endif /* TB_REPLICA_H */
