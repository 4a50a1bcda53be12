// SPDX-License-Identifier: BSD-3-Clause
// pool_test.cpp -- pool create/open/close and every bad-input case
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>

#include "../common/hdr_rules.hpp"
#include "../common/test_util.hpp"
#include "pool_layout.h"

using test::TempDir;

static const size_t POOL = 1 << 20;

static rio_pool *make(const std::string &path, unsigned flags = 0)
{
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_create(path.c_str(), POOL, flags, &p));
	return p;
}

// Rewrite one header field of a closed pool and fix up the checksum, to
// build headers that are well-formed but unacceptable.
template <typename F> static void edit_header(const std::string &path, F fn)
{
	struct rio_pool_hdr h;
	std::string f = test::read_file(path);
	REQUIRE(f.size() >= sizeof(h));
	memcpy(&h, f.data(), sizeof(h));
	fn(h);
	h.checksum = rio_checksum(&h, offsetof(struct rio_pool_hdr, checksum),
		RIO_POOL_CSUM_SEED);
	test::patch_file(path, 0, &h, sizeof(h));
}

// An open that must fail, and must leave the file byte-for-byte as it was.
static void open_fails(const std::string &path, int want, unsigned flags = 0,
	const struct rio_pool_opts *opts = nullptr)
{
	std::string before = test::read_file(path);
	rio_pool *p = nullptr;
	REQUIRE_RC(rio_pool_open_opts(path.c_str(), flags, opts, &p), want);
	REQUIRE(p == nullptr);
	REQUIRE(test::read_file(path) == before);
}

TEST_CASE("create, write, close, reopen", "[pool]")
{
	TempDir d;
	std::string path = d / "p";
	rio_pool *p = make(path);
	REQUIRE(rio_pool_size(p) == POOL - RIO_POOL_HDR_SIZE);
	REQUIRE((char *)rio_pool_base(p) != nullptr);
	uint8_t uuid[16], uuid2[16];
	rio_pool_uuid(p, uuid);
	REQUIRE(std::string(rio_pool_path(p)) == path);
	REQUIRE(rio_pool_image_path(p) == nullptr);
	REQUIRE(!rio_pool_restored(p));
	REQUIRE(rio_pool_error(p) == 0);

	// The user area starts zeroed.
	const char *b = (const char *)rio_pool_base(p);
	for (size_t i = 0; i < rio_pool_size(p); i += 4096)
		REQUIRE(b[i] == 0);
	strcpy((char *)rio_pool_base(p), "hello, rio");
	rio_persist(p, rio_pool_base(p), 11);
	REQUIRE_OK(rio_pool_close(p));

	REQUIRE_OK(rio_pool_open(path.c_str(), 0, &p));
	REQUIRE(std::string((char *)rio_pool_base(p)) == "hello, rio");
	rio_pool_uuid(p, uuid2);
	REQUIRE(memcmp(uuid, uuid2, 16) == 0);
	REQUIRE_OK(rio_pool_close(p));

	// No temporary file is left behind by create.
	REQUIRE(test::list_dir(d.path) == std::vector<std::string>{ "p" });
}

TEST_CASE("layout names are stored and checked", "[pool]")
{
	TempDir d;
	std::string path = d / "p";
	struct rio_pool_opts o = {};
	o.layout = "test.layout";
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_create_opts(path.c_str(), POOL, 0, &o, &p));
	REQUIRE_OK(rio_pool_close(p));
	REQUIRE_OK(rio_pool_open_opts(path.c_str(), 0, &o, &p));
	REQUIRE_OK(rio_pool_close(p));
	o.layout = "other.layout";
	open_fails(path, RIO_ELAYOUT, 0, &o);
	o.layout = "a-name-that-is-much-longer-than-31-bytes";
	REQUIRE_RC(rio_pool_create_opts((d / "q").c_str(), POOL, 0, &o, &p),
		-EINVAL);
}

TEST_CASE("bad input to create", "[pool][badinput]")
{
	TempDir d;
	rio_pool *p = nullptr;
	REQUIRE_RC(rio_pool_create((d / "a").c_str(), 4096, 0, &p), -EINVAL);
	REQUIRE_RC(rio_pool_create((d / "a").c_str(), POOL + 1, 0, &p),
		-EINVAL);
	REQUIRE_RC(rio_pool_create("", POOL, 0, &p), -EINVAL);
	REQUIRE_RC(rio_pool_create((d / "no/such/dir").c_str(), POOL, 0, &p),
		-ENOENT);
	REQUIRE(!test::exists(d / "a"));

	// An existing file is never replaced.
	test::write_file(d / "exists", "precious");
	REQUIRE_RC(rio_pool_create((d / "exists").c_str(), POOL, 0, &p),
		-EEXIST);
	REQUIRE(test::read_file(d / "exists") == "precious");

	struct rio_pool_opts o = {};
	o.addr = (void *)0x600000000123;
	REQUIRE_RC(rio_pool_create_opts((d / "b").c_str(), POOL, 0, &o, &p),
		-EINVAL);
}

TEST_CASE("bad input to open: each case has its own code and changes nothing",
	"[pool][badinput]")
{
	TempDir d;
	std::string path = d / "p";
	rio_pool *p = make(path);
	REQUIRE_OK(rio_pool_close(p));
	std::string good = test::read_file(path);

	SECTION("missing file")
	{
		REQUIRE_RC(rio_pool_open((d / "missing").c_str(), 0, &p),
			-ENOENT);
		REQUIRE(!test::exists(d / "missing"));
	}
	SECTION("file smaller than the header")
	{
		test::write_file(path, std::string(100, 'x'));
		open_fails(path, RIO_ESHORT);
	}
	SECTION("bad magic")
	{
		test::patch_file(path, 0, "X", 1);
		open_fails(path, RIO_EBADMAGIC);
	}
	SECTION("bad checksum")
	{
		char c = good[40] ^ 0x5a; // a byte of the uuid
		test::patch_file(path, 40, &c, 1);
		open_fails(path, RIO_EBADCSUM);
	}
	SECTION("newer major version")
	{
		edit_header(path, [](rio_pool_hdr &h) { h.major = RIO_POOL_MAJOR + 1; });
		open_fails(path, RIO_EVERSION);
	}
	SECTION("unknown incompat feature")
	{
		edit_header(path, [](rio_pool_hdr &h) { h.incompat = 1u << 7; });
		open_fails(path, RIO_EFEATURE);
	}
	SECTION("unknown ro_compat feature: read-only opens only")
	{
		edit_header(path, [](rio_pool_hdr &h) { h.ro_compat = 1u << 3; });
		open_fails(path, RIO_EFEATURE);
		REQUIRE_OK(rio_pool_open(path.c_str(), RIO_RDONLY, &p));
		REQUIRE_OK(rio_pool_close(p));
	}
	SECTION("non-zero reserved bytes")
	{
		edit_header(path, [](rio_pool_hdr &h) { h.reserved[17] = 1; });
		open_fails(path, RIO_EBADHDR);
	}
	SECTION("file larger than the header says")
	{
		int fd = open(path.c_str(), O_WRONLY);
		REQUIRE(ftruncate(fd, (off_t)POOL + 4096) == 0);
		close(fd);
		open_fails(path, RIO_ESIZE);
	}
	SECTION("file shorter than the header says")
	{
		int fd = open(path.c_str(), O_WRONLY);
		REQUIRE(ftruncate(fd, (off_t)POOL - 4096) == 0);
		close(fd);
		open_fails(path, RIO_ESIZE);
	}
	SECTION("a directory")
	{
		REQUIRE_RC(rio_pool_open(d.path.c_str(), 0, &p), -EISDIR);
	}
}

TEST_CASE("header rules: one test per rule, a refusal changes nothing",
	"[pool][badinput][hdr]")
{
	using R = hdr_rules::Rule<rio_pool_hdr>;
	TempDir d;
	std::string path = d / "p";
	REQUIRE_OK(rio_pool_close(make(path)));
	hdr_rules::run(hdr_rules::files({ path }),
		std::vector<R>{
			{ "bad magic", [](rio_pool_hdr &h) { h.magic[3] ^= 0x20; },
				RIO_EBADMAGIC, RIO_EBADMAGIC },
			{ "newer major", [](rio_pool_hdr &h) { h.major++; },
				RIO_EVERSION, RIO_EVERSION },
			{ "older major", [](rio_pool_hdr &h) { h.major--; },
				RIO_EVERSION, RIO_EVERSION },
			{ "newer minor accepted",
				[](rio_pool_hdr &h) { h.minor++; }, 0, 0 },
			{ "unknown incompat refused",
				[](rio_pool_hdr &h) { h.incompat |= 1u << 30; },
				RIO_EFEATURE, RIO_EFEATURE },
			{ "unknown ro_compat: read-only only",
				[](rio_pool_hdr &h) { h.ro_compat |= 1u << 30; },
				RIO_EFEATURE, 0 },
			{ "unknown compat accepted",
				[](rio_pool_hdr &h) { h.compat |= 1u << 30; }, 0,
				0 },
			{ "non-zero reserved refused",
				[](rio_pool_hdr &h) {
					h.reserved[sizeof(h.reserved) - 1] = 1;
				},
				RIO_EBADHDR, RIO_EBADHDR },
		},
		[&](const std::function<void(rio_pool_hdr &)> &fn) {
			edit_header(path, fn);
		},
		[&](bool ro) {
			rio_pool *p = nullptr;
			int rc = rio_pool_open(path.c_str(), ro ? RIO_RDONLY : 0,
				&p);
			if (rc == 0)
				REQUIRE_OK(rio_pool_close(p));
			return rc;
		});
}

TEST_CASE("fixed address: mapped there, never over an existing mapping",
	"[pool][addr]")
{
	TempDir d;
	std::string path = d / "p";
	void *want = (void *)0x5a0000000000ull;
	struct rio_pool_opts o = {};
	o.addr = want;
	rio_pool *p = nullptr;

	REQUIRE_OK(rio_pool_create_opts(path.c_str(), POOL, 0, &o, &p));
	REQUIRE(rio_pool_base(p) == (char *)want + RIO_POOL_HDR_SIZE);
	*(int *)rio_pool_base(p) = 42;

	// The same range a second time: refused, first mapping untouched.
	rio_pool *q = nullptr;
	REQUIRE_RC(rio_pool_open_opts(path.c_str(), 0, &o, &q), RIO_EADDRINUSE);
	REQUIRE(q == nullptr);
	REQUIRE(*(int *)rio_pool_base(p) == 42);
	REQUIRE_OK(rio_pool_close(p));

	// Somebody else's mapping overlapping the end of the range.
	char *other = (char *)mmap((char *)want + POOL - 4096, 4096,
		PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	REQUIRE(other == (char *)want + POOL - 4096);
	strcpy(other, "not yours");
	open_fails(path, RIO_EADDRINUSE, 0, &o);
	REQUIRE(std::string(other) == "not yours");
	munmap(other, 4096);

	// Free again: the pool maps, with its data.
	REQUIRE_OK(rio_pool_open_opts(path.c_str(), 0, &o, &p));
	REQUIRE(*(int *)rio_pool_base(p) == 42);
	REQUIRE_OK(rio_pool_close(p));
}

TEST_CASE("read-only file system: clear error, nothing modified",
	"[pool][badinput][rofs]")
{
	TempDir d;
	// A private mount namespace keeps the read-only mount from leaking.
	auto r = test::run_child([&] {
		if (unshare(CLONE_NEWNS) != 0 ||
		    mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr))
			_exit(77);
		if (mount("tmpfs", d.path.c_str(), "tmpfs", 0, "size=4m"))
			_exit(77);
		std::string path = d.path + "/p";
		rio_pool *p = nullptr;
		if (rio_pool_create(path.c_str(), POOL, 0, &p) != 0)
			_exit(10);
		rio_pool_close(p);
		if (mount(nullptr, d.path.c_str(), nullptr,
			    MS_REMOUNT | MS_RDONLY, nullptr))
			_exit(77);
		std::string before = test::read_file(path);
		if (rio_pool_create((d.path + "/q").c_str(), POOL, 0, &p) !=
		    -EROFS)
			_exit(11);
		if (rio_pool_open(path.c_str(), 0, &p) != -EROFS)
			_exit(12);
		if (strstr(rio_errormsg(), path.c_str()) == nullptr)
			_exit(13);
		if (test::read_file(path) != before)
			_exit(14);
		// Read-only opens work on a read-only file system.
		if (rio_pool_open(path.c_str(), RIO_RDONLY, &p) != 0)
			_exit(15);
		rio_pool_close(p);
		_exit(0);
	});
	if (r.exited && r.code == 77) {
		WARN("skipped: cannot mount a read-only tmpfs here");
		return;
	}
	INFO(r.err);
	REQUIRE(r.exited);
	REQUIRE(r.code == 0);
}

TEST_CASE("error codes have names, texts and messages", "[pool][errors]")
{
	REQUIRE(std::string(rio_err_name(RIO_EBADMAGIC)) == "RIO_EBADMAGIC");
	REQUIRE(std::string(rio_err_name(-ENOENT)) == "ENOENT");
	REQUIRE(std::string(rio_err_name(0)) == "OK");
	REQUIRE(std::string(rio_strerror(RIO_EVERSION)).find("newer") !=
		std::string::npos);
	REQUIRE(std::string(rio_strerror(-EROFS)) == "Read-only file system");
	REQUIRE(rio_seterr(-EIO, "context %d", 7) == -EIO);
	REQUIRE(std::string(rio_errormsg()) == "context 7");
}

TEST_CASE("a message may wrap the previous one", "[pool][errors]")
{
	/* The libraries above librio add context to a lower layer's
	 * message by passing rio_errormsg() back in as an argument. */
	rio_seterr(RIO_ELAYOUT, "layout \"%s\" expected", "vista-log");
	REQUIRE(rio_seterr(-EINVAL, "%s is not a vista log: %s", "/x/log",
			rio_errormsg()) == -EINVAL);
	REQUIRE(std::string(rio_errormsg()) ==
		"/x/log is not a vista log: layout \"vista-log\" expected");
	rio_seterr(-EIO, "inner");
	rio_seterr(-EIO, "%s; %s", rio_errormsg(), rio_errormsg());
	REQUIRE(std::string(rio_errormsg()) == "inner; inner");
}
