/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * txn.c -- Vistagrams transactions: vg_begin, vg_commit, vg_abort
 *
 * A Vista transaction plus, per thread, the list of endpoints it used.
 * Each endpoint keeps its share (struct vg__eptx): the generation of its
 * deferred-operation log, and undo records for its *volatile* state (what
 * Vista cannot roll back: pending flags, consumed messages).
 *
 * State machine of a thread's context (ctx.active):
 *
 *   IDLE --vg_begin / a call outside a tx--> ACTIVE
 *   ACTIVE --vg__call_begin(ep)--> ACTIVE, ep joined (ep->tx.joined)
 *   ACTIVE --vg_commit--> [drain raw writes] --vista_end_transaction-->
 *          (commit point) --replay each endpoint's log--> IDLE
 *   ACTIVE --vg_abort--> vista_abort_transaction --volatile undo--> IDLE
 *
 * Invariants
 *   X1. Every endpoint joined to a transaction has ep->tx.owner == the
 *       context of that thread; another thread's call is refused
 *       (VG_EOTHERTX) instead of mixing two transactions in one log.
 *   X2. The commit point is vista_end_transaction(): before it, the raw
 *       writes of the transaction (payloads, op records not declared, T2)
 *       are drained -- the declared ones are covered by Vista's commit
 *       record and written back by its commit, with no drain here; after
 *       it, the logs are replayed before any other call of this thread can
 *       run.  A failed commit puts every joined endpoint in its error state.
 *   X3. A transaction that Vista ended behind our back (the program called
 *       vista_end_transaction/vista_abort_transaction itself) is detected at
 *       the next call, and its endpoints go to their error state: reopening
 *       them recovers whatever did commit.
 *   X4. Volatile endpoints have no Vista transaction: each call is its own
 *       "transaction" and its log is replayed when it returns.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vg_int.h"

struct vg__ctx {
	vista *v;
	bool active;
	vg_endpoint *eps; /* joined endpoints, via ep->tx.next */
};

static __thread struct vg__ctx ctx;

void (*vg__crash_hook)(const char *where);

int
vg__undo_push(vg_endpoint *ep, enum vg__undo_kind kind, uint32_t slot)
{
	struct vg__eptx *t = &ep->tx;

	if (t->nundo == t->undo_cap) {
		uint32_t cap = t->undo_cap ? 2 * t->undo_cap : 64;
		struct vg__undo *u = realloc(t->undo, cap * sizeof(*u));
		if (u == NULL)
			return vg__err(-ENOMEM, "undo records for %u slots",
				cap);
		t->undo = u;
		t->undo_cap = cap;
	}
	t->undo[t->nundo++] = (struct vg__undo){ kind, slot };
	return 0;
}

int
vg__declare(vg_endpoint *ep, const struct vista_range *a, size_t na,
	size_t nnew, bool with_txhdr)
{
	struct vg__eptx *t = &ep->tx;
	struct vista_range stack[8], *r = stack;
	size_t n = 0, ntaken = 0, nold;
	int rc = 0;

	if (vg__volatile(ep))
		return 0;
	for (uint32_t i = t->undo_declared; i < t->nundo; i++)
		ntaken += t->undo[i].kind == VG__U_RESP_TAKEN;
	if (na + 1 + ntaken > sizeof(stack) / sizeof(stack[0]) &&
	    (r = malloc((na + 1 + ntaken) * sizeof(*r))) == NULL)
		return vg__err(-ENOMEM, "declaring %zu ranges",
			na + 1 + ntaken);
	for (size_t i = 0; i + nnew < na; i++)
		if (a[i].len)
			r[n++] = a[i];
	if (with_txhdr && !t->txhdr_declared)
		r[n++] = (struct vista_range){ ep->txh, sizeof(*ep->txh) };
	/* The requests taken since the last declaration: their state
	 * words change only at the commit point, so their before-images can
	 * wait for a barrier this call or the commit pays anyway. */
	for (uint32_t i = t->undo_declared; i < t->nundo; i++)
		if (t->undo[i].kind == VG__U_RESP_TAKEN)
			r[n++] = (struct vista_range){
				&ep->req[t->undo[i].slot].word,
				sizeof(ep->req[0].word) };
	/* The new ranges last: bytes no committed header refers to (T2), so
	 * nothing of them is logged; the commit writes them back and its
	 * checksum covers them. */
	nold = n;
	for (size_t i = na - nnew; i < na; i++)
		if (a[i].len)
			r[n++] = a[i];
	if (n == 1 && nold == 1)
		rc = vista_set_range(ep->v, r[0].addr, r[0].len);
	else if (n == 1)
		rc = vista_set_range_new(ep->v, r[0].addr, r[0].len);
	else if (n > 1)
		rc = vista_set_ranges_new(ep->v, n, nold, r);
	if (r != stack)
		free(r);
	if (rc)
		return rc;
	if (with_txhdr)
		t->txhdr_declared = true;
	t->undo_declared = t->nundo;
	return 0;
}

void
vg__raw_payload(vg_endpoint *ep, uint8_t *buf, const void *msg, size_t len)
{
	vg__raw_begin(ep, buf, len);
	memcpy(buf, msg, len);
	vg__raw_end(ep, buf, len);
#ifndef VG_BROKEN_NO_PAYLOAD_FLUSH
	/* Flushed here, drained in vg_commit before the commit point
	 * (raw_dirty, X2): the slot the commit makes valid checksums this
	 * payload. */
	vg__flush(ep, buf, len);
#else
	/* Deliberately broken (power-failure test): the payload is never
	 * flushed, so a committed slot may point at old bytes. */
#endif
	ep->tx.raw_dirty = true;
}

static void
join(vg_endpoint *ep, bool implicit)
{
	struct vg__eptx *t = &ep->tx;

	t->joined = true;
	t->implicit = implicit;
	t->owner = &ctx;
	t->gen = ep->txh->committed_gen + 1;
	t->nops = 0;
	t->ops_declared = 0;
	t->txhdr_declared = false;
	t->raw_dirty = false;
	t->nundo = 0;
	t->undo_declared = 0;
	t->taken_head = t->taken_tail = NULL;
	if (!vg__volatile(ep)) {
		t->next = ctx.eps;
		ctx.eps = ep;
	}
}

static void
leave(vg_endpoint *ep)
{
	ep->tx.joined = false;
	ep->tx.implicit = false;
	ep->tx.owner = NULL;
	ep->tx.nundo = 0;
	ep->tx.taken_head = ep->tx.taken_tail = NULL;
	ep->tx.next = NULL;
}

/* Just before the commit point: the changes left for last, declared
 * first if no later call of the transaction declared them already. */
static int
precommit_ep(vg_endpoint *ep)
{
	int rc = vg__declare(ep, NULL, 0, 0, false);

	if (rc)
		return rc;
	for (uint32_t i = 0; i < ep->tx.nundo; i++)
		if (ep->tx.undo[i].kind == VG__U_RESP_TAKEN)
			vg__client_precommit_taken(ep, ep->tx.undo[i].slot);
	return 0;
}

/* After the commit point: replay the log, settle the volatile state. */
static void
commit_ep(vg_endpoint *ep)
{
	struct vg__eptx *t = &ep->tx;

	ep->committed_next_seq = ep->txh->next_seq;
	if (t->nops)
		vg__op_replay(ep, t->gen, t->nops, false);
	for (uint32_t i = 0; i < t->nundo; i++) {
		const struct vg__undo *u = &t->undo[i];
		if (u->kind == VG__U_REQ_INSERT)
			ep->reqv[u->slot].pending = false;
		else if (u->kind == VG__U_RESP_TAKEN)
			vg__client_commit_taken(ep, u->slot);
		else
			ep->resp_pending[u->slot] = 0;
	}
	for (struct vg__pkt *p = t->taken_head, *n; p; p = n) {
		n = p->next;
		ep->st.requests_delivered++;
		vg__pkt_free(ep, p);
	}
	if (!vg__volatile(ep))
		ep->st.tx_committed++;
	leave(ep);
}

/* After Vista rolled the segment back: roll the volatile state back. */
static void
abort_ep(vg_endpoint *ep)
{
	struct vg__eptx *t = &ep->tx;

	for (uint32_t i = t->nundo; i-- > 0;) {
		const struct vg__undo *u = &t->undo[i];
		switch (u->kind) {
		case VG__U_REQ_INSERT:
			ep->reqv[u->slot].pending = false;
			ep->req_live--;
			break;
		case VG__U_RESP_INSERT:
			ep->resp_pending[u->slot] = 0;
			ep->resp_live--;
			break;
		case VG__U_RESP_ANSWER:
			ep->resp_pending[u->slot] = 0;
			break;
		case VG__U_RESP_TAKEN:
			ep->reqv[u->slot].consumed = false;
			ep->reqv[u->slot].sweep = false;
			ep->resp_ready++;
			break;
		}
	}
	if (t->taken_head)
		vg__server_requeue(ep, t->taken_head, t->taken_tail);
	if (!vg__volatile(ep))
		ep->st.tx_aborted++;
	leave(ep);
}

static void
ctx_reset(void)
{
	ctx.active = false;
	ctx.v = NULL;
	ctx.eps = NULL;
}

/* X3: Vista's transaction is gone but ours is not. */
static int
ended_behind_our_back(const char *call)
{
	for (vg_endpoint *ep = ctx.eps, *n; ep; ep = n) {
		n = ep->tx.next;
		vg__fatal(ep, VG_ENOTX, "the transaction was ended outside "
			"vg_commit/vg_abort (seen by %s)", call);
		leave(ep);
	}
	ctx_reset();
	return vg__err(VG_EFATAL, "%s: the Vista transaction was ended with "
		"vista_end_transaction/vista_abort_transaction instead of "
		"vg_commit/vg_abort; close and reopen the endpoints", call);
}

int
vg_begin(vista *v, unsigned flags)
{
	int rc;

	if (v == NULL)
		return vg__err(-EINVAL, "vg_begin: no vista instance");
	if (flags & VISTA_TX_AUTO)
		return vg__err(-EINVAL, "vg_begin: VISTA_TX_AUTO transactions "
			"cannot carry Vistagrams (the tables are also updated "
			"outside transactions)");
	if (ctx.active)
		return vg__err(VG_EINTX, "vg_begin: this thread's transaction "
			"is still open");
	rc = vista_begin_transaction(v, flags);
	if (rc)
		return rc;
	ctx.v = v;
	ctx.active = true;
	ctx.eps = NULL;
	return 0;
}

int
vg_commit(vista *v)
{
	int rc;

	if (!ctx.active)
		return vg__err(VG_ENOTX, "vg_commit: no transaction is open on "
			"this thread");
	if (v != ctx.v)
		return vg__err(-EINVAL, "vg_commit: not the vista instance of "
			"the open transaction");
	for (vg_endpoint *ep = ctx.eps; ep; ep = ep->tx.next) {
		if (ep->error) {
			(void)vg_abort(v);
			return vg__check(ep);
		}
	}
	/*
	 * X2, T2: the payloads and op records written raw in this transaction
	 * (flushed, not drained) must be durable before the commit point,
	 * which makes the slot headers and the commit flag refer to them.
	 * Vista's commit cannot give that: its one fence makes the declared
	 * ranges and the commit record durable together, and recovery keeps
	 * a transaction whose commit record and declared bytes reached
	 * memory, whatever became of bytes outside them -- a payload still in
	 * the cache would then sit behind a committed slot.  So the raw
	 * writes are drained first (below); one drain orders every earlier
	 * flush of this thread, which made all of them (X1), in every pool
	 * of the instance (one persistence domain).
	 */
	for (vg_endpoint *ep = ctx.eps; ep; ep = ep->tx.next) {
		rc = precommit_ep(ep);
		if (rc == VISTA_ENOTX)
			return ended_behind_our_back("vg_commit");
		if (rc) {
			/* Nothing is lost: the transaction is rolled back and
			 * the responses it took are delivered again. */
			(void)vg_abort(v);
			return rc;
		}
	}
#ifndef VG_BROKEN_NO_RAW_DRAIN
	for (vg_endpoint *ep = ctx.eps; ep; ep = ep->tx.next) {
		if (ep->tx.raw_dirty) {
			/* X2: the raw payloads and op records are durable
			 * before the commit can make anything refer to them */
			vg__drain(ep);
			break;
		}
	}
#else
	/* Deliberately broken (power-failure test): the raw writes are left
	 * to Vista's commit fence, which a commit record whose declared
	 * bytes reached memory does not wait for. */
#endif
	VG__CRASH_POINT("commit:before");
	rc = vista_end_transaction(v);
	if (rc == VISTA_ENOTX)
		return ended_behind_our_back("vg_commit");
	if (rc) {
		char why[256];
		snprintf(why, sizeof(why), "%s", vg_errormsg());
		for (vg_endpoint *ep = ctx.eps, *n; ep; ep = n) {
			n = ep->tx.next;
			vg__fatal(ep, rc, "commit failed: %s", why);
			leave(ep);
		}
		ctx_reset();
		return rio_seterr(rc, "vg_commit: %s", why);
	}
	VG__CRASH_POINT("commit:after");
	vg_endpoint *eps = ctx.eps;
	ctx_reset();
	for (vg_endpoint *ep = eps, *n; ep; ep = n) {
		n = ep->tx.next;
		commit_ep(ep);
	}
	return 0;
}

int
vg_abort(vista *v)
{
	int rc;

	if (!ctx.active)
		return vg__err(VG_ENOTX, "vg_abort: no transaction is open on "
			"this thread");
	if (v != ctx.v)
		return vg__err(-EINVAL, "vg_abort: not the vista instance of "
			"the open transaction");
	rc = vista_abort_transaction(v);
	if (rc == VISTA_ENOTX)
		return ended_behind_our_back("vg_abort");
	vg_endpoint *eps = ctx.eps;
	ctx_reset();
	for (vg_endpoint *ep = eps, *n; ep; ep = n) {
		n = ep->tx.next;
		if (rc) {
			vg__fatal(ep, rc, "abort failed: %s", vg_errormsg());
			leave(ep);
		} else {
			abort_ep(ep);
		}
	}
	return rc;
}

int
vg__call_begin(vg_endpoint *ep)
{
	int rc = vg__check(ep);

	if (rc)
		return rc;
	if (vg__volatile(ep)) {
		join(ep, true); /* X4 */
		return 0;
	}
	if (!ctx.active) {
		rc = vg_begin(ep->v, 0);
		if (rc)
			return rc;
		join(ep, true);
		return 0;
	}
	if (ctx.v != ep->v)
		return vg__err(VG_EOTHERTX, "endpoint %llu belongs to another "
			"vista instance than this thread's transaction",
			(unsigned long long)ep->node);
	if (!vista_in_transaction(ctx.v))
		return ended_behind_our_back("a Vistagrams call");
	if (ep->tx.joined) {
		if (ep->tx.owner != &ctx)
			return vg__err(VG_EOTHERTX, "endpoint %llu is in "
				"another thread's transaction",
				(unsigned long long)ep->node);
		return 0;
	}
	join(ep, false);
	return 0;
}

int
vg__call_end(vg_endpoint *ep, int rc)
{
	if (!ep->tx.implicit)
		return rc;
	if (vg__volatile(ep)) {
		/* X4: a call that fails has changed nothing persistent (the
		 * calls check before they store); undo the volatile side. */
		if (rc == 0) {
			(void)precommit_ep(ep); /* declares nothing */
			commit_ep(ep);
		} else {
			abort_ep(ep);
		}
		return rc;
	}
	if (rc == 0)
		return vg_commit(ep->v);
	(void)vg_abort(ep->v);
	return rc;
}
