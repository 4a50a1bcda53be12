/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * coldmerge_prog.c -- two neighbouring regions turn cold and the kernel
 *                     merges their read-only mappings into one; a fold
 *                     follows, then a kill (unit_test.cpp, [coldmerge])
 *
 *   dc-test-coldmerge DIR
 *
 * A (4 pages, read-write, written) and B (the 4 pages right below it,
 * of the same mapping, made read-only) are two mappings and two regions.  A is left
 * idle until it turns cold: made read-only, it has B's flags, and the
 * kernel merges the two into one read-only mapping that matches neither
 * region.  A third mapping makes the next checkpoint fold: the region it
 * records for A must carry the program's protection (read-write), not
 * the cold one.  The program then writes A, checkpoints and kills itself;
 * run again, it resumes there, writes A again and prints "resumed A A 0".
 * With the cold protection in the table, recovery gives A back read-only
 * and the store faults (SIGSEGV).
 *
 * Exit: 0 resumed and written, 1 dc_init failed, 2 no DIR, 4 the kernel did not merge the mappings
 * as the test needs (it would prove nothing), 3 a call failed.
 */
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <dc.h>

#define PAGE 4096ul

static char *A, *B;

/* The mapping holding p: its start and whether it is writable. */
static bool
vma_of(const void *p, unsigned long *start, bool *writable)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512], perms[8];
	unsigned long a, b, x = (unsigned long)p;
	bool found = false;
	while (f && !found && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) == 3 &&
		    x >= a && x < b) {
			*start = a;
			*writable = perms[1] == 'w';
			found = true;
		}
	if (f)
		fclose(f);
	return found;
}

int
main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	struct dc_opts o = { .dir = argv[1], .protocol = DC_MANUAL };
	int rc = dc_init(&o);
	if (rc) {
		fprintf(stderr, "dc_init: %s: %s\n", dc_strerror(rc),
			dc_errormsg());
		return 1;
	}
	/* one mapping of 8 pages: B the lower half, made read-only (two
	 * mappings with the same flags but the write permission: both
	 * accounted as writable memory), A the upper half */
	B = mmap(NULL, 8 * PAGE, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (B == MAP_FAILED)
		return 3;
	A = B + 4 * PAGE;
	memset(A, 'a', 4 * PAGE);
	if (mprotect(B, 4 * PAGE, PROT_READ) != 0)
		return 3;
	if (dc_checkpoint() < 0) /* A and B registered, two regions */
		return 3;
	unsigned long s;
	bool w = true;
	for (int i = 0; i < 40 && (w || s != (unsigned long)B); i++) {
		if (dc_checkpoint() < 0)
			return 3;
		if (!vma_of(A, &s, &w))
			return 3;
	}
	if (w || s != (unsigned long)B) {
		fprintf(stderr, "A (%p) and B did not turn cold as one "
			"mapping; the maps:\n", (void *)A);
		FILE *f = fopen("/proc/self/maps", "r");
		char line[512];
		while (f && fgets(line, sizeof(line), f))
			fputs(line, stderr);
		return 4;
	}
	char *C = mmap(NULL, PAGE, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (C == MAP_FAILED)
		return 3;
	C[0] = 'c';
	if (dc_checkpoint() < 0) /* folds with A and B cold */
		return 3;
	A[0] = 'A';
	rc = dc_checkpoint();
	if (rc < 0)
		return 3;
	if (rc == 1) {
		A[1] = 'A'; /* faults if recovery made A read-only */
		printf("resumed %c %c %d\n", A[0], A[1], B[0]);
		return 0;
	}
	kill(getpid(), SIGKILL);
	return 3;
}
