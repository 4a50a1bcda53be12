/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vista.h -- libvista: recoverable memory with undo-log transactions
 *
 * Vista (Lowell & Chen, 1997) on librio pools.  A *segment* is a pool mapped
 * at a fixed address, so native pointers stored in it stay valid across
 * runs.  A transaction declares the ranges it will modify (vista_set_range),
 * then stores to them in place; the before-images go to an undo log kept in
 * persistent memory, in line (Amza et al. "Version 3"), so commit only makes
 * the new data durable and truncates the log with one 8-byte store.  Abort,
 * and recovery at vista_map() after a crash, copy the before-images back.
 *
 * Redo mode (vista_opts.mode = VISTA_MODE_REDO) is the other design, for a
 * program that can afford a DRAM working copy: the program stores into the
 * copy, a commit appends the after-images to a redo log with one fence,
 * and the segment is written back lazily; same promises, narrower scope.
 *
 * Every segment mapped under one vista instance (vista_init) shares its log,
 * so one transaction may update several segments atomically.  Each thread
 * runs its own transaction in its own log lane; the library is thread-safe,
 * but concurrency control between transactions is the application's, as in
 * RVM and Vista.
 *
 * Return codes follow librio: 0, -errno, a RIO_E* code from librio, or a
 * VISTA_E* code (-31000..-31999).  vista_errormsg() describes the last
 * failure of the calling thread.  docs/libvista.3.md is the manual.
 */
#ifndef VISTA_H
#define VISTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rio.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VISTA_EXPORT __attribute__((visibility("default")))

#define VISTA_ERRNO_MAP(XX)                                                  \
	XX(VISTA_ENOTX, -31001, "no transaction is active on this thread")   \
	XX(VISTA_EINTX, -31002, "a transaction is already active")           \
	XX(VISTA_ERANGE, -31003, "range is not inside a mapped segment")     \
	XX(VISTA_ELOGFULL, -31004, "the transaction's log lane is full")     \
	XX(VISTA_ENOMEM, -31005, "the segment's heap has no room")           \
	XX(VISTA_EMAPPED, -31006, "the segment is already mapped")           \
	XX(VISTA_ELAYOUT, -31007, "segment or log of another layout version") \
	XX(VISTA_ECORRUPT, -31008, "log or heap metadata is corrupt")        \
	XX(VISTA_EBADPTR, -31009, "pointer is not an allocated block")       \
	XX(VISTA_EFATAL, -31010, "instance is in an error state; reopen it") \
	XX(VISTA_ENOLANE, -31011, "every log lane is in use")                \
	XX(VISTA_EPENDING, -31012,                                           \
		"the log holds an unrecovered transaction for a segment not "  \
		"mapped yet")                                                  \
	XX(VISTA_EOTHERLOG, -31013,                                          \
		"the segment was not unmapped cleanly and belongs to another " \
		"log")

#define VISTA__ERRNO_ENUM(name, value, msg) name = (value),
enum vista_errno { VISTA_ERRNO_MAP(VISTA__ERRNO_ENUM) };
#undef VISTA__ERRNO_ENUM

VISTA_EXPORT const char *vista_strerror(int rc); /* any code of the stack */
VISTA_EXPORT const char *vista_errormsg(void);   /* = rio_errormsg() */
/* Symbolic name ("VISTA_ENOTX", "RIO_EBADCSUM", "ENOENT", "OK") of a code. */
VISTA_EXPORT const char *vista_err_name(int rc);

typedef struct vista vista;
typedef struct vista_segment vista_segment;

struct vista_opts {
	/* The log pool (created if missing).  Required. */
	const char *log_path;
	/* Log pool size when created; 0 = 8 MiB.  Split into `lanes` lanes. */
	size_t log_size;
	/* Concurrent transactions (threads) at most; 0 = 8. */
	unsigned lanes;
	/* librio flags for the log and every segment: RIO_FORCE_* to choose
	 * the persistence domain, RIO_SAFE_SYNC (disk images of emulated
	 * pools), RIO_NO_SIGNALS; RIO_PROTECT keeps every segment
	 * write-protected outside the pages transactions declare. */
	unsigned rio_flags;
	/* VISTA_MODE_UNDO (0): the undo log, the program stores into the
	 * persistent segment.  VISTA_MODE_REDO: the program works on a DRAM
	 * copy of the segment; a commit appends the after-images to a redo
	 * log with one fence and the segment is written back lazily (see
	 * "Redo mode" in docs/libvista.3.md for what it supports).  A log
	 * or segment of the other mode is refused with VISTA_ELAYOUT. */
	unsigned mode;
};

#define VISTA_MODE_UNDO 0u
#define VISTA_MODE_REDO 1u

/*
 * Open (or create) the log and return an instance.  Recovery of the log
 * itself happens here; before-images are copied back into each segment
 * when that segment is mapped.  An existing log keeps the lane count and
 * size it was created with (opts->lanes and opts->log_size are ignored).
 * Every pool of the instance (log and segments) uses one persistence
 * domain: the one forced by opts->rio_flags, else $RIO_DOMAIN, else what
 * libpmem2 reports for the log.
 * Returns 0, -EINVAL, -EBUSY (the log is in use by another instance or
 * process), VISTA_ELAYOUT, VISTA_ECORRUPT (nothing is changed then), or
 * any error of rio_pool_open/create.
 */
VISTA_EXPORT int vista_init(const struct vista_opts *opts, vista **v);
/* Unmap every segment and close the log.  VISTA_EINTX if a transaction is
 * active on any thread (nothing is closed then).  No other call on v may
 * run concurrently with it. */
VISTA_EXPORT int vista_fini(vista *v);

/* vista_map flags */
#define VISTA_CREATE (1u << 0) /* create the segment if it does not exist */
#define VISTA_EXCL (1u << 1)   /* with VISTA_CREATE: fail if it exists */

/*
 * Map segment `path` at `addr` (page aligned).  A new segment (VISTA_CREATE)
 * needs addr and size: `size` is the user area wanted (rounded up to whole
 * pages); the segment occupies vista_segment_footprint(size) bytes of
 * address space from addr (headers and heap metadata come first).  An
 * existing one maps where it was created (addr may be NULL, or must match;
 * size is then ignored).  Recovery runs here: any uncommitted transaction
 * that touched this segment is rolled back before the call returns, and
 * recovery is idempotent.  Returns 0, VISTA_EMAPPED (mapped already, by
 * this instance, another one or another process), VISTA_ELAYOUT,
 * VISTA_ECORRUPT, RIO_EADDRINUSE, -ENOENT, -EEXIST (VISTA_EXCL), -EINVAL,
 * or any error of rio_pool_open/create.
 */
VISTA_EXPORT int vista_map(vista *v, const char *path, void *addr,
	size_t size, unsigned flags, vista_segment **seg);
/* VISTA_EINTX if a transaction (of any thread) has set ranges in it;
 * otherwise the result of rio_pool_close (the segment is unmapped). */
VISTA_EXPORT int vista_unmap(vista_segment *seg);

/*
 * The user area.  It is also the arena of the segment's heap: a program
 * uses a segment either raw (any layout it likes, declared with
 * vista_set_range; no vista_malloc/vista_root on it) or through the heap
 * (only blocks it allocated), never both.  A fixed layout next to heap
 * objects goes in the root object (vista_root).
 */
VISTA_EXPORT void *vista_segment_base(const vista_segment *seg);  /* user area */
VISTA_EXPORT size_t vista_segment_size(const vista_segment *seg);
VISTA_EXPORT rio_pool *vista_segment_pool(const vista_segment *seg);
/* The instance's log pool (for a library that watches the instance's
 * write-backs, such as libvista_replica's passive backup). */
VISTA_EXPORT rio_pool *vista_log_pool(const vista *v);
/*
 * Make [addr, addr+len) of the segment durable as it is now, outside any
 * transaction (a freshly populated segment): in undo mode rio_persist of
 * the range; in redo mode the range of the DRAM copy is copied to the
 * segment's home and made durable.  Returns 0, VISTA_ERANGE, VISTA_EINTX
 * (redo mode: a transaction is running).
 */
VISTA_EXPORT int vista_segment_persist(vista_segment *seg, const void *addr,
	size_t len);
/* Bytes of address space (and file) a segment with a user area of `size`
 * bytes occupies from its address: headers and heap metadata included; 0
 * if that is more than a segment may span (1 TiB: vista_map refuses it
 * with -EINVAL). */
VISTA_EXPORT size_t vista_segment_footprint(size_t size);
/* Segments and lanes waiting for recovery: the number of log lanes that
 * hold a transaction of an earlier run not yet rolled back in every
 * segment it touched (those segments have not been mapped yet). */
VISTA_EXPORT unsigned vista_pending_lanes(const vista *v);

/* ---- transactions (one per thread) ---- */

#define VISTA_TX_AUTO (1u << 0) /* find modified pages by write faults */
/*
 * No-flush (lazy) commit, as RVM's no-flush mode: vista_end_transaction()
 * of such a transaction makes it atomic and visible but not durable, and
 * costs no fence and no write-back.  Consecutive no-flush transactions of
 * a thread form a group that becomes durable as a whole -- one commit,
 * every line written back once -- at vista_flush(), at the begin of a
 * transaction without the flag, at vista_thread_detach(), at thread exit
 * and at vista_fini().  A crash before that rolls back the whole group:
 * after a crash the data is as of the end of a durable commit or flush,
 * never of part of a group.  Inside: no VISTA_TX_AUTO (-EINVAL), no heap
 * operation (-EINVAL); vista_abort_transaction() undoes the running
 * transaction only.  Data a group wrote must not reach another thread's
 * transactions before it is durable (their commits would not wait for it).
 */
#define VISTA_TX_NO_FLUSH (1u << 1)

/*
 * Start a transaction on the calling thread (the first one gives the thread
 * a log lane).  Returns 0, VISTA_EINTX (one is running: they do not nest),
 * VISTA_ENOLANE, VISTA_EPENDING, VISTA_EFATAL, -EINVAL.  Costs no fence.
 */
VISTA_EXPORT int vista_begin_transaction(vista *v, unsigned flags);

/*
 * Declare that the transaction may modify [addr, addr+len): the bytes are
 * copied to the undo log and made durable before this returns, so the
 * caller may store there right away.  Overlapping or adjacent ranges
 * already declared in this transaction are not copied again.
 * Returns 0, VISTA_ENOTX, VISTA_ERANGE, VISTA_ELOGFULL (the transaction can
 * still be aborted cleanly).
 */
VISTA_EXPORT int vista_set_range(vista *v, void *addr, size_t len);

struct vista_range {
	void *addr;
	size_t len;
};
/* Several ranges with a single persist barrier (one log record).  Either
 * every range is declared or none: VISTA_ERANGE for any bad range,
 * VISTA_ELOGFULL, -E2BIG (more than 65535 pieces), -ENOMEM. */
VISTA_EXPORT int vista_set_ranges(vista *v, size_t n,
	const struct vista_range *ranges);

/* Declare [addr, addr+len) as new in this transaction: its old bytes are
 * never put back (not on abort, not by recovery), so nothing is copied to
 * the log; the commit writes the range back and its checksum covers it, as
 * for any declared range.  For memory the program does not read unless the
 * transaction commits: a row past a table's end, a free buffer slot.
 * Same returns as vista_set_range.
 *
 * A byte's first declaration in the transaction decides: declared old (by
 * vista_set_range(s) or the old part of vista_set_ranges_new) and then new,
 * abort and recovery still put its old bytes back; declared new and then
 * old, they do not (the second declaration logs nothing).  In one
 * vista_set_ranges_new call a byte in an old and a new range is old.
 * Also -ENOTSUP in a VISTA_TX_AUTO transaction and in redo mode
 * (VISTA_MODE_REDO); in a log created by libvista before format 5.1 the
 * range is logged with its before-image, as by vista_set_range. */
VISTA_EXPORT int vista_set_range_new(vista *v, void *addr, size_t len);
/* vista_set_ranges() where the ranges r[n_old .. n-1] are new: one record,
 * one persist barrier for all of them.  Also -EINVAL if n_old > n. */
VISTA_EXPORT int vista_set_ranges_new(vista *v, size_t n, size_t n_old,
	const struct vista_range *r);

/* Make the transaction's stores durable, then discard its log.  After a
 * failure the instance is in its error state (VISTA_EFATAL). */
VISTA_EXPORT int vista_end_transaction(vista *v);
/*
 * Commit the calling thread's transaction and begin the next one with the
 * same flags: vista_end_transaction() then vista_begin_transaction(),
 * with no moment outside a transaction.  For VISTA_TX_AUTO it is also
 * cheaper: the pages the committed transaction changed are not
 * write-protected again but stay open, their committed content logged as
 * the new transaction's first records (one more fence, before this
 * returns), so the new transaction's first store to them does not fault;
 * a page it leaves unchanged is protected again at its own commit.
 * Returns 0; VISTA_ENOTX; what vista_end_transaction returns when the
 * commit fails (the transaction is then left as it leaves it); or
 * VISTA_EFATAL if, after a durable commit, the pages could not be
 * protected again (no transaction is running then).
 */
VISTA_EXPORT int vista_chain_transaction(vista *v);
/* Copy the before-images back (newest first) and discard the log; frees
 * what the transaction allocated, keeps what it freed. */
VISTA_EXPORT int vista_abort_transaction(vista *v);
/*
 * Make the calling thread's no-flush transactions durable (one commit:
 * their lines written back, one fence).  Returns 0 (also when there is
 * nothing to flush), VISTA_EINTX inside a transaction, VISTA_EFATAL (the
 * group stays held; reopen the instance).
 */
VISTA_EXPORT int vista_flush(vista *v);
/*
 * Make every transaction the calling thread committed final.  A commit
 * returns once the transaction is durable, but for one fence it leaves the
 * transaction judged by its declared bytes: until the thread's next
 * transaction logs a range (or this call), a crash keeps the transaction
 * only if those bytes still hold what it committed.  So a store OUTSIDE a
 * transaction into bytes the thread's last transaction declared must come
 * after vista_settle() (or go inside a transaction): otherwise a crash
 * before the thread's next transaction may roll the committed one back.
 * Outside a transaction it first makes a held no-flush group durable (as
 * vista_flush()); inside one it settles what was committed before it (a
 * held group stays held) and is needed only before the transaction's
 * first vista_set_range.  Returns 1 if it issued a fence -- every line
 * written back before it by this thread, in any pool of the instance, is
 * then durable too, so a caller that needed a fence of its own may skip
 * it -- 0 if nothing needed settling (no fence: the cost is a load),
 * VISTA_EFATAL, -EINVAL (NULL instance), -ENOTSUP (VISTA_MODE_REDO).
 */
VISTA_EXPORT int vista_settle(vista *v);
VISTA_EXPORT bool vista_in_transaction(const vista *v);
/* Give up the calling thread's log lane (threads keep their lane from
 * their first transaction until they exit).  VISTA_EINTX inside a
 * transaction. */
VISTA_EXPORT int vista_thread_detach(vista *v);

/*
 * With VISTA_TX_AUTO the segments are write-protected; the kernel cannot
 * fault a write into protected memory (read(2) into a protected buffer
 * fails with EFAULT).  Call this before handing such a buffer to the
 * kernel: it logs and opens the pages covering the range.
 */
VISTA_EXPORT int vista_prefault(vista *v, void *addr, size_t len);

/* ---- transaction hook (replication, libvista/replica) ---- */

/*
 * One range a transaction declared, as the hook sees it: `addr` holds the
 * bytes the transaction stored (its after-image) while the hook runs at
 * commit, and `before` the bytes it held before the transaction (its
 * before-image, `len` bytes, in the log), or NULL for a new range
 * (vista_set_range_new: no before-image; send it whole, and leave it at
 * an abort).  A byte may appear in two
 * ranges (an automatic transaction's page logged over a declared range);
 * the first range that holds it has its oldest image.
 */
struct vista_txrange {
	vista_segment *seg;
	void *addr;
	size_t len;
	const void *before;
};
struct vista_txinfo; /* the running transaction, valid during the hook */

#define VISTA_HOOK_COMMIT 1u /* before the commit makes anything durable */
#define VISTA_HOOK_ABORT 2u  /* before the before-images are put back */
/* vista_txinfo_flags() */
#define VISTA_TXI_HEAP (1u << 0) /* allocated or freed heap blocks */

/*
 * Called on the transaction's own thread.  At VISTA_HOOK_COMMIT a non-zero
 * return refuses the commit: vista_end_transaction/vista_chain_transaction
 * return it with the transaction still running and nothing changed (the
 * caller may abort it).  At VISTA_HOOK_ABORT the return is ignored.  Not
 * called for a transaction that declared nothing.  The hook must not call
 * transaction functions of the same instance.
 */
typedef int (*vista_tx_hook)(void *arg, unsigned event,
	struct vista_txinfo *tx);
/*
 * Install (fn non-NULL) or remove (fn NULL) the instance's hook.  Unset,
 * a commit pays one predictable branch.  Returns 0, -EINVAL (NULL v),
 * VISTA_EINTX (a transaction is running on some thread: nothing changed).
 */
VISTA_EXPORT int vista_set_tx_hook(vista *v, vista_tx_hook fn, void *arg);
/* The next declared range, in log order: 1 and *r, 0 at the end. */
VISTA_EXPORT int vista_txinfo_next(struct vista_txinfo *tx,
	struct vista_txrange *r);
/* VISTA_TXI_* of the transaction. */
VISTA_EXPORT unsigned vista_txinfo_flags(const struct vista_txinfo *tx);

/* ---- persistent heap (one per segment) ---- */

/*
 * Allocate from seg's heap; inside a transaction the allocation is undone
 * if the transaction aborts or the process crashes before commit.  Outside
 * a transaction it is its own small transaction.  Returns 0 and *ptr, or
 * VISTA_ENOMEM (the transaction stays abortable), -EINVAL.
 */
VISTA_EXPORT int vista_malloc(vista_segment *seg, size_t size, void **ptr);
/* Free at commit (immediately outside a transaction).  VISTA_EBADPTR for a
 * pointer that is not an allocated block of seg. */
VISTA_EXPORT int vista_free(vista_segment *seg, void *ptr);
/* The segment's root object: allocated zeroed, `size` bytes, the first time;
 * the same block afterwards (VISTA_ERANGE if size grew). */
VISTA_EXPORT int vista_root(vista_segment *seg, size_t size, void **root);

/* Usable bytes of an allocated block (its size class or page multiple). */
VISTA_EXPORT size_t vista_usable_size(const vista_segment *seg,
	const void *ptr);

struct vista_heap_info {
	uint64_t pages;        /* arena pages */
	uint64_t free_pages;
	uint64_t run_pages;    /* pages holding small blocks */
	uint64_t large_pages;  /* pages of large objects */
	uint64_t blocks;       /* allocated objects, small and large */
	uint64_t bytes;        /* their usable bytes */
};
/*
 * Walk the heap metadata and check its invariants (docs/FORMAT.md): every
 * page is free, a run or part of exactly one large object, and no bitmap
 * claims a block that cannot exist.  Returns 0 (info filled if non-NULL)
 * or VISTA_ECORRUPT with the first violation in vista_errormsg().
 * Blocks of transactions still running count as allocated.
 */
VISTA_EXPORT int vista_heap_check(vista_segment *seg,
	struct vista_heap_info *info);
/* Call fn for every allocated block, in address order; a non-zero return
 * stops the walk and is returned. */
VISTA_EXPORT int vista_heap_walk(vista_segment *seg,
	int (*fn)(void *ptr, size_t size, void *arg), void *arg);

/* ---- statistics ---- */

struct vista_stats {
	uint64_t tx_begun;
	uint64_t tx_committed;
	uint64_t tx_aborted;
	uint64_t set_ranges;       /* calls */
	uint64_t ranges_coalesced; /* ranges not copied again */
	uint64_t bytes_logged;     /* before-image bytes copied */
	uint64_t fences;           /* persist barriers (sfence in cacheline) */
	uint64_t flushes;          /* cache lines flushed */
	uint64_t auto_faults;      /* pages logged by VISTA_TX_AUTO */
	uint64_t recovered_tx;     /* transactions rolled back by recovery */
	uint64_t heap_allocs;
	uint64_t heap_frees;
	uint64_t auto_kept;        /* pages kept open and logged again by
				      vista_chain_transaction */
};
/* Counters of the instance, summed over every thread. */
VISTA_EXPORT int vista_stats(const vista *v, struct vista_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* VISTA_H */
