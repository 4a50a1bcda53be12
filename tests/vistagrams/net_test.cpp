// SPDX-License-Identifier: BSD-3-Clause
// net_test.cpp -- retransmission, the retransmit port, duplicates, stale
// and malformed datagrams, incarnations, volatile endpoints, restarts
#include "vg_test.hpp"

#include <unistd.h>

#include "vg_int.h"

using namespace vgt;

static std::string echo(const std::string &s)
{
	return "re:" + s;
}

static void set_faults(vg_endpoint *ep, double drop, double dup = 0)
{
	ep->net.f = {};
	ep->net.f.drop = drop;
	ep->net.f.duplicate = dup;
	ep->net.f.delay_max_us = 500;
	ep->net.rng = 42;
	ep->net.faulty = drop > 0 || dup > 0;
}

// Select on both endpoints until done(ready) holds, ready the readiness
// of each the last select reported (or fail after 2000 selects of at most
// 10 ms).
template <class Done>
static void select_until(vg_endpoint **eps, Done done)
{
	unsigned ready[2] = {};
	for (int n = 0; n < 2000 && !done(ready); n++) {
		int rc = vista_select(eps, 2, ready, 10);
		REQUIRE((rc == 0 || rc == -ETIMEDOUT));
	}
	REQUIRE(done(ready));
}

// Serve both endpoints until `what` is ready on eps[i] (or fail).
static void pump_until(vg_endpoint *a, vg_endpoint *b, int i, unsigned what)
{
	vg_endpoint *eps[2] = { a, b };
	select_until(eps,
		[&](const unsigned *ready) { return (ready[i] & what) != 0; });
}

TEST_CASE("a lost response is resent from the response table", "[net]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));

	uint64_t seq = send(w.v, c, s, "a");
	set_faults(s, 1.0);
	serve_one(w.v, s, echo);
	REQUIRE(stats(s).fault_dropped == 1);
	set_faults(s, 0);
	pump_until(c, s, 0, VG_READY_RESPONSE);
	REQUIRE(receive(w.v, c, seq) == "re:a");
	REQUIRE(stats(c).retransmitted >= 1);
	REQUIRE(stats(s).responses_resent >= 1);
	REQUIRE(stats(s).requests_delivered == 1);
	w.close(c);
	w.close(s);
}

TEST_CASE("an unknown retransmitted request is delivered as new", "[net]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));

	set_faults(c, 1.0);
	uint64_t seq = send(w.v, c, s, "lost");
	set_faults(c, 0);
	pump_until(c, s, 1, VG_READY_REQUEST);
	REQUIRE(stats(s).forwarded == 1);
	serve_one(w.v, s, echo);
	REQUIRE(receive(w.v, c, seq) == "re:lost");
	w.close(c);
	w.close(s);
}

TEST_CASE("a retransmission of a request not answered yet is dropped",
	"[net]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	vg_endpoint *eps[2] = { c, s };
	char buf[16];
	size_t n;
	vg_reqid id;

	uint64_t seq = send(w.v, c, s, "slow");
	// Received and committed, answered later.
	VG_REQUIRE_OK(vg_begin(w.v, 0));
	VG_REQUIRE_OK(vista_receive_request(s, &id, buf, sizeof(buf), &n,
		2000));
	VG_REQUIRE_OK(vg_commit(w.v));
	select_until(eps, [&](const unsigned *) {
		return stats(s).unanswered_dropped > 0;
	});
	REQUIRE(stats(s).requests_delivered == 1);
	// Also while the answer is in an open transaction.
	VG_REQUIRE_OK(vg_begin(w.v, 0));
	VG_REQUIRE_OK(vista_send_response(s, &id, "done", 4));
	VG_REQUIRE_RC(vista_send_response(s, &id, "twice", 5), VG_EANSWERED);
	uint64_t before = stats(s).unanswered_dropped;
	select_until(eps, [&](const unsigned *) {
		return stats(s).unanswered_dropped > before;
	});
	REQUIRE(stats(s).responses_resent == 0);
	VG_REQUIRE_OK(vg_commit(w.v));
	REQUIRE(receive(w.v, c, seq) == "done");
	w.close(c);
	w.close(s);
}

TEST_CASE("duplicated datagrams are delivered once", "[net]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	vg_endpoint *eps[2] = { c, s };
	unsigned ready[2];

	set_faults(c, 0, 1.0);
	set_faults(s, 0, 1.0);
	for (int i = 0; i < 5; i++) {
		uint64_t seq = send(w.v, c, s, std::to_string(i));
		serve_one(w.v, s, echo);
		REQUIRE(receive(w.v, c, seq) == "re:" + std::to_string(i));
	}
	for (int i = 0; i < 20; i++)
		vista_select(eps, 2, ready, 2);
	REQUIRE(stats(s).requests_delivered == 5);
	REQUIRE(stats(c).responses_delivered == 5);
	REQUIRE(stats(s).duplicates_dropped + stats(s).stale_dropped >= 4);
	REQUIRE(stats(c).duplicates_dropped + stats(c).stale_dropped >= 4);
	w.close(c);
	w.close(s);
}

// A datagram as the library would send it.
static std::string datagram(uint8_t type, uint64_t node, uint64_t inc,
	uint64_t seq, uint64_t low, const std::string &payload,
	std::vector<uint64_t> acks = {})
{
	struct vg__wire wv = {};
	struct vg_wire_hdr h;
	wv.type = type;
	wv.nacks = (uint16_t)acks.size();
	wv.payload_len = (uint32_t)payload.size();
	wv.src_node = wv.req_node = node;
	wv.src_inc = wv.req_inc = inc;
	wv.seq = seq;
	wv.low = low;
	vg__wire_seal(&h, &wv, acks.data(),
		vg__wire_payload_csum(payload.data(), payload.size()));
	std::string d((const char *)&h, sizeof(h));
	d.append((const char *)acks.data(), acks.size() * 8);
	return d + payload;
}

static void send_raw(vg_endpoint *to, unsigned port_add, const std::string &d)
{
	socklen_t len;
	auto ss = address(to, &len);
	auto *in = (sockaddr_in *)&ss;
	in->sin_port = htons((uint16_t)(ntohs(in->sin_port) + port_add));
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	REQUIRE(fd >= 0);
	REQUIRE(sendto(fd, d.data(), d.size(), 0, (sockaddr *)&ss, len) ==
		(ssize_t)d.size());
	close(fd);
}

TEST_CASE("malformed, truncated, oversized and corrupt datagrams are "
	  "counted and dropped",
	"[net]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	std::string good = datagram(VG_PKT_REQUEST, 9, 99, 1, 1, "payload");

	for (unsigned port : { 0u, 1u }) {
		send_raw(s, port, "");
		send_raw(s, port, "garbage");
		send_raw(s, port, good.substr(0, good.size() - 1));
		send_raw(s, port, good + "x");
		std::string bad = good;
		bad[0] ^= 1; // magic
		send_raw(s, port, bad);
		bad = good;
		bad[sizeof(vg_wire_hdr) + 2] ^= 1; // payload: checksum
		send_raw(s, port, bad);
		send_raw(s, port, datagram(VG_PKT_REQUEST, 9, 99, 1, 1,
			std::string(2000, 'z'))); // > max_message 1024
		// low above seq
		send_raw(s, port, datagram(VG_PKT_REQUEST, 9, 99, 5, 6, ""));
		send_raw(s, port, datagram(7, 9, 99, 1, 1, ""));
	}
	send_raw(s, 0, std::string(60000, 'q'));
	VG_REQUIRE_OK(vg_poll(s, 100));
	auto st = stats(s);
	REQUIRE(st.truncated_dropped == 6);
	REQUIRE(st.malformed_dropped == 8);
	REQUIRE(st.checksum_dropped == 2);
	REQUIRE(st.oversized_dropped == 3);
	REQUIRE(st.received == 19);
	REQUIRE(st.requests_delivered == 0);

	// The tables are intact: a real cycle works, and the valid datagram
	// is delivered exactly once.
	uint64_t seq = send(w.v, c, s, "real");
	serve_one(w.v, s, echo);
	REQUIRE(receive(w.v, c, seq) == "re:real");
	send_raw(s, 0, good);
	send_raw(s, 1, good);
	vg_reqid id = serve_one(w.v, s, echo);
	REQUIRE(id.node == 9);
	VG_REQUIRE_OK(vg_poll(s, 50));
	REQUIRE(stats(s).requests_delivered == 2);
	w.close(c);
	w.close(s);
}

TEST_CASE("stale datagrams are counted and dropped", "[net]")
{
	World w;
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), opts(2));

	for (int i = 0; i < 3; i++) {
		uint64_t seq = send(w.v, c, s, "x");
		serve_one(w.v, s, echo);
		receive(w.v, c, seq);
	}
	VG_REQUIRE_OK(vg_poll(c, 30)); // ack_delay: the acks go alone
	VG_REQUIRE_OK(vg_poll(s, 30));
	REQUIRE(stats(c).acks_sent == 1);
	REQUIRE(stats(s).responses_freed == 3);

	// Requests below the client's watermark, on both ports.
	uint64_t before = stats(s).stale_dropped;
	send_raw(s, 0, datagram(VG_PKT_REQUEST, 1, c->inc, 2, 2, "x"));
	send_raw(s, 1, datagram(VG_PKT_REQUEST, 1, c->inc, 3, 3, "x"));
	// An older incarnation of the client.
	send_raw(s, 0, datagram(VG_PKT_REQUEST, 1, c->inc - 1, 9, 9, "x"));
	VG_REQUIRE_OK(vg_poll(s, 50));
	REQUIRE(stats(s).stale_dropped == before + 3);
	REQUIRE(stats(s).requests_delivered == 3);

	// Responses to requests the client does not wait for.
	struct vg__wire wv = {};
	struct vg_wire_hdr h;
	wv.type = VG_PKT_RESPONSE;
	wv.src_node = 2;
	wv.src_inc = s->inc;
	wv.req_node = 1;
	wv.req_inc = c->inc;
	for (uint64_t seq : { 1u, 2u, 77u }) {
		wv.seq = seq;
		vg__wire_seal(&h, &wv, nullptr, vg__wire_payload_csum("", 0));
		send_raw(c, 0, std::string((const char *)&h, sizeof(h)));
	}
	VG_REQUIRE_OK(vg_poll(c, 50));
	REQUIRE(stats(c).stale_dropped == 3);
	w.close(c);
	w.close(s);
}

TEST_CASE("a client whose tables were made anew is a new incarnation",
	"[net]")
{
	World w;
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	vg_endpoint *c = w.open(w.segment(0), opts(5));
	uint64_t old_inc = c->inc;
	for (int i = 0; i < 4; i++) {
		uint64_t seq = send(w.v, c, s, "old");
		serve_one(w.v, s, echo);
		receive(w.v, c, seq);
	}
	w.close(c);
	// Same node id, new tables: sequence numbers start again at 1.
	c = w.open(w.segment(3), opts(5));
	REQUIRE(c->inc > old_inc);
	uint64_t seq = send(w.v, c, s, "new");
	REQUIRE(seq == 1);
	serve_one(w.v, s, echo);
	REQUIRE(receive(w.v, c, seq) == "re:new");
	uint64_t before = stats(s).stale_dropped;
	send_raw(s, 0, datagram(VG_PKT_REQUEST, 5, old_inc, 9, 9, "x"));
	VG_REQUIRE_OK(vg_poll(s, 50));
	REQUIRE(stats(s).stale_dropped == before + 1);
	w.close(c);
	w.close(s);
}

TEST_CASE("volatile endpoints run the same protocol without persistence",
	"[net]")
{
	World w;
	vg_endpoint *vc = w.open_volatile(opts(7));
	vg_endpoint *vs = w.open_volatile(opts(8));
	vg_endpoint *s = w.open(w.segment(1), opts(2));
	socklen_t len;
	char buf[64];
	size_t n;
	vg_reqid id;

	// volatile -> volatile, then volatile -> persistent
	for (vg_endpoint *server : { vs, s }) {
		auto to = address(server, &len);
		uint64_t seq = 0;
		VG_REQUIRE_OK(vista_send_request(vc, (sockaddr *)&to, len, "v",
			1, &seq));
		VG_REQUIRE_OK(vista_receive_request(server, &id, buf,
			sizeof(buf), &n, 2000));
		VG_REQUIRE_OK(vista_send_response(server, &id, "w", 1));
		VG_REQUIRE_OK(vista_receive_response(vc, &seq, buf, sizeof(buf),
			&n, 2000));
		REQUIRE(std::string(buf, n) == "w");
	}
	// A volatile send inside a Vista transaction leaves at once.
	auto to = address(vs, &len);
	VG_REQUIRE_OK(vg_begin(w.v, 0));
	VG_REQUIRE_OK(vista_send_request(vc, (sockaddr *)&to, len, "now", 3,
		nullptr));
	VG_REQUIRE_OK(vista_receive_request(vs, &id, buf, sizeof(buf), &n,
		2000));
	VG_REQUIRE_OK(vg_abort(w.v));
	REQUIRE(stats(vc).tx_committed == 0);
	VG_REQUIRE_RC(vg_begin(nullptr, 0), -EINVAL);
	w.close(vc);
	w.close(vs);
	w.close(s);
}

TEST_CASE("messages survive a restart of both sides", "[net]")
{
	World w;
	vista_segment *cs = w.segment(0), *ss = w.segment(1);
	vg_endpoint *c = w.open(cs, opts(1));
	vg_endpoint *s = w.open(ss, opts(2));
	auto so = opts(2);
	socklen_t len;
	auto sa = address(s, &len);
	so.port = ntohs(((sockaddr_in *)&sa)->sin_port);

	// The request is lost, then both sides go down.
	set_faults(c, 1.0);
	uint64_t lost = send(w.v, c, s, "lost request");
	// A second request arrives, is answered, the response is lost.
	set_faults(c, 0);
	uint64_t seq2 = send(w.v, c, s, "lost response");
	set_faults(s, 1.0);
	serve_one(w.v, s, echo);
	w.close(c);
	w.close(s);
	w.restart();
	cs = w.segment(0);
	ss = w.segment(1);
	c = w.open(cs, opts(1));
	s = w.open(ss, so);

	// The client retransmits both; the server delivers the lost request
	// and answers the other from its table.
	pump_until(c, s, 1, VG_READY_REQUEST);
	vg_reqid id = serve_one(w.v, s, echo);
	REQUIRE(id.seq == lost);
	std::map<uint64_t, std::string> got;
	for (int i = 0; i < 2; i++) {
		char buf[64];
		size_t n;
		uint64_t any = 0;
		pump_until(c, s, 0, VG_READY_RESPONSE);
		VG_REQUIRE_OK(vista_receive_response(c, &any, buf, sizeof(buf),
			&n, 0));
		got[any] = std::string(buf, n);
	}
	REQUIRE(got[lost] == "re:lost request");
	REQUIRE(got[seq2] == "re:lost response");
	REQUIRE(stats(s).requests_delivered == 1);
	REQUIRE(stats(s).responses_resent >= 1);
	w.close(c);
	w.close(s);
}
