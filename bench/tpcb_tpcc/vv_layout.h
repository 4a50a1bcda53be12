/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vv_layout.h -- on-media layout of Vista's standalone Versions 0, 1, 2
 *
 * Amza, Cox & Zwaenepoel, section 4.  One rio pool per database (layout
 * name "vista.v0", "vista.v1" or "vista.v2"), whose user area holds
 *
 *   +0          header (128 bytes, written once at create)
 *   +128        state line (64 bytes): the one word that decides recovery
 *   +4096       the database, db_size bytes (rounded up to 4096)
 *   +aux_off    V0: the heap (undo records and their buffers)
 *               V1, V2: the mirror, a second copy of the database
 *   +log_off    V1, V2: the range array, log_cap entries of 32 bytes
 *
 * V0 (Vista's original structure).  state.word is the head of the undo
 * list: the offset (from the user area) of the newest undo record, 0 when
 * no transaction has ranges.  A record (struct vv_undo, in a 64-byte heap
 * block) names a database range and a separate heap block holding its
 * before-image, and the next older record.  A record is reachable only
 * once it and its buffer are durable (set_range's first fence), so
 * recovery follows the list newest first and copies each buffer back.
 * The heap's own metadata (struct vv_heap, block headers) is stored in the
 * pool but never made durable: no record outlives its transaction, so
 * recovery resets the heap whole.
 *
 * V1, V2 (mirror).  state.word = gen << 2 | phase.  gen counts finished
 * transactions; the entries of the transaction in flight carry gen + 1 in
 * phase IDLE, or gen in phase COMMITTED (committed, mirror maybe behind).
 * Invariant: outside the ranges named by live entries, the mirror equals
 * the database.  Recovery in IDLE copies mirror -> database over the
 * entries of gen + 1 (undo) and moves to gen + 1; in COMMITTED it copies
 * database -> mirror over the entries of gen (roll forward) and moves to
 * IDLE.  Entries of one transaction are a run from index 0; the run ends
 * at the first entry whose gen or seal does not match (a later one was
 * never fenced: nothing was stored into its range).
 *
 * docs/FORMAT.md has the tables, the persist orders (vversions.c) and what
 * a torn write of each part leaves behind.  All fields are little-endian.
 * A reader refuses another major version (RIO_EVERSION) and nonzero
 * reserved bytes (RIO_EBADHDR).
 */
#ifndef VV_LAYOUT_H
#define VV_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define VV_MAGIC "VISTAVV"   /* 7 chars + NUL */
#define VV_MAJOR 1
#define VV_MINOR 0
#define VV_HDR_CSUM_SEED 0x5656484452435355ull /* "VVHDRCSU" */
#define VV_ENTRY_SEED 0x5656454e54525953ull    /* "VVENTRYS" */
#define VV_UNDO_SEED 0x5656554e444f5245ull     /* "VVUNDORE" */

#define VV_STATE_OFF 128u
#define VV_DB_OFF 4096u

/* state.word of V1 and V2 */
#define VV_IDLE 0u
#define VV_COMMITTED 1u
#define VV_WORD(gen, phase) ((uint64_t)(gen) << 2 | (phase))

struct vv_hdr {
	char magic[8];      /* 0   "VISTAVV\0", stored last at create */
	uint16_t major;     /* 8   VV_MAJOR */
	uint16_t minor;     /* 10  VV_MINOR */
	uint32_t version;   /* 12  0, 1 or 2: the paper's Version */
	uint64_t db_off;    /* 16  VV_DB_OFF */
	uint64_t db_size;   /* 24  bytes of database */
	uint64_t aux_off;   /* 32  heap (V0) or mirror (V1, V2) */
	uint64_t aux_size;  /* 40  bytes */
	uint64_t log_off;   /* 48  range array (V1, V2), else 0 */
	uint64_t log_cap;   /* 56  entries of the range array */
	uint64_t reserved[7]; /* 64 zero */
	uint64_t checksum;  /* 120 rio_checksum(bytes 8..119) */
};
RIO_STATIC_ASSERT(sizeof(struct vv_hdr) == 128, "vv_hdr is 128 bytes");

/* The magic is stored after the rest (and outside the checksum). */
static inline uint64_t
vv_hdr_checksum(const struct vv_hdr *h)
{
	return rio_checksum((const char *)h + 8, 112, VV_HDR_CSUM_SEED);
}

struct vv_state {
	uint64_t word;      /* 0   V0: undo list head; V1/V2: gen, phase */
	uint64_t reserved[7]; /* 8 zero */
};
RIO_STATIC_ASSERT(sizeof(struct vv_state) == 64, "one cache line");

/* V1/V2 range array entry: 32-byte aligned, so within one cache line.
 * seal is stored last. */
struct vv_entry {
	uint64_t off;       /* 0   database offset of the range */
	uint64_t len;       /* 8   bytes */
	uint64_t gen;       /* 16  the transaction's generation */
	uint64_t seal;      /* 24  vv_entry_seal(off, len, gen) */
};
RIO_STATIC_ASSERT(sizeof(struct vv_entry) == 32, "vv_entry is 32 bytes");

static inline uint64_t
vv_entry_seal(uint64_t off, uint64_t len, uint64_t gen)
{
	return rio_mix64(off ^ rio_mix64(len ^ rio_mix64(gen ^ VV_ENTRY_SEED)));
}

/* V0 heap block: a 16-byte header, then the payload. */
struct vv_block {
	uint64_t cls;       /* 0   size class: 64 << cls bytes */
	uint64_t next_free; /* 8   free list link (heap offset + 1), or 0 */
};
RIO_STATIC_ASSERT(sizeof(struct vv_block) == 16, "vv_block is 16 bytes");

/* V0 undo record: the payload of one 64-byte block (class 0). */
struct vv_undo {
	uint64_t next;      /* 0   offset of the next older record, or 0 */
	uint64_t off;       /* 8   database offset of the range */
	uint64_t len;       /* 16  bytes */
	uint64_t buf;       /* 24  offset of the before-image's payload */
	uint64_t seq;       /* 32  records made so far (informational) */
	uint64_t seal;      /* 40  vv_undo_seal(...) */
};
RIO_STATIC_ASSERT(sizeof(struct vv_block) + sizeof(struct vv_undo) == 64,
	"an undo record fills one class-0 block");

static inline uint64_t
vv_undo_seal(const struct vv_undo *u)
{
	return rio_mix64(u->next ^ rio_mix64(u->off ^ rio_mix64(u->len ^
		rio_mix64(u->buf ^ rio_mix64(u->seq ^ VV_UNDO_SEED)))));
}

#define VV_CLASSES 28
/* V0 heap control, at aux_off; blocks start at aux_off + 4096. */
struct vv_heap {
	uint64_t bump;      /* 0   bytes of the block area handed out */
	uint64_t free[VV_CLASSES]; /* 8 free list heads (block offset + 1) */
};
#define VV_HEAP_BLOCKS 4096u

#endif /* VV_LAYOUT_H */
