/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * model.c -- the persistence model: which lines are durable at each fence
 *
 * Replays a trace and keeps, for every traced pool, two images:
 *   cur  the content the program sees (every LINE record applied);
 *   dur  the content that is durable for sure: a line's value becomes
 *        durable when a fence of the thread that flushed it completes, and
 *        the value is the one it had at that flush (x86: clwb/clflushopt
 *        write back the line as it is when they execute; a store after the
 *        flush may or may not be included, so it stays pending).
 * A line whose cur differs from its dur is *pending*: after a power
 * failure it holds either value, whole (the cache writes back whole lines;
 * aligned 8-byte stores are atomic, and a line is never split: see
 * docs/pmemtest.1.md, CAVEATS).  Every domain is modelled as ADR
 * (cacheline): a program correct there is correct in the others.
 *
 * Crash points.  Before a fence takes effect, the model calls back: the
 * crash states possible at that instant are dur (every earlier fence done)
 * plus any subset of the pending lines -- including the ones this fence is
 * about to make durable.  A crash anywhere in the epoch that the fence
 * closes yields one of these (as far as the line model goes: intermediate
 * values a line held inside the epoch are not explored).  After the last
 * record the model calls back once more (END): the state after the last
 * fence, with whatever never became durable pending.
 *
 * Redundant flushes.  A flush of a line already flushed, with no store to
 * it since, is a lint.  The trace says a line was stored to when its
 * content changed (LINE) or, with userfaultfd, when its page was written
 * (TOUCH): a store that put back a line's old value changes no content,
 * yet the line may have reached memory in between with the other value,
 * so flushing it again is needed.  Scanning sees no TOUCH; there the lint
 * may report such a flush.
 *
 * Discarded lines (rio_durable_discard: memory that holds no state any
 * more) take their current content as durable: whichever value a crash
 * leaves there, nobody reads it, so neither is worth an image or a lint.
 * A later store makes the line pending again.
 *
 * Invariants
 *   M1. pend holds exactly the lines with cur != dur, each once;
 *       li.pend_pos is its index + 1.
 *   M2. li.hcur / li.hdur are the line hashes of cur / dur;
 *       pool.hsum is the sum of li.hdur over the pool.  The key of an image
 *       (images.c) is the sum of the line hashes of its content plus a term
 *       per present pool, so replacing a line updates it in O(1).
 *   M3. A pool that existed before the traced run is present in every
 *       image from the first crash point on (pre-pass); one created by the
 *       run is present from its first mapping.
 *   M4. Only a fence of the flushing thread makes a flush durable.
 *   M5. pool.nz[page] counts the non-zero lines of dur in that page, so
 *       a crash image is written as its non-zero pages only.
 *   M6. A pending line's history holds, oldest first, every value it held
 *       after the value its last completed flush wrote back (or after its
 *       durable value, if none did) and before its current one: x86
 *       writes one line's stores back in program order, so after a crash
 *       the line holds dur, one of these, or cur.  With per-store capture
 *       (PMT_LINE_STORE) that is every store's value; otherwise one value
 *       per flush or fence at which a change was logged.  At most
 *       PMT_HIST_MAX values are kept (the newest); older ones are counted
 *       in hist_dropped.  A line that stops being pending has none.
 *   M7. With tearing on (--tear), one store (PMT_LINE_STORE) that changes
 *       more than one aligned 8-byte word of a line -- x86 makes only
 *       8-byte stores failure-atomic -- adds to the history, between the
 *       line's old value and its new one, the old value with the first i
 *       changed words of the new and with the last i (0 < i < changed
 *       words): the states a crash inside the store leaves.  They carry
 *       the new value's sequence number (a flush that wrote back the new
 *       value drops them; one that wrote back the old keeps them).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pmemtest_int.h"

#define SEED_A 0x6c696e6541ull
#define SEED_B 0x6c696e6542ull

static void
line_hash(uint32_t pool, uint64_t line, const uint8_t *data, uint64_t h[2])
{
	uint64_t s = ((uint64_t)pool << 48) ^ line;
	h[0] = rio_checksum(data, PMT_LINE, SEED_A ^ s);
	h[1] = rio_checksum(data, PMT_LINE, SEED_B ^ (s * 0x9e3779b97f4a7c15ull));
}

struct pmt_line_info *
pmt_model_li(struct pmt_model *m, struct pmt_lref l)
{
	return &m->pools[l.pool].li[l.line];
}

const uint8_t *
pmt_model_cur(struct pmt_model *m, struct pmt_lref l)
{
	return m->pools[l.pool].cur + l.line * PMT_LINE;
}

/* ---- value histories (M6) ---- */

static struct pmt_hist *
hist_of(struct pmt_model *m, const struct pmt_line_info *li)
{
	return li->hist ? &m->hists[li->hist - 1] : NULL;
}

static void
hist_clear(struct pmt_model *m, struct pmt_line_info *li)
{
	struct pmt_hist *h = hist_of(m, li);

	if (h == NULL)
		return;
	h->n = 0;
	h->dropped = 0;
	h->next_free = m->free_hist;
	m->free_hist = li->hist;
	li->hist = 0;
}

static void
hist_push(struct pmt_model *m, struct pmt_line_info *li, const uint8_t *data,
	const uint64_t hh[2])
{
	struct pmt_hist *h;
	struct pmt_hval *v;

	if (li->hist == 0) {
		if (m->free_hist) {
			li->hist = m->free_hist;
			m->free_hist = m->hists[li->hist - 1].next_free;
		} else {
			m->hists = pmt_xrealloc(m->hists,
				(m->nhists + 1) * sizeof(*m->hists));
			memset(&m->hists[m->nhists], 0, sizeof(*m->hists));
			li->hist = ++m->nhists;
		}
	}
	h = &m->hists[li->hist - 1];
	if (h->n == PMT_HIST_MAX) {
		memmove(h->v, h->v + 1, (h->n - 1) * sizeof(*h->v));
		h->n--;
		h->dropped++;
		m->hist_dropped++;
	}
	if (h->n == h->cap) {
		h->cap = h->cap ? h->cap * 2 : 4;
		h->v = pmt_xrealloc(h->v, h->cap * sizeof(*h->v));
	}
	v = &h->v[h->n++];
	memcpy(v->data, data, PMT_LINE);
	v->h[0] = hh[0];
	v->h[1] = hh[1];
	v->seq = li->cur_seq;
	v->stack = li->store_stack;
	v->store_rec = li->store_rec;
	v->epoch = li->store_epoch;
	v->torn = 0;
	v->wide = 0;
}

/* The flush that wrote back value `seq` completed: older values cannot
 * be in memory any more. */
static void
hist_drop_upto(struct pmt_model *m, struct pmt_line_info *li, uint32_t seq)
{
	struct pmt_hist *h = hist_of(m, li);
	uint32_t k = 0;

	if (h == NULL)
		return;
	while (k < h->n && h->v[k].seq <= seq)
		k++;
	memmove(h->v, h->v + k, (h->n - k) * sizeof(*h->v));
	h->n -= k;
	if (h->n == 0)
		hist_clear(m, li);
}

uint32_t
pmt_model_nvers(struct pmt_model *m, struct pmt_lref l)
{
	const struct pmt_hist *h = hist_of(m, pmt_model_li(m, l));
	return h ? h->n : 0;
}

const struct pmt_hval *
pmt_model_hval(struct pmt_model *m, struct pmt_lref l)
{
	return &hist_of(m, pmt_model_li(m, l))->v[l.ver - 1];
}

const uint8_t *
pmt_model_data(struct pmt_model *m, struct pmt_lref l)
{
	return l.ver ? pmt_model_hval(m, l)->data : pmt_model_cur(m, l);
}

const uint64_t *
pmt_model_hash(struct pmt_model *m, struct pmt_lref l)
{
	return l.ver ? pmt_model_hval(m, l)->h : pmt_model_li(m, l)->hcur;
}

static struct pmt_pool *
pool_of(struct pmt_model *m, uint32_t id, uint64_t line)
{
	if (id >= m->npools || !m->pools[id].known)
		return NULL;
	if (line >= m->pools[id].nlines)
		return NULL;
	return &m->pools[id];
}

/* M1 */
static void
update_pending(struct pmt_model *m, struct pmt_pool *p, uint64_t line)
{
	struct pmt_line_info *li = &p->li[line];
	bool pend = memcmp(p->cur + line * PMT_LINE, p->dur + line * PMT_LINE,
		PMT_LINE) != 0;

	if (pend && li->pend_pos == 0) {
		if (m->npend == m->pend_cap) {
			m->pend_cap = m->pend_cap ? m->pend_cap * 2 : 256;
			m->pend = pmt_xrealloc(m->pend,
				m->pend_cap * sizeof(*m->pend));
		}
		m->pend[m->npend] = (struct pmt_lref){ .pool = p->id,
			.line = line };
		li->pend_pos = (uint32_t)++m->npend;
	} else if (!pend && li->pend_pos != 0) {
		size_t i = li->pend_pos - 1;
		struct pmt_lref last = m->pend[--m->npend];
		if (i != m->npend) {
			m->pend[i] = last;
			pmt_model_li(m, last)->pend_pos = (uint32_t)i + 1;
		}
		li->pend_pos = 0;
	}
	if (!pend)
		hist_clear(m, li); /* M6 */
}

/* M7: the tears of one store of `data` over the line's current value. */
static void
tear(struct pmt_model *m, struct pmt_pool *p, uint64_t line,
	const uint8_t *data, uint32_t stack)
{
	struct pmt_line_info *li = &p->li[line];
	const uint8_t *c = p->cur + line * PMT_LINE;
	unsigned w[PMT_LINE / 8], nw = 0;

	for (unsigned i = 0; i < PMT_LINE / 8; i++)
		if (memcmp(c + i * 8, data + i * 8, 8) != 0)
			w[nw++] = i;
	if (nw < 2)
		return;
	m->torn_stores++;
	for (unsigned side = 0; side < 2; side++)
		for (unsigned i = 1; i < nw; i++) {
			uint8_t t[PMT_LINE];
			uint64_t h[2];
			memcpy(t, c, PMT_LINE);
			for (unsigned k = 0; k < i; k++) {
				unsigned x = side ? w[nw - 1 - k] : w[k];
				memcpy(t + x * 8, data + x * 8, 8);
			}
			line_hash(p->id, line, t, h);
			hist_push(m, li, t, h);
			struct pmt_hval *v = &m->hists[li->hist - 1].v[
				m->hists[li->hist - 1].n - 1];
			v->seq = li->cur_seq + 1;
			v->stack = stack;
			v->store_rec = (uint32_t)m->records;
			v->epoch = m->fences;
			v->torn = (uint8_t)i;
			v->wide = (uint8_t)nw;
		}
}

static void
set_cur(struct pmt_model *m, struct pmt_pool *p, uint64_t line,
	const uint8_t *data, uint32_t stack, bool store)
{
	struct pmt_line_info *li = &p->li[line];
	uint8_t *c = p->cur + line * PMT_LINE;

	if (memcmp(c, data, PMT_LINE) == 0) {
		if (store) /* its old value stored again */
			li->flags &= ~PMT_LI_CLEAN;
		return;
	}
	if (li->pend_pos != 0) /* M6: cur becomes a value of the past */
		hist_push(m, li, c, li->hcur);
	if (store && m->tear)
		tear(m, p, line, data, stack);
	memcpy(c, data, PMT_LINE);
	line_hash(p->id, line, c, li->hcur);
	li->cur_seq++;
	li->store_stack = stack;
	li->store_epoch = m->fences;
	li->store_flush = 0;
	li->flags &= ~(PMT_LI_FLUSHED | PMT_LI_CLEAN);
	li->store_rec = (uint32_t)m->records;
	update_pending(m, p, line);
}

static void
set_dur(struct pmt_model *m, struct pmt_pool *p, uint64_t line,
	const uint8_t *data, const uint64_t h[2], uint32_t seq)
{
	static const uint8_t zero[PMT_LINE];
	struct pmt_line_info *li = &p->li[line];
	uint8_t *d = p->dur + line * PMT_LINE;
	bool was = memcmp(d, zero, PMT_LINE) != 0;
	bool now = memcmp(data, zero, PMT_LINE) != 0;

	/* M5 */
	p->nz[line / PMT_LINES_PER_PAGE] += (int)now - (int)was;
	memcpy(d, data, PMT_LINE);
	p->hsum[0] += h[0] - li->hdur[0];
	p->hsum[1] += h[1] - li->hdur[1];
	li->hdur[0] = h[0];
	li->hdur[1] = h[1];
	hist_drop_upto(m, li, seq); /* M6 */
	update_pending(m, p, line);
}

/* Both images take `data` (initial content). */
static void
set_both(struct pmt_model *m, struct pmt_pool *p, uint64_t line,
	const uint8_t *data)
{
	struct pmt_line_info *li = &p->li[line];
	uint64_t h[2];

	line_hash(p->id, line, data, h);
	memcpy(p->cur + line * PMT_LINE, data, PMT_LINE);
	li->hcur[0] = h[0];
	li->hcur[1] = h[1];
	set_dur(m, p, line, data, h, UINT32_MAX);
}

static void
pool_init(struct pmt_model *m, const struct pmt_rec_pool *pr, uint16_t aux,
	const char *path)
{
	static const uint8_t zero[PMT_LINE];
	struct pmt_pool *p;

	if (pr->pool != m->npools || pr->size % PMT_LINE != 0 || pr->size == 0)
		pmt_die("trace: bad POOL record for %s", path);
	m->pools = pmt_xrealloc(m->pools, (m->npools + 1) * sizeof(*m->pools));
	p = &m->pools[m->npools++];
	memset(p, 0, sizeof(*p));
	p->id = pr->pool;
	p->path = pmt_xstrdup(path);
	p->size = pr->size;
	p->nlines = pr->size / PMT_LINE;
	p->cur = pmt_xbig(p->size);
	p->dur = pmt_xbig(p->size);
	p->li = pmt_xbig(p->nlines * sizeof(*p->li));
	p->npages = (p->size + PMT_PAGE - 1) / PMT_PAGE;
	p->nz = pmt_xcalloc(p->npages, sizeof(*p->nz));
	p->existed = aux & PMT_POOL_EXISTED;
	p->known = true;
	for (uint64_t l = 0; l < p->nlines; l++) {
		struct pmt_line_info *li = &p->li[l];
		line_hash(p->id, l, zero, li->hdur);
		li->hcur[0] = li->hdur[0];
		li->hcur[1] = li->hdur[1];
		p->hsum[0] += li->hdur[0];
		p->hsum[1] += li->hdur[1];
	}
	p->hpresent[0] = rio_checksum(path, strlen(path), SEED_A + p->id);
	p->hpresent[1] = rio_checksum(path, strlen(path), SEED_B + p->id);
	/* Image file name: the pool's own, made unique (pool id prefix)
	 * only if another pool has the same one. */
	{
		const char *base = strrchr(path, '/');
		base = base ? base + 1 : path;
		p->name = pmt_xstrdup(base);
		for (unsigned i = 0; i + 1 < m->npools; i++)
			if (strcmp(m->pools[i].name, p->name) == 0) {
				free(p->name);
				p->name = pmt_xasprintf("%u-%s", p->id, base);
				break;
			}
	}
}

static void
stack_add(struct pmt_model *m, const struct pmt_rec_stack *s,
	const struct pmt_frame *fr)
{
	if (s->id != m->nstacks + 1)
		pmt_die("trace: stack ids out of order");
	m->stacks = pmt_xrealloc(m->stacks, (s->id + 1) * sizeof(*m->stacks));
	if (m->nstacks == 0)
		memset(&m->stacks[0], 0, sizeof(m->stacks[0]));
	m->stacks[s->id].depth = s->depth;
	m->stacks[s->id].frames = pmt_xmalloc(s->depth * sizeof(*fr) + 1);
	memcpy(m->stacks[s->id].frames, fr, s->depth * sizeof(*fr));
	m->nstacks = s->id;
}

static void
module_add(struct pmt_model *m, const struct pmt_rec_module *mod,
	const char *path)
{
	if (mod->id != m->nmodules + 1)
		pmt_die("trace: module ids out of order");
	m->modules = pmt_xrealloc(m->modules,
		(mod->id + 1) * sizeof(*m->modules));
	m->modules[0] = NULL;
	m->modules[mod->id] = pmt_xstrdup(path);
	m->nmodules = mod->id;
}

/* Pre-pass (M3): pools, their initial content if they existed before the
 * run, stacks and modules. */
static int
prepass(struct pmt_model *m)
{
	const struct pmt_rec *r;
	const uint8_t *pl;
	struct pmt_pool *init_pool = NULL;

	while (pmt_trace_next(&m->tr, &r, &pl)) {
		switch (r->type) {
		case PMT_REC_POOL:
			pool_init(m, (const void *)pl, r->aux,
				(const char *)pl + sizeof(struct pmt_rec_pool));
			init_pool = &m->pools[m->npools - 1];
			if (init_pool->existed)
				init_pool->present = true;
			else
				init_pool = NULL;
			break;
		case PMT_REC_LINE: {
			const struct pmt_rec_line *l = (const void *)pl;
			if (r->aux & PMT_LINE_INIT && init_pool != NULL &&
			    l->pool == init_pool->id &&
			    l->line < init_pool->nlines)
				set_both(m, init_pool, l->line,
					pl + sizeof(*l));
			break;
		}
		case PMT_REC_STACK:
			stack_add(m, (const void *)pl,
				(const void *)(pl + sizeof(struct pmt_rec_stack)));
			break;
		case PMT_REC_MODULE:
			module_add(m, (const void *)pl,
				(const char *)pl + sizeof(struct pmt_rec_module));
			break;
		default:
			break;
		}
		if (r->type != PMT_REC_POOL && r->type != PMT_REC_LINE &&
		    r->type != PMT_REC_STACK && r->type != PMT_REC_MODULE)
			init_pool = NULL;
	}
	pmt_trace_rewind(&m->tr);
	return 0;
}

int
pmt_model_open(struct pmt_model *m, const char *trace_path)
{
	int rc;

	memset(m, 0, sizeof(*m));
	rc = pmt_trace_open(trace_path, &m->tr);
	if (rc)
		return rc;
	m->fence_cap = 1024;
	m->fence_stack = pmt_xcalloc(m->fence_cap, sizeof(*m->fence_stack));
	m->stacks = pmt_xcalloc(1, sizeof(*m->stacks));
	m->modules = pmt_xcalloc(1, sizeof(*m->modules));
	return prepass(m);
}

void
pmt_model_close(struct pmt_model *m)
{
	for (unsigned i = 0; i < m->npools; i++) {
		free(m->pools[i].path);
		free(m->pools[i].name);
		pmt_big_free(m->pools[i].cur, m->pools[i].size);
		pmt_big_free(m->pools[i].dur, m->pools[i].size);
		pmt_big_free(m->pools[i].li,
			m->pools[i].nlines * sizeof(*m->pools[i].li));
		free(m->pools[i].nz);
	}
	free(m->pools);
	free(m->pend);
	for (unsigned i = 0; i < m->nthreads; i++)
		free(m->threads[i].v);
	free(m->threads);
	free(m->fence_stack);
	for (uint32_t i = 1; i <= m->nstacks; i++)
		free(m->stacks[i].frames);
	free(m->stacks);
	for (uint32_t i = 1; i <= m->nmodules; i++)
		free(m->modules[i]);
	free(m->modules);
	for (size_t i = 0; i < m->nlints; i++)
		free(m->lints[i].what);
	free(m->lints);
	for (uint32_t i = 0; i < m->nhists; i++)
		free(m->hists[i].v);
	free(m->hists);
	pmt_trace_close(&m->tr);
	memset(m, 0, sizeof(*m));
}

static struct pmt_thread *
thread_of(struct pmt_model *m, uint32_t id)
{
	for (unsigned i = 0; i < m->nthreads; i++)
		if (m->threads[i].id == id)
			return &m->threads[i];
	m->threads = pmt_xrealloc(m->threads,
		(m->nthreads + 1) * sizeof(*m->threads));
	memset(&m->threads[m->nthreads], 0, sizeof(m->threads[0]));
	m->threads[m->nthreads].id = id;
	return &m->threads[m->nthreads++];
}

static struct pmt_lint *
lint_at(struct pmt_model *m, enum pmt_lint_kind kind, uint32_t stack,
	uint32_t store_stack, const char *what)
{
	struct pmt_lint *x;

	for (size_t i = 0; i < m->nlints; i++) {
		x = &m->lints[i];
		if (x->kind == kind && x->stack == stack &&
		    x->store_stack == store_stack)
			return x;
	}
	m->lints = pmt_xrealloc(m->lints, (m->nlints + 1) * sizeof(*m->lints));
	x = &m->lints[m->nlints++];
	memset(x, 0, sizeof(*x));
	x->kind = kind;
	x->stack = stack;
	x->store_stack = store_stack;
	x->what = what ? pmt_xstrdup(what) : NULL;
	return x;
}

/* Where a pending line was stored: the flush that logged it, else the
 * fence that closed (or the last fence before) its epoch. */
uint32_t
pmt_model_store_site(struct pmt_model *m, const struct pmt_line_info *li)
{
	if (li->store_flush)
		return li->store_flush;
	if (li->store_epoch + 1 <= m->fences)
		return m->fence_stack[li->store_epoch + 1];
	return li->store_epoch ? m->fence_stack[li->store_epoch] : 0;
}

static void
lint_line(struct pmt_model *m, enum pmt_lint_kind kind, uint32_t stack,
	struct pmt_lref l, const char *what)
{
	struct pmt_line_info *li = pmt_model_li(m, l);
	struct pmt_lint *x = lint_at(m, kind, stack, pmt_model_store_site(m, li), what);

	if (x->count++ == 0) {
		x->first = l;
		x->first_epoch = li->store_epoch;
	}
}

static void
on_flush(struct pmt_model *m, const struct pmt_rec_flush *f,
	uint64_t last_event)
{
	struct pmt_thread *t = thread_of(m, f->thread);
	struct pmt_pool *p = pool_of(m, f->pool, f->line);

	if (p == NULL)
		return;
	m->flushes++;
	for (uint64_t l = f->line; l < f->line + f->nlines && l < p->nlines;
		l++) {
		struct pmt_line_info *li = &p->li[l];
		struct pmt_flushed *e;
		if (li->store_rec > last_event)
			li->store_flush = f->stack; /* logged by this flush */
		if ((li->flags & PMT_LI_CLEAN) && m->lints_on) {
			struct pmt_lint *x = lint_at(m, PMT_LINT_REDUNDANT,
				f->stack, 0, NULL);
			if (x->count++ == 0)
				x->first = (struct pmt_lref){ .pool = p->id,
					.line = l };
		}
		li->flags |= PMT_LI_FLUSHED | PMT_LI_CLEAN;
		li->flush_stack = f->stack;
		li->flush_epoch = m->fences;
		li->flush_rec = (uint32_t)m->records;
		li->flush_seq = li->cur_seq;
		if (t->n == t->cap) {
			t->cap = t->cap ? t->cap * 2 : 64;
			t->v = pmt_xrealloc(t->v, t->cap * sizeof(*t->v));
		}
		e = &t->v[t->n++];
		e->l = (struct pmt_lref){ .pool = p->id, .line = l };
		e->h[0] = li->hcur[0];
		e->h[1] = li->hcur[1];
		e->stack = f->stack;
		e->seq = li->cur_seq;
		memcpy(e->data, p->cur + l * PMT_LINE, PMT_LINE);
	}
}

static void
on_fence(struct pmt_model *m, const struct pmt_rec_fence *f, pmt_cp_fn fn,
	void *arg)
{
	struct pmt_thread *t = thread_of(m, f->thread);
	struct pmt_cp cp = { .kind = PMT_CP_FENCE, .fence = m->fences + 1,
		.stack = f->stack, .thread = f->thread };

	fn(m, &cp, arg);
	/* M4: this thread's flushes are durable now, with the content each
	 * line had when it was flushed. */
	for (size_t i = 0; i < t->n; i++) {
		struct pmt_flushed *e = &t->v[i];
		set_dur(m, &m->pools[e->l.pool], e->l.line, e->data, e->h,
			e->seq);
	}
	t->n = 0;
	if (t->cap > 4096) {
		/* A huge flush once should not make every fork copy it. */
		free(t->v);
		t->v = NULL;
		t->cap = 0;
	}
	m->fences++;
	if (m->fences >= m->fence_cap) {
		m->fence_cap *= 2;
		m->fence_stack = pmt_xrealloc(m->fence_stack,
			m->fence_cap * sizeof(*m->fence_stack));
	}
	m->fence_stack[m->fences] = f->stack;
}

static void
on_dpoint(struct pmt_model *m, const struct pmt_rec_dpoint *d,
	const char *what)
{
	if (!m->lints_on)
		return;
	for (size_t i = 0; i < m->npend; i++)
		if (d->pool == PMT_ALL_POOLS || m->pend[i].pool == d->pool)
			lint_line(m, PMT_LINT_DPOINT, d->stack, m->pend[i],
				what);
}

/* The pages were written: their lines may have been stored to even where
 * the content did not change, so none of them was "flushed with no store
 * since" any more (the redundant-flush lint). */
static void
on_touch(struct pmt_model *m, const struct pmt_rec_touch *t)
{
	struct pmt_pool *p = pool_of(m, t->pool, 0);
	uint64_t lo, hi;

	if (p == NULL)
		return;
	lo = t->page * PMT_LINES_PER_PAGE;
	hi = (t->page + t->npages) * PMT_LINES_PER_PAGE;
	for (uint64_t l = lo; l < hi && l < p->nlines; l++)
		p->li[l].flags &= ~PMT_LI_CLEAN;
	if (m->tr.flags & PMT_TRACE_STORES) /* pages over the step budget */
		m->coarse_pages += t->npages;
}

/* The lines hold no state any more: what they hold now counts as durable
 * (a crash may leave it or the old content; nobody reads either), and
 * pending flushes of them are forgotten. */
static void
on_discard(struct pmt_model *m, const struct pmt_rec_discard *d)
{
	struct pmt_pool *p = pool_of(m, d->pool, d->line);
	uint64_t end;

	if (p == NULL)
		return;
	end = d->line + d->nlines < p->nlines ? d->line + d->nlines :
						  p->nlines;
	for (unsigned i = 0; i < m->nthreads; i++) {
		struct pmt_thread *t = &m->threads[i];
		size_t k = 0;
		for (size_t j = 0; j < t->n; j++) {
			const struct pmt_lref *l = &t->v[j].l;
			if (l->pool == d->pool && l->line >= d->line &&
			    l->line < end)
				continue;
			t->v[k++] = t->v[j];
		}
		t->n = k;
	}
	for (uint64_t l = d->line; l < end; l++) {
		struct pmt_line_info *li = &p->li[l];
		set_dur(m, p, l, p->cur + l * PMT_LINE, li->hcur, UINT32_MAX);
		li->flags &= ~(PMT_LI_FLUSHED | PMT_LI_CLEAN);
	}
}

static void
on_end(struct pmt_model *m, pmt_cp_fn fn, void *arg)
{
	struct pmt_cp cp = { .kind = PMT_CP_END, .fence = m->fences + 1 };

	fn(m, &cp, arg);
	if (!m->lints_on)
		return;
	for (unsigned i = 0; i < m->nthreads; i++)
		for (size_t j = 0; j < m->threads[i].n; j++) {
			struct pmt_flushed *e = &m->threads[i].v[j];
			struct pmt_lint *x = lint_at(m, PMT_LINT_UNFENCED,
				e->stack, 0, NULL);
			if (x->count++ == 0)
				x->first = e->l;
		}
	for (size_t i = 0; i < m->npend; i++)
		lint_line(m, PMT_LINT_END, 0, m->pend[i], NULL);
}

int
pmt_model_run(struct pmt_model *m, pmt_cp_fn fn, void *arg)
{
	const struct pmt_rec *r;
	const uint8_t *pl;
	uint64_t last_event = 0;

	while (pmt_trace_next(&m->tr, &r, &pl)) {
		m->records++;
		switch (r->type) {
		case PMT_REC_POOL: {
			const struct pmt_rec_pool *pr = (const void *)pl;
			if (pr->pool < m->npools)
				m->pools[pr->pool].present = true;
			break;
		}
		case PMT_REC_LINE: {
			const struct pmt_rec_line *l = (const void *)pl;
			struct pmt_pool *p = pool_of(m, l->pool, l->line);
			if (p == NULL)
				break;
			if (r->aux & PMT_LINE_STORE)
				m->store_recs++;
			if (!(r->aux & PMT_LINE_INIT))
				set_cur(m, p, l->line, pl + sizeof(*l),
					l->stack, r->aux & PMT_LINE_STORE);
			else if (!p->existed)
				set_both(m, p, l->line, pl + sizeof(*l));
			continue; /* not an event: keeps last_event */
		}
		case PMT_REC_FLUSH:
			on_flush(m, (const void *)pl, last_event);
			break;
		case PMT_REC_FENCE:
			on_fence(m, (const void *)pl, fn, arg);
			break;
		case PMT_REC_DPOINT:
			on_dpoint(m, (const void *)pl,
				(const char *)pl + sizeof(struct pmt_rec_dpoint));
			break;
		case PMT_REC_DISCARD:
			on_discard(m, (const void *)pl);
			break;
		case PMT_REC_TOUCH:
			on_touch(m, (const void *)pl);
			continue; /* not an event: like LINE, precedes one */
		default:
			/* STACK, MODULE (pre-pass) sit between a flush's
			 * LINE records and its FLUSH: not events. */
			continue;
		}
		last_event = m->records;
	}
	on_end(m, fn, arg);
	return 0;
}
