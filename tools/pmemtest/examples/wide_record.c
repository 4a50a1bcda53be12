/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wide_record.c -- records of a key and its value, published in one line
 *
 * Each record is one cache line: a key, its value, padding.  The writer
 * fills record i with key i + 1 and its value and persists it; a record
 * whose key is not 0 is published.  Recovery (in ex_check) accepts a
 * record only with the value its key implies.
 *
 * The fixed writer stores the value, then the key, in two 8-byte stores:
 * one line's stores persist in program order, so a published key always
 * has its value.  The buggy one writes both with one 16-byte vector store
 * and takes it for atomic: x86 makes only aligned 8-byte stores failure-
 * atomic, and a power failure may leave the key without its value.  The
 * bug shows only when wide stores are torn (--tear): without it, one
 * instruction's store to one line is either in memory or not.
 *
 * Variant:
 *   BUG_WIDE_PUBLISH  key and value in one 16-byte store
 */
#include <emmintrin.h>

#include "example.h"

#define NREC 16

struct rec {
	uint64_t key; /* 0: free */
	uint64_t val;
	uint8_t pad[EX_LINE - 16];
} __attribute__((aligned(EX_LINE)));

struct root {
	struct rec r[NREC];
};

/* The compiler must keep the program order of the stores. */
#define ORDER() __asm__ volatile("" ::: "memory")

static uint64_t
val_of(uint64_t key)
{
	return (key * 0x9e3779b97f4a7c15ull) ^ 0x5a5a5a5aull;
}

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t i = 0; i < NREC; i++) {
		uint64_t key = i + 1;
#ifdef BUG_WIDE_PUBLISH
		_mm_store_si128((__m128i *)&r->r[i], _mm_set_epi64x( /* BUG-SITE */
			(long long)val_of(key), (long long)key));
#else
		r->r[i].val = val_of(key);
		ORDER();
		r->r[i].key = key;
#endif
		/* The record is durable before the next one is written. */
		rio_persist(p, &r->r[i], 16);
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	(void)p;
	for (int i = 0; i < NREC; i++) {
		const struct rec *x = &r->r[i];
		if (x->key == 0)
			continue;
		if (x->val != val_of(x->key))
			EX_FAIL("wide_record: record %d has key %llu and value "
				"%llu, not %llu", i, (unsigned long long)x->key,
				(unsigned long long)x->val,
				(unsigned long long)val_of(x->key));
	}
	return 0;
}
