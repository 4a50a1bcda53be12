/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_layout.h -- on-media layout of a Rio file cache pool
 *
 * A file cache lives in the user area of an ordinary rio pool (layout name
 * "rio.fc").  Offsets below are relative to rio_pool_base(); the pool file
 * offset of a byte is RIO_POOL_HDR_SIZE more.
 *
 *   0            superblock (4096 bytes)
 *   files_off    file table: nfiles records of 512 bytes
 *   descs_off    block descriptors: nblocks x 64 bytes (one cache line
 *                each), padded to 4096
 *   data_off     data: nblocks x 4096-byte blocks (4096-aligned in the
 *                pool file, so a block can be mmap'ed on its own)
 *
 * The geometry is a pure function of the pool size (rio__fc_geometry), so
 * a superblock torn while the cache was being formatted can be recognised
 * (everything else is still zero) and formatting redone.
 *
 * Invariants (docs/FORMAT.md has the tables and the persist order)
 *   L1. Every multi-word record (superblock, file record, descriptor,
 *       file-state record) is written only while a *commit word* says it
 *       is unused, made durable, and only then published by one aligned
 *       8-byte store to its commit word (descriptor `state`, file record
 *       `state`) or by its own checksum plus a higher sequence number
 *       (file-state records, which alternate between two slots).
 *   L2. A block write never overwrites the block that holds the current
 *       copy: it fills a FREE block, makes data and descriptor fields
 *       durable, then stores DIRTY to the descriptor's state word.  For a
 *       given (file, block number) the live descriptor with the highest
 *       `seq` holds the current copy; older copies are stale.
 *   L3. The descriptor holding the current copy of a block is set FREE
 *       only after every older copy of that block is durably FREE, so a
 *       stale copy can never become "the highest seq" again.
 *   L4. Sequence numbers (descriptors, file-state records, file records)
 *       come from one counter per cache, restored at open as one more
 *       than the highest seen: a stale record can never look newer than
 *       a fresh one.  File records carry a generation (`gen`) that every
 *       descriptor of the file repeats, so descriptors of a previous
 *       occupant of a file slot are never taken for the new file's.
 *   L5. The size of a file is that of its newest file-state record, raised
 *       to the `fsize` of any of its descriptors with a higher `seq` (a
 *       write that extended the file commits its new size with its block,
 *       atomically).
 */
#ifndef RIO_FC_LAYOUT_H
#define RIO_FC_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define RIO_FC_LAYOUT "rio.fc"
#define RIO_FC_MAGIC "RIOFCSB" /* 8 bytes with NUL */
#define RIO_FC_MAJOR 1
#define RIO_FC_MINOR 0

#define RIO_FC_SB_SIZE 4096u
#define RIO_FC_FREC_SIZE 512u
#define RIO_FC_DESC_SIZE 64u
#define RIO_FC_DIR_MAX 2048u  /* bytes of the cache directory, with NUL */
#define RIO_FC_PATH_MAX 312u  /* bytes of a relative path, with NUL */

#define RIO_FC_SB_CSUM_SEED 0x52494f4643534231ull    /* "RIOFCSB1" */
#define RIO_FC_FREC_CSUM_SEED 0x52494f4643465231ull  /* "RIOFCFR1" */
#define RIO_FC_DESC_CSUM_SEED 0x52494f4643445331ull  /* "RIOFCDS1" */
#define RIO_FC_FST_CSUM_SEED 0x52494f4643535431ull   /* "RIOFCST1" */

/* Superblock mount state (a commit word outside the checksum). */
#define RIO_FC_SB_CLEAN 0x4e41454c43434652ull   /* "RFCCLEAN" */
#define RIO_FC_SB_MOUNTED 0x544e554f4d434652ull /* "RFCMOUNT" */

/* Descriptor states (the commit word).  Any other value is corruption. */
#define RIO_FC_D_FREE 0ull
#define RIO_FC_D_DIRTY 0x5954524944434652ull /* "RFCDIRTY" */
#define RIO_FC_D_CLEAN 0x4e41454c43434652ull /* "RFCCLEAN" */

/* File record states. */
#define RIO_FC_F_FREE 0ull
#define RIO_FC_F_LIVE 0x4556494c46434652ull     /* "RFCFLIVE" */
#define RIO_FC_F_UNLINKED 0x4b4e4c4e55434652ull /* "RFCUNLNK" */

/* File record flags word (8-byte stores). */
#define RIO_FC_FF_WB_ACTIVE (1ull << 0) /* write-back to disk in progress */
#define RIO_FC_FF_NEW (1ull << 1)       /* created by the cache; its
					   directory entry not yet fsynced */
#define RIO_FC_FF_KNOWN (RIO_FC_FF_WB_ACTIVE | RIO_FC_FF_NEW)

/* Feature masks known to this version (none yet). */
#define RIO_FC_COMPAT_KNOWN 0u
#define RIO_FC_INCOMPAT_KNOWN 0u

struct rio_fc_super {
	char magic[8];        /* 0    "RIOFCSB\0" */
	uint16_t major;       /* 8    */
	uint16_t minor;       /* 10   */
	uint32_t block_size;  /* 12   RIO_FC_BLOCK */
	uint32_t compat;      /* 16   */
	uint32_t incompat;    /* 20   */
	uint32_t nfiles;      /* 24   file records */
	uint32_t dir_len;     /* 28   strlen(dir) */
	uint64_t nblocks;     /* 32   data blocks */
	uint64_t files_off;   /* 40   */
	uint64_t descs_off;   /* 48   */
	uint64_t data_off;    /* 56   */
	uint64_t user_size;   /* 64   rio_pool_size() at format */
	uint64_t format_ns;   /* 72   CLOCK_REALTIME at format */
	uint8_t reserved0[40]; /* 80  zero */
	uint64_t state;       /* 120  RIO_FC_SB_CLEAN / _MOUNTED; not summed */
	char dir[RIO_FC_DIR_MAX]; /* 128 canonical cache directory, NUL-padded */
	uint8_t reserved1[RIO_FC_SB_SIZE - 128 - RIO_FC_DIR_MAX - 8]; /* zero */
	uint64_t checksum;    /* 4088 over 0..119 and 128..4087 */
};

/*
 * File-state record: the size of the file and the identity of its disk
 * copy as of a truncate or a completed write-back.  Two per file record,
 * written alternately; the valid one with the higher seq is current.
 */
struct rio_fc_fstate {
	uint64_t seq;        /* 0  cache sequence number; 0 = never written */
	uint64_t size;       /* 8  file size */
	uint64_t disk_limit; /* 16 disk bytes below this are file content */
	uint64_t dev;        /* 24 st_dev of the disk file */
	uint64_t ino;        /* 32 st_ino */
	uint64_t disk_size;  /* 40 st_size */
	uint64_t mtime_ns;   /* 48 st_mtim */
	uint64_t checksum;   /* 56 over 0..55 */
};

struct rio_fc_frec {
	uint64_t state;      /* 0   RIO_FC_F_*: commit word */
	uint64_t flags;      /* 8   RIO_FC_FF_*: 8-byte stores */
	uint32_t gen;        /* 16  generation of this slot's occupant */
	uint32_t path_len;   /* 20  strlen(path) */
	uint64_t seq;        /* 24  cache seq when the record was made */
	uint64_t ctime_ns;   /* 32  CLOCK_REALTIME when made */
	uint8_t reserved0[24]; /* 40 zero */
	struct rio_fc_fstate fst[2]; /* 64, 128 */
	char path[RIO_FC_PATH_MAX]; /* 192 relative to the cache dir */
	uint64_t checksum;   /* 504 over 16..63 and 192..503 */
};

struct rio_fc_desc {
	uint64_t state;      /* 0   RIO_FC_D_*: commit word */
	uint64_t seq;        /* 8   cache seq of this copy */
	uint64_t fbn;        /* 16  block number in the file */
	uint64_t fsize;      /* 24  file size once this write is done */
	uint32_t file;       /* 32  file record slot */
	uint32_t file_gen;   /* 36  that record's gen */
	uint8_t reserved[16]; /* 40 zero */
	uint64_t checksum;   /* 56  over 8..55 */
};

RIO_STATIC_ASSERT(sizeof(struct rio_fc_super) == RIO_FC_SB_SIZE,
	"superblock is one page");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_fc_super, state) == 120,
	"sb state");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_fc_super, dir) == 128,
	"sb dir");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_fc_super, checksum) == 4088,
	"sb checksum is last");
RIO_STATIC_ASSERT(sizeof(struct rio_fc_fstate) == 64, "fstate is one line");
RIO_STATIC_ASSERT(sizeof(struct rio_fc_frec) == RIO_FC_FREC_SIZE,
	"file record");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_fc_frec, fst) == 64,
	"frec fstate");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_fc_frec, path) == 192,
	"frec path");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_fc_frec, checksum) == 504,
	"frec checksum is last");
RIO_STATIC_ASSERT(sizeof(struct rio_fc_desc) == RIO_FC_DESC_SIZE,
	"descriptor is one cache line");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_fc_desc, file) == 32,
	"desc file");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_fc_desc, checksum) == 56,
	"desc checksum is last");

#endif /* RIO_FC_LAYOUT_H */
