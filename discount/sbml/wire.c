/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.c -- seal and parse sbml datagrams
 *
 * The format and its invariants S1-S4 are in wire_layout.h (and
 * docs/FORMAT.md).  The parser is the only code that reads bytes from the
 * network: it takes any byte string, never reads outside it, never
 * allocates, and either fills a struct sbml__wire whose pointers lie
 * inside the string or says why the datagram is refused.  Cheap checks
 * first, the checksum last.  It is fuzzed (tests/sbml/fuzz_wire.c).
 */
#include <string.h>

#include "sbml_int.h"

static uint64_t
seal_csum(const struct sbml_wire_hdr *h, const uint8_t *body, size_t blen)
{
	static const uint8_t none;
	uint64_t c = rio_checksum(blen ? body : &none, blen, SBML_WIRE_SEED);

	return rio_checksum(h, offsetof(struct sbml_wire_hdr, checksum), c);
}

size_t
sbml__wire_seal(uint8_t *buf, const struct sbml__wire *w,
	const struct sbml_wire_rsn *rsns, const uint64_t *acks,
	const void *payload)
{
	struct sbml_wire_hdr h;
	size_t off = sizeof(h);

	memset(&h, 0, sizeof(h));
	h.magic = SBML_WIRE_MAGIC;
	h.version = SBML_WIRE_VERSION;
	h.type = w->type;
	h.flags = w->flags;
	h.hdr_len = sizeof(h);
	h.src = w->src;
	h.dst = w->dst;
	h.nrsn = w->nrsn;
	h.nack = w->nack;
	h.payload_len = w->payload_len;
	h.group = w->group;
	h.inc = w->inc;
	h.ssn = w->ssn;
	h.sii = w->sii;
	h.arg = w->arg;
	h.ckpt = w->ckpt;
	if (w->nrsn)
		memcpy(buf + off, rsns, (size_t)w->nrsn * 16);
	off += (size_t)w->nrsn * 16;
	if (w->nack)
		memcpy(buf + off, acks, (size_t)w->nack * 8);
	off += (size_t)w->nack * 8;
	if (w->payload_len)
		memcpy(buf + off, payload, w->payload_len);
	off += w->payload_len;
	h.checksum = seal_csum(&h, buf + sizeof(h), off - sizeof(h));
	memcpy(buf, &h, sizeof(h));
	return off;
}

void
sbml__wire_rsn(const struct sbml__wire *w, unsigned i,
	struct sbml_wire_rsn *out)
{
	memcpy(out, w->rsns + (size_t)i * 16, sizeof(*out));
}

uint64_t
sbml__wire_ack(const struct sbml__wire *w, unsigned i)
{
	uint64_t a;

	memcpy(&a, w->acks + (size_t)i * 8, sizeof(a));
	return a;
}

/* S4: the fields each type must (not) carry. */
static bool
fields_ok(const struct sbml__wire *w)
{
	bool data = w->type == SBML_PKT_DATA, replay = w->type == SBML_PKT_REPLAY;

	if (w->inc == 0)
		return false;
	if ((data || replay) && w->ssn == 0)
		return false;
	if (replay && w->arg == 0)
		return false;
	if (!data && !replay && w->payload_len != 0)
		return false;
	if (!data && w->type != SBML_PKT_CTRL && (w->nrsn || w->nack))
		return false;
	if (w->type == SBML_PKT_CTRL && w->nrsn == 0 && w->nack == 0)
		return false;
	if ((w->flags & SBML_PKT_F_RECOVERING) &&
	    w->type != SBML_PKT_REPLAY_END)
		return false;
	for (unsigned i = 0; i < w->nrsn; i++) {
		struct sbml_wire_rsn r;
		sbml__wire_rsn(w, i, &r);
		if (r.ssn == 0)
			return false;
	}
	for (unsigned i = 0; i < w->nack; i++)
		if (sbml__wire_ack(w, i) == 0)
			return false;
	return true;
}

enum sbml__verdict
sbml__wire_parse(const void *buf, size_t len, uint32_t max_message,
	struct sbml__wire *out)
{
	struct sbml_wire_hdr h;
	const uint8_t *b = buf;
	size_t need;

	if (len < sizeof(h))
		return SBML__WIRE_TRUNCATED;
	memcpy(&h, b, sizeof(h));
	/* S1 */
	if (h.magic != SBML_WIRE_MAGIC || h.version != SBML_WIRE_VERSION ||
	    h.hdr_len != sizeof(h) || (h.flags & ~SBML_PKT_F_KNOWN) ||
	    h.type < SBML_PKT_DATA || h.type > SBML_PKT_TYPE_MAX ||
	    h.nrsn > SBML_WIRE_MAX_RSNS || h.nack > SBML_WIRE_MAX_ACKS ||
	    h.src == h.dst)
		return SBML__WIRE_MALFORMED;
	/* S2 */
	if (h.payload_len > max_message || h.payload_len > SBML_MAX_MESSAGE)
		return SBML__WIRE_MALFORMED;
	need = sizeof(h) + (size_t)h.nrsn * 16 + (size_t)h.nack * 8 +
		h.payload_len;
	if (len < need)
		return SBML__WIRE_TRUNCATED;
	if (len > need)
		return SBML__WIRE_MALFORMED;

	out->type = h.type;
	out->flags = h.flags;
	out->src = h.src;
	out->dst = h.dst;
	out->nrsn = h.nrsn;
	out->nack = h.nack;
	out->payload_len = h.payload_len;
	out->group = h.group;
	out->inc = h.inc;
	out->ssn = h.ssn;
	out->sii = h.sii;
	out->arg = h.arg;
	out->ckpt = h.ckpt;
	out->rsns = b + sizeof(h);
	out->acks = out->rsns + (size_t)h.nrsn * 16;
	out->payload = out->acks + (size_t)h.nack * 8;
	/* S4 */
	if (!fields_ok(out))
		return SBML__WIRE_MALFORMED;
	/* S3 */
	if (seal_csum(&h, b + sizeof(h), need - sizeof(h)) != h.checksum)
		return SBML__WIRE_CHECKSUM;
	return SBML__WIRE_OK;
}
