/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * selfpipe_prog.c -- numbers through a pipe between two threads of one
 *                    process, an eventfd beside it, named threads; killed
 *                    at random (thread_kill.sh, selfpipe_check.awk)
 *
 *   dc-test-selfpipe BURST N
 *
 * A producer thread writes the numbers 0..N-1 (8 bytes each) into a pipe
 * in bursts of 1..BURST numbers, and adds each burst's size to an
 * eventfd.  The main thread reads the pipe in pieces of 1..301 bytes --
 * so a number is often split between two reads, and bytes are in the
 * pipe at almost every checkpoint -- and prints each number it puts
 * together, one line "i", to standard output (held output).  It reads
 * the eventfd now and then and sums what it gets.  Every 1000 numbers it
 * prints "names MAIN PRODUCER", the threads' names read back from
 * /proc/thread-self/comm and /proc/self/task/TID/comm (TID the
 * producer's id as the program knows it): the main thread names itself
 * with pthread_setname_np (prctl), the producer is named by the main
 * thread (a write to its comm file).
 *
 * At the end: "done N SUM", SUM the eventfd's total, which must be N.
 *
 * Exit: 0 done, 2 bad arguments, 3 a check failed (said on stderr).
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

static int pfd[2], efd;
static long n, burst;
static volatile long prod_tid;

static void
fail(const char *what)
{
	fprintf(stderr, "check failed: %s\n", what);
	exit(3);
}

static void *
producer(void *arg)
{
	(void)arg;
	prod_tid = syscall(SYS_gettid);
	uint64_t buf[512], r = 12345;
	for (long i = 0; i < n;) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		long k = (long)(r >> 33) % burst + 1;
		if (k > n - i)
			k = n - i;
		for (long j = 0; j < k; j++)
			buf[j] = (uint64_t)(i + j);
		size_t len = (size_t)k * 8, o = 0;
		while (o < len) {
			ssize_t w = write(pfd[1], (char *)buf + o, len - o);
			if (w <= 0)
				fail("write to the pipe");
			o += (size_t)w;
		}
		uint64_t one = (uint64_t)k;
		if (write(efd, &one, 8) != 8)
			fail("write to the eventfd");
		i += k;
	}
	return NULL;
}

static void
comm(const char *path, char *out)
{
	FILE *f = fopen(path, "r");
	if (f == NULL || fgets(out, 32, f) == NULL)
		snprintf(out, 32, "(none)\n");
	if (f)
		fclose(f);
	out[strcspn(out, "\n")] = '\0';
}

int
main(int argc, char **argv)
{
	if (argc < 3 || (burst = atol(argv[1])) < 1 || burst > 512 ||
	    (n = atol(argv[2])) < 1)
		return 2;
	if (pipe2(pfd, O_CLOEXEC) != 0 || (efd = eventfd(0, EFD_NONBLOCK)) < 0)
		fail("pipe2 or eventfd");
	pthread_setname_np(pthread_self(), "sp-main");
	pthread_t th;
	if (pthread_create(&th, NULL, producer, NULL) != 0)
		fail("pthread_create");
	if (pthread_setname_np(th, "sp-prod") != 0)
		fail("naming the producer");
	uint64_t r = 777, sum = 0, cur = 0;
	unsigned have = 0; /* bytes of cur so far */
	long next = 0;
	unsigned char b[301];
	while (next < n) {
		r = r * 6364136223846793005ull + 1442695040888963407ull;
		size_t want = (size_t)(r >> 33) % sizeof(b) + 1;
		ssize_t got = read(pfd[0], b, want);
		if (got <= 0)
			fail("read from the pipe");
		for (ssize_t i = 0; i < got; i++) {
			cur |= (uint64_t)b[i] << (8 * have);
			if (++have < 8)
				continue;
			if (cur != (uint64_t)next) {
				fprintf(stderr, "number %lu where %ld was due\n",
					(unsigned long)cur, next);
				fail("a number lost or repeated");
			}
			printf("%ld\n", next);
			if (++next % 1000 == 0 && next < n) {
				char a[32], p[32], path[64];
				comm("/proc/thread-self/comm", a);
				snprintf(path, sizeof(path),
					"/proc/self/task/%ld/comm", prod_tid);
				comm(path, p);
				printf("names %s %s\n", a, p);
			}
			cur = 0;
			have = 0;
		}
		uint64_t e;
		if ((r >> 20) % 4 == 0 && read(efd, &e, 8) == 8)
			sum += e;
		fflush(stdout);
	}
	pthread_join(th, NULL);
	uint64_t e;
	if (read(efd, &e, 8) == 8)
		sum += e;
	printf("done %ld %lu\n", n, (unsigned long)sum);
	return 0;
}
