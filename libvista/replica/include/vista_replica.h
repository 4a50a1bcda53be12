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
 *   VR_1SAFE      vr_commit returns when the record is in the ring;
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
	XX(VR_ESTATE, -35013, "the node's state segment is corrupt")

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
	unsigned window;       /* VR_PIPELINED: commits in flight; 0 = 1024 */
	unsigned heartbeat_ms; /* 0 = 10 */
	unsigned timeout_ms;   /* peer lost after this silence; 0 = 100 */
	bool auto_promote;     /* a backup that loses its primary promotes */
	/* Called by the backup during a full copy (may be NULL). */
	void (*progress)(void *arg, uint64_t done, uint64_t total);
	void *progress_arg;
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
 * (2-safe/pipelined: committed locally, the backup did not acknowledge
 * within timeout_ms: not replicated); any error of vista_end_transaction.
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

#ifdef __cplusplus
}
#endif

#endif /* VISTA_REPLICA_H */
