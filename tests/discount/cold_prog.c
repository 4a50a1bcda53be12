/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * cold_prog.c -- a linked program that writes into cold regions (regions
 *                libdc made read-only because they were idle) or, with
 *                DC_TRACKING=wp or undo, write-protected pages, from user mode
 *                and through the kernel (unit_test.cpp, [cold])
 *
 *   dc-test-cold DIR INPUTFILE
 *
 * A 64 KiB mapping is left idle until it turns cold (is write-protected),
 * then written by pread(2), by a store, by read(2) across three pages, by
 * readv(2), and by getxattr(2) (6000 bytes the kernel writes through a
 * pointer whose length libdc does not look at: with wp the call fails
 * with EFAULT and is made again), each time after it turned cold again;
 * each write is checkpointed.  The program then kills itself; run again,
 * it resumes at the last checkpoint and prints what the mapping holds:
 * "resumed b b c d b d q q".  Exit 3: a write failed, the mapping never
 * turned cold, or (wp) the store did not fault or the getxattr was not
 * made again (the test would prove nothing).
 *
 * Invariants: every write lands in a region /proc/self/maps shows without
 * write permission just before it.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/xattr.h>
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
	struct dc_stats s0, s1;
	dc_stats(&s0);
	R[8192] = 'c';
	dc_stats(&s1);
	const char *tr = getenv("DC_TRACKING");
	bool wp = tr && (!strcmp(tr, "wp") || !strcmp(tr, "undo"));
	if (wp && s1.wp_faults != s0.wp_faults + 1)
		return 3;
	dc_checkpoint();
	cool(); /* read(2) into three protected pages, not page-aligned */
	if (lseek(fd, 0, SEEK_SET) != 0 || read(fd, R + 16484, 8192) != 8192)
		return 3;
	dc_checkpoint();
	cool(); /* readv: the buffer is behind a pointer */
	struct iovec iov = { R + 12288, 4096 };
	if (preadv(fd, &iov, 1, 4096) != 4096)
		return 3;
	dc_checkpoint();
	cool(); /* getxattr: three pages behind a pointer */
	dc_stats(&s0);
	if (getxattr(argv[2], "user.big", R + 36664, 6000) != 6000)
		return 3;
	dc_stats(&s1);
	if (wp && s1.warmed == s0.warmed)
		return 3;
	int rc = dc_checkpoint();
	if (rc == 1) {
		printf("resumed %c %c %c %c %c %c %c %c\n", R[0], R[4095],
			R[8192], R[12288], R[16484], R[16484 + 8191],
			R[36664], R[36664 + 5999]);
		return 0;
	}
	kill(getpid(), SIGKILL);
	return 3;
}
