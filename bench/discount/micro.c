/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * micro.c -- thesis Figure 5.2: overhead per checkpoint vs bytes touched,
 *            for every dirty-tracking mechanism side by side
 *
 *   dc-bench-micro [--quick] [--dir D] [--csv FILE]
 *
 * A loop touches N bytes (one store per 4 KiB page of a 1 MiB buffer) and
 * takes a checkpoint (dc_checkpoint, manual protocol).  Each mechanism
 * (uffd: userfaultfd write protection + PAGEMAP_SCAN, pages copied into
 * the redo log; wp: mprotect + SIGSEGV, pages copied into the redo log;
 * undo: the memory moved into the persistent segment, mprotect + SIGSEGV,
 * before-images into the undo log) runs in a child process of its own,
 * forked before dc_init from
 * the same measured baseline.  For each N and mechanism it reports
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
 *
 * Invariants: the children share nothing but the baseline (measured
 * before the fork) and report through a pipe; the parent never starts
 * Discount Checking.
 */
#include <x86intrin.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/personality.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

static int mech_uffd = -1;

/* the mechanism's handler: give the page its write permission back
 * (mprotect, or with userfaultfd, clear its write-protect bit) */
static void
segv(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	char *p = (char *)((uintptr_t)si->si_addr & ~4095ul);
	if (mech_uffd < 0) {
		mprotect(p, 4096, PROT_READ | PROT_WRITE);
		return;
	}
	struct uffdio_writeprotect w = { .range = { (uintptr_t)p, 4096 } };
	ioctl(mech_uffd, UFFDIO_WRITEPROTECT, &w);
}

/* protect (or unprotect) [p, p + n) the mechanism's way */
static void
mech_protect(char *p, size_t n, bool on)
{
	if (mech_uffd < 0) {
		mprotect(p, n, on ? PROT_READ : PROT_READ | PROT_WRITE);
		return;
	}
	struct uffdio_writeprotect w = { .range = { (uintptr_t)p, n },
		.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0 };
	ioctl(mech_uffd, UFFDIO_WRITEPROTECT, &w);
}

/*
 * The write-protect mechanism alone, without libdc and without a copy:
 * CPU us per page for a store into a protected page, the fault, the
 * unprotect in the handler, and its share of protecting it again.
 * stride 1: pages in a row; 2: every other page (each fault splits a
 * mapping in three, each protect merges it back).
 */
static double
mechanism(char *mem, size_t len, size_t stride, int rounds)
{
	double t = 0;
	size_t pages = 0;
	for (int it = 0; it < rounds; it++) {
		mech_protect(mem, len, true);
		double t0 = bench_now_us(CLOCK_PROCESS_CPUTIME_ID);
		for (size_t p = 0; p < len; p += stride * 4096) {
			mem[p]++;
			pages++;
		}
		mech_protect(mem, len, true);
		t += bench_now_us(CLOCK_PROCESS_CPUTIME_ID) - t0;
		mech_protect(mem, len, false);
	}
	return t / (double)pages;
}

/* The mechanism on private anonymous memory (the process's own, as with
 * `wp`), on a shared tmpfs mapping (the segment of `undo`), and there with
 * userfaultfd write protection reporting SIGBUS instead. */
static double
mechanisms(const char *dir, bool quick)
{
	const size_t len = 256 * 4096;
	int rounds = quick ? 4 : 20;
	struct sigaction sa = { .sa_sigaction = segv, .sa_flags = SA_SIGINFO };
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	char *anon = mmap(NULL, len, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	memset(anon, 0, len);
	double a1 = mechanism(anon, len, 1, rounds);
	double a2 = mechanism(anon, len, 2, rounds);
	char path[4096];
	snprintf(path, sizeof(path), "%s.mechanism", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	char *shm = fd < 0 || ftruncate(fd, (off_t)len) != 0 ? MAP_FAILED :
		mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (fd >= 0)
		unlink(path);
	if (shm == MAP_FAILED) {
		printf("write-protect mechanism alone: private anonymous "
		       "memory %.2f us per page in a row, %.2f alone\n", a1,
			a2);
		return a1;
	}
	memset(shm, 0, len);
	double s2 = mechanism(shm, len, 2, rounds);
	double u2 = -1;
	int u = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
	struct uffdio_api api = { .api = UFFD_API,
		.features = UFFD_FEATURE_SIGBUS |
			UFFD_FEATURE_WP_HUGETLBFS_SHMEM };
	struct uffdio_register r = { .range = { (uintptr_t)shm, len },
		.mode = UFFDIO_REGISTER_MODE_WP };
	if (u >= 0 && ioctl(u, UFFDIO_API, &api) == 0 &&
	    ioctl(u, UFFDIO_REGISTER, &r) == 0) {
		mech_uffd = u;
		u2 = mechanism(shm, len, 2, rounds);
		mech_uffd = -1;
	}
	printf("write-protect mechanism alone (store, fault, unprotect, "
	       "protect again; no copy), us per page:\n"
	       "  private anonymous memory, mprotect + SIGSEGV: %.2f in a "
	       "row, %.2f alone\n"
	       "  shared tmpfs mapping, mprotect + SIGSEGV: %.2f alone\n",
		a1, a2, s2);
	if (u2 >= 0)
		printf("  shared tmpfs mapping, userfaultfd-wp + SIGBUS: "
		       "%.2f alone\n", u2);
	if (u >= 0)
		close(u);
	munmap(shm, len);
	close(fd);
	return a1;
}

/* One mechanism's row per size: call, overhead, per page, wall (us). */
struct column {
	double call[BENCH_NSIZES], over[BENCH_NSIZES], pp[BENCH_NSIZES],
		wall[BENCH_NSIZES];
	struct dc_stats st;
	int ok;
};

static void
run_tracking(enum dc_tracking tr, const char *dir, bool quick,
	const double *base, struct column *c)
{
	const size_t *sizes = bench_sizes, ns = BENCH_NSIZES;
	struct dc_opts o = { .dir = dir, .protocol = DC_MANUAL,
		.tracking = tr };
	dc_discard(dir);
	int rc = dc_init(&o);
	if (rc) {
		fprintf(stderr, "dc_init (%s): %s: %s\n", dc_tracking_name(tr),
			dc_strerror(rc), dc_errormsg());
		return;
	}
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
		c->call[s] = call;
		c->over[s] = over;
		c->pp[s] = sizes[s] ? (over - min_over) /
				(double)(sizes[s] / 4096) : 0;
		c->wall[s] = wall;
	}
	dc_stats(&c->st);
	c->ok = 1;
}

/* Fork, measure tr in the child, get its column back. */
static int
child(enum dc_tracking tr, const char *dir, bool quick, const double *base,
	struct column *c)
{
	int p[2];
	memset(c, 0, sizeof(*c));
	if (pipe(p) != 0)
		return -1;
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(p[0]);
		run_tracking(tr, dir, quick, base, c);
		ssize_t n = write(p[1], c, sizeof(*c));
		exit(n == (ssize_t)sizeof(*c) ? 0 : 1);
	}
	close(p[1]);
	size_t got = 0;
	while (pid > 0 && got < sizeof(*c)) {
		ssize_t n = read(p[0], (char *)c + got, sizeof(*c) - got);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(p[0]);
	if (pid > 0)
		waitpid(pid, NULL, 0);
	return got == sizeof(*c) && c->ok ? 0 : -1;
}

int
main(int argc, char **argv)
{
	/* dc_init would run the program again without address-space
	 * randomisation: do it here, before anything is measured or forked */
	int pers = personality(0xffffffff);
	if (pers != -1 && !(pers & ADDR_NO_RANDOMIZE) &&
	    personality((unsigned long)pers | ADDR_NO_RANDOMIZE) != -1) {
		execv("/proc/self/exe", argv);
		perror("dc-bench-micro: re-exec");
		return 1;
	}
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

	static const enum dc_tracking trs[] = { DC_TRACK_UFFD, DC_TRACK_WP,
		DC_TRACK_UNDO };
	enum { NT = sizeof(trs) / sizeof(trs[0]) };
	static struct column col[NT];
	for (int t = 0; t < NT; t++)
		if (child(trs[t], dir, quick, base, &col[t]) != 0) {
			fprintf(stderr, "dc-bench-micro: the %s run failed\n",
				dc_tracking_name(trs[t]));
			return 1;
		}
	FILE *f = csv ? fopen(csv, "w") : NULL;
	static const char *const heads[NT] = {
		"uffd (userfaultfd WP + scan, redo)",
		"wp (mprotect + SIGSEGV, redo)",
		"undo (segment + SIGSEGV, undo log)" };
	if (f) {
		fprintf(f, "bytes_touched");
		for (int t = 0; t < NT; t++)
			fprintf(f, ",%s_ckpt_us,%s_overhead_us,%s_us_per_page,"
				   "%s_wall_us", dc_tracking_name(trs[t]),
				dc_tracking_name(trs[t]), dc_tracking_name(trs[t]),
				dc_tracking_name(trs[t]));
		fprintf(f, "\n");
	}
	printf("%10s", "");
	for (int t = 0; t < NT; t++)
		printf(" | %-38s", heads[t]);
	printf("\n%10s", "bytes");
	for (int t = 0; t < NT; t++)
		printf(" | %8s %10s %8s %8s", "ckpt", "overhead", "per page",
			"wall");
	printf("\n");
	for (size_t s = 0; s < ns; s++) {
		printf("%10zu", sizes[s]);
		if (f)
			fprintf(f, "%zu", sizes[s]);
		for (int t = 0; t < NT; t++) {
			printf(" | %8.2f %10.2f %8.2f %8.2f", col[t].call[s],
				col[t].over[s], col[t].pp[s], col[t].wall[s]);
			if (f)
				fprintf(f, ",%.3f,%.3f,%.3f,%.3f", col[t].call[s],
					col[t].over[s], col[t].pp[s],
					col[t].wall[s]);
		}
		printf("\n");
		if (f)
			fprintf(f, "\n");
	}
	printf("(us: ckpt = the dc_checkpoint call, wall-clock; overhead and "
	       "per page = CPU time)\n");
	double wp = mechanisms(dir, quick);
	for (int i = 0; i < NT; i++) {
		const struct dc_stats *st = &col[i].st;
		printf("%s: checkpoints %lu, pages copied %lu, largest redo "
		       "segment %lu bytes, redo flushes %lu, regions cooled %lu "
		       "/ warmed %lu, write faults %lu, undo logged %lu bytes, "
		       "pages moved into the segment %lu\n",
			dc_tracking_name(trs[i]), (unsigned long)st->checkpoints,
			(unsigned long)st->pages_copied,
			(unsigned long)st->redo_bytes_max,
			(unsigned long)st->redo_flushes,
			(unsigned long)st->cooled, (unsigned long)st->warmed,
			(unsigned long)st->wp_faults,
			(unsigned long)st->undo_bytes,
			(unsigned long)st->seg_pages);
	}
	if (f) {
		fprintf(f, "# wp_mechanism_us_per_page,%.3f\n", wp);
		fclose(f);
	}
	return 0;
}
