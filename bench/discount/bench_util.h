/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bench_util.h -- what the Figure 5.2 benchmarks share (micro.c, wp.c):
 *                 clocks, the store loop, the command line
 *
 * Invariants: touch() stores one byte per 4 KiB page, so N bytes touched
 * is N / 4096 pages written; options are --quick, --dir D, --csv FILE.
 */
#ifndef DC_BENCH_UTIL_H
#define DC_BENCH_UTIL_H

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "rio_clock.h"

/* bytes touched per interval: Figure 5.2's x axis */
static const size_t bench_sizes[] = { 0, 4096, 16384, 65536, 262144,
	1048576 };
#define BENCH_NSIZES (sizeof(bench_sizes) / sizeof(bench_sizes[0]))

static inline double
bench_now_us(clockid_t c)
{
	return (double)rio_now_ns(c) / 1e3;
}

static inline void
bench_touch(volatile char *p, size_t bytes)
{
	for (size_t o = 0; o < bytes; o += 4096)
		p[o]++;
}

struct bench_args {
	bool quick;
	const char *dir, *csv;
};

static inline void
bench_parse(int argc, char **argv, const char *name, struct bench_args *a)
{
	static const struct option lo[] = { { "quick", 0, 0, 'q' },
		{ "dir", 1, 0, 'd' }, { "csv", 1, 0, 'c' }, { 0, 0, 0, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "qd:c:", lo, NULL)) != -1) {
		switch (c) {
		case 'q': a->quick = true; break;
		case 'd': a->dir = optarg; break;
		case 'c': a->csv = optarg; break;
		default:
			fprintf(stderr, "usage: %s [--quick] [--dir D] "
				"[--csv FILE]\n", name);
			exit(2);
		}
	}
}

#endif /* DC_BENCH_UTIL_H */
