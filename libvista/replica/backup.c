/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backup.c -- the backup: vr_follow applies the primary's stream
 *
 * Order for REDO records (the crash outcome after each step):
 *   1. the record has arrived whole and verifies (wire.c W1); a crash or
 *      a cut connection before: nothing of it is logged or applied;
 *   2. it is appended to the redo log (blog.c L1) -- with the records
 *      already waiting whole in the socket (a batch);
 *   3. one fence for the batch (blog.c L1f): a crash before leaves any
 *      part of it logged, none acknowledged;
 *   4. ACK {seq, pos} of the batch's last record;
 *   5. later (an eighth of the log waits, a heartbeat, the log is full),
 *      the logged records are applied to the segment and the log is
 *      truncated behind them (blog.c A1-A3); vr_follow's end, vr_open and
 *      vr_promote apply whatever is left (R1-R4).
 * A record too large for the log is applied as before the log existed:
 * the log is applied first, then the record and the node state in one
 * Vista transaction, then the ACK.
 * GRANT (1-safe, replica_layout.h): the offered limit goes into the node
 * state in one Vista transaction, durable before the GRANT goes back (B4).
 * Full copy: the state says `copying` (durably) before the first COPY
 * chunk is written and stops saying it in the COPY_END transaction; a
 * node interrupted in between refuses promotion (VR_EINCOMPLETE) and is
 * copied again.
 *
 * Invariants
 *   B1. Nothing of a record is logged or applied before the whole record
 *       has arrived and verified.
 *   B2. A record is acknowledged only after step 3: an acknowledged
 *       record survives any crash of this node (the log replays it).
 *   B3. The segment holds the records up to the node state's applied seq,
 *       and those the log holds after it once the log is applied; the
 *       log never runs ahead of what was verified (B1).
 *   B4. A limit is granted back only once the node state holds it
 *       durably: a promotion after any crash of this node reports a
 *       1-safe loss window (limit - applied) that bounds the loss.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vr_int.h"

uint16_t vr__seg_major(void);

#define VR_BATCH_MAX 256 /* records logged under one fence at most */

static int
ack(vr_node *n, uint64_t seq, uint64_t pos)
{
	struct vr_ack a = { seq, pos, n->st->stream };
	int rc;

	/* vr_status: before the primary can hear it. */
	atomic_store(&n->bseq, seq);
	rc = vr__send_rec(n->cfd, VR_REC_ACK, 0, seq, n->st->epoch, &a,
		sizeof(a));
	vr__crash_point("ack");
	return rc;
}

/* Inside the open transaction: copy the pieces of a verified record. */
static int
apply_pieces(vr_node *n, const struct vr_rec_hdr *h)
{
	const struct vr_piece *pc = (const void *)(h + 1);
	const char *data = (const char *)(pc + h->count);
	struct vista_range stack[32] = { { NULL, 0 } }, *r = stack;
	int rc;

	/* Every piece declared with one persist barrier, then copied. */
	if (h->count > 32 && (r = malloc(h->count * sizeof(*r))) == NULL)
		return vr__err(-ENOMEM, "out of memory");
	for (uint32_t i = 0; i < h->count; i++)
		r[i] = (struct vista_range){ n->base + vr_piece_off(&pc[i]),
			vr_piece_len(&pc[i]) };
	rc = vista_set_ranges(n->v, h->count, r);
	if (r != stack)
		free(r);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < h->count; i++) {
		memcpy(n->base + vr_piece_off(&pc[i]), data,
			vr_piece_len(&pc[i]));
		data += vr_piece_len(&pc[i]);
	}
	return 0;
}

/* Inside the open transaction: the new state (B3). */
static int
set_state(vr_node *n, const struct vr_state *s)
{
	struct vr_state tmp = *s;
	int rc = vista_set_range(n->v, n->st, sizeof(*n->st));

	if (rc)
		return rc;
	vr__state_seal(&tmp);
	memcpy(n->st, &tmp, sizeof(tmp));
	return 0;
}

/* A BEAT announces the last seq the primary queued (the 1-safe loss
 * window after a promotion). */
static void
heard_beat(vr_node *n, const struct vr_rec_hdr *h)
{
	if (h->seq > atomic_load(&n->announced))
		atomic_store(&n->announced, h->seq);
}

/* B4: make the offered limit durable, then grant it back. */
static int
grant(vr_node *n, uint64_t limit)
{
	if (limit > n->st->limit) {
		struct vr_state s = *n->st;
		int rc;
		s.limit = limit;
		/* Durable when vr__state_set returns (a Vista commit):
		 * before the GRANT below lets the primary return commits
		 * up to the limit. */
		rc = vr__state_set(n, &s);
		if (rc)
			return rc;
	}
	return vr__send_rec(n->cfd, VR_REC_GRANT, 0, n->st->limit,
		n->st->epoch, NULL, 0);
}

static bool
readable(int fd)
{
	struct pollfd pf = { fd, POLLIN, 0 };
	return poll(&pf, 1, 0) > 0 && (pf.revents & POLLIN);
}

#ifdef VR_BROKEN_APPLY_EARLY
/* wrong: the pieces of a REDO record are stored as they arrive, before
 * the record is whole and verified (B1). */
static int
read_apply_early(vr_node *n, struct vr_reader *rd,
	const struct vr_rec_hdr **out)
{
	const struct vr_rec_hdr *h;
	int rc = vr__reader_fill(rd, sizeof(*h), n->o.timeout_ms, &n->stop);

	if (rc)
		return rc;
	h = (const void *)(rd->buf + rd->lo);
	if ((rc = vr__hdr_check(h)) != 0)
		return rc;
	if (h->type == VR_REC_REDO && h->count > 0 &&
	    (size_t)h->count * sizeof(struct vr_piece) <=
		    h->len - sizeof(*h)) {
		size_t at = sizeof(*h) + h->count * sizeof(struct vr_piece);
		uint32_t count = h->count;
		rc = vr__reader_fill(rd, at, n->o.timeout_ms, &n->stop);
		for (uint32_t i = 0; rc == 0 && i < count; i++) {
			const struct vr_piece *pc;
			size_t pl;
			h = (const void *)(rd->buf + rd->lo);
			pc = (const void *)(h + 1);
			pl = vr_piece_len(&pc[i]);
			if (vr_piece_off(&pc[i]) + pl > n->size ||
			    at + pl > h->len)
				return VR_ECORRUPT;
			rc = vr__reader_fill(rd, at + pl, n->o.timeout_ms,
				&n->stop);
			if (rc)
				return rc;
			h = (const void *)(rd->buf + rd->lo);
			pc = (const void *)(h + 1);
			rio_memcpy_persist(vista_segment_pool(n->seg),
				n->base + vr_piece_off(&pc[i]),
				(const char *)h + at, pl);
			at += pl;
		}
		if (rc)
			return rc;
	}
	return vr__reader_next(rd, out, n->o.timeout_ms, &n->stop, n->size);
}
#define READ_REC(n, rd, h) read_apply_early((n), (rd), (h))
#else
#define READ_REC(n, rd, h) \
	vr__reader_next((rd), (h), (n)->o.timeout_ms, &(n)->stop, (n)->size)
#endif

static int
hello(vr_node *n, void **buf, size_t *cap, uint64_t *pepoch,
	uint8_t set_uuid[16])
{
	struct vr_hello me = { .seg_major = vr__seg_major(),
		.role = VR_ROLE_BACKUP, .stream = n->st->stream,
		.seq = n->st->applied, .pos = n->st->pos,
		.seg_size = n->size, .limit = n->st->limit };
	const struct vr_rec_hdr *h;
	const struct vr_hello *ph;
	int rc;

	memcpy(me.set_uuid, n->st->set_uuid, 16);
	if (n->st->copying || n->st->role == VR_FRESH) {
		me.stream = 0; /* nothing to resume */
		me.limit = 0;
	}
	rc = vr__send_rec(n->cfd, VR_REC_HELLO, 0, n->st->applied,
		n->st->epoch, &me, sizeof(me));
	if (rc)
		return rc;
	rc = vr__read_rec(n->cfd, buf, cap, n->o.timeout_ms * 4, &n->stop,
		n->size);
	if (rc)
		return rc;
	h = *buf;
	if (h->type == VR_REC_REFUSE) {
		const struct vr_refuse *r = (const void *)(h + 1);
		return vr__err(r->code, "the primary refused this backup: %s",
			vr_strerror(r->code));
	}
	if (h->type != VR_REC_HELLO)
		return vr__err(VR_ECORRUPT, "the primary answered HELLO with "
			"a record of type %u", h->type);
	ph = (const void *)(h + 1);
	if (ph->seg_major != vr__seg_major())
		return vr__err(VR_EVERSION, "the primary's segment layout "
			"is version %u, this node's %u", ph->seg_major,
			vr__seg_major());
	if (ph->seg_size != n->size)
		return vr__err(VR_ESIZE, "the primary's segment has %lu bytes, "
			"this node's %zu", (unsigned long)ph->seg_size,
			n->size);
	if (memcmp(n->st->set_uuid, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16) &&
	    memcmp(n->st->set_uuid, ph->set_uuid, 16))
		return vr__err(VR_EOTHERSET, "the primary replicates another "
			"segment (replica set uuid differs)");
	if (h->epoch < n->st->epoch)
		return vr__err(VR_ESTALE, "the primary's epoch %lu is older "
			"than this node's %lu", (unsigned long)h->epoch,
			(unsigned long)n->st->epoch);
	*pepoch = h->epoch;
	memcpy(set_uuid, ph->set_uuid, 16);
	return 0;
}

static int
copy_chunk(vr_node *n, const struct vr_rec_hdr *h, uint64_t epoch,
	const uint8_t *set_uuid, bool first)
{
	int rc = vista_begin_transaction(n->v, 0);

	if (rc)
		return rc;
	if (first) {
		/* The state says "copying" from the first chunk on. */
		struct vr_state s = *n->st;
		s.copying = 1;
		s.role = VR_BACKUP;
		memcpy(s.set_uuid, set_uuid, 16);
		s.epoch = epoch;
		s.stream = 0;
		rc = set_state(n, &s);
	}
	if (rc == 0)
		rc = apply_pieces(n, h);
	if (rc) {
		(void)vista_abort_transaction(n->v);
		return rc;
	}
	return vista_end_transaction(n->v);
}

/* A record larger than the log: the log applied first (order), then the
 * record and the state in one Vista transaction, then the log empty at
 * the new position (a crash between leaves the state ahead of the log,
 * which recovery discards: blog.c L4). */
static int
apply_big(vr_node *n, const struct vr_rec_hdr *h, uint64_t pos)
{
	struct vr_state s = *n->st;
	int rc = vr__blog_apply(n);

	if (rc == 0)
		rc = vista_begin_transaction(n->v, 0);
	if (rc)
		return rc;
	s.applied = h->seq;
	s.pos = pos;
	rc = apply_pieces(n, h);
	if (rc == 0)
		rc = set_state(n, &s);
	if (rc) {
		(void)vista_abort_transaction(n->v);
		return rc;
	}
	rc = vista_end_transaction(n->v);
	if (rc == 0)
		rc = vr__blog_reset(n);
	return rc;
}

int
vr_follow(vr_node *n, const char *host, unsigned port)
{
	void *buf = NULL;
	size_t cap = 0;
	uint64_t epoch = 0, copied = 0;
	uint8_t set_uuid[16] = { 0 };
	struct vr_reader rd = { -1, NULL, 0, 0, 0 };
	bool copying = false;
	int rc, fd;

	if (n == NULL || host == NULL)
		return vr__err(-EINVAL, "vr_follow: NULL argument");
	if (n->ring != NULL)
		return vr__err(-EBUSY, "vr_follow: this node "
			"serves as primary");
	/* The log applied, the state at its end: HELLO tells where to
	 * resume from. */
	rc = vr__blog_open(n, true);
	if (rc == 0)
		rc = vr__blog_recover(n);
	if (rc)
		return rc;
	atomic_store(&n->bseq, n->st->applied);
	fd = vr__connect(host, port, n->o.timeout_ms * 4);
	if (fd < 0)
		return fd;
	n->cfd = fd;
	atomic_store(&n->stop, 0);
	atomic_store(&n->following, 1);
	vr__set_applying(true);
	rc = hello(n, &buf, &cap, &epoch, set_uuid);
	if (rc)
		goto out;
	if (n->st->role != VR_BACKUP && !n->st->copying) {
		/* A primary of an older epoch (or a fresh node) rejoins: it
		 * never commits again unless promoted (vr_promote). */
		struct vr_state s = *n->st;
		s.role = VR_BACKUP;
		rc = vr__state_set(n, &s);
		if (rc)
			goto out;
	}
	atomic_store(&n->connected, 1);
	rd.fd = n->cfd;
	for (;;) {
		const struct vr_rec_hdr *h;
		struct vr_blog *b = &n->blog;
		uint64_t glimit = 0;
		unsigned k = 0;

		rc = READ_REC(n, &rd, &h);
		if (rc)
			break;
		if (h->type == VR_REC_BEAT) {
			heard_beat(n, h);
			/* Answer with the position: the primary hears us.
			 * Every logged record is past its fence (step 3). */
			rc = ack(n, b->lseq, b->lpos);
			/* A quiet moment: apply the log (step 5). */
			if (rc == 0)
				rc = vr__blog_apply(n);
			if (rc)
				break;
			continue;
		}
		if (h->type == VR_REC_GRANT) {
			rc = grant(n, h->seq);
			if (rc)
				break;
			continue;
		}
		if (h->type == VR_REC_COPY) {
			rc = copy_chunk(n, h, epoch, set_uuid, !copying);
			copying = true;
			if (rc)
				break;
			copied += vr_piece_len((const void *)(h + 1));
			if (n->o.progress)
				n->o.progress(n->o.progress_arg, copied,
					n->size);
			continue;
		}
		if (h->type == VR_REC_COPY_END) {
			const struct vr_ack *e = (const void *)(h + 1);
			struct vr_state s = *n->st;
			s.copying = 0;
			s.role = VR_BACKUP;
			memcpy(s.set_uuid, set_uuid, 16);
			s.epoch = epoch;
			s.stream = e->stream;
			s.applied = e->seq;
			s.pos = e->pos;
			/* The old stream's limit means nothing here (B4). */
			s.limit = e->seq;
			rc = vr__state_set(n, &s);
			if (rc == 0)
				rc = vr__blog_reset(n);
			if (rc)
				break;
			copying = false;
			atomic_fetch_add(&n->copies, 1);
			rc = ack(n, s.applied, s.pos);
			if (rc)
				break;
			continue;
		}
		if (h->type != VR_REC_REDO) {
			rc = vr__err(VR_ECORRUPT, "unexpected record type %u "
				"in the stream", h->type);
			break;
		}
		/* A batch of REDO records, logged under one fence. */
		for (;;) {
			uint64_t pos = b->lpos + h->len;
			if (b->lseq && h->seq != b->lseq + 1) {
				rc = vr__err(VR_ECORRUPT, "record %lu follows "
					"%lu", (unsigned long)h->seq,
					(unsigned long)b->lseq);
				break;
			}
#ifdef VR_BROKEN_ACK_EARLY
			/* wrong: acknowledged before it is durable (B2) */
			(void)ack(n, h->seq, pos);
#endif
			/* 2. (B1: whole and verified by READ_REC) */
			rc = vr__blog_append(n, h, pos);
			if (rc == VR_ETOOBIG)
				rc = apply_big(n, h, pos);
			if (rc)
				break;
			k++;
			if (k >= VR_BATCH_MAX || (!vr__reader_ready(&rd) &&
				    !readable(n->cfd)))
				break;
			rc = READ_REC(n, &rd, &h);
			if (rc)
				break;
			if (h->type == VR_REC_BEAT) {
				/* Ends the batch (acknowledged below). */
				heard_beat(n, h);
				break;
			}
			if (h->type == VR_REC_GRANT) {
				/* Ends the batch; granted after its ack. */
				glimit = h->seq;
				break;
			}
			if (h->type != VR_REC_REDO) {
				rc = vr__err(VR_ECORRUPT, "record type %u "
					"among redo records", h->type);
				break;
			}
		}
		if (rc)
			break;
		/* 3. One fence for the batch... */
		vr__blog_fence(n);
		/* 4. ...before the acknowledgement (B2). */
		rc = ack(n, b->lseq, b->lpos);
		if (rc == 0 && glimit)
			rc = grant(n, glimit);
		/* 5. Lazily: once an eighth of the log waits. */
		if (rc == 0 && vr__blog_due(n))
			rc = vr__blog_apply(n);
		if (rc)
			break;
	}
out:
	free(rd.buf);
	/* Whatever the log holds goes to the segment and the state (R1-R4),
	 * so a promotion or a reader after vr_follow sees it. */
	{
		int lrc = vr__blog_recover(n);
		if (lrc && (rc == 0 || rc == -ECANCELED))
			rc = lrc;
	}
	vr__set_applying(false);
	atomic_store(&n->connected, 0);
	close(n->cfd);
	n->cfd = -1;
	free(buf);
	atomic_store(&n->following, 0);
	if (rc == -ECANCELED)
		return 0;
	/* A primary that died inside a record (VR_ETRUNC: the part that
	 * came was never applied) is lost as surely as one that died
	 * between records. */
	if ((rc == VR_EPEERLOST || rc == VR_ETRUNC) && n->o.auto_promote &&
	    n->st->role == VR_BACKUP && !n->st->copying) {
		int prc = vr_promote(n);
		if (prc)
			return prc;
		return vr__err(VR_EPEERLOST, "the primary was lost; this node "
			"was promoted (epoch %lu)",
			(unsigned long)n->st->epoch);
	}
	return rc;
}

void
vr_stop(vr_node *n)
{
	if (n != NULL)
		atomic_store(&n->stop, 1);
}
