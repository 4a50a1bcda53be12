/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vista_int.h -- libvista internals shared between its source files
 *
 * The objects, from the instance down:
 *
 *   vista            one log pool, its lanes, the mapped segments (vista.c)
 *   vista_lane       DRAM state of one log lane: the transaction running on
 *                    it, its declared ranges, its open pages, its counters;
 *                    owned by one thread at a time (vista.c, tx.c)
 *   vista_segment    one mapped segment and its DRAM heap index
 *                    (segment.c, heap.c)
 *
 * Hot-path rules: a transaction touches only its own lane (written by the
 * owning thread alone, no atomics, no locks), the instance's read-mostly
 * fields, and the segment map through a seqlock read.  Counters are plain
 * per-lane fields read with relaxed loads by vista_stats().
 */
#ifndef VISTA_INT_H
#define VISTA_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include "heap_layout.h"
#include "log_layout.h"
#include "rio_assert.h"
#include "segment_layout.h"
#include "vista.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VISTA__LIKELY(x) __builtin_expect(!!(x), 1)
#define VISTA__UNLIKELY(x) __builtin_expect(!!(x), 0)
#define VISTA__HIDDEN __attribute__((visibility("hidden")))
#define VISTA__COLD __attribute__((cold, noinline))
#define VISTA__INLINE static inline __attribute__((always_inline))

/* Relaxed counter update by the owning thread: a plain add on x86, but a
 * data-race-free one for vista_stats() reading from another thread.
 * relaxed: one writer (the lane's owner), and a count orders nothing. */
#define VISTA__STAT_ADD(l, field, n)                                          \
	__atomic_store_n(&(l)->st.field,                                      \
		__atomic_load_n(&(l)->st.field, __ATOMIC_RELAXED) + (n),      \
		__ATOMIC_RELAXED)

/* The header rules' view of a log or segment header (the two share their
 * field names) and the codes both give (librio/hdr.c, H1..H8). */
#define VISTA__HDR_VIEW(h, csum_ok_)                                     \
	{                                                                \
		.magic = (h)->magic, .csum_ok = (csum_ok_),              \
		.major = (h)->major, .minor = (h)->minor,                \
		.incompat = (h)->incompat, .ro_compat = (h)->ro_compat,  \
		.compat = (h)->compat,                                   \
		.reserved = { { (h)->reserved, sizeof((h)->reserved) },  \
			{ &(h)->reserved0, sizeof((h)->reserved0) } },   \
	}
#define VISTA__HDR_CODES                                                 \
	{                                                                \
		[RIO__HDR_BADMAGIC] = VISTA_ECORRUPT,                    \
		[RIO__HDR_BADCSUM] = VISTA_ECORRUPT,                     \
		[RIO__HDR_VERSION] = VISTA_ELAYOUT,                      \
		[RIO__HDR_FEATURE] = VISTA_ELAYOUT,                      \
		[RIO__HDR_RESERVED] = VISTA_ECORRUPT,                    \
	}
/* The rule of either header, WHAT its name in messages and F its kind in
 * the constants' names (SEG, LOG): one policy for both. */
#define VISTA__HDR_RULE(WHAT, F)                                         \
	{                                                                \
		.what = (WHAT), .magic = VISTA_##F##_MAGIC,              \
		.magic_len = 8, .major = VISTA_##F##_MAJOR,              \
		.minor = VISTA_##F##_MINOR,                              \
		.fields = RIO__HDR_INCOMPAT | RIO__HDR_RO_COMPAT |       \
			RIO__HDR_COMPAT,                                 \
		.incompat_known = VISTA_##F##_INCOMPAT_KNOWN,            \
		.ro_compat_known = VISTA_##F##_RO_COMPAT_KNOWN,          \
		.compat_known = VISTA_##F##_COMPAT_KNOWN,                \
		.code = VISTA__HDR_CODES,                                \
	}

#define VISTA__SEGWORDS (VISTA_MAX_SEGMENTS / 64)
/* A transaction after a lazily truncated one starts where it ended while
 * that is within this many bytes of the start of the record area (L6). */
#define VISTA__LOG_WINDOW 4096

/* Per-lane segment masks (touched, allocd, freed, pend_segs).  relaxed:
 * one writer, the lane's owner (or recovery, under v->lock); another thread
 * reads a word whole (vista_unmap()'s seg_named()/seg_in_use(), under
 * v->lock), and what it decides from a bit is covered by the API rule that
 * a segment is not unmapped while a transaction uses it, not by the order
 * of these accesses. */
static inline void vista__bit_set(uint64_t *m, unsigned i)
{
	__atomic_store_n(&m[i / 64], m[i / 64] | (1ull << (i % 64)),
		__ATOMIC_RELAXED);
}
static inline bool vista__bit_test(const uint64_t *m, unsigned i)
{
	return (__atomic_load_n(&m[i / 64], __ATOMIC_RELAXED) >> (i % 64)) & 1;
}

/* ---- heap (heap.c) ---- */

/* DRAM index of one segment's heap; the persistent metadata is the truth. */
struct vista_heap {
	pthread_mutex_t lock;
	struct vista_heap_hdr *hh; /* persistent */
	uint64_t *pmap;            /* persistent page map */
	uint64_t (*bits)[VISTA_RUN_WORDS]; /* persistent run bitmaps */
	uint32_t npages;
	uint64_t *freemap;   /* DRAM: bit set = page FREE and available */
	uint32_t hint;       /* next-fit start for page searches */
	uint32_t nfree_pages;
	/* Runs with a free block, one doubly linked list per class, linked
	 * through per-page arrays (no allocation after open). */
	uint32_t head[VISTA_NCLASSES];
	uint32_t *lnext, *lprev; /* lprev == VISTA__UNLISTED: not listed */
	/* Blocks freed by transactions not committed yet (double-free
	 * detection): open addressing on arena offset + 1, 0 = empty. */
	uint64_t *pend;
	uint32_t pend_cap, pend_n;
	bool inited;
};
#define VISTA__NIL UINT32_MAX
#define VISTA__UNLISTED (UINT32_MAX - 1)

/* ---- segments (segment.c) ---- */

struct vista_segment {
	vista *v;
	rio_pool *pool;
	char *base;        /* mapping base (rio header) */
	char *user;        /* arena */
	size_t user_size;
	struct vista_seg_hdr *hdr;
	uint16_t idx;      /* segment table index */
	uint8_t uuid[16];
	dev_t dev;
	ino_t ino;
	int lock_fd;       /* flock(LOCK_EX) while mapped */
	bool prot;         /* arena write-protected between transactions */
	struct vista_heap heap;
};

/* One entry of the instance's segment map (seqlock-protected). */
struct vista_segslot {
	uintptr_t lo, hi; /* arena */
	struct vista_segment *seg;
};

/* ---- declared ranges of a transaction (ranges.c) ---- */

struct vista_ival {
	uintptr_t lo, hi;
	struct vista_segment *seg;
};

/* A run of the set: v[0..n), in order. */
struct vista_rrun {
	struct vista_ival *v;
	uint32_t n;
};

/*
 * Sorted, disjoint, non-adjacent intervals (ranges.c).  Flat while small:
 * v[0..n) is the set.  Chunked once it holds VISTA__RFLAT intervals: the
 * set is the runs c[0..nc), each a chunk of at most VISTA__RCHUNK, so an
 * insertion moves one chunk's tail, not the whole set's.
 */
#define VISTA__RFLAT 512u
#define VISTA__RCHUNK 64u
struct vista_ranges {
	struct vista_ival *v;
	uint32_t n, cap;         /* n: intervals in the set, in either form */
	struct vista_rrun *c;    /* NULL while flat */
	uint32_t nc, ccap;
	struct vista_ival **spare; /* free chunks, kept for the next */
	uint32_t nspare, spcap;
	uint32_t owed;           /* additions reserved and not made yet */
	struct vista_ival inl[16];
};

/* A gap of a new range that is not declared yet: what must be logged. */
struct vista_gap {
	uintptr_t lo, hi;
};

void vista__ranges_init(struct vista_ranges *r);
void vista__ranges_fini(struct vista_ranges *r);
void vista__ranges_unchunk(struct vista_ranges *r);
/* Empty the set (flat again). */
static inline void
vista__ranges_clear(struct vista_ranges *r)
{
	if (VISTA__UNLIKELY(r->c != NULL))
		vista__ranges_unchunk(r);
	r->n = 0;
	r->owed = 0;
}
/* The set as runs in order: *rr[0..return); flat, one run in *one. */
static inline uint32_t
vista__ranges_runs(const struct vista_ranges *r, const struct vista_rrun **rr,
	struct vista_rrun *one)
{
	if (VISTA__LIKELY(r->c == NULL)) {
		one->v = r->v;
		one->n = r->n;
		*rr = one;
		return 1;
	}
	*rr = r->c;
	return r->nc;
}
/*
 * Find the parts of [lo, hi) not yet declared: up to maxg gaps into g[]
 * (returns the number; maxg + 1 means "more than maxg").  Read-only.
 */
uint32_t vista__ranges_gaps(const struct vista_ranges *r, uintptr_t lo,
	uintptr_t hi, struct vista_gap *g, uint32_t maxg);
/* Add [lo, hi) (merging).  0 or -ENOMEM (the set is unchanged then); only
 * 0 within a reservation. */
int vista__ranges_add(struct vista_ranges *r, uintptr_t lo, uintptr_t hi,
	struct vista_segment *seg);
/* Is addr inside a declared interval?  Async-signal-safe. */
bool vista__ranges_contains(const struct vista_ranges *r, uintptr_t addr);
/* Room for `more` additions without allocating (a large set is made
 * chunked here).  Reservations do not add up: the largest one not used up
 * holds until the set is cleared.  0 or -ENOMEM. */
int vista__ranges_reserve(struct vista_ranges *r, uint32_t more);

/* ---- pages opened for writing in a protected segment (auto.c) ---- */

#define VISTA__PG_FULL 1u /* page's whole before-image is logged */

struct vista_pageset {
	uint64_t *slot;  /* page address | segment index << 4 | flags */
	uint64_t *scratch; /* for sorting at re-protection */
	uint32_t *order; /* slots in insertion order */
	uint32_t cap, n; /* cap: power of two */
	size_t bytes;    /* of the mapping holding slot + order */
	/* Pages the lane's previous transaction had open and protected
	 * again (sorted addresses, in scratch): a page opened again right
	 * away is hot (auto.c, chaining). */
	const uint64_t *prev;
	uint32_t nprev;
};

/* ---- lanes ---- */

/*
 * The transaction state machine.
 *
 * Two levels: the instance (v->fatal) and, under it, each lane
 * (l->state), changed only by the lane's owning thread.
 *
 * Instance:
 *
 *      vista_init (recovery)             vista__set_fatal(v, rc, what)
 *     -----------------------> OPEN -----------------------------> FATAL
 *                                |                                   |
 *                                +---------> vista_fini <------------+
 *
 *   OPEN   v->fatal == 0: transactions begin, commit and abort.
 *   FATAL  v->fatal != 0, the first cause, sticky (compare-and-swap
 *          from 0; nothing stores 0 again): a flush, drain, msync or
 *          re-protection failed, so what is durable is uncertain
 *          (STYLE: failures stick).  Begin and commit are refused with
 *          VISTA_EFATAL; abort still rolls back in memory and returns
 *          VISTA_EFATAL; mapping a segment is refused.  Only vista_fini
 *          and vista_init again (which rolls back from the log) leave it.
 *
 * Lane (enum vista_tx_state):
 *
 *     +----------- begin (begin_slow) ----------------+
 *     |                                               v
 *   IDLE <------ fast commit (commit) ------------- ACTIVE
 *    ^ ^                                            ^ |  |
 *    | |                                      chain | |  |
 *    | |                                            | v  |
 *    | +------ truncated (finish) ---------- COMMITTING  | abort, thread
 *    |                                                   | exit (vista__
 *    |                                                   v tx_abort_lane)
 *    +------ rolled back, truncated (finish) ------- ABORTING
 *
 *   (ACTIVE -> COMMITTING: commit_slow, an end or chain with FREE
 *   records, open pages, or in the page domain.)
 *
 * Transitions, each with what triggers it (every one through
 * vista__lane_set_state(), which asserts M1):
 *   IDLE -> ACTIVE          vista_begin_transaction; also vista_malloc /
 *                           vista_free outside a transaction (their own).
 *   ACTIVE -> IDLE          vista_end_transaction when nothing was logged,
 *                           or only declared ranges: flush, drain,
 *                           truncate (T2) in commit(), then finish().
 *   ACTIVE -> COMMITTING    end/chain of a transaction with FREE records,
 *                           open pages or in the page domain (commit_slow).
 *   COMMITTING -> IDLE      its truncation done (T2), finish(); also when
 *                           an msync failed (the instance is then FATAL).
 *   COMMITTING -> ACTIVE    vista_chain_transaction of an automatic
 *                           transaction: the next one begins with the
 *                           changed pages still open (chain_next).
 *   ACTIVE -> ABORTING      vista_abort_transaction, a chain whose pages
 *                           could not be protected again, or the owning
 *                           thread exiting inside a transaction
 *                           (vista__tx_abort_lane).
 *   ABORTING -> IDLE        before-images back in place and the log
 *                           truncated (T3), finish().
 * A FATAL instance stops no transition already under way: a lane in
 * COMMITTING or ABORTING finishes to IDLE (or ACTIVE, chain, which then
 * aborts); from then on IDLE -> ACTIVE is refused.
 *
 * Invariants
 *   M1. l->state changes only along an edge above, only in
 *       vista__lane_set_state().
 *   M2. A lane in IDLE holds no record of its DRAM state (nrec == 0,
 *       cur == rec0) and no declared range; its persistent records, if
 *       any, are of an older generation (L3) -- unless it holds a
 *       no-flush group (held, tx.c N1): then they are the group's, of
 *       the lane's generation, and durable or rolled back together.
 *   M3. v->fatal, once set, is never cleared in that instance.
 */
enum vista_tx_state {
	VISTA__TX_IDLE = 0,
	VISTA__TX_ACTIVE,     /* begin .. end/abort */
	VISTA__TX_COMMITTING, /* inside vista_end_transaction */
	VISTA__TX_ABORTING,   /* inside vista_abort_transaction */
};

/* The edges of the lane state machine, one bit each (M1). */
#define VISTA__TX_EDGE(from, to) \
	(1u << ((unsigned)(from) * 4u + (unsigned)(to)))
#define VISTA__TX_EDGES \
	(VISTA__TX_EDGE(VISTA__TX_IDLE, VISTA__TX_ACTIVE) | \
	 VISTA__TX_EDGE(VISTA__TX_ACTIVE, VISTA__TX_IDLE) | \
	 VISTA__TX_EDGE(VISTA__TX_ACTIVE, VISTA__TX_COMMITTING) | \
	 VISTA__TX_EDGE(VISTA__TX_ACTIVE, VISTA__TX_ABORTING) | \
	 VISTA__TX_EDGE(VISTA__TX_COMMITTING, VISTA__TX_IDLE) | \
	 VISTA__TX_EDGE(VISTA__TX_COMMITTING, VISTA__TX_ACTIVE) | \
	 VISTA__TX_EDGE(VISTA__TX_ABORTING, VISTA__TX_IDLE))

struct vista_lane {
	/* Hot: written only by the owning thread. */
	vista *v;
	struct vista_lane_hdr *hdr; /* persistent */
	char *rec0;     /* record area */
	char *end;      /* end of the lane */
	char *cur;      /* where the next record goes */
	char *start;    /* the transaction's first record goes (went) here */
	struct vista_lane_commit *cl; /* persistent commit records */
	/* A commit ended with no fence after it (lazy, read by other
	 * threads: atomic): its truncation is stored but not durable yet,
	 * or (v->solo) not stored at all; its records [old_lo, old_hi) stay
	 * alive on media until a later fence ends them (log.c L6, L7).
	 * lazy_gen: the floor that ends them (atomic, written before lazy).
	 * hdr_busy: taken to store the floor when v->solo (L7). */
	bool lazy;
	char *old_lo, *old_hi;
	uint64_t lazy_gen;
	int hdr_busy;
	bool unlogged;  /* a range declared without its before-image */
	bool unfenced;  /* the newest record is not fenced yet (L4) */
	char *clean;    /* below this the record area holds, durably, what
			   this process wrote there (L5 in log.c) */
	uint32_t last;  /* stride of the newest record, 0 if none */
	uint32_t nrec;  /* records of the current transaction */
	uint64_t gen;   /* the running generation, >= hdr->gen (log.c L3) */
	uint64_t seed;  /* salt ^ lane index: record check seed */
	unsigned state; /* enum vista_tx_state */
	unsigned flags; /* VISTA_TX_* of the running transaction */
	uint32_t nfree_recs; /* FREE records in the current transaction */
	uint32_t nalloc_recs;
	bool prot_used; /* the transaction opened pages */
	/* No-flush group (VISTA_TX_NO_FLUSH): committed transactions whose
	 * records, ranges and touched segments stay in the lane until the
	 * group commits durably (tx.c N1-N3).  nrec0: records of the group
	 * before the running transaction.  vu/vub: the running transaction's
	 * before-images in DRAM, for its own abort while a group is held. */
	bool held;
	/* Long images still to copy without comparing (log.c L5): set when
	 * a compared image had no line in common with the lane. */
	uint16_t diff_skip;
	uint32_t nrec0;
	struct vista__vundo {
		uintptr_t a;
		size_t len, off;
	} *vu;
	uint32_t vu_n, vu_cap;
	char *vub;
	size_t vub_n, vub_cap;

	/* Segment lookup cache: valid while v->seq == cseq. */
	uint64_t cseq;
	uintptr_t clo, chi;
	struct vista_segment *cseg;

	struct vista_ranges ranges;
	struct vista_pageset open;
	/* What an undo (abort, recovery) stored to, flushed once per line
	 * when it ends (tx.c); grows, never shrinks. */
	struct vista__span *undo;
	uint32_t undo_n, undo_cap;
	uint32_t open_runs_limit; /* past this many open pages, open groups */

	/* Segment table indices this transaction has records for, and those
	 * with FREE records (relaxed stores: vista_unmap reads them). */
	uint64_t touched[VISTA__SEGWORDS];
	uint64_t freed[VISTA__SEGWORDS];  /* with FREE records */
	uint64_t allocd[VISTA__SEGWORDS]; /* with ALLOC records */
	uint64_t locked[VISTA__SEGWORDS]; /* heaps locked by commit/abort */

	struct vista_stats st;

	/* Ownership (vista.c): token of the owning thread, 0 if none. */
	uint64_t owner;
	struct vista_lane *tnext; /* thread's list of lanes in a transaction */
	unsigned idx;

	/* Recovery (recover.c): the lane holds a transaction of a previous
	 * run that is not rolled back in every segment yet. */
	bool pending;
	uint64_t pend_segs[VISTA__SEGWORDS]; /* segments still to roll back */
	/* Its commit record is valid for its generation (C6): it committed
	 * if the segment's bytes match csum. */
	bool commit_seen, keep;
	uint64_t commit_csum;
	uint16_t commit_seg;
} __attribute__((aligned(64)));

/* The one place a lane changes state (M1). */
static inline void
vista__lane_set_state(struct vista_lane *l, enum vista_tx_state to)
{
	VISTA_ASSERT(l->state < 4 &&
		(VISTA__TX_EDGES & VISTA__TX_EDGE(l->state, to)), "M1");
	l->state = to;
}

/* ---- the instance ---- */

struct vista {
	/* Read-mostly after init. */
	uint64_t id;
	rio_pool *log;
	struct vista_log_hdr *lhdr;
	struct vista_segent *segtab;
	struct vista_lane *lanes;
	unsigned nlanes;
	size_t lane_size;
	uint64_t salt;
	uint8_t log_uuid[16]; /* the log pool's uuid: segments bind to it */
	bool sealed;      /* byte domain: program order; no flush, no tag fence */
	bool page_domain; /* msync domain: check rio_pool_error at commit */
	unsigned lanes_seen; /* lanes [0, lanes_seen) were ever owned */
	bool solo;        /* one lane: a commit stores no truncation (L7) */
	bool new_ok;      /* the log may hold new ranges (VISTA_LOG_INCOMPAT_NEW):
			     else they are logged with their before-image */
	unsigned seg_rio_flags; /* rio flags every segment is opened with */
	int fatal;        /* sticky VISTA_EFATAL cause (atomic), 0 if none */
	bool protect;     /* RIO_PROTECT: segments protected from the start */
	bool auto_on;     /* an automatic transaction ran: segments protected */
	uint32_t vma_limit; /* open pages per lane before opening groups */
	vista_tx_hook tx_hook; /* vista_set_tx_hook(), NULL if none */
	void *tx_hook_arg;

	/* Mapped segments: seqlock (odd while changing). */
	uint64_t seq __attribute__((aligned(64)));
	uint32_t nmap;
	struct vista_segslot map[VISTA_MAX_SEGMENTS];
	struct vista_segment *byidx[VISTA_MAX_SEGMENTS];

	/* Cold. */
	pthread_mutex_t lock __attribute__((aligned(64)));
	uint64_t seg_serial;
	int log_lock_fd;
	bool hook_added;
	struct vista *gnext; /* global list of live instances */
	struct vista_redo *redo; /* VISTA_MODE_REDO (redo.c), else NULL */
};

/* The cursor vista_txinfo_next() walks: the lane's records from start
 * to cur, each RANGES record's descriptors in order. */
struct vista_txinfo {
	struct vista_lane *l;
	const char *pos;   /* current record, NULL before the first */
	const char *data;  /* image of descriptor i */
	unsigned i;
};

/* tx.c: run the hook of v for the lane's transaction, if there is one. */
int vista__tx_hook(struct vista_lane *l, unsigned event);

/* ---- vista.c ---- */

/* Per-thread state.  The first three fields cache the lane of the instance
 * used last, so that a transaction call finds its lane with two loads. */
struct vista__tls {
	const vista *v;
	uint64_t vid;
	struct vista_lane *lane;
	struct vista_lane *txs; /* this thread's lanes inside a transaction */
	uint64_t token;         /* unique per thread, 0 until first needed */
	void *rec;              /* lanes owned, released at thread exit */
	bool altstack;          /* rio_sigaltstack_ensure() done */
};
extern __thread struct vista__tls vista__tls
	__attribute__((tls_model("initial-exec"))) VISTA__HIDDEN;

static inline struct vista_lane *
vista__lane_fast(const vista *v)
{
	if (VISTA__LIKELY(vista__tls.v == v && v != NULL &&
		    vista__tls.vid == v->id))
		return vista__tls.lane;
	return NULL;
}

/* The calling thread's lane of v, acquiring one if it has none (slow
 * path).  NULL with the error set (VISTA_ENOLANE, VISTA_EPENDING). */
struct vista_lane *vista__lane_get(vista *v, int *rc);
/* The calling thread's lane of v if it has one, else NULL. */
struct vista_lane *vista__lane_peek(const vista *v);
void vista__tx_pop_slow(struct vista_lane *l);
static inline void
vista__tx_push(struct vista_lane *l)
{
	l->tnext = vista__tls.txs;
	vista__tls.txs = l;
}
static inline void
vista__tx_pop(struct vista_lane *l)
{
	if (VISTA__LIKELY(vista__tls.txs == l))
		vista__tls.txs = l->tnext;
	else
		vista__tx_pop_slow(l);
}
/* Commit a held no-flush group durably (tx.c); 0 if none is held. */
int vista__flush_held(struct vista_lane *l);
/* The first lane of this thread with a transaction (fault hook). */
struct vista_lane *vista__tx_first(void);
int vista__set_fatal(vista *v, int rc, const char *what);

/* Persist barrier of the instance: every pool shares the log's domain. */
static inline void
vista__drain(struct vista_lane *l)
{
	rio_drain(l->v->log);
	l->unfenced = false;
	VISTA__STAT_ADD(l, fences, 1);
}

/* Flush [addr, addr+len) of pool p, counting lines. */
static inline void
vista__flush(struct vista_lane *l, const rio_pool *p, const void *addr,
	size_t len)
{
	rio_flush(p, addr, len);
	if (!l->v->sealed && len) {
		uintptr_t a = (uintptr_t)addr & ~(uintptr_t)63;
		VISTA__STAT_ADD(l, flushes,
			((uintptr_t)addr + len - a + 63) / 64);
	}
}

/*
 * Write a header whose first 8 bytes are its magic (log, segment): the
 * body first, made durable, then the magic with one 8-byte store, made
 * durable.  A crash in between leaves magic zero: "never finished".
 */
static inline void
vista__write_header(const rio_pool *p, void *dst, const void *src, size_t n)
{
	memcpy((char *)dst + 8, (const char *)src + 8, n - 8);
	rio_flush(p, dst, n);
	/* The body is durable before the magic declares it valid... */
	rio_drain(p);
	/* relaxed: an 8-byte store that must not tear; ordering comes from
	 * the drain above and the persist below. */
	__atomic_store_n((uint64_t *)dst, *(const uint64_t *)src,
		__ATOMIC_RELAXED);
	/* ...and the magic before anything relies on the header. */
	rio_persist(p, dst, 8);
}

/* ---- segment.c ---- */

/* Segment whose arena holds [addr, addr+len), through the lane's cache;
 * NULL if none.  Async-signal-safe when `cache` is false. */
struct vista_segment *vista__seg_lookup(struct vista_lane *l, uintptr_t addr,
	size_t len, bool cache);
static inline struct vista_segment *
vista__seg_find(struct vista_lane *l, uintptr_t a, size_t len)
{
	/* The lane's cached lookup is still good if the map's seqlock count
	 * has not moved since (vista__seg_lookup()).  Acquire pairs with
	 * the release store in map_write_end(), but is stronger than needed:
	 * an unchanged count means this thread already synchronized with the
	 * map state it cached, so relaxed would do (same instruction on
	 * x86). */
	if (VISTA__LIKELY(__atomic_load_n(&l->v->seq, __ATOMIC_ACQUIRE) ==
			    l->cseq &&
		    a >= l->clo && a < l->chi && len <= l->chi - a))
		return l->cseg;
	return vista__seg_lookup(l, a, len, true);
}
int vista__seg_unmap_all(vista *v);

/* ---- log.c ---- */

/* Where a record of `len` bytes would go, or NULL if the lane is full. */
/* Make the lane's lazy truncation durable (L6 in log.c): flush, fence. */
void vista__lazy_settle(struct vista_lane *l);
/* Write back the header of every other lane with a lazy truncation (L6);
 * the caller's fence makes them durable. */
void vista__lazy_cover(struct vista_lane *l);
/* Checksum chain of the bytes at base that the RANGES records of the
 * lane's transaction (l->start .. l->cur) describe in segment-table entry
 * seg, in record and descriptor order, for generation l->gen; *other: a
 * record describes something else (another segment, heap objects). */
uint64_t vista__after_csum(const struct vista_lane *l, const char *base,
	unsigned seg, bool *other);
static inline char *
vista__log_room(struct vista_lane *l, size_t len)
{
	size_t stride = (len + VISTA_REC_ALIGN - 1) & ~(size_t)(VISTA_REC_ALIGN - 1);
	if (VISTA__UNLIKELY(len > UINT32_MAX ||
		    stride > (size_t)(l->end - l->cur)))
		return NULL;
	/* L6: the records of a commit whose truncation is not durable yet
	 * are not written over. */
#ifdef VISTA_BROKEN_SOLO_OVERWRITE
	/* wrong: with one lane, the old records are taken as dead before
	 * the record that ends them is durable (L7) */
	if (l->v->solo)
		return l->cur;
#endif
	if (VISTA__UNLIKELY(l->lazy) && l->cur < l->old_hi &&
	    l->cur + stride > l->old_lo)
		vista__lazy_settle(l);
	return l->cur;
}
/*
 * Judge the record at pos of a lane for generation gen (L4 in log.c):
 * VISTA__REC_OK, VISTA__REC_END (no tag of gen there: never written),
 * VISTA__REC_TORN (its tag is there but its header or check fails: torn if
 * nothing of gen follows it, else corrupt; recover.c C2), or VISTA__REC_BAD
 * (corrupt whatever follows; *why says how, for TORN too).
 */
enum { VISTA__REC_OK, VISTA__REC_END, VISTA__REC_BAD, VISTA__REC_TORN };
int vista__log_check(uint64_t seed, uint64_t gen, const char *rec0,
	const char *end, const char *pos, const char **why);
uint64_t vista__log_seed(uint64_t salt, unsigned lane);
/* Store the generation floor g (gen_check first, then gen) unless the
 * header holds a higher one; under hdr_busy when v->solo (L7 in log.c). */
void vista__floor_store(struct vista_lane *l, uint64_t g);
/* Truncate: hdr->gen = gen + 1, made durable (L3 in log.c). */
VISTA__INLINE void
vista__log_truncate(struct vista_lane *l)
{
	/* L3: the persistent floor is at most the DRAM generation. */
	VISTA_ASSERT(l->gen >= l->hdr->gen, "L3");
	/* gen + 1 and its check, in one line: a crash that keeps one of
	 * the two is read as the generation the stored check names
	 * (log_layout.h)...  relaxed: 8-byte stores that must not tear;
	 * ordering comes from the flush and drain that follow. */
	if (VISTA__UNLIKELY(l->v->solo)) {
		vista__floor_store(l, l->gen + 1);
	} else {
		__atomic_store_n(&l->hdr->gen_check,
			vista_lane_gen_check(l->seed, l->gen + 1),
			__ATOMIC_RELAXED);
		__atomic_store_n(&l->hdr->gen, l->gen + 1, __ATOMIC_RELAXED);
	}
	/* Once durable the whole transaction is discarded: nothing after
	 * this may assume the old records are still live, and the next
	 * transaction's records (gen + 1) must not become valid before the
	 * old ones are dead. */
	vista__flush(l, l->v->log, l->hdr, sizeof(*l->hdr));
	vista__drain(l);
	l->gen++;
	if (VISTA__UNLIKELY(l->lazy))
		/* release: as in seal_rec() (log.c); the drain above also
		 * completed an earlier lazy truncation (L6). */
		__atomic_store_n(&l->lazy, false, __ATOMIC_RELEASE);
}
/* Forget the records in DRAM (cursor back to the start of the lane). */
static inline void
vista__log_reset(struct vista_lane *l)
{
	l->cur = l->start = l->rec0;
	l->unlogged = false;
	l->last = 0;
	l->nrec = 0;
	l->nfree_recs = 0;
	l->nalloc_recs = 0;
}
/* Append a RANGES record for the given gaps (all in one segment each);
 * the last nnew of the n spans are new ranges: their coordinates only, no
 * before-image (log_layout.h, vista_rec nnew).  Returns 0 or
 * VISTA_ELOGFULL (nothing written). */
struct vista__span {
	uintptr_t lo, hi;
	struct vista_segment *seg;
};
int vista__log_ranges(struct vista_lane *l, const struct vista__span *s,
	uint32_t n, uint32_t nnew);
/* vista__log_ranges() for the common batch: n sorted, disjoint spans of
 * seg, each at most VISTA_RDESC_MAX_LEN bytes, copied whole (no line
 * compared with what the lane holds, L5). */
int vista__log_batch(struct vista_lane *l, struct vista_segment *seg,
	const struct vista_gap *g, uint32_t n, uint32_t nnew);
/* The common case: one range of one segment. */
int vista__log_one(struct vista_lane *l, struct vista_segment *seg,
	uintptr_t lo, size_t n);
int vista__log_objs(struct vista_lane *l, uint16_t type,
	const struct vista_robj *o, uint32_t n);

/* ---- tx.c ---- */

/* Declare a range internally (heap metadata, root): same as set_range but
 * for any part of the segment mapping.  `log` false: only remember it for
 * the commit flush (fresh allocations, logically logged metadata). */
int vista__declare(struct vista_lane *l, struct vista_segment *seg,
	void *addr, size_t len, bool log);
/* Abort the transaction of lane l (any thread may call it for a lane whose
 * owner is gone). */
int vista__tx_abort_lane(struct vista_lane *l);
/* Undo records newest first, for segment `only` (NULL = all): used by
 * abort (recovering = false) and recovery (true).  Every line it stored to
 * is flushed once, after its last store; the caller fences. */
void vista__undo(vista *v, struct vista_lane *l, const struct vista_segment
	*only, bool recovering);
/* In an undo: [addr, addr+len) of seg was stored to; flush it with the
 * rest at the end of the undo. */
void vista__undo_note(struct vista_lane *l, struct vista_segment *seg,
	const void *addr, size_t len);

/* ---- heap.c ---- */

int vista__heap_open(struct vista_segment *seg);
void vista__heap_close(struct vista_segment *seg);
/* Roll back one object of an ALLOC or FREE record on the persistent
 * metadata (stores, noted for the undo's flush; no drain).  recovering: after a crash, a
 * FREE may have been applied already and is undone too. */
void vista__heap_undo(struct vista_lane *l, struct vista_segment *seg,
	uint16_t type, const struct vista_robj *o, bool recovering);
/* Commit and abort of a transaction with heap records: lock the heaps it
 * freed in (and, aborting, allocated in), in segment order ... */
void vista__heap_lock(struct vista_lane *l, bool aborting);
/* ... apply its frees to the persistent metadata (commit; no drain) ... */
void vista__heap_commit_frees(struct vista_lane *l);
/* ... and, once the log is truncated, update the DRAM indexes and unlock.
 * Until then no other transaction can reuse a block whose state is not
 * durable yet. */
void vista__heap_after(struct vista_lane *l, bool committed);
/* Before recovery stores anything: every page map entry verifies, and so
 * does hh, the heap header recovery will leave; every run's bitmap agrees
 * with its check but for bits of the named blocks (page * 256 + block,
 * sorted), the only ones a crash can leave out of step (A6).  0 or
 * VISTA_ECORRUPT. */
int vista__heap_precheck(const struct vista_segment *seg,
	const unsigned char hh[VISTA_HEAP_HDR_SIZE], const uint64_t *named,
	size_t nnamed);
/* Is o a well-formed object of seg's heap?  (recovery) */
bool vista__heap_obj_ok(const struct vista_segment *seg,
	const struct vista_robj *o);

/* ---- recover.c ---- */

/* At init: scan every lane, find pending transactions.  0 or
 * VISTA_ECORRUPT (nothing changed). */
int vista__recover_scan(vista *v);
/* At map: roll back what pending lanes did to seg. */
int vista__recover_segment(vista *v, struct vista_segment *seg);
/* Segment table indices named by pending lanes. */
void vista__pending_refs(const vista *v, uint64_t out[VISTA__SEGWORDS]);
bool vista__segent_valid(const vista *v, unsigned i);

/* ---- auto.c ---- */

int vista__pageset_init(struct vista_pageset *s, uint32_t cap);
void vista__pageset_fini(struct vista_pageset *s);
/* Protection of a segment's arena: on at map (RIO_PROTECT) or at the first
 * automatic transaction. */
int vista__protect_segment(struct vista_segment *seg);
/* Register the fault hook (once per process). */
int vista__auto_init(void);
/* First automatic transaction of the instance: protect every segment. */
int vista__auto_begin(vista *v);
/* Open the pages covering [lo, hi) for this transaction: with `full`, log
 * each page's before-image first (automatic ranges, prefault).  Normal
 * context. */
int vista__open_pages(struct vista_lane *l, struct vista_segment *seg,
	uintptr_t lo, uintptr_t hi, bool full);
/* Flush the fully logged open pages (commit), then after the truncation
 * re-protect every open page and forget them. */
void vista__open_flush(struct vista_lane *l);
void vista__open_reprotect(struct vista_lane *l);
/* Chaining, after the commit's truncation: keep open the pages the
 * committed transaction changed, logged (durably) as the first records of
 * the lane's new transaction; protect the others.  Returns the number of
 * pages kept. */
uint32_t vista__open_chain(struct vista_lane *l);
/* Is the page holding addr open in this transaction? */
bool vista__page_open(const struct vista_lane *l, uintptr_t addr);

/* ---- err.c ---- */
#define vista__err(rc, ...) rio_seterr((rc), __VA_ARGS__)

/* Open (or create) a log pool of rio layout `layout` and lock it; a pool
 * of another layout is VISTA_ELAYOUT, "PATH is not a <other>" (vista.c). */
int vista__log_pool_open(const struct vista_opts *o, const char *layout,
	const char *other, rio_pool **pool, int *lock_fd);

/* Redo mode (redo.c): the public calls hand an instance with v->redo set
 * to these. */
int vista__redo_init(vista *v, const struct vista_opts *o);
int vista__redo_fini(vista *v);
void vista__redo_free(vista *v);
int vista__redo_map(vista *v, const char *path, void *addr, size_t size,
	unsigned flags, vista_segment **out);
int vista__redo_unmap(vista_segment *s);
int vista__redo_persist(vista_segment *s, const void *addr, size_t len);
int vista__redo_begin(vista *v, unsigned flags);
int vista__redo_set_range(vista *v, void *addr, size_t len);
int vista__redo_set_ranges(vista *v, size_t n, const struct vista_range *rg);
int vista__redo_commit(vista *v);
int vista__redo_abort(vista *v);
bool vista__redo_in_tx(const vista *v);
void vista__redo_stats(const vista *v, struct vista_stats *out);
int vista__redo_refuse(const char *call);
unsigned vista__redo_pending(const vista *v);

#ifdef __cplusplus
}
#endif

#endif /* VISTA_INT_H */
