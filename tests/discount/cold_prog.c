/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cold_prog.c -- a linked program that writes into cold regions (regions
 *                libdc made read-only because they were idle) from user
 *                mode and through the kernel (unit_test.cpp, [cold])
 *
 *   dc-test-cold DIR INPUTFILE
 *
 * A 64 KiB mapping is left idle until it turns cold, then written by
 * read(2), by a store, and by readv(2), each time after it turned cold
 * again; each write is checkpointed.  The program then kills itself; run
 * again, it resumes at the last checkpoint and prints what the mapping
 * holds: "resumed b b c d".  Exit 3: a write failed, or the mapping never
 * turned cold (the test would prove nothing).
 *
 * Invariants: every write lands in a region /proc/self/maps shows without
 * write permission just before it.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include <dc.h>

#include "prog_util.h"

static char *R;

/* Is the page at p mapped without write permission (cold)? */
static int
is_cold(const void *p)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	int cold = 0;
	unsigned long a, b, x = (unsigned long)p;
	char perms[8];
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, "%lx-%lx %7s", &a, &b, perms) == 3 &&
		    x >= a && x < b)
			cold = perms[1] != 'w';
	if (f)
		fclose(f);
	return cold;
}

static void
cool(void)
{
	for (int i = 0; i < 40 && !is_cold(R); i++)
		if (dc_checkpoint() < 0)
			exit(3);
	if (!is_cold(R)) {
		fprintf(stderr, "the mapping did not turn cold\n");
		exit(3);
	}
}

int
main(int argc, char **argv)
{
	dc_test_start(argc, argv);
	R = mmap(NULL, 65536, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (R == MAP_FAILED)
		return 3;
	memset(R, 'a', 65536);
	int fd = open(argv[2], O_RDONLY);
	if (fd < 0)
		return 3;

	cool(); /* the kernel writes a cold page */
	if (pread(fd, R, 4096, 0) != 4096)
		return 3;
	dc_checkpoint();
	cool(); /* a store into a cold page */
	R[8192] = 'c';
	dc_checkpoint();
	cool(); /* readv: the buffer is behind a pointer */
	struct iovec iov = { R + 12288, 4096 };
	if (preadv(fd, &iov, 1, 4096) != 4096)
		return 3;
	int rc = dc_checkpoint();
	if (rc == 1) {
		printf("resumed %c %c %c %c\n", R[0], R[4095], R[8192],
			R[12288]);
		return 0;
	}
	kill(getpid(), SIGKILL);
	return 3;
}
