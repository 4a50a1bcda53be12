// SPDX-License-Identifier: BSD-3-Clause
// endpoint_test.cpp -- opening tables (and refusing bad ones), options,
// calls out of order, error codes
#include "vg_test.hpp"

#include "vg_int.h"
#include "../common/hdr_rules.hpp"

using namespace vgt;

static void reseal_super(void *base)
{
	auto *sb = (struct vg_super *)base;
	sb->checksum = rio_checksum(sb, offsetof(struct vg_super, checksum),
		VG_TBL_SUPER_SEED);
}

TEST_CASE("tables are created once and found again", "[endpoint]")
{
	World w;
	vista_segment *seg = w.segment(0);
	vg_endpoint *ep = w.open(seg, opts(3));
	uint64_t inc = ep->inc;
	size_t need;
	auto o3 = opts(3);
	VG_REQUIRE_OK(vg_table_size(&o3, &need));
	REQUIRE(need <= vista_segment_size(seg));
	REQUIRE(ep->sb->area_size == need);
	w.close(ep);

	auto o = opts(3);
	o.flags = 0;
	o.max_message = 60000; // ignored: the tables keep theirs
	ep = w.open(seg, o);
	REQUIRE(ep->inc == inc);
	REQUIRE(ep->max_message == 1024);
	VG_REQUIRE_OK(vg_endpoint_error(ep));
	w.close(ep);
}

TEST_CASE("superblock header rules: one test per rule, a refusal changes "
	  "nothing",
	"[endpoint][hdr]")
{
	using R = hdr_rules::Rule<vg_super>;
	World w;
	vista_segment *seg = w.segment(0);
	auto *base = (char *)vista_segment_base(seg);
	auto o = opts(3);
	w.close(w.open(seg, o));
	size_t area = ((struct vg_super *)base)->area_size;
	// The tables live in a segment: the state is its bytes.  Tables are
	// always written: no read-only open; an unknown ro_compat refuses.
	hdr_rules::State st{
		[&] { return std::string(base, area); },
		[&](const std::string &s) { memcpy(base, s.data(), s.size()); },
	};
	hdr_rules::run(st,
		std::vector<R>{
			{ "bad magic", [](vg_super &s) { s.magic[0] ^= 1; },
				VG_EBADMAGIC },
			{ "newer major", [](vg_super &s) { s.major++; },
				VG_EVERSION },
			{ "older major", [](vg_super &s) { s.major--; },
				VG_EVERSION },
			{ "newer minor accepted", [](vg_super &s) { s.minor++; },
				0 },
			{ "unknown incompat refused",
				[](vg_super &s) { s.incompat |= 1u << 30; },
				VG_EFEATURE },
			{ "unknown ro_compat refused (no read-only open)",
				[](vg_super &s) { s.ro_compat |= 1u << 30; },
				VG_EFEATURE },
			{ "unknown compat accepted",
				[](vg_super &s) { s.compat |= 1u << 30; }, 0 },
			{ "non-zero reserved refused",
				[](vg_super &s) {
					s.reserved[sizeof(s.reserved) - 1] = 1;
				},
				VG_ECORRUPT },
		},
		[&](const std::function<void(vg_super &)> &fn) {
			fn(*(struct vg_super *)base);
			reseal_super(base);
		},
		[&](bool) {
			vg_endpoint *ep = nullptr;
			int rc = vg_endpoint_open(w.v, seg, &o, &ep);
			if (rc == 0)
				VG_REQUIRE_OK(vg_endpoint_close(ep));
			return rc;
		});
}

TEST_CASE("open refuses what is not valid tables and changes nothing",
	"[endpoint]")
{
	World w;
	vista_segment *seg = w.segment(0);
	auto *base = (uint8_t *)vista_segment_base(seg);
	vg_endpoint *ep = nullptr;
	auto o = opts(3);

	SECTION("no tables without VG_CREATE")
	{
		o.flags = 0;
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &o, &ep),
			VG_ENOTABLES);
	}
	SECTION("something else")
	{
		memcpy(base, "not a table", 11);
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &o, &ep),
			VG_EBADMAGIC);
		REQUIRE(memcmp(base, "not a table", 11) == 0);
	}
	SECTION("segment too small")
	{
		vista_segment *small = w.segment(1, 64 << 10);
		VG_REQUIRE_RC(vg_endpoint_open(w.v, small, &o, &ep),
			VG_ESMALL);
	}
	SECTION("damaged or foreign superblock")
	{
		w.close(w.open(seg, o));
		auto *sb = (struct vg_super *)base;
		struct vg_super saved = *sb;
		sb->req_limit ^= 1;
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &o, &ep), VG_ECORRUPT);
		*sb = saved;
		sb->major = VG_TBL_MAJOR + 1;
		reseal_super(sb);
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &o, &ep), VG_EVERSION);
		*sb = saved;
		sb->incompat = VG_TBL_FEAT_INCOMPAT_KNOWN | 1u << 7; // unknown bit
		reseal_super(sb);
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &o, &ep), VG_EFEATURE);
		*sb = saved;
		sb->resp_off += 64;
		reseal_super(sb);
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &o, &ep), VG_ECORRUPT);
		*sb = saved;
		o.node_id = 4;
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &o, &ep), VG_ENODE);
		o.node_id = 3;
		w.close(w.open(seg, o));
	}
	SECTION("damaged slot or op record")
	{
		vg_endpoint *s = w.open(w.segment(1), opts(9));
		vg_endpoint *c = w.open(seg, o);
		c->net.faulty = true; // the request stays outstanding
		c->net.f.drop = 1;
		uint64_t seq = send(w.v, c, s, "keep me");
		int32_t slot = vg__req_find(c, seq, nullptr);
		REQUIRE(slot >= 0);
		uint8_t *payload = vg__req_buf(c, (uint32_t)slot);
		struct vg_op *op = &c->ops[(c->txh->committed_gen & 1) *
			c->max_ops];
		w.close(c);
		payload[3] ^= 0x20;
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &o, &ep), VG_ECORRUPT);
		REQUIRE(std::string(vg_errormsg()).find("payload") !=
			std::string::npos);
		payload[3] ^= 0x20;
		op->slot ^= 1;
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &o, &ep), VG_ECORRUPT);
		REQUIRE(std::string(vg_errormsg()).find("deferred operation") !=
			std::string::npos);
		op->slot ^= 1;
		w.close(w.open(seg, o));
		w.close(s);
	}
	SECTION("the same tables twice, or a port in use")
	{
		vg_endpoint *a = w.open(seg, o);
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &o, &ep), -EBUSY);
		socklen_t len;
		auto sa = address(a, &len);
		auto o2 = opts(4);
		o2.port = ntohs(((sockaddr_in *)&sa)->sin_port);
		vista_segment *seg1 = w.segment(1);
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg1, &o2, &ep),
			-EADDRINUSE);
		o2.port = 65535;
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg1, &o2, &ep), -EINVAL);
		w.close(a);
	}
	SECTION("bad options")
	{
		auto b = o;
		b.node_id = 0;
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &b, &ep), -EINVAL);
		b = o;
		b.max_message = 70000;
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &b, &ep), -EINVAL);
		b = o;
		b.faults.drop = 1.5;
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &b, &ep), -EINVAL);
		b = o;
		b.host = "localhost";
		VG_REQUIRE_RC(vg_endpoint_open(w.v, seg, &b, &ep), VG_EADDR);
		VG_REQUIRE_RC(vg_endpoint_open(w.v, nullptr, &o, &ep), -EINVAL);
		size_t sz;
		VG_REQUIRE_RC(vg_table_size(&b, nullptr), -EINVAL);
		b = o;
		b.max_ops = 5000;
		VG_REQUIRE_RC(vg_table_size(&b, &sz), -EINVAL);
	}
	// Nothing was made by a failed open.
	REQUIRE(ep == nullptr);
}

TEST_CASE("calls out of order get clear errors", "[endpoint]")
{
	World w;
	auto co = opts(1);
	co.max_requests = 2;
	co.max_ops = 2;
	vg_endpoint *c = w.open(w.segment(0), co);
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	socklen_t len;
	auto to = address(s, &len);
	char buf[8];
	size_t n;
	vg_reqid id = { 1, 1, 1 };
	uint64_t seq;

	VG_REQUIRE_RC(vg_commit(w.v), VG_ENOTX);
	VG_REQUIRE_RC(vg_abort(w.v), VG_ENOTX);
	VG_REQUIRE_RC(vg_begin(w.v, VISTA_TX_AUTO), -EINVAL);
	VG_REQUIRE_OK(vg_begin(w.v, 0));
	VG_REQUIRE_RC(vg_begin(w.v, 0), VG_EINTX);
	std::string big(2000, 'b');
	VG_REQUIRE_RC(vista_send_request(c, (sockaddr *)&to, len, big.data(),
		big.size(), &seq), VG_ETOOBIG);
	sockaddr_in port0 = *(sockaddr_in *)&to;
	port0.sin_port = 0;
	VG_REQUIRE_RC(vista_send_request(c, (sockaddr *)&port0,
		sizeof(port0), "x", 1, &seq), VG_EADDR);
	sockaddr un = {};
	un.sa_family = AF_UNIX;
	VG_REQUIRE_RC(vista_send_request(c, &un, sizeof(un), "x", 1, &seq),
		VG_EADDR);
	VG_REQUIRE_RC(vista_send_response(s, &id, "x", 1), VG_ENOREQ);
	VG_REQUIRE_OK(vista_send_request(c, (sockaddr *)&to, len, "1", 1,
		&seq));
	VG_REQUIRE_OK(vista_send_request(c, (sockaddr *)&to, len, "2", 1,
		&seq));
	VG_REQUIRE_RC(vista_send_request(c, (sockaddr *)&to, len, "3", 1,
		&seq), VG_EFULL);
	VG_REQUIRE_RC(vg_endpoint_close(c), VG_EINTX);
	VG_REQUIRE_OK(vg_commit(w.v));

	VG_REQUIRE_OK(vg_begin(w.v, 0));
	VG_REQUIRE_OK(vista_receive_request(s, &id, buf, sizeof(buf), &n,
		2000));
	VG_REQUIRE_OK(vista_send_response(s, &id, "response", 8));
	VG_REQUIRE_OK(vg_commit(w.v));
	serve_one(w.v, s, [](const std::string &) { return "r2"; });
	// A buffer too small: nothing is consumed.
	uint64_t first = 1;
	VG_REQUIRE_RC(vista_receive_response(c, &first, buf, 4, &n, 2000),
		-EMSGSIZE);
	REQUIRE(n == 8);
	VG_REQUIRE_OK(vista_receive_response(c, &first, buf, sizeof(buf), &n,
		0));
	REQUIRE(std::string(buf, n) == "response");

	// max_ops = 2: a third deferred operation does not fit.
	auto o11 = opts(11);
	o11.max_ops = 2;
	vg_endpoint *c2 = w.open(w.segment(2), o11);
	VG_REQUIRE_OK(vg_begin(w.v, 0));
	VG_REQUIRE_OK(vista_send_request(c2, (sockaddr *)&to, len, "3", 1,
		&seq));
	VG_REQUIRE_OK(vista_send_request(c2, (sockaddr *)&to, len, "4", 1,
		&seq));
	VG_REQUIRE_RC(vista_send_request(c2, (sockaddr *)&to, len, "5", 1,
		&seq), VG_EOPFULL);
	VG_REQUIRE_OK(vg_abort(w.v));
	w.close(c2);

	// An endpoint of another vista instance cannot join.
	World w2;
	vg_endpoint *other = w2.open(w2.segment(5), opts(6));
	VG_REQUIRE_OK(vg_begin(w.v, 0));
	VG_REQUIRE_RC(vista_send_request(other, (sockaddr *)&to, len, "x", 1,
		&seq), VG_EOTHERTX);
	VG_REQUIRE_OK(vg_abort(w.v));
	w2.close(other);

	w.close(c);
	w.close(s);
}

TEST_CASE("a transaction ended behind Vistagrams' back is caught and "
	  "recovered by reopening",
	"[endpoint]")
{
	World w;
	vista_segment *cseg = w.segment(0);
	vg_endpoint *c = w.open(cseg, opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	socklen_t len;
	auto to = address(s, &len);
	uint64_t seq;
	char buf[8];
	size_t n;
	vg_reqid id;

	VG_REQUIRE_OK(vg_begin(w.v, 0));
	VG_REQUIRE_OK(vista_send_request(c, (sockaddr *)&to, len, "x", 1,
		&seq));
	REQUIRE(vista_end_transaction(w.v) == 0); // not vg_commit
	VG_REQUIRE_RC(vista_send_request(c, (sockaddr *)&to, len, "y", 1,
		&seq), VG_EFATAL);
	VG_REQUIRE_RC(vg_endpoint_error(c), VG_EFATAL);
	VG_REQUIRE_RC(vista_receive_response(c, &seq, buf, sizeof(buf), &n,
		0), VG_EFATAL);
	// Nothing was sent; reopening replays the committed send.
	VG_REQUIRE_RC(vista_receive_request(s, &id, buf, sizeof(buf), &n, 30),
		-ETIMEDOUT);
	w.close(c);
	c = w.open(cseg, opts(1));
	REQUIRE(stats(c).ops_recovered == 1);
	VG_REQUIRE_OK(vista_receive_request(s, &id, buf, sizeof(buf), &n,
		2000));
	REQUIRE(id.seq == seq);
	w.close(c);
	w.close(s);
}

TEST_CASE("every code has a name and a text", "[endpoint]")
{
	REQUIRE(std::string(vg_err_name(VG_EFULL)) == "VG_EFULL");
	REQUIRE(std::string(vg_strerror(VG_EFULL)) == "table is full");
	REQUIRE(std::string(vg_err_name(VISTA_ENOTX)) == "VISTA_ENOTX");
	REQUIRE(std::string(vg_err_name(RIO_EBADMAGIC)) == "RIO_EBADMAGIC");
	REQUIRE(std::string(vg_err_name(-ETIMEDOUT)) == "ETIMEDOUT");
	REQUIRE(std::string(vg_err_name(0)) == "OK");
#define CHECK_CODE(name, value, text)                                 \
	REQUIRE(std::string(vg_err_name(name)) == #name);             \
	REQUIRE(std::string(vg_strerror(name)) == text);              \
	REQUIRE((value <= -32000 && value > -33000));
	VG_ERRNO_MAP(CHECK_CODE)
#undef CHECK_CODE
}
