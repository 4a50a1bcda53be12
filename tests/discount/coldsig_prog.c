/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * coldsig_prog.c -- an unmodified program whose stores into cold regions
 *                   race the checkpoint timer (unit_test.cpp, [coldsig])
 *
 *   dc-test-coldsig ROUNDS [SLOTS [SPIN_MS]]
 *
 * Run under `dc-run --protocol periodic` with a short interval (the test
 * build sends the timer's signal at every fault, DC_TEST_SEGV_TICK=1).
 * SLOTS one-page anonymous regions, each followed by a read-only page
 * it merges with when libdc makes it read-only (cold), so that every fold
 * sees a different mapping there and makes it hot again.  Each round
 * changes the mappings (a scratch page mapped and unmapped: the next
 * commit folds), stores into every slot (each store a cold-region fault
 * when the slot cooled meanwhile), and spins SPIN_MS (default 100) of
 * wall-clock time in user mode: at a 5 ms interval some 20 checkpoints,
 * well over the 8 idle ones after which a region turns cold, on a fast
 * CPU as on a slow one.  Prints the sum of
 * the slots' counters: ROUNDS * SLOTS, alone or under dc-run; a
 * cold-region fault taken for the program's kills it instead.
 */
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 64
#define CHECK_EVERY (1L << 20) /* iterations between clock reads */

static int64_t
now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

int
main(int argc, char **argv)
{
	int rounds = argc > 1 ? atoi(argv[1]) : 100;
	int slots = argc > 2 ? atoi(argv[2]) : SLOTS;
	int spin_ms = argc > 3 ? atoi(argv[3]) : 100;
	if (slots < 1 || slots > SLOTS || spin_ms < 1)
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
		 * is skipped), one clock read per ~1 ms of it */
		int64_t end = now_ms() + spin_ms;
		do {
			for (volatile long k = 0; k < CHECK_EVERY; k++)
				;
		} while (now_ms() < end);
	}
	long sum = 0;
	for (int i = 0; i < slots; i++)
		sum += *(long *)(m + 3 * i * pg);
	printf("sum %ld\n", sum);
	return 0;
}
