/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * trace_layout.h -- the pmemtest trace file: what a traced run did to its pools
 *
 * Written by the tracer (libpmemtest-trace.so, or the driver itself when it
 * traces a checker's recovery), read by the driver.  A header, then records,
 * then an END record.  docs/FORMAT.md#pmemtest has the tables.
 *
 * Invariants
 *   T1. Records are appended in the order the traced process performed the
 *       operations, under the tracer's lock: a reader replaying them in file
 *       order rebuilds every pool's content at every flush and fence.
 *   T2. A LINE record for a line precedes any FLUSH covering it whose content
 *       it describes: the tracer compares a flushed line with its shadow copy
 *       before it logs the flush, and every line with its shadow at a fence.
 *   T3. STACK and MODULE records precede the first record that names them.
 *   T4. The trace is complete only if it ends with an END record whose
 *       checksum covers every byte before it; a trace without one was cut
 *       short (the program died) and is replayed up to its last whole record.
 */
#ifndef PMEMTEST_TRACE_LAYOUT_H
#define PMEMTEST_TRACE_LAYOUT_H

#include <stdint.h>

#include "rio.h"

#define PMT_TRACE_MAGIC "PMTRACE"  /* 8 bytes with the NUL */
#define PMT_TRACE_MAJOR 1
#define PMT_TRACE_MINOR 2 /* 1: DISCARD, TOUCH; 2: PMT_LINE_STORE */
#define PMT_LINE 64u              /* bytes per cache line */
#define PMT_HDR_CSUM_SEED 0x504d5448445231ull /* "PMTHDR1" */
#define PMT_END_CSUM_SEED 0x504d54454e4431ull /* "PMTEND1" */

struct pmt_trace_hdr {
	char magic[8];        /* PMT_TRACE_MAGIC */
	uint16_t major;
	uint16_t minor;
	uint32_t hdr_size;    /* sizeof(struct pmt_trace_hdr) */
	uint32_t line_size;   /* PMT_LINE */
	uint32_t pid;         /* traced process */
	uint64_t start_ns;    /* CLOCK_REALTIME at start */
	uint32_t flags;       /* PMT_TRACE_* */
	uint8_t reserved[20]; /* zero */
	uint64_t checksum;    /* rio_checksum(bytes 0..55, PMT_HDR_CSUM_SEED) */
};
RIO_STATIC_ASSERT(sizeof(struct pmt_trace_hdr) == 64, "trace header size");
#define PMT_TRACE_UFFD 1u /* stores found with userfaultfd, not by scanning */
#define PMT_TRACE_STORES 2u /* every store logged alone (PMT_LINE_STORE) */

enum pmt_rec_type {
	PMT_REC_MODULE = 1, /* a loaded object call sites refer to */
	PMT_REC_STACK = 2,  /* an interned call stack */
	PMT_REC_POOL = 3,   /* a pool mapped for the first time */
	PMT_REC_MAP = 4,    /* a known pool mapped again */
	PMT_REC_UNMAP = 5,  /* a pool about to be unmapped */
	PMT_REC_LINE = 6,   /* a line's content: initial, or changed */
	PMT_REC_FLUSH = 7,  /* lines flushed by a thread */
	PMT_REC_FENCE = 8,  /* a thread's fence (drain) */
	PMT_REC_DPOINT = 9, /* a declared durability point */
	PMT_REC_END = 10,   /* the process exited; last record */
	PMT_REC_DISCARD = 11, /* lines that hold no state any more */
	PMT_REC_TOUCH = 12, /* pages written, whether or not a line changed */
};

/* Every record: this header, then `len` bytes of payload (8-aligned). */
struct pmt_rec {
	uint16_t type; /* enum pmt_rec_type */
	uint16_t aux;  /* per type, below */
	uint32_t len;  /* payload bytes, a multiple of 8 */
};
RIO_STATIC_ASSERT(sizeof(struct pmt_rec) == 8, "record header size");

/* MODULE: then the NUL-terminated path, zero-padded to 8. */
struct pmt_rec_module {
	uint32_t id;
	uint32_t reserved;
};

/* STACK: then `depth` frames, innermost first (the flush/fence site). */
struct pmt_frame {
	uint32_t module; /* MODULE id; 0 = unknown (offset is absolute) */
	uint32_t reserved;
	uint64_t offset; /* address minus the module's load bias */
};
struct pmt_rec_stack {
	uint32_t id; /* 1, 2, ...; 0 means "no stack" elsewhere */
	uint32_t depth;
};

/* POOL (aux: PMT_POOL_* flags): then the path, NUL-terminated, padded. */
#define PMT_POOL_EXISTED 1u /* the file existed before the traced run */
struct pmt_rec_pool {
	uint32_t pool; /* 0, 1, ... in order of first mapping */
	uint32_t reserved;
	uint64_t size; /* bytes mapped (the whole file) */
};

/* MAP, UNMAP */
struct pmt_rec_poolref {
	uint32_t pool;
	uint32_t reserved;
};

/* LINE (aux: PMT_LINE_INIT for initial content, 0 for a change found at
 * a flush or fence, PMT_LINE_STORE for the effect of one store
 * instruction -- the content may be unchanged: the line's old value was
 * stored again); then PMT_LINE bytes of content. */
#define PMT_LINE_INIT 1u
#define PMT_LINE_STORE 2u
struct pmt_rec_line {
	uint32_t pool;
	uint32_t stack; /* PMT_LINE_STORE: the store's stack; else 0 */
	uint64_t line;  /* line index in the pool file */
};

struct pmt_rec_flush {
	uint32_t pool;
	uint32_t thread; /* tracer's thread number, 1, 2, ... */
	uint64_t line;   /* first line */
	uint64_t nlines;
	uint32_t stack;
	uint32_t reserved;
};

struct pmt_rec_fence {
	uint32_t thread;
	uint32_t stack;
};

/* DPOINT: then the description, NUL-terminated, padded. */
#define PMT_ALL_POOLS 0xffffffffu
struct pmt_rec_dpoint {
	uint32_t pool; /* or PMT_ALL_POOLS */
	uint32_t stack;
};

/* DISCARD: rio_durable_discard() -- the lines hold no state any more
 * (e.g. a block an aborted transaction allocated and wrote): whatever they
 * hold now may be what survives a crash. */
struct pmt_rec_discard {
	uint32_t pool;
	uint32_t reserved;
	uint64_t line;   /* first line */
	uint64_t nlines;
};

/* TOUCH (userfaultfd mode only): pages the program wrote since the tracer
 * last looked at them.  A line of such a page may have been stored to even
 * if its content is unchanged (a store that put the old value back), so a
 * flush of it is not redundant. */
struct pmt_rec_touch {
	uint32_t pool;
	uint32_t reserved;
	uint64_t page;   /* first page (4096 bytes) of the pool file */
	uint64_t npages;
};

/* END (aux: 0 = exit, else the signal that ended the process) */
struct pmt_rec_end {
	uint64_t records;  /* records before this one */
	uint64_t checksum; /* XXH3-64 (rio_checksum's function) streamed over
			      every byte before this record, seed
			      PMT_END_CSUM_SEED */
};

#endif /* PMEMTEST_TRACE_LAYOUT_H */
