/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckr_layout.h -- on-media layout of the checkpoint slots and the log
 *
 * Checkpoint file "ckpt" (or the user area of rio pool "ckpt.pool"):
 *
 *   +0                   slot 0 header (CKR_HDR_SIZE bytes)
 *   +CKR_HDR_SIZE        slot 0 data (dsize = nwords * 4 rounded up to 4096)
 *   +slot_size           slot 1 header
 *   +slot_size + 4096    slot 1 data          (slot_size = 4096 + dsize)
 *
 * The file is exactly 2 * slot_size bytes (pool: at least), so a state or
 * object size other than the file's is refused (CKR_ESIZE) before any slot
 * is read.  A slot is complete iff its header passes the header rules
 * (docs/FORMAT.md) and its data checksum matches; the writer invalidates
 * the header first, then writes and makes durable the data, and writes the
 * header last (I1 in ckpt.c), so a torn slot is never complete.
 *
 * Log file "log" (or rio pool "log.pool"):
 *
 *   +0      log header (CKR_HDR_SIZE bytes, written once at create)
 *   +4096   records, each 8-byte aligned, back to back in a ring of
 *           `capacity` bytes: a record that does not fit before the end
 *           goes at +4096 (the ring's start), never split
 *
 * A record is { seq, len, pad, payload rounded up to 8, csum } and is
 * valid iff seq is the next expected number and csum =
 * rio_checksum(record without csum, seed = log_id): from a known start the
 * valid records form a chain (the next one right after the last, or at the
 * ring's start if it is not there); a torn tail or stale bytes of an
 * earlier lap or an older log never pass (seq only grows, the id differs
 * per created log).  Where a scan starts: record 0 at +4096 while it is
 * still there (the ring never wrapped), else the oldest complete slot's
 * (log_seq, log_off).  Records before the older complete slot's log_seq
 * are released: the ring reuses their bytes (log.c, L4).
 *
 * All fields little-endian (the stack runs on x86-64 only).
 */
#ifndef CKR_LAYOUT_H
#define CKR_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define CKR_HDR_SIZE 4096u
#define CKR_SLOT_MAGIC "CKRSLOT" /* 7 chars + NUL */
#define CKR_LOG_MAGIC "CKRLOG\0" /* 7 bytes + NUL */
#define CKR_MAJOR 2 /* 2: the log is a ring, slots say where (log_off) */
#define CKR_MINOR 0
#define CKR_INCOMPAT_KNOWN 0u
#define CKR_COMPAT_KNOWN 0u
#define CKR_SLOT_CSUM_SEED 0x434b52534c4f5448ull /* "CKRSLOTH" */
#define CKR_DATA_CSUM_SEED 0x434b52534c4f5444ull /* "CKRSLOTD" */
#define CKR_LOG_CSUM_SEED 0x434b524c4f474844ull  /* "CKRLOGHD" */
#define CKR_CHUNK (1u << 20) /* data checksum chunk: csum chains per MiB */
#define CKR_REC_MAX 65536u

struct ckr_slot_hdr {
	char magic[8];      /*  0: "CKRSLOT\0" */
	uint16_t major;     /*  8 */
	uint16_t minor;     /* 10 */
	uint32_t incompat;  /* 12 */
	uint32_t compat;    /* 16 */
	uint32_t algo;      /* 20: enum ckr_algo that wrote it (information) */
	uint64_t epoch;     /* 24: checkpoint number, from 1 */
	uint64_t log_seq;   /* 32: actions logged before its point of consistency */
	uint64_t nwords;    /* 40: state size in 32-bit words */
	uint32_t obj_size;  /* 48: bytes per object */
	uint32_t chunk;     /* 52: CKR_CHUNK */
	uint64_t data_csum; /* 56: chained rio_checksum of the data, per chunk */
	uint64_t log_id;    /* 64: the log this checkpoint goes with */
	uint64_t log_off;   /* 72: log offset where record log_seq is, or
	                     *     where it would go if it fits (else +4096) */
	uint8_t reserved[40]; /* 80: zero */
	uint64_t csum;      /* 120: rio_checksum(bytes 0..119, SLOT seed) */
};
RIO_STATIC_ASSERT(sizeof(struct ckr_slot_hdr) == 128, "slot header size");
RIO_STATIC_ASSERT(offsetof(struct ckr_slot_hdr, epoch) == 24, "epoch");
RIO_STATIC_ASSERT(offsetof(struct ckr_slot_hdr, log_id) == 64, "log_id");
RIO_STATIC_ASSERT(offsetof(struct ckr_slot_hdr, log_off) == 72, "log_off");
RIO_STATIC_ASSERT(offsetof(struct ckr_slot_hdr, csum) == 120, "csum");

struct ckr_log_hdr {
	char magic[8];      /*  0: "CKRLOG\0\0" */
	uint16_t major;     /*  8 */
	uint16_t minor;     /* 10 */
	uint32_t incompat;  /* 12 */
	uint32_t compat;    /* 16 */
	uint32_t pad;       /* 20: zero */
	uint64_t log_id;    /* 24: random, set at create; seeds record csums */
	uint64_t capacity;  /* 32: record bytes after the header */
	uint8_t reserved[80]; /* 40: zero */
	uint64_t csum;      /* 120: rio_checksum(bytes 0..119, LOG seed) */
};
RIO_STATIC_ASSERT(sizeof(struct ckr_log_hdr) == 128, "log header size");
RIO_STATIC_ASSERT(offsetof(struct ckr_log_hdr, capacity) == 32, "capacity");

struct ckr_rec_hdr {
	uint64_t seq;       /* 0: action number, from 0 */
	uint32_t len;       /* 8: payload bytes (1..CKR_REC_MAX) */
	uint32_t pad;       /* 12: zero */
	/* 16: payload, padded with zeros to a multiple of 8, then a uint64_t
	 * csum = rio_checksum(header and padded payload, seed = log_id) */
};
RIO_STATIC_ASSERT(sizeof(struct ckr_rec_hdr) == 16, "record header size");

/* Slot geometry: data bytes, and header + data. */
static inline uint64_t
ckr__dsize(uint64_t nwords)
{
	return (nwords * 4 + 4095) & ~(uint64_t)4095;
}
static inline uint64_t
ckr__slot_size(uint64_t nwords)
{
	return CKR_HDR_SIZE + ckr__dsize(nwords);
}

static inline uint64_t
ckr_rec_size(uint32_t len)
{
	return sizeof(struct ckr_rec_hdr) + ((len + 7u) & ~7u) + 8u;
}

#endif /* CKR_LAYOUT_H */
