/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vversions.h -- Vista's standalone Versions 0, 1 and 2 on a rio pool
 *
 * Amza, Cox & Zwaenepoel, "Data Replication Strategies for Fault Tolerance
 * and Availability on Commodity Clusters", section 4: the structures Vista
 * was restructured through before its in-line undo log (Version 3, which
 * is libvista itself).  Each is a complete, crash-safe transaction system
 * over one database in one rio pool (vv_layout.h):
 *   VV_V0  undo records in a linked list in a persistent heap, a heap
 *          buffer per range holding its before-image; commit frees them;
 *   VV_V1  set_range records only the range's coordinates in an array;
 *          commit copies each range into a mirror of the database;
 *   VV_V2  as V1, but commit compares each range with the mirror and
 *          writes only the bytes that changed.
 *
 * Conventions as in the rest of the stack: every call returns 0, -errno,
 * or a RIO_E* code, with a thread-local message in rio_errormsg().  A
 * failure in the middle of commit, abort or recovery sticks (RIO_EFATAL
 * until reopened).  One thread uses a handle at a time.
 *
 * Durability: vv_commit() returns once the transaction is durable in the
 * pool's domain; a crash (process or power) at any point leaves, after
 * vv_open()'s recovery, every committed transaction and nothing of any
 * other.  Stores into a range are allowed only after vv_set_ranges()
 * named it, inside the transaction.
 */
#ifndef VVERSIONS_H
#define VVERSIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum vv_version { VV_V0 = 0, VV_V1 = 1, VV_V2 = 2 };

struct vv_opts {
	enum vv_version version;
	size_t db_size;     /* bytes of database, > 0 */
	size_t heap_size;   /* V0: bytes of heap (records and buffers) */
	size_t max_ranges;  /* V1, V2: ranges per transaction (0: 4096) */
	unsigned rio_flags; /* RIO_FORCE_*, RIO_NO_SIGNALS, ... */
};

struct vv_range {
	void *addr;
	size_t len;
};

struct vv_stats {
	uint64_t fences;       /* rio_drain calls */
	uint64_t lines;        /* cache lines flushed (or written non-temporally) */
	uint64_t bytes_logged; /* V0: before-images; V1, V2: mirror bytes written */
};

typedef struct vv vv;

/*
 * Create the pool at path (which must not exist) with a zeroed database.
 * Returns 0, -EINVAL (bad opts), -EEXIST, or what rio_pool_create returns.
 * Fill the database, then call vv_loaded() before the first transaction.
 */
int vv_create(const char *path, const struct vv_opts *o, vv **out);

/*
 * Open an existing pool of this version and run its recovery: an
 * interrupted transaction is rolled back, a committed one whose mirror was
 * behind is rolled forward.  Returns 0; RIO_ELAYOUT (a pool of another
 * version or not of this module), RIO_EBADMAGIC (never finished), RIO_EVERSION,
 * RIO_EBADCSUM, RIO_EBADHDR (header fields), -EBADMSG (a record or entry
 * that fails its check), or what rio_pool_open returns.
 */
int vv_open(const char *path, enum vv_version version, unsigned rio_flags,
	vv **out);

void *vv_db(vv *v);
size_t vv_db_size(const vv *v);
/* The pool the Version lives in (for a library that watches its
 * write-backs, such as libvista_replica's passive backup). */
struct rio_pool *vv_pool(vv *v);

/* The database was filled outside any transaction: make it durable (and,
 * V1/V2, the mirror equal to it).  Returns 0 or RIO_EFATAL. */
int vv_loaded(vv *v);

/* Returns 0, -EINVAL (a transaction is open), RIO_EFATAL. */
int vv_begin(vv *v);

/*
 * Declare n ranges the transaction will store into; durable (V0: the
 * before-images; V1/V2: the coordinates) before it returns.  Returns 0,
 * -EINVAL (no transaction), RIO_ERANGE (a range not inside the database;
 * none of the n is declared then), -ENOSPC (V0: heap full; V1/V2: more
 * than max_ranges in the transaction; none of the n is declared), RIO_EFATAL.
 * The transaction stays open after an error, to be aborted or committed.
 */
int vv_set_ranges(vv *v, size_t n, const struct vv_range *r);

/* Returns 0, -EINVAL (no transaction), RIO_EFATAL. */
int vv_commit(vv *v);
/* Undo every store into the declared ranges.  0, -EINVAL, RIO_EFATAL. */
int vv_abort(vv *v);

/* Close (an open transaction is left for recovery).  Returns 0 or what
 * rio_pool_close returns. */
int vv_close(vv *v);

void vv_get_stats(const vv *v, struct vv_stats *out);
const char *vv_version_name(enum vv_version ver); /* "v0", "v1", "v2" */

#ifdef __cplusplus
}
#endif

#endif /* VVERSIONS_H */
