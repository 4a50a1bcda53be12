// SPDX-License-Identifier: BSD-3-Clause
// fc_recover_test.cpp -- crash recovery at chosen points: kill -9, the
// memory copy lost (restore from the safe-sync image), a write-back
// interrupted, a file changed behind the cache, a failing disk
#include <map>

#include "fc_int.h"
#include "fc_util.hpp"
#include "rio_testhook.h"

using fct::Env;
using fct::get;
using fct::put;

static rio_fc_cache *child_cache(const Env &e, unsigned pool_flags = 0)
{
	struct rio_fc_opts o = {};
	o.flags = RIO_FC_CREATE | RIO_FC_NO_THREAD;
	o.pool_size = 1 << 20;
	o.pool_flags = pool_flags;
	rio_fc_cache *c = nullptr;
	if (rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c))
		_exit(100);
	return c;
}

static void cput(rio_fc_file *f, uint64_t off, const std::string &s)
{
	if (rio_fc_pwrite(f, s.data(), s.size(), off))
		_exit(101);
}

static rio_fc_file *copen(rio_fc_cache *c, const std::string &p)
{
	rio_fc_file *f = nullptr;
	if (rio_fc_open(c, p.c_str(), O_RDWR | O_CREAT, &f))
		_exit(102);
	return f;
}

// A child writes `data` to `name` through the cache and is killed.
static void killed_after_write(const Env &e, const std::string &name,
	const std::string &data)
{
	test::ChildResult r = test::run_child([&] {
		rio_fc_cache *c = child_cache(e);
		rio_fc_file *f = copen(c, e.file(name));
		cput(f, 0, data);
		raise(SIGKILL);
	});
	REQUIRE(r.signal == SIGKILL);
}

static rio_fc_cache *reopen(const Env &e)
{
	rio_fc_cache *c = nullptr;
	REQUIRE_OK(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), nullptr,
		&c));
	return c;
}

TEST_CASE("kill -9: every acknowledged write, truncate and unlink survives",
	"[fc-recover]")
{
	Env e;
	std::string a = fct::pattern(20000, 1), b = fct::pattern(9000, 2);
	test::write_file(e.file("old"), fct::pattern(30000, 3));
	test::ChildResult r = test::run_child([&] {
		rio_fc_cache *c = child_cache(e);
		rio_fc_file *fa = copen(c, e.file("a"));
		rio_fc_file *fb = copen(c, e.file("b"));
		rio_fc_file *fo = copen(c, e.file("old"));
		rio_fc_file *fu = copen(c, e.file("u"));
		cput(fa, 0, a);
		cput(fb, 0, b);
		cput(fb, 3000, "overwritten");
		cput(fo, 100, "patch");
		if (rio_fc_truncate(fo, 5000))
			_exit(103);
		cput(fu, 0, "to be removed");
		rio_fc_close(fu);
		if (rio_fc_unlink(c, e.file("u").c_str()))
			_exit(104);
		raise(SIGKILL);
	});
	REQUIRE(r.signal == SIGKILL);
	// The cache holds it all; the disk has none of it yet.
	REQUIRE(test::read_file(e.file("a")).empty());
	rio_fc_cache *c = reopen(e);
	struct rio_fc_stats s = fct::stats(c);
	REQUIRE(s.recovered);
	REQUIRE(s.recovered_files == 3);
	REQUIRE(s.recovered_blocks >= 5 + 3 + 1);
	REQUIRE(s.blocks_dirty == 0);
	REQUIRE(s.blocks_clean == 0); // cold after a crash
	REQUIRE_OK(rio_fc_cache_close(c));
	b.replace(3000, 11, "overwritten");
	std::string old = fct::pattern(30000, 3).substr(0, 5000);
	old.replace(100, 5, "patch");
	REQUIRE(test::read_file(e.file("a")) == a);
	REQUIRE(test::read_file(e.file("b")) == b);
	REQUIRE(test::read_file(e.file("old")) == old);
	REQUIRE(!test::exists(e.file("u")));
}

TEST_CASE("recovery recreates a file whose creation the disk lost",
	"[fc-recover]")
{
	Env e;
	killed_after_write(e, "n", "new file");
	// The directory entry never reached the disk (power loss).
	REQUIRE(unlink(e.file("n").c_str()) == 0);
	rio_fc_cache *c = reopen(e);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("n")) == "new file");
}

TEST_CASE("the memory copy lost: the safe-sync image is replayed",
	"[fc-recover]")
{
	Env e;
	std::string data = fct::pattern(12000, 4);
	test::ChildResult r = test::run_child([&] {
		rio_fc_cache *c = child_cache(e, RIO_SAFE_SYNC);
		rio_fc_file *f = copen(c, e.file("img"));
		cput(f, 0, data);
		// A fatal signal: librio safe-syncs the pool, then dies.
		abort();
	});
	REQUIRE(r.signal == SIGABRT);
	REQUIRE(unlink(e.pool.c_str()) == 0); // the memory is gone
	REQUIRE(test::exists(e.pool + ".img"));
	rio_fc_cache *c = reopen(e);
	REQUIRE(rio_pool_restored(rio_fc_pool(c)));
	REQUIRE(fct::stats(c).recovered_blocks == 3);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("img")) == data);
}

TEST_CASE("an image older than the disk does not overwrite newer data",
	"[fc-recover]")
{
	Env e;
	test::ChildResult r = test::run_child([&] {
		rio_fc_cache *c = child_cache(e, RIO_SAFE_SYNC);
		rio_fc_file *f = copen(c, e.file("v"));
		cput(f, 0, "version 1");
		if (rio_safe_sync(rio_fc_pool(c), nullptr)) // image: v1 dirty
			_exit(105);
		if (rio_fc_sync_all(c))
			_exit(106);
		cput(f, 0, "version 2");
		if (rio_fc_sync_all(c)) // disk: v2
			_exit(107);
		raise(SIGKILL); // no image of this
	});
	REQUIRE(r.signal == SIGKILL);
	REQUIRE(test::read_file(e.file("v")) == "version 2");
	REQUIRE(unlink(e.pool.c_str()) == 0);
	rio_fc_cache *c = reopen(e);
	REQUIRE(fct::stats(c).conflicts == 1);
	REQUIRE(test::read_file(e.file("v")) == "version 2");
	rio_fc_file *f = nullptr;
	REQUIRE_RC(rio_fc_open(c, e.file("v").c_str(), O_RDONLY, &f),
		RIO_ECHANGED);
	REQUIRE_RC(rio_fc_sync_all(c), RIO_ECHANGED);
	REQUIRE_OK(rio_fc_forget(c, e.file("v").c_str()));
	f = fct::open_file(c, e.file("v"), O_RDONLY);
	REQUIRE(get(f, 0, 100) == "version 2");
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
}

TEST_CASE("a file changed behind the cache is not overwritten",
	"[fc-recover]")
{
	Env e;
	killed_after_write(e, "x", "cached");
	test::write_file(e.file("x"), "written by someone else");
	rio_fc_cache *c = reopen(e);
	REQUIRE(fct::stats(c).conflicts == 1);
	REQUIRE(fct::stats(c).blocks_dirty == 1); // kept, not lost
	REQUIRE(test::read_file(e.file("x")) == "written by someone else");
	REQUIRE_RC(rio_fc_cache_close(c), RIO_ECHANGED);
	// Still there at the next open, until forgotten.
	c = reopen(e);
	REQUIRE(fct::stats(c).conflicts == 1);
	REQUIRE_OK(rio_fc_forget(c, e.file("x").c_str()));
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("x")) == "written by someone else");
}

// Fault injection: the disk fails in the ways write-back must survive.
static int fail_errno;
static ssize_t failing_pwrite(int, const void *, size_t, off_t)
{
	errno = fail_errno;
	return -1;
}
static int failing_fdatasync(int)
{
	errno = EIO;
	return -1;
}

// The entries a test swaps, put back by restore() and at scope exit.
struct SysopsGuard {
	rio_sys_pwrite_fn pwrite = rio_testhook_pwrite(nullptr);
	rio_sys_fdatasync_fn fdatasync = rio_testhook_fdatasync(nullptr);
	void restore()
	{
		rio_testhook_pwrite(pwrite);
		rio_testhook_fdatasync(fdatasync);
	}
	~SysopsGuard() { restore(); }
};

TEST_CASE("a write-back interrupted by the crash is written again",
	"[fc-recover]")
{
	Env e;
	test::write_file(e.file("w"), std::string(8192, 'o'));
	test::ChildResult r = test::run_child([&] {
		rio_fc_cache *c = child_cache(e);
		rio_fc_file *f = copen(c, e.file("w"));
		cput(f, 0, std::string(8192, 'n'));
		// The disk takes the data, then fdatasync fails and we die:
		// the disk copy changed, and the record says why.
		rio_testhook_fdatasync(failing_fdatasync);
		if (rio_fc_sync_all(c) != -EIO)
			_exit(108);
		raise(SIGKILL);
	});
	REQUIRE(r.signal == SIGKILL);
	rio_fc_cache *c = reopen(e);
	REQUIRE(fct::stats(c).conflicts == 0);
	REQUIRE(fct::stats(c).recovered_blocks == 2);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("w")) == std::string(8192, 'n'));
}

TEST_CASE("a failing disk: write-back errors keep the data", "[fc-recover]")
{
	Env e;
	SysopsGuard g;
	rio_fc_cache *c = fct::open_cache(e, 512 << 10);
	rio_fc_file *f = fct::open_file(c, e.file("full"));
	std::string data;

	fail_errno = ENOSPC;
	rio_testhook_pwrite(failing_pwrite);
	// Write until the cache is full of dirty blocks and write-back
	// cannot empty it: the write that cannot be taken fails, cleanly.
	int rc = 0;
	for (int i = 0; i < 200 && rc == 0; i++) {
		std::string s = fct::pattern(4096, (uint64_t)i);
		rc = rio_fc_pwrite(f, s.data(), s.size(), data.size());
		if (rc == 0)
			data += s;
	}
	INFO(rio_errormsg());
	REQUIRE(rc == -ENOSPC);
	REQUIRE(data.size() >= 16 * 4096);
	REQUIRE(fct::stats(c).writeback_errors > 0);
	REQUIRE(get(f, 0, data.size() + 10) == data);
	REQUIRE_RC(rio_fc_sync_all(c), -ENOSPC);
	// The disk recovers: everything acknowledged goes to it.
	g.restore();
	REQUIRE_OK(rio_fc_sync_all(c));
	REQUIRE(test::read_file(e.file("full")) == data);
	// And an EIO from fdatasync is not taken for success later.
	put(f, 0, "after");
	rio_testhook_fdatasync(failing_fdatasync);
	REQUIRE_RC(rio_fc_sync_all(c), -EIO);
	g.restore();
	REQUIRE(fct::stats(c).blocks_dirty == 1);
	REQUIRE_OK(rio_fc_sync_all(c));
	REQUIRE(test::read_file(e.file("full")).substr(0, 5) == "after");
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
}

// Fails only the descriptors of files whose name ends with fail_name.
static std::string fail_name;
static ssize_t failing_pwrite_of(int fd, const void *p, size_t n, off_t off)
{
	char link[64], path[4096];
	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	ssize_t k = readlink(link, path, sizeof(path) - 1);
	path[k < 0 ? 0 : k] = '\0';
	std::string s = path;
	if (s.size() >= fail_name.size() &&
	    s.compare(s.size() - fail_name.size(), fail_name.size(),
		    fail_name) == 0) {
		errno = fail_errno;
		return -1;
	}
	return pwrite(fd, p, n, off);
}

TEST_CASE("a failing file at recovery: the cache opens, the others are "
	  "recovered, its data is kept and retried", "[fc-recover]")
{
	Env e;
	test::ChildResult r = test::run_child([&] {
		rio_fc_cache *c = child_cache(e);
		cput(copen(c, e.file("r")), 0, "replay me");
		cput(copen(c, e.file("ok")), 0, "other file");
		raise(SIGKILL);
	});
	REQUIRE(r.signal == SIGKILL);
	SysopsGuard g;
	fail_errno = EIO;
	fail_name = "/r";
	rio_testhook_pwrite(failing_pwrite_of);
	struct rio_fc_opts o = {};
	o.flags = RIO_FC_NO_THREAD;
	rio_fc_cache *c = nullptr;
	REQUIRE_OK(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c));
	// The other file is on disk, the failing one's block still cached.
	REQUIRE(test::read_file(e.file("ok")) == "other file");
	REQUIRE(fct::stats(c).blocks_dirty == 1);
	REQUIRE(fct::stats(c).writeback_errors >= 1);
	// Both files work through the cache meanwhile.
	rio_fc_file *f = fct::open_file(c, e.file("r"));
	REQUIRE(get(f, 0, 100) == "replay me");
	rio_fc_file *k = fct::open_file(c, e.file("ok"));
	put(k, 0, "OTHER");
	REQUIRE_RC(rio_fc_sync_all(c), -EIO);
	REQUIRE(test::read_file(e.file("ok")) == "OTHER file");
	// Closed with the error: the data stays in the pool for the next
	// open, which recovers it once the disk works.
	rio_fc_close(f);
	rio_fc_close(k);
	REQUIRE_RC(rio_fc_cache_close(c), -EIO);
	g.restore();
	c = reopen(e);
	REQUIRE(fct::stats(c).recovered_blocks == 1);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("r")) == "replay me");
}

TEST_CASE("riotool fc lists the files not written back and the failing "
	  "write-backs", "[fc-recover]")
{
	const char *riotool = getenv("RIOTOOL");
	REQUIRE(riotool != nullptr);
	Env e;
	test::ChildResult r = test::run_child([&] {
		rio_fc_cache *c = child_cache(e);
		cput(copen(c, e.file("r")), 0, "replay me");
		cput(copen(c, e.file("ok")), 0, "other file");
		fail_errno = ENOSPC;
		fail_name = "/r";
		rio_testhook_pwrite(failing_pwrite_of);
		if (rio_fc_sync_all(c) != -ENOSPC)
			_exit(108);
		raise(SIGKILL);
	});
	REQUIRE(r.signal == SIGKILL);
	std::string out = e.tmp / "report";
	REQUIRE(system((std::string(riotool) + " fc " + e.pool + " > " + out)
			.c_str()) == 0);
	std::string rep = test::read_file(out);
	INFO(rep);
	REQUIRE(rep.find("not closed cleanly") != std::string::npos);
	REQUIRE(rep.find("file        r: live, size 9, 1 blocks not written "
			 "back; write-back incomplete") != std::string::npos);
	REQUIRE(rep.find("file        ok: live, size 10, 0 blocks not written "
			 "back\n") != std::string::npos);
	REQUIRE(rep.find("summary     1 files with blocks not written back, 1 "
			 "with a write-back incomplete") != std::string::npos);
	// Recovered (the disk works again): nothing left to report.
	rio_fc_cache *c = reopen(e);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(system((std::string(riotool) + " fc " + e.pool + " > " + out)
			.c_str()) == 0);
	rep = test::read_file(out);
	REQUIRE(rep.find("closed cleanly") != std::string::npos);
	REQUIRE(rep.find("summary     0 files with blocks not written back, 0 "
			 "with a write-back incomplete") != std::string::npos);
	REQUIRE(test::read_file(e.file("r")) == "replay me");
	// Not a file cache: an error.
	REQUIRE(system((std::string(riotool) + " fc " + e.file("r") +
		" 2> /dev/null").c_str()) != 0);
}
