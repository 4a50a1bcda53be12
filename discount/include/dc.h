/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dc.h -- Discount Checking: fast full-process checkpoints
 *
 * A checkpoint is the commit of a transaction over the whole process: its
 * private memory, its registers, and the kernel state it set up (open files
 * and their contents, current directory, umask, signal handlers and mask,
 * timers, UDP sockets).  Recovery is running the program again: dc_init()
 * finds the last committed checkpoint and the process continues from it as
 * if it had paused.
 *
 * Two ways to use it:
 *   - unmodified programs: `dc-run [--dir D] [--protocol P] [--interval MS]
 *     [--tracking uffd|wp|undo] -- program args...` preloads libdc.so, which starts from a
 *     constructor;
 *   - linked: `dc_init(&opts)` as the first line of main, dc_checkpoint()
 *     wherever the program wants one.
 *
 * When checkpoints are taken is the recovery protocol (thesis 6.2.2),
 * chosen at run time.  docs/discount.md is the manual.
 *
 * Return codes: 0, -errno, a RIO_E* code, or a DC_E* code (-33000..-33999).
 * dc_errormsg() describes the calling thread's last failure.
 */
#ifndef DC_H
#define DC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define DC_EXPORT __attribute__((visibility("default")))

#define DC_ERRNO_MAP(XX)                                                      \
	XX(DC_EMISMATCH, -33001,                                              \
		"checkpoint was taken by another program or library set")     \
	XX(DC_ECORRUPT, -33002, "checkpoint files are corrupt")               \
	XX(DC_EUNSUPPORTED, -33003,                                           \
		"the program did something Discount Checking cannot recover") \
	XX(DC_EINIT, -33004, "Discount Checking is already running")          \
	XX(DC_ENOTINIT, -33005, "Discount Checking is not running")           \
	XX(DC_EFATAL, -33006, "a checkpoint failed; the process must stop")   \
	XX(DC_EFS, -33007,                                                    \
		"the checkpoint directory cannot punch holes in files")       \
	XX(DC_EPROTOCOL, -33008, "unknown recovery protocol")                 \
	XX(DC_ELIMIT, -33009, "a table of Discount Checking is full")         \
	XX(DC_EREPLAY, -33010, "re-execution diverged from the input log")    \
	XX(DC_EVERSION, -33011, "checkpoint made by a newer format version")  \
	XX(DC_ENOCKPT, -33012, "no committed checkpoint in the directory")

#define DC__ERRNO_ENUM(name, value, msg) name = (value),
enum dc_errno { DC_ERRNO_MAP(DC__ERRNO_ENUM) };
#undef DC__ERRNO_ENUM

/* Text and name of any code of the stack (DC_E*, RIO_E*, -errno, 0). */
DC_EXPORT const char *dc_strerror(int rc);
DC_EXPORT const char *dc_err_name(int rc);
DC_EXPORT const char *dc_errormsg(void);

/* Recovery protocols (thesis 6.2.2) and two schedules without a
 * consistency guarantee for visible output. */
enum dc_protocol {
	DC_CPVS = 0,       /* commit prior to visible event or send */
	DC_CAND = 1,       /* commit after non-deterministic event */
	DC_CBNDVS = 2,     /* commit between non-deterministic and visible */
	DC_CAND_LOG = 3,   /* CAND, input (read/recv/select/poll) logged */
	DC_CBNDVS_LOG = 4, /* CBNDVS, input logged */
	DC_PERIODIC = 5,   /* every interval_ms only */
	DC_MANUAL = 6,     /* dc_checkpoint() only */
	DC_BUFFERED = 7,   /* every interval_ms only; output (files, streams)
	                    * held until the next commit, then performed */
	/* Computations of several processes (twopc.c, dc-coord(1)): every
	 * participant commits, by two-phase commit through the coordinator
	 * at $DC_2PC_COORD, before any of them executes a visible event;
	 * sends are not visible.  $DC_2PC_ID names the participant. */
	DC_CPV_2PC = 16,   /* commit prior to visible, two-phase commit */
	DC_CBNDV_2PC = 17, /* the same, only after a non-deterministic
	                    * event of the process about to do the visible
	                    * event */
};
/* "cpvs", "cand", "cbndvs", "cand-log", "cbndvs-log", "periodic",
 * "manual", "buffered", "cpv-2pc", "cbndv-2pc" (case-insensitive).
 * Returns 0 or DC_EPROTOCOL. */
DC_EXPORT int dc_protocol_parse(const char *name, enum dc_protocol *out);
DC_EXPORT const char *dc_protocol_name(enum dc_protocol p);

/* How written pages are found (docs/discount.md, "Dirty tracking"). */
enum dc_tracking {
	DC_TRACK_DEFAULT = 0, /* $DC_TRACKING, else DC_TRACK_UFFD */
	DC_TRACK_UFFD = 1,    /* userfaultfd write-protect, async mode, and
	                       * PAGEMAP_SCAN at each checkpoint */
	DC_TRACK_WP = 2,      /* mprotect; the first write to a page faults
	                       * (SIGSEGV) and is recorded */
	DC_TRACK_UNDO = 3,    /* the memory is moved into a persistent
	                       * segment (the shadow file, mapped shared at
	                       * the same addresses); the first write to a
	                       * page faults and copies its before-image
	                       * into an undo log */
};
/* "uffd", "wp", "undo" (case-insensitive).  Returns 0 or -EINVAL. */
DC_EXPORT int dc_tracking_parse(const char *name, enum dc_tracking *out);
DC_EXPORT const char *dc_tracking_name(enum dc_tracking t);

struct dc_opts {
	/* Checkpoint directory (created if missing).  NULL: $DC_DIR, else
	 * /dev/shm/dc-<uid>/<program>-<hash of cwd and arguments>. */
	const char *dir;
	enum dc_protocol protocol;
	/* Also checkpoint every this many milliseconds (0 = never; required
	 * for DC_PERIODIC and DC_BUFFERED; DC_BUFFERED holds file writes
	 * by the scheme $DC_DISK names: "buffer" (default) or "rename"). */
	unsigned interval_ms;
	/* Called after a recovery, just before the program continues
	 * (thesis: e.g. re-initialise the terminal). */
	void (*on_recover)(void *arg);
	/* Called before each checkpoint. */
	void (*pre_checkpoint)(void *arg);
	void *arg;
	/* Print what happens (init, recovery, refusals) on stderr. */
	bool verbose;
	/* Dirty-tracking mechanism of this run (a recovered run may use
	 * another one: the checkpoint files are the same). */
	enum dc_tracking tracking;
};

/*
 * Start Discount Checking; call it first thing in main (or let dc-run's
 * preload do it).  If the directory holds a committed checkpoint of this
 * program, the call does not return: the process continues from that
 * checkpoint.  Otherwise it takes the first checkpoint and returns 0.
 * Returns DC_EINIT (already running), DC_EMISMATCH (the checkpoint is of
 * another executable, or a library, the vDSO or the mappings differ:
 * nothing is changed), DC_ECORRUPT, DC_EVERSION, DC_EFS, DC_EUNSUPPORTED
 * (the process already has a second thread or a shared writable
 * mapping), or -errno.  Under DC_CPV_2PC and DC_CBNDV_2PC it first
 * settles a round the last run left undecided and joins the coordinator:
 * -EINVAL (no or a bad $DC_2PC_COORD / $DC_2PC_ID), DC_EUNSUPPORTED
 * (tracking undo), DC_EPROTOCOL (the coordinator has fewer participants),
 * DC_EFATAL (no coordinator answered in 30 s); nothing is changed.
 */
DC_EXPORT int dc_init(const struct dc_opts *opts);

/*
 * Take a checkpoint now.  Returns 0 (the checkpoint is durable: a crash
 * from here on resumes after this call), 1 when the process has just been
 * recovered to this checkpoint, DC_ENOTINIT, or DC_EFATAL (the checkpoint
 * could not be written; the previous one is intact and the process should
 * stop).
 */
DC_EXPORT int dc_checkpoint(void);

/* True when this process was resumed from a checkpoint. */
DC_EXPORT bool dc_recovered(void);

struct dc_stats {
	uint64_t checkpoints;     /* commits, including the first */
	uint64_t pages_copied;    /* pages written to the shadow image */
	uint64_t visible_events;  /* writes/sends to terminals, pipes, ... */
	uint64_t nd_events;       /* non-deterministic events seen */
	uint64_t logged_events;   /* non-deterministic events logged */
	uint64_t replayed_events; /* answered from the log after recovery */
	uint64_t syscalls;        /* system calls intercepted */
	uint64_t input_bytes;     /* bytes read from standard input */
	uint64_t recoveries;      /* of this run's history */
	uint64_t redo_bytes_max;  /* largest checkpoint (redo log bytes) */
	uint64_t redo_bytes_total;
	uint64_t cooled;          /* regions made cold (not scanned) */
	uint64_t warmed;          /* cold regions made hot again (WP:
	                           * ranges made writable whole) */
	uint64_t redo_flushes;    /* redo log applied to the shadow image */
	uint64_t wp_faults;       /* first writes caught (DC_TRACK_WP, _UNDO) */
	uint64_t undo_bytes;      /* before-images logged (DC_TRACK_UNDO) */
	uint64_t seg_pages;       /* pages moved into the persistent segment
	                           * (DC_TRACK_UNDO) */
	uint64_t direct_calls;    /* of syscalls, made through libdc's libc
	                           * wrappers without a trap */
};
DC_EXPORT int dc_stats(struct dc_stats *out);

/* What a checkpoint directory holds, without running anything. */
struct dc_status {
	uint64_t generation;      /* committed checkpoint, 0 if none */
	uint64_t incarnation;     /* runs that recovered from this dir */
	uint64_t input_bytes;     /* standard-input bytes the recovered
	                           * process will have consumed (checkpoint
	                           * plus logged reads) */
	uint64_t checkpoints;
	uint32_t protocol;
	char exe[256];
};
/* Returns 0, DC_ENOCKPT, DC_ECORRUPT, DC_EVERSION or -errno. */
DC_EXPORT int dc_status(const char *dir, struct dc_status *out);

/* Remove a checkpoint directory's files (a run that should not be
 * recovered).  Returns 0 or -errno. */
DC_EXPORT int dc_discard(const char *dir);

#ifdef __cplusplus
}
#endif

#endif /* DC_H */
