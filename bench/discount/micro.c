/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * micro.c -- thesis Figure 5.2: overhead per checkpoint vs bytes touched
 *
 *   dc-bench-micro [--quick] [--dir D] [--csv FILE]
 *
 * A loop touches N bytes (one store per 4 KiB page of a 1 MiB buffer) and
 * takes a checkpoint (dc_checkpoint, manual protocol).  For each N it
 * reports
 *   ckpt      the dc_checkpoint call alone (timed with the TSC: under libdc
 *             a clock read is itself an intercepted system call);
 *   overhead  one loop iteration minus the same stores before dc_init:
 *             the call plus what tracking costs the program (the first
 *             write to each page after a checkpoint faults once);
 *   per page  (overhead(N) - overhead(0)) / pages.
 * N = 0 is the minimum checkpoint.  Times are CPU time of the process
 * (CLOCK_PROCESS_CPUTIME_ID, kernel time included), so that other load on
 * a shared machine does not count; wall-clock time is given beside it.
 * Also prints the raw cost of the thesis' mechanism, mprotect + SIGSEGV +
 * mprotect per page, without any copy.
 */
#include <x86intrin.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <dc.h>

#include "bench_util.h"

#define BUF (1u << 20)

static volatile char *buf;
static double tsc_per_us;

/* TSC ticks per microsecond, measured over 20 ms before dc_init */
static void
calibrate(void)
{
	double w0 = bench_now_us(CLOCK_MONOTONIC);
	uint64_t t0 = __rdtsc();
	while (bench_now_us(CLOCK_MONOTONIC) - w0 < 20000)
		;
	tsc_per_us = (double)(__rdtsc() - t0) /
		(bench_now_us(CLOCK_MONOTONIC) - w0);
}


/* CPU and wall microseconds per iteration of the stores [+ checkpoint] */
static void
measure(size_t bytes, int iters, bool ckpt, double *cpu, double *wall,
	double *call)
{
	double c0 = bench_now_us(CLOCK_PROCESS_CPUTIME_ID);
	double w0 = bench_now_us(CLOCK_MONOTONIC);
	uint64_t in = 0;
	for (int i = 0; i < iters; i++) {
		bench_touch(buf, bytes);
		if (ckpt) {
			uint64_t t = __rdtsc();
			dc_checkpoint();
			in += __rdtsc() - t;
		}
	}
	*cpu = (bench_now_us(CLOCK_PROCESS_CPUTIME_ID) - c0) / iters;
	*wall = (bench_now_us(CLOCK_MONOTONIC) - w0) / iters;
	if (call)
		*call = (double)in / tsc_per_us / iters;
}

static char *wp_buf;

static void
segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	char *p = (char *)((uintptr_t)si->si_addr & ~4095ul);
	mprotect(p, 4096, PROT_READ | PROT_WRITE);
}

int
main(int argc, char **argv)
{
	struct bench_args args = { .dir = "/dev/shm/dc-bench-micro" };
	bench_parse(argc, argv, "dc-bench-micro", &args);
	const char *dir = args.dir, *csv = args.csv;
	bool quick = args.quick;
	const size_t *sizes = bench_sizes, ns = BENCH_NSIZES;
	double base[BENCH_NSIZES];
	buf = mmap(NULL, BUF, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset((void *)buf, 1, BUF);
	calibrate();
	/* the stores alone, before anything is tracked */
	for (size_t s = 0; s < ns; s++) {
		double w;
		measure(sizes[s], quick ? 200 : 2000, false, &base[s], &w, NULL);
	}

	struct dc_opts o = { .dir = dir, .protocol = DC_MANUAL };
	dc_discard(dir);
	int rc = dc_init(&o);
	if (rc) {
		fprintf(stderr, "dc_init: %s: %s\n", dc_strerror(rc),
			dc_errormsg());
		return 1;
	}
	FILE *f = csv ? fopen(csv, "w") : NULL;
	if (f)
		fprintf(f, "bytes_touched,ckpt_us,overhead_us,us_per_page,"
			   "wall_us\n");
	printf("%10s %10s %12s %10s %10s   (us: call wall-clock, overhead and "
	       "per page CPU)\n", "bytes", "ckpt", "overhead", "per page",
		"wall");
	double min_over = 0;
	for (size_t s = 0; s < ns; s++) {
		int iters = sizes[s] >= 262144 ? 300 : 3000;
		if (quick)
			iters /= 10;
		double cpu, wall, call;
		measure(sizes[s], iters / 10, true, &cpu, &wall, &call);
		measure(sizes[s], iters, true, &cpu, &wall, &call);
		double over = cpu - base[s];
		if (sizes[s] == 0)
			min_over = over;
		double pp = sizes[s] ? (over - min_over) /
				(double)(sizes[s] / 4096) : 0;
		printf("%10zu %10.2f %12.2f %10.2f %10.2f\n", sizes[s], call,
			over, pp, wall);
		if (f)
			fprintf(f, "%zu,%.3f,%.3f,%.3f,%.3f\n", sizes[s], call,
				over, pp, wall);
	}
	/* the thesis' mechanism: mprotect + SIGSEGV + mprotect per page */
	size_t wp_len = 256 * 4096;
	wp_buf = mmap(NULL, wp_len, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(wp_buf, 0, wp_len);
	struct sigaction sa = { .sa_sigaction = segv, .sa_flags = SA_SIGINFO };
	sigaction(SIGSEGV, &sa, NULL);
	double t = 0;
	int rounds = quick ? 4 : 20;
	for (int it = 0; it < rounds; it++) {
		mprotect(wp_buf, wp_len, PROT_READ);
		double t0 = bench_now_us(CLOCK_PROCESS_CPUTIME_ID);
		for (size_t p = 0; p < wp_len; p += 4096)
			wp_buf[p]++;
		t += bench_now_us(CLOCK_PROCESS_CPUTIME_ID) - t0;
	}
	double wp = t / rounds / 256;
	printf("write-protect mechanism (mprotect + SIGSEGV + mprotect, no "
	       "copy): %.2f us per page\n", wp);
	struct dc_stats st;
	dc_stats(&st);
	printf("checkpoints %lu, pages copied %lu, largest redo segment %lu "
	       "bytes, redo flushes %lu, regions cooled %lu / warmed %lu\n",
		(unsigned long)st.checkpoints, (unsigned long)st.pages_copied,
		(unsigned long)st.redo_bytes_max,
		(unsigned long)st.redo_flushes, (unsigned long)st.cooled,
		(unsigned long)st.warmed);
	if (f) {
		fprintf(f, "# wp_mechanism_us_per_page,%.3f\n", wp);
		fclose(f);
	}
	return 0;
}
