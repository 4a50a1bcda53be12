/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rio_fc.h -- librio-fc: the Rio file cache, on librio pools
 *
 * A library of its own (librio-fc.so, link with -lrio-fc -lrio) built on
 * librio: the cache keeps file blocks in a rio pool (rio.h), and its block
 * index needs liburcu, which programs that only want a pool do not load.
 * Its return codes are librio's (RIO_EOUTSIDE .. RIO_EFORKED are the file
 * cache's, in rio.h's one error table), its messages rio_errormsg()'s.
 * See docs/librio-fc.3.md for the full manual.
 */
#ifndef RIO_FC_H
#define RIO_FC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rio.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ========================================================================
 * File cache (Rio)
 *
 * Rio's file cache, in a pool: file blocks are kept in a rio pool, and a
 * write is durable as soon as it has been copied there -- no fsync.  Dirty
 * blocks are written back to the real files in the background, at
 * rio_fc_sync_all() and at rio_fc_cache_close(); after a crash, opening the
 * cache writes every dirty block back (recovery).  One cache serves every
 * file under one directory; see docs/librio-fc.3.md, and LD_PRELOAD
 * librio-fs.so to run an unmodified program on it.
 *
 * Durability: once rio_fc_pwrite()/rio_fc_truncate() return 0, the change
 * survives a crash of the process (kill -9) and, in the pool's persistence
 * domain, a power failure; a pool created with RIO_SAFE_SYNC also survives
 * the loss of its memory copy (restored from its image).  Each block
 * (RIO_FC_BLOCK bytes, aligned) of a write is atomic: after a crash it
 * holds the old or the new bytes, never a mix.  A write spanning several
 * blocks may be found partly done after a crash if it had not returned.
 *
 * Threads: every call may be made from any thread; calls on one file are
 * serialised per file (reads share).  A cache must not be used in the child
 * of a fork (RIO_EFORKED); only one process may open a cache pool at a time.
 * ======================================================================== */

typedef struct rio_fc_cache rio_fc_cache;
typedef struct rio_fc_file rio_fc_file;

#define RIO_FC_BLOCK 4096u

/* rio_fc_opts.flags */
#define RIO_FC_CREATE (1u << 0)    /* create the pool if it does not exist */
#define RIO_FC_NO_THREAD (1u << 1) /* no background write-back thread */

/* Optional settings; zero-initialize and set what you need. */
struct rio_fc_opts {
	unsigned flags;          /* RIO_FC_* */
	/* With RIO_FC_CREATE: size of the pool file in bytes (a multiple of
	 * 4096, at least 256 KiB); 0 means 64 MiB. */
	size_t pool_size;
	/* Passed to rio_pool_create/open: RIO_SAFE_SYNC (create only),
	 * RIO_FORCE_BYTE/CACHELINE/PAGE, RIO_NO_SIGNALS.  RIO_PROTECT and
	 * RIO_RDONLY are refused (-ENOTSUP). */
	unsigned pool_flags;
	/* Passed to rio_pool_*_opts (layout is always "rio.fc"). */
	const struct rio_pool_opts *pool_opts;
	/* Background write-back: a file's dirty blocks are written back at
	 * the latest this many ms after they were first dirtied; 0 = 1000. */
	unsigned writeback_ms;
	/* Percentage of the blocks that may be dirty; a writer that would
	 * exceed it waits for write-back (backpressure).  0 = 50, max 90. */
	unsigned dirty_max_pct;
};

/*
 * Open the file cache kept in pool `pool_path` for the files under the
 * directory `dir` (NULL: the directory recorded in the pool).  With
 * RIO_FC_CREATE and no pool (nor safe-sync image), create and format one.
 *
 * Recovery: if the cache was not closed cleanly, every dirty block is
 * written back to its file (the newest copy of each block; every file
 * truncated or extended to its size), the files fdatasync'ed, and the
 * cache starts cold.  A file whose disk copy changed since the cache last
 * wrote it (size, mtime, inode), when the change is not the cache's own
 * interrupted write-back, is not overwritten: it is left in *conflict*
 * (reported on stderr and in stats; rio_fc_open() of it fails with
 * RIO_ECHANGED; rio_fc_forget() drops the cache's copy).
 *
 * Nothing is written before the pool has been fully validated: a corrupt
 * pool fails with RIO_ECORRUPT (or a pool error) and is left as it was.
 * Returns 0, -ENOENT (no pool, no RIO_FC_CREATE), -EBUSY (open in another
 * process), -ENOTDIR, -ENAMETOOLONG, -EINVAL, -ENOTSUP, RIO_EOTHERDIR (the
 * pool caches another directory), RIO_ECORRUPT, RIO_ELAYOUT (not a cache
 * pool), a rio_pool_open() code, or -errno of a failed replay (the cache
 * is then closed and its dirty blocks kept for the next open).
 */
RIO_EXPORT int rio_fc_cache_open(const char *pool_path, const char *dir,
	const struct rio_fc_opts *opts, rio_fc_cache **cache);

/*
 * Stop the write-back thread, write every dirty block back and fdatasync,
 * mark the cache clean and close the pool.  Files still open are closed.
 * Returns 0 or the first write-back error (the dirty blocks then stay in
 * the pool for the next open: nothing is lost); the cache is closed in
 * every case.
 */
RIO_EXPORT int rio_fc_cache_close(rio_fc_cache *cache);

/*
 * Write every dirty block of every file back to disk and fdatasync each
 * file (and the directory of files the cache created).  Returns 0 or the
 * first error (-errno of pwrite/ftruncate/fdatasync); failed files keep
 * their dirty blocks and are retried later.
 */
RIO_EXPORT int rio_fc_sync_all(rio_fc_cache *cache);

/*
 * Open `path` (absolute, or relative to the working directory; it must
 * resolve under the cache directory) through the cache.  flags: O_RDONLY,
 * O_WRONLY or O_RDWR, plus O_CREAT, O_EXCL, O_TRUNC (O_APPEND is the
 * caller's business: pass the size as the offset); rio_fc_open_mode()
 * takes the mode for O_CREAT (rio_fc_open uses 0666, less the umask).
 * The disk file is opened (created) at once, so permissions and
 * O_CREAT|O_EXCL behave as with open(2).  Only regular files are cached.
 * Returns 0, RIO_EOUTSIDE, RIO_ECHANGED, -ENAMETOOLONG (more than 311 bytes
 * below the cache directory), -ENFILE (every file record in use by an open
 * file), -EISDIR, -EINVAL, RIO_EFORKED, or -errno from open(2).
 */
RIO_EXPORT int rio_fc_open(rio_fc_cache *cache, const char *path, int flags,
	rio_fc_file **file);
RIO_EXPORT int rio_fc_open_mode(rio_fc_cache *cache, const char *path,
	int flags, unsigned mode, rio_fc_file **file);

/*
 * Read up to n bytes at offset off; *nread (may be NULL) is set to the
 * bytes read: fewer than n only at the end of the file.  Blocks missing
 * from the cache are read from disk and, if a free or clean block can be
 * had without waiting, kept in the cache.
 * Returns 0, -EBADF (opened O_WRONLY), -EINVAL, RIO_EFORKED, or -errno of
 * the disk read.
 */
RIO_EXPORT int rio_fc_pread(rio_fc_file *file, void *buf, size_t n,
	uint64_t off, size_t *nread);

/*
 * Write n bytes at offset off, extending the file if needed (a gap reads
 * as zeros).  Returns 0 once all n bytes are durable in the cache pool
 * (each block atomically, see above).  A full cache waits for write-back;
 * if write-back cannot make room (a failing disk), the write fails with
 * that error and changes nothing that had not already been written.
 * Returns 0, -EBADF (opened O_RDONLY), -EFBIG, -EINVAL, RIO_EFATAL (the
 * pool's persistence failed), RIO_EFORKED, or -errno.
 */
RIO_EXPORT int rio_fc_pwrite(rio_fc_file *file, const void *buf, size_t n,
	uint64_t off);

/*
 * Nothing to do: every write is durable when it returns.  Returns 0, or
 * RIO_EFATAL if the pool's persistence has failed (an msync error).
 */
RIO_EXPORT int rio_fc_fsync(rio_fc_file *file);

/*
 * Set the file's size, durably and atomically.  Growing adds zeros;
 * shrinking drops the cached blocks past the end.  Returns 0, -EBADF,
 * -EFBIG, -EBUSY (shrinking under a live rio_fc_mmap()), RIO_EFATAL,
 * RIO_EFORKED or -errno.
 */
RIO_EXPORT int rio_fc_truncate(rio_fc_file *file, uint64_t size);

/* The file's size as the cache sees it (the disk copy may lag). */
RIO_EXPORT int rio_fc_size(rio_fc_file *file, uint64_t *size);

/*
 * Map [off, off+len) of the file (off a multiple of RIO_FC_BLOCK, the
 * range inside the file's size rounded up to a block) straight onto the
 * cache's blocks: the pool file's pages are mapped MAP_SHARED at the right
 * places, so a store is a store into the cache.  Stores are durable in the
 * pool's persistence domain: at once in the byte domain, after
 * rio_fc_msync() in the cacheline and page domains.  The blocks stay in
 * the cache while mapped; a PROT_WRITE mapping keeps them dirty.  A
 * rio_fc_pwrite() into a mapped block updates it in place (the mapping
 * sees it) and is then not block-atomic.  prot: PROT_READ, optionally
 * PROT_WRITE (which needs a file opened O_RDWR).
 * Returns 0, -EINVAL, -ENXIO (past the end), -EACCES, -ENOTSUP (a
 * device-DAX pool), -ENOSPC (the range does not fit in the cache), or
 * -errno of mmap(2).
 */
RIO_EXPORT int rio_fc_mmap(rio_fc_file *file, uint64_t off, size_t len,
	int prot, void **addr);
/* Unmap a whole mapping made by rio_fc_mmap (-EINVAL otherwise). */
RIO_EXPORT int rio_fc_munmap(rio_fc_file *file, void *addr, size_t len);
/* Make stores to [addr, addr+len) of a mapping durable (flush + drain). */
RIO_EXPORT int rio_fc_msync(rio_fc_file *file, void *addr, size_t len);

/*
 * Close a handle (and its mappings).  The file's dirty blocks are handed
 * to write-back when its last handle closes; close does not wait for the
 * disk.  Returns 0 (the handle is freed in every case).
 */
RIO_EXPORT int rio_fc_close(rio_fc_file *file);

/*
 * Remove `path` from the directory and drop the cache's blocks of it,
 * atomically with respect to a crash: after recovery the file is either
 * still there with all its acknowledged data, or gone.  Returns 0,
 * RIO_EOUTSIDE, -ENOENT, -EBUSY (open through the cache), or -errno.
 */
RIO_EXPORT int rio_fc_unlink(rio_fc_cache *cache, const char *path);

/*
 * rename(2) for paths under the cache directory: both files are written
 * back and dropped from the cache first, then renamed on disk.  Returns 0,
 * RIO_EOUTSIDE, -EBUSY (either is open through the cache), or -errno.
 */
RIO_EXPORT int rio_fc_rename(rio_fc_cache *cache, const char *from,
	const char *to);

/*
 * The size the cache holds for `path`; -ENOENT if the cache holds nothing
 * for it (the disk's size is then the file's size).  RIO_EOUTSIDE.
 */
RIO_EXPORT int rio_fc_stat_size(rio_fc_cache *cache, const char *path,
	uint64_t *size);

/*
 * Drop everything the cache holds for `path`, dirty blocks included (they
 * are lost: this is how a conflict is resolved in favour of the disk).
 * Returns 0, -ENOENT (nothing cached), -EBUSY (open), RIO_EOUTSIDE.
 */
RIO_EXPORT int rio_fc_forget(rio_fc_cache *cache, const char *path);

/*
 * Whether `path` resolves under the cache directory: 1 yes, 0 no, or
 * -errno (e.g. a parent directory does not exist: -ENOENT).
 */
RIO_EXPORT int rio_fc_covers(rio_fc_cache *cache, const char *path);

RIO_EXPORT rio_pool *rio_fc_pool(const rio_fc_cache *cache);
RIO_EXPORT const char *rio_fc_dir(const rio_fc_cache *cache);

struct rio_fc_stats {
	uint64_t blocks;         /* data blocks in the pool */
	uint64_t blocks_free;
	uint64_t blocks_dirty;
	uint64_t blocks_clean;
	uint64_t blocks_stale;   /* superseded copies awaiting reuse */
	uint64_t files;          /* file records in use */
	uint64_t file_slots;
	uint64_t writes;         /* rio_fc_pwrite calls */
	uint64_t block_writes;   /* blocks committed by writes */
	uint64_t reads;
	uint64_t read_hits;      /* blocks read from the cache */
	uint64_t read_misses;    /* blocks read from disk */
	uint64_t fsyncs;         /* rio_fc_fsync calls (each free) */
	uint64_t writebacks;     /* files written back */
	uint64_t writeback_blocks;
	uint64_t writeback_errors;
	uint64_t evictions;      /* clean blocks dropped for space */
	uint64_t waits;          /* writers that waited for write-back */
	uint64_t recovered_blocks; /* replayed at open */
	uint64_t recovered_files;
	uint64_t conflicts;      /* files changed behind the cache */
	bool recovered;          /* the last open ran crash recovery */
};
RIO_EXPORT int rio_fc_stats(const rio_fc_cache *cache,
	struct rio_fc_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* RIO_FC_H */
