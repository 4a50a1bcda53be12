/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tpcc.h -- a single-threaded main-memory order-entry engine whose state
 *           is checkpointed by libckr or by an ARIES-style baseline
 *           (Cao et al., SIGMOD'11, Section 5.5)
 *
 * The tables and transactions are bench/tpcb_tpcc's order-entry
 * (wl_order_entry.c: new-order, payment, delivery; 1% of new-orders roll
 * back).  Transaction t of a run of seed S is fixed by S and t alone
 * (tpcc_tx_seed): its type and parameters are drawn from its seed.
 *
 * Modes:
 *   TPCC_NONE   no logging, no checkpoints: the maximum throughput.
 *   TPCC_CKR    the database is libckr's state (one 32-bit cell per word,
 *               4 KiB objects); each transaction is logged logically
 *               (type + seed, 16 bytes) before it runs, the logger
 *               commits in groups (ckr_opts.log_group), and the mutator
 *               calls ckr_point_of_consistency after every group: a
 *               checkpoint starts whenever the writer is free.
 *   TPCC_ARIES  physical redo logging with fuzzy checkpoints: each
 *               transaction's after-images (runs of changed words) are
 *               appended to a log (libckr's logger, the same group
 *               commit, as the log of a one-object handle "alog"); a
 *               checkpointer thread copies the live database into one of
 *               two slots while transactions go on, recording the log
 *               position at its start; recovery loads the newest complete
 *               slot and redoes the log from that position.
 *
 * In every mode the transactions run on a working copy of the database in
 * ordinary memory; a capture backend takes the before-images of the
 * ranges each transaction declares and, at commit, hands each word that
 * changed to the mode (TPCC_CKR: ckr_write, the algorithm's write handler;
 * TPCC_ARIES: the redo record), or restores them at a rollback.
 */
#ifndef CKR_BENCH_TPCC_H
#define CKR_BENCH_TPCC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckr.h"

enum tpcc_mode { TPCC_NONE = 0, TPCC_CKR = 1, TPCC_ARIES = 2 };

struct tpcc_opts {
	enum tpcc_mode mode;
	enum ckr_algo algo;   /* TPCC_CKR */
	size_t db_size;       /* bytes; order-entry scales to fit */
	uint64_t seed;        /* the run's seed S */
	uint32_t group;       /* transactions per group commit (500) */
	uint64_t log_capacity;
	uint32_t ckr_flags;   /* CKR_HUGEPAGES / CKR_HUGETLB */
	const char *dir;      /* TPCC_CKR, TPCC_ARIES: created if missing */
};

struct tpcc;

/*
 * Open an engine.  If dir holds a previous run's files, recover them (the
 * newest checkpoint plus the log after it); else populate the database
 * (logged as action 0 in TPCC_CKR; checkpointed before any transaction
 * in TPCC_ARIES).  *next_tx receives the number of the next transaction
 * to run.  0 or -1 (reported on stderr).
 */
int tpcc_open(const struct tpcc_opts *o, struct tpcc **out, uint64_t *next_tx);
/* Run transaction t (0 committed, 1 rolled back, -1 failed). */
int tpcc_tx(struct tpcc *e, uint64_t t);
/* Between two transactions, after each group: TPCC_CKR calls
 * ckr_point_of_consistency, TPCC_ARIES starts a fuzzy checkpoint if the
 * last one is done.  Returns 1 if a checkpoint started, 0 if not, -1. */
int tpcc_poc(struct tpcc *e);
/* Wait until the first n transactions logged are durable (0 or -1). */
int tpcc_durable(struct tpcc *e, uint64_t n);
/* Number of log actions appended so far (the next log sequence number). */
uint64_t tpcc_logged(struct tpcc *e);
/* Wait for checkpoints in progress, commit the log, stop. 0 or -1. */
int tpcc_close(struct tpcc *e);
/* The database as the checkpointed state holds it (TPCC_CKR: read through
 * ckr_read; else the working copy), into buf of tpcc_db_size bytes. */
void tpcc_state(struct tpcc *e, void *buf);
size_t tpcc_db_size(const struct tpcc *e);
/* The working copy (read only). */
const void *tpcc_db(const struct tpcc *e);
/* Checkpoints completed, redo bytes logged, warehouses. */
struct tpcc_stats {
	uint64_t checkpoints, log_bytes, new_orders, rollbacks;
	uint64_t log_waits;   /* ARIES: transactions that waited for log
	                       * space (a full ring, A5 in tpcc.c) */
	uint32_t warehouses;
	uint64_t huge_bytes;
};
void tpcc_stats(struct tpcc *e, struct tpcc_stats *st);

/*
 * The oracle of the crash test: the durable prefix of dir's log, i.e. the
 * number of transactions n whose effects recovery must show (TPCC_CKR: the
 * logged actions after the load; TPCC_ARIES: the redo records, one per
 * transaction, rolled back or not).  0 or -1.
 */
int tpcc_durable_prefix(const struct tpcc_opts *o, uint64_t *n);

/* The database size that gives `warehouses` at full TPC-C scale. */
size_t tpcc_size_for(uint32_t warehouses);

/* The transaction-t seed of a run of seed S (its type: its first draw). */
uint64_t tpcc_tx_seed(uint64_t S, uint64_t t);

#endif /* CKR_BENCH_TPCC_H */
