/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_int.h -- file cache internals shared between the fc_*.c files and the
 * preload shim
 *
 * Volatile side of the cache (the persistent side is fc_layout.h):
 *   - blks[]: one struct fc_blk per data block: its state, the (file, fbn)
 *     it holds, the list it is on, and its node in the index;
 *   - index: a liburcu lock-free hash table (cds_lfht, bulletproof RCU
 *     flavour, so callers' threads need no registration) from (file slot,
 *     block number) to the block holding the current copy; rebuilt from the
 *     descriptors at every open;
 *   - files[]: one struct fc_file per file record in use, found by path
 *     through a small chained hash;
 *   - lists: free blocks, clean blocks (LRU order, eviction candidates),
 *     stale blocks (superseded or evicted copies whose descriptors are not
 *     yet durably FREE), and each file's dirty blocks.
 *
 * Locking (in this order; never two files' locks except by trylock)
 *   f->wb_lock   serialises write-back and identity checks of one file;
 *   f->lock      rwlock over one file's data: its blocks' contents, its
 *                index entries, size and disk_limit.  Readers share it;
 *                writers, truncate, mmap and eviction of its blocks hold it
 *                exclusively; write-back holds it shared;
 *   c->lock      the block lists, block states, the file table and path
 *                hash, counters, reservations.
 * An RCU read-side section (index lookup) never waits for a lock, so
 * synchronize_rcu() may be called with c->lock held.
 *
 * Lifetime of a struct fc_file (the volatile side of a file record)
 *   R1. Whoever uses f after dropping c->lock holds a claim on it, taken
 *       under c->lock: a handle (f->handles), a reference (f->refs:
 *       write-back passes, directory settling, the drop of a removed
 *       file), or f->busy (rename, unlink, forget: one owner at a time).
 *   R2. No reference is taken on a busy file, and claim() (busy) waits
 *       until the references are gone: the owner of a busy file is alone
 *       with it and may free it.
 *   R3. Anyone else frees f only with no handle and no reference
 *       (rio__fc_file_release_record).  If references remain anyway, the
 *       record is freed on media at once but the struct lives on
 *       (f->released) until the last rio__fc_file_put().
 *
 * Block states (fc_blk.state) and their transitions
 *   FREE      --reserve-->          RESERVED  (fc_alloc.c)
 *   RESERVED  --commit write-->     DIRTY     (fc_block.c)
 *   RESERVED  --populate-->         CLEAN     (fc_block.c)
 *   RESERVED  --unreserve-->        FREE
 *   DIRTY     --write-back-->       CLEAN     (fc_writeback.c)
 *   DIRTY|CLEAN --superseded, evicted, truncated, unlinked--> STALE
 *   STALE     --descriptor durably FREE + RCU grace period--> FREE
 */
#ifndef RIO_FC_INT_H
#define RIO_FC_INT_H

#include <pthread.h>
#include <sys/stat.h>
#include <sys/types.h>

#include <urcu-bp.h>
#include <urcu/rculfhash.h>

#include "fc_layout.h"
#include "rio_fc.h"
#include "rio_int.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FC_NONE UINT32_MAX
#define FC_BS ((uint64_t)RIO_FC_BLOCK)
#define FC_MAX_FBN (1ull << 36) /* 256 TiB files */
#define FC_MIN_BLOCKS 32u
#define FC_RESERVE_CHUNK 16u /* blocks reserved at a time by a writer */
#define FC_EVICT_BATCH 32u
#define FC_WB_RETRY_MAX_MS 10000u /* back-off of a failing write-back */

enum fc_bstate {
	FC_B_FREE = 0,
	FC_B_RESERVED,
	FC_B_CLEAN,
	FC_B_DIRTY,
	FC_B_STALE,
};

enum fc_list_id {
	FC_L_NONE = 0,
	FC_L_FREE,
	FC_L_CLEAN,
	FC_L_STALE,   /* superseded copies */
	FC_L_DROPPED, /* current copies taken out (evicted, truncated, ...) */
	FC_L_DIRTY,
};

struct fc_list {
	uint32_t head, tail;
	uint64_t n;
};

struct fc_blk {
	struct cds_lfht_node node; /* in c->index while current */
	uint64_t fbn;
	uint64_t seq;
	uint32_t file;  /* slot, FC_NONE when free */
	uint32_t pins;  /* live mappings of this block */
	uint32_t wpins; /* of which writable */
	uint32_t prev, next;
	uint8_t state;  /* enum fc_bstate */
	uint8_t list;   /* enum fc_list_id */
	uint8_t ref;    /* CLOCK reference bit, set by reads */
	bool in_index;
};

struct fc_map; /* fc_mmap.c */

/* One file record in use. */
struct fc_file {
	uint32_t slot, gen;
	uint64_t rec_seq;       /* frec.seq */
	char *rel;              /* path below the cache directory */
	char *abs;              /* absolute path */
	struct fc_file *hnext;  /* path hash chain */
	int fd;                 /* the disk file, or -1 */
	bool fd_rdonly;         /* fd could only be opened O_RDONLY */

	pthread_rwlock_t lock;
	pthread_mutex_t wb_lock;
	pthread_mutex_t pop_lock;   /* readers populating, under f->lock shared */

	/* under f->lock */
	uint64_t size;
	uint64_t disk_limit;    /* disk bytes below this are file content */
	uint64_t size_ok;       /* the disk file may grow to this (atomic;
				   rio__fc_size_limit) */
	uint64_t wb_low;        /* lowest size since the write-back snapshot */
	struct rio_fc_fstate fst; /* current file-state record */
	int fst_slot;           /* where it is in the record */
	uint64_t fbn_end;       /* no cached block at or past this fbn */
	uint64_t nmapped;       /* pinned blocks (mappings) */
	struct fc_map *maps;

	/* under c->lock */
	unsigned handles;
	unsigned refs;          /* write-back passes working on it */
	struct fc_list dirty;   /* this file's dirty blocks */
	uint64_t ncached;       /* blocks in the index */
	uint64_t first_dirty_ns;
	bool wb_wanted;         /* last handle closed: write back soon */
	bool conflict;          /* changed on disk behind the cache */
	bool unlinked;          /* record is UNLINKED, awaiting a dir fsync */
	bool busy;              /* being dropped or renamed */
	bool released;          /* record freed; struct freed by the last
				   rio__fc_file_put (R3) */
	int wb_error;           /* last write-back's error, 0 if it worked */
	uint32_t wb_failures;   /* consecutive failed write-backs */
	uint64_t wb_retry_ns;   /* no new attempt before (back-off) */
};

/* A handle (rio_fc_open). */
struct rio_fc_file {
	rio_fc_cache *c;
	struct fc_file *f;
	int accmode;            /* O_RDONLY, O_WRONLY or O_RDWR */
	struct rio_fc_file *prev, *next; /* c->handles, under c->lock */
};

/*
 * The system calls the cache makes on the files it caches go through
 * librio's fault-injection table, rio__sys (rio_int.h, sysops.c: Y1).
 */

struct rio_fc_cache {
	rio_pool *pool;
	char *base;                  /* rio_pool_base */
	struct rio_fc_super *sb;
	struct rio_fc_frec *frecs;
	struct rio_fc_desc *descs;
	char *data;
	uint64_t nblocks;
	uint32_t nfiles;
	char *dir;                   /* canonical, no trailing slash */
	size_t dir_len;
	int pool_fd;
	uint64_t data_file_off;      /* pool file offset of block 0 */
	uint64_t fork_gen;           /* rio__fc_fork_gen at open */
	unsigned flags;              /* RIO_FC_* */

	uint64_t seq;                /* last sequence number handed out */

	pthread_mutex_t lock;
	pthread_cond_t space_cond;   /* blocks freed or cleaned */
	pthread_cond_t wb_cond;      /* wakes the write-back thread */
	struct fc_blk *blks;
	struct fc_list free, clean, stale, dropped;
	uint64_t nreserved;
	uint64_t nwpinned;           /* dirty blocks held by writable maps */
	uint64_t ndirty;
	uint64_t dirty_max;
	uint64_t space_waiters;
	uint64_t wb_passes;          /* completed write-back passes */
	int wb_pass_error;           /* error of the last pass, 0 if clean */
	struct cds_lfht *index;
	struct fc_file **files;      /* by slot */
	uint32_t nfiles_used;
	struct fc_file **fhash;
	uint32_t fhash_mask;
	struct rio_fc_file *handles; /* every open handle */
	bool restored;               /* the pool came from its image */

	pthread_t wb_thread;
	bool wb_on;
	bool wb_stop;
	bool wb_kick;
	unsigned wb_ms;

	struct rio_fc_stats stats;
};

/* Relaxed: statistics counters, read whole, ordering nothing. */
#define FC_STAT_ADD(c, field, n) \
	__atomic_fetch_add(&(c)->stats.field, (n), __ATOMIC_RELAXED)

static inline struct rio_fc_desc *
fc_desc(const rio_fc_cache *c, uint32_t b)
{
	return &c->descs[b];
}

static inline char *
fc_data(const rio_fc_cache *c, uint32_t b)
{
	return c->data + (uint64_t)b * FC_BS;
}

/* Relaxed: only a unique increasing number is needed; the persist order
 * of what carries it comes from flushes and fences. */
static inline uint64_t
fc_next_seq(rio_fc_cache *c)
{
	return __atomic_add_fetch(&c->seq, 1, __ATOMIC_RELAXED);
}

/* One aligned 8-byte store: the unit of power-fail atomicity.  Release,
 * paired with fc_load8's acquire, so that a reader holding no lock sees
 * what the writer stored before the word; where both sides hold c->lock
 * relaxed would do.  Durability order comes from the flushes and fences
 * around them, never from these. */
static inline void
fc_store8(uint64_t *p, uint64_t v)
{
	__atomic_store_n(p, v, __ATOMIC_RELEASE);
}

static inline uint64_t
fc_load8(const uint64_t *p)
{
	return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* fc_cache.c */
/* 0, RIO_EFORKED (used in a fork child) or RIO_EFATAL (pool error). */
int rio__fc_check(const rio_fc_cache *c);
bool rio__fc_forked(const rio_fc_cache *c);
/* ms from now, CLOCK_REALTIME (for pthread_cond_timedwait). */
void rio__fc_deadline(unsigned ms, struct timespec *ts);
struct fc_geometry {
	uint32_t nfiles;
	uint64_t nblocks, files_off, descs_off, data_off;
};
int rio__fc_geometry(uint64_t user_size, struct fc_geometry *g);

/* fc_path.c */
/* Resolve path under the cache dir: *rel and *abs are malloc'ed. */
int rio__fc_resolve(const rio_fc_cache *c, const char *path, char **rel,
	char **abs);

/* fc_index.c */
int rio__fc_index_init(rio_fc_cache *c);
void rio__fc_index_fini(rio_fc_cache *c);
uint32_t rio__fc_lookup(rio_fc_cache *c, uint32_t slot, uint64_t fbn);
void rio__fc_index_add(rio_fc_cache *c, uint32_t b);
void rio__fc_index_replace(rio_fc_cache *c, uint32_t old_b, uint32_t new_b);
void rio__fc_index_del(rio_fc_cache *c, uint32_t b);
void rio__fc_index_sync(void); /* RCU grace period */

/* fc_alloc.c (c->lock held unless noted) */
void rio__fc_list_push(rio_fc_cache *c, struct fc_list *l, uint8_t id,
	uint32_t b);
void rio__fc_list_remove(rio_fc_cache *c, struct fc_list *l, uint32_t b);
struct fc_list *rio__fc_list_of(rio_fc_cache *c, uint32_t b);
/* Reserve n blocks for a writer holding no file lock (may wait for
 * write-back); out[] gets their numbers.  Takes c->lock itself. */
int rio__fc_reserve(rio_fc_cache *c, uint32_t n, bool writer, uint32_t *out);
/* Reserve one block without waiting or write-back; FC_NONE if none. */
uint32_t rio__fc_try_reserve(rio_fc_cache *c);
void rio__fc_unreserve(rio_fc_cache *c, const uint32_t *b, uint32_t n);
/* The current copy b is replaced by a newer one (index already updated). */
void rio__fc_supersede(rio_fc_cache *c, uint32_t b);
/* The current copy b leaves the cache: out of the index, to `dropped`. */
void rio__fc_drop(rio_fc_cache *c, uint32_t b);
/* Make every stale and dropped descriptor durably FREE (stale first, L3),
 * wait for an RCU grace period (X3), and free the blocks. */
void rio__fc_reclaim_stale(rio_fc_cache *c);
void rio__fc_mark_dirty(rio_fc_cache *c, struct fc_file *f, uint32_t b);
void rio__fc_mark_clean(rio_fc_cache *c, struct fc_file *f, uint32_t b);
void rio__fc_touch(rio_fc_cache *c, uint32_t b);

/* fc_file.c */
struct fc_file *rio__fc_file_find(rio_fc_cache *c, const char *rel);
void rio__fc_file_hash_add(rio_fc_cache *c, struct fc_file *f);
void rio__fc_file_hash_del(rio_fc_cache *c, struct fc_file *f);
struct fc_file *rio__fc_file_new(rio_fc_cache *c, uint32_t slot,
	const char *rel);
void rio__fc_file_free(struct fc_file *f);
/* R1: take / drop a reference (c->lock held); the last put wakes
 * claim() and frees a released file (then returns true). */
void rio__fc_file_get(struct fc_file *f);
bool rio__fc_file_put(rio_fc_cache *c, struct fc_file *f);
/* -EFBIG if f cannot grow to `end` bytes on disk: past RLIMIT_FSIZE, or
 * past the largest file its file system keeps (probed with lseek, which
 * the kernel refuses past that size).  A handle of f is held. */
int rio__fc_size_limit(rio_fc_cache *c, struct fc_file *f, uint64_t end,
	const char *what);
/* Set the disk file's times with apply(arg) (0, or -1 and errno: the
 * shim's utimensat/futimens) so that they last: f is written back first
 * and its locks held across apply, so no write-back of older data follows
 * and moves st_mtime; the new identity is recorded as the cache's own
 * (F7).  By handle, or by path (a path the cache holds nothing for: apply
 * alone).  0, -errno of apply, or a write-back error (times not set). */
int rio__fc_set_times(rio_fc_file *h, int (*apply)(void *), void *arg);
int rio__fc_set_times_path(rio_fc_cache *c, const char *path,
	int (*apply)(void *), void *arg);
/* Open the disk file of f if it is not (for write-back, recovery). */
int rio__fc_file_fd(rio_fc_cache *c, struct fc_file *f, bool create);
/* Write f's next file-state record: size, disk_limit, identity. */
void rio__fc_fst_write(rio_fc_cache *c, struct fc_file *f, uint64_t size,
	uint64_t disk_limit, const struct stat *st);
int rio__fc_fst_pick(const struct rio_fc_frec *r, struct rio_fc_fstate *out);
bool rio__fc_fst_matches(const struct rio_fc_fstate *fs, const struct stat *st);
void rio__fc_frec_set_flags(rio_fc_cache *c, struct fc_file *f, uint64_t set,
	uint64_t clear);
/* Drop every block of f and its record (f must be idle, and busy: R2).
 * unlinked: leave the record UNLINKED instead of FREE; the caller then
 * holds a reference (R1), which this drops. */
void rio__fc_file_drop(rio_fc_cache *c, struct fc_file *f, bool unlinked);
void rio__fc_file_release_record(rio_fc_cache *c, struct fc_file *f);
uint64_t rio__fc_frec_checksum(const struct rio_fc_frec *r);
uint64_t rio__fc_fst_checksum(const struct rio_fc_fstate *s);

/* fc_block.c */
uint64_t rio__fc_desc_checksum(const struct rio_fc_desc *d);
int rio__fc_truncate(rio_fc_cache *c, struct fc_file *f, uint64_t size);
/* Fill pool block b with block fbn of f's disk copy (zeros past
 * disk_limit) and flush it.  f->lock held. */
int rio__fc_fill_from_disk(rio_fc_cache *c, struct fc_file *f, uint64_t fbn,
	uint32_t b);
/* Write the descriptor fields of block b (not its state word), flush. */
void rio__fc_desc_fill(rio_fc_cache *c, struct fc_file *f, uint32_t b,
	uint64_t fbn, uint64_t fsize);
/* Free every cached block of f at or past block `from` (f->lock held
 * exclusively, stale blocks already reclaimed). */
void rio__fc_drop_blocks(rio_fc_cache *c, struct fc_file *f, uint64_t from);

/* The size the cache holds for the file with this identity (stat of a
 * cached file through the shim); false if none. */
bool rio__fc_size_by_id(rio_fc_cache *c, uint64_t dev, uint64_t ino,
	uint64_t *size);

/* fc_writeback.c */
/* fsync the directory holding path, through rio__sys. */
int rio__fc_fsync_dir(const char *path);
int rio__fc_wb_file(rio_fc_cache *c, struct fc_file *f);
bool rio__fc_wb_needed(const struct fc_file *f);
int rio__fc_wb_pass(rio_fc_cache *c, bool all);
int rio__fc_wb_start(rio_fc_cache *c);
void rio__fc_wb_stop(rio_fc_cache *c);
void rio__fc_wb_kick(rio_fc_cache *c); /* c->lock held */
/* fsync the directory of each UNLINKED / NEW record and settle them. */
int rio__fc_settle_dirs(rio_fc_cache *c);

/* fc_recover.c */
/* Validate the whole pool and build the volatile state (writes nothing). */
int rio__fc_load(rio_fc_cache *c);
/* Replay after a crash; called after rio__fc_load. */
int rio__fc_recover(rio_fc_cache *c);

/* fc_mmap.c */
void rio__fc_unmap_handle(rio_fc_file *h);

#ifdef __cplusplus
}
#endif

#endif /* RIO_FC_INT_H */
