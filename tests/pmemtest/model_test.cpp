// SPDX-License-Identifier: BSD-3-Clause
// model_test.cpp -- the tracer and the persistence model, end to end in
// one process: trace stores/flushes/fences on a buffer, replay the trace,
// and check which lines are pending and which crash images come out.
#include "../common/test_util.hpp"

extern "C" {
#include "pmemtest_int.h"
#include "tracer_int.h"
}

#include <emmintrin.h>
#include <map>
#include <set>
#include <thread>

namespace {

constexpr size_t SIZE = 4 * 4096;

struct Traced {
	test::TempDir dir;
	std::string trace = dir / "trace";
	uint8_t *buf;

	explicit Traced(pmt_dirty_mode mode = PMT_DIRTY_SCAN)
	{
		buf = static_cast<uint8_t *>(aligned_alloc(4096, SIZE));
		memset(buf, 0, SIZE);
		buf[0] = 0x11; // one non-zero line at start
		pmt_tracer_cfg cfg{};
		cfg.trace_path = trace.c_str();
		cfg.stack_depth = 4;
		cfg.dirty = mode;
		REQUIRE(pmt_tracer_start(&cfg) == 0);
		pmt_tracer_mapped(nullptr, buf, SIZE, (dir / "pool").c_str());
	}
	~Traced() { free(buf); }
	void store(size_t line, uint8_t v) { buf[line * 64 + 8] = v; }
	void flush(size_t line, size_t n = 1)
	{
		pmt_tracer_flush(buf + line * 64, n * 64);
	}
	void fence() { pmt_tracer_fence(); }
	void stop() { pmt_tracer_stop(0); }
};

// What the model says at each crash point.
struct Point {
	pmt_cp_kind kind;
	std::set<uint64_t> pending;
	size_t images; // new images at this point
	std::map<uint64_t, uint8_t> dur; // durable byte 8 of pending lines
};

struct Replay {
	pmt_model m{};
	std::vector<Point> points;
	pmt_imgset *seen = pmt_imgset_new();
	pmt_enum_opts eo{ 2, 0, 100000, 1, 0, 0, 32, false, nullptr, nullptr,
		nullptr };
	pmt_enum_stats st{};

	explicit Replay(const std::string &trace, bool tear = false)
	{
		REQUIRE(pmt_model_open(&m, trace.c_str()) == 0);
		m.lints_on = true;
		m.tear = tear;
		pmt_model_run(&m, on_cp, this);
	}
	~Replay()
	{
		pmt_imgset_free(seen);
		pmt_model_close(&m);
	}
	static bool on_image(const pmt_lref *, size_t, const pmt_lref *,
		size_t, void *arg)
	{
		static_cast<Replay *>(arg)->points.back().images++;
		return true;
	}
	static void on_cp(pmt_model *m, const pmt_cp *cp, void *arg)
	{
		auto *r = static_cast<Replay *>(arg);
		Point p{ cp->kind, {}, 0, {} };
		for (size_t i = 0; i < m->npend; i++) {
			p.pending.insert(m->pend[i].line);
			p.dur[m->pend[i].line] =
				m->pools[0].dur[m->pend[i].line * 64 + 8];
		}
		r->points.push_back(p);
		pmt_enumerate(m, r->seen, &r->eo, &r->st, on_image, r);
	}
	size_t lints(pmt_lint_kind k) const
	{
		size_t n = 0;
		for (size_t i = 0; i < m.nlints; i++)
			if (m.lints[i].kind == k)
				n += m.lints[i].count;
		return n;
	}
};

} // namespace

TEST_CASE("lines flushed and fenced are durable; the crash point before "
	  "the fence has every subset", "[pmemtest][model]")
{
	Traced t;
	t.store(64, 1);
	t.store(65, 2);
	t.flush(64, 2);
	t.fence();
	t.stop();
	Replay r(t.trace);
	REQUIRE(r.m.tr.complete);
	REQUIRE(r.points.size() == 2);
	REQUIRE(r.points[0].kind == PMT_CP_FENCE);
	REQUIRE(r.points[0].pending == std::set<uint64_t>{ 64, 65 });
	REQUIRE(r.points[0].images == 4); // {}, {64}, {65}, {64,65}
	REQUIRE(r.points[1].kind == PMT_CP_END);
	REQUIRE(r.points[1].pending.empty());
	REQUIRE(r.points[1].images == 0); // same as {64,65}
	REQUIRE(r.m.pools[0].existed == false);
	REQUIRE(r.lints(PMT_LINT_END) == 0);
}

TEST_CASE("a store after the flush stays pending after the fence",
	"[pmemtest][model]")
{
	Traced t;
	t.store(70, 1);
	t.flush(70);
	t.store(70, 2); // after the flush: not covered by it
	t.fence();
	t.stop();
	Replay r(t.trace);
	REQUIRE(r.points.size() == 2);
	REQUIRE(r.points[1].pending == std::set<uint64_t>{ 70 });
	REQUIRE(r.points[1].dur[70] == 1); // the flushed value is durable
	REQUIRE(r.lints(PMT_LINT_END) == 1);
}

TEST_CASE("a fence completes only its own thread's flushes",
	"[pmemtest][model]")
{
	Traced t;
	t.store(80, 5);
	std::thread other([&] { t.flush(80); });
	other.join();
	t.fence(); // main thread: not the flusher
	t.stop();
	Replay r(t.trace);
	REQUIRE(r.points.back().pending == std::set<uint64_t>{ 80 });
	REQUIRE(r.lints(PMT_LINT_UNFENCED) == 1);
}

TEST_CASE("unflushed lines accumulate; k bounds the subsets",
	"[pmemtest][model]")
{
	Traced t;
	for (size_t l = 100; l < 106; l++)
		t.store(l, 9);
	t.store(120, 1);
	t.flush(120);
	t.fence();
	t.stop();
	Replay r(t.trace);
	// 7 pending: 1 + 7 + 21 (<= 2) + 1 (all) = 30 distinct images
	REQUIRE(r.points[0].pending.size() == 7);
	REQUIRE(r.points[0].images == 30);
	REQUIRE(r.lints(PMT_LINT_END) == 6);
}

TEST_CASE("a line flushed twice with no store between is a redundant flush",
	"[pmemtest][model]")
{
	Traced t;
	t.store(90, 1);
	t.flush(90);
	t.fence();
	t.flush(90); // nothing new to write back
	t.fence();
	t.stop();
	Replay r(t.trace);
	REQUIRE(r.lints(PMT_LINT_REDUNDANT) == 1);
	REQUIRE(r.lints(PMT_LINT_UNFENCED) == 0);
}

TEST_CASE("a durability point reports what is not durable yet",
	"[pmemtest][model]")
{
	Traced t;
	t.store(95, 1);
	pmt_tracer_dpoint(nullptr, "commit");
	t.flush(95);
	t.fence();
	t.stop();
	Replay r(t.trace);
	REQUIRE(r.lints(PMT_LINT_DPOINT) == 1);
	REQUIRE(r.lints(PMT_LINT_END) == 0);
}

TEST_CASE("a store that puts a line's value back makes its flush needed, "
	  "not redundant (userfaultfd)", "[pmemtest][model]")
{
	// Line 90 is durable with 1.  The program stores 7, then 1 again,
	// before flushing it: the content did not change, but the line may
	// have reached memory with 7 in between, so the flush is needed.
	// Only userfaultfd sees that store; scanning reports a redundant
	// flush.  A flush with no store to its page since is redundant in
	// both modes.
	for (pmt_dirty_mode mode : { PMT_DIRTY_SCAN, PMT_DIRTY_AUTO }) {
		Traced t(mode);
		t.store(90, 1);
		t.flush(90);
		t.fence();
		t.store(90, 7);
		t.store(90, 1);
		t.flush(90);
		t.fence();
		t.flush(90); // no store to the page since the last flush
		t.fence();
		t.stop();
		Replay r(t.trace);
		bool uffd = r.m.tr.flags & (PMT_TRACE_UFFD | PMT_TRACE_STORES);
		if (mode == PMT_DIRTY_AUTO && !uffd)
			WARN("userfaultfd not permitted here: scanning");
		INFO("userfaultfd " << uffd);
		REQUIRE(r.lints(PMT_LINT_REDUNDANT) == (uffd ? 1u : 2u));
	}
}

TEST_CASE("a store to one line does not make a flush of another line of "
	  "the page needed", "[pmemtest][model]")
{
	// TOUCH is per page, so this is where userfaultfd cannot be exact:
	// 92 flushed twice with a store to 93 between is not reported.
	Traced t(PMT_DIRTY_AUTO);
	t.store(92, 1);
	t.flush(92);
	t.fence();
	t.store(93, 1);
	t.flush(92);
	t.flush(93);
	t.fence();
	t.stop();
	Replay r(t.trace);
	REQUIRE(r.lints(PMT_LINT_REDUNDANT) ==
		(r.m.tr.flags & PMT_TRACE_UFFD ? 0u : 1u));
}

TEST_CASE("per-store capture judges redundant flushes per line",
	"[pmemtest][model]")
{
	// With every store seen, a store to 93 does not hide the second
	// flush of 92 (per page it would); a store of 92's own value does
	// make its flush needed.
	Traced t(PMT_DIRTY_STORES);
	t.store(92, 1);
	t.flush(92);
	t.fence();
	t.store(93, 1);
	t.flush(92); // redundant: 92 not stored to since its flush
	t.flush(93);
	t.fence();
	t.store(92, 1); // its old value again: the flush below is needed
	t.flush(92);
	t.fence();
	t.stop();
	Replay r(t.trace);
	if (!(r.m.tr.flags & PMT_TRACE_STORES)) {
		WARN("per-store capture not permitted here");
		return;
	}
	REQUIRE(r.m.store_recs == 3);
	REQUIRE(r.lints(PMT_LINT_REDUNDANT) == 1);
}

TEST_CASE("two stores to one line in one epoch give the image with only "
	  "the first", "[pmemtest][model]")
{
	// valid, then data, into line 100, then one flush and fence: the
	// line may be evicted between the two stores.  Per store, the crash
	// point has three values for the line (durable, valid only, both);
	// per epoch only two.
	for (pmt_dirty_mode mode : { PMT_DIRTY_SCAN, PMT_DIRTY_STORES }) {
		Traced t(mode);
		t.buf[100 * 64] = 1;     // valid
		t.buf[100 * 64 + 8] = 7; // data
		t.flush(100);
		t.fence();
		t.stop();
		Replay r(t.trace);
		bool stores = r.m.tr.flags & PMT_TRACE_STORES;
		if (mode == PMT_DIRTY_STORES && !stores) {
			WARN("per-store capture not permitted here");
			continue;
		}
		INFO("stores " << stores);
		REQUIRE(r.points.size() == 2);
		REQUIRE(r.points[0].pending == std::set<uint64_t>{ 100 });
		REQUIRE(r.points[0].images == (stores ? 3u : 2u));
	}
}

TEST_CASE("--tear: one 16-byte store to a line adds the states with each "
	  "of its 8-byte halves alone", "[pmemtest][model]")
{
	// Key and value in one vector store, one flush and fence: whole, the
	// line is durable or new (2 images); torn, also key alone and value
	// alone (4).  An 8-byte store is never torn.
	for (bool tear : { false, true }) {
		Traced t(PMT_DIRTY_STORES);
		_mm_store_si128(reinterpret_cast<__m128i *>(t.buf + 101 * 64),
			_mm_set_epi64x(7, 1));
		t.flush(101);
		t.fence();
		t.store(102, 3);
		t.flush(102);
		t.fence();
		t.stop();
		Replay r(t.trace, tear);
		if (!(r.m.tr.flags & PMT_TRACE_STORES)) {
			WARN("per-store capture not permitted here");
			return;
		}
		INFO("tear " << tear);
		REQUIRE(r.points.size() == 3);
		REQUIRE(r.points[0].pending == std::set<uint64_t>{ 101 });
		REQUIRE(r.points[0].images == (tear ? 4u : 2u));
		// 102 new (its durable image was the last one's "all").
		REQUIRE(r.points[1].images == 1u);
		REQUIRE(r.m.torn_stores == (tear ? 1u : 0u));
	}
}

TEST_CASE("discarded lines are neither pending nor linted until stored "
	  "again", "[pmemtest][model]")
{
	Traced t;
	t.store(96, 1);
	t.store(97, 1);
	t.flush(97); // a pending flush of a line that is then discarded
	pmt_tracer_discard(t.buf + 96 * 64, 2 * 64);
	pmt_tracer_dpoint(nullptr, "commit");
	t.store(100, 1);
	t.flush(100);
	t.fence();
	t.store(97, 2); // stored again: state again
	pmt_tracer_dpoint(nullptr, "commit");
	t.flush(97);
	t.fence();
	t.stop();
	Replay r(t.trace);
	REQUIRE(r.points[0].pending == std::set<uint64_t>{ 100 });
	REQUIRE(r.points[1].pending == std::set<uint64_t>{ 97 });
	REQUIRE(r.points[1].dur[97] == 1); // the discarded content
	REQUIRE(r.lints(PMT_LINT_DPOINT) == 1); // line 97, second point
	REQUIRE(r.lints(PMT_LINT_END) == 0);
	REQUIRE(r.lints(PMT_LINT_REDUNDANT) == 0);
}

TEST_CASE("a trace cut short replays up to its last whole record",
	"[pmemtest][model]")
{
	Traced t;
	t.store(64, 1);
	t.flush(64);
	t.fence();
	t.store(65, 1);
	t.flush(65);
	t.fence();
	t.stop();
	std::string s = test::read_file(t.trace);
	test::write_file(t.trace, s.substr(0, s.size() - 20));
	Replay r(t.trace);
	REQUIRE_FALSE(r.m.tr.complete);
	REQUIRE(r.m.fences == 2);
	// A flipped byte in a record: the END checksum no longer matches.
	std::string bad = s;
	bad[100] ^= 1;
	test::write_file(t.trace, bad);
	Replay r2(t.trace);
	REQUIRE_FALSE(r2.m.tr.complete);
	// A bad header is refused.
	test::write_file(t.trace, "not a trace at all, not at all, no, no "
				  "no no no no no no no no no");
	pmt_model m{};
	REQUIRE(pmt_model_open(&m, t.trace.c_str()) == -EBADMSG);
}

TEST_CASE("identical images are produced once across crash points",
	"[pmemtest][model]")
{
	Traced t;
	for (int i = 0; i < 10; i++) {
		t.store(64, (uint8_t)(i & 1)); // 0,1,0,1...: images repeat
		t.flush(64);
		t.fence();
	}
	t.stop();
	Replay r(t.trace);
	size_t total = 0;
	for (auto &p : r.points)
		total += p.images;
	REQUIRE(total == 2); // line 64 = 0 or 1: two distinct images
	REQUIRE(r.st.duplicates > 0);
}

TEST_CASE("userfaultfd write tracking finds what scanning finds",
	"[pmemtest][model]")
{
	// Where userfaultfd is not allowed, AUTO scans: the test then
	// compares scanning with itself and still must pass.
	std::vector<size_t> images[2];
	for (int k = 0; k < 2; k++) {
		Traced t(k ? PMT_DIRTY_AUTO : PMT_DIRTY_SCAN);
		for (int i = 1; i <= 6; i++) {
			t.store(64 + (size_t)i * 70 % 190, (uint8_t)i); // many pages
			t.store(65, (uint8_t)i);
			if (i % 2)
				t.flush(65);
			t.fence();
		}
		t.stop();
		Replay r(t.trace);
		if (k == 1 && !(r.m.tr.flags & (PMT_TRACE_UFFD |
				      PMT_TRACE_STORES)))
			WARN("userfaultfd not permitted here: scanning twice");
		for (auto &p : r.points)
			images[k].push_back(p.images);
	}
	REQUIRE(images[0] == images[1]);
}
