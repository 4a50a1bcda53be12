/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * image_layout.h -- on-disk layout of a safe-sync image
 *
 *   offset 0            superblock 0 (4096 bytes, describes slot 0)
 *   offset 4096         superblock 1 (4096 bytes, describes slot 1)
 *   offset 8192         slot 0: page-hash table (npages x 8 bytes, rounded
 *                       up to 4096), then the pool's bytes (pool_size)
 *   after slot 0        slot 1: the same
 *
 * Invariants
 *   I1. A superblock vouches for its slot only when its own checksum, its
 *       table's checksum and every page hash of its slot match.
 *   I2. A sync writes only the slot k that does not hold the newest valid
 *       generation: it first retracts superblock k (zeroes it, fdatasync),
 *       then writes k's changed pages and hash table (fdatasync), and only
 *       then writes superblock k with generation = newest + 1 (fdatasync)
 *       before reporting success.  A crash at any point leaves the newest
 *       generation untouched, and slot k either fully valid or without a
 *       superblock (never a superblock over pages it does not describe).
 *   I3. A page's hash is rio_checksum(page, 4096, seed = page index), so a
 *       page written to the wrong place is caught as well.
 * docs/FORMAT.md has the tables and what a torn write of each part leaves.
 */
#ifndef RIO_IMAGE_LAYOUT_H
#define RIO_IMAGE_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define RIO_IMG_MAGIC "RIOIMG1" /* 8 bytes with NUL */
#define RIO_IMG_MAJOR 1
#define RIO_IMG_MINOR 0
#define RIO_IMG_BLOCK 4096u
#define RIO_IMG_PAGE 4096u
#define RIO_IMG_SUPER_CSUM_SEED 0x52494f494d475342ull /* "RIOIMGSB" */
#define RIO_IMG_TABLE_CSUM_SEED 0x52494f494d475442ull /* "RIOIMGTB" */

struct rio_img_super {
	char magic[8];          /* 0   "RIOIMG1\0" */
	uint16_t major;         /* 8   */
	uint16_t minor;         /* 10  */
	uint32_t slot;          /* 12  0 or 1: the slot this block describes */
	uint64_t generation;    /* 16  1, 2, ...; 0 = never written */
	uint8_t pool_uuid[16];  /* 24  */
	uint64_t pool_size;     /* 40  bytes of pool data in the slot */
	uint32_t page_size;     /* 48  RIO_IMG_PAGE */
	uint32_t incompat;      /* 52  feature bits, none defined */
	uint64_t npages;        /* 56  pool_size / page_size */
	uint64_t table_off;     /* 64  file offset of the slot's hash table */
	uint64_t data_off;      /* 72  file offset of the slot's data */
	uint64_t table_csum;    /* 80  rio_checksum(table) */
	uint64_t sync_time_ns;  /* 88  CLOCK_REALTIME of the sync */
	uint8_t reserved[RIO_IMG_BLOCK - 96 - 8]; /* 96 zero */
	uint64_t checksum;      /* 4088 rio_checksum(bytes 0..4087) */
};

RIO_STATIC_ASSERT(sizeof(struct rio_img_super) == RIO_IMG_BLOCK,
	"superblock is one block");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_img_super, table_csum) == 80,
	"table_csum");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_img_super, checksum) == 4088,
	"checksum is last");

static inline uint64_t
rio_img_table_bytes(uint64_t npages)
{
	uint64_t b = npages * sizeof(uint64_t);
	return (b + RIO_IMG_BLOCK - 1) / RIO_IMG_BLOCK * RIO_IMG_BLOCK;
}

static inline uint64_t
rio_img_slot_off(uint64_t npages, unsigned slot)
{
	return 2 * (uint64_t)RIO_IMG_BLOCK +
		slot * (rio_img_table_bytes(npages) + npages * RIO_IMG_PAGE);
}

static inline uint64_t
rio_img_file_size(uint64_t npages)
{
	return rio_img_slot_off(npages, 2);
}

#endif /* RIO_IMAGE_LAYOUT_H */
