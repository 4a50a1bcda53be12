// SPDX-License-Identifier: BSD-3-Clause
// fc_util.hpp -- helpers for the file-cache tests
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "../common/test_util.hpp"
#include "rio_fc.h"

namespace fct {

// A cache pool and its directory in a fresh TempDir.
struct Env {
	test::TempDir tmp;
	std::string pool, dir;
	explicit Env(const char *base = "/dev/shm") : tmp(base)
	{
		pool = tmp / "cache.pool";
		dir = tmp / "files";
		REQUIRE(mkdir(dir.c_str(), 0755) == 0);
	}
	std::string file(const std::string &name) const
	{
		return dir + "/" + name;
	}
};

inline rio_fc_cache *open_cache(const Env &e, size_t pool_size = 4 << 20,
	unsigned flags = RIO_FC_NO_THREAD, unsigned pool_flags = 0,
	unsigned writeback_ms = 0)
{
	struct rio_fc_opts o = {};
	o.flags = flags | RIO_FC_CREATE;
	o.pool_size = pool_size;
	o.pool_flags = pool_flags;
	o.writeback_ms = writeback_ms;
	rio_fc_cache *c = nullptr;
	REQUIRE_OK(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c));
	return c;
}

inline rio_fc_file *open_file(rio_fc_cache *c, const std::string &path,
	int flags = O_RDWR | O_CREAT)
{
	rio_fc_file *f = nullptr;
	REQUIRE_OK(rio_fc_open(c, path.c_str(), flags, &f));
	return f;
}

inline void put(rio_fc_file *f, uint64_t off, const std::string &s)
{
	REQUIRE_OK(rio_fc_pwrite(f, s.data(), s.size(), off));
}

inline std::string get(rio_fc_file *f, uint64_t off, size_t n)
{
	std::string s(n, '\0');
	size_t got = 0;
	REQUIRE_OK(rio_fc_pread(f, &s[0], n, off, &got));
	s.resize(got);
	return s;
}

inline std::string pattern(size_t n, uint64_t seed)
{
	test::Rng r(seed);
	std::string s(n, '\0');
	for (size_t i = 0; i < n; i++)
		s[i] = (char)('a' + r.below(26));
	return s;
}

inline struct rio_fc_stats stats(rio_fc_cache *c)
{
	struct rio_fc_stats s;
	REQUIRE_OK(rio_fc_stats(c, &s));
	return s;
}

} // namespace fct

namespace fct {

// The shim and what must be preloaded before it (the ASan runtime in a
// sanitized build), from the environment meson gives the tests.
inline std::string preload()
{
	const char *shim = getenv("RIO_FS_SHIM");
	const char *extra = getenv("FC_PRELOAD_FIRST");
	REQUIRE(shim != nullptr);
	std::string s = shim;
	if (extra != nullptr && *extra)
		s = std::string(extra) + ":" + s;
	return s;
}

// Start argv with extra environment variables; stdout and stderr go to
// the files given (or are inherited when empty).
inline pid_t spawn(const std::vector<std::string> &argv,
	const std::vector<std::string> &env, const std::string &out = "",
	const std::string &err = "", int keep_fd = -1)
{
	fflush(nullptr);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		for (const auto &kv : env)
			putenv(strdup(kv.c_str()));
		if (!out.empty()) {
			int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
				0644);
			dup2(fd, 1);
			close(fd);
		}
		if (!err.empty()) {
			int fd = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
				0644);
			dup2(fd, 2);
			close(fd);
		}
		for (int fd = 3; fd < 256; fd++)
			if (fd != keep_fd)
				close(fd);
		std::vector<char *> a;
		for (const auto &s : argv)
			a.push_back(strdup(s.c_str()));
		a.push_back(nullptr);
		execv(a[0], a.data());
		_exit(127);
	}
	return pid;
}

inline int wait_status(pid_t pid)
{
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	return st;
}

} // namespace fct
