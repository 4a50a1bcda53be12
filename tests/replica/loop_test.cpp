// SPDX-License-Identifier: BSD-3-Clause
// loop_test.cpp -- a primary and a backup over loopback: every commit mode,
// failover and rejoin, a stale primary, bad peers, a stalled and a cut
// connection (a proxy between the two), and the broken build that applies
// a record before it has arrived whole.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <random>
#include <thread>

#include "vr_test.hpp"

extern "C" {
#include "replica_layout.h"
#include "vr_int.h"
}

using vrt::Node;

static const size_t SEG = 1 << 20;

// Each transaction stores one value at two offsets a page apart, so a
// consistent copy has equal pairs.
static void pair_tx(Node &p, std::mt19937 &rng, int *rc_out)
{
	size_t slot = rng() % 128;
	uint64_t val = rng();
	*rc_out = p.put({ slot * 8, 4096 + slot * 8 }, val);
}

// "" if every pair is equal, else the first that is not.
static std::string pairs_bad(const char *base)
{
	for (size_t s = 0; s < 128; s++) {
		uint64_t a, b;
		memcpy(&a, base + s * 8, 8);
		memcpy(&b, base + 4096 + s * 8, 8);
		if (a != b)
			return "pair " + std::to_string(s) + " differs";
	}
	return "";
}

struct Follower {
	std::thread t;
	std::atomic<int> rc{ 1 };
	void start(Node &b, unsigned port)
	{
		t = std::thread([&b, port, this] {
			rc = vr_follow(b.n, "127.0.0.1", port);
		});
	}
	int join()
	{
		t.join();
		return rc;
	}
};

[[maybe_unused]] static uint64_t status_seq(Node &n)
{
	struct vr_status st;
	vr_status(n.n, &st);
	return st.seq;
}

// vr_open on a new segment (at slots `slot` and `slot` + 1) refuses
// options `bad` (-EINVAL, an error message naming `why`, no node) and
// accepts `good`.
[[maybe_unused]] static bool open_refused(struct vr_opts bad,
	struct vr_opts good, const char *why, int slot = 0)
{
	test::TempDir d;
	std::string lp = d.path + "/log", sp = d.path + "/seg",
		    tp = d.path + "/state";
	struct vista_opts vo = {};
	vista *v;
	vista_segment *seg;
	vr_node *n = nullptr;
	vo.log_path = lp.c_str();
	VR_REQUIRE_OK(vista_init(&vo, &v));
	VR_REQUIRE_OK(vista_map(v, sp.c_str(), vrt::addr(slot), SEG,
		VISTA_CREATE, &seg));
	bad.state_path = good.state_path = tp.c_str();
	bad.state_addr = good.state_addr = vrt::addr(slot + 1);
	VR_REQUIRE_RC(vr_open(v, seg, &bad, &n), -EINVAL);
	REQUIRE(n == nullptr);
	bool named = std::string(vr_errormsg()).find(why) !=
		std::string::npos;
	VR_REQUIRE_OK(vr_open(v, seg, &good, &n));
	VR_REQUIRE_OK(vr_close(n));
	VR_REQUIRE_OK(vista_fini(v));
	return named;
}

#ifndef VR_BROKEN_APPLY_EARLY
// Every commit mode over loopback: 2,000 transactions (pairs, and a page
// every 100th), all acknowledged, the backup's copy equal.  whole:
// vr_opts.whole_ranges, every declared byte sent in records the sender
// seals (primary.c P6).  batch_ms: vr_opts.batch_ms (0: the default).
// sdiff: vr_opts.sender_diff, the records diffed by the sender against
// its mirror (primary.c P7).
static void replicate_modes(bool whole, unsigned batch_ms = 0,
	bool sdiff = false)
{
#ifdef VR_BROKEN_SEAL_LATE
	// 2-safe and pipelined would wait out their timeouts for acks.
	for (vr_mode mode : { VR_1SAFE }) {
#else
	for (vr_mode mode : { VR_1SAFE, VR_2SAFE, VR_PIPELINED }) {
#endif
		test::TempDir da, db;
		Node p, b;
		struct vr_opts o = {};
		o.mode = mode;
		o.window = 8;
		// Small: the producer must wait, and records of 8 KiB cross
		// its end (whole: sealed from a copy there).
		o.ring_size = 64 << 10;
		// Every transaction, not timing: a loaded machine (both nodes
		// in this process) is no lost peer.
		o.timeout_ms = 2000;
		o.whole_ranges = whole;
		o.batch_ms = batch_ms;
		o.sender_diff = sdiff;
		p.open(da.path, 0, SEG, o);
		b.open(db.path, 2, SEG, o);
		VR_REQUIRE_OK(vr_serve(p.n, "127.0.0.1", 0));
		Follower f;
		f.start(b, vr_port(p.n));
		VR_REQUIRE_OK(vr_wait_backup(p.n, 5000));
		std::mt19937 rng(mode + (whole ? 10 : 0) + (sdiff ? 20 : 0));
		for (int i = 0; i < 2000; i++) {
			int rc;
			if (i % 100 == 99) {
				// A large transaction: a whole page.
				VR_REQUIRE_OK(vista_begin_transaction(p.v, 0));
				VR_REQUIRE_OK(vista_set_range(p.v,
					p.base + 65536, 8192));
				memset(p.base + 65536, i, 8192);
				rc = vr_commit(p.n);
			} else {
				pair_tx(p, rng, &rc);
			}
#ifdef VR_BROKEN_SEAL_LATE
			// Committed locally; past the limit once the backup
			// has refused the stream (VR_ENOBACKUP).
			REQUIRE((rc == 0 || rc == VR_ENOBACKUP));
			continue;
#endif
			VR_REQUIRE_OK(rc);
			if (mode == VR_2SAFE)
				// 2-safe: durable on the backup already.
				REQUIRE(status_seq(b) >= vr_last_seq());
		}
#ifdef VR_BROKEN_SEAL_LATE
		vr_stop(b.n);
		int frc = f.join();
		WARN("broken build caught: the backup returned "
			<< vr_err_name(frc));
		REQUIRE(frc == VR_ECORRUPT);
		continue;
#endif
		VR_REQUIRE_OK(vr_sync(p.n));
		struct vr_status st;
		VR_REQUIRE_OK(vr_status(p.n, &st));
		REQUIRE(st.acked == st.seq);
		REQUIRE(st.seq == 2000);
		if (whole) {
			// Every declared byte, changed or not: 16 data bytes a
			// pair, 8192 a page; a header and a piece per range.
			REQUIRE(st.data_bytes == 1980 * 16 + 20 * 8192);
			REQUIRE(st.meta_bytes == 2000 * 40 +
				(1980 * 2 + 20) * 8);
		} else {
			// Only changed bytes travel: 8 + 8 data bytes a pair.
			REQUIRE(st.data_bytes < 2000 * 16 + 20 * 8192);
		}
		vr_stop(b.n);
		// The backup verified every record (an unsealed one is
		// VR_ECORRUPT) and holds the same bytes.
		VR_REQUIRE_OK(f.join());
		REQUIRE(memcmp(p.base, b.base, SEG) == 0);
		REQUIRE(b.role() == VR_BACKUP);
		// A backup refuses to commit.
		VR_REQUIRE_RC(b.put({ 0 }, 1), VR_ENOTPRIMARY);
	}
}

TEST_CASE("each commit mode replicates every transaction", "[loop]")
{
	replicate_modes(false);
	// Diffed by the sender, sealed by it too (P6, P7).
	replicate_modes(false, 0, true);
}

// A new backup, given a full copy of p's segment, following until
// stopped.
struct Backup {
	test::TempDir d;
	Node b;
	Follower f;
	Backup(Node &p, int slot, const struct vr_opts &o)
	{
		b.open(d.path, slot, SEG, o);
		f.start(b, vr_port(p.n));
		VR_REQUIRE_OK(vr_wait_backup(p.n, 5000));
	}
	~Backup()
	{
		if (f.t.joinable()) { // a failed check: still stopped
			vr_stop(b.n);
			f.t.join();
		}
	}
	// Stop it; its copy must equal p's, or, in the broken build named
	// by `broken`, differ (true: caught).
	bool stop_equal(Node &p, bool broken)
	{
		std::string bad;
		vr_stop(b.n);
		VR_REQUIRE_OK(f.join());
		for (size_t i = 0; i < SEG && bad.empty(); i++)
			if (p.base[i] != b.base[i])
				bad = "byte " + std::to_string(i) + " differs";
		if (broken) {
			WARN("broken build caught: " << bad);
			REQUIRE(!bad.empty());
		} else {
			REQUIRE(bad == "");
		}
		return broken;
	}
};

#ifdef VR_BROKEN_MIRROR_BEHIND
static const bool BROKEN_BEHIND = true;
#else
static const bool BROKEN_BEHIND = false;
#endif
#ifdef VR_BROKEN_MIRROR_STALE
static const bool BROKEN_STALE = true;
#else
static const bool BROKEN_STALE = false;
#endif

TEST_CASE("sender_diff: a value put back travels, after each record and "
	"after a full copy", "[sdiff]")
{
	test::TempDir da;
	Node p;
	struct vr_opts o = {};
	o.mode = VR_1SAFE;
	o.timeout_ms = 2000;
	o.sender_diff = true;
	p.open(da.path, 0, SEG, o);
	VR_REQUIRE_OK(vr_serve(p.n, "127.0.0.1", 0));
	struct vr_status st;
	{
		Backup b1(p, 2, o);
		// 0 -> 5 -> 0: the second record differs from the first's
		// bytes, which the mirror must hold by then.
		VR_REQUIRE_OK(p.put({ 0 }, 5));
		VR_REQUIRE_OK(p.put({ 0 }, 0));
		VR_REQUIRE_OK(p.put({ 8 }, 7));
		VR_REQUIRE_OK(vr_sync(p.n));
		if (b1.stop_equal(p, BROKEN_BEHIND))
			return;
		VR_REQUIRE_OK(vr_status(p.n, &st));
		// Only changed bytes travel: one byte of each value (whole
		// ranges: 24).
		REQUIRE(st.data_bytes == 3);
	}
	for (int i = 0; i < 500; i++) {
		VR_REQUIRE_OK(vr_status(p.n, &st));
		if (!st.connected)
			break;
		usleep(10000);
	}
	REQUIRE(!st.connected);
	// Committed with no backup (within the limit granted, or past it):
	// kept in the ring, then covered by the next backup's full copy.
	int rc = p.put({ 8 }, 9);
	REQUIRE((rc == 0 || rc == VR_ENOBACKUP));
	Backup b2(p, 4, o);
	VR_REQUIRE_OK(vr_status(p.n, &st));
	REQUIRE(st.copies == 2);
	// 9 -> 7: the backup holds 9 from the copy; a mirror that missed the
	// copy would still hold 7 and send nothing.
	VR_REQUIRE_OK(p.put({ 8 }, 7));
	VR_REQUIRE_OK(vr_sync(p.n));
	if (b2.stop_equal(p, BROKEN_STALE))
		return;
	// Not both: the sender diffs, or every declared byte travels.
	o.whole_ranges = true;
	struct vr_opts ok = o;
	ok.sender_diff = false;
	REQUIRE(open_refused(o, ok, "whole_ranges", 6));
}

TEST_CASE("whole ranges: the sender seals each record, every mode "
	"replicates", "[whole]")
{
	replicate_modes(true);
}

TEST_CASE("batches of 5 ms: every commit mode replicates every transaction; "
	"a batch longer than the heartbeat is refused", "[loop]")
{
	// Window 8 and 5 ms batches: 1-safe and pipelined commits wait for
	// grants and acks that the sender's next batch brings.
	replicate_modes(true, 5);
	replicate_modes(false, 5);

	struct vr_opts o = {}, ok;
	o.mode = VR_1SAFE;
	o.heartbeat_ms = 10;
	o.batch_ms = 11;
	ok = o;
	ok.batch_ms = 10;
	REQUIRE(open_refused(o, ok, "heartbeat"));
}

TEST_CASE("a record splits at 8 equal bytes, the cost of a piece", "[loop]")
{
	test::TempDir da, db;
	Node p, b;
	struct vr_opts o = {};
	o.mode = VR_2SAFE;
	o.timeout_ms = 2000;
	p.open(da.path, 0, SEG, o);
	b.open(db.path, 2, SEG, o);
	VR_REQUIRE_OK(vr_serve(p.n, "127.0.0.1", 0));
	Follower f;
	f.start(b, vr_port(p.n));
	VR_REQUIRE_OK(vr_wait_backup(p.n, 5000));
	// This thread's first commit after the full copy goes whole (P3).
	VR_REQUIRE_OK(p.put({ 0 }, 1));
	struct vr_status s0, s1;
	VR_REQUIRE_OK(vr_status(p.n, &s0));
	// One 64-byte range, zero before: bytes 0 and 12 change (11 equal
	// bytes between: two pieces, 1 + 1 data bytes, cost less than one of
	// 13), bytes 40 and 44 (3 equal between: one piece of 5).
	char *r = p.base + 8192;
	VR_REQUIRE_OK(vista_begin_transaction(p.v, 0));
	VR_REQUIRE_OK(vista_set_range(p.v, r, 64));
	r[0] = 1;
	r[12] = 2;
	r[40] = 3;
	r[44] = 4;
	VR_REQUIRE_OK(vr_commit(p.n));
	VR_REQUIRE_OK(vr_status(p.n, &s1));
	REQUIRE(s1.records == s0.records + 1);
	REQUIRE(s1.data_bytes - s0.data_bytes == 7);
	// header 40, three pieces of 8, data 7 padded to 8
	REQUIRE(s1.meta_bytes - s0.meta_bytes == 40 + 24 + 1);
	vr_stop(b.n);
	VR_REQUIRE_OK(f.join());
	REQUIRE(memcmp(p.base, b.base, SEG) == 0);
}

TEST_CASE("failover: promotion, then the old primary rejoins by full copy",
	"[failover]")
{
	test::TempDir da, db;
	Node p, b;
	struct vr_opts o = {};
	o.mode = VR_2SAFE;
	// The primary's close is seen at once; the timeout only bounds the
	// 2-safe waits, which a loaded machine must not fail.
	o.timeout_ms = 1000;
	o.auto_promote = true;
	p.open(da.path, 0, SEG, o);
	b.open(db.path, 2, SEG, o);
	VR_REQUIRE_OK(vr_serve(p.n, "127.0.0.1", 0));
	Follower f;
	f.start(b, vr_port(p.n));
	VR_REQUIRE_OK(vr_wait_backup(p.n, 5000));
	std::mt19937 rng(1);
	for (int i = 0; i < 200; i++) {
		int rc;
		pair_tx(p, rng, &rc);
		VR_REQUIRE_OK(rc);
	}
	uint64_t acked = vr_last_seq();
	p.close(); // the primary goes away
	VR_REQUIRE_RC(f.join(), VR_EPEERLOST);
	REQUIRE(b.role() == VR_PRIMARY);
	struct vr_status st;
	VR_REQUIRE_OK(vr_status(b.n, &st));
	REQUIRE(st.epoch == 2);
	REQUIRE(st.seq >= acked);
	REQUIRE(pairs_bad(b.base) == "");

	// The new primary serves; the old one comes back as its backup.
	VR_REQUIRE_OK(vr_serve(b.n, "127.0.0.1", 0));
	for (int i = 0; i < 3; i++) {
		int rc;
		pair_tx(b, rng, &rc);
		REQUIRE(rc == VR_ENOBACKUP); // committed, not replicated
	}
	p.open(da.path, 0, SEG, o);
	REQUIRE(p.role() == VR_PRIMARY);
	Follower f2;
	f2.start(p, vr_port(b.n));
	int wrc = vr_wait_backup(b.n, 5000);
	if (wrc)
		VR_REQUIRE_OK(f2.join());
	VR_REQUIRE_OK(wrc);
	// The new primary counts the backup once it has sent the copy; the
	// backup takes its role when it reads the HELLO before it.
	for (int i = 0; i < 500 && p.role() != VR_BACKUP; i++)
		usleep(10000);
	REQUIRE(p.role() == VR_BACKUP);
	VR_REQUIRE_RC(vr_serve(p.n, "127.0.0.1", 0), VR_ENOTPRIMARY);
	for (int i = 0; i < 100; i++) {
		int rc;
		pair_tx(b, rng, &rc);
		VR_REQUIRE_OK(rc);
	}
	VR_REQUIRE_OK(vr_status(p.n, &st));
	REQUIRE(st.copies == 1);
	REQUIRE(st.epoch == 2);
	vr_stop(p.n);
	VR_REQUIRE_OK(f2.join());
	REQUIRE(memcmp(p.base, b.base, SEG) == 0);
}

TEST_CASE("1-safe returns no commit past the limit the backup granted",
	"[failover]")
{
	test::TempDir da, db;
	Node p, b;
	struct vr_opts o = {};
	o.mode = VR_1SAFE;
	o.window = 16; // a GRANT every 8 commits
	o.timeout_ms = 2000;
	p.open(da.path, 0, SEG, o);
	b.open(db.path, 2, SEG, o);
	VR_REQUIRE_OK(vr_serve(p.n, "127.0.0.1", 0));
	// No backup yet: committed locally, not covered by any limit.
	{
		int rc;
		std::mt19937 r0(7);
		pair_tx(p, r0, &rc);
		VR_REQUIRE_RC(rc, VR_ENOBACKUP);
	}
	Follower f;
	f.start(b, vr_port(p.n));
	VR_REQUIRE_OK(vr_wait_backup(p.n, 5000));
	std::mt19937 rng(5);
	uint64_t last_ok = 0;
	for (int i = 0; i < 200; i++) {
		int rc;
		pair_tx(p, rng, &rc);
		VR_REQUIRE_OK(rc); // the grants keep ahead of the commits
		last_ok = vr_last_seq();
	}
	vr_stop(b.n);
	VR_REQUIRE_OK(f.join());
	for (int i = 0; i < 100 && status_seq(b) == 0; i++)
		usleep(10000);
	struct vr_status bs;
	VR_REQUIRE_OK(vr_status(b.n, &bs));
	REQUIRE(bs.limit >= last_ok);
	// The backup is gone: commits go on up to its limit, no further.
	for (int i = 0; i < 100 && p.n->connected; i++)
		usleep(10000);
	int rc = 0, oks = 0;
	while (rc == 0 && oks < 100) {
		pair_tx(p, rng, &rc);
		if (rc == 0) {
			oks++;
			last_ok = vr_last_seq();
		}
	}
	VR_REQUIRE_RC(rc, VR_ENOBACKUP);
	REQUIRE(oks <= (int)o.window);
	REQUIRE(last_ok <= bs.limit);
	// The limit is durable: the backup restarted (its redo log opened by
	// this thread, whose protection keys are its own) and promoted by
	// command reports a window that covers every commit that returned.
	uint64_t limit = bs.limit;
	b.close();
	b.open(db.path, 2, SEG, o);
	VR_REQUIRE_OK(vr_promote(b.n));
	VR_REQUIRE_OK(vr_status(b.n, &bs));
	REQUIRE(bs.limit == limit);
	REQUIRE(bs.window == bs.limit - bs.seq);
	REQUIRE(bs.seq + bs.window >= last_ok);
}

TEST_CASE("a primary that meets a newer epoch goes stale and refuses writes",
	"[failover]")
{
	test::TempDir da, db;
	Node p, b;
	struct vr_opts o = {};
	o.mode = VR_1SAFE;
	p.open(da.path, 0, SEG, o);
	b.open(db.path, 2, SEG, o);
	VR_REQUIRE_OK(vr_serve(p.n, "127.0.0.1", 0));
	Follower f;
	f.start(b, vr_port(p.n));
	VR_REQUIRE_OK(vr_wait_backup(p.n, 5000));
	VR_REQUIRE_OK(p.put({ 0, 4096 }, 5));
	VR_REQUIRE_OK(vr_sync(p.n));
	vr_stop(b.n);
	VR_REQUIRE_OK(f.join());
	VR_REQUIRE_OK(vr_promote(b.n)); // by command, the primary alive
	REQUIRE(b.role() == VR_PRIMARY);
	// The promoted node meets the old primary: the old one learns it is
	// stale (durably) and refuses every write from then on.
	VR_REQUIRE_RC(vr_follow(b.n, "127.0.0.1", vr_port(p.n)), VR_ESTALE);
	for (int i = 0; i < 100 && p.role() != VR_STALE; i++)
		usleep(10000);
	REQUIRE(p.role() == VR_STALE);
	VR_REQUIRE_RC(p.put({ 0, 4096 }, 6), VR_ESTALE);
	p.close();
	p.open(da.path, 0, SEG, o);
	REQUIRE(p.role() == VR_STALE);
	VR_REQUIRE_RC(vr_serve(p.n, "127.0.0.1", 0), VR_ESTALE);
	REQUIRE(b.role() == VR_PRIMARY);
}

TEST_CASE("a backup of another segment, size or version is refused",
	"[badpeer]")
{
	test::TempDir da, db, dc;
	Node p, q, r;
	p.open(da.path, 0, SEG);
	q.open(db.path, 2, SEG);
	r.open(dc.path, 4, SEG / 2);
	VR_REQUIRE_OK(vr_serve(p.n, "127.0.0.1", 0));
	// q becomes the primary of a set of its own, then tries to follow p.
	VR_REQUIRE_OK(vr_serve(q.n, "127.0.0.1", 0));
	vr__primary_stop(q.n);
	VR_REQUIRE_RC(vr_follow(q.n, "127.0.0.1", vr_port(p.n)), -EBUSY);
	q.close();
	q.open(db.path, 2, SEG);
	VR_REQUIRE_RC(vr_follow(q.n, "127.0.0.1", vr_port(p.n)),
		VR_EOTHERSET);
	VR_REQUIRE_RC(vr_follow(r.n, "127.0.0.1", vr_port(p.n)), VR_ESIZE);
	// Another segment layout version, spoken by hand.
	int fd = vr__connect("127.0.0.1", vr_port(p.n), 1000);
	REQUIRE(fd >= 0);
	struct vr_hello h = {};
	h.seg_major = 999;
	h.seg_size = SEG;
	VR_REQUIRE_OK(vr__send_rec(fd, VR_REC_HELLO, 0, 0, 0, &h, sizeof(h)));
	void *buf = nullptr;
	size_t cap = 0;
	VR_REQUIRE_OK(vr__read_rec(fd, &buf, &cap, 2000, NULL, SEG));
	auto *rh = (struct vr_rec_hdr *)buf;
	REQUIRE(rh->type == VR_REC_REFUSE);
	REQUIRE(((struct vr_refuse *)(rh + 1))->code == VR_EVERSION);
	free(buf);
	close(fd);
	// Garbage instead of a HELLO: refused, the primary serves on.
	fd = vr__connect("127.0.0.1", vr_port(p.n), 1000);
	REQUIRE(write(fd, "GET / HTTP/1.0\r\n\r\n0123456789abcdef0123456789",
		44) == 44);
	close(fd);
	Node b;
	test::TempDir dd;
	b.open(dd.path, 6, SEG);
	Follower f;
	f.start(b, vr_port(p.n));
	VR_REQUIRE_OK(vr_wait_backup(p.n, 5000));
	vr_stop(b.n);
	VR_REQUIRE_OK(f.join());
}
#endif

// ---- a proxy between backup and primary ----

struct Proxy {
	int lfd = -1;
	unsigned port = 0;
	unsigned to_port;
	std::atomic<int> mode{ 0 }; // 0 forward, 1 stall, 2 cut mid-record
	std::atomic<int> cut_done{ 0 };
	std::atomic<bool> stop{ false };
	std::thread t;

	explicit Proxy(unsigned to) : to_port(to)
	{
		lfd = vr__listen("127.0.0.1", 0, &port);
		REQUIRE(lfd >= 0);
		t = std::thread([this] { run(); });
	}
	~Proxy()
	{
		stop = true;
		t.join();
		close(lfd);
	}
	void run()
	{
		struct pollfd pl = { lfd, POLLIN, 0 };
		while (!stop && poll(&pl, 1, 10) <= 0)
			;
		if (stop)
			return;
		int a = accept(lfd, nullptr, nullptr);
		int b = vr__connect("127.0.0.1", to_port, 2000);
		// Primary -> backup: parsed record by record, so that a cut
		// lands inside a REDO record, after its first piece's data.
		std::vector<char> rec;
		char buf[65536];
		while (!stop) {
			struct pollfd pf[2] = { { a, POLLIN, 0 },
				{ b, POLLIN, 0 } };
			if (poll(pf, 2, 5) <= 0)
				continue;
			if (mode == 1)
				continue; // stalled: nothing moves
			if (pf[0].revents) {
				ssize_t n = read(a, buf, sizeof(buf));
				if (n <= 0)
					break;
				vr__write_all(b, buf, (size_t)n);
			}
			if (pf[1].revents) {
				ssize_t n = read(b, buf, sizeof(buf));
				if (n <= 0)
					break;
				rec.insert(rec.end(), buf, buf + n);
				size_t off = 0;
				while (rec.size() - off >= sizeof(vr_rec_hdr)) {
					auto *h = (vr_rec_hdr *)&rec[off];
					if (rec.size() - off < h->len)
						break;
					if (mode == 2 &&
					    h->type == VR_REC_REDO &&
					    h->count == 2) {
						// Up to the end of piece 0's
						// data, then nothing.
						size_t part = sizeof(*h) +
							2 * sizeof(vr_piece) +
							vr_piece_len(
							(vr_piece *)(h + 1));
						vr__write_all(a, h, part);
						cut_done = 1;
						goto out;
					}
					vr__write_all(a, h, h->len);
					off += h->len;
				}
				rec.erase(rec.begin(), rec.begin() + off);
			}
		}
	out:
		// The cut: the backup sees its peer go away mid-record.
		close(a);
		close(b);
	}
};

TEST_CASE("a cut in the middle of a record applies none of it",
	"[proxy]")
{
	test::TempDir da, db;
	Node p, b;
	struct vr_opts o = {};
	o.mode = VR_1SAFE;
	o.timeout_ms = 200;
	p.open(da.path, 0, SEG, o);
	b.open(db.path, 2, SEG, o);
	VR_REQUIRE_OK(vr_serve(p.n, "127.0.0.1", 0));
	Proxy px(vr_port(p.n));
	Follower f;
	f.start(b, px.port);
	VR_REQUIRE_OK(vr_wait_backup(p.n, 5000));
	std::mt19937 rng(3);
	for (int i = 0; i < 100; i++) {
		int rc;
		pair_tx(p, rng, &rc);
		VR_REQUIRE_OK(rc);
	}
	VR_REQUIRE_OK(vr_sync(p.n));
	// The backup applies its redo log at the next heartbeat: then the
	// log holds nothing older that a replay could write over the cut
	// record's bytes with.
	uint64_t a0 = __atomic_load_n(&b.n->applies, __ATOMIC_ACQUIRE);
	for (int i = 0; i < 500 &&
	     __atomic_load_n(&b.n->applies, __ATOMIC_ACQUIRE) == a0; i++)
		usleep(10000);
	REQUIRE(__atomic_load_n(&b.n->applies, __ATOMIC_ACQUIRE) > a0);
	px.mode = 2;
	for (int i = 0; i < 20; i++) {
		int rc;
		pair_tx(p, rng, &rc);
		VR_REQUIRE_OK(rc);
	}
	int frc = f.join();
	REQUIRE(px.cut_done == 1);
	INFO(vr_err_name(frc));
	REQUIRE((frc == VR_ETRUNC || frc == VR_EPEERLOST));
	// The backup's copy: consistent, and still recoverable after a
	// restart of the node.
	b.close();
	b.open(db.path, 2, SEG, o);
	std::string bad = pairs_bad(b.base);
#ifdef VR_BROKEN_APPLY_EARLY
	WARN("broken build caught: " << bad);
	REQUIRE(!bad.empty());
#else
	REQUIRE(bad == "");
	REQUIRE(status_seq(b) == 100);
#endif
}

#ifndef VR_BROKEN_APPLY_EARLY
TEST_CASE("a stalled connection: 2-safe commits fail, the backup notices",
	"[proxy]")
{
	test::TempDir da, db;
	Node p, b;
	struct vr_opts o = {};
	o.mode = VR_2SAFE;
	o.timeout_ms = 100;
	p.open(da.path, 0, SEG, o);
	b.open(db.path, 2, SEG, o);
	VR_REQUIRE_OK(vr_serve(p.n, "127.0.0.1", 0));
	Proxy px(vr_port(p.n));
	Follower f;
	f.start(b, px.port);
	VR_REQUIRE_OK(vr_wait_backup(p.n, 5000));
	std::mt19937 rng(4);
	for (int i = 0; i < 50; i++) {
		int rc;
		pair_tx(p, rng, &rc);
		VR_REQUIRE_OK(rc);
	}
	px.mode = 1;
	int rc;
	pair_tx(p, rng, &rc);
	// Committed locally; the backup never acknowledged it.
	VR_REQUIRE_RC(rc, VR_ENOBACKUP);
	VR_REQUIRE_RC(f.join(), VR_EPEERLOST);
	REQUIRE(status_seq(b) == 50);
	REQUIRE(pairs_bad(b.base) == "");
	// The primary gives the stalled connection up.
	struct vr_status st;
	for (int i = 0; i < 500; i++) {
		vr_status(p.n, &st);
		if (!st.connected)
			break;
		usleep(10000);
	}
	REQUIRE(!st.connected);
	// The backup comes back directly: it resumes, or is copied.
	Follower f2;
	f2.start(b, vr_port(p.n));
	VR_REQUIRE_OK(vr_wait_backup(p.n, 5000));
	pair_tx(p, rng, &rc);
	VR_REQUIRE_OK(rc);
	vr_stop(b.n);
	VR_REQUIRE_OK(f2.join());
	REQUIRE(memcmp(p.base, b.base, SEG) == 0);
}
#endif

#ifndef VR_BROKEN_APPLY_EARLY
// The backup's redo log (blog.c) on its own: records whose entries are
// exactly 8 KiB fill the 8 MiB area exactly, so a batch crosses the
// area's end on a lap boundary, and the log fills and is applied in the
// middle of the batch.  Then a logged, fenced, unapplied tail is replayed
// when the node opens again.
static void blog_append_n(Node &b, uint64_t first, uint64_t count,
	std::vector<char> &expect)
{
	const size_t dlen = 8192 - 32 - sizeof(vr_rec_hdr) - sizeof(vr_piece);
	std::vector<uint64_t> buf((sizeof(vr_rec_hdr) + sizeof(vr_piece) +
		dlen) / 8);
	auto *h = (vr_rec_hdr *)buf.data();
	auto *pc = (vr_piece *)(h + 1);
	for (uint64_t s = first; s < first + count; s++) {
		*pc = vr_piece_make((s * 4096) % (SEG - dlen - 4096),
			(uint32_t)dlen);
		memset(pc + 1, (int)(s & 0xff), dlen);
		memset(&expect[vr_piece_off(pc)], (int)(s & 0xff), dlen);
		vr__rec_seal(h, VR_REC_REDO, 1, s, 1,
			sizeof(*h) + sizeof(*pc) + dlen, pc);
		REQUIRE(h->len + 32 == 8192);
		VR_REQUIRE_OK(vr__blog_append(b.n, h,
			b.n->blog.lpos + h->len));
	}
}

TEST_CASE("the backup's redo log wraps on an exact fit, fills, replays",
	"[blog]")
{
	test::TempDir db;
	Node b;
	struct vr_opts o = {};
	b.open(db.path, 2, SEG, o);
	// A backup of stream 77, nothing applied yet.
	struct vr_state s = *b.n->st;
	s.role = VR_BACKUP;
	s.stream = 77;
	VR_REQUIRE_OK(vr__state_set(b.n, &s));
	VR_REQUIRE_OK(vr__blog_open(b.n, true));
	VR_REQUIRE_OK(vr__blog_recover(b.n));
	REQUIRE(b.n->blog.size == 8u << 20);
	std::vector<char> expect(b.base, b.base + SEG);
	// 100 records, applied; then a batch of 1000 that ends a lap
	// exactly after 924 and goes on in the next; then one of 1030 that
	// fills the log (1024 entries) and applies it in the middle.
	uint64_t seq = 1;
	for (uint64_t n : { 100, 1000, 1030 }) {
		blog_append_n(b, seq, n, expect);
		seq += n;
		vr__blog_fence(b.n);
		VR_REQUIRE_OK(vr__blog_apply(b.n));
		REQUIRE(memcmp(b.base, expect.data(), SEG) == 0);
	}
	// A fenced tail that is not applied: the next open replays it.
	blog_append_n(b, seq, 700, expect);
	vr__blog_fence(b.n);
	REQUIRE(memcmp(b.base, expect.data(), SEG) != 0);
	b.close();
	b.open(db.path, 2, SEG, o);
	REQUIRE(memcmp(b.base, expect.data(), SEG) == 0);
	REQUIRE(status_seq(b) == seq + 699);
}

TEST_CASE("a redo log of the previous major is refused, not read as empty",
	"[blog]")
{
	test::TempDir db;
	Node b;
	struct vr_opts o = {};
	b.open(db.path, 2, SEG, o);
	VR_REQUIRE_OK(vr__blog_open(b.n, true));
	// The header as wire major 1's log had it: major 1, its check right.
	auto *hd = (struct vr_blog_hdr *)rio_pool_base(b.n->blog.pool);
	struct vr_blog_hdr old = *hd;
	hd->major = 1;
	hd->check = rio_checksum(hd, offsetof(struct vr_blog_hdr, check),
		VR_BLOG_SEED);
	vr__blog_close(b.n);
	VR_REQUIRE_RC(vr__blog_open(b.n, true), VR_EVERSION);
	REQUIRE(std::string(vr_errormsg()).find("major 1") !=
		std::string::npos);
	REQUIRE(b.n->blog.pool == nullptr);
	// Nothing was written over: put back, it opens.
	{
		struct rio_pool_opts po = {};
		po.layout = "vista.replica.redo";
		rio_pool *p = nullptr;
		std::string path = db.path + "/state.redo";
		VR_REQUIRE_OK(rio_pool_open_opts(path.c_str(), 0, &po, &p));
		auto *h2 = (struct vr_blog_hdr *)rio_pool_base(p);
		REQUIRE(h2->major == 1);
		*h2 = old;
		rio_persist(p, h2, sizeof(*h2));
		VR_REQUIRE_OK(rio_pool_close(p));
	}
	VR_REQUIRE_OK(vr__blog_open(b.n, true));
}
#endif
