// SPDX-License-Identifier: BSD-3-Clause
// rvm_util.hpp -- helpers for the RVM baseline's tests
#pragma once

#include "../common/test_util.hpp"

extern "C" {
#include "rvm_int.h"
}

// RVM_OK(call): RVM_SUCCESS, else print the code's name and the message.
#define RVM_OK(expr)                                                      \
	do {                                                              \
		rvm_return_t rc_ = (expr);                                \
		INFO(#expr << " -> " << rvm_return(rc_) << ": "           \
			   << rvm_errormsg());                            \
		REQUIRE(rc_ == RVM_SUCCESS);                              \
	} while (0)

// RVM_RC(call, code): fails with exactly `code`, with a message.
#define RVM_RC(expr, want)                                                \
	do {                                                              \
		rvm_return_t rc_ = (expr);                                \
		INFO(#expr << " -> " << rvm_return(rc_) << ": "           \
			   << rvm_errormsg());                            \
		REQUIRE(std::string(rvm_return(rc_)) ==                  \
			std::string(rvm_return(want)));                   \
		REQUIRE(std::string(rvm_errormsg()).size() > 0);          \
	} while (0)

namespace rvmtest {

// Options naming `log`, created with a data area of log_size when missing.
struct Opts {
	rvm_options_t o;
	std::string path;
	Opts(const std::string &log, size_t log_size, long trunc = 100)
		: path(log)
	{
		rvm_init_options(&o);
		o.log_dev = const_cast<char *>(path.c_str());
		o.truncate = trunc;
		o.create_log_file = rvm_true;
		o.create_log_size = RVM_MK_OFFSET(0, log_size);
	}
};

// A region of `len` bytes of data file `path` at offset 0.
struct Region {
	rvm_region_t r;
	std::string path;
	Region(const std::string &p, size_t len) : path(p)
	{
		rvm_init_region(&r);
		r.data_dev = const_cast<char *>(path.c_str());
		r.length = len;
	}
	uint64_t *words() { return (uint64_t *)r.vmaddr; }
};

inline rvm_statistics_t stats()
{
	rvm_statistics_t s;
	REQUIRE(rvm_statistics(RVM_STATISTICS_VERSION, &s) == RVM_SUCCESS);
	return s;
}

} // namespace rvmtest
