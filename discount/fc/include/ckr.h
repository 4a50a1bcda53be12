/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckr.h -- checkpoint recovery for frequently consistent applications
 *
 * After Cao et al., "Fast checkpoint recovery algorithms for frequently
 * consistent applications" (SIGMOD'11), Interface 1 in C.  An application
 * whose state is an array of fixed-size objects reaches frequent points of
 * consistency (a game tick, a batch of stored procedures).  At such a point
 * it calls ckr_point_of_consistency(); the library then takes a consistent
 * checkpoint of the whole state and an asynchronous writer thread writes it
 * to stable storage in the background, into one of two slots (double
 * backup).  The application logs its logical actions (ckr_log_append); a
 * logger thread makes them durable in groups.  Recovery (ckr_open of an
 * existing directory) loads the newest complete checkpoint and hands every
 * logged action after it to the application's replay callback.
 *
 * The state is nwords 32-bit words (obj_size / 4 words per object) that the
 * library allocates; the mutator reads and writes them only through
 * ckr_read() and ckr_write(), inline functions below (the hot path).  What
 * they do depends on the algorithm, chosen at open:
 *
 *   CKR_NAIVE   Naive-Snapshot: a synchronous copy of the state at the
 *               point of consistency; handlers do nothing extra.
 *   CKR_BACOU   Copy-on-Update, block aligned, one lock per object: the
 *               first write to an object in a period copies it aside.
 *   CKR_BAZZ    Wait-Free Zigzag, bit-array packed: two copies AS0/AS1 and
 *               bits MR/MW packed per 256 words in one cache line; a bulk
 *               negation MW = ~MR at each period.
 *   CKR_IPP     Wait-Free Ping-Pong, interleaved: AS, Odd, Even and their
 *               marks in one 16-byte record per word; a pointer swap at
 *               each period.
 *   CKR_FORK    the fork() copy-on-write snapshot (Redis BGSAVE): the
 *               point of consistency forks a child that writes the state.
 *
 * Threads: one mutator thread calls ckr_read/ckr_write/
 * ckr_point_of_consistency/ckr_log_append; the library runs a writer and a
 * logger thread.  Conventions as in rio.h: 0 or a negative code
 * (CKR_E*, -34000..-34999, or -errno), a thread-local message
 * (ckr_errormsg), failures stick (the handle then refuses further work).
 * The manual is docs/ckr.md; the formats are in docs/FORMAT.md.
 */
#ifndef CKR_H
#define CKR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CKR_EXPORT __attribute__((visibility("default")))

/* XX(name, value, message): the enum, ckr_strerror and ckr_err_name. */
#define CKR_ERRNO_MAP(XX)                                                    \
	XX(CKR_EINVAL, -34001, "invalid argument")                           \
	XX(CKR_EBADMAGIC, -34002, "not a ckr file (bad magic)")              \
	XX(CKR_ECORRUPT, -34003, "checkpoint or log is corrupt")             \
	XX(CKR_EVERSION, -34004, "format of another major version or feature") \
	XX(CKR_ESIZE, -34005, "state or object size does not match")         \
	XX(CKR_EMISMATCH, -34006, "checkpoint belongs to another log")       \
	XX(CKR_ELOGFULL, -34007, "the logical log is full")                  \
	XX(CKR_EFATAL, -34008, "handle is in an error state; reopen it")     \
	XX(CKR_ERECORD, -34009, "log record too large")                      \
	XX(CKR_EREPLAY, -34010, "the replay callback failed")                \
	XX(CKR_EDATA, -34011, "checkpoint data does not match its header")  \
	XX(CKR_ENOHUGE, -34012, "not enough huge pages reserved (vm.nr_hugepages)")

#define CKR__ERRNO_ENUM(name, value, msg) name = (value),
enum ckr_errno { CKR_ERRNO_MAP(CKR__ERRNO_ENUM) };
#undef CKR__ERRNO_ENUM

CKR_EXPORT const char *ckr_strerror(int rc);
CKR_EXPORT const char *ckr_err_name(int rc);
CKR_EXPORT const char *ckr_errormsg(void);

enum ckr_algo {
	CKR_NAIVE = 1,
	CKR_BACOU = 2,
	CKR_BAZZ = 3,
	CKR_IPP = 4,
	CKR_FORK = 5,
};

enum ckr_storage {
	CKR_STORAGE_FILE = 1, /* files, made durable with fdatasync */
	CKR_STORAGE_POOL = 2, /* rio pools, made durable with rio_persist */
};

/* Parse "naive", "bacou", "bazz", "ipp", "fork" (0 if unknown) and back. */
CKR_EXPORT enum ckr_algo ckr_algo_parse(const char *s);
CKR_EXPORT const char *ckr_algo_name(enum ckr_algo a);

typedef struct ckr ckr;

/*
 * A logged action handed back at recovery, in log order; seq counts actions
 * from 0.  Return 0, or anything else to stop recovery (CKR_EREPLAY).
 */
typedef int (*ckr_replay_fn)(void *ctx, ckr *c, uint64_t seq,
	const void *rec, size_t len);

struct ckr_opts {
	enum ckr_algo algo;       /* required */
	enum ckr_storage storage; /* required */
	uint64_t nobjs;           /* objects in the state (>= 1) */
	uint32_t obj_size;        /* bytes per object: a power of two >= 4 */
	uint64_t log_capacity;    /* record bytes the log may hold; 0: 64 MiB */
	uint32_t rio_flags;       /* pool storage: RIO_FORCE_* for the pools */
	ckr_replay_fn replay;     /* recovery: required if the log is not empty */
	void *replay_ctx;
	uint32_t flags;           /* CKR_HUGEPAGES, CKR_HUGETLB */
	uint32_t log_group;       /* the logger commits once this many
	                           * actions wait, or when one is waited
	                           * for; 0 or 1: at every append */
};

/*
 * ckr_opts.flags: CKR_HUGEPAGES backs the state and the algorithm's copies
 * with transparent huge pages (2 MiB, madvise(MADV_HUGEPAGE)), which cuts
 * the mutator's TLB misses (Section 5.6).  Best effort: where the kernel
 * has none to give, the pages stay small (ckr_stats.huge_bytes says how
 * much of the state got them).  No effect on the stored formats.
 */
#define CKR_HUGEPAGES 1u
/*
 * CKR_HUGETLB takes the state and the copies from the kernel's reserved
 * huge pages instead (MAP_HUGETLB, 2 MiB): all of them huge, or ckr_open
 * fails with CKR_ENOHUGE when vm.nr_hugepages holds too few free pages
 * (the message says how many are free).  Exclusive with CKR_HUGEPAGES;
 * refused (CKR_EINVAL) with CKR_FORK, whose child's copies on write would
 * draw on the same reserve.
 */
#define CKR_HUGETLB 2u

/*
 * Open the checkpoint directory `dir` (created if missing): files
 * "ckpt" and "log" (file storage) or the rio pools "ckpt.pool" and
 * "log.pool" (pool storage).  If they exist, recover: choose the valid slot
 * of the highest epoch (a torn or corrupt slot is never chosen; with one
 * slot bad the other is used), load it as the state, then call
 * opts->replay for every durable logged action with seq >= the slot's
 * log_seq (from 0 if no slot was ever completed).  Then start the writer
 * and logger threads.  The state starts zeroed in a new directory.
 *
 * Returns 0, CKR_EINVAL (options), CKR_ESIZE (the files were made for
 * another nobjs/obj_size), CKR_EBADMAGIC, CKR_EVERSION, CKR_ECORRUPT (both
 * slots written and neither valid; a log header that fails its checks),
 * CKR_EMISMATCH (a slot of another log), CKR_EREPLAY, CKR_EINVAL (actions to
 * replay and no callback), CKR_ENOHUGE (CKR_HUGETLB and too few free
 * huge pages), -EBUSY (another handle holds the directory for
 * more than about 2 s), -ENOMEM, -errno, or a
 * librio code.  A failed open changes no slot and no log record.
 */
CKR_EXPORT int ckr_open(const char *dir, const struct ckr_opts *opts,
	ckr **out);

/*
 * Wait for the checkpoint in progress and for the log, stop the threads and
 * free everything.  Returns 0 or the handle's sticky error (still freed).
 */
CKR_EXPORT int ckr_close(ckr *c);

#define CKR_POC_WAIT 1u /* wait for the writer, so a checkpoint starts */

/*
 * Call at a point of consistency (between actions).  If the writer is done
 * with the previous checkpoint (or CKR_POC_WAIT: once it is), prepare the
 * next period (the algorithm's PrepareForNextCheckpoint) and start a
 * checkpoint of the state as it is now, tagged with the number of actions
 * logged so far.  Returns 1 if a checkpoint started, 0 if the writer was
 * busy, or the sticky error.
 */
CKR_EXPORT int ckr_point_of_consistency(ckr *c, unsigned flags);

/*
 * Wait until no checkpoint is in progress; returns 0 or the sticky error.
 * The last started checkpoint is then complete on stable storage.
 */
CKR_EXPORT int ckr_checkpoint_wait(ckr *c);

/*
 * Append an action record (1..65536 bytes) to the logical log, a ring that
 * completed checkpoints release (the records before the older of the two
 * newest); *seq (if not NULL) receives its number.  The record is durable only once the
 * logger has committed it (ckr_log_commit); a checkpoint is never marked
 * complete before every action it includes is durable in the log.
 * Returns 0, CKR_ERECORD, CKR_ELOGFULL (the ring holds no room beside the
 * records since the older complete checkpoint; nothing appended: take a
 * checkpoint and retry), or the sticky error.
 */
CKR_EXPORT int ckr_log_append(ckr *c, const void *rec, size_t len,
	uint64_t *seq);

/* Wait until every action appended so far is durable. */
CKR_EXPORT int ckr_log_commit(ckr *c);

/*
 * Wait until the first n actions (seq < n) are durable, making the logger
 * commit them now if they wait for a group (opts.log_group).  With group
 * commit the mutator appends group b + 1 while the logger writes group b
 * and waits for b at the end of b + 1.  Returns 0, CKR_EINVAL (n exceeds
 * the actions appended), or the sticky error.
 */
CKR_EXPORT int ckr_log_wait(ckr *c, uint64_t n);

struct ckr_stats {
	uint64_t epoch;          /* checkpoints started so far (all time) */
	uint64_t completed;      /* of them completed by this handle */
	uint64_t log_appended;   /* actions in the log */
	uint64_t log_durable;    /* of them durable */
	uint64_t group_commits;  /* logger syncs by this handle */
	uint64_t recovered_epoch; /* epoch of the slot loaded at open, 0 none */
	uint64_t replayed;       /* actions replayed at open */
	int recovered_slot;      /* slot loaded at open, -1 none */
	int bad_slots;           /* written slots found invalid at open */
	uint64_t poc_ns;         /* time spent in ckr_point_of_consistency */
	uint64_t fork_ns;        /* CKR_FORK: of it, in fork() */
	uint64_t huge_bytes;     /* CKR_HUGEPAGES: bytes of the state and its
	                          * copies in huge pages at open */
	uint64_t log_free;       /* bytes the log ring can still take before
	                          * an append fails with CKR_ELOGFULL (a
	                          * record of n bytes takes n + 16 rounded up
	                          * to 8, and up to as much again where it
	                          * wraps to the ring's start) */
};
CKR_EXPORT void ckr_stats(const ckr *c, struct ckr_stats *st);

/*
 * Inspect one slot of an existing checkpoint directory without opening it:
 * 0 if the slot is complete and valid (*epoch, *log_seq set), a CKR_E*
 * code saying why not (CKR_EBADMAGIC for a slot never completed, empty;
 * CKR_ECORRUPT for a damaged header), or CKR_EDATA for a slot whose header
 * is valid but whose data does not match it: what no crash of a correct
 * writer can leave (ckpt.c, I1).
 */
CKR_EXPORT int ckr_slot_check(const char *dir, enum ckr_storage storage,
	int slot, uint64_t *epoch, uint64_t *log_seq);

/*
 * The durable log records, in order, to fn (a reader's scan): from seq 0
 * while the log's ring has not wrapped, else from the older complete
 * slot's log_seq (the records before it are released, docs/ckr.md).
 * *count receives the last seq + 1.
 */
CKR_EXPORT int ckr_log_scan(const char *dir, enum ckr_storage storage,
	int (*fn)(void *ctx, uint64_t seq, const void *rec, size_t len),
	void *ctx, uint64_t *count);

/* ------------------------------------------------------------------------
 * The handlers (inline: they sit on the mutator's hot path)
 * ------------------------------------------------------------------------ */

/* IPP: one interleaved record per word (16 bytes, 4 per cache line). */
struct ckr__ipp_rec {
	uint32_t as;       /* the application state */
	uint32_t cp[2];    /* Odd (0) and Even (1) */
	uint8_t mark[2];   /* their mark bits, one byte each (no shared RMW) */
	uint8_t pad[2];
};

/* BAZZ: the MR and MW bits of 256 words in one cache line. */
struct ckr__zz_bits {
	uint64_t mr[4];
	uint64_t mw[4];
};

/* BACOU block states (one byte per object; 1 is the lock). */
#define CKR__BLK_CLEAN 0   /* not yet copied nor written this period */
#define CKR__BLK_LOCKED 1  /* the mutator copies it / the writer reads it */
#define CKR__BLK_COPIED 2  /* its period image is in the shadow */
#define CKR__BLK_WRITTEN 3 /* the writer has taken its period image */

/* The first member of struct ckr: what the handlers read. */
struct ckr__hot {
	uint32_t algo;
	uint32_t obj_shift; /* log2(words per object) */
	uint64_t nwords;
	uint32_t *as;       /* NAIVE, BACOU, FORK: the state */
	uint32_t *zz[2];    /* BAZZ: AS0, AS1 */
	struct ckr__zz_bits *bits;
	struct ckr__ipp_rec *ipp;
	uint32_t cur;       /* IPP: the copy collecting this period (0/1) */
	uint8_t *blk;       /* BACOU: one state per object (atomic access) */
};

CKR_EXPORT void ckr__bacou_slow(ckr *c, uint64_t blk);

static inline struct ckr__hot *
ckr__hot(const ckr *c)
{
	return (struct ckr__hot *)c;
}

static inline uint64_t
ckr_nwords(const ckr *c)
{
	return ckr__hot(c)->nwords;
}

/* HandleRead: the current value of word i (i < ckr_nwords). */
static inline uint32_t
ckr_read(const ckr *c, uint64_t i)
{
	const struct ckr__hot *h = ckr__hot(c);
	const struct ckr__zz_bits *b;

	switch (h->algo) {
	case CKR_BAZZ:
		b = &h->bits[i >> 8];
		return h->zz[(b->mr[(i >> 6) & 3] >> (i & 63)) & 1][i];
	case CKR_IPP:
		return h->ipp[i].as;
	default:
		return h->as[i];
	}
}

/* HandleWrite: set word i to v. */
static inline void
ckr_write(ckr *c, uint64_t i, uint32_t v)
{
	struct ckr__hot *h = ckr__hot(c);
	struct ckr__zz_bits *b;
	struct ckr__ipp_rec *r;
	uint64_t w, m, blk;

	switch (h->algo) {
	case CKR_BAZZ:
		/* AS_MW[i][i] <- v; MR[i] <- MW[i].  The writer reads only
		 * MW and AS_~MW, which no write of this period touches. */
		b = &h->bits[i >> 8];
		m = 1ull << (i & 63);
		w = (b->mw[(i >> 6) & 3] >> (i & 63)) & 1;
		h->zz[w][i] = v;
		b->mr[(i >> 6) & 3] = (b->mr[(i >> 6) & 3] & ~m) | (w ? m : 0);
		return;
	case CKR_IPP:
		/* AS[i] and currentAS[i] <- v; currentBA[i] <- 1 */
		r = &h->ipp[i];
		r->as = v;
		r->cp[h->cur] = v;
		r->mark[h->cur] = 1;
		return;
	case CKR_BACOU:
		blk = i >> h->obj_shift;
		/* acquire: the writer's reads of a WRITTEN block are done */
		if (__builtin_expect(__atomic_load_n(&h->blk[blk],
			__ATOMIC_ACQUIRE) < CKR__BLK_COPIED, 0))
			ckr__bacou_slow(c, blk);
		h->as[i] = v;
		return;
	default:
		h->as[i] = v;
		return;
	}
}

#ifdef __cplusplus
}
#endif

#endif /* CKR_H */
