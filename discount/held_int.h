/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * held_int.h -- the held-output buffer's state in memory (held.c)
 *
 * Lives in dc__vol: never tracked, never rolled back.  After a recovery
 * it is rebuilt from the `held` file (dc__held_recover), which is the
 * authority; the rolled-back memory holds no copy of it.
 */
#ifndef DC_HELD_INT_H
#define DC_HELD_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "held_layout.h"

#define DC__HELD_FILES 64     /* files written in one interval */
#define DC__HELD_RECS 16384   /* records held in one interval */
#define DC__HELD_MAX_DEFAULT (64ull << 20) /* payload bytes (DC_HELD_MAX) */
#define DC__HELD_PATH 512

struct dc__hfile {
	uint64_t dev, ino;
	int64_t vsize;        /* size the program sees: the real size at the
	                       * first held write, grown by the held writes */
	int wfd;              /* release: descriptor of libdc's own, or -1 */
	char path[DC__HELD_PATH];
};

struct dc__hrec {
	uint16_t type, file;
	int64_t off;
	uint64_t len, loc, dcsum;
};

struct dc__held {
	int scheme;           /* 0: off, else enum dc_held_scheme */
	int fd, ren_fd;       /* `held`, `rename` (own descriptors) or -1 */
	uint64_t end;         /* append offset in `held` */
	uint64_t ren_end;     /* append offset in `rename` */
	uint64_t bytes;       /* payload held */
	uint64_t cap;         /* DC_HELD_MAX */
	uint64_t forced;      /* checkpoints forced by a full buffer */
	uint64_t pending;     /* recovery: the generation whose loaded
	                       * records wait for the descriptors, or 0 */
	volatile bool tick_missed; /* the interval's tick came while libdc
	                       * made a blocking call with output held */
	unsigned nfile, nrec;
	struct dc__hfile file[DC__HELD_FILES];
	struct dc__hrec rec[DC__HELD_RECS];
	char buf[256 * 1024] __attribute__((aligned(64)));
};

/* held.c */
int dc__held_start(bool on);
int dc__held_recover(void);
int dc__held_recover_finish(void);
int dc__held_seal(uint64_t gen);
int dc__held_release(uint64_t gen);
bool dc__held_records(void);
void dc__held_exit(void);
bool dc__held_on(void);
bool dc__held_waiting(void);
/* The calls the buffered protocol answers itself (held output, reads
 * over held data, sizes); *handled says whether it did. */
long dc__held_syscall(long nr, long *a, bool *handled);

#endif /* DC_HELD_INT_H */
