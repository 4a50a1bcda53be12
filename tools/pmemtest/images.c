/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * images.c -- the crash images of a crash point, each one once
 *
 * At a crash point with pending lines P (sorted by pool and line), each
 * line holds after a crash its durable value, its current value, or one
 * of the values it held in between (its history, model.c M6): the crash
 * states are every choice of one of these per line.  When there are at
 * most 2^exhaustive of them, every one is an image.  Otherwise the images
 * are dur + S for
 *   - every S with |S| <= k, every line of S at its current value (the
 *     empty set: nothing pending reached memory),
 *   - S = P (everything did),
 *   - S = P minus at most `missing` lines, when |S| > k (a bug that needs
 *     all lines but one is found whatever k),
 *   - the intermediate values of the lines, alone, and with every other
 *     line at its current value (a line written twice inside an epoch, the
 *     first store evicted alone), at most max_versions of them: per line
 *     the first and the last stored since the last fence and the newest
 *     older one (I3: exploring every value at every crash point
 *     multiplied the images of bulk copies, eight values per line),
 *   - `random` subsets drawn with each line in or out at even odds, kept
 *     if k < |S| < |P| (bugs that need more than k lines together),
 * at most max_per_cp subsets per crash point.  With read-driven
 * exploration (o->reads: a library checker whose reads are recorded,
 * reads.c) a crash point past 2^exhaustive states is first explored by
 * what its recovery reads (explore_reads, I4), the images above following
 * only where that was cut.  Each image's key is the
 * model's hash of its content (model.c M2), computed in O(|S|); an image
 * whose key was seen before -- at this crash point or any earlier one -- is
 * not produced again.  The statistics say how much of each crash point's
 * state space was tried: all of it where it was enumerated, else the
 * images above over the product of the lines' choices.
 *
 * Invariants
 *   I1. The order is deterministic for a given trace and seed.
 *   I2. An image is produced at most once per set (128-bit content key;
 *       a false match needs a 2^-64 coincidence of two independent sums).
 *   I3. A line's intermediate values explored at a crash point are the
 *       first and last stored in the epoch the crash point closes, the
 *       newest older one, and (--tear) the first PMT_TEARS_EPOCH tears of
 *       the epoch's wide stores; the state count covers those.
 *   I4. Read-driven: a node's image holds its unassigned lines at dur;
 *       the states it covers are those agreeing with it on its assigned
 *       lines and on every line its recovery read (a page read makes all
 *       its pending lines read; reads unknown make every line read).
 *       Every child differs from its parent in a line the parent read, so
 *       the covered sets of the leaves are disjoint and their sum is the
 *       coverage printed.
 */
#include <stdlib.h>
#include <string.h>

#include "pmemtest_int.h"

struct img_reads {
	uint32_t *p; /* (pool, page) pairs, sorted */
	size_t n;    /* SIZE_MAX: unknown */
};

struct pmt_imgset {
	uint64_t (*k)[2];
	uint8_t *used;
	struct img_reads *r;
	size_t cap, n;
};

struct pmt_imgset *
pmt_imgset_new(void)
{
	struct pmt_imgset *s = pmt_xcalloc(1, sizeof(*s));
	s->cap = 1024;
	s->k = pmt_xcalloc(s->cap, sizeof(*s->k));
	s->used = pmt_xcalloc(s->cap, 1);
	s->r = pmt_xcalloc(s->cap, sizeof(*s->r));
	return s;
}

void
pmt_imgset_free(struct pmt_imgset *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->cap; i++)
		free(s->r[i].p);
	free(s->k);
	free(s->used);
	free(s->r);
	free(s);
}

static bool
insert(struct pmt_imgset *s, const uint64_t k[2], struct img_reads r)
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
	s->r[j] = r;
	s->n++;
	return true;
}

static struct img_reads *
find_reads(struct pmt_imgset *s, uint64_t k0)
{
	for (size_t j = k0 & (s->cap - 1); s->used[j];
		j = (j + 1) & (s->cap - 1))
		if (s->k[j][0] == k0)
			return &s->r[j];
	return NULL;
}

static int
pair_cmp(const void *a, const void *b)
{
	const uint32_t *x = a, *y = b;
	if (x[0] != y[0])
		return x[0] < y[0] ? -1 : 1;
	return x[1] < y[1] ? -1 : x[1] > y[1];
}

void
pmt_imgset_set_reads(struct pmt_imgset *s, uint64_t k0, uint32_t *p,
	size_t n)
{
	struct img_reads *r = find_reads(s, k0);

	if (r == NULL || r->p != NULL) {
		free(p);
		return;
	}
	if (n != SIZE_MAX && n > 1)
		qsort(p, n, 2 * sizeof(*p), pair_cmp);
	r->p = p;
	r->n = n;
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
		s->r = pmt_xcalloc(s->cap, sizeof(*s->r));
		for (size_t i = 0; i < old.cap; i++)
			if (old.used[i])
				insert(s, old.k[i], old.r[i]);
		free(old.k);
		free(old.used);
		free(old.r);
	}
	return insert(s, k, (struct img_reads){ NULL, 0 });
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
		const uint64_t *h = pmt_model_hash(m, chosen[i]);
		k[0] += h[0] - li->hdur[0];
		k[1] += h[1] - li->hdur[1];
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
	if (x->ver != y->ver)
		return x->ver < y->ver ? -1 : 1;
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
	for (size_t i = 0; i < n; i++)
		if (chosen[i].ver) {
			w->st->version_images++;
			break;
		}
}

/* Every subset of exactly s lines, in lexicographic order: the image
 * holds those lines (invert: every line but those) at their current
 * values. */
static void
combos(struct walk *w, size_t s, struct pmt_lref *buf, size_t *idx,
	bool invert)
{
	size_t n = w->npend;

	for (size_t i = 0; i < s; i++)
		idx[i] = i;
	for (;;) {
		size_t c = 0;
		if (!invert) {
			for (size_t i = 0; i < s; i++)
				buf[c++] = w->pend[idx[i]];
		} else {
			for (size_t i = 0, j = 0; i < n; i++) {
				if (j < s && idx[j] == i) {
					j++;
					continue;
				}
				buf[c++] = w->pend[i];
			}
		}
		try_subset(w, buf, c);
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

/* The intermediate values explored (I3): the first and the last stored
 * since the last fence, and the newest older one; returns how many (at
 * most PMT_VERS_EPOCH), their version numbers in out[], oldest first. */
#define PMT_VERS_EPOCH 7
#define PMT_TEARS_EPOCH 4
static uint32_t
explored(struct pmt_model *m, struct pmt_lref l, uint32_t *out)
{
	uint32_t n = pmt_model_nvers(m, l), k = 0, first = 0;
	uint32_t k0;

	for (uint32_t v = 1; v <= n; v++) {
		struct pmt_lref x = l;
		x.ver = v;
		if (pmt_model_hval(m, x)->epoch == m->fences) {
			first = v;
			break;
		}
	}
	if (first > 1)
		out[k++] = first - 1; /* the newest from an earlier epoch */
	else if (first == 0 && n > 0)
		out[k++] = n;
	if (first)
		out[k++] = first;
	if (first && n > first)
		out[k++] = n;
	/* The tears of this epoch's stores (model.c M7), the first
	 * PMT_TEARS_EPOCH of them not chosen above. */
	k0 = k;
	for (uint32_t v = first ? first : n + 1; v <= n &&
		k < k0 + PMT_TEARS_EPOCH; v++) {
		struct pmt_lref x = l;
		bool have = false;
		x.ver = v;
		if (!pmt_model_hval(m, x)->torn)
			continue;
		for (uint32_t i = 0; i < k0; i++)
			have |= out[i] == v;
		if (!have)
			out[k++] = v;
	}
	return k;
}

/* Every crash state: a mixed-radix count over the lines, digit 0 = dur,
 * 1 = current value, 1 + v = the v-th explored intermediate value. */
static void
every_state(struct walk *w, const uint32_t *nv, uint32_t (*vers)[PMT_VERS_EPOCH],
	struct pmt_lref *buf)
{
	size_t n = w->npend;
	uint32_t *d = pmt_xcalloc(n + 1, sizeof(*d));

	for (;;) {
		size_t c = 0, i;
		for (i = 0; i < n; i++)
			if (d[i] > 0) {
				buf[c] = w->pend[i];
				buf[c++].ver = d[i] == 1 ? 0 : vers[i][d[i] - 2];
			}
		try_subset(w, buf, c);
		if (w->stop)
			break;
		for (i = 0; i < n && ++d[i] == 2 + nv[i]; i++)
			d[i] = 0;
		if (i == n)
			break;
	}
	free(d);
}

/* Did the recovery of the image with key k0 read pending line l?  Unknown
 * reads, and pools the checker did not map, count as read (R2). */
static bool
was_read(const struct img_reads *r, struct pmt_lref l)
{
	uint32_t want[2] = { l.pool, PMT_READS_MAPPED };

	if (r == NULL || r->p == NULL || r->n == SIZE_MAX)
		return true;
	if (bsearch(want, r->p, r->n, 2 * sizeof(uint32_t), pair_cmp) == NULL)
		return true;
	want[1] = (uint32_t)(l.line * PMT_LINE / PMT_PAGE);
	return bsearch(want, r->p, r->n, 2 * sizeof(uint32_t), pair_cmp) !=
		NULL;
}

#define RN_FREE 0xffu

static double
pow2(size_t n)
{
	double x = 1;
	while (n-- > 0 && x < 1e300)
		x *= 2;
	return x;
}

/* The image of a node: its lines assigned a state other than dur. */
static void
node_image(struct walk *w, const uint8_t *d,
	uint32_t (*vers)[PMT_VERS_EPOCH], struct pmt_lref *buf, size_t *nc)
{
	size_t c = 0;

	for (size_t i = 0; i < w->npend; i++)
		if (d[i] != RN_FREE && d[i] > 0) {
			buf[c] = w->pend[i];
			buf[c++].ver = d[i] == 1 ? 0 : vers[i][d[i] - 2];
		}
	*nc = c;
}

/* Read-driven exploration (I4).  A node assigns a state (digit: 0 dur,
 * 1 current, 1 + v an explored intermediate value) to some pending lines;
 * its image holds the others at their durable value.  Its recovery read
 * a set of pending lines R: every image that agrees with the node on R
 * behaves the same, so the node covers the states with its assigned lines
 * and R's lines as they are and every other line free.  The lines of R the
 * node left free are branched on: each other choice of their states is a
 * child.  Returns the states covered. */
static double
explore_reads(struct walk *w, const uint32_t *nv,
	uint32_t (*vers)[PMT_VERS_EPOCH], struct pmt_lref *buf)
{
	size_t n = w->npend, nlev = 1, nnext = 0;
	uint8_t *lev = pmt_xmalloc(n + 1), *next = NULL;
	uint64_t *keys = pmt_xmalloc(sizeof(*keys));
	size_t *u = pmt_xmalloc((n + 1) * sizeof(*u));
	uint8_t *dg = pmt_xmalloc(n + 1);
	double covered = 0;
	bool cut = false;
	size_t c;

	memset(lev, RN_FREE, n);
	w->st->read_cps++;
	while (nlev > 0 && !w->stop) {
		keys = pmt_xrealloc(keys, nlev * sizeof(*keys));
		for (size_t x = 0; x < nlev && !w->stop; x++) {
			uint64_t k[2];
			node_image(w, lev + x * n, vers, buf, &c);
			pmt_image_key(w->m, buf, c, k);
			keys[x] = k[0];
			w->st->read_runs++;
			try_subset(w, buf, c);
		}
		if (w->stop)
			break;
		w->o->wait(w->arg);
		/* Images checked before without their reads recorded (at a
		 * crash point with few states) are checked again for them. */
		bool probed = false;
		for (size_t x = 0; x < nlev && w->o->probe != NULL; x++) {
			const struct img_reads *r = find_reads(w->seen,
				keys[x]);
			if (r == NULL || r->p != NULL || r->n != 0)
				continue;
			node_image(w, lev + x * n, vers, buf, &c);
			w->o->probe(buf, c, w->pend, w->npend, w->arg);
			probed = true;
		}
		if (probed)
			w->o->wait(w->arg);
		nnext = 0;
		for (size_t x = 0; x < nlev; x++) {
			const uint8_t *d = lev + x * n;
			const struct img_reads *r = find_reads(w->seen,
				keys[x]);
			double rest = 1, kids = 1;
			size_t nu = 0;
			for (size_t i = 0; i < n; i++) {
				if (d[i] != RN_FREE)
					continue;
				if (was_read(r, w->pend[i])) {
					u[nu++] = i;
					kids *= 2.0 + nv[i];
				} else {
					rest *= 2.0 + nv[i];
				}
			}
			/* The child with R's free lines at dur is this
			 * image. */
			covered += rest;
			if (nu == 0)
				continue;
			/* Too many children with every line's intermediate
			 * values: dur or current only (the classic version
			 * images follow, as the crash point is then not
			 * covered whole). */
			double budget = (double)w->o->max_per_cp -
				(double)w->tried - (double)nnext;
			bool two = kids - 1 > budget;
			if (two && pow2(nu) -
				1 > budget) {
				cut = true;
				continue;
			}
			if (two)
				kids = pow2(nu);
			next = pmt_xrealloc(next, (nnext + (size_t)kids) * n);
			memset(dg, 0, n);
			for (;;) {
				size_t i;
				for (i = 0; i < nu && ++dg[u[i]] ==
					(two ? 2 : 2 + nv[u[i]]); i++)
					dg[u[i]] = 0;
				if (i == nu)
					break;
				uint8_t *kid = next + nnext++ * n;
				memcpy(kid, d, n);
				for (size_t j = 0; j < nu; j++)
					kid[u[j]] = dg[u[j]];
			}
		}
		uint8_t *t = lev;
		lev = next;
		next = t;
		nlev = nnext;
	}
	if (cut || w->stop)
		w->st->read_cut++;
	free(dg);
	free(u);
	free(keys);
	free(lev);
	free(next);
	return covered;
}

void
pmt_enumerate(struct pmt_model *m, struct pmt_imgset *seen,
	const struct pmt_enum_opts *o, struct pmt_enum_stats *st,
	pmt_image_fn fn, void *arg)
{
	size_t n = m->npend;
	struct pmt_lref *pend = pmt_xmalloc((n + 1) * sizeof(*pend));
	struct pmt_lref *buf = pmt_xmalloc((n + 1) * sizeof(*buf));
	size_t kmax = o->k > o->missing ? o->k : o->missing;
	size_t *idx = pmt_xmalloc((kmax + 1) * sizeof(*idx));
	uint32_t *nv = pmt_xmalloc((n + 1) * sizeof(*nv));
	uint32_t (*vers)[PMT_VERS_EPOCH] = pmt_xmalloc((n + 1) *
		sizeof(*vers));
	struct walk w = { .m = m, .seen = seen, .o = o, .st = st, .fn = fn,
		.arg = arg, .pend = pend, .npend = n };
	uint64_t rng = o->seed ^ ((uint64_t)m->fences * 0x9e3779b97f4a7c15ull);
	double space = 1, read_cov = 0;
	bool all = false;

	memcpy(pend, m->pend, n * sizeof(*pend));
	qsort(pend, n, sizeof(*pend), lref_cmp); /* I1 */
	if (n > st->max_pending)
		st->max_pending = n;
	for (size_t i = 0; i < n; i++) {
		pend[i].ver = 0;
		nv[i] = explored(m, pend[i], vers[i]);
		space *= 2.0 + nv[i];
	}
	st->cps++;
	st->space += space;
	if (space <= (double)(1ull << (o->exhaustive < 63 ? o->exhaustive : 63)) &&
	    space <= (double)o->max_per_cp) {
		every_state(&w, nv, vers, buf);
		all = !w.stop;
		goto out;
	}
	if (o->reads && o->wait != NULL) {
		if (o->want)
			o->want(arg, true);
		read_cov = explore_reads(&w, nv, vers, buf);
		if (o->want)
			o->want(arg, false);
		if (read_cov >= space || w.stop) {
			all = read_cov >= space;
			goto out;
		}
	}
	uint64_t tried0 = w.tried;
	for (size_t s = 0; s <= o->k && s <= n && !w.stop; s++)
		combos(&w, s, buf, idx, false);
	if (n > o->k)
		try_subset(&w, pend, n);
	for (size_t s = 1; s <= o->missing && s < n && n - s > o->k && !w.stop;
		s++)
		combos(&w, s, buf, idx, true);
	for (size_t i = 0, budget = o->max_versions; i < n && !w.stop; i++)
		for (uint32_t v = 0; v < nv[i] && budget && !w.stop;
			v++, budget--) {
			buf[0] = pend[i];
			buf[0].ver = vers[i][v];
			try_subset(&w, buf, 1);
			if (n == 1 || w.stop)
				continue;
			memcpy(buf, pend, n * sizeof(*buf));
			buf[i].ver = vers[i][v];
			try_subset(&w, buf, n);
		}
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
	/* Read-driven exploration cut: the classic images, counted on top
	 * of what it covered. */
	if (read_cov > 0)
		read_cov += (double)(w.tried - tried0);
out:
	if (read_cov > 0)
		st->covered += read_cov < space ? read_cov : space;
	else
		st->covered += (double)w.tried < space ? (double)w.tried :
			space;
	if (all || (double)w.tried >= space)
		st->full_cps++;
	free(vers);
	free(nv);
	free(idx);
	free(buf);
	free(pend);
}
