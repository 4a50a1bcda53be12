/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vista_replica.h -- libvista_replica: a Vista segment kept on a backup node
 *
 * Primary-backup replication of one Vista segment with an active backup
 * (Amza, Cox & Zwaenepoel, Section 6).  At each commit the primary diffs
 * the transaction's declared ranges against their before-images (libvista's
 * transaction hook) and queues a redo record of the changed bytes only in a
 * ring; a sender thread streams the ring over TCP to the backup, which
 * appends each whole, verified record to a redo log in a pool of its own
 * (state_path + ".redo"), fences, and only then acknowledges it; it
 * applies the log to its segment lazily, in batches (redo is idempotent),
 * and vr_open, vr_follow's end and vr_promote apply what is left.
 *
 * Each node keeps its replication state (role, epoch, the replica set's
 * uuid, the stream and the last applied record) in a small state segment
 * mapped by the same vista instance as the data segment.
 *
 * Commit modes, chosen per node (vr_opts.mode):
 *   VR_1SAFE      vr_commit returns when the record is in the ring and
 *                 its seq is within the limit the backup has durably
 *                 granted (`window` records past the seq queued when
 *                 the limit was offered): the loss on a failover is at
 *                 most the window vr_status reports;
 *   VR_2SAFE      ... when the backup has made it durable (acknowledged);
 *   VR_PIPELINED  ... when the record `window` commits older is
 *                 acknowledged: several transactions share one
 *                 acknowledgement; vr_sync() waits for all of them.
 * Failover: a backup that hears nothing for timeout_ms reports the primary
 * lost (and promotes itself with auto_promote); vr_promote() writes the new
 * epoch durably before the node accepts a write.  A node whose epoch is
 * older never commits: it rejoins as a backup and is given a full copy.
 *
 * Return codes: 0, -errno, a VR_E* code (-35000..-35999) or any code of
 * libvista and librio.  vr_errormsg() describes the calling thread's last
 * failure.  docs/vista_replica.md is the manual; docs/FORMAT.md has the
 * stream's records.
 */
#ifndef VISTA_REPLICA_H
#define VISTA_REPLICA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vista.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VR_EXPORT __attribute__((visibility("default")))

#define VR_ERRNO_MAP(XX)                                                     \
	XX(VR_EOTHERSET, -35001, "the peer replicates another segment "      \
		"(replica set uuid)")                                        \
	XX(VR_EVERSION, -35002, "the peer speaks another stream or segment " \
		"layout version")                                            \
	XX(VR_ETRUNC, -35003, "a stream record ended before its length")     \
	XX(VR_ECORRUPT, -35004, "a stream record fails its checksum or "     \
		"shape")                                                     \
	XX(VR_ESTALE, -35005, "this node's epoch is older than its peer's: " \
		"it may not commit")                                         \
	XX(VR_ENOTPRIMARY, -35006, "this node is not the primary")           \
	XX(VR_ENOBACKUP, -35007, "no backup acknowledged in time (committed " \
		"locally, not replicated)")                                  \
	XX(VR_EPEERLOST, -35008, "the peer missed its heartbeats or closed " \
		"the connection")                                            \
	XX(VR_ESIZE, -35009, "the peer's segment has another size")          \
	XX(VR_EINCOMPLETE, -35010, "this node's copy is incomplete (a full " \
		"copy was interrupted)")                                     \
	XX(VR_EHEAP, -35011, "heap transactions are not replicated")         \
	XX(VR_ETOOBIG, -35012, "the transaction's redo record does not fit " \
		"the ring")                                                  \
	XX(VR_ESTATE, -35013, "the node's state segment is corrupt")       \
	XX(VR_EDOMAIN, -35014, "passive replication needs a pool that "     \
		"flushes (cacheline or page domain), not the byte domain")

#define VR__ERRNO_ENUM(name, value, msg) name = (value),
enum vr_errno { VR_ERRNO_MAP(VR__ERRNO_ENUM) };
#undef VR__ERRNO_ENUM

VR_EXPORT const char *vr_strerror(int rc);  /* any code of the stack */
VR_EXPORT const char *vr_err_name(int rc);
VR_EXPORT const char *vr_errormsg(void);    /* = rio_errormsg() */

typedef struct vr_node vr_node;

enum vr_mode { VR_1SAFE = 1, VR_2SAFE = 2, VR_PIPELINED = 3 };
enum vr_role { VR_FRESH = 0, VR_PRIMARY = 1, VR_BACKUP = 2, VR_STALE = 3 };

struct vr_opts {
	/* The node's state segment (created if missing, mapped by the same
	 * vista instance as the data segment at state_addr).  Required. */
	const char *state_path;
	void *state_addr;
	enum vr_mode mode;     /* 0 = VR_2SAFE */
	size_t ring_size;      /* bytes, power of two; 0 = 4 MiB */
	/* VR_PIPELINED: commits in flight (0 = 1024); VR_1SAFE: the most
	 * transactions a failover may lose (0 = 16384). */
	unsigned window;
	unsigned heartbeat_ms; /* 0 = 10 */
	unsigned timeout_ms;   /* peer lost after this silence; 0 = 100 */
	bool auto_promote;     /* a backup that loses its primary promotes */
	/* Called by the backup during a full copy (may be NULL). */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	/* Primary: send each declared range whole.  The committing thread
	 * copies the ranges' bytes into the ring and nothing else (no diff
	 * against the before-images).  More bytes travel, less CPU on the
	 * committing thread.  false: only the changed bytes travel.  Either
	 * way the sender thread seals each record (its checksum) before it
	 * writes it. */
	bool whole_ranges;
	/* Primary: the thread that sends the records diffs them, not the
	 * committing thread.  The committing thread copies each declared
	 * range whole into the ring (as with whole_ranges); before a record
	 * is written to the socket, the sender diffs its ranges against a
	 * DRAM mirror of the segment (the backup's copy as the records sent
	 * so far leave it) and rewrites it with only the changed bytes, so
	 * the stream is the same as without the option.  Costs one more
	 * buffer of the segment's size in DRAM (allocated by vr_serve).
	 * Not with whole_ranges. */
	bool sender_diff;
	/* VR_1SAFE and VR_PIPELINED: how long queued records gather before
	 * the sender writes them (an eighth of the ring sends at once);
	 * 0 = 1.  Longer: fewer wake-ups of the sender and the backup, each
	 * send larger; the 1-safe window still bounds what is queued. */
	unsigned batch_ms;
};

/*
 * Attach replication to data segment `seg` of instance `v` (raw use:
 * vista_set_range, no heap).  Maps the state segment; a new node is
 * VR_FRESH.  Installs v's transaction hook: from now on only a primary
 * commits (others get VR_ENOTPRIMARY/VR_ESTALE from the commit).
 * Returns 0, -EINVAL, VR_ESTATE, or any error of vista_map.
 */
VR_EXPORT int vr_open(vista *v, vista_segment *seg, const struct vr_opts *o,
	vr_node **out);
/* Stop the threads, close the connection, unhook and unmap the state
 * segment (the data segment stays mapped).  NULL is a no-op. */
VR_EXPORT int vr_close(vr_node *n);

/*
 * Primary: make a FRESH node the first primary of a new replica set
 * (new set uuid, epoch 1, durably), or keep a PRIMARY one.  Then listen
 * on host:port (port 0: any; vr_port() tells) for a backup.  Returns 0,
 * VR_ESTALE/VR_ENOTPRIMARY (a backup or stale node), -errno.
 */
VR_EXPORT int vr_serve(vr_node *n, const char *host, unsigned port);
VR_EXPORT unsigned vr_port(const vr_node *n);
/* Wait up to timeout_ms for a backup to be connected and caught up. */
VR_EXPORT int vr_wait_backup(vr_node *n, unsigned timeout_ms);

/*
 * Commit the calling thread's transaction (vista_end_transaction) and wait
 * as the mode says.  Returns 0; VR_ENOTPRIMARY or VR_ESTALE (transaction
 * still running, nothing changed: abort it); VR_EHEAP; VR_ENOBACKUP
 * (committed locally, not replicated: 2-safe/pipelined, the backup did
 * not acknowledge within timeout_ms; 1-safe, the seq is past the limit
 * the backup granted and no backup is connected, or none granted more
 * within timeout_ms); any error of vista_end_transaction.
 */
VR_EXPORT int vr_commit(vr_node *n);
/* Wait until every record queued so far is acknowledged (or timeout_ms). */
VR_EXPORT int vr_sync(vr_node *n);

/*
 * Backup: connect to the primary at host:port and apply its stream until
 * the primary is lost (returns VR_EPEERLOST, after promoting the node if
 * auto_promote: then vr_role() is VR_PRIMARY), vr_stop() is called
 * (returns 0), or an error: VR_EOTHERSET, VR_EVERSION, VR_ESIZE, VR_ETRUNC,
 * VR_ECORRUPT (the connection is dropped; what was applied stays, a
 * consistent segment), -errno.  A node of an older epoch or another
 * stream is given a full copy first.
 */
VR_EXPORT int vr_follow(vr_node *n, const char *host, unsigned port);
VR_EXPORT void vr_stop(vr_node *n);

/*
 * Make a backup the primary: epoch + 1, a new stream, role PRIMARY,
 * durably, before returning.  Returns 0, VR_EINCOMPLETE (an interrupted
 * full copy), VR_ENOTPRIMARY never; -EBUSY while vr_follow runs.
 */
VR_EXPORT int vr_promote(vr_node *n);

struct vr_status {
	enum vr_role role;
	uint64_t epoch;
	uint8_t set_uuid[16];
	uint64_t stream;
	uint64_t seq;       /* primary: last queued; backup: last applied */
	uint64_t acked;     /* primary: last acknowledged by the backup */
	bool connected;
	uint64_t records, bytes_sent, data_bytes, meta_bytes;
	uint64_t copies;    /* full copies given (primary) or taken */
	/* Backup after promotion: the records the old primary may have
	 * committed that never arrived are unknown; 1-safe loss is bounded by
	 * the primary's unacknowledged window, this node's last applied seq
	 * and the highest seq announced by heartbeats tell it. */
	uint64_t announced; /* highest seq the primary announced */
	/* Backup, and a promoted node until it serves: the largest 1-safe
	 * limit it granted (durable), and the 1-safe loss bound
	 * limit - applied: the old primary returned no 1-safe commit of a
	 * seq past the limit, so at most `window` transactions whose
	 * commit returned are missing here. */
	uint64_t limit;
	uint64_t window;
};
VR_EXPORT int vr_status(const vr_node *n, struct vr_status *st);

/* The seq vr_commit gave the calling thread's last transaction (0: it
 * changed nothing replicated).  Durable on the backup once vr_status()
 * reports acked >= it. */
VR_EXPORT uint64_t vr_last_seq(void);

/* ---- the stream, exposed for tests and tools (replica_layout.h) ---- */

/* The changed bytes of `len` bytes at `cur` against `before`, as pieces
 * {off, len} (offsets from cur): gaps of fewer than `gap` equal bytes are
 * sent along.  Returns the pieces written to out (at most max), or
 * -E2BIG if more are needed. */
VR_EXPORT int vr_diff(const void *before, const void *cur, size_t len,
	size_t gap, uint64_t *off_len, size_t max);

/* ------------------------------------------------------------------------
 * Passive backup (Amza, Cox & Zwaenepoel, Section 5)
 *
 * The primary sends every write-back to its persistent structures -- each
 * range librio flushes on its pools and each fence (librio's per-pool
 * write tap, rio_set_persist_tap) -- and the backup only stores the bytes
 * into copies of the pool files, in stream order, making everything up to
 * a fence durable before it stores what follows it.  So the backup's copy
 * is always an image the primary's pools could have had after a power
 * failure, whatever runs on them (libvista, Versions 0-2 of
 * bench/tpcb_tpcc, anything on librio); its CPU does no transaction
 * work.  Failover: vr_passive_promote(), then open the copies as the
 * primary opened its pools (libvista's recovery runs at vista_init and
 * vista_map).  The byte domain is refused (VR_EDOMAIN): a program there
 * need not flush, so the tap would not see its writes.
 *
 * A backup takes a full copy of the pools the first time, while the
 * primary's flushes wait; from then on the primary keeps a log tail of
 * its write-backs in its ring, and a backup that comes back rejoins by
 * that tail if it still holds every record after the backup's durable
 * position, else by a full copy.  Modes: VR_1SAFE (vr_passive_commit
 * returns at once within the limit the backup granted durably: a
 * promotion loses at most vr_passive_status's `window` commits) and
 * VR_2SAFE (it returns once the backup has made the commit's fence
 * durable).
 * ------------------------------------------------------------------------ */

typedef struct vr_passive vr_passive;

struct vr_passive_opts {
	const char *state_path; /* node state file (created).  Required. */
	enum vr_mode mode;      /* VR_1SAFE or VR_2SAFE; 0 = VR_2SAFE */
	size_t ring_size;       /* bytes, power of two >= 4 MiB; 0 = 16 MiB */
	unsigned heartbeat_ms;  /* 0 = 10 */
	unsigned timeout_ms;    /* peer lost after this silence; 0 = 100 */
	unsigned rio_flags;     /* backup: flags for opening its copies */
	/* Primary, may be NULL: the class (0..3) of each piece sent, for the
	 * byte counts of vr_passive_status (e.g. data, undo, other). */
	unsigned (*classify)(void *arg, unsigned pool, uint64_t off,
		uint32_t len);
	void *classify_arg;
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
	/* Primary, 1-safe: fence records past the last one sealed that the
	 * backup is asked to cover (the loss bound); 0 = 16384. */
	unsigned window;
	/* Backup, may be NULL: called (with progress_arg) when it rejoins
	 * by the log tail instead of a full copy: its copies hold the
	 * stream up to fence record `seq`, the rest follows. */
	void (*tail)(void *arg, uint64_t seq);
};

/* Open the node (its state file, created FRESH if missing).  Returns 0,
 * -EINVAL, VR_ESTATE (no valid slot), -errno. */
VR_EXPORT int vr_passive_open(const struct vr_passive_opts *o,
	vr_passive **out);
/* Stop the sender, remove the taps, close copies and sockets. */
VR_EXPORT int vr_passive_close(vr_passive *n);

/*
 * Primary: replicate `pool` (at most 4 pools, added before vr_passive_serve;
 * the index is the order of the calls).  Installs the pool's write tap.
 * Returns 0, VR_EDOMAIN (byte domain), -E2BIG, -EBUSY (serving already).
 */
VR_EXPORT int vr_passive_add_pool(vr_passive *n, rio_pool *pool);
/* Become (or stay) the primary: a FRESH node starts a new replica set
 * (new uuid, epoch 1, durably).  Listen on host:port (0: any).  Returns
 * 0, VR_ESTALE (a stale or backup node), -EINVAL (no pool), -errno. */
VR_EXPORT int vr_passive_serve(vr_passive *n, const char *host,
	unsigned port);
VR_EXPORT unsigned vr_passive_port(const vr_passive *n);
/* Wait up to timeout_ms for a backup to have taken its full copy. */
VR_EXPORT int vr_passive_wait_backup(vr_passive *n, unsigned timeout_ms);
/*
 * Call after each commit of the program (whatever its transaction system):
 * the write-backs since the last fence are sealed into the commit's fence
 * record.  1-safe returns 0 at once while that record is within the limit
 * the backup granted (durably, `window` records ahead); past it, it waits
 * for a grant while a backup is connected.  2-safe waits until the backup
 * acknowledges the record.  Returns 0; VR_ENOBACKUP (no backup, none
 * acknowledged or granted within timeout_ms, or, 1-safe, past the limit
 * with no backup connected: committed locally, not replicated);
 * VR_ESTALE (a backup of a newer epoch exists: stop writing).
 */
VR_EXPORT int vr_passive_commit(vr_passive *n);

/*
 * Backup: connect to the primary and keep copies of its pools in
 * paths[0..npaths) (created or overwritten by a full copy), until the
 * primary is lost (VR_EPEERLOST), vr_passive_stop() (0), or an error:
 * VR_EOTHERSET, VR_EVERSION, VR_ESIZE (another pool count), VR_ESTALE,
 * VR_ETRUNC, VR_ECORRUPT (what was stored stays, a crash image of the
 * primary's pools), -EBUSY (the node serves or was given pools), -errno.
 * The copies are closed when it returns.  A backup whose whole copies
 * stand at a fence record of the primary's current stream (its position,
 * kept durably in state_path + ".pos") rejoins by the log tail if the
 * primary's ring still holds every record after it (opts.tail is
 * called), else by a full copy (opts.progress).
 */
VR_EXPORT int vr_passive_follow(vr_passive *n, const char *host,
	unsigned port, const char *const *paths, unsigned npaths);
VR_EXPORT void vr_passive_stop(vr_passive *n);
/* Backup -> primary: epoch + 1, durably.  VR_EINCOMPLETE if a full copy
 * was interrupted; -EBUSY while vr_passive_follow runs. */
VR_EXPORT int vr_passive_promote(vr_passive *n);

struct vr_passive_status {
	enum vr_role role;
	uint64_t epoch;
	uint8_t set_uuid[16];
	uint64_t seq;      /* primary: last record sealed; backup: applied */
	uint64_t fenced;   /* primary: last fence record */
	uint64_t acked;    /* primary: acknowledged by the backup */
	bool connected;
	uint64_t records, fences, bytes_sent;
	uint64_t piece_bytes;  /* data bytes of the pieces */
	uint64_t meta_bytes;   /* headers and piece descriptors */
	uint64_t class_bytes[4]; /* piece bytes by opts.classify */
	uint64_t dropped;      /* bytes written back while no backup */
	uint64_t copies;
	uint64_t announced; /* backup: highest record seq the beats named */
	uint64_t tails;     /* rejoins by the log tail (both sides) */
	uint64_t stream;    /* primary: its stream; backup: its position's */
	uint64_t kept_from; /* primary: its tail holds the records after it */
	uint64_t granted;   /* primary, 1-safe: the limit granted */
	/* Backup (or promoted): its position file's last fence record and
	 * 1-safe limit, both durable, and the loss bound: at most `window`
	 * commits whose 1-safe vr_passive_commit returned 0 on the old
	 * primary are missing from the copies. */
	uint64_t pos, limit, window;
};
VR_EXPORT int vr_passive_status(const vr_passive *n,
	struct vr_passive_status *st);

#ifdef __cplusplus
}
#endif

#endif /* VISTA_REPLICA_H */
