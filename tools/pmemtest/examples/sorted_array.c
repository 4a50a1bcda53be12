/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sorted_array.c -- insert into a sorted array that spans four lines
 *
 * The correct version is copy-on-write: it builds the new array (with the
 * element inserted) in the spare copy, makes it durable, then flips the
 * 8-byte selector.  Invariant: the live array is strictly increasing, its
 * count matches, and it holds only values that were inserted.
 *
 * Variant:
 *   BUG_NO_LOG   insert in place: shift the tail up a slot, store the new
 *                element, bump the count, persist the whole array: a crash
 *                leaves duplicates or holes across lines
 */
#include <stdint.h>

#include "example.h"

#define CAP 31

struct arr {
	uint64_t count;
	uint64_t v[CAP]; /* four lines in all */
};

struct root {
	uint64_t live;
	uint8_t pad[EX_LINE - 8];
	struct arr a[2];
};

/* Inserted values: a permutation of 1..24 (x * 7 mod 25). */
#define N 24
static uint64_t
value(uint64_t i)
{
	return (i * 7) % 25;
}

/* Build src + x in dst, storing only words that change; returns the
 * byte range [*lo, *hi) of dst that changed, so only those lines are
 * flushed (dst held an older version: much of it is already right). */
static __attribute__((unused)) void
insert_into(struct arr *dst, const struct arr *src, uint64_t x, size_t *lo,
	size_t *hi)
{
	uint64_t i = 0, j = 0, w[CAP + 1];

	while (i < src->count && src->v[i] < x)
		w[1 + j++] = src->v[i++];
	w[1 + j++] = x;
	while (i < src->count)
		w[1 + j++] = src->v[i++];
	w[0] = j;
	*lo = SIZE_MAX;
	*hi = 0;
	for (uint64_t k = 0; k <= j; k++) {
		uint64_t *d = k == 0 ? &dst->count : &dst->v[k - 1];
		if (*d == w[k])
			continue;
		*d = w[k];
		size_t off = (size_t)((uint8_t *)d - (uint8_t *)dst);
		*lo = off < *lo ? off : *lo;
		*hi = off + 8 > *hi ? off + 8 : *hi;
	}
}

static int
ex_run(rio_pool *p, uint8_t *base)
{
	struct root *r = (struct root *)base;

	for (uint64_t k = 1; k <= N; k++) {
#ifdef BUG_NO_LOG
		struct arr *a = &r->a[0];
		uint64_t x = value(k), i = a->count;
		while (i > 0 && a->v[i - 1] > x) {
			a->v[i] = a->v[i - 1];
			i--;
		}
		a->v[i] = x;
		a->count++;
		rio_persist(p, a, sizeof(*a));
#else
		struct arr *spare = &r->a[!r->live];
		size_t lo, hi;
		insert_into(spare, &r->a[r->live], value(k), &lo, &hi);
		/* The new array is durable before it goes live. */
		rio_persist(p, (uint8_t *)spare + lo, hi - lo);
		r->live = !r->live;
		rio_persist(p, &r->live, sizeof(r->live));
#endif
	}
	return 0;
}

static int
ex_check(rio_pool *p, uint8_t *base)
{
	const struct root *r = (const struct root *)base;
	const struct arr *a = &r->a[r->live];

	(void)p;
	if (r->live > 1 || a->count > N)
		EX_FAIL("sorted_array: live %llu count %llu",
			(unsigned long long)r->live,
			(unsigned long long)a->count);
	for (uint64_t i = 0; i < a->count; i++) {
		if (a->v[i] == 0 || a->v[i] > N)
			EX_FAIL("sorted_array: v[%llu] = %llu was never "
				"inserted", (unsigned long long)i,
				(unsigned long long)a->v[i]);
		if (i > 0 && a->v[i] <= a->v[i - 1])
			EX_FAIL("sorted_array: v[%llu] = %llu after %llu",
				(unsigned long long)i,
				(unsigned long long)a->v[i],
				(unsigned long long)a->v[i - 1]);
	}
	return 0;
}
