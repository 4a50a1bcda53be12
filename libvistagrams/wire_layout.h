/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire_layout.h -- the Vistagrams datagram
 *
 *   offset 0                  header (struct vg_wire_hdr, 80 bytes)
 *   offset 80                 nacks acknowledgements, 8 bytes each
 *   offset 80 + 8 * nacks     payload (payload_len bytes)
 *
 * One datagram carries one message; its length is exactly the sum above.
 * All integers are little-endian.  Three types:
 *
 *   REQUEST   client -> server, to the normal port (first transmission) or
 *             to the retransmit port (flag RETRANS).  src = req = client.
 *             `low`: every request of this client to this server with a
 *             sequence number below `low` is finished (its response was
 *             received in a committed transaction), so the server may
 *             forget them and must drop them if they show up again.
 *             `acks`: sequence numbers finished since the last datagram to
 *             this server, so the server can free their entries at once.
 *   RESPONSE  server -> client.  src = server, req = the request answered.
 *             No acks, low = 0.  Flag EXPIRED (no payload): the server
 *             reclaimed the response (the client was silent past the
 *             server's horizon); the request will never take effect again.
 *   ACK       client -> server: `low` and `acks` alone, when no request
 *             came along to carry them.  seq = 0, no payload.
 *
 * Invariants (checked by vg__wire_parse; a datagram failing any of them is
 * counted and dropped, never used)
 *   W1. magic, version, hdr_len, a known type, only known flag bits,
 *       reserved = 0, nacks <= VG_WIRE_MAX_ACKS.
 *   W2. The datagram is exactly 80 + 8 * nacks + payload_len bytes, and
 *       payload_len is at most the receiver's max_message.
 *   W3. checksum = rio_checksum(header bytes 0..71, seed = rio_checksum(acks,
 *       seed = rio_checksum(payload, seed = VG_WIRE_SEED))): the payload
 *       hash is the one the tables keep for the buffered message, so a
 *       retransmission does not hash the payload again.
 *   W4. Node ids, incarnations and sequence numbers are non-zero where they
 *       name something; a REQUEST has low <= seq; an ACK has no payload;
 *       a RESPONSE has no acks and low = 0; only a RESPONSE may carry
 *       EXPIRED, only a REQUEST RETRANS, and an EXPIRED one has no
 *       payload; every ack is non-zero.
 */
#ifndef VG_WIRE_LAYOUT_H
#define VG_WIRE_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define VG_WIRE_MAGIC 0x31524756u /* "VGR1" */
#define VG_WIRE_VERSION 1
#define VG_WIRE_SEED 0x5647524d53473031ull /* "VGRMSG01" */
#define VG_WIRE_MAX_ACKS 32
#define VG_WIRE_MAX_MESSAGE 65000u

enum vg_wire_type {
	VG_PKT_REQUEST = 1,
	VG_PKT_RESPONSE = 2,
	VG_PKT_ACK = 3,
};

#define VG_PKT_F_RETRANS (1u << 0) /* a REQUEST sent again */
#define VG_PKT_F_EXPIRED (1u << 1) /* a RESPONSE: reclaimed, no payload */
#define VG_PKT_F_KNOWN (VG_PKT_F_RETRANS | VG_PKT_F_EXPIRED)

struct vg_wire_hdr {
	uint32_t magic;       /* 0  VG_WIRE_MAGIC */
	uint8_t version;      /* 4  VG_WIRE_VERSION */
	uint8_t type;         /* 5  enum vg_wire_type */
	uint16_t flags;       /* 6  VG_PKT_F_* */
	uint16_t hdr_len;     /* 8  sizeof(struct vg_wire_hdr) */
	uint16_t nacks;       /* 10 acknowledgements after the header */
	uint32_t payload_len; /* 12 */
	uint64_t src_node;    /* 16 sender's node id */
	uint64_t src_inc;     /* 24 sender's incarnation */
	uint64_t req_node;    /* 32 request id: the client's node id */
	uint64_t req_inc;     /* 40 ... its incarnation */
	uint64_t seq;         /* 48 ... its sequence number (0 in an ACK) */
	uint64_t low;         /* 56 REQUEST, ACK: finished below this */
	uint64_t reserved;    /* 64 zero */
	uint64_t checksum;    /* 72 W3 */
};

RIO_STATIC_ASSERT(sizeof(struct vg_wire_hdr) == 80, "wire header size");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vg_wire_hdr, src_node) == 16,
	"src_node");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vg_wire_hdr, low) == 56, "low");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vg_wire_hdr, checksum) == 72,
	"checksum is last");
RIO_STATIC_ASSERT(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	"formats are little-endian; add byte swapping for this target");

/* The largest datagram: header, every ack, the largest payload. */
#define VG_WIRE_MAX_DATAGRAM \
	(sizeof(struct vg_wire_hdr) + 8 * VG_WIRE_MAX_ACKS + VG_WIRE_MAX_MESSAGE)

#endif /* VG_WIRE_LAYOUT_H */
