/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * diskio.c -- RandomWrite and SequentialWrite (ReViveI/O Table 1,
 *             Figure 7): synchronous writes, each acknowledged
 *
 *   dc-bench-diskio random|seq SIZE_KB SECONDS FILE [FILE_MB]
 *
 * An unmodified program (run alone, or under dc-run): opens FILE with
 * O_DSYNC (FILE_MB, default 64, preallocated by the first run), then for
 * SECONDS writes SIZE_KB-sized blocks, at random block-aligned offsets or
 * one after the other (wrapping), and after each write sends a one-byte
 * acknowledgement to standard output -- the client learning that its
 * write is done, a visible event: cpvs commits before it, the buffered
 * protocol holds it until the next commit.  Prints on standard error
 * "writes=N seconds=S MBps=M" at the end.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int
main(int argc, char **argv)
{
	if (argc < 5) {
		fprintf(stderr, "usage: dc-bench-diskio random|seq SIZE_KB "
			"SECONDS FILE [FILE_MB]\n");
		return 2;
	}
	int rnd = !strcmp(argv[1], "random");
	size_t bs = (size_t)atoi(argv[2]) * 1024;
	double secs = atof(argv[3]);
	off_t fsize = (off_t)(argc > 5 ? atoi(argv[5]) : 64) << 20;
	if (bs == 0 || bs > (1u << 20) || secs <= 0)
		return 2;
	int fd = open(argv[4], O_RDWR | O_CREAT | O_DSYNC, 0644);
	if (fd < 0) {
		perror(argv[4]);
		return 2;
	}
	static char buf[1 << 20];
	memset(buf, 'w', bs);
	uint64_t blocks = (uint64_t)fsize / bs, n = 0;
	uint64_t rng = 88172645463325252ull;
	double t0 = now(), t = t0;
	while (t - t0 < secs) {
		uint64_t b;
		if (rnd) {
			rng ^= rng << 13;
			rng ^= rng >> 7;
			rng ^= rng << 17;
			b = rng % blocks;
		} else {
			b = n % blocks;
		}
		buf[0] = (char)n;
		if (pwrite(fd, buf, bs, (off_t)(b * bs)) != (ssize_t)bs) {
			perror("pwrite");
			return 1;
		}
		if (write(1, "a", 1) != 1)
			return 1;
		n++;
		if ((n & 7) == 0)
			t = now();
	}
	t = now();
	fprintf(stderr, "writes=%llu seconds=%.3f MBps=%.2f\n",
		(unsigned long long)n, t - t0, (double)n * (double)bs / 1e6 /
		(t - t0));
	return 0;
}
