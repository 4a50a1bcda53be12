/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckr_zipf.c -- the Zipf and MMO workloads of Cao et al. (SIGMOD'11,
 *               Sections 5.3, 5.4 and 5.6) on libckr, and Vista beside it
 *
 * Zipf (-w zipf, the default): the state is nobjs objects of obj_size bytes
 * (default 25,000 x 8 KB, 200 MB).  Updates write one 4-byte word, the
 * object and the word within it each chosen by a Zipf distribution of
 * parameter alpha (0.5).
 *
 * MMO (-w mmo): 2,000 players of 100 KB of attributes each (in 128 KB
 * objects), each driven by five semi-independent Markov state machines
 * (movement, combat, effects, social, items) advanced once per 0.1 s tick;
 * each state updates a few attributes of its machine per tick, and about
 * 80% of the attributes change only on rare player actions.  The
 * transition probabilities give about 531K updates per second (the paper's
 * 531,530).  The trace of -n + 1 periods is generated before the run.
 *
 * Updates run as fast as possible, grouped into intervals of 0.1 s of
 * simulated time (rate / 10 updates each, or one MMO tick); a checkpoint
 * period is `period` intervals, ended by a point of consistency.  As in
 * the paper there is no logical log and no reads; unlike the paper the
 * writer runs (into -d's storage): the time the mutator spends waiting for
 * it at the end of a period is not counted, the time its point of
 * consistency takes is.
 *
 * The algorithm "vista" is the Vista baseline, no checkpointer at all: the
 * state is a libvista segment in -d, each 0.1 s interval (a tick) is one
 * transaction, and every write is preceded by vista_set_range over its
 * 4-byte cell (the undo log keeps each cell's first before-image).
 *
 * Printed: per update rate and algorithm, the mutator's overhead per
 * checkpoint period (its time minus the time of the same updates to a plain
 * array), then its range over the repetitions, and for the rates of -t the
 * time of every 0.1 s interval (mean / median / max); -T PREFIX also writes the
 * per-interval series of each traced rate to PREFIX-RATE.dat (columns:
 * interval, raw, then one per algorithm: gnuplot, bench/ckr/plot.gp).
 *
 *   ckr-zipf [-w zipf|mmo] [-o nobjs] [-s obj_size] [-r rate,rate,..]
 *            [-a algo,..] [-p intervals per period] [-n periods]
 *            [-t rate,..] [-T prefix] [-S file|pool] [-D byte|cacheline|page]
 *            [-d dir] [-z alpha] [-R repetitions] [-H|-G]
 *
 * -H backs the state with transparent huge pages (CKR_HUGEPAGES), -G with
 * the kernel's reserved huge pages (CKR_HUGETLB: sysctl vm.nr_hugepages
 * must hold the state and its copies; not with fork).  -D is
 * the persistence domain of pool storage and of Vista (default cacheline).
 * Each configuration runs -R times (3), the repetitions interleaved (raw
 * and every algorithm once, then again); times are the mutator thread's
 * CPU time (CLOCK_THREAD_CPUTIME_ID), so other load's preemption is not
 * counted; the table keeps the repetition with the least mutator time,
 * the range table shows all of them.
 */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <stdbool.h>

#include "ckr.h"
#include "vista.h"

/* The mutator's own CPU time (CLOCK_THREAD_CPUTIME_ID): what the
 * algorithm costs it, whatever else the shared machine runs; preemption
 * by other load is not in it, its page faults and copies are. */
static uint64_t
mut_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_s = 0x1234567;

static uint64_t
rng(void)
{
	uint64_t z = (rng_s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Zipf(alpha) over 0..n-1 by inverting the CDF (binary search). */
struct zipf {
	uint64_t n;
	double *cdf;
};

static void
zipf_init(struct zipf *z, uint64_t n, double alpha)
{
	double sum = 0;

	z->n = n;
	z->cdf = malloc(n * sizeof(double));
	for (uint64_t i = 0; i < n; i++)
		z->cdf[i] = (sum += 1.0 / pow((double)(i + 1), alpha));
	for (uint64_t i = 0; i < n; i++)
		z->cdf[i] /= sum;
}

static uint64_t
zipf_next(const struct zipf *z)
{
	double u = (double)(rng() >> 11) / 9007199254740992.0;
	uint64_t lo = 0, hi = z->n - 1;

	while (lo < hi) {
		uint64_t mid = (lo + hi) / 2;

		if (z->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int
parse_list(const char *s, double *out, int max)
{
	int n = 0;
	char *end;

	while (*s && n < max) {
		out[n++] = strtod(s, &end);
		s = *end == ',' ? end + 1 : end;
		if (end == s && *s)
			break;
	}
	return n;
}

static int
rm_dir(const char *dir)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

#define ALGO_VISTA 100 /* the Vista baseline (not a libckr algorithm) */
#define MAXA 8

/* A trace: ntiv intervals, interval j is idx[off[j] .. off[j + 1]). */
struct trace {
	uint64_t *idx;
	uint64_t *off;
	int ntiv;
};

/*
 * The MMO model.  Attribute words of a player (of MMO_WORDS in use):
 *   movement  [0, 16)       idle / walking / running
 *   combat    [16, 512)     idle / fighting / dead
 *   effects   [512, 5120)   none / buffed (regeneration, timers)
 *   social    [5120, 15120) idle / chatting / trading (player actions)
 *   items     [15120, 25600) idle / looting / crafting (player actions)
 * Per state: the next state's probabilities per tick and the updates per
 * tick, each to a word of the machine's range chosen by Zipf(alpha).  The
 * social and item ranges (about 80% of the attributes) change only while a
 * player acts, which is rare.
 */
#define MMO_PLAYERS 2000
#define MMO_OBJ 131072
#define MMO_WORDS 25600
struct mmo_machine {
	uint32_t lo, hi;      /* word range */
	int nstates;
	double p[3][3];       /* transition probability per tick */
	int upd[3];           /* updates per tick in each state */
};
static const struct mmo_machine mmo_m[5] = {
	{ 0, 16, 3, { { 0.80, 0.15, 0.05 }, { 0.10, 0.80, 0.10 },
		{ 0.05, 0.15, 0.80 } }, { 0, 7, 10 } },
	{ 16, 512, 3, { { 0.95, 0.05, 0 }, { 0.08, 0.915, 0.005 },
		{ 0.10, 0, 0.90 } }, { 1, 37, 0 } },
	{ 512, 5120, 2, { { 0.97, 0.03 }, { 0.05, 0.95 } }, { 0, 16, 0 } },
	{ 5120, 15120, 3, { { 0.995, 0.004, 0.001 }, { 0.2, 0.8, 0 },
		{ 0.1, 0, 0.9 } }, { 0, 3, 13 } },
	{ 15120, 25600, 3, { { 0.994, 0.005, 0.001 }, { 0.3, 0.7, 0 },
		{ 0.05, 0, 0.95 } }, { 0, 8, 16 } },
};

/* The snapshot child of -a fork needs the state only: the benchmark's own
 * arrays (the trace, the raw array) are left out of every fork(), so that
 * its pause is the state's page tables, as a server's would be.  Only the
 * pages inside [p, p + len) are marked (MADV_DONTFORK), as they hold
 * nothing else; before the array is freed they are marked back
 * (MADV_DOFORK): malloc may hand them out again, to libckr's handle. */
static void
fork_advice(void *p, size_t len, int advice)
{
	uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t lo = ((uintptr_t)p + pg - 1) & ~(pg - 1);
	uintptr_t hi = ((uintptr_t)p + len) & ~(pg - 1);

	if (hi > lo)
		(void)madvise((void *)lo, hi - lo, advice);
}

static void
trace_free(struct trace *t)
{
	fork_advice(t->idx, t->off[t->ntiv] * sizeof(*t->idx), MADV_DOFORK);
	free(t->idx);
	free(t->off);
}

static void
mmo_trace(struct trace *t, int ntiv, double alpha)
{
	struct zipf zr[5];
	uint8_t *st = calloc(MMO_PLAYERS * 5, 1);
	size_t cap = 1 << 20, n = 0;

	for (int m = 0; m < 5; m++)
		zipf_init(&zr[m], mmo_m[m].hi - mmo_m[m].lo, alpha);
	t->ntiv = ntiv;
	t->off = malloc((ntiv + 1) * sizeof(*t->off));
	t->idx = malloc(cap * sizeof(*t->idx));
	/* a settled start: 50 ticks of the chains before the trace */
	for (int j = -50; j < ntiv; j++) {
		if (j >= 0)
			t->off[j] = n;
		for (uint64_t pl = 0; pl < MMO_PLAYERS; pl++)
			for (int m = 0; m < 5; m++) {
				const struct mmo_machine *mm = &mmo_m[m];
				uint8_t *s = &st[pl * 5 + m];
				double u = (double)(rng() >> 11) /
					9007199254740992.0, acc = 0;
				int k;

				for (k = 0; k < mm->nstates - 1; k++)
					if (u < (acc += mm->p[*s][k]))
						break;
				*s = (uint8_t)k;
				if (j < 0)
					continue;
				for (int r = 0; r < mm->upd[k]; r++) {
					if (n == cap)
						t->idx = realloc(t->idx,
							(cap *= 2) * sizeof(*t->idx));
					t->idx[n++] = pl * (MMO_OBJ / 4) +
						mm->lo + zipf_next(&zr[m]);
				}
			}
	}
	t->off[ntiv] = n;
	free(st);
	fork_advice(t->idx, n * sizeof(*t->idx), MADV_DONTFORK);
}

static void
zipf_trace(struct trace *t, uint64_t per_iv, int ntiv, const struct zipf *zo,
	const struct zipf *zw, uint64_t wpo)
{
	t->ntiv = ntiv;
	t->off = malloc((ntiv + 1) * sizeof(*t->off));
	t->idx = malloc(per_iv * ntiv * sizeof(*t->idx));
	for (int j = 0; j <= ntiv; j++)
		t->off[j] = per_iv * j;
	for (uint64_t k = 0; k < per_iv * ntiv; k++)
		t->idx[k] = zipf_next(zo) * wpo + zipf_next(zw);
	fork_advice(t->idx, per_iv * ntiv * sizeof(*t->idx),
		MADV_DONTFORK);
}

static uint32_t rio_dom = RIO_FORCE_CACHELINE;

static int
die_v(const char *what, int rc)
{
	fprintf(stderr, "\nckr-zipf: %s: %s: %s\n", what, vista_err_name(rc),
		vista_errormsg());
	return 1;
}

/*
 * One repetition of the Vista baseline: intervals (nper + 1) * period,
 * the first period not measured.  Fills iv[] (ms per measured interval).
 */
static int
run_vista(const char *dir, uint64_t nwords, const struct trace *t,
	int period, int nper, uint32_t *v, double *iv)
{
	char logp[4200], segp[4200];
	vista *vi;
	vista_segment *seg;
	uint32_t *as;
	uint64_t maxiv = 0;
	int rc;

	for (int j = 0; j < t->ntiv; j++)
		if (t->off[j + 1] - t->off[j] > maxiv)
			maxiv = t->off[j + 1] - t->off[j];
	mkdir(dir, 0755);
	snprintf(logp, sizeof(logp), "%s/vista.log", dir);
	snprintf(segp, sizeof(segp), "%s/vista.seg", dir);
	/* a lane holds one tick's before-images: a record per cell */
	struct vista_opts vo = {
		.log_path = logp,
		.log_size = ((maxiv * 96 + (16u << 20)) + 4095) & ~4095ull,
		.lanes = 1,
		.rio_flags = rio_dom | RIO_NO_SIGNALS,
	};
	if ((rc = vista_init(&vo, &vi)) != 0)
		return die_v("vista_init", rc);
	if ((rc = vista_map(vi, segp, (void *)0x5d0000000000ull, nwords * 4,
		     VISTA_CREATE | VISTA_EXCL, &seg)) != 0)
		return die_v("vista_map", rc);
	as = vista_segment_base(seg);
	/* populated before the run, as libckr's state is */
	memset(as, 0, nwords * 4);
	rio_persist(vista_segment_pool(seg), as, nwords * 4);
	for (int p = 0, j = 0; p <= nper && rc == 0; p++)
		for (int i = 0; i < period && rc == 0; i++, j++) {
			const struct trace *tr = t;
			int ti = j % tr->ntiv;
			uint64_t t0 = mut_ns();

			rc = vista_begin_transaction(vi, 0);
			for (uint64_t k = tr->off[ti]; k < tr->off[ti + 1] &&
			     rc == 0; k++) {
				uint32_t *cell = &as[tr->idx[k]];

				rc = vista_set_range(vi, cell, 4);
				*cell = (*v)++;
			}
			if (rc == 0)
				rc = vista_end_transaction(vi);
			if (p > 0)
				iv[(p - 1) * period + i] = (mut_ns() - t0) / 1e6;
		}
	if (rc != 0)
		return die_v("vista transaction", rc);
	if ((rc = vista_unmap(seg)) != 0 || (rc = vista_fini(vi)) != 0)
		return die_v("vista_fini", rc);
	return 0;
}

/*
 * With two CPUs or more: the writer thread (ckr-writer) on CPU 1, every
 * other thread of the process on CPU 0 (pin 1), or all threads back on
 * every CPU (pin 0).  The fork snapshot's child inherits the mutator's
 * CPU, so under CKR_FORK the mutator is left unpinned.
 */
static void
place(int pin)
{
	char path[300], comm[64];
	struct dirent *d;
	DIR *dir;

	if (sysconf(_SC_NPROCESSORS_ONLN) < 2 ||
	    (dir = opendir("/proc/self/task")) == NULL)
		return;
	while ((d = readdir(dir)) != NULL) {
		cpu_set_t set;
		FILE *f;
		pid_t tid = (pid_t)atoi(d->d_name);
		bool writer;

		if (tid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(comm, sizeof(comm), f) == NULL)
			comm[0] = 0;
		fclose(f);
		writer = strncmp(comm, "ckr-writer", 10) == 0;
		CPU_ZERO(&set);
		if (pin && writer) {
			CPU_SET(1, &set);
		} else if (pin == 1) {
			CPU_SET(0, &set);
		} else {
			for (int k = 0; k < CPU_SETSIZE; k++)
				CPU_SET(k, &set);
		}
		sched_setaffinity(tid, sizeof(set), &set);
	}
	closedir(dir);
}

/* A libckr call failed: say which, and why. */
static int
ckr_failed(const char *call, int rc)
{
	fprintf(stderr, "\nckr-zipf: %s: %s: %s\n", call, ckr_err_name(rc),
		ckr_errormsg());
	return 1;
}

/* One repetition of a libckr algorithm; fills iv[] like run_vista. */
static int
run_ckr(const char *dir, enum ckr_algo algo, enum ckr_storage st,
	uint64_t nobjs, uint64_t osz, uint32_t flags, const struct trace *t,
	int period, int nper, uint32_t *v, double *iv, double *fork_ms_gb,
	uint64_t *huge)
{
	struct ckr_opts o;
	struct ckr_stats s0, s1;
	ckr *c;
	int rc;

	memset(&o, 0, sizeof(o));
	o.algo = algo;
	o.storage = st;
	o.nobjs = nobjs;
	o.obj_size = (uint32_t)osz;
	o.log_capacity = 1 << 20;
	o.rio_flags = rio_dom;
	o.flags = flags;
	rc = ckr_open(dir, &o, &c);
	if (rc != 0)
		return ckr_failed("ckr_open", rc);
	place(algo == CKR_FORK ? 2 : 1);
	memset(&s0, 0, sizeof(s0));
	/* period 0 warms up and starts the first checkpoint */
	for (int p = 0, j = 0; p <= nper && rc == 0; p++) {
		if (p == 1)
			ckr_stats(c, &s0);
		for (int i = 0; i < period && rc == 0; i++, j++) {
			int ti = j % t->ntiv;
			uint64_t t0, t1;

			if (i == period - 1 &&
			    (rc = ckr_checkpoint_wait(c)) != 0) {
				rc = ckr_failed("ckr_checkpoint_wait", rc);
				break;
			}
			t0 = mut_ns();
			for (uint64_t k = t->off[ti]; k < t->off[ti + 1]; k++)
				ckr_write(c, t->idx[k], (*v)++);
			if (i == period - 1 &&
			    (rc = ckr_point_of_consistency(c, 0)) < 0)
				rc = ckr_failed("ckr_point_of_consistency", rc);
			else
				rc = 0;
			t1 = mut_ns();
			if (p > 0)
				iv[(p - 1) * period + i] = (t1 - t0) / 1e6;
		}
	}
	ckr_stats(c, &s1);
	*huge = s1.huge_bytes;
	{
		int crc = ckr_close(c);
		if (crc != 0 && rc == 0)
			rc = ckr_failed("ckr_close", crc);
	}
	place(0);
	if (rc != 0) {
		fprintf(stderr, "ckr-zipf: %s failed\n", ckr_algo_name(algo));
		return 1;
	}
	*fork_ms_gb = 0;
	if (algo == CKR_FORK && s1.epoch > s0.epoch)
		*fork_ms_gb = (s1.fork_ns - s0.fork_ns) / 1e6 /
			(double)(s1.epoch - s0.epoch) /
			(nobjs * osz / 1e9);
	return 0;
}

static int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
median(const double *v, int n)
{
	double *t = malloc(n * sizeof(double)), m;

	memcpy(t, v, n * sizeof(double));
	qsort(t, n, sizeof(double), cmp_d);
	m = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2;
	free(t);
	return m;
}

static const char *
aname(int a)
{
	return a == ALGO_VISTA ? "vista" : ckr_algo_name((enum ckr_algo)a);
}

int
main(int argc, char **argv)
{
	uint64_t nobjs = 25000, osz = 8192;
	double rates[32] = { 10e3, 20e3, 40e3, 80e3, 160e3, 320e3, 640e3,
		1.28e6, 2.56e6, 5.12e6 };
	int nrates = 10, period = 10, nper = 3, ntr = 2, reps = 3;
	double trates[32] = { 320e3, 1.28e6 };
	int algos[MAXA] = { CKR_NAIVE, CKR_BACOU, CKR_BAZZ, CKR_IPP,
		CKR_FORK };
	int nalgos = 5;
	enum ckr_storage st = CKR_STORAGE_FILE;
	const char *base = "/dev/shm", *tprefix = NULL;
	double alpha = 0.5;
	bool mmo = false, osz_set = false, nobjs_set = false;
	uint32_t flags = 0;
	int opt;

	while ((opt = getopt(argc, argv, "w:o:s:r:a:p:n:t:T:S:D:d:z:R:HG")) !=
	       -1) {
		switch (opt) {
		case 'w': mmo = strcmp(optarg, "mmo") == 0; break;
		case 'o': nobjs = strtoull(optarg, NULL, 0); nobjs_set = true;
			break;
		case 's': osz = strtoull(optarg, NULL, 0); osz_set = true;
			break;
		case 'r': nrates = parse_list(optarg, rates, 32); break;
		case 't': ntr = parse_list(optarg, trates, 32); break;
		case 'T': tprefix = optarg; break;
		case 'p': period = atoi(optarg); break;
		case 'n': nper = atoi(optarg); break;
		case 'S':
			st = strcmp(optarg, "pool") == 0 ? CKR_STORAGE_POOL :
				CKR_STORAGE_FILE;
			break;
		case 'D':
			rio_dom = strcmp(optarg, "byte") == 0 ? RIO_FORCE_BYTE :
				strcmp(optarg, "page") == 0 ? RIO_FORCE_PAGE :
				RIO_FORCE_CACHELINE;
			break;
		case 'd': base = optarg; break;
		case 'z': alpha = atof(optarg); break;
		case 'R': reps = atoi(optarg); break;
		case 'H': flags |= CKR_HUGEPAGES; break;
		case 'G': flags |= CKR_HUGETLB; break;
		case 'a': {
			char *s = strdup(optarg), *tok, *save = NULL;

			nalgos = 0;
			for (tok = strtok_r(s, ",", &save); tok && nalgos < MAXA;
			     tok = strtok_r(NULL, ",", &save)) {
				if (strcmp(tok, "vista") == 0)
					algos[nalgos++] = ALGO_VISTA;
				else if ((algos[nalgos] = ckr_algo_parse(tok)) != 0)
					nalgos++;
				else
					fprintf(stderr, "ckr-zipf: unknown "
						"algorithm %s\n", tok);
			}
			free(s);
			break;
		}
		default:
			fprintf(stderr, "usage: see the head of ckr_zipf.c\n");
			return 2;
		}
	}
	if (mmo) {
		if (!nobjs_set)
			nobjs = MMO_PLAYERS;
		if (!osz_set)
			osz = MMO_OBJ;
		if (nobjs != MMO_PLAYERS || osz != MMO_OBJ) {
			fprintf(stderr, "ckr-zipf: -w mmo has %d players of %d "
				"bytes\n", MMO_PLAYERS, MMO_OBJ);
			return 2;
		}
		nrates = 1;
	}
	if (nper < 1 || period < 1 || nalgos < 1 || osz < 8 || reps < 1 ||
	    nrates < 1) {
		fprintf(stderr, "ckr-zipf: bad arguments\n");
		return 2;
	}
	uint64_t wpo = osz / 4, nwords = nobjs * wpo;
	int niv = period * nper;
	struct zipf zo, zw;

	if (!mmo) {
		zipf_init(&zo, nobjs, alpha);
		zipf_init(&zw, wpo, alpha);
	}
	printf("# ckr-zipf: workload %s, %llu objects of %llu bytes (%.0f MB),"
	       " alpha %.2f, %d intervals of 0.1 s per checkpoint period, %d "
	       "periods measured, best of %d, storage %s in %s%s\n",
		mmo ? "mmo" : "zipf", (unsigned long long)nobjs,
		(unsigned long long)osz, nwords * 4 / 1e6, alpha, period, nper,
		reps, st == CKR_STORAGE_FILE ? "file" : "pool", base,
		flags & CKR_HUGEPAGES ? ", huge pages (THP)" :
		flags & CKR_HUGETLB ? ", huge pages (hugetlb)" : "");
	printf("# mutator pinned to CPU 0, writer to CPU 1 (fork: the "
	       "mutator and its child unpinned); the cores are shared with "
	       "other load\n");
	printf("# repetitions interleaved; times are the mutator thread's CPU "
	       "time\n");
	printf("# overhead per checkpoint period, ms (mutator time minus raw "
	       "updates to an array)\n");
	printf("%10s %9s", "updates/s", "raw_ms");
	for (int a = 0; a < nalgos; a++)
		printf(" %9s", aname(algos[a]));
	printf("\n");

	/* populated, as libckr's state is: no page fault in the raw runs;
	 * with -H in huge pages as well, so the overhead is the algorithm's */
	size_t rawsz = (nwords * 4 + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
	uint32_t *raw = mmap(NULL, rawsz, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS |
		(flags & CKR_HUGETLB ? MAP_HUGETLB : 0), -1, 0);

	if (raw == MAP_FAILED) {
		perror(flags & CKR_HUGETLB ? "ckr-zipf: mmap(MAP_HUGETLB) of "
			"the raw array (sysctl vm.nr_hugepages)" :
			"ckr-zipf: mmap");
		return 1;
	}
	if (flags & CKR_HUGEPAGES)
		madvise(raw, rawsz, MADV_HUGEPAGE);
	memset(raw, 0xff, rawsz);
	fork_advice(raw, rawsz, MADV_DONTFORK);
	double ovmin[32][MAXA], ovmax[32][MAXA], prate[32];
	double tmean[32][MAXA + 1], tmax[32][MAXA + 1], tmed[32][MAXA + 1];
	double trate[32];
	double forkms_per_gb = 0;
	uint64_t huge = 0;
	int ntraced = 0;
	double *iv = malloc(niv * sizeof(double));
	double *best_iv = malloc(niv * (MAXA + 1) * sizeof(double));
	uint32_t v = 1;

	for (int ri = 0; ri < nrates; ri++) {
		uint64_t per_iv = (uint64_t)(rates[ri] / 10);
		struct trace t;
		bool traced = false;
		char dir[4096];

		if (per_iv == 0 && !mmo)
			continue;
		if (mmo)
			mmo_trace(&t, period * (nper + 1), alpha);
		else
			zipf_trace(&t, per_iv, period, &zo, &zw, wpo);
		prate[ri] = (double)t.off[t.ntiv] / t.ntiv * 10;
		for (int k = 0; k < ntr; k++)
			traced |= trates[k] == rates[ri] || mmo;

		/* raw (the same updates to a plain array) and each
		 * algorithm, the repetitions interleaved, so a burst of other
		 * load hits one repetition of each, not all of one */
		double raw_ms = 1e30, best[MAXA], worst[MAXA];
		for (int a = 0; a < nalgos; a++) {
			best[a] = 1e30;
			worst[a] = 0;
		}
		for (int rep = 0; rep < reps; rep++) {
			double tot = 0;
			for (int p = 0, j = 0; p <= nper; p++)
				for (int i = 0; i < period; i++, j++) {
					int ti = j % t.ntiv;
					uint64_t t0 = mut_ns();
					for (uint64_t k = t.off[ti];
					     k < t.off[ti + 1]; k++)
						raw[t.idx[k]] = v++;
					__asm__ volatile("" ::: "memory");
					if (p > 0)
						tot += iv[(p - 1) * period + i] =
							(mut_ns() - t0) / 1e6;
				}
			if (tot < raw_ms) {
				raw_ms = tot;
				memcpy(best_iv, iv, niv * sizeof(double));
			}
			for (int a = 0; a < nalgos; a++) {
				double fms = 0;
				int rc;

				tot = 0;
				snprintf(dir, sizeof(dir), "%s/ckr-zipf-%d",
					base, (int)getpid());
				rm_dir(dir);
				if (algos[a] == ALGO_VISTA)
					rc = run_vista(dir, nwords, &t, period,
						nper, &v, iv);
				else
					rc = run_ckr(dir, algos[a], st, nobjs,
						osz, flags, &t, period, nper,
						&v, iv, &fms, &huge);
				rm_dir(dir);
				if (rc != 0)
					return 1;
				for (int k = 0; k < niv; k++)
					tot += iv[k];
				if (tot > worst[a])
					worst[a] = tot;
				if (tot < best[a]) {
					best[a] = tot;
					memcpy(best_iv + (a + 1) * niv, iv,
						niv * sizeof(double));
				}
				/* the least pause: preemption only adds */
				if (fms > 0 && (forkms_per_gb == 0 ||
						fms < forkms_per_gb))
					forkms_per_gb = fms;
			}
		}
		printf("%10.0f %9.2f", prate[ri], raw_ms / nper);
		for (int a = 0; a < nalgos; a++) {
			ovmin[ri][a] = (best[a] - raw_ms) / nper;
			ovmax[ri][a] = (worst[a] - raw_ms) / nper;
			printf(" %9.2f", ovmin[ri][a]);
		}
		printf("\n");
		fflush(stdout);
		if (traced) {
			FILE *f = NULL;

			if (tprefix != NULL) {
				char fn[4200];

				snprintf(fn, sizeof(fn), "%s-%.0f.dat", tprefix,
					mmo ? 0 : rates[ri]);
				f = fopen(fn, "w");
			}
			if (f != NULL) {
				fprintf(f, "# interval raw");
				for (int a = 0; a < nalgos; a++)
					fprintf(f, " %s", aname(algos[a]));
				fprintf(f, "\n");
			}
			for (int a = 0; a <= nalgos; a++) {
				tmean[ntraced][a] = tmax[ntraced][a] = 0;
				for (int k = 0; k < niv; k++) {
					double x = best_iv[a * niv + k];
					tmean[ntraced][a] += x / niv;
					if (x > tmax[ntraced][a])
						tmax[ntraced][a] = x;
				}
				tmed[ntraced][a] = median(best_iv + a * niv, niv);
			}
			for (int k = 0; f != NULL && k < niv; k++) {
				fprintf(f, "%d", k);
				for (int a = 0; a <= nalgos; a++)
					fprintf(f, " %.4f", best_iv[a * niv + k]);
				fprintf(f, "\n");
			}
			if (f != NULL)
				fclose(f);
			trate[ntraced] = prate[ri];
			ntraced++;
		}
		trace_free(&t);
	}
	printf("\n# overhead per checkpoint period over the %d repetitions, "
	       "ms: least..most\n", reps);
	printf("%10s", "updates/s");
	for (int a = 0; a < nalgos; a++)
		printf(" %17s", aname(algos[a]));
	printf("\n");
	for (int ri = 0; ri < nrates; ri++) {
		if ((uint64_t)(rates[ri] / 10) == 0 && !mmo)
			continue;
		printf("%10.0f", prate[ri]);
		for (int a = 0; a < nalgos; a++)
			printf(" %8.2f..%-7.2f", ovmin[ri][a], ovmax[ri][a]);
		printf("\n");
	}
	if (ntraced > 0) {
		printf("\n# mutator time per 0.1 s interval, ms: mean / median / "
		       "max (the max is the latency peak; the median leaves out "
		       "the intervals other load preempted)\n");
		printf("%10s %20s", "updates/s", "raw");
		for (int a = 0; a < nalgos; a++)
			printf(" %20s", aname(algos[a]));
		printf("\n");
		for (int k = 0; k < ntraced; k++) {
			printf("%10.0f", trate[k]);
			for (int a = 0; a <= nalgos; a++)
				printf(" %6.2f/%6.2f/%6.2f", tmean[k][a],
					tmed[k][a], tmax[k][a]);
			printf("\n");
		}
	}
	if (flags & (CKR_HUGEPAGES | CKR_HUGETLB))
		printf("\n# huge pages: %.0f MB of the last run's state and "
		       "copies in %s\n", huge / 1e6,
		       flags & CKR_HUGETLB ? "hugetlb pages" : "THP");
	if (forkms_per_gb > 0)
		printf("\n# fork() pause: %.1f ms per GB of state, the "
		       "benchmark's own arrays not forked (Redis publishes "
		       "23 ms/GB on KVM)\n", forkms_per_gb);
	munmap(raw, rawsz);
	free(iv);
	free(best_iv);
	return 0;
}
