/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wp.c -- the thesis' write-protect design on libvista: Figure 5.2 for a
 *         transaction over a segment with automatic ranges
 *
 *   dc-bench-wp [--quick] [--dir D] [--csv FILE]
 *
 * Discount Checking in the thesis is a Vista transaction over the whole
 * process: memory is write-protected, the first store to a page after a
 * checkpoint faults, its before-image goes to the undo log, and a
 * checkpoint commits the transaction and re-protects the pages.  This
 * measures exactly that mechanism with libvista's VISTA_TX_AUTO on a 1 MiB
 * segment (tmpfs, byte persistence domain: Rio's model, as libdc's tmpfs
 * checkpoints): a loop touches N bytes (one store per 4 KiB page) inside a
 * transaction and commits it.  Reported like dc-bench-micro: CPU time of
 * the process per checkpoint (commit alone, and the whole iteration minus
 * the same stores on plain memory) and per page touched.  It is the
 * mechanism only: libdc does not run processes on vista segments
 * (docs/ARCHITECTURE.md).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "bench_util.h"
#include "vista.h"

#define BUF (1u << 20)

static void
die(const char *what, int rc)
{
	fprintf(stderr, "dc-bench-wp: %s: %s: %s\n", what, vista_strerror(rc),
		vista_errormsg());
	exit(1);
}

int
main(int argc, char **argv)
{
	struct bench_args args = { .dir = "/dev/shm/dc-bench-wp" };
	bench_parse(argc, argv, "dc-bench-wp", &args);
	const char *dir = args.dir, *csv = args.csv;
	bool quick = args.quick;
	const size_t *sizes = bench_sizes, ns = BENCH_NSIZES;
	char log[4096], segp[4096];
	snprintf(log, sizeof(log), "%s.log", dir);
	snprintf(segp, sizeof(segp), "%s.seg", dir);
	unlink(log);
	unlink(segp);

	/* the stores alone, on plain memory */
	volatile char *plain = mmap(NULL, BUF, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset((void *)plain, 1, BUF);
	double base[BENCH_NSIZES];
	for (size_t s = 0; s < ns; s++) {
		int it = quick ? 200 : 2000;
		double t0 = bench_now_us(CLOCK_PROCESS_CPUTIME_ID);
		for (int i = 0; i < it; i++)
			bench_touch(plain, sizes[s]);
		base[s] = (bench_now_us(CLOCK_PROCESS_CPUTIME_ID) - t0) / it;
	}

	struct vista_opts o = { .log_path = log, .log_size = 16u << 20,
		.lanes = 1, .rio_flags = RIO_FORCE_BYTE };
	vista *v;
	vista_segment *seg;
	int rc = vista_init(&o, &v);
	if (rc)
		die("vista_init", rc);
	if ((rc = vista_map(v, segp, (void *)0x600000000000ull, BUF,
		     VISTA_CREATE, &seg)))
		die("vista_map", rc);
	volatile char *m = vista_segment_base(seg);
	/* populate, and protect (the first VISTA_TX_AUTO transaction) */
	if ((rc = vista_begin_transaction(v, VISTA_TX_AUTO)))
		die("begin", rc);
	bench_touch(m, BUF);
	if ((rc = vista_end_transaction(v)))
		die("end", rc);

	FILE *f = csv ? fopen(csv, "w") : NULL;
	if (f)
		fprintf(f, "bytes_touched,ckpt_us,overhead_us,us_per_page\n");
	printf("%10s %10s %12s %10s   (CPU us)\n", "bytes", "commit",
		"overhead", "per page");
	double min_over = 0;
	for (size_t s = 0; s < ns; s++) {
		int iters = sizes[s] >= 262144 ? 300 : 3000;
		if (quick)
			iters /= 10;
		double in = 0, t0 = bench_now_us(CLOCK_PROCESS_CPUTIME_ID);
		for (int i = 0; i < iters; i++) {
			if ((rc = vista_begin_transaction(v, VISTA_TX_AUTO)))
				die("begin", rc);
			bench_touch(m, sizes[s]);
			double t = bench_now_us(CLOCK_PROCESS_CPUTIME_ID);
			if ((rc = vista_end_transaction(v)))
				die("end", rc);
			in += bench_now_us(CLOCK_PROCESS_CPUTIME_ID) - t;
		}
		double it_us = (bench_now_us(CLOCK_PROCESS_CPUTIME_ID) - t0) / iters;
		double over = it_us - base[s], call = in / iters;
		if (sizes[s] == 0)
			min_over = over;
		double pp = sizes[s] ? (over - min_over) /
				(double)(sizes[s] / 4096) : 0;
		printf("%10zu %10.2f %12.2f %10.2f\n", sizes[s], call, over, pp);
		if (f)
			fprintf(f, "%zu,%.3f,%.3f,%.3f\n", sizes[s], call, over,
				pp);
	}
	struct vista_stats st;
	vista_stats(v, &st);
	printf("transactions %lu, pages logged by faults %lu, before-image "
	       "bytes %lu\n", (unsigned long)st.tx_committed,
		(unsigned long)st.auto_faults,
		(unsigned long)st.bytes_logged);
	if (f)
		fclose(f);
	vista_fini(v);
	unlink(log);
	unlink(segp);
	return 0;
}
