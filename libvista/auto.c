/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * auto.c -- automatic ranges and protected segments: pages found by faults
 *
 * "Vista also has an option to automatically generate the range of
 * modifications on a page granularity by using the virtual memory system"
 * (thesis 3.4).  The first VISTA_TX_AUTO transaction of an instance
 * write-protects every segment's user area, and segments stay protected
 * from then on (also with RIO_PROTECT, from the moment they are mapped).
 * In a transaction, the first store to a protected page faults; librio's
 * SIGSEGV handler (on the thread's alternate stack) offers the fault to
 * vista's hook, which copies the page to the lane's log, makes the record
 * durable, and opens the page; the store is then retried.  Commit flushes
 * the open pages and re-protects them (one mprotect per run of adjacent
 * pages), so the next transaction starts with nothing to do.
 *
 * vista_chain_transaction() commits and begins the next transaction
 * without re-protecting the pages the committed one changed: otherwise
 * each costs a fault and two mprotects per transaction, the bulk of a
 * small automatic transaction.  Their committed content is logged as the
 * new transaction's first records (one fence for all), and they stay
 * open; a page found unchanged at the next commit is protected again.
 * Whether a page changed is judged by comparing it with its logged image,
 * which only decides what stays open: every line of every open page is
 * flushed at commit all the same (a line stored to and set back may have
 * reached memory with the other value).
 *
 * In an explicit transaction on a protected segment, set_range opens the
 * pages of its range (their before-image is the range's record); an
 * explicit transaction's store to a declared range whose page another
 * thread's commit has just re-protected faults, and the hook opens the
 * page again.
 *
 * The kernel does not fault on behalf of a process: read(2) into a
 * protected page fails with EFAULT.  vista_prefault() logs and opens the
 * pages of a buffer before the program hands it to the kernel.
 *
 * Invariants
 *   P1. A page of a protected segment is writable only while some
 *       transaction has it in its open set, and a page enters a set with
 *       its before-image durable in the log (FULL) or with its declared
 *       ranges logged (partial, explicit transactions only).
 *   P2. The hook is async-signal-safe: it takes no lock, allocates
 *       nothing, and uses only the faulting thread's own lane, which the
 *       thread was not changing (T5 in tx.c); the open set always keeps
 *       room for the pages the remaining log space could hold.
 *   P3. Protection changes are coalesced: open pages are re-protected in
 *       runs, and once a lane has more than vma_limit open pages, faults
 *       open aligned 16-page groups, so the process's number of mappings
 *       (vm.max_map_count) stays bounded.
 *   P4. Chaining keeps a page open only with its image logged for the new
 *       transaction and durable before vista_chain_transaction() returns;
 *       between the old transaction's truncation and that fence the
 *       calling thread stores nothing, so P1 holds for every store of a
 *       transaction.  At most half the lane is spent on kept pages.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "vista_int.h"

#define GROUP_PAGES 16u
#define IDX_SHIFT 4 /* entry = page | segment index << 4 | flags */
#define PG_KEEP 2u /* chaining: changed, stays open (vista__open_chain) */
#define PG_HOT 4u  /* open in the previous transaction too */

/* ---- the open-page set (open addressing, no deletion) ---- */

/* slot[cap], order[cap], scratch[cap]: the mapping is NORESERVE, so the
 * parts never touched cost no memory. */
static size_t
ps_bytes(uint32_t cap)
{
	return (size_t)cap * (2 * sizeof(uint64_t) + sizeof(uint32_t));
}

static int
ps_alloc(struct vista_pageset *s, uint32_t cap)
{
	void *m = mmap(NULL, ps_bytes(cap), PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);

	if (m == MAP_FAILED)
		return -errno;
	s->slot = m;
	s->scratch = s->slot + cap;
	s->order = (uint32_t *)(s->scratch + cap);
	s->cap = cap;
	s->n = 0;
	s->bytes = ps_bytes(cap);
	s->prev = NULL;
	s->nprev = 0;
	return 0;
}

int
vista__pageset_init(struct vista_pageset *s, uint32_t lane_pages)
{
	uint32_t cap = 256;

	while (cap < 4 * lane_pages + 64)
		cap *= 2;
	return ps_alloc(s, cap);
}

void
vista__pageset_fini(struct vista_pageset *s)
{
	if (s->slot != NULL)
		munmap(s->slot, s->bytes);
	memset(s, 0, sizeof(*s));
}

static inline uint32_t
ps_home(const struct vista_pageset *s, uintptr_t page)
{
	return (uint32_t)(((page >> 12) * 0x9e3779b97f4a7c15ull) >> 32) &
		(s->cap - 1);
}

static uint64_t *
ps_find(const struct vista_pageset *s, uintptr_t page)
{
	if (s->slot == NULL || s->n == 0)
		return NULL;
	for (uint32_t i = ps_home(s, page);; i = (i + 1) & (s->cap - 1)) {
		uint64_t e = s->slot[i];
		if (e == 0)
			return NULL;
		if ((e & ~(uint64_t)(VISTA_PAGE - 1)) == page)
			return &s->slot[i];
	}
}

/* Insert a page known to be absent.  Never grows (signal-safe). */
static void
ps_put(struct vista_pageset *s, uint64_t e)
{
	uint32_t i = ps_home(s, (uintptr_t)(e & ~(uint64_t)(VISTA_PAGE - 1)));

	while (s->slot[i] != 0)
		i = (i + 1) & (s->cap - 1);
	s->slot[i] = e;
	s->order[s->n++] = i;
}

/* Did the lane's previous transaction have page p open?  (Binary search
 * of the sorted list it left in scratch; signal-safe.) */
static bool
was_open(const struct vista_pageset *s, uintptr_t p)
{
	uint32_t lo = 0, hi = s->nprev;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (s->prev[mid] < p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->nprev && s->prev[lo] == p;
}

/* Normal context: room for `more` pages plus what a fault could add. */
static int
ps_reserve(struct vista_lane *l, uint32_t more)
{
	struct vista_pageset *s = &l->open, ns;
	uint32_t headroom = (uint32_t)((l->end - l->cur) / VISTA_PAGE) +
		GROUP_PAGES;
	uint32_t cap = s->cap;
	int rc;

	while ((uint64_t)(s->n + more + headroom) * 2 > cap)
		cap *= 2;
	if (cap == s->cap)
		return 0;
	rc = ps_alloc(&ns, cap);
	if (rc)
		return vista__err(rc, "out of memory for open pages");
	ns.prev = NULL; /* the old scratch goes: forget the hot pages */
	ns.nprev = 0;
	for (uint32_t k = 0; k < s->n; k++)
		ps_put(&ns, s->slot[s->order[k]]);
	vista__pageset_fini(s);
	*s = ns;
	return 0;
}

bool
vista__page_open(const struct vista_lane *l, uintptr_t addr)
{
	return ps_find(&l->open, addr & ~(uintptr_t)(VISTA_PAGE - 1)) != NULL;
}

/* ---- protection ---- */

static int
set_prot(uintptr_t lo, uintptr_t hi, int prot)
{
	return mprotect((void *)lo, hi - lo, prot) == 0 ? 0 : -errno;
}

int
vista__protect_segment(struct vista_segment *seg)
{
	int rc = vista__auto_init();

	if (rc)
		return rc;
	rc = set_prot((uintptr_t)seg->user, (uintptr_t)seg->user +
		seg->user_size, PROT_READ);
	if (rc)
		return vista__err(rc, "mprotect segment %s: %s",
			rio_pool_path(seg->pool), strerror(-rc));
	/* Pairs with the acquire loads in fault() and vista_prefault()
	 * (and, through v->auto_on, with vista__auto_begin()): once the
	 * segment is protected, faults on it are the hook's.  The store
	 * comes after the mprotect, so a fault in between is not
	 * recognised (ARCHITECTURE.md, Memory ordering). */
	__atomic_store_n(&seg->prot, true, __ATOMIC_RELEASE);
	return 0;
}

int
vista__auto_begin(vista *v)
{
	int rc = 0;

	/* Pairs with the release store below: a thread that sees auto_on
	 * sees every mapped segment's prot set before it. */
	if (__atomic_load_n(&v->auto_on, __ATOMIC_ACQUIRE))
		return 0;
	pthread_mutex_lock(&v->lock);
	for (uint32_t i = 0; i < v->nmap && rc == 0; i++)
		if (!v->map[i].seg->prot)
			rc = vista__protect_segment(v->map[i].seg);
	/* Pairs with the acquire load above: makes every segment's prot
	 * (and protection) visible before auto_on. */
	if (rc == 0)
		__atomic_store_n(&v->auto_on, true, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&v->lock);
	return rc;
}

/* ---- logging pages ---- */

/* Bytes of a RANGES record of n whole pages. */
static size_t
pages_record_len(uint32_t n)
{
	return sizeof(struct vista_rec) +
		n * (sizeof(struct vista_rdesc) + VISTA_PAGE);
}

/*
 * Open the pages of [lo, hi) of seg for this transaction; with `full`, log
 * those not fully logged yet first (a record per 16 runs of pages, one
 * fence each).  sig: called from the fault hook (no messages, no growth).
 * Returns 0, VISTA_ELOGFULL, -ENOSPC or -errno.
 */
static int
open_range(struct vista_lane *l, struct vista_segment *seg, uintptr_t lo,
	uintptr_t hi, bool full, bool sig)
{
	struct vista__span sp[GROUP_PAGES];
	int rc;

	lo &= ~(uintptr_t)(VISTA_PAGE - 1);
	hi = (hi + VISTA_PAGE - 1) & ~(uintptr_t)(VISTA_PAGE - 1);
	if (sig && (l->open.n + (hi - lo) / VISTA_PAGE) * 4 > l->open.cap * 3)
		return -ENOSPC; /* P2: cannot grow here */
	for (uintptr_t p = lo; full && p < hi;) {
		uint32_t ns = 0, nlog = 0;
		for (; p < hi; p += VISTA_PAGE) {
			uint64_t *e = ps_find(&l->open, p);
			if (e != NULL && (*e & VISTA__PG_FULL))
				continue;
			if (ns > 0 && sp[ns - 1].hi == p) {
				sp[ns - 1].hi += VISTA_PAGE;
			} else {
				if (ns == GROUP_PAGES)
					break;
				sp[ns++] = (struct vista__span){ p,
					p + VISTA_PAGE, seg };
			}
			nlog++;
		}
		if (nlog == 0)
			continue;
		if (sig && vista__log_room(l, pages_record_len(nlog)) == NULL)
			return VISTA_ELOGFULL;
		rc = vista__log_ranges(l, sp, ns, 0);
		if (rc)
			return rc;
		/* P1: the pages' before-images are durable before the pages
		 * become writable. */
		vista__drain(l);
		VISTA__STAT_ADD(l, auto_faults, nlog);
	}
	for (uintptr_t p = lo; p < hi; p += VISTA_PAGE) {
		uint64_t *e = ps_find(&l->open, p);
		if (e == NULL)
			ps_put(&l->open, p | ((uint64_t)seg->idx << IDX_SHIFT) |
					(full ? VISTA__PG_FULL : 0) |
					(full && was_open(&l->open, p) ? PG_HOT :
									 0));
		else if (full)
			*e |= VISTA__PG_FULL;
	}
	if (!vista__bit_test(l->touched, seg->idx))
		vista__bit_set(l->touched, seg->idx);
	l->prot_used = true;
	return set_prot(lo, hi, PROT_READ | PROT_WRITE);
}

int
vista__open_pages(struct vista_lane *l, struct vista_segment *seg,
	uintptr_t lo, uintptr_t hi, bool full)
{
	uint32_t pages = (uint32_t)(((hi + VISTA_PAGE - 1) / VISTA_PAGE) -
		lo / VISTA_PAGE);
	int rc = ps_reserve(l, pages);

	if (rc)
		return rc;
	rc = open_range(l, seg, lo, hi, full, false);
	if (rc < 0 && rc > -4096)
		return vista__err(rc, "opening pages [%p, %p) of %s: %s",
			(void *)lo, (void *)hi, rio_pool_path(seg->pool),
			strerror(-rc));
	return rc;
}

int
vista_prefault(vista *v, void *addr, size_t len)
{
	struct vista_lane *l = vista__lane_peek(v);
	struct vista_segment *seg;

	if (v != NULL && v->redo != NULL)
		return vista__redo_refuse("vista_prefault");
	if (l == NULL || l->state != VISTA__TX_ACTIVE)
		return vista__err(v ? VISTA_ENOTX : -EINVAL,
			"vista_prefault: no transaction is active on this "
			"thread");
	if (len == 0)
		return 0;
	seg = vista__seg_lookup(l, (uintptr_t)addr, len, true);
	if (seg == NULL)
		return vista__err(VISTA_ERANGE,
			"vista_prefault(%p, %zu): not inside a mapped segment",
			addr, len);
	/* Pairs with the release store in vista__protect_segment(): a
	 * thread that learned of the protection from another (through
	 * v->auto_on, or its own synchronization) sees prot set, and opens
	 * the pages before the kernel's write could fail with EFAULT. */
	if (!__atomic_load_n(&seg->prot, __ATOMIC_ACQUIRE))
		return 0; /* not protected: the kernel can write there */
	return vista__open_pages(l, seg, (uintptr_t)addr,
		(uintptr_t)addr + len, true);
}

/* ---- the fault hook (signal context) ---- */

static void
say(const char *a, const char *b)
{
	ssize_t r = write(STDERR_FILENO, a, strlen(a));
	r = write(STDERR_FILENO, b, strlen(b));
	(void)r;
}

static bool
fault(void *addr, void *ctx)
{
	uintptr_t a = (uintptr_t)addr, page = a & ~(uintptr_t)(VISTA_PAGE - 1);

	(void)ctx;
	for (struct vista_lane *l = vista__tx_first(); l != NULL;
		l = l->tnext) {
		struct vista_segment *seg;
		uintptr_t lo = page, hi = page + VISTA_PAGE;
		int rc;

		if (ps_find(&l->open, page) != NULL)
			/* Ours, re-protected by another thread's commit. */
			return set_prot(page, page + VISTA_PAGE,
				       PROT_READ | PROT_WRITE) == 0;
		if (l->state != VISTA__TX_ACTIVE)
			continue;
		seg = vista__seg_lookup(l, a, 1, false);
		/* Pairs with the release store in vista__protect_segment():
		 * a fault on a segment protected by another thread sees
		 * prot set, provided the store preceded the fault. */
		if (seg == NULL || !__atomic_load_n(&seg->prot, __ATOMIC_ACQUIRE))
			continue;
		if (!(l->flags & VISTA_TX_AUTO)) {
			if (!vista__ranges_contains(&l->ranges, a))
				continue; /* a store outside its ranges */
			rc = open_range(l, seg, lo, hi, false, true);
		} else {
			if (l->open.n > l->open_runs_limit) { /* P3 */
				uintptr_t u = (uintptr_t)seg->user;
				lo = u + ((page - u) & ~(uintptr_t)(GROUP_PAGES *
							     VISTA_PAGE - 1));
				hi = lo + GROUP_PAGES * VISTA_PAGE;
				if (hi > u + seg->user_size)
					hi = u + seg->user_size;
			}
			rc = open_range(l, seg, lo, hi, true, true);
		}
		if (rc == 0)
			return true;
		if (rc == VISTA_ELOGFULL)
			say("vista: an automatic transaction's log lane is "
			    "full; cannot log the page of a store to ",
				rio_pool_path(seg->pool));
		else if (rc == -ENOSPC)
			say("vista: too many open pages in one transaction "
			    "in ", rio_pool_path(seg->pool));
		else
			say("vista: cannot open a page (mprotect failed; "
			    "vm.max_map_count?) in ", rio_pool_path(seg->pool));
		say("\n", "");
		return false;
	}
	return false;
}

static pthread_once_t hook_once = PTHREAD_ONCE_INIT;
static int hook_rc;

static void
hook_add(void)
{
	hook_rc = rio_fault_hook_add(fault, NULL);
}

int
vista__auto_init(void)
{
	pthread_once(&hook_once, hook_add);
	return hook_rc;
}

/* ---- commit ---- */

void
vista__open_flush(struct vista_lane *l)
{
	struct vista_pageset *s = &l->open;

	for (uint32_t k = 0; k < s->n; k++) {
		uint64_t e = s->slot[s->order[k]];
		struct vista_segment *seg;
		if (!(e & VISTA__PG_FULL))
			continue; /* its ranges are flushed as ranges */
		seg = l->v->byidx[(e >> IDX_SHIFT) & 0xff];
		/* Whatever the program stored in the page: commit's data
		 * fence makes it durable before the truncation (T2). */
		vista__flush(l, seg->pool,
			(void *)(uintptr_t)(e & ~(uint64_t)(VISTA_PAGE - 1)),
			VISTA_PAGE);
	}
}

static int
page_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/*
 * Write-protect pages pg[0..n) (addresses, sorted).  P3: one mprotect per
 * run of adjacent pages -- or, when the runs are many and close together,
 * one for the span covering them all: a call costs about as much as
 * changing a few dozen page table entries.  Pages in the span that other
 * transactions have open fault once more and are opened again by the
 * hook.
 */
static void
protect_pages(struct vista_lane *l, const uint64_t *pg, uint32_t n)
{
	uint64_t lo, hi;
	uint32_t runs = 1;
	int rc = 0;

	if (n == 0)
		return;
	for (uint32_t k = 1; k < n; k++)
		runs += pg[k] != pg[k - 1] + VISTA_PAGE;
	if (runs > 1 && (pg[n - 1] - pg[0]) / VISTA_PAGE < 32ull * runs) {
		rc = set_prot((uintptr_t)pg[0], (uintptr_t)pg[n - 1] + VISTA_PAGE,
			PROT_READ);
		n = 0;
	}
	lo = pg[0];
	hi = lo + VISTA_PAGE;
	for (uint32_t k = 1; k <= n && rc == 0; k++) {
		if (k < n && pg[k] == hi) {
			hi += VISTA_PAGE;
			continue;
		}
		rc = set_prot((uintptr_t)lo, (uintptr_t)hi, PROT_READ);
		if (k < n) {
			lo = pg[k];
			hi = lo + VISTA_PAGE;
		}
	}
	if (rc)
		/* A page left writable would let an automatic transaction
		 * store without logging: stop. */
		(void)vista__set_fatal(l->v, rc, "re-protecting open pages");
}

void
vista__open_reprotect(struct vista_lane *l)
{
	struct vista_pageset *s = &l->open;
	uint64_t *pg = s->scratch;
	uint32_t n = s->n;

	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = s->order[k];
		pg[k] = s->slot[i] & ~(uint64_t)(VISTA_PAGE - 1);
		s->slot[i] = 0;
	}
	s->n = 0;
	l->prot_used = false;
	qsort(pg, n, sizeof(*pg), page_cmp);
	protect_pages(l, pg, n);
	s->prev = pg;
	s->nprev = n;
}

/* ---- chaining (vista_chain_transaction) ---- */

/* Mark the hot open pages whose content differs from their logged image.
 * The records are those of the transaction that just committed: dead, but
 * still in the lane. */
static void
mark_changed(struct vista_lane *l)
{
	for (char *pos = l->rec0; pos < l->cur;) {
		const struct vista_rec *r = (const void *)pos;
		if (r->type == VISTA_REC_RANGES) {
			const struct vista_rdesc *d = (const void *)(r + 1);
			const char *data = (const char *)(d + r->count);
			/* New ranges, last, have no image (NR1). */
			for (unsigned i = 0; i < vista_rec_nold(r); i++) {
				struct vista_segment *seg = l->v->byidx[d[i].seg];
				uintptr_t a = (uintptr_t)seg->base + d[i].off;
				const char *img = data;
				data += (d[i].len + 7) & ~7u;
				if (a % VISTA_PAGE) /* not a page image */
					continue;
				for (uint32_t o = 0; o + VISTA_PAGE <= d[i].len;
					o += VISTA_PAGE) {
					uint64_t *e = ps_find(&l->open, a + o);
					if (e != NULL && (*e & PG_HOT) &&
					    !(*e & PG_KEEP) &&
					    memcmp((void *)(a + o), img + o,
						    VISTA_PAGE) != 0)
						*e |= PG_KEEP;
				}
			}
		}
		pos += (r->len + VISTA_REC_ALIGN - 1) & ~(VISTA_REC_ALIGN - 1);
	}
}

/* Log pages pg[0..n) (set entries, sorted) for the lane's new transaction,
 * a record per 16 runs, without a fence.  Returns how many were logged. */
static uint32_t
relog(struct vista_lane *l, const uint64_t *pg, uint32_t n)
{
	uint32_t k = 0;

	while (k < n) {
		struct vista__span sp[GROUP_PAGES];
		uint32_t ns = 0, first = k;
		for (; k < n; k++) {
			uintptr_t p = (uintptr_t)(pg[k] &
				~(uint64_t)(VISTA_PAGE - 1));
			struct vista_segment *seg =
				l->v->byidx[(pg[k] >> IDX_SHIFT) & 0xff];
			if (ns > 0 && sp[ns - 1].hi == p &&
			    sp[ns - 1].seg == seg) {
				sp[ns - 1].hi += VISTA_PAGE;
				continue;
			}
			if (ns == GROUP_PAGES)
				break;
			sp[ns++] = (struct vista__span){ p, p + VISTA_PAGE,
				seg };
		}
		if (vista__log_ranges(l, sp, ns, 0) != 0)
			return first;
		VISTA__STAT_ADD(l, auto_kept, k - first);
	}
	return n;
}

uint32_t
vista__open_chain(struct vista_lane *l)
{
	struct vista_pageset *s = &l->open;
	uint64_t *pg = s->scratch;
	uint32_t n = s->n, nk = 0, nd = 0, max, logged;

	mark_changed(l);
	/* Kept pages from the start of the scratch, the others from its end;
	 * at most half the lane goes to kept pages (P4). */
	max = (uint32_t)((size_t)(l->end - l->rec0) / 2 / pages_record_len(1));
	for (uint32_t k = 0; k < n; k++) {
		uint32_t i = s->order[k];
		uint64_t e = s->slot[i];
		if ((e & PG_KEEP) && nk < max)
			pg[nk++] = e & ~(uint64_t)PG_KEEP; /* still HOT */
		else
			pg[n - ++nd] = e & ~(uint64_t)(VISTA_PAGE - 1);
		s->slot[i] = 0;
	}
	s->n = 0;
	vista__log_reset(l);
	qsort(pg, nk, sizeof(*pg), page_cmp);
	logged = relog(l, pg, nk);
	if (logged > 0)
		/* P4: the kept pages' images are durable before the program
		 * may store to them in the new transaction. */
		vista__drain(l);
	for (uint32_t k = 0; k < logged; k++) {
		ps_put(s, pg[k]);
		vista__bit_set(l->touched,
			(unsigned)((pg[k] >> IDX_SHIFT) & 0xff));
	}
	/* Pages that could not be logged (the lane was just emptied, so
	 * this does not happen) are protected with the unchanged ones, which
	 * follow them in the scratch. */
	for (uint32_t k = logged; k < nk; k++)
		pg[k] &= ~(uint64_t)(VISTA_PAGE - 1);
	nd += nk - logged;
	l->prot_used = logged > 0;
	qsort(pg + logged, nd, sizeof(*pg), page_cmp);
	protect_pages(l, pg + logged, nd);
	s->prev = pg + logged;
	s->nprev = nd;
	return logged;
}
