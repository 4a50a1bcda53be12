/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prog_util.h -- start and checks of the linked test programs
 *                (files_prog.c, cold_prog.c, seg_prog.c, hist_prog.c,
 *                part_prog.c, dlopen_prog.c, image_prog.c)
 *
 * Invariants: returns only with Discount Checking running (or, in a
 * resumed run, never: the program continues at its checkpoint); exits 1
 * when dc_init fails, 2 on bad arguments.
 */
#ifndef DC_TEST_PROG_UTIL_H
#define DC_TEST_PROG_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <dc.h>

/* PROG DIR ARG: checkpoints in DIR, manual protocol. */
static inline void
dc_test_start(int argc, char **argv)
{
	if (argc < 3)
		exit(2);
	struct dc_opts o = { .dir = argv[1], .protocol = DC_MANUAL };
	int rc = dc_init(&o);
	if (rc) {
		fprintf(stderr, "dc_init: %s: %s\n", dc_strerror(rc),
			dc_errormsg());
		exit(1);
	}
}

/* A check of the programs that verify their memory (seg_prog.c,
 * hist_prog.c, part_prog.c): on failure, says which and exits 3. */
static inline void
need(bool ok, const char *what)
{
	if (!ok) {
		printf("check failed: %s\n", what);
		exit(3);
	}
}

/* Do the n bytes at p all hold v? */
static inline bool
all(const char *p, size_t n, char v)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != v)
			return false;
	return true;
}

/* n bytes of new anonymous memory, every byte v (seg_prog.c,
 * image_prog.c). */
static inline char *
map_filled(size_t n, char v)
{
	char *p = mmap(NULL, n, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	need(p != MAP_FAILED, "mmap");
	memset(p, v, n);
	return p;
}

/* Checkpoint k of a program that verifies its memory: check(k) says
 * whether it holds what checkpoint k holds, in the first run and, resumed
 * there, in the next, which then prints "resumed k ok" and exits 0. */
static inline void
ckpt_checked(int k, void (*check)(int))
{
	int rc = dc_checkpoint();
	need(rc >= 0, "checkpoint");
	if (rc == 1) {
		check(k);
		printf("resumed %d ok\n", k);
		exit(0);
	}
	check(k); /* the first run holds it too */
}

#endif /* DC_TEST_PROG_UTIL_H */
