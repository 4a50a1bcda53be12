/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redo_layout.h -- on-media layout of redo mode (VISTA_MODE_REDO)
 *
 * The redo log is a rio pool of layout name "vista.redo" (an undo-mode log
 * is "vista.log": each mode refuses the other's pool by its layout name):
 *
 *   +0      header (4096 bytes, written once at create)
 *   +4096   checkpoint: two slots of 64 bytes (one line each)
 *   +8192   record area, area_size bytes, used as a ring
 *
 * A redo segment is a rio pool of layout name "vista.rseg":
 *
 *   +0      segment header (4096 bytes, written once at create)
 *   +4096   the home copy of the user area (size bytes)
 *
 * The program works on a DRAM copy of the user area mapped at the
 * segment's address; the pool is mapped wherever the kernel puts it.
 *
 * Record (one per committed transaction, 64-byte aligned in the area):
 * the 32-byte commit record below, `count` descriptors, then the
 * after-image of each descriptor in order, each padded to 8 bytes.
 * check = rio_checksum(bytes 8 .. len-1, vista_redo_seed(salt, seg_id,
 * seq)): it vouches for the descriptors and every after-image, so a
 * record whose lines did not all reach media fails it.  The whole record
 * is written back under ONE fence; it is the commit.  A record with
 * VISTA_REDO_WRAP is a filler: the record of the same seq starts at the
 * area's offset 0.
 *
 * Checkpoint slot n & 1 holds {n, seq, pos, seg_id}: every transaction
 * below seq is durable at home (written back and fenced), the record of
 * seq starts at pos, and the records belong to segment seg_id.  The slot
 * with the larger n whose check verifies is current; a torn slot leaves
 * the other one.  Recovery replays the records seq, seq+1, ... from pos
 * while each verifies, in order, onto home, and stops at the first that
 * does not (a torn tail: that transaction never returned).
 *
 * All fields little-endian; reserved bytes zero.  docs/FORMAT.md has the
 * persist order.
 */
#ifndef VISTA_REDO_LAYOUT_H
#define VISTA_REDO_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define VISTA_REDO_LAYOUT "vista.redo" /* redo log pool layout name */
#define VISTA_RSEG_LAYOUT "vista.rseg" /* redo segment layout name */
#define VISTA_REDO_MAGIC "VISTARD"
#define VISTA_RSEG_MAGIC "VISTARS"
#define VISTA_REDO_MAJOR 1
#define VISTA_REDO_HDR_SIZE 4096u
#define VISTA_REDO_CKPT_OFF 4096u
#define VISTA_REDO_AREA_OFF 8192u
#define VISTA_REDO_MIN_AREA 4096u

#define VISTA_REDO_WRAP 1u /* filler: the record of seq is at offset 0 */

struct vista_redo_hdr {
	char magic[8];      /* 0   "VISTARD\0" */
	uint16_t major;     /* 8   VISTA_REDO_MAJOR */
	uint16_t minor;     /* 10  0 */
	uint32_t hdr_size;  /* 12  VISTA_REDO_HDR_SIZE */
	uint64_t area_off;  /* 16  VISTA_REDO_AREA_OFF */
	uint64_t area_size; /* 24  bytes, multiple of 4096 */
	uint64_t salt;      /* 32  random: seeds the checks */
	uint8_t reserved[VISTA_REDO_HDR_SIZE - 40 - 8]; /* 40 zero */
	uint64_t checksum;  /* 4088 rio_checksum(bytes 0..4087) */
};

struct vista_redo_ckpt {
	uint64_t n;      /* 0  checkpoint number; slot n & 1 */
	uint64_t seq;    /* 8  first transaction not known durable at home */
	uint64_t pos;    /* 16 area offset of its record */
	uint64_t seg_id; /* 24 the segment the records belong to */
	uint64_t check;  /* 32 vista_redo_ckpt_check() */
	uint8_t reserved[24]; /* 40 zero */
};

struct vista_redo_rec {
	uint64_t check; /* 0  rio_checksum(bytes 8..len-1, seed) */
	uint64_t seq;   /* 8  transaction number */
	uint32_t len;   /* 16 bytes used, this header included */
	uint32_t count; /* 20 descriptors */
	uint32_t flags; /* 24 VISTA_REDO_WRAP or 0 */
	uint32_t reserved; /* 28 zero */
};

/* off: from the user area's start; len: after-image bytes, >= 1. */
struct vista_redo_desc {
	uint64_t off : 40;
	uint64_t len : 24;
};
#define VISTA_REDO_DESC_MAX_LEN ((1u << 24) - 8u)

struct vista_rseg_hdr {
	char magic[8];     /* 0   "VISTARS\0" */
	uint16_t major;    /* 8   VISTA_REDO_MAJOR */
	uint16_t minor;    /* 10  0 */
	uint32_t hdr_size; /* 12  4096 */
	uint64_t addr;     /* 16  where the DRAM copy is mapped */
	uint64_t size;     /* 24  user bytes, multiple of 4096 */
	uint64_t seg_id;   /* 32  random, non-zero */
	uint8_t reserved0[24]; /* 40 zero */
	uint64_t bind;     /* 64  salt of the log mapping it, 0 when clean;
			      outside the checksum */
	uint8_t reserved[4096 - 72 - 8]; /* 72 zero */
	uint64_t checksum; /* 4088 rio_checksum(bytes 0..63) */
};

static inline uint64_t
vista_redo_seed(uint64_t salt, uint64_t seg_id, uint64_t seq)
{
	return rio_mix64(salt ^ rio_mix64(seg_id ^ 0x7265646full)) ^
		(seq * 0x9e3779b97f4a7c15ull);
}

static inline uint64_t
vista_redo_ckpt_check(uint64_t salt, const struct vista_redo_ckpt *c)
{
	return rio_mix64(rio_mix64(rio_mix64(c->n ^ salt) ^ c->seq) ^
		rio_mix64(c->pos ^ 0x636b7074ull) ^ c->seg_id);
}

RIO_STATIC_ASSERT(sizeof(struct vista_redo_hdr) == 4096, "redo header");
RIO_STATIC_ASSERT(sizeof(struct vista_redo_ckpt) == 64, "checkpoint slot");
RIO_STATIC_ASSERT(sizeof(struct vista_redo_rec) == 32, "redo record");
RIO_STATIC_ASSERT(sizeof(struct vista_redo_desc) == 8, "redo descriptor");
RIO_STATIC_ASSERT(sizeof(struct vista_rseg_hdr) == 4096, "rseg header");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_rseg_hdr, bind) == 64,
	"bind");

#endif /* VISTA_REDO_LAYOUT_H */
