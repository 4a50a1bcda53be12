/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kv_hash.c -- insert into a chained hash table
 *
 * 8 bucket heads in one line; entries (two lines: key, value, next,
 * checksum, padding) from a bump arena.  An insert writes the entry, makes
 * it durable, then links it from its bucket and makes that durable.
 * Invariant: every entry reachable from a bucket is valid, hashes to that
 * bucket, and holds value == key * 7.
 *
 * Variants:
 *   BUG_MARKER_FIRST   the bucket link is made durable before the entry
 *   BUG_WRONG_RANGE    the flush covers the entry's first line only
 */
#include "example.h"

#define BUCKETS 8
#define ENTRIES 24

struct entry {
	uint64_t key;
	uint64_t next; /* entry index + 1, 0 = end */
	uint64_t pad[12];
	uint64_t value; /* in the second line */
	uint64_t csum;
};

struct root {
	uint64_t bucket[BUCKETS];
	uint64_t used;
	uint8_t pad[EX_LINE - 8];
	struct entry e[ENTRIES];
};

static uint64_t
entry_csum(const struct entry *e)
{
	return ex_csum(e, offsetof(struct entry, csum));
}

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t k = 1; k <= ENTRIES; k++) {
		uint64_t b = (k * 0x9e3779b97f4a7c15ull) >> 61;
		struct entry *e = &r->e[r->used];
		r->used++;
		/* Allocate: the arena never hands this entry out again. */
		rio_persist(p, &r->used, sizeof(r->used));
		e->key = k;
		e->value = k * 7;
		e->next = r->bucket[b];
		e->csum = entry_csum(e);
#ifdef BUG_MARKER_FIRST
		r->bucket[b] = (uint64_t)(e - r->e) + 1;
		rio_persist(p, &r->bucket[b], sizeof(r->bucket[b]));
		rio_persist(p, e, sizeof(*e));
		continue;
#endif
#ifdef BUG_WRONG_RANGE
		rio_persist(p, e, EX_LINE);
#else
		/* The entry is durable before it is linked. */
		rio_persist(p, e, sizeof(*e));
#endif
		r->bucket[b] = (uint64_t)(e - r->e) + 1;
		rio_persist(p, &r->bucket[b], sizeof(r->bucket[b]));
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *r = (const struct root *)base;

	(void)p;
	for (uint64_t b = 0; b < BUCKETS; b++) {
		uint64_t i = r->bucket[b], hops = 0;
		while (i != 0) {
			const struct entry *e;
			if (i > ENTRIES || ++hops > ENTRIES)
				EX_FAIL("kv_hash: bad link %llu in bucket %llu",
					(unsigned long long)i,
					(unsigned long long)b);
			e = &r->e[i - 1];
			if (e->csum != entry_csum(e) ||
			    e->value != e->key * 7 ||
			    (e->key * 0x9e3779b97f4a7c15ull) >> 61 != b)
				EX_FAIL("kv_hash: entry %llu in bucket %llu is "
					"not valid (key %llu value %llu)",
					(unsigned long long)i - 1,
					(unsigned long long)b,
					(unsigned long long)e->key,
					(unsigned long long)e->value);
			i = e->next;
		}
	}
	return 0;
}
