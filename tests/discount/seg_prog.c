/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * seg_prog.c -- a linked program that changes its mappings under tracking
 *               "undo" (the memory moved into the persistent segment),
 *               then is killed (unit_test.cpp, [seg])
 *
 *   dc-test-seg DIR STAGE
 *
 * Checkpoint 1 holds: a 4 MiB malloc block (its own mapping) of 'a', three
 * anonymous mappings B (16 pages of 'b'), C (16 pages of 'c'), D (3 pages
 * of 'd'), and a global array of 'g'.  Then every change a program can
 * make to moved memory besides stores: realloc of the block to 8 MiB
 * (mremap: the mapping moves or grows), madvise(MADV_DONTNEED) of C (it
 * must read zero), mprotect of D read-only and back, munmap of B and a new
 * mapping in its place, each followed by stores; and checkpoint 2.  STAGE
 * 1 kills the process before checkpoint 2, STAGE 2 after it, once more
 * after further changes.  STAGE 3 (tracking "undo", with the test build's
 * DC_TEST_MUNDO_MAX) overwrites the block after checkpoint 1: the undo
 * log fills up and libdc stops the process.  Run again, it resumes at the
 * last checkpoint and
 * prints what it finds: "resumed 1 ok" (checkpoint 1's content intact) or
 * "resumed 2 ok" (checkpoint 2's).  Exit 3: a check failed (the line says
 * which), 4: the run was not killed.
 *
 * Invariants: all state the checks need is in memory libdc tracks (the
 * globals, the heap, the mappings).
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prog_util.h"

#define MB (1u << 20)
#define PG 4096u

static char *A, *B, *C, *D;
static size_t alen;
static char g[3 * PG];

/* the state at checkpoint 1 */
static void
check1(void)
{
	need(alen == 4 * MB && all(A, alen, 'a'), "block");
	need(all(B, 16 * PG, 'b'), "B");
	need(all(C, 16 * PG, 'c'), "C");
	need(all(D, 3 * PG, 'd'), "D");
	need(all(g, sizeof(g), 'g'), "globals");
}

/* the state at checkpoint 2 */
static void
check2(void)
{
	need(alen == 8 * MB && all(A, PG, 'A') &&
		all(A + PG, 4 * MB - PG, 'a') && all(A + 4 * MB, 4 * MB, 'N'),
		"reallocated block");
	need(all(B, 16 * PG, 'X'), "new mapping in B's place");
	need(all(C, 8 * PG, 0) && all(C + 8 * PG, 8 * PG, 'C'),
		"C after MADV_DONTNEED");
	need(all(D, 3 * PG, 'D'), "D after mprotect");
	need(all(g, PG, 'G') && all(g + PG, 2 * PG, 'g'), "globals");
}

int
main(int argc, char **argv)
{
	dc_test_start(argc, argv);
	int stage = atoi(argv[2]);
	alen = 4 * MB;
	A = malloc(alen);
	need(A != NULL, "malloc");
	memset(A, 'a', alen);
	B = map_filled(16 * PG, 'b');
	C = map_filled(16 * PG, 'c');
	D = map_filled(3 * PG, 'd');
	memset(g, 'g', sizeof(g));
	int rc = dc_checkpoint();
	need(rc >= 0, "checkpoint 1");
	if (rc == 1) {
		check1();
		printf("resumed 1 ok\n");
		return 0;
	}

	if (stage == 3) {
		memset(A, 'z', alen); /* more than the undo log may take */
		return 4;
	}
	char *na = realloc(A, 8 * MB); /* mremap */
	need(na != NULL, "realloc");
	A = na;
	alen = 8 * MB;
	memset(A, 'A', PG);
	memset(A + 4 * MB, 'N', 4 * MB);
	need(madvise(C, 16 * PG, MADV_DONTNEED) == 0, "madvise");
	need(all(C, 16 * PG, 0), "MADV_DONTNEED gives zeros");
	memset(C + 8 * PG, 'C', 8 * PG);
	need(mprotect(D, 3 * PG, PROT_READ) == 0 &&
		mprotect(D, 3 * PG, PROT_READ | PROT_WRITE) == 0, "mprotect");
	memset(D, 'D', 3 * PG);
	need(munmap(B, 16 * PG) == 0, "munmap");
	need(mmap(B, 16 * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE |
		MAP_ANONYMOUS | MAP_FIXED, -1, 0) == B, "mmap again");
	memset(B, 'X', 16 * PG);
	memset(g, 'G', PG);
	if (stage == 1)
		kill(getpid(), SIGKILL);

	rc = dc_checkpoint();
	need(rc >= 0, "checkpoint 2");
	if (rc == 1) {
		check2();
		printf("resumed 2 ok\n");
		return 0;
	}
	check2();
	/* more changes after checkpoint 2, all lost by the kill */
	memset(A, 'z', alen);
	char *ap = (char *)(((uintptr_t)A + PG - 1) & ~(uintptr_t)(PG - 1));
	need(madvise(ap, 4 * MB, MADV_DONTNEED) == 0, "madvise 2");
	memset(B, 'z', 16 * PG);
	memset(g, 'z', sizeof(g));
	need(munmap(D, 3 * PG) == 0, "munmap 2");
	kill(getpid(), SIGKILL);
	return 4;
}
