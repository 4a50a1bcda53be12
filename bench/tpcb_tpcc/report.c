/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report.c -- CSV rows and the tables printed from them
 *
 * Design:
 *  1. Method of the thesis (section 3.5.1): of a configuration's runs
 *     (5 by default), the best and the worst by throughput are dropped
 *     and the middle ones averaged; min / median / max are printed too.
 *     With fewer than 3 runs every run is averaged.
 *  2. ns/tx is the inverse of aggregate throughput (all streams), and
 *     overhead is ns/tx minus that of "none" in the same workload,
 *     threads and transaction size.
 *  3. Ratios compare vista in each domain with every other backend
 *     (throughput of vista / throughput of X); the targets say which
 *     domain each is measured in.  The fence floor of a cacheline
 *     configuration that counts its fences (vista first) is none's
 *     ns/tx + its fences/tx x the measured fence latency.
 *  4. Nothing here decides success: the report states what was measured
 *     against the targets; invariant violations already failed the run.
 *  5. Replicated rows (--replica) carry six more columns: bytes sent to
 *     the backup by kind and commit latency; rows without them (24
 *     columns, older files) still parse.  Their table puts each mode
 *     beside standalone vista of the same run.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rio.h"
#include "tpcbench_int.h"

const char tb_csv_header[] =
	"workload,backend,label,domain,group,threads,db_bytes,tx_size,run,tx,"
	"aborts,seconds,tx_per_s,ns_per_tx,fences,flushes,bytes_logged,syncs,"
	"log_writes,truncations,rss_bytes,mem_bytes,fence_ns,env,sent_data,"
	"sent_undo,sent_meta,sent_total,lat_med_us,lat_p99_us";

static void
opt_u64(FILE *f, bool has, uint64_t v)
{
	if (has)
		fprintf(f, ",%llu", (unsigned long long)v);
	else
		fputs(",", f);
}

void
tb_row_write(FILE *f, const struct tb_row *r)
{
	double tps = r->seconds > 0 ? (double)r->tx / r->seconds : 0;
	fprintf(f, "%s,%s,%s,%s,%d,%d,%llu,%llu,%d,%llu,%llu,%.6f,%.1f,%.1f",
		r->workload, r->backend, r->label, r->domain, r->group,
		r->threads, (unsigned long long)r->db_bytes,
		(unsigned long long)r->tx_size, r->run,
		(unsigned long long)r->tx, (unsigned long long)r->aborts,
		r->seconds, tps, tps > 0 ? 1e9 / tps : 0);
	opt_u64(f, r->has_fences, r->fences);
	opt_u64(f, r->has_fences, r->flushes);
	opt_u64(f, r->has_log, r->bytes_logged);
	opt_u64(f, r->has_syncs, r->syncs);
	opt_u64(f, r->has_syncs, r->log_writes);
	opt_u64(f, r->has_syncs, r->truncations);
	fprintf(f, ",%llu,%llu,", (unsigned long long)r->rss,
		(unsigned long long)r->mem);
	if (r->fence_ns > 0)
		fprintf(f, "%.1f", r->fence_ns);
	fprintf(f, ",%s", r->env);
	opt_u64(f, r->has_repl, r->sent_data);
	opt_u64(f, r->has_repl, r->sent_undo);
	opt_u64(f, r->has_repl, r->sent_meta);
	opt_u64(f, r->has_repl, r->sent_total);
	if (r->has_repl)
		fprintf(f, ",%.2f,%.2f\n", r->lat_med_us, r->lat_p99_us);
	else
		fputs(",,\n", f);
	fflush(f);
}

/* Split line at commas into at most max fields (in place). */
static int
split(char *line, char **field, int max)
{
	int n = 0;
	char *p = line;
	while (n < max) {
		field[n++] = p;
		char *c = strchr(p, ',');
		if (c == NULL)
			break;
		*c = 0;
		p = c + 1;
	}
	char *nl = strchr(field[n - 1], '\n');
	if (nl)
		*nl = 0;
	return n;
}

static void
copy(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src);
}

int
tb_row_parse(const char *line, struct tb_row *r)
{
	char buf[1024];
	char *f[30];
	copy(buf, sizeof(buf), line);
	int nf = split(buf, f, 30);
	if ((nf != 24 && nf != 30) || strcmp(f[0], "workload") == 0)
		return -1;
	memset(r, 0, sizeof(*r));
	copy(r->workload, sizeof(r->workload), f[0]);
	copy(r->backend, sizeof(r->backend), f[1]);
	copy(r->label, sizeof(r->label), f[2]);
	copy(r->domain, sizeof(r->domain), f[3]);
	r->group = atoi(f[4]);
	r->threads = atoi(f[5]);
	r->db_bytes = strtoull(f[6], NULL, 10);
	r->tx_size = strtoull(f[7], NULL, 10);
	r->run = atoi(f[8]);
	r->tx = strtoull(f[9], NULL, 10);
	r->aborts = strtoull(f[10], NULL, 10);
	r->seconds = strtod(f[11], NULL);
	r->has_fences = f[14][0] != 0;
	r->fences = strtoull(f[14], NULL, 10);
	r->flushes = strtoull(f[15], NULL, 10);
	r->has_log = f[16][0] != 0;
	r->bytes_logged = strtoull(f[16], NULL, 10);
	r->has_syncs = f[17][0] != 0;
	r->syncs = strtoull(f[17], NULL, 10);
	r->log_writes = strtoull(f[18], NULL, 10);
	r->truncations = strtoull(f[19], NULL, 10);
	r->rss = strtoull(f[20], NULL, 10);
	r->mem = strtoull(f[21], NULL, 10);
	r->fence_ns = strtod(f[22], NULL);
	copy(r->env, sizeof(r->env), f[23]);
	if (nf == 30 && f[24][0] != 0) {
		r->has_repl = true;
		r->sent_data = strtoull(f[24], NULL, 10);
		r->sent_undo = strtoull(f[25], NULL, 10);
		r->sent_meta = strtoull(f[26], NULL, 10);
		r->sent_total = strtoull(f[27], NULL, 10);
		r->lat_med_us = strtod(f[28], NULL);
		r->lat_p99_us = strtod(f[29], NULL);
	}
	return 0;
}

/* ---- aggregation ---- */

struct agg {
	const struct tb_row *first;
	double tps, min, median, max; /* tx/s */
	double ns;                    /* 1e9 / tps */
	double fences, flushes, logged, syncs; /* per tx, middle runs */
	uint64_t truncations, rss, mem, aborts, tx;
	int runs;
	/* --replica, middle runs: bytes sent per tx, latency (us). */
	double sent_data, sent_undo, sent_meta, sent_total, lat_med, lat_p99;
};

static int
by_tps(const void *a, const void *b)
{
	const struct tb_row *x = *(const struct tb_row *const *)a;
	const struct tb_row *y = *(const struct tb_row *const *)b;
	double p = (double)x->tx / x->seconds, q = (double)y->tx / y->seconds;
	return (p > q) - (p < q);
}

static bool
same_config(const struct tb_row *a, const struct tb_row *b)
{
	return !strcmp(a->workload, b->workload) &&
		!strcmp(a->label, b->label) && a->threads == b->threads &&
		a->tx_size == b->tx_size && a->db_bytes == b->db_bytes;
}

static void
aggregate(const struct tb_row *rows, size_t n, const struct tb_row *key,
	struct agg *g)
{
	const struct tb_row *v[64];
	int k = 0;
	for (size_t i = 0; i < n && k < 64; i++)
		if (same_config(&rows[i], key))
			v[k++] = &rows[i];
	memset(g, 0, sizeof(*g));
	g->first = key;
	g->runs = k;
	qsort(v, (size_t)k, sizeof(v[0]), by_tps);
	int lo = k >= 3 ? 1 : 0, hi = k >= 3 ? k - 1 : k;
	double sum = 0, tx = 0, fences = 0, flushes = 0, logged = 0, syncs = 0;
	for (int i = lo; i < hi; i++) {
		sum += (double)v[i]->tx / v[i]->seconds;
		tx += (double)v[i]->tx;
		fences += (double)v[i]->fences;
		flushes += (double)v[i]->flushes;
		logged += (double)v[i]->bytes_logged;
		syncs += (double)v[i]->syncs;
		g->sent_data += (double)v[i]->sent_data;
		g->sent_undo += (double)v[i]->sent_undo;
		g->sent_meta += (double)v[i]->sent_meta;
		g->sent_total += (double)v[i]->sent_total;
		g->lat_med += v[i]->lat_med_us / (hi - lo);
		g->lat_p99 += v[i]->lat_p99_us / (hi - lo);
	}
	g->sent_data /= tx;
	g->sent_undo /= tx;
	g->sent_meta /= tx;
	g->sent_total /= tx;
	for (int i = 0; i < k; i++) {
		g->truncations += v[i]->truncations;
		g->aborts += v[i]->aborts;
		g->tx += v[i]->tx;
		g->rss = v[i]->rss > g->rss ? v[i]->rss : g->rss;
		g->mem = v[i]->mem > g->mem ? v[i]->mem : g->mem;
	}
	g->tps = sum / (hi - lo);
	g->ns = 1e9 / g->tps;
	g->min = (double)v[0]->tx / v[0]->seconds;
	g->max = (double)v[k - 1]->tx / v[k - 1]->seconds;
	g->median = k % 2 ? (double)v[k / 2]->tx / v[k / 2]->seconds :
		((double)v[k / 2 - 1]->tx / v[k / 2 - 1]->seconds +
		 (double)v[k / 2]->tx / v[k / 2]->seconds) / 2;
	g->fences = fences / tx;
	g->flushes = flushes / tx;
	g->logged = logged / tx;
	g->syncs = syncs / tx;
}

/* The distinct configurations of one workload / threads / tx size. */
static size_t
configs(const struct tb_row *rows, size_t n, const char *wl, int threads,
	uint64_t tx_size, struct agg *out, size_t max)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k < max; i++) {
		const struct tb_row *r = &rows[i];
		if (strcmp(r->workload, wl) || r->threads != threads ||
		    r->tx_size != tx_size)
			continue;
		bool seen = false;
		for (size_t j = 0; j < k && !seen; j++)
			seen = same_config(out[j].first, r);
		if (!seen)
			aggregate(rows, n, r, &out[k++]);
	}
	return k;
}

static const struct agg *
find(const struct agg *a, size_t n, const char *backend, const char *domain,
	int group)
{
	for (size_t i = 0; i < n; i++)
		if (!strcmp(a[i].first->backend, backend) &&
		    (domain == NULL || !strcmp(a[i].first->domain, domain)) &&
		    (group == 0 || a[i].first->group == group))
			return &a[i];
	return NULL;
}

static void
human(char *buf, size_t n, double v)
{
	if (v >= 1e6)
		snprintf(buf, n, "%.2fM", v / 1e6);
	else if (v >= 1e3)
		snprintf(buf, n, "%.1fk", v / 1e3);
	else
		snprintf(buf, n, "%.1f", v);
}

static void
target(FILE *out, const char *what, double got, double want, bool at_least,
	const char *unit)
{
	if (isnan(got)) {
		fprintf(out, "  %-50s  not measured (backend missing)\n", what);
		return;
	}
	bool met = at_least ? got >= want : got <= want;
	fprintf(out, "  %-50s  %9.2f%s  target %s %.2f%s  %s\n", what, got,
		unit, at_least ? ">=" : "<=", want, unit,
		met ? "met" : "MISSED");
}

static double
ratio(const struct agg *a, const struct agg *b)
{
	return a && b ? a->tps / b->tps : NAN;
}

static void
table(FILE *out, const struct agg *a, size_t n, const char *title,
	struct tb_persist_cost cost)
{
	double fence_ns = cost.fence_ns;
	const struct agg *none = find(a, n, "none", NULL, 0);
	const char *dom[3] = { "byte", "cacheline", "page" };
	const struct agg *vis[3];
	for (int i = 0; i < 3; i++)
		vis[i] = find(a, n, "vista", dom[i], 0);

	fprintf(out, "\n== %s ==\n", title);
	fprintf(out, "%-52s %9s %9s %9s %9s %10s %10s %9s %9s %9s %8s %6s %7s "
		"%7s\n", "backend", "tx/s", "min", "median", "max", "ns/tx",
		"overhead", "fences/tx", "lines/tx", "logB/tx", "syncs/tx",
		"trunc", "RSS MB", "mem MB");
	for (size_t i = 0; i < n; i++) {
		const struct agg *g = &a[i];
		char t[4][16];
		human(t[0], 16, g->tps);
		human(t[1], 16, g->min);
		human(t[2], 16, g->median);
		human(t[3], 16, g->max);
		char ov[16] = "-", fe[16] = "-", li[16] = "-", lg[16] = "-",
		     sy[16] = "-", tr[16] = "-";
		if (none && g != none)
			snprintf(ov, 16, "%.0f", g->ns - none->ns);
		if (g->first->has_fences) {
			snprintf(fe, 16, "%.2f", g->fences);
			snprintf(li, 16, "%.1f", g->flushes); /* lines written back */
		}
		if (g->first->has_log)
			snprintf(lg, 16, "%.0f", g->logged);
		if (g->first->has_syncs) {
			snprintf(sy, 16, "%.3f", g->syncs);
			snprintf(tr, 16, "%llu",
				(unsigned long long)g->truncations);
		}
		fprintf(out, "%-52s %9s %9s %9s %9s %10.0f %10s %9s %9s %9s %8s "
			"%6s %7.1f %7.1f\n", g->first->label, t[0], t[1], t[2],
			t[3], g->ns, ov, fe, li, lg, sy, tr, g->rss / 1048576.0,
			g->mem / 1048576.0);
	}
	/* Ratios: vista in each domain over every other backend. */
	if (vis[0] || vis[1] || vis[2]) {
		fprintf(out, "\n%-52s %14s %14s %14s\n", "ratio vista/X (tx/s)",
			"vista byte", "vista cline", "vista page");
		for (size_t i = 0; i < n; i++) {
			if (!strcmp(a[i].first->backend, "vista"))
				continue;
			fprintf(out, "%-52s", a[i].first->label);
			for (int d = 0; d < 3; d++) {
				double r = ratio(vis[d], &a[i]);
				if (isnan(r))
					fprintf(out, " %14s", "-");
				else
					fprintf(out, " %13.1fx", r);
			}
			fputc('\n', out);
		}
	}
	/* The fence floor of every cacheline configuration that counts
	 * its fences (vista's Versions, trinity, quadra), vista first. */
	for (size_t k = 0; none && fence_ns > 0 && k <= n; k++) {
		const struct agg *g = k == 0 ? vis[1] : &a[k - 1];
		if (g == NULL || (k > 0 && g == vis[1]) ||
		    !g->first->has_fences ||
		    strcmp(g->first->domain, "cacheline"))
			continue;
		const char *name = g == vis[1] ? "vista cacheline" :
			g->first->label;
		double floor = none->ns + g->fences * fence_ns;
		double lines = g->flushes - g->fences;
		fprintf(out, "%s fence floor = none %.0f ns + %.2f fences/tx x "
			"%.1f ns = %.0f ns/tx; %s %.0f ns/tx = %.2f x floor\n",
			name, none->ns, g->fences, fence_ns, floor, name, g->ns,
			g->ns / floor);
		if (lines > 0)
			fprintf(out, "  with its other %.1f flushed lines/tx at "
				"%.1f ns each: %.0f ns/tx; %s = %.2f x that\n",
				lines, cost.line_ns, floor + lines * cost.line_ns,
				g == vis[1] ? "vista" : g->first->backend,
				g->ns / (floor + lines * cost.line_ns));
	}
	for (size_t i = 0; i < n; i++)
		if (a[i].first->env[0]) {
			fprintf(out, "environment of %s: %s\n", a[i].first->label,
				a[i].first->env);
		}
}

/* --replica: each mode beside standalone vista of the same domain. */
static void
replicas(FILE *out, const struct agg *a, size_t n, const char *title)
{
	bool any = false;
	for (size_t i = 0; i < n; i++)
		any |= a[i].first->has_repl;
	if (!any)
		return;
	fprintf(out, "\n== %s: replicated (bytes sent per tx; commit latency) "
		"==\n%-52s %9s %7s %8s %8s %8s %8s %9s %9s\n", title, "backend",
		"tx/s", "ratio", "data B", "undo B", "meta B", "total B",
		"lat med", "lat p99");
	for (size_t i = 0; i < n; i++) {
		const struct agg *g = &a[i];
		if (!g->first->has_repl)
			continue;
		const struct agg *sa = find(a, n, "vista", g->first->domain, 0);
		char t[16], r[16] = "-";
		human(t, 16, g->tps);
		if (sa)
			snprintf(r, 16, "%.3f", g->tps / sa->tps);
		fprintf(out, "%-52s %9s %7s %8.1f %8.1f %8.1f %8.1f %7.1fus "
			"%7.1fus\n", g->first->label, t, r, g->sent_data,
			g->sent_undo, g->sent_meta, g->sent_total, g->lat_med,
			g->lat_p99);
	}
}

static void
targets(FILE *out, const struct agg *a, size_t n, const char *wl,
	double fence_ns)
{
	bool dc = !strcmp(wl, "debit-credit");
	const struct agg *vb = find(a, n, "vista", "byte", 0);
	const struct agg *vc = find(a, n, "vista", "cacheline", 0);
	const struct agg *pb = find(a, n, "pmemobj", "byte", 0);
	const struct agg *pc = find(a, n, "pmemobj", "cacheline", 0);
	const struct agg *rv = find(a, n, "rvm", NULL, 1);
	const struct agg *rr = find(a, n, "rvm-rio", "cacheline", 1);
	const struct agg *none = find(a, n, "none", NULL, 0);
	fprintf(out, "\ntargets (%s; reported, not asserted):\n", wl);
	target(out, "vista/pmemobj, cacheline domain", ratio(vc, pc),
		dc ? 2 : 1.5, true, "x");
	target(out, "vista/pmemobj, byte domain", ratio(vb, pb), dc ? 10 : 5,
		true, "x");
	if (dc) {
		target(out, "vista (cacheline)/rvm on disk, flush, group 1",
			ratio(vc, rv), 100, true, "x");
		target(out, "vista (cacheline)/rvm-rio (cacheline), group 1",
			ratio(vc, rr), 10, true, "x");
	}
	if (vc && none && fence_ns > 0 && vc->first->has_fences)
		target(out, "vista cacheline ns/tx over its fence floor",
			vc->ns / (none->ns + vc->fences * fence_ns), 1.3, false,
			"x");
	/* The commit's cost over no atomicity, in fences of this run. */
	if (vc && none && fence_ns > 0)
		target(out, "vista cacheline (ns/tx - none) / fence latency",
			(vc->ns - none->ns) / fence_ns, 2.5, false, "");
	if (vb && none)
		target(out, "vista byte ns/tx - none, ns", vb->ns - none->ns,
			150, false, "");
	for (int i = 0; i < 2; i++) {
		const struct agg *v = i ? vc : vb;
		if (v == NULL)
			continue;
		double db = (double)v->first->db_bytes * v->first->threads;
		char what[80];
		snprintf(what, sizeof(what), "vista (%s) RSS, MB (one copy: "
			"1.05 x DB + 8)", v->first->domain);
		target(out, what, v->rss / 1048576.0,
			(1.05 * db + 8 * 1048576.0) / 1048576.0, false, "");
	}
	fprintf(out, "thesis (1999): vista/rvm-rio %s, vista/rvm %s\n",
		dc ? "41x" : "14x", dc ? "556x" : "150x");
}

static void
synthetic(FILE *out, const struct tb_row *rows, size_t n, int threads)
{
	uint64_t sizes[32];
	size_t ns = 0;
	for (size_t i = 0; i < n; i++) {
		if (strcmp(rows[i].workload, "synthetic") ||
		    rows[i].threads != threads)
			continue;
		bool seen = false;
		for (size_t j = 0; j < ns; j++)
			seen |= sizes[j] == rows[i].tx_size;
		if (!seen && ns < 32)
			sizes[ns++] = rows[i].tx_size;
	}
	if (ns == 0)
		return;
	for (size_t i = 1; i < ns; i++) /* sort sizes */
		for (size_t j = i; j > 0 && sizes[j] < sizes[j - 1]; j--) {
			uint64_t t = sizes[j];
			sizes[j] = sizes[j - 1];
			sizes[j - 1] = t;
		}
	static struct agg a[64];
	for (size_t s = 0; s < ns; s++) {
		size_t k = configs(rows, n, "synthetic", threads, sizes[s], a, 64);
		char title[96];
		snprintf(title, sizeof(title), "synthetic, %llu-byte transactions"
			", %d stream(s)", (unsigned long long)sizes[s], threads);
		table(out, a, k, title, (struct tb_persist_cost){ 0, 0 });
	}
	/* Figure 3.4: overhead (ns/tx over none) by size. */
	fprintf(out, "\n== synthetic: overhead per transaction, ns (thesis "
		"Fig. 3.4) ==\n%-52s", "backend");
	for (size_t s = 0; s < ns; s++)
		fprintf(out, " %9llu", (unsigned long long)sizes[s]);
	fputc('\n', out);
	size_t k0 = configs(rows, n, "synthetic", threads, sizes[0], a, 64);
	static struct agg b[64];
	for (size_t c = 0; c < k0; c++) {
		if (!strcmp(a[c].first->backend, "none"))
			continue;
		char label[96];
		copy(label, sizeof(label), a[c].first->label);
		fprintf(out, "%-52s", label);
		for (size_t s = 0; s < ns; s++) {
			size_t k = configs(rows, n, "synthetic", threads,
				sizes[s], b, 64);
			const struct agg *none = find(b, k, "none", NULL, 0);
			const struct agg *x = NULL;
			for (size_t j = 0; j < k; j++)
				if (!strcmp(b[j].first->label, label))
					x = &b[j];
			if (x && none)
				fprintf(out, " %9.0f", x->ns - none->ns);
			else
				fprintf(out, " %9s", "-");
		}
		fputc('\n', out);
	}
	const struct agg *vb = NULL, *none = NULL;
	size_t k = configs(rows, n, "synthetic", threads, 8, b, 64);
	vb = find(b, k, "vista", "byte", 0);
	none = find(b, k, "none", NULL, 0);
	fprintf(out, "\ntargets (synthetic; reported, not asserted):\n");
	target(out, "vista byte-domain overhead, 8-byte transactions",
		vb && none ? vb->ns - none->ns : NAN, 30, false, " ns");
}

void
tb_report(FILE *out, const struct tb_row *rows, size_t n,
	struct tb_persist_cost cost)
{
	static struct agg a[64];
	double fence_ns = cost.fence_ns;
	fprintf(out, "fence latency (store + %s + sfence of a dirty line, "
		"through rio_persist): %.1f ns; each further line flushed "
		"before the same sfence: %.1f ns\n", rio_flush_instruction(),
		fence_ns, cost.line_ns);
	for (int threads = 1; threads <= TB_MAX_STREAMS; threads++) {
		for (int w = 0; w < 2; w++) {
			const char *wl = w ? "order-entry" : "debit-credit";
			size_t k = configs(rows, n, wl, threads, 0, a, 64);
			if (k == 0)
				continue;
			char title[96];
			snprintf(title, sizeof(title), "%s, %d stream(s), %.0f MB "
				"each", wl, threads,
				a[0].first->db_bytes / 1048576.0);
			table(out, a, k, title, cost);
			replicas(out, a, k, title);
			if (threads == 1)
				targets(out, a, k, wl, fence_ns);
		}
		synthetic(out, rows, n, threads);
	}
}

void
tb_summary(FILE *out, const struct tb_row *rows, size_t n)
{
	static struct agg a[64];
	fprintf(out, "workload,label,backend,domain,group,threads,tx_size,"
		"tx_per_s,ns_per_tx,overhead_ns,min_tx_per_s,median_tx_per_s,"
		"max_tx_per_s,rss_bytes,mem_bytes\n");
	/* Every (workload, threads, tx size) seen, in first-seen order. */
	for (size_t i = 0; i < n; i++) {
		bool seen = false;
		for (size_t j = 0; j < i && !seen; j++)
			seen = !strcmp(rows[j].workload, rows[i].workload) &&
				rows[j].threads == rows[i].threads &&
				rows[j].tx_size == rows[i].tx_size;
		if (seen)
			continue;
		size_t k = configs(rows, n, rows[i].workload, rows[i].threads,
			rows[i].tx_size, a, 64);
		const struct agg *none = find(a, k, "none", NULL, 0);
		for (size_t j = 0; j < k; j++) {
			const struct tb_row *r = a[j].first;
			fprintf(out, "%s,%s,%s,%s,%d,%d,%llu,%.1f,%.1f,", r->workload,
				r->label, r->backend, r->domain, r->group,
				r->threads, (unsigned long long)r->tx_size,
				a[j].tps, a[j].ns);
			if (none)
				fprintf(out, "%.1f", a[j].ns - none->ns);
			fprintf(out, ",%.1f,%.1f,%.1f,%llu,%llu\n", a[j].min,
				a[j].median, a[j].max,
				(unsigned long long)a[j].rss,
				(unsigned long long)a[j].mem);
		}
	}
}
