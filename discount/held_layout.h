/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * held_layout.h -- the held-output buffer of the buffered protocol
 *                  (docs/FORMAT.md, "held" and "rename")
 *
 *   held    offset 0: struct dc_held_hdr (64 bytes); from offset 64 the
 *           records of the interval in progress (Buffer: appended by each
 *           write before it returns, its data after it; Rename: appended
 *           by the commit, their data in `rename`), each a struct
 *           dc_held_rec followed by its payload padded to 8 bytes
 *   rename  Rename only: the data of the interval's writes, appended one
 *           after the other (the "rename area"); no metadata
 *
 *      0        8     12      16      24      32      40        56      64
 *      +--------+-----+-------+-------+-------+-------+---------+-------+
 *  hdr | magic  |maj/m|scheme | gen   | end   | nrec  |reserved | csum  |
 *      +--------+-----+-------+-------+-------+-------+---------+-------+
 *      +------+----+----+-----+-----+-----+-----+-----+-------+ payload
 *  rec |magic |type|file| gen | seq | off | len | loc | dcsum | csum |...
 *      +------+----+----+-----+-----+-----+-----+-----+-------+
 *      0      4    6    8     16    24    32    40    48      56     64
 *
 * All integers little-endian (x86-64 only); checksums rio_checksum().
 */
#ifndef DC_HELD_LAYOUT_H
#define DC_HELD_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define DC_HELD_MAGIC 0x444c454843434455ull /* "UDCCHELD" */
#define DC_HELD_MAJOR 1
#define DC_HELD_MINOR 1
#define DC_HELD_SEED 0x44434844ull     /* "DCHD" */
#define DC_HREC_MAGIC 0x43524844u      /* "DHRC" */
#define DC_HREC_SEED 0x44434852ull     /* "DCHR" */
#define DC_HDATA_SEED 0x44434441ull    /* "DCDA": payloads, chained */
#define DC_HDATA_CHUNK 65536u          /* bytes per piece of the chain */

enum dc_held_scheme {
	DC_HELD_BUFFER = 1, /* data and metadata in `held` */
	DC_HELD_RENAME = 2, /* data in `rename`, metadata sealed at commit */
};

/* held offset 0.  Says: the records in [64, end) are complete, nrec of
 * them, and all belong to the interval whose commit is generation gen. */
struct dc_held_hdr {
	uint64_t magic;      /* 0   DC_HELD_MAGIC */
	uint16_t major;      /* 8   DC_HELD_MAJOR */
	uint16_t minor;      /* 10  DC_HELD_MINOR */
	uint32_t scheme;     /* 12  enum dc_held_scheme */
	uint64_t gen;        /* 16  generation that releases the records */
	uint64_t end;        /* 24  end of the sealed records (>= 64) */
	uint64_t nrec;       /* 32  records in [64, end) */
	uint8_t reserved[16]; /* 40 zero */
	uint64_t checksum;   /* 56  rio_checksum(bytes 0..55, DC_HELD_SEED) */
};
RIO_STATIC_ASSERT(sizeof(struct dc_held_hdr) == 64, "held header size");

enum dc_hrec_type {
	DC_HREC_PATH = 1,   /* payload: a file's absolute path, NUL included;
	                     * the n-th PATH record of the buffer is file n */
	DC_HREC_WRITE = 2,  /* len bytes at offset off of file `file` */
	DC_HREC_STREAM = 3, /* len bytes written to descriptor `file` (a
	                     * terminal, pipe or character device) */
	DC_HREC_DGRAM = 4,  /* (minor 1) a datagram sent on the datagram
	                     * socket `file`: off = address length (bits
	                     * 0-31) | send flags << 32; payload: the
	                     * destination address (none: the socket's
	                     * peer), then the datagram */
};

struct dc_held_rec {
	uint32_t magic;      /* 0   DC_HREC_MAGIC */
	uint16_t type;       /* 4   enum dc_hrec_type */
	uint16_t file;       /* 6   file index (WRITE), descriptor (STREAM,
	                      *     DGRAM) */
	uint64_t gen;        /* 8   = the header's gen once sealed */
	uint64_t seq;        /* 16  0, 1, 2 ... in the buffer */
	int64_t off;         /* 24  file offset (WRITE); address length
	                      *     and flags (DGRAM) */
	uint64_t len;        /* 32  payload bytes */
	uint64_t loc;        /* 40  where the payload is: offset in `held`
	                      *     (Buffer, PATH) or in `rename` (Rename) */
	uint64_t dcsum;      /* 48  payload checksum: rio_checksum chained
	                      *     over its 64 KiB pieces, seed DC_HDATA_SEED */
	uint64_t checksum;   /* 56  rio_checksum(bytes 0..55, DC_HREC_SEED) */
};
RIO_STATIC_ASSERT(sizeof(struct dc_held_rec) == 64, "held record size");

#define DC_HELD_HDR_SIZE 64u

#endif /* DC_HELD_LAYOUT_H */
