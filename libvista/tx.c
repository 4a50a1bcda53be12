/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tx.c -- transactions: begin, set_range, end (commit), abort
 *
 * The hot path of the library.  Per transaction of k declared ranges, in
 * the cacheline domain:
 *   set_range      copy the before-image into the lane (log.c), store
 *                  its tag, flush it, fence: k fences (vista_set_ranges:
 *                  one for all);
 *   end            (commit_lazy, a transaction of declared ranges in one
 *                  segment) flush the declared ranges and the commit
 *                  record {gen, checksum of the after-images}: one fence;
 *                  with more than one lane, then truncate with a plain
 *                  store, durable at the lane's next fence (L6 in log.c);
 *                  with one lane, no truncation at all (L7).  Total
 *                  k + 1.  Otherwise (commit_slow, several segments,
 *                  heap, open pages, page domain) one fence for the data,
 *                  then the truncation and its fence: k + 2.
 *
 * Persist order of commit_lazy (crash outcome after each step):
 *   1. store the commit record {gen, csum, seg, check} in slot gen & 1 of
 *      the commit line (csum summed while the declared lines are in the
 *      cache); the record of gen - 1, in the other slot, is untouched;
 *   2. flush every declared line and the commit record's line (written
 *      back, not durable);
 *   F. fence: data and commit record durable.  Before F a crash leaves a
 *      commit record that is missing, torn (check fails) or whose csum
 *      does not match the bytes: recovery rolls back (to gen - 1, whose
 *      record is whole).  After F the bytes match: recovery keeps the
 *      transaction (recover.c C6);
 *   3. more than one lane: store gen + 1 and its check, flush the header
 *      line, no fence: the lane's next first fence (or
 *      vista__lazy_settle/_cover) makes it durable; until then the
 *      transaction stays committed by F.  One lane: nothing; the next
 *      transaction's first record -- its tag, stored after F, even if
 *      the rest of the record is torn -- ends gen (recover.c C7).
 * In the byte domain the same code issues no flush at all (rio_flush is
 * empty there) and each fence is a compiler barrier.  Nothing on this path
 * takes a lock, executes an atomic read-modify-write, makes a system call
 * or allocates (the range set grows past 16 entries only once per lane).
 *
 * State machine of a lane (lane->state), owning thread only; the whole
 * diagram, every transition with what triggers it, and the instance's
 * fatal state are in vista_int.h (M1-M3):
 *
 *   IDLE --begin--> ACTIVE --end--> COMMITTING --truncated--> IDLE
 *    ^               | |  ^                |
 *    +--fast commit--+ |  +----------------+  chain: truncated, changed
 *    (declared ranges  |                      pages logged again (auto.c)
 *     only, or none)   +--abort--> ABORTING --truncated--> IDLE
 *
 * Transaction hook (vista_set_tx_hook, for libvista/replica): commit()
 * calls it first, with the records and the stored bytes as they are, and
 * returns its refusal before any step above; abort calls it before the
 * undo.  Unset it costs one relaxed load and a branch.
 *
 * Invariants
 *   T1. A range is stored to only after its before-image is durable (the
 *       program stores after set_range returns; L2 in log.c).
 *   T2. Commit: every declared range (and fully logged open page) is
 *       durable before the truncation store, and the truncation is durable
 *       before end_transaction returns.
 *   T3. Abort: every before-image is back in place, durably, before the
 *       truncation; restoring runs newest record first, so the oldest
 *       image of a byte (the one from before the transaction) wins.
 *       Every line the transaction may have stored to is written back --
 *       also a line that now equals its before-image: the program may
 *       have stored another value there that reached memory -- and lines
 *       of short images are flushed once, after their last store.
 *   T4. Each byte of a transaction is logged at most once (coalescing),
 *       except when an automatic transaction logs a whole page that holds
 *       an explicitly declared range: then the newer copy is undone first.
 *   T5. The fault hook never sees a lane in the middle of an append: the
 *       library stores to protected pages only outside them.
 *
 * New ranges (vista_set_range_new, vista_set_ranges_new; PMDK's
 * POBJ_XADD_NO_SNAPSHOT)
 *   NR1. A new range is logged by its coordinates only (the last nnew
 *        descriptors of its record, log_layout.h): undo -- abort,
 *        recovery -- does not put it back, so its bytes stay as the
 *        program left them, and writes it back as it is (T3: the durable
 *        state, and a passive backup's copy, then equal memory); the
 *        hook sees it with no before-image.  Coalescing (T4) is by address, whatever
 *        the kind: a byte's first declaration in the transaction decides,
 *        and a byte both old and new in one call is in both records'
 *        descriptors, where the old one puts it back.  No DRAM copy in a
 *        held group (N3) either.
 *   NR2. Otherwise it is a declared range: in the range set, so the commit
 *        writes it back before its fence (T2), and in the records, so the
 *        commit checksum (vista__after_csum) covers its after-image and a
 *        crash before that fence finds the commit record not matching it:
 *        the transaction rolls back, the new range with it left unread.
 *   NR3. A log of format 5.0 (no VISTA_LOG_INCOMPAT_NEW) never holds a
 *        new range: there they are logged with their before-images.
 *        Redo mode and automatic transactions refuse them (-ENOTSUP).
 *
 * No-flush groups (VISTA_TX_NO_FLUSH, vista_flush; RVM's no-flush mode)
 *   N1. A no-flush transaction ends without a flush, a fence or a
 *       truncation (hold): its records, declared ranges and touched
 *       segments stay in the lane (lane->held), so the lane's generation
 *       holds the records of every transaction of the group, and a crash
 *       -- which finds them alive with no commit record of the group --
 *       rolls the whole group back, newest record first: the data is as
 *       before the group.  T4 coalesces within each transaction only
 *       (the range set is cleared at hold): a set kept for the whole
 *       group cost O(its size) per insert; the group's commit writes
 *       back what its records describe, each line once (flush_group).
 *   N2. The group commits as one transaction (vista__flush_held: the
 *       commit path above, one fence for all its lines) before anything
 *       that needs it durable or gone: vista_flush, the begin of a
 *       transaction without the flag (also when the group fills half
 *       its lane), vista_thread_detach, thread exit, vista_fini; and
 *       vista_unmap of a segment it touched is refused until then.
 *   N3. While a group is held, the running transaction's before-images
 *       are also copied to DRAM (vundo_save): its abort restores them,
 *       newest first, and leaves the group's records (those it added hold
 *       values from before the group).  No heap operation and no
 *       VISTA_TX_AUTO in a no-flush transaction: their undo is in the log
 *       only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vista_int.h"

#define VISTA__MAXGAPS 32
/* Ranges of one vista_set_ranges call sorted by insertion, on the stack;
 * a larger call allocates and calls qsort. */
#define VISTA__BATCH_STACK 32

/* relaxed: the hook pointer; vista__tx_hook() loads it again with
 * acquire before calling it. */
#define HOOKED(v) \
	VISTA__UNLIKELY(__atomic_load_n(&(v)->tx_hook, __ATOMIC_RELAXED) != NULL)

VISTA__COLD static int
no_tx(const vista *v, const char *call)
{
	if (v == NULL)
		return vista__err(-EINVAL, "%s: NULL instance", call);
	return vista__err(VISTA_ENOTX,
		"%s: no transaction is active on this thread", call);
}

VISTA__COLD static int
bad_range(const vista *v, const void *addr, size_t len, const char *call)
{
	return vista__err(VISTA_ERANGE,
		"%s(%p, %zu): the range is not inside the user area of one "
		"segment mapped by this instance (%u mapped)",
		call, addr, len, v->nmap);
}

/* A held no-flush group fills half its lane's record area. */
static inline bool
held_big(const struct vista_lane *l)
{
	return l->cur - l->rec0 > (l->end - l->rec0) / 2;
}

/* Everything but the common case of vista_begin_transaction. */
VISTA__COLD static int
begin_slow(vista *v, struct vista_lane *l, unsigned flags)
{
	int rc;

	if (v != NULL && v->redo != NULL)
		return vista__redo_begin(v, flags);

	if (l == NULL) {
		if (v == NULL)
			return no_tx(v, "vista_begin_transaction");
		l = vista__lane_get(v, &rc);
		if (l == NULL)
			return rc;
	}
	if (l->state != VISTA__TX_IDLE)
		return vista__err(VISTA_EINTX,
			"vista_begin_transaction: a transaction is already "
			"active on this thread (they do not nest)");
	if (flags & ~(VISTA_TX_AUTO | VISTA_TX_NO_FLUSH))
		return vista__err(-EINVAL,
			"vista_begin_transaction: unknown flags 0x%x", flags);
	if ((flags & VISTA_TX_AUTO) && (flags & VISTA_TX_NO_FLUSH))
		return vista__err(-EINVAL,
			"vista_begin_transaction: VISTA_TX_NO_FLUSH does not "
			"combine with VISTA_TX_AUTO");
	/* A hook (a replica) sends each transaction at its commit: a
	 * group that a crash rolls back would leave the peer ahead. */
	if ((flags & VISTA_TX_NO_FLUSH) && HOOKED(v))
		return vista__err(-EINVAL,
			"vista_begin_transaction: VISTA_TX_NO_FLUSH does not "
			"combine with a transaction hook (vista_set_tx_hook)");
	/* relaxed: the sticky error flag (vista__set_fatal()); nothing is read
	 * on the strength of it, and a transaction that misses a concurrent
	 * set is checked again at its commit. */
	if (__atomic_load_n(&v->fatal, __ATOMIC_RELAXED))
		return vista__err(VISTA_EFATAL,
			"vista_begin_transaction: the instance is in its error "
			"state; reopen it");
	if (l->held && (!(flags & VISTA_TX_NO_FLUSH) || held_big(l))) {
		/* N2: a durable transaction starts from a durable state, and
		 * a group commits before it fills half its lane. */
		rc = vista__flush_held(l);
		if (rc)
			return rc;
	}
	if (flags & VISTA_TX_AUTO) {
		rc = vista__auto_begin(v);
		if (rc)
			return rc;
	}
	l->flags = flags;
	vista__lane_set_state(l, VISTA__TX_ACTIVE);
	vista__tx_push(l);
	VISTA__STAT_ADD(l, tx_begun, 1);
	return 0;
}

int
vista_begin_transaction(vista *v, unsigned flags)
{
	struct vista_lane *l = vista__lane_fast(v);

	/* relaxed fatal: as in begin_slow(). */
	if (VISTA__UNLIKELY(l == NULL || l->state != VISTA__TX_IDLE ||
		    (flags & ~VISTA_TX_NO_FLUSH) != 0 ||
		    (flags != 0 && HOOKED(v)) ||
		    (l->held && (flags == 0 || held_big(l))) ||
		    __atomic_load_n(&v->fatal, __ATOMIC_RELAXED)))
		return begin_slow(v, l, flags);
	l->flags = flags;
	vista__lane_set_state(l, VISTA__TX_ACTIVE);
	vista__tx_push(l);
	VISTA__STAT_ADD(l, tx_begun, 1);
	return 0;
}

/*
 * Declare [addr, addr+len) of seg (T1, T4).  log: copy the bytes not yet
 * declared to the log and make them durable; !log: only remember the range
 * for the commit flush (fresh blocks, logically logged metadata).
 */
int
vista__declare(struct vista_lane *l, struct vista_segment *seg, void *addr,
	size_t len, bool log)
{
	uintptr_t lo = (uintptr_t)addr, hi = lo + len;
	struct vista__span sp[VISTA__MAXGAPS];
	struct vista_gap g[VISTA__MAXGAPS];
	uint32_t ng;
	int rc;

	if (!log) {
		/* Bytes with no before-image: the commit record cannot vouch
		 * for them (commit_lazy). */
		l->unlogged = true;
		rc = vista__ranges_add(&l->ranges, lo, hi, seg);
		if (rc)
			return vista__err(rc, "out of memory");
		goto declared;
	}
	if (VISTA__LIKELY(l->ranges.n == 0)) {
		/* The first range of the transaction: nothing to coalesce
		 * with, and the set has room inline. */
		rc = vista__log_one(l, seg, lo, len);
		if (VISTA__UNLIKELY(rc))
			return rc;
#ifndef VISTA_BROKEN_NO_LOG_PERSIST
		/* T1: the before-image is durable before the program
		 * stores. */
		vista__drain(l);
#endif
		l->ranges.v[0] = (struct vista_ival){ lo, hi, seg };
		l->ranges.n = 1;
		goto opened;
	}
	ng = vista__ranges_gaps(&l->ranges, lo, hi, g, VISTA__MAXGAPS);
	if (ng == 0) {
		VISTA__STAT_ADD(l, ranges_coalesced, 1);
		return 0;
	}
	if (ng > VISTA__MAXGAPS) {
		/* Too fragmented: log it whole (T4's exception is harmless:
		 * undo runs newest first). */
		g[0] = (struct vista_gap){ lo, hi };
		ng = 1;
	} else if (ng > 1 || g[0].lo != lo || g[0].hi != hi) {
		VISTA__STAT_ADD(l, ranges_coalesced, 1);
	}
	if (VISTA__UNLIKELY(vista__ranges_reserve(&l->ranges, 1)))
		return vista__err(-ENOMEM, "out of memory");
	if (ng == 1) {
		rc = vista__log_one(l, seg, g[0].lo, g[0].hi - g[0].lo);
	} else {
		for (uint32_t i = 0; i < ng; i++)
			sp[i] = (struct vista__span){ g[i].lo, g[i].hi, seg };
		rc = vista__log_ranges(l, sp, ng, 0);
	}
	if (VISTA__UNLIKELY(rc))
		return rc;
#ifndef VISTA_BROKEN_NO_LOG_PERSIST
	/* T1: the before-image is durable before the program stores. */
	vista__drain(l);
#endif
	(void)vista__ranges_add(&l->ranges, lo, hi, seg); /* reserved */
opened:
	/* The segment holds records of this transaction from now on (it
	 * cannot be unmapped until the transaction ends). */
	if (VISTA__UNLIKELY(!vista__bit_test(l->touched, seg->idx)))
		vista__bit_set(l->touched, seg->idx);
	/* relaxed: seg->prot only goes false -> true (auto.c); a stale false
	 * leaves the range's pages closed, and the store that then faults
	 * is opened by the hook, which reads prot with acquire. */
	if (VISTA__UNLIKELY(__atomic_load_n(&seg->prot, __ATOMIC_RELAXED)) &&
	    !(l->flags & VISTA_TX_AUTO))
		return vista__open_pages(l, seg, lo, hi, false);
	return 0;
declared:
	if (VISTA__UNLIKELY(!vista__bit_test(l->touched, seg->idx)))
		vista__bit_set(l->touched, seg->idx);
	return 0;
}

/*
 * N3: while a group is held, the running transaction's own before-images
 * also go to DRAM: the log's records of a byte hold its value before the
 * group (T4 coalesces within the group), and an abort must restore the
 * value before this transaction.
 */
static int
vundo_save(struct vista_lane *l, uintptr_t a, size_t len)
{
	if (l->vu_n == l->vu_cap) {
		uint32_t nc = l->vu_cap ? 2 * l->vu_cap : 16;
		struct vista__vundo *n = realloc(l->vu, nc * sizeof(*n));
		if (n == NULL)
			return -1;
		l->vu = n;
		l->vu_cap = nc;
	}
	if (l->vub_n + len > l->vub_cap) {
		size_t nc = 2 * (l->vub_n + len);
		char *n = realloc(l->vub, nc);
		if (n == NULL)
			return -1;
		l->vub = n;
		l->vub_cap = nc;
	}
	memcpy(l->vub + l->vub_n, (const void *)a, len);
	l->vu[l->vu_n++] = (struct vista__vundo){ a, len, l->vub_n };
	l->vub_n += len;
	return 0;
}

int
vista_set_range(vista *v, void *addr, size_t len)
{
	struct vista_lane *l = vista__lane_fast(v);
	struct vista_segment *seg;

	if (VISTA__UNLIKELY(l == NULL || l->state != VISTA__TX_ACTIVE)) {
		if (l == NULL)
			l = vista__lane_peek(v);
		if (v != NULL && v->redo != NULL)
			return vista__redo_set_range(v, addr, len);
		if (l == NULL || l->state != VISTA__TX_ACTIVE)
			return no_tx(v, "vista_set_range");
	}
	VISTA__STAT_ADD(l, set_ranges, 1);
	if (VISTA__UNLIKELY(len == 0))
		return 0;
	/* Start loading the before-image (vista_set_ranges). */
	__builtin_prefetch(addr, 1, 3);
	seg = vista__seg_find(l, (uintptr_t)addr, len);
	if (VISTA__UNLIKELY(seg == NULL))
		return bad_range(v, addr, len, "vista_set_range");
	if (VISTA__UNLIKELY(l->held) && vundo_save(l, (uintptr_t)addr, len))
		return vista__err(-ENOMEM, "out of memory");
	return vista__declare(l, seg, addr, len, true);
}

static int
span_cmp(const void *a, const void *b)
{
	const struct vista__span *x = a, *y = b;
	return x->lo < y->lo ? -1 : x->lo > y->lo;
}

/*
 * Sort spans by address.  Segments never overlap, so the spans of one
 * segment end up next to each other.  A transaction's batch is small:
 * insertion sort costs a few dozen inlined compares there, where qsort,
 * a merge sort calling a comparator for each, took 5% of debit-credit's
 * profile in the byte domain (4 ranges a transaction; 0.5% now), and 6%
 * of order-entry's in the cacheline domain (new-order declares up to 19
 * ranges in one call).
 */
static void
spans_sort(struct vista__span *s, size_t n)
{
	if (n > VISTA__BATCH_STACK) {
		qsort(s, n, sizeof(*s), span_cmp);
		return;
	}
	for (size_t i = 1; i < n; i++) {
		struct vista__span x = s[i];
		size_t j = i;
		for (; j > 0 && s[j - 1].lo > x.lo; j--)
			s[j] = s[j - 1];
		s[j] = x;
	}
}

/* Merge the sorted g[0..n) where they overlap or touch; returns the new n
 * (the range set's intervals are apart, R1). */
static uint32_t
gaps_merge(struct vista_gap *g, uint32_t n)
{
	uint32_t k = 0;

	for (uint32_t i = 1; i < n; i++) {
		if (g[i].lo <= g[k].hi) {
			if (g[i].hi > g[k].hi)
				g[k].hi = g[i].hi;
		} else {
			g[++k] = g[i];
		}
	}
	return n ? k + 1 : 0;
}

/*
 * The common batch, in one pass and without the general path's arrays: a
 * transaction's first (nothing to coalesce with, T4), not held, of at
 * most 16 ranges, each under 256 bytes and inside the segment of the
 * lane's lookup cache; ranges[n_old..n) are new (NR1).  Returns 1, having
 * done nothing, for any other batch (an invalid range included: the
 * general path refuses it).
 */
static int
first_batch(struct vista_lane *l, size_t n, size_t n_old,
	const struct vista_range *ranges)
{
	struct vista_gap g[16], u[16];
	struct vista_segment *seg = NULL;
	uintptr_t clo = 0, chi = 0;
	uint32_t ng = 0, nn = 0, nu = 0, k = 0;
	int rc;

	for (size_t i = 0; i < n; i++) {
		uintptr_t a = (uintptr_t)ranges[i].addr;
		size_t len = ranges[i].len;
		if (len == 0)
			continue;
		if (seg == NULL) {
			/* The first range's segment, through the lane's
			 * lookup cache, which now holds its bounds. */
			seg = vista__seg_find(l, a, len);
			if (seg == NULL || seg != l->cseg)
				return 1;
			clo = l->clo;
			chi = l->chi;
		}
		if (len >= 256 || a < clo || a >= chi || len > chi - a)
			return 1;
		/* Insertion by address: a few dozen compares here.  The
		 * old ranges fill g from 0, the new ones u. */
		struct vista_gap *t = i < n_old ? g : u;
		uint32_t j = i < n_old ? ng++ : nn++;
		for (; j > 0 && t[j - 1].lo > a; j--)
			t[j] = t[j - 1];
		t[j] = (struct vista_gap){ a, a + len };
	}
	if (ng + nn == 0)
		return 1;
	/* Merge what overlaps or touches: each byte is logged once (T4).
	 * A byte both old and new here is in both records' descriptors:
	 * undo restores it from the old one (NR1). */
	ng = gaps_merge(g, ng);
	nn = gaps_merge(u, nn);
	for (uint32_t i = 0; i < nn; i++)
		g[ng + i] = u[i];
	rc = vista__log_batch(l, seg, g, ng + nn, nn);
	if (VISTA__UNLIKELY(rc))
		return rc;
#ifndef VISTA_BROKEN_NO_LOG_PERSIST
	/* T1, for every range of the batch with one fence. */
	vista__drain(l);
#endif
	VISTA__STAT_ADD(l, set_ranges, 1);
	const struct vista_gap *set = g;
#ifdef VISTA_BROKEN_NEW_NO_WRITEBACK
	nn = 0; /* wrong: the new ranges are not in the set the commit
		 * writes back (NR2) */
#endif
	if (nn > 0) {
		/* Old and new together, sorted and merged again (R1). */
		uint32_t i = 0, j = ng;
		while (i < ng || j < ng + nn)
			u[nu++] = j == ng + nn || (i < ng &&
				g[i].lo <= g[j].lo) ? g[i++] : g[j++];
		ng = gaps_merge(u, nu);
		set = u;
	}
	/* The set is empty and holds 16 inline: sorted, disjoint, apart. */
	for (k = 0; k < ng; k++)
		l->ranges.v[k] = (struct vista_ival){ set[k].lo, set[k].hi, seg };
	l->ranges.n = ng;
	if (!vista__bit_test(l->touched, seg->idx))
		vista__bit_set(l->touched, seg->idx);
	/* relaxed: as in vista_set_range(). */
	if (VISTA__UNLIKELY(__atomic_load_n(&seg->prot, __ATOMIC_RELAXED)) &&
	    !(l->flags & VISTA_TX_AUTO))
		for (uint32_t i = 0; i < ng && rc == 0; i++)
			rc = vista__open_pages(l, seg, set[i].lo, set[i].hi,
				false);
	return rc;
}

/* Merge sorted spans r[0..n) of one segment each where they overlap or
 * touch within a segment; returns the new n.  *apart is cleared if two
 * spans of different segments touch (R1 wants a gap between intervals). */
static size_t
spans_merge(struct vista__span *r, size_t n, bool *apart)
{
	size_t k = 0;

	if (n < 2)
		return n;
	spans_sort(r, n);
	for (size_t i = 1; i < n; i++) {
		if (r[i].lo <= r[k].hi && r[i].seg == r[k].seg) {
			if (r[i].hi > r[k].hi)
				r[k].hi = r[i].hi;
		} else {
			if (r[i].lo <= r[k].hi)
				*apart = false;
			r[++k] = r[i];
		}
	}
	return k + 1;
}

/* Append [lo, hi) of seg to the growing array *sp (stack_s at first). */
static int
spans_push(struct vista__span **sp, size_t *ns, size_t *cap,
	const struct vista__span *stack_s, uintptr_t lo, uintptr_t hi,
	struct vista_segment *seg)
{
	if (*ns == *cap) {
		size_t nc = 2 * *cap;
		struct vista__span *n = malloc(nc * sizeof(*n));
		if (n == NULL)
			return vista__err(-ENOMEM, "out of memory");
		memcpy(n, *sp, *ns * sizeof(*n));
		if (*sp != stack_s)
			free(*sp);
		*sp = n;
		*cap = nc;
	}
	(*sp)[(*ns)++] = (struct vista__span){ lo, hi, seg };
	return 0;
}

/*
 * vista_set_ranges() and vista_set_ranges_new(): ranges[n_old..n) are new
 * (NR1-NR3).  Every range is declared or none.
 */
static int
set_batch(vista *v, size_t n, size_t n_old, const struct vista_range *ranges,
	const char *call)
{
	struct vista_lane *l = vista__lane_peek(v);
	struct vista__span stack_r[VISTA__BATCH_STACK], *r = stack_r;
	struct vista__span stack_s[32], *sp = stack_s;
	size_t nr = 0, nr0, nrn = 0, ns = 0, nsn = 0, cap_s = 32;
	struct vista_segment *last = NULL;
	bool fresh, open = false;
	int rc = 0;

	if (v != NULL && v->redo != NULL) {
		if (n_old < n)
			return vista__err(-ENOTSUP, "%s: redo mode keeps every "
				"before-image in DRAM: use vista_set_ranges",
				call);
		return vista__redo_set_ranges(v, n, ranges);
	}
	if (l == NULL || l->state != VISTA__TX_ACTIVE)
		return no_tx(v, call);
	if (n_old > n)
		return vista__err(-EINVAL, "%s: n_old %zu is more than n %zu",
			call, n_old, n);
	if (n == 0)
		return 0;
	if (ranges == NULL)
		return vista__err(-EINVAL, "%s: NULL ranges", call);
	if (n_old < n && (l->flags & VISTA_TX_AUTO))
		return vista__err(-ENOTSUP, "%s: an automatic transaction "
			"logs whole pages: new ranges need VISTA_TX_AUTO off",
			call);
	/* NR3: a log of format 5.0 cannot hold new ranges. */
	if (VISTA__UNLIKELY(!v->new_ok))
		n_old = n;
	/* Start loading every before-image now: the misses overlap the
	 * checks, sorting and coalescing below instead of stalling the
	 * copies.  A prefetch never faults, so an invalid range costs
	 * nothing here and is refused below. */
	for (size_t i = 0, np = n_old < 16 ? n_old : 16; i < np; i++)
		__builtin_prefetch(ranges[i].addr, 1, 3);
	/* A new range's lines are about to be stored to, and nothing reads
	 * them first: ask for them writable now, so that their misses
	 * overlap the record's fence instead of the program's stores (up
	 * to 32 lines). */
	for (size_t i = n_old, k = 0; i < n && k < 32; i++)
		for (uintptr_t a = (uintptr_t)ranges[i].addr & ~(uintptr_t)63;
		     a < (uintptr_t)ranges[i].addr + ranges[i].len && k < 32;
		     a += 64, k++)
			__builtin_prefetch((const void *)a, 1, 3);
	if (VISTA__LIKELY(l->ranges.n == 0 && n <= 16 && !l->held)) {
		rc = first_batch(l, n, n_old, ranges);
		if (VISTA__LIKELY(rc != 1))
			return rc;
		rc = 0;
	}
	if (n > VISTA__BATCH_STACK && (r = malloc(n * sizeof(*r))) == NULL)
		return vista__err(-ENOMEM, "out of memory");
	/* Every range must be valid before anything is logged. */
	for (size_t i = 0; i < n; i++) {
		uintptr_t a = (uintptr_t)ranges[i].addr;
		struct vista_segment *seg;
		if (ranges[i].len == 0)
			continue;
		seg = vista__seg_find(l, a, ranges[i].len);
		if (seg == NULL) {
			rc = bad_range(v, ranges[i].addr, ranges[i].len, call);
			goto out;
		}
		r[nr + nrn] = (struct vista__span){ a, a + ranges[i].len, seg };
		if (i < n_old)
			nr++;
		else
			nrn++;
	}
	/* N3: a new range's old bytes are not put back (NR1). */
	for (size_t i = 0; l->held && i < nr; i++)
		if (vundo_save(l, r[i].lo, r[i].hi - r[i].lo)) {
			rc = vista__err(-ENOMEM, "out of memory");
			goto out;
		}
	/* The transaction's first batch: every byte is new, nothing to
	 * coalesce with (T4), and the merged batch is the range set as it
	 * stands -- unless two of its spans touch across segments (R1 wants
	 * a gap between the set's intervals).  New ranges are logged as they
	 * come after the old ones: a byte in both is in both records'
	 * descriptors, and undo restores it from the old one (NR1). */
	fresh = l->ranges.n == 0;
	/* Merge the batch with itself (the old part, then the new part)... */
	nr0 = nr;
	nr = spans_merge(r, nr, &fresh);
	if (nrn > 0) {
		memmove(r + nr, r + nr0, nrn * sizeof(*r));
		nrn = spans_merge(r + nr, nrn, &fresh);
	}
	fresh = fresh && nr + nrn <= l->ranges.cap;
	if (fresh) {
		sp = r;
		ns = nr + nrn;
		nsn = nrn;
	}
	/* ...and with what the transaction declared before (T4). */
	for (size_t i = 0; !fresh && i < nr + nrn; i++) {
		struct vista_gap g[VISTA__MAXGAPS];
		uint32_t ng = vista__ranges_gaps(&l->ranges, r[i].lo, r[i].hi,
			g, VISTA__MAXGAPS);
		if (ng > VISTA__MAXGAPS) {
			g[0] = (struct vista_gap){ r[i].lo, r[i].hi };
			ng = 1;
		}
		if (ng != 1 || g[0].lo != r[i].lo || g[0].hi != r[i].hi)
			VISTA__STAT_ADD(l, ranges_coalesced, 1);
		for (uint32_t j = 0; j < ng && rc == 0; j++)
			rc = spans_push(&sp, &ns, &cap_s, stack_s, g[j].lo,
				g[j].hi, r[i].seg);
		if (rc)
			goto out;
		if (i >= nr)
			nsn += ng;
	}
	if (vista__ranges_reserve(&l->ranges, nr + nrn > UINT32_MAX ?
		    UINT32_MAX : (uint32_t)(nr + nrn))) {
		rc = vista__err(-ENOMEM, "out of memory");
		goto out;
	}
	if (ns > 0) {
		rc = vista__log_ranges(l, sp, (uint32_t)ns, (uint32_t)nsn);
		if (rc)
			goto out;
#ifndef VISTA_BROKEN_NO_LOG_PERSIST
		/* T1, for every range of the batch with one fence. */
		vista__drain(l);
#endif
	}
	VISTA__STAT_ADD(l, set_ranges, 1);
#ifdef VISTA_BROKEN_NEW_NO_WRITEBACK
	nrn = 0; /* wrong: as in first_batch() */
#endif
	size_t nins = nr + nrn;
	if (nrn > 0) {
		/* New among old, by address, merged where they overlap or
		 * touch; the set takes them as they come if still apart. */
		bool apart = true;
		nins = spans_merge(r, nr + nrn, &apart);
		fresh = fresh && apart;
	}
	for (size_t i = 0; i < nins && rc == 0; i++) {
		if (fresh) /* sorted, disjoint, apart: R1 as they come */
			l->ranges.v[l->ranges.n++] = (struct vista_ival){
				r[i].lo, r[i].hi, r[i].seg };
		else
			(void)vista__ranges_add(&l->ranges, r[i].lo, r[i].hi,
				r[i].seg);
		/* The spans of one segment are next to each other (sorted):
		 * its touched bit and protection are read once. */
		if (r[i].seg != last) {
			last = r[i].seg;
			if (!vista__bit_test(l->touched, last->idx))
				vista__bit_set(l->touched, last->idx);
			/* relaxed: as in vista_set_range(). */
			open = __atomic_load_n(&last->prot, __ATOMIC_RELAXED) &&
				!(l->flags & VISTA_TX_AUTO);
		}
		if (VISTA__UNLIKELY(open))
			rc = vista__open_pages(l, r[i].seg, r[i].lo, r[i].hi,
				false);
	}
	if (fresh) /* the set was empty: the appends above were all its
		    * reservation promised (ranges.c R5) */
		l->ranges.owed = 0;
out:
	if (sp != stack_s && sp != r)
		free(sp);
	if (r != stack_r)
		free(r);
	return rc;
}

int
vista_set_ranges(vista *v, size_t n, const struct vista_range *ranges)
{
	return set_batch(v, n, n, ranges, "vista_set_ranges");
}

int
vista_set_ranges_new(vista *v, size_t n, size_t n_old,
	const struct vista_range *r)
{
	return set_batch(v, n, n_old, r, "vista_set_ranges_new");
}

int
vista_set_range_new(vista *v, void *addr, size_t len)
{
	struct vista_range r = { addr, len };
	return set_batch(v, 1, 0, &r, "vista_set_range_new");
}

/*
 * N1: a held group's declared bytes are what its records describe (the
 * lane's range set holds the running transaction's only).  Each line is
 * written back once: lines already written back in this walk are kept in
 * a small open-addressing set; past its capacity a line may be written
 * back twice, which costs time, not correctness.
 */
static void
flush_group(struct vista_lane *l)
{
	enum { SLOTS = 512, MAXN = 384 };
	uintptr_t seen[SLOTS];
	unsigned n = 0;
	vista *v = l->v;

	memset(seen, 0, sizeof(seen));
	for (const char *pos = l->start; pos < l->cur;) {
		const struct vista_rec *r = (const void *)pos;
		const struct vista_rdesc *d = (const void *)(r + 1);
		for (unsigned i = 0; r->type == VISTA_REC_RANGES &&
		     i < r->count; i++) {
			const struct vista_segment *seg = v->byidx[d[i].seg];
			uintptr_t lo = (uintptr_t)seg->base + d[i].off;
			uintptr_t a = lo & ~(uintptr_t)63;
			for (; a < lo + d[i].len; a += 64) {
				size_t h = (size_t)(((a >> 6) *
					0x9e3779b97f4a7c15ull) >> 55);
				while (n < MAXN && seen[h] != 0 && seen[h] != a)
					h = (h + 1) % SLOTS;
				if (n < MAXN && seen[h] == a)
					continue;
				if (n < MAXN) {
					seen[h] = a;
					n++;
				}
				vista__flush(l, seg->pool, (void *)a, 64);
			}
		}
		pos += (r->len + VISTA_REC_ALIGN - 1) &
			~(size_t)(VISTA_REC_ALIGN - 1);
	}
}

/* Flush every declared range, each cache line once (T2). */
static void
flush_ranges(struct vista_lane *l)
{
	const struct vista_rrun *rr;
	struct vista_rrun one;
	uint32_t nr;
	uintptr_t done = 0;

	if (VISTA__UNLIKELY(l->nrec0 > 0)) {
		flush_group(l);
		return;
	}

	nr = vista__ranges_runs(&l->ranges, &rr, &one);
#ifdef VISTA_BROKEN_CHUNK_FIRST_ONLY
	nr = nr > 1 ? 1 : nr; /* wrong: a chunked set's other chunks are
			       * not written back */
#endif
	for (uint32_t k = 0; k < nr; k++) {
		const struct vista_ival *iv = rr[k].v;
		for (uint32_t i = 0; i < rr[k].n; i++) {
			uintptr_t lo = iv[i].lo & ~(uintptr_t)63;
			if (lo < done)
				lo = done;
			if (lo < iv[i].hi)
				vista__flush(l, iv[i].seg->pool, (void *)lo,
					iv[i].hi - lo);
			done = (iv[i].hi + 63) & ~(uintptr_t)63;
		}
	}
}

/* Back to IDLE: the lane's DRAM state for the next transaction. */
VISTA__INLINE void
finish(struct vista_lane *l)
{
	if (VISTA__UNLIKELY(l->prot_used)) {
		vista__open_reprotect(l);
		memset(l->touched, 0, sizeof(l->touched));
	}
	if (l->nrec) {
		/* L3 (T2, T3): the transaction's records are dead -- the first
		 * one no longer carries the lane's generation. */
		VISTA_ASSERT(((const struct vista_rec *)l->start)->tag !=
			vista_rec_tag(l->seed, l->gen,
				(uint64_t)(l->start - l->rec0)), "L3");
		memset(l->touched, 0, sizeof(l->touched));
		if (VISTA__UNLIKELY(l->nalloc_recs || l->nfree_recs)) {
			memset(l->freed, 0, sizeof(l->freed));
			memset(l->allocd, 0, sizeof(l->allocd));
		}
		vista__log_reset(l);
		/* L6: after the records a lazy truncation keeps alive, while
		 * the lane's first lines stay warm. */
#ifdef VISTA_BROKEN_SOLO_OVERWRITE
		if (!l->v->solo) /* wrong: see vista__log_room() */
#endif
		if (l->lazy && l->old_hi - l->rec0 < VISTA__LOG_WINDOW &&
		    l->end - l->old_hi >= VISTA__LOG_WINDOW)
			l->cur = l->start = l->old_hi;
	}
	vista__ranges_clear(&l->ranges);
	l->flags = 0;
	l->held = false;
	l->nrec0 = 0;
	l->vu_n = 0;
	l->vub_n = 0;
	vista__lane_set_state(l, VISTA__TX_IDLE);
	/* M2 */
	VISTA_ASSERT(l->nrec == 0 && l->cur == l->start && l->ranges.n == 0,
		"M2");
	vista__tx_pop(l);
}

/* Tell a tracer (tools/pmemtest) what commit promised to be durable.
 * Out of line: untraced, a commit pays only the caller's rio_tracing(),
 * the branch every rio_flush/rio_drain already takes. */
VISTA__COLD static void
durable_points_segs(struct vista_lane *l, const char *what)
{
	vista *v = l->v;

	for (unsigned i = 0; i < VISTA_MAX_SEGMENTS; i++)
		if (vista__bit_test(l->touched, i) && v->byidx[i] != NULL)
			rio_durable_point(v->byidx[i]->pool, what);
}

VISTA__COLD static void
durable_points(struct vista_lane *l, const char *what)
{
	vista *v = l->v;

	rio_durable_point(v->log, what);
	for (unsigned i = 0; i < VISTA_MAX_SEGMENTS; i++)
		if (vista__bit_test(l->touched, i) && v->byidx[i] != NULL)
			rio_durable_point(v->byidx[i]->pool, what);
}

/* Page domain: an msync that failed makes durability uncertain. */
static int
check_pools(struct vista_lane *l)
{
	vista *v = l->v;
	int rc = rio_pool_error(v->log);

	for (unsigned i = 0; rc == 0 && i < VISTA_MAX_SEGMENTS; i++)
		if (vista__bit_test(l->touched, i) && v->byidx[i] != NULL)
			rc = rio_pool_error(v->byidx[i]->pool);
	return rc ? vista__set_fatal(v, rc, "persisting the transaction") : 0;
}

/* vista_chain_transaction after its commit: the lane's next transaction
 * begins with the changed pages still open (auto.c, P4). */
static int
chain_next(struct vista_lane *l)
{
	memset(l->touched, 0, sizeof(l->touched));
	if (l->nalloc_recs || l->nfree_recs) {
		memset(l->freed, 0, sizeof(l->freed));
		memset(l->allocd, 0, sizeof(l->allocd));
	}
	vista__ranges_clear(&l->ranges);
	(void)vista__open_chain(l);
	vista__lane_set_state(l, VISTA__TX_ACTIVE);
	VISTA__STAT_ADD(l, tx_begun, 1);
	/* relaxed: the flag this very thread may just have set in the
	 * commit above (program order), or another's: no data follows it. */
	if (VISTA__UNLIKELY(__atomic_load_n(&l->v->fatal, __ATOMIC_RELAXED))) {
		/* Pages could not be protected again: end the new
		 * transaction (it changed nothing yet). */
		(void)vista__tx_abort_lane(l);
		return vista__err(VISTA_EFATAL,
			"vista_chain_transaction: committed, but open pages "
			"could not be protected again; the instance is in its "
			"error state");
	}
	return 0;
}

/* Commit with frees, open pages, or the page domain; chain:
 * then begin the next transaction (vista_chain_transaction). */
static int
commit_slow(struct vista_lane *l, bool chain)
{
	int rc = 0;

	vista__lane_set_state(l, VISTA__TX_COMMITTING);
	if (l->nfree_recs) {
		vista__heap_lock(l, false);
		vista__heap_commit_frees(l);
	}
#ifdef VISTA_BROKEN_COMMIT_ORDER
	vista__log_truncate(l); /* wrong: the log dies before the data lives */
#endif
	flush_ranges(l);
	if (l->prot_used)
		vista__open_flush(l);
	/* T2: the transaction's stores are durable... */
	vista__drain(l);
#ifndef VISTA_BROKEN_COMMIT_ORDER
	/* ...before its undo records are discarded. */
	vista__log_truncate(l);
#endif
	if (rio_tracing())
		durable_points(l, "vista_end_transaction");
	if (l->nfree_recs)
		vista__heap_after(l, true);
	if (l->v->page_domain)
		rc = check_pools(l);
	VISTA__STAT_ADD(l, tx_committed, 1);
	if (chain && rc == 0)
		return chain_next(l);
	finish(l);
	return rc;
}

/* The one segment-table entry the transaction touched, or -1. */
static inline int
one_segment(const struct vista_lane *l)
{
	int seg = -1;

	for (unsigned w = 0; w < VISTA__SEGWORDS; w++) {
		uint64_t x = l->touched[w];
		if (x == 0)
			continue;
		if (seg >= 0 || (x & (x - 1)) != 0)
			return -1;
		seg = (int)(w * 64 + (unsigned)__builtin_ctzll(x));
	}
	return seg;
}

/*
 * One fence: data and commit record together, truncation lazy (the
 * persist order is in this file's head).  Declared ranges of one segment
 * only, each logged (so that the records describe every byte the commit
 * record vouches for), cacheline domain.
 */
static int
commit_lazy(struct vista_lane *l, unsigned segidx)
{
	vista *v = l->v;
	struct vista_commit_slot c, *slot;
	bool other;

	vista__lane_set_state(l, VISTA__TX_COMMITTING);
#if defined(VISTA_BROKEN_COMMIT_ORDER) || defined(VISTA_BROKEN_FAST_COMMIT_ORDER)
	/* wrong: the truncation is written back with the data, not after */
	VISTA_ASSERT(l->gen >= l->hdr->gen, "L3");
	__atomic_store_n(&l->hdr->gen_check,
		vista_lane_gen_check(l->seed, l->gen + 1), __ATOMIC_RELAXED);
	__atomic_store_n(&l->hdr->gen, l->gen + 1, __ATOMIC_RELAXED);
	vista__flush(l, v->log, l->hdr, sizeof(*l->hdr));
#endif
	/* 1. The commit record, in slot gen & 1: the record of gen - 1 in
	 * the other slot stays whole (C7 in recover.c).  It says what the
	 * bytes must hold for recovery to keep the transaction (C6),
	 * summed while the declared lines are still in the cache (a
	 * write-back may evict them). */
	memset(&c, 0, sizeof(c));
	c.gen = l->gen;
	c.csum = vista__after_csum(l, v->byidx[segidx]->base, segidx, &other);
	VISTA_ASSERT(!other, "C6");
	c.seg = (uint16_t)segidx;
	c.check = vista_lane_commit_check(l->seed, c.gen, c.csum, c.seg);
#ifdef VISTA_BROKEN_ONE_SLOT
	/* wrong: overwrites the record of gen - 1, which may be the newest
	 * valid one if this one is torn */
	slot = &l->cl->slot[0];
#else
	slot = &l->cl->slot[l->gen & 1];
#endif
	memcpy(slot, &c, sizeof(c));
	/* 2. Start writing the declared lines back, and the commit record's
	 * line: both durable at F, in either order. */
#if !defined(VISTA_BROKEN_FAST_NO_FLUSH) && !defined(VISTA_BROKEN_LAZY_COMMIT_EARLY)
	flush_ranges(l);
#endif
	vista__flush(l, v->log, slot, sizeof(*slot));
#ifdef VISTA_BROKEN_LAZY_COMMIT_EARLY
	/* wrong: the commit record is durable before the data is written
	 * back, and recovery trusts it without checking the bytes. */
	vista__drain(l);
	flush_ranges(l);
#endif
	/* F: the data and the commit record are durable: the transaction
	 * is committed (T2) before end_transaction returns. */
	vista__drain(l);
#if !defined(VISTA_BROKEN_COMMIT_ORDER) && !defined(VISTA_BROKEN_FAST_COMMIT_ORDER)
	/* 3. More than one lane: truncate without a fence (L6), relaxed
	 * 8-byte stores that must not tear, check first as in
	 * vista__log_truncate().  One lane: nothing (L7): the lane's next
	 * record of gen + 1 ends this generation. */
	if (!v->solo) {
		VISTA_ASSERT(l->gen >= l->hdr->gen, "L3");
		__atomic_store_n(&l->hdr->gen_check,
			vista_lane_gen_check(l->seed, l->gen + 1),
			__ATOMIC_RELAXED);
		__atomic_store_n(&l->hdr->gen, l->gen + 1, __ATOMIC_RELAXED);
#ifndef VISTA_BROKEN_LAZY_NO_COVER
		/* Written back now; durable at the lane's next first fence
		 * (or at vista__lazy_settle/_cover), before anything can
		 * change the bytes the commit record vouches for. */
		vista__flush(l, v->log, l->hdr, sizeof(*l->hdr));
#endif
	}
#endif
	l->old_lo = l->start;
	l->old_hi = l->cur;
	/* relaxed: read after the acquire of lazy (vista__lazy_settle). */
	__atomic_store_n(&l->lazy_gen, l->gen + 1, __ATOMIC_RELAXED);
	/* release: pairs with the acquire in vista__lazy_cover() and
	 * unmap: another thread that sees the flag writes back the
	 * truncation above (or stores it, L7). */
	__atomic_store_n(&l->lazy, true, __ATOMIC_RELEASE);
	l->gen++;
	if (rio_tracing())
		/* The data is durable; the log is not, by design: its lane
		 * header waits for the next fence (L6, L7). */
		durable_points_segs(l, "vista_end_transaction");
	VISTA__STAT_ADD(l, tx_committed, 1);
	finish(l);
	return 0;
}

/*
 * N1: end a no-flush transaction without making it durable.  Its records,
 * declared ranges and touched segments stay in the lane with the group's;
 * the group commits durably later (vista__flush_held).  Nothing is
 * flushed or fenced here: the transaction is atomic because a crash finds
 * the group's records alive with no commit record for them, and rolls
 * back the whole group.
 */
static int
hold(struct vista_lane *l)
{
#ifdef VISTA_BROKEN_NOFLUSH_TRUNCATE
	/* wrong: the records die before the data they guard is durable */
	if (l->nrec > 0) {
		vista__log_truncate(l);
		VISTA__STAT_ADD(l, tx_committed, 1);
		finish(l);
		return 0;
	}
#endif
	VISTA__STAT_ADD(l, tx_committed, 1);
	if (l->nrec == 0 && !l->held) {
		finish(l);
		return 0;
	}
	l->held = true;
	l->nrec0 = l->nrec;
	l->vu_n = 0;
	l->vub_n = 0;
	l->flags = 0;
	/* The next transaction logs its own ranges again (flush_group). */
	vista__ranges_clear(&l->ranges);
	vista__lane_set_state(l, VISTA__TX_IDLE);
	vista__tx_pop(l);
	return 0;
}

static int
commit(struct vista_lane *l)
{
	vista *v = l->v;

	/* relaxed: the sticky error flag.  A commit racing with another
	 * thread's failure may miss it: its own flushes and drains decide
	 * its durability, and the failure is of another lane. */
	if (VISTA__UNLIKELY(__atomic_load_n(&v->fatal, __ATOMIC_RELAXED)))
		return vista__err(VISTA_EFATAL,
			"vista_end_transaction: the instance is in its error "
			"state; abort the transaction and reopen");
	/* The hook sees the transaction before anything of it is durable
	 * and may refuse it (a replica that is not the primary). */
	if (HOOKED(v) && l->nrec != 0) {
		int hrc = vista__tx_hook(l, VISTA_HOOK_COMMIT);
		if (hrc)
			return hrc;
	}
	/* N1; a transaction that opened pages (another thread's automatic
	 * transactions protect segments) commits durably, with the group. */
	if (VISTA__UNLIKELY(l->flags & VISTA_TX_NO_FLUSH) && !l->prot_used)
		return hold(l);
	if (l->nrec == 0) {
		/* Nothing was logged, so nothing was declared either. */
		VISTA_ASSERT(l->ranges.n == 0, "T1");
		VISTA__STAT_ADD(l, tx_committed, 1);
		finish(l);
		return 0;
	}
	/* A tracer takes this path too: the power-failure tests run the
	 * instructions production runs (the hooks are in rio_flush and
	 * rio_drain themselves). */
	if (VISTA__UNLIKELY(l->nfree_recs || l->prot_used || v->page_domain))
		return commit_slow(l, false);
	/* The common case: declared ranges of one segment. */
	if (VISTA__LIKELY(!v->sealed && !l->unlogged && l->nalloc_recs == 0)) {
		int seg = one_segment(l);
		if (seg >= 0)
			return commit_lazy(l, (unsigned)seg);
	}
	/* Only declared ranges (and fresh blocks). */
#if defined(VISTA_BROKEN_COMMIT_ORDER) || defined(VISTA_BROKEN_FAST_COMMIT_ORDER)
	vista__log_truncate(l); /* wrong: the log dies before the data lives */
#endif
#ifndef VISTA_BROKEN_FAST_NO_FLUSH
	if (!v->sealed) /* the byte domain flushes nothing */
		flush_ranges(l);
#endif
	/* T2: the transaction's stores are durable... */
	vista__drain(l);
#if !defined(VISTA_BROKEN_COMMIT_ORDER) && !defined(VISTA_BROKEN_FAST_COMMIT_ORDER)
	/* ...before its undo records are discarded. */
	vista__log_truncate(l);
#endif
	if (rio_tracing())
		durable_points(l, "vista_end_transaction");
	VISTA__STAT_ADD(l, tx_committed, 1);
	finish(l);
	return 0;
}

int
vista_end_transaction(vista *v)
{
	struct vista_lane *l = vista__lane_fast(v);

	if (VISTA__UNLIKELY(l == NULL || l->state != VISTA__TX_ACTIVE)) {
		if (l == NULL)
			l = vista__lane_peek(v);
		if (v != NULL && v->redo != NULL)
			return vista__redo_commit(v);
		if (l == NULL || l->state != VISTA__TX_ACTIVE)
			return no_tx(v, "vista_end_transaction");
	}
	return commit(l);
}

int
vista__flush_held(struct vista_lane *l)
{
	int rc;

	if (!l->held)
		return 0;
	/* relaxed: as in commit(); the group stays held. */
	if (__atomic_load_n(&l->v->fatal, __ATOMIC_RELAXED))
		return vista__err(VISTA_EFATAL,
			"vista_flush: the instance is in its error state; "
			"reopen it");
	/* N2: the group commits as one transaction: every declared line
	 * written back, the commit record, one fence (commit_lazy), or the
	 * slow commit's order. */
	l->flags = 0;
	vista__lane_set_state(l, VISTA__TX_ACTIVE);
	vista__tx_push(l);
	rc = commit(l);
	/* The group's transactions were counted as they ended. */
	VISTA__STAT_ADD(l, tx_committed, (uint64_t)-1);
	return rc;
}

int
vista_flush(vista *v)
{
	struct vista_lane *l = vista__lane_peek(v);

	if (v != NULL && v->redo != NULL)
		return vista__redo_refuse("vista_flush");
	if (l == NULL)
		return v == NULL ? vista__err(-EINVAL, "vista_flush: NULL "
			"instance") : 0;
	if (l->state != VISTA__TX_IDLE)
		return vista__err(VISTA_EINTX,
			"vista_flush: a transaction is active on this thread");
	return vista__flush_held(l);
}

/*
 * L8 in log.c: end the calling thread's lazily committed generation for
 * good, so that stores outside transactions cannot make recovery roll it
 * back.  1 if it fenced, 0 if nothing needed it.
 */
int
vista_settle(vista *v)
{
	struct vista_lane *l = vista__lane_peek(v);
	int rc;

	if (v != NULL && v->redo != NULL)
		return vista__redo_refuse("vista_settle");
	if (l == NULL)
		return v == NULL ? vista__err(-EINVAL, "vista_settle: NULL "
			"instance") : 0;
	/* Outside a transaction a held group commits first (N2), lazily
	 * itself; inside one it stays held: its records are alive, and a
	 * crash rolls it back whatever is stored outside it. */
	if (l->state == VISTA__TX_IDLE && (rc = vista__flush_held(l)) != 0)
		return rc;
	/* relaxed: the owner's own flag (written by this thread, or read
	 * after the acquire of taking the lane). */
	if (!__atomic_load_n(&l->lazy, __ATOMIC_RELAXED))
		return 0;
	/* A fenced record of the running generation already ended the
	 * lazy one: its tag (one lane, C7), or the fence that made it
	 * durable also completed the truncation the commit wrote back
	 * (L6).  Nothing to do, no fence. */
	if (l->state != VISTA__TX_IDLE && l->nrec > 0 && !l->unfenced)
		return 0;
	/* L8: the floor stored (one lane) or the stored truncation's line
	 * written back again, then the fence: the generation is ended on
	 * media -- its commit record no longer consulted -- before the
	 * caller stores over the bytes that record vouches for. */
#ifndef VISTA_BROKEN_NO_SETTLE
	vista__lazy_settle(l);
#else
	/* wrong: the generation is taken for ended with nothing stored or
	 * fenced, and the caller's stores may undo it */
	__atomic_store_n(&l->lazy, false, __ATOMIC_RELEASE);
#endif
	return 1;
}

int
vista_chain_transaction(vista *v)
{
	struct vista_lane *l = vista__lane_fast(v);
	unsigned flags;
	int rc;

	if (VISTA__UNLIKELY(l == NULL || l->state != VISTA__TX_ACTIVE)) {
		if (l == NULL)
			l = vista__lane_peek(v);
		if (v != NULL && v->redo != NULL) {
			rc = vista__redo_commit(v);
			return rc ? rc : vista__redo_begin(v, 0);
		}
		if (l == NULL || l->state != VISTA__TX_ACTIVE)
			return no_tx(v, "vista_chain_transaction");
	}
	flags = l->flags;
	if ((flags & VISTA_TX_AUTO) && l->prot_used) {
		/* relaxed: as in commit(). */
		if (VISTA__UNLIKELY(__atomic_load_n(&v->fatal,
			    __ATOMIC_RELAXED)))
			return commit(l); /* refuses, as end would */
		if (HOOKED(v) && l->nrec != 0) {
			rc = vista__tx_hook(l, VISTA_HOOK_COMMIT);
			if (rc)
				return rc;
		}
		return commit_slow(l, true);
	}
	/* Nothing stays open: commit, then begin. */
	rc = commit(l);
	return rc ? rc : vista_begin_transaction(v, flags);
}

/* ---- the transaction hook (vista_set_tx_hook) ---- */

int
vista_set_tx_hook(vista *v, vista_tx_hook fn, void *arg)
{
	if (v == NULL)
		return vista__err(-EINVAL, "vista_set_tx_hook: NULL instance");
	if (v->redo != NULL)
		return vista__redo_refuse("vista_set_tx_hook");
	pthread_mutex_lock(&v->lock);
	for (unsigned i = 0; i < v->nlanes; i++) {
		if (v->lanes[i].state != VISTA__TX_IDLE) {
			pthread_mutex_unlock(&v->lock);
			return vista__err(VISTA_EINTX,
				"vista_set_tx_hook: lane %u has an active "
				"transaction", i);
		}
	}
	/* release: a transaction that sees the new hook sees its argument
	 * (the acquire is in vista__tx_hook()). */
	__atomic_store_n(&v->tx_hook_arg, arg, __ATOMIC_RELAXED);
	__atomic_store_n(&v->tx_hook, fn, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&v->lock);
	return 0;
}

int
vista__tx_hook(struct vista_lane *l, unsigned event)
{
	vista_tx_hook fn = __atomic_load_n(&l->v->tx_hook, __ATOMIC_ACQUIRE);
	struct vista_txinfo it = { l, NULL, NULL, 0 };

	if (fn == NULL || l->nrec == 0)
		return 0;
	return fn(__atomic_load_n(&l->v->tx_hook_arg, __ATOMIC_RELAXED),
		event, &it);
}

int
vista_txinfo_next(struct vista_txinfo *tx, struct vista_txrange *out)
{
	struct vista_lane *l = tx->l;

	for (;;) {
		const struct vista_rec *r;
		if (tx->pos == NULL) {
			tx->pos = l->start;
			tx->i = 0;
			tx->data = NULL;
		}
		if (tx->pos >= l->cur)
			return 0;
		r = (const void *)tx->pos;
		if (r->type == VISTA_REC_RANGES && tx->i < r->count) {
			const struct vista_rdesc *d = (const void *)(r + 1);
			struct vista_segment *seg = l->v->byidx[d[tx->i].seg];
			if (tx->data == NULL)
				tx->data = (const char *)(d + r->count);
			out->seg = seg;
			out->addr = seg->base + d[tx->i].off;
			out->len = d[tx->i].len;
			/* A new range has no before-image (NR1). */
			out->before = tx->i < vista_rec_nold(r) ? tx->data :
				NULL;
			if (out->before != NULL)
				tx->data += (d[tx->i].len + 7) & ~7u;
			tx->i++;
			return 1;
		}
		/* The next record: strides are 64-byte multiples. */
		tx->pos += (r->len + VISTA_REC_ALIGN - 1) &
			~(VISTA_REC_ALIGN - 1);
		tx->i = 0;
		tx->data = NULL;
	}
}

unsigned
vista_txinfo_flags(const struct vista_txinfo *tx)
{
	return (tx->l->nalloc_recs || tx->l->nfree_recs || tx->l->unlogged) ?
		VISTA_TXI_HEAP : 0;
}

/*
 * Put a before-image back.  A long one goes with rio_memcpy_nodrain():
 * non-temporal stores in the cacheline domain, every line on its way to
 * memory without a flush (measured here: 0.27 us a page, against 0.47 us
 * for comparing each line and flushing them all).  A short one is copied
 * and noted, so that a line several records restore is flushed once, at
 * the end of the undo.  Either way every line is written back, also one
 * that held its before-image already: equal now does not mean never
 * changed (T3).
 */
static void
copy_back(struct vista_lane *l, struct vista_segment *seg, char *dst,
	const char *src, size_t len)
{
	if (len >= 256) {
		rio_memcpy_nodrain(seg->pool, dst, src, len);
		if (!l->v->sealed) {
			uintptr_t a = (uintptr_t)dst & ~(uintptr_t)63;
			VISTA__STAT_ADD(l, flushes,
				((uintptr_t)dst + len - a + 63) / 64);
		}
		return;
	}
	memcpy(dst, src, len);
	vista__undo_note(l, seg, dst, len);
}

static void
restore(struct vista_lane *l, struct vista_segment *seg, char *dst,
	const char *src, size_t len, bool recovering)
{
	/* relaxed: as in vista_set_range().  (A segment protected by
	 * another thread's first automatic transaction in the middle of
	 * this one: ARCHITECTURE.md, Memory ordering.) */
	if (!recovering && __atomic_load_n(&seg->prot, __ATOMIC_RELAXED)) {
		/* Only pages the transaction opened can differ from their
		 * before-image: any store to another page would have
		 * faulted and opened it.  The others stay protected. */
		while (len > 0) {
			uintptr_t d = (uintptr_t)dst;
			size_t n = VISTA_PAGE - d % VISTA_PAGE;
			if (n > len)
				n = len;
			if (vista__page_open(l, d))
				copy_back(l, seg, dst, src, n);
			dst += n;
			src += n;
			len -= n;
		}
		return;
	}
	copy_back(l, seg, dst, src, len);
}

void
vista__undo_note(struct vista_lane *l, struct vista_segment *seg,
	const void *addr, size_t len)
{
	uintptr_t lo = (uintptr_t)addr & ~(uintptr_t)63;
	uintptr_t hi = ((uintptr_t)addr + len + 63) & ~(uintptr_t)63;
	struct vista__span *last = l->undo_n ? &l->undo[l->undo_n - 1] : NULL;

	if (l->v->sealed || len == 0)
		return; /* the byte domain flushes nothing */
	if (last != NULL && last->seg == seg && lo <= last->hi &&
	    hi >= last->lo) {
		/* Touching the previous span (the common case: images of
		 * one record, in address order): widen it. */
		if (lo < last->lo)
			last->lo = lo;
		if (hi > last->hi)
			last->hi = hi;
		return;
	}
	if (l->undo_n == l->undo_cap) {
		uint32_t cap = l->undo_cap ? 2 * l->undo_cap : 64;
		struct vista__span *n = realloc(l->undo, cap * sizeof(*n));
		if (n == NULL) {
			/* No room to remember it: flush it now (durable at
			 * the caller's fence all the same). */
			vista__flush(l, seg->pool, (void *)lo, hi - lo);
			return;
		}
		l->undo = n;
		l->undo_cap = cap;
	}
	l->undo[l->undo_n++] = (struct vista__span){ lo, hi, seg };
}

/* Flush every line the undo stored to, once (T3). */
static void
undo_flush(struct vista_lane *l)
{
	struct vista__span *s = l->undo;
	uint32_t n = l->undo_n;

	spans_sort(s, n);
	for (uint32_t i = 0; i < n;) {
		uintptr_t lo = s[i].lo, hi = s[i].hi;
		uint32_t j = i + 1;
		for (; j < n && s[j].seg == s[i].seg && s[j].lo <= hi; j++)
			if (s[j].hi > hi)
				hi = s[j].hi;
		vista__flush(l, s[i].seg->pool, (void *)lo, hi - lo);
		i = j;
	}
	l->undo_n = 0;
}

void
vista__undo(vista *v, struct vista_lane *l, const struct vista_segment *only,
	bool recovering)
{
	char *pos;

	if (l->last == 0)
		return;
	l->undo_n = 0;
	pos = l->cur - l->last;
	for (;;) {
		const struct vista_rec *r = (const void *)pos;
		if (r->type == VISTA_REC_RANGES) {
			const struct vista_rdesc *d = (const void *)(r + 1);
			const char *data = pos + r->len;
			/* Data of descriptor i follows the data of 0..i-1, so
			 * walk back from the end of the record (T3); new
			 * ranges, last, have none: not put back, only
			 * written back as they are (NR1, T3). */
			for (int i = r->count - 1; i >= 0; i--) {
				struct vista_segment *seg;
				seg = only ? (d[i].seg == only->idx ?
						(struct vista_segment *)only : NULL) :
					     v->byidx[d[i].seg];
				if (i >= (int)vista_rec_nold(r)) {
					if (seg != NULL)
						vista__undo_note(l, seg,
							seg->base + d[i].off,
							d[i].len);
					continue;
				}
				data -= (d[i].len + 7) & ~7u;
				if (seg != NULL)
					restore(l, seg, seg->base + d[i].off, data,
						d[i].len, recovering);
			}
		} else {
			const struct vista_robj *o = (const void *)(r + 1);
			for (int i = r->count - 1; i >= 0; i--) {
				struct vista_segment *seg;
				seg = only ? (o[i].seg == only->idx ?
						(struct vista_segment *)only : NULL) :
					     v->byidx[o[i].seg];
				if (seg != NULL)
					vista__heap_undo(l, seg, r->type, &o[i],
						recovering);
			}
		}
		if (r->prev == 0)
			break;
		pos -= r->prev;
	}
	undo_flush(l);
}

/* N3: abort the running transaction of a held group from its DRAM
 * before-images, newest first; the group's records stay (those this
 * transaction added hold the group's starting values). */
static int
abort_held(struct vista_lane *l)
{
	vista__lane_set_state(l, VISTA__TX_ABORTING);
	for (uint32_t i = l->vu_n; i-- > 0;)
		memcpy((void *)l->vu[i].a, l->vub + l->vu[i].off, l->vu[i].len);
	if (l->prot_used)
		vista__open_reprotect(l);
	vista__ranges_clear(&l->ranges);
	l->nrec0 = l->nrec;
	l->vu_n = 0;
	l->vub_n = 0;
	l->flags = 0;
	VISTA__STAT_ADD(l, tx_aborted, 1);
	vista__lane_set_state(l, VISTA__TX_IDLE);
	vista__tx_pop(l);
	return 0;
}

int
vista__tx_abort_lane(struct vista_lane *l)
{
	bool heap = l->nfree_recs || l->nalloc_recs;

	if (l->held)
		return abort_held(l);

	vista__lane_set_state(l, VISTA__TX_ABORTING);
	if (l->nrec > 0) {
		if (heap)
			vista__heap_lock(l, true);
		vista__undo(l->v, l, NULL, false);
#ifndef VISTA_BROKEN_ABORT_NO_DRAIN
		/* T3: the before-images are back in place, durably... */
		vista__drain(l);
#endif
		/* ...before the records holding them are discarded. */
		vista__log_truncate(l);
		if (heap)
			vista__heap_after(l, false);
	}
	if (l->nrec > 0 && l->v->page_domain)
		(void)check_pools(l);
	VISTA__STAT_ADD(l, tx_aborted, 1);
	finish(l);
	/* relaxed: the sticky error flag, for the return code only. */
	if (__atomic_load_n(&l->v->fatal, __ATOMIC_RELAXED))
		return vista__err(VISTA_EFATAL,
			"vista_abort_transaction: rolled back in memory, but "
			"the instance is in its error state; reopen it");
	return 0;
}

int
vista_abort_transaction(vista *v)
{
	struct vista_lane *l = vista__lane_peek(v);

	if (v != NULL && v->redo != NULL)
		return vista__redo_abort(v);
	if (l == NULL || l->state != VISTA__TX_ACTIVE)
		return no_tx(v, "vista_abort_transaction");
	if (HOOKED(v))
		(void)vista__tx_hook(l, VISTA_HOOK_ABORT);
	return vista__tx_abort_lane(l);
}
