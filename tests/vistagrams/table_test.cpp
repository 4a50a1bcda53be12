// SPDX-License-Identifier: BSD-3-Clause
// table_test.cpp -- the persistent hash tables (table.c) against a model,
// and the deferred-operation log (oplog.c) crashed at every point of its
// commit and replay
#include "vg_test.hpp"

#include <set>

#include "vg_int.h"

using namespace vgt;

// T4: every live key lies in the non-FREE run that starts at its home, and
// every tombstone lies on the probe path of some live key.  The first
// violation, or "".
static std::string check_runs(vg_endpoint *ep,
	const std::map<uint64_t, int32_t> &live)
{
	std::vector<bool> needed(ep->req_mask + 1);
	for (auto [seq, slot] : live) {
		uint32_t i = (uint32_t)rio_mix64(seq) & ep->req_mask;
		for (; i != (uint32_t)slot; i = (i + 1) & ep->req_mask) {
			if (vg_slot_state(ep->req[i].word) == VG_SLOT_FREE)
				return "key " + std::to_string(seq) +
					" is behind FREE slot " +
					std::to_string(i);
			needed[i] = true;
		}
	}
	for (uint32_t i = 0; i <= ep->req_mask; i++)
		if (vg_slot_state(ep->req[i].word) == VG_REQ_DELETED &&
		    !needed[i])
			return "tombstone " + std::to_string(i) +
				" is needed by no key";
	return "";
}

// Delete as a transaction does, then clean up as its commit does.
static void req_delete(vg_endpoint *ep, uint32_t slot)
{
	if (vg__req_delete_tx(ep, slot))
		vg__req_sweep(ep, slot);
}

TEST_CASE("the request table behaves like a map, and its tombstones go",
	"[table]")
{
	World w;
	auto o = opts(1);
	o.max_requests = 48; // 128 slots: runs wrap around the end
	vg_endpoint *ep = w.open_volatile(o);
	test::Rng rng(test::seed());
	std::map<uint64_t, int32_t> live;
	std::set<uint64_t> gone;
	uint64_t next = 1;

	for (int step = 0; step < 20000; step++) {
		bool insert = live.size() < 48 &&
			(live.empty() || rng.below(100) < 55);
		if (insert) {
			int32_t ins;
			uint64_t seq = next++;
			REQUIRE(vg__req_find(ep, seq, &ins) < 0);
			REQUIRE(ins >= 0);
			uint32_t st = vg_slot_state(ep->req[ins].word);
			REQUIRE((st == VG_SLOT_FREE || st == VG_REQ_DELETED));
			ep->req[ins].seq = seq;
			ep->req[ins].word = vg_slot_word(VG_REQ_LIVE, 0);
			live[seq] = ins;
		} else {
			auto it = live.begin();
			std::advance(it, (long)rng.below(live.size()));
			req_delete(ep, (uint32_t)it->second);
			gone.insert(it->first);
			live.erase(it);
		}
		std::string bad = check_runs(ep, live);
		if (!bad.empty())
			FAIL("step " << step << ": " << bad);
		if (step % 97 == 0) {
			for (auto [seq, slot] : live)
				REQUIRE(vg__req_find(ep, seq, nullptr) == slot);
			for (uint64_t seq : gone)
				REQUIRE(vg__req_find(ep, seq, nullptr) < 0);
		}
	}
	// Delete everything: no tombstone may be left behind.
	for (auto [seq, slot] : live)
		req_delete(ep, (uint32_t)slot);
	for (uint32_t i = 0; i <= ep->req_mask; i++)
		REQUIRE(vg_slot_state(ep->req[i].word) == VG_SLOT_FREE);
}

TEST_CASE("the response table keys on node, incarnation and sequence",
	"[table]")
{
	World w;
	vg_endpoint *ep = w.open_volatile(opts(1));
	test::Rng rng(test::seed());
	std::map<std::tuple<uint64_t, uint64_t, uint64_t>, int32_t> live;

	for (int step = 0; step < 5000; step++) {
		auto key = std::make_tuple(1 + rng.below(3), 1 + rng.below(2),
			1 + rng.below(40));
		auto [node, inc, seq] = key;
		int32_t ins, at = vg__resp_find(ep, node, inc, seq, &ins);
		if (live.count(key)) {
			REQUIRE(at == live[key]);
			vg__resp_delete(ep, (uint32_t)at);
			live.erase(key);
		} else if (live.size() < 32) {
			REQUIRE(at < 0);
			REQUIRE(ins >= 0);
			struct vg_resp_slot *s = &ep->resp[ins];
			s->node = node;
			s->inc = inc;
			s->seq = seq;
			s->word = vg_slot_word(VG_RESP_RECEIVED, 0);
			live[key] = ins;
		}
	}
	for (auto &[key, slot] : live) {
		auto [node, inc, seq] = key;
		REQUIRE(vg__resp_find(ep, node, inc, seq, nullptr) == slot);
	}
}

// ---- the deferred-operation log, crashed at each point ----

static const char *crash_where;
static int crash_after;

static void crash_hook(const char *where)
{
	if (strcmp(where, crash_where) == 0 && crash_after-- == 0)
		_exit(0); // the process dies here: no destructor, no flush
}

static struct vg_endpoint_opts port_opts(uint64_t node, uint16_t port)
{
	auto o = opts(node);
	o.port = port;
	return o;
}

static uint16_t port_of(vg_endpoint *ep)
{
	socklen_t len;
	auto ss = address(ep, &len);
	return ntohs(((sockaddr_in *)&ss)->sin_port);
}

// Kill a transaction that sends three requests at `where` (the n-th
// time), then recover: the three are delivered exactly once, or (killed
// before the commit point) never.
static void crash_sends(const char *where, int n, bool committed)
{
	test::TempDir d;
	std::string portfile = d / "port";

	auto r = test::run_child([&] {
		World w(d.path);
		vg_endpoint *c = w.open(w.segment(0), opts(1));
		vg_endpoint *s = w.open(w.segment(1), opts(2));
		test::write_file(portfile, std::to_string(port_of(s)));
		socklen_t len;
		auto to = address(s, &len);
		VG_REQUIRE_OK(vg_begin(w.v, 0));
		for (int i = 0; i < 3; i++) {
			std::string m = "m" + std::to_string(i);
			VG_REQUIRE_OK(vista_send_request(c, (sockaddr *)&to, len,
				m.data(), m.size(), nullptr));
		}
		crash_where = where;
		crash_after = n;
		vg__crash_hook = crash_hook;
		vg_commit(w.v);
		_exit(3); // the crash point was not reached
	});
	REQUIRE(r.exited);
	REQUIRE(r.code == 0);

	World w(d.path);
	uint16_t port = (uint16_t)std::stoi(test::read_file(portfile));
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), port_opts(2, port));
	vg_endpoint *eps[2] = { c, s };
	std::multiset<std::string> got;
	for (int round = 0; round < 40; round++) {
		unsigned ready[2];
		vista_select(eps, 2, ready, 5);
		if (ready[1] & VG_READY_REQUEST) {
			char buf[64];
			size_t len;
			vg_reqid id;
			VG_REQUIRE_OK(vista_receive_request(s, &id, buf,
				sizeof(buf), &len, 0));
			got.insert(std::string(buf, len));
		}
	}
	if (committed) {
		REQUIRE(got == std::multiset<std::string>{ "m0", "m1", "m2" });
		REQUIRE(stats(c).ops_recovered == 3);
	} else {
		REQUIRE(got.empty());
		REQUIRE(c->req_live == 0);
	}
}

TEST_CASE("a crash at any point of commit and replay of sends", "[oplog]")
{
	crash_sends("commit:before", 0, false);
	crash_sends("commit:after", 0, true);
	for (int k = 0; k < 3; k++)
		crash_sends("replay:op", k, true);
}

TEST_CASE("a crash right after the commit that received a response",
	"[oplog]")
{
	test::TempDir d;
	std::string portfile = d / "port";
	auto r = test::run_child([&] {
		World w(d.path);
		vg_endpoint *c = w.open(w.segment(0), opts(1));
		vg_endpoint *s = w.open(w.segment(1), opts(2));
		test::write_file(portfile, std::to_string(port_of(s)));
		uint64_t seq = send(w.v, c, s, "q");
		serve_one(w.v, s, [](const std::string &) { return "a"; });
		char buf[8];
		size_t n;
		VG_REQUIRE_OK(vg_begin(w.v, 0));
		VG_REQUIRE_OK(vista_receive_response(c, &seq, buf, sizeof(buf),
			&n, 2000));
		crash_where = "commit:after";
		crash_after = 0;
		vg__crash_hook = crash_hook;
		vg_commit(w.v);
		_exit(3);
	});
	REQUIRE(r.exited);
	REQUIRE(r.code == 0);

	World w(d.path);
	uint16_t port = (uint16_t)std::stoi(test::read_file(portfile));
	vg_endpoint *c = w.open(w.segment(0), opts(1));
	vg_endpoint *s = w.open(w.segment(1), port_opts(2, port));
	// The response was received by a committed transaction: the request
	// is gone and is never delivered again.
	REQUIRE(c->req_live == 0);
	char buf[8];
	size_t n;
	uint64_t seq = 1;
	VG_REQUIRE_RC(vista_receive_response(c, &seq, buf, sizeof(buf), &n,
		0), VG_ENOREQ);
	// The next cycle works, and tells the server that request 1 is done.
	uint64_t seq2 = send(w.v, c, s, "q2");
	REQUIRE(seq2 == 2);
	serve_one(w.v, s, [](const std::string &) { return "a2"; });
	REQUIRE(receive(w.v, c, seq2) == "a2");
	REQUIRE(stats(c).responses_delivered == 1);
}
