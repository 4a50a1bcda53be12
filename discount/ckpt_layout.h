/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt_layout.h -- the files of a checkpoint directory (docs/FORMAT.md)
 *
 *   ctl     rio pool (layout "dc.ctl"): superblock, two commit slots, the
 *           applied/incarnation words, the shadow's slot table
 *   shadow  sparse file: the tracked memory of generation `applied`, the
 *           byte at address a at slot(a) * 1 GiB + a mod 1 GiB
 *   redo    the log of the checkpoints not yet in the shadow: one segment
 *           (header, entries, pages) per generation
 *   ndlog   logged results of input calls of the interval in progress
 *   fundo   before-images of file changes of the interval in progress
 *   mundo   before-images of the persistent segment's bytes changed in
 *           the interval in progress (tracking "undo": the tracked memory
 *           is the shadow, mapped shared at the same addresses)
 *
 * All integers little-endian (x86-64 only); checksums rio_checksum().
 */
#ifndef DC_CKPT_LAYOUT_H
#define DC_CKPT_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define DC_CTL_LAYOUT "dc.ctl"
#define DC_CTL_SIZE (64u * 1024u) /* user area of the ctl pool */

#define DC_SB_MAGIC 0x3154504b43434455ull /* "UDCCKPT1" */
#define DC_MAJOR 1
#define DC_MINOR 0
#define DC_SB_SEED 0x44435342ull    /* "DCSB" */
#define DC_COMMIT_MAGIC 0x434d4d43u /* "CMMC" */
#define DC_COMMIT_SEED 0x4443434dull
#define DC_REDO_SEED 0x44435244ull
#define DC_REDO_MAGIC 0x53524344u /* "DCRS" */
#define DC_LOG_MAGIC 0x474c4344u /* "DCLG" */
#define DC_LOG_SEED 0x44434c47ull

/* ctl offset 0: written once at create. */
struct dc_superblock {
	uint64_t magic;
	uint16_t major;
	uint16_t minor;
	uint32_t incompat;      /* 0 */
	uint64_t ctime_ns;
	uint64_t ctl_addr;      /* where the ctl pool is mapped (user area) */
	uint64_t exe_dev;
	uint64_t exe_ino;
	uint64_t exe_size;
	char exe[256];          /* /proc/self/exe at create */
	uint64_t st_addr;       /* where libdc's process state lives */
	uint8_t reserved[3768]; /* zero */
	uint64_t checksum;      /* of bytes 0..4087, seed DC_SB_SEED */
};
RIO_STATIC_ASSERT(sizeof(struct dc_superblock) == 4096, "superblock size");

/* ctl offset 4096 + 256 * (gen & 1): one per committed generation. */
struct dc_commit {
	uint32_t magic;
	uint32_t protocol;
	uint64_t gen;           /* >= 1 */
	uint64_t redo_len;      /* bytes of this generation's redo segment */
	uint64_t redo_csum;     /* its checksum (= the segment's csum) */
	uint64_t time_ns;       /* CLOCK_REALTIME of the commit */
	uint64_t checkpoints;   /* counters at the commit, for dc_status */
	uint64_t input_bytes;
	uint64_t pages;         /* pages in the redo */
	uint64_t redo_off;      /* offset of the segment in the redo file */
	uint8_t reserved[176];  /* zero */
	uint64_t checksum;      /* of bytes 0..247, seed DC_COMMIT_SEED */
};
RIO_STATIC_ASSERT(sizeof(struct dc_commit) == 256, "commit record size");

#define DC_CTL_SB_OFF 0u
#define DC_CTL_COMMIT_OFF 4096u
#define DC_CTL_WORDS_OFF 8192u
#define DC_CTL_SLOTS_OFF 12288u

/* ctl offset 8192: each word on its own cache line. */
struct dc_words {
	uint64_t applied;       /* generation whose redo is in the shadow */
	uint8_t pad0[56];
	uint64_t incarnation;   /* bumped once per completed recovery */
	uint8_t pad1[56];
};
RIO_STATIC_ASSERT(sizeof(struct dc_words) == 128, "words size");

/* ctl offset 12288: the shadow's address windows.  base[i] (1 GiB
 * aligned) is stored at shadow offset i << DC_SLOT_SHIFT; n is written
 * after base[n - 1] is durable.  Appended only. */
#define DC_SLOT_SHIFT 30
#define DC_SLOTS 4096u
struct dc_slots {
	uint64_t n;             /* slots in use */
	uint8_t pad[56];
	uint64_t base[DC_SLOTS];
};
RIO_STATIC_ASSERT(DC_CTL_SLOTS_OFF + sizeof(struct dc_slots) <= DC_CTL_SIZE,
	"slot table fits the ctl pool");

/* redo file: segments back to back from offset 0, one per generation
 * applied+1 .. committed.  A segment: struct dc_redo_hdr, n entries, then
 * the data of every DC_REDO_PAGES entry in order. */
#define DC_REDO_MAX (4ull << 20) /* flush the log past this many bytes */
struct dc_redo_hdr {
	uint32_t magic;         /* DC_REDO_MAGIC */
	uint32_t flags;         /* DC_REDO_F_* */
	uint64_t gen;
	uint64_t n;             /* entries */
	uint64_t len;           /* bytes of the segment, header included */
	uint64_t reserved;      /* zero */
	uint64_t csum;          /* bytes 0..39, entries, data; DC_REDO_SEED */
};
RIO_STATIC_ASSERT(sizeof(struct dc_redo_hdr) == 48, "redo header size");
enum { DC_REDO_F_PUNCH = 1 }; /* the segment drops ranges */
enum { DC_REDO_PAGES = 1, DC_REDO_PUNCH = 2 };
struct dc_redo_ent {
	uint64_t addr;          /* page aligned */
	uint64_t len;           /* page multiple */
	uint64_t op;            /* DC_REDO_* */
};
RIO_STATIC_ASSERT(sizeof(struct dc_redo_ent) == 24, "redo entry size");

/* ndlog, fundo and mundo: a sequence of entries, each header + payload padded to
 * 8 bytes.  An entry belongs to the interval after committed generation
 * gen-1; entries of one interval start at offset 0 with seq 0. */
struct dc_log_ent {
	uint32_t magic;
	uint16_t type;          /* DC_ND_* or DC_FU_* */
	uint16_t flags;
	uint64_t gen;
	uint64_t inc;           /* fundo: incarnation that wrote it */
	uint64_t seq;           /* 0, 1, 2, ... within the interval */
	int64_t a, b, c;        /* type-specific */
	uint64_t len;           /* payload bytes */
	uint64_t csum;          /* header (csum = 0) + payload */
};
RIO_STATIC_ASSERT(sizeof(struct dc_log_ent) == 72, "log entry size");

/* ndlog types: a = fd (or nfds), b = return value, payload = data */
enum {
	DC_ND_READ = 1,   /* payload: the bytes read */
	DC_ND_RECV = 2,   /* payload: bytes, then address if any (c = alen) */
	DC_ND_SELECT = 3, /* payload: the three fd_sets (c = nfds) */
	DC_ND_POLL = 4,   /* payload: the pollfd array */
};
/* fundo types */
enum {
	DC_FU_BYTES = 1,  /* a = offset; payload: path NUL, old bytes */
	DC_FU_SIZE = 2,   /* a = old size; payload: path NUL */
	DC_FU_CREATE = 3, /* payload: path NUL (file did not exist) */
	DC_FU_RENAME = 4, /* payload: from NUL to NUL (undo: rename to->from) */
};
/* mundo types: a = address, b = offset of the previous entry (-1: none);
 * undone newest first */
enum {
	DC_MU_BYTES = 1,  /* payload: the old bytes at [a, a + len) */
	DC_MU_ZERO = 2,   /* c = length: [a, a + c) was a hole (zero) */
};

#endif /* DC_CKPT_LAYOUT_H */
