/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vrp_bench.c -- the passive backup (Amza et al. Section 5): throughput of
 * Versions 0-3 standalone and with a passive backup, and the bytes sent
 * per transaction (Tables 4 and 5)
 *
 *   vrp-bench [-t SECONDS] [-a ACCOUNTS] [-r ROUNDS] [-v VERSIONS]
 *             [-m MODES] [-q]
 *   vrp-bench -j TRANSACTIONS [-a ACCOUNTS] [-r ROUNDS] [-q]
 *
 * Debit-credit (accounts, tellers, branches, a history ring; one
 * transaction declares and updates 5 ranges, 56 bytes) on Version 3
 * (libvista: a log pool and a segment pool) or Versions 0-2
 * (bench/tpcb_tpcc/vversions.c: one pool).  For each Version (-v, comma
 * list of v0,v1,v2,v3; default all) and mode (-m, comma list of
 * standalone,1safe,2safe; default all), ROUNDS interleaved rounds (default
 * 3) of SECONDS each (default 1); each line is the median round.  The
 * backup is a child process (vr_passive_follow) over loopback, keeping its
 * copies in the same temporary directory.  Bytes per transaction, by the
 * pool range each write-back falls in:
 *   modified   lines of the database the transactions wrote
 *   undo       V3: the log pool (before-images with libvista's record
 *              headers); V1/V2: the mirror; V0: the heap (undo records
 *              and before-image buffers)
 *   meta       the rest of the pools (V1/V2: the range log; headers)
 *   wire       record headers and piece descriptors of the stream
 * ACCOUNTS default 6,000,000 (a 50 MB database, the paper's size).  The
 * persistence domain is $RIO_DOMAIN (cacheline if unset; the byte domain
 * is refused by the passive backup).  -q: a smoke run (0.1 s, 1 round,
 * 100,000 accounts).
 *
 * -j: the rejoin of a passive backup (Version 3, 2-safe).  Per round: a
 * backup takes its copy, is SIGKILLed, the primary commits TRANSACTIONS
 * without it, a new backup process rejoins on the same files (by the log
 * tail); again, with the backup's position file removed (a full copy).
 * Each is timed from the port handed to the backup until the primary has
 * it live, and until it has acknowledged the last fence (caught up); the
 * primary is idle meanwhile.  Median of ROUNDS.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vista_replica.h"
#include "vversions.h"

#define ADDR ((char *)0x6c0000000000ull)
#define NBRANCH 10
#define NTELLER 100
#define NHIST 100000
#define MAXR 9

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

static size_t naccount = 6000000;
static double secs = 1.0;
static int rounds = 3;
static char tmpdir[256];

enum { STANDALONE = 0, ONE = 1, TWO = 2 };

struct result {
	double tps;
	double modified, undo, meta, wire; /* bytes per transaction */
	double fences;                     /* fence records per transaction */
};

/* The pools' ranges, for classify(). */
static struct {
	int ver;
	uint64_t db_lo, db_hi;    /* the database, file offsets of pool 0 */
	uint64_t aux_lo, aux_hi;  /* V0-V2: the mirror or heap */
	uint64_t user_lo;         /* file offset of the user area */
} cls;

static unsigned
classify(void *arg, unsigned pool, uint64_t off, uint32_t len)
{
	(void)arg;
	(void)len;
	if (cls.ver == 3 && pool == 1)
		return 1; /* the log */
	if (off >= cls.db_lo && off < cls.db_hi)
		return 0;
	if (cls.ver != 3 && off >= cls.aux_lo && off < cls.aux_hi)
		return 1;
	return 2;
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
	fprintf(stderr, "vrp-bench: %s: %s: %s\n", what, vr_err_name(rc),
		vr_errormsg());
	if (tmpdir[0]) {
		char cmd[300];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmpdir);
		if (system(cmd) != 0)
			fprintf(stderr, "vrp-bench: %s left behind\n", tmpdir);
	}
	exit(1);
}

static size_t
db_size(void)
{
	size_t s = sizeof(struct db) + naccount * 8;
	return (s + 4095) & ~(size_t)4095;
}

static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* The backup: a child forked before the primary starts a thread. */
static pid_t
start_backup(int ver, int *port_pipe)
{
	int fds[2];
	pid_t pid;

	if (pipe(fds))
		die("pipe", -errno);
	pid = fork();
	if (pid < 0)
		die("fork", -errno);
	if (pid == 0) {
		char sp[512], p0[512], p1[512];
		const char *paths[2] = { p0, p1 };
		struct vr_passive_opts o;
		vr_passive *n;
		unsigned port;
		int rc;
		close(fds[1]);
		if (read(fds[0], &port, sizeof(port)) != sizeof(port))
			_exit(0); /* standalone: no backup wanted */
		snprintf(sp, sizeof(sp), "%s/b.state", tmpdir);
		snprintf(p0, sizeof(p0), "%s/b.pool0", tmpdir);
		snprintf(p1, sizeof(p1), "%s/b.pool1", tmpdir);
		memset(&o, 0, sizeof(o));
		o.state_path = sp;
		o.timeout_ms = 5000;
		if ((rc = vr_passive_open(&o, &n)))
			die("backup: vr_passive_open", rc);
		rc = vr_passive_follow(n, "127.0.0.1", port, paths,
			ver == 3 ? 2 : 1);
		vr_passive_close(n);
		_exit(rc == 0 || rc == VR_EPEERLOST ? 0 : 1);
	}
	close(fds[0]);
	*port_pipe = fds[1];
	return pid;
}

static void
run(int ver, int mode, struct result *res)
{
	char p0[512], p1[512], sp[512];
	vista *v = NULL;
	vista_segment *seg = NULL;
	vv *w = NULL;
	vr_passive *n = NULL;
	struct db *d;
	rio_pool *pools[2];
	unsigned npools, port;
	int pfd, rc;
	pid_t bpid = start_backup(ver, &pfd);
	uint64_t s = 88172645463325252ull, tx = 0, txid = 0;
	double t0, t1;

	snprintf(p0, sizeof(p0), "%s/p.pool0", tmpdir);
	snprintf(p1, sizeof(p1), "%s/p.pool1", tmpdir);
	snprintf(sp, sizeof(sp), "%s/p.state", tmpdir);
	memset(&cls, 0, sizeof(cls));
	cls.ver = ver;
	if (ver == 3) {
		struct vista_opts vo = { p1, 64u << 20, 0, 0 };
		if ((rc = vista_init(&vo, &v)))
			die("vista_init", rc);
		if ((rc = vista_map(v, p0, ADDR, db_size(), VISTA_CREATE,
			&seg)))
			die("vista_map", rc);
		d = vista_segment_base(seg);
		pools[0] = vista_segment_pool(seg);
		pools[1] = vista_log_pool(v);
		npools = 2;
	} else {
		struct vv_opts vo = { (enum vv_version)ver, db_size(),
			64u << 20, 0, RIO_NO_SIGNALS };
		if ((rc = vv_create(p0, &vo, &w)))
			die("vv_create", rc);
		d = vv_db(w);
		pools[0] = vv_pool(w);
		npools = 1;
	}
	/* File offsets of pool 0: the database, then (V0-V2) its mirror or
	 * heap right after it (vversions.c's layout). */
	{
		char *map = (char *)rio_pool_base(pools[0]) -
			RIO_POOL_HDR_SIZE;
		uint64_t lo = (uint64_t)((char *)d - map);
		uint64_t dbr = (db_size() + 4095) & ~(uint64_t)4095;
		cls.db_lo = lo;
		cls.db_hi = lo + db_size();
		cls.aux_lo = lo + dbr;
		cls.aux_hi = lo + dbr + (ver == 0 ? (64u << 20) : dbr);
	}
	memset(d, 0, db_size());
	if (ver == 3) {
		/* The zeroed database durable before the backup copies it
		 * and the first transaction runs (as vv_loaded does). */
		rio_persist(pools[0], d, db_size());
	} else if ((rc = vv_loaded(w))) {
		die("vv_loaded", rc);
	}
	if (mode != STANDALONE) {
		struct vr_passive_opts o;
		memset(&o, 0, sizeof(o));
		o.state_path = sp;
		o.mode = mode == ONE ? VR_1SAFE : VR_2SAFE;
		o.timeout_ms = 5000;
		o.ring_size = 64u << 20;
		o.classify = classify;
		if ((rc = vr_passive_open(&o, &n)))
			die("vr_passive_open", rc);
		for (unsigned i = 0; i < npools; i++)
			if ((rc = vr_passive_add_pool(n, pools[i])))
				die("vr_passive_add_pool", rc);
		if ((rc = vr_passive_serve(n, "127.0.0.1", 0)))
			die("vr_passive_serve", rc);
		port = vr_passive_port(n);
		if (write(pfd, &port, sizeof(port)) != sizeof(port))
			die("write port", -errno);
		if ((rc = vr_passive_wait_backup(n, 60000)))
			die("vr_passive_wait_backup", rc);
	}
	close(pfd);
	struct vr_passive_status st0, st1;
	memset(&st0, 0, sizeof(st0));
	if (n)
		vr_passive_status(n, &st0);
	t0 = now();
	do {
		for (int k = 0; k < 64; k++) {
			uint32_t a = (uint32_t)(rnd(&s) % naccount);
			uint16_t t = (uint16_t)(rnd(&s) % NTELLER);
			uint16_t b = t % NBRANCH;
			int64_t delta = (int64_t)(rnd(&s) % 1999) - 999;
			uint64_t h = d->nhist % NHIST;
			void *ra[5] = { &d->account[a], &d->teller[t],
				&d->branch[b], &d->hist[h], &d->nhist };
			size_t rl[5] = { 8, 8, 8, 24, 8 };
			if (ver == 3) {
				struct vista_range r[5];
				for (int i = 0; i < 5; i++)
					r[i] = (struct vista_range){ ra[i],
						rl[i] };
				if ((rc = vista_begin_transaction(v, 0)) ||
				    (rc = vista_set_ranges(v, 5, r)))
					die("transaction", rc);
			} else {
				struct vv_range r[5];
				for (int i = 0; i < 5; i++)
					r[i] = (struct vv_range){ ra[i],
						rl[i] };
				if ((rc = vv_begin(w)) ||
				    (rc = vv_set_ranges(w, 5, r)))
					die("transaction", rc);
			}
			d->account[a] += delta;
			d->teller[t] += delta;
			d->branch[b] += delta;
			d->hist[h] = (struct hist){ ++txid, delta, a, t, b };
			d->nhist++;
			rc = ver == 3 ? vista_end_transaction(v) :
				vv_commit(w);
			if (rc)
				die("commit", rc);
			if (n && (rc = vr_passive_commit(n)))
				die("vr_passive_commit", rc);
			tx++;
		}
		t1 = now();
	} while (t1 - t0 < secs);
	memset(res, 0, sizeof(*res));
	res->tps = (double)tx / (t1 - t0);
	if (n) {
		vr_passive_status(n, &st1);
		res->modified = (double)(st1.class_bytes[0] -
			st0.class_bytes[0]) / (double)tx;
		res->undo = (double)(st1.class_bytes[1] -
			st0.class_bytes[1]) / (double)tx;
		res->meta = (double)(st1.class_bytes[2] + st1.class_bytes[3] -
			st0.class_bytes[2] - st0.class_bytes[3]) / (double)tx;
		res->wire = (double)(st1.meta_bytes - st0.meta_bytes) /
			(double)tx;
		res->fences = (double)(st1.fences - st0.fences) / (double)tx;
		vr_passive_close(n);
	}
	if (ver == 3)
		vista_fini(v);
	else
		vv_close(w);
	kill(bpid, SIGKILL);
	waitpid(bpid, NULL, 0);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -f %s/p.* %s/b.*", tmpdir, tmpdir);
	if (system(cmd) != 0)
		die("rm", -EIO);
}

/* One debit-credit transaction on Version 3; a passive commit's
 * VR_ENOBACKUP is counted, not fatal. */
static void
v3_tx(vista *v, struct db *d, vr_passive *n, uint64_t *s, uint64_t *txid)
{
	uint32_t a = (uint32_t)(rnd(s) % naccount);
	uint16_t t = (uint16_t)(rnd(s) % NTELLER);
	uint16_t b = t % NBRANCH;
	int64_t delta = (int64_t)(rnd(s) % 1999) - 999;
	uint64_t h = d->nhist % NHIST;
	struct vista_range r[5] = { { &d->account[a], 8 },
		{ &d->teller[t], 8 }, { &d->branch[b], 8 },
		{ &d->hist[h], 24 }, { &d->nhist, 8 } };
	int rc;

	if ((rc = vista_begin_transaction(v, 0)) ||
	    (rc = vista_set_ranges(v, 5, r)))
		die("transaction", rc);
	d->account[a] += delta;
	d->teller[t] += delta;
	d->branch[b] += delta;
	d->hist[h] = (struct hist){ ++*txid, delta, a, t, b };
	d->nhist++;
	if ((rc = vista_end_transaction(v)))
		die("commit", rc);
	rc = vr_passive_commit(n);
	if (rc && rc != VR_ENOBACKUP)
		die("vr_passive_commit", rc);
}

struct rejoin_time {
	double live, caught; /* s from the port handed over */
	uint64_t behind;     /* fence records the backup lacked */
};

static int
cmp_rt(const void *a, const void *b)
{
	double x = ((const struct rejoin_time *)a)->caught;
	double y = ((const struct rejoin_time *)b)->caught;
	return x < y ? -1 : x > y;
}

/* Hand the port to a waiting backup; time it live and caught up. */
static void
time_rejoin(vr_passive *n, int pfd, unsigned port, struct rejoin_time *rt)
{
	struct vr_passive_status st;
	double t0 = now();
	int rc;

	vr_passive_status(n, &st);
	rt->behind = st.fenced - st.acked;
	if (write(pfd, &port, sizeof(port)) != sizeof(port))
		die("write port", -errno);
	close(pfd);
	if ((rc = vr_passive_wait_backup(n, 60000)))
		die("vr_passive_wait_backup", rc);
	rt->live = now() - t0;
	for (;;) {
		vr_passive_status(n, &st);
		if (st.acked >= st.fenced)
			break;
		usleep(100);
	}
	rt->caught = now() - t0;
}

static void
rejoin(uint64_t away, struct rejoin_time *tail, struct rejoin_time *full)
{
	char p0[512], p1[512], sp[512], bpos[600];
	struct vista_opts vo = { p1, 64u << 20, 0, 0 };
	struct vr_passive_opts o;
	struct vr_passive_status st;
	vista *v = NULL;
	vista_segment *seg = NULL;
	vr_passive *n = NULL;
	struct db *d;
	int pfd[3], rc;
	pid_t bpid[3];
	uint64_t s = 88172645463325252ull, txid = 0;
	unsigned port;

	/* Three backup processes, forked before any thread: the first
	 * takes the copy, the second rejoins by the tail, the third by a
	 * full copy. */
	for (int i = 0; i < 3; i++)
		bpid[i] = start_backup(3, &pfd[i]);
	snprintf(p0, sizeof(p0), "%s/p.pool0", tmpdir);
	snprintf(p1, sizeof(p1), "%s/p.pool1", tmpdir);
	snprintf(sp, sizeof(sp), "%s/p.state", tmpdir);
	snprintf(bpos, sizeof(bpos), "%s/b.state.pos", tmpdir);
	if ((rc = vista_init(&vo, &v)))
		die("vista_init", rc);
	if ((rc = vista_map(v, p0, ADDR, db_size(), VISTA_CREATE, &seg)))
		die("vista_map", rc);
	d = vista_segment_base(seg);
	memset(d, 0, db_size());
	/* The zeroed database durable before the backup copies it. */
	rio_persist(vista_segment_pool(seg), d, db_size());
	memset(&o, 0, sizeof(o));
	o.state_path = sp;
	o.mode = VR_2SAFE;
	o.timeout_ms = 5000;
	o.ring_size = 64u << 20;
	if ((rc = vr_passive_open(&o, &n)) ||
	    (rc = vr_passive_add_pool(n, vista_segment_pool(seg))) ||
	    (rc = vr_passive_add_pool(n, vista_log_pool(v))) ||
	    (rc = vr_passive_serve(n, "127.0.0.1", 0)))
		die("vr_passive", rc);
	port = vr_passive_port(n);
	for (int i = 0; i < 3; i++) {
		struct rejoin_time rt;
		time_rejoin(n, pfd[i], port, &rt);
		if (i == 1)
			*tail = rt;
		else if (i == 2)
			*full = rt;
		if (i == 2)
			break;
		for (uint64_t k = 0; k < 1000; k++)
			v3_tx(v, d, n, &s, &txid);
		kill(bpid[i], SIGKILL);
		waitpid(bpid[i], NULL, 0);
		for (int w = 0; w < 5000; w++) {
			vr_passive_status(n, &st);
			if (!st.connected)
				break;
			usleep(1000);
		}
		for (uint64_t k = 0; k < away; k++)
			v3_tx(v, d, n, &s, &txid);
		if (i == 1 && unlink(bpos))
			die("unlink the backup's position file", -errno);
	}
	vr_passive_status(n, &st);
	if (st.tails != 1 || st.copies != 2) {
		fprintf(stderr, "vrp-bench: %lu rejoin(s) by the tail, %lu "
			"full copies: expected 1 and 2 (a ring too small for "
			"-j?)\n", (unsigned long)st.tails,
			(unsigned long)st.copies);
		exit(1);
	}
	vr_passive_close(n);
	vista_fini(v);
	kill(bpid[2], SIGKILL);
	waitpid(bpid[2], NULL, 0);
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -f %s/p.* %s/b.*", tmpdir, tmpdir);
	if (system(cmd) != 0)
		die("rm", -EIO);
}

static int
cmp_tps(const void *a, const void *b)
{
	double x = ((const struct result *)a)->tps;
	double y = ((const struct result *)b)->tps;
	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	static const char *mname[] = { "standalone", "1safe", "2safe" };
	bool vers[4] = { true, true, true, true };
	bool modes[3] = { true, true, true };
	struct result r[4][3][MAXR];
	uint64_t away = 0;
	int c;

	while ((c = getopt(argc, argv, "t:a:r:v:m:qj:")) != -1) {
		switch (c) {
		case 'j': away = strtoull(optarg, NULL, 0); break;
		case 't': secs = atof(optarg); break;
		case 'a': naccount = strtoull(optarg, NULL, 0); break;
		case 'r': rounds = atoi(optarg); break;
		case 'v':
			memset(vers, 0, sizeof(vers));
			for (int i = 0; i < 4; i++) {
				char k[4] = { 'v', (char)('0' + i), 0, 0 };
				vers[i] = strstr(optarg, k) != NULL;
			}
			break;
		case 'm':
			for (int i = 0; i < 3; i++)
				modes[i] = strstr(optarg, mname[i]) != NULL;
			break;
		case 'q':
			secs = 0.1;
			rounds = 1;
			naccount = 100000;
			break;
		default:
			fprintf(stderr, "usage: vrp-bench [-t S] [-a N] [-r R] "
				"[-v v0,v1,v2,v3] [-m standalone,1safe,2safe] "
				"[-q]\n");
			return 2;
		}
	}
	if (rounds < 1 || rounds > MAXR)
		rounds = 3;
	if (getenv("RIO_DOMAIN") == NULL)
		setenv("RIO_DOMAIN", "cacheline", 1);
	snprintf(tmpdir, sizeof(tmpdir), "/dev/shm/vrp-bench-XXXXXX");
	if (mkdtemp(tmpdir) == NULL)
		die("mkdtemp", -errno);
	if (away) {
		struct rejoin_time t[MAXR], f[MAXR];
		for (int k = 0; k < rounds; k++)
			rejoin(away, &t[k], &f[k]);
		qsort(t, (size_t)rounds, sizeof(t[0]), cmp_rt);
		qsort(f, (size_t)rounds, sizeof(f[0]), cmp_rt);
		printf("# passive rejoin, V3 2-safe, %.1f MB database, %s "
			"domain, %llu transactions away, median of %d\n",
			(double)db_size() / 1e6, getenv("RIO_DOMAIN"),
			(unsigned long long)away, rounds);
		printf("%-10s %10s %12s %14s\n", "rejoin", "live ms",
			"caught-up ms", "fences behind");
		printf("%-10s %10.2f %12.2f %14llu\n", "log tail",
			t[rounds / 2].live * 1e3, t[rounds / 2].caught * 1e3,
			(unsigned long long)t[rounds / 2].behind);
		printf("%-10s %10.2f %12.2f %14llu\n", "full copy",
			f[rounds / 2].live * 1e3, f[rounds / 2].caught * 1e3,
			(unsigned long long)f[rounds / 2].behind);
		rmdir(tmpdir);
		return 0;
	}
	printf("# passive backup, debit-credit, %zu accounts (%.1f MB), %s "
		"domain, %d round(s) of %.1f s, median\n", naccount,
		(double)db_size() / 1e6, getenv("RIO_DOMAIN"), rounds, secs);
	printf("%-4s %-10s %10s %6s %9s %9s %9s %9s %9s %7s\n", "ver", "mode",
		"tx/s", "ratio", "modified", "undo", "meta", "wire", "total",
		"fences");
	for (int k = 0; k < rounds; k++)
		for (int ver = 0; ver < 4; ver++)
			for (int m = 0; m < 3; m++)
				if (vers[ver] && modes[m])
					run(ver, m, &r[ver][m][k]);
	for (int ver = 0; ver < 4; ver++) {
		double base = 0;
		for (int m = 0; m < 3; m++) {
			struct result *x;
			if (!vers[ver] || !modes[m])
				continue;
			qsort(r[ver][m], (size_t)rounds, sizeof(r[0][0][0]),
				cmp_tps);
			x = &r[ver][m][rounds / 2];
			if (m == STANDALONE)
				base = x->tps;
			printf("v%-3d %-10s %10.0f %6.2f", ver, mname[m],
				x->tps, base > 0 ? x->tps / base : 0.0);
			if (m == STANDALONE)
				printf("\n");
			else
				printf(" %9.1f %9.1f %9.1f %9.1f %9.1f %7.2f\n",
					x->modified, x->undo, x->meta, x->wire,
					x->modified + x->undo + x->meta +
						x->wire, x->fences);
		}
	}
	rmdir(tmpdir);
	return 0;
}
