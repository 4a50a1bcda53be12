// SPDX-License-Identifier: BSD-3-Clause
// txrun.hpp -- a run of numbered transactions on one segment, reported
// transaction by transaction, and a power failure at every fence of it
//
// The writer (run) reopens the segment, recovering it, and runs
// transactions from the counter in its first 8 bytes on, writing the count
// of those that returned to a report file after each (8 bytes: the page
// cache outlives SIGKILL).  cut_every_fence() runs it in a child whose
// power fails at fence 1, 2, ... (powercut.hpp) until one run ends with no
// cut, and hands each image to a checker.  The environment E has `dir`,
// `log`, `seg` and `int init(vista **)`.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "powercut.hpp"
#include "vista_test.hpp"

namespace txrun {

const size_t SEG = 64 << 10;

inline uint64_t reported(const std::string &report)
{
	uint64_t n = 0;
	int fd = open(report.c_str(), O_RDONLY);
	if (fd >= 0) {
		if (pread(fd, &n, 8, 0) != 8)
			n = 0;
		close(fd);
	}
	return n;
}

// ---- the transfer workload both power-cut tests run ----
// A counter in the segment's first 8 bytes, NACC accounts and a ring of
// NHIST history rows: transaction i moves an amount between two accounts
// and writes history row i.  The tests differ in how they declare it.
const int NACC = 64;
const size_t ACC_OFF = 4096, ACC_STRIDE = 24; // several to a line
const size_t HIST_OFF = 8192, HIST_LEN = 200, NHIST = 16;

struct transfer {
	int64_t *a, *c; // debited, credited (the same account at times)
	int64_t amt;
	char *h;        // its history row
};

inline uint64_t mix(uint64_t x)
{
	x ^= x >> 31;
	x *= 0x9e3779b97f4a7c15ull;
	return x ^ (x >> 29);
}

inline size_t hist_at(uint64_t i)
{
	return HIST_OFF + (i % NHIST) * HIST_LEN;
}

// Transaction i's accounts, amount and history row in the segment at b.
inline transfer transfer_of(char *b, uint64_t i)
{
	auto acc = [b](uint64_t k) {
		return (int64_t *)(b + ACC_OFF + (k % NACC) * ACC_STRIDE);
	};
	return { acc(mix(i)), acc(mix(i + 77)), (int64_t)(i % 97) + 1,
		b + hist_at(i) };
}

// Transaction i's stores, once its ranges are declared.
inline void transfer_store(char *b, uint64_t i, const transfer &t)
{
	*t.a -= t.amt;
	*t.c += t.amt;
	*(uint64_t *)b = i + 1;
	memset(t.h, (int)(i & 0xff), HIST_LEN);
}

// The segment after transactions 0..n-1 of tx(nullptr, buffer, i).
template <typename Tx> std::vector<char> model(Tx tx, uint64_t n)
{
	std::vector<char> m(SEG, 0);
	for (uint64_t i = 0; i < n; i++)
		tx(nullptr, m.data(), i);
	return m;
}

// In a child: transactions tx(v, base, i) from the recovered counter to n.
template <typename E, typename Tx>
void run(const E &e, const std::string &report, uint64_t n, Tx tx)
{
	vista *v = nullptr;
	CHILD_OK(e.init(&v));
	vista_segment *s = nullptr;
	CHILD_OK(vista_map(v, e.seg.c_str(), vt::addr(3), SEG, VISTA_CREATE,
		&s));
	char *b = (char *)vista_segment_base(s);
	int fd = open(report.c_str(), O_WRONLY | O_CREAT, 0644);
	if (fd < 0)
		_exit(11);
	for (uint64_t i = *(uint64_t *)b; i < n; i++) {
		CHILD_OK(tx(v, b, i));
		uint64_t done = i + 1;
		if (pwrite(fd, &done, 8, 0) != 8)
			_exit(12);
	}
	CHILD_OK(vista_fini(v));
}

// After a crash: recovery, then the state of the transactions that
// returned, or of one more: model(c) for counter c, but for the `skip`
// bytes at skip_at(c) (0, 0: none).  Returns "" or what is wrong.
template <typename E, typename Model, typename Skip>
std::string check(const E &e, const std::string &report, Model model,
	Skip skip_at)
{
	vista *v = nullptr;
	int rc = e.init(&v);
	if (rc)
		return std::string("vista_init: ") + vista_errormsg();
	vista_segment *s = nullptr;
	rc = vista_map(v, e.seg.c_str(), vt::addr(3), SEG, 0, &s);
	if (rc) {
		std::string m = std::string("vista_map: ") + vista_errormsg();
		vista_fini(v);
		return m;
	}
	char *b = (char *)vista_segment_base(s);
	uint64_t c = *(uint64_t *)b, r = reported(report);
	std::string why;
	std::vector<char> m = model(c);
	std::pair<size_t, size_t> k = skip_at(c);
	if (c != r && c != r + 1)
		why = "counter " + std::to_string(c) + ", " +
			std::to_string(r) + " returned";
	else if (memcmp(b, m.data(), k.first) != 0 ||
		 memcmp(b + k.first + k.second, m.data() + k.first + k.second,
			 SEG - k.first - k.second) != 0)
		why = "the segment is not the state after " +
			std::to_string(c) + " transactions";
	VREQUIRE_OK(vista_fini(v));
	return why;
}

// A fresh log and segment.
template <typename E> void fresh(const E &e)
{
	vista *v = nullptr;
	VREQUIRE_OK(e.init(&v));
	vista_segment *s = nullptr;
	VREQUIRE_OK(vista_map(v, e.seg.c_str(), vt::addr(3), SEG, VISTA_CREATE,
		&s));
	VREQUIRE_OK(vista_fini(v));
}

// A power failure at every fence of run(ntx transactions), each image
// judged by check(e, report) ("" or what is wrong).  A broken build
// passes if one image is wrong; a correct one if none is and every
// commit's fence was cut.  setup(e) adjusts each fresh environment.
template <typename E, typename Setup, typename Tx, typename Check>
void cut_every_fence(bool broken, uint64_t ntx, Setup setup, Tx tx,
	Check check)
{
	uint64_t seed = test::seed();
	int bad = 0, cuts = 0;
	std::string first;
	for (uint64_t cut = 1;; cut++) {
		E e;
		setup(e);
		fresh(e);
		std::string report = e.dir / "report";
		auto r = test::run_child([&] {
			pc::install(cut, seed + cut);
			run(e, report, ntx, tx);
			_exit(20); // ran to the end: no cut
		});
		if (r.exited && r.code == 20)
			break;
		INFO(r.err);
		REQUIRE(r.signal == SIGKILL);
		cuts++;
		pc::adopt({ e.log, e.seg });
		std::string why = check(e, report);
		if (!why.empty()) {
			if (bad++ == 0)
				first = "cut at fence " + std::to_string(cut) +
					": " + why;
			if (broken)
				break;
		}
	}
	INFO(first);
	WARN(cuts << " power cuts, " << bad << " wrong states; " << first);
	if (broken) {
		REQUIRE(bad > 0);
	} else {
		REQUIRE(bad == 0);
		REQUIRE(cuts > (int)ntx); // every commit's fence was cut
	}
}

} // namespace txrun
