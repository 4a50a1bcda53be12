/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * segment_layout.h -- on-media layout of a vista segment
 *
 * A segment is a rio pool (layout name "vista.segment") mapped at a fixed
 * address, so that native pointers stored in it stay valid.  Its mapping:
 *
 *   base + 0        rio pool header (4096, librio's)
 *   base + 4096     segment header (4096, this file; written once)
 *   base + heap_off heap metadata (heap_layout.h), page aligned
 *   base + user_off user area = heap arena, npages pages
 *
 * The heap metadata lives in its own pages, apart from the user data
 * (thesis Fig. 3.3), so that a store running off the end of a user object
 * cannot reach it.  The header is written and made durable once, when the
 * segment is created; a segment whose header is all zero is one whose
 * creation did not finish (vista_map with VISTA_CREATE completes it).
 */
#ifndef VISTA_SEGMENT_LAYOUT_H
#define VISTA_SEGMENT_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define VISTA_SEG_LAYOUT "vista.segment" /* rio pool layout name */
#define VISTA_SEG_MAGIC "VISTASG"        /* 7 chars + NUL */
#define VISTA_SEG_MAJOR 1
#define VISTA_SEG_MINOR 0
#define VISTA_SEG_HDR_SIZE 4096u
#define VISTA_PAGE 4096u

#define VISTA_SEG_COMPAT_KNOWN 0u
#define VISTA_SEG_INCOMPAT_KNOWN 0u
#define VISTA_SEG_RO_COMPAT_KNOWN 0u

#define VISTA_SEG_CSUM_SEED 0x5649535441534844ull /* "VISTASHD" */

struct vista_seg_hdr {
	char magic[8];       /* 0    "VISTASG\0" */
	uint16_t major;      /* 8    */
	uint16_t minor;      /* 10   */
	uint32_t hdr_size;   /* 12   VISTA_SEG_HDR_SIZE */
	uint32_t compat;     /* 16   */
	uint32_t incompat;   /* 20   */
	uint32_t ro_compat;  /* 24   */
	uint32_t page_size;  /* 28   4096 */
	uint64_t base;       /* 32   address of the mapping (rio header) */
	uint64_t map_size;   /* 40   pool size in bytes */
	uint64_t heap_off;   /* 48   heap metadata, from base */
	uint64_t heap_size;  /* 56   bytes of heap metadata */
	uint64_t user_off;   /* 64   user area (arena), from base */
	uint64_t user_size;  /* 72   bytes: npages * 4096 */
	uint64_t npages;     /* 80   arena pages */
	uint32_t nclasses;   /* 88   size classes of the heap format */
	uint32_t reserved0;  /* 92   zero */
	uint8_t reserved[VISTA_SEG_HDR_SIZE - 96 - 8]; /* 96 zero */
	uint64_t checksum;   /* 4088 rio_checksum(bytes 0..4087) */
};

RIO_STATIC_ASSERT(sizeof(struct vista_seg_hdr) == VISTA_SEG_HDR_SIZE,
	"segment header is one page");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_seg_hdr, base) == 32,
	"base");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_seg_hdr, npages) == 80,
	"npages");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_seg_hdr, checksum) == 4088,
	"segment header checksum is last");

#endif /* VISTA_SEGMENT_LAYOUT_H */
