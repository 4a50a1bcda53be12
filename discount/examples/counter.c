/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * counter.c -- Discount Checking, linked: a counter that survives kill -9
 *
 *   counter DIR N     counts to N, one line per step, a checkpoint before
 *                     each line; kill it and run the same command again:
 *                     it continues where it was.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <dc.h>

static long total; /* in .bss: checkpointed like everything else */

int
main(int argc, char **argv)
{
	struct dc_opts o = { .dir = argc > 1 ? argv[1] : NULL,
		.protocol = DC_MANUAL };
	int rc = dc_init(&o);
	if (rc) {
		fprintf(stderr, "dc_init: %s: %s\n", dc_strerror(rc),
			dc_errormsg());
		return 1;
	}
	long n = argc > 2 ? atol(argv[2]) : 10;
	long *heap = malloc(sizeof(*heap)); /* the heap is too */
	*heap = 0;
	for (long i = 0; i < n; i++) {
		total += i;
		*heap += 1;
		if (dc_checkpoint() < 0)
			return 1;
		printf("step %ld total %ld heap %ld%s\n", i, total, *heap,
			dc_recovered() ? " (recovered)" : "");
		fflush(stdout);
		usleep(20000);
	}
	return 0;
}
