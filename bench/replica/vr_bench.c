/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vr_bench.c -- replication of a Vista segment: throughput, commit latency,
 * failover time, against standalone libvista in the same run
 *
 *   vr-bench [-t SECONDS] [-a ACCOUNTS] [-r ROUNDS] [-q] [-o CONFIG] [-p] [-s]
 *            [-w] [-S] [-R RING_BYTES] [-B MS]
 *
 * Debit-credit (accounts, tellers, branches, a history ring) on one
 * segment.  In order, each for SECONDS (default 1):
 *   rtt         a 64-byte TCP ping-pong over loopback between two
 *               processes: median and p99 round trip;
 *   standalone  libvista alone;
 *   1safe, 2safe, pipelined   the same with a backup process (vr_follow)
 *               over loopback: tx/s, its ratio to standalone, per-commit
 *               latency median/p99, bytes sent per transaction (modified
 *               data, metadata), CPU time per transaction of the primary
 *               process and of the backup process;
 *   failover    a primary process killed (SIGKILL) and one stopped
 *               (SIGSTOP: found by missed heartbeats): detection, and
 *               promotion until the first new commit.
 * The persistence domain is $RIO_DOMAIN (cacheline if unset).  -q: a
 * short smoke run (0.1 s each).  The four configurations run in ROUNDS
 * (default 3) interleaved rounds; each line is the median round.  -o standalone|1safe|2safe|pipelined runs
 * that one alone (for a profiler); -o hook runs a 1-safe primary that no
 * backup ever joins: its hook diffs every transaction and gathers its
 * record's pieces, and nothing is written to the ring or sent (the
 * hook's own cost).  -o floor runs, in ROUNDS
 * interleaved rounds, standalone, the floor (standalone with a hook that
 * only copies each declared range's coordinates and after-bytes into a
 * DRAM ring: the least a 1-safe primary on libvista's hook must do),
 * the hook alone, the hook alone with whole ranges (vr_opts.whole_ranges:
 * no diff on the committing thread), and 1-safe with a
 * backup, diffed, with whole ranges, and diffed by the sender thread
 * (vr_opts.sender_diff: "sdiff"), and pipelined 2-safe diffed by the
 * committing thread and by the sender; beside the CPU time per
 * transaction of the application thread, the primary and the backup, it
 * prints the application thread's time off its CPU (schedstat: runnable
 * but not running, and blocked) and its context switches.  -w: the active configurations
 * send whole ranges (vr_opts.whole_ranges); -S: their sender diffs the
 * records (vr_opts.sender_diff).  -R: the primary's send ring
 * in bytes (a power of two; default the library's, 4 MiB).  -B: the
 * active configurations' vr_opts.batch_ms (how long the sender lets
 * records gather); with -o floor, an added row: 1-safe, whole ranges,
 * that batch.
 *
 * Placement: the paper's primary and backup were two machines; here they
 * share the host's CPUs.  -p pins the primary's application thread to
 * the first CPU it may use, and its sender thread and the backup process
 * to the second, in every configuration (standalone too).  -s
 * starts the backup process in a session of its own (setsid), so that
 * the scheduler's autogroups give it its own share of the CPUs instead of
 * a part of the primary's, as a second machine would.  Neither is the
 * default; the output says which was used.
 */
#include <errno.h>
#include <stddef.h>
#include <pthread.h>
#include <sched.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <dirent.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vista_replica.h"

#define ADDR_P ((char *)0x6a0000000000ull)
#define ADDR_B ((char *)0x6b0000000000ull)
#define NBRANCH 10
#define NTELLER 100
#define NHIST 100000

static size_t naccount = 100000;
static double secs = 1.0;
static char tmpdir[256];
static const char *only; /* -o: run this configuration only (profiling) */
/* Failover runs: a killed primary is found by its closed connection (the
 * timeout only guards against load); a stopped one by the timeout. */
static unsigned fo_timeout = 100;
/* Pin the threads (see the top): CPU numbers, or -1 (-U, one CPU). */
static int cpu_app = -1, cpu_rep = -1;
/* -s: the backup process in a session of its own (see the top). */
static bool own_session;
/* -o hook: a primary that serves with no backup ever connected, so
 * that its hook diffs and gathers each record and nothing is sent. */
static bool hook_only;
/* -o floor: standalone libvista with a transaction hook that only copies
 * each declared range -- its coordinates (16 bytes) and its after-bytes
 * -- into a DRAM ring: the least any 1-safe primary on libvista's hook
 * does per transaction (no diff, no lock, no record, nothing sent). */
static bool floor_on;
/* -w, and the floor's "whole" rows: vr_opts.whole_ranges (each range sent
 * whole, the record sealed by the sender thread). */
static bool whole;
/* -S, and the floor's "sdiff" rows: vr_opts.sender_diff (the sender
 * diffs each record against its mirror of the segment). */
static bool sdiff;
/* -R: the primary's ring, bytes (0: the library's default). */
/* -B: vr_opts.batch_ms of the active configurations (-o floor: of an
 * added row, 1-safe with whole ranges). */
static unsigned batch_ms, floor_batch;
static size_t ring_bytes;
#define FLOOR_RING (4u << 20)
static char *floor_ring;
static size_t floor_head;

/* The calling thread onto `cpu` (threads it creates inherit it). */
static void
pin(int cpu)
{
	cpu_set_t cs;

	if (cpu < 0)
		return;
	CPU_ZERO(&cs);
	CPU_SET(cpu, &cs);
	if (pthread_setaffinity_np(pthread_self(), sizeof(cs), &cs))
		fprintf(stderr, "vr-bench: cannot pin to CPU %d\n", cpu);
}

/* The first two CPUs this process may use, or none. */
static void
pick_cpus(void)
{
	cpu_set_t cs;
	int k = 0;

	if (sched_getaffinity(0, sizeof(cs), &cs))
		return;
	for (int c = 0; c < CPU_SETSIZE && k < 2; c++) {
		if (!CPU_ISSET(c, &cs))
			continue;
		if (k++ == 0)
			cpu_app = c;
		else
			cpu_rep = c;
	}
	if (k < 2)
		cpu_app = cpu_rep = -1;
}

struct hist {
	uint64_t txid;
	int64_t delta;
	uint32_t account;
	uint16_t teller, branch;
};

struct db {
	uint64_t nhist;
	int64_t branch[NBRANCH];
	int64_t teller[NTELLER];
	struct hist hist[NHIST];
	int64_t account[];
};

static size_t
db_size(void)
{
	size_t s = sizeof(struct db) + naccount * 8;
	return (s + 4095) & ~(size_t)4095;
}

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void
die(const char *what, int rc)
{
	fprintf(stderr, "vr-bench: %s: %s: %s\n", what, vr_err_name(rc),
		vr_errormsg());
	exit(1);
}

static int
cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

struct node {
	vista *v;
	vista_segment *seg;
	vr_node *n;
	struct db *d;
};

static void
open_node(struct node *nd, const char *name, char *addr, enum vr_mode mode,
	bool replica)
{
	char lp[512], sp[512], tp[512], dir[400];
	struct vista_opts vo = { lp, 0, 0, 0 };
	size_t fp = vista_segment_footprint(db_size());
	struct vr_opts ro;
	int rc;

	snprintf(dir, sizeof(dir), "%s/%s", tmpdir, name);
	if (mkdir(dir, 0755) && errno != EEXIST)
		die("mkdir", -errno);
	snprintf(lp, sizeof(lp), "%s/log", dir);
	snprintf(sp, sizeof(sp), "%s/seg", dir);
	snprintf(tp, sizeof(tp), "%s/state", dir);
	if ((rc = vista_init(&vo, &nd->v)))
		die("vista_init", rc);
	if ((rc = vista_map(nd->v, sp, addr, db_size(), VISTA_CREATE,
		     &nd->seg)))
		die("vista_map", rc);
	nd->d = vista_segment_base(nd->seg);
	nd->n = NULL;
	if (!replica)
		return;
	memset(&ro, 0, sizeof(ro));
	ro.state_path = tp;
	ro.state_addr = addr + ((fp + (1u << 21) - 1) &
		~(size_t)((1u << 21) - 1));
	ro.mode = mode;
	ro.whole_ranges = whole;
	ro.sender_diff = sdiff;
	ro.ring_size = ring_bytes;
	ro.batch_ms = batch_ms;
	/* pipelined: commits in flight; 1-safe: the library's loss window
	 * (0: its default). */
	ro.window = mode == VR_PIPELINED ? 1024 : 0;
	/* Throughput runs: a loaded machine must not pass for a dead
	 * peer.  The failover runs measure detection at 100 ms. */
	ro.timeout_ms = strncmp(name, "fo-", 3) == 0 ? fo_timeout : 2000;
	if ((rc = vr_open(nd->v, nd->seg, &ro, &nd->n)))
		die("vr_open", rc);
}

static void
close_node(struct node *nd)
{
	if (nd->n)
		(void)vr_close(nd->n);
	(void)vista_fini(nd->v);
}

static uint64_t rs = 88172645463325252ull;
static inline uint64_t
rnd(void)
{
	rs ^= rs << 13;
	rs ^= rs >> 7;
	rs ^= rs << 17;
	return rs;
}

static int
floor_hook(void *arg, unsigned event, struct vista_txinfo *t)
{
	struct vista_txrange r;
	const char *base = arg;

	if (event != VISTA_HOOK_COMMIT)
		return 0;
	while (vista_txinfo_next(t, &r) == 1) {
		uint64_t c[2] = { (uint64_t)((const char *)r.addr - base),
			r.len };
		if (floor_head + sizeof(c) + r.len > FLOOR_RING)
			floor_head = 0;
		memcpy(floor_ring + floor_head, c, sizeof(c));
		memcpy(floor_ring + floor_head + sizeof(c), r.addr, r.len);
		floor_head += (sizeof(c) + r.len + 7) & ~(size_t)7;
	}
	return 0;
}

/* One debit-credit transaction; commit by vista or vr_commit. */
static int
tx(struct node *nd, uint64_t txid)
{
	struct db *d = nd->d;
	uint32_t a = (uint32_t)(rnd() % naccount);
	uint16_t t = (uint16_t)(rnd() % NTELLER);
	uint16_t b = t % NBRANCH;
	int64_t delta = (int64_t)(rnd() % 1999) - 999;
	uint64_t h = d->nhist % NHIST;
	struct vista_range r[5] = {
		{ &d->account[a], 8 }, { &d->teller[t], 8 },
		{ &d->branch[b], 8 }, { &d->hist[h], sizeof(struct hist) },
		{ &d->nhist, 8 },
	};
	int rc;

	if ((rc = vista_begin_transaction(nd->v, 0)) ||
	    (rc = vista_set_ranges(nd->v, 5, r)))
		return rc;
	d->account[a] += delta;
	d->teller[t] += delta;
	d->branch[b] += delta;
	d->hist[h] = (struct hist){ txid, delta, a, t, b };
	d->nhist++;
	/* -o hook: vista_end_transaction runs the replica's hook, which
	 * builds the record; vr_commit would add only its 1-safe grant check,
	 * which no backup ever satisfies here (VR_ENOBACKUP). */
	return nd->n && !hook_only ? vr_commit(nd->n) :
		vista_end_transaction(nd->v);
}

/* ---- loopback round trip ---- */

static int
tcp_pair(int *srv_fd, int *cli_fd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int one = 1, l = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(l, (void *)&sa, sizeof(sa)) || listen(l, 1) ||
	    getsockname(l, (void *)&sa, &sl))
		return -errno;
	*cli_fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(*cli_fd, (void *)&sa, sizeof(sa)))
		return -errno;
	*srv_fd = accept(l, NULL, NULL);
	close(l);
	setsockopt(*cli_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(*srv_fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

static void
bench_rtt(double *med, double *p99)
{
	int s = -1, c = -1, n = (int)(20000 * secs) + 100;
	char buf[64] = { 0 };
	double *lat = malloc((size_t)n * sizeof(*lat));
	pid_t pid;

	if (tcp_pair(&s, &c))
		die("loopback", -errno);
	pid = fork();
	if (pid == 0) {
		close(c);
		for (;;) {
			if (read(s, buf, 64) != 64 || write(s, buf, 64) != 64)
				_exit(0);
		}
	}
	close(s);
	for (int i = 0; i < n; i++) {
		double t0 = now();
		if (write(c, buf, 64) != 64)
			die("rtt write", -errno);
		for (size_t got = 0; got < 64;) {
			ssize_t r = read(c, buf + got, 64 - got);
			if (r <= 0)
				die("rtt read", -errno);
			got += (size_t)r;
		}
		lat[i] = now() - t0;
	}
	close(c);
	waitpid(pid, NULL, 0);
	qsort(lat, (size_t)n, sizeof(*lat), cmp_d);
	*med = lat[n / 2] * 1e6;
	*p99 = lat[n * 99 / 100] * 1e6;
	free(lat);
}

/* ---- a run ---- */

/* CPU time (ns) process `pid` has run, all its threads: the sum of the
 * first fields of /proc/PID/task/TID/schedstat; with `wait`, the sum of
 * the second fields too (runnable, waiting for a CPU).  On a shared
 * machine the CPU time per transaction varies far less than the
 * throughput. */
static double
cpu_ns(pid_t pid, double *wait)
{
	char path[64];
	DIR *d;
	struct dirent *e;
	double sum = 0;

	if (wait)
		*wait = 0;
	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	if ((d = opendir(path)) == NULL)
		return 0;
	while ((e = readdir(d)) != NULL) {
		char p2[384];
		unsigned long long ns, w;
		FILE *f;
		if (e->d_name[0] == '.')
			continue;
		snprintf(p2, sizeof(p2), "%s/%s/schedstat", path, e->d_name);
		if ((f = fopen(p2, "r")) == NULL)
			continue;
		if (fscanf(f, "%llu %llu", &ns, &w) == 2) {
			sum += (double)ns;
			if (wait)
				*wait += (double)w;
		}
		fclose(f);
	}
	closedir(d);
	return sum;
}

/* CPU time (ns) of the calling thread. */
static double
thread_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

struct result {
	double tps, med, p99;
	double data_b, meta_b;
	double cpu_p, cpu_b; /* us of CPU per transaction: primary, backup */
	double cpu_a;        /* ... of the primary's application thread */
	/* The application thread off its CPU, us per transaction: runnable
	 * but waiting for the CPU (another task ran), and blocked (a lock,
	 * a condition, a full ring); its voluntary and involuntary context
	 * switches per 1000 transactions. */
	double wait_a, sleep_a, vcs_a, ics_a;
	/* The sender thread and the backup process runnable (running or
	 * waiting for a CPU), us per transaction: the load they put on the
	 * scheduler beside their CPU time. */
	double rq_sb;
};

/* The calling thread's schedstat: on-CPU and run-queue wait, ns. */
static void
self_sched(double *run, double *wait)
{
	unsigned long long r = 0, w = 0;
	FILE *f = fopen("/proc/thread-self/schedstat", "r");

	if (f != NULL) {
		if (fscanf(f, "%llu %llu", &r, &w) != 2)
			r = w = 0;
		fclose(f);
	}
	*run = (double)r;
	*wait = (double)w;
}

static pid_t
spawn_backup(const char *name, unsigned port)
{
	pid_t pid = fork();
	if (pid == 0) {
		struct node b;
		int rc;
		pin(cpu_rep);
		if (own_session)
			(void)setsid();
		open_node(&b, name, ADDR_B, VR_1SAFE, true);
		rc = vr_follow(b.n, "127.0.0.1", port);
		if (rc != 0 && rc != VR_EPEERLOST)
			fprintf(stderr, "vr-bench: backup: %s: %s\n",
				vr_err_name(rc), vr_errormsg());
		_exit(0);
	}
	return pid;
}

static struct result
run(const char *name, int mode)
{
	struct result res = { 0 };
	double c0p, c0b, c0a, r0, w0, r1, w1, wp0, wb0, wp1, wb1, cp1, cb1;
	struct rusage ru0, ru1;
	struct node p;
	char bname[64];
	pid_t bpid = 0;
	size_t cap = 1 << 20, nl = 0;
	double *lat = malloc(cap * sizeof(*lat));
	uint64_t n = 0;
	double t0, t1, end;
	int rc;

	pin(cpu_app);
	open_node(&p, name, ADDR_P, mode ? (enum vr_mode)mode : VR_1SAFE,
		mode != 0);
	if (mode == 0 && floor_on) {
		if (floor_ring == NULL && (floor_ring = malloc(FLOOR_RING)) ==
		    NULL)
			die("malloc", -ENOMEM);
		memset(floor_ring, 0, FLOOR_RING); /* faulted in */
		if ((rc = vista_set_tx_hook(p.v, floor_hook, p.d)))
			die("vista_set_tx_hook", rc);
	}
	if (mode) {
		snprintf(bname, sizeof(bname), "%s-backup", name);
		/* -p: the sender thread vr_serve starts inherits the
		 * backup's CPU; the application thread keeps its own. */
		pin(cpu_rep);
		rc = vr_serve(p.n, "127.0.0.1", 0);
		pin(cpu_app);
		if (rc)
			die("vr_serve", rc);
		if (!hook_only) {
			bpid = spawn_backup(bname, vr_port(p.n));
			if ((rc = vr_wait_backup(p.n, 20000)))
				die("vr_wait_backup", rc);
		}
	}
	/* Warm up, then measure. */
	for (int i = 0; i < 2000; i++)
		if ((rc = tx(&p, ++n)))
			die("transaction", rc);
	getrusage(RUSAGE_THREAD, &ru0);
	self_sched(&r0, &w0);
	c0a = thread_ns();
	c0p = cpu_ns(getpid(), &wp0);
	c0b = bpid ? cpu_ns(bpid, &wb0) : 0;
	t0 = now();
	end = t0 + secs;
	for (;;) {
		double a = now();
		if (a >= end)
			break;
		for (int i = 0; i < 64; i++) {
			double s = mode == VR_2SAFE || mode == VR_PIPELINED ?
				now() : 0;
			if ((rc = tx(&p, ++n)))
				die("transaction", rc);
			if (s != 0 && nl < cap)
				lat[nl++] = now() - s;
		}
	}
	t1 = now();
	self_sched(&r1, &w1);
	getrusage(RUSAGE_THREAD, &ru1);
	res.tps = (double)(n - 2000) / (t1 - t0);
	res.wait_a = (w1 - w0) / 1e3 / (double)(n - 2000);
	res.sleep_a = ((t1 - t0) * 1e9 - (r1 - r0) - (w1 - w0)) / 1e3 /
		(double)(n - 2000);
	res.vcs_a = (double)(ru1.ru_nvcsw - ru0.ru_nvcsw) * 1e3 /
		(double)(n - 2000);
	res.ics_a = (double)(ru1.ru_nivcsw - ru0.ru_nivcsw) * 1e3 /
		(double)(n - 2000);
	res.cpu_a = (thread_ns() - c0a) / 1e3 / (double)(n - 2000);
	cp1 = cpu_ns(getpid(), &wp1);
	cb1 = bpid ? cpu_ns(bpid, &wb1) : 0;
	res.cpu_p = (cp1 - c0p) / 1e3 / (double)(n - 2000);
	res.cpu_b = bpid ? (cb1 - c0b) / 1e3 / (double)(n - 2000) : 0;
	/* The primary's other threads: all but the application thread. */
	res.rq_sb = ((cp1 - c0p) + (wp1 - wp0) - (r1 - r0) - (w1 - w0) +
		(bpid ? (cb1 - c0b) + (wb1 - wb0) : 0)) / 1e3 /
		(double)(n - 2000);
	if (mode && !hook_only) {
		struct vr_status st;
		if ((rc = vr_sync(p.n)))
			die("vr_sync", rc);
		vr_status(p.n, &st);
		res.data_b = (double)st.data_bytes / (double)st.records;
		res.meta_b = (double)st.meta_bytes / (double)st.records;
	}
	if (nl) {
		qsort(lat, nl, sizeof(*lat), cmp_d);
		res.med = lat[nl / 2] * 1e6;
		res.p99 = lat[nl * 99 / 100] * 1e6;
	}
	free(lat);
	close_node(&p);
	if (bpid) {
		kill(bpid, SIGKILL);
		waitpid(bpid, NULL, 0);
	}
	return res;
}

#define ROUNDS 9
static int rounds = 3;

static int
cmp_tps(const void *a, const void *b)
{
	const struct result *x = a, *y = b;
	return x->tps < y->tps ? -1 : x->tps > y->tps;
}

/* The round of median throughput (its latencies with it). */
static struct result
median(struct result *r, int n)
{
	qsort(r, (size_t)n, sizeof(*r), cmp_tps);
	return r[n / 2];
}

/* The median of one field of n rounds (field: its offset). */
static double
median_of(const struct result *r, int n, size_t field)
{
	double v[ROUNDS];
	for (int i = 0; i < n; i++)
		v[i] = *(const double *)((const char *)&r[i] + field);
	qsort(v, (size_t)n, sizeof(v[0]), cmp_d);
	return v[n / 2];
}
#define MEDIAN_OF(r, n, f) median_of((r), (n), offsetof(struct result, f))

/* ---- failover ---- */

struct killer {
	pid_t pid;
	int sig;
	double t_sig;
	vr_node *backup;
};

static void *
kill_later(void *arg)
{
	struct killer *k = arg;
	struct vr_status st;

	/* Once the backup holds its full copy (a large segment takes a
	 * while), and some records after it. */
	do {
		usleep(10000);
		vr_status(k->backup, &st);
	} while (st.copies == 0);
	usleep((useconds_t)(secs * 300000));
	k->t_sig = now();
	kill(k->pid, k->sig);
	return NULL;
}

/* A primary process (2-safe, committing in a loop) and this process as
 * its backup; the primary gets `sig`.  detect: from the signal until
 * vr_follow returns; promote: from then until the promoted node's first
 * commit is durable. */
static void
failover(int sig, double *detect_ms, double *promote_ms)
{
	struct killer k;
	struct node b;
	pthread_t thr;
	int pfd[2];
	unsigned port = 0;
	double t_det, t_first;
	pid_t pid;
	int rc;
	char pn[32], bn[32];

	snprintf(pn, sizeof(pn), "fo-p%d", sig);
	snprintf(bn, sizeof(bn), "fo-b%d", sig);
	if (pipe(pfd))
		die("pipe", -errno);
	pid = fork();
	if (pid == 0) {
		struct node p;
		uint64_t n = 0;
		pin(cpu_app);
		open_node(&p, pn, ADDR_P, VR_2SAFE, true);
		if ((rc = vr_serve(p.n, "127.0.0.1", 0)))
			die("vr_serve", rc);
		port = vr_port(p.n);
		if (write(pfd[1], &port, sizeof(port)) != sizeof(port))
			_exit(1);
		(void)vr_wait_backup(p.n, 20000);
		for (;;)
			(void)tx(&p, ++n);
	}
	if (read(pfd[0], &port, sizeof(port)) != sizeof(port))
		die("pipe read", -EIO);
	close(pfd[0]);
	close(pfd[1]);
	pin(cpu_rep);
	open_node(&b, bn, ADDR_B, VR_1SAFE, true);
	k = (struct killer){ pid, sig, 0, b.n };
	pthread_create(&thr, NULL, kill_later, &k);
	rc = vr_follow(b.n, "127.0.0.1", port);
	t_det = now();
	pthread_join(thr, NULL);
	if (rc != VR_EPEERLOST)
		die("vr_follow", rc);
	if ((rc = vr_promote(b.n)))
		die("vr_promote", rc);
	if ((rc = vr_serve(b.n, "127.0.0.1", 0)))
		die("vr_serve", rc);
	/* 2-safe with no backup yet: committed locally, VR_ENOBACKUP after
	 * the wait; the first commit is measured as 1-safe would see it. */
	if ((rc = vista_begin_transaction(b.v, 0)) ||
	    (rc = vista_set_range(b.v, &b.d->branch[0], 8)))
		die("first transaction", rc);
	b.d->branch[0]++;
	b.d->teller[0]++;
	if ((rc = vista_set_range(b.v, &b.d->teller[0], 8)))
		die("first transaction", rc);
	if ((rc = vista_end_transaction(b.v)))
		die("first commit", rc);
	t_first = now();
	*detect_ms = (t_det - k.t_sig) * 1e3;
	*promote_ms = (t_first - t_det) * 1e3;
	close_node(&b);
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

int
main(int argc, char **argv)
{
	struct result r0, r1, r2, r3;
	double rtt_med, rtt_p99, dk, pk, ds, ps;
	int c;

	bool pinned = false;

	while ((c = getopt(argc, argv, "t:a:qo:r:pswSR:B:")) != -1) {
		switch (c) {
		case 'R': ring_bytes = strtoull(optarg, NULL, 0); break;
		case 'w': whole = true; break;
		case 'S': sdiff = true; break;
		case 'B': floor_batch = (unsigned)atoi(optarg); break;
		case 'p': pinned = true; break;
		case 's': own_session = true; break;
		case 'r':
			rounds = atoi(optarg);
			if (rounds < 1 || rounds > ROUNDS)
				rounds = 3;
			break;
		case 'o': only = optarg; break;
		case 't': secs = atof(optarg); break;
		case 'a': naccount = strtoull(optarg, NULL, 0); break;
		case 'q': secs = 0.1; naccount = 10000; rounds = 1; break;
		default:
			fprintf(stderr, "usage: vr-bench [-t SECONDS] "
				"[-a ACCOUNTS] [-r ROUNDS] [-q] [-o CONFIG] "
				"[-p] [-s] [-w] [-S] [-R RING_BYTES] [-B MS]\n");
			return 2;
		}
	}
	if (only == NULL || strcmp(only, "floor") != 0)
		batch_ms = floor_batch;
	setenv("RIO_DOMAIN", "cacheline", 0);
	snprintf(tmpdir, sizeof(tmpdir), "/dev/shm/vr-bench-XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		die("mkdtemp", -errno);
	signal(SIGPIPE, SIG_IGN);
	if (pinned)
		pick_cpus();
	printf("domain %s, database %.1f MiB, %.1f s per run\n",
		getenv("RIO_DOMAIN"), (double)db_size() / (1 << 20), secs);
	if (cpu_app >= 0)
		printf("pinned: the primary process on CPU %d, the backup "
			"process on CPU %d\n", cpu_app, cpu_rep);
	else
		printf("unpinned: the scheduler places every thread\n");
	if (own_session)
		printf("the backup process runs in a session of its own\n");
	if (whole)
		printf("the primary sends whole ranges "
			"(vr_opts.whole_ranges)\n");
	if (sdiff)
		printf("the primary's sender diffs the records "
			"(vr_opts.sender_diff)\n");
	if (only != NULL) {
		static const char *names[] = { "standalone", "1safe", "2safe",
			"pipelined" };
		if (strcmp(only, "floor") == 0) {
			/* Interleaved rounds: standalone, the floor, the
			 * hook alone, 1-safe and pipelined with a backup. */
			static const struct {
				const char *name;
				int mode;
				bool floor, hook, whole, sdiff, batch;
			} fr[] = {
				{ "standalone", 0, 0, 0, 0, 0, 0 },
				{ "floor", 0, 1, 0, 0, 0, 0 },
				{ "hook", VR_1SAFE, 0, 1, 0, 0, 0 },
				{ "hook-whole", VR_1SAFE, 0, 1, 1, 0, 0 },
				{ "1-safe", VR_1SAFE, 0, 0, 0, 0, 0 },
				{ "1-safe-whole", VR_1SAFE, 0, 0, 1, 0, 0 },
				{ "1-safe-sdiff", VR_1SAFE, 0, 0, 0, 1, 0 },
				{ "pipelined", VR_PIPELINED, 0, 0, 0, 0, 0 },
				{ "pipe-sdiff", VR_PIPELINED, 0, 0, 0, 1, 0 },
				/* -B: whole ranges sent every floor_batch
				 * ms. */
				{ "whole-batch", VR_1SAFE, 0, 0, 1, 0, 1 },
			};
			enum { NFR = sizeof(fr) / sizeof(fr[0]) };
			struct result rr[NFR][ROUNDS];
			int nm = floor_batch ? NFR : NFR - 1;
			for (int k = 0; k < rounds; k++)
				for (int m = 0; m < nm; m++) {
					floor_on = fr[m].floor;
					hook_only = fr[m].hook;
					whole = fr[m].whole;
					sdiff = fr[m].sdiff;
					batch_ms = fr[m].batch ? floor_batch :
						0;
					rr[m][k] = run(fr[m].name, fr[m].mode);
				}
			floor_on = hook_only = whole = sdiff = false;
			/* Each column the median of its own rounds. */
			double s_tps = MEDIAN_OF(rr[0], rounds, tps);
			double s_a = MEDIAN_OF(rr[0], rounds, cpu_a);
			if (floor_batch)
				printf("whole-batch: 1-safe, whole ranges, "
					"vr_opts.batch_ms %u\n", floor_batch);
			printf("%-12s %10s %7s %7s %7s %7s %7s %7s %7s %6s "
				"%6s %7s  (us/tx; median of %d rounds)\n",
				"config", "tx/s", "ratio", "cpu A", "cpu P",
				"cpu B", "A ratio", "wait A", "sleep A",
				"vcs/k", "ics/k", "rq S+B", rounds);
			for (int m = 0; m < nm; m++) {
				double a = MEDIAN_OF(rr[m], rounds, cpu_a);
				double t = MEDIAN_OF(rr[m], rounds, tps);
				printf("%-12s %10.0f %7.3f %7.3f %7.3f %7.3f "
					"%7.3f %7.3f %7.3f %6.2f %6.2f %7.3f\n",
					fr[m].name, t, t / s_tps, a,
					MEDIAN_OF(rr[m], rounds, cpu_p),
					MEDIAN_OF(rr[m], rounds, cpu_b),
					s_a / a,
					MEDIAN_OF(rr[m], rounds, wait_a),
					MEDIAN_OF(rr[m], rounds, sleep_a),
					MEDIAN_OF(rr[m], rounds, vcs_a),
					MEDIAN_OF(rr[m], rounds, ics_a),
					MEDIAN_OF(rr[m], rounds, rq_sb));
			}
			printf("cpu A: the application thread alone; A ratio: "
				"standalone's cpu A over this one's, the tx/s "
				"ratio on two CPUs of its own with the sender "
				"and the backup on the other; wait A, sleep A: "
				"the application thread runnable but not "
				"running, and blocked; vcs/k, ics/k: its "
				"voluntary and involuntary context switches "
				"per 1000 transactions; rq S+B: the sender "
				"thread and the backup process runnable "
				"(running or waiting for a CPU)\n");
			goto out;
		}
		if (strcmp(only, "hook") == 0) {
			hook_only = true;
			r0 = run("hook", VR_1SAFE);
			printf("hook: %.0f tx/s, cpu P %.3f us/tx\n", r0.tps,
				r0.cpu_p);
		}
		for (int m = 0; m < 4; m++)
			if (strcmp(only, names[m]) == 0) {
				r0 = run(names[m], m);
				printf("%s: %.0f tx/s, cpu P %.3f us/tx, "
					"cpu B %.3f us/tx\n", only, r0.tps,
					r0.cpu_p, r0.cpu_b);
			}
		goto out;
	}
	bench_rtt(&rtt_med, &rtt_p99);
	printf("loopback round trip: median %.1f us, p99 %.1f us\n", rtt_med,
		rtt_p99);
	/* ROUNDS rounds of the four, interleaved, so that a load spike of
	 * this shared machine hits them alike; the median round of each. */
	{
		struct result rr[4][ROUNDS];
		static const char *nm[] = { "standalone", "1safe", "2safe",
			"pipelined" };
		for (int k = 0; k < rounds; k++)
			for (int m = 0; m < 4; m++)
				rr[m][k] = run(nm[m], m);
		r0 = median(rr[0], rounds);
		r1 = median(rr[1], rounds);
		r2 = median(rr[2], rounds);
		r3 = median(rr[3], rounds);
	}
	printf("%-12s %10s %8s %10s %10s %8s %8s %7s %7s  (median of %d "
		"rounds)\n", "config", "tx/s", "ratio", "lat med us",
		"lat p99 us", "data B", "meta B", "cpu P", "cpu B", rounds);
	printf("%-12s %10.0f %8.3f %10s %10s %8s %8s %7.3f %7s\n",
		"standalone", r0.tps, 1.0, "-", "-", "-", "-", r0.cpu_p, "-");
	printf("%-12s %10.0f %8.3f %10s %10s %8.1f %8.1f %7.3f %7.3f\n",
		"1-safe", r1.tps, r1.tps / r0.tps, "-", "-", r1.data_b,
		r1.meta_b, r1.cpu_p, r1.cpu_b);
	printf("%-12s %10.0f %8.3f %10.1f %10.1f %8.1f %8.1f %7.3f %7.3f\n",
		"2-safe", r2.tps, r2.tps / r0.tps, r2.med, r2.p99, r2.data_b,
		r2.meta_b, r2.cpu_p, r2.cpu_b);
	printf("%-12s %10.0f %8.3f %10.1f %10.1f %8.1f %8.1f %7.3f %7.3f\n",
		"pipelined", r3.tps, r3.tps / r0.tps, r3.med, r3.p99, r3.data_b,
		r3.meta_b, r3.cpu_p, r3.cpu_b);
	printf("cpu P, cpu B: CPU microseconds per transaction of the primary "
		"process (all its threads) and of the backup process; 1-safe "
		"CPU ratio (standalone cpu P / 1-safe cpu P): %.3f\n",
		r1.cpu_p > 0 ? r0.cpu_p / r1.cpu_p : 0);
	printf("2-safe median - loopback median: %.1f us (target <= 10)\n",
		r2.med - rtt_med);
	fo_timeout = 2000;
	failover(SIGKILL, &dk, &pk);
	fo_timeout = 100;
	failover(SIGSTOP, &ds, &ps);
	printf("failover, primary killed: detected in %.2f ms, promotion to "
		"first commit %.2f ms\n", dk, pk);
	printf("failover, primary stopped (missed heartbeats, timeout 100 "
		"ms): detected in %.2f ms, promotion to first commit %.2f ms\n",
		ds, ps);
out:
	{
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd) != 0)
			return 1;
	}
	return 0;
}
