// SPDX-License-Identifier: BSD-3-Clause
// fs_shim_test.cpp -- an ordinary program (fs_probe) under librio-fs.so:
// what goes through the cache, what passes through, what is refused
#include <sys/wait.h>

#include <map>

#include "fc_util.hpp"

using fct::Env;

static std::map<std::string, uint64_t> read_stats(const std::string &path)
{
	std::map<std::string, uint64_t> m;
	std::string s = test::read_file(path), k;
	size_t pos = 0;
	while (pos < s.size()) {
		size_t eol = s.find('\n', pos);
		std::string line = s.substr(pos, eol - pos);
		size_t sp = line.find(' ');
		if (sp != std::string::npos)
			m[line.substr(0, sp)] = strtoull(line.c_str() + sp + 1,
				nullptr, 10);
		pos = eol == std::string::npos ? s.size() : eol + 1;
	}
	return m;
}

TEST_CASE("an unmodified program through the shim", "[fs-shim]")
{
	Env e;
	std::string other = e.tmp / "other";
	REQUIRE(mkdir(other.c_str(), 0755) == 0);
	pid_t pid = fct::spawn({ getenv("FS_PROBE"), e.dir, other },
		{ "LD_PRELOAD=" + fct::preload(), "RIO_FS_DIR=" + e.dir,
			"RIO_FS_POOL=" + e.pool, "RIO_FS_POOL_SIZE=2M",
			"RIO_FS_WRITEBACK_MS=600000",
			"RIO_FS_STATS=" + (e.tmp / "stats") },
		e.tmp / "out", e.tmp / "err");
	int st = fct::wait_status(pid);
	INFO("stdout: " << test::read_file(e.tmp / "out"));
	INFO("stderr: " << test::read_file(e.tmp / "err"));
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(test::read_file(e.tmp / "out").find("checks passed") !=
		std::string::npos);
	// Refusals are loud.
	std::string err = test::read_file(e.tmp / "err");
	REQUIRE(err.find("librio-fs: mmap") != std::string::npos);
	REQUIRE(err.find("librio-fs: link") != std::string::npos);
	// At exit the cache wrote everything back and closed.
	REQUIRE(test::read_file(e.file("a")) == "abc");
	REQUIRE(test::read_file(e.file("s.txt")) == "line 42\nmore\n");
	REQUIRE(test::read_file(e.file("sub/f")) == "sub");
	REQUIRE(test::read_file(e.file("forked")) == "parent");
	REQUIRE(!test::exists(e.file("m3")));
	REQUIRE(!test::exists(e.file("other")));
	REQUIRE(test::read_file(other + "/copy") == "xx");
	auto s = read_stats(e.tmp / "stats");
	REQUIRE(s["fsyncs"] >= 2);
	REQUIRE(s["writes"] >= 10);
	// The pool was closed cleanly: no recovery on the next open.
	rio_fc_cache *c = nullptr;
	REQUIRE_OK(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), nullptr,
		&c));
	REQUIRE(!fct::stats(c).recovered);
	REQUIRE_OK(rio_fc_cache_close(c));
}

TEST_CASE("the shim without RIO_FS_DIR passes everything through",
	"[fs-shim]")
{
	Env e;
	pid_t pid = fct::spawn({ "/bin/sh", "-c", "echo plain > " + e.file("p") },
		{ "LD_PRELOAD=" + fct::preload(), "RIO_FS_DIR=" },
		e.tmp / "out", e.tmp / "err");
	int st = fct::wait_status(pid);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(test::read_file(e.file("p")) == "plain\n");
	REQUIRE(!test::exists(e.pool));
	REQUIRE(test::read_file(e.tmp / "err").empty());
}

TEST_CASE("a misconfigured shim fails loudly", "[fs-shim]")
{
	Env e;
	// The pool inside the cached directory.
	pid_t pid = fct::spawn({ "/bin/sh", "-c", "echo x > " + e.file("p") },
		{ "LD_PRELOAD=" + fct::preload(), "RIO_FS_DIR=" + e.dir,
			"RIO_FS_POOL=" + e.file("pool") },
		e.tmp / "out", e.tmp / "err");
	int st = fct::wait_status(pid);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) != 0);
	REQUIRE(!test::exists(e.file("p")));
	std::string err = test::read_file(e.tmp / "err");
	REQUIRE(err.find("must not be below") != std::string::npos);
	// A second process while the first holds the cache.
	pid = fct::spawn({ "/bin/sh", "-c",
				 "echo one > " + e.file("q") + "; cat " + e.file("q") },
		{ "LD_PRELOAD=" + fct::preload(), "RIO_FS_DIR=" + e.dir,
			"RIO_FS_POOL=" + e.pool },
		e.tmp / "out", e.tmp / "err");
	st = fct::wait_status(pid);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) != 0); // cat cannot have the cache
	REQUIRE(test::read_file(e.tmp / "err").find("open in another process") !=
		std::string::npos);
	// (The shell ends with _exit: its write stays in the pool, durable,
	// for the next process to write back.)
	// With RIO_FS_RELEASE=idle, processes take turns.
	pid = fct::spawn({ "/bin/sh", "-c",
				 "echo two >> " + e.file("q") + "; cat " + e.file("q") },
		{ "LD_PRELOAD=" + fct::preload(), "RIO_FS_DIR=" + e.dir,
			"RIO_FS_POOL=" + e.pool, "RIO_FS_RELEASE=idle" },
		e.tmp / "out", e.tmp / "err");
	st = fct::wait_status(pid);
	INFO(test::read_file(e.tmp / "err"));
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(test::read_file(e.tmp / "out") == "one\ntwo\n");
}

TEST_CASE("the safe-save pattern, many times: a temporary file renamed over "
	  "the target, in the same directory or across, the target open",
	"[fs-shim]")
{
	// With write-back passes every millisecond, so that the write-back
	// thread is settling the files that rename drops, again and again.
	Env e;
	pid_t pid = fct::spawn({ getenv("FC_SAVE_LOOP"), e.dir, "5000" },
		{ "LD_PRELOAD=" + fct::preload(), "RIO_FS_DIR=" + e.dir,
			"RIO_FS_POOL=" + e.pool, "RIO_FS_POOL_SIZE=2M",
			"RIO_FS_WRITEBACK_MS=1" },
		e.tmp / "out", e.tmp / "err");
	int st = fct::wait_status(pid);
	INFO("stderr: " << test::read_file(e.tmp / "err"));
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(test::read_file(e.tmp / "out") == "5000 saves\n");
	REQUIRE(test::read_file(e.file("target")).size() == 5000 * 7919 % 9000 + 1);
	REQUIRE(!test::exists(e.file("target.tmp")));
	REQUIRE(!test::exists(e.file("sub/target.tmp")));
}

TEST_CASE("a bad number in the environment is an error, not a default",
	"[fs-shim]")
{
	Env e;
	for (const char *bad : { "RIO_FS_POOL_SIZE=garbage",
		     "RIO_FS_POOL_SIZE=64Q", "RIO_FS_POOL_SIZE=",
		     "RIO_FS_POOL_SIZE=-1M", "RIO_FS_POOL_SIZE=0",
		     "RIO_FS_POOL_SIZE=99999999999999999999",
		     "RIO_FS_POOL_SIZE=16777216T", "RIO_FS_WRITEBACK_MS=soon",
		     "RIO_FS_DIRTY_PCT=150" }) {
		INFO(bad);
		pid_t pid = fct::spawn({ "/bin/sh", "-c",
					 "echo x > " + e.file("p") },
			{ "LD_PRELOAD=" + fct::preload(), "RIO_FS_DIR=" + e.dir,
				"RIO_FS_POOL=" + e.pool, bad },
			e.tmp / "out", e.tmp / "err");
		int st = fct::wait_status(pid);
		std::string err = test::read_file(e.tmp / "err");
		INFO(err);
		// The program fails cleanly, says why, and nothing is made.
		REQUIRE(WIFEXITED(st));
		REQUIRE(WEXITSTATUS(st) != 0);
		std::string var = std::string(bad).substr(0,
			std::string(bad).find('=') + 1);
		REQUIRE(err.find("librio-fs: " + std::string(bad) + ": not a") !=
			std::string::npos);
		REQUIRE(!test::exists(e.pool));
		REQUIRE(!test::exists(e.file("p")));
	}
	// A good size with a suffix still works.
	pid_t pid = fct::spawn({ "/bin/sh", "-c", "echo x > " + e.file("p") },
		{ "LD_PRELOAD=" + fct::preload(), "RIO_FS_DIR=" + e.dir,
			"RIO_FS_POOL=" + e.pool, "RIO_FS_POOL_SIZE=1m" },
		e.tmp / "out", e.tmp / "err");
	REQUIRE(WEXITSTATUS(fct::wait_status(pid)) == 0);
	struct stat st;
	REQUIRE(stat(e.pool.c_str(), &st) == 0);
	REQUIRE(st.st_size == 1 << 20);
}

static time_t mtime_of(const std::string &path)
{
	struct stat st;
	REQUIRE(stat(path.c_str(), &st) == 0);
	return st.st_mtime;
}

TEST_CASE("times set by tar -x and cp -p last: after write-back, after a "
	  "kill -9 and a restart", "[fs-shim]")
{
	Env e;
	std::string src = e.tmp / "src";
	REQUIRE(mkdir(src.c_str(), 0755) == 0);
	const time_t T1 = 1000000000, T2 = 1100000000;
	test::write_file(src + "/a", fct::pattern(10000, 1));
	test::write_file(src + "/b", "small");
	test::write_file(src + "/c", fct::pattern(5000, 2));
	struct timespec ts[2] = { { T1, 0 }, { T1, 0 } };
	REQUIRE(utimensat(AT_FDCWD, (src + "/a").c_str(), ts, 0) == 0);
	REQUIRE(utimensat(AT_FDCWD, (src + "/b").c_str(), ts, 0) == 0);
	ts[0].tv_sec = ts[1].tv_sec = T2;
	REQUIRE(utimensat(AT_FDCWD, (src + "/c").c_str(), ts, 0) == 0);
	std::string tarball = e.tmp / "t.tar";
	REQUIRE(system(("tar -C " + src + " -cf " + tarball + " a b").c_str()) ==
		0);
	auto shim = [&](const std::string &cmd, const char *wb_ms) {
		pid_t pid = fct::spawn({ "/bin/sh", "-c", cmd },
			{ "LD_PRELOAD=" + fct::preload(), "RIO_FS_DIR=" + e.dir,
				"RIO_FS_POOL=" + e.pool,
				std::string("RIO_FS_WRITEBACK_MS=") + wb_ms,
				"RIO_FS_STATS=" + (e.tmp / "stats"),
				// tar and cp do not free what they hold at
				// exit: under a sanitizer build their own
				// leaks are not this test's business
				"ASAN_OPTIONS=detect_leaks=0" },
			e.tmp / "out", e.tmp / "err");
		return fct::wait_status(pid);
	};
	// Extracted and copied, then written back at exit (and by a busy
	// write-back thread): the times are those set.
	int st = shim("tar -C " + e.dir + " -xf " + tarball + " && cp -p " +
			src + "/c " + e.file("c") + " && mkdir " + e.file("d") +
			" && tar -C " + e.file("d") + " -xf " + tarball,
		"1");
	INFO(test::read_file(e.tmp / "err"));
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(test::read_file(e.file("a")) == test::read_file(src + "/a"));
	REQUIRE(test::read_file(e.file("c")) == test::read_file(src + "/c"));
	REQUIRE(mtime_of(e.file("a")) == T1);
	REQUIRE(mtime_of(e.file("b")) == T1);
	REQUIRE(mtime_of(e.file("c")) == T2);
	REQUIRE(mtime_of(e.file("d/a")) == T1);
	// Killed with everything still in the cache (no write-back before
	// the kill but the one the times need): the restart recovers, and
	// the times stay.
	REQUIRE(unlink(e.file("a").c_str()) == 0);
	REQUIRE(unlink(e.file("c").c_str()) == 0);
	st = shim("tar -C " + e.dir + " -xf " + tarball + " && cp -p " + src +
			"/c " + e.file("c") + " && echo more >> " +
			e.file("b") + " && kill -9 $$",
		"600000");
	REQUIRE(WIFSIGNALED(st));
	REQUIRE(mtime_of(e.file("a")) == T1);
	REQUIRE(mtime_of(e.file("c")) == T2);
	st = shim("cat " + e.file("b") + " " + e.file("a") + " " + e.file("c"),
		"600000");
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);
	REQUIRE(test::read_file(e.tmp / "out") == "smallmore\n" +
			test::read_file(src + "/a") + test::read_file(src + "/c"));
	REQUIRE(read_stats(e.tmp / "stats")["conflicts"] == 0);
	REQUIRE(read_stats(e.tmp / "stats").count("writeback_errors") == 1);
	REQUIRE(read_stats(e.tmp / "stats")["writeback_errors"] == 0);
	REQUIRE(read_stats(e.tmp / "stats")["recovered"] == 1);
	REQUIRE(mtime_of(e.file("a")) == T1);
	REQUIRE(mtime_of(e.file("c")) == T2);
	REQUIRE(mtime_of(e.file("b")) != T1); // written after: the time moves
	REQUIRE(test::read_file(e.file("a")) == test::read_file(src + "/a"));
}
