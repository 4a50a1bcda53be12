// SPDX-License-Identifier: BSD-3-Clause
/*
 * bank.c -- a persistent bank in a vista segment
 *
 *   bank DIR [TRANSFERS]
 *
 * Keeps 100 accounts in a segment under DIR (made on first use, at a fixed
 * address, so the list of history records can hold plain pointers), moves
 * money between random accounts in transactions, and appends a history
 * record for each transfer with vista_malloc.  Every run checks that the
 * money adds up: kill it with SIGKILL at any moment and run it again.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vista.h>

#define NACCOUNTS 100
#define INITIAL 1000

struct history {
	struct history *next; /* a native pointer: the segment never moves */
	uint32_t from, to, amount;
};

struct bank {
	uint64_t transfers;
	int64_t balance[NACCOUNTS];
	struct history *last;
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
		struct history *h;

		vista_begin_transaction(v, 0);
		struct vista_range r[] = {
			{ &b->balance[from], sizeof(b->balance[0]) },
			{ &b->balance[to], sizeof(b->balance[0]) },
			{ &b->transfers, sizeof(b->transfers) },
			{ &b->last, sizeof(b->last) },
		};
		vista_set_ranges(v, 4, r); /* four ranges, one fence */
		if ((rc = vista_malloc(seg, sizeof(*h), (void **)&h)) != 0) {
			/* The heap is full: forget the oldest history. */
			vista_abort_transaction(v);
			break;
		}
		*h = (struct history){ b->last, from, to, amount };
		b->last = h;
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
