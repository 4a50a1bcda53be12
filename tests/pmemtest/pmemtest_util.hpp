// SPDX-License-Identifier: BSD-3-Clause
// pmemtest_util.hpp -- running pmemtest from the tests: environment,
// commands with their output, the summary line
#pragma once

#include "../common/test_util.hpp"

#include <cstdio>
#include <regex>
#include <string>

namespace pmt {

// A variable meson sets for the test.
inline std::string env(const char *name)
{
	const char *v = getenv(name);
	REQUIRE(v != nullptr);
	return v;
}

struct Run {
	int code = -1;
	std::string out; // stdout and stderr
};

inline Run sh(const std::string &cmd)
{
	Run r;
	FILE *f = popen((cmd + " 2>&1").c_str(), "r");
	REQUIRE(f != nullptr);
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		r.out.append(buf, n);
	int st = pclose(f);
	r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return r;
}

// images: N checked, N inconsistent, N unique
struct Summary {
	long checked, bad, uniq;
};
inline Summary summary(const std::string &out)
{
	std::smatch m;
	std::regex re("images: ([0-9]+) checked, ([0-9]+) inconsistent, "
		      "([0-9]+) unique");
	REQUIRE(std::regex_search(out, m, re));
	return { std::stol(m[1]), std::stol(m[2]), std::stol(m[3]) };
}

} // namespace pmt
