// SPDX-License-Identifier: BSD-3-Clause
// fc_limits_test.cpp -- the disk's limits: a write past the largest file
// of the backing file system or past RLIMIT_FSIZE fails at the call with
// EFBIG, and a full disk fails the write-back of the files that do not
// fit while the other files go on working and reach the disk
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/vfs.h>

#include "fc_util.hpp"

using fct::Env;
using fct::get;
using fct::put;

namespace {

const long EXT4_MAGIC = 0xEF53;

// A directory on ext4, if the machine has one (the test's own, /tmp,
// /var/tmp); "" if not.
std::string ext4_base()
{
	for (const char *d : { ".", "/tmp", "/var/tmp" }) {
		struct statfs s;
		if (statfs(d, &s) == 0 && s.f_type == EXT4_MAGIC &&
		    access(d, W_OK) == 0)
			return d;
	}
	return "";
}

} // namespace

TEST_CASE("a write past the file system's largest file fails with EFBIG "
	  "at the call, and nothing else is affected", "[fc-limits]")
{
	std::string base = ext4_base();
	if (base.empty()) {
		WARN("skipped: no ext4 directory to test its 16 TiB limit");
		return;
	}
	Env e(base.c_str());
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = fct::open_file(c, e.file("big"));
	rio_fc_file *g = fct::open_file(c, e.file("other"));
	put(f, 0, "head");
	put(g, 0, "other data");
	// ext4 with extents (4 KiB blocks) keeps (2^32 - 1) blocks.
	const uint64_t max = ((1ull << 32) - 1) * 4096;
	REQUIRE_RC(rio_fc_pwrite(f, "x", 1, 1ull << 47), -EFBIG);
	REQUIRE(std::string(rio_errormsg()).find("file system") !=
		std::string::npos);
	REQUIRE_RC(rio_fc_pwrite(f, "xy", 2, max - 1), -EFBIG);
	REQUIRE_RC(rio_fc_truncate(f, max + 1), -EFBIG);
	uint64_t size = 0;
	REQUIRE_OK(rio_fc_size(f, &size));
	REQUIRE(size == 4);
	// Up to the limit is fine, and is written back.
	REQUIRE_OK(rio_fc_pwrite(f, "z", 1, max - 1));
	REQUIRE_OK(rio_fc_sync_all(c));
	struct stat st;
	REQUIRE(stat(e.file("big").c_str(), &st) == 0);
	REQUIRE((uint64_t)st.st_size == max);
	REQUIRE(test::read_file(e.file("other")) == "other data");
	REQUIRE(fct::stats(c).writeback_errors == 0);
	REQUIRE_OK(rio_fc_truncate(f, 4));
	rio_fc_close(f);
	rio_fc_close(g);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("big")) == "head");
}

TEST_CASE("a write past RLIMIT_FSIZE fails with EFBIG at the call",
	"[fc-limits]")
{
	Env e;
	auto r = test::run_child([&] {
		signal(SIGXFSZ, SIG_IGN);
		struct rlimit rl = { 1 << 20, 1 << 20 };
		if (setrlimit(RLIMIT_FSIZE, &rl) != 0)
			_exit(10);
		struct rio_fc_opts o = {};
		o.flags = RIO_FC_CREATE | RIO_FC_NO_THREAD;
		o.pool_size = 1 << 20;
		rio_fc_cache *c = nullptr;
		rio_fc_file *f = nullptr;
		if (rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c) ||
		    rio_fc_open(c, e.file("f").c_str(), O_RDWR | O_CREAT, &f))
			_exit(11);
		if (rio_fc_pwrite(f, "ab", 2, (1 << 20) - 1) != -EFBIG)
			_exit(12);
		if (strstr(rio_errormsg(), "RLIMIT_FSIZE") == nullptr)
			_exit(13);
		if (rio_fc_truncate(f, (1 << 20) + 1) != -EFBIG)
			_exit(14);
		if (rio_fc_pwrite(f, "a", 1, (1 << 20) - 1) != 0 ||
		    rio_fc_cache_close(c) != 0)
			_exit(15);
		_exit(0);
	});
	INFO(r.err);
	REQUIRE(r.exited);
	REQUIRE(r.code == 0);
	struct stat st;
	REQUIRE(stat(e.file("f").c_str(), &st) == 0);
	REQUIRE(st.st_size == 1 << 20);
}

TEST_CASE("a full disk fails only the files that do not fit; the others "
	  "keep working and reach the disk", "[fc-limits]")
{
	Env e;
	// A 256 KiB tmpfs as the cached directory, in a private mount
	// namespace (skipped where mounting is not allowed).
	auto r = test::run_child([&] {
		if (unshare(CLONE_NEWNS) != 0 ||
		    mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) ||
		    mount("tmpfs", e.dir.c_str(), "tmpfs", 0, "size=256k"))
			_exit(77);
		struct rio_fc_opts o = {};
		o.flags = RIO_FC_CREATE | RIO_FC_NO_THREAD;
		o.pool_size = 4 << 20;
		rio_fc_cache *c = nullptr;
		rio_fc_file *big = nullptr, *small = nullptr, *fresh = nullptr;
		if (rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c) ||
		    rio_fc_open(c, e.file("big").c_str(), O_RDWR | O_CREAT,
			    &big) ||
		    rio_fc_open(c, e.file("small").c_str(), O_RDWR | O_CREAT,
			    &small))
			_exit(10);
		std::string data = fct::pattern(512 << 10, 3);
		if (rio_fc_pwrite(big, data.data(), data.size(), 0) ||
		    rio_fc_pwrite(small, "small", 5, 0))
			_exit(11);
		// The big file does not fit: its write-back fails with
		// ENOSPC, the small one is written back all the same.
		if (rio_fc_sync_all(c) != -ENOSPC)
			_exit(12);
		if (test::read_file(e.file("small")) != "small")
			_exit(13);
		// Every file keeps working: reads, writes, a new file.
		std::string back(data.size(), '\0');
		size_t got = 0;
		if (rio_fc_pread(big, &back[0], back.size(), 0, &got) ||
		    got != data.size() || back != data)
			_exit(14);
		if (rio_fc_pwrite(small, "SMALL", 5, 0) ||
		    rio_fc_open(c, e.file("new").c_str(), O_RDWR | O_CREAT,
			    &fresh) ||
		    rio_fc_pwrite(fresh, "new", 3, 0))
			_exit(15);
		if (rio_fc_sync_all(c) != -ENOSPC ||
		    test::read_file(e.file("small")) != "SMALL" ||
		    test::read_file(e.file("new")) != "new")
			_exit(16);
		struct rio_fc_stats s;
		if (rio_fc_stats(c, &s) || s.writeback_errors < 2)
			_exit(17);
		// Space comes back (the file shrinks): it is written back.
		if (rio_fc_truncate(big, 64 << 10) || rio_fc_sync_all(c) ||
		    test::read_file(e.file("big")) != data.substr(0, 64 << 10))
			_exit(18);
		rio_fc_close(big);
		rio_fc_close(small);
		rio_fc_close(fresh);
		if (rio_fc_cache_close(c))
			_exit(19);
		_exit(0);
	});
	if (r.exited && r.code == 77) {
		WARN("skipped: cannot mount a small tmpfs here");
		return;
	}
	INFO(r.err);
	REQUIRE(r.exited);
	REQUIRE(r.code == 0);
}
