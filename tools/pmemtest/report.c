/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * report.c -- what an inconsistent image means, and where to look
 *
 * Failures are grouped by what is missing (G1-G3 below).  A bug in a
 * loop fails at every iteration in one group; the report shows the first
 * image of each group in full (crash point, fence call stack, the pending
 * lines that reached memory and some that did not, with where each was
 * stored and flushed, the checker's output) and lists the others.  The
 * first image of each group is saved as pool files with a description, so
 * `pmemtest replay DIR` reproduces it (with --verbose, every image is
 * described and, up to --save, saved).
 *
 * What is missing.  Where the image shows it, it is the operation the
 * program lacks, not where the crash happened:
 *   - a line that did not reach memory although a line stored after it
 *     did, or although a fence passed since it was stored, and that was
 *     not flushed since its last store: a flush is missing (after its
 *     store site);
 *   - a line that did not reach memory, flushed, while a line stored
 *     after that flush did: a fence is missing (after its flush site);
 *   - a line that reached memory with an intermediate value (some of its
 *     stores in, later ones out), nothing else explaining it, and the
 *     same image with that line at its durable and at its current value
 *     did not fail: the stores to one line are in the wrong order (the
 *     store that reached memory), or, if the value is a tear of one
 *     store wider than 8 bytes (--tear, model.c M7), that store was
 *     taken for atomic.
 * A missing flush is the most basic of these: where an image shows one,
 * the fences and line orders it also seems to show are left out (a flushed
 * line lost beside a later store of the same epoch is no bug of its own
 * when the program is missing a flush).  A line flushed after a lost
 * line's last store, and in memory, counts as stored after it too (the
 * compiler may move a store before a copy's tail).
 *
 * Groups.  Each failure has keys: its missing operations (kind and
 * function), else the function of the crash point's fence, and the
 * checker's first line of output with every number replaced (a message).
 *   G1. Failures with a missing flush or fence share a group when they
 *       share such an operation: one missing flush in a loop, seen at
 *       every later fence with whichever lines happen to be pending, is
 *       one group, and so are the lines of one missing persist.
 *   G2. Failures without one share a group when they share any key: the
 *       fence's function (a marker persisted early fails at its own fence
 *       and at the next one) or the message.
 *   G3. A group of G2 joins the first group of G1 whose checker said the
 *       same: the images where a half-flushed node shows no missing flush
 *       join the ones where it does.  Groups of G1 never meet through a
 *       message (two missing flushes that tear one record stay two).
 * Keys are names and text, not addresses, so nested runs (recovery.c Y3)
 * group across each other.  Groups are made once every checker is done
 * (P1).

 * Invariant
 *   P1. Groups and images are printed in submission order (the order of
 *       the crash points in the trace), whatever order the parallel
 *       checkers finished in.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "pmemtest_int.h"

struct group {
	struct pmt_job **jobs;
	size_t n;
	bool strong;     /* grouped by a missing flush or fence */
	uint64_t *keys;  /* every key of its images (job_keys) */
	size_t nkeys;
	uint64_t *msgs;  /* their message keys */
	size_t nmsgs;
};

struct pmt_report {
	struct pmt_model *m;
	struct pmt_report_opts o;
	struct pmt_job **fails;
	size_t nfails;
	uint64_t *fkeys;  /* set_key() of every failure, sorted */
};

struct pmt_report *
pmt_report_new(struct pmt_model *m, const struct pmt_report_opts *o)
{
	struct pmt_report *r = pmt_xcalloc(1, sizeof(*r));
	r->m = m;
	r->o = *o;
	return r;
}

static int
u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

enum miss_kind { MISS_FLUSH = 1, MISS_FENCE = 2, MISS_LINE_ORDER = 3,
	MISS_TEAR = 4 };

struct miss {
	enum miss_kind kind;
	uint32_t site;  /* store site (FLUSH; LINE_ORDER: the line's last
			   store) or flush site (FENCE): the group */
	uint32_t later; /* a store that reached memory after it, or 0 */
	uint32_t show;  /* the site to name (LINE_ORDER: the last store
			   that reached memory) */
};

/* The store site of a line description: the store itself where it was
 * captured, else the flush or fence that logged it. */
static uint32_t
store_of(const struct pmt_line_desc *d)
{
	return d->li.store_stack ? d->li.store_stack : d->store_site;
}

/* The content key of the image with line i of the description flipped:
 * a line that reached memory put back to its durable value, a lost one
 * added with its current value (SIZE_MAX: the image itself). */
static uint64_t
set_key(const struct pmt_job *j, size_t i)
{
	if (i == SIZE_MAX)
		return j->key;
	return i < j->nchosen ? j->key - j->desc[i].delta :
		j->key + j->desc[i].delta;
}

static bool
failed_too(const struct pmt_report *r, uint64_t key)
{
	size_t lo = 0, hi = r ? r->nfails : 0;

	if (r == NULL || r->fkeys == NULL)
		return false;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (r->fkeys[mid] < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < r->nfails && r->fkeys[lo] == key;
}

/* Two call sites that print the same (one source line reached through
 * two instructions, e.g. a copy's body and its tail). */
static bool
same_text(const struct pmt_report *r, uint32_t a, uint32_t b)
{
	char *x;
	bool same;

	if (r == NULL)
		return false;
	x = pmt_xstrdup(pmt_symbolize_short(r->m, a));
	same = strcmp(x, pmt_symbolize_short(r->m, b)) == 0;
	free(x);
	return same;
}

/* What the image says is missing (see the head); returns how many, at
 * most max, distinct.  A store-order guess needs the images with the torn
 * line at its durable value (set_key) and at its current value not to
 * have failed: only the prefix of its stores fails (r: the failures).  A line that reached memory with an intermediate
 * value lost its later stores: it is judged like a line that did not
 * reach memory, and only if nothing else explains it, by its order. */
static size_t
missing_ops(const struct pmt_report *r, const struct pmt_job *j,
	struct miss *out, size_t max)
{
	size_t n = 0;

	for (size_t i = 0; i < j->ndesc && n < max; i++) {
		const struct pmt_line_desc *d = &j->desc[i];
		struct miss x = { 0 };
		uint32_t later = 0;
		bool flushed = d->li.flags & PMT_LI_FLUSHED;
		uint32_t since = flushed ? d->li.flush_rec : d->li.store_rec;
		uint32_t epoch = d->li.store_epoch;

		if (i < j->nchosen && d->l.ver == 0)
			continue; /* reached memory whole */
		if (i < j->nchosen)
			epoch = d->ver_epoch;
		for (size_t c = 0; c < j->nchosen; c++) {
			const struct pmt_line_desc *e = &j->desc[c];
			if (c != i && e->ver_rec > since)
				later = e->ver_stack ? e->ver_stack :
					store_of(e);
			/* A line flushed after this one's last store reached
			 * memory: the program made it durable and not this
			 * one (the compiler may have moved the store itself
			 * before ours). */
			else if (c != i && !flushed && !later &&
				 (e->li.flags & PMT_LI_FLUSHED) &&
				 e->li.flush_rec > since)
				later = e->ver_stack ? e->ver_stack :
					store_of(e);
		}
		if (!flushed && (later || epoch + 1 < j->cp.fence))
			x = (struct miss){ MISS_FLUSH, store_of(d), later,
				store_of(d) };
		else if (flushed && later)
			x = (struct miss){ MISS_FENCE, d->li.flush_stack,
				later, d->li.flush_stack };
		else if (i < j->nchosen && !failed_too(r, set_key(j, i)) &&
			 !failed_too(r, set_key(j, i) + d->delta_cur))
			x = (struct miss){ d->torn ? MISS_TEAR :
				MISS_LINE_ORDER, store_of(d), 0, d->ver_stack };
		else
			continue;
		bool dup = false;
		for (size_t k = 0; k < n; k++)
			dup |= out[k].kind == x.kind && (out[k].site == x.site ||
				same_text(r, out[k].site, x.site));
		if (!dup)
			out[n++] = x;
	}
	/* The most basic missing operation explains the others: a line
	 * never flushed is lost whatever the fences, and its absence fails
	 * the image; a flushed line lost while a later store reached memory
	 * (two lines of one epoch, unordered by design) is then no bug of
	 * its own.  A missing flush or fence explains the torn lines too. */
	enum miss_kind top = MISS_TEAR;
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (out[i].kind < top)
			top = out[i].kind;
	for (size_t i = 0; i < n; i++)
		if (out[i].kind == top)
			out[k++] = out[i];
	return k;
}

/* The checker's first line of output, every number (decimal or hex) in
 * it one '#': "entry 3 of 7 torn" and "entry 0 of 1 torn" are one
 * message.  0 if it said nothing. */
static uint64_t
msg_key(const struct pmt_job *j)
{
	char buf[256];
	size_t n = 0;
	const char *o = j->output;

	if (o == NULL)
		return 0;
	while (*o == '\n')
		o++;
	for (const char *c = o; *c && *c != '\n' && n < sizeof(buf) - 1;) {
		if (*c >= '0' && *c <= '9') {
			buf[n++] = '#';
			while ((*c >= '0' && *c <= '9') || *c == 'x' ||
			       (*c >= 'a' && *c <= 'f') ||
			       (*c >= 'A' && *c <= 'F'))
				c++;
		} else {
			buf[n++] = *c++;
		}
	}
	if (n < 8) /* "exit 1", "failed": says nothing of the failure */
		return 0;
	return rio_checksum(buf, n, 0x4d47) | 1;
}

static bool
by_missing(const struct pmt_report *r, const struct pmt_job *j)
{
	struct miss ms[1];
	return missing_ops(r, j, ms, 1) > 0;
}

/* The function of a site (symbolized "func (file:line)"), hashed: a
 * missing operation is grouped per function, so the lines of one missing
 * persist (a header and its slots) are one group. */
static uint64_t
site_fn(const struct pmt_report *r, uint32_t site)
{
	const char *s = pmt_symbolize_short(r->m, site);
	size_t n = strcspn(s, " (");
	return rio_checksum(s, n, 0x464e);
}

/* The keys a failure is grouped by (G1-G3 in the head): the missing
 * operations (kind and function), else the function of the crash point's
 * fence and the checker's message with its numbers taken out.  Returns how
 * many; *strong: a missing flush or fence was inferred; *msg: the message
 * key (0: no message). */
#define KEYS_MAX 18
static size_t
job_keys(const struct pmt_report *r, const struct pmt_job *j, uint64_t *k,
	bool *strong, uint64_t *msg)
{
	struct miss ms[16];
	size_t nm = missing_ops(r, j, ms, 16), n = 0;

	*strong = nm > 0 && ms[0].kind <= MISS_FENCE;
	for (size_t i = 0; i < nm; i++) {
		uint64_t v[2] = { ms[i].kind, site_fn(r, ms[i].site) };
		k[n++] = rio_checksum(v, sizeof(v), 0x4d53);
	}
	if (!*strong) {
		uint64_t v[2] = { j->cp.kind, j->cp.kind == PMT_CP_END ? 0 :
			site_fn(r, j->cp.stack) };
		k[n++] = rio_checksum(v, sizeof(v), 0x4550);
	}
	*msg = msg_key(j);
	if (*msg)
		k[n++] = *msg;
	return n;
}

void
pmt_report_fail(struct pmt_job *job, void *arg)
{
	struct pmt_report *r = arg;

	r->fails = pmt_xrealloc(r->fails, (r->nfails + 1) * sizeof(*r->fails));
	r->fails[r->nfails++] = job;
}

uint64_t
pmt_report_failures(const struct pmt_report *r)
{
	return r->nfails;
}

bool
pmt_report_failed(const struct pmt_report *r, uint64_t seq)
{
	for (size_t i = 0; i < r->nfails; i++)
		if (r->fails[i]->seq == seq)
			return true;
	return false;
}

static int
job_cmp(const void *a, const void *b)
{
	const struct pmt_job *x = *(struct pmt_job *const *)a;
	const struct pmt_job *y = *(struct pmt_job *const *)b;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void
describe_line(struct pmt_model *m, FILE *out, const struct pmt_line_desc *d)
{
	const struct pmt_pool *p = &m->pools[d->l.pool];
	const struct pmt_line_info *li = &d->li;

	fprintf(out, "      %s +0x%llx (line %llu): ", p->name,
		(unsigned long long)(d->l.line * PMT_LINE),
		(unsigned long long)d->l.line);
	if (d->l.ver && d->torn)
		fprintf(out, "torn: %u of the %u 8-byte words the store at %s "
			"changed; ", d->torn, d->wide, d->ver_stack ?
				pmt_symbolize_short(m, d->ver_stack) :
				"(not captured)");
	else if (d->l.ver)
		fprintf(out, "only its stores up to the one at %s (value %u of "
			"the %u it held since it was durable; its last store: "
			"%s); ", d->ver_stack ? pmt_symbolize_short(m,
				d->ver_stack) : "(not captured)", d->l.ver,
			d->nvers + 1, li->store_stack ?
				pmt_symbolize_short(m, li->store_stack) :
				"(not captured)");
	if (li->store_stack)
		fprintf(out, "last stored at %s", pmt_symbolize_short(m,
			li->store_stack));
	else
		fprintf(out, "stored ");
	if (li->store_stack)
		;
	else if (li->store_flush)
		fprintf(out, "before the flush at %s",
			pmt_symbolize_short(m, li->store_flush));
	else if (li->store_epoch == 0)
		fprintf(out, "before the first fence");
	else
		fprintf(out, "after fence #%u (%s)", li->store_epoch,
			pmt_symbolize_short(m, m->fence_stack[li->store_epoch]));
	if (li->flags & PMT_LI_FLUSHED)
		fprintf(out, "; flushed at %s, not yet fenced\n",
			pmt_symbolize_short(m, li->flush_stack));
	else if (li->flush_stack)
		fprintf(out, "; not flushed since (last flush before the "
			"store: %s)\n", pmt_symbolize_short(m, li->flush_stack));
	else
		fprintf(out, "; never flushed\n");
}

static void
describe_status(FILE *out, const struct pmt_job *j)
{
	if (j->timed_out)
		fprintf(out, "timed out");
	else if (WIFEXITED(j->status))
		fprintf(out, "exit %d", WEXITSTATUS(j->status));
	else if (WIFSIGNALED(j->status))
		fprintf(out, "killed by signal %d (%s)", WTERMSIG(j->status),
			strsignal(WTERMSIG(j->status)));
}

static void
describe_cp(struct pmt_model *m, FILE *out, const struct pmt_job *j)
{
	if (j->cp.kind == PMT_CP_END) {
		fprintf(out, "  crash after the last fence (#%u), at program "
			"end\n", j->cp.fence - 1);
		return;
	}
	fprintf(out, "  crash at fence #%u (thread %u), before it completes; "
		"the fence was issued at\n%s\n", j->cp.fence, j->cp.thread,
		pmt_symbolize_site(m, j->cp.stack, 8));
}

static void
describe_missing(const struct pmt_report *r, FILE *out,
	const struct pmt_job *j)
{
	struct pmt_model *m = r->m;
	struct miss ms[16];
	size_t nm = missing_ops(r, j, ms, 16);

	for (size_t i = 0; i < nm; i++) {
		const struct miss *x = &ms[i];
		const char *site = pmt_symbolize_short(m, x->show);
		char *s = pmt_xstrdup(site);
		fprintf(out, "  likely missing: ");
		if (x->kind == MISS_FLUSH)
			fprintf(out, "a flush (and fence) of the line stored "
				"at %s", s);
		else if (x->kind == MISS_FENCE)
			fprintf(out, "a fence after the flush at %s", s);
		else if (x->kind == MISS_TEAR)
			fprintf(out, "an atomic store: the store at %s is "
				"wider than 8 bytes and reached memory in "
				"part (x86 makes only 8-byte stores "
				"failure-atomic: store the flag alone, last)",
				s);
		else
			fprintf(out, "store order within one line: the store "
				"at %s reached memory without the later "
				"stores to its line (store the flag last, or "
				"persist the data first)", s);
		if (x->later && x->kind != MISS_LINE_ORDER)
			fprintf(out, ", before the store at %s",
				pmt_symbolize_short(m, x->later));
		fputc('\n', out);
		free(s);
	}
}

static void
print_job(struct pmt_report *r, FILE *out, const struct pmt_job *j,
	const char *saved)
{
	struct pmt_model *m = r->m;
	size_t lost = j->ndesc - j->nchosen;

	fprintf(out, "INCONSISTENT image #%llu\n", (unsigned long long)j->seq);
	describe_cp(m, out, j);
	fprintf(out, "  %zu pending line%s; ", j->npending,
		j->npending == 1 ? "" : "s");
	if (j->nchosen == 0) {
		fprintf(out, "none reached memory\n");
	} else {
		fprintf(out, "these reached memory (new content):\n");
		for (size_t i = 0; i < j->nchosen; i++)
			describe_line(m, out, &j->desc[i]);
	}
	if (lost > 0) {
		fprintf(out, "    these did not (old content)%s:\n",
			j->npending - j->nchosen > lost ? ", first ones" : "");
		for (size_t i = j->nchosen; i < j->ndesc; i++)
			describe_line(m, out, &j->desc[i]);
	}
	describe_missing(r, out, j);
	fprintf(out, "  checker: ");
	describe_status(out, j);
	fputc('\n', out);
	if (j->output && *j->output) {
		char *o = pmt_xstrdup(j->output), *save = NULL;
		int lines = 0;
		for (char *l = strtok_r(o, "\n", &save); l && lines < 12;
			l = strtok_r(NULL, "\n", &save), lines++)
			fprintf(out, "    | %s\n", l);
		free(o);
	}
	if (saved)
		fprintf(out, "  reproduce: pmemtest replay %s\n", saved);
}

static void
write_meta(struct pmt_report *r, const struct pmt_job *j, const char *dir)
{
	char *path = pmt_xasprintf("%s/pmemtest-image.txt", dir);
	FILE *f = fopen(path, "w");

	free(path);
	if (f == NULL)
		return;
	fprintf(f, "pmemtest-image 1\n");
	fprintf(f, "check %s\n", r->o.check_desc);
	fprintf(f, "image %s\n", r->o.image_name);
	fprintf(f, "twice %d\n", r->o.twice ? 1 : 0);
	fprintf(f, "seq %llu\n", (unsigned long long)j->seq);
	fprintf(f, "fence %u\n", j->cp.fence);
	fprintf(f, "end %d\n", j->cp.kind == PMT_CP_END);
	fprintf(f, "chosen");
	for (size_t i = 0; i < j->nchosen; i++)
		fprintf(f, " %u:%llu", j->chosen[i].pool,
			(unsigned long long)j->chosen[i].line);
	fprintf(f, "\n");
	fclose(f);
	path = pmt_xasprintf("%s/report.txt", dir);
	f = fopen(path, "w");
	free(path);
	if (f == NULL)
		return;
	print_job(r, f, j, NULL);
	fclose(f);
}

struct saver {
	struct pmt_report *r;
	struct pmt_job **jobs; /* to save, each with job->saved set */
	size_t n;
};

static void
save_cp(struct pmt_model *m2, const struct pmt_cp *cp, void *arg)
{
	struct saver *s = arg;

	for (size_t i = 0; i < s->n; i++) {
		struct pmt_job *j = s->jobs[i];
		if (j->saved == NULL || j->cp.fence != cp->fence ||
		    j->cp.kind != cp->kind)
			continue;
		if (pmt_image_write(m2, j->chosen, j->nchosen, j->saved) != 0) {
			fprintf(stderr, "pmemtest: cannot save %s\n", j->saved);
			free(j->saved);
			j->saved = NULL;
			continue;
		}
		write_meta(s->r, j, j->saved);
	}
}

/* Save the first image of each group, then (--verbose) the others, up to
 * --save images, by replaying the trace once more. */
static void
save_images(struct pmt_report *r, struct group *g, size_t ng)
{
	struct pmt_model m2;
	struct saver s = { r, NULL, 0 };

	if (r->o.outdir == NULL || r->o.save_max == 0)
		return;
	s.jobs = pmt_xcalloc(r->nfails + 1, sizeof(*s.jobs));
	for (size_t pass = 0; pass < 2; pass++)
		for (size_t k = 0; k < ng; k++)
			for (size_t i = pass; i < (pass ? g[k].n : 1) &&
				s.n < r->o.save_max; i++) {
				if (pass && !r->o.verbose)
					break;
				struct pmt_job *j = g[k].jobs[i];
				j->saved = pmt_xasprintf("%s/img-%06llu",
					r->o.outdir, (unsigned long long)j->seq);
				s.jobs[s.n++] = j;
			}
	if (pmt_mkdir_p(r->o.outdir) != 0 ||
	    pmt_model_open(&m2, r->o.trace_path) != 0) {
		fprintf(stderr, "pmemtest: cannot save images in %s\n",
			r->o.outdir);
		for (size_t i = 0; i < s.n; i++) {
			free(s.jobs[i]->saved);
			s.jobs[i]->saved = NULL;
		}
	} else {
		m2.tear = r->o.tear; /* the same history, the same versions */
		pmt_model_run(&m2, save_cp, &s);
		pmt_model_close(&m2);
	}
	free(s.jobs);
}

static bool
keys_meet(const uint64_t *a, size_t na, const uint64_t *b, size_t nb,
	uint64_t except)
{
	for (size_t i = 0; i < na; i++)
		for (size_t k = 0; k < nb; k++)
			if (a[i] == b[k] && a[i] != except)
				return true;
	return false;
}

static void
add_keys(uint64_t **set, size_t *n, const uint64_t *k, size_t nk)
{
	for (size_t i = 0; i < nk; i++) {
		if (k[i] == 0 || keys_meet(*set, *n, &k[i], 1, 0))
			continue;
		*set = pmt_xrealloc(*set, (*n + 1) * sizeof(**set));
		(*set)[(*n)++] = k[i];
	}
}

static void
group_add(struct group *g, struct pmt_job *j, const uint64_t *k, size_t nk,
	uint64_t msg)
{
	g->jobs = pmt_xrealloc(g->jobs, (g->n + 1) * sizeof(*g->jobs));
	g->jobs[g->n++] = j;
	add_keys(&g->keys, &g->nkeys, k, nk);
	add_keys(&g->msgs, &g->nmsgs, &msg, 1);
}

/* The images of b join a (in submission order); b is left empty. */
static void
group_merge(struct group *a, struct group *b)
{
	a->jobs = pmt_xrealloc(a->jobs, (a->n + b->n) * sizeof(*a->jobs));
	memcpy(a->jobs + a->n, b->jobs, b->n * sizeof(*b->jobs));
	a->n += b->n;
	qsort(a->jobs, a->n, sizeof(*a->jobs), job_cmp);
	add_keys(&a->keys, &a->nkeys, b->keys, b->nkeys);
	add_keys(&a->msgs, &a->nmsgs, b->msgs, b->nmsgs);
	b->n = 0;
}

static void
group_free(struct group *g)
{
	free(g->jobs);
	free(g->keys);
	free(g->msgs);
}

static int
group_cmp(const void *a, const void *b)
{
	const struct group *x = a, *y = b;
	return job_cmp(&x->jobs[0], &y->jobs[0]);
}

uint64_t
pmt_report_print(struct pmt_report *r, FILE *out)
{
	struct group *g = NULL;
	size_t ng = 0;

	qsort(r->fails, r->nfails, sizeof(*r->fails), job_cmp); /* P1 */
	/* Signatures once every failure is known (P1: whatever order the
	 * checkers finished in). */
	free(r->fkeys);
	r->fkeys = pmt_xmalloc((r->nfails + 1) * sizeof(*r->fkeys));
	for (size_t i = 0; i < r->nfails; i++)
		r->fkeys[i] = set_key(r->fails[i], SIZE_MAX);
	qsort(r->fkeys, r->nfails, sizeof(*r->fkeys), u64_cmp);
	for (size_t i = 0; i < r->nfails; i++) {
		struct pmt_job *j = r->fails[i];
		uint64_t k[KEYS_MAX], msg;
		bool strong;
		size_t nk = job_keys(r, j, k, &strong, &msg), x;
		/* G1, G2: by a shared key, strong with strong, weak with
		 * weak (missing operations of different functions never
		 * meet through a message). */
		for (x = 0; x < ng; x++) {
			if (g[x].strong != strong || g[x].n == 0)
				continue;
			if (strong ? keys_meet(g[x].keys, g[x].nkeys, k, nk,
					msg) :
				     keys_meet(g[x].keys, g[x].nkeys, k, nk, 0))
				break;
		}
		if (x == ng) {
			g = pmt_xrealloc(g, (ng + 1) * sizeof(*g));
			memset(&g[ng++], 0, sizeof(*g));
			g[x].strong = strong;
		}
		group_add(&g[x], j, k, nk, msg);
	}
	/* G3: a group with no missing flush or fence joins the first group
	 * with one whose checker said the same. */
	for (size_t x = 0; x < ng; x++) {
		if (g[x].strong || g[x].n == 0)
			continue;
		for (size_t y = 0; y < ng; y++) {
			if (!g[y].strong || g[y].n == 0 ||
			    !keys_meet(g[y].msgs, g[y].nmsgs, g[x].msgs,
				    g[x].nmsgs, 0))
				continue;
			group_merge(&g[y], &g[x]);
			break;
		}
	}
	/* Groups in the order of their first image (P1). */
	size_t live = 0;
	for (size_t x = 0; x < ng; x++)
		if (g[x].n > 0)
			g[live++] = g[x];
		else
			group_free(&g[x]);
	ng = live;
	qsort(g, ng, sizeof(*g), group_cmp);
	if (r->o.group_keys)
		for (size_t x = 0; x < ng; x++) {
			fprintf(out, "pmemtest: group");
			for (size_t i = 0; i < g[x].nkeys; i++)
				fprintf(out, " %016llx",
					(unsigned long long)g[x].keys[i]);
			fputc('\n', out);
		}
	save_images(r, g, ng);
	for (size_t k = 0; k < ng; k++) {
		fprintf(out, "\n");
		print_job(r, out, g[k].jobs[0], g[k].jobs[0]->saved);
		for (size_t i = 1; !by_missing(r, g[k].jobs[0]) &&
			i < g[k].n; i++)
			if (by_missing(r, g[k].jobs[i])) {
				fprintf(out, "  in image #%llu of this group:\n",
					(unsigned long long)g[k].jobs[i]->seq);
				describe_missing(r, out, g[k].jobs[i]);
				break;
			}
		if (g[k].n > 1)
			fprintf(out, "  the same failure (%s) in "
				"%zu more image%s:", g[k].strong ?
					"same missing operation" :
					"same fence's function or checker "
					"message", g[k].n - 1,
				g[k].n == 2 ? "" : "s");
		for (size_t i = 1; i < g[k].n && (r->o.verbose || i <= 10); i++)
			fprintf(out, " #%llu@fence%u",
				(unsigned long long)g[k].jobs[i]->seq,
				g[k].jobs[i]->cp.fence);
		if (g[k].n > 11 && !r->o.verbose)
			fprintf(out, " ...");
		if (g[k].n > 1)
			fprintf(out, "\n");
		if (r->o.verbose)
			for (size_t i = 1; i < g[k].n; i++) {
				fprintf(out, "\n");
				print_job(r, out, g[k].jobs[i],
					g[k].jobs[i]->saved);
			}
	}
	for (size_t k = 0; k < ng; k++)
		group_free(&g[k]);
	free(g);
	return ng;
}

static const char *const lint_title[PMT_LINT_KINDS] = {
	[PMT_LINT_REDUNDANT] = "redundant flush",
	[PMT_LINT_UNFENCED] = "flush never fenced",
	[PMT_LINT_DPOINT] = "not durable at a durability point",
	[PMT_LINT_END] = "never made durable",
};

void
pmt_report_lints(struct pmt_model *m, FILE *out)
{
	for (size_t i = 0; i < m->nlints; i++) {
		const struct pmt_lint *x = &m->lints[i];
		const struct pmt_pool *p = &m->pools[x->first.pool];
		unsigned long long off =
			(unsigned long long)(x->first.line * PMT_LINE);

		fprintf(out, "\nwarning: %s: ", lint_title[x->kind]);
		switch (x->kind) {
		case PMT_LINT_REDUNDANT:
			fprintf(out, "%llu line flush%s with no store since "
				"the line was last flushed (first: "
				"%s +0x%llx), at\n%s\n",
				(unsigned long long)x->count,
				x->count == 1 ? "" : "es", p->name, off,
				pmt_symbolize_site(m, x->stack, 8));
			break;
		case PMT_LINT_UNFENCED:
			fprintf(out, "%llu line%s (first: %s +0x%llx) flushed "
				"and never followed by a fence of the flushing "
				"thread, at\n%s\n",
				(unsigned long long)x->count,
				x->count == 1 ? "" : "s", p->name, off,
				pmt_symbolize_site(m, x->stack, 8));
			break;
		case PMT_LINT_DPOINT:
			fprintf(out, "\"%s\": %llu line%s modified and not "
				"durable (first: %s +0x%llx, stored after fence "
				"#%u near %s) at the durability point\n%s\n",
				x->what ? x->what : "",
				(unsigned long long)x->count,
				x->count == 1 ? "" : "s", p->name, off,
				x->first_epoch,
				pmt_symbolize_short(m, x->store_stack),
				pmt_symbolize_site(m, x->stack, 8));
			break;
		case PMT_LINT_END:
			fprintf(out, "%llu line%s modified and still not "
				"durable at program end (first: %s +0x%llx, "
				"stored after fence #%u), near\n%s\n",
				(unsigned long long)x->count,
				x->count == 1 ? "" : "s", p->name, off,
				x->first_epoch,
				pmt_symbolize_site(m, x->store_stack, 8));
			break;
		default:
			break;
		}
	}
}

void
pmt_report_free(struct pmt_report *r)
{
	if (r == NULL)
		return;
	for (size_t i = 0; i < r->nfails; i++)
		pmt_job_free(r->fails[i]);
	free(r->fails);
	free(r->fkeys);
	free(r);
}
