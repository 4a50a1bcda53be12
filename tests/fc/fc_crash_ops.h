/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_crash_ops.h -- the operation sequence of the file-cache crash tests
 *
 * Operation k of a run is a pure function of (seed, k), so the writer
 * (through the API, or a plain program under the shim) and the checker
 * agree on it without sharing state.  Writes stay inside one block, so
 * each operation is atomic in the cache: after a crash the files hold
 * the result of operations 1..A or 1..A+1, where A is the last one the
 * writer acknowledged.
 *
 * A save is the safe-save pattern of editors and configuration writers:
 * write a temporary file (beside the target, or in the subdirectory
 * FCX_SUBDIR), fsync, close, and rename it over the target -- while the
 * writer still has the target open, then close that.  After a crash the
 * target is the old file or the new one, whole; a temporary file may be
 * left behind (the next save truncates it).
 */
#ifndef FC_CRASH_OPS_H
#define FC_CRASH_OPS_H

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define FCX_FILES 4
#define FCX_BLOCKS 24 /* per file */
#define FCX_BS 4096u
#define FCX_SAVE_MAX (2 * FCX_BS + 100) /* bytes a save writes, at most */
#define FCX_SUBDIR "d"

enum fcx_kind { FCX_WRITE, FCX_TRUNC, FCX_UNLINK, FCX_SYNC, FCX_SAVE };

struct fcx_op {
	int kind;
	int file;
	uint64_t off;  /* write */
	uint32_t len;  /* write */
	uint64_t size; /* truncate */
	int subdir;    /* save: the temporary file is in FCX_SUBDIR */
};

static inline uint64_t
fcx_mix(uint64_t z)
{
	z += 0x9e3779b97f4a7c15ull;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline void
fcx_op(uint64_t seed, uint64_t k, struct fcx_op *op)
{
	uint64_t r = fcx_mix(seed ^ fcx_mix(k));
	unsigned p = (unsigned)(r % 100);

	memset(op, 0, sizeof(*op));
	r = fcx_mix(r);
	op->file = (int)(r % FCX_FILES);
	r = fcx_mix(r);
	if (p < 80) {
		uint64_t b = r % FCX_BLOCKS;
		r = fcx_mix(r);
		op->kind = FCX_WRITE;
		if (r % 10 < 6) {
			op->off = b * FCX_BS;
			op->len = FCX_BS;
		} else {
			uint64_t o = (r >> 8) % FCX_BS;
			op->off = b * FCX_BS + o;
			op->len = (uint32_t)(1 + fcx_mix(r) % (FCX_BS - o));
		}
	} else if (p < 89) {
		op->kind = FCX_TRUNC;
		op->size = r % (FCX_BLOCKS * FCX_BS + 1);
	} else if (p < 95) {
		op->kind = FCX_SAVE;
		op->len = (uint32_t)(r % (FCX_SAVE_MAX + 1));
		op->subdir = (int)((r >> 32) & 1);
	} else if (p < 97) {
		op->kind = FCX_UNLINK;
	} else {
		op->kind = FCX_SYNC;
	}
}

/* The bytes operation k writes. */
static inline void
fcx_data(uint64_t seed, uint64_t k, unsigned char *buf, uint32_t len)
{
	uint64_t w = 0;

	for (uint32_t i = 0; i < len; i++) {
		if (i % 8 == 0)
			w = fcx_mix(seed * 31 + k * 1000003ull + i);
		buf[i] = (unsigned char)(w >> (8 * (i % 8)));
	}
}

/* The temporary file of a save of file i. */
static inline void
fcx_tmp_name(const struct fcx_op *op, char *buf, size_t n, const char *dir)
{
	if (op->subdir)
		snprintf(buf, n, "%s/" FCX_SUBDIR "/t%d", dir, op->file);
	else
		snprintf(buf, n, "%s/f%d.tmp", dir, op->file);
}

#endif /* FC_CRASH_OPS_H */
