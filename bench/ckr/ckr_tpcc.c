/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckr_tpcc.c -- TPC-C on libckr against an ARIES-style baseline (Cao et
 *               al., SIGMOD'11, Section 5.5, Figures 12-13), and its crash
 *               campaign
 *
 *   ckr-tpcc [bench] [-a none,naive,bacou,bazz,ipp,fork,aries] [-w W,..]
 *            [-m MB] [-t seconds] [-g group] [-d dir] [-H thp|hugetlb]
 *            [-T prefix] [-S seed] [-R repetitions] [-L log MiB] [-i ms]
 *            [-F]
 *   ckr-tpcc crash [-a algo,..] [-k kills] [-m MB] [-d dir] [-S seed]
 *            [-L log MiB]
 *
 * bench: for each warehouse count (-w, full TPC-C scale, about 100 MB
 * each; or -m MB for one scaled-down database) and mode (tpcc.h; "none"
 * is the engine without logging or checkpoints), a fresh database runs
 * transactions as fast as it can for -t seconds, in groups of -g (500):
 * the logger commits group b while the mutator runs group b + 1, and
 * waits for b at the end of b + 1; after each group the mutator calls the
 * point of consistency, so a checkpoint starts whenever the writer is
 * free (with -i ms: once ms have passed since the last one started, the
 * same checkpoint interval for every mode, as in the paper).  With two CPUs or more, the writer (ARIES: the checkpointer) is
 * pinned to CPU 1 and every other thread (the mutator, the logger) to
 * CPU 0: the writer runs whenever there is a checkpoint to write, and a
 * logger beside it would wait for its time slice at every group.  Printed per
 * run: transactions and new-orders per second, the throughput lost
 * against "none", each transaction's execution time (median, p99), its
 * commit latency (start to its group durable: median, p99), each group's
 * response time (start of the group to start of the next, Figure 13:
 * median, p99, max), checkpoints completed, log bytes per second.  Each
 * mode runs -R times (1), the repetitions interleaved.  cpu_tx/s is the
 * transactions per second of the mutator's own CPU time
 * (CLOCK_THREAD_CPUTIME_ID: what the mode costs the mutator whatever else
 * the shared machine runs; its waits for the logger and the writer are
 * not in it), and drop% its loss against "none"; the row is the
 * repetition of the highest cpu_tx/s, then the lowest and highest
 * wall-clock tx/s of all.  -T
 * writes PREFIX-W-MODE.dat: per group its start (s) and response (ms); and
 * PREFIX-W-MODE-iv.dat: per 0.1 s interval, transactions per second,
 * p99 execution time (us) and the longest group response (ms).
 *
 * -L sizes each log's ring (4096 MiB; a sparse file).  ARIES's holds the
 * after-images since the older of its two newest fuzzy checkpoints; when
 * it cannot take a transaction's largest possible record, the mutator
 * waits between two transactions for checkpoints to release space
 * (tpcc.c, A5), and lwait counts the transactions that waited.  -F (for
 * the tests): exit 1 unless some transaction waited.
 *
 * crash: for each mode, -k times: a child process runs transactions on
 * the database in -d (recovering what the last one left) until SIGKILL
 * at a random point; then recovery (tpcc_open) must give exactly the state
 * of the first n transactions run from the start, where n is the durable
 * prefix of the log (tpcc_durable_prefix).  Exit 0 if every round matches;
 * built with CKR_TPCC_BROKEN_ARIES_LATE_LSN, exit 0 only if some round
 * did not (the broken checkpoint was caught).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tpcc.h"

static uint64_t
cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
rmtree(const char *dir)
{
	char cmd[4300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "ckr-tpcc: could not remove %s\n", dir);
}

static int
mode_parse(const char *s, struct tpcc_opts *o)
{
	o->mode = TPCC_CKR;
	if (strcmp(s, "none") == 0)
		o->mode = TPCC_NONE;
	else if (strcmp(s, "aries") == 0)
		o->mode = TPCC_ARIES;
	else if ((o->algo = ckr_algo_parse(s)) == 0)
		return -1;
	return 0;
}

/* Place the process's threads by name: the writers (ckr-writer,
 * aries-ckpt) on CPU 1, everything else (the mutator, the loggers) on
 * CPU 0. */
static void
place(void)
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

		if (tid <= 0)
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%d/comm", tid);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(comm, sizeof(comm), f) == NULL)
			comm[0] = 0;
		fclose(f);
		CPU_ZERO(&set);
		CPU_SET(strncmp(comm, "ckr-writer", 10) == 0 ||
			strncmp(comm, "aries-ckpt", 10) == 0 ? 1 : 0, &set);
		sched_setaffinity(tid, sizeof(set), &set);
	}
	closedir(dir);
}

static void
unpin(void)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	for (int i = 0; i < CPU_SETSIZE; i++)
		CPU_SET(i, &set);
	pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static double
pct(uint32_t *v, size_t n, double p)
{
	if (n == 0)
		return 0;
	qsort(v, n, sizeof(*v), cmp_u32);
	return v[(size_t)(p * (double)(n - 1))];
}

struct vec {
	uint32_t *v;
	size_t n, cap;
};

static void
push(struct vec *a, uint64_t x)
{
	if (a->n == a->cap) {
		a->cap = a->cap ? 2 * a->cap : 1 << 16;
		a->v = realloc(a->v, a->cap * sizeof(*a->v));
		if (a->v == NULL) {
			fprintf(stderr, "ckr-tpcc: out of memory\n");
			exit(1);
		}
	}
	a->v[a->n++] = x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
}

struct result {
	double tps, nops, secs, cpu_tps;
	double ex50, ex99, cm50, cm99, b50, b99, bmax;
	uint64_t ckpts, log_bytes, log_waits;
};

/* One measured run of -t seconds on an open engine. */
static int
run(struct tpcc *e, uint64_t t, uint32_t G, double secs, double ival,
	const char *series, struct result *r)
{
	uint64_t last_ck = 0;
	struct vec ex = { 0 }, cm = { 0 }, bt = { 0 }, bs = { 0 };
	uint64_t *st[2], t0, c0, end_prev = 0, n0 = t;
	struct tpcc_stats s0, s1;
	bool have_prev = false;
	int cur = 0, rc = 0;

	st[0] = calloc(G, 8);
	st[1] = calloc(G, 8);
	tpcc_stats(e, &s0);
	c0 = cpu_ns();
	t0 = now_ns();
	while (rc == 0 && now_ns() - t0 < (uint64_t)(secs * 1e9)) {
		uint64_t b0 = now_ns(), x = b0, y, d;

		for (uint32_t i = 0; i < G && rc == 0; i++, t++) {
			st[cur][i] = x;
			rc = tpcc_tx(e, t) < 0;
			y = now_ns();
			push(&ex, y - x); /* ns */
			x = y;
		}
		/* a point of consistency once -i ms passed since the last
		 * checkpoint started (-i 0: after every group) */
		if (rc == 0 && (ival <= 0 || last_ck == 0 ||
				now_ns() - last_ck >= (uint64_t)(ival * 1e6))) {
			int p = tpcc_poc(e);

			rc = p < 0;
			if (p == 1)
				last_ck = now_ns();
		}
		/* group commit: the last group is durable, ack its txs */
		if (rc == 0 && have_prev) {
			rc = tpcc_durable(e, end_prev) != 0;
			d = now_ns();
			for (uint32_t i = 0; i < G; i++)
				push(&cm, (d - st[cur ^ 1][i]) / 1000);
		}
		end_prev = t;
		have_prev = true;
		cur ^= 1;
		push(&bs, (b0 - t0) / 1000);
		push(&bt, (now_ns() - b0) / 1000);
	}
	if (rc == 0 && have_prev) {
		uint64_t d;

		rc = tpcc_durable(e, end_prev) != 0;
		d = now_ns();
		for (uint32_t i = 0; i < G; i++)
			push(&cm, (d - st[cur ^ 1][i]) / 1000);
	}
	r->secs = (now_ns() - t0) / 1e9;
	r->cpu_tps = (double)(t - n0) / ((cpu_ns() - c0) / 1e9);
	tpcc_stats(e, &s1);
	r->tps = (double)(t - n0) / r->secs;
	r->nops = (double)(s1.new_orders - s0.new_orders) / r->secs;
	r->ckpts = s1.checkpoints - s0.checkpoints;
	r->log_bytes = s1.log_bytes - s0.log_bytes;
	r->log_waits = s1.log_waits - s0.log_waits;
	if (series != NULL && rc == 0) {
		char p[4300];
		FILE *f;

		snprintf(p, sizeof(p), "%.4200s.dat", series);
		if ((f = fopen(p, "w")) != NULL) {
			fprintf(f, "# group start_s response_ms\n");
			for (size_t i = 0; i < bt.n; i++)
				fprintf(f, "%zu %.4f %.3f\n", i, bs.v[i] / 1e6,
					bt.v[i] / 1e3);
			fclose(f);
		}
		snprintf(p, sizeof(p), "%.4200s-iv.dat", series);
		if ((f = fopen(p, "w")) != NULL) {
			size_t g = 0, k = 0;

			fprintf(f, "# t_s tx_per_s p99_exec_us max_group_ms\n");
			for (int iv = 0; g < bt.n; iv++) {
				uint64_t lo = (uint64_t)iv * 100000,
					 hi = lo + 100000;
				uint32_t mx = 0;
				size_t k0 = k;

				for (; g < bt.n && bs.v[g] < hi; g++) {
					if (bt.v[g] > mx)
						mx = bt.v[g];
					k += G;
				}
				if (k > ex.n)
					k = ex.n;
				uint32_t *tmp = malloc((k - k0 + 1) * 4);
				memcpy(tmp, ex.v + k0, (k - k0) * 4);
				fprintf(f, "%.1f %.0f %.1f %.3f\n", lo / 1e6,
					(double)(k - k0) * 10,
					pct(tmp, k - k0, 0.99) / 1e3, mx / 1e3);
				free(tmp);
			}
			fclose(f);
		}
	}
	r->ex50 = pct(ex.v, ex.n, 0.5) / 1e3;
	r->ex99 = pct(ex.v, ex.n, 0.99) / 1e3;
	r->cm50 = pct(cm.v, cm.n, 0.5) / 1e3;
	r->cm99 = pct(cm.v, cm.n, 0.99) / 1e3;
	r->b50 = pct(bt.v, bt.n, 0.5) / 1e3;
	r->b99 = pct(bt.v, bt.n, 0.99) / 1e3;
	r->bmax = bt.n ? bt.v[bt.n - 1] / 1e3 : 0;
	free(ex.v);
	free(cm.v);
	free(bt.v);
	free(bs.v);
	free(st[0]);
	free(st[1]);
	return rc;
}

static void
rename_one(const char *from, const char *to, const char *suffix)
{
	char a[4400], b[4400];

	snprintf(a, sizeof(a), "%s%s", from, suffix);
	snprintf(b, sizeof(b), "%s%s", to, suffix);
	if (rename(a, b) != 0)
		perror(b);
}

/* The series of the best repetition so far under its final name. */
static void
keep_series(const char *from, const char *to)
{
	rename_one(from, to, ".dat");
	rename_one(from, to, "-iv.dat");
}

static void
drop_series(const char *from)
{
	char a[4400];

	snprintf(a, sizeof(a), "%s.dat", from);
	unlink(a);
	snprintf(a, sizeof(a), "%s-iv.dat", from);
	unlink(a);
}

static int
bench(int argc, char **argv)
{
	const char *algos = "none,naive,bacou,bazz,ipp,fork,aries";
	const char *whs = "1", *dir = "/dev/shm", *series = NULL;
	double secs = 10, mb = 0, ival = 0;
	struct tpcc_opts o;
	int opt, reps = 1;
	bool want_waits = false;
	uint64_t waits = 0;

	memset(&o, 0, sizeof(o));
	o.seed = 42;
	o.group = 500;
	o.log_capacity = 4ull << 30;
	while ((opt = getopt(argc, argv, "a:w:m:t:g:d:H:T:S:R:L:i:F")) != -1) {
		switch (opt) {
		case 'i': ival = atof(optarg); break;
		case 'F': want_waits = true; break;
		case 'L': o.log_capacity = strtoull(optarg, NULL, 0) << 20; break;
		case 'R': reps = atoi(optarg); break;
		case 'a': algos = optarg; break;
		case 'w': whs = optarg; break;
		case 'm': mb = atof(optarg); break;
		case 't': secs = atof(optarg); break;
		case 'g': o.group = (uint32_t)atoi(optarg); break;
		case 'd': dir = optarg; break;
		case 'T': series = optarg; break;
		case 'S': o.seed = strtoull(optarg, NULL, 0); break;
		case 'H':
			if (strcmp(optarg, "thp") == 0)
				o.ckr_flags = CKR_HUGEPAGES;
			else if (strcmp(optarg, "hugetlb") == 0)
				o.ckr_flags = CKR_HUGETLB;
			else
				goto usage;
			break;
		default:
			goto usage;
		}
	}
	if (o.group == 0 || secs <= 0 || reps < 1)
		goto usage;
	printf("# ckr-tpcc: order-entry (new-order 45, payment 43, delivery "
	       "5), groups of %u, %.0f s per run, storage %s%s\n", o.group,
	       secs, dir, o.ckr_flags == CKR_HUGEPAGES ? ", THP" :
	       o.ckr_flags == CKR_HUGETLB ? ", hugetlb" : "");
	printf("# best of %d interleaved repetitions by the mutator's CPU "
	       "throughput (cpu_tx/s; drop%% is its loss against none), "
	       "and the range of wall-clock tx/s\n", reps);
	printf("# mutator and logger on CPU 0, writer (ARIES: checkpointer) "
	       "on CPU 1\n");
	if (ival > 0)
		printf("# a checkpoint starts at most every %.0f ms\n", ival);
	printf("%3s %6s %7s %9s %9s %6s %8s %8s %8s %8s %8s %8s %8s %6s "
	       "%8s %9s %9s %9s %6s\n", "W", "mode", "MB", "tx/s", "neword/s",
	       "drop%", "ex50us", "ex99us", "cm50ms", "cm99ms", "g50ms",
	       "g99ms", "gmaxms", "ckpts", "logMB/s", "tx/s_min", "tx/s_max",
	       "cpu_tx/s", "lwait");
	fflush(stdout);
	char wl[256];
	snprintf(wl, sizeof(wl), "%s", whs);
	for (char *ws = strtok(wl, ","); ws != NULL; ws = strtok(NULL, ",")) {
		uint32_t W = (uint32_t)atoi(ws);
		struct result best[16], lo[16], hi[16];
		uint32_t nw = 0;
		char al[256], *names[16];
		int na = 0;

		o.db_size = mb > 0 ? (size_t)(mb * 1e6) : tpcc_size_for(W);
		snprintf(al, sizeof(al), "%s", algos);
		char *save = NULL;
		for (char *a = strtok_r(al, ",", &save); a != NULL && na < 16;
		     a = strtok_r(NULL, ",", &save)) {
			if (mode_parse(a, &o) != 0)
				goto usage;
			names[na++] = a;
		}
		/* the repetitions interleaved, so a burst of load on the
		 * shared machine hits one mode's run, not all of one mode */
		for (int rep = 0; rep < reps; rep++)
			for (int k = 0; k < na; k++) {
				char d[4096], ser[4300], fin[4300];
				struct tpcc *e;
				struct tpcc_stats s;
				struct result r = { 0 };
				uint64_t t;
				int rc;

				mode_parse(names[k], &o);
				snprintf(d, sizeof(d), "%s/ckr-tpcc.%d", dir,
					(int)getpid());
				rmtree(d);
				o.dir = d;
				rc = tpcc_open(&o, &e, &t);
				place();
				snprintf(ser, sizeof(ser), "%.4000s-%u-%s.r%d",
					series ? series : "", W, names[k], rep);
				if (rc == 0)
					rc = run(e, t, o.group, secs, ival,
						series ? ser : NULL, &r);
				tpcc_stats(e, &s);
				rc |= tpcc_close(e);
				unpin();
				rmtree(d);
				if (rc != 0) {
					fprintf(stderr, "ckr-tpcc: %s failed\n",
						names[k]);
					return 1;
				}
				nw = s.warehouses;
				waits += r.log_waits;
				if (rep == 0 || r.cpu_tps > best[k].cpu_tps) {
					best[k] = r;
					if (series != NULL) {
						snprintf(fin, sizeof(fin),
							"%.4000s-%u-%s", series,
							W, names[k]);
						keep_series(ser, fin);
					}
				}
				if (rep == 0 || r.tps < lo[k].tps)
					lo[k] = r;
				if (rep == 0 || r.tps > hi[k].tps)
					hi[k] = r;
				if (series != NULL)
					drop_series(ser);
			}
		for (int k = 0; k < na; k++) {
			struct result *r = &best[k];
			double base = strcmp(names[0], "none") == 0 ?
				best[0].cpu_tps : 0;

			printf("%3u %6s %7.0f %9.0f %9.0f %6.1f %8.2f %8.2f "
			       "%8.2f %8.2f %8.2f %8.2f %8.2f %6llu %8.1f "
			       "%9.0f %9.0f %9.0f %6llu\n",
			       nw, names[k], (double)o.db_size / 1e6, r->tps,
			       r->nops, base > 0 ? 100 * (1 - r->cpu_tps / base) : 0,
			       r->ex50, r->ex99, r->cm50, r->cm99, r->b50,
			       r->b99, r->bmax, (unsigned long long)r->ckpts,
			       r->log_bytes / 1e6 / r->secs, lo[k].tps,
			       hi[k].tps, r->cpu_tps,
			       (unsigned long long)r->log_waits);
		}
		fflush(stdout);
	}
	if (want_waits && waits == 0) {
		fprintf(stderr, "ckr-tpcc: -F: no transaction waited for log "
			"space (the log never filled)\n");
		return 1;
	}
	return 0;
usage:
	fprintf(stderr, "usage: ckr-tpcc [bench] [-a mode,..] [-w W,..] "
		"[-m MB] [-t s] [-g group] [-i ms] [-d dir] [-H thp|hugetlb] "
		"[-T prefix] [-S seed] [-R reps] [-L MiB] [-F]\n       ckr-tpcc crash [-a mode,..] "
		"[-k kills] [-m MB] [-d dir] [-S seed]\n");
	return 2;
}

/* The child of a crash round: run until killed. */
static void
crash_child(const struct tpcc_opts *o)
{
	struct tpcc *e;
	uint64_t t, end_prev = 0;
	bool have_prev = false;

	if (tpcc_open(o, &e, &t) != 0)
		_exit(3);
	for (;;) {
		for (uint32_t i = 0; i < o->group; i++, t++)
			if (tpcc_tx(e, t) < 0)
				_exit(4);
		if (tpcc_poc(e) < 0)
			_exit(5);
		if (have_prev && tpcc_durable(e, end_prev) != 0)
			_exit(6);
		end_prev = t;
		have_prev = true;
	}
}

static int
crash(int argc, char **argv)
{
	const char *algos = "naive,bacou,bazz,ipp,fork,aries", *dir = "/dev/shm";
	int kills = 4, opt, bad = 0, rounds = 0;
	struct tpcc_opts o;
	double mb = 4;
	uint64_t rs;

	memset(&o, 0, sizeof(o));
	o.seed = 7;
	o.group = 50;
	o.log_capacity = 64ull << 20;
	while ((opt = getopt(argc, argv, "a:k:m:d:S:g:L:")) != -1) {
		switch (opt) {
		case 'a': algos = optarg; break;
		case 'k': kills = atoi(optarg); break;
		case 'm': mb = atof(optarg); break;
		case 'd': dir = optarg; break;
		case 'S': o.seed = strtoull(optarg, NULL, 0); break;
		case 'g': o.group = (uint32_t)atoi(optarg); break;
		case 'L': o.log_capacity = strtoull(optarg, NULL, 0) << 20; break;
		default:
			fprintf(stderr, "usage: ckr-tpcc crash [-a mode,..] "
				"[-k kills] [-m MB] [-d dir] [-S seed] "
				"[-L log MiB]\n");
			return 2;
		}
	}
	o.db_size = (size_t)(mb * 1e6);
	rs = o.seed ^ (uint64_t)getpid() << 20 ^ now_ns();
	char al[256];
	snprintf(al, sizeof(al), "%s", algos);
	for (char *a = strtok(al, ","); a != NULL; a = strtok(NULL, ",")) {
		struct tpcc_opts ro = o;
		struct tpcc *ref;
		uint64_t ref_t, t;
		char d[4096];

		if (mode_parse(a, &o) != 0 || o.mode == TPCC_NONE) {
			fprintf(stderr, "ckr-tpcc crash: bad mode %s\n", a);
			return 2;
		}
		snprintf(d, sizeof(d), "%s/ckr-tpcc-crash.%d", dir,
			(int)getpid());
		rmtree(d);
		o.dir = d;
		ro.mode = TPCC_NONE;
		if (tpcc_open(&ro, &ref, &ref_t) != 0)
			return 1;
		for (int k = 0; k < kills; k++) {
			uint64_t n;
			struct tpcc *e;
			pid_t pid;
			int ws;
			/* 20..620 ms: before, during and after checkpoints */
			uint64_t x = rs += 0x9e3779b97f4a7c15ull;
			x = (x ^ (x >> 31)) * 0xbf58476d1ce4e5b9ull;
			unsigned ms = 20 + (unsigned)((x >> 33) % 600);

			fflush(NULL);
			pid = fork();
			if (pid == 0)
				crash_child(&o);
			usleep(ms * 1000);
			kill(pid, SIGKILL);
			waitpid(pid, &ws, 0);
			if (!(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL)) {
				fprintf(stderr, "ckr-tpcc crash: %s: the run "
					"ended before the kill (status %d)\n",
					a, ws);
				return 1;
			}
			if (tpcc_durable_prefix(&o, &n) != 0)
				return 1;
			if (n < ref_t) {
				fprintf(stderr, "ckr-tpcc crash: %s: the durable "
					"prefix shrank from %llu to %llu\n", a,
					(unsigned long long)ref_t,
					(unsigned long long)n);
				return 1;
			}
			for (; ref_t < n; ref_t++)
				if (tpcc_tx(ref, ref_t) < 0)
					return 1;
			if (tpcc_open(&o, &e, &t) != 0) {
				fprintf(stderr, "ckr-tpcc crash: %s: recovery "
					"failed after %u ms\n", a, ms);
				bad++;
				tpcc_close(e);
				break;
			}
			char *got = malloc(tpcc_db_size(e));
			tpcc_state(e, got);
			const char *want = tpcc_db(ref);
			size_t off = 0, sz = tpcc_db_size(e);
			while (off < sz && got[off] == want[off])
				off++;
			rounds++;
			if (off < sz || t != n) {
				size_t nd = 0, last = off;
				uint32_t gw = 0, ww = 0;
				for (size_t i = off; i < sz; i++)
					if (got[i] != want[i])
						nd++, last = i;
				if (off < sz) {
					memcpy(&gw, got + (off & ~(size_t)3), 4);
					memcpy(&ww, want + (off & ~(size_t)3), 4);
				}
				bad++;
				printf("%s kill %d after %u ms: %llu durable "
				       "transactions; recovered state %s (first "
				       "difference at byte %zu, last at %zu, %zu "
				       "bytes differ; word %zu is 0x%x, should be "
				       "0x%x), next %llu\n",
				       a, k, ms, (unsigned long long)n,
				       off < sz ? "DIFFERS" : "equal", off, last,
				       nd, off / 4, gw, ww,
				       (unsigned long long)t);
			} else {
				printf("%s kill %d after %u ms: %llu durable "
				       "transactions, recovered state equal\n",
				       a, k, ms, (unsigned long long)n);
			}
			free(got);
			if (tpcc_close(e) != 0)
				return 1;
		}
		tpcc_close(ref);
		rmtree(d);
	}
	printf("%d rounds, %d with a recovered state other than the durable "
	       "prefix's\n", rounds, bad);
#ifdef CKR_TPCC_BROKEN_ARIES_LATE_LSN
	printf(bad > 0 ? "broken build caught\n" : "broken build NOT caught\n");
	return bad > 0 ? 0 : 1;
#else
	return bad > 0 ? 1 : 0;
#endif
}

int
main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && strcmp(argv[1], "crash") == 0)
		return crash(argc - 1, argv + 1);
	if (argc > 1 && strcmp(argv[1], "bench") == 0)
		return bench(argc - 1, argv + 1);
	return bench(argc, argv);
}
