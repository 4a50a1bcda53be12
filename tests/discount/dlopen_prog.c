/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlopen_prog.c -- a linked program that loads a library with dlopen after
 *                  its first checkpoint (unit_test.cpp, [dlopen])
 *
 *   dc-test-dlopen DIR LIBRARY
 *
 * dc_init takes the first checkpoint; then LIBRARY (dlopen_lib.c) is
 * loaded, called once, and a checkpoint is taken; the program then kills
 * itself.  Run again, it resumes at that checkpoint, calls the library
 * through the pointers it had (its relocated RELRO: a function-pointer
 * table, GOT entries), dlopen's the library again (the loader's link map
 * must know it: the same handle) and prints
 * "resumed ops 42 6 2 same".  Exit 3: the library did not load or a
 * result is wrong in the first run.
 *
 * Invariants: nothing of the library exists in the fresh process before
 * recovery: every byte of it comes back from the checkpoint.
 */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <dc.h>

#include "prog_util.h"

int
main(int argc, char **argv)
{
	dc_test_start(argc, argv);
	void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		fprintf(stderr, "dlopen: %s\n", dlerror());
		return 3;
	}
	int (*fmt)(char *, size_t, int) =
		(int (*)(char *, size_t, int))dlsym(h, "dc_dl_format");
	char buf[64];
	if (fmt == NULL || fmt(buf, sizeof(buf), 21) <= 0 ||
	    strcmp(buf, "ops 42 6 1"))
		return 3;
	int rc = dc_checkpoint();
	if (rc == 1) {
		fmt(buf, sizeof(buf), 21);
		void *h2 = dlopen(argv[2], RTLD_NOW | RTLD_NOLOAD);
		printf("resumed %s %s\n", buf, h2 == h ? "same" : "other");
		return 0;
	}
	if (rc != 0)
		return 3;
	kill(getpid(), SIGKILL);
	return 3;
}
