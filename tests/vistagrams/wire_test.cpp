// SPDX-License-Identifier: BSD-3-Clause
// wire_test.cpp -- the datagram format: round trips, every invariant
// (W1-W4 of wire_layout.h), every bit flip and every truncation refused
#include "../common/test_util.hpp"

#include "vg_int.h"

struct Dgram {
	struct vg__wire w = {};
	std::vector<uint64_t> acks;
	std::string payload;

	std::string bytes() const
	{
		struct vg__wire x = w;
		struct vg_wire_hdr h;
		x.nacks = (uint16_t)acks.size();
		x.payload_len = (uint32_t)payload.size();
		vg__wire_seal(&h, &x, acks.data(),
			vg__wire_payload_csum(payload.data(), payload.size()));
		std::string d((const char *)&h, sizeof(h));
		d.append((const char *)acks.data(), acks.size() * 8);
		return d + payload;
	}
};

static Dgram request()
{
	Dgram d;
	d.w.type = VG_PKT_REQUEST;
	d.w.src_node = d.w.req_node = 7;
	d.w.src_inc = d.w.req_inc = 1234567;
	d.w.seq = 42;
	d.w.low = 40;
	d.acks = { 39, 41 };
	d.payload = "the request";
	return d;
}

static Dgram response()
{
	Dgram d;
	d.w.type = VG_PKT_RESPONSE;
	d.w.src_node = 9;
	d.w.src_inc = 555;
	d.w.req_node = 7;
	d.w.req_inc = 1234567;
	d.w.seq = 42;
	d.payload = std::string(300, 'r');
	return d;
}

static Dgram ack()
{
	Dgram d;
	d.w.type = VG_PKT_ACK;
	d.w.src_node = d.w.req_node = 7;
	d.w.src_inc = d.w.req_inc = 1234567;
	d.w.low = 43;
	d.acks = { 42 };
	return d;
}

static enum vg__wire_verdict parse(const std::string &b, struct vg__wire *w,
	uint32_t max = 1024)
{
	return vg__wire_parse(b.data(), b.size(), max, w);
}

TEST_CASE("datagrams round-trip through seal and parse", "[wire]")
{
	for (Dgram d : { request(), response(), ack() }) {
		std::string b = d.bytes();
		struct vg__wire w;
		REQUIRE(parse(b, &w) == VG__WIRE_OK);
		REQUIRE(w.type == d.w.type);
		REQUIRE(w.src_node == d.w.src_node);
		REQUIRE(w.src_inc == d.w.src_inc);
		REQUIRE(w.req_node == d.w.req_node);
		REQUIRE(w.req_inc == d.w.req_inc);
		REQUIRE(w.seq == d.w.seq);
		REQUIRE(w.low == d.w.low);
		REQUIRE(w.nacks == d.acks.size());
		for (unsigned i = 0; i < w.nacks; i++)
			REQUIRE(vg__wire_ack(&w, i) == d.acks[i]);
		REQUIRE(std::string((const char *)w.payload, w.payload_len) ==
			d.payload);
		// Pointers stay inside the buffer.
		REQUIRE(w.payload + w.payload_len == (const uint8_t *)b.data() +
				b.size());
	}
	// A retransmission flag, the largest ack list, an empty payload.
	Dgram d = request();
	d.w.flags = VG_PKT_F_RETRANS;
	d.acks.assign(VG_WIRE_MAX_ACKS, 5);
	d.payload.clear();
	struct vg__wire w;
	REQUIRE(parse(d.bytes(), &w) == VG__WIRE_OK);
	REQUIRE(w.flags == VG_PKT_F_RETRANS);
	REQUIRE(w.nacks == VG_WIRE_MAX_ACKS);
}

// Change one header field (at its offset), then seal the checksum again so
// that only the field rule can refuse it.
static std::string patched(const Dgram &d, size_t off, const void *v,
	size_t n)
{
	std::string b = d.bytes();
	memcpy(&b[off], v, n);
	struct vg_wire_hdr h;
	memcpy(&h, b.data(), sizeof(h));
	size_t body = b.size() - sizeof(h);
	uint64_t c = vg__wire_payload_csum(b.data() + sizeof(h) +
			std::min<size_t>(body, (size_t)h.nacks * 8),
		body > (size_t)h.nacks * 8 ? body - (size_t)h.nacks * 8 : 0);
	c = rio_checksum(b.data() + sizeof(h),
		std::min<size_t>(body, (size_t)h.nacks * 8), c);
	h.checksum = rio_checksum(&h, offsetof(struct vg_wire_hdr, checksum),
		c);
	memcpy(&b[0], &h, sizeof(h));
	return b;
}

template <typename T>
static enum vg__wire_verdict with_field(const Dgram &d, size_t off, T v)
{
	struct vg__wire w;
	return parse(patched(d, off, &v, sizeof(v)), &w);
}

TEST_CASE("every invariant is checked", "[wire]")
{
	const Dgram rq = request(), rs = response(), ak = ack();
	struct vg__wire w;
#define OFF(f) offsetof(struct vg_wire_hdr, f)
	// W1
	REQUIRE(with_field(rq, OFF(magic), (uint32_t)0x31524757) ==
		VG__WIRE_MALFORMED);
	REQUIRE(with_field(rq, OFF(version), (uint8_t)2) == VG__WIRE_MALFORMED);
	REQUIRE(with_field(rq, OFF(hdr_len), (uint16_t)88) ==
		VG__WIRE_MALFORMED);
	REQUIRE(with_field(rq, OFF(reserved), (uint64_t)1) ==
		VG__WIRE_MALFORMED);
	REQUIRE(with_field(rq, OFF(flags), (uint16_t)2) == VG__WIRE_MALFORMED);
	REQUIRE(with_field(rq, OFF(type), (uint8_t)0) == VG__WIRE_MALFORMED);
	REQUIRE(with_field(rq, OFF(type), (uint8_t)4) == VG__WIRE_MALFORMED);
	REQUIRE(with_field(rq, OFF(nacks), (uint16_t)(VG_WIRE_MAX_ACKS + 1)) ==
		VG__WIRE_MALFORMED);
	// W2
	std::string b = rq.bytes();
	REQUIRE(parse(b.substr(0, 79), &w) == VG__WIRE_TRUNCATED);
	REQUIRE(parse(b.substr(0, b.size() - 1), &w) == VG__WIRE_TRUNCATED);
	REQUIRE(parse(b + '\0', &w) == VG__WIRE_MALFORMED);
	REQUIRE(parse(b, &w, (uint32_t)rq.payload.size() - 1) ==
		VG__WIRE_OVERSIZED);
	REQUIRE(parse(b, &w, (uint32_t)rq.payload.size()) == VG__WIRE_OK);
	REQUIRE(with_field(rq, OFF(payload_len), (uint32_t)70000) ==
		VG__WIRE_OVERSIZED);
	REQUIRE(with_field(rq, OFF(nacks), (uint16_t)3) == VG__WIRE_TRUNCATED);
	// W4
	REQUIRE(with_field(rq, OFF(src_node), (uint64_t)0) ==
		VG__WIRE_MALFORMED);
	REQUIRE(with_field(rq, OFF(req_inc), (uint64_t)0) == VG__WIRE_MALFORMED);
	REQUIRE(with_field(rq, OFF(src_node), (uint64_t)8) ==
		VG__WIRE_MALFORMED); // a request's sender is its client
	REQUIRE(with_field(rq, OFF(seq), (uint64_t)0) == VG__WIRE_MALFORMED);
	REQUIRE(with_field(rq, OFF(low), (uint64_t)0) == VG__WIRE_MALFORMED);
	REQUIRE(with_field(rq, OFF(low), (uint64_t)43) == VG__WIRE_MALFORMED);
	REQUIRE(with_field(rq, OFF(low), (uint64_t)42) == VG__WIRE_OK);
	REQUIRE(with_field(rq, sizeof(vg_wire_hdr), (uint64_t)0) ==
		VG__WIRE_MALFORMED); // ack 0
	REQUIRE(with_field(rs, OFF(low), (uint64_t)1) == VG__WIRE_MALFORMED);
	REQUIRE(with_field(rs, OFF(flags), (uint16_t)VG_PKT_F_RETRANS) ==
		VG__WIRE_MALFORMED);
	REQUIRE(with_field(ak, OFF(seq), (uint64_t)1) == VG__WIRE_MALFORMED);
	Dgram r2 = rs;
	r2.acks = { 1 };
	REQUIRE(parse(r2.bytes(), &w) == VG__WIRE_MALFORMED);
	Dgram a2 = ak;
	a2.payload = "x";
	REQUIRE(parse(a2.bytes(), &w) == VG__WIRE_MALFORMED);
	// EXPIRED: a response without payload only.
	Dgram ex = rs;
	ex.w.flags = VG_PKT_F_EXPIRED;
	REQUIRE(parse(ex.bytes(), &w) == VG__WIRE_MALFORMED); // has payload
	ex.payload.clear();
	REQUIRE(parse(ex.bytes(), &w) == VG__WIRE_OK);
	REQUIRE(w.flags == VG_PKT_F_EXPIRED);
	ex.w.flags = VG_PKT_F_EXPIRED | VG_PKT_F_RETRANS;
	REQUIRE(parse(ex.bytes(), &w) == VG__WIRE_MALFORMED);
	Dgram rx = rq;
	rx.w.flags = VG_PKT_F_EXPIRED;
	REQUIRE(parse(rx.bytes(), &w) == VG__WIRE_MALFORMED);
	Dgram ax = ak;
	ax.w.flags = VG_PKT_F_EXPIRED;
	REQUIRE(parse(ax.bytes(), &w) == VG__WIRE_MALFORMED);
	// W3: the checksum covers header, acks and payload.
	for (size_t off : { (size_t)OFF(seq), sizeof(vg_wire_hdr) + 3,
		     b.size() - 1 }) {
		std::string c = b;
		c[off] ^= 0x10;
		REQUIRE(parse(c, &w) == VG__WIRE_CHECKSUM);
	}
#undef OFF
}

TEST_CASE("no bit flip and no truncation of a datagram is accepted",
	"[wire]")
{
	for (Dgram d : { request(), response(), ack() }) {
		std::string b = d.bytes();
		struct vg__wire w;
		for (size_t bit = 0; bit < b.size() * 8; bit++) {
			std::string c = b;
			c[bit / 8] ^= (char)(1 << (bit % 8));
			INFO("bit " << bit);
			REQUIRE(parse(c, &w) != VG__WIRE_OK);
		}
		for (size_t n = 0; n < b.size(); n++) {
			INFO("length " << n);
			REQUIRE(parse(b.substr(0, n), &w) != VG__WIRE_OK);
		}
	}
}

TEST_CASE("the parser survives random bytes", "[wire]")
{
	test::Rng rng(test::seed());
	std::string good = request().bytes();
	for (int i = 0; i < 200000; i++) {
		std::string b;
		if (i % 2) {
			b.resize(rng.below(200));
			for (auto &c : b)
				c = (char)rng.next();
		} else {
			b = good;
			for (int k = 1 + (int)rng.below(4); k > 0; k--)
				b[rng.below(b.size())] = (char)rng.next();
		}
		struct vg__wire w;
		enum vg__wire_verdict v = parse(b, &w);
		REQUIRE((v == VG__WIRE_OK || v == VG__WIRE_MALFORMED ||
			v == VG__WIRE_TRUNCATED || v == VG__WIRE_OVERSIZED ||
			v == VG__WIRE_CHECKSUM));
		if (v == VG__WIRE_OK)
			REQUIRE(b == good); // a 64-bit checksum: never forged
	}
}
