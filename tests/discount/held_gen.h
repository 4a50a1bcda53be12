/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * held_gen.h -- the writes of held_prog.c, and the file they make
 *               (held_test.cpp computes a failure-free run's file)
 *
 * Write i of seed s: a length of 512..8703 bytes, bytes that name i (a
 * torn or misplaced write shows), and either a pwrite at a random offset
 * or, one write in four, a write() at the descriptor's offset (back to 0
 * when the file's HELD_FSIZE bytes would be passed).  Writes overlap
 * often: the order they are performed in shows in the file.
 */
#ifndef DC_TEST_HELD_GEN_H
#define DC_TEST_HELD_GEN_H

#include <stdint.h>
#include <string.h>

#define HELD_FSIZE (256u * 1024u)
#define HELD_MAXLEN 8704u

struct held_gen {
	uint64_t rng;
	uint64_t pos; /* the descriptor's offset (write()) */
};

struct held_w {
	uint64_t off, len;
	int seq;      /* 1: write() at pos (lseek to 0 first if rewind) */
	int rewind;
};

static inline uint64_t
held_next(struct held_gen *g)
{
	g->rng ^= g->rng << 13;
	g->rng ^= g->rng >> 7;
	g->rng ^= g->rng << 17;
	return g->rng;
}

static inline void
held_init(struct held_gen *g, uint64_t seed)
{
	g->rng = seed * 0x9e3779b97f4a7c15ull + 1;
	g->pos = 0;
}

/* Write i: where, how long, how; the bytes go to buf. */
static inline struct held_w
held_write(struct held_gen *g, uint64_t i, unsigned char *buf)
{
	struct held_w w = { 0, 512 + held_next(g) % 8192, 0, 0 };
	if (held_next(g) % 4 == 0) {
		w.seq = 1;
		if (g->pos + w.len > HELD_FSIZE) {
			w.rewind = 1;
			g->pos = 0;
		}
		w.off = g->pos;
		g->pos += w.len;
	} else {
		w.off = held_next(g) % (HELD_FSIZE - w.len);
	}
	for (uint64_t j = 0; j < w.len; j++)
		buf[j] = (unsigned char)(i * 131 + j * 7 + (i >> 8) + 1);
	return w;
}

#endif /* DC_TEST_HELD_GEN_H */
