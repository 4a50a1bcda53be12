/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * part_prog.c -- a linked program whose mappings change in part: by a
 *                call that touches part of a region, with stores into the
 *                rest of it in the same interval, or by the kernel alone
 *                (the stack grows), then is killed (unit_test.cpp, [part])
 *
 *   dc-test-part DIR STAGE
 *
 * Two regions, written whole before checkpoint c1; between c1 and c2,
 * first a store into the first page of each, then the change:
 *   A  an anonymous mapping of 16 pages: MADV_DONTNEED over pages 8..11
 *      (the mapping stays one VMA, its other pages keep their bytes);
 *   H  16 pages above the program break: the break moved down by 100
 *      bytes, within H's last page (the heap's VMA does not change).
 * The fold of c2 sees each region inside one it saw at c1, touched in part
 * by a change; the stores into their first pages are in no changed range:
 * only the scan that follows the fold can find them.  Then the stack:
 *   S  a recursion 64 frames of 8 KiB deep, each frame filled with a byte
 *      of its depth, and c3 at its bottom: the kernel grew the stack's
 *      mapping (512 KiB, more than the fold of c2 saw) and no system call
 *      changed a mapping since.
 * STAGE 1 kills the process after c1 (nothing to check but the start),
 * STAGE 2 after c2, STAGE 3 after c3; run again, it resumes there and
 * prints "resumed s ok" when the regions hold what they held at that
 * checkpoint (S: every frame, checked on the way back up).  Exit 3: a
 * check failed (the line says which), 4: not killed.
 *
 * Invariants: the state the checks need is in tracked memory (globals);
 * the program break is moved only by this program between c1 and the
 * kill (standard output is unbuffered: stdio allocates nothing).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "prog_util.h"

#define PG 4096ul

static char *A, *H;
static int stage;

/* What the regions hold at checkpoint k. */
static void
check(int k)
{
	switch (k) {
	case 1:
		need(all(A, 16 * PG, 'a'), "A at c1");
		need(all(H, 16 * PG, 'h'), "H at c1");
		break;
	case 2:
	case 3:
		need(all(A, PG, 'A'), "A at c2: the store beside the madvise");
		need(all(A + PG, 7 * PG, 'a') && all(A + 8 * PG, 4 * PG, 0) &&
			all(A + 12 * PG, 4 * PG, 'a'), "A at c2");
		need(all(H, PG, 'H'), "H at c2: the store below the break");
		need(all(H + PG, 15 * PG - 100, 'h'), "H at c2");
		break;
	}
}

/* checkpoint k; at the chosen stage, the kill after it */
static void
ckpt(int k)
{
	ckpt_checked(k, check);
	if (k == stage)
		kill(getpid(), SIGKILL);
}

#define FRAMES 64

/* Frame d of S: filled with its byte, c3 at the bottom (d == 0); returns
 * what the checkpoint returned there (1: resumed), every frame checked on
 * the way back up. */
static int
deep(int d)
{
	volatile char pad[8192];
	char v = (char)('0' + d % 64);
	memset((char *)pad, v, sizeof(pad));
	int rc;
	if (d == 0) {
		rc = dc_checkpoint();
		need(rc >= 0, "checkpoint");
		check(3);
		if (rc == 0 && stage == 3)
			kill(getpid(), SIGKILL);
	} else {
		rc = deep(d - 1);
	}
	need(all((const char *)pad, sizeof(pad), v), "S at c3: a frame");
	return rc;
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IONBF, 0);
	dc_test_start(argc, argv);
	stage = atoi(argv[2]);
	A = mmap((void *)0x300000000000ul, 16 * PG, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	need(A != MAP_FAILED, "mmap A");
	memset(A, 'a', 16 * PG);
	/* H starts on a page of its own */
	char *b = sbrk(0);
	need(b != (void *)-1, "sbrk");
	intptr_t pad = (intptr_t)(-(uintptr_t)b & (PG - 1));
	need(sbrk(pad + (intptr_t)(16 * PG)) == b, "sbrk grow");
	H = b + pad;
	memset(H, 'h', 16 * PG);
	ckpt(1);

	memset(A, 'A', PG);
	need(madvise(A + 8 * PG, 4 * PG, MADV_DONTNEED) == 0, "madvise");
	memset(H, 'H', PG);
	need(sbrk(-100) != (void *)-1, "brk down by 100 bytes");
	ckpt(2);

	if (deep(FRAMES) == 1) {
		printf("resumed 3 ok\n");
		return 0;
	}
	return 4;
}
