/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvm.h -- the RVM baseline: recoverable virtual memory after
 * Satyanarayanan et al. (SOSP 1993), RVM interface version 1.3
 *
 * The benchmark's stand-in for RVM, the disk-based recoverable memory the
 * thesis compares Vista with (section 3.5).  The names, types, modes and
 * return codes are RVM 1.3's, so a program written against this header
 * (bench/tpcb_tpcc's rvm backend) builds against the real librvm as well;
 * README.md beside this file lists what is followed and what differs.
 *
 * The architecture is RVM's (thesis Fig. 3.1):
 *   rvm_map             COPIES the region from its data file into process
 *                       memory with read();
 *   rvm_set_range       copies the before-image to an in-memory undo log
 *                       (restore mode);
 *   rvm_end_transaction appends the new values to an on-disk redo log with
 *                       write(); flush mode makes them durable (fdatasync)
 *                       before it returns, no_flush leaves them in a buffer
 *                       until the next flush (this is how group commit is
 *                       built: G-1 no_flush commits, then one flush);
 *   truncation          when the log is full enough, its records are
 *                       applied to the data files, those are synced, and the
 *                       log is reset;
 *   rvm_initialize      replays the redo log after a crash.
 *
 * Unlike the stack's libraries, functions return RVM's own codes
 * (RVM_SUCCESS = 0, RVM_E* > 0) so the real RVM can be linked in its place;
 * rvm_return() names a code and rvm_errormsg() (an extension) says what
 * failed, with context.  The library is thread-safe: any thread may run its
 * own transactions; they share the one log, as in RVM.
 */
#ifndef RVM_H
#define RVM_H

#include <stdint.h>
#include <sys/time.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RVM_EXPORT __attribute__((visibility("default")))

#define RVM_VERSION "RVM Interface Version 1.3  7 Mar 1994"
#define RVM_VERSION_MAX 128

typedef enum { rvm_false = 0, rvm_true = 1 } rvm_bool_t;

typedef enum {
	rvm_first_struct_id = 39,
	rvm_region_id,
	rvm_options_id,
	rvm_tid_id,
	rvm_statistics_id,
	rvm_last_struct_id
} rvm_struct_id_t;

/* Transaction modes. */
typedef enum {
	rvm_first_mode = 139,
	restore,    /* begin: keep before-images; abort restores memory */
	no_restore, /* begin: no before-images; the tx may not abort     */
	flush,      /* end: durable in the log before the call returns   */
	no_flush,   /* end: buffered; durable at the next flush          */
	rvm_last_mode
} rvm_mode_t;

typedef int rvm_return_t;
#define RVM_SUCCESS 0
#define rvm_first_code 199
#define RVM_EINIT 200       /* RVM not initialized */
#define RVM_EINTERNAL 201   /* internal error, see rvm_errormsg() */
#define RVM_EIO 202         /* I/O error, see errno / rvm_errormsg() */
#define RVM_ELOG 204        /* invalid log device */
#define RVM_ELOG_VERSION_SKEW 205
#define RVM_EMODE 206       /* invalid transaction begin/end mode */
#define RVM_ENAME_TOO_LONG 207
#define RVM_ENO_MEMORY 208
#define RVM_ENOT_MAPPED 209 /* range is not in a mapped region */
#define RVM_EOFFSET 210     /* invalid segment offset */
#define RVM_EOPTIONS 211
#define RVM_EOVERLAP 212    /* region overlaps a mapped segment range */
#define RVM_EPAGER 213
#define RVM_ERANGE 214      /* invalid virtual memory address */
#define RVM_EREGION 215
#define RVM_EREGION_DEF 216
#define RVM_ESRC 217
#define RVM_ESTATISTICS 218
#define RVM_ESTAT_VERSION_SKEW 219
#define RVM_ETERMINATED 220 /* a failure left durability uncertain */
#define RVM_ETHREADS 221
#define RVM_ETID 222        /* invalid transaction identifier */
#define RVM_ETOO_BIG 223    /* a transaction does not fit in the log */
#define RVM_EUNCOMMIT 224   /* uncommitted transaction(s) pending */
#define RVM_EVERSION_SKEW 225
#define RVM_EVM_OVERLAP 226 /* region overlaps an existing mapping */
#define rvm_last_code 227

RVM_EXPORT const char *rvm_return(rvm_return_t code);
RVM_EXPORT const char *rvm_mode(rvm_mode_t mode);
RVM_EXPORT const char *rvm_type(rvm_struct_id_t id);
/* Extension: what the calling thread's last failure was about. */
RVM_EXPORT const char *rvm_errormsg(void);

/* Lengths and 64-bit offsets, as in RVM 1.3. */
typedef unsigned long rvm_length_t;
typedef struct {
	rvm_length_t high;
	rvm_length_t low;
} rvm_offset_t;

#define RVM_MK_OFFSET(x, y) rvm_mk_offset((rvm_length_t)(x), (rvm_length_t)(y))
#define RVM_OFFSET_INITIALIZER(x, y) { (x), (y) }
#define RVM_ZERO_OFFSET(x) (x) = RVM_MK_OFFSET(0, 0)
#define RVM_OFFSET_TO_LENGTH(x) ((x).low)
#define RVM_OFFSET_HIGH_BITS_TO_LENGTH(x) ((x).high)
#define RVM_LENGTH_TO_OFFSET(x) RVM_MK_OFFSET(0, (x))
RVM_EXPORT rvm_offset_t rvm_mk_offset(rvm_length_t x, rvm_length_t y);

/* Transaction identifier. */
typedef struct {
	rvm_struct_id_t struct_id;
	rvm_bool_t from_heap;
	struct timeval uname;
	void *tid;             /* internal */
	rvm_length_t reserved; /* internal */
} rvm_tid_t;

RVM_EXPORT rvm_tid_t *rvm_malloc_tid(void);
RVM_EXPORT void rvm_init_tid(rvm_tid_t *tid);
RVM_EXPORT rvm_tid_t *rvm_copy_tid(rvm_tid_t *tid);
RVM_EXPORT void rvm_free_tid(rvm_tid_t *tid);

/* Options.  Fields this baseline does not use are kept for source
 * compatibility and ignored (README.md). */
typedef struct {
	rvm_struct_id_t struct_id;
	rvm_bool_t from_heap;
	char *log_dev;                  /* the log file */
	long truncate;                  /* truncate when the log is this % full */
	rvm_length_t recovery_buf_len;  /* ignored */
	rvm_length_t flush_buf_len;     /* no_flush buffer bytes (0: default) */
	rvm_length_t max_read_len;      /* ignored */
	rvm_bool_t log_empty;           /* out (rvm_query): nothing to truncate */
	char *pager;                    /* must be NULL */
	long n_uncommit;                /* out (rvm_query) */
	rvm_tid_t *tid_array;           /* ignored */
	rvm_length_t flags;             /* RVM_COALESCE_* accepted, ignored */
	rvm_bool_t create_log_file;     /* rvm_initialize creates the log */
	rvm_offset_t create_log_size;   /* ... with this data area */
	long create_log_mode;           /* ... and this mode */
} rvm_options_t;

#define TRUNCATE 50
#define FLUSH_BUF_LEN (256 * 1024)
#define RVM_COALESCE_RANGES 1
#define RVM_COALESCE_TRANS 2
#define RVM_ALL_OPTIMIZATIONS (RVM_COALESCE_RANGES | RVM_COALESCE_TRANS)
#define RVM_MAP_PRIVATE 8

RVM_EXPORT rvm_options_t *rvm_malloc_options(void);
RVM_EXPORT void rvm_init_options(rvm_options_t *options);
RVM_EXPORT rvm_options_t *rvm_copy_options(rvm_options_t *options);
RVM_EXPORT void rvm_free_options(rvm_options_t *options);

/* Region: [offset, offset+length) of segment file data_dev, at vmaddr. */
typedef struct {
	rvm_struct_id_t struct_id;
	rvm_bool_t from_heap;
	char *data_dev;          /* the segment's data file */
	rvm_offset_t dev_length; /* ignored (the file's size is used) */
	rvm_offset_t offset;     /* region offset in the file (page aligned) */
	char *vmaddr;            /* in/out: NULL lets rvm_map choose */
	rvm_length_t length;     /* region length (page multiple) */
	rvm_bool_t no_copy;      /* do not read the file (memory zeroed) */
} rvm_region_t;

RVM_EXPORT rvm_region_t *rvm_malloc_region(void);
RVM_EXPORT void rvm_init_region(rvm_region_t *region);
RVM_EXPORT rvm_region_t *rvm_copy_region(rvm_region_t *region);
RVM_EXPORT void rvm_free_region(rvm_region_t *region);

/*
 * Open the log named by opts->log_dev (creating it first when
 * opts->create_log_file is set and it does not exist) and recover: every
 * committed record in the log is applied to its data file, the data files
 * are synced and the log is reset.  Use RVM_INIT(opts).
 * Returns RVM_SUCCESS, RVM_EVERSION_SKEW, RVM_EOPTIONS, RVM_ELOG (missing,
 * not a log, bad status block), RVM_ELOG_VERSION_SKEW, RVM_EINIT (already
 * initialized), RVM_EIO (e.g. a data file the log names is missing).  A
 * failed recovery leaves the log as it was, so it can be run again.
 */
RVM_EXPORT rvm_return_t rvm_initialize(const char *version, rvm_options_t *opts);
#define RVM_INIT(options) rvm_initialize(RVM_VERSION, (options))

/* Flush the log and shut down; RVM_EUNCOMMIT while transactions are open.
 * Mapped regions stay in memory (as in RVM) but are no longer recoverable. */
RVM_EXPORT rvm_return_t rvm_terminate(void);

/*
 * Map a region: the bytes [offset, offset+length) of data_dev are copied
 * into memory at region->vmaddr (allocated page aligned when NULL and
 * returned there).  A data file shorter than offset+length is extended with
 * zeros.  Returns RVM_SUCCESS, RVM_EINIT, RVM_EREGION, RVM_EOFFSET,
 * RVM_ENAME_TOO_LONG, RVM_EOVERLAP, RVM_EVM_OVERLAP, RVM_ENO_MEMORY,
 * RVM_ETOO_BIG (too many segments), RVM_EIO.
 */
RVM_EXPORT rvm_return_t rvm_map(rvm_region_t *region, rvm_options_t *options);
/* Unmap (RVM_EUNCOMMIT if a transaction has ranges in it); the memory is
 * freed if rvm_map allocated it. */
RVM_EXPORT rvm_return_t rvm_unmap(rvm_region_t *region);

RVM_EXPORT rvm_return_t rvm_set_options(rvm_options_t *options);
RVM_EXPORT rvm_return_t rvm_query(rvm_options_t *options, rvm_region_t *region);

/* Begin a transaction (mode restore or no_restore). */
RVM_EXPORT rvm_return_t rvm_begin_transaction(rvm_tid_t *tid, rvm_mode_t mode);
/*
 * Declare that [dest, dest+length) will be modified; in restore mode the
 * current bytes are saved in the in-memory undo log.  RVM_ETID, RVM_ENOT_MAPPED,
 * RVM_ENO_MEMORY.
 */
RVM_EXPORT rvm_return_t rvm_set_range(rvm_tid_t *tid, void *dest,
	rvm_length_t length);
/* rvm_set_range, then copy length bytes from src to dest. */
RVM_EXPORT rvm_return_t rvm_modify_bytes(rvm_tid_t *tid, void *dest,
	const void *src, rvm_length_t length);
/* Restore the before-images (newest first) and end; RVM_EMODE for a
 * no_restore transaction (which stays open). */
RVM_EXPORT rvm_return_t rvm_abort_transaction(rvm_tid_t *tid);
/*
 * Commit: the new values of every range are copied into a redo record.
 * flush: the record (and every buffered no_flush record before it) is
 * written to the log and fdatasync'd before the call returns.  no_flush:
 * it is buffered; a crash before the next flush loses it (atomically).
 * After an I/O failure the library refuses further work (RVM_ETERMINATED).
 */
RVM_EXPORT rvm_return_t rvm_end_transaction(rvm_tid_t *tid, rvm_mode_t mode);
/* Write and sync every buffered no_flush record. */
RVM_EXPORT rvm_return_t rvm_flush(void);
/* Flush, then apply the log to the data files, sync them, reset the log. */
RVM_EXPORT rvm_return_t rvm_truncate(void);

/*
 * Create a log file with a data area of *log_len bytes (at least 64 KiB,
 * a multiple of 8), written out in full and synced; the file must not
 * exist.  RVM_EOPTIONS, RVM_ELOG (exists), RVM_EIO.
 */
RVM_EXPORT rvm_return_t rvm_create_log(rvm_options_t *options,
	rvm_offset_t *log_len, long mode);

/* Statistics (a subset of RVM's rvm_statistics_t; README.md). */
#define RVM_STATISTICS_VERSION "RVM Statistics Version 1.1 8 Dec 1992"
typedef struct {
	rvm_struct_id_t struct_id;
	rvm_bool_t from_heap;
	uint64_t n_abort;
	uint64_t n_flush_commit;
	uint64_t n_no_flush_commit;
	uint64_t n_flush;       /* log writes (one per flush of the buffer) */
	uint64_t n_syncs;       /* fdatasync calls, log and data */
	uint64_t n_truncation;
	uint64_t n_ranges;      /* rvm_set_range calls */
	uint64_t bytes_undo;    /* before-image bytes copied */
	uint64_t bytes_logged;  /* redo bytes written to the log */
	uint64_t bytes_applied; /* bytes written to data files by truncation */
	uint64_t recovered_tx;  /* records replayed by rvm_initialize */
} rvm_statistics_t;
RVM_EXPORT rvm_return_t rvm_statistics(const char *version,
	rvm_statistics_t *statistics);

#ifdef __cplusplus
}
#endif

#endif /* RVM_H */
