/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * table.c -- the persistent hash tables: request, response and peer
 *
 * Open addressing with linear probing over fixed arrays in the segment
 * (table_layout.h, invariants T1-T6).  Lookups and the choice of an
 * insertion slot are pure reads; filling a slot is the caller's business
 * (inside a transaction, after vista_set_range of the slot header).
 * A request is deleted inside the transaction that receives its response
 * (its header is declared); a response outside transactions, after the
 * client's acknowledgement, by one 8-byte store.  Either way the slot
 * becomes a tombstone, or FREE at once if no other key's probe path
 * crosses it, followed by the clean-up of T4: in the
 * run of non-FREE slots around it, every tombstone that no live key's
 * probe path crosses becomes FREE again,
 *
 *     FREE  K1  DEL  K2  [slot]  DEL  K3  FREE     home(K3) <= the first DEL:
 *                                                  both DELs stay;
 *                                         otherwise all three go
 *
 * so the table never silts up with tombstones.  The deletion itself is
 * durable first (committed, or drained): after a crash no live key may sit
 * behind a FREE slot of its own path.  The freeing stores need no order
 * among themselves.
 *
 * Slot states:
 *   request   FREE -> LIVE (send_request, in a tx) -> DELETED or FREE
 *             (receive_response, in a tx) -> FREE (clean-up) or LIVE
 *   response  FREE -> RECEIVED (receive_request, in a tx) -> ANSWERED
 *             (send_response, in a tx) -> DELETED (client's ack, or
 *             reclaimed after the horizon; raw)
 *   peer      FREE -> used (raw insertion: fields, drain, then node); never
 *             deleted
 */
#include <string.h>

#include "vg_int.h"

static uint64_t
resp_hash(uint64_t node, uint64_t inc, uint64_t seq)
{
	return rio_mix64(seq ^ rio_mix64(node ^ (inc << 1)));
}

int32_t
vg__req_find(const vg_endpoint *ep, uint64_t seq, int32_t *ins)
{
	uint32_t mask = ep->req_mask, i = (uint32_t)rio_mix64(seq) & mask;
	int32_t first = -1;

	for (uint32_t n = 0; n <= mask; n++, i = (i + 1) & mask) {
		const struct vg_req_slot *s = &ep->req[i];
		uint32_t st = vg_slot_state(s->word);
		if (st == VG_SLOT_FREE) {
			if (first < 0)
				first = (int32_t)i;
			break;
		}
		if (st == VG_REQ_DELETED) {
			if (first < 0)
				first = (int32_t)i;
			continue;
		}
		if (s->seq == seq)
			return (int32_t)i;
	}
	if (ins)
		*ins = first;
	return -1;
}

int32_t
vg__resp_find(const vg_endpoint *ep, uint64_t node, uint64_t inc,
	uint64_t seq, int32_t *ins)
{
	uint32_t mask = ep->resp_mask;
	uint32_t i = (uint32_t)resp_hash(node, inc, seq) & mask;
	int32_t first = -1;

	for (uint32_t n = 0; n <= mask; n++, i = (i + 1) & mask) {
		const struct vg_resp_slot *s = &ep->resp[i];
		uint32_t st = vg_slot_state(s->word);
		if (st == VG_SLOT_FREE) {
			if (first < 0)
				first = (int32_t)i;
			break;
		}
		if (st == VG_RESP_DELETED) {
			if (first < 0)
				first = (int32_t)i;
			continue;
		}
		if (s->seq == seq && s->node == node && s->inc == inc)
			return (int32_t)i;
	}
	if (ins)
		*ins = first;
	return -1;
}

int32_t
vg__peer_find(const vg_endpoint *ep, uint64_t node, int32_t *ins)
{
	uint32_t mask = ep->peer_mask, i = (uint32_t)rio_mix64(node) & mask;

	if (ins)
		*ins = -1;
	for (uint32_t n = 0; n <= mask; n++, i = (i + 1) & mask) {
		/* relaxed: the slot's validating word, read whole (stored
		 * whole by vg__raw_store64(), after the record it validates
		 * was drained); an endpoint is used by one thread at a time,
		 * so no other order is involved. */
		uint64_t nd = __atomic_load_n(&ep->peer[i].node,
			__ATOMIC_RELAXED);
		if (nd == 0) {
			if (ins)
				*ins = (int32_t)i;
			return -1;
		}
		if (nd == node)
			return (int32_t)i;
	}
	return -1;
}

static uint32_t
req_home(const vg_endpoint *ep, const void *slot)
{
	const struct vg_req_slot *s = slot;

	return (uint32_t)rio_mix64(s->seq) & ep->req_mask;
}

static uint32_t
resp_home(const vg_endpoint *ep, const void *slot)
{
	const struct vg_resp_slot *s = slot;

	return (uint32_t)resp_hash(s->node, s->inc, s->seq) & ep->resp_mask;
}

struct tbl {
	uint8_t *base;
	size_t stride;
	uint32_t mask;
	uint32_t deleted;
	uint32_t (*home)(const vg_endpoint *ep, const void *slot);
};

static uint64_t *
word_at(const struct tbl *t, uint32_t i)
{
	return (uint64_t *)(void *)(t->base + (size_t)i * t->stride);
}

/*
 * Walk the run [a, a + len) backwards and free (or, with !apply, count)
 * every tombstone that no live key behind it needs: a key's probe path
 * runs from its home to its slot, so a tombstone is needed iff some live
 * key at a later position of the run has its home at or before it.  The
 * slot being deleted, `gone`, counts as a tombstone already.
 */
static uint32_t
sweep(vg_endpoint *ep, const struct tbl *t, uint32_t a, uint32_t len,
	uint32_t gone, bool apply, bool *gone_freed)
{
	uint32_t min_home = UINT32_MAX, freed = 0;

	*gone_freed = false;
	for (uint32_t off = len; off-- > 0;) {
		uint32_t i = (a + off) & t->mask;
		uint64_t *w = word_at(t, i);
		if (i == gone || vg_slot_state(*w) == t->deleted) {
			if (min_home <= off)
				continue; /* needed */
			freed++;
			*gone_freed |= i == gone;
			if (apply)
				vg__raw_store64(ep, w,
					vg_slot_word(VG_SLOT_FREE, 0));
		} else {
			uint32_t h = (t->home(ep, w) - a) & t->mask;
			if (h < min_home)
				min_home = h;
		}
	}
	return freed;
}

/* The run of non-FREE slots around `slot`: *a, *len; false if the table
 * has no FREE slot at all (it then keeps its tombstones). */
static bool
run_of(const struct tbl *t, uint32_t slot, uint32_t *a, uint32_t *len)
{
	uint32_t n;

	*a = slot;
	*len = 1;
	for (n = 0; n <= t->mask; n++) {
		uint32_t prev = (*a - 1) & t->mask;
		if (vg_slot_state(*word_at(t, prev)) == VG_SLOT_FREE)
			break;
		*a = prev;
		(*len)++;
	}
	if (n > t->mask)
		return false;
	while (*len <= t->mask &&
	       vg_slot_state(*word_at(t, (*a + *len) & t->mask)) != VG_SLOT_FREE)
		(*len)++;
	return true;
}

/*
 * What deleting `slot` stores there: FREE if no other key needs it, else
 * DELETED.  *others: other tombstones of the run become free as well
 * (T4), once the deletion is durable.
 */
static uint32_t
delete_plan(vg_endpoint *ep, const struct tbl *t, uint32_t slot,
	bool *others)
{
	uint32_t a, len, freed;
	bool self = false;

	*others = false;
	if (!run_of(t, slot, &a, &len))
		return t->deleted;
	freed = sweep(ep, t, a, len, slot, false, &self);
	*others = freed > (self ? 1u : 0u);
	return self ? VG_SLOT_FREE : t->deleted;
}

/* Free the tombstones of slot's run that no live key needs (raw).  A
 * slot that became FREE itself ended its run: the run before it. */
static void
sweep_run(vg_endpoint *ep, const struct tbl *t, uint32_t slot)
{
	uint32_t a, len;
	bool self;

	if (vg_slot_state(*word_at(t, slot)) == VG_SLOT_FREE) {
		slot = (slot - 1) & t->mask;
		if (vg_slot_state(*word_at(t, slot)) == VG_SLOT_FREE)
			return;
	}
	if (run_of(t, slot, &a, &len))
		(void)sweep(ep, t, a, len, UINT32_MAX, true, &self);
}

static const struct tbl *
req_tbl(const vg_endpoint *ep, struct tbl *t)
{
	*t = (struct tbl){ (uint8_t *)ep->req, sizeof(*ep->req), ep->req_mask,
		VG_REQ_DELETED, req_home };
	return t;
}

static const struct tbl *
resp_tbl(const vg_endpoint *ep, struct tbl *t)
{
	*t = (struct tbl){ (uint8_t *)ep->resp, sizeof(*ep->resp),
		ep->resp_mask, VG_RESP_DELETED, resp_home };
	return t;
}

bool
vg__req_delete_tx(vg_endpoint *ep, uint32_t slot)
{
	struct tbl t;
	bool others;
	uint32_t st;

	/* T4: only a live entry is deleted (a tombstone stays one). */
	VG_ASSERT(vg_slot_state(ep->req[slot].word) == VG_REQ_LIVE, "T4");
	st = delete_plan(ep, req_tbl(ep, &t), slot, &others);
	/* Declared in the transaction by the caller. */
	ep->req[slot].word = vg_slot_word(st, 0);
	return others;
}

void
vg__req_sweep(vg_endpoint *ep, uint32_t slot)
{
	struct tbl t;

	sweep_run(ep, req_tbl(ep, &t), slot);
}

void
vg__resp_delete(vg_endpoint *ep, uint32_t slot)
{
	struct tbl t;
	bool others;
	uint32_t st;

	/* T4 */
	VG_ASSERT(vg_slot_state(ep->resp[slot].word) == VG_RESP_RECEIVED ||
		vg_slot_state(ep->resp[slot].word) == VG_RESP_ANSWERED, "T4");
	st = delete_plan(ep, resp_tbl(ep, &t), slot, &others);
	/* Only this slot changes: LIVE -> DELETED or FREE in one store;
	 * whatever becomes durable first is consistent. */
	vg__raw_store64(ep, &ep->resp[slot].word, vg_slot_word(st, 0));
	if (!others)
		return;
	/* The deletion must be durable before the tombstones its key needed
	 * can disappear: a crash must never leave a live key behind a FREE
	 * slot of its own probe path. */
	vg__drain(ep);
	sweep_run(ep, &t, slot);
}

uint64_t
vg__req_slot_csum(const struct vg_req_slot *s, uint32_t index)
{
	return rio_checksum(&s->seq, offsetof(struct vg_req_slot, checksum) -
			offsetof(struct vg_req_slot, seq),
		VG_TBL_SLOT_SEED ^ index);
}

uint64_t
vg__resp_slot_csum(const struct vg_resp_slot *s, uint32_t index)
{
	return rio_checksum(&s->node, offsetof(struct vg_resp_slot, checksum) -
			offsetof(struct vg_resp_slot, node),
		VG_TBL_SLOT_SEED ^ index);
}

static int
check_req(vg_endpoint *ep, uint32_t i)
{
	const struct vg_req_slot *s = &ep->req[i];
	uint32_t st = vg_slot_state(s->word), len = vg_slot_len(s->word);

	if (st == VG_SLOT_FREE || st == VG_REQ_DELETED)
		return 0;
	if (st != VG_REQ_LIVE)
		return vg__err(VG_ECORRUPT, "request slot %u: state %u", i, st);
	if (s->checksum != vg__req_slot_csum(s, i))
		return vg__err(VG_ECORRUPT, "request slot %u: checksum "
			"mismatch", i);
	if (len > ep->max_message || s->seq == 0 ||
	    s->seq >= ep->txh->next_seq || !vg__addr_valid(&s->dest))
		return vg__err(VG_ECORRUPT, "request slot %u: seq %llu, length "
			"%u or destination out of range", i,
			(unsigned long long)s->seq, len);
	if (s->payload_csum != vg__wire_payload_csum(vg__req_buf(ep, i), len))
		return vg__err(VG_ECORRUPT, "request slot %u (seq %llu): "
			"payload checksum mismatch", i,
			(unsigned long long)s->seq);
	return 0;
}

static int
check_resp(vg_endpoint *ep, uint32_t i)
{
	const struct vg_resp_slot *s = &ep->resp[i];
	uint32_t st = vg_slot_state(s->word), len = vg_slot_len(s->word);

	if (st == VG_SLOT_FREE || st == VG_RESP_DELETED)
		return 0;
	if (st != VG_RESP_RECEIVED && st != VG_RESP_ANSWERED)
		return vg__err(VG_ECORRUPT, "response slot %u: state %u", i, st);
	if (s->checksum != vg__resp_slot_csum(s, i))
		return vg__err(VG_ECORRUPT, "response slot %u: checksum "
			"mismatch", i);
	if (s->node == 0 || s->inc == 0 || s->seq == 0 ||
	    !vg__addr_valid(&s->ret) || len > ep->max_message ||
	    (st == VG_RESP_RECEIVED && len != 0))
		return vg__err(VG_ECORRUPT, "response slot %u: fields out of "
			"range", i);
	if (st == VG_RESP_ANSWERED &&
	    s->payload_csum != vg__wire_payload_csum(vg__resp_buf(ep, i), len))
		return vg__err(VG_ECORRUPT, "response slot %u (request "
			"%llu:%llu): payload checksum mismatch", i,
			(unsigned long long)s->node, (unsigned long long)s->seq);
	return 0;
}

int
vg__tables_check(vg_endpoint *ep)
{
	int rc;

	for (uint32_t i = 0; i <= ep->req_mask; i++)
		if ((rc = check_req(ep, i)) != 0)
			return rc;
	for (uint32_t i = 0; i <= ep->resp_mask; i++)
		if ((rc = check_resp(ep, i)) != 0)
			return rc;
	for (uint32_t i = 0; i <= ep->peer_mask; i++) {
		const struct vg_peer_slot *p = &ep->peer[i];
		if (p->node == 0)
			continue;
		if (p->sel > 1 || p->rec[p->sel].inc == 0)
			return vg__err(VG_ECORRUPT, "peer slot %u (node %llu): "
				"record selector %llu", i,
				(unsigned long long)p->node,
				(unsigned long long)p->sel);
	}
	return 0;
}
