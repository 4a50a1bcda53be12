/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_layout.h -- the sbml datagram
 *
 *   offset 0                        header (struct sbml_wire_hdr, 72 bytes)
 *   offset 72                       nrsn RSN entries {ssn, rsn}, 16 bytes
 *   offset 72 + 16 * nrsn           nack acknowledged RSNs, 8 bytes each
 *   offset 72 + 16 * nrsn + 8 nack  payload (payload_len bytes)
 *
 * One datagram is one packet; its length is exactly the sum above.  All
 * integers are little-endian.  Types (the field `sii` and `arg` per type):
 *
 *   DATA        a message: ssn (per destination, from 1), sii = the
 *               sender's state interval index when it sent it.  RSN
 *               entries: RSNs the sender assigned to messages of dst
 *               ({dst's ssn, rsn}; rsn 0: "need not be logged"), handled
 *               before the message (Section 3.5).  Acks: RSNs dst
 *               returned that the sender has recorded.
 *   CTRL        RSN entries and acks alone, when nothing rides.
 *   REPLAY_REQ  a recovering sender asks dst for a window of its logged
 *               messages: the first ones with RSN >= sii.
 *   REPLAY      one logged message: ssn, sii as sent, arg = its RSN.
 *   REPLAY_END  the window is complete: arg = how many REPLAY packets it
 *               had, ssn = the RSN of the next logged message after it
 *               (0: none, the answer is complete), sii = the sender's
 *               dependency-vector entry for dst; flag RECOVERING if the
 *               sender is itself recovering.
 *   REPLAY_DONE the recovering sender will re-create state intervals up
 *               to sii (L) only: dst treats its messages with RSN > L as
 *               partially logged again (Section 3.4 step 5).
 *   DONE        the sender has finished (sbml_finish); arg = 1 if it has
 *               dst's DONE already (0: dst says DONE again).
 *   DONE_ACK, REPLAY_DONE_ACK  the acknowledgements.
 *
 * Invariants (checked by sbml__wire_parse; a datagram failing one is
 * counted and dropped, never used)
 *   S1. magic, version, hdr_len, a known type, only known flags,
 *       nrsn <= SBML_WIRE_MAX_RSNS, nack <= SBML_WIRE_MAX_ACKS, src != dst.
 *   S2. Exactly 72 + 16 nrsn + 8 nack + payload_len bytes, payload_len at
 *       most the receiver's max_message.
 *   S3. checksum = rio_checksum(bytes 0..63, seed = rio_checksum(body,
 *       seed = SBML_WIRE_SEED)), body = RSN entries, acks and payload.
 *   S4. inc != 0; DATA and REPLAY: ssn != 0; REPLAY: arg != 0; only DATA
 *       and REPLAY carry a payload; only DATA and CTRL carry RSN entries
 *       and acks; every RSN entry's ssn and every ack are non-zero.
 */
#ifndef SBML_WIRE_LAYOUT_H
#define SBML_WIRE_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define SBML_WIRE_MAGIC 0x314d4253u /* "SBM1" */
#define SBML_WIRE_VERSION 1
#define SBML_WIRE_SEED 0x31304c4d42534d53ull /* "SMSBML01" */
#define SBML_WIRE_MAX_RSNS 64
#define SBML_WIRE_MAX_ACKS 64

enum sbml_wire_type {
	SBML_PKT_DATA = 1,
	SBML_PKT_CTRL = 2,
	SBML_PKT_REPLAY_REQ = 3,
	SBML_PKT_REPLAY = 4,
	SBML_PKT_REPLAY_END = 5,
	SBML_PKT_REPLAY_DONE = 6,
	SBML_PKT_REPLAY_DONE_ACK = 7,
	SBML_PKT_DONE = 8,
	SBML_PKT_DONE_ACK = 9,
};
#define SBML_PKT_TYPE_MAX SBML_PKT_DONE_ACK

#define SBML_PKT_F_RECOVERING (1u << 0) /* REPLAY_END */
#define SBML_PKT_F_RETRANS (1u << 1)    /* sent again (statistics) */
#define SBML_PKT_F_KNOWN (SBML_PKT_F_RECOVERING | SBML_PKT_F_RETRANS)

struct sbml_wire_hdr {
	uint32_t magic;       /* 0  SBML_WIRE_MAGIC */
	uint8_t version;      /* 4  SBML_WIRE_VERSION */
	uint8_t type;         /* 5  enum sbml_wire_type */
	uint16_t flags;       /* 6  SBML_PKT_F_* */
	uint16_t hdr_len;     /* 8  sizeof(struct sbml_wire_hdr) */
	uint8_t src;          /* 10 sender's process id */
	uint8_t dst;          /* 11 receiver's process id */
	uint16_t nrsn;        /* 12 RSN entries after the header */
	uint16_t nack;        /* 14 acks after them */
	uint32_t payload_len; /* 16 */
	uint32_t group;       /* 20 the group's tag */
	uint64_t inc;         /* 24 sender's incarnation */
	uint64_t ssn;         /* 32 DATA, REPLAY: the message's SSN */
	uint64_t sii;         /* 40 per type, above */
	uint64_t arg;         /* 48 per type, above */
	uint64_t ckpt;        /* 56 sender's state interval index at its
	                       *    last checkpoint (Section 4.3) */
	uint64_t checksum;    /* 64 S3 */
};

struct sbml_wire_rsn {
	uint64_t ssn; /* the receiver's (dst's) message */
	uint64_t rsn; /* its RSN at the sender of the entry; 0: no log */
};

RIO_STATIC_ASSERT(sizeof(struct sbml_wire_hdr) == 72, "wire header size");
RIO_STATIC_ASSERT(__builtin_offsetof(struct sbml_wire_hdr, inc) == 24, "inc");
RIO_STATIC_ASSERT(__builtin_offsetof(struct sbml_wire_hdr, ckpt) == 56,
	"ckpt");
RIO_STATIC_ASSERT(__builtin_offsetof(struct sbml_wire_hdr, checksum) == 64,
	"checksum is last");
RIO_STATIC_ASSERT(sizeof(struct sbml_wire_rsn) == 16, "rsn entry");
RIO_STATIC_ASSERT(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	"formats are little-endian; add byte swapping for this target");

#endif /* SBML_WIRE_LAYOUT_H */
