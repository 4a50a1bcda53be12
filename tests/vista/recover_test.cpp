// SPDX-License-Identifier: BSD-3-Clause
// recover_test.cpp -- rollback at vista_map: single and multi-segment,
// partial recovery, torn and corrupt records, idempotence
#include "vista_test.hpp"

#include "log_layout.h"

using vt::Env;

using vt::crash_in_child;

// Word i of the segment's root object (8 KiB, made by the first call,
// outside any transaction): the tests also allocate from the heap, which
// owns the whole user area.
static uint64_t *word(vista_segment *s, int i)
{
	void *r = nullptr;
	if (vista_root(s, 8192, &r) != 0)
		abort();
	return (uint64_t *)r + i;
}

// In a child: open the instance, map A and B, run body, die.
static void crash_two(Env &e,
	const std::function<void(vista *, vista_segment *, vista_segment *)>
		&body)
{
	crash_in_child([&] {
		vista *cv = e.open();
		vista_segment *a = vt::map(cv, e.seg("a"), 0);
		vista_segment *b = vt::map(cv, e.seg("b"), 1);
		body(cv, a, b);
	});
}

// Set words 0..n of a segment to `val`, committed.
static void fill(vista *v, vista_segment *s, int n, uint64_t val)
{
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, word(s, 0), 8 * (size_t)n));
	for (int i = 0; i < n; i++)
		*word(s, i) = val;
	VREQUIRE_OK(vista_end_transaction(v));
}

// Segments A and B with words 0..n set to va and vb.
static void make_two(Env &e, int n, uint64_t va, uint64_t vb)
{
	vista *v = e.open();
	fill(v, vt::map(v, e.seg("a"), 0), n, va);
	fill(v, vt::map(v, e.seg("b"), 1), n, vb);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("an uncommitted transaction is rolled back when its segment is "
	  "mapped; a committed one stays",
	"[recover]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	fill(v, s, 4, 1);
	VREQUIRE_OK(vista_fini(v));

	crash_in_child([&] {
		vista *cv = e.open();
		vista_segment *cs = vt::map(cv, e.seg("a"), 0);
		CHILD_OK(vista_begin_transaction(cv, 0));
		CHILD_OK(vista_set_range(cv, word(cs, 0), 8));
		*word(cs, 0) = 2;
		CHILD_OK(vista_end_transaction(cv)); // committed
		CHILD_OK(vista_begin_transaction(cv, 0));
		CHILD_OK(vista_set_range(cv, word(cs, 1), 16));
		*word(cs, 1) = 3;
		*word(cs, 2) = 3;
		void *p;
		CHILD_OK(vista_malloc(cs, 1000, &p));
		memset(p, 1, 1000);
	});
	v = e.open();
	REQUIRE(vista_pending_lanes(v) == 1);
	s = vt::map(v, e.seg("a"), 0);
	REQUIRE(vista_pending_lanes(v) == 0);
	REQUIRE(*word(s, 0) == 2);
	REQUIRE(*word(s, 1) == 1);
	REQUIRE(*word(s, 2) == 1);
	REQUIRE(*word(s, 3) == 1);
	REQUIRE(vt::blocks(s).size() == 1); // the root; the allocation is undone
	VREQUIRE_OK(vista_heap_check(s, nullptr));
	REQUIRE(vt::stats(v).recovered_tx == 1);
	VREQUIRE_OK(vista_fini(v));

	// Recovery is done: nothing happens the next time.
	v = e.open();
	REQUIRE(vista_pending_lanes(v) == 0);
	s = vt::map(v, e.seg("a"), 0);
	REQUIRE(*word(s, 1) == 1);
	REQUIRE(vt::stats(v).recovered_tx == 0);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a transaction over two segments is rolled back in both", "[recover]")
{
	Env e;
	make_two(e, 1, 10, 20);
	crash_two(e, [](vista *cv, vista_segment *a, vista_segment *b) {
		CHILD_OK(vista_begin_transaction(cv, 0));
		CHILD_OK(vista_set_range(cv, word(a, 0), 8));
		*word(a, 0) -= 5;
		CHILD_OK(vista_set_range(cv, word(b, 0), 8));
		*word(b, 0) += 5;
		void *p;
		CHILD_OK(vista_malloc(b, 64, &p));
	});
	vista *v = e.open();
	vista_segment *a = vt::map(v, e.seg("a"), 0);
	REQUIRE(*word(a, 0) == 10);
	REQUIRE(vista_pending_lanes(v) == 1); // b is not mapped yet
	vista_segment *b = vt::map(v, e.seg("b"), 1);
	REQUIRE(*word(b, 0) == 20);
	REQUIRE(vista_pending_lanes(v) == 0);
	REQUIRE(vt::blocks(b).size() == 1); // the root
	VREQUIRE_OK(vista_fini(v));
}

// The hard case: recover A alone, commit new work to A, and only later map
// B.  A's old before-images must never come back; B's must be applied.
TEST_CASE("partial recovery: a segment rolled back alone is never rolled "
	  "back again",
	"[recover]")
{
	bool a_first_in_run3 = GENERATE(true, false);
	Env e;
	make_two(e, 2, 1, 1);
	crash_two(e, [](vista *cv, vista_segment *a, vista_segment *b) {
		CHILD_OK(vista_begin_transaction(cv, 0));
		CHILD_OK(vista_set_range(cv, word(a, 0), 16));
		CHILD_OK(vista_set_range(cv, word(b, 0), 16));
		*word(a, 0) = *word(a, 1) = 2;
		*word(b, 0) = *word(b, 1) = 2;
	});
	{ // run 2: A only, then new work in A
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		REQUIRE(*word(a, 0) == 1);
		REQUIRE(vista_pending_lanes(v) == 1);
		for (int i = 0; i < 50; i++) // wraps the free lanes' logs
			fill(v, a, 2, 5 + (uint64_t)i);
		VREQUIRE_OK(vista_fini(v));
	}
	// run 3: A and B in either order
	vista *v = e.open();
	REQUIRE(vista_pending_lanes(v) == 1);
	vista_segment *a = nullptr, *b;
	if (a_first_in_run3)
		a = vt::map(v, e.seg("a"), 0);
	b = vt::map(v, e.seg("b"), 1);
	if (!a_first_in_run3)
		a = vt::map(v, e.seg("a"), 0);
	REQUIRE(*word(b, 0) == 1);
	REQUIRE(*word(b, 1) == 1);
	REQUIRE(*word(a, 0) == 54);
	REQUIRE(*word(a, 1) == 54);
	REQUIRE(vista_pending_lanes(v) == 0);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("lanes held by unrecovered transactions are not handed out",
	"[recover]")
{
	Env e;
	e.lanes = 1;
	{
		vista *v = e.open();
		vt::map(v, e.seg("a"), 0);
		vt::map(v, e.seg("b"), 1);
		VREQUIRE_OK(vista_fini(v));
	}
	crash_two(e, [](vista *cv, vista_segment *a, vista_segment *b) {
		CHILD_OK(vista_begin_transaction(cv, 0));
		CHILD_OK(vista_set_range(cv, word(a, 0), 8));
		CHILD_OK(vista_set_range(cv, word(b, 0), 8));
		*word(a, 0) = *word(b, 0) = 3;
	});
	vista *v = e.open();
	vista_segment *a = vt::map(v, e.seg("a"), 0);
	VREQUIRE_RC(vista_begin_transaction(v, 0), VISTA_EPENDING);
	void *p;
	VREQUIRE_RC(vista_malloc(a, 8, &p), VISTA_EPENDING);
	vt::map(v, e.seg("b"), 1);
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_fini(v));
}

// Where lane 0's records live in the log file.
struct LaneFile {
	std::string path;
	off_t rec0;
	explicit LaneFile(const std::string &log) : path(log)
	{
		struct vista_log_hdr h;
		std::string f = test::read_file(log);
		REQUIRE(f.size() > RIO_POOL_HDR_SIZE + sizeof(h));
		memcpy(&h, f.data() + RIO_POOL_HDR_SIZE, sizeof(h));
		rec0 = (off_t)(RIO_POOL_HDR_SIZE + h.lanes_off +
			sizeof(struct vista_lane_hdr) +
			sizeof(struct vista_lane_commit));
	}
	void flip(off_t off)
	{
		std::string f = test::read_file(path);
		char c = (char)(f[(size_t)(rec0 + off)] ^ 0x55);
		test::patch_file(path, rec0 + off, &c, 1);
	}
};

// Two 8-byte ranges: records at lane offsets 0 and 64 (56 bytes each:
// header 32, descriptor 16, data 8 at offset 48).
static void two_ranges_uncommitted(Env &e)
{
	crash_in_child([&] {
		vista *cv = e.open();
		vista_segment *a = vt::map(cv, e.seg("a"), 0);
		CHILD_OK(vista_begin_transaction(cv, 0));
		CHILD_OK(vista_set_range(cv, word(a, 0), 8));
		*word(a, 0) = 2;
		CHILD_OK(vista_set_range(cv, word(a, 8), 8));
		*word(a, 8) = 2;
	});
}

TEST_CASE("a torn newest record is ignored; the older ones are applied",
	"[recover]")
{
	unsigned flags = GENERATE(RIO_FORCE_CACHELINE, RIO_FORCE_BYTE);
	Env e(flags);
	{
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_set_range(v, word(a, 0), 72));
		*word(a, 0) = *word(a, 8) = 1;
		VREQUIRE_OK(vista_end_transaction(v));
		VREQUIRE_OK(vista_fini(v));
	}
	two_ranges_uncommitted(e);
	// Tear the second record: its tag, the last thing stored, is not
	// there (a flipped bit in a record with its tag is corruption:
	// corrupt_test.cpp).
	LaneFile lf(e.log);
	for (int i = 0; i < 8; i++)
		lf.flip(64 + 8 + i);
	vista *v = e.open();
	vista_segment *a = vt::map(v, e.seg("a"), 0);
	REQUIRE(*word(a, 0) == 1); // first record applied
	// The second record is ignored: in a real crash its store never
	// happened; here the child did store, so the value stays.
	REQUIRE(*word(a, 8) == 2);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("an invalid record followed by a valid one is corruption: init "
	  "refuses and changes nothing",
	"[recover]")
{
	Env e(RIO_FORCE_CACHELINE);
	{
		vista *v = e.open();
		fill(v, vt::map(v, e.seg("a"), 0), 9, 1);
		VREQUIRE_OK(vista_fini(v));
	}
	two_ranges_uncommitted(e);
	LaneFile lf(e.log);
	// the FIRST record's before-image, after its header and descriptor
	lf.flip(sizeof(struct vista_rec) + sizeof(struct vista_rdesc));
	std::string log_before = test::read_file(e.log);
	std::string seg_before = test::read_file(e.seg("a"));
	e.open(VISTA_ECORRUPT);
	REQUIRE(std::string(vista_errormsg()).find("corrupt") !=
		std::string::npos);
	REQUIRE(test::read_file(e.log) == log_before);
	REQUIRE(test::read_file(e.seg("a")) == seg_before);
}

TEST_CASE("records of a committed transaction are stale: never replayed",
	"[recover]")
{
	Env e;
	{
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		// Leave three committed records in lane 0.
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		for (int i = 0; i < 3; i++) {
			VREQUIRE_OK(vista_set_range(v, word(a, i * 8), 8));
			*word(a, i * 8) = 7;
		}
		VREQUIRE_OK(vista_end_transaction(v));
		VREQUIRE_OK(vista_fini(v));
	}
	crash_in_child([&] {
		vista *cv = e.open();
		vista_segment *a = vt::map(cv, e.seg("a"), 0);
		CHILD_OK(vista_begin_transaction(cv, 0));
		CHILD_OK(vista_set_range(cv, word(a, 0), 8));
		*word(a, 0) = 9;
		// Stores the program makes without declaring them are not
		// the library's to undo, and old records must not touch them.
		*word(a, 8) = 9;
		*word(a, 16) = 9;
	});
	vista *v = e.open();
	vista_segment *a = vt::map(v, e.seg("a"), 0);
	REQUIRE(*word(a, 0) == 7);
	REQUIRE(*word(a, 8) == 9);
	REQUIRE(*word(a, 16) == 9);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a record naming an empty segment table entry is corruption",
	"[recover]")
{
	Env e;
	{
		vista *v = e.open();
		vt::map(v, e.seg("a"), 0);
		VREQUIRE_OK(vista_fini(v));
	}
	two_ranges_uncommitted(e);
	// Wipe the segment table.
	std::string zero(VISTA_MAX_SEGMENTS * 64, '\0');
	test::patch_file(e.log, RIO_POOL_HDR_SIZE + VISTA_SEGTAB_OFF,
		zero.data(), zero.size());
	e.open(VISTA_ECORRUPT);
	REQUIRE(std::string(vista_errormsg()).find("segment table") !=
		std::string::npos);
}

// Kill the recovering process at each of its persist barriers in turn; the
// next run must finish the job.  (A process death keeps every store, so
// this checks idempotence; the crash suite cuts power at these points.)
TEST_CASE("recovery interrupted at any barrier is finished by the next run",
	"[recover]")
{
	Env e;
	{
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		vista_segment *b = vt::map(v, e.seg("b"), 1);
		fill(v, a, 64, 1);
		fill(v, b, 64, 1);
		void *p;
		VREQUIRE_OK(vista_malloc(a, 5000, &p));
		VREQUIRE_OK(vista_malloc(b, 50, &p));
		VREQUIRE_OK(vista_fini(v));
	}
	std::string log0, a0, b0;
	crash_two(e, [](vista *cv, vista_segment *a, vista_segment *b) {
		void *p;
		CHILD_OK(vista_begin_transaction(cv, 0));
		for (int i = 0; i < 64; i++) {
			vista_segment *s = i % 2 ? a : b;
			CHILD_OK(vista_set_range(cv, word(s, i), 8));
			*word(s, i) = 99;
		}
		CHILD_OK(vista_malloc(a, 64, &p));
		CHILD_OK(vista_malloc(b, 9000, &p));
		auto bl = vt::blocks(a);
		CHILD_OK(vista_free(a, (void *)bl.begin()->first));
	});
	log0 = test::read_file(e.log);
	a0 = test::read_file(e.seg("a"));
	b0 = test::read_file(e.seg("b"));

	static int stop_at;
	static int drains;
	struct rio_trace_ops ops = {};
	ops.flush = [](const rio_pool *, const void *, size_t, const void *) {};
	ops.drain = [](const rio_pool *, const void *) {
		if (++drains == stop_at)
			_exit(0);
	};
	ops.durable_point = [](const rio_pool *, const char *, const void *) {};
	for (stop_at = 1;; stop_at++) {
		test::write_file(e.log, log0);
		test::write_file(e.seg("a"), a0);
		test::write_file(e.seg("b"), b0);
		auto r = test::run_child([&] {
			drains = 0;
			rio_trace_set(&ops);
			vista *cv = e.open();
			vt::map(cv, e.seg(stop_at % 2 ? "a" : "b"), stop_at % 2 ? 0 : 1);
			vt::map(cv, e.seg(stop_at % 2 ? "b" : "a"), stop_at % 2 ? 1 : 0);
			_exit(3); // recovery finished before the stop
		});
		REQUIRE(r.exited);
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		vista_segment *b = vt::map(v, e.seg("b"), 1);
		for (int i = 0; i < 64; i++) {
			INFO("stop at barrier " << stop_at << ", word " << i);
			REQUIRE(*word(a, i) == 1);
			REQUIRE(*word(b, i) == 1);
		}
		REQUIRE(vt::blocks(a).size() == 2); // root and the old block
		REQUIRE(vt::blocks(b).size() == 2);
		VREQUIRE_OK(vista_heap_check(a, nullptr));
		VREQUIRE_OK(vista_heap_check(b, nullptr));
		REQUIRE(vista_pending_lanes(v) == 0);
		VREQUIRE_OK(vista_fini(v));
		if (r.code == 3)
			break;
		REQUIRE(stop_at < 100);
	}
	REQUIRE(stop_at > 3);
}
