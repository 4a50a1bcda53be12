/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckr_zipf.c -- the Zipf workload of Cao et al. (SIGMOD'11, Section 5.3)
 *
 * The state is nobjs objects of obj_size bytes (default 25,000 x 8 KB,
 * 200 MB).  Updates write one 4-byte word, the object and the word within
 * it each chosen by a Zipf distribution of parameter alpha (0.5).  Updates
 * run as fast as possible, grouped into intervals of 0.1 s of simulated
 * time (rate / 10 updates each); a checkpoint period is `period` intervals,
 * ended by a point of consistency.  As in the paper there is no logical
 * log and no reads; unlike the paper the writer runs (into -d's storage):
 * the time the mutator spends waiting for it at the end of a period is not
 * counted, the time its point of consistency takes is.
 *
 * Printed: per update rate and algorithm, the mutator's overhead per
 * checkpoint period (its time minus the time of the same updates to a plain
 * array), and for the rates of -t the time of every 0.1 s interval.
 *
 *   ckr-zipf [-o nobjs] [-s obj_size] [-r rate,rate,..] [-a algo,..]
 *            [-p intervals per period] [-n periods] [-t rate,..]
 *            [-S file|pool] [-d dir] [-z alpha] [-R repetitions]
 *
 * Each configuration runs -R times (3) and the repetition with the least
 * mutator time is kept (the machine is shared: preemption only adds).
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ckr.h"

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_s = 0x1234567;

static uint64_t
rng(void)
{
	uint64_t z = (rng_s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Zipf(alpha) over 0..n-1 by inverting the CDF (binary search). */
struct zipf {
	uint64_t n;
	double *cdf;
};

static void
zipf_init(struct zipf *z, uint64_t n, double alpha)
{
	double sum = 0;

	z->n = n;
	z->cdf = malloc(n * sizeof(double));
	for (uint64_t i = 0; i < n; i++)
		z->cdf[i] = (sum += 1.0 / pow((double)(i + 1), alpha));
	for (uint64_t i = 0; i < n; i++)
		z->cdf[i] /= sum;
}

static uint64_t
zipf_next(const struct zipf *z)
{
	double u = (double)(rng() >> 11) / 9007199254740992.0;
	uint64_t lo = 0, hi = z->n - 1;

	while (lo < hi) {
		uint64_t mid = (lo + hi) / 2;

		if (z->cdf[mid] < u)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int
parse_list(const char *s, double *out, int max)
{
	int n = 0;
	char *end;

	while (*s && n < max) {
		out[n++] = strtod(s, &end);
		s = *end == ',' ? end + 1 : end;
		if (end == s && *s)
			break;
	}
	return n;
}

static int
rm_dir(const char *dir)
{
	char cmd[4200];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd);
}

struct run {
	double total_ms;  /* mutator time over the measured periods */
	double *iv_ms;    /* per interval */
	double poc_ms;    /* of it, in points of consistency */
	double fork_ms;
};

int
main(int argc, char **argv)
{
	uint64_t nobjs = 25000, osz = 8192;
	double rates[32] = { 10e3, 20e3, 40e3, 80e3, 160e3, 320e3, 640e3,
		1.28e6, 2.56e6, 5.12e6 };
	int nrates = 10, period = 10, nper = 3, ntr = 2, reps = 3;
	double trates[32] = { 320e3, 1.28e6 };
	enum ckr_algo algos[8] = { CKR_NAIVE, CKR_BACOU, CKR_BAZZ, CKR_IPP,
		CKR_FORK };
	int nalgos = 5;
	enum ckr_storage st = CKR_STORAGE_FILE;
	const char *base = "/dev/shm";
	double alpha = 0.5;
	int opt;

	while ((opt = getopt(argc, argv, "o:s:r:a:p:n:t:S:d:z:R:")) != -1) {
		switch (opt) {
		case 'o': nobjs = strtoull(optarg, NULL, 0); break;
		case 's': osz = strtoull(optarg, NULL, 0); break;
		case 'r': nrates = parse_list(optarg, rates, 32); break;
		case 't': ntr = parse_list(optarg, trates, 32); break;
		case 'p': period = atoi(optarg); break;
		case 'n': nper = atoi(optarg); break;
		case 'S':
			st = strcmp(optarg, "pool") == 0 ? CKR_STORAGE_POOL :
				CKR_STORAGE_FILE;
			break;
		case 'd': base = optarg; break;
		case 'z': alpha = atof(optarg); break;
		case 'R': reps = atoi(optarg); break;
		case 'a': {
			char *s = strdup(optarg), *tok, *save = NULL;

			nalgos = 0;
			for (tok = strtok_r(s, ",", &save); tok && nalgos < 8;
			     tok = strtok_r(NULL, ",", &save))
				if ((algos[nalgos] = ckr_algo_parse(tok)) != 0)
					nalgos++;
			free(s);
			break;
		}
		default:
			fprintf(stderr, "usage: see the head of ckr_zipf.c\n");
			return 2;
		}
	}
	if (nper < 1 || period < 1 || nalgos < 1 || osz < 8 || reps < 1) {
		fprintf(stderr, "ckr-zipf: bad arguments\n");
		return 2;
	}
	uint64_t wpo = osz / 4, nwords = nobjs * wpo;
	struct zipf zo, zw;

	zipf_init(&zo, nobjs, alpha);
	zipf_init(&zw, wpo, alpha);
	printf("# ckr-zipf: %llu objects of %llu bytes (%.0f MB), zipf "
	       "alpha %.2f, %d intervals of 0.1 s per checkpoint period, %d "
	       "periods measured, best of %d, storage %s in %s\n",
		(unsigned long long)nobjs, (unsigned long long)osz,
		nwords * 4 / 1e6, alpha, period, nper, reps,
		st == CKR_STORAGE_FILE ? "file" : "pool", base);
	printf("# mutator on one core, writer (and fork child) on the other; "
	       "2-core machine shared with other work\n");
	printf("# overhead per checkpoint period, ms (mutator time minus raw "
	       "updates to an array)\n");
	printf("%10s %9s", "updates/s", "raw_ms");
	for (int a = 0; a < nalgos; a++)
		printf(" %9s", ckr_algo_name(algos[a]));
	printf("\n");

	uint32_t *raw = calloc(nwords, 4);
	double trace[32][8][2]; /* per traced rate, algo: mean, max ms */
	double traw[32][2];
	double forkms_per_gb = 0;
	int ntraced = 0;

	for (int ri = 0; ri < nrates; ri++) {
		uint64_t per_iv = (uint64_t)(rates[ri] / 10);
		uint64_t n = per_iv * (uint64_t)period;
		uint64_t *idx = malloc(n * sizeof(*idx));
		int niv = period * nper;
		bool traced = false;

		if (per_iv == 0) {
			free(idx);
			continue;
		}
		for (uint64_t k = 0; k < n; k++)
			idx[k] = zipf_next(&zo) * wpo + zipf_next(&zw);
		for (int t = 0; t < ntr; t++)
			traced |= trates[t] == rates[ri];

		/* raw: the same updates to a plain array */
		double raw_ms = 1e30, rmax = 0;
		uint32_t v = 1;
		for (int rep = 0; rep < reps; rep++) {
			double tot = 0, mx = 0;
			for (int p = 0; p <= nper; p++)
				for (int i = 0; i < period; i++) {
					uint64_t t0 = now_ns();
					for (uint64_t k = 0; k < per_iv; k++)
						raw[idx[i * per_iv + k]] = v++;
					__asm__ volatile("" ::: "memory");
					double ms = (now_ns() - t0) / 1e6;
					if (p > 0) {
						tot += ms;
						mx = ms > mx ? ms : mx;
					}
				}
			if (tot < raw_ms) {
				raw_ms = tot;
				rmax = mx;
			}
		}
		printf("%10.0f %9.2f", rates[ri], raw_ms / nper);
		if (traced) {
			traw[ntraced][0] = raw_ms / niv;
			traw[ntraced][1] = rmax;
		}
		fflush(stdout);

		for (int a = 0; a < nalgos; a++) {
		double best = 1e30, bmax = 0;
		for (int rep = 0; rep < reps; rep++) {
			char dir[4096];
			struct ckr_opts o;
			ckr *c;
			int rc;

			snprintf(dir, sizeof(dir), "%s/ckr-zipf-%d", base,
				(int)getpid());
			rm_dir(dir);
			memset(&o, 0, sizeof(o));
			o.algo = algos[a];
			o.storage = st;
			o.nobjs = nobjs;
			o.obj_size = (uint32_t)osz;
			o.log_capacity = 1 << 20;
			rc = ckr_open(dir, &o, &c);
			if (rc != 0) {
				fprintf(stderr, "\nckr_open: %s: %s\n",
					ckr_err_name(rc), ckr_errormsg());
				return 1;
			}
			double tot = 0, mx = 0;
			struct ckr_stats s0, s1;
			/* period 0 warms up and starts the first checkpoint */
			for (int p = 0; p <= nper; p++) {
				if (p == 1)
					ckr_stats(c, &s0);
				for (int i = 0; i < period; i++) {
					uint64_t t0, t1;

					if (i == period - 1 &&
					    (rc = ckr_checkpoint_wait(c)) != 0)
						break;
					t0 = now_ns();
					for (uint64_t k = 0; k < per_iv; k++)
						ckr_write(c, idx[i * per_iv + k],
							v++);
					if (i == period - 1)
						rc = ckr_point_of_consistency(c,
							0) < 0;
					t1 = now_ns();
					if (p > 0) {
						double ms = (t1 - t0) / 1e6;
						tot += ms;
						mx = ms > mx ? ms : mx;
					}
				}
				if (rc != 0)
					break;
			}
			ckr_stats(c, &s1);
			rc |= ckr_close(c);
			rm_dir(dir);
			if (rc != 0) {
				fprintf(stderr, "\nckr-zipf: %s failed\n",
					ckr_algo_name(algos[a]));
				return 1;
			}
			if (tot < best) {
				best = tot;
				bmax = mx;
				if (algos[a] == CKR_FORK && s1.epoch > s0.epoch)
					forkms_per_gb = (s1.fork_ns - s0.fork_ns) /
						1e6 / (double)(s1.epoch - s0.epoch) /
						(nwords * 4 / 1e9);
			}
		}
			printf(" %9.2f", (best - raw_ms) / nper);
			fflush(stdout);
			if (traced) {
				trace[ntraced][a][0] = best / niv;
				trace[ntraced][a][1] = bmax;
			}
		}
		printf("\n");
		if (traced)
			ntraced++;
		free(idx);
	}
	if (ntraced > 0) {
		printf("\n# mutator time per 0.1 s interval, ms: mean / max "
		       "(the max is the latency peak)\n");
		printf("%10s %13s", "updates/s", "raw");
		for (int a = 0; a < nalgos; a++)
			printf(" %13s", ckr_algo_name(algos[a]));
		printf("\n");
		int t = 0;
		for (int ri = 0; ri < nrates && t < ntraced; ri++) {
			bool traced = false;
			for (int k = 0; k < ntr; k++)
				traced |= trates[k] == rates[ri];
			if (!traced || rates[ri] < 10)
				continue;
			printf("%10.0f %6.2f/%6.2f", rates[ri], traw[t][0],
				traw[t][1]);
			for (int a = 0; a < nalgos; a++)
				printf(" %6.2f/%6.2f", trace[t][a][0],
					trace[t][a][1]);
			printf("\n");
			t++;
		}
	}
	if (forkms_per_gb > 0)
		printf("\n# fork() pause: %.1f ms per GB of state (Redis "
		       "publishes 23 ms/GB on KVM)\n", forkms_per_gb);
	free(raw);
	return 0;
}
