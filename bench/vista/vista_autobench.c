/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vista_autobench.c -- cost of libvista's automatic ranges, per page
 *
 *   vista-autobench [-d DIR] [-n TX] [-p PAGES] [-l LINES] [-s STRIDE]
 *                   [-D byte|cacheline|page] [-H]
 *
 * Each transaction stores to LINES cache lines of each of PAGES pages,
 * STRIDE pages apart.  The pages rotate through the segment, so that
 * consecutive transactions touch other pages, or with -H are the same
 * pages every time (a program's hot pages: its stack, its counters).
 * Rows, each over TX transactions:
 *   explicit     the lines declared with one vista_set_ranges, committed:
 *                the baseline without faults
 *   auto, empty  an automatic transaction that stores nothing
 *   auto commit  VISTA_TX_AUTO, vista_end_transaction
 *   auto abort   VISTA_TX_AUTO, vista_abort_transaction
 *   auto chain   one chain of automatic transactions, each ended by
 *                vista_chain_transaction (hot pages stay open)
 * Columns: microseconds, median, of the store phase (with a write fault
 * per page not open yet: signal, hook, page logged and made durable, page
 * opened), of the end (commit, abort or chain), of the whole transaction,
 * and its 10th percentile; the same per page; and per transaction the
 * lines flushed, fences, and pages logged after a fault (vista_stats).
 * The segment lives in DIR (default /dev/shm); the persistence domain is
 * forced with -D (default cacheline).
 */
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <vista.h>

#include "rio_clock.h"

#define SEG_ADDR ((void *)0x5c0000000000ull)
#define PAGE 4096u

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

#define CHECK(call)                                                        \
	do {                                                               \
		int rc_ = (call);                                          \
		if (rc_) {                                                 \
			fprintf(stderr, "%s: %s: %s\n", #call,             \
				vista_strerror(rc_), vista_errormsg());    \
			exit(1);                                           \
		}                                                          \
	} while (0)

struct cfg {
	unsigned tx, pages, lines, stride;
	bool hot; /* every transaction stores to the same pages */
	size_t seg_pages;
};

struct result {
	uint64_t stores[2], end[2], total[2]; /* median, 10th percentile */
	double flushes, fences, faults;
};

enum mode { EXPLICIT, AUTO, AUTO_ABORT, AUTO_EMPTY, AUTO_CHAIN };

/* Page i of transaction t. */
static char *
page_of(char *base, const struct cfg *c, unsigned t, unsigned i)
{
	size_t span = (size_t)c->pages * c->stride;
	size_t slots = c->hot ? 1 : c->seg_pages / span;
	return base + ((t % slots) * span + (size_t)i * c->stride) * PAGE;
}

/* Line k of a page: spread over the page. */
static size_t
line_off(const struct cfg *c, unsigned k)
{
	return (size_t)(k * (64 / c->lines)) * 64 + 8;
}

static void
pct(uint64_t *v, unsigned n, uint64_t out[2])
{
	qsort(v, n, sizeof(*v), cmp_u64);
	out[0] = v[n / 2];
	out[1] = v[n / 10];
}

static struct result
run(vista *v, char *base, const struct cfg *c, enum mode m)
{
	uint64_t *st = malloc(c->tx * sizeof(*st)), *en = malloc(c->tx *
		sizeof(*en)), *tot = malloc(c->tx * sizeof(*tot));
	struct vista_range *r = malloc((size_t)c->pages * c->lines *
		sizeof(*r));
	struct vista_stats s0, s1;
	struct result res;

	if (st == NULL || en == NULL || tot == NULL || r == NULL) {
		fprintf(stderr, "out of memory\n");
		exit(1);
	}
	if (m == AUTO_CHAIN) /* one chain: every transaction but the first */
		CHECK(vista_begin_transaction(v, VISTA_TX_AUTO));
	CHECK(vista_stats(v, &s0));
	for (unsigned t = 0; t < c->tx; t++) {
		uint64_t t0 = rio_now_ns(CLOCK_MONOTONIC), t1, t2, t3;
		if (m != AUTO_CHAIN)
			CHECK(vista_begin_transaction(v, m == EXPLICIT ? 0 :
				VISTA_TX_AUTO));
		t1 = rio_now_ns(CLOCK_MONOTONIC);
		if (m == EXPLICIT) {
			size_t n = 0;
			for (unsigned i = 0; i < c->pages; i++)
				for (unsigned k = 0; k < c->lines; k++)
					r[n++] = (struct vista_range){
						page_of(base, c, t, i) +
							line_off(c, k), 1 };
			CHECK(vista_set_ranges(v, n, r));
		}
		for (unsigned i = 0; m != AUTO_EMPTY && i < c->pages; i++) {
			char *p = page_of(base, c, t, i);
			for (unsigned k = 0; k < c->lines; k++)
				p[line_off(c, k)] = (char)(t + k + 1);
		}
		t2 = rio_now_ns(CLOCK_MONOTONIC);
		if (m == AUTO_ABORT)
			CHECK(vista_abort_transaction(v));
		else if (m == AUTO_CHAIN)
			CHECK(vista_chain_transaction(v));
		else
			CHECK(vista_end_transaction(v));
		t3 = rio_now_ns(CLOCK_MONOTONIC);
		st[t] = t2 - t1;
		en[t] = t3 - t2;
		tot[t] = t3 - t0;
	}
	CHECK(vista_stats(v, &s1));
	if (m == AUTO_CHAIN)
		CHECK(vista_end_transaction(v));
	pct(st, c->tx, res.stores);
	pct(en, c->tx, res.end);
	pct(tot, c->tx, res.total);
	res.flushes = (double)(s1.flushes - s0.flushes) / c->tx;
	res.fences = (double)(s1.fences - s0.fences) / c->tx;
	res.faults = (double)(s1.auto_faults - s0.auto_faults) / c->tx;
	free(st);
	free(en);
	free(tot);
	free(r);
	return res;
}

static void
print(const char *what, const struct result *r, unsigned pages)
{
	printf("%-14s %8.2f %8.2f %8.2f %8.2f | %7.2f %7.2f %7.2f | "
	       "%7.1f %6.1f %6.1f\n", what,
		r->stores[0] / 1e3, r->end[0] / 1e3, r->total[0] / 1e3,
		r->total[1] / 1e3, r->stores[0] / 1e3 / pages,
		r->end[0] / 1e3 / pages, r->total[0] / 1e3 / pages,
		r->flushes, r->fences, r->faults);
}

int
main(int argc, char **argv)
{
	struct cfg c = { .tx = 2000, .pages = 1, .lines = 2, .stride = 1 };
	const char *dir = "/dev/shm", *domain = "cacheline";
	char log[4096], seg[4096];
	struct vista_opts o = { .log_path = log, .log_size = 64u << 20,
		.lanes = 2 };
	struct vista_segment *s;
	struct result r;
	vista *v;
	char *base;
	int opt;

	while ((opt = getopt(argc, argv, "d:n:p:l:s:D:H")) != -1) {
		switch (opt) {
		case 'd': dir = optarg; break;
		case 'n': c.tx = (unsigned)atoi(optarg); break;
		case 'p': c.pages = (unsigned)atoi(optarg); break;
		case 'l': c.lines = (unsigned)atoi(optarg); break;
		case 's': c.stride = (unsigned)atoi(optarg); break;
		case 'D': domain = optarg; break;
		case 'H': c.hot = true; break;
		default:
			fprintf(stderr, "usage: %s [-d DIR] [-n TX] [-p PAGES] "
				"[-l LINES] [-s STRIDE] [-D DOMAIN] [-H]\n",
				argv[0]);
			return 2;
		}
	}
	if (c.tx == 0 || c.pages == 0 || c.lines == 0 || c.lines > 64 ||
	    c.stride == 0) {
		fprintf(stderr, "%s: bad arguments\n", argv[0]);
		return 2;
	}
	if (strcmp(domain, "byte") == 0)
		o.rio_flags = RIO_FORCE_BYTE;
	else if (strcmp(domain, "cacheline") == 0)
		o.rio_flags = RIO_FORCE_CACHELINE;
	else if (strcmp(domain, "page") == 0)
		o.rio_flags = RIO_FORCE_PAGE;
	else {
		fprintf(stderr, "%s: unknown domain %s\n", argv[0], domain);
		return 2;
	}
	c.seg_pages = (size_t)c.pages * c.stride * 64;
	snprintf(log, sizeof(log), "%s/vista-autobench-%d.log", dir, getpid());
	snprintf(seg, sizeof(seg), "%s/vista-autobench-%d.seg", dir, getpid());
	CHECK(vista_init(&o, &v));
	CHECK(vista_map(v, seg, SEG_ADDR, c.seg_pages * PAGE,
		VISTA_CREATE | VISTA_EXCL, &s));
	base = vista_segment_base(s);

	printf("%s domain, %u tx of %u page(s) %u apart, %u line(s) stored "
	       "per page, %s\n", domain, c.tx, c.pages, c.stride, c.lines,
		c.hot ? "the same pages every transaction (-H)" :
			"other pages each transaction");
	printf("%-14s %8s %8s %8s %8s | %7s %7s %7s | %7s %6s %6s\n",
		"us (median)", "stores", "end", "total", "tot p10", "st/pg",
		"end/pg", "tot/pg", "flushes", "fences", "faults");
	/* Explicit first: the first automatic transaction protects the
	 * segment for good. */
	r = run(v, base, &c, EXPLICIT);
	print("explicit", &r, c.pages);
	(void)run(v, base, &c, AUTO); /* warm up: protected, in cache */
	r = run(v, base, &c, AUTO_EMPTY);
	print("auto, empty", &r, 1);
	r = run(v, base, &c, AUTO);
	print("auto commit", &r, c.pages);
	r = run(v, base, &c, AUTO_ABORT);
	print("auto abort", &r, c.pages);
	r = run(v, base, &c, AUTO_CHAIN);
	print("auto chain", &r, c.pages);

	CHECK(vista_fini(v));
	unlink(log);
	unlink(seg);
	return 0;
}
