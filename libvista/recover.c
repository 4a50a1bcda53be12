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
 *   C1. A scan changes nothing when it finds corruption: a record that
 *       does not verify followed by one that does (impossible by L2), a
 *       broken prev chain, or a record naming an empty segment-table entry
 *       fails vista_init with VISTA_ECORRUPT before any write.
 *   C2. A torn record is ignored only as the newest record of its lane:
 *       the program stores to a range only after its record is durable,
 *       so nothing it describes was changed.
 *   C3. Rolling back is idempotent: it copies the same before-images and
 *       undoes the same heap operations whatever was done before, so a
 *       crash during recovery is recovered by running it again.
 *   C4. A segment's rollback is durable before the lane header says the
 *       segment is done, and done[] is durable before done_gen makes it
 *       count; the lane is truncated only when every segment is done.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "vista_int.h"

struct lane_scan {
	char *end;     /* first byte after the valid records */
	uint32_t last; /* stride of the newest valid record */
	uint32_t nrec;
	uint64_t touched[VISTA__SEGWORDS];
};

static inline size_t
stride_of(const struct vista_rec *r)
{
	return (r->len + VISTA_REC_ALIGN - 1) & ~(size_t)(VISTA_REC_ALIGN - 1);
}

static int
scan_lane(vista *v, struct vista_lane *l, struct lane_scan *s)
{
	const char *path = rio_pool_path(v->log);
	uint64_t gen = __atomic_load_n(&l->hdr->gen, __ATOMIC_RELAXED);
	char *pos = l->rec0;

	memset(s, 0, sizeof(*s));
	if (gen == 0)
		return vista__err(VISTA_ECORRUPT,
			"log %s: lane %u has generation 0", path, l->idx);
	while (vista__log_valid(l->seed, gen, l->rec0, l->end, pos)) {
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
	s->end = pos;
	/* C1/C2: the first record that does not verify must be the last
	 * thing the lane holds of this generation. */
	for (char *q = pos + VISTA_REC_ALIGN; q + sizeof(struct vista_rec) <= l->end;
		q += VISTA_REC_ALIGN)
		if (vista__log_valid(l->seed, gen, l->rec0, l->end, q))
			return vista__err(VISTA_ECORRUPT,
				"log %s: lane %u: the record at offset %zu is "
				"invalid but a record of the same transaction "
				"at %zu is valid: the log is corrupt", path,
				l->idx, (size_t)(pos - l->rec0),
				(size_t)(q - l->rec0));
	return 0;
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
	for (unsigned i = 0; i < v->nlanes && rc == 0; i++) {
		struct vista_lane *l = &v->lanes[i];
		bool any = false;

		if (s[i].nrec == 0)
			continue;
		memcpy(l->pend_segs, s[i].touched, sizeof(l->pend_segs));
#ifndef VISTA_BROKEN_PARTIAL_REDO
		if (l->hdr->done_gen == l->gen)
			for (unsigned w = 0; w < VISTA__SEGWORDS; w++)
				l->pend_segs[w] &= ~l->hdr->done[w];
#endif
		for (unsigned w = 0; w < VISTA__SEGWORDS; w++)
			any |= l->pend_segs[w] != 0;
		l->cur = s[i].end;
		l->last = s[i].last;
		l->nrec = s[i].nrec;
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

	for (const char *pos = l->rec0; pos < l->cur;) {
		const struct vista_rec *r = (const void *)pos;
		for (unsigned i = 0; i < r->count; i++) {
			bool ok = true;
			if (r->type == VISTA_REC_RANGES) {
				const struct vista_rdesc *d =
					&((const struct vista_rdesc *)(r + 1))[i];
				if (d->seg != seg->idx)
					continue;
				/* Only metadata and arena are ever logged,
				 * never the headers. */
				ok = d->off >= h->heap_off &&
					d->off <= h->map_size &&
					d->len <= h->map_size - d->off;
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
		/* done[] of an older generation: start it afresh, durably,
		 * before done_gen says it describes this transaction. */
		for (unsigned w = 0; w < VISTA__SEGWORDS; w++)
			__atomic_store_n(&h->done[w],
				w == idx / 64 ? 1ull << (idx % 64) : 0,
				__ATOMIC_RELAXED);
#ifndef VISTA_BROKEN_DONE_ORDER
		vista__flush(l, l->v->log, h->done, sizeof(h->done));
		vista__drain(l);
#endif
		__atomic_store_n(&h->done_gen, l->gen, __ATOMIC_RELAXED);
	} else {
		__atomic_store_n(&h->done[idx / 64],
			h->done[idx / 64] | (1ull << (idx % 64)),
			__ATOMIC_RELAXED);
	}
	/* Before the segment can be used (and changed) again. */
	vista__flush(l, l->v->log, h, sizeof(*h));
	vista__drain(l);
}

int
vista__recover_segment(vista *v, struct vista_segment *seg)
{
	int rc = 0;

	for (unsigned i = 0; i < v->nlanes && rc == 0; i++)
		if (v->lanes[i].pending &&
		    vista__bit_test(v->lanes[i].pend_segs, seg->idx))
			rc = check_lane_for(&v->lanes[i], seg);
	if (rc)
		return rc;
	for (unsigned i = 0; i < v->nlanes; i++) {
		struct vista_lane *l = &v->lanes[i];

		if (!l->pending || !vista__bit_test(l->pend_segs, seg->idx))
			continue;
		vista__undo(v, l, seg, true);
		/* C4: the segment is rolled back, durably, before the lane
		 * says so. */
		vista__drain(l);
		mark_done(l, seg->idx);
	}
	return 0;
}
