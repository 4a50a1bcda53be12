/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * micro.c -- thesis Figure 5.2: overhead per checkpoint vs bytes touched
 *
 *   dc-bench-micro [DIR] [CSV]
 *
 * A loop touches N bytes (one store per 4 KiB page of a buffer) and takes
 * a checkpoint; the time of the checkpoint call is averaged.  N = 0 gives
 * the minimum checkpoint (the stack and libdc's own state only).  Also
 * prints the raw mechanism costs: one PAGEMAP_SCAN-tracked write fault
 * versus one mprotect + SIGSEGV + mprotect round trip (what the
 * write-protect/undo design pays per page before copying it).
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <dc.h>

static double
now_us(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static char *wp_buf;
static size_t wp_len;

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
	struct dc_opts o = { .dir = argc > 1 ? argv[1] : "/dev/shm/dc-bench-micro",
		.protocol = DC_MANUAL };
	const char *csv = argc > 2 ? argv[2] : NULL;
	dc_discard(o.dir);
	int rc = dc_init(&o);
	if (rc) {
		fprintf(stderr, "dc_init: %s: %s\n", dc_strerror(rc),
			dc_errormsg());
		return 1;
	}
	static const size_t sizes[] = { 0, 4096, 16384, 65536, 262144,
		1048576 };
	size_t max = 1048576;
	char *buf = malloc(max);
	memset(buf, 1, max);
	dc_checkpoint();
	FILE *f = csv ? fopen(csv, "w") : NULL;
	if (f)
		fprintf(f, "bytes_touched,us_per_checkpoint,us_per_page\n");
	printf("%12s %14s %12s\n", "bytes", "us/checkpoint", "us/page");
	double base = 0;
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		int iters = sizes[s] >= 262144 ? 200 : 2000;
		double t = 0;
		for (int i = 0; i < iters; i++) {
			for (size_t p = 0; p < sizes[s]; p += 4096)
				buf[p]++;
			double t0 = now_us();
			dc_checkpoint();
			t += now_us() - t0;
		}
		double per = t / iters;
		if (sizes[s] == 0)
			base = per;
		double pp = sizes[s] ? (per - base) / (double)(sizes[s] / 4096) :
					 0;
		printf("%12zu %14.2f %12.2f\n", sizes[s], per, pp);
		if (f)
			fprintf(f, "%zu,%.3f,%.3f\n", sizes[s], per, pp);
	}
	/* mechanism: mprotect + SIGSEGV per page (the write-protect design) */
	wp_len = 256 * 4096;
	wp_buf = mmap(NULL, wp_len, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(wp_buf, 0, wp_len);
	struct sigaction sa = { .sa_sigaction = segv, .sa_flags = SA_SIGINFO };
	sigaction(SIGSEGV, &sa, NULL);
	double t = 0;
	for (int it = 0; it < 20; it++) {
		mprotect(wp_buf, wp_len, PROT_READ);
		double t0 = now_us();
		for (size_t p = 0; p < wp_len; p += 4096)
			wp_buf[p]++;
		t += now_us() - t0;
	}
	double wp = t / 20 / 256;
	printf("write-protect mechanism (mprotect+SIGSEGV+mprotect, no copy): "
	       "%.2f us/page\n", wp);
	if (f) {
		fprintf(f, "# wp_mechanism_us_per_page,%.3f\n", wp);
		fclose(f);
	}
	struct dc_stats st;
	dc_stats(&st);
	printf("checkpoints %lu, pages copied %lu, max redo %lu bytes\n",
		(unsigned long)st.checkpoints, (unsigned long)st.pages_copied,
		(unsigned long)st.redo_bytes_max);
	return 0;
}
