// SPDX-License-Identifier: BSD-3-Clause
// vista_test.hpp -- helpers shared by the libvista test programs
#pragma once

#include "../common/test_util.hpp"

#include <sys/mman.h>

#include <atomic>
#include <map>
#include <set>
#include <thread>

#include "vista.h"

// Like REQUIRE_OK / REQUIRE_RC, but naming VISTA_E* codes too.
#define VREQUIRE_OK(expr) \
	TEST_REQUIRE_OK(vista_err_name, vista_errormsg, expr)
#define VREQUIRE_RC(expr, want) \
	TEST_REQUIRE_RC(vista_err_name, vista_errormsg, expr, want)

// In a child process, a failing call prints its message and exits 10.
#define CHILD_OK(expr)                                                   \
	do {                                                             \
		if ((expr) != 0) {                                       \
			fprintf(stderr, "%s: %s\n", #expr, vista_errormsg()); \
			_exit(10);                                       \
		}                                                        \
	} while (0)

namespace vt {

// A child that runs body() and dies without committing or closing.
inline void crash_in_child(const std::function<void()> &body)
{
	auto r = test::run_child([&] {
		body();
		_exit(0);
	});
	INFO(r.err);
	REQUIRE(r.exited);
	REQUIRE(r.code == 0);
}

// Fixed addresses for test segments: far from where the kernel puts
// libraries and anonymous mappings.  Each slot has 4 GiB of room.
inline void *addr(int slot)
{
	return (void *)(uintptr_t)(0x5e0000000000ull + ((uint64_t)slot << 32));
}

// A directory with a log; opens instances on it.
struct Env {
	test::TempDir dir;
	std::string log;
	unsigned lanes = 4;
	size_t log_size = 4 << 20;
	unsigned rio_flags = 0;

	explicit Env(unsigned flags = 0) : log(dir / "log"), rio_flags(flags) {}

	// vista_init on this log, whatever it returns.
	int init(vista **v) const
	{
		struct vista_opts o = {};
		o.log_path = log.c_str();
		o.log_size = log_size;
		o.lanes = lanes;
		o.rio_flags = rio_flags;
		*v = nullptr;
		return vista_init(&o, v);
	}

	vista *open(int want = 0)
	{
		vista *v = nullptr;
		int rc = init(&v);
		INFO("vista_init -> " << vista_err_name(rc) << ": "
				      << vista_errormsg());
		REQUIRE(rc == want);
		return v;
	}

	std::string seg(const std::string &name) const { return dir / name; }
};

inline vista_segment *map(vista *v, const std::string &path, int slot,
	size_t size = 1 << 20)
{
	vista_segment *s = nullptr;
	VREQUIRE_OK(vista_map(v, path.c_str(), addr(slot), size, VISTA_CREATE,
		&s));
	return s;
}

inline struct vista_stats stats(vista *v)
{
	struct vista_stats s;
	VREQUIRE_OK(vista_stats(v, &s));
	return s;
}

// Every allocated block of a segment: address -> size.
inline std::map<uintptr_t, size_t> blocks(vista_segment *s)
{
	std::map<uintptr_t, size_t> m;
	VREQUIRE_OK(vista_heap_walk(s,
		[](void *p, size_t n, void *arg) {
			(*(std::map<uintptr_t, size_t> *)arg)[(uintptr_t)p] = n;
			return 0;
		},
		&m));
	return m;
}

// Counts what reaches librio's persistence choke point.
struct Tracer {
	static inline uint64_t drains, flush_calls, flush_lines;
	static inline uint64_t discards, discarded_bytes;
	static void flush(const rio_pool *, const void *a, size_t n,
		const void *)
	{
		flush_calls++;
		uintptr_t lo = (uintptr_t)a & ~(uintptr_t)63;
		flush_lines += n ? ((uintptr_t)a + n - lo + 63) / 64 : 0;
	}
	static void drain(const rio_pool *, const void *) { drains++; }
	static void point(const rio_pool *, const char *, const void *) {}
	static void mapped(const rio_pool *, void *, size_t, const char *) {}
	static void unmapping(const rio_pool *, void *, size_t) {}
	static void discard(const rio_pool *, const void *, size_t n,
		const void *)
	{
		discards++;
		discarded_bytes += n;
	}
	Tracer()
	{
		static const struct rio_trace_ops ops = { flush, drain, point,
			mapped, unmapping, discard };
		reset();
		rio_trace_set(&ops);
	}
	~Tracer() { rio_trace_set(nullptr); }
	void reset()
	{
		drains = flush_calls = flush_lines = 0;
		discards = discarded_bytes = 0;
	}
};

} // namespace vt
