/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * blog.c -- the backup's redo log: durable on arrival, applied in batches
 *
 * The backup makes a verified REDO record durable by appending it to a log
 * in its own rio pool (blog_layout.h) -- one write-back of the record, one
 * fence per batch of records, no Vista transaction -- and acknowledges it.
 * It applies the logged records to its data segment later, in batches,
 * and then moves the log's checkpoint past them (truncation).  Redo is
 * idempotent: a record applied again after a crash stores the same bytes,
 * so a crash anywhere in the apply only means applying again.
 *
 * Persist order (the crash outcome after each step):
 *   Append (vr__blog_append, vr__blog_fence; backup.c steps 2-3):
 *     L1. each record of a batch: its entry (header + the record as
 *         received) is written at the log's end and flushed; the end lives
 *         in DRAM only (recovery finds it by chaining entries);
 *     L1f. one fence for the batch: its entries are durable.  A crash
 *         before leaves any subset of them, each torn one ending the log
 *         at its place; none was acknowledged yet.
 *     (backup.c: then the ACK of the batch's last record.)
 *   Apply (vr__blog_apply, lazily: an eighth of the log waits, the
 *   primary's heartbeat, the log is full):
 *     A1. every logged record not applied: its pieces are copied into the
 *         data segment and flushed;
 *     A2. fence: the applied bytes are durable.  A crash before leaves the
 *         segment with any part of them, and the checkpoint still before
 *         them: recovery applies them again (idempotent);
 *     A3. the inactive checkpoint slot gets {gen + 1, stream, seq, pos,
 *         off = end}, flushed and fenced: the records are applied for good
 *         and their space may be reused.  A torn slot fails its check and
 *         the older slot is current: A1-A2 are redone.
 *   Recovery (vr__blog_recover: vr_open, vr_follow's start and end,
 *   vr_promote before the new epoch):
 *     R1. from the current slot, every entry that verifies and chains is
 *         applied (A1);
 *     R2. fence: the replayed bytes are durable;
 *     R3. the node state takes the last record's seq and position, in a
 *         Vista transaction (so a rejoin resumes after it);
 *     R4. a new slot at the state's position, the log empty (A3).
 *     A crash in R1-R2 replays again; between R3 and R4 the state is
 *     ahead of the slot, so the log's entries are all applied and it is
 *     discarded (L4).
 *
 * Invariants
 *   L1. A record is acknowledged only after its entry's fence (L1f).
 *   L2. Space before a slot's `off` is reused only after that slot is
 *       durable (A3's fence), so the entries the older slot names are
 *       intact until the newer one can no longer be torn.
 *   L3. A slot's `off` passes a record only after the record's bytes are
 *       durable in the segment (A2 before A3).
 *   L4. The log counts only while it continues the node state: the
 *       slot's stream is the state's, its seq is not behind the state's
 *       applied seq, and the node is a BACKUP that is not copying.  Any
 *       other log is stale (everything in it is applied, or belongs to a
 *       stream the state has left) and is discarded.
 *
 * Seam for crash tests: VR_CRASH_AT="NAME:K" (read once) kills the process
 * with SIGKILL at the K-th pass of crash point NAME ("apply": between the
 * two halves of an apply; "ack": right after an ACK is sent).
 *
 * Deliberately broken build: VR_BROKEN_TRUNCATE_EARLY writes the
 * checkpoint (A3) before applying the records (A1-A2), breaking L3.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vr_int.h"

/* ---- the crash seam ---- */

void
vr__crash_point(const char *name)
{
	static char at[32];
	static long k = -1, count;

	if (k < 0) {
		const char *e = getenv("VR_CRASH_AT");
		const char *c = e ? strchr(e, ':') : NULL;
		k = 0;
		if (c != NULL && (size_t)(c - e) < sizeof(at)) {
			memcpy(at, e, (size_t)(c - e));
			at[c - e] = '\0';
			k = atol(c + 1);
		}
	}
	if (k > 0 && strcmp(name, at) == 0 && ++count == k)
		(void)raise(SIGKILL);
}

/* ---- the pool ---- */

static uint64_t
slot_check(const struct vr_blog_slot *s)
{
	return rio_checksum(s, offsetof(struct vr_blog_slot, check),
		VR_BLOG_SEED);
}

static uint64_t
ent_check(const struct vr_blog_ent *e, const struct vr_rec_hdr *h)
{
	return rio_checksum(e, offsetof(struct vr_blog_ent, check),
		VR_BLOG_ENT_SEED ^ h->check);
}

int
vr__blog_open(vr_node *n, bool create)
{
	struct vr_blog *b = &n->blog;
	struct rio_pool_opts po = { .layout = "vista.replica.redo" };
	struct vr_blog_hdr *hd;
	const char *path = n->blog_path;
	int rc;

	if (b->pool != NULL)
		return 0;
	rc = rio_pool_open_opts(path, 0, &po, &b->pool);
	if (rc == -ENOENT && !create)
		return 0;
	if (rc == -ENOENT) {
		rc = rio_pool_create_opts(path, RIO_POOL_HDR_SIZE +
			VR_BLOG_AREA + VR_BLOG_DEFAULT_AREA, 0, &po, &b->pool);
		if (rc == -EEXIST) /* made meanwhile */
			rc = rio_pool_open_opts(path, 0, &po, &b->pool);
	}
	if (rc)
		return rc;
	hd = rio_pool_base(b->pool);
	if (memcmp(hd->magic, "\0\0\0\0\0\0\0\0", 8) == 0) {
		/* New (or made by a process that died before this): the
		 * header, durable before any slot or entry is written. */
		struct vr_blog_hdr h = { .major = VR_BLOG_MAJOR,
			.area_size = rio_pool_size(b->pool) - VR_BLOG_AREA };
		memcpy(h.magic, VR_BLOG_MAGIC, 8);
		while (h.area_size & (h.area_size - 1))
			h.area_size &= h.area_size - 1;
		h.check = rio_checksum(&h, offsetof(struct vr_blog_hdr, check),
			VR_BLOG_SEED);
		memcpy(hd, &h, sizeof(h));
		/* The header is durable before the log is used. */
		rio_persist(b->pool, hd, sizeof(*hd));
	}
	if (memcmp(hd->magic, VR_BLOG_MAGIC, 8) == 0 &&
	    hd->major != VR_BLOG_MAJOR) {
		unsigned major = hd->major;
		(void)rio_pool_close(b->pool);
		b->pool = NULL;
		return vr__err(VR_EVERSION, "%s: a redo log of major %u, this "
			"node reads %u (apply it with the version that wrote "
			"it, or remove it: the backup then rejoins by a full "
			"copy)", path, major, VR_BLOG_MAJOR);
	}
	if (memcmp(hd->magic, VR_BLOG_MAGIC, 8) != 0 ||
	    hd->check != rio_checksum(hd, offsetof(struct vr_blog_hdr, check),
		    VR_BLOG_SEED) ||
	    hd->area_size == 0 || (hd->area_size & (hd->area_size - 1)) ||
	    hd->area_size > rio_pool_size(b->pool) - VR_BLOG_AREA) {
		(void)rio_pool_close(b->pool);
		b->pool = NULL;
		return vr__err(VR_ESTATE, "%s: not a replica redo log (magic, "
			"version, check or size)", path);
	}
	b->size = hd->area_size;
	b->area = (char *)hd + VR_BLOG_AREA;
	b->slot = (struct vr_blog_slot *)((char *)hd + VR_BLOG_SLOT0);
	b->have = false;
	b->gen = b->off = b->stream = b->seq = b->pos = 0;
	for (int i = 0; i < 2; i++) {
		const struct vr_blog_slot *s = &b->slot[i];
		if (s->check != slot_check(s) || (b->have && s->gen < b->gen))
			continue;
		b->have = true;
		b->gen = s->gen;
		b->stream = s->stream;
		b->seq = s->seq;
		b->pos = s->pos;
		b->off = s->off;
	}
	b->end = b->fl = b->off;
	b->lseq = b->seq;
	b->lpos = b->pos;
	return 0;
}

void
vr__blog_close(vr_node *n)
{
	if (n->blog.pool != NULL)
		(void)rio_pool_close(n->blog.pool);
	n->blog.pool = NULL;
	free(n->blog.lines);
	free(n->blog.dirty);
	n->blog.lines = NULL;
	n->blog.dirty = NULL;
	n->blog.ndirty = n->blog.dcap = 0;
}

/* A3 / R4: the inactive slot becomes current. */
static void
write_slot(vr_node *n, uint64_t stream, uint64_t seq, uint64_t pos,
	uint64_t off)
{
	struct vr_blog *b = &n->blog;
	struct vr_blog_slot s = { b->gen + 1, stream, seq, pos, off, { 0, 0 },
		0 };
	struct vr_blog_slot *dst = &b->slot[s.gen & 1];

	s.check = slot_check(&s);
	memcpy(dst, &s, sizeof(s));
	/* L2: the checkpoint is durable before the space before `off` is
	 * written again; until this fence the older slot, whose entries are
	 * intact, is the one a crash leaves current. */
	rio_persist(b->pool, dst, sizeof(*dst));
	b->have = true;
	b->gen = s.gen;
	b->stream = stream;
	b->seq = seq;
	b->pos = pos;
	b->off = off;
}

/* The entry at log position *p (or at the start of the next lap) that
 * continues (stream, seq, pos); NULL if none.  full: check the entry's and
 * the record's checksums too (recovery; the apply walks entries this
 * process wrote and verified). */
static const struct vr_rec_hdr *
entry_at(vr_node *n, uint64_t *p, uint64_t seq, uint64_t pos, bool full)
{
	struct vr_blog *b = &n->blog;
	uint64_t q = *p;

	for (int lap = 0; lap < 2; lap++) {
		uint64_t at = q & (b->size - 1);
		const struct vr_blog_ent *e;
		const struct vr_rec_hdr *h;
		if (lap == 1) {
			if (at == 0)
				break;
			q = (q | (b->size - 1)) + 1;
			at = 0;
		}
		if (at + sizeof(*e) + sizeof(*h) > b->size)
			continue;
		e = (const void *)(b->area + at);
		h = (const void *)(e + 1);
		if (e->stream != b->stream || e->len < sizeof(*h) ||
		    e->len > b->size - at - sizeof(*e) ||
		    e->pos != pos + e->len || h->len != e->len ||
		    h->seq != seq + 1 || h->type != VR_REC_REDO)
			continue;
		if (full && (e->check != ent_check(e, h) ||
			    vr__hdr_check(h) != 0 ||
			    vr__rec_verify(h, h + 1, n->size) != 0))
			continue;
		*p = q;
		return h;
	}
	return NULL;
}

/* Flushes of the segment, gathered per batch: in the page domain one
 * msync of the span; otherwise each line once, however many records of
 * the batch store to it (hot counters take one flush, not one per
 * record).  A line that cannot be marked (out of memory) is flushed at
 * once. */
struct span {
	vr_node *n;
	const rio_pool *pool;
	bool page;
	char *lo, *hi;
};

static void
span_init(struct span *sp, vr_node *n)
{
	sp->n = n;
	sp->pool = vista_segment_pool(n->seg);
	sp->page = rio_pool_domain(sp->pool) == RIO_DOMAIN_PAGE;
	sp->lo = sp->hi = NULL;
}

static void
mark_lines(struct span *sp, size_t off, size_t len)
{
	struct vr_blog *b = &sp->n->blog;
	size_t first = off / 64, last = (off + len - 1) / 64;

	if (b->lines == NULL) {
		b->lines = calloc((sp->n->size / 64 + 64) / 64, 8);
		if (b->lines == NULL) {
			/* No memory to gather the lines: the piece is
			 * written back now, durable at span_drain's fence
			 * (A2) like the rest, before the checkpoint (A3). */
			rio_flush(sp->pool, sp->n->base + off, len);
			return;
		}
	}
	for (size_t l = first; l <= last; l++) {
		if (b->lines[l / 64] & (1ull << (l % 64)))
			continue;
		if (b->ndirty == b->dcap) {
			size_t c = b->dcap ? 2 * b->dcap : 4096;
			uint32_t *nd = realloc(b->dirty, c * sizeof(*nd));
			if (nd == NULL) {
				/* as above: written back now, durable at
				 * the batch's fence (A2) */
				rio_flush(sp->pool, sp->n->base + l * 64, 64);
				continue;
			}
			b->dirty = nd;
			b->dcap = c;
		}
		b->lines[l / 64] |= 1ull << (l % 64);
		b->dirty[b->ndirty++] = (uint32_t)l;
	}
}

/* A1 / R1: a record's pieces into the segment, their flushes gathered
 * (no fence). */
static void
apply_rec(vr_node *n, struct span *sp, const struct vr_rec_hdr *h)
{
	const struct vr_piece *pc = (const void *)(h + 1);
	const char *data = (const char *)(pc + h->count);

	for (uint32_t i = 0; i < h->count; i++) {
		uint64_t off = vr_piece_off(&pc[i]);
		uint32_t len = vr_piece_len(&pc[i]);
		char *dst = n->base + off;
		memcpy(dst, data, len);
		if (sp->page) {
			if (sp->lo == NULL || dst < sp->lo)
				sp->lo = dst;
			if (dst + len > sp->hi)
				sp->hi = dst + len;
		} else {
			mark_lines(sp, off, len);
		}
		data += len;
	}
}

/* A2 / R2: the batch's flushes, then the fence. */
static void
span_drain(struct span *sp)
{
	struct vr_blog *b = &sp->n->blog;

	/* the applied bytes written back (the contiguous span, then each
	 * gathered line once) ... */
	if (sp->lo != NULL)
		rio_flush(sp->pool, sp->lo, (size_t)(sp->hi - sp->lo));
	for (size_t i = 0; i < b->ndirty; i++) {
		uint32_t l = b->dirty[i];
		rio_flush(sp->pool, sp->n->base + (size_t)l * 64, 64);
		b->lines[l / 64] &= ~(1ull << (l % 64));
	}
	b->ndirty = 0;
	/* ... and durable before the checkpoint slot that truncates the
	 * log behind them (A2 before A3; R2 before R4) */
	rio_drain(sp->pool);
}

bool
vr__blog_due(const vr_node *n)
{
	return n->blog.end - n->blog.off >= n->blog.size / 8;
}

int
vr__blog_apply(vr_node *n)
{
	struct vr_blog *b = &n->blog;
	uint64_t p = b->off, seq = b->seq, pos = b->pos;
	const struct vr_rec_hdr *h;
	struct span sp;

	if (b->end == b->off)
		return 0;
	span_init(&sp, n);
#ifdef VR_BROKEN_TRUNCATE_EARLY
	/* wrong: the checkpoint passes the records before they are applied
	 * (L3); a crash before A2 loses them. */
	write_slot(n, b->stream, b->lseq, b->lpos, b->end);
	vr__crash_point("apply");
#endif
	/* A1: every logged record not applied yet, in log order. */
	while (p < b->end && (h = entry_at(n, &p, seq, pos, false)) != NULL) {
		apply_rec(n, &sp, h);
		seq = h->seq;
		pos += h->len;
		p += sizeof(struct vr_blog_ent) + h->len;
	}
	if (p != b->end || seq != b->lseq)
		return vr__err(VR_ECORRUPT, "the redo log does not chain at "
			"position %lu (record %lu, %lu logged)",
			(unsigned long)p, (unsigned long)seq,
			(unsigned long)b->lseq);
	/* A2: the applied bytes are durable before the checkpoint (A3)
	 * says so and their log space is reused (L3). */
	span_drain(&sp);
#ifndef VR_BROKEN_TRUNCATE_EARLY
	vr__crash_point("apply");
	/* A3 */
	write_slot(n, b->stream, seq, pos, p);
#endif
	atomic_fetch_add(&n->applies, 1);
	return 0;
}

/* Flush the entries written since the last flush, [fl, end), lap by lap
 * (an entry never wraps, but the batch may cross the area's end; a
 * skipped tail is flushed along, harmlessly). */
static void
flush_pending(vr_node *n)
{
	struct vr_blog *b = &n->blog;

	while (b->fl < b->end) {
		uint64_t lap_end = (b->fl | (b->size - 1)) + 1;
		uint64_t to = b->end < lap_end ? b->end : lap_end;
		/* the batch's entries written back; durable at L1f's fence,
		 * before their acknowledgement */
		rio_flush(b->pool, b->area + (b->fl & (b->size - 1)),
			to - b->fl);
		b->fl = to;
	}
}

int
vr__blog_append(vr_node *n, const struct vr_rec_hdr *h, uint64_t pos)
{
	struct vr_blog *b = &n->blog;
	size_t need = sizeof(struct vr_blog_ent) + h->len;
	struct vr_blog_ent e;
	uint64_t p;
	char *dst;
	int rc;

	if (need > b->size)
		return VR_ETOOBIG; /* the caller applies it in a transaction */
	p = b->end;
	if ((p & (b->size - 1)) + need > b->size)
		p = (p | (b->size - 1)) + 1; /* entries never wrap */
	if (p + need - b->off > b->size) {
		/* Full: apply what is logged, which frees the whole log (the
		 * batch's entries not flushed yet are flushed at its fence,
		 * before its acknowledgement, as ever). */
		rc = vr__blog_apply(n);
		if (rc)
			return rc;
		p = b->end;
		if ((p & (b->size - 1)) + need > b->size)
			p = (p | (b->size - 1)) + 1;
	}
	e = (struct vr_blog_ent){ b->stream, pos, h->len, 0, 0 };
	e.check = ent_check(&e, h);
	dst = b->area + (p & (b->size - 1));
	/* L1: the record, then its entry header; flushed with the batch
	 * (flush_pending) and durable at its fence (vr__blog_fence), before
	 * the acknowledgement. */
	memcpy(dst + sizeof(e), h, h->len);
	memcpy(dst, &e, sizeof(e));
	b->end = p + need;
	b->lseq = h->seq;
	b->lpos = pos;
	return 0;
}

void
vr__blog_fence(vr_node *n)
{
	flush_pending(n);
	/* L1f: every entry appended since the last fence is durable before
	 * the acknowledgement that follows. */
	rio_drain(n->blog.pool);
}

int
vr__blog_reset(vr_node *n)
{
	struct vr_blog *b = &n->blog;

	/* R4: the log empty at the state's position. */
	write_slot(n, n->st->stream, n->st->applied, n->st->pos, b->end);
	b->lseq = b->seq;
	b->lpos = b->pos;
	return 0;
}

int
vr__blog_recover(vr_node *n)
{
	struct vr_blog *b = &n->blog;
	const struct vr_state *st = n->st;
	const struct vr_rec_hdr *h;
	uint64_t p = b->off, seq = b->seq, pos = b->pos;
	struct span sp;
	int rc;

	if (b->pool == NULL)
		return 0;
	span_init(&sp, n);
	/* L4: only a log that continues the node state counts. */
	if (b->have && b->stream == st->stream && st->stream != 0 &&
	    !st->copying && st->role == VR_BACKUP && b->seq >= st->applied) {
		/* R1 */
		while ((h = entry_at(n, &p, seq, pos, true)) != NULL) {
			apply_rec(n, &sp, h);
			seq = h->seq;
			pos += h->len;
			p += sizeof(struct vr_blog_ent) + h->len;
		}
		/* R2: the replayed bytes are durable before the state (R3)
		 * says they are applied. */
		span_drain(&sp);
		if (seq != st->applied || pos != st->pos) {
			struct vr_state s = *st;
			s.applied = seq;
			s.pos = pos;
			/* R3: durable when vr__state_set returns. */
			rc = vr__state_set(n, &s);
			if (rc)
				return rc;
		}
	}
	b->end = b->fl = p;
	return vr__blog_reset(n);
}
