// SPDX-License-Identifier: BSD-3-Clause
// fc_util.hpp -- helpers for the file-cache tests
#pragma once

#include <fcntl.h>
#include <sys/stat.h>

#include <string>
#include <vector>

#include "../common/test_util.hpp"

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
