/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * server.c -- requests in, responses out: vista_receive_request,
 *             vista_send_response, the retransmit port, client watermarks
 *
 * Life of a request at the server (response table slot; volatile
 * resp_pending flag while an open transaction holds it):
 *
 *   datagram --not known, not below the client's watermark--> inbox
 *   inbox --vista_receive_request (tx: slot declared, RECEIVED)-->
 *          --abort--> back at the head of the inbox
 *   RECEIVED --vista_send_response (tx: payload raw, ANSWERED,
 *          SEND_RESP logged)--> --commit, replay--> response sent
 *   ANSWERED --the client acknowledges (ack below its watermark, or the
 *          watermark passes it; garbage collection)--> DELETED
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

static void
forget(vg_endpoint *ep, uint32_t slot)
{
	vg__resp_delete(ep, slot);
	ep->resp_live--;
	ep->st.responses_freed++;
}

void
vg__server_replay_send(vg_endpoint *ep, uint32_t slot)
{
	struct sockaddr_storage to;
	socklen_t len = vg__addr_to_sockaddr(&ep->resp[slot].ret, 0, &to);

	send_response(ep, slot, (struct sockaddr *)&to, len);
	ep->st.responses_sent++;
#ifdef VG_BROKEN_FORGET_RESPONSE
	/* Deliberately broken (crash and fault tests): the response is not
	 * kept for retransmission, nor the request for duplicate filtering. */
	vg__resp_delete(ep, slot);
	ep->resp_live--;
#endif
}

/* ---- peers ---- */

/* S2: before deleting on the strength of a watermark, make it durable. */
static void
drain_watermarks(vg_endpoint *ep)
{
	if (ep->wm_undrained) {
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
	p->reserved[0] = p->reserved[1] = 0;
	vg__raw_end(ep, p, sizeof(*p));
	vg__flush(ep, p, sizeof(*p));
	/* The record must be durable before `node` makes the slot valid. */
	vg__drain(ep);
	vg__raw_store64(ep, &p->node, node);
	ep->wm_undrained = true;
	ep->peers_used++;
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

uint64_t
vg__server_timers(vg_endpoint *ep, uint64_t now)
{
	uint64_t due;

	if (ep->ndoomed == 0)
		return UINT64_MAX;
	due = ep->doomed_since + (uint64_t)ep->ack_delay_us * 1000;
	if (now < due)
		return due;
	vg__server_forget_doomed(ep);
	return UINT64_MAX;
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
		ep->doomed_since = vg__now_ns();
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

/*
 * Account for a client's datagram: its incarnation, watermark and acks.
 * Returns false if the datagram is stale (older incarnation); *wm gets the
 * watermark of the client (0 if it cannot be tracked: the peer table is
 * full; then nothing of it is ever forgotten, which is safe).
 */
static bool
peer_update(vg_endpoint *ep, const struct vg__wire *w, uint64_t *wm)
{
	int32_t ins, i = vg__peer_find(ep, w->req_node, &ins);
	struct vg_peer_slot *p;

	*wm = 0;
	if (i < 0) {
		i = peer_insert(ep, ins, w->req_node, w->req_inc, w->low);
		if (i < 0)
			return true;
	}
	p = &ep->peer[i];
	struct vg_peer_rec *r = &p->rec[p->sel];
	if (w->req_inc < r->inc)
		return false;
	if (w->req_inc > r->inc) {
		/* T6: a new incarnation of the client (its tables were
		 * made anew): new record, drained, then one store flips. */
		uint64_t other = p->sel ^ 1;
		vg__raw_begin(ep, &p->rec[other], sizeof(p->rec[other]));
		p->rec[other] = (struct vg_peer_rec){ w->req_inc, w->low };
		vg__raw_end(ep, &p->rec[other], sizeof(p->rec[other]));
		vg__flush(ep, &p->rec[other], sizeof(p->rec[other]));
		/* The new record before the selector that points at it. */
		vg__drain(ep);
		vg__raw_store64(ep, &p->sel, other);
		ep->wm_undrained = true;
		purge_incarnation(ep, w->req_node, w->req_inc);
		r = &p->rec[p->sel];
	} else if (w->low > r->wm) {
		vg__raw_store64(ep, &r->wm, w->low);
		ep->wm_undrained = true;
	}
	*wm = r->wm;
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
	return true;
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
	uint64_t wm;
	int32_t slot;

	if (!peer_update(ep, w, &wm) || w->seq < wm) {
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
	uint64_t wm;

	if (!peer_update(ep, &p->w, &wm))
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
	return ep->inbox_head != NULL;
}

int
vg__server_recover(vg_endpoint *ep)
{
	ep->resp_live = 0;
	ep->peers_used = 0;
	memset(ep->resp_pending, 0, (size_t)ep->resp_mask + 1);
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
	if (ep->resp_live >= ep->sb->resp_limit)
		collect(ep);
	if (ep->resp_live >= ep->sb->resp_limit)
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
	/* The txhdr too: the response this request usually gets in the same
	 * transaction then needs no second persist barrier. */
	if ((rc = vg__declare(ep, s, sizeof(*s), true)) != 0) {
		ep->tx.nundo--;
		return rc;
	}
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
	rc = vg__declare(ep, was_pending ? NULL : s,
		was_pending ? 0 : sizeof(*s), true);
	if (rc) {
		if (!was_pending)
			ep->tx.nundo--;
		return rc;
	}
	/* T2: raw into the buffer of a RECEIVED slot (no committed header
	 * refers to it), drained before the commit point. */
	uint8_t *buf = vg__resp_buf(ep, (uint32_t)slot);
	vg__raw_begin(ep, buf, len);
	memcpy(buf, msg, len);
	vg__raw_end(ep, buf, len);
	vg__flush(ep, buf, len);
	ep->tx.raw_dirty = true;
	s->payload_csum = vg__wire_payload_csum(buf, len);
	s->checksum = vg__resp_slot_csum(s, (uint32_t)slot);
	s->word = vg_slot_word(VG_RESP_ANSWERED, (uint32_t)len);
	ep->resp_pending[slot] = 1;
	rc = vg__op_append(ep, VG_OP_SEND_RESP, (uint32_t)slot, s->node,
		s->inc, s->seq);
	if (rc)
		return vg__fatal(ep, rc, "op log");
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
