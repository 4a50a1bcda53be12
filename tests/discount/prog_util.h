/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * prog_util.h -- start of the linked test programs (files_prog.c,
 *                cold_prog.c)
 *
 * Invariants: returns only with Discount Checking running (or, in a
 * resumed run, never: the program continues at its checkpoint); exits 1
 * when dc_init fails, 2 on bad arguments.
 */
#ifndef DC_TEST_PROG_UTIL_H
#define DC_TEST_PROG_UTIL_H

#include <stdio.h>
#include <stdlib.h>

#include <dc.h>

/* PROG DIR ARG: checkpoints in DIR, manual protocol. */
static inline void
dc_test_start(int argc, char **argv)
{
	if (argc < 3)
		exit(2);
	struct dc_opts o = { .dir = argv[1], .protocol = DC_MANUAL };
	int rc = dc_init(&o);
	if (rc) {
		fprintf(stderr, "dc_init: %s: %s\n", dc_strerror(rc),
			dc_errormsg());
		exit(1);
	}
}

#endif /* DC_TEST_PROG_UTIL_H */
