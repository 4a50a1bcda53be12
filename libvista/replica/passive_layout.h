/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * passive_layout.h -- the passive backup's stream and its node state file
 *
 * The passive stream (TCP, both directions) uses the active stream's
 * 40-byte record header (struct vr_rec_hdr: magic, type, major, len,
 * count, seq, epoch, check; same checksum, replica_layout.h) with its own
 * major, VRP_WIRE_MAJOR, so that an active node and a passive one refuse
 * each other's records with VR_EVERSION.  Payloads, by type:
 *
 *   HELLO     struct vrp_hello (backup: where its copies stand; primary:
 *             a full copy follows, or VRP_HELLO_TAIL: the stream goes
 *             on after the backup's position, no copy)
 *   WRITE     count pieces, each a struct vrp_piece followed by its data,
 *             padded to 8 bytes: bytes the primary wrote back, in the
 *             order it flushed them
 *   FENCE     as WRITE, then a fence: the backup makes every piece of
 *             this and the earlier records durable before it stores a
 *             byte of the next record (seq: the fence's number)
 *   ACK       struct vrp_ack: durable on the backup up to seq
 *   BEAT      none
 *   COPY      one piece and its data (full copy, file offsets)
 *   COPY_END  struct vrp_ack: the stream goes on after seq
 *   REFUSE    struct vr_refuse (replica_layout.h)
 *   GRANT     struct vrp_ack: primary -> backup, a 1-safe limit offered
 *             (seq: a record seq); backup -> primary, the same limit once
 *             it is durable in the backup's position file
 *
 * Records of the stream (WRITE, FENCE) carry seq 1, 2, 3... of the
 * primary's stream (a random id, new at each vr_passive_serve); the
 * backup stores only the record after the one it holds (seq + 1).
 *
 * A piece's offset counts from the start of the pool's file (its rio
 * header page included), so the backup's copy is the primary's pool file
 * byte for byte: librio and whatever runs on the pool open it as they
 * would the primary's.  All fields little-endian.
 *
 * Node state file: two 4096-byte slots, each starting with a struct
 * vr_state (replica_layout.h) whose `stream` field counts generations and
 * `seg_size` holds the number of pools; the valid slot with the higher
 * generation is current; a write goes to the other slot and is fsynced
 * before it counts, so a torn write leaves the older slot in force.
 *
 * Position file (backup; the state path + ".pos", a librio pool): two
 * 64-byte struct vrp_pos slots at the start of its user area, written in
 * turn, each flushed and drained; the valid slot with the higher gen is
 * current.  A slot names the stream, epoch and the last FENCE record whose
 * pieces are durable in the copies (written after that fence's drain and
 * made durable before a byte of the next record is stored), and the
 * 1-safe limit granted.  A torn write leaves the older slot, an older
 * fence: the copies then hold that fence plus lines of the one record
 * range after it, which the tail rewrites in order.
 */
#ifndef VRP_PASSIVE_LAYOUT_H
#define VRP_PASSIVE_LAYOUT_H

#include <stdint.h>

#include "replica_layout.h"

#define VRP_WIRE_MAJOR 0x102u
#define VRP_MAX_POOLS 4u
#define VRP_MAX_REC (1u << 20)     /* a WRITE record is sealed at this size */
#define VRP_MAX_PIECE (256u << 10) /* longer flushes are cut into pieces */
#define VRP_STATE_SLOT 4096u
#define VRP_POS_MAGIC 0x736f7050u /* "Ppos" */

enum {
	VRP_REC_HELLO = 1,
	VRP_REC_WRITE = 2,
	VRP_REC_FENCE = 3,
	VRP_REC_ACK = 4,
	VRP_REC_BEAT = 5,
	VRP_REC_COPY = 6,
	VRP_REC_COPY_END = 7,
	VRP_REC_REFUSE = 8,
	VRP_REC_GRANT = 9,
	VRP_REC_MAXTYPE = 9,
};

/* vrp_hello.flags */
#define VRP_HELLO_POS 1u  /* backup: stream/pos/limit name its copies */
#define VRP_HELLO_TAIL 2u /* primary: no copy, the stream goes on after pos */

struct vrp_piece {
	uint64_t off;  /* 0 from the start of the pool file */
	uint32_t len;  /* 8 > 0, at most VRP_MAX_PIECE (COPY: VR_COPY_CHUNK) */
	uint32_t pool; /* 12 index in the primary's pool list */
};

struct vrp_hello {
	uint8_t set_uuid[16]; /* 0  the replica set (zero: a fresh backup) */
	uint16_t role;        /* 16 VR_ROLE_* the sender plays */
	uint16_t npools;      /* 18 */
	uint32_t flags;       /* 20 VRP_HELLO_* */
	uint64_t stream;      /* 24 backup: its copies' stream; primary: its */
	uint64_t pos;         /* 32 last FENCE record in the copies (tail:
	                       *    the stream goes on after it) */
	uint64_t limit;       /* 40 backup: 1-safe limit it holds durably */
	uint64_t size[VRP_MAX_POOLS]; /* 48 pool file bytes (primary) */
};

struct vrp_pos {
	uint32_t magic;   /* 0  VRP_POS_MAGIC */
	uint32_t reserved; /* 4 zero */
	uint64_t gen;     /* 8  higher: newer */
	uint64_t stream;  /* 16 */
	uint64_t epoch;   /* 24 */
	uint64_t seq;     /* 32 last FENCE record durable in the copies */
	uint64_t limit;   /* 40 1-safe limit granted */
	uint64_t pad;     /* 48 zero */
	uint64_t check;   /* 56 rio_checksum of bytes 0..55 */
};

struct vrp_ack {
	uint64_t seq; /* 0 */
};

RIO_STATIC_ASSERT(sizeof(struct vrp_piece) == 16, "passive piece");
RIO_STATIC_ASSERT(sizeof(struct vrp_hello) == 80, "passive hello");
RIO_STATIC_ASSERT(sizeof(struct vrp_pos) == 64, "passive position slot");
RIO_STATIC_ASSERT(sizeof(struct vrp_ack) == 8, "passive ack");

#endif /* VRP_PASSIVE_LAYOUT_H */
