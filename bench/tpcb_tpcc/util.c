/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * util.c -- clocks, files, memory census and the fence-latency probe
 *
 * Design:
 *  1. Memory is reported two ways: the process's RSS (VmRSS), and its
 *     footprint = anonymous RSS + every page of the backend's files held
 *     in the page cache (mincore), so a database copied into the process
 *     AND cached by the file system (RVM's double buffering) counts twice,
 *     and a mapped pool (vista, pmemobj) counts once.
 *  2. The persistence probe works through librio's choke point
 *     (rio_persist) on a pool forced to the cacheline domain: exactly the
 *     instructions vista's persists cost (clwb or clflushopt, by CPUID,
 *     then sfence).  It times one dirty line per fence, and a page of
 *     dirty lines per fence, whose difference prices each extra line.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rio.h"
#include "tpcbench.h"

void
tb_err(const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "tpcbench: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

const char *
tb_domain_name(enum tb_domain d)
{
	switch (d) {
	case TB_DOMAIN_BYTE:
		return "byte";
	case TB_DOMAIN_CACHELINE:
		return "cacheline";
	case TB_DOMAIN_PAGE:
		return "page";
	default:
		return "-";
	}
}

unsigned
tb_rio_force_flag(enum tb_domain d)
{
	switch (d) {
	case TB_DOMAIN_BYTE:
		return RIO_FORCE_BYTE;
	case TB_DOMAIN_PAGE:
		return RIO_FORCE_PAGE;
	default:
		return RIO_FORCE_CACHELINE;
	}
}

int
tb_mkdirs(const char *path)
{
	char buf[4096];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf)) {
		tb_err("path too long: %s", path);
		return -1;
	}
	for (char *p = buf + 1;; p++) {
		char c = *p;
		if (c == '/' || c == 0) {
			*p = 0;
			if (mkdir(buf, 0755) && errno != EEXIST) {
				tb_err("mkdir %s: %s", buf, strerror(errno));
				return -1;
			}
			*p = c;
		}
		if (c == 0)
			return 0;
	}
}

int
tb_workdir(const struct tb_opts *o, char *buf, size_t n, const char *base)
{
	if (o->work_dir != NULL)
		snprintf(buf, n, "%s", o->work_dir);
	else
		snprintf(buf, n, "%s/tpcbench.%d", base, (int)getpid());
	return tb_mkdirs(buf);
}

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	remove(p);
	return 0;
}

void
tb_rmtree(const char *path)
{
	nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

void
tb_rss(uint64_t *rss, uint64_t *anon)
{
	*rss = *anon = 0;
	FILE *f = fopen("/proc/self/status", "r");
	if (f == NULL)
		return;
	char line[256];
	unsigned long long kb;
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "VmRSS: %llu kB", &kb) == 1)
			*rss = kb * 1024;
		else if (sscanf(line, "RssAnon: %llu kB", &kb) == 1)
			*anon = kb * 1024;
	}
	fclose(f);
}

uint64_t
tb_cached(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	struct stat st;
	uint64_t n = 0;
	long page = sysconf(_SC_PAGESIZE);
	if (fstat(fd, &st) == 0 && st.st_size > 0) {
		size_t len = (size_t)st.st_size;
		void *m = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
		size_t pages = (len + (size_t)page - 1) / (size_t)page;
		unsigned char *v = malloc(pages);
		if (m != MAP_FAILED && v && mincore(m, len, v) == 0)
			for (size_t i = 0; i < pages; i++)
				n += v[i] & 1;
		free(v);
		if (m != MAP_FAILED)
			munmap(m, len);
	}
	close(fd);
	return n * (uint64_t)page;
}

static uint64_t
best_of(int reps, uint64_t (*probe)(rio_pool *, volatile uint64_t *),
	rio_pool *p, volatile uint64_t *w)
{
	uint64_t best = UINT64_MAX;
	for (int rep = 0; rep < reps; rep++) {
		uint64_t t = probe(p, w);
		best = t < best ? t : best;
	}
	return best;
}

#define PROBE_ITERS 200000
#define PROBE_LINES 64 /* one page of lines */

/* One dirty line made durable at a time. */
static uint64_t
probe_one(rio_pool *p, volatile uint64_t *w)
{
	uint64_t t0 = tb_now_ns();
	for (int i = 0; i < PROBE_ITERS; i++) {
		volatile uint64_t *x = w + (size_t)(i % PROBE_LINES) * 8;
		*x = (uint64_t)i;
		/* The probe itself: this dirty line durable. */
		rio_persist(p, (const void *)x, sizeof(*x));
	}
	return tb_now_ns() - t0;
}

/* A page of dirty lines made durable together: one flush each, one
 * fence. */
static uint64_t
probe_page(rio_pool *p, volatile uint64_t *w)
{
	uint64_t t0 = tb_now_ns();
	for (int i = 0; i < PROBE_ITERS / PROBE_LINES; i++) {
		for (int j = 0; j < PROBE_LINES; j++)
			w[j * 8] = (uint64_t)i;
		/* The probe itself: the whole page durable, one fence. */
		rio_persist(p, (const void *)w, PROBE_LINES * 64);
	}
	return tb_now_ns() - t0;
}

struct tb_persist_cost
tb_persist_cost(const char *dir)
{
	struct tb_persist_cost c = { 0, 0 };
	char path[4096];
	snprintf(path, sizeof(path), "%s/tpcbench-fence.%d", dir, (int)getpid());
	rio_pool *p;
	int rc = rio_pool_create(path, 1 << 20, RIO_FORCE_CACHELINE |
		RIO_NO_SIGNALS, &p);
	if (rc) {
		tb_err("fence probe pool %s: %s", path, rio_errormsg());
		return c;
	}
	volatile uint64_t *w = rio_pool_base(p);
	c.fence_ns = (double)best_of(5, probe_one, p, w) / PROBE_ITERS;
	double page = (double)best_of(5, probe_page, p, w) /
		(PROBE_ITERS / PROBE_LINES);
	c.line_ns = (page - c.fence_ns) / (PROBE_LINES - 1);
	if (c.line_ns < 0)
		c.line_ns = 0;
	rio_pool_close(p);
	unlink(path);
	return c;
}

unsigned
tb_lat_bucket(uint64_t ns)
{
	if (ns < 128)
		return 0;
	unsigned e = 63u - (unsigned)__builtin_clzll(ns); /* ns in [2^e, 2^e+1) */
	unsigned b = (e - 7) * 32 + (unsigned)((ns >> (e - 5)) & 31);
	return b < TB_LAT_BUCKETS - 1 ? b : TB_LAT_BUCKETS - 1;
}

double
tb_lat_quantile(const uint64_t *h, double q)
{
	uint64_t total = 0, seen = 0;
	for (unsigned i = 0; i < TB_LAT_BUCKETS; i++)
		total += h[i];
	if (total == 0)
		return 0;
	uint64_t want = (uint64_t)(q * (double)total);
	for (unsigned i = 0; i < TB_LAT_BUCKETS; i++) {
		seen += h[i];
		if (seen > want) {
			/* The bucket's middle. */
			unsigned e = i / 32 + 7, s = i % 32;
			double lo = (double)(1ull << e) * (1.0 + s / 32.0);
			return lo * (1.0 + 1.0 / 64.0);
		}
	}
	return (double)(1ull << 28);
}
