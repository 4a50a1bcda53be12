/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * oplog.c -- the deferred-operation log: what a transaction does at commit
 *
 * Sends must not happen before the transaction that decided them commits,
 * and must happen (eventually) if it does.  So a transaction appends them
 * to a log in the segment, and:
 *
 *   append     record {gen, type, slot, key, checksum} written raw into
 *              log gen & 1 and flushed; txhdr.{committed_gen = gen, nops}
 *              stored (txhdr is declared in the transaction)
 *   pre-commit the records drained (vg_commit), so they are durable before
 *   commit     vista_end_transaction makes txhdr durable: the one flag that
 *              says "log gen is committed" (T3)
 *   replay     each record run: an operation checks that its slot still
 *              holds its key and the state it expects, so running it twice
 *              changes nothing more than running it once (a resent datagram
 *              is a duplicate the peer filters)
 *   recovery   vg_endpoint_open replays log committed_gen again: a crash
 *              during the replay (or before it) is finished there
 *
 * Invariants
 *   L1. A record of generation G is read only when txhdr says committed_gen
 *       = G and it lies below nops; each record's gen and checksum are
 *       checked first, so a stale or damaged record is never run.
 *   L2. Generation G writes half G & 1 only; the committed log (the other
 *       half, or the same half of an older generation) is never overwritten
 *       by a transaction that has not committed yet.
 *   L3. Replay changes nothing persistent (it sends), so a newer
 *       generation can replace this one as soon as it commits.  (Table
 *       changes are made in the transactions themselves, declared with
 *       vista_set_range: Vista's undo log already makes them atomic, at
 *       the price of one 64-byte range in a barrier the transaction pays
 *       anyway.)
 *   L4. A record is written raw (flushed, drained in vg_commit before the
 *       commit point), or declared with vista_set_range in the batch the
 *       transaction pays anyway (a client's request, a request received
 *       by a server, which is usually answered: vg__op_undeclared): then
 *       the commit's own fence makes it durable together with the commit
 *       flag, and Vista's commit record, whose checksum covers it, is
 *       kept by recovery only if it reached memory (no drain of its own).
 */
#include <string.h>

#include "vg_int.h"

static struct vg_op *
op_at(const vg_endpoint *ep, uint64_t gen, uint32_t i)
{
	return &ep->ops[(gen & 1) * ep->max_ops + i];
}

static uint64_t
op_csum(const struct vg_op *op)
{
	return rio_checksum(op, offsetof(struct vg_op, checksum),
		VG_TBL_OP_SEED ^ op->gen);
}

int
vg__op_room(vg_endpoint *ep, uint32_t n)
{
	if (ep->tx.nops + n > ep->max_ops)
		return vg__err(VG_EOPFULL, "transaction already holds %u "
			"deferred operations on endpoint %llu (max_ops %u)",
			ep->tx.nops, (unsigned long long)ep->node, ep->max_ops);
	return 0;
}

struct vg_op *
vg__op_undeclared(vg_endpoint *ep)
{
	if (ep->tx.ops_declared >= ep->max_ops)
		return NULL;
	return op_at(ep, ep->tx.gen, ep->tx.ops_declared);
}

void
vg__op_declared(vg_endpoint *ep)
{
	ep->tx.ops_declared++;
}

int
vg__op_append(vg_endpoint *ep, enum vg_op_type type, uint32_t slot,
	uint64_t node, uint64_t inc, uint64_t seq)
{
	struct vg_op o, *op;
	int rc = vg__op_room(ep, 1);

	if (rc)
		return rc;
	/* L2: the transaction writes generation committed_gen + 1 (txhdr
	 * says so, declared, after its first record). */
	VG_ASSERT(ep->tx.gen == ep->txh->committed_gen + (ep->tx.nops == 0),
		"L2");
	memset(&o, 0, sizeof(o));
	o.gen = ep->tx.gen;
	o.type = (uint16_t)type;
	o.slot = slot;
	o.node = node;
	o.inc = inc;
	o.seq = seq;
	o.checksum = op_csum(&o);
	op = op_at(ep, ep->tx.gen, ep->tx.nops);
	if (ep->tx.nops < ep->tx.ops_declared) {
		/* L4: declared in this transaction: Vista's
		 * commit writes it back and its checksum vouches for it. */
		*op = o;
	} else {
		vg__raw_begin(ep, op, sizeof(*op));
		*op = o;
		vg__raw_end(ep, op, sizeof(*op));
		/* Flushed now, drained once for the whole transaction in
		 * vg_commit, before the commit point makes txhdr refer to
		 * it (T2). */
		vg__flush(ep, op, sizeof(*op));
		ep->tx.raw_dirty = true;
	}
	ep->tx.nops++;
	/* txhdr is declared in this transaction: these stores become
	 * durable at its commit point, and vanish if it aborts. */
	ep->txh->nops = ep->tx.nops;
	ep->txh->committed_gen = ep->tx.gen;
#ifdef VG_BROKEN_SEND_BEFORE_COMMIT
	/* Deliberately broken (crash test): the message leaves before the
	 * transaction that sends it has committed. */
	if (type == VG_OP_SEND_RESP)
		vg__server_replay_send(ep, slot);
	else if (type == VG_OP_SEND_REQ)
		vg__client_send_req(ep, slot, false);
#endif
	return 0;
}

int
vg__op_check(vg_endpoint *ep, uint64_t gen, uint32_t n)
{
	if (n > ep->max_ops)
		return vg__err(VG_ECORRUPT, "commit flag says %u deferred "
			"operations, the log holds %u", n, ep->max_ops);
	for (uint32_t i = 0; i < n; i++) {
		const struct vg_op *op = op_at(ep, gen, i);
		uint32_t cap = op->type == VG_OP_SEND_RESP ? ep->resp_mask
							   : ep->req_mask;
		if (op->gen != gen || op->checksum != op_csum(op))
			return vg__err(VG_ECORRUPT, "deferred operation %u of "
				"generation %llu: %s", i,
				(unsigned long long)gen,
				op->gen != gen ? "stale record"
					       : "checksum mismatch");
		if (op->type < VG_OP_SEND_REQ || op->type > VG_OP_SEND_RESP ||
		    op->slot > cap || op->reserved != 0)
			return vg__err(VG_ECORRUPT, "deferred operation %u of "
				"generation %llu: type %u slot %u out of range",
				i, (unsigned long long)gen, op->type, op->slot);
	}
	return 0;
}

void
vg__op_replay(vg_endpoint *ep, uint64_t gen, uint32_t n, bool recovering)
{
	for (uint32_t i = 0; i < n; i++) {
		const struct vg_op *op = op_at(ep, gen, i);
		VG__CRASH_POINT("replay:op");
		switch (op->type) {
		case VG_OP_SEND_REQ: {
			const struct vg_req_slot *s = &ep->req[op->slot];
			if (vg_slot_state(s->word) == VG_REQ_LIVE &&
			    s->seq == op->seq)
				vg__client_replay_send(ep, op->slot);
			break;
		}
		case VG_OP_SEND_RESP: {
			const struct vg_resp_slot *s = &ep->resp[op->slot];
			if (vg_slot_state(s->word) == VG_RESP_ANSWERED &&
			    s->seq == op->seq && s->node == op->node &&
			    s->inc == op->inc)
				vg__server_replay_send(ep, op->slot);
			break;
		}
		}
		if (recovering)
			ep->st.ops_recovered++;
		else
			ep->st.ops_replayed++;
	}
}
