/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tpcbench.h -- the benchmark's interfaces: options, backends, workloads
 *
 * A *backend* gives atomic, durable transactions over a database area
 * (begin, set_ranges, commit, abort), or nothing at all ("none").  A
 * *workload* lays out its tables in that area, populates them, runs one
 * transaction at a time through the backend, and checks its invariants.
 * A *stream* is one database with its own backend context and workload
 * state; --threads N runs N streams at once (Amza et al. section 8).
 */
#ifndef TPCBENCH_H
#define TPCBENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rio_clock.h"

#define TB_MAX_STREAMS 16
#define TB_MAX_FILES 4
/* Commit latency histogram: 32 buckets per doubling from 128 ns to 134 ms
 * (about 2% wide), then one overflow bucket (replica.c). */
#define TB_LAT_BUCKETS (21 * 32 + 1)

enum tb_domain { TB_DOMAIN_NONE, TB_DOMAIN_BYTE, TB_DOMAIN_CACHELINE,
	TB_DOMAIN_PAGE };

struct tb_opts {
	const char *workload;
	const char *backend;    /* one backend name */
	enum tb_domain domain;  /* vista, pmemobj, rvm-rio (its cache pool) */
	int group;              /* rvm: transactions per log flush */
	int threads;            /* streams */
	size_t db_size;         /* bytes per stream */
	/* order-entry: rows laid out so that none straddles a block of this
	 * many bytes (a database read in blocks from a file: oe_server.c
	 * --disk); 0: packed */
	size_t block;
	size_t tx_size;         /* synthetic: bytes per transaction */
	double seconds;         /* per run, unless ntx */
	uint64_t ntx;           /* per run and stream, when nonzero */
	int runs;
	uint64_t seed;
	const char *rvm_dir;    /* rvm: a disk directory */
	const char *rio_dir;    /* rvm-rio: files behind the Rio file cache */
	const char *pmem_dir;   /* vista, pmemobj pools; rvm-rio's cache pool */
	/* Crash tools (tb_crash.c): every file of the backend in exactly this
	 * directory, kept from one process to the next (default: a directory
	 * "tpcbench.<pid>" under each of the dirs above, removed at the end). */
	const char *work_dir;
	const char *csv;        /* append result rows here */
	bool quiet;
	bool no_reopen;
	bool per_range;         /* one set_range call per range (thesis) */
	/* --replica: the vista stream kept on a backup process (replica.c):
	 * NULL standalone, else one mode of tb_repl_modes; the backup
	 * connects to the primary at --peer (an address of this host). */
	const char *replica;
	const char *peer;
};

struct tb_range {
	void *addr;
	size_t len;
	/* A row the transaction inserts (past a table's end, a ring's free
	 * slot): read by nobody unless the transaction commits, so its old
	 * bytes need no snapshot.  vista: vista_set_ranges_new (vista-snap
	 * ignores it); pmemobj: POBJ_XADD_NO_SNAPSHOT; the others ignore it. */
	bool fresh;
};

/* Counters a backend can report (cumulative); has_* says which it has. */
struct tb_bstats {
	bool has_fences, has_log, has_syncs;
	uint64_t fences, flushes;     /* vista */
	uint64_t bytes_logged;        /* vista: undo bytes; rvm: redo bytes */
	uint64_t syncs, log_writes, truncations; /* rvm */
	/* --replica: records and bytes sent to the backup (modified data,
	 * undo/mirror, metadata, all bytes on the wire) and a histogram of
	 * commit latencies (tb_lat_bucket). */
	bool has_repl;
	uint64_t repl_records, repl_data, repl_undo, repl_meta, repl_sent;
	uint64_t lat[TB_LAT_BUCKETS];
};

struct tb_backend {
	const char *name;
	/* false for "none": nothing to roll back with, so workloads do not
	 * roll back on it (order-entry's 1% new-order rollbacks). */
	bool can_abort;
	/* Process-wide setup and teardown (may be NULL).  teardown(true)
	 * also removes the backend's files. */
	int (*setup)(const struct tb_opts *o);
	int (*teardown)(bool remove);
	/* Open stream i's database: created (zeroed) when create, else the
	 * one a previous open made (after setup again). */
	int (*open)(const struct tb_opts *o, int stream, bool create,
		void **ctx, void **db);
	/* The workload filled a fresh database: make it durable. */
	int (*loaded)(void *ctx);
	int (*begin)(void *ctx);
	int (*set_ranges)(void *ctx, size_t n, const struct tb_range *r);
	int (*commit)(void *ctx);
	int (*abort)(void *ctx);
	void (*stats)(void *ctx, struct tb_bstats *out);
	int (*close)(void *ctx);
	/* The files holding stream i's data, for the memory census. */
	int (*files)(void *ctx, const char **paths, int max);
	/* NULL for backends over ranges of ordinary memory.  A backend with
	 * its own database layout (per-word designs: trinity, quadra) gives
	 * its version of the named workload here, or NULL if it has none. */
	const struct tb_workload *(*layout)(const char *workload);
};

extern const struct tb_backend tb_backend_none;
extern const struct tb_backend tb_backend_vista; /* name NULL if not built */
extern const struct tb_backend tb_backend_vista_redo; /* VISTA_MODE_REDO */
/* vista with every range snapshotted (no new ranges): the comparison */
extern const struct tb_backend tb_backend_vista_snap;
/* An undo log's persist order without its checks: a bound (backend_floor.c) */
extern const struct tb_backend tb_backend_undo_floor;
extern const struct tb_backend tb_backend_pmemobj;
extern const struct tb_backend tb_backend_rvm;
extern const struct tb_backend tb_backend_rvm_rio;
/* Vista's Versions 0, 1, 2 (Amza et al. section 4; backend_vista_v.c). */
extern const struct tb_backend tb_backend_vista_v0;
extern const struct tb_backend tb_backend_vista_v1;
extern const struct tb_backend tb_backend_vista_v2;
/* "vista:vN[:DOMAIN]" -> "vista-vN[:DOMAIN]" (v3: "vista[:DOMAIN]"); any
 * other spec is copied.  0, or -1 for a bad version (reported). */
int tb_vista_version_spec(const char *spec, char *out, size_t n);
extern const struct tb_backend tb_backend_trinity; /* backend_pword.c */
extern const struct tb_backend tb_backend_quadra;

struct tb_workload {
	const char *name;
	/* Lay out a database of db_size bytes; volatile state in *wl. */
	int (*init)(const struct tb_opts *o, size_t db_size, uint64_t seed,
		void **wl);
	void (*populate)(void *wl, void *db);
	/* One transaction: 0 committed, 1 aborted on purpose (TPC-C's
	 * rollbacks), -1 a backend failure (already reported). */
	int (*tx)(void *wl, void *db, const struct tb_backend *b, void *ctx);
	/* 0 if every invariant holds, else -1 with a reason in why. */
	int (*check)(void *wl, const void *db, char *why, size_t n);
	/* After a crash, in a process that did not run the transactions: the
	 * invariants of any database the workload wrote, from its contents
	 * alone (the driver's running totals are gone).  0 with *committed =
	 * the transactions the database says committed, or -1 with a reason.
	 * NULL when the workload has none. */
	int (*check_recovered)(void *wl, const void *db, uint64_t *committed,
		char *why, size_t n);
	void (*fini)(void *wl);
};

extern const struct tb_workload tb_debit_credit;

/* What a debit-credit database says -- balance sums, the history's delta
 * sum over its `used` records (checked well formed), its head -- and the
 * judgements of wl_debit_credit.c, shared with layouts of their own
 * (backend_pword.c).  0, or -1 with a reason in why. */
struct tb_dc_sums {
	int64_t accounts, tellers, branches, history;
	uint64_t used, head;
};
/* After a run, against the driver's totals. */
int tb_dc_judge_run(const struct tb_dc_sums *s, int64_t total,
	uint64_t committed, int64_t ring_sum, char *why, size_t n);
/* After a crash, from the database alone. */
int tb_dc_judge_recovered(const struct tb_dc_sums *s, uint64_t hist_cap,
	char *why, size_t n);
extern const struct tb_workload tb_order_entry;
/* An order-entry database not all in memory (oe_server.c --disk): `at`
 * gives the address of bytes [off, off + len) of the database (within one
 * block of tb_opts.block), valid until `done`, which the workload calls at
 * the end of each transaction; the db argument is then unused.  NULL: the
 * database is db again. */
struct tb_rows {
	void *(*at)(void *arg, size_t off, size_t len);
	void (*done)(void *arg);
	void *arg;
};
void tb_order_entry_rows(void *wl, const struct tb_rows *r);
/* Take the running totals from a database that populate made (and no
 * transaction changed since), in another process. */
void tb_order_entry_adopt(void *wl, void *db);
extern const struct tb_workload tb_synthetic;

/* util.c */
void tb_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define tb_now_ns() rio_now_ns(CLOCK_MONOTONIC) /* rio_clock.h */
static inline uint64_t
tb_rand(uint64_t *s) /* splitmix64 */
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}
static inline uint64_t
tb_below(uint64_t *s, uint64_t n)
{
	return (uint64_t)(((unsigned __int128)tb_rand(s) * n) >> 64);
}
const char *tb_domain_name(enum tb_domain d);
/* librio's RIO_FORCE_* flag for a domain (cacheline for none). */
unsigned tb_rio_force_flag(enum tb_domain d);
/* mkdir -p; 0 or -1 (reported). */
int tb_mkdirs(const char *path);
/* Create the work directory in buf: o->work_dir if set, else this
 * process's "<base>/tpcbench.<pid>" (tpcbench removes it when a child
 * fails); 0 or -1 (reported). */
int tb_workdir(const struct tb_opts *o, char *buf, size_t n,
	const char *base);
/* Histogram bucket of a latency (TB_LAT_BUCKETS); the latency (ns, the
 * bucket's middle) below which a fraction q of the counts lie (0: none). */
unsigned tb_lat_bucket(uint64_t ns);
double tb_lat_quantile(const uint64_t *h, double q);
/* Remove a directory tree. */
void tb_rmtree(const char *path);
/* The process's memory: VmRSS and RssAnon in bytes. */
void tb_rss(uint64_t *rss, uint64_t *anon);
/* Bytes of `path` resident in the page cache. */
uint64_t tb_cached(const char *path);
/* What persistence costs in the cacheline domain, through librio:
 * fence_ns = store + clwb/clflushopt + sfence of one dirty line;
 * line_ns = each further dirty line flushed before the same sfence. */
struct tb_persist_cost {
	double fence_ns, line_ns;
};
struct tb_persist_cost tb_persist_cost(const char *dir);

#endif /* TPCBENCH_H */
