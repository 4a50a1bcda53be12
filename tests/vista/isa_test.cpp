// SPDX-License-Identifier: BSD-3-Clause
// isa_test.cpp -- what a commit executes, instruction by instruction (T2)
//
// The crash tests see a commit through librio's trace hooks, which are
// told of a flush or a drain before its instructions run.  Here
// vista_end_transaction is single-stepped (tests/rio/isa_step.hpp) in the
// cacheline domain and judged on the instructions it executed: every line
// of every declared range written back once and no other line of the
// segment, and the commit record's line; then an sfence; only after it
// the write-back of the lane header (the truncation, durable at the next
// transaction's first fence).  Ranges of one and several lines, at
// line boundaries and across them, overlapping, several per transaction.
//
// Broken builds (meson: vista_isa_broken_*) link a libvista made with
// -DVISTA_BROKEN_COMMIT_ORDER, _FAST_NO_FLUSH or _FAST_COMMIT_ORDER: the
// test passes there only if it finds the fault.
#include <set>
#include <sstream>

#include "../rio/isa_step.hpp"
#include "vista_int.h"
#include "vista_test.hpp"

using namespace isa;

namespace {

#if defined(VISTA_BROKEN_COMMIT_ORDER) || \
	defined(VISTA_BROKEN_FAST_NO_FLUSH) || \
	defined(VISTA_BROKEN_FAST_COMMIT_ORDER)
const bool broken = true;
#else
const bool broken = false;
#endif

struct Range {
	size_t off, len;
};

// The events of one commit; "" if they keep T2 (tx.c, commit_lazy's
// persist order): every declared line written back once and no other
// line of the segment, the commit record's line written back; an sfence
// after all of them; only after it the lane header's (the truncation,
// which waits for the next transaction's fence).
std::string judge(uintptr_t seg, size_t seg_size, uintptr_t log,
	size_t log_size, uintptr_t commit_line, uintptr_t hdr_line,
	const std::vector<Range> &rs)
{
	std::ostringstream why;
	std::set<uintptr_t> want;
	std::map<uintptr_t, int> got;
	int commit_wb = 0, trunc_wb = 0;
	bool fenced = false; // an sfence after the data and the commit record

	for (const Range &r : rs)
		for (uintptr_t a = (seg + r.off) & ~(uintptr_t)63;
			a < seg + r.off + r.len; a += 64)
			want.insert(a);
	for (size_t i = 0; i < nev; i++) {
		const Ev &e = evs[i];
		uintptr_t line = e.addr & ~(uintptr_t)63;
		if (is_fence(e.kind)) {
			if (e.kind == SFENCE && commit_wb > 0)
				fenced = true;
			continue;
		}
		if (line == commit_line) {
			if (fenced)
				return "the commit record written back after "
				       "the sfence";
			commit_wb++;
		} else if (line == hdr_line) {
			if (!fenced)
				return "the lane header (the truncation) "
				       "written back before the sfence of the "
				       "data and the commit record";
			trunc_wb++;
		} else if (e.addr >= log && e.addr < log + log_size) {
			why << kind_name[e.kind] << " of the log (offset "
			    << e.addr - log << "), neither the commit record "
			    << "nor the lane header";
			return why.str();
		} else if (e.addr >= seg && e.addr < seg + seg_size) {
			if (fenced)
				return "data written back after the sfence";
			got[line]++;
		} else {
			why << kind_name[e.kind] << " of " << (void *)e.addr
			    << ", in neither the log nor the segment";
			return why.str();
		}
	}
	for (uintptr_t a : want)
		if (got[a] != 1) {
			why << "line at offset " << a - seg << " written back "
			    << got[a] << " times";
			return why.str();
		}
	for (auto &g : got)
		if (!want.count(g.first)) {
			why << "line at offset " << g.first - seg
			    << " written back, never declared";
			return why.str();
		}
	if (commit_wb != 1)
		return "the commit record not written back once";
	if (!fenced)
		return "no sfence after the data and the commit record";
	if (trunc_wb != 1)
		return "the truncation not written back once";
	return "";
}

} // namespace

TEST_CASE("a commit writes back every declared line and its commit record, "
	  "fences, then truncates",
	"[isa]")
{
	vt::Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint8_t *base = (uint8_t *)vista_segment_base(s);
	uintptr_t seg = (uintptr_t)base, log = (uintptr_t)rio_pool_base(v->log);
	size_t seg_size = vista_segment_size(s), log_size = rio_pool_size(v->log);
	const std::vector<std::vector<Range>> cases = {
		{ { 0, 8 } },
		{ { 63, 1 } },
		{ { 1, 65 } },
		{ { 30, 200 } },
		{ { 0, 4096 } },
		{ { 0, 8 }, { 130, 70 }, { 1000, 300 } },
		{ { 10, 100 }, { 50, 100 } },
		{ { 64, 64 }, { 0, 64 }, { 128, 1 } },
	};
	Stepper st;
	size_t checked = 0, bad = 0;
	std::string first;

	// Once untraced, so that nothing is resolved lazily while stepping.
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, base, 8));
	VREQUIRE_OK(vista_end_transaction(v));
	for (int rep = 0; rep < 3; rep++)
		for (const auto &rs : cases) {
			int rc = 0;
			VREQUIRE_OK(vista_begin_transaction(v, 0));
			for (const Range &r : rs) {
				VREQUIRE_OK(vista_set_range(v, base + r.off, r.len));
				memset(base + r.off, rep + 1, r.len);
			}
			st.run([&] { rc = vista_end_transaction(v); });
			VREQUIRE_OK(rc);
			std::string why = judge(seg, seg_size, log, log_size,
				(uintptr_t)v->lanes[0].cl,
				(uintptr_t)v->lanes[0].hdr, rs);
			checked++;
			if (!why.empty() && bad++ == 0)
				first = "case " + std::to_string(checked) + ": " +
					why;
		}
	VREQUIRE_OK(vista_fini(v));
	REQUIRE(checked == 3 * cases.size());
	verdict(broken, bad, checked, first);
}
