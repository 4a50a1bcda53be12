/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * preload.c -- libpmemtest-trace.so: switch tracing on in a program
 *
 * `pmemtest run` starts the program with LD_PRELOAD naming this library and
 *   PMEMTEST_TRACE=<file>       where to write the trace (created, O_EXCL)
 *   PMEMTEST_TRACE_PID=<pid>    only that process traces (not its children)
 *   PMEMTEST_POOLS=<paths>      newline-separated pools to trace (else all)
 *   PMEMTEST_STACK_DEPTH=<n>    frames per call site (default 8)
 *   PMEMTEST_DIRTY=auto|uffd|scan  how stores are found (default auto:
 *                               userfaultfd where allowed, else scanning)
 * or, for a checker command, PMEMTEST_FORKSERVER=IN,OUT (fork_server).
 * The constructor starts the tracer and installs it in librio
 * (rio_trace_set); pmem_shim.c does the same for libpmem's functions.  The
 * destructor writes the END record.  Without PMEMTEST_TRACE the library
 * does nothing, so programs it leaks into (a shell, a child) run as usual.
 *
 * This library does not link librio: it finds rio_trace_set() with
 * dlsym(RTLD_DEFAULT), which returns the program's own copy first.  So a
 * program using librio.so is traced, and so is one that links librio
 * statically and exports its dynamic symbols (-rdynamic; meson
 * export_dynamic) -- the crash tests of libvista's broken builds do.
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "forkserver.h"
#include "tracer_int.h"

typedef int (*trace_set_fn)(const struct rio_trace_ops *);
static trace_set_fn trace_set;

/*
 * PMEMTEST_FORKSERVER=IN,OUT: this process is a checker command started
 * once per slot (check.c F1-F3) and stops here, before main: for every
 * request on IN it forks; the child joins the requester's process group
 * (so a timeout kills it with the requester) and returns to run the
 * program's main on the image; the server answers the child's wait status
 * on OUT.  The loader's work (mapping and relocating every library) is
 * done once, not once per image.
 */
static void
fork_server(const char *spec)
{
	int in = -1, out = -1;

	if (sscanf(spec, "%d,%d", &in, &out) != 2)
		return;
	unsetenv("PMEMTEST_FORKSERVER");
	{
		struct fs_msg hello = { 0, 0, 0 };
		if (fs_io(out, &hello, sizeof(hello), true) != 0)
			_exit(0);
	}
	for (;;) {
		struct fs_msg m;
		int st = -1;
		pid_t pid;

		if (fs_io(in, &m, sizeof(m), false) != 0)
			_exit(0);
		pid = fork();
		if (pid == 0) {
			close(in);
			close(out);
			setpgid(0, m.val);
			return;
		}
		while (pid > 0 && waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		m.val = st;
		if (fs_io(out, &m, sizeof(m), true) != 0)
			_exit(0);
	}
}

__attribute__((constructor)) static void
pmt_preload_init(void)
{
	const char *fs = getenv("PMEMTEST_FORKSERVER");
	if (fs != NULL) {
		fork_server(fs);
		return;
	}

	const char *path = getenv("PMEMTEST_TRACE");
	const char *pid = getenv("PMEMTEST_TRACE_PID");
	const char *depth = getenv("PMEMTEST_STACK_DEPTH");
	const char *dirty = getenv("PMEMTEST_DIRTY");
	struct pmt_tracer_cfg cfg = { 0 };
	int rc;

	if (path == NULL || pid == NULL || atol(pid) != (long)getpid())
		return;
	cfg.trace_path = path;
	cfg.pools = getenv("PMEMTEST_POOLS");
	cfg.stack_depth = depth ? (unsigned)atoi(depth) : 8;
	cfg.dirty = PMT_DIRTY_AUTO;
	if (dirty && strcmp(dirty, "uffd") == 0)
		cfg.dirty = PMT_DIRTY_UFFD;
	else if (dirty && strcmp(dirty, "scan") == 0)
		cfg.dirty = PMT_DIRTY_SCAN;
	else if (dirty && strcmp(dirty, "stores") == 0)
		cfg.dirty = PMT_DIRTY_STORES;
	rc = pmt_tracer_start(&cfg);
	if (rc) {
		fprintf(stderr, "pmemtest-trace: cannot start tracing to %s: "
			"%s\n", path, strerror(-rc));
		return;
	}
	trace_set = (trace_set_fn)dlsym(RTLD_DEFAULT, "rio_trace_set");
	if (trace_set != NULL)
		trace_set(&pmt_rio_ops);
}

__attribute__((destructor)) static void
pmt_preload_fini(void)
{
	if (!pmt_tracer_active())
		return;
	if (trace_set != NULL)
		trace_set(NULL);
	pmt_tracer_stop(0);
}
