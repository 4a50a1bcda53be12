// SPDX-License-Identifier: BSD-3-Clause
// corrupt_test.cpp -- one flipped bit in the log, the lane header, the
// segment header or the heap metadata gives an error or the right data,
// never wrong data; torn records are still skipped; a segment refuses a log
// that is not its own; a failed create leaves no file
#include "vista_test.hpp"

#include "heap_layout.h"
#include "log_layout.h"
#include "segment_layout.h"

using vt::Env;

namespace {

using vt::crash_in_child;

uint64_t *word(vista_segment *s, int i)
{
	void *r = nullptr;
	if (vista_root(s, 8192, &r) != 0)
		abort();
	return (uint64_t *)r + i;
}

const uint64_t OLD = 0x1111111111111111ull, NEW = 0x2222222222222222ull;

// Recoveries that read a flipped record as torn (judge()).
int torn_read = 0;

// Words 0 and 8 of A committed at OLD; then a child logs word 0 (record 0,
// lane offset 0) and word 8 (record 1, offset 64), stores NEW into both
// and dies.  Correct recovery puts OLD back into both words.
void setup(Env &e)
{
	e.log_size = 256 << 10; // 4 small lanes: the tests copy files a lot
	{
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_set_range(v, word(a, 0), 72));
		*word(a, 0) = *word(a, 8) = OLD;
		VREQUIRE_OK(vista_end_transaction(v));
		VREQUIRE_OK(vista_fini(v));
	}
	crash_in_child([&] {
		vista *cv = e.open();
		vista_segment *a = vt::map(cv, e.seg("a"), 0);
		CHILD_OK(vista_begin_transaction(cv, 0));
		CHILD_OK(vista_set_range(cv, word(a, 0), 8));
		*word(a, 0) = NEW;
		CHILD_OK(vista_set_range(cv, word(a, 8), 8));
		*word(a, 8) = NEW;
	});
}

// The record area of a lane: after its header and its commit record.
const off_t REC0 = sizeof(struct vista_lane_hdr) +
	sizeof(struct vista_lane_commit);

// File offset of lane 0's header in the log.
off_t lane0(const std::string &log)
{
	struct vista_log_hdr h;
	std::string f = test::read_file(log);
	REQUIRE(f.size() > RIO_POOL_HDR_SIZE + sizeof(h));
	memcpy(&h, f.data() + RIO_POOL_HDR_SIZE, sizeof(h));
	return (off_t)(RIO_POOL_HDR_SIZE + h.lanes_off);
}

void flip(const std::string &path, off_t off, int bit)
{
	std::string f = test::read_file(path);
	char c = (char)(f[(size_t)off] ^ (1 << bit));
	test::patch_file(path, off, &c, 1);
}

// Open and map after a flip: either an error that changed neither file,
// or both words back at OLD and a heap that checks.  newest_torn: the flip
// is in the body of the newest record (record 1) in the cacheline domain,
// where it may also read as that record torn (recover.c C2): word 0 back
// at OLD, word 8 left as the crash left it.
void judge(Env &e, const std::string &what, const std::string &log0,
	const std::string &seg0, bool newest_torn = false)
{
	INFO(what);
	std::string logb = test::read_file(e.log);
	std::string segb = test::read_file(e.seg("a"));
	vista *v = nullptr;
	int rc = e.init(&v);
	if (rc != 0) {
		INFO(vista_err_name(rc) << ": " << vista_errormsg());
		REQUIRE(rc == VISTA_ECORRUPT);
		REQUIRE(test::read_file(e.log) == logb);
		REQUIRE(test::read_file(e.seg("a")) == segb);
	} else {
		vista_segment *a = nullptr;
		rc = vista_map(v, e.seg("a").c_str(), nullptr, 0, 0, &a);
		if (rc != 0) {
			INFO(vista_err_name(rc) << ": " << vista_errormsg());
			REQUIRE((rc == VISTA_ECORRUPT || rc == VISTA_ELAYOUT ||
				rc == VISTA_EOTHERLOG));
			REQUIRE(test::read_file(e.seg("a")) == segb);
		} else {
			REQUIRE(*word(a, 0) == OLD);
			if (newest_torn && *word(a, 8) == NEW)
				torn_read++;
			else
				REQUIRE(*word(a, 8) == OLD);
			VREQUIRE_OK(vista_heap_check(a, nullptr));
		}
		VREQUIRE_OK(vista_fini(v));
	}
	test::write_file(e.log, log0);
	test::write_file(e.seg("a"), seg0);
}

} // namespace

TEST_CASE("one flipped bit anywhere in the records or the lane header: an "
	  "error that changes nothing, or a full rollback",
	"[corrupt]")
{
	unsigned flags = GENERATE(RIO_FORCE_CACHELINE, RIO_FORCE_BYTE);
	Env e(flags);
	setup(e);
	const std::string log0 = test::read_file(e.log);
	const std::string seg0 = test::read_file(e.seg("a"));
	off_t lh = lane0(e.log), rec0 = lh + REC0;
	int refused = 0;

	// Lane header: gen, done_gen, done[], gen_check, done_check.
	for (int b = 0; b < 64; b++) {
		flip(e.log, lh + b, b % 8);
		judge(e, "lane header byte " + std::to_string(b), log0, seg0);
	}
	// Both records (header fields, descriptor, image), every byte, and
	// every bit of the newest record's tag and check.  In the cacheline
	// domain the body of the newest record is what a torn write leaves
	// too (its tag was written back with it, under one fence).
	bool cl = flags == RIO_FORCE_CACHELINE;
	torn_read = 0;
	for (int b = 0; b < 128; b++) {
		flip(e.log, rec0 + b, (b * 3) % 8);
		judge(e, "record byte " + std::to_string(b), log0, seg0,
			cl && b >= 64 && (b < 72 || b >= 80));
	}
	// Only there: the flips of record 1's 48 bytes (32 of header, 8 of
	// descriptor, 8 of image) outside its tag: 40.
	if (cl)
		CHECK(torn_read == 40);
	else
		CHECK(torn_read == 0);
	for (int b = 0; b < 128; b += 3) {
		int off = 64 + (b / 8) % 16; // check and tag of record 1
		flip(e.log, rec0 + off, b % 8);
		vista *v = nullptr;
		int rc = e.init(&v);
		INFO("record 1 byte " << off << " bit " << b % 8);
		if (cl && off < 72) { // its check: torn
			VREQUIRE_OK(rc);
			VREQUIRE_OK(vista_fini(v));
		} else {
			REQUIRE(rc == VISTA_ECORRUPT); // never taken for torn
			refused++;
		}
		test::write_file(e.log, log0);
	}
	REQUIRE(refused == (cl ? 21 : 43));
	// Unchanged files recover fully.
	judge(e, "no flip", log0, seg0);
}

TEST_CASE("a record without its tag is torn: skipped as the newest, "
	  "corruption anywhere else",
	"[corrupt]")
{
	unsigned flags = GENERATE(RIO_FORCE_CACHELINE, RIO_FORCE_BYTE);
	Env e(flags);
	setup(e);
	off_t rec0 = lane0(e.log) + REC0;
	const std::string log0 = test::read_file(e.log);
	uint64_t stale = 0;

	// The newest record's tag never written: it is torn, skipped; its
	// store never happened in a real crash, here it did and stays.
	test::patch_file(e.log, rec0 + 64 + 8, &stale, 8);
	{
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		REQUIRE(*word(a, 0) == OLD);
		REQUIRE(*word(a, 8) == NEW);
		VREQUIRE_OK(vista_fini(v));
	}
	// The older record's tag missing, the newer one present: corrupt.
	Env e2(flags);
	setup(e2);
	test::patch_file(e2.log, rec0 + 8, &stale, 8);
	e2.open(VISTA_ECORRUPT);
}

// Format 5 writes a record's tag back with the rest of it under one
// fence, so a crash may keep the tag without the before-image (L4 in
// log.c, recover.c C2).
TEST_CASE("cacheline: a record whose tag reached media without the rest is "
	  "torn as the newest, corrupt before another, and its generation is "
	  "not used again",
	"[corrupt]")
{
	const uint64_t stale = 0x5a5a5a5a5a5a5a5aull;
	const off_t img = 40; // a one-word record: header, descriptor, image
	{
		// The newest record's image stale: torn, skipped; its store
		// never happened in a real crash, here it did and stays.
		Env e(RIO_FORCE_CACHELINE);
		setup(e);
		off_t rec0 = lane0(e.log) + REC0;
		test::patch_file(e.log, rec0 + 64 + img, &stale, 8);
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		REQUIRE(*word(a, 0) == OLD);
		REQUIRE(*word(a, 8) == NEW);
		VREQUIRE_OK(vista_fini(v));
	}
	{
		// The older record's image stale, the newer one whole: the
		// newer was written after the older was durable: corrupt,
		// and nothing changes.
		Env e(RIO_FORCE_CACHELINE);
		setup(e);
		off_t rec0 = lane0(e.log) + REC0;
		test::patch_file(e.log, rec0 + img, &stale, 8);
		std::string before = test::read_file(e.log);
		e.open(VISTA_ECORRUPT);
		REQUIRE(test::read_file(e.log) == before);
	}
	{
		// The byte domain stores the tag last in program order: the
		// same stale image is corruption there.
		Env e(RIO_FORCE_BYTE);
		setup(e);
		off_t rec0 = lane0(e.log) + REC0;
		test::patch_file(e.log, rec0 + 64 + img, &stale, 8);
		e.open(VISTA_ECORRUPT);
	}
	{
		// The transaction's first record torn (the second never
		// written): it stored nothing, and its tag is on media, so
		// recovery moves the floor past its generation; a crash of
		// the next transaction is rolled back as usual.
		Env e(RIO_FORCE_CACHELINE);
		setup(e);
		off_t lh = lane0(e.log), rec0 = lh + REC0;
		uint64_t zero = 0;
		test::patch_file(e.log, rec0 + img, &stale, 8);
		test::patch_file(e.log, rec0 + 64 + 8, &zero, 8);
		struct vista_lane_hdr h0, h1;
		std::string f = test::read_file(e.log);
		memcpy(&h0, f.data() + lh, sizeof(h0));
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		REQUIRE(*word(a, 0) == NEW); // as the crash left it
		REQUIRE(*word(a, 8) == NEW);
		VREQUIRE_OK(vista_fini(v));
		f = test::read_file(e.log);
		memcpy(&h1, f.data() + lh, sizeof(h1));
		// The child's transaction ran at the floor it found.
		REQUIRE(h1.gen == h0.gen + 1);
		crash_in_child([&] {
			vista *cv = e.open();
			vista_segment *ca = vt::map(cv, e.seg("a"), 0);
			CHILD_OK(vista_begin_transaction(cv, 0));
			CHILD_OK(vista_set_range(cv, word(ca, 0), 8));
			*word(ca, 0) = OLD;
		});
		v = e.open();
		a = vt::map(v, e.seg("a"), 0);
		REQUIRE(*word(a, 0) == NEW);
		VREQUIRE_OK(vista_fini(v));
	}
}

TEST_CASE("a torn truncation reads as the generation its check names; a "
	  "flipped gen never commits a pending transaction",
	"[corrupt]")
{
	unsigned flags = GENERATE(RIO_FORCE_CACHELINE, RIO_FORCE_BYTE);
	Env e(flags);
	setup(e);
	off_t lh = lane0(e.log);
	struct vista_lane_hdr h;
	std::string f = test::read_file(e.log);
	memcpy(&h, f.data() + lh, sizeof(h));
	REQUIRE(h.gen >= 2);

	SECTION("gen + 1 alone: the truncation did not happen")
	{
		// Also what a flip of bit 0 of an even gen looks like: the
		// stored check wins, and the transaction is rolled back.
		uint64_t g = h.gen + 1;
		test::patch_file(e.log, lh, &g, 8);
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		REQUIRE(*word(a, 0) == OLD);
		REQUIRE(*word(a, 8) == OLD);
		VREQUIRE_OK(vista_fini(v));
	}
	SECTION("gen + 2 is corruption")
	{
		uint64_t g = h.gen + 2;
		test::patch_file(e.log, lh, &g, 8);
		e.open(VISTA_ECORRUPT);
	}
	SECTION("the check of gen + 1 alone: the truncation happened")
	{
		// A truncation stores gen_check first: a crash right after it
		// means commit.  The child's transaction is then gone.
		struct vista_log_hdr lhdr;
		memcpy(&lhdr, f.data() + RIO_POOL_HDR_SIZE, sizeof(lhdr));
		uint64_t seed = lhdr.salt ^ 0x9e3779b97f4a7c15ull; // lane 0
		uint64_t c = vista_lane_gen_check(seed, h.gen + 1);
		test::patch_file(e.log, lh + 48, &c, 8);
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		REQUIRE(*word(a, 0) == NEW);
		REQUIRE(*word(a, 8) == NEW);
		VREQUIRE_OK(vista_fini(v));
		std::string g = test::read_file(e.log);
		memcpy(&h, g.data() + lh, sizeof(h));
		REQUIRE(h.gen_check == vista_lane_gen_check(seed, h.gen));
	}
}

TEST_CASE("one flipped bit in the segment header or the heap metadata is "
	  "refused before anything is written",
	"[corrupt]")
{
	Env e(RIO_FORCE_CACHELINE);
	setup(e);
	const std::string log0 = test::read_file(e.log);
	const std::string seg0 = test::read_file(e.seg("a"));
	const off_t sh = RIO_POOL_HDR_SIZE;
	struct vista_seg_hdr h;
	memcpy(&h, seg0.data() + sh, sizeof(h));

	// Segment header: magic .. nclasses, the bind word, the checksum.
	for (int b = 0; b < 104; b++) {
		flip(e.seg("a"), sh + b, b % 8);
		judge(e, "segment header byte " + std::to_string(b), log0,
			seg0);
	}
	for (int b = 4088; b < 4096; b++) {
		flip(e.seg("a"), sh + b, b % 8);
		judge(e, "segment header byte " + std::to_string(b), log0,
			seg0);
	}
	// Heap header (root offset, size, check) and the page map entries
	// of the root object (a LARGE head and its CONT page) and of a free
	// page: every byte.
	off_t hh = (off_t)h.heap_off;
	for (int b = 0; b < 64 + 24; b++) {
		if (b >= 16 && b < 56)
			continue; // reserved words: checked the same way
		flip(e.seg("a"), hh + b, b % 8);
		judge(e, "heap metadata byte " + std::to_string(b), log0,
			seg0);
	}
}

TEST_CASE("a flipped size class is refused, not a double allocation",
	"[corrupt]")
{
	Env e(RIO_FORCE_CACHELINE);
	void *p = nullptr;
	{
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		VREQUIRE_OK(vista_malloc(a, 64, &p));
		VREQUIRE_OK(vista_fini(v));
	}
	std::string s = test::read_file(e.seg("a"));
	struct vista_seg_hdr h;
	memcpy(&h, s.data() + RIO_POOL_HDR_SIZE, sizeof(h));
	uint32_t page = (uint32_t)(((uintptr_t)p - (h.base + h.user_off)) /
		VISTA_PAGE);
	off_t ent = (off_t)(h.heap_off + VISTA_HEAP_HDR_SIZE + 8 * page);
	uint64_t e0;
	memcpy(&e0, s.data() + ent, 8);
	REQUIRE(vista_pg_kind(e0) == VISTA_PG_RUN);
	flip(e.seg("a"), ent + 1, 0); // class 3 (64 bytes) -> 2 (48)
	vista *v = e.open();
	vista_segment *a = nullptr;
	VREQUIRE_RC(vista_map(v, e.seg("a").c_str(), nullptr, 0, 0, &a),
		VISTA_ECORRUPT);
	REQUIRE(std::string(vista_errormsg()).find("check") !=
		std::string::npos);
	VREQUIRE_OK(vista_fini(v));
}

namespace {

// File offset of the bitmap byte holding block b of the run at p.
off_t bitmap_byte(const std::string &s, void *p, unsigned b)
{
	struct vista_seg_hdr h;
	memcpy(&h, s.data() + RIO_POOL_HDR_SIZE, sizeof(h));
	uint64_t page = ((uintptr_t)p - (h.base + h.user_off)) / VISTA_PAGE;
	return (off_t)(h.heap_off + vista_heap_bits_off(h.npages) +
		8 * VISTA_RUN_WORDS * page + b / 8);
}

// Map a with e's log: VISTA_ECORRUPT naming the run's check, and the
// segment file as it was.
void refused(Env &e)
{
	std::string before = test::read_file(e.seg("a"));
	vista *v = e.open();
	vista_segment *a = nullptr;
	VREQUIRE_RC(vista_map(v, e.seg("a").c_str(), nullptr, 0, 0, &a),
		VISTA_ECORRUPT);
	REQUIRE(std::string(vista_errormsg()).find("run bitmap fails its "
						   "check") != std::string::npos);
	VREQUIRE_OK(vista_fini(v));
	REQUIRE(test::read_file(e.seg("a")) == before);
}

} // namespace

TEST_CASE("a flipped allocation bit is refused, not a leak or a double "
	  "allocation",
	"[corrupt]")
{
	Env e(RIO_FORCE_CACHELINE);
	void *p = nullptr, *q = nullptr;
	{
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		VREQUIRE_OK(vista_malloc(a, 64, &p));
		VREQUIRE_OK(vista_malloc(a, 64, &q));
		VREQUIRE_OK(vista_fini(v));
	}
	const std::string s0 = test::read_file(e.seg("a"));
	unsigned b = (unsigned)(((uintptr_t)p % VISTA_PAGE) / 64);
	SECTION("an allocated block's bit cleared")
	{
		flip(e.seg("a"), bitmap_byte(s0, p, b), (int)(b % 8));
		refused(e);
	}
	SECTION("a free block's bit set")
	{
		flip(e.seg("a"), bitmap_byte(s0, p, b + 9), (int)((b + 9) % 8));
		refused(e);
	}
	SECTION("untouched, it maps and checks")
	{
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		struct vista_heap_info info;
		VREQUIRE_OK(vista_heap_check(a, &info));
		REQUIRE(info.blocks == 2);
		VREQUIRE_OK(vista_free(a, p));
		VREQUIRE_OK(vista_heap_check(a, &info));
		REQUIRE(info.blocks == 1);
		VREQUIRE_OK(vista_fini(v));
		vista *w = e.open();
		a = vt::map(w, e.seg("a"), 0);
		VREQUIRE_OK(vista_heap_check(a, &info));
		REQUIRE(info.blocks == 1);
		VREQUIRE_OK(vista_fini(w));
	}
}

TEST_CASE("a crash amid allocations: only the bits the log names may "
	  "disagree with their run's check",
	"[corrupt]")
{
	Env e(RIO_FORCE_CACHELINE);
	e.log_size = 256 << 10;
	void *p = nullptr;
	{
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		VREQUIRE_OK(vista_malloc(a, 64, &p));
		VREQUIRE_OK(vista_fini(v));
	}
	// The child allocates the next three blocks of p's run, frees p and
	// dies before committing.
	crash_in_child([&] {
		vista *cv = e.open();
		vista_segment *a = vt::map(cv, e.seg("a"), 0);
		void *x;
		CHILD_OK(vista_begin_transaction(cv, 0));
		for (int i = 0; i < 3; i++)
			CHILD_OK(vista_malloc(a, 64, &x));
		CHILD_OK(vista_free(a, p));
	});
	const std::string s0 = test::read_file(e.seg("a"));
	unsigned b = (unsigned)(((uintptr_t)p % VISTA_PAGE) / 64);
	auto recovers = [&] {
		vista *v = e.open();
		vista_segment *a = vt::map(v, e.seg("a"), 0);
		struct vista_heap_info info;
		VREQUIRE_OK(vista_heap_check(a, &info));
		REQUIRE(info.blocks == 1);
		REQUIRE(vista_usable_size(a, p) == 64);
		VREQUIRE_OK(vista_fini(v));
	};
	SECTION("as the crash left it") { recovers(); }
	SECTION("a named bit flipped: rollback sets it anyway")
	{
		flip(e.seg("a"), bitmap_byte(s0, p, b + 2), (int)((b + 2) % 8));
		recovers();
	}
	SECTION("a bit no record names flipped: refused before rollback")
	{
		flip(e.seg("a"), bitmap_byte(s0, p, b + 20), (int)((b + 20) % 8));
		refused(e);
	}
}

TEST_CASE("a segment left unfinished refuses another log; a clean one "
	  "moves",
	"[corrupt]")
{
	Env e(RIO_FORCE_CACHELINE);
	setup(e); // the child died with A mapped: A is bound to e.log
	const std::string seg0 = test::read_file(e.seg("a"));

	SECTION("the log deleted: a new log refuses A")
	{
		REQUIRE(unlink(e.log.c_str()) == 0);
		vista *v = e.open();
		vista_segment *a = nullptr;
		VREQUIRE_RC(vista_map(v, e.seg("a").c_str(), nullptr, 0, 0, &a),
			VISTA_EOTHERLOG);
		REQUIRE(std::string(vista_errormsg()).find("another log") !=
			std::string::npos);
		REQUIRE(test::read_file(e.seg("a")) == seg0);
		VREQUIRE_OK(vista_fini(v));
	}
	SECTION("another instance's log refuses A; its own log recovers it, "
		"after which any log maps it")
	{
		Env other(RIO_FORCE_CACHELINE);
		vista *w = other.open();
		vista_segment *a = nullptr;
		VREQUIRE_RC(vista_map(w, e.seg("a").c_str(), nullptr, 0, 0, &a),
			VISTA_EOTHERLOG);
		REQUIRE(test::read_file(e.seg("a")) == seg0);
		vista *v = e.open();
		a = vt::map(v, e.seg("a"), 0);
		REQUIRE(*word(a, 0) == OLD);
		REQUIRE(*word(a, 8) == OLD);
		VREQUIRE_OK(vista_fini(v)); // clean now
		VREQUIRE_OK(vista_map(w, e.seg("a").c_str(), nullptr, 0, 0, &a));
		REQUIRE(*word(a, 8) == OLD);
		VREQUIRE_OK(vista_fini(w));
	}
}

TEST_CASE("a failed vista_map(VISTA_CREATE) leaves no file", "[corrupt]")
{
	Env e;
	vista *v = e.open();
	// Hold the address with an ordinary mapping.
	void *want = vt::addr(5);
	void *m = mmap(want, 1 << 20, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
		MAP_FIXED_NOREPLACE, -1, 0);
	REQUIRE(m == want);
	vista_segment *s = nullptr;
	int rc = vista_map(v, e.seg("x").c_str(), want, 1 << 20, VISTA_CREATE,
		&s);
	INFO(vista_err_name(rc) << ": " << vista_errormsg());
	REQUIRE(rc != 0);
	REQUIRE(s == nullptr);
	REQUIRE(!test::exists(e.seg("x")));
	REQUIRE(!test::exists(e.seg("x") + ".img"));
	munmap(m, 1 << 20);
	// The same call succeeds once the address is free.
	VREQUIRE_OK(vista_map(v, e.seg("x").c_str(), want, 1 << 20,
		VISTA_CREATE, &s));
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a valid record whose descriptor points into the heap metadata is "
	  "refused before the rollback writes anything",
	"[corrupt]")
{
	Env e(RIO_FORCE_CACHELINE);
	setup(e);
	std::string f = test::read_file(e.log);
	off_t lh = lane0(e.log), r1 = lh + REC0 + 64; // record 1
	struct vista_log_hdr lhdr;
	struct vista_lane_hdr h;
	struct vista_rec r;
	struct vista_rdesc d;
	memcpy(&lhdr, f.data() + RIO_POOL_HDR_SIZE, sizeof(lhdr));
	memcpy(&h, f.data() + lh, sizeof(h));
	memcpy(&r, f.data() + r1, sizeof(r));
	memcpy(&d, f.data() + r1 + sizeof(r), sizeof(d));
	REQUIRE(r.len == sizeof(r) + sizeof(d) + 8);
	struct vista_seg_hdr sh;
	std::string s = test::read_file(e.seg("a"));
	memcpy(&sh, s.data() + RIO_POOL_HDR_SIZE, sizeof(sh));
	// Aim the image at page map entry 1, and checksum the record again
	// as the library would: it is a complete, valid record.
	d.off = sh.heap_off + VISTA_HEAP_HDR_SIZE + 8;
	test::patch_file(e.log, r1 + sizeof(r), &d, sizeof(d));
	f = test::read_file(e.log);
	uint64_t seed = lhdr.salt ^ 0x9e3779b97f4a7c15ull; // lane 0
	uint64_t check = rio_checksum(f.data() + r1 + 16, r.len - 16,
		seed ^ (h.gen * 0xc2b2ae3d27d4eb4full) ^ 64);
	test::patch_file(e.log, r1, &check, 8);
	vista *v = e.open(); // the log itself is consistent
	vista_segment *a = nullptr;
	VREQUIRE_RC(vista_map(v, e.seg("a").c_str(), nullptr, 0, 0, &a),
		VISTA_ECORRUPT);
	REQUIRE(std::string(vista_errormsg()).find("outside") !=
		std::string::npos);
	REQUIRE(test::read_file(e.seg("a")) == s);
	VREQUIRE_OK(vista_fini(v));
}
