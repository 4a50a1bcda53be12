/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * image_prog.c -- a linked program whose anonymous memory comes back
 *                 mapped from the committed image, then changes its
 *                 mappings (unit_test.cpp, [image])
 *
 *   dc-test-image DIR
 *
 * Checkpoint 1 holds a 4 MiB malloc block A (its own mapping; every page
 * holds its index), anonymous mappings B (16 pages of 'b'), C (16 pages
 * of 'c') and D (8 pages of 'd').  The first run is killed after it.
 * Run again, it resumes there, its memory mapped from the image
 * (shadow.c invariant 3), and changes the mappings without reading A
 * first: realloc of A to 8 MiB (mremap), madvise(MADV_DONTNEED) of B (it
 * must read zero), mprotect of D read-only and back, munmap of C's upper
 * half; stores; checkpoint 2, and it is killed again.  The third run
 * resumes at checkpoint 2, checks everything and prints "resumed 2 ok".
 * With DC_TEST_REDO_MAX=1 every commit flushes the log into the shadow,
 * so the punches of checkpoint 2 reach the file under the mappings.
 * Exit 3: a check failed (the line says which), 4: a run that should
 * have been killed was not.
 *
 * Invariants: all state the checks need is in memory libdc tracks.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prog_util.h"

#define MB (1u << 20)
#define PG 4096u

static char *A, *B, *C, *D;

/* A's first 4 MiB: every page's bytes are its index */
static bool
a_ok(void)
{
	for (size_t i = 0; i < 4 * MB; i++)
		if (A[i] != (char)(i / PG))
			return false;
	return true;
}

static void
check2(void)
{
	need(a_ok() && all(A + 4 * MB, 4 * MB, 'N'), "A after realloc");
	need(all(B, 8 * PG, 0) && all(B + 8 * PG, 8 * PG, 'B'),
		"B after MADV_DONTNEED");
	need(all(C, 8 * PG, 'c'), "C after munmap of its upper half");
	need(all(D, PG, 'D') && all(D + PG, 7 * PG, 'd'), "D after mprotect");
}

int
main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	struct dc_opts o = { .dir = argv[1], .protocol = DC_MANUAL };
	if (dc_init(&o)) {
		fprintf(stderr, "dc_init: %s\n", dc_errormsg());
		return 1;
	}
	A = malloc(4 * MB);
	need(A != NULL, "malloc");
	for (size_t i = 0; i < 4 * MB; i++)
		A[i] = (char)(i / PG);
	B = map_filled(16 * PG, 'b');
	C = map_filled(16 * PG, 'c');
	D = map_filled(8 * PG, 'd');
	int rc = dc_checkpoint();
	need(rc >= 0, "checkpoint 1");
	if (rc == 0)
		kill(getpid(), SIGKILL);
	/* resumed at checkpoint 1: A is not read before it moves */
	char *na = realloc(A, 8 * MB);
	need(na != NULL, "realloc");
	A = na;
	memset(A + 4 * MB, 'N', 4 * MB);
	need(madvise(B, 16 * PG, MADV_DONTNEED) == 0, "madvise");
	need(all(B, 16 * PG, 0), "MADV_DONTNEED gives zeros");
	memset(B + 8 * PG, 'B', 8 * PG);
	need(munmap(C + 8 * PG, 8 * PG) == 0, "munmap");
	need(mprotect(D, 8 * PG, PROT_READ) == 0 &&
		mprotect(D, 8 * PG, PROT_READ | PROT_WRITE) == 0, "mprotect");
	memset(D, 'D', PG);
	rc = dc_checkpoint();
	need(rc >= 0, "checkpoint 2");
	if (rc == 1) { /* resumed here */
		check2();
		printf("resumed 2 ok\n");
		return 0;
	}
	kill(getpid(), SIGKILL);
	return 4;
}
