// SPDX-License-Identifier: BSD-3-Clause
// mlt_test.cpp -- the Messages-in-Local-Transactions semantics, end to end
//
// Client and server endpoints in one process, on one vista instance, each
// with its own segment; the server answers either inline (the test pumps
// it) or from a thread.
#include "vg_test.hpp"

using namespace vgt;

static std::string upper(const std::string &s)
{
	std::string r = s;
	for (auto &c : r)
		c = (char)toupper(c);
	return r;
}

TEST_CASE("a request/response cycle in two datagrams", "[mlt]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));

	uint64_t seq = send(w.v, c, s, "hello");
	REQUIRE(seq == 1);
	vg_reqid id = serve_one(w.v, s, upper);
	REQUIRE(id.node == 1);
	REQUIRE(id.seq == 1);
	REQUIRE(receive(w.v, c, seq) == "HELLO");

	// The next request carries the acknowledgement of this response.
	uint64_t seq2 = send(w.v, c, s, "again");
	REQUIRE(seq2 == 2);
	serve_one(w.v, s, upper);
	REQUIRE(receive(w.v, c, seq2) == "AGAIN");
	// The server forgets acknowledged responses in batches, or when
	// they have waited ack_delay.
	VG_REQUIRE_OK(vg_poll(s, 20));

	auto cs = stats(c), ss = stats(s);
	REQUIRE(cs.requests_sent == 2);
	REQUIRE(cs.retransmitted == 0);
	REQUIRE(cs.acks_sent == 0);
	REQUIRE(cs.responses_delivered == 2);
	REQUIRE(ss.responses_sent == 2);
	REQUIRE(ss.requests_delivered == 2);
	REQUIRE(ss.responses_freed == 1); // the first, acked by the second
	REQUIRE(cs.sent + ss.sent == 4);  // two datagrams per cycle
	w.close(c);
	w.close(s);
}

TEST_CASE("a send is deferred to commit and dropped by abort", "[mlt]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	socklen_t len;
	auto to = address(s, &len);
	char buf[64];
	size_t n;
	vg_reqid id;
	uint64_t seq = 0;

	VG_REQUIRE_OK(vg_begin(w.v, 0));
	VG_REQUIRE_OK(vista_send_request(c, (sockaddr *)&to, len, "x", 1,
		&seq));
	// Nothing left yet: the server sees nothing.
	VG_REQUIRE_RC(vista_receive_request(s, &id, buf, sizeof(buf), &n, 50),
		-ETIMEDOUT);
	VG_REQUIRE_OK(vg_abort(w.v));
	VG_REQUIRE_RC(vista_receive_request(s, &id, buf, sizeof(buf), &n, 50),
		-ETIMEDOUT);
	REQUIRE(stats(c).requests_sent == 0);
	REQUIRE(stats(c).sent == 0);

	// The aborted request's sequence number is used again.
	uint64_t seq2 = send(w.v, c, s, "y");
	REQUIRE(seq2 == seq);
	REQUIRE(serve_one(w.v, s, upper).seq == seq);
	REQUIRE(receive(w.v, c, seq2) == "Y");
	w.close(c);
	w.close(s);
}

TEST_CASE("a receive is undone by abort", "[mlt]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	char buf[64];
	size_t n = 0;
	vg_reqid id, id2;

	uint64_t seq = send(w.v, c, s, "abc");
	VG_REQUIRE_OK(vg_begin(w.v, 0));
	VG_REQUIRE_OK(vista_receive_request(s, &id, buf, sizeof(buf), &n,
		2000));
	REQUIRE(std::string(buf, n) == "abc");
	VG_REQUIRE_OK(vista_send_response(s, &id, "1", 1));
	VG_REQUIRE_OK(vg_abort(w.v));

	// Delivered again; the aborted response never left.
	VG_REQUIRE_OK(vg_begin(w.v, 0));
	VG_REQUIRE_OK(vista_receive_request(s, &id2, buf, sizeof(buf), &n, 0));
	REQUIRE(memcmp(&id, &id2, sizeof(id)) == 0);
	REQUIRE(std::string(buf, n) == "abc");
	VG_REQUIRE_OK(vista_send_response(s, &id2, "2", 1));
	VG_REQUIRE_OK(vg_commit(w.v));
	REQUIRE(stats(s).responses_sent == 1);

	// The client's receive too: abort, delivered again, commit.
	VG_REQUIRE_OK(vg_begin(w.v, 0));
	uint64_t q = seq;
	VG_REQUIRE_OK(vista_receive_response(c, &q, buf, sizeof(buf), &n,
		2000));
	REQUIRE(std::string(buf, n) == "2");
	VG_REQUIRE_OK(vg_abort(w.v));
	REQUIRE(receive(w.v, c, seq) == "2");
	// And then never again.
	VG_REQUIRE_RC(vista_receive_response(c, &q, buf, sizeof(buf), &n, 0),
		VG_ENOREQ);
	REQUIRE(stats(c).responses_delivered == 1);
	REQUIRE(stats(s).requests_delivered == 1);
	w.close(c);
	w.close(s);
}

TEST_CASE("sends of one transaction are an atomic group", "[mlt]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s[3];
	struct sockaddr_storage to[3];
	socklen_t len[3];
	for (int i = 0; i < 3; i++) {
		s[i] = w.open(w.segment(1 + i), opts(10 + i));
		to[i] = address(s[i], &len[i]);
	}
	char buf[64];
	size_t n;
	vg_reqid id;
	uint64_t seq[3];

	for (bool commit : { false, true }) {
		VG_REQUIRE_OK(vg_begin(w.v, 0));
		for (int i = 0; i < 3; i++)
			VG_REQUIRE_OK(vista_send_request(c, (sockaddr *)&to[i],
				len[i], "g", 1, &seq[i]));
		if (commit)
			VG_REQUIRE_OK(vg_commit(w.v));
		else
			VG_REQUIRE_OK(vg_abort(w.v));
		for (int i = 0; i < 3; i++) {
			int rc = vista_receive_request(s[i], &id, buf,
				sizeof(buf), &n, commit ? 2000 : 30);
			REQUIRE(rc == (commit ? 0 : -ETIMEDOUT));
		}
	}
	REQUIRE(stats(c).requests_sent == 3);
	for (int i = 0; i < 3; i++)
		w.close(s[i]);
	w.close(c);
}

TEST_CASE("a response cannot be received by the transaction that sent the "
	  "request",
	"[mlt]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	socklen_t len;
	auto to = address(s, &len);
	char buf[16];
	size_t n;
	uint64_t seq;

	VG_REQUIRE_OK(vg_begin(w.v, 0));
	VG_REQUIRE_OK(vista_send_request(c, (sockaddr *)&to, len, "x", 1,
		&seq));
	VG_REQUIRE_RC(vista_receive_response(c, &seq, buf, sizeof(buf), &n,
		0), VG_EUNCOMMITTED);
	VG_REQUIRE_OK(vg_commit(w.v));
	uint64_t none = 99;
	VG_REQUIRE_RC(vista_receive_response(c, &none, buf, sizeof(buf), &n,
		0), VG_ENOREQ);
	w.close(c);
	w.close(s);
}

TEST_CASE("calls outside a transaction are transactions of their own",
	"[mlt]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	socklen_t len;
	auto to = address(s, &len);
	char buf[64];
	size_t n;
	uint64_t seq = 0;
	vg_reqid id;

	VG_REQUIRE_OK(vista_send_request(c, (sockaddr *)&to, len, "solo", 4,
		&seq));
	VG_REQUIRE_OK(vista_receive_request(s, &id, buf, sizeof(buf), &n,
		2000));
	VG_REQUIRE_OK(vista_send_response(s, &id, "ok", 2));
	uint64_t any = 0;
	VG_REQUIRE_OK(vista_receive_response(c, &any, buf, sizeof(buf), &n,
		2000));
	REQUIRE(any == seq);
	REQUIRE(std::string(buf, n) == "ok");
	REQUIRE(stats(c).tx_committed == 2);
	REQUIRE(stats(s).tx_committed == 2);
	REQUIRE_FALSE(vista_in_transaction(w.v));
	w.close(c);
	w.close(s);
}

TEST_CASE("vista_select waits on several endpoints", "[mlt]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s1 = w.open(w.segment(1), opts(2));
	vg_endpoint *s2 = w.open(w.segment(2), opts(3));
	vg_endpoint *eps[3] = { c, s1, s2 };
	unsigned ready[3];

	VG_REQUIRE_RC(vista_select(eps, 3, ready, 20), -ETIMEDOUT);
	uint64_t seq = send(w.v, c, s2, "to s2");
	VG_REQUIRE_OK(vista_select(eps, 3, ready, 2000));
	REQUIRE(ready[0] == 0);
	REQUIRE(ready[1] == 0);
	REQUIRE(ready[2] == VG_READY_REQUEST);
	serve_one(w.v, s2, upper);
	VG_REQUIRE_OK(vista_select(eps, 3, ready, 2000));
	REQUIRE(ready[0] == VG_READY_RESPONSE);
	REQUIRE(ready[2] == 0);
	REQUIRE(receive(w.v, c, seq) == "TO S2");
	VG_REQUIRE_RC(vista_select(eps, 0, ready, 0), -EINVAL);
	w.close(c);
	w.close(s1);
	w.close(s2);
}

TEST_CASE("a server thread answers many pipelined requests exactly once",
	"[mlt]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	std::map<uint64_t, std::string> sent;
	{
		ServerThread st(w.v, s, upper);
		for (int round = 0; round < 20; round++) {
			socklen_t len;
			auto to = address(s, &len);
			VG_REQUIRE_OK(vg_begin(w.v, 0));
			for (int i = 0; i < 8; i++) {
				std::string m = "r" + std::to_string(round) +
					"m" + std::to_string(i);
				uint64_t seq;
				VG_REQUIRE_OK(vista_send_request(c,
					(sockaddr *)&to, len, m.data(), m.size(),
					&seq));
				sent[seq] = m;
			}
			VG_REQUIRE_OK(vg_commit(w.v));
			for (int i = 0; i < 8; i++) {
				char buf[64];
				size_t n;
				uint64_t any = 0;
				VG_REQUIRE_OK(vg_begin(w.v, 0));
				VG_REQUIRE_OK(vista_receive_response(c, &any,
					buf, sizeof(buf), &n, 5000));
				VG_REQUIRE_OK(vg_commit(w.v));
				REQUIRE(sent.count(any) == 1);
				REQUIRE(std::string(buf, n) == upper(sent[any]));
				sent.erase(any);
			}
		}
		st.finish();
		REQUIRE(st.error == 0);
		REQUIRE(st.served == 160);
	}
	REQUIRE(sent.empty());
	w.close(c);
	w.close(s);
}

TEST_CASE("one transaction receives a response and sends the next request",
	"[mlt]")
{
	World w;
	auto co = opts(1);
	// 8 slots: the slot just freed is often reused.  A request whose
	// response the transaction received counts until the commit: 2.
	co.max_requests = 2;
	vg_endpoint *c = w.open(w.segment(0), co);
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	ServerThread st(w.v, s, upper);
	socklen_t len;
	auto to = address(s, &len);
	uint64_t pending = 0;

	for (int i = 0; i < 100; i++) {
		std::string m = "cycle " + std::to_string(i);
		VG_REQUIRE_OK(vg_begin(w.v, 0));
		if (pending) {
			char buf[64];
			size_t n;
			uint64_t seq = pending;
			VG_REQUIRE_OK(vista_receive_response(c, &seq, buf,
				sizeof(buf), &n, 5000));
			REQUIRE(std::string(buf, n) ==
				upper("cycle " + std::to_string(i - 1)));
		}
		VG_REQUIRE_OK(vista_send_request(c, (sockaddr *)&to, len,
			m.data(), m.size(), &pending));
		VG_REQUIRE_OK(vg_commit(w.v));
	}
	REQUIRE(receive(w.v, c, pending) == "CYCLE 99");
	REQUIRE(stats(c).responses_delivered == 100);
	st.finish();
	REQUIRE(st.served == 100);
	char buf[8];
	size_t n;
	uint64_t any = 0;
	VG_REQUIRE_RC(vista_receive_response(c, &any, buf, sizeof(buf), &n, 0),
		VG_ENOREQ);
}

TEST_CASE("a commit that cannot log the requests it took aborts, and the "
	  "responses come again", "[mlt][errors]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	vista_segment *app = w.segment(2);
	char *base = (char *)vista_segment_base(app);
	char buf[64];
	size_t n = 0;

	uint64_t seq = send(w.v, c, s, "full");
	serve_one(w.v, s, upper);

	VG_REQUIRE_OK(vg_begin(w.v, 0));
	// Fill the lane: 4 KiB ranges 8 KiB apart, then 8-byte ones in the
	// gaps, until not even the smallest record fits.
	int rc = 0;
	size_t off = 0;
	while ((rc = vista_set_range(w.v, base + off, 4096)) == 0)
		off += 8192;
	REQUIRE(rc == VISTA_ELOGFULL);
	for (size_t gap = 4096; (rc = vista_set_range(w.v, base + gap, 8)) == 0;
		gap += 64)
		REQUIRE(gap < off);
	REQUIRE(rc == VISTA_ELOGFULL);
	memset(base, 0x5a, 4096); // a store the abort must undo

	// Taking the response declares nothing yet; the commit must.
	uint64_t q = seq;
	VG_REQUIRE_OK(vista_receive_response(c, &q, buf, sizeof(buf), &n, 2000));
	REQUIRE(std::string(buf, n) == "FULL");
	VG_REQUIRE_RC(vg_commit(w.v), VISTA_ELOGFULL);
	REQUIRE(std::string(vg_errormsg()).find("full") != std::string::npos);

	// Aborted: the program's store is undone, the response is delivered
	// again, once.
	REQUIRE(base[0] == 0);
	REQUIRE(receive(w.v, c, seq) == "FULL");
	VG_REQUIRE_RC(vista_receive_response(c, &q, buf, sizeof(buf), &n, 0),
		VG_ENOREQ);
	REQUIRE(stats(c).responses_delivered == 1);
	w.close(c);
	w.close(s);
}
