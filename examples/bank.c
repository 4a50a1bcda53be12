// SPDX-License-Identifier: BSD-3-Clause
/*
 * bank.c -- a persistent bank in a vista segment
 *
 *   bank DIR [TRANSFERS]
 *
 * Keeps 100 accounts in a segment under DIR (made on first use, at a fixed
 * address, so history records can point to each other with plain
 * pointers), moves money between random accounts in transactions, and keeps
 * the last 256 transfers as heap records: each transfer allocates one and
 * frees the oldest, in the same transaction.  Every run checks that the
 * money adds up: kill it with SIGKILL at any moment and run it again.
 */
#include <errno.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vista.h>

#define NACCOUNTS 100
#define INITIAL 1000
#define NHISTORY 256

struct history {
	struct history *prev; /* a native pointer: the segment never moves */
	uint32_t from, to, amount;
};

struct bank {
	uint64_t transfers;
	int64_t balance[NACCOUNTS];
	struct history *ring[NHISTORY]; /* the last transfers */
};

static int
fail(const char *what, int rc)
{
	fprintf(stderr, "bank: %s: %s (%s)\n", what, vista_strerror(rc),
		vista_errormsg());
	return 1;
}

int
main(int argc, char **argv)
{
	char log[4096], segpath[4096];
	struct vista_opts opts = { .log_path = log };
	long n = argc > 2 ? atol(argv[2]) : 1000;
	vista_segment *seg;
	struct bank *b;
	vista *v;
	int64_t sum = 0;
	int rc;

	if (argc < 2) {
		fprintf(stderr, "usage: bank DIR [TRANSFERS]\n");
		return 2;
	}
	if (mkdir(argv[1], 0755) != 0 && errno != EEXIST) {
		perror(argv[1]);
		return 1;
	}
	snprintf(log, sizeof(log), "%s/bank.log", argv[1]);
	snprintf(segpath, sizeof(segpath), "%s/bank.seg", argv[1]);
	if ((rc = vista_init(&opts, &v)) != 0)
		return fail("vista_init", rc);
	/* Created at this address the first time; afterwards it maps where
	 * it was created (recovery runs here). */
	rc = vista_map(v, segpath, (void *)0x7e0000000000, 1 << 20,
		VISTA_CREATE, &seg);
	if (rc)
		return fail("vista_map", rc);
	if ((rc = vista_root(seg, sizeof(*b), (void **)&b)) != 0)
		return fail("vista_root", rc);
	if (b->transfers == 0 && b->balance[0] == 0) {
		vista_begin_transaction(v, 0);
		vista_set_range(v, b->balance, sizeof(b->balance));
		for (int i = 0; i < NACCOUNTS; i++)
			b->balance[i] = INITIAL;
		if ((rc = vista_end_transaction(v)) != 0)
			return fail("initialize", rc);
	}
	for (long i = 0; i < n; i++) {
		uint32_t from = (uint32_t)rand() % NACCOUNTS;
		uint32_t to = (uint32_t)rand() % NACCOUNTS;
		uint32_t amount = (uint32_t)rand() % 100;
		struct history **slot = &b->ring[b->transfers % NHISTORY];
		struct history *h;

		vista_begin_transaction(v, 0);
		struct vista_range r[] = {
			{ &b->balance[from], sizeof(b->balance[0]) },
			{ &b->balance[to], sizeof(b->balance[0]) },
			{ &b->transfers, sizeof(b->transfers) },
			{ slot, sizeof(*slot) },
		};
		vista_set_ranges(v, 4, r); /* four ranges, one fence */
		if ((rc = vista_malloc(seg, sizeof(*h), (void **)&h)) != 0)
			return fail("vista_malloc", rc);
		/* Freed at commit; an abort or a crash would keep it. */
		if (*slot != NULL && (rc = vista_free(seg, *slot)) != 0)
			return fail("vista_free", rc);
		*h = (struct history){
			b->ring[(b->transfers + NHISTORY - 1) % NHISTORY], from,
			to, amount };
		*slot = h;
		b->balance[from] -= amount;
		b->balance[to] += amount;
		b->transfers++;
		if ((rc = vista_end_transaction(v)) != 0)
			return fail("commit", rc);
	}
	for (int i = 0; i < NACCOUNTS; i++)
		sum += b->balance[i];
	printf("%llu transfers, total %lld (%s)\n",
		(unsigned long long)b->transfers, (long long)sum,
		sum == (int64_t)NACCOUNTS * INITIAL ? "ok" : "WRONG");
	if ((rc = vista_fini(v)) != 0)
		return fail("vista_fini", rc);
	return sum == (int64_t)NACCOUNTS * INITIAL ? 0 : 1;
}
