/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * restart.c -- a server with a heap of MB megabytes, checkpointed, killed
 *              and restarted: when does it serve again? (restart.sh)
 *
 *   dc-bench-restart DIR MB
 *
 * A first run fills MB MiB of heap (every page written), takes a
 * checkpoint and prints "ready", then waits to be killed.  Run again on
 * the same DIR, it resumes at that checkpoint and prints "up SECONDS"
 * (CLOCK_REALTIME, nanoseconds) as its first act -- the moment it would
 * answer a client -- then reads a byte of every page of its heap, checks
 * it and prints "read NANOSECONDS" (what the first touch of the whole
 * heap costs after the resume), then exits.  The time
 * from the restart's exec to "up" is the restart to service; libdc's own
 * part is said with $DC_RECOVERY_TIMES.  Exit 2: bad arguments or dc_init
 * failed, 3 the heap is not what was written.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <dc.h>

static unsigned char *heap;
static size_t len;

int
main(int argc, char **argv)
{
	if (argc < 3)
		return 2;
	struct dc_opts o = { .dir = argv[1], .protocol = DC_MANUAL };
	int rc = dc_init(&o);
	if (rc) {
		fprintf(stderr, "dc_init: %s: %s\n", dc_strerror(rc),
			dc_errormsg());
		return 2;
	}
	len = (size_t)atoi(argv[2]) << 20;
	heap = malloc(len);
	if (heap == NULL)
		return 2;
	for (size_t i = 0; i < len; i += 4096)
		heap[i] = (unsigned char)(i >> 12);
	rc = dc_checkpoint();
	if (rc == 1) {
		struct timespec t;
		clock_gettime(CLOCK_REALTIME, &t);
		uint64_t now = (uint64_t)t.tv_sec * 1000000000ull +
			(uint64_t)t.tv_nsec;
		for (size_t i = 0; i < len; i += 4096)
			if (heap[i] != (unsigned char)(i >> 12))
				return 3;
		clock_gettime(CLOCK_REALTIME, &t);
		uint64_t read = (uint64_t)t.tv_sec * 1000000000ull +
			(uint64_t)t.tv_nsec;
		printf("up %lu\nread %lu\n", (unsigned long)now,
			(unsigned long)(read - now));
		return 0;
	}
	if (rc < 0)
		return 2;
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
