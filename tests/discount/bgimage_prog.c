/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * bgimage_prog.c -- a program that stores all the time, so a checkpoint
 *                   written behind (ckpt.c invariant 8) must hold the
 *                   bytes of its stop, not later ones (bg_ckpt.sh)
 *
 *   dc-test-bgimage MS
 *
 * 1024 pages (4 MiB, one mapping); round v stores v into the first word
 * of every page, in order, then sets the counter to v.  Every round first
 * checks that every page holds the counter, and every store that its
 * page holds the round before's value: a recovered image whose pages
 * come from later than its registers and counter (a store made after
 * the stop, which the resumed run makes again) fails it.  It ends at the check after MS ms from its
 * first start (CLOCK_MONOTONIC: a recovered run goes on to the next
 * check).  Silent until the end (nothing held but the last line, so
 * every checkpoint but the last may be written behind): "ok", exit 0;
 * exit 3 and the first page that differs.
 *
 * Invariants: all state is in memory libdc tracks.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define PAGES 1024
#define PG 4096

static volatile uint64_t counter;

static uint64_t
now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

int
main(int argc, char **argv)
{
	if (argc != 2)
		return 2;
	uint64_t end = now_ms() + strtoull(argv[1], NULL, 10);
	char *m = mmap(NULL, (size_t)PAGES * PG, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return 2;
	for (;;) {
		uint64_t v = counter;
		for (int i = 0; i < PAGES; i++)
			if (*(volatile uint64_t *)(m + (size_t)i * PG) != v) {
				printf("page %d holds %lu, the counter %lu\n",
					i, (unsigned long)*(volatile uint64_t *)
					(m + (size_t)i * PG),
					(unsigned long)v);
				return 3;
			}
		if (now_ms() >= end)
			break;
		for (int i = 0; i < PAGES; i++) {
			volatile uint64_t *p = (volatile uint64_t *)(m +
				(size_t)i * PG);
			if (*p != v) { /* a store the image should not hold */
				printf("page %d holds %lu before round %lu\n",
					i, (unsigned long)*p,
					(unsigned long)v + 1);
				return 3;
			}
			*p = v + 1;
		}
		counter = v + 1;
	}
	printf("ok\n");
	return 0;
}
