/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.c -- encode and parse Vistagrams datagrams
 *
 * The format and its invariants W1-W4 are in wire_layout.h (and
 * docs/FORMAT.md).  The parser is the only code that reads bytes from the
 * network: it takes any byte string, never reads outside it, never
 * allocates, and either fills a struct vg__wire whose pointers lie inside
 * the string or returns why the datagram is refused.  It is fuzzed
 * (tests/vistagrams/fuzz_wire.c).
 *
 * Checks run cheapest first, and the checksum last, so that garbage costs
 * little; the verdicts select the drop counters of struct vg_stats.
 */
#include <string.h>

#include "vg_int.h"

uint64_t
vg__wire_payload_csum(const void *payload, size_t len)
{
	static const uint8_t none;

	return rio_checksum(len ? payload : &none, len, VG_WIRE_SEED);
}

static uint64_t
seal_csum(const struct vg_wire_hdr *h, const void *acks, size_t acks_len,
	uint64_t payload_csum)
{
	static const uint8_t none;
	uint64_t c = rio_checksum(acks_len ? acks : &none, acks_len,
		payload_csum);

	return rio_checksum(h, offsetof(struct vg_wire_hdr, checksum), c);
}

void
vg__wire_seal(struct vg_wire_hdr *h, const struct vg__wire *w,
	const uint64_t *acks, uint64_t payload_csum)
{
	memset(h, 0, sizeof(*h));
	h->magic = VG_WIRE_MAGIC;
	h->version = VG_WIRE_VERSION;
	h->type = w->type;
	h->flags = w->flags;
	h->hdr_len = sizeof(*h);
	h->nacks = w->nacks;
	h->payload_len = w->payload_len;
	h->src_node = w->src_node;
	h->src_inc = w->src_inc;
	h->req_node = w->req_node;
	h->req_inc = w->req_inc;
	h->seq = w->seq;
	h->low = w->low;
	h->checksum = seal_csum(h, acks, (size_t)w->nacks * 8, payload_csum);
}

uint64_t
vg__wire_ack(const struct vg__wire *w, unsigned i)
{
	uint64_t a;

	memcpy(&a, w->acks + (size_t)i * 8, sizeof(a));
	return a;
}

/* W4: the fields each type must (not) carry. */
static bool
fields_ok(const struct vg__wire *w)
{
	if (w->src_node == 0 || w->src_inc == 0 || w->req_node == 0 ||
	    w->req_inc == 0)
		return false;
	for (unsigned i = 0; i < w->nacks; i++)
		if (vg__wire_ack(w, i) == 0)
			return false;
	switch (w->type) {
	case VG_PKT_REQUEST:
		return w->src_node == w->req_node && w->src_inc == w->req_inc &&
			w->seq != 0 && w->low != 0 && w->low <= w->seq &&
			!(w->flags & VG_PKT_F_EXPIRED);
	case VG_PKT_ACK:
		return w->src_node == w->req_node && w->src_inc == w->req_inc &&
			w->seq == 0 && w->low != 0 && w->payload_len == 0 &&
			w->flags == 0;
	case VG_PKT_RESPONSE:
		return w->seq != 0 && w->low == 0 && w->nacks == 0 &&
			(w->flags == 0 || (w->flags == VG_PKT_F_EXPIRED &&
						  w->payload_len == 0));
	default:
		return false;
	}
}

enum vg__wire_verdict
vg__wire_parse(const void *buf, size_t len, uint32_t max_message,
	struct vg__wire *out)
{
	struct vg_wire_hdr h;
	const uint8_t *b = buf;
	size_t need;

	if (len < sizeof(h))
		return VG__WIRE_TRUNCATED;
	memcpy(&h, b, sizeof(h));
	/* W1 */
	if (h.magic != VG_WIRE_MAGIC || h.version != VG_WIRE_VERSION ||
	    h.hdr_len != sizeof(h) || h.reserved != 0 ||
	    (h.flags & ~VG_PKT_F_KNOWN) || h.nacks > VG_WIRE_MAX_ACKS ||
	    h.type < VG_PKT_REQUEST || h.type > VG_PKT_ACK)
		return VG__WIRE_MALFORMED;
	/* W2 */
	if (h.payload_len > max_message || h.payload_len > VG_WIRE_MAX_MESSAGE)
		return VG__WIRE_OVERSIZED;
	need = sizeof(h) + (size_t)h.nacks * 8 + h.payload_len;
	if (len < need)
		return VG__WIRE_TRUNCATED;
	if (len > need)
		return VG__WIRE_MALFORMED;

	out->type = h.type;
	out->flags = h.flags;
	out->nacks = h.nacks;
	out->payload_len = h.payload_len;
	out->src_node = h.src_node;
	out->src_inc = h.src_inc;
	out->req_node = h.req_node;
	out->req_inc = h.req_inc;
	out->seq = h.seq;
	out->low = h.low;
	out->acks = b + sizeof(h);
	out->payload = out->acks + (size_t)h.nacks * 8;
	/* W4 */
	if (!fields_ok(out))
		return VG__WIRE_MALFORMED;
	/* W3 */
	if (seal_csum(&h, out->acks, (size_t)h.nacks * 8,
		    vg__wire_payload_csum(out->payload, h.payload_len)) !=
	    h.checksum)
		return VG__WIRE_CHECKSUM;
	return VG__WIRE_OK;
}
