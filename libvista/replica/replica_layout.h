/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replica_layout.h -- the replication stream's records and the node state
 *
 * The stream (TCP, both directions) is a sequence of records:
 *
 *   +0   header (40 bytes: magic, type, major, len, count, seq, epoch,
 *        check)
 *   +40  payload (len - 40 bytes), by type:
 *          HELLO     struct vr_hello
 *          REDO      count pieces (8 bytes each: off, len), then the
 *                    data of the pieces in piece order, back to back,
 *                    then zeros up to the next multiple of 8
 *          ACK       struct vr_ack
 *          BEAT      none (seq: the last record queued)
 *          GRANT     none (seq: a 1-safe limit; see below)
 *          COPY      one piece and its data, padded so (full copy)
 *          COPY_END  struct vr_ack (the stream position the copy is at)
 *          REFUSE    struct vr_refuse
 *
 * GRANT bounds the 1-safe loss.  The primary offers a limit L (seq): it
 * returns no 1-safe commit of a seq past the largest limit the backup
 * has granted back.  The backup makes L durable in its node state first,
 * then sends GRANT {seq L} back.  So after a promotion the records the
 * old primary may have acknowledged that this node lacks are at most
 * state.limit - state.applied, whatever the primary did after its last
 * heartbeat.
 *
 * check = rio_checksum(payload, rio_checksum(header bytes 0..31,
 * VR_WIRE_SEED)).  A reader takes a record only whole and verified:
 * magic, major, type, a len within [40, VR_MAX_REC], then the checksum,
 * then the shape (pieces inside the segment, lengths adding up).  All
 * fields are little-endian.  docs/FORMAT.md has the tables.
 *
 * The node state (the user area of the state segment) is written only in
 * Vista transactions, so it is never torn; its check catches a segment
 * that holds something else.
 */
#ifndef VR_REPLICA_LAYOUT_H
#define VR_REPLICA_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define VR_WIRE_MAGIC 0x31525256u /* "VRR1" */
/* 3: GRANT records, HELLO carries the backup's limit (2: no 1-safe
 * limit; 1: 16-byte pieces, each piece's data padded to 8).  A node
 * refuses a record of another major (VR_EVERSION), so a peer of another
 * version is refused at its HELLO. */
#define VR_WIRE_MAJOR 3u
#define VR_WIRE_SEED 0x5652535452454d31ull /* "VRSTREM1" */
#define VR_MAX_REC (64u << 20)  /* largest record, header included */
#define VR_COPY_CHUNK (64u << 10) /* full-copy bytes per COPY record */

enum {
	VR_REC_HELLO = 1,
	VR_REC_REDO = 2,
	VR_REC_ACK = 3,
	VR_REC_BEAT = 4,
	VR_REC_COPY = 5,
	VR_REC_COPY_END = 6,
	VR_REC_REFUSE = 7,
	VR_REC_GRANT = 8,
	VR_REC_MAXTYPE = 8,
};

struct vr_rec_hdr {
	uint32_t magic;  /* 0  VR_WIRE_MAGIC */
	uint16_t type;   /* 4  VR_REC_* */
	uint16_t major;  /* 6  VR_WIRE_MAJOR */
	uint32_t len;    /* 8  bytes, header included, multiple of 8 */
	uint32_t count;  /* 12 pieces (REDO, COPY); 0 otherwise */
	uint64_t seq;    /* 16 REDO: its number (1, 2, ...); BEAT: last queued;
			    GRANT: the 1-safe limit offered or granted */
	uint64_t epoch;  /* 24 the sender's epoch */
	uint64_t check;  /* 32 see above */
};

/* A piece of a REDO or COPY record: `len` bytes at `off` from the start
 * of the data segment's user area, in one little-endian word:
 * bits 0..43 off, bits 44..63 len (1 .. VR_PIECE_MAX_LEN).  A segment
 * of replica has at most VR_SEG_MAX bytes. */
struct vr_piece {
	uint64_t word; /* 0 off | (uint64_t)len << 44 */
};
#define VR_PIECE_OFF_BITS 44
#define VR_SEG_MAX (1ull << VR_PIECE_OFF_BITS)
#define VR_PIECE_MAX_LEN ((1u << (64 - VR_PIECE_OFF_BITS)) - 1)

static inline uint64_t
vr_piece_off(const struct vr_piece *p)
{
	return p->word & (VR_SEG_MAX - 1);
}

static inline uint32_t
vr_piece_len(const struct vr_piece *p)
{
	return (uint32_t)(p->word >> VR_PIECE_OFF_BITS);
}

/* off < VR_SEG_MAX, 0 < len <= VR_PIECE_MAX_LEN */
static inline struct vr_piece
vr_piece_make(uint64_t off, uint32_t len)
{
	struct vr_piece p = { off | (uint64_t)len << VR_PIECE_OFF_BITS };
	return p;
}

#define VR_ROLE_PRIMARY 1u
#define VR_ROLE_BACKUP 2u

struct vr_hello {
	uint8_t set_uuid[16]; /* 0  the replica set (zero: a fresh backup) */
	uint16_t seg_major;   /* 16 VISTA_SEG_MAJOR of the sender */
	uint16_t role;        /* 18 VR_ROLE_* the sender plays */
	uint32_t reserved;    /* 20 zero */
	uint64_t stream;      /* 24 primary: its stream; backup: the one its
				 applied seq counts */
	uint64_t seq;         /* 32 primary: first seq it can send from its
				 ring; backup: last applied */
	uint64_t pos;         /* 40 stream byte position after `seq` */
	uint64_t seg_size;    /* 48 user area bytes */
	uint64_t limit;       /* 56 backup: its durable 1-safe limit (state);
				 primary: zero */
};

struct vr_ack {
	uint64_t seq; /* 0 applied and durable up to here */
	uint64_t pos; /* 8 stream byte position after that record */
	uint64_t stream; /* 16 */
};

struct vr_refuse {
	int32_t code;      /* 0 VR_E* the refuser returns */
	uint32_t reserved; /* 4 zero */
};

/* The node state: the state segment's user area, first 128 bytes. */
#define VR_STATE_MAGIC "VRSTATE"
#define VR_STATE_MAJOR 1u
#define VR_STATE_MINOR 1u /* 1: limit (zero in a minor-0 state: none) */
#define VR_STATE_SEED 0x5652535441544531ull /* "VRSTATE1" */
struct vr_state {
	char magic[8];        /* 0   "VRSTATE\0" */
	uint16_t major;       /* 8   */
	uint16_t minor;       /* 10  */
	uint32_t role;        /* 12  enum vr_role */
	uint8_t set_uuid[16]; /* 16  zero while fresh */
	uint64_t epoch;       /* 32  */
	uint64_t stream;      /* 40  stream of the applied records */
	uint64_t applied;     /* 48  last applied seq of that stream */
	uint64_t pos;         /* 56  stream byte position after it */
	uint64_t seg_size;    /* 64  */
	uint32_t copying;     /* 72  1 while a full copy is under way */
	uint32_t reserved0;   /* 76  zero */
	uint64_t limit;       /* 80  backup: the largest 1-safe limit it
				 granted (a seq of `stream`): the old primary
				 returned no 1-safe commit past it (minor 1) */
	uint8_t reserved[32]; /* 88  zero */
	uint64_t check;       /* 120 rio_checksum(bytes 0..119, seed) */
};

RIO_STATIC_ASSERT(sizeof(struct vr_rec_hdr) == 40, "record header");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vr_rec_hdr, check) == 32,
	"record check");
RIO_STATIC_ASSERT(sizeof(struct vr_piece) == 8, "piece");
RIO_STATIC_ASSERT(VR_COPY_CHUNK <= VR_PIECE_MAX_LEN, "a COPY is one piece");
RIO_STATIC_ASSERT(sizeof(struct vr_hello) == 64, "hello");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vr_state, limit) == 80,
	"node state limit");
RIO_STATIC_ASSERT(sizeof(struct vr_ack) == 24, "ack");
RIO_STATIC_ASSERT(sizeof(struct vr_refuse) == 8, "refuse");
RIO_STATIC_ASSERT(sizeof(struct vr_state) == 128, "node state");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vr_state, check) == 120,
	"node state check is last");
RIO_STATIC_ASSERT(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	"formats are little-endian");

#endif /* VR_REPLICA_LAYOUT_H */
