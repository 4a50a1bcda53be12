/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blog_layout.h -- the backup's redo log: a rio pool beside the node state
 *
 * The backup makes each REDO record durable by appending it to this log
 * and acknowledges it then; it applies the records to its data segment
 * later, in batches (blog.c).  The pool is "<state_path>.redo".
 *
 *   user area
 *   +0     struct vr_blog_hdr   (64 bytes, written once when made)
 *   +64    slot 0               (64 bytes) } the checkpoint: the valid slot
 *   +128   slot 1               (64 bytes) } of the higher gen is current
 *   +4096  entry area (area_size bytes, a power of two)
 *
 * Log positions grow forever; position p lives at area[p & (area_size-1)].
 * An entry never wraps: one that would cross the area's end starts at the
 * next lap (p rounded up to area_size) instead.  An entry is
 *
 *   +0  struct vr_blog_ent (32 bytes)
 *   +32 the REDO record exactly as it came over the wire (header with its
 *       own checksum, pieces, data)
 *
 * The entries that count are those from the current slot's `off` on that
 * chain: the entry's stream is the slot's, its record's seq is one more
 * than the last, and its pos is the last pos plus the record's length;
 * the first entry that does not verify or chain ends the log.  So a torn
 * entry (its check or its record's check fails) ends the log, and a stale
 * entry of an earlier lap or stream never chains.  A torn slot fails its
 * check and the other slot (one gen older, naming an earlier `off`) is
 * current: its entries are still there, since space before a slot's `off`
 * is reused only once that slot is durable (blog.c L2).  All fields are
 * little-endian.  docs/FORMAT.md has the tables.
 */
#ifndef VR_BLOG_LAYOUT_H
#define VR_BLOG_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define VR_BLOG_MAGIC "VRBLOG1"
/* 3: entries hold wire major 3 records (replica_layout.h); a log of an
 * older major is refused (VR_EVERSION) rather than read as an empty one. */
#define VR_BLOG_MAJOR 3u
#define VR_BLOG_SEED 0x56524c4f47534c54ull /* "VRLOGSLT" */
#define VR_BLOG_ENT_SEED 0x56524c4f47454e54ull /* "VRLOGENT" */
#define VR_BLOG_SLOT0 64u
#define VR_BLOG_AREA 4096u
#define VR_BLOG_DEFAULT_AREA (8u << 20)

struct vr_blog_hdr {
	char magic[8];        /* 0  "VRBLOG1\0" */
	uint16_t major;       /* 8  VR_BLOG_MAJOR */
	uint16_t minor;       /* 10 0 */
	uint32_t reserved0;   /* 12 zero */
	uint64_t area_size;   /* 16 bytes of the entry area, power of two */
	uint8_t reserved[32]; /* 24 zero */
	uint64_t check;       /* 56 rio_checksum(bytes 0..55, VR_BLOG_SEED) */
};

/* The checkpoint: the records up to seq are applied to the data segment
 * and durable there; the first entry not applied is at log position off. */
struct vr_blog_slot {
	uint64_t gen;         /* 0  the higher valid gen is current */
	uint64_t stream;      /* 8  the stream the log's records belong to */
	uint64_t seq;         /* 16 last record applied */
	uint64_t pos;         /* 24 stream byte position after it */
	uint64_t off;         /* 32 log position of the next entry */
	uint64_t reserved[2]; /* 40 zero */
	uint64_t check;       /* 56 rio_checksum(bytes 0..55, VR_BLOG_SEED) */
};

struct vr_blog_ent {
	uint64_t stream;      /* 0  the record's stream */
	uint64_t pos;         /* 8  stream byte position after the record */
	uint32_t len;         /* 16 bytes of the record that follows */
	uint32_t reserved;    /* 20 zero */
	uint64_t check;       /* 24 rio_checksum(bytes 0..23,
				 VR_BLOG_ENT_SEED ^ the record's check) */
};

RIO_STATIC_ASSERT(sizeof(struct vr_blog_hdr) == 64, "log header");
RIO_STATIC_ASSERT(sizeof(struct vr_blog_slot) == 64, "log slot");
RIO_STATIC_ASSERT(sizeof(struct vr_blog_ent) == 32, "log entry");
RIO_STATIC_ASSERT(__builtin_offsetof(struct vr_blog_slot, check) == 56,
	"slot check is last");
RIO_STATIC_ASSERT(VR_BLOG_SLOT0 + 2 * sizeof(struct vr_blog_slot) <=
	VR_BLOG_AREA, "slots before the area");

#endif /* VR_BLOG_LAYOUT_H */
