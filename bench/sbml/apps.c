/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * apps.c -- the paper's application programs (Table 2) on libsbml: four
 * processes that communicate only by messages and run deterministically
 * between receives
 *
 *   sbml-apps [-d DCDIR] [-c EVERY] [-o OUTFILE] [-n] [-w WORK_US]
 *             [-t TIMEOUT_MS] [-s SEED] APP:SIZE[,APP:SIZE...]
 *             SELF ADDR0 ADDR1 ADDR2 ADDR3
 *
 * Every process of the group runs the same command with its own SELF.
 * The phases run in order; process 0 is the main process.
 *   nqueens:N  the solutions of N queens; the placements of the first two
 *              queens divided equally (every fourth) among the four
 *              processes; main sends each worker the problem, each
 *              counts its share and reports the count (the paper's
 *              program: constant communication);
 *   tsp:N      the shortest tour of N random cities (distances 1..100,
 *              from SEED), branch and bound: each worker asks main for
 *              an initial edge from city 0 (sbml_call), searches every
 *              tour through it, reports each tour no longer than the
 *              best it knows and gets main's best back; main keeps the
 *              shortest (ties: the lexicographically smallest tour), so
 *              the answer does not depend on timing;
 *   gauss:N    Gaussian elimination with partial pivoting of a random
 *              N x N system (rows i with i % 4 == p on process p): at
 *              each step the processes send main their pivot candidate,
 *              main names the pivot row to all, its owner sends it to
 *              all others, each reduces its rows; at the end the rows
 *              go to main, which solves by back substitution and checks
 *              the residual (O(N^2) messages);
 *   nqcalls:N  nqueens as request/reply: main hands each placement of
 *              the first two queens to the workers in turn (sbml_call);
 *   ring:R     a token passed R times round the four processes (every
 *              send waits for the acknowledgement of the RSN owed to
 *              the previous process).
 *
 * Options: -d runs the process under Discount Checking (dc_init,
 * DC_MANUAL) with its checkpoints in DCDIR, -c EVERY takes a checkpoint
 * every EVERY receives (needs -d); -o writes the visible output to
 * OUTFILE (default stdout) through sbml_output, at the end of each
 * phase; -n runs without logging (the benchmarks' baseline, no
 * recovery); -w sleeps WORK_US per task, step or round (so that kills
 * land inside); -t is how long a call waits for its peers (20000 ms).
 *
 * The long computations (a tsp search, an nqueens placement, a gauss
 * step's rows) call sbml_poll() now and then, so that their peers get
 * their acknowledgements; it delivers nothing, so the programs stay
 * deterministic between receives.
 *
 * The visible output holds only what does not depend on timing (counts,
 * the answer, per-process checksums), so a run with failures must write
 * exactly what a failure-free run writes.  On stderr: "process P
 * started", per phase on process 0 "APP N: T s" (after a start barrier),
 * and at the end "process P done:" with the counters of struct
 * sbml_stats as key=value (bench/sbml/apps_bench.sh reads them).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dc.h"
#include "sbml.h"

#define NPROC 4u
#define MAX_CITIES 24

static sbml *S;
static unsigned self, every, since, work_us;
static bool under_dc;
static int out_fd = 1;
static uint64_t seed = 1;

static void
die(const char *what, int rc)
{
	fprintf(stderr, "sbml-apps: process %u: %s: %s (%s): %s\n", self,
		what, sbml_err_name(rc), sbml_strerror(rc), sbml_errormsg());
	exit(3);
}

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The visible output, kept in memory and written at the end of each
 * phase, as a computation prints its results: between outputs nothing
 * waits for acknowledgements but what the send rule makes wait. */
static char out_buf[1 << 16];
static size_t out_len;

static void
say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out_buf + out_len, sizeof(out_buf) - out_len, fmt,
		ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(out_buf) - out_len)
		die("output buffer", -ENOSPC);
	out_len += (size_t)n;
}

static void
output(void)
{
	int rc = sbml_output(S, out_fd, out_buf, out_len);
	if (rc)
		die("output", rc);
	out_len = 0;
}

static void
work(void)
{
	struct timespec ts = { 0, (long)work_us * 1000 };
	if (work_us)
		nanosleep(&ts, NULL);
}

/* Every receive of the programs: a checkpoint every `every` of them. */
static void
recv_from(int src, void *buf, size_t cap, size_t *len, unsigned *from)
{
	int rc = sbml_recv(S, src, buf, cap, len, from, -1);
	if (rc)
		die("recv", rc);
	if (!under_dc || !every || ++since < every)
		return;
	since = 0;
	rc = sbml_checkpoint(S);
	if (rc < 0)
		die("checkpoint", rc);
}

static void
send_to(unsigned dst, const void *buf, size_t len)
{
	int rc = sbml_send(S, dst, buf, len);
	if (rc)
		die("send", rc);
}

static void
call(unsigned dst, const void *req, size_t reqlen, void *rep, size_t cap)
{
	size_t len;
	send_to(dst, req, reqlen);
	recv_from((int)dst, rep, cap, &len, NULL);
}

/* A deterministic generator (splitmix64): maps and matrices from SEED. */
static uint64_t
mix(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t
fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

/* ---- nqueens ------------------------------------------------------ */

static unsigned long
queens(unsigned n, unsigned row, unsigned cols, unsigned d1, unsigned d2)
{
	unsigned long c = 0;
	if (row == n)
		return 1;
	for (unsigned col = 0; col < n; col++) {
		unsigned a = 1u << col, b = 1u << (row + col),
			 d = 1u << (row + n - col);
		if ((cols & a) || (d1 & b) || (d2 & d))
			continue;
		c += queens(n, row + 1, cols | a, d1 | b, d2 | d);
	}
	return c;
}

static unsigned long
below(unsigned n, unsigned c0, unsigned c1)
{
	return queens(n, 2, (1u << c0) | (1u << c1),
		(1u << c0) | (1u << (1 + c1)),
		(1u << (n - c0)) | (1u << (1 + n - c1)));
}

static bool
attacked(unsigned c0, unsigned c1)
{
	return c1 + 1 >= c0 && c1 <= c0 + 1;
}

static void
nqueens(unsigned n)
{
	uint32_t msg = n;
	size_t len;
	if (self == 0)
		for (unsigned w = 1; w < NPROC; w++)
			send_to(w, &msg, sizeof(msg));
	else
		recv_from(0, &msg, sizeof(msg), &len, NULL);
	unsigned long mine = 0, idx = 0, share = 0;
	for (unsigned c0 = 0; c0 < msg; c0++)
		for (unsigned c1 = 0; c1 < msg; c1++) {
			if (attacked(c0, c1))
				continue;
			if (idx++ % NPROC != self)
				continue;
			mine += below(msg, c0, c1);
			share++;
			int rc = sbml_poll(S);
			if (rc)
				die("poll", rc);
			work();
		}
	say("nqueens %u: process %u counted %lu in %lu placements\n", n,
		self, mine, share);
	if (self != 0) {
		uint64_t c = mine;
		send_to(0, &c, sizeof(c));
	} else {
		unsigned long total = mine;
		for (unsigned w = 1; w < NPROC; w++) {
			uint64_t c;
			recv_from(SBML_ANY, &c, sizeof(c), &len, NULL);
			total += c;
		}
		say("nqueens %u: %lu solutions\n", n, total);
	}
	output();
}

struct task {
	int32_t c0, c1; /* -1: stop */
	uint32_t id, n;
};

static void
nqcalls(unsigned nq)
{
	if (self == 0) {
		unsigned long total = 0;
		uint32_t id = 0;
		for (unsigned c0 = 0; c0 < nq; c0++)
			for (unsigned c1 = 0; c1 < nq; c1++) {
				if (attacked(c0, c1))
					continue;
				struct task t = { (int32_t)c0, (int32_t)c1,
					id, nq };
				uint64_t count;
				unsigned w = 1 + id % 3;
				call(w, &t, sizeof(t), &count, sizeof(count));
				total += count;
				say("task %u (%u,%u) on %u: %llu\n", id, c0, c1,
					w, (unsigned long long)count);
				id++;
			}
		for (unsigned w = 1; w < NPROC; w++) {
			struct task t = { -1, -1, 0, 0 };
			send_to(w, &t, sizeof(t));
		}
		say("nqueens %u: %lu solutions\n", nq, total);
	} else {
		for (;;) {
			struct task t;
			size_t len;
			recv_from(0, &t, sizeof(t), &len, NULL);
			if (t.c0 < 0)
				break;
			uint64_t count = below(t.n, (unsigned)t.c0,
				(unsigned)t.c1);
			send_to(0, &count, sizeof(count));
			say("worker %u task %u: %llu\n", self, t.id,
				(unsigned long long)count);
			work();
		}
	}
	output();
}

/* ---- tsp ---------------------------------------------------------- */

struct tsp_msg {
	uint8_t kind;               /* 'R' request an edge, 'T' a tour */
	uint8_t n;
	uint16_t pad;
	int32_t len;                /* 'T': the tour's length */
	uint8_t tour[MAX_CITIES];   /* 'T': cities in order from 0 */
};

struct tsp_rep {
	int32_t edge;               /* next city after 0; -1: no more */
	int32_t best;               /* main's best length so far */
};

static struct {
	unsigned n;
	int d[MAX_CITIES][MAX_CITIES];
	int minout[MAX_CITIES];
	uint8_t near[MAX_CITIES][MAX_CITIES]; /* neighbours, nearest first */
	uint8_t path[MAX_CITIES];
	int best;
} T;

static void
tsp_map(unsigned n)
{
	uint64_t x = seed * 1000003u + n;
	T.n = n;
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = 0; j < i; j++)
			T.d[i][j] = T.d[j][i] = 1 + (int)(mix(&x) % 100);
	for (unsigned i = 0; i < n; i++) {
		unsigned k = 0;
		T.minout[i] = 1000;
		for (unsigned j = 0; j < n; j++)
			if (j != i) {
				T.near[i][k++] = (uint8_t)j;
				if (T.d[i][j] < T.minout[i])
					T.minout[i] = T.d[i][j];
			}
		/* insertion sort by distance, ties by index: deterministic */
		for (unsigned a = 1; a < k; a++)
			for (unsigned b = a; b > 0 &&
			     T.d[i][T.near[i][b]] < T.d[i][T.near[i][b - 1]];
			     b--) {
				uint8_t t = T.near[i][b];
				T.near[i][b] = T.near[i][b - 1];
				T.near[i][b - 1] = t;
			}
	}
}

/* A long computation serves the network now and then: its peers wait
 * for its acknowledgements (the send rule).  Nothing is delivered, so
 * the computation stays deterministic. */
static void
serve_now_and_then(void)
{
	static unsigned long nodes;
	int rc;
	if ((++nodes & 0x3fff) == 0 && (rc = sbml_poll(S)) != 0)
		die("poll", rc);
}

static void
tsp_search(unsigned depth, unsigned cur, uint32_t seen, int len, int rest)
{
	unsigned n = T.n;
	serve_now_and_then();
	if (depth == n) {
		int total = len + T.d[cur][0];
		if (total > T.best)
			return;
		struct tsp_msg m = { .kind = 'T', .n = (uint8_t)n,
			.len = total };
		memcpy(m.tour, T.path, n);
		struct tsp_rep r;
		call(0, &m, sizeof(m), &r, sizeof(r));
		if (r.best < T.best)
			T.best = r.best;
		return;
	}
	/* bound: every city still to leave (this one and the unvisited)
	 * leaves by at least its shortest edge; ties are searched too */
	if (len + T.minout[cur] + rest > T.best)
		return;
	for (unsigned k = 0; k + 1 < n; k++) {
		unsigned c = T.near[cur][k];
		if (c == 0 || (seen & (1u << c)))
			continue;
		T.path[depth] = (uint8_t)c;
		tsp_search(depth + 1, c, seen | (1u << c), len + T.d[cur][c],
			rest - T.minout[c]);
	}
}

static void
tsp(unsigned n)
{
	if (n < 3 || n > MAX_CITIES)
		die("tsp: cities out of 3..24", -EINVAL);
	tsp_map(n);
	if (self != 0) {
		struct tsp_msg req = { .kind = 'R', .n = (uint8_t)n };
		struct tsp_rep r;
		T.best = 1 << 30;
		for (;;) {
			call(0, &req, sizeof(req), &r, sizeof(r));
			if (r.best < T.best)
				T.best = r.best;
			if (r.edge < 0)
				break;
			unsigned c = (unsigned)r.edge;
			int rest = 0;
			for (unsigned i = 1; i < n; i++)
				if (i != c)
					rest += T.minout[i];
			T.path[0] = 0;
			T.path[1] = (uint8_t)c;
			tsp_search(2, c, 1u | (1u << c), T.d[0][c], rest);
			work();
		}
		/* how many edges it searched depends on timing: not output */
		say("tsp %u: process %u searched until no edge was left\n",
			n, self);
		output();
		return;
	}
	int best = 1 << 30;
	uint8_t best_tour[MAX_CITIES] = { 0 };
	unsigned next = 1, stopped = 0, reports = 0;
	while (stopped < NPROC - 1) {
		struct tsp_msg m;
		size_t len;
		unsigned from;
		recv_from(SBML_ANY, &m, sizeof(m), &len, &from);
		struct tsp_rep r = { -1, best };
		if (len != sizeof(m) || m.n != n)
			die("tsp: a bad message", -EPROTO);
		if (m.kind == 'T') {
			reports++;
			if (m.len < best || (m.len == best &&
			    memcmp(m.tour, best_tour, n) < 0)) {
				best = m.len;
				memcpy(best_tour, m.tour, n);
			}
			r.best = best;
		} else if (next < n) {
			r.edge = (int32_t)next++;
		} else {
			stopped++;
		}
		send_to(from, &r, sizeof(r));
	}
	say("tsp %u: shortest tour %d:", n, best);
	for (unsigned i = 0; i < n; i++)
		say(" %u", best_tour[i]);
	say(" 0\n");
	output();
}

/* ---- gauss -------------------------------------------------------- */

/* Row i of the system [A | b], from SEED: entries uniform in [-1, 1). */
static void
gauss_row(unsigned n, unsigned i, double *row)
{
	uint64_t x = seed * 0x51ed27u + (uint64_t)i * 7919u + n;
	for (unsigned j = 0; j <= n; j++)
		row[j] = (double)(mix(&x) >> 11) / 4503599627370496.0 - 1.0;
}

struct cand {
	int32_t k, row; /* row -1: no candidate left */
	double val;
};

static void
gauss(unsigned n)
{
	size_t w = n + 1, rowbytes = w * sizeof(double) + 8;
	if (n < NPROC || rowbytes > SBML_MAX_MESSAGE)
		die("gauss: size out of range", -EINVAL);
	unsigned nloc = (n + NPROC - 1 - self) / NPROC;
	double *a = malloc(nloc * w * sizeof(double));
	double *prow = malloc(rowbytes);
	bool *done = calloc(nloc ? nloc : 1, 1);
	int32_t *piv = malloc(n * sizeof(int32_t));
	if (!a || !prow || !done || !piv)
		die("gauss", -ENOMEM);
	for (unsigned l = 0; l < nloc; l++)
		gauss_row(n, self + NPROC * l, a + l * w);
	unsigned pivots = 0;
	int rc;
	for (unsigned k = 0; k < n; k++) {
		struct cand c = { (int32_t)k, -1, -1.0 };
		for (unsigned l = 0; l < nloc; l++)
			if (!done[l] && fabs(a[l * w + k]) > c.val) {
				c.val = fabs(a[l * w + k]);
				c.row = (int32_t)(self + NPROC * l);
			}
		int32_t r;
		size_t len;
		if (self == 0) {
			for (unsigned q = 1; q < NPROC; q++) {
				struct cand o;
				recv_from(SBML_ANY, &o, sizeof(o), &len, NULL);
				if (o.k != (int32_t)k)
					die("gauss: a candidate of another step",
						-EPROTO);
				if (o.row >= 0 && (o.val > c.val ||
				    (o.val == c.val && o.row < c.row))) {
					c.val = o.val;
					c.row = o.row;
				}
			}
			r = c.row;
			for (unsigned q = 1; q < NPROC; q++)
				send_to(q, &r, sizeof(r));
		} else {
			send_to(0, &c, sizeof(c));
			recv_from(0, &r, sizeof(r), &len, NULL);
		}
		if (r < 0 || (unsigned)r >= n)
			die("gauss: singular", -EDOM);
		piv[k] = r;
		unsigned owner = (unsigned)r % NPROC;
		/* the pivot row from column k on, behind its index */
		double *p = prow + 1;
		if (owner == self) {
			unsigned l = (unsigned)r / NPROC;
			done[l] = true;
			pivots++;
			memcpy(p, a + l * w + k, (w - k) * sizeof(double));
			memcpy(prow, &r, sizeof(r));
			for (unsigned q = 0; q < NPROC; q++)
				if (q != self)
					send_to(q, prow,
						(w - k + 1) * sizeof(double));
		} else {
			recv_from((int)owner, prow, rowbytes, &len, NULL);
			if (len != (w - k + 1) * sizeof(double))
				die("gauss: a short pivot row", -EPROTO);
		}
		for (unsigned l = 0; l < nloc; l++) {
			if (done[l])
				continue;
			if (l % 32 == 31 && (rc = sbml_poll(S)) != 0)
				die("poll", rc);
			double *row = a + l * w;
			double f = row[k] / p[0];
			for (unsigned j = k; j < w; j++)
				row[j] -= f * p[j - k];
		}
		work();
	}
	uint64_t sum = fnv(0xcbf29ce484222325ull, a, nloc * w * sizeof(double));
	say("gauss %u: process %u: %u rows, %u pivots, rows %016llx\n", n,
		self, nloc, pivots, (unsigned long long)sum);
	if (self != 0) {
		for (unsigned l = 0; l < nloc; l++) {
			int32_t i = (int32_t)(self + NPROC * l);
			memcpy(prow, &i, sizeof(i));
			memcpy(prow + 1, a + l * w, w * sizeof(double));
			send_to(0, prow, rowbytes);
		}
	} else {
		double *u = malloc(n * w * sizeof(double)), *x =
			malloc(n * sizeof(double));
		if (!u || !x)
			die("gauss", -ENOMEM);
		for (unsigned l = 0; l < nloc; l++)
			memcpy(u + (NPROC * l) * w, a + l * w,
				w * sizeof(double));
		for (unsigned i = nloc; i < n; i++) {
			size_t len;
			int32_t at;
			recv_from(SBML_ANY, prow, rowbytes, &len, NULL);
			memcpy(&at, prow, sizeof(at));
			if (len != rowbytes || at < 0 || (unsigned)at >= n)
				die("gauss: a bad row", -EPROTO);
			memcpy(u + (size_t)at * w, prow + 1,
				w * sizeof(double));
		}
		for (unsigned k = n; k-- > 0;) {
			const double *row = u + (size_t)piv[k] * w;
			double s = row[n];
			for (unsigned j = k + 1; j < n; j++)
				s -= row[j] * x[j];
			x[k] = s / row[k];
		}
		/* the residual against the original system */
		double res = 0;
		for (unsigned i = 0; i < n; i++) {
			gauss_row(n, i, prow);
			double s = -prow[n];
			for (unsigned j = 0; j < n; j++)
				s += prow[j] * x[j];
			if (fabs(s) > res)
				res = fabs(s);
		}
		say("gauss %u: x[0] %.12g x[%u] %.12g, solution %016llx, "
			"residual %s\n", n, x[0], n - 1, x[n - 1],
			(unsigned long long)fnv(0xcbf29ce484222325ull, x,
				n * sizeof(double)),
			res < 1e-6 ? "below 1e-6" : "TOO LARGE");
		free(u);
		free(x);
	}
	output();
	free(a);
	free(prow);
	free(done);
	free(piv);
}

/* ---- the token ring ----------------------------------------------- */

static void
ring(unsigned rounds)
{
	uint64_t v = 1;
	size_t len;
	if (self == 0)
		send_to(1, &v, sizeof(v));
	for (unsigned r = 0; r < rounds; r++) {
		recv_from((int)((self + NPROC - 1) % NPROC), &v, sizeof(v),
			&len, NULL);
		v = v * 31 + self;
		if (self != 0 || r + 1 < rounds)
			send_to((self + 1) % NPROC, &v, sizeof(v));
		say("round %u process %u token %llu\n", r, self,
			(unsigned long long)v);
		work();
	}
	if (self == 0)
		say("ring %u rounds: %llu\n", rounds, (unsigned long long)v);
	output();
}

/* ---- main --------------------------------------------------------- */

static void
usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [-d DCDIR] [-c EVERY] [-o OUTFILE] [-n] "
		"[-w WORK_US] [-t TIMEOUT_MS] [-s SEED] "
		"APP:SIZE[,APP:SIZE...] SELF ADDR0 ADDR1 ADDR2 ADDR3\n"
		"  APP: nqueens, tsp, gauss, nqcalls, ring\n", argv0);
	exit(2);
}

int
main(int argc, char **argv)
{
	const char *dcdir = NULL, *outfile = NULL;
	bool no_logging = false;
	unsigned timeout_ms = 20000;
	int c;
	while ((c = getopt(argc, argv, "d:c:o:nw:t:s:")) != -1) {
		switch (c) {
		case 'd': dcdir = optarg; break;
		case 'c': every = (unsigned)atoi(optarg); break;
		case 'o': outfile = optarg; break;
		case 'n': no_logging = true; break;
		case 'w': work_us = (unsigned)atoi(optarg); break;
		case 't': timeout_ms = (unsigned)atoi(optarg); break;
		case 's': seed = strtoull(optarg, NULL, 0); break;
		default: usage(argv[0]);
		}
	}
	if (argc - optind != 2 + (int)NPROC)
		usage(argv[0]);
	char phases[256];
	snprintf(phases, sizeof(phases), "%s", argv[optind]);
	self = (unsigned)atoi(argv[optind + 1]);
	int rc;
	if (dcdir) {
		struct dc_opts dco = { .dir = dcdir, .protocol = DC_MANUAL };
		rc = dc_init(&dco);
		if (rc)
			die("dc_init", rc);
		under_dc = true;
	}
	if (outfile) {
		out_fd = open(outfile, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (out_fd < 0) {
			perror(outfile);
			return 2;
		}
	}
	struct sbml_opts so = {
		.nprocs = NPROC,
		.self = self,
		.addrs = (const char *const *)&argv[optind + 2],
		.max_message = SBML_MAX_MESSAGE,
		.verbose = true,
		.timeout_ms = timeout_ms,
		.linger_ms = 500,
		.no_logging = no_logging,
	};
	rc = sbml_open(&so, &S);
	if (rc)
		die("sbml_open", rc);
	fprintf(stderr, "sbml-apps: process %u started\n", self);

	/* a start barrier, so that process 0 times the computation only */
	uint8_t hello = 1;
	size_t len;
	if (self == 0)
		for (unsigned w = 1; w < NPROC; w++)
			recv_from((int)w, &hello, 1, &len, NULL);
	else
		send_to(0, &hello, 1);

	double t_all = now_s();
	for (char *save = NULL, *ph = strtok_r(phases, ",", &save); ph;
	     ph = strtok_r(NULL, ",", &save)) {
		char *colon = strchr(ph, ':');
		if (!colon)
			usage(argv[0]);
		*colon = '\0';
		unsigned size = (unsigned)atoi(colon + 1);
		double t = now_s();
		if (!strcmp(ph, "nqueens") && size >= 4 && size <= 16)
			nqueens(size);
		else if (!strcmp(ph, "nqcalls") && size >= 4 && size <= 16)
			nqcalls(size);
		else if (!strcmp(ph, "tsp"))
			tsp(size);
		else if (!strcmp(ph, "gauss"))
			gauss(size);
		else if (!strcmp(ph, "ring"))
			ring(size);
		else
			usage(argv[0]);
		if (self == 0)
			fprintf(stderr, "sbml-apps: %s %u: %.6f s\n", ph, size,
				now_s() - t);
	}
	double elapsed = now_s() - t_all;

	rc = sbml_finish(S);
	if (rc)
		die("finish", rc);
	struct sbml_stats st;
	sbml_stats(S, &st);
	fprintf(stderr, "sbml-apps: process %u done: time=%.6f sent=%llu "
		"received=%llu log_max=%llu log_bytes_max=%llu log_now=%llu "
		"log_gc=%llu checkpoints=%llu recoveries=%llu replayed=%llu "
		"immediate=%llu piggybacked=%llu waited=%llu packets_out=%llu "
		"ctrl=%llu retransmits=%llu\n", self, elapsed,
		(unsigned long long)st.sent, (unsigned long long)st.received,
		(unsigned long long)st.log_entries_max,
		(unsigned long long)st.log_bytes_max,
		(unsigned long long)st.log_entries,
		(unsigned long long)st.log_gc_entries,
		(unsigned long long)st.checkpoints,
		(unsigned long long)st.recoveries,
		(unsigned long long)st.replayed,
		(unsigned long long)st.sends_immediate,
		(unsigned long long)st.sends_piggybacked,
		(unsigned long long)st.sends_waited,
		(unsigned long long)st.packets_out,
		(unsigned long long)st.ctrl_packets,
		(unsigned long long)st.retransmits);
	sbml_close(S);
	if (outfile)
		close(out_fd);
	return 0;
}
