/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool_layout.h -- on-media layout of a rio pool header
 *
 * The first RIO_POOL_HDR_SIZE (4096) bytes of every pool file.  All fields
 * are little-endian.  The header is written once, while the pool is still
 * under its temporary name (rio_pool_create), and never modified after the
 * rename that publishes it, so a torn header can only come from outside
 * damage, which the checksum detects.  docs/FORMAT.md has the table.
 *
 * Versioning (docs/FORMAT.md, Header rules; librio/hdr.c): a reader refuses
 * another major version, higher or lower (RIO_EVERSION), and any
 * incompat feature bit it does not know (RIO_EFEATURE); an unknown ro_compat
 * bit allows read-only opens only; unknown compat bits are ignored.  Reserved
 * bytes must be zero unless an unknown compat bit explains them.
 */
#ifndef RIO_POOL_LAYOUT_H
#define RIO_POOL_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define RIO_POOL_MAGIC "RIOPOOL"  /* 7 chars + NUL = 8 bytes */
#define RIO_POOL_MAJOR 1
#define RIO_POOL_MINOR 0

/* flags */
#define RIO_HDR_F_SAFE_SYNC (1u << 0) /* pool keeps a safe-sync image */
#define RIO_HDR_F_KNOWN RIO_HDR_F_SAFE_SYNC

/* feature masks known to this version (none yet) */
#define RIO_FEAT_COMPAT_KNOWN 0u
#define RIO_FEAT_INCOMPAT_KNOWN 0u
#define RIO_FEAT_RO_COMPAT_KNOWN 0u

#define RIO_LAYOUT_MAX 32 /* bytes, including the terminating NUL */

#define RIO_POOL_CSUM_SEED 0x52494f504f4f4c31ull /* "RIOPOOL1" */

struct rio_pool_hdr {
	char magic[8];          /* 0    "RIOPOOL\0" */
	uint16_t major;         /* 8    */
	uint16_t minor;         /* 10   */
	uint32_t hdr_size;      /* 12   RIO_POOL_HDR_SIZE */
	uint32_t compat;        /* 16   */
	uint32_t incompat;      /* 20   */
	uint32_t ro_compat;     /* 24   */
	uint32_t flags;         /* 28   RIO_HDR_F_* */
	uint8_t uuid[16];       /* 32   random, set at create */
	uint64_t pool_size;     /* 48   file size in bytes */
	uint64_t ctime_ns;      /* 56   creation time, CLOCK_REALTIME */
	uint64_t map_addr;      /* 64   address requested at create, 0 = any */
	char layout[RIO_LAYOUT_MAX]; /* 72 user name, NUL-padded */
	uint8_t reserved[RIO_POOL_HDR_SIZE - 104 - 8]; /* 104  zero */
	uint64_t checksum;      /* 4088 rio_checksum(bytes 0..4087) */
};

RIO_STATIC_ASSERT(sizeof(struct rio_pool_hdr) == RIO_POOL_HDR_SIZE,
	"pool header is one page");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_pool_hdr, uuid) == 32, "uuid");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_pool_hdr, pool_size) == 48,
	"pool_size");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_pool_hdr, layout) == 72,
	"layout");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_pool_hdr, reserved) == 104,
	"reserved");
RIO_STATIC_ASSERT(__builtin_offsetof(struct rio_pool_hdr, checksum) == 4088,
	"checksum is last");
RIO_STATIC_ASSERT(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
	"formats are little-endian; add byte swapping for this target");

#endif /* RIO_POOL_LAYOUT_H */
