/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvm_layout.h -- on-disk format of the RVM baseline's redo log
 *
 * A log file is two 4 KiB status blocks followed by the record area:
 *
 *   [0, 4096)       status block, slot 0
 *   [4096, 8192)    status block, slot 1
 *   [8192, 8192 + log_size)   records, appended from 8192, never wrapped
 *
 * Status blocks are written alternately (slot = status_seq & 1) and made
 * durable with fdatasync; the valid block with the highest status_seq is
 * current, so a torn status write leaves the previous one in force.  The
 * status block names the segments (data files) records refer to, and the
 * log's generation.  Truncation (and recovery, which is a truncation)
 * applies the records to the data files, syncs them, and then bumps the
 * generation in a new status block: every record of the older generation
 * is dead from that moment without being erased.
 *
 * A record is one committed transaction: a header, then for each range a
 * range header and the new bytes (padded to 8).  Records are valid while
 * magic, generation and sequence (first_seq, first_seq+1, ... in log
 * order) match and the checksum (rio_checksum over the header up to the
 * checksum field, then over the body, seeded by the first part) holds; the
 * first invalid record ends the log (a torn tail from a crash mid-write).
 * docs/FORMAT.md documents the fields and the persist order.
 *
 * All fields are little-endian.
 */
#ifndef RVM_LAYOUT_H
#define RVM_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define RVM_LOG_MAGIC 0x31474f4c4d5652ull /* "RVMLOG1\0" */
#define RVM_LOG_MAJOR 1
#define RVM_LOG_MINOR 0
#define RVM_STATUS_SIZE 4096u
#define RVM_LOG_DATA_OFF (2 * RVM_STATUS_SIZE)
#define RVM_LOG_MIN_SIZE (64u * 1024)
#define RVM_MAX_SEGMENTS 28
#define RVM_SEG_PATH_MAX 120

struct rvm_seg_entry {
	char path[RVM_SEG_PATH_MAX]; /* NUL-terminated; "" = unused */
	uint64_t reserved;           /* 0 */
};
RIO_STATIC_ASSERT(sizeof(struct rvm_seg_entry) == 128, "seg entry");

struct rvm_log_status {
	uint64_t magic;        /* 0    RVM_LOG_MAGIC */
	uint16_t major;        /* 8    incompatible layout changes */
	uint16_t minor;        /* 10 */
	uint32_t incompat;     /* 12   feature bits a reader must know: 0 */
	uint32_t compat;       /* 16   feature bits a reader may ignore: 0 */
	uint32_t nsegs;        /* 20   used entries of segs[] */
	uint64_t log_size;     /* 24   bytes of the record area */
	uint64_t status_seq;   /* 32   +1 per status write; newest wins */
	uint64_t generation;   /* 40   +1 per reset; records carry it */
	uint64_t first_seq;    /* 48   sequence of this generation's first record */
	uint64_t reserved0;    /* 56   0 */
	struct rvm_seg_entry segs[RVM_MAX_SEGMENTS]; /* 64 */
	uint8_t reserved[440]; /* 3648 zero */
	uint64_t checksum;     /* 4088 rio_checksum(bytes 0..4087, 0) */
};
RIO_STATIC_ASSERT(sizeof(struct rvm_log_status) == RVM_STATUS_SIZE,
	"status block size");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rvm_log_status, segs) == 64,
	"segs offset");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rvm_log_status, checksum) == 4088,
	"checksum offset");

#define RVM_REC_MAGIC 0x52524d56u /* "VMRR" */

struct rvm_rec_hdr {
	uint32_t magic;      /* 0  RVM_REC_MAGIC */
	uint32_t nranges;    /* 4  range headers that follow */
	uint64_t generation; /* 8  = status generation, else dead */
	uint64_t seq;        /* 16 transaction sequence number */
	uint64_t length;     /* 24 whole record in bytes, multiple of 8 */
	uint64_t reserved;   /* 32 0 */
	uint64_t checksum;   /* 40 see above */
};
RIO_STATIC_ASSERT(sizeof(struct rvm_rec_hdr) == 48, "record header size");

struct rvm_range_hdr {
	uint32_t seg;     /* 0  index into the status block's segs[] */
	uint32_t reserved; /* 4 0 */
	uint64_t offset;  /* 8  byte offset in the segment's data file */
	uint64_t length;  /* 16 bytes of new data that follow (then pad to 8) */
};
RIO_STATIC_ASSERT(sizeof(struct rvm_range_hdr) == 24, "range header size");

#define RVM_ALIGN8(x) (((x) + 7u) & ~(uint64_t)7u)

#endif /* RVM_LAYOUT_H */
