/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * images.c -- the crash images of a crash point, each one once
 *
 * At a crash point with pending lines P (sorted by pool and line), the
 * images are dur + S for
 *   - every S with |S| <= k (the empty set: nothing pending reached memory),
 *   - S = P (everything did),
 *   - `random` subsets drawn with each line in or out at even odds, kept
 *     if k < |S| < |P| (bugs that need more than k lines together),
 * at most max_per_cp subsets per crash point.  Each image's key is the
 * model's hash of its content (model.c M2), computed in O(|S|); an image
 * whose key was seen before -- at this crash point or any earlier one -- is
 * not produced again.
 *
 * Invariants
 *   I1. The order is deterministic for a given trace and seed.
 *   I2. An image is produced at most once per set (128-bit content key;
 *       a false match needs a 2^-64 coincidence of two independent sums).
 */
#include <stdlib.h>
#include <string.h>

#include "pmemtest_int.h"

struct pmt_imgset {
	uint64_t (*k)[2];
	uint8_t *used;
	size_t cap, n;
};

struct pmt_imgset *
pmt_imgset_new(void)
{
	struct pmt_imgset *s = pmt_xcalloc(1, sizeof(*s));
	s->cap = 1024;
	s->k = pmt_xcalloc(s->cap, sizeof(*s->k));
	s->used = pmt_xcalloc(s->cap, 1);
	return s;
}

void
pmt_imgset_free(struct pmt_imgset *s)
{
	if (s == NULL)
		return;
	free(s->k);
	free(s->used);
	free(s);
}

size_t
pmt_imgset_count(const struct pmt_imgset *s)
{
	return s->n;
}

static bool
insert(struct pmt_imgset *s, const uint64_t k[2])
{
	size_t j = k[0] & (s->cap - 1);

	while (s->used[j]) {
		if (s->k[j][0] == k[0] && s->k[j][1] == k[1])
			return false;
		j = (j + 1) & (s->cap - 1);
	}
	s->used[j] = 1;
	s->k[j][0] = k[0];
	s->k[j][1] = k[1];
	s->n++;
	return true;
}

bool
pmt_imgset_add(struct pmt_imgset *s, const uint64_t k[2])
{
	if ((s->n + 1) * 2 > s->cap) {
		struct pmt_imgset old = *s;
		s->cap *= 2;
		s->n = 0;
		s->k = pmt_xcalloc(s->cap, sizeof(*s->k));
		s->used = pmt_xcalloc(s->cap, 1);
		for (size_t i = 0; i < old.cap; i++)
			if (old.used[i])
				insert(s, old.k[i]);
		free(old.k);
		free(old.used);
	}
	return insert(s, k);
}

void
pmt_image_key(struct pmt_model *m, const struct pmt_lref *chosen, size_t n,
	uint64_t k[2])
{
	k[0] = k[1] = 0;
	for (unsigned i = 0; i < m->npools; i++) {
		struct pmt_pool *p = &m->pools[i];
		if (!p->present)
			continue;
		k[0] += p->hsum[0] + p->hpresent[0];
		k[1] += p->hsum[1] + p->hpresent[1];
	}
	for (size_t i = 0; i < n; i++) {
		struct pmt_line_info *li = pmt_model_li(m, chosen[i]);
		k[0] += li->hcur[0] - li->hdur[0];
		k[1] += li->hcur[1] - li->hdur[1];
	}
}

static int
lref_cmp(const void *a, const void *b)
{
	const struct pmt_lref *x = a, *y = b;
	if (x->pool != y->pool)
		return x->pool < y->pool ? -1 : 1;
	if (x->line != y->line)
		return x->line < y->line ? -1 : 1;
	return 0;
}

struct walk {
	struct pmt_model *m;
	struct pmt_imgset *seen;
	const struct pmt_enum_opts *o;
	struct pmt_enum_stats *st;
	pmt_image_fn fn;
	void *arg;
	const struct pmt_lref *pend;
	size_t npend;
	uint64_t tried;
	bool stop;
};

static void
try_subset(struct walk *w, const struct pmt_lref *chosen, size_t n)
{
	uint64_t k[2];

	if (w->stop)
		return;
	if (w->tried++ >= w->o->max_per_cp) {
		w->st->truncated_cps++;
		w->stop = true;
		return;
	}
	w->st->generated++;
	pmt_image_key(w->m, chosen, n, k);
	if (!pmt_imgset_add(w->seen, k)) {
		w->st->duplicates++;
		return;
	}
	if (!w->fn(chosen, n, w->pend, w->npend, w->arg))
		w->stop = true;
}

/* Every subset of exactly s lines, in lexicographic order. */
static void
combos(struct walk *w, size_t s, struct pmt_lref *buf, size_t *idx)
{
	size_t n = w->npend;

	for (size_t i = 0; i < s; i++)
		idx[i] = i;
	for (;;) {
		for (size_t i = 0; i < s; i++)
			buf[i] = w->pend[idx[i]];
		try_subset(w, buf, s);
		if (w->stop)
			return;
		size_t i = s;
		while (i > 0 && idx[i - 1] == n - s + i - 1)
			i--;
		if (i == 0)
			return;
		idx[i - 1]++;
		for (size_t j = i; j < s; j++)
			idx[j] = idx[j - 1] + 1;
	}
}

void
pmt_enumerate(struct pmt_model *m, struct pmt_imgset *seen,
	const struct pmt_enum_opts *o, struct pmt_enum_stats *st,
	pmt_image_fn fn, void *arg)
{
	size_t n = m->npend;
	struct pmt_lref *pend = pmt_xmalloc((n + 1) * sizeof(*pend));
	struct pmt_lref *buf = pmt_xmalloc((n + 1) * sizeof(*buf));
	size_t *idx = pmt_xmalloc((o->k + 1) * sizeof(*idx));
	struct walk w = { .m = m, .seen = seen, .o = o, .st = st, .fn = fn,
		.arg = arg, .pend = pend, .npend = n };
	uint64_t rng = o->seed ^ ((uint64_t)m->fences * 0x9e3779b97f4a7c15ull);

	memcpy(pend, m->pend, n * sizeof(*pend));
	qsort(pend, n, sizeof(*pend), lref_cmp); /* I1 */
	if (n > st->max_pending)
		st->max_pending = n;
	for (size_t s = 0; s <= o->k && s <= n && !w.stop; s++)
		combos(&w, s, buf, idx);
	if (n > o->k)
		try_subset(&w, pend, n);
	for (unsigned r = 0; n > (size_t)o->k + 1 && r < o->random && !w.stop;
		r++) {
		for (int attempt = 0; attempt < 8; attempt++) {
			size_t c = 0;
			uint64_t bits = 0;
			for (size_t i = 0; i < n; i++) {
				if (i % 64 == 0)
					bits = pmt_rand(&rng);
				if (bits & 1)
					buf[c++] = pend[i];
				bits >>= 1;
			}
			if (c > o->k && c < n) {
				try_subset(&w, buf, c);
				break;
			}
		}
	}
	free(idx);
	free(buf);
	free(pend);
}
