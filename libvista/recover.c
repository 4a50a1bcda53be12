/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recover.c -- crash recovery: roll back what unfinished transactions did
 *
 * "Each time a Vista segment is mapped, Vista inspects the segment and
 * determines if it contains uncommitted transactions ... Vista rolls back
 * the changes from its uncommitted transactions in the same manner as
 * user-initiated aborts" (thesis 3.4).  Here the log is shared by the
 * segments of an instance, so recovery has two halves:
 *
 *   vista_init  scans every lane (vista__recover_scan): the valid records
 *               of the lane's generation form a prefix (L1, L2); a lane
 *               with records holds an unfinished transaction, "pending"
 *               until every segment it touched has been rolled back.
 *   vista_map   rolls back what pending lanes did to the segment being
 *               mapped (vista__recover_segment), newest record first,
 *               makes it durable, then records in the lane header that
 *               this segment is done; when the last one is, the lane is
 *               truncated and free again.
 *
 * Partial recovery.  A transaction touched A and B; a later run maps only
 * A, rolls it back, and commits new work to A.  A's old before-images must
 * never be applied again, and B's still must: hence the durable done mask
 * (done_gen, done[] in the lane header).  A lane stays pending (no thread
 * may use it) until B is mapped.
 *
 * Invariants
 *   C1. A scan changes nothing when it finds corruption: a complete record
 *       whose check fails (L4 in log.c), a record of the lane's generation
 *       after one that is not (impossible by L2), a broken prev chain, a
 *       record naming an empty segment-table entry, or a lane header whose
 *       checks fail fails vista_init with VISTA_ECORRUPT before any write.
 *   C2. Torn and corrupt (L4 in log.c): a record without its tag was
 *       never written and ends the run; a record with a flipped tag is
 *       corrupt; a record with its tag whose check fails is torn -- the
 *       newest of its lane, written back with no fence completed after
 *       it, so nothing it describes was stored yet (L2) -- if no record
 *       of its generation lies further on and no commit record of its
 *       generation is there, and corrupt otherwise (byte domain: always
 *       corrupt, the tag was stored last in program order).  So in the
 *       cacheline and page domains a flipped bit in the body of a lane's
 *       newest record reads as a torn record: the one fence a record
 *       costs (format 5) buys that blind spot.  A torn first record
 *       leaves its generation's tag on media: the floor moves past it.
 *   C3. Rolling back is idempotent: it copies the same before-images and
 *       undoes the same heap operations whatever was done before, so a
 *       crash during recovery is recovered by running it again.
 *   C4. A segment's rollback is durable before the lane header says the
 *       segment is done; done_check is durable before the words it covers
 *       change (log_layout.h), so a torn update reads as the update done,
 *       and the lane is truncated only when every segment is done.
 *   C5. vista_map validates everything the rollback of a segment will use
 *       before it stores anything: every descriptor lies in the arena or
 *       the heap header, every heap object fits the heap, every page map
 *       entry verifies, and the heap header the rollback leaves verifies.
 *   C6. A lane whose commit record is valid for its generation (log_layout.h)
 *       and whose records name only that record's segment committed iff
 *       the bytes its RANGES records describe match the record's checksum
 *       (tx.c, commit_lazy: the record and the data are made durable by
 *       one fence, and nothing stores to those bytes before the truncation
 *       is durable, L6 in log.c, or the next record of the lane is, L7).
 *       Such a lane is truncated, not rolled back; any other lane with
 *       records is rolled back.
 *   C7. The generation recovered.  Let B be the generation of the newest
 *       commit record at or above the floor (hdr->gen; a record's slot is
 *       gen & 1), else the floor.  Every transaction of the lane up to B
 *       ended: a commit record is written only for the running
 *       generation, and the floor only moves past ended ones.  If records
 *       of B + 1 carry their tag, they are the transaction in flight:
 *       they were stored after B's commit fence and before B + 1 stored
 *       anything (L2), so B is final and B + 1 is rolled back (a tag
 *       alone, its record torn, says as much).
 *       Else the records of B, if any, are the lane's transaction, judged
 *       by C6 when B's commit record exists; else the lane is idle at
 *       B + 1 (after a commit record) or at the floor.  A commit writes
 *       the slot of gen & 1, never the newest record's (gen - 1): torn,
 *       it leaves B = gen - 1 and the records of gen rolled back.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rio_int.h"
#include "vista_int.h"

struct lane_scan {
	char *start;   /* the first valid record (prev 0) */
	char *end;     /* first byte after the valid records */
	uint32_t last; /* stride of the newest valid record */
	uint32_t nrec;
	uint64_t touched[VISTA__SEGWORDS];
	/* The lane header as read, with a torn update completed. */
	uint64_t floor, done_gen, done[VISTA__SEGWORDS];
	bool fix_gen, fix_done; /* a torn update to write out */
	/* The newest valid commit record (C7), if any: its generation. */
	uint64_t cgen;
	bool has_c;
	uint64_t gen; /* the generation recovered (C7) */
};

static inline size_t
stride_of(const struct vista_rec *r)
{
	return (r->len + VISTA_REC_ALIGN - 1) & ~(size_t)(VISTA_REC_ALIGN - 1);
}

/* done[] with bit i set: does it match `check` for done_gen g? */
static bool
done_plus(uint64_t seed, uint64_t g, const uint64_t *done, unsigned i,
	uint64_t check, uint64_t out[VISTA__SEGWORDS])
{
	memcpy(out, done, sizeof(uint64_t) * VISTA__SEGWORDS);
	out[i / 64] |= 1ull << (i % 64);
	return vista_lane_done_check(seed, g, out) == check;
}

/* A commit record that verifies (log_layout.h); slot: its index. */
static bool
slot_valid(const struct vista_lane *l, const struct vista_commit_slot *c,
	unsigned slot, uint64_t floor)
{
#ifdef VISTA_BROKEN_ONE_SLOT
	(void)slot;
#else
	if ((c->gen & 1) != slot)
		return false;
#endif
	return c->gen >= floor && c->gen != 0 &&
		c->check == vista_lane_commit_check(l->seed, c->gen, c->csum,
			c->seg) &&
		rio__all_zero(c->reserved, sizeof(c->reserved)) &&
		c->seg < VISTA_MAX_SEGMENTS;
}

/* C7: the newest commit record of the lane at or above its floor. */
static void
newest_commit(const struct vista_lane *l, struct lane_scan *s)
{
	struct vista_lane_commit cl;

	memcpy(&cl, l->cl, sizeof(cl));
	s->has_c = false;
	for (unsigned i = 0; i < 2; i++)
		if (slot_valid(l, &cl.slot[i], i, s->floor) &&
		    (!s->has_c || cl.slot[i].gen > s->cgen)) {
			s->cgen = cl.slot[i].gen;
			s->has_c = true;
		}
}

/*
 * L7 (log.c): with one lane the floor jumps past lazy commits, to the
 * generation of a commit record plus 1 or 2 (or the record's own), and its
 * check is durable before gen changes.  A check of such a generation above
 * gen is that store cut short: completed.
 */
static bool
floor_jump(const struct vista_lane *l, const struct vista_lane_hdr *h,
	uint64_t *floor)
{
	struct vista_lane_commit cl;

	memcpy(&cl, l->cl, sizeof(cl));
	for (unsigned i = 0; i < 2; i++) {
		if (!slot_valid(l, &cl.slot[i], i, 0))
			continue;
		for (uint64_t d = 0; d <= 2; d++) {
			uint64_t g = cl.slot[i].gen + d;
			if (g > h->gen &&
			    h->gen_check == vista_lane_gen_check(l->seed, g)) {
				*floor = g;
				return true;
			}
		}
	}
	return false;
}

/*
 * Read the lane header through its checks (log_layout.h): a matching
 * check, or the one update that can be torn, which is then completed (in
 * s, written out only once every lane passed, C1).
 */
static int
read_lane_hdr(vista *v, struct vista_lane *l, struct lane_scan *s)
{
	const char *path = rio_pool_path(v->log);
	struct vista_lane_hdr h;
	uint64_t d[VISTA__SEGWORDS];

	memcpy(&h, l->hdr, sizeof(h));
	if (h.gen_check == vista_lane_gen_check(l->seed, h.gen)) {
		s->floor = h.gen;
	} else if (h.gen_check == vista_lane_gen_check(l->seed, h.gen + 1)) {
		s->floor = h.gen + 1; /* a truncation cut short: its check */
		s->fix_gen = true;
	} else if (h.gen_check == vista_lane_gen_check(l->seed, h.gen - 1)) {
		s->floor = h.gen - 1; /* the same, its gen: not committed */
		s->fix_gen = true;
	} else if (floor_jump(l, &h, &s->floor)) {
		s->fix_gen = true; /* a floor stored past lazy commits (L7) */
	} else {
		return vista__err(VISTA_ECORRUPT,
			"log %s: lane %u: generation %llu does not match its "
			"check: the lane header is corrupt", path, l->idx,
			(unsigned long long)h.gen);
	}
	if (s->floor == 0)
		return vista__err(VISTA_ECORRUPT,
			"log %s: lane %u has generation 0", path, l->idx);
	newest_commit(l, s);
	s->done_gen = h.done_gen;
	memcpy(s->done, h.done, sizeof(s->done));
	if (h.done_check == vista_lane_done_check(l->seed, h.done_gen, h.done))
		return 0;
	/* A mark_done() stopped half way: one more segment done in the same
	 * generation, or the first one of a new generation. */
	memset(d, 0, sizeof(d));
	for (unsigned i = 0; i < VISTA_MAX_SEGMENTS; i++) {
		if (!vista__bit_test(h.done, i) &&
		    done_plus(l->seed, h.done_gen, h.done, i, h.done_check, d)) {
			memcpy(s->done, d, sizeof(d));
			s->fix_done = true;
			return 0;
		}
		/* The generation mark_done() recorded: the floor, or one
		 * the commit line names (C7). */
		uint64_t gens[4] = { h.gen, s->floor, s->cgen, s->cgen + 1 };
		for (int k = 0; k < (s->has_c ? 4 : 2); k++) {
			uint64_t g = gens[k], z[VISTA__SEGWORDS] = { 0 };
			if (done_plus(l->seed, g, z, i, h.done_check, d)) {
				s->done_gen = g;
				memcpy(s->done, d, sizeof(d));
				s->fix_done = true;
				return 0;
			}
		}
	}
	return vista__err(VISTA_ECORRUPT,
		"log %s: lane %u: the recovered-segment mask does not match "
		"its check: the lane header is corrupt", path, l->idx);
}

/* Write out what read_lane_hdr() completed (C4 order: check first). */
static void
fix_lane_hdr(struct vista_lane *l, const struct lane_scan *s)
{
	struct vista_lane_hdr *h = l->hdr;

	/* relaxed: 8-byte stores that must not tear; the order that matters
	 * is durability's, given by the rio_persist() after them (this
	 * runs in vista_init(), before any thread has a lane). */
	if (s->fix_gen) {
		__atomic_store_n(&h->gen_check,
			vista_lane_gen_check(l->seed, s->floor),
			__ATOMIC_RELAXED);
		/* A floor moved past a torn record (scan_lane) may jump by
		 * two: as in vista__floor_store(), its check is durable
		 * before gen changes, so a crash between the two leaves a
		 * check read_lane_hdr() completes. */
		if (s->floor > __atomic_load_n(&h->gen, __ATOMIC_RELAXED) + 1)
			rio_persist(l->v->log, h, sizeof(*h));
		__atomic_store_n(&h->gen, s->floor, __ATOMIC_RELAXED);
	}
	if (s->fix_done) {
		for (unsigned w = 0; w < VISTA__SEGWORDS; w++)
			__atomic_store_n(&h->done[w], s->done[w],
				__ATOMIC_RELAXED);
		__atomic_store_n(&h->done_gen, s->done_gen, __ATOMIC_RELAXED);
	}
	if (s->fix_gen || s->fix_done)
		/* Completed before anything reads or changes the lane. */
		rio_persist(l->v->log, h, sizeof(*h));
}

/* The first position holding a record of gen (anywhere in the area: L6
 * in log.c), or NULL. */
static char *
first_rec(const struct vista_lane *l, uint64_t gen)
{
	const char *why;

	for (char *pos = l->rec0; pos + sizeof(struct vista_rec) <= l->end;
		pos += VISTA_REC_ALIGN)
		if (vista__log_check(l->seed, gen, l->rec0, l->end, pos,
			    &why) != VISTA__REC_END)
			return pos;
	return NULL;
}

static int
scan_lane(vista *v, struct vista_lane *l, struct lane_scan *s)
{
	const char *path = rio_pool_path(v->log);
	const char *why;
	char *pos = l->rec0;
	uint64_t gen;
	int rc, st;

	memset(s, 0, sizeof(*s));
	rc = read_lane_hdr(v, l, s);
	if (rc)
		return rc;
	/* C7: the lane's transactions up to B ended (B: the newest commit
	 * record's generation, else the floor).  Tagged records of B + 1
	 * are the transaction in flight; else the records of B, if any, are
	 * judged by B's commit record (C6); else the lane is idle at the
	 * generation after B's commit (or at the floor). */
	gen = s->has_c ? s->cgen : s->floor;
	pos = first_rec(l, gen + 1);
	if (pos != NULL) {
		gen++;
		s->has_c = false;
	} else {
		pos = first_rec(l, gen);
	}
	s->gen = gen;
	if (pos == NULL) {
		/* None: the lane holds no record of gen anywhere (C1 holds,
		 * with nothing to check further). */
		if (s->has_c)
			s->gen = gen + 1;
		s->has_c = false;
		s->start = s->end = l->rec0;
		return 0;
	}
	s->start = pos;
	while ((st = vista__log_check(l->seed, gen, l->rec0, l->end, pos,
			&why)) == VISTA__REC_OK) {
		const struct vista_rec *r = (const void *)pos;

		if (r->prev != s->last)
			return vista__err(VISTA_ECORRUPT,
				"log %s: lane %u: record at %zu does not chain "
				"to the previous one", path, l->idx,
				(size_t)(pos - l->rec0));
		for (unsigned i = 0; i < r->count; i++) {
			unsigned idx = r->type == VISTA_REC_RANGES ?
				((const struct vista_rdesc *)(r + 1))[i].seg :
				((const struct vista_robj *)(r + 1))[i].seg;
			if (idx >= VISTA_MAX_SEGMENTS ||
			    !vista__segent_valid(v, idx))
				return vista__err(VISTA_ECORRUPT,
					"log %s: lane %u: record at %zu names "
					"segment table entry %u, which is empty",
					path, l->idx, (size_t)(pos - l->rec0),
					idx);
			vista__bit_set(s->touched, idx);
		}
		s->last = (uint32_t)stride_of(r);
		s->nrec++;
		pos += s->last;
	}
	if (st == VISTA__REC_BAD)
		return vista__err(VISTA_ECORRUPT,
			"log %s: lane %u: the record at offset %zu is complete "
			"but %s: the log is corrupt", path, l->idx,
			(size_t)(pos - l->rec0), why);
	/* C2: a record with its tag that fails its check is torn only if
	 * it is the newest thing of its transaction: a commit record of
	 * the generation was written after every record was durable.  In
	 * the byte domain stores persist in program order, the tag last:
	 * such a record is corrupt wherever it is. */
	if (st == VISTA__REC_TORN && v->sealed)
		return vista__err(VISTA_ECORRUPT,
			"log %s: lane %u: the record at offset %zu is complete "
			"but %s (byte domain: its tag was stored last): the log "
			"is corrupt", path, l->idx, (size_t)(pos - l->rec0),
			why);
	if (st == VISTA__REC_TORN && s->has_c)
		return vista__err(VISTA_ECORRUPT,
			"log %s: lane %u: the record at offset %zu has its tag "
			"but %s, and the commit record of its transaction is "
			"there: the log is corrupt", path, l->idx,
			(size_t)(pos - l->rec0), why);
	s->end = pos;
	/* C1/C2: the first record without its tag must be the last thing
	 * the lane holds of this generation (nothing before the first one
	 * holds any, by the search above). */
	for (char *q = pos + VISTA_REC_ALIGN;
		q + sizeof(struct vista_rec) <= l->end; q += VISTA_REC_ALIGN)
		if (vista__log_check(l->seed, gen, l->rec0, l->end, q, &why) !=
		    VISTA__REC_END)
			return vista__err(VISTA_ECORRUPT,
				"log %s: lane %u: the record at offset %zu is "
				"missing but a record of the same transaction "
				"at %zu is there: the log is corrupt", path,
				l->idx, (size_t)(pos - l->rec0),
				(size_t)(q - l->rec0));
	if (st == VISTA__REC_TORN && s->nrec == 0) {
		/* C2: the transaction's first record is torn, so it stored
		 * nothing (L2); but its tag is on media, so gen must not be
		 * used again: the floor moves past it (written out with
		 * the header fixes, fix_lane_hdr). */
		s->gen = gen + 1;
		s->floor = gen + 1;
		s->fix_gen = true;
		s->start = s->end = l->rec0;
	}
	return 0;
}

/*
 * C6: a commit record valid for the lane's generation, of a transaction
 * whose records name its one segment: the transaction committed if that
 * segment's bytes match the record's checksum (vista__recover_segment).
 */
static void
commit_seen(struct vista_lane *l, const struct lane_scan *s)
{
	struct vista_lane_commit cl;
	const struct vista_commit_slot *c = NULL;
	unsigned n = 0;

	l->commit_seen = false;
	if (!s->has_c || s->cgen != l->gen)
		return;
	memcpy(&cl, l->cl, sizeof(cl));
	for (unsigned i = 0; i < 2; i++)
		if (cl.slot[i].gen == l->gen &&
		    slot_valid(l, &cl.slot[i], i, s->floor))
			c = &cl.slot[i];
	if (c == NULL)
		return;
	for (unsigned w = 0; w < VISTA__SEGWORDS; w++)
		n += (unsigned)__builtin_popcountll(s->touched[w]);
	if (n != 1 || !vista__bit_test(s->touched, c->seg))
		return;
	l->commit_seen = true;
	l->commit_csum = c->csum;
	l->commit_seg = c->seg;
}

int
vista__recover_scan(vista *v)
{
	struct lane_scan *s = calloc(v->nlanes, sizeof(*s));
	int rc = 0;

	if (s == NULL)
		return vista__err(-ENOMEM, "out of memory");
	for (unsigned i = 0; i < v->nlanes && rc == 0; i++)
		rc = scan_lane(v, &v->lanes[i], &s[i]);
	/* C1: every lane passed; only now complete torn header updates. */
	for (unsigned i = 0; i < v->nlanes && rc == 0; i++) {
		v->lanes[i].gen = s[i].gen;
		fix_lane_hdr(&v->lanes[i], &s[i]);
	}
	for (unsigned i = 0; i < v->nlanes && rc == 0; i++) {
		struct vista_lane *l = &v->lanes[i];
		bool any = false;

		if (s[i].nrec == 0)
			continue;
		memcpy(l->pend_segs, s[i].touched, sizeof(l->pend_segs));
#ifndef VISTA_BROKEN_PARTIAL_REDO
		if (s[i].done_gen == l->gen)
			for (unsigned w = 0; w < VISTA__SEGWORDS; w++)
				l->pend_segs[w] &= ~s[i].done[w];
#endif
		for (unsigned w = 0; w < VISTA__SEGWORDS; w++)
			any |= l->pend_segs[w] != 0;
		l->start = s[i].start;
		l->cur = s[i].end;
		l->last = s[i].last;
		l->nrec = s[i].nrec;
		commit_seen(l, &s[i]);
		if (any) {
			l->pending = true;
			continue;
		}
		/* Every segment was rolled back before the crash; only the
		 * truncation was missing. */
		vista__log_truncate(l);
		vista__log_reset(l);
		VISTA__STAT_ADD(l, recovered_tx, 1);
	}
	/* The scan read every lane to its end; give back the pages past what
	 * the lanes hold now (their contents stay in the pool), so that the
	 * log costs memory in proportion to the transactions that use it. */
	for (unsigned i = 0; i < v->nlanes && rc == 0; i++) {
		struct vista_lane *l = &v->lanes[i];
		uintptr_t from = ((uintptr_t)l->cur + VISTA_PAGE - 1) &
			~(uintptr_t)(VISTA_PAGE - 1);
		if (from < (uintptr_t)l->end)
			(void)madvise((void *)from, (uintptr_t)l->end - from,
				MADV_DONTNEED);
	}
	free(s);
	return rc;
}

void
vista__pending_refs(const vista *v, uint64_t out[VISTA__SEGWORDS])
{
	memset(out, 0, sizeof(uint64_t) * VISTA__SEGWORDS);
	for (unsigned i = 0; i < v->nlanes; i++)
		if (v->lanes[i].pending)
			for (unsigned w = 0; w < VISTA__SEGWORDS; w++)
				out[w] |= v->lanes[i].pend_segs[w];
}

/* Every descriptor and object of the lane that names seg must fit it. */
static int
check_lane_for(const struct vista_lane *l, const struct vista_segment *seg)
{
	const struct vista_seg_hdr *h = seg->hdr;

	for (const char *pos = l->start; pos < l->cur;) {
		const struct vista_rec *r = (const void *)pos;
		for (unsigned i = 0; i < r->count; i++) {
			bool ok = true;
			if (r->type == VISTA_REC_RANGES) {
				const struct vista_rdesc *d =
					&((const struct vista_rdesc *)(r + 1))[i];
				if (d->seg != seg->idx)
					continue;
				/* Only the heap header (the root) and the
				 * arena are ever logged physically (C5). */
				ok = (d->off >= h->user_off &&
					d->off <= h->user_off + h->user_size &&
					d->len <= h->user_off + h->user_size -
						d->off) ||
				     (d->off >= h->heap_off &&
					d->off < h->heap_off + VISTA_HEAP_HDR_SIZE &&
					d->len <= h->heap_off +
						VISTA_HEAP_HDR_SIZE - d->off);
			} else {
				const struct vista_robj *o =
					&((const struct vista_robj *)(r + 1))[i];
				if (o->seg != seg->idx)
					continue;
				ok = vista__heap_obj_ok(seg, o);
			}
			if (!ok)
				return vista__err(VISTA_ECORRUPT,
					"log lane %u: record at %zu describes "
					"bytes outside segment %s",
					l->idx, (size_t)(pos - l->rec0),
					rio_pool_path(seg->pool));
		}
		pos += stride_of(r);
	}
	return 0;
}

/* C4: record durably that seg's part of the lane's transaction is undone. */
static void
mark_done(struct vista_lane *l, unsigned idx)
{
	struct vista_lane_hdr *h = l->hdr;
	bool any = false;

	/* C4: only a segment the lane's transaction still waits for, on a
	 * lane no transaction of this process uses yet. */
	VISTA_ASSERT(l->pending && vista__bit_test(l->pend_segs, idx) &&
		l->state == VISTA__TX_IDLE, "C4");
	l->pend_segs[idx / 64] &= ~(1ull << (idx % 64));
	for (unsigned w = 0; w < VISTA__SEGWORDS; w++)
		any |= l->pend_segs[w] != 0;
	if (!any) {
		/* The last segment: the transaction is gone everywhere. */
		vista__log_truncate(l);
		vista__log_reset(l);
		l->pending = false;
		VISTA__STAT_ADD(l, recovered_tx, 1);
		return;
	}
	if (h->done_gen != l->gen) {
		/* done[] of an older generation: start afresh, with this
		 * segment alone.  The check first: it is the commit point
		 * (C4), then the words it covers, in one line. */
		uint64_t d[VISTA__SEGWORDS] = { 0 };
		d[idx / 64] = 1ull << (idx % 64);
		/* relaxed, here and below: 8-byte stores that must not
		 * tear; their order is given by the flushes and drains
		 * between them (C4). */
		__atomic_store_n(&h->done_check,
			vista_lane_done_check(l->seed, l->gen, d),
			__ATOMIC_RELAXED);
		/* The check is durable before the words change, so that a
		 * crash among their stores reads as this update (C4). */
#ifndef VISTA_BROKEN_DONE_ORDER
		vista__flush(l, l->v->log, h, sizeof(*h));
		vista__drain(l);
#endif
		for (unsigned w = 0; w < VISTA__SEGWORDS; w++)
			__atomic_store_n(&h->done[w], d[w], __ATOMIC_RELAXED);
		__atomic_store_n(&h->done_gen, l->gen, __ATOMIC_RELAXED);
	} else {
		uint64_t d[VISTA__SEGWORDS];
		memcpy(d, h->done, sizeof(d));
		d[idx / 64] |= 1ull << (idx % 64);
		/* relaxed: as in the branch above. */
		__atomic_store_n(&h->done_check,
			vista_lane_done_check(l->seed, l->gen, d),
			__ATOMIC_RELAXED);
		/* As above: the check first. */
		vista__flush(l, l->v->log, h, sizeof(*h));
		vista__drain(l);
		__atomic_store_n(&h->done[idx / 64], d[idx / 64],
			__ATOMIC_RELAXED);
	}
	/* Before the segment can be used (and changed) again. */
	vista__flush(l, l->v->log, h, sizeof(*h));
	vista__drain(l);
}

/*
 * What the rollback will leave in the heap header: the images that cover
 * it applied in the order vista__undo() applies them (C5).
 */
static void
hh_after_undo(const struct vista_lane *l, const struct vista_segment *seg,
	unsigned char hh[VISTA_HEAP_HDR_SIZE])
{
	uint64_t lo = seg->hdr->heap_off, hi = lo + VISTA_HEAP_HDR_SIZE;

	if (l->last == 0)
		return;
	for (const char *pos = l->cur - l->last;;) {
		const struct vista_rec *r = (const void *)pos;
		if (r->type == VISTA_REC_RANGES) {
			const struct vista_rdesc *d = (const void *)(r + 1);
			const char *data = pos + r->len;
			/* New ranges, last, have no image (NR1). */
			for (int i = (int)vista_rec_nold(r) - 1; i >= 0; i--) {
				uint64_t a, b;
				data -= (d[i].len + 7) & ~7u;
				if (d[i].seg != seg->idx)
					continue;
				a = d[i].off > lo ? d[i].off : lo;
				b = d[i].off + d[i].len < hi ?
					d[i].off + d[i].len : hi;
				if (a < b)
					memcpy(hh + (a - lo), data + (a - d[i].off),
						b - a);
			}
		}
		if (r->prev == 0)
			break;
		pos -= r->prev;
	}
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/*
 * Append to *keys (page * 256 + block) the small blocks of seg that the
 * lane's ALLOC and FREE records name.  0 or -ENOMEM.
 */
static int
named_blocks(const struct vista_lane *l, const struct vista_segment *seg,
	uint64_t **keys, size_t *n, size_t *cap)
{
	for (const char *pos = l->start; pos < l->cur; pos += stride_of(
		     (const struct vista_rec *)(const void *)pos)) {
		const struct vista_rec *r = (const void *)pos;
		const struct vista_robj *o = (const void *)(r + 1);

		if (r->type != VISTA_REC_ALLOC && r->type != VISTA_REC_FREE)
			continue;
		for (unsigned i = 0; i < r->count; i++) {
			if (o[i].seg != seg->idx || o[i].kind != VISTA_OBJ_SMALL)
				continue;
			if (*n == *cap) {
				size_t c = *cap ? 2 * *cap : 64;
				uint64_t *k = realloc(*keys, c * sizeof(*k));
				if (k == NULL)
					return -ENOMEM;
				*keys = k;
				*cap = c;
			}
			(*keys)[(*n)++] = (uint64_t)o[i].page * 256 + o[i].n;
		}
	}
	return 0;
}

int
vista__recover_segment(vista *v, struct vista_segment *seg)
{
	unsigned char hh[VISTA_HEAP_HDR_SIZE];
	uint64_t *named = NULL;
	size_t nnamed = 0, cap = 0;
	int rc = 0;

	memcpy(hh, seg->base + seg->hdr->heap_off, sizeof(hh));
	for (unsigned i = 0; i < v->nlanes && rc == 0; i++)
		if (v->lanes[i].pending &&
		    vista__bit_test(v->lanes[i].pend_segs, seg->idx)) {
			struct vista_lane *l = &v->lanes[i];
			rc = check_lane_for(l, seg);
			if (rc)
				break;
			/* C6: every descriptor fits the segment (C5), so its
			 * bytes can be read. */
			l->keep = l->commit_seen && l->commit_seg == seg->idx;
#ifndef VISTA_BROKEN_LAZY_COMMIT_EARLY
			if (l->keep) {
				bool other;
				l->keep = vista__after_csum(l, seg->base,
					seg->idx, &other) == l->commit_csum &&
					!other;
			}
#endif
			if (!l->keep)
				hh_after_undo(l, seg, hh);
			if (rc == 0 && named_blocks(&v->lanes[i], seg, &named,
					       &nnamed, &cap) != 0)
				rc = vista__err(-ENOMEM, "out of memory for "
					"the blocks the log names");
		}
	/* C5: the heap the rollback starts from and the header it leaves
	 * verify, before the rollback stores anything. */
	if (rc == 0) {
		qsort(named, nnamed, sizeof(*named), cmp_u64);
		rc = vista__heap_precheck(seg, hh, named, nnamed);
	}
	free(named);
	if (rc)
		return rc;
	for (unsigned i = 0; i < v->nlanes; i++) {
		struct vista_lane *l = &v->lanes[i];

		if (!l->pending || !vista__bit_test(l->pend_segs, seg->idx))
			continue;
		if (l->keep) {
			/* C6: committed; only its truncation was missing. */
			l->keep = l->commit_seen = false;
			mark_done(l, seg->idx);
			continue;
		}
		vista__undo(v, l, seg, true);
		/* C4: the segment is rolled back, durably, before the lane
		 * says so. */
		vista__drain(l);
		mark_done(l, seg->idx);
	}
	return 0;
}
