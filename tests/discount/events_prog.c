/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * events_prog.c -- a linked program that writes one line in three calls
 *                  (unit_test.cpp, [events])
 *
 *   dc-test-events DIR kill|run
 *
 * Takes a checkpoint, then writes "sum: ", "42" and a newline in three
 * write(2) calls; with "kill", it kills itself before the newline in the
 * run that took the checkpoint, and the recovered run writes the line
 * again from its start.  Its output is then "sum: 42sum: 42\n": one line
 * that is no line of the failure-free run, but whose events (dc-run
 * --events, DC_EVENTS) are the failure-free run's with two duplicates.
 *
 * Invariants: every write is one event of the standard output (a pipe);
 * exits 0 after the newline.
 */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "prog_util.h"

static void
say(const char *s)
{
	if (write(1, s, strlen(s)) != (ssize_t)strlen(s))
		_exit(3);
}

int
main(int argc, char **argv)
{
	dc_test_start(argc, argv);
	int rc = dc_checkpoint();
	if (rc < 0)
		return 1;
	say("sum: ");
	say("42");
	if (rc == 0 && strcmp(argv[2], "kill") == 0)
		kill(getpid(), SIGKILL);
	say("\n");
	return 0;
}
