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

// The last line that starts with `prefix`N checked, N inconsistent,
// N unique (nested runs of --crash-recovery print their own, indented).
struct Summary {
	long checked, bad, uniq;
};
inline Summary summary(const std::string &out,
	const std::string &prefix = "images: ")
{
	std::regex re("(^|\n)" + prefix + "([0-9]+) checked, ([0-9]+) "
		"inconsistent, ([0-9]+) unique");
	Summary s{ -1, -1, -1 };
	for (auto it = std::sregex_iterator(out.begin(), out.end(), re);
		it != std::sregex_iterator(); ++it)
		s = { std::stol((*it)[2]), std::stol((*it)[3]),
			std::stol((*it)[4]) };
	REQUIRE(s.checked >= 0);
	return s;
}

} // namespace pmt
