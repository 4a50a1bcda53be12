/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.c -- requests in, responses out: vista_receive_request,
 *             vista_send_response, the retransmit port, client watermarks
 *
 * Life of a request at the server (response table slot; volatile
 * resp_pending flag while an open transaction holds it):
 *
 *   datagram --not known, not below the client's watermark--> inbox
 *   inbox --vista_receive_request (tx: slot declared, RECEIVED; with it
 *          the answer's window and op record, S8)-->
 *          --abort--> back at the head of the inbox
 *   RECEIVED --vista_send_response (tx: payload in the declared window,
 *          else raw; ANSWERED, SEND_RESP logged)--> --commit, replay-->
 *          response sent
 *   ANSWERED --the client acknowledges (ack below its watermark, or the
 *          watermark passes it; garbage collection)--> DELETED
 *   ANSWERED --table full, client silent past the horizon; its expired
 *          word raised and drained first (reclaim, R1-R3)--> DELETED
 *
 * A REQUEST datagram that names a known request:
 *   on the normal port            a network duplicate: dropped
 *   on the retransmit port        ANSWERED and committed: the response is
 *                                 sent again from the table; otherwise
 *                                 (RECEIVED, or answered by a transaction
 *                                 still open) dropped
 * and one that is not known and not stale is queued like a new one (the
 * thesis "forwards it to the normal port": same process, same queue).
 *
 * Peers: per client node, an incarnation and a watermark (T5, T6).  The
 * watermark is the highest `low` the client sent: all its requests below
 * are finished, so they are dropped if they arrive again (stale), and
 * their responses may be forgotten -- but only once the watermark is
 * durable (S2).
 *
 * Invariants
 *   S1. The response table answers a retransmission only with a response
 *       whose transaction committed (resp_pending is clear).
 *   S2. A response-table entry is deleted only if its sequence number is
 *       below the client's durable watermark, or its incarnation is older
 *       than the client's current one; so a request is never executed
 *       twice: either its entry exists, or the watermark covers it.
 *   S3. Every change made here while a transaction may be open touches
 *       only committed entries that no open transaction uses (T1).
 *   S4. The server never stops reading its sockets because its response
 *       table is full: vista_receive_request waits (serving the network)
 *       until an entry can be admitted, and a new request that arrives
 *       while there is no room is dropped (full_dropped) -- its client
 *       retransmits it.  Queued requests hold at most half of the receive
 *       buffers (inbox_max), so acknowledgements always find one.  A
 *       request of a client the peer table cannot hold is dropped too
 *       (nopeer_dropped): without a peer record its response could never
 *       be forgotten.
 *   S8. A request is usually answered in the transaction that receives
 *       it, with about as many bytes.  So the receive declares, in the
 *       batch of the slot, the op record the answer will take and the
 *       first resp_window[slot] bytes of its buffer (the request's length
 *       rounded up to a line, at least one line; none for a request
 *       longer than VG__DECLARED_PAYLOAD_MAX, whose answer would cost
 *       more to checksum than to drain), both as new ranges (nothing
 *       logged: no committed header refers to them, T2).  An answer in the same transaction
 *       that fits is stored there: Vista's commit writes it back and its
 *       checksum covers it, and vg_commit drains nothing for it (X2).  A
 *       longer answer, or one in a later transaction, is written raw and
 *       drained before the commit point (T2).  A window left unused
 *       costs its share of the commit's checksum and nothing else.
 *   S9. A committed transaction may still be judged by the bytes it
 *       declared until the thread's next transaction logs a range
 *       (vista_settle in vista.h): so the thread's last transaction is
 *       ended for good (vg__settle) before a raw store into the tables
 *       -- responses forgotten (drain_watermarks) or reclaimed (R2),
 *       tombstones freed -- folded into the drain made there anyway.
 *
 * Reclaim (T7).  When the table is full, an answered, committed response
 * whose client has sent nothing for the horizon (horizon_ms), counted from
 * the later of its client's last datagram and the response's departure, is
 * reclaimed:
 *   R1. the client's peer word expired[sel] is raised to cover its
 *       sequence number (one 8-byte store, flushed);
 *   R2. drain: the expired words are durable before any deletion (one
 *       drain per scan);
 *   R3. the slots are deleted like acknowledged ones (responses_expired).
 * A crash between R1 and R3 leaves a live response its expired word
 * covers: harmless, the table answers first.  A request at or below
 * expired[sel] that is neither in the table nor queued nor stale is
 * answered with an EXPIRED response (expired_sent), never executed, so
 * reclaiming keeps S2: every executed request is in the table, below the
 * watermark, or at or below the expired word.  Scans are paced by
 * reclaim_due, the earliest time a response can expire (a lower bound:
 * datagrams only push expiry later).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "vg_int.h"

#define GC_EVERY 64 /* insertions between collections when half full */

/* ---- datagrams out ---- */

static void
send_response(vg_endpoint *ep, uint32_t slot, const struct sockaddr *to,
	socklen_t tolen)
{
	const struct vg_resp_slot *s = &ep->resp[slot];
	struct vg_wire_hdr h;
	struct vg__wire w = {
		.type = VG_PKT_RESPONSE,
		.payload_len = vg_slot_len(s->word),
		.src_node = ep->node,
		.src_inc = ep->inc,
		.req_node = s->node,
		.req_inc = s->inc,
		.seq = s->seq,
	};

	vg__wire_seal(&h, &w, NULL, s->payload_csum);
	vg__net_send(ep, to, tolen, &h, sizeof(h), NULL, 0,
		vg__resp_buf(ep, slot), w.payload_len);
}

/* The EXPIRED answer to request w (T7). */
static void
send_expired(vg_endpoint *ep, const struct vg__wire *w,
	const struct sockaddr *to, socklen_t tolen)
{
	struct vg_wire_hdr h;
	struct vg__wire r = {
		.type = VG_PKT_RESPONSE,
		.flags = VG_PKT_F_EXPIRED,
		.src_node = ep->node,
		.src_inc = ep->inc,
		.req_node = w->req_node,
		.req_inc = w->req_inc,
		.seq = w->seq,
	};

	vg__wire_seal(&h, &r, NULL, vg__wire_payload_csum(NULL, 0));
	vg__net_send(ep, to, tolen, &h, sizeof(h), NULL, 0, NULL, 0);
	ep->st.expired_sent++;
}

static uint64_t
later(uint64_t t, uint64_t d)
{
	return t > UINT64_MAX - d ? UINT64_MAX : t + d;
}

static void
drop_entry(vg_endpoint *ep, uint32_t slot)
{
	vg__resp_delete(ep, slot);
	ep->resp_live--;
}

static void
forget(vg_endpoint *ep, uint32_t slot)
{
	drop_entry(ep, slot);
	ep->st.responses_freed++;
}

void
vg__server_replay_send(vg_endpoint *ep, uint32_t slot)
{
	struct sockaddr_storage to;
	socklen_t len = vg__addr_to_sockaddr(&ep->resp[slot].ret, 0, &to);

	send_response(ep, slot, (struct sockaddr *)&to, len);
	ep->st.responses_sent++;
	ep->resp_since[slot] = rio_now_ns(CLOCK_MONOTONIC);
	if (ep->reclaim_due == UINT64_MAX)
		ep->reclaim_due = later(ep->resp_since[slot], ep->horizon_ns);
#ifdef VG_BROKEN_FORGET_RESPONSE
	/* Deliberately broken (crash and fault tests): the response is not
	 * kept for retransmission, nor the request for duplicate filtering. */
	vg__resp_delete(ep, slot);
	ep->resp_live--;
#endif
}

/* ---- peers ---- */

/*
 * Before forgetting responses (raw stores into slots a committed
 * transaction of this thread may have declared): S2, the watermarks that
 * justify it are durable; S9, that transaction is ended for good.  One
 * fence for both: the settle's, which comes after the watermarks' flushes,
 * or the drain if there was nothing to settle.
 */
static void
drain_watermarks(vg_endpoint *ep)
{
	bool fenced = vg__settle(ep);

	if (ep->wm_undrained) {
		if (!fenced)
			vg__drain(ep);
		ep->wm_undrained = false;
	}
}

/* Insert a peer outside transactions (T6): the records first, drained,
 * then the node word that makes the slot valid. */
static int32_t
peer_insert(vg_endpoint *ep, int32_t i, uint64_t node, uint64_t inc,
	uint64_t wm)
{
	struct vg_peer_slot *p;

	if (i < 0 || ep->peers_used >= ep->sb->peer_limit)
		return -1;
	p = &ep->peer[i];
	vg__raw_begin(ep, p, sizeof(*p));
	p->sel = 0;
	p->rec[0] = (struct vg_peer_rec){ inc, wm };
	p->rec[1] = (struct vg_peer_rec){ 0, 0 };
	p->expired[0] = p->expired[1] = 0;
	vg__raw_end(ep, p, sizeof(*p));
	vg__flush(ep, p, sizeof(*p));
	/* The record must be durable before `node` makes the slot valid. */
	vg__drain(ep);
	vg__raw_store64(ep, &p->node, node);
	ep->wm_undrained = true;
	ep->peers_used++;
	ep->peer_heard[i] = rio_now_ns(CLOCK_MONOTONIC);
	return i;
}

void
vg__server_forget_doomed(vg_endpoint *ep)
{
	if (ep->ndoomed == 0)
		return;
	/* S2: the watermarks that condemned them are durable first; one
	 * drain for the whole batch. */
	drain_watermarks(ep);
	for (uint32_t i = 0; i < ep->ndoomed; i++) {
		const struct vg__doomed *d = &ep->doomed[i];
		const struct vg_resp_slot *s = &ep->resp[d->slot];
		if (vg_slot_state(s->word) == VG_RESP_ANSWERED &&
		    !ep->resp_pending[d->slot] && s->node == d->node &&
		    s->inc == d->inc && s->seq == d->seq)
			forget(ep, d->slot);
	}
	ep->ndoomed = 0;
}

static void reclaim(vg_endpoint *ep, uint64_t now);

uint64_t
vg__server_timers(vg_endpoint *ep, uint64_t now)
{
	uint64_t due, next = UINT64_MAX;

	if (ep->ndoomed) {
		due = ep->doomed_since + (uint64_t)ep->ack_delay_us * 1000;
		if (now < due)
			next = due;
		else
			vg__server_forget_doomed(ep);
	}
	/* S4: a full table wakes the loop when a response may expire. */
	if (ep->resp_live >= ep->sb->resp_limit &&
	    ep->reclaim_due != UINT64_MAX) {
		if (now && now >= ep->reclaim_due)
			reclaim(ep, now);
		if (ep->reclaim_due < next)
			next = ep->reclaim_due;
	}
	return next;
}

/* Queue an acknowledged response below its client's watermark. */
static void
doom(vg_endpoint *ep, uint32_t slot)
{
	const struct vg_resp_slot *s = &ep->resp[slot];

	for (uint32_t i = 0; i < ep->ndoomed; i++)
		if (ep->doomed[i].slot == slot)
			return;
	if (ep->ndoomed == VG__DOOM_BATCH)
		vg__server_forget_doomed(ep);
	if (ep->ndoomed == 0)
		ep->doomed_since = rio_now_ns(CLOCK_MONOTONIC);
	ep->doomed[ep->ndoomed++] = (struct vg__doomed){ slot, s->node, s->inc,
		s->seq };
}

/* Forget the responses of an older incarnation of `node` (S2). */
static void
purge_incarnation(vg_endpoint *ep, uint64_t node, uint64_t inc)
{
	vg__server_forget_doomed(ep);
	drain_watermarks(ep);
	for (uint32_t i = 0; i <= ep->resp_mask; i++) {
		const struct vg_resp_slot *s = &ep->resp[i];
		if (vg_slot_state(s->word) == VG_RESP_ANSWERED &&
		    !ep->resp_pending[i] && s->node == node && s->inc < inc)
			forget(ep, i);
	}
}

enum peer_verdict {
	PEER_OK,
	PEER_STALE, /* an older incarnation of the client */
	PEER_NONE,  /* the peer table has no room for the client (S4) */
};

/*
 * Account for a client's datagram: its incarnation, watermark and acks,
 * and when it was last heard from.  *wm gets the watermark of the client,
 * *expired its expired word (T7); both 0 unless PEER_OK.
 */
static enum peer_verdict
peer_update(vg_endpoint *ep, const struct vg__wire *w, uint64_t *wm,
	uint64_t *expired)
{
	int32_t ins, i = vg__peer_find(ep, w->req_node, &ins);
	struct vg_peer_slot *p;

	*wm = *expired = 0;
	if (i < 0) {
		i = peer_insert(ep, ins, w->req_node, w->req_inc, w->low);
		if (i < 0)
			return PEER_NONE;
	}
	p = &ep->peer[i];
	struct vg_peer_rec *r = &p->rec[p->sel];
	if (w->req_inc < r->inc)
		return PEER_STALE;
	if (w->req_inc > r->inc) {
		/* T6: a new incarnation of the client (its tables were
		 * made anew): new record, drained, then one store flips. */
		uint64_t other = p->sel ^ 1;
		vg__raw_begin(ep, p, sizeof(*p));
		p->rec[other] = (struct vg_peer_rec){ w->req_inc, w->low };
		p->expired[other] = 0;
		vg__raw_end(ep, p, sizeof(*p));
		vg__flush(ep, &p->rec[other], sizeof(p->rec[other]));
		vg__flush(ep, &p->expired[other], sizeof(p->expired[other]));
		/* The new record (and its expired word) before the selector
		 * that points at it. */
		vg__drain(ep);
		vg__raw_store64(ep, &p->sel, other);
		ep->wm_undrained = true;
		ep->gc_dirty = true;
		purge_incarnation(ep, w->req_node, w->req_inc);
		r = &p->rec[p->sel];
	} else if (w->low > r->wm) {
		vg__raw_store64(ep, &r->wm, w->low);
		ep->wm_undrained = true;
		ep->gc_dirty = true;
	}
	ep->peer_heard[i] = rio_now_ns(CLOCK_MONOTONIC);
	*wm = r->wm;
	*expired = p->expired[p->sel];
	for (unsigned a = 0; a < w->nacks; a++) {
		uint64_t seq = vg__wire_ack(w, a);
		if (seq >= *wm)
			continue; /* S2: the collector gets it later */
		int32_t s = vg__resp_find(ep, w->req_node, w->req_inc, seq,
			NULL);
		if (s >= 0 && !ep->resp_pending[s] &&
		    vg_slot_state(ep->resp[s].word) == VG_RESP_ANSWERED)
			doom(ep, (uint32_t)s);
	}
	return PEER_OK;
}

/* Forget every answered response below its client's watermark (S2). */
static void
collect(vg_endpoint *ep)
{
	vg__server_forget_doomed(ep);
	drain_watermarks(ep);
	for (uint32_t i = 0; i <= ep->resp_mask; i++) {
		const struct vg_resp_slot *s = &ep->resp[i];
		if (vg_slot_state(s->word) != VG_RESP_ANSWERED ||
		    ep->resp_pending[i])
			continue;
		int32_t pi = vg__peer_find(ep, s->node, NULL);
		if (pi < 0)
			continue;
		const struct vg_peer_slot *p = &ep->peer[pi];
		const struct vg_peer_rec *r = &p->rec[p->sel];
		if (s->inc < r->inc || (s->inc == r->inc && s->seq < r->wm))
			forget(ep, i);
	}
	ep->gc_countdown = GC_EVERY;
	ep->gc_dirty = false;
}

/*
 * Slot i may be reclaimed at *due (T7): an answered, committed response
 * of a client whose current incarnation it belongs to (*p its peer).
 */
static bool
reclaimable(vg_endpoint *ep, uint32_t i, struct vg_peer_slot **p,
	uint64_t *due)
{
	const struct vg_resp_slot *s = &ep->resp[i];

	if (vg_slot_state(s->word) != VG_RESP_ANSWERED || ep->resp_pending[i])
		return false;
	int32_t pi = vg__peer_find(ep, s->node, NULL);
	if (pi < 0)
		return false; /* cannot happen: S4 admits tracked clients only */
	*p = &ep->peer[pi];
	if ((*p)->rec[(*p)->sel].inc != s->inc)
		return false; /* an older incarnation: collect() forgets it */
	uint64_t t = ep->resp_since[i] > ep->peer_heard[pi]
		? ep->resp_since[i] : ep->peer_heard[pi];
	*due = later(t, ep->horizon_ns);
	return true;
}

/* R1-R3: reclaim the responses whose clients stayed silent past the
 * horizon; set reclaim_due to the earliest one that has not. */
static void
reclaim(vg_endpoint *ep, uint64_t now)
{
	uint64_t next = UINT64_MAX, due;
	struct vg_peer_slot *p;
	uint32_t n = 0;

	for (uint32_t i = 0; i <= ep->resp_mask; i++) {
		if (!reclaimable(ep, i, &p, &due))
			continue;
		if (due > now) {
			next = due < next ? due : next;
			continue;
		}
		uint64_t seq = ep->resp[i].seq;
#ifndef VG_BROKEN_RECLAIM_UNRECORDED
		/* R1: the expired word covers the request before its entry
		 * goes; flushed here, drained once below. */
		if (seq > p->expired[p->sel])
			vg__raw_store64(ep, &p->expired[p->sel], seq);
#else
		/* Deliberately broken (reclaim test): the entry goes without
		 * a record, so the request is executed again when its client
		 * comes back. */
		(void)seq;
#endif
		n++;
	}
	ep->reclaim_due = next;
	if (n == 0)
		return;
#ifndef VG_BROKEN_RECLAIM_NO_DRAIN
	/* R2: every expired word raised above is durable before the first
	 * entry it covers is deleted: a crash in between must not leave a
	 * request both out of the table and uncovered (executed twice).
	 * S9: the thread's last transaction, which may have declared those
	 * entries, is ended for good first -- its fence serves both. */
	if (!vg__settle(ep))
		vg__drain(ep);
#else
	/* Deliberately broken (power-failure test): the deletions may
	 * reach memory before the expired words that justify them. */
#endif
	/* R3 */
	for (uint32_t i = 0; i <= ep->resp_mask; i++) {
		if (!reclaimable(ep, i, &p, &due) || due > now)
			continue;
#ifndef VG_BROKEN_RECLAIM_UNRECORDED
		VG_ASSERT(ep->resp[i].seq <= p->expired[p->sel], "R1");
		if (ep->resp[i].seq > p->expired[p->sel])
			continue; /* cannot happen: R1 covered it */
#endif
		drop_entry(ep, i);
		ep->st.responses_expired++;
	}
}

/*
 * S4: is there room for `need` more entries?  Makes room first if it can:
 * the acknowledged responses waiting for their batch, a collection if a
 * watermark moved since the last one, and R1-R3 once a response may have
 * expired.
 */
static bool
room(vg_endpoint *ep, uint32_t need)
{
	uint32_t limit = ep->sb->resp_limit;

	if (ep->resp_live + need <= limit)
		return true;
	vg__server_forget_doomed(ep);
	if (ep->resp_live + need <= limit)
		return true;
	if (ep->gc_dirty)
		collect(ep);
	if (ep->resp_live + need <= limit)
		return true;
	uint64_t now = rio_now_ns(CLOCK_MONOTONIC);
	if (now >= ep->reclaim_due)
		reclaim(ep, now);
	return ep->resp_live + need <= limit;
}

/* ---- datagrams in ---- */

static bool
queued(const vg_endpoint *ep, const struct vg__wire *w)
{
	for (const struct vg__pkt *q = ep->inbox_head; q; q = q->next)
		if (q->w.seq == w->seq && q->w.req_node == w->req_node &&
		    q->w.req_inc == w->req_inc)
			return true;
	return false;
}

void
vg__server_on_request(vg_endpoint *ep, struct vg__pkt *p)
{
	const struct vg__wire *w = &p->w;
	uint64_t wm, expired;
	int32_t slot;
	enum peer_verdict pv = peer_update(ep, w, &wm, &expired);

	if (pv == PEER_NONE) {
		ep->st.nopeer_dropped++; /* S4 */
		vg__pkt_free(ep, p);
		return;
	}
	if (pv == PEER_STALE || w->seq < wm) {
		ep->st.stale_dropped++;
		vg__pkt_free(ep, p);
		return;
	}
	slot = vg__resp_find(ep, w->req_node, w->req_inc, w->seq, NULL);
	if (slot >= 0) {
		if (!p->retrans) {
			ep->st.duplicates_dropped++;
		} else if (vg_slot_state(ep->resp[slot].word) ==
				VG_RESP_ANSWERED &&
			   !ep->resp_pending[slot]) { /* S1 */
			send_response(ep, (uint32_t)slot,
				(struct sockaddr *)&p->from, p->fromlen);
			ep->st.responses_resent++;
		} else {
			ep->st.unanswered_dropped++;
		}
		vg__pkt_free(ep, p);
		return;
	}
	if (queued(ep, w)) {
		ep->st.duplicates_dropped++;
		vg__pkt_free(ep, p);
		return;
	}
	if (w->seq <= expired) { /* T7: reclaimed, or given up with it */
		send_expired(ep, w, (struct sockaddr *)&p->from, p->fromlen);
		vg__pkt_free(ep, p);
		return;
	}
	if (ep->inbox_len >= ep->inbox_max || !room(ep, ep->inbox_len + 1)) {
		ep->st.full_dropped++; /* S4: the client retransmits */
		vg__pkt_free(ep, p);
		return;
	}
	if (p->retrans)
		ep->st.forwarded++;
	p->next = NULL;
	if (ep->inbox_tail)
		ep->inbox_tail->next = p;
	else
		ep->inbox_head = p;
	ep->inbox_tail = p;
	ep->inbox_len++;
}

void
vg__server_on_ack(vg_endpoint *ep, struct vg__pkt *p)
{
	uint64_t wm, expired;

	if (peer_update(ep, &p->w, &wm, &expired) == PEER_STALE)
		ep->st.stale_dropped++;
	vg__pkt_free(ep, p);
}

void
vg__server_requeue(vg_endpoint *ep, struct vg__pkt *head,
	struct vg__pkt *tail)
{
	uint32_t n = 0;

	for (struct vg__pkt *q = head; q; q = q->next)
		n++;
	tail->next = ep->inbox_head;
	ep->inbox_head = head;
	if (ep->inbox_tail == NULL)
		ep->inbox_tail = tail;
	ep->inbox_len += n;
}

static struct vg__pkt *
inbox_pop(vg_endpoint *ep)
{
	struct vg__pkt *p = ep->inbox_head;

	ep->inbox_head = p->next;
	if (ep->inbox_head == NULL)
		ep->inbox_tail = NULL;
	ep->inbox_len--;
	p->next = NULL;
	return p;
}

/* Drop queued requests that became stale or known since they came. */
static void
inbox_prune(vg_endpoint *ep)
{
	while (ep->inbox_head) {
		const struct vg__wire *w = &ep->inbox_head->w;
		int32_t pi = vg__peer_find(ep, w->req_node, NULL);
		bool stale = false;
		if (pi >= 0) {
			const struct vg_peer_slot *p = &ep->peer[pi];
			const struct vg_peer_rec *r = &p->rec[p->sel];
			stale = w->req_inc < r->inc ||
				(w->req_inc == r->inc && w->seq < r->wm);
		}
		if (stale) {
			ep->st.stale_dropped++;
		} else if (vg__resp_find(ep, w->req_node, w->req_inc, w->seq,
				   NULL) >= 0) {
			ep->st.duplicates_dropped++;
		} else {
			return;
		}
		vg__pkt_free(ep, inbox_pop(ep));
	}
}

bool
vg__server_ready(const vg_endpoint *ep)
{
	inbox_prune((vg_endpoint *)ep);
	return ep->inbox_head != NULL && room((vg_endpoint *)ep, 1); /* S4 */
}

int
vg__server_recover(vg_endpoint *ep)
{
	uint64_t now = rio_now_ns(CLOCK_MONOTONIC);

	ep->resp_live = 0;
	ep->peers_used = 0;
	memset(ep->resp_pending, 0, (size_t)ep->resp_mask + 1);
	/* Silence is counted from now: the horizon starts again at open. */
	for (uint32_t i = 0; i <= ep->resp_mask; i++)
		ep->resp_since[i] = now;
	for (uint32_t i = 0; i <= ep->peer_mask; i++)
		ep->peer_heard[i] = now;
	/* Tables made before T7 keep every response until acknowledged. */
	if (!(ep->sb->incompat & VG_TBL_FEAT_INCOMPAT_EXPIRED))
		ep->horizon_ns = UINT64_MAX;
	ep->reclaim_due = later(now, ep->horizon_ns);
	ep->gc_dirty = true;
	for (uint32_t i = 0; i <= ep->resp_mask; i++) {
		uint32_t st = vg_slot_state(ep->resp[i].word);
		if (st == VG_RESP_RECEIVED || st == VG_RESP_ANSWERED)
			ep->resp_live++;
	}
	for (uint32_t i = 0; i <= ep->peer_mask; i++)
		if (ep->peer[i].node)
			ep->peers_used++;
	ep->gc_countdown = GC_EVERY;
	return 0;
}

/* ---- the API ---- */

static bool
request_ready(vg_endpoint *const *eps, size_t n, void *arg)
{
	(void)n;
	(void)arg;
	return vg__server_ready(eps[0]);
}

static int
take_request_tx(vg_endpoint *ep, vg_reqid *id, void *buf, size_t cap,
	size_t *len)
{
	struct vg__pkt *p;
	int32_t slot;
	int rc;

	inbox_prune(ep);
	if ((p = ep->inbox_head) == NULL)
		return vg__err(-ETIMEDOUT, "no request to deliver");
	const struct vg__wire *w = &p->w;
	*len = w->payload_len;
	if (w->payload_len > cap)
		return vg__err(-EMSGSIZE, "request %llu:%llu has %u bytes, the "
			"buffer %zu", (unsigned long long)w->req_node,
			(unsigned long long)w->seq, w->payload_len, cap);
	if (ep->resp_live >= ep->sb->resp_limit / 2 &&
	    --ep->gc_countdown == 0)
		collect(ep);
	if (!room(ep, 1))
		return vg__err(VG_EFULL, "%u requests are unanswered or their "
			"responses unacknowledged (max_responses)",
			ep->resp_live);
	if (vg__resp_find(ep, w->req_node, w->req_inc, w->seq, &slot) >= 0 ||
	    slot < 0)
		return vg__fatal(ep, VG_ECORRUPT, "response table: no slot "
			"free for request %llu:%llu",
			(unsigned long long)w->req_node,
			(unsigned long long)w->seq);
	if ((rc = vg__undo_push(ep, VG__U_RESP_INSERT, (uint32_t)slot)) != 0)
		return rc;
	struct vg_resp_slot *s = &ep->resp[slot];
	/* The txhdr too, and (S8) the answer's op record and window: the
	 * response this request usually gets in the same transaction then
	 * needs no second persist barrier, and no drain before the commit
	 * point. */
	uint32_t win = w->payload_len > VG__DECLARED_PAYLOAD_MAX ? 0 :
		w->payload_len == 0 ? 64 : (w->payload_len + 63) & ~63u;
	if (win > ep->max_message)
		win = ep->max_message;
#ifdef VG_BROKEN_RESP_UNDECLARED
	/* Deliberately broken (power-failure test): the window is not
	 * declared, yet the answer stored there is left to the commit. */
	struct vista_range r[3] = { { s, sizeof(*s) } };
	size_t nr = 1;
#else
	struct vg_op *op = vg__op_undeclared(ep);
	struct vista_range r[3] = { { s, sizeof(*s) },
		{ vg__resp_buf(ep, (uint32_t)slot), win },
		{ op, op ? sizeof(*op) : 0 } };
	size_t nr = 3;
#endif
	if ((rc = vg__declare(ep, r, nr, nr - 1, true)) != 0) {
		ep->tx.nundo--;
		return rc;
	}
#ifndef VG_BROKEN_RESP_UNDECLARED
	if (op)
		vg__op_declared(ep);
#endif
	ep->resp_window[slot] = win;
	s->node = w->req_node;
	s->inc = w->req_inc;
	s->seq = w->seq;
	if (vg__addr_from_sockaddr((struct sockaddr *)&p->from, p->fromlen,
		    &s->ret) != 0)
		memset(&s->ret, 0, sizeof(s->ret)); /* cannot happen: UDP */
	s->payload_csum = 0;
	memset(s->reserved, 0, sizeof(s->reserved));
	s->checksum = vg__resp_slot_csum(s, (uint32_t)slot);
	s->word = vg_slot_word(VG_RESP_RECEIVED, 0);
	ep->resp_pending[slot] = 1;
	ep->resp_live++;

	inbox_pop(ep);
	if (ep->tx.taken_tail)
		ep->tx.taken_tail->next = p;
	else
		ep->tx.taken_head = p;
	ep->tx.taken_tail = p;
	if (w->payload_len)
		memcpy(buf, w->payload, w->payload_len);
	id->node = w->req_node;
	id->incarnation = w->req_inc;
	id->seq = w->seq;
	return 0;
}

int
vista_receive_request(vg_endpoint *ep, vg_reqid *id, void *buf, size_t cap,
	size_t *len, int timeout_ms)
{
	int rc;

	if (ep == NULL || id == NULL || len == NULL || (buf == NULL && cap))
		return vg__err(-EINVAL, "vista_receive_request: missing "
			"argument");
	if ((rc = vg__check(ep)) != 0)
		return rc;
	rc = vg__wait(&ep, 1, timeout_ms, request_ready, NULL);
	if (rc)
		return rc;
	if ((rc = vg__call_begin(ep)) != 0)
		return rc;
	rc = take_request_tx(ep, id, buf, cap, len);
	return vg__call_end(ep, rc);
}

static int
send_response_tx(vg_endpoint *ep, const vg_reqid *id, const void *msg,
	size_t len)
{
	int32_t slot = vg__resp_find(ep, id->node, id->incarnation, id->seq,
		NULL);
	int rc;

	if (slot < 0)
		return vg__err(VG_ENOREQ, "request %llu:%llu was not received "
			"(or is answered and acknowledged)",
			(unsigned long long)id->node,
			(unsigned long long)id->seq);
	struct vg_resp_slot *s = &ep->resp[slot];
	if (vg_slot_state(s->word) == VG_RESP_ANSWERED)
		return vg__err(VG_EANSWERED, "request %llu:%llu is answered "
			"already", (unsigned long long)id->node,
			(unsigned long long)id->seq);
	if ((rc = vg__op_room(ep, 1)) != 0)
		return rc;
	bool was_pending = ep->resp_pending[slot];
	if (!was_pending &&
	    (rc = vg__undo_push(ep, VG__U_RESP_ANSWER, (uint32_t)slot)) != 0)
		return rc;
	struct vista_range r = { s, sizeof(*s) };
	rc = vg__declare(ep, &r, was_pending ? 0 : 1, 0, true);
	if (rc) {
		if (!was_pending)
			ep->tx.nundo--;
		return rc;
	}
	/* T2: into the buffer of a RECEIVED slot (no committed header
	 * refers to it): the window declared with the receive (S8), or raw,
	 * drained before the commit point. */
	uint8_t *buf = vg__resp_buf(ep, (uint32_t)slot);
	if (was_pending && len <= ep->resp_window[slot]) {
		memcpy(buf, msg, len);
#ifdef VG_BROKEN_RESP_UNDECLARED
		vg__flush(ep, buf, len);
#endif
	} else {
		vg__raw_payload(ep, buf, msg, len);
	}
	s->payload_csum = vg__wire_payload_csum(buf, len);
	s->checksum = vg__resp_slot_csum(s, (uint32_t)slot);
	s->word = vg_slot_word(VG_RESP_ANSWERED, (uint32_t)len);
	ep->resp_pending[slot] = 1;
#ifdef VG_BROKEN_RESP_UNDECLARED
	struct vg_op *op = &ep->ops[(ep->tx.gen & 1) * ep->max_ops +
		ep->tx.nops];
	ep->tx.ops_declared = ep->tx.nops + 1; /* stored plain, not drained */
#endif
	rc = vg__op_append(ep, VG_OP_SEND_RESP, (uint32_t)slot, s->node,
		s->inc, s->seq);
	if (rc)
		return vg__fatal(ep, rc, "op log");
#ifdef VG_BROKEN_RESP_UNDECLARED
	vg__flush(ep, op, sizeof(*op));
#endif
	return 0;
}

int
vista_send_response(vg_endpoint *ep, const vg_reqid *id, const void *msg,
	size_t len)
{
	int rc;

	if (ep == NULL || id == NULL || (msg == NULL && len > 0))
		return vg__err(-EINVAL, "vista_send_response: missing "
			"argument");
	if ((rc = vg__check(ep)) != 0)
		return rc;
	if (len > ep->max_message)
		return vg__err(VG_ETOOBIG, "response of %zu bytes, the tables "
			"hold at most %u", len, ep->max_message);
	if ((rc = vg__call_begin(ep)) != 0)
		return rc;
	rc = send_response_tx(ep, id, msg, len);
	return vg__call_end(ep, rc);
}
