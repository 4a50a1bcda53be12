/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvm_int.h -- internal state of the RVM baseline, shared by its files
 *
 * RVM is a process-wide singleton (one log per process): rvm__g holds the
 * log, the segments named by its status block, the mapped regions, the
 * no_flush buffer and the statistics, all under rvm__g.lock.  A
 * transaction's ranges and undo bytes live in its struct rvm__tx, touched
 * only by the thread that runs it.
 */
#ifndef RVM_INT_H
#define RVM_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "rvm.h"
#include "rvm_io.h"
#include "rvm_layout.h"

/* ---- io.c: every access to the log and data files goes through here ---- */

/* The table in use (rvm_io.h; tests may also swap it while initialized). */
extern const struct rvm_io_ops *rvm__io;

/* Full-length transfers: 0, -errno, or -EIO for a short read/write. */
int rvm__read_full(int fd, void *buf, size_t len, uint64_t off);
int rvm__write_full(int fd, const void *buf, size_t len, uint64_t off);
int rvm__sync(int fd); /* counts n_syncs; 0 or -errno */

/* ---- the singleton ---- */

struct rvm__seg {
	int fd;   /* -1 until opened */
	bool dirty; /* written by truncation since the last sync */
};

struct rvm__region {
	struct rvm__region *next;
	uint32_t seg;      /* index into status.segs[] / segs[] */
	char *vmaddr;
	size_t length;
	uint64_t offset;   /* in the data file */
	bool allocated;    /* vmaddr came from rvm_map's mmap */
	long busy;         /* ranges of open transactions inside */
};

struct rvm__range {
	char *addr;
	size_t len;
	struct rvm__region *rg;
	size_t undo_off; /* into tx->undo (restore mode) */
};

struct rvm__tx {
	struct rvm__tx *next_free;
	rvm_mode_t mode;
	size_t nranges, range_cap;
	struct rvm__range *ranges;
	uint8_t *undo;
	size_t undo_len, undo_cap;
	size_t redo_bytes; /* record bytes this tx will need */
};

struct rvm__state {
	pthread_mutex_t lock;
	bool initialized;
	rvm_return_t fatal;     /* sticky RVM_ETERMINATED after an I/O failure */
	int log_fd;
	char log_path[4096];
	struct rvm_log_status status; /* the one in force */
	uint64_t tail;          /* bytes of the record area written */
	uint64_t next_seq;      /* sequence of the next record written */
	long truncate_pct;
	uint8_t *buf;           /* no_flush records not yet written */
	size_t buf_len, buf_cap;
	struct rvm__seg segs[RVM_MAX_SEGMENTS];
	struct rvm__region *regions;
	struct rvm__tx *free_tx;
	long n_uncommit;
	rvm_statistics_t stats;
};

extern struct rvm__state rvm__g;

/* err.c: set the thread's message (through librio) and return code. */
rvm_return_t rvm__err(rvm_return_t code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Enter the sticky failed state (lock held). */
rvm_return_t rvm__fail(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
/* RVM_EINIT / RVM_ETERMINATED if the library cannot work now (lock held). */
rvm_return_t rvm__usable(void);

/* log.c (lock held) */
rvm_return_t rvm__status_write(void);
rvm_return_t rvm__status_read(int fd, struct rvm_log_status *out);
/* Write the no_flush buffer to the log, truncating when it fills; with
 * sync, fdatasync the log afterwards. */
rvm_return_t rvm__log_write(bool sync);
/* Validate the records of area[0, len) against st; for each range call fn
 * (unless NULL).  Returns the number of valid records and, in *end, the
 * bytes they cover; stops at the first invalid one. */
typedef int (*rvm__range_fn)(const struct rvm_range_hdr *r, const void *data,
	void *arg);
int rvm__scan(const uint8_t *area, uint64_t len,
	const struct rvm_log_status *st, uint64_t first_seq, rvm__range_fn fn,
	void *arg, uint64_t *nrec, uint64_t *end);

/* truncate.c (lock held) */
rvm_return_t rvm__truncate_locked(void);
/* Recovery at rvm_initialize: replay what the log holds, then reset. */
rvm_return_t rvm__recover(void);
/* Open segment i's data file (by its status-block path) if not open yet;
 * create it only when asked (rvm_map), never during recovery. */
rvm_return_t rvm__seg_open(uint32_t i, bool create);

#endif /* RVM_INT_H */
