// SPDX-License-Identifier: BSD-3-Clause
// fc_cache_test.cpp -- opening and closing a cache, and every bad input:
// wrong options, another directory, a pool in use, a corrupt pool, a fork
#include "fc_int.h"
#include "fc_util.hpp"
#include "../common/hdr_rules.hpp"

using fct::Env;
using fct::get;
using fct::put;

// Geometry of a closed cache pool, from its superblock on disk.
struct Geo {
	rio_fc_super sb;
	explicit Geo(const std::string &pool)
	{
		std::string f = test::read_file(pool);
		REQUIRE(f.size() > RIO_POOL_HDR_SIZE + sizeof(sb));
		memcpy(&sb, f.data() + RIO_POOL_HDR_SIZE, sizeof(sb));
	}
	off_t desc(uint64_t b) const
	{
		return (off_t)(RIO_POOL_HDR_SIZE + sb.descs_off +
			b * RIO_FC_DESC_SIZE);
	}
	off_t frec(uint32_t s) const
	{
		return (off_t)(RIO_POOL_HDR_SIZE + sb.files_off +
			s * RIO_FC_FREC_SIZE);
	}
};

// The superblock checksum as docs/FORMAT.md defines it.
static uint64_t sb_checksum(const rio_fc_super &sb)
{
	uint64_t h = rio_checksum(&sb, offsetof(rio_fc_super, state),
		RIO_FC_SB_CSUM_SEED);
	return rio_checksum(sb.dir,
		offsetof(rio_fc_super, checksum) - offsetof(rio_fc_super, dir), h);
}

// An open that must fail with `want` and leave the pool byte for byte.
static void open_fails(const Env &e, int want, const char *dir = nullptr,
	const struct rio_fc_opts *o = nullptr)
{
	std::string before = test::read_file(e.pool);
	rio_fc_cache *c = nullptr;
	REQUIRE_RC(rio_fc_cache_open(e.pool.c_str(), dir ? dir : e.dir.c_str(),
			   o, &c), want);
	REQUIRE(c == nullptr);
	REQUIRE(test::read_file(e.pool) == before);
}

// A cache whose pool holds one dirty block of file "d" (closed without
// writing it back: the child exits without closing).
static void dirty_pool(const Env &e)
{
	test::ChildResult r = test::run_child([&] {
		rio_fc_cache *c = nullptr;
		struct rio_fc_opts o = {};
		o.flags = RIO_FC_CREATE | RIO_FC_NO_THREAD;
		o.pool_size = 1 << 20;
		if (rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c))
			_exit(1);
		rio_fc_file *f = nullptr;
		if (rio_fc_open(c, e.file("d").c_str(), O_RDWR | O_CREAT, &f) ||
		    rio_fc_pwrite(f, "dirty", 5, 0))
			_exit(2);
		_exit(0);
	});
	REQUIRE(r.exited);
	REQUIRE(r.code == 0);
}

TEST_CASE("create, reopen, directory and options", "[fc-cache]")
{
	Env e;
	rio_fc_cache *c = nullptr;
	struct rio_fc_opts o = {};

	// No pool and no RIO_FC_CREATE.
	REQUIRE_RC(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c),
		-ENOENT);
	o.flags = RIO_FC_CREATE;
	o.pool_size = 100 << 10;
	REQUIRE_RC(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c),
		-EINVAL); // too small
	o.pool_size = 0;
	o.pool_flags = RIO_PROTECT;
	REQUIRE_RC(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c),
		-ENOTSUP);
	o.pool_flags = 0;
	o.dirty_max_pct = 95;
	REQUIRE_RC(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c),
		-EINVAL);
	o.dirty_max_pct = 0;
	REQUIRE_RC(rio_fc_cache_open(e.pool.c_str(), (e.tmp / "nodir").c_str(),
			   &o, &c), -ENOENT);
	test::write_file(e.tmp / "plain", "x");
	REQUIRE_RC(rio_fc_cache_open(e.pool.c_str(), (e.tmp / "plain").c_str(),
			   &o, &c), -ENOTDIR);
	REQUIRE(!test::exists(e.pool));

	o.pool_size = 2 << 20;
	REQUIRE_OK(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c));
	REQUIRE(std::string(rio_fc_dir(c)) == e.dir);
	REQUIRE(rio_pool_size(rio_fc_pool(c)) == (2 << 20) - RIO_POOL_HDR_SIZE);
	struct rio_fc_stats s = fct::stats(c);
	REQUIRE(s.blocks > 400);
	REQUIRE(s.blocks_free == s.blocks);
	REQUIRE(!s.recovered);
	rio_fc_file *f = fct::open_file(c, e.file("keep"));
	put(f, 0, "kept");
	rio_fc_close(f);
	// One process at a time: a second open is refused, unchanged.
	rio_fc_cache *c2 = nullptr;
	REQUIRE_RC(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c2),
		-EBUSY);
	REQUIRE_OK(rio_fc_cache_close(c));

	// Reopen with the directory from the pool, and with another one.
	REQUIRE_OK(rio_fc_cache_open(e.pool.c_str(), nullptr, nullptr, &c));
	REQUIRE(std::string(rio_fc_dir(c)) == e.dir);
	REQUIRE(!fct::stats(c).recovered);
	// A clean close keeps clean blocks: a warm reopen.
	REQUIRE(fct::stats(c).blocks_clean == 1);
	f = fct::open_file(c, e.file("keep"), O_RDONLY);
	REQUIRE(get(f, 0, 10) == "kept");
	REQUIRE(fct::stats(c).read_hits == 1);
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(mkdir((e.tmp / "other").c_str(), 0755) == 0);
	open_fails(e, RIO_EOTHERDIR, (e.tmp / "other").c_str());
	// Not a cache pool: a plain rio pool (layout name) or another file.
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_create((e.tmp / "plainpool").c_str(), 1 << 20, 0,
		&p));
	rio_pool_close(p);
	REQUIRE_RC(rio_fc_cache_open((e.tmp / "plainpool").c_str(),
			   e.dir.c_str(), nullptr, &c), RIO_ELAYOUT);
}

TEST_CASE("superblock header rules: one test per rule, a refusal changes "
	  "nothing",
	"[fc-cache][hdr]")
{
	using R = hdr_rules::Rule<rio_fc_super>;
	Env e;
	// A cleanly closed cache keeps its blocks (tables in use: a bad
	// superblock is never formatted over).
	rio_fc_cache *c = nullptr;
	struct rio_fc_opts o = {};
	o.flags = RIO_FC_CREATE | RIO_FC_NO_THREAD;
	o.pool_size = 1 << 20;
	REQUIRE_OK(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c));
	rio_fc_file *f = fct::open_file(c, e.file("keep"));
	put(f, 0, "kept");
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
	// The cache is always written: no read-only open, no ro_compat mask.
	hdr_rules::run(hdr_rules::files({ e.pool }),
		std::vector<R>{
			{ "bad magic", [](rio_fc_super &s) { s.magic[0] ^= 1; },
				RIO_EBADMAGIC },
			{ "newer major", [](rio_fc_super &s) { s.major++; },
				RIO_EVERSION },
			{ "older major", [](rio_fc_super &s) { s.major--; },
				RIO_EVERSION },
			{ "newer minor accepted",
				[](rio_fc_super &s) { s.minor++; }, 0 },
			{ "unknown incompat refused",
				[](rio_fc_super &s) { s.incompat |= 1u << 30; },
				RIO_EFEATURE },
			{ "unknown compat accepted",
				[](rio_fc_super &s) { s.compat |= 1u << 30; }, 0 },
			{ "non-zero reserved refused",
				[](rio_fc_super &s) {
					s.reserved1[sizeof(s.reserved1) - 1] = 1;
				},
				RIO_ECORRUPT },
			{ "non-zero reserved0 refused",
				[](rio_fc_super &s) { s.reserved0[0] = 1; },
				RIO_ECORRUPT },
		},
		[&](const std::function<void(rio_fc_super &)> &fn) {
			Geo g(e.pool);
			fn(g.sb);
			g.sb.checksum = sb_checksum(g.sb);
			test::patch_file(e.pool, RIO_POOL_HDR_SIZE, &g.sb,
				sizeof(g.sb));
		},
		[&](bool) {
			rio_fc_cache *c = nullptr;
			int rc = rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(),
				nullptr, &c);
			if (rc == 0)
				REQUIRE_OK(rio_fc_cache_close(c));
			return rc;
		});
}

TEST_CASE("an empty cache of another version or with an unknown feature is "
	  "not formatted over",
	"[fc-cache][hdr]")
{
	Env e;
	rio_fc_cache *c = nullptr;
	struct rio_fc_opts o = {};
	o.flags = RIO_FC_CREATE | RIO_FC_NO_THREAD;
	o.pool_size = 1 << 20;
	REQUIRE_OK(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c));
	REQUIRE_OK(rio_fc_cache_close(c)); // no file: the tables are zero
	std::string good = test::read_file(e.pool);
	Geo g(e.pool);
	rio_fc_super sb = g.sb;
	SECTION("another major") { sb.major++; }
	SECTION("an unknown incompat feature") { sb.incompat |= 1u << 30; }
	sb.checksum = sb_checksum(sb);
	test::patch_file(e.pool, RIO_POOL_HDR_SIZE, &sb, sizeof(sb));
	open_fails(e, sb.major != g.sb.major ? RIO_EVERSION : RIO_EFEATURE);
}

TEST_CASE("a corrupt pool is refused and left as it was", "[fc-cache]")
{
	Env e;
	dirty_pool(e);
	Geo g(e.pool);
	std::string clean = test::read_file(e.pool);

	SECTION("superblock") {
		uint8_t x = 0x5a;
		test::patch_file(e.pool, RIO_POOL_HDR_SIZE + 40, &x, 1);
		open_fails(e, RIO_ECORRUPT);
	}
	SECTION("superblock of a newer version") {
		rio_fc_super sb = g.sb;
		sb.major = RIO_FC_MAJOR + 1;
		sb.checksum = sb_checksum(sb);
		test::patch_file(e.pool, RIO_POOL_HDR_SIZE, &sb, sizeof(sb));
		open_fails(e, RIO_EVERSION);
	}
	SECTION("superblock with an unknown incompat feature") {
		rio_fc_super sb = g.sb;
		sb.incompat = 1u << 7;
		sb.checksum = sb_checksum(sb);
		test::patch_file(e.pool, RIO_POOL_HDR_SIZE, &sb, sizeof(sb));
		open_fails(e, RIO_EFEATURE);
	}
	SECTION("superblock of another geometry") {
		rio_fc_super sb = g.sb;
		sb.nblocks--;
		sb.checksum = sb_checksum(sb);
		test::patch_file(e.pool, RIO_POOL_HDR_SIZE, &sb, sizeof(sb));
		open_fails(e, RIO_ECORRUPT);
	}
	SECTION("block descriptor of the dirty block") {
		uint8_t x = 0xff;
		test::patch_file(e.pool, g.desc(0) + 16, &x, 1);
		open_fails(e, RIO_ECORRUPT);
	}
	SECTION("descriptor state") {
		uint64_t st = 12345;
		test::patch_file(e.pool, g.desc(3), &st, sizeof(st));
		open_fails(e, RIO_ECORRUPT);
	}
	SECTION("file record") {
		uint8_t x = 'Q';
		test::patch_file(e.pool, g.frec(0) + 192, &x, 1);
		open_fails(e, RIO_ECORRUPT);
	}
	SECTION("both file-state records") {
		uint8_t z[128] = {};
		test::patch_file(e.pool, g.frec(0) + 64, z, sizeof(z));
		open_fails(e, RIO_ECORRUPT);
	}
	// After the damage is repaired, everything is there.
	test::patch_file(e.pool, 0, clean.data(), clean.size());
	rio_fc_cache *c = nullptr;
	REQUIRE_OK(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), nullptr,
		&c));
	REQUIRE(fct::stats(c).recovered);
	REQUIRE(test::read_file(e.file("d")) == "dirty");
	REQUIRE_OK(rio_fc_cache_close(c));
}

TEST_CASE("formatting interrupted: a torn superblock over an empty cache",
	"[fc-cache]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e, 1 << 20);
	REQUIRE_OK(rio_fc_cache_close(c));
	// As if the crash came while the superblock was being written.
	std::string junk(100, 'j');
	test::patch_file(e.pool, RIO_POOL_HDR_SIZE + 8, junk.data(), junk.size());
	// Without the directory it cannot be formatted again.
	REQUIRE_RC(rio_fc_cache_open(e.pool.c_str(), nullptr, nullptr, &c),
		-EINVAL);
	REQUIRE_OK(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), nullptr,
		&c));
	rio_fc_file *f = fct::open_file(c, e.file("n"));
	put(f, 0, "new");
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("n")) == "new");
}

TEST_CASE("a cache cannot be used by the child of a fork", "[fc-cache]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e, 1 << 20, 0);
	rio_fc_file *f = fct::open_file(c, e.file("p"));
	put(f, 0, "parent");
	test::ChildResult r = test::run_child([&] {
		rio_fc_file *g = nullptr;
		if (rio_fc_pwrite(f, "child", 5, 0) != RIO_EFORKED)
			_exit(1);
		if (rio_fc_open(c, e.file("q").c_str(), O_RDWR | O_CREAT, &g) !=
		    RIO_EFORKED)
			_exit(2);
		if (rio_fc_cache_close(c) != RIO_EFORKED)
			_exit(3);
		_exit(0);
	});
	REQUIRE(r.exited);
	REQUIRE(r.code == 0);
	REQUIRE(get(f, 0, 10) == "parent");
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("p")) == "parent");
	REQUIRE(!test::exists(e.file("q")));
}

TEST_CASE("error texts of the file cache codes", "[fc-cache]")
{
	for (int rc : { RIO_EOUTSIDE, RIO_ECHANGED, RIO_ECORRUPT,
		     RIO_EOTHERDIR, RIO_EFORKED }) {
		REQUIRE(std::string(rio_err_name(rc)).rfind("RIO_E", 0) == 0);
		REQUIRE(std::string(rio_strerror(rc)) != "unknown error");
	}
}
