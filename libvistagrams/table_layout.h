/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * table_layout.h -- the persistent tables of an endpoint in its Vista segment
 *
 * The tables fill the user area of a segment used raw (no Vista heap):
 *
 *   super      256 bytes   written once, at creation, in a transaction
 *   txhdr       64 bytes   request counter and the commit flag; changed
 *                          only inside transactions (vista_set_range)
 *   ops        2 x max_ops x 48 bytes   deferred-operation logs, written
 *                          raw; generation G uses log G & 1
 *   requests   req_cap x 64 bytes       client's request table (headers)
 *   req bufs   req_cap x buf_stride     the buffered requests
 *   responses  resp_cap x 128 bytes     server's response table (headers)
 *   resp bufs  resp_cap x buf_stride    the buffered responses
 *   peers      peer_cap x 64 bytes      server's per-client watermarks
 *
 * Request, response and peer tables are hash tables with linear probing
 * (capacity a power of two, at least twice the entries allowed), keyed by
 * request sequence number, by request id (node, incarnation, seq) and by
 * client node.  Every slot starts with one 8-byte word holding its state
 * in the low 32 bits (FREE = 0) and, for request and response slots, the
 * payload length in the high 32 bits, so a state change outside a
 * transaction is a single failure-atomic store.
 *
 * Invariants
 *   T1. Fields are changed either only inside transactions (declared with
 *       vista_set_range first: super, txhdr, a slot's whole header when it
 *       is filled) or only outside them by single 8-byte stores that are
 *       correct to repeat (a slot's state word going to DELETED or FREE, a
 *       peer's watermark, record selector or expired word).  A transaction
 *       never declares a slot that outside stores may touch at the same time:
 *       those only touch committed entries no open transaction uses.
 *   T2. A payload buffer and an op-log record are durable by the commit
 *       point that makes a header or the commit flag refer to them: either
 *       declared in the transaction (Vista's commit writes them back and
 *       its commit record's checksum covers them: client.c send_request_tx,
 *       server.c S8) or written raw, flushed, and drained just before the
 *       commit point (vg_commit).  Before that nothing refers to them, so
 *       a crash or an abort leaves harmless garbage.
 *   T3. The commit flag: txhdr.committed_gen = G and txhdr.nops = n say
 *       that ops[G & 1][0..n) belong to the last committed transaction
 *       that deferred operations; each record carries G and a checksum.
 *       Replay is idempotent (each operation checks the slot still holds
 *       its key and state), so it runs at commit and again at every open.
 *       The next transaction writes log G+1 into the other half, so the
 *       committed log is never overwritten before a newer one commits.
 *   T4. Linear probing: every live key sits in the run of non-FREE slots
 *       that starts at its home slot.  Deletion leaves a tombstone
 *       (DELETED), made durable before the tombstones of its run that no
 *       live key's probe path crosses any more are turned back into FREE
 *       slots (in any order).
 *   T5. A client's sequence numbers only grow (txhdr.next_seq), so a
 *       request id is never reused; a server drops any request of a client
 *       below that client's watermark, which only grows, and forgets a
 *       response only below the watermark, made durable first.
 *   T6. A peer's incarnation and watermark change together by writing the
 *       record not selected, draining, then flipping `sel` with one store.
 *       `expired[k]` belongs to record k: it is zeroed with it.
 *   T7. Reclaim (server.c R1-R3): a response is deleted without its
 *       client's acknowledgement only if its sequence number is at or below
 *       its peer's expired[sel], made durable first; a request at or below
 *       it that is neither in the table nor below the watermark is answered
 *       "expired", never executed.  expired[] only grows within an
 *       incarnation (one 8-byte store, correct to repeat).
 */
#ifndef VG_TABLE_LAYOUT_H
#define VG_TABLE_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define VG_TBL_MAGIC "VGTABLE" /* 7 chars + NUL */
#define VG_TBL_MAJOR 1
#define VG_TBL_MINOR 1
#define VG_TBL_SUPER_SEED 0x5647544142535031ull /* "VGTABSP1" */
#define VG_TBL_OP_SEED 0x564754414f504c31ull    /* "VGTAOPL1" */
#define VG_TBL_SLOT_SEED 0x56475441534c5431ull  /* "VGTASLT1" */
/* The peers' expired[] words are in use (T7): a reader that ignored them
 * would execute a reclaimed request again.  Set at creation; tables
 * without it (minor 0) are never reclaimed from. */
#define VG_TBL_FEAT_INCOMPAT_EXPIRED (1u << 0)
#define VG_TBL_FEAT_INCOMPAT_KNOWN VG_TBL_FEAT_INCOMPAT_EXPIRED
#define VG_TBL_FEAT_RO_COMPAT_KNOWN 0u
#define VG_TBL_ALIGN 64u

struct vg_super {
	char magic[8];          /* 0   "VGTABLE\0" */
	uint16_t major;         /* 8   */
	uint16_t minor;         /* 10  */
	uint32_t super_size;    /* 12  sizeof(struct vg_super) */
	uint32_t compat;        /* 16  */
	uint32_t incompat;      /* 20  */
	uint32_t ro_compat;     /* 24  */
	uint32_t flags;         /* 28  none defined, zero */
	uint64_t node_id;       /* 32  */
	uint64_t incarnation;   /* 40  CLOCK_REALTIME ns at creation */
	uint32_t req_cap;       /* 48  request slots (power of two) */
	uint32_t req_limit;     /* 52  live requests at most */
	uint32_t resp_cap;      /* 56  */
	uint32_t resp_limit;    /* 60  */
	uint32_t peer_cap;      /* 64  */
	uint32_t peer_limit;    /* 68  */
	uint32_t max_message;   /* 72  payload bytes at most */
	uint32_t max_ops;       /* 76  records per op log */
	uint64_t buf_stride;    /* 80  bytes per payload buffer */
	uint64_t txhdr_off;     /* 88  offsets from the start of the area */
	uint64_t ops_off;       /* 96  */
	uint64_t req_off;       /* 104 */
	uint64_t req_buf_off;   /* 112 */
	uint64_t resp_off;      /* 120 */
	uint64_t resp_buf_off;  /* 128 */
	uint64_t peer_off;      /* 136 */
	uint64_t area_size;     /* 144 bytes of the whole area */
	uint8_t reserved[248 - 152]; /* 152 zero */
	uint64_t checksum;      /* 248 rio_checksum(bytes 0..247) */
};

struct vg_txhdr {
	uint64_t next_seq;      /* 0   next request sequence number, from 1 */
	uint64_t committed_gen; /* 8   the commit flag (T3); 0 = none yet */
	uint32_t nops;          /* 16  records of that generation */
	uint32_t reserved0;     /* 20  zero */
	uint64_t reserved[5];   /* 24  zero */
};

enum vg_op_type {
	VG_OP_SEND_REQ = 1,  /* send request slot `slot` (key: seq) */
	VG_OP_SEND_RESP = 2, /* send response slot `slot` (key: node/inc/seq) */
};

struct vg_op {
	uint64_t gen;           /* 0   generation of the transaction */
	uint16_t type;          /* 8   enum vg_op_type */
	uint16_t reserved;      /* 10  zero */
	uint32_t slot;          /* 12  slot index in its table */
	uint64_t node;          /* 16  key */
	uint64_t inc;           /* 24  */
	uint64_t seq;           /* 32  */
	uint64_t checksum;      /* 40  rio_checksum(bytes 0..39, seed ^ gen) */
};

/* A UDP address as stored: family 4 or 6, port in host order. */
struct vg_addr {
	uint16_t family;        /* 0   4, 6 (0 = none) */
	uint16_t port;          /* 2   */
	uint32_t scope_id;      /* 4   IPv6 scope */
	uint8_t addr[16];       /* 8   IPv4 in the first 4 bytes */
};

/* Slot states (low 32 bits of the first word) */
#define VG_SLOT_FREE 0u
#define VG_REQ_LIVE 1u      /* sent (or about to be, if uncommitted) */
#define VG_REQ_DELETED 2u
#define VG_RESP_RECEIVED 1u /* request received, not answered */
#define VG_RESP_ANSWERED 2u /* response buffered */
#define VG_RESP_DELETED 3u

struct vg_req_slot {
	uint64_t word;          /* 0   state | len << 32 */
	uint64_t seq;           /* 8   key */
	struct vg_addr dest;    /* 16  the server's normal port */
	uint64_t payload_csum;  /* 40  rio_checksum(payload, len, VG_WIRE_SEED) */
	uint64_t reserved;      /* 48  zero */
	uint64_t checksum;      /* 56  rio_checksum(bytes 8..55, seed ^ index) */
};

struct vg_resp_slot {
	uint64_t word;          /* 0   state | len << 32 (len of the response) */
	uint64_t node;          /* 8   key: client node */
	uint64_t inc;           /* 16  client incarnation */
	uint64_t seq;           /* 24  request sequence number */
	struct vg_addr ret;     /* 32  where the request came from */
	uint64_t payload_csum;  /* 56  of the response (ANSWERED) */
	uint64_t reserved[7];   /* 64  zero */
	uint64_t checksum;      /* 120 rio_checksum(bytes 8..119, seed ^ index) */
};

struct vg_peer_rec {
	uint64_t inc;           /* the client's incarnation */
	uint64_t wm;            /* its requests below this are finished */
};

struct vg_peer_slot {
	uint64_t node;          /* 0   0 = FREE; stored last at insertion */
	uint64_t sel;           /* 8   0 or 1: the current record */
	struct vg_peer_rec rec[2]; /* 16 */
	uint64_t expired[2];    /* 48  with rec[k]: its requests up to this
				 * were reclaimed (T7); 0 = none */
};

RIO_STATIC_ASSERT(sizeof(struct vg_super) == 256, "super is 256 bytes");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vg_super, area_size) == 144,
	"area_size");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vg_super, checksum) == 248,
	"checksum is last");
RIO_STATIC_ASSERT(sizeof(struct vg_txhdr) == 64, "txhdr is one line");
RIO_STATIC_ASSERT(sizeof(struct vg_op) == 48, "op record");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vg_op, checksum) == 40,
	"op checksum is last");
RIO_STATIC_ASSERT(sizeof(struct vg_addr) == 24, "address");
RIO_STATIC_ASSERT(sizeof(struct vg_req_slot) == 64, "request slot");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vg_req_slot, checksum) == 56,
	"request slot checksum is last");
RIO_STATIC_ASSERT(sizeof(struct vg_resp_slot) == 128, "response slot");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vg_resp_slot, checksum) == 120,
	"response slot checksum is last");
RIO_STATIC_ASSERT(sizeof(struct vg_peer_slot) == 64, "peer slot");
RIO_STATIC_ASSERT(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	"formats are little-endian; add byte swapping for this target");

static inline uint32_t
vg_slot_state(uint64_t word)
{
	return (uint32_t)word;
}

static inline uint32_t
vg_slot_len(uint64_t word)
{
	return (uint32_t)(word >> 32);
}

static inline uint64_t
vg_slot_word(uint32_t state, uint32_t len)
{
	return (uint64_t)state | (uint64_t)len << 32;
}

#endif /* VG_TABLE_LAYOUT_H */
