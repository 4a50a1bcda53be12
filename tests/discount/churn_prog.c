/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * churn_prog.c -- a program whose heap and mappings grow and shrink all
 *                 the time, checkpointed at an interval and killed at
 *                 random (bench/discount/churn.sh)
 *
 *   dc-test-churn DIR N SEED INTERVAL_MS
 *
 * Makes N steps.  Each step picks one of SLOTS blocks: an empty one is
 * allocated -- malloc below and above the mmap threshold (the program
 * break moves up, libc maps), or an anonymous mmap -- and filled with a
 * byte of its own; a full one is checked, then freed, unmapped, moved and
 * resized by mremap, or given back in part by madvise(MADV_DONTNEED) and
 * filled again.  The break is trimmed on frees (M_TRIM_THRESHOLD), so it
 * moves down as well.  Checkpoints come at the interval
 * ($CHURN_PROTOCOL, default periodic).  A run resumed from a checkpoint
 * checks every block first: the memory must be what it was at the
 * checkpoint.
 *
 * Exit: 0 done, 1 dc_init failed, 2 bad arguments or a call failed,
 * 3 a block does not hold its bytes (the line says which).
 */
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <dc.h>

#define SLOTS 48
#define PAGE 4096ul

enum { EMPTY, SMALL, BIG, MAPPED };

static struct block {
	int kind;
	unsigned char fill;
	size_t len;
	unsigned char *p;
} blk[SLOTS];

static uint64_t rng;
static bool resumed; /* set by recovery (on_recover), after the restore */

static void
on_recover(void *arg)
{
	(void)arg;
	resumed = true;
}

static uint64_t
next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void
check(unsigned s, const char *when)
{
	const struct block *b = &blk[s];
	if (b->kind == EMPTY)
		return;
	for (size_t i = 0; i < b->len; i += 509)
		if (b->p[i] != b->fill) {
			printf("block %u (kind %d, %zu bytes at %p): byte %zu "
			       "is %u, not %u (%s)\n", s, b->kind, b->len,
				(void *)b->p, i, b->p[i], b->fill, when);
			exit(3);
		}
	if (b->p[b->len - 1] != b->fill) {
		printf("block %u: last byte (%s)\n", s, when);
		exit(3);
	}
}

static void
make(unsigned s, unsigned char fill)
{
	struct block *b = &blk[s];
	switch (next() % 3) {
	case 0: /* the break: below the mmap threshold */
		b->kind = SMALL;
		b->len = 4096 + next() % (96 * 1024);
		b->p = malloc(b->len);
		break;
	case 1: /* libc maps it */
		b->kind = BIG;
		b->len = 300 * 1024 + next() % (2u << 20);
		b->p = malloc(b->len);
		break;
	default:
		b->kind = MAPPED;
		b->len = PAGE * (1 + next() % 300);
		b->p = mmap(NULL, b->len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (b->p == MAP_FAILED)
			b->p = NULL;
		break;
	}
	if (b->p == NULL)
		exit(2);
	b->fill = fill;
	memset(b->p, fill, b->len);
}

static void
drop(unsigned s)
{
	struct block *b = &blk[s];
	if (b->kind == MAPPED)
		munmap(b->p, b->len);
	else
		free(b->p);
	b->kind = EMPTY;
}

static void
change(unsigned s, unsigned char fill)
{
	struct block *b = &blk[s];
	if (b->kind != MAPPED || next() % 2) {
		drop(s);
		make(s, fill);
		return;
	}
	if (next() % 2) { /* moved and resized */
		size_t len = PAGE * (1 + next() % 400);
		void *q = mremap(b->p, b->len, len, MREMAP_MAYMOVE);
		if (q == MAP_FAILED)
			exit(2);
		b->p = q;
		b->len = len;
	} else { /* part given back */
		size_t pages = b->len / PAGE, a = next() % pages;
		size_t k = 1 + next() % (pages - a);
		madvise(b->p + a * PAGE, k * PAGE, MADV_DONTNEED);
	}
	b->fill = fill;
	memset(b->p, fill, b->len);
}

int
main(int argc, char **argv)
{
	if (argc < 5)
		return 2;
	mallopt(M_MMAP_THRESHOLD, 256 * 1024);
	mallopt(M_TRIM_THRESHOLD, 64 * 1024);
	mallopt(M_TOP_PAD, 0);
	struct dc_opts o = { .dir = argv[1], .protocol = DC_PERIODIC,
		.interval_ms = (unsigned)atoi(argv[4]),
		.on_recover = on_recover };
	const char *p = getenv("CHURN_PROTOCOL");
	int rc = p && dc_protocol_parse(p, &o.protocol) ? 2 : 0;
	if (rc == 0)
		rc = dc_init(&o);
	if (rc) {
		fprintf(stderr, "dc_init: %s: %s\n", dc_strerror(rc),
			dc_errormsg());
		return 1;
	}
	uint64_t n = strtoull(argv[2], NULL, 10);
	rng = strtoull(argv[3], NULL, 10) * 2654435761u + 1;
	static uint64_t i;
	for (; i < n; i++) {
		if (resumed) {
			for (unsigned s = 0; s < SLOTS; s++)
				check(s, "resumed");
			resumed = false;
		}
		unsigned s = (unsigned)(next() % SLOTS);
		unsigned char fill = (unsigned char)(1 + i % 251);
		check(s, "step");
		if (blk[s].kind == EMPTY)
			make(s, fill);
		else
			change(s, fill);
	}
	for (unsigned s = 0; s < SLOTS; s++)
		check(s, "end");
	return 0;
}
