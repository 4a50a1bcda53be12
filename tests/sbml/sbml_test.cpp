// SPDX-License-Identifier: BSD-3-Clause
// sbml_test.cpp -- the logging protocol: wire format, SSN/RSN/ack rules,
// piggybacking, the send rule, duplicates, a lossy network, bad input,
// recovery's replay and its refusal of concurrent failures.
//
// Built three times: plainly, and against the two broken builds
// (-DSBML_BROKEN_SEND_UNACKED, -DSBML_BROKEN_DELIVER_BEFORE_RECORDED),
// where the test of the rule that build breaks must see it broken.

#include "sbml_test.hpp"

#include <atomic>
#include <thread>

using sbt::Group;

static std::string msg(int i)
{
	return "message-" + std::to_string(i);
}

TEST_CASE("datagrams seal and parse; every refusal has its verdict", "[wire]")
{
	uint8_t buf[2048];
	sbml_wire_rsn r[2] = { { 7, 11 }, { 8, 0 } };
	uint64_t a[1] = { 5 };
	sbml__wire w{};
	w.type = SBML_PKT_DATA;
	w.src = 1;
	w.dst = 2;
	w.nrsn = 2;
	w.nack = 1;
	w.payload_len = 5;
	w.group = 9;
	w.inc = 77;
	w.ssn = 3;
	w.sii = 4;
	w.ckpt = 2;
	size_t len = sbml__wire_seal(buf, &w, r, a, "hello");
	REQUIRE(len == 72 + 32 + 8 + 5);

	sbml__wire out{};
	REQUIRE(sbml__wire_parse(buf, len, 4096, &out) == SBML__WIRE_OK);
	REQUIRE(out.ssn == 3);
	REQUIRE(out.sii == 4);
	REQUIRE(out.ckpt == 2);
	REQUIRE(out.nrsn == 2);
	sbml_wire_rsn g;
	sbml__wire_rsn(&out, 1, &g);
	REQUIRE(g.ssn == 8);
	REQUIRE(g.rsn == 0);
	REQUIRE(sbml__wire_ack(&out, 0) == 5);
	REQUIRE(std::string((const char *)out.payload, 5) == "hello");

	SECTION("truncated")
	{
		REQUIRE(sbml__wire_parse(buf, 10, 4096, &out) ==
			SBML__WIRE_TRUNCATED);
		REQUIRE(sbml__wire_parse(buf, len - 1, 4096, &out) ==
			SBML__WIRE_TRUNCATED);
	}
	SECTION("longer than its header says")
	{
		REQUIRE(sbml__wire_parse(buf, len + 1, 4096, &out) ==
			SBML__WIRE_MALFORMED);
	}
	SECTION("a payload above max_message")
	{
		REQUIRE(sbml__wire_parse(buf, len, 4, &out) ==
			SBML__WIRE_MALFORMED);
	}
	SECTION("a flipped payload byte")
	{
		buf[len - 1] ^= 1;
		REQUIRE(sbml__wire_parse(buf, len, 4096, &out) ==
			SBML__WIRE_CHECKSUM);
	}
	SECTION("field rules (resealed, so only the rule refuses)")
	{
		sbml__wire bad = w;
		SECTION("src == dst") { bad.dst = bad.src; }
		SECTION("ssn 0 on DATA") { bad.ssn = 0; }
		SECTION("incarnation 0") { bad.inc = 0; }
		SECTION("RSN entries on a REPLAY_REQ")
		{
			bad.type = SBML_PKT_REPLAY_REQ;
			bad.payload_len = 0;
		}
		SECTION("RECOVERING on DATA")
		{
			bad.flags = SBML_PKT_F_RECOVERING;
		}
		SECTION("unknown type") { bad.type = 42; }
		size_t l2 = sbml__wire_seal(buf, &bad, r, a, "hello");
		REQUIRE(sbml__wire_parse(buf, l2, 4096, &out) ==
			SBML__WIRE_MALFORMED);
	}
}

TEST_CASE("SSN, RSN, acknowledgement: messages become fully logged",
	"[rsn]")
{
	Group g(2);
	sbml *a = g.h[0], *b = g.h[1];
	for (int i = 1; i <= 3; i++)
		SBML_REQUIRE_OK(sbml_send(a, 1, msg(i).data(), msg(i).size()));
	REQUIRE(sbt::log_len(a, 1) == 3);
	REQUIRE(!sbt::all_fully_logged(a, 1));
	for (int i = 1; i <= 3; i++) {
		std::string m;
		unsigned from = 9;
		SBML_REQUIRE_OK(g.recv(1, SBML_ANY, m, &from));
		REQUIRE(m == msg(i));
		REQUIRE(from == 0);
	}
	REQUIRE(b->sii == 3);
	// the RSNs come back, are recorded in order and acknowledged
	REQUIRE(g.drive([&] {
		return sbt::all_fully_logged(a, 1) && b->unacked == 0;
	}));
	uint64_t want = 1;
	for (sbml__msg *m = a->peer[1].log; m; m = m->next) {
		REQUIRE(m->ssn == want);
		REQUIRE(m->rsn == want);
		want++;
	}
	// a reply is tagged with b's state interval: a depends on it
	SBML_REQUIRE_OK(sbml_send(b, 0, "r", 1));
	std::string m;
	SBML_REQUIRE_OK(g.recv(0, 1, m));
	uint64_t dv[2];
	sbml_depvec(a, dv, 2);
	REQUIRE(dv[1] == 3);
	sbml_depvec(b, dv, 2);
	REQUIRE(dv[0] == 0);
	struct sbml_stats st;
	sbml_stats(b, &st);
	REQUIRE(st.received == 3);
	REQUIRE(st.state_interval == 3);
	// a checkpoint that could not be taken keeps the RSN history: a
	// duplicate is still answered with its RSN, not "need not log"
	SBML_REQUIRE_RC(sbml_checkpoint(b), DC_ENOTINIT);
	REQUIRE(b->nhist == 3);
	REQUIRE(b->ckpt_sii == 0);
	sbml__msg *first = a->peer[1].log;
	REQUIRE(first != nullptr);
	first->rsn = 0; // as if a's record of it were lost: a asks again
	a->peer[1].partial++;
	a->peer[1].first_partial = first;
	first->last_tx = 0;
	REQUIRE(g.drive([&] { return sbt::all_fully_logged(a, 1); }));
	REQUIRE(first->rsn == 1);
	sbml_stats(b, &st);
	REQUIRE(st.dup_rsn_answered == 1);
	REQUIRE(st.dup_nolog_answered == 0);
}

TEST_CASE("request/reply: RSNs and acknowledgements ride on the messages",
	"[piggyback]")
{
	Group g(2);
	// no timer fires within the test: every RSN must ride
	for (auto *s : g.h)
		s->o.rsn_delay_us = 5000000, s->o.rto_ms = 5000;
	sbml *a = g.h[0], *b = g.h[1];
	bool recorded_before_delivery = true;
	for (int i = 0; i < 10; i++) {
		std::string req = msg(i), rep;
		SBML_REQUIRE_OK(sbml_send(a, 1, req.data(), req.size()));
		SBML_REQUIRE_OK(g.recv(1, 0, rep));
		REQUIRE(rep == req);
		SBML_REQUIRE_OK(sbml_send(b, 0, ("re:" + rep).data(),
			rep.size() + 3));
		SBML_REQUIRE_OK(g.recv(0, 1, rep));
		REQUIRE(rep == "re:" + req);
		// P2: the request's RSN rode on the reply and was recorded
		// before the reply was delivered
		recorded_before_delivery &= a->peer[1].log_tail->rsn != 0;
	}
	struct sbml_stats sa, sb;
	sbml_stats(a, &sa);
	sbml_stats(b, &sb);
#ifdef SBML_BROKEN_DELIVER_BEFORE_RECORDED
	WARN("broken build: RSNs riding on messages are not recorded first");
	REQUIRE(!recorded_before_delivery);
#else
	REQUIRE(recorded_before_delivery);
	REQUIRE(sb.sends_piggybacked == 10);
	REQUIRE(sa.sends_piggybacked == 9); // the first request owes nothing
	REQUIRE(sa.sends_waited == 0);
	REQUIRE(sb.sends_waited == 0);
	REQUIRE(sa.ctrl_packets == 0);
	REQUIRE(sb.ctrl_packets == 0);
	REQUIRE(sa.packets_out == 10);
	REQUIRE(sb.packets_out == 10);
#endif
}

TEST_CASE("a send waits while an RSN owed to another process is "
	  "unacknowledged", "[send-rule]")
{
	Group g(3, nullptr, 300);
	sbml *a = g.h[0], *b = g.h[1];
	SBML_REQUIRE_OK(sbml_send(a, 1, "x", 1));
	std::string m;
	SBML_REQUIRE_OK(g.recv(1, 0, m));
	// b owes a the RSN of "x"; a is not running: b may not send to c
	int rc = sbml_send(b, 2, "y", 1);
	bool c_got = false;
	for (int i = 0; i < 50 && !c_got; i++) {
		(void)sbml__pump(g.h[2], sbml__now_ns() + 1000000);
		c_got = g.h[2]->peer[1].queue != nullptr;
	}
	bool violated = c_got && !sbt::all_fully_logged(a, 1);
#ifdef SBML_BROKEN_SEND_UNACKED
	WARN("broken build: sends while RSNs are unacknowledged: " << rc);
	REQUIRE(violated);
#else
	REQUIRE(!violated);
	REQUIRE(rc == SBML_ETIMEDOUT);
	REQUIRE(std::string(sbml_errormsg()).find("not acknowledged") !=
		std::string::npos);
	// a comes back: the RSN is recorded and acknowledged, b may send
	b->o.timeout_ms = 20000;
	std::thread ta([&] { (void)sbml_flush(a, 5000); });
	SBML_REQUIRE_OK(sbml_send(b, 2, "y", 1));
	ta.join();
	REQUIRE(sbt::all_fully_logged(a, 1));
	SBML_REQUIRE_OK(g.recv(2, 1, m));
	REQUIRE(m == "y");
	struct sbml_stats st;
	sbml_stats(b, &st);
	REQUIRE(st.sends_waited == 2);
#endif
}

#if !defined(SBML_BROKEN_SEND_UNACKED) && \
	!defined(SBML_BROKEN_DELIVER_BEFORE_RECORDED)

TEST_CASE("a wait for acknowledgements re-sends what is owed every rto, "
	  "not at every round", "[quiet]")
{
	// b owes a the RSN of "x" and a computes (never pumps): b's flush
	// and output wait 100 ms each; the RSN goes again every rto (5 ms),
	// about 20 times per wait -- not in a busy loop of packets
	Group g(2, nullptr, 100);
	sbml *a = g.h[0], *b = g.h[1];
	SBML_REQUIRE_OK(sbml_send(a, 1, "x", 1));
	std::string m;
	SBML_REQUIRE_OK(g.recv(1, 0, m));
	struct sbml_stats st0, st1, st2;
	sbml_stats(b, &st0);
	REQUIRE(sbml_flush(b, 100) == SBML_ETIMEDOUT);
	sbml_stats(b, &st1);
	int fd = open("/dev/null", O_WRONLY);
	REQUIRE(fd >= 0);
	REQUIRE(sbml_output(b, fd, "y", 1) == SBML_ETIMEDOUT);
	close(fd);
	sbml_stats(b, &st2);
	INFO("flush " << st1.ctrl_packets - st0.ctrl_packets << ", output " <<
		st2.ctrl_packets - st1.ctrl_packets << " packets of their own");
	REQUIRE(st1.ctrl_packets - st0.ctrl_packets >= 1);
	REQUIRE(st1.ctrl_packets - st0.ctrl_packets <= 40);
	REQUIRE(st2.ctrl_packets - st1.ctrl_packets >= 1);
	REQUIRE(st2.ctrl_packets - st1.ctrl_packets <= 40);
	// a comes back: the RSN is acknowledged, the output goes
	std::thread ta([&] { (void)sbml_flush(a, 2000); });
	b->o.timeout_ms = 5000;
	SBML_REQUIRE_OK(sbml_flush(b, 5000));
	ta.join();
	REQUIRE(sbt::all_fully_logged(a, 1));
}

TEST_CASE("an RSN in a packet of its own is acknowledged at once",
	  "[quiet]")
{
	// a holds acknowledgements for 10 s when nothing rides (rsn_delay);
	// b's flush, waiting for the acknowledgement of the RSN it returned
	// alone, must not wait for that
	Group g(2, nullptr, 20000);
	sbml_close(g.h[0]);
	g.base.rsn_delay_us = 10000000;
	g.open(0);
	sbml *a = g.h[0], *b = g.h[1];
	SBML_REQUIRE_OK(sbml_send(a, 1, "x", 1));
	std::string m;
	SBML_REQUIRE_OK(g.recv(1, 0, m));
	std::atomic<bool> over{ false };
	std::thread ta([&] {
		while (!over)
			(void)sbml__pump(a, sbml__now_ns() + 1000000);
	});
	int rc = sbml_flush(b, 1500);
	over = true;
	ta.join();
	REQUIRE(rc == 0);
	REQUIRE(sbt::all_fully_logged(a, 1));
}

TEST_CASE("sbml_poll serves the network without waiting and delivers "
	  "nothing", "[quiet]")
{
	// b computes, calling only sbml_poll: the RSN it owes a is
	// acknowledged, a's second message is queued but not delivered
	Group g(2);
	sbml *a = g.h[0], *b = g.h[1];
	SBML_REQUIRE_OK(sbml_send(a, 1, "x", 1));
	std::string m;
	SBML_REQUIRE_OK(g.recv(1, 0, m));
	REQUIRE(b->unacked == 1);
	std::atomic<bool> over{ false };
	std::thread ta([&] {
		while (!over)
			(void)sbml__pump(a, sbml__now_ns() + 1000000);
	});
	for (int i = 0; i < 20000 && b->unacked; i++) {
		SBML_REQUIRE_OK(sbml_poll(b));
		usleep(100);
	}
	over = true;
	ta.join();
	REQUIRE(b->unacked == 0);
	REQUIRE(sbt::all_fully_logged(a, 1));
	SBML_REQUIRE_OK(sbml_send(a, 1, "y", 1));
	for (int i = 0; i < 20000 && !b->peer[0].queue; i++) {
		SBML_REQUIRE_OK(sbml_poll(b));
		usleep(100);
	}
	REQUIRE(b->peer[0].queue != nullptr);
	struct sbml_stats st;
	sbml_stats(b, &st);
	REQUIRE(st.received == 1);
	REQUIRE(b->sii == 1);
	SBML_REQUIRE_OK(g.recv(1, 0, m));
	REQUIRE(m == "y");
}

TEST_CASE("duplicates are delivered once and answered with their RSN",
	"[dup]")
{
	sbml_faults f{};
	f.duplicate = 1.0;
	f.seed = 7;
	Group g(2, &f);
	for (int i = 1; i <= 50; i++)
		SBML_REQUIRE_OK(sbml_send(g.h[0], 1, msg(i).data(),
			msg(i).size()));
	for (int i = 1; i <= 50; i++) {
		std::string m;
		SBML_REQUIRE_OK(g.recv(1, 0, m));
		REQUIRE(m == msg(i));
	}
	REQUIRE(g.drive([&] { return sbt::all_fully_logged(g.h[0], 1); }));
	std::string m;
	REQUIRE(g.recv(1, 0, m, nullptr, 50) == SBML_ETIMEDOUT);
	struct sbml_stats st;
	sbml_stats(g.h[1], &st);
	REQUIRE(st.duplicates > 0);
	REQUIRE(st.received == 50);
	REQUIRE(st.fault_duplicated > 0);
}

// A token ring of n processes for `rounds` rounds, each process a thread:
// every send goes to a process other than the one it owes an RSN, so
// every send waits for an acknowledgement (Section 3.3).
static void ring(Group &g, unsigned rounds, std::vector<uint64_t> &final)
{
	unsigned n = (unsigned)g.h.size();
	std::vector<std::thread> t;
	std::vector<int> rcs(n, 0);
	final.assign(n, 0);
	for (unsigned p = 0; p < n; p++)
		t.emplace_back([&, p] {
			sbml *s = g.h[p];
			uint64_t v = 1;
			int rc = 0;
			if (p == 0)
				rc = sbml_send(s, 1, &v, sizeof(v));
			for (unsigned r = 0; rc == 0 && r < rounds; r++) {
				size_t len;
				rc = sbml_recv(s, (int)((p + n - 1) % n), &v,
					sizeof(v), &len, nullptr, -1);
				if (rc)
					break;
				v = v * 31 + p;
				if (p != 0 || r + 1 < rounds)
					rc = sbml_send(s, (p + 1) % n, &v,
						sizeof(v));
			}
			final[p] = v;
			if (rc == 0)
				rc = sbml_finish(s);
			rcs[p] = rc;
		});
	for (auto &th : t)
		th.join();
	for (unsigned p = 0; p < n; p++) {
		INFO("process " << p << ": " << sbml_err_name(rcs[p]));
		REQUIRE(rcs[p] == 0);
	}
}

static uint64_t ring_expect(unsigned n, unsigned rounds)
{
	uint64_t v = 1;
	for (unsigned r = 0; r < rounds; r++)
		for (unsigned p = 1; p <= n; p++)
			v = v * 31 + (p % n);
	return v;
}

TEST_CASE("loss, duplication, delay and reordering are survived", "[lossy]")
{
	sbml_faults f{};
	f.drop = 0.2;
	f.duplicate = 0.1;
	f.delay = 0.2;
	f.reorder = 0.2;
	f.delay_max_us = 3000;
	f.seed = GENERATE(1, 2);
	Group g(3, &f);
	for (auto *s : g.h)
		s->o.linger_ms = 200;
	std::vector<uint64_t> fin;
	ring(g, 60, fin);
	REQUIRE(fin[0] == ring_expect(3, 60));
	struct sbml_stats st{}, sum{};
	for (auto *s : g.h) {
		sbml_stats(s, &st);
		REQUIRE(st.received == 60);
		sum.fault_dropped += st.fault_dropped;
		sum.retransmits += st.retransmits;
		sum.duplicates += st.duplicates;
		sum.sends_waited += st.sends_waited;
	}
	REQUIRE(sum.fault_dropped > 0);
	REQUIRE(sum.retransmits > 0);
	REQUIRE(sum.sends_waited > 0);
}

TEST_CASE("bad input is counted and dropped; bad calls are refused",
	"[bad-input]")
{
	Group g(2);
	sbml *b = g.h[1];
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	REQUIRE(fd >= 0);
	sockaddr_storage to;
	socklen_t tl;
	SBML_REQUIRE_OK(sbml__parse_addr(g.addrs[1].c_str(), &to, &tl));
	auto raw = [&](const void *p, size_t l) {
		REQUIRE(sendto(fd, p, l, 0, (sockaddr *)&to, tl) == (ssize_t)l);
	};
	uint8_t buf[512];
	sbml__wire w{};
	w.type = SBML_PKT_DATA;
	w.src = 0;
	w.dst = 1;
	w.group = 1;
	w.inc = 1;
	w.ssn = 1;
	w.payload_len = 3;
	size_t len = sbml__wire_seal(buf, &w, nullptr, nullptr, "abc");
	raw(buf, 20);      // truncated
	buf[len - 1] ^= 1; // checksum
	raw(buf, len);
	buf[len - 1] ^= 1;
	buf[0] ^= 1; // magic
	raw(buf, len);
	buf[0] ^= 1;
	raw(buf, len); // a good datagram, but not from process 0's address
	w.group = 5;   // another group (and a foreign address)
	len = sbml__wire_seal(buf, &w, nullptr, nullptr, "abc");
	raw(buf, len);
	close(fd);
	std::string m;
	REQUIRE(g.recv(1, SBML_ANY, m, nullptr, 30) == SBML_ETIMEDOUT);
	struct sbml_stats st;
	sbml_stats(b, &st);
	REQUIRE(st.drop_truncated == 1);
	REQUIRE(st.drop_checksum == 1);
	REQUIRE(st.drop_malformed == 1);
	REQUIRE(st.drop_foreign == 2);
	REQUIRE(st.received == 0);

	// stale: a packet of an earlier incarnation of process 0
	g.h[0]->inc = b->peer[0].inc ? b->peer[0].inc - 1 : 1;
	b->peer[0].inc = g.h[0]->inc + 1;
	SBML_REQUIRE_OK(sbml_send(g.h[0], 1, "old", 3));
	REQUIRE(g.recv(1, SBML_ANY, m, nullptr, 30) == SBML_ETIMEDOUT);
	sbml_stats(b, &st);
	REQUIRE(st.drop_stale > 0);

	// bad calls
	SBML_REQUIRE_RC(sbml_send(b, 1, "x", 1), SBML_EADDR);
	SBML_REQUIRE_RC(sbml_send(b, 7, "x", 1), SBML_EADDR);
	std::string big(5000, 'x');
	SBML_REQUIRE_RC(sbml_send(b, 0, big.data(), big.size()), SBML_ETOOBIG);
	char c;
	SBML_REQUIRE_RC(sbml_recv(b, 1, &c, 1, nullptr, nullptr, 0),
		SBML_EADDR);
	SBML_REQUIRE_RC(sbml_checkpoint(b), DC_ENOTINIT);
	b->o.no_logging = true; // nothing to recover with
	SBML_REQUIRE_RC(sbml_checkpoint(b), SBML_ESTATE);
	b->o.no_logging = false;
	sbml_opts o = g.base;
	o.self = 5;
	sbml *x = nullptr;
	SBML_REQUIRE_RC(sbml_open(&o, &x), SBML_EADDR);
	const char *bad[2] = { "127.0.0.1", "localhost:80" };
	o.self = 0;
	o.addrs = bad;
	SBML_REQUIRE_RC(sbml_open(&o, &x), SBML_EADDR);
	REQUIRE(x == nullptr);
}

// Serve the network for some handles on a thread of their own.
struct Server {
	std::atomic<bool> stop{ false };
	std::thread t;
	Server(std::vector<sbml *> hs)
	{
		t = std::thread([this, hs] {
			while (!stop)
				for (auto *s : hs)
					(void)sbml__pump(s,
						sbml__now_ns() + 1000000);
		});
	}
	~Server()
	{
		stop = true;
		t.join();
	}
};

TEST_CASE("recovery replays the logged messages in RSN order and the "
	  "duplicates of the re-execution get their RSNs back", "[recover]")
{
	Group g(3);
	sbml *a = g.h[0];
	// process 1 receives from 0 and 2, interleaved, and answers 0
	SBML_REQUIRE_OK(sbml_send(a, 1, "a1", 2));
	std::string m;
	std::vector<std::string> got;
	SBML_REQUIRE_OK(g.recv(1, 0, m));
	got.push_back(m);
	SBML_REQUIRE_OK(sbml_send(g.h[2], 1, "c1", 2));
	SBML_REQUIRE_OK(g.recv(1, 2, m));
	got.push_back(m);
	SBML_REQUIRE_OK(sbml_send(a, 1, "a2", 2));
	SBML_REQUIRE_OK(g.recv(1, 0, m));
	got.push_back(m);
	REQUIRE(g.drive([&] { return g.h[1]->unacked == 0; }));
	SBML_REQUIRE_OK(sbml_send(g.h[1], 0, "reply", 5));
	SBML_REQUIRE_OK(g.recv(0, 1, m));
	REQUIRE(g.drive([&] {
		return sbt::all_fully_logged(a, 1) &&
			sbt::all_fully_logged(g.h[2], 1) &&
			sbt::all_fully_logged(g.h[1], 0) &&
			g.h[1]->unacked == 0 && a->unacked == 0;
	}));
	uint64_t reply_rsn = g.h[1]->peer[0].log->rsn;

	// process 1 dies and restarts from its initial state
	sbml_close(g.h[1]);
	g.h[1] = nullptr;
	sbml_opts o = g.base;
	o.self = 1;
	sbml *b = nullptr;
	SBML_REQUIRE_OK(sbml_open(&o, &b));
	g.h[1] = b;
	{
		Server srv({ a, g.h[2] });
		SBML_REQUIRE_OK(sbml__recover(b));
	}
	REQUIRE(b->replaying);
	// R1: the replay comes first, whatever is asked
	for (size_t i = 0; i < got.size(); i++) {
		char buf[16];
		size_t len;
		unsigned from;
		SBML_REQUIRE_OK(sbml_recv(b, SBML_ANY, buf, sizeof(buf), &len,
			&from, 0));
		REQUIRE(std::string(buf, len) == got[i]);
	}
	REQUIRE(!b->replaying);
	REQUIRE(b->sii == 3);
	// the re-execution sends its reply again: a duplicate, answered
	// with the original RSN, so the send log is as before
	SBML_REQUIRE_OK(sbml_send(b, 0, "reply", 5));
	REQUIRE(g.drive([&] { return sbt::all_fully_logged(b, 0); }));
	REQUIRE(b->peer[0].log->rsn == reply_rsn);
	struct sbml_stats st;
	sbml_stats(a, &st);
	REQUIRE(st.dup_rsn_answered >= 1);
	REQUIRE(st.received == 1);
	sbml_stats(b, &st);
	REQUIRE(st.replayed == 3);
	REQUIRE(st.recoveries == 1);
}

TEST_CASE("a recovery collects a long log over a lossy network: a request "
	  "again keeps what came", "[recover]")
{
	// every datagram lost with probability 0.2: an answer of 150
	// messages arrives whole about once in 10^15 tries, so asking from
	// scratch each time never ends; a window asked again keeps what
	// came and gets 80% of the rest each time
	sbml_faults f{};
	f.drop = 0.2;
	f.seed = 11;
	Group g(2, &f, 4000);
	sbml *a = g.h[0];
	const unsigned L = 150;
	for (unsigned i = 0; i < L; i++) {
		std::string msg = "m" + std::to_string(i);
		SBML_REQUIRE_OK(sbml_send(a, 1, msg.data(), msg.size()));
		std::string m;
		SBML_REQUIRE_OK(g.recv(1, 0, m));
		REQUIRE(m == msg);
	}
	REQUIRE(g.drive([&] {
		return sbt::all_fully_logged(a, 1) && g.h[1]->unacked == 0;
	}));
	sbml_close(g.h[1]);
	g.h[1] = nullptr;
	sbml_opts o = g.base;
	o.self = 1;
	sbml *b = nullptr;
	SBML_REQUIRE_OK(sbml_open(&o, &b));
	g.h[1] = b;
	{
		Server srv({ a });
		SBML_REQUIRE_OK(sbml__recover(b));
	}
	for (unsigned i = 0; i < L; i++) {
		char buf[16];
		size_t len;
		SBML_REQUIRE_OK(sbml_recv(b, 0, buf, sizeof(buf), &len, nullptr,
			0));
		REQUIRE(std::string(buf, len) == "m" + std::to_string(i));
	}
	REQUIRE(!b->replaying);
}

TEST_CASE("the logged messages come window by window: a whole window is "
	  "followed by the next, one with a packet lost is asked again "
	  "keeping what came", "[recover]")
{
	Group g(2);
	sbml *b = g.h[1];
	b->recovering = true;
	b->replay_last = UINT64_MAX;
	sbml__peer *p = &b->peer[0];
	p->rec_from = b->sii + 1;
	auto pkt = [&](uint8_t type, uint64_t arg, uint64_t ssn,
			   const char *data) {
		sbml__wire w{};
		w.type = type;
		w.src = 0;
		w.dst = 1;
		w.arg = arg;
		w.ssn = ssn;
		w.payload = (const uint8_t *)data;
		w.payload_len = data ? (uint32_t)strlen(data) : 0;
		sbml__on_replay_pkt(b, &w);
	};
	// the first window: RSNs 1..4 (the next is 6: 5 is another
	// sender's), of which 3 and 4 were lost
	pkt(SBML_PKT_REPLAY, 1, 1, "m1");
	pkt(SBML_PKT_REPLAY, 2, 2, "m2");
	pkt(SBML_PKT_REPLAY_END, 4, 6, nullptr);
	REQUIRE(p->rec_from == 1);
	REQUIRE(p->rec_got == 2);
	REQUIRE(!p->rec_end);
	sbml__recover_tick(b, sbml__now_ns() + 1000000000ull);
	// asked again for the same window, 1 and 2 kept
	REQUIRE(p->rec_from == 1);
	pkt(SBML_PKT_REPLAY, 1, 1, "m1");
	pkt(SBML_PKT_REPLAY, 3, 3, "m3");
	pkt(SBML_PKT_REPLAY, 4, 4, "m4");
	pkt(SBML_PKT_REPLAY_END, 4, 6, nullptr);
	// whole: the next window, from the sender's next RSN
	REQUIRE(p->rec_from == 6);
	REQUIRE(p->rec_got == 0);
	REQUIRE(!p->rec_end);
	// a late answer to the first window changes nothing
	pkt(SBML_PKT_REPLAY_END, 4, 6, nullptr);
	REQUIRE(p->rec_from == 6);
	// the last window: RSN 6, and nothing after it
	pkt(SBML_PKT_REPLAY, 6, 5, "m6");
	pkt(SBML_PKT_REPLAY_END, 1, 0, nullptr);
	REQUIRE(p->rec_end);
	uint64_t want[] = { 1, 2, 3, 4, 6 };
	unsigned n = 0;
	for (sbml__msg *m = b->replay; m; m = m->next) {
		REQUIRE(n < 5);
		REQUIRE(m->rsn == want[n++]);
	}
	REQUIRE(n == 5);
	b->recovering = false;
}

// Process 1 receives L messages from 0 (and, with c, from 0 and 2 in
// turn) so that everything is fully logged, then restarts fresh.
static void
fill_log(Group &g, unsigned L, bool two)
{
	for (unsigned i = 0; i < L; i++) {
		std::string m0 = "a" + std::to_string(i), m2, got;
		SBML_REQUIRE_OK(sbml_send(g.h[0], 1, m0.data(), m0.size()));
		if (two) {
			m2 = "c" + std::to_string(i);
			SBML_REQUIRE_OK(sbml_send(g.h[2], 1, m2.data(),
				m2.size()));
		}
		SBML_REQUIRE_OK(g.recv(1, 0, got));
		REQUIRE(got == m0);
		if (two) {
			SBML_REQUIRE_OK(g.recv(1, 2, got));
			REQUIRE(got == m2);
		}
	}
	REQUIRE(g.drive([&] {
		return sbt::all_fully_logged(g.h[0], 1) &&
			(!two || sbt::all_fully_logged(g.h[2], 1)) &&
			g.h[1]->unacked == 0;
	}));
	sbml_close(g.h[1]);
	g.h[1] = nullptr;
	g.open(1);
}

TEST_CASE("a recovery of a long log over a lossy network costs about one "
	  "packet per logged message", "[recover]")
{
	// 2% of the datagrams lost: an answer sent whole, again from the
	// first RSN missing, loses one of its first ~50 packets each time
	// and sends the log about L/50 times over
	sbml_faults f{};
	f.drop = 0.02;
	f.seed = 5;
	Group g(2, &f, 20000);
	const unsigned L = 3000;
	fill_log(g, L, false);
	sbml *a = g.h[0], *b = g.h[1];
	struct sbml_stats s0, s1;
	SBML_REQUIRE_OK(sbml_stats(a, &s0));
	{
		Server srv({ a });
		SBML_REQUIRE_OK(sbml__recover(b));
	}
	SBML_REQUIRE_OK(sbml_stats(a, &s1));
	uint64_t sent = (s1.packets_out + s1.fault_dropped) -
		(s0.packets_out + s0.fault_dropped);
	INFO("packets the sender sent for " << L << " logged messages: "
					    << sent);
	CHECK(sent >= L);
	CHECK(sent <= 2 * L);
	for (unsigned i = 0; i < L; i++) {
		char buf[16];
		size_t len;
		SBML_REQUIRE_OK(sbml_recv(b, 0, buf, sizeof(buf), &len, nullptr,
			0));
		REQUIRE(std::string(buf, len) == "a" + std::to_string(i));
	}
	REQUIRE(!b->replaying);
}

TEST_CASE("a gap a second failure left in a long log: replayed up to it, "
	  "the messages after it sent again", "[recover]")
{
	// 0 and 2 sent to 1 in turn; 2 then lost the log of its second
	// half (its failure rolled it back): the RSN of its first lost
	// message is a gap in 1's log, in the middle of 0's windows
	sbml_faults f{};
	f.drop = 0.02;
	f.seed = 9;
	Group g(3, &f, 20000);
	const unsigned L = 400;
	fill_log(g, L, true);
	sbml *a = g.h[0], *b = g.h[1], *c = g.h[2];
	sbml__peer *cp = &c->peer[1];
	sbml__msg **pp = &cp->log;
	for (unsigned i = 0; i < L / 2; i++)
		pp = &(*pp)->next;
	uint64_t gap = (*pp)->rsn;
	struct sbml_stats st;
	REQUIRE(gap == L + 2); // a's L/2 + 1st message is just before
	sbml__free_list(pp);
	cp->log_tail = nullptr;
	for (sbml__msg *m = cp->log; m; m = m->next)
		cp->log_tail = m;
	{
		Server srv({ a, c });
		SBML_REQUIRE_OK(sbml__recover(b));
	}
	REQUIRE(b->replay_last == gap - 1);
	// replayed: 0's and 2's messages in turn up to the gap (0's
	// L/2-th last); then 0's messages after it, sent again by 0
	// (step 5), in order
	for (unsigned i = 0; i < L / 2; i++) {
		std::string got;
		SBML_REQUIRE_OK(g.recv(1, SBML_ANY, got));
		REQUIRE(got == "a" + std::to_string(i));
		SBML_REQUIRE_OK(g.recv(1, SBML_ANY, got));
		REQUIRE(got == "c" + std::to_string(i));
	}
	for (unsigned i = L / 2; i < L; i++) {
		std::string got;
		SBML_REQUIRE_OK(g.recv(1, 0, got));
		REQUIRE(got == "a" + std::to_string(i));
		REQUIRE(b->replaying == false);
	}
	SBML_REQUIRE_OK(sbml_stats(b, &st));
	REQUIRE(st.replayed == gap - 1);
	REQUIRE(sbt::log_len(c, 1) == L / 2);
}

TEST_CASE("two concurrent failures: recovered when the dependency vectors "
	  "allow it, refused loudly when they do not", "[concurrent]")
{
	Group g(3);
	bool b_sent_to_c = GENERATE(false, true);
	SBML_REQUIRE_OK(sbml_send(g.h[0], 1, "a1", 2));
	SBML_REQUIRE_OK(sbml_send(g.h[0], 1, "a2", 2));
	std::string m;
	SBML_REQUIRE_OK(g.recv(1, 0, m));
	SBML_REQUIRE_OK(g.recv(1, 0, m));
	if (b_sent_to_c) {
		std::thread ta([&] { (void)sbml_flush(g.h[0], 5000); });
		SBML_REQUIRE_OK(sbml_send(g.h[1], 2, "b1", 2));
		ta.join();
		SBML_REQUIRE_OK(g.recv(2, 1, m));
		uint64_t dv[3];
		sbml_depvec(g.h[2], dv, 3);
		REQUIRE(dv[1] == 2);
	}
	// processes 0 and 1 die together: 0's log of 1's messages is lost
	for (unsigned i : { 0u, 1u }) {
		sbml_close(g.h[i]);
		g.h[i] = nullptr;
		g.open(i);
	}
	g.h[0]->recovering = true; // 0 is recovering too (it answers so)
	g.h[0]->replay_last = 0;
	int rc;
	{
		Server srv({ g.h[0], g.h[2] });
		rc = sbml__recover(g.h[1]);
	}
	if (!b_sent_to_c) {
		// nobody depends on the lost intervals: recovered to 0
		SBML_REQUIRE_OK(rc);
		REQUIRE(g.h[1]->sii == 0);
	} else {
		INFO(sbml_errormsg());
		REQUIRE(rc == SBML_ECONCURRENT);
		std::string e = sbml_errormsg();
		REQUIRE(e.find("processes 2 (on interval 2)") !=
			std::string::npos);
		REQUIRE(e.find("process 1") != std::string::npos);
		REQUIRE(e.find("recovering too: 0") != std::string::npos);
		// R2: the handle refuses further work
		SBML_REQUIRE_RC(sbml_send(g.h[1], 0, "x", 1), SBML_EFATAL);
	}
}

TEST_CASE("a finished process says DONE again to a peer whose recovery "
	  "forgot it", "[finish]")
{
	Group g(2, nullptr, 3000);
	sbml *a = g.h[0], *b = g.h[1];
	// b has finished; a's DONE was acknowledged and b's acknowledged by
	// a life of a that a recovery has since rolled back
	b->announcing = true;
	b->finishing = true;
	b->peer[0].done_rcvd = true;
	b->peer[0].done_acked = true;
	a->o.linger_ms = 100;
	int rc = -1;
	std::atomic<bool> over{ false };
	std::thread ta([&] {
		rc = sbml_finish(a);
		over = true;
	});
	while (!over)
		(void)sbml__pump(b, sbml__now_ns() + 1000000);
	ta.join();
	INFO(sbml_errormsg());
	REQUIRE(rc == 0);
	REQUIRE(a->peer[1].done_rcvd);
}

#endif
