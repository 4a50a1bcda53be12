/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * main.c -- pmemtest: power-failure crash images at every fence, checked
 *
 *   pmemtest run [options] (--check 'CMD {image}' | --check-lib L.so:fn)
 *                -- PROGRAM [ARGS]
 *   pmemtest replay IMAGE_DIR
 *
 * `run` (1) runs PROGRAM under the tracer (LD_PRELOAD libpmemtest-trace.so)
 * and waits for it; (2) replays the trace through the persistence model
 * (model.c), and at every crash point enumerates crash images (images.c)
 * and has the checker judge each new one (check.c), several at once;
 * (3) reports inconsistent images and lints (report.c).  docs/pmemtest.1.md
 * is the manual.
 *
 * Exit status: 0 every image consistent; 1 some image inconsistent;
 * 2 usage error, or the program or the tracer failed.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "pmemtest_int.h"

#ifndef PMT_TRACE_LIB_INSTALLED
#define PMT_TRACE_LIB_INSTALLED "libpmemtest-trace.so"
#endif

struct run_opts {
	char **pools;
	unsigned npools;
	struct pmt_enum_opts e;
	uint64_t max_images;
	uint64_t max_failures;
	const char *check_cmd;
	const char *check_lib;
	unsigned jobs;
	unsigned timeout_s;
	bool twice;
	const char *outdir;
	unsigned save_max;
	bool keep;
	bool verbose;
	unsigned stack_depth;
	const char *dirty;
	const char *domain;
	const char *workdir;
	bool no_lints;
	bool lints_fatal;
	unsigned crash_recovery;
	const char *explore;
	bool group_keys;
	bool tear;
	bool no_fork_server;
	char **argv;
};

struct ctx {
	struct run_opts *o;
	struct pmt_imgset *seen;
	struct pmt_enum_stats st;
	struct pmt_runner *runner;
	uint64_t submitted;
	uint64_t cps;
	bool capped;
	struct pmt_model *m;
	const struct pmt_cp *cp;
	struct pmt_report *rep;
	struct pmt_recovery *rec;
	bool want_reads; /* record the reads of the images of this crash
			    point (images.c) */
};

static void
usage(FILE *f)
{
	fprintf(f,
"usage: pmemtest run [options] --check 'CMD {image}' -- PROGRAM [ARGS...]\n"
"       pmemtest run [options] --check-lib LIB.so:FUNCTION -- PROGRAM ...\n"
"       pmemtest replay IMAGE_DIR\n"
"       pmemtest check-lib LIB.so:FUNCTION IMAGE DIR\n"
"run options:\n"
"  --pool FILE         trace this pool (repeatable; default: every pool)\n"
"  --k N               every subset of at most N pending lines (2)\n"
"  --random N          random larger subsets per crash point (8)\n"
"  --max-images N      check at most N images (100000)\n"
"  --max-per-fence N   try at most N subsets per crash point (20000)\n"
"  --missing N         every image with all but <= N pending lines (1)\n"
"  --exhaustive N      every crash state where there are <= 2^N (5)\n"
"  --explore reads|subsets  past 2^N states: branch on the pending lines\n"
"                      the recovery read (reads; default with --check-lib)\n"
"                      or try subsets (k, --missing, --random)\n"
"  --versions N        intermediate line values tried per crash point (32)\n"
"  --max-failures N    stop after N inconsistent images (no limit)\n"
"  --seed S            seed of the random subsets (time)\n"
"  --check CMD         shell command; {image} = first pool's image file,\n"
"                      {dir} = the image directory; exit 0 = consistent\n"
"  --check-lib L:F     int F(const char *image, const char *dir) in L\n"
"  --twice             run the checker (recovery) twice on each image\n"
"  --crash-recovery N  for N sampled images, trace the checker's recovery\n"
"                      and check every crash image of it (0)\n"
"  --jobs N            checkers at once (number of CPUs)\n"
"  --timeout S         seconds per image before it counts as failed (30)\n"
"  --out DIR           where inconsistent images are saved (pmemtest-out)\n"
"  --save N            save at most N images (20)\n"
"  --verbose           describe every inconsistent image\n"
"  --stack-depth N     frames kept per flush/fence call site (8)\n"
"  --dirty auto|stores|uffd|scan  how the tracer finds stores (auto)\n"
"  --domain D          RIO_DOMAIN for the program (cacheline; 'keep')\n"
"  --workdir DIR       scratch directory (/dev/shm)\n"
"  --keep              keep the scratch directory (trace, slots)\n"
"  --no-lints          do not print lints\n"
"  --no-fork-server    exec a plain --check command for every image\n"
"                      (default: start it once per job, fork it per image)\n"
"  --tear              tear stores wider than 8 bytes into 8-byte pieces\n"
"  --group-keys        print each failure group's keys (--crash-recovery's\n"
"                      nested runs; groups sharing a key are one)\n"
"  --lints-fatal       exit 3 when lints were reported (and images are\n"
"                      consistent)\n");
}

static const char *
trace_lib_path(void)
{
	static char buf[PATH_MAX + 32];
	const char *env = getenv("PMEMTEST_TRACE_LIB");
	ssize_t n;

	if (env != NULL)
		return env;
	n = readlink("/proc/self/exe", buf, PATH_MAX);
	if (n > 0) {
		buf[n] = '\0';
		char *slash = strrchr(buf, '/');
		if (slash != NULL) {
			strcpy(slash + 1, "libpmemtest-trace.so");
			if (access(buf, R_OK) == 0)
				return buf;
		}
	}
	return PMT_TRACE_LIB_INSTALLED;
}

static char *cleanup_dir; /* removed at exit unless --keep */

static void
cleanup(void)
{
	if (cleanup_dir != NULL)
		pmt_rm_rf(cleanup_dir);
}

static char *
make_workdir(const char *base)
{
	char *t;

	if (base == NULL)
		base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
	t = pmt_xasprintf("%s/pmemtest-%d-XXXXXX", base, (int)getpid());
	if (mkdtemp(t) == NULL)
		pmt_die("cannot create a directory in %s: %m", base);
	return t;
}

/* Run the program under the tracer; returns its wait status. */
static int
trace_program(struct run_opts *o, const char *trace)
{
	pid_t pid;
	int st;

	fflush(NULL);
	pid = fork();
	if (pid < 0)
		pmt_die("fork: %m");
	if (pid == 0) {
		const char *old = getenv("LD_PRELOAD");
		char *pre = old && *old ?
			pmt_xasprintf("%s:%s", trace_lib_path(), old) :
			pmt_xstrdup(trace_lib_path());
		char *pools = pmt_xstrdup("");
		char num[32];
		for (unsigned i = 0; i < o->npools; i++) {
			char *np = pmt_xasprintf("%s%s\n", pools, o->pools[i]);
			free(pools);
			pools = np;
		}
		setenv("LD_PRELOAD", pre, 1);
		setenv("PMEMTEST_TRACE", trace, 1);
		snprintf(num, sizeof(num), "%d", (int)getpid());
		setenv("PMEMTEST_TRACE_PID", num, 1);
		if (o->npools)
			setenv("PMEMTEST_POOLS", pools, 1);
		snprintf(num, sizeof(num), "%u", o->stack_depth);
		setenv("PMEMTEST_STACK_DEPTH", num, 1);
		setenv("PMEMTEST_DIRTY", o->dirty, 1);
		if (strcmp(o->domain, "keep") != 0)
			setenv("RIO_DOMAIN", o->domain, 1);
		execvp(o->argv[0], o->argv);
		fprintf(stderr, "pmemtest: cannot run %s: %s\n", o->argv[0],
			strerror(errno));
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			pmt_die("waitpid: %m");
	return st;
}

static bool
on_image(const struct pmt_lref *chosen, size_t n, const struct pmt_lref *pend,
	size_t npend, void *arg)
{
	struct ctx *c = arg;

	if (c->submitted >= c->o->max_images ||
	    pmt_report_failures(c->rep) >= c->o->max_failures) {
		c->capped = true;
		return false;
	}
	c->submitted++;
	pmt_runner_submit(c->runner, c->m, c->cp, chosen, n, pend, npend,
		c->want_reads ? PMT_SUBMIT_READS : 0);
	pmt_recovery_offer(c->rec, c->m, c->cp, c->submitted, chosen, n);
	return true;
}

/* Every checked image: its recovery's reads, where recorded, go with its
 * key (images.c). */
static void
on_done(struct pmt_job *j, void *arg)
{
	struct ctx *c = arg;

	if (!(j->flags & PMT_SUBMIT_READS))
		return;
	pmt_imgset_set_reads(c->seen, j->key, j->reads, j->nreads);
	j->reads = NULL;
}

static void
want_reads(void *arg, bool on)
{
	struct ctx *c = arg;

	c->want_reads = on;
}

static void
probe(const struct pmt_lref *chosen, size_t n, const struct pmt_lref *pend,
	size_t npend, void *arg)
{
	struct ctx *c = arg;

	pmt_runner_submit(c->runner, c->m, c->cp, chosen, n, pend, npend,
		PMT_SUBMIT_READS | PMT_SUBMIT_PROBE);
}

static void
wait_checked(void *arg)
{
	struct ctx *c = arg;

	pmt_runner_wait_all(c->runner);
}

static void
on_cp(struct pmt_model *m, const struct pmt_cp *cp, void *arg)
{
	struct ctx *c = arg;

	c->cps++;
	if (c->capped)
		return;
	c->m = m;
	c->cp = cp;
	pmt_enumerate(m, c->seen, &c->o->e, &c->st, on_image, c);
}

static bool
report_failed(uint64_t seq, void *arg)
{
	return pmt_report_failed(arg, seq);
}

static unsigned
parse_uint(const char *opt, const char *v, unsigned long long max)
{
	char *end;
	unsigned long long x;

	errno = 0;
	x = strtoull(v, &end, 0);
	if (errno || *end || end == v || x > max)
		pmt_die("%s: bad number '%s'", opt, v);
	return (unsigned)x;
}

/* The index of the pool {image} names: the first --pool, else pool 0. */
static unsigned
image_pool(struct pmt_model *m, struct run_opts *o)
{
	for (unsigned i = 0; o->npools && i < m->npools; i++) {
		char *c = realpath(o->pools[0], NULL);
		bool same = c && strcmp(c, m->pools[i].path) == 0;
		free(c);
		if (same)
			return i;
	}
	return 0;
}

static pmt_check_fn
load_checker(const char *spec)
{
	char *lib = pmt_xstrdup(spec), *colon = strrchr(lib, ':');
	void *h, *fn;

	if (colon == NULL)
		pmt_die("--check-lib wants LIB.so:FUNCTION, not '%s'", spec);
	*colon = '\0';
	h = dlopen(lib, RTLD_NOW | RTLD_GLOBAL);
	if (h == NULL)
		pmt_die("cannot load %s: %s", lib, dlerror());
	fn = dlsym(h, colon + 1);
	if (fn == NULL)
		pmt_die("%s has no function %s", lib, colon + 1);
	free(lib);
	return (pmt_check_fn)fn;
}

static void
describe_exit(FILE *f, const char *prog, int st)
{
	if (WIFEXITED(st))
		fprintf(f, "exit %d", WEXITSTATUS(st));
	else if (WIFSIGNALED(st))
		fprintf(f, "killed by signal %d (%s)", WTERMSIG(st),
			strsignal(WTERMSIG(st)));
	(void)prog;
}

static int
cmd_run(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "pool", required_argument, NULL, 'p' },
		{ "k", required_argument, NULL, 'k' },
		{ "random", required_argument, NULL, 'r' },
		{ "max-images", required_argument, NULL, 'M' },
		{ "max-per-fence", required_argument, NULL, 'F' },
		{ "missing", required_argument, NULL, 'm' },
		{ "exhaustive", required_argument, NULL, 'E' },
		{ "versions", required_argument, NULL, 'V' },
		{ "max-failures", required_argument, NULL, 'X' },
		{ "seed", required_argument, NULL, 's' },
		{ "check", required_argument, NULL, 'c' },
		{ "check-lib", required_argument, NULL, 'l' },
		{ "twice", no_argument, NULL, 't' },
		{ "crash-recovery", required_argument, NULL, 'C' },
		{ "jobs", required_argument, NULL, 'j' },
		{ "timeout", required_argument, NULL, 'T' },
		{ "out", required_argument, NULL, 'o' },
		{ "save", required_argument, NULL, 'S' },
		{ "keep", no_argument, NULL, 'K' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "stack-depth", required_argument, NULL, 'd' },
		{ "dirty", required_argument, NULL, 'D' },
		{ "domain", required_argument, NULL, 'R' },
		{ "workdir", required_argument, NULL, 'w' },
		{ "no-lints", no_argument, NULL, 'L' },
		{ "lints-fatal", no_argument, NULL, 'W' },
		{ "explore", required_argument, NULL, 'e' },
		{ "group-keys", no_argument, NULL, 'G' },
		{ "tear", no_argument, NULL, 'A' },
		{ "no-fork-server", no_argument, NULL, 'N' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct run_opts o = {
		.e = { .k = 2, .random = 8, .max_per_cp = 20000,
			.seed = (uint64_t)time(NULL), .missing = 1,
			.exhaustive = 5, .max_versions = 32 },
		.max_images = 100000, .max_failures = UINT64_MAX, .timeout_s = 30, .outdir = "pmemtest-out",
		.save_max = 20, .stack_depth = 8, .dirty = "auto",
		.domain = "cacheline",
	};
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct pmt_model m;
	struct ctx c = { .o = &o };
	struct pmt_check_opts co = { 0 };
	struct pmt_report *rep;
	uint64_t t0, t1, t2, unique;
	int rc_rec = 0;
	char *work, *trace;
	int opt, st, rc;

	o.jobs = ncpu > 0 ? (unsigned)ncpu : 1;
	while ((opt = getopt_long(argc, argv, "+h", lo, NULL)) != -1) {
		switch (opt) {
		case 'p':
			o.pools = pmt_xrealloc(o.pools,
				(o.npools + 1) * sizeof(char *));
			o.pools[o.npools++] = optarg;
			break;
		case 'k': o.e.k = parse_uint("--k", optarg, 16); break;
		case 'r': o.e.random = parse_uint("--random", optarg, 1u << 20); break;
		case 'M': o.max_images = parse_uint("--max-images", optarg, UINT_MAX); break;
		case 'X': o.max_failures = parse_uint("--max-failures", optarg, UINT_MAX); break;
		case 'F': o.e.max_per_cp = parse_uint("--max-per-fence", optarg, UINT_MAX); break;
		case 'm': o.e.missing = parse_uint("--missing", optarg, 16); break;
		case 'E': o.e.exhaustive = parse_uint("--exhaustive", optarg, 24); break;
		case 'V': o.e.max_versions = parse_uint("--versions", optarg, UINT_MAX); break;
		case 's': o.e.seed = strtoull(optarg, NULL, 0); break;
		case 'c': o.check_cmd = optarg; break;
		case 'l': o.check_lib = optarg; break;
		case 't': o.twice = true; break;
		case 'C': o.crash_recovery = parse_uint("--crash-recovery", optarg, 100000); break;
		case 'j': o.jobs = parse_uint("--jobs", optarg, 1024); break;
		case 'T': o.timeout_s = parse_uint("--timeout", optarg, 86400); break;
		case 'o': o.outdir = optarg; break;
		case 'S': o.save_max = parse_uint("--save", optarg, UINT_MAX); break;
		case 'K': o.keep = true; break;
		case 'v': o.verbose = true; break;
		case 'd': o.stack_depth = parse_uint("--stack-depth", optarg, 64); break;
		case 'D': o.dirty = optarg; break;
		case 'R': o.domain = optarg; break;
		case 'w': o.workdir = optarg; break;
		case 'L': o.no_lints = true; break;
		case 'W': o.lints_fatal = true; break;
		case 'e': o.explore = optarg; break;
		case 'G': o.group_keys = true; break;
		case 'A': o.tear = true; break;
		case 'N': o.no_fork_server = true; break;
		case 'h': usage(stdout); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (optind >= argc || (!o.check_cmd == !o.check_lib)) {
		usage(stderr);
		return 2;
	}
	if (o.no_lints && o.lints_fatal)
		pmt_die("--no-lints and --lints-fatal exclude each other");
	if (strcmp(o.dirty, "scan") != 0 && strcmp(o.dirty, "uffd") != 0 &&
	    strcmp(o.dirty, "auto") != 0 && strcmp(o.dirty, "stores") != 0)
		pmt_die("--dirty must be auto, stores, uffd or scan");
	if (o.jobs == 0)
		o.jobs = 1;
	if (o.explore != NULL && strcmp(o.explore, "reads") != 0 &&
	    strcmp(o.explore, "subsets") != 0)
		pmt_die("--explore must be reads or subsets");
	if (o.explore != NULL && strcmp(o.explore, "reads") == 0 &&
	    o.check_lib == NULL)
		pmt_die("--explore reads needs --check-lib (a command's reads "
			"are not seen)");
	if (o.explore != NULL && strcmp(o.explore, "reads") == 0 &&
	    !pmt_reads_available())
		pmt_die("--explore reads: userfaultfd minor faults on shared "
			"memory are not available here");
	/* Read-driven where it is sound: a library checker, whose reads of
	 * the pools it maps are seen (reads.c). */
	o.e.reads = o.explore != NULL ? strcmp(o.explore, "reads") == 0 :
		o.check_lib != NULL && pmt_reads_available();
	o.e.wait = wait_checked;
	o.e.want = want_reads;
	o.e.probe = probe;
	o.argv = argv + optind;
	if (o.check_lib != NULL)
		co.fn = load_checker(o.check_lib);
	co.cmd = o.check_cmd;

	work = make_workdir(o.workdir);
	if (!o.keep) {
		/* Also when pmt_die() ends the run. */
		cleanup_dir = work;
		atexit(cleanup);
	}
	trace = pmt_xasprintf("%s/trace", work);
	t0 = rio_now_ns(CLOCK_MONOTONIC);
	st = trace_program(&o, trace);
	t1 = rio_now_ns(CLOCK_MONOTONIC);
	rc = pmt_model_open(&m, trace);
	if (rc == -ENOENT) {
		/* The tracer creates the trace at the first traced mapping. */
		fprintf(stderr, "pmemtest: %s mapped no traced pool (does "
			"--pool name the right file? Is librio linked "
			"statically without exported symbols?)\n", o.argv[0]);
		printf("images: 0 checked, 0 inconsistent, 0 unique\n");
		return 2;
	}
	if (rc)
		pmt_die("no usable trace from %s (%s): did it start? Is "
			"libpmemtest-trace.so (%s) loadable?", o.argv[0],
			strerror(-rc), trace_lib_path());
	m.lints_on = !o.no_lints;
	m.tear = o.tear;
	printf("pmemtest: %s: ", o.argv[0]);
	describe_exit(stdout, o.argv[0], st);
	printf(", trace %.1f MB in %.2f s (stores found by %s)%s\n",
		(double)m.tr.size / 1e6, (double)(t1 - t0) / 1e9,
		m.tr.flags & PMT_TRACE_STORES ? "single-stepping each store" :
		m.tr.flags & PMT_TRACE_UFFD ? "userfaultfd, per page" :
		"scanning",
		m.tr.complete ? "" : " (cut short: no END record)");

	co.jobs = o.jobs;
	co.twice = o.twice;
	co.timeout_s = o.timeout_s;
	co.workdir = work;
	co.image_pool = image_pool(&m, &o);
	co.reads = o.e.reads;
	co.server_lib = o.no_fork_server ? NULL : trace_lib_path();
	co.on_done = on_done;
	co.done_arg = &c;
	char *desc = o.check_cmd ? pmt_xasprintf("cmd %s", o.check_cmd) :
		pmt_xasprintf("lib %s", o.check_lib);
	struct pmt_report_opts ro = { .outdir = o.outdir,
		.save_max = o.save_max, .verbose = o.verbose,
		.check_desc = desc,
		.image_name = m.npools ? m.pools[co.image_pool].name : "",
		.twice = o.twice, .trace_path = trace,
		.group_keys = o.group_keys, .tear = o.tear };
	rep = pmt_report_new(&m, &ro);
	c.seen = pmt_imgset_new();
	c.rep = rep;
	c.runner = pmt_runner_new(&co, pmt_report_fail, rep);
	c.rec = pmt_recovery_new(o.crash_recovery, o.e.seed, work);
	pmt_model_run(&m, on_cp, &c);
	pmt_runner_wait_all(c.runner);
	t2 = rio_now_ns(CLOCK_MONOTONIC);

	unique = pmt_report_print(rep, stdout);
	if (!o.no_lints)
		pmt_report_lints(&m, stdout);
	printf("\npmemtest: %u pool%s, %u fences, %llu flushes; %llu crash "
		"points, at most %zu pending lines; %llu subsets tried, %llu "
		"duplicate images skipped%s\n",
		m.npools, m.npools == 1 ? "" : "s", m.fences,
		(unsigned long long)m.flushes, (unsigned long long)c.cps,
		c.st.max_pending, (unsigned long long)c.st.generated,
		(unsigned long long)c.st.duplicates,
		c.capped ? " (stopped at --max-images or --max-failures)" :
			"");
	if (c.st.cps > 0)
		printf("pmemtest: crash states: 2^%.1f at %llu crash points "
			"(%llu with an intermediate line value tried); "
			"%.3g%% of them tried; every state tried at %llu "
			"crash points (<= 2^%u states, or <= k lines)\n",
			log2(c.st.space), (unsigned long long)c.st.cps,
			(unsigned long long)c.st.version_images,
			100.0 * c.st.covered / c.st.space,
			(unsigned long long)c.st.full_cps, o.e.exhaustive);
	if (o.e.reads)
		printf("pmemtest: read-driven exploration at %llu crash points "
			"(more than 2^%u states): %llu images checked, each "
			"covering every state that agrees on the pending lines "
			"its recovery read%s\n",
			(unsigned long long)c.st.read_cps, o.e.exhaustive,
			(unsigned long long)c.st.read_runs,
			c.st.read_cut ? "; cut at --max-per-fence at some, "
			"the classic subsets tried there too" : "");
	else
		printf("pmemtest: exploration by subsets (k, all but "
			"--missing, random)%s\n", o.check_lib ? "" :
			": a command checker's reads are not seen");
	if (o.tear)
		printf("pmemtest: --tear: %llu stores wider than 8 bytes torn "
			"into 8-byte pieces%s\n",
			(unsigned long long)m.torn_stores,
			m.tr.flags & PMT_TRACE_STORES ? "" : " (none seen: "
			"stores are not captured one by one here)");
	if (m.tr.flags & PMT_TRACE_STORES)
		printf("pmemtest: lints per line: %llu stores seen one by one; "
			"%llu pages x epochs past the step budget judged per "
			"page%s\n", (unsigned long long)m.store_recs,
			(unsigned long long)m.coarse_pages,
			m.hist_dropped ? "; some lines had more values than "
			"kept" : "");
	else
		printf("pmemtest: lints %s\n", m.tr.flags & PMT_TRACE_UFFD ?
			"per page (userfaultfd): a store to a page counts for "
			"all its lines" : "per line content (scanning): a "
			"store of a line's old value is not seen");
	if (c.st.truncated_cps)
		printf("pmemtest: %llu crash points had more subsets than "
			"--max-per-fence %llu: not every <= k subset was "
			"tried there\n",
			(unsigned long long)c.st.truncated_cps,
			(unsigned long long)o.e.max_per_cp);
	printf("pmemtest: checked in %.2f s (%.0f images/s, %u jobs), seed "
		"%llu\n", (double)(t2 - t1) / 1e9,
		(double)pmt_runner_checked(c.runner) * 1e9 /
			(double)(t2 - t1 ? t2 - t1 : 1), o.jobs,
		(unsigned long long)o.e.seed);
	if (o.crash_recovery) {
		struct pmt_recovery_args ra = { .check_cmd = o.check_cmd,
			.check_lib = o.check_lib, .image_pool = co.image_pool,
			.seed = o.e.seed, .k = o.e.k, .jobs = o.jobs,
			.timeout_s = o.timeout_s, .outdir = o.outdir,
			.tear = o.tear,
			.failed = report_failed, .arg = rep };
		struct pmt_recovery_totals rt = { 0 };
		int rrc = pmt_recovery_run(c.rec, &m, &ra, stdout, &rt);
		printf("\nrecovery images: %llu checked, %llu inconsistent, %llu "
			"unique (the recoveries of %llu images crashed at every "
			"fence; grouped across the runs by missing operation, "
			"fence's function or checker message: %llu groups as "
			"the runs counted them)\n",
			(unsigned long long)rt.checked,
			(unsigned long long)rt.inconsistent,
			(unsigned long long)rt.unique,
			(unsigned long long)rt.images,
			(unsigned long long)rt.reported);
		if (rrc > rc_rec)
			rc_rec = rrc;
	}
	printf("images: %llu checked, %llu inconsistent, %llu unique\n",
		(unsigned long long)pmt_runner_checked(c.runner),
		(unsigned long long)pmt_report_failures(rep),
		(unsigned long long)unique);
	rc = pmt_report_failures(rep) ? 1 : 0;
	if (rc_rec > rc)
		rc = rc_rec;
	if (rc == 0 && o.lints_fatal && m.nlints > 0) {
		printf("pmemtest: %zu lint%s reported (--lints-fatal)\n",
			m.nlints, m.nlints == 1 ? "" : "s");
		rc = 3;
	}
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "pmemtest: %s did not exit 0\n", o.argv[0]);
		rc = 2;
	}
	pmt_runner_free(c.runner);
	pmt_recovery_free(c.rec);
	pmt_imgset_free(c.seen);
	pmt_report_free(rep);
	pmt_model_close(&m);
	pmt_symbolize_free();
	if (o.keep)
		printf("pmemtest: scratch directory kept: %s\n", work);
	else
		pmt_rm_rf(work);
	cleanup_dir = NULL;
	free(desc);
	free(work);
	free(trace);
	free(o.pools);
	return rc;
}

/* ---- replay ---- */

static char *
meta_get(const char *meta, const char *key)
{
	size_t kl = strlen(key);

	for (const char *p = meta; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : p) {
		if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
			const char *v = p + kl + 1, *e = strchr(v, '\n');
			return strndup(v, e ? (size_t)(e - v) : strlen(v));
		}
	}
	return NULL;
}

static char *
slurp(const char *path)
{
	FILE *f = fopen(path, "r");
	char *s = NULL;
	size_t n = 0;

	if (f == NULL)
		return NULL;
	if (getdelim(&s, &n, '\0', f) < 0) {
		free(s);
		s = NULL;
	}
	fclose(f);
	return s;
}

static int
cmd_replay(int argc, char **argv)
{
	char *metap, *meta, *check, *image, *twice, *report, *work, *cmd;
	int st, rc;
	pid_t pid;

	if (argc != 2) {
		usage(stderr);
		return 2;
	}
	metap = pmt_xasprintf("%s/pmemtest-image.txt", argv[1]);
	meta = slurp(metap);
	if (meta == NULL || strncmp(meta, "pmemtest-image 1\n", 17) != 0)
		pmt_die("%s is not a saved pmemtest image (no %s)", argv[1],
			metap);
	check = meta_get(meta, "check");
	image = meta_get(meta, "image");
	twice = meta_get(meta, "twice");
	if (check == NULL || image == NULL)
		pmt_die("%s: incomplete", metap);
	report = pmt_xasprintf("%s/report.txt", argv[1]);
	{
		char *r = slurp(report);
		if (r)
			fputs(r, stdout);
		free(r);
	}
	/* Check a copy: the saved image stays as it was. */
	work = make_workdir(NULL);
	cmd = pmt_xasprintf("cp -a '%s'/. '%s'/ && rm -f '%s/pmemtest-image.txt' "
		"'%s/report.txt'", argv[1], work, work, work);
	if (system(cmd) != 0)
		pmt_die("cannot copy %s to %s", argv[1], work);
	free(cmd);
	char *imgpath = pmt_xasprintf("%s/%s", work, image);
	printf("pmemtest: checking a copy in %s\n", work);
	fflush(NULL);
	pid = fork();
	if (pid == 0) {
		if (strncmp(check, "lib ", 4) == 0) {
			pmt_check_fn fn = load_checker(check + 4);
			rc = fn(imgpath, work);
			if (rc == 0 && twice && atoi(twice))
				rc = fn(imgpath, work);
			fflush(NULL);
			_exit(rc ? 1 : 0);
		}
		char *one = pmt_expand_cmd(check + 4, imgpath, work);
		char *c2 = twice && atoi(twice) ?
			pmt_xasprintf("(%s) && (%s)", one, one) : one;
		execl("/bin/sh", "sh", "-c", c2, (char *)NULL);
		_exit(127);
	}
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			pmt_die("waitpid: %m");
	printf("pmemtest: checker ");
	describe_exit(stdout, "checker", st);
	printf(": image %s\n", WIFEXITED(st) && WEXITSTATUS(st) == 0 ?
		"consistent" : "INCONSISTENT");
	rc = WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : 1;
	pmt_rm_rf(work);
	free(imgpath);
	free(work);
	free(report);
	free(check);
	free(image);
	free(twice);
	free(meta);
	free(metap);
	return rc;
}

int
main(int argc, char **argv)
{
	/* The driver forks once per image, and fork costs a page table entry
	 * per resident page: big buffers (a flush list that once held a
	 * whole pool) must go back to the kernel when freed, which glibc's
	 * self-raising mmap threshold would prevent. */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	mallopt(M_TRIM_THRESHOLD, 1 << 20);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "run") == 0)
		return cmd_run(argc - 1, argv + 1);
	if (strcmp(argv[1], "replay") == 0)
		return cmd_replay(argc - 1, argv + 1);
	if (strcmp(argv[1], "check-lib") == 0) {
		/* The library checker as a program (--crash-recovery traces
		 * it): exit 0 if FUNCTION accepts the image. */
		if (argc != 5) {
			usage(stderr);
			return 2;
		}
		return load_checker(argv[2])(argv[3], argv[4]) ? 1 : 0;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		usage(stdout);
		return 0;
	}
	usage(stderr);
	return 2;
}
