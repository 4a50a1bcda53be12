/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * coldsig_prog.c -- an unmodified program whose stores into cold regions
 *                   race the checkpoint timer (unit_test.cpp, [coldsig])
 *
 *   dc-test-coldsig ROUNDS
 *
 * Run under `dc-run --protocol periodic --interval 1` with the checkpoint
 * directory on a disk file system, where a commit takes longer than the
 * interval, so that a timer signal is often pending when a store faults.
 * SLOTS one-page anonymous regions, each followed by a read-only page
 * it merges with when libdc makes it read-only (cold), so that every fold
 * sees a different mapping there and makes it hot again.  Each round
 * changes the mappings (a scratch page mapped and unmapped: the next
 * commit folds), stores into every slot (each store a cold-region fault
 * when the slot cooled meanwhile), and sleeps 20 ms (more than the 8
 * idle checkpoints after which a region turns cold).  Prints the sum of
 * the slots' counters: ROUNDS * SLOTS, alone or under dc-run; a
 * cold-region fault taken for the program's kills it instead.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 64
#define SPIN (60L * 1000 * 1000)

int
main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 100;
	int slots = argc > 2 ? atoi(argv[2]) : SLOTS;
	if (slots < 1 || slots > SLOTS)
		return 3;
	long pg = sysconf(_SC_PAGESIZE);
	/* slot i: page 3i read-write, 3i+1 read-only, 3i+2 a guard */
	char *m = mmap(NULL, (size_t)(3 * SLOTS) * (size_t)pg, PROT_NONE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 3;
	for (int i = 0; i < slots; i++)
		if (mprotect(m + 3 * i * pg, (size_t)pg,
			    PROT_READ | PROT_WRITE) != 0 ||
		    mprotect(m + (3 * i + 1) * pg, (size_t)pg, PROT_READ) != 0)
			return 3;
	for (int r = 0; r < rounds; r++) {
		void *s = mmap(NULL, (size_t)pg, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (s == MAP_FAILED || munmap(s, (size_t)pg) != 0)
			return 3;
		for (int i = 0; i < slots; i++)
			(*(volatile long *)(m + 3 * i * pg))++;
		/* user-mode work (a tick that comes during a system call
		 * is skipped): some 60 ms, more than the idle checkpoints
		 * after which a region turns cold */
		for (volatile long k = 0; k < SPIN; k++)
			;
	}
	long sum = 0;
	for (int i = 0; i < slots; i++)
		sum += *(long *)(m + 3 * i * pg);
	printf("sum %ld\n", sum);
	return 0;
}
