/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stripe.h -- the parity stripe of parity_stripe.c and stripe_intent.c:
 * seven data lines and their XOR parity line, each holding its generation,
 * six values and a checksum stored last (a line whose checksum does not
 * match was torn by a crash)
 */
#ifndef PMEMTEST_STRIPE_H
#define PMEMTEST_STRIPE_H

#include "example.h"

#define NDATA 7
#define WORDS 6

struct sline {
	uint64_t gen;
	uint64_t v[WORDS];
	uint64_t csum; /* of gen and v */
};

/* The compiler must keep the program order of the stores. */
#define ORDER() __asm__ volatile("" ::: "memory")

static uint64_t
val(uint64_t gen, int line, int w)
{
	return gen * 1000003u + (uint64_t)line * 101u + (uint64_t)w;
}

static bool
whole(const struct sline *l)
{
	static const struct sline zero;
	return l->csum == ex_csum(l, offsetof(struct sline, csum)) ||
		memcmp(l, &zero, sizeof(zero)) == 0;
}

/* Generation and values, then the checksum: inside one line the stores
 * persist in this order. */
static void
seal(struct sline *l, uint64_t gen)
{
	l->gen = gen;
	ORDER();
	l->csum = ex_csum(l, offsetof(struct sline, csum));
}

static void
xor_of(struct sline *out, const struct sline *l, int skip)
{
	for (int w = 0; w < WORDS; w++) {
		uint64_t x = 0;
		for (int i = 0; i <= NDATA; i++)
			if (i != skip)
				x ^= l[i].v[w];
		out->v[w] = x;
	}
}

/* The invariant after recovery: every whole line holds the values of its
 * generation, the committed one or the next; a committed stripe is whole
 * and its parity right.  0 if it holds, else says so. */
static int
stripe_check(const char *who, const struct sline *l, uint64_t committed)
{
	struct sline par;
	int same = 0;

	for (int i = 0; i <= NDATA; i++) {
		if (!whole(&l[i]) || l[i].gen == 0)
			continue;
		if (l[i].gen != committed && l[i].gen != committed + 1)
			EX_FAIL("%s: line %d has generation %llu, committed "
				"%llu", who, i, (unsigned long long)l[i].gen,
				(unsigned long long)committed);
		same += l[i].gen == committed;
		for (int w = 0; i < NDATA && w < WORDS; w++)
			if (l[i].v[w] != val(l[i].gen, i, w))
				EX_FAIL("%s: line %d word %d wrong for "
					"generation %llu", who, i, w,
					(unsigned long long)l[i].gen);
	}
	if (committed == 0)
		return 0;
	xor_of(&par, l, NDATA);
	if (same == NDATA + 1 &&
	    memcmp(par.v, l[NDATA].v, sizeof(par.v)) != 0)
		EX_FAIL("%s: parity of generation %llu wrong", who,
			(unsigned long long)committed);
	return 0;
}

#endif /* PMEMTEST_STRIPE_H */
