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
 *
 * The one word that changes afterwards is `bind`, outside the header
 * checksum: VISTA_SEG_CLEAN when the segment was unmapped with no
 * transaction unfinished (it may then be mapped with any log), or
 * vista_seg_bound(log uuid) from the moment a log maps it: only that log
 * can hold what is needed to roll it back, so another log (or a new one
 * made where it was lost) refuses to map it (VISTA_EOTHERLOG).  Both
 * values are far apart in bits; a word within VISTA_SEG_BIND_SLACK bits of
 * one of them is a flipped one (VISTA_ECORRUPT).
 */
#ifndef VISTA_SEGMENT_LAYOUT_H
#define VISTA_SEGMENT_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define VISTA_SEG_LAYOUT "vista.segment" /* rio pool layout name */
#define VISTA_SEG_MAGIC "VISTASG"        /* 7 chars + NUL */
#define VISTA_SEG_MAJOR 3 /* 2: no run checks; 1: no bind word, no heap checks */
#define VISTA_SEG_MINOR 0
#define VISTA_SEG_HDR_SIZE 4096u
#define VISTA_PAGE 4096u

#define VISTA_SEG_COMPAT_KNOWN 0u
#define VISTA_SEG_INCOMPAT_KNOWN 0u
#define VISTA_SEG_RO_COMPAT_KNOWN 0u

#define VISTA_SEG_CSUM_SEED 0x5649535441534844ull /* "VISTASHD" */
#define VISTA_SEG_BIND_SEED 0x5649535441424e44ull /* "VISTABND" */
#define VISTA_SEG_CLEAN 0x3c9d1e5a7b2f4c86ull    /* bind: no log needed */
#define VISTA_SEG_BIND_SLACK 4u

/* bind while mapped by (or crashed under) the log whose pool uuid is u. */
static inline uint64_t
vista_seg_bound(const uint8_t u[16])
{
	return rio_checksum(u, 16, VISTA_SEG_BIND_SEED);
}

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
	uint64_t bind;       /* 96   VISTA_SEG_CLEAN or vista_seg_bound() */
	uint8_t reserved[VISTA_SEG_HDR_SIZE - 104 - 8]; /* 104 zero */
	uint64_t checksum;   /* 4088 rio_checksum(bytes 0..4087 but bind) */
};

RIO_STATIC_ASSERT(sizeof(struct vista_seg_hdr) == VISTA_SEG_HDR_SIZE,
	"segment header is one page");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_seg_hdr, base) == 32,
	"base");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_seg_hdr, npages) == 80,
	"npages");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_seg_hdr, bind) == 96,
	"bind");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vista_seg_hdr, checksum) == 4088,
	"segment header checksum is last");

#endif /* VISTA_SEGMENT_LAYOUT_H */
