// SPDX-License-Identifier: BSD-3-Clause
// map_test.cpp -- vista_init and vista_map: create, reopen, fixed
// addresses, and every bad input (which must change nothing)
#include "vista_test.hpp"
#include "../common/hdr_rules.hpp"

#include "heap_layout.h"
#include "log_layout.h"
#include "segment_layout.h"

using vt::Env;

// Rewrite the segment header of a closed segment (fixing the checksum).
template <typename F> static void edit_seg(const std::string &path, F fn)
{
	struct vista_seg_hdr h;
	std::string f = test::read_file(path);
	memcpy(&h, f.data() + RIO_POOL_HDR_SIZE, sizeof(h));
	fn(h);
	// Everything but the bind word and the checksum.
	size_t b = offsetof(struct vista_seg_hdr, bind) + 8;
	h.checksum = rio_checksum((const char *)&h + b,
		offsetof(struct vista_seg_hdr, checksum) - b,
		rio_checksum(&h, offsetof(struct vista_seg_hdr, bind),
			VISTA_SEG_CSUM_SEED));
	test::patch_file(path, RIO_POOL_HDR_SIZE, &h, sizeof(h));
}

template <typename F> static void edit_log(const std::string &path, F fn)
{
	struct vista_log_hdr h;
	std::string f = test::read_file(path);
	memcpy(&h, f.data() + RIO_POOL_HDR_SIZE, sizeof(h));
	fn(h);
	h.checksum = rio_checksum(&h, offsetof(struct vista_log_hdr, checksum),
		VISTA_LOG_CSUM_SEED);
	test::patch_file(path, RIO_POOL_HDR_SIZE, &h, sizeof(h));
}

// A map that must fail with `want` and leave the file as it was.
static void map_fails(vista *v, const std::string &path, int want,
	void *addr = nullptr, unsigned flags = 0, size_t size = 0)
{
	std::string before = test::read_file(path);
	vista_segment *s = (vista_segment *)&s;
	VREQUIRE_RC(vista_map(v, path.c_str(), addr, size, flags, &s), want);
	REQUIRE(s == nullptr);
	REQUIRE(test::read_file(path) == before);
}

TEST_CASE("a log is created once and keeps its geometry", "[init]")
{
	Env e;
	e.lanes = 3;
	e.log_size = 1 << 20;
	vista *v = e.open();
	VREQUIRE_OK(vista_fini(v));
	REQUIRE(test::read_file(e.log).size() == 1 << 20);
	e.lanes = 7;
	e.log_size = 2 << 20;
	v = e.open();
	// Three lanes: a fourth thread gets none.
	std::vector<std::thread> th;
	std::atomic<int> ok{ 0 }, nolane{ 0 };
	std::atomic<int> ready{ 0 };
	for (int i = 0; i < 4; i++)
		th.emplace_back([&] {
			int rc = vista_begin_transaction(v, 0);
			(rc == 0 ? ok : nolane)++;
			ready++;
			while (ready < 4)
				;
			if (rc == 0)
				vista_end_transaction(v);
		});
	for (auto &t : th)
		t.join();
	REQUIRE(ok == 3);
	REQUIRE(nolane == 1);
	VREQUIRE_OK(vista_fini(v));
	REQUIRE(test::read_file(e.log).size() == 1 << 20);
}

TEST_CASE("vista_init rejects bad options and bad logs, changing nothing",
	"[init]")
{
	Env e;
	vista *v = nullptr;
	struct vista_opts o = {};
	VREQUIRE_RC(vista_init(&o, &v), -EINVAL);
	VREQUIRE_RC(vista_init(nullptr, &v), -EINVAL);
	o.log_path = e.log.c_str();
	o.rio_flags = RIO_RDONLY;
	VREQUIRE_RC(vista_init(&o, &v), -EINVAL);
	o.rio_flags = 0;
	o.log_size = 64 << 10;
	o.lanes = 8; // 64 KiB cannot hold 8 lanes of 16 KiB
	VREQUIRE_RC(vista_init(&o, &v), -EINVAL);
	unlink(e.log.c_str());

	v = e.open();
	// The same log twice: refused while the first is open.
	vista *v2 = nullptr;
	o = {};
	o.log_path = e.log.c_str();
	VREQUIRE_RC(vista_init(&o, &v2), -EBUSY);
	VREQUIRE_OK(vista_fini(v));

	SECTION("corrupt header")
	{
		char junk = 0x5a;
		test::patch_file(e.log, RIO_POOL_HDR_SIZE + 100, &junk, 1);
		std::string before = test::read_file(e.log);
		e.open(VISTA_ECORRUPT);
		REQUIRE(test::read_file(e.log) == before);
	}
	SECTION("newer major version")
	{
		edit_log(e.log,
			[](vista_log_hdr &h) { h.major = VISTA_LOG_MAJOR + 1; });
		std::string before = test::read_file(e.log);
		e.open(VISTA_ELAYOUT);
		REQUIRE(test::read_file(e.log) == before);
	}
	SECTION("older major version (4: a record's tag stored after a "
		"fence of its own) is refused, naming both versions")
	{
		edit_log(e.log, [](vista_log_hdr &h) { h.major = 4; });
		std::string before = test::read_file(e.log);
		e.open(VISTA_ELAYOUT);
		std::string msg = vista_errormsg();
		INFO(msg);
		REQUIRE(msg.find("4.") != std::string::npos);
		REQUIRE(msg.find(std::to_string(VISTA_LOG_MAJOR) + ".") !=
			std::string::npos);
		REQUIRE(test::read_file(e.log) == before);
	}
	SECTION("unknown incompat feature")
	{
		edit_log(e.log, [](vista_log_hdr &h) {
			h.incompat = VISTA_LOG_INCOMPAT_KNOWN | 1u << 7;
		});
		e.open(VISTA_ELAYOUT);
	}
	SECTION("a reader of format 5.0 refuses a 5.1 log: its new-range "
		"feature is unknown there")
	{
		REQUIRE(VISTA_LOG_INCOMPAT_KNOWN == VISTA_LOG_INCOMPAT_NEW);
		std::string f = test::read_file(e.log);
		struct vista_log_hdr h;
		memcpy(&h, f.data() + RIO_POOL_HDR_SIZE, sizeof(h));
		REQUIRE(h.minor == 1);
		REQUIRE(h.incompat == VISTA_LOG_INCOMPAT_NEW);
	}
	SECTION("impossible geometry")
	{
		edit_log(e.log, [](vista_log_hdr &h) { h.nlanes = 1000; });
		e.open(VISTA_ECORRUPT);
	}
	SECTION("a segment given as the log")
	{
		vista *w = e.open();
		vt::map(w, e.seg("a"), 0);
		VREQUIRE_OK(vista_fini(w));
		o.log_path = nullptr;
		std::string seg = e.seg("a");
		o.log_path = seg.c_str();
		VREQUIRE_RC(vista_init(&o, &v2), VISTA_ELAYOUT);
	}
	SECTION("an unfinished create is finished")
	{
		// Header never written (crash right after the pool was made).
		std::string zero(8, '\0');
		test::patch_file(e.log, RIO_POOL_HDR_SIZE, zero.data(), 8);
		v = e.open();
		VREQUIRE_OK(vista_fini(v));
	}
}

TEST_CASE("segments map at a fixed address; NULL reopens them there",
	"[map]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = nullptr;
	std::string a = e.seg("a");

	REQUIRE(vista_segment_footprint(1 << 20) > (1 << 20) + 8192);
	REQUIRE(vista_segment_footprint(1 << 20) % 4096 == 0);
	VREQUIRE_RC(vista_map(v, a.c_str(), nullptr, 0, 0, &s), -ENOENT);
	VREQUIRE_RC(vista_map(v, a.c_str(), nullptr, 1 << 20, VISTA_CREATE, &s),
		-EINVAL); // needs an address
	VREQUIRE_RC(vista_map(v, a.c_str(), (char *)vt::addr(0) + 1, 1 << 20,
			    VISTA_CREATE, &s),
		-EINVAL);
	VREQUIRE_RC(vista_map(v, a.c_str(), vt::addr(0), 1 << 20, 0x100, &s),
		-EINVAL);
	// More than a log descriptor's 40-bit offset reaches: refused, with
	// nothing made.
	REQUIRE(vista_segment_footprint((size_t)1 << 40) == 0);
	REQUIRE(vista_segment_footprint((size_t)1 << 39) != 0);
	VREQUIRE_RC(vista_map(v, a.c_str(), vt::addr(0), (size_t)1 << 40,
			    VISTA_CREATE, &s),
		-EINVAL);
	REQUIRE(std::string(vista_errormsg()).find("1 TiB") !=
		std::string::npos);
	REQUIRE_FALSE(test::exists(a));
	VREQUIRE_OK(vista_map(v, a.c_str(), vt::addr(0), 100000,
		VISTA_CREATE | VISTA_EXCL, &s));
	REQUIRE(vista_segment_size(s) == 102400);
	REQUIRE((char *)vista_segment_base(s) >= (char *)vt::addr(0) + 8192);
	REQUIRE((char *)vista_segment_base(s) + vista_segment_size(s) <=
		(char *)vt::addr(0) + vista_segment_footprint(100000));
	REQUIRE(test::read_file(a).size() == vista_segment_footprint(100000));
	REQUIRE(vista_segment_pool(s) != nullptr);
	void *base = vista_segment_base(s);
	VREQUIRE_OK(vista_unmap(s));

	VREQUIRE_OK(vista_map(v, a.c_str(), nullptr, 0, 0, &s));
	REQUIRE(vista_segment_base(s) == base);
	VREQUIRE_OK(vista_unmap(s));
	VREQUIRE_OK(vista_map(v, a.c_str(), vt::addr(0), 0, VISTA_CREATE, &s));
	REQUIRE(vista_segment_base(s) == base);
	VREQUIRE_OK(vista_unmap(s));
	map_fails(v, a, -EINVAL, vt::addr(1)); // elsewhere
	map_fails(v, a, -EEXIST, vt::addr(0), VISTA_CREATE | VISTA_EXCL, 4096);

	// Another mapping in the way.
	void *block = mmap(vt::addr(0), 4096, PROT_READ,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	REQUIRE(block == vt::addr(0));
	map_fails(v, a, RIO_EADDRINUSE);
	munmap(block, 4096);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a segment is mapped once", "[map]")
{
	Env e;
	vista *v = e.open();
	std::string a = e.seg("a");
	vista_segment *s = vt::map(v, a, 0), *s2 = nullptr;

	VREQUIRE_RC(vista_map(v, a.c_str(), nullptr, 0, 0, &s2), VISTA_EMAPPED);
	VREQUIRE_RC(vista_map(v, a.c_str(), vt::addr(0), 1 << 20, VISTA_CREATE,
			    &s2),
		VISTA_EMAPPED);
	// By another process: the file lock says so.
	auto r = test::run_child([&] {
		int rc;
		{ // e2's directory goes before the child exits
			Env e2;
			vista *w = e2.open();
			vista_segment *x = nullptr;
			rc = vista_map(w, a.c_str(), nullptr, 0, 0, &x);
			vista_fini(w);
		}
		_exit(rc == VISTA_EMAPPED ? 0 : 1);
	});
	REQUIRE(r.exited);
	REQUIRE(r.code == 0);
	// A copy of the file (same uuid) would map at the same place.
	std::string c = e.seg("copy");
	test::write_file(c, test::read_file(a));
	VREQUIRE_RC(vista_map(v, c.c_str(), nullptr, 0, 0, &s2), RIO_EADDRINUSE);
	VREQUIRE_OK(vista_unmap(s));
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("bad segments are refused and left as they were", "[map]")
{
	Env e;
	std::string a = e.seg("a");
	{
		vista *v = e.open();
		vt::map(v, a, 0);
		VREQUIRE_OK(vista_fini(v));
	}
	vista *v = e.open();

	SECTION("newer major version")
	{
		edit_seg(a, [](vista_seg_hdr &h) { h.major = 9; });
		map_fails(v, a, VISTA_ELAYOUT);
	}
	SECTION("other size classes")
	{
		edit_seg(a, [](vista_seg_hdr &h) { h.nclasses = 30; });
		map_fails(v, a, VISTA_ELAYOUT);
	}
	SECTION("header checksum")
	{
		char junk = 1;
		test::patch_file(a, RIO_POOL_HDR_SIZE + 200, &junk, 1);
		map_fails(v, a, VISTA_ECORRUPT);
	}
	SECTION("inconsistent geometry")
	{
		edit_seg(a, [](vista_seg_hdr &h) { h.user_size += 4096; });
		map_fails(v, a, VISTA_ECORRUPT);
	}
	SECTION("corrupt heap metadata")
	{
		// A continuation page with no head (its entry checks).
		uint64_t cont = vista_pg_make(VISTA_PG_CONT, 0, 1);
		test::patch_file(a, 8192 + 64 + 8 * 5, &cont, 8);
		map_fails(v, a, VISTA_ECORRUPT);
	}
	SECTION("a log given as a segment")
	{
		Env other;
		VREQUIRE_OK(vista_fini(other.open()));
		map_fails(v, other.log, VISTA_ELAYOUT);
	}
	SECTION("not a pool at all")
	{
		std::string junk(100000, 'j');
		test::write_file(e.seg("junk"), junk);
		map_fails(v, e.seg("junk"), RIO_EBADMAGIC);
	}
	SECTION("an unfinished create needs VISTA_CREATE to finish")
	{
		std::string zero(8, '\0');
		test::patch_file(a, RIO_POOL_HDR_SIZE, zero.data(), 8);
		map_fails(v, a, VISTA_ECORRUPT);
		vista_segment *s;
		VREQUIRE_OK(vista_map(v, a.c_str(), vt::addr(0), 1 << 20,
			VISTA_CREATE, &s));
		VREQUIRE_OK(vista_heap_check(s, nullptr));
	}
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("the segment table reuses entries of segments that are gone",
	"[map]")
{
	Env e;
	vista *v = e.open();
	// More segments over the log's life than the table has entries.
	for (unsigned i = 0; i < VISTA_MAX_SEGMENTS + 8; i++) {
		std::string p = e.seg("s" + std::to_string(i));
		vista_segment *s = vt::map(v, p, (int)(i % 4), 4096);
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_set_range(v, vista_segment_base(s), 8));
		VREQUIRE_OK(vista_end_transaction(v));
		VREQUIRE_OK(vista_unmap(s));
		unlink(p.c_str());
	}
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("with RIO_SAFE_SYNC a lost memory copy comes back from the images",
	"[map]")
{
	Env e(RIO_SAFE_SYNC);
	std::string a = e.seg("a");
	{
		vista *v = e.open();
		vista_segment *s = vt::map(v, a, 0);
		uint64_t *root;
		VREQUIRE_OK(vista_root(s, 64, (void **)&root));
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_set_range(v, root, 8));
		root[0] = 1234;
		VREQUIRE_OK(vista_end_transaction(v));
		VREQUIRE_OK(vista_fini(v)); // safe-syncs the images
	}
	REQUIRE(test::exists(a + ".img"));
	REQUIRE(test::exists(e.log + ".img"));
	// A reboot: the memory copies (tmpfs files) are gone.
	unlink(a.c_str());
	unlink(e.log.c_str());
	vista *v = e.open();
	vista_segment *s = vt::map(v, a, 0); // VISTA_CREATE must not recreate
	uint64_t *root;
	VREQUIRE_OK(vista_root(s, 64, (void **)&root));
	REQUIRE(root[0] == 1234);
	VREQUIRE_OK(vista_fini(v));
}

// The rules of docs/FORMAT.md "Header rules", the same verdicts for the
// log and the segment header.  vista has no read-only mode: an unknown
// ro_compat bit refuses.
template <typename H> static std::vector<hdr_rules::Rule<H>> vista_rules()
{
	return {
		{ "bad magic", [](H &h) { h.magic[0] ^= 1; }, VISTA_ECORRUPT },
		{ "newer major", [](H &h) { h.major++; }, VISTA_ELAYOUT },
		{ "older major", [](H &h) { h.major--; }, VISTA_ELAYOUT },
		{ "newer minor accepted", [](H &h) { h.minor++; }, 0 },
		{ "unknown incompat refused",
			[](H &h) { h.incompat |= 1u << 30; }, VISTA_ELAYOUT },
		{ "unknown ro_compat refused (no read-only mode)",
			[](H &h) { h.ro_compat |= 1u << 30; }, VISTA_ELAYOUT },
		{ "unknown compat accepted",
			[](H &h) { h.compat |= 1u << 30; }, 0 },
		{ "non-zero reserved refused",
			[](H &h) { h.reserved[sizeof(h.reserved) - 1] = 1; },
			VISTA_ECORRUPT },
		{ "non-zero reserved0 refused", [](H &h) { h.reserved0 = 1; },
			VISTA_ECORRUPT },
	};
}

TEST_CASE("log header rules: one test per rule, a refusal changes nothing",
	"[init][hdr]")
{
	Env e;
	VREQUIRE_OK(vista_fini(e.open()));
	hdr_rules::run(hdr_rules::files({ e.log }), vista_rules<vista_log_hdr>(),
		[&](const std::function<void(vista_log_hdr &)> &fn) {
			edit_log(e.log, fn);
		},
		[&](bool) {
			vista *v = nullptr;
			int rc = e.init(&v);
			if (rc == 0)
				VREQUIRE_OK(vista_fini(v));
			return rc;
		});
}

TEST_CASE("segment header rules: one test per rule, a refusal changes "
	  "nothing",
	"[map][hdr]")
{
	Env e;
	std::string a = e.seg("a");
	{
		vista *v = e.open();
		vt::map(v, a, 0);
		VREQUIRE_OK(vista_fini(v));
	}
	vista *v = e.open();
	hdr_rules::run(hdr_rules::files({ a }), vista_rules<vista_seg_hdr>(),
		[&](const std::function<void(vista_seg_hdr &)> &fn) {
			edit_seg(a, fn);
		},
		[&](bool) {
			vista_segment *s = nullptr;
			int rc = vista_map(v, a.c_str(), nullptr, 0, 0, &s);
			if (rc == 0)
				VREQUIRE_OK(vista_unmap(s));
			return rc;
		});
	VREQUIRE_OK(vista_fini(v));
}
