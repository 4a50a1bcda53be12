/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * client.c -- requests out, responses in: vista_send_request,
 *             vista_receive_response, retransmission, acknowledgements
 *
 * Life of a request (request table slot, table.c; volatile struct
 * vg__reqv):
 *
 *   FREE --vista_send_request (tx: slot declared, payload raw, SEND_REQ
 *          logged; reqv.pending)--> LIVE, uncommitted
 *        --abort--> FREE again (Vista restores the header; the payload is
 *          garbage nobody refers to)
 *   LIVE, uncommitted --commit, replay SEND_REQ--> LIVE, outstanding:
 *          on its destination's list, sent to the normal port, timer set
 *   outstanding --timer, no response yet--> sent again to the retransmit
 *          port; rto doubles up to rto_max
 *   outstanding --response datagram--> response held (reqv.resp)
 *   held --vista_receive_response (tx: state word declared;
 *          reqv.consumed)-->
 *          --abort--> held again, delivered again
 *          --commit: slot DELETED or FREE just before the commit point
 *          (vg__client_precommit_taken), then gone; the sequence number
 *          goes to the destination's ack queue
 * The slot keeps its request until the commit, so a request sent by the
 * same transaction never reuses it (and its volatile state) too early.
 * Forgetting the request needs no deferred operation: its state word is
 * declared in the same persist barrier as the program's own ranges, and
 * Vista's undo log makes the deletion atomic with them.
 *
 * Acknowledgements.  Every datagram to a server carries `low`: the
 * smallest outstanding sequence number to that server, or the committed
 * counter when there is none -- every request of ours below it is
 * finished -- and the queued acks.  A request therefore acknowledges the
 * previous response (two datagrams per cycle); acks that wait longer than
 * ack_delay go alone (ACK).
 *
 * Invariants
 *   C1. Only committed requests are outstanding, retransmitted, or counted
 *       in `low`; `low` uses the committed counter (committed_next_seq),
 *       never a value an open transaction may still roll back.
 *   C2. A destination's outstanding list is in ascending sequence order,
 *       so its head is the minimum (`low`).
 *   C3. A response is delivered at most once per transaction
 *       (reqv.consumed) and, once its transaction commits, never again:
 *       the slot is deleted, so a later copy finds no outstanding request
 *       and is dropped as stale.
 *   C4. An EXPIRED response (the server reclaimed the answer, T7) is
 *       delivered like a response, as VG_EEXPIRED with no payload: the
 *       request is finished, its outcome unknown, and never retried.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vg_int.h"

/* ---- destinations ---- */

static int32_t
dest_get(vg_endpoint *ep, const struct vg_addr *a)
{
	for (uint32_t i = 0; i < ep->ndests; i++)
		if (memcmp(&ep->dests[i].addr, a, sizeof(*a)) == 0)
			return (int32_t)i;
	if (ep->ndests == ep->dests_cap) {
		uint32_t cap = ep->dests_cap ? 2 * ep->dests_cap : 8;
		struct vg__dest *d = realloc(ep->dests, cap * sizeof(*d));
		if (d == NULL)
			return -1;
		ep->dests = d;
		ep->dests_cap = cap;
	}
	struct vg__dest *d = &ep->dests[ep->ndests];
	memset(d, 0, sizeof(*d));
	d->addr = *a;
	d->salen = vg__addr_to_sockaddr(a, 0, &d->sa);
	(void)vg__addr_to_sockaddr(a, 1, &d->rsa);
	d->head = d->tail = -1;
	return (int32_t)ep->ndests++;
}

static uint64_t
dest_low(const vg_endpoint *ep, const struct vg__dest *d)
{
	/* C1, C2 */
	return d->head >= 0 ? ep->req[d->head].seq : ep->committed_next_seq;
}

/* Insert slot into d's outstanding list, keeping C2. */
static void
dest_link(vg_endpoint *ep, int32_t di, uint32_t slot)
{
	struct vg__dest *d = &ep->dests[di];
	struct vg__reqv *rv = &ep->reqv[slot];
	uint64_t seq = ep->req[slot].seq;
	int32_t after = d->tail;

	while (after >= 0 && ep->req[after].seq > seq)
		after = ep->reqv[after].prev;
	rv->dest = di;
	rv->prev = after;
	rv->next = after >= 0 ? ep->reqv[after].next : d->head;
	if (rv->next >= 0)
		ep->reqv[rv->next].prev = (int32_t)slot;
	else
		d->tail = (int32_t)slot;
	if (after >= 0)
		ep->reqv[after].next = (int32_t)slot;
	else
		d->head = (int32_t)slot;
	rv->outstanding = true;
}

static void
dest_unlink(vg_endpoint *ep, uint32_t slot)
{
	struct vg__reqv *rv = &ep->reqv[slot];
	struct vg__dest *d = &ep->dests[rv->dest];

	if (rv->prev >= 0)
		ep->reqv[rv->prev].next = rv->next;
	else
		d->head = rv->next;
	if (rv->next >= 0)
		ep->reqv[rv->next].prev = rv->prev;
	else
		d->tail = rv->prev;
	rv->prev = rv->next = -1;
	rv->outstanding = false;
}

/* ---- datagrams out ---- */

static void
send_ack(vg_endpoint *ep, struct vg__dest *d)
{
	struct vg_wire_hdr h;
	struct vg__wire w = {
		.type = VG_PKT_ACK,
		.nacks = (uint16_t)d->nacks,
		.src_node = ep->node,
		.src_inc = ep->inc,
		.req_node = ep->node,
		.req_inc = ep->inc,
		.low = dest_low(ep, d),
	};

	vg__wire_seal(&h, &w, d->acks, vg__wire_payload_csum(NULL, 0));
	vg__net_send(ep, (struct sockaddr *)&d->sa, d->salen, &h, sizeof(h),
		d->acks, (size_t)d->nacks * 8, NULL, 0);
	d->nacks = 0;
	ep->st.acks_sent++;
}

void
vg__client_send_req(vg_endpoint *ep, uint32_t slot, bool retrans)
{
	const struct vg_req_slot *s = &ep->req[slot];
	struct vg__reqv *rv = &ep->reqv[slot];
	struct vg_wire_hdr h;
	int32_t di = rv->dest >= 0 ? rv->dest : dest_get(ep, &s->dest);

	if (di < 0)
		return; /* out of memory: the timer tries again */
	struct vg__dest *d = &ep->dests[di];
	uint64_t low = dest_low(ep, d);
	struct vg__wire w = {
		.type = VG_PKT_REQUEST,
		.flags = retrans ? VG_PKT_F_RETRANS : 0,
		.nacks = (uint16_t)d->nacks,
		.payload_len = vg_slot_len(s->word),
		.src_node = ep->node,
		.src_inc = ep->inc,
		.req_node = ep->node,
		.req_inc = ep->inc,
		.seq = s->seq,
		.low = low < s->seq ? low : s->seq,
	};

	vg__wire_seal(&h, &w, d->acks, s->payload_csum);
	vg__net_send(ep, (struct sockaddr *)(retrans ? &d->rsa : &d->sa),
		d->salen, &h, sizeof(h), d->acks, (size_t)d->nacks * 8,
		vg__req_buf(ep, slot), w.payload_len);
	d->nacks = 0;
	if (retrans)
		ep->st.retransmitted++;
	else
		ep->st.requests_sent++;
}

/* ---- commit / recovery ---- */

void
vg__client_replay_send(vg_endpoint *ep, uint32_t slot)
{
	struct vg__reqv *rv = &ep->reqv[slot];
	uint64_t now = rio_now_ns(CLOCK_MONOTONIC);

	if (!rv->outstanding) {
		int32_t di = dest_get(ep, &ep->req[slot].dest);
		if (di < 0) {
			vg__fatal(ep, -ENOMEM, "no memory for a destination");
			return;
		}
		dest_link(ep, di, slot);
	}
	rv->pending = false;
	rv->rto_us = ep->rto_us;
	rv->due_ns = now + (uint64_t)rv->rto_us * 1000;
	if (rv->due_ns < ep->next_due_ns)
		ep->next_due_ns = rv->due_ns;
	vg__client_send_req(ep, slot, false);
}

static void
queue_ack(vg_endpoint *ep, int32_t di, uint64_t seq)
{
	struct vg__dest *d = &ep->dests[di];

	if (d->nacks == VG_WIRE_MAX_ACKS)
		send_ack(ep, d);
	if (d->nacks == 0)
		d->ack_since = rio_now_ns(CLOCK_MONOTONIC);
	d->acks[d->nacks++] = seq;
}

void
vg__client_precommit_taken(vg_endpoint *ep, uint32_t slot)
{
	/* The state word is declared (vg__declare, precommit_ep): this
	 * store is the only change the transaction makes to the slot. */
	ep->reqv[slot].sweep = vg__req_delete_tx(ep, slot);
}

void
vg__client_commit_taken(vg_endpoint *ep, uint32_t slot)
{
	struct vg__reqv *rv = &ep->reqv[slot];
	int32_t di = rv->dest;
	uint64_t seq = ep->req[slot].seq; /* the key stays in a deleted slot */

	if (rv->sweep) {
		/* T4: the deletion is committed; S9 (server.c): the commit
		 * that declared the slot is ended for good before the raw
		 * stores free it and its run's tombstones. */
		(void)vg__settle(ep);
		vg__req_sweep(ep, slot);
	}
	if (rv->outstanding)
		dest_unlink(ep, slot);
	if (rv->resp && (rv->resp->w.flags & VG_PKT_F_EXPIRED))
		ep->st.expired_delivered++;
	else
		ep->st.responses_delivered++;
	if (rv->resp)
		vg__pkt_free(ep, rv->resp);
	memset(rv, 0, sizeof(*rv));
	rv->prev = rv->next = rv->dest = -1;
	ep->req_live--;
	if (di >= 0)
		queue_ack(ep, di, seq);
}

int
vg__client_recover(vg_endpoint *ep)
{
	uint64_t now = rio_now_ns(CLOCK_MONOTONIC);

	ep->req_live = 0;
	ep->resp_ready = 0;
	ep->next_due_ns = UINT64_MAX;
	ep->committed_next_seq = ep->txh->next_seq;
	for (uint32_t i = 0; i <= ep->req_mask; i++) {
		struct vg__reqv *rv = &ep->reqv[i];
		memset(rv, 0, sizeof(*rv));
		rv->prev = rv->next = rv->dest = -1;
	}
	for (uint32_t i = 0; i <= ep->req_mask; i++) {
		if (vg_slot_state(ep->req[i].word) != VG_REQ_LIVE)
			continue;
		int32_t di = dest_get(ep, &ep->req[i].dest);
		if (di < 0)
			return vg__err(-ENOMEM, "destinations");
		dest_link(ep, di, i);
		ep->reqv[i].rto_us = ep->rto_us;
		/* Retransmitted at the first opportunity: the original may have
		 * been lost with the crash. */
		ep->reqv[i].due_ns = now;
		ep->next_due_ns = now;
		ep->req_live++;
	}
	return 0;
}

void
vg__client_flush_acks(vg_endpoint *ep)
{
	for (uint32_t i = 0; i < ep->ndests; i++)
		if (ep->dests[i].nacks)
			send_ack(ep, &ep->dests[i]);
}

bool
vg__client_ready(const vg_endpoint *ep)
{
	return ep->resp_ready > 0;
}

/* ---- datagrams in ---- */

void
vg__client_on_response(vg_endpoint *ep, struct vg__pkt *p)
{
	const struct vg__wire *w = &p->w;
	int32_t slot;

	if (w->req_node != ep->node || w->req_inc != ep->inc ||
	    (slot = vg__req_find(ep, w->seq, NULL)) < 0 ||
	    !ep->reqv[slot].outstanding) {
		ep->st.stale_dropped++; /* C3 */
		vg__pkt_free(ep, p);
		return;
	}
	struct vg__reqv *rv = &ep->reqv[slot];
	if (rv->resp) {
		ep->st.duplicates_dropped++;
		vg__pkt_free(ep, p);
		return;
	}
	rv->resp = p;
	ep->resp_ready++;
}

uint64_t
vg__client_timers(vg_endpoint *ep, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	if (now >= ep->next_due_ns) {
		for (uint32_t i = 0; i < ep->ndests; i++) {
			for (int32_t s = ep->dests[i].head; s >= 0;
			     s = ep->reqv[s].next) {
				struct vg__reqv *rv = &ep->reqv[s];
				if (rv->resp)
					continue; /* answered, not taken yet */
				if (rv->due_ns <= now) {
					vg__client_send_req(ep, (uint32_t)s,
						true);
					rv->rto_us = rv->rto_us * 2 <
							ep->rto_max_us
						? rv->rto_us * 2
						: ep->rto_max_us;
					rv->due_ns = now +
						(uint64_t)rv->rto_us * 1000;
				}
				if (rv->due_ns < next)
					next = rv->due_ns;
			}
		}
		ep->next_due_ns = next;
	}
	next = ep->next_due_ns;
	for (uint32_t i = 0; i < ep->ndests; i++) {
		struct vg__dest *d = &ep->dests[i];
		if (d->nacks == 0)
			continue;
		uint64_t due = d->ack_since + (uint64_t)ep->ack_delay_us * 1000;
		if (due <= now)
			send_ack(ep, d);
		else if (due < next)
			next = due;
	}
	return next;
}

/* ---- the API ---- */

static int
send_request_tx(vg_endpoint *ep, const struct vg_addr *dest, const void *msg,
	size_t len, uint64_t *seq_out)
{
	uint64_t seq = ep->txh->next_seq;
	int32_t slot;
	int rc;

	if (ep->req_live >= ep->sb->req_limit)
		return vg__err(VG_EFULL, "%u requests are outstanding "
			"(max_requests)", ep->req_live);
	if ((rc = vg__op_room(ep, 1)) != 0)
		return rc;
	/* T5: sequence numbers only grow, from 1. */
	VG_ASSERT(seq != 0 && seq >= ep->committed_next_seq, "T5");
	if (vg__req_find(ep, seq, &slot) >= 0)
		return vg__fatal(ep, VG_ECORRUPT, "request table: sequence "
			"number %llu is in use", (unsigned long long)seq);
	if (slot < 0) /* cannot happen: twice as many slots as requests */
		return vg__err(VG_EFULL, "request table: no slot free");
	if ((rc = vg__undo_push(ep, VG__U_REQ_INSERT, (uint32_t)slot)) != 0)
		return rc;
	struct vg_req_slot *s = &ep->req[slot];
	uint8_t *buf = vg__req_buf(ep, (uint32_t)slot);
	/* T2: the payload and the op record go where no committed header
	 * or commit flag refers to.  A short payload and the record are
	 * declared in the same batch as the slot (one persist barrier), as
	 * new ranges: their old bytes are never needed, so nothing of them
	 * is logged.  Vista's commit writes them back with the slot and the
	 * flag, and its commit record's checksum covers them, so they need
	 * no drain of their own before the commit point (X2).  A long
	 * payload is written raw instead (the commit's checksum over it
	 * would cost more than the drain it saves) and drained in
	 * vg_commit. */
	bool decl = len <= VG__DECLARED_PAYLOAD_MAX;
#ifdef VG_BROKEN_SEND_UNDECLARED
	/* Deliberately broken (power-failure test): payload and record are
	 * stored plain but left undeclared and undrained, as if the commit's
	 * checksum covered them: a commit record whose declared bytes
	 * reached memory is kept whatever became of them. */
	struct vista_range r[3] = { { s, sizeof(*s) } };
	size_t nr = 1;
	struct vg_op *op = &ep->ops[(ep->tx.gen & 1) * ep->max_ops +
		ep->tx.nops];
#else
	struct vg_op *op = vg__op_undeclared(ep);
	struct vista_range r[3] = { { s, sizeof(*s) },
		{ buf, decl ? len : 0 }, { op, op ? sizeof(*op) : 0 } };
	size_t nr = 3;
#endif
#ifdef VG_BROKEN_SLOT_NEW
	/* Deliberately broken (power-failure test): the slot is declared
	 * new like its payload, so a rolled-back send leaves it LIVE. */
	size_t nnew = nr;
#else
	size_t nnew = nr - 1; /* payload and record: new (T2) */
#endif
	if ((rc = vg__declare(ep, r, nr, nnew, true)) != 0) {
		ep->tx.nundo--;
		return rc;
	}
#ifdef VG_BROKEN_SEND_UNDECLARED
	ep->tx.ops_declared = ep->tx.nops + 1; /* stored plain, not drained */
#else
	if (op)
		vg__op_declared(ep);
#endif
	if (decl)
		memcpy(buf, msg, len);
	else
		vg__raw_payload(ep, buf, msg, len);

	s->seq = seq;
	s->dest = *dest;
	s->payload_csum = vg__wire_payload_csum(buf, len);
	s->reserved = 0;
	s->checksum = vg__req_slot_csum(s, (uint32_t)slot);
	s->word = vg_slot_word(VG_REQ_LIVE, (uint32_t)len);
	ep->txh->next_seq = seq + 1;

	struct vg__reqv *rv = &ep->reqv[slot];
	memset(rv, 0, sizeof(*rv));
	rv->prev = rv->next = rv->dest = -1;
	rv->pending = true;
	ep->req_live++;
	rc = vg__op_append(ep, VG_OP_SEND_REQ, (uint32_t)slot, ep->node,
		ep->inc, seq);
	if (rc) /* cannot happen: room was checked */
		return vg__fatal(ep, rc, "op log");
#ifdef VG_BROKEN_SEND_UNDECLARED
	vg__flush(ep, op, sizeof(*op));
	if (decl)
		vg__flush(ep, buf, len);
#endif
	if (seq_out)
		*seq_out = seq;
	return 0;
}

int
vista_send_request(vg_endpoint *ep, const struct sockaddr *to,
	socklen_t tolen, const void *msg, size_t len, uint64_t *seq)
{
	struct vg_addr dest;
	int rc;

	if (ep == NULL || (msg == NULL && len > 0))
		return vg__err(-EINVAL, "vista_send_request: no %s",
			ep ? "message" : "endpoint");
	if ((rc = vg__check(ep)) != 0)
		return rc;
	if (len > ep->max_message)
		return vg__err(VG_ETOOBIG, "request of %zu bytes, the tables "
			"hold at most %u", len, ep->max_message);
	if ((rc = vg__addr_from_sockaddr(to, tolen, &dest)) != 0)
		return rc;
	if (dest.port == 65535)
		return vg__err(VG_EADDR, "port 65535 has no retransmit port");
	if ((rc = vg__call_begin(ep)) != 0)
		return rc;
	rc = send_request_tx(ep, &dest, msg, len, seq);
	return vg__call_end(ep, rc);
}

struct want {
	uint64_t seq;
	int32_t slot;
};

static bool
response_ready(vg_endpoint *const *eps, size_t n, void *arg)
{
	const struct want *wt = arg;
	const struct vg__reqv *rv;

	(void)n;
	if (wt->seq == 0)
		return eps[0]->resp_ready > 0;
	rv = &eps[0]->reqv[wt->slot];
	return rv->resp && !rv->consumed;
}

static bool
any_outstanding(const vg_endpoint *ep)
{
	for (uint32_t i = 0; i < ep->ndests; i++)
		for (int32_t s = ep->dests[i].head; s >= 0;
		     s = ep->reqv[s].next)
			if (!ep->reqv[s].consumed)
				return true;
	return false;
}

/* Choose the slot whose response to deliver: *seq's, or the lowest. */
static int32_t
pick_response(const vg_endpoint *ep, uint64_t seq)
{
	int32_t best = -1;

	if (seq)
		return vg__req_find(ep, seq, NULL);
	for (uint32_t i = 0; i < ep->ndests; i++)
		for (int32_t s = ep->dests[i].head; s >= 0;
		     s = ep->reqv[s].next)
			if (ep->reqv[s].resp && !ep->reqv[s].consumed &&
			    (best < 0 || ep->req[s].seq < ep->req[best].seq))
				best = s;
	return best;
}

static int
take_response_tx(vg_endpoint *ep, uint64_t *seq, void *buf, size_t cap,
	size_t *len)
{
	int32_t slot = pick_response(ep, *seq);
	struct vg__reqv *rv;
	int rc;

	if (slot < 0 || !(rv = &ep->reqv[slot])->resp || rv->consumed)
		return vg__err(-ETIMEDOUT, "no response to deliver");
	const struct vg__wire *w = &rv->resp->w;
	*len = w->payload_len;
	if (w->payload_len > cap)
		return vg__err(-EMSGSIZE, "response to request %llu has %u "
			"bytes, the buffer %zu",
			(unsigned long long)ep->req[slot].seq, w->payload_len,
			cap);
	/* The request is forgotten in this transaction: its state word is
	 * declared, so an abort brings it back with its response.  The word
	 * is all the transaction changes in the slot (the deletion just
	 * before the commit point, vg__client_precommit_taken; the key stays
	 * in a deleted slot), so its 8 bytes are the whole before-image: a
	 * record of one cache line, where the 64-byte header took two.  And
	 * as nothing is stored to it before the commit point, it is declared
	 * with the next declaration of the transaction (a request it sends)
	 * or at the commit: in a barrier paid anyway, or in one of its own. */
	if ((rc = vg__undo_push(ep, VG__U_RESP_TAKEN, (uint32_t)slot)) != 0)
		return rc;
	uint64_t s = ep->req[slot].seq;
	if (w->payload_len)
		memcpy(buf, w->payload, w->payload_len);
	rv->consumed = true;
	ep->resp_ready--;
	*seq = s;
	if (w->flags & VG_PKT_F_EXPIRED) /* C4 */
		return vg__err(VG_EEXPIRED, "request %llu: the server "
			"reclaimed its response (this client was silent past "
			"the server's horizon); it may or may not have taken "
			"effect", (unsigned long long)s);
	return 0;
}

int
vista_receive_response(vg_endpoint *ep, uint64_t *seq, void *buf, size_t cap,
	size_t *len, int timeout_ms)
{
	struct want wt;
	int rc;

	if (ep == NULL || seq == NULL || len == NULL || (buf == NULL && cap))
		return vg__err(-EINVAL, "vista_receive_response: missing "
			"argument");
	if ((rc = vg__check(ep)) != 0)
		return rc;
	wt.seq = *seq;
	wt.slot = -1;
	if (wt.seq) {
		wt.slot = vg__req_find(ep, wt.seq, NULL);
		if (wt.slot < 0)
			return vg__err(VG_ENOREQ, "request %llu is not "
				"outstanding", (unsigned long long)wt.seq);
		if (ep->reqv[wt.slot].pending)
			return vg__err(VG_EUNCOMMITTED, "request %llu was sent "
				"by the open transaction",
				(unsigned long long)wt.seq);
		if (ep->reqv[wt.slot].consumed)
			return vg__err(VG_ENOREQ, "the response to request %llu "
				"was received by the open transaction already",
				(unsigned long long)wt.seq);
	} else if (!any_outstanding(ep)) {
		return vg__err(VG_ENOREQ, "no committed request is waiting for "
			"its response");
	}
	rc = vg__wait(&ep, 1, timeout_ms, response_ready, &wt);
	if (rc)
		return rc;
	if ((rc = vg__call_begin(ep)) != 0)
		return rc;
	rc = take_response_tx(ep, seq, buf, cap, len);
	if (rc != VG_EEXPIRED)
		return vg__call_end(ep, rc);
	/* C4: an outcome, taken like a response: a call that is its own
	 * transaction commits it. */
	char why[256];
	snprintf(why, sizeof(why), "%s", vg_errormsg());
	if ((rc = vg__call_end(ep, 0)) != 0)
		return rc;
	return vg__err(VG_EEXPIRED, "%s", why);
}
