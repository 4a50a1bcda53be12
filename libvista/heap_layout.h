/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * heap_layout.h -- on-media layout of a segment's persistent heap
 *
 * The arena (the segment's user area) is divided into 4096-byte pages.  The
 * heap metadata, in its own pages before the arena, is
 *
 *   +0          heap header (64 bytes): the root object
 *   +64         page map: one uint64_t per arena page
 *   +bits_off   run bitmaps: four uint64_t (256 bits) per arena page
 *
 * A page is FREE, the single page of a RUN of small blocks of one size
 * class, the head page of a LARGE object of n pages, or a CONT page of a
 * LARGE object.  Each page map entry is one aligned 8-byte word, so it is
 * never torn.  Blocks of class c in a run sit at page + i * size(c); bit i
 * of the page's bitmap is set while block i is allocated, and the run's
 * page map entry carries a check of its bitmap (vista_run_check).
 *
 * Invariants (checked by vista_heap_check):
 *   H1. a LARGE head of n pages is followed by n - 1 CONT pages whose
 *       entries give their distance to the head; no other page is CONT;
 *   H2. bitmaps of FREE, LARGE and CONT pages are zero; bits of a RUN at or
 *       beyond its block count are zero, and its entry's n is the check
 *       of its bitmap;
 *   H3. the root, if set, is an allocated block of at least root_size bytes.
 */
#ifndef VISTA_HEAP_LAYOUT_H
#define VISTA_HEAP_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>

#include "rio.h"

#define VISTA_HEAP_HDR_SIZE 64u

struct vista_heap_hdr {
	uint64_t root_off;  /* 0  root object, offset from the segment base */
	uint64_t root_size; /* 8  bytes asked for when it was made */
	uint64_t reserved[5]; /* 16 zero */
	uint64_t check;     /* 56 vista_heap_hdr_check(): 0 when all is 0 */
};
RIO_STATIC_ASSERT(sizeof(struct vista_heap_hdr) == VISTA_HEAP_HDR_SIZE,
	"heap header is one cache line");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_heap_hdr, check) == 56,
	"heap header check is last");

#define VISTA_HEAP_CSUM_SEED 0x5649535441485048ull /* "VISTAHPH" */

/* Check of the heap header's first 56 bytes; an all-zero header (a new
 * segment) has check 0. */
static inline uint64_t
vista_heap_hdr_check(const struct vista_heap_hdr *h)
{
	static const uint64_t zero[7] = { 0 };
	return rio_checksum(h, 56, VISTA_HEAP_CSUM_SEED) ^
		rio_checksum(zero, 56, VISTA_HEAP_CSUM_SEED);
}

/*
 * Page map entry: kind in bits 0..7, class in 8..15, check in 16..31, n in
 * 32..63 (RUN: vista_run_check of its bitmap; LARGE: pages; CONT: distance
 * to the head).  The check is the CRC-16/CCITT (polynomial 0x1021, initial value
 * 0) of the other six bytes, so a FREE entry is all zero and any one, two
 * or three flipped bits make an entry fail (vista_pg_ok).
 */
static inline unsigned
vista_pg_crc(uint64_t e)
{
	/* A nibble at a time: entry i is the CRC of i << 12. */
	static const uint16_t t[16] = {
		0x0000, 0x1021, 0x2042, 0x3063, 0x4084, 0x50a5, 0x60c6, 0x70e7,
		0x8108, 0x9129, 0xa14a, 0xb16b, 0xc18c, 0xd1ad, 0xe1ce, 0xf1ef,
	};
	unsigned crc = 0;

	for (int i = 0; i < 8; i++) {
		unsigned byte = (unsigned)(e >> (8 * i)) & 0xff;
		if (i == 2 || i == 3)
			continue; /* the check's own bytes */
		crc = ((crc << 4) ^ t[(crc >> 12) ^ (byte >> 4)]) & 0xffff;
		crc = ((crc << 4) ^ t[(crc >> 12) ^ (byte & 0xf)]) & 0xffff;
	}
	return crc;
}
#define VISTA_PG_FREE 0u
#define VISTA_PG_RUN 1u  /* class = size class */
#define VISTA_PG_LARGE 2u /* n = pages of the object */
#define VISTA_PG_CONT 3u /* n = distance to the LARGE head */

static inline uint64_t
vista_pg_make(unsigned kind, unsigned cls, uint32_t n)
{
	uint64_t e = (uint64_t)kind | ((uint64_t)cls << 8) | ((uint64_t)n << 32);
	return e | ((uint64_t)vista_pg_crc(e) << 16);
}
static inline unsigned vista_pg_kind(uint64_t e) { return (unsigned)(e & 0xff); }
static inline unsigned vista_pg_class(uint64_t e) { return (unsigned)((e >> 8) & 0xff); }
static inline uint32_t vista_pg_n(uint64_t e) { return (uint32_t)(e >> 32); }
#define VISTA_PG_CHECK_MASK 0xffff0000ull
static inline bool
vista_pg_ok(uint64_t e)
{
	return ((e & VISTA_PG_CHECK_MASK) >> 16) == vista_pg_crc(e);
}

#define VISTA_RUN_WORDS 4u /* bitmap words per page: at most 256 blocks */
#define VISTA_RUN_CSUM_SEED 0x564953544152554eull /* "VISTARUN" */

/*
 * Check of a run's bitmap, kept in the n field of its page map entry: 0
 * for an empty run (so a new run's entry needs no bitmap), else the two
 * halves of the bitmap's checksum folded together.  A flipped allocation
 * bit then fails the run's check instead of leaking a block or handing it
 * out twice.
 */
static inline uint32_t
vista_run_check(const uint64_t bits[VISTA_RUN_WORDS])
{
	uint64_t x = 0;

	for (unsigned w = 0; w < VISTA_RUN_WORDS; w++)
		x |= bits[w];
	if (x == 0)
		return 0;
	x = rio_checksum(bits, 8 * VISTA_RUN_WORDS, VISTA_RUN_CSUM_SEED);
	return (uint32_t)(x ^ (x >> 32));
}

/*
 * Size classes: block sizes (multiples of 16, so every block is 16-byte
 * aligned) up to 2048 bytes.  Larger objects are LARGE: whole pages.
 * Changing this table changes the format (nclasses in the segment header).
 */
#define VISTA_NCLASSES 24u
static const uint16_t vista_class_size[VISTA_NCLASSES] = {
	16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256,
	320, 384, 448, 512, 640, 768, 896, 1024, 1280, 1536, 1792, 2048,
};
#define VISTA_SMALL_MAX 2048u

/* Bytes of heap metadata for an arena of npages pages (page multiple). */
static inline uint64_t
vista_heap_meta_size(uint64_t npages)
{
	uint64_t pmap = (VISTA_HEAP_HDR_SIZE + 8 * npages + 63) & ~63ull;
	uint64_t bits = 8 * VISTA_RUN_WORDS * npages;
	return (pmap + bits + 4095) & ~4095ull;
}

static inline uint64_t
vista_heap_bits_off(uint64_t npages)
{
	return (VISTA_HEAP_HDR_SIZE + 8 * npages + 63) & ~63ull;
}

#endif /* VISTA_HEAP_LAYOUT_H */
