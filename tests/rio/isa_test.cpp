// SPDX-License-Identifier: BSD-3-Clause
// isa_test.cpp -- what the persistence primitives really execute
//
// A tracer (tools/pmemtest, tests/vista/powercut.hpp) is told of a flush or
// a drain before the primitive runs its instructions, so a wrong sequence
// -- a drain without its sfence, a flush loop one line short -- passes
// every crash test.  This test watches the instructions themselves: it
// single-steps the primitives (the trap flag: SIGTRAP after every
// instruction), decodes each instruction at the trapped address, and
// records every clwb / clflushopt / clflush and non-temporal store with
// the address it computes from the trapped registers, and every sfence /
// mfence.  The primitives are the production ones: inline code compiled
// as C with the project's flags (isa_probe.c) and librio's own
// rio__memcpy_nt.  Over ranges of every alignment and length class, for
// every flush kind the CPU has:
//   rio_flush            every line of the range written back exactly once
//                        with the kind's instruction, nothing else, no fence;
//   rio_drain            one sfence (no flush, nothing in the byte domain);
//   rio_persist          the flushes, then one sfence after the last;
//   rio_memcpy_nodrain   the bytes copied; each line of the destination
//                        written back once (flushed, or filled by
//                        non-temporal stores), no fence;
//   rio_memcpy_persist   the same, then one sfence after the last.
// In the byte domain nothing is flushed and nothing fenced.
//
// Broken builds (meson: rio_isa_broken_*) compile the primitives with
// -DRIO_BROKEN_DRAIN_NO_SFENCE or -DRIO_BROKEN_FLUSH_SKIP_LAST: the test
// passes there only if it finds the fault.
#include <cpuid.h>

#include <sstream>
#include <vector>

#include "../common/test_util.hpp"
#include "isa_step.hpp"

extern "C" {
void isa_flush(const rio_pool *p, const void *a, size_t n);
void isa_drain(const rio_pool *p);
void isa_persist(const rio_pool *p, const void *a, size_t n);
void isa_memcpy_nodrain(const rio_pool *p, void *d, const void *s, size_t n);
void isa_memcpy_persist(const rio_pool *p, void *d, const void *s, size_t n);
}

using namespace isa;

namespace {

#if defined(RIO_BROKEN_DRAIN_NO_SFENCE) || defined(RIO_BROKEN_FLUSH_SKIP_LAST)
const bool broken = true;
#else
const bool broken = false;
#endif

// A flush kind under test: the pool's first bytes (struct rio__pool_hot)
// are all the inline primitives read.
struct KindCase {
	const char *name;
	struct rio__pool_hot hot;
	Kind insn; // what rio_flush must execute
	const rio_pool *pool() const
	{
		return (const rio_pool *)(const void *)&hot;
	}
	bool byte() const { return hot.flush_kind == RIO__FLUSH_NONE; }
};

std::vector<KindCase> kinds()
{
	unsigned a = 0, b = 0, c = 0, d = 0;
	std::vector<KindCase> k = {
		{ "byte", { RIO__FLUSH_NONE, RIO_DOMAIN_BYTE, nullptr }, CLWB },
		{ "clflush", { RIO__FLUSH_CLFLUSH, RIO_DOMAIN_CACHELINE, nullptr },
			CLFLUSH },
	};
	__get_cpuid_count(7, 0, &a, &b, &c, &d);
	if (b & (1u << 23))
		k.push_back({ "clflushopt",
			{ RIO__FLUSH_CLFLUSHOPT, RIO_DOMAIN_CACHELINE,
			  nullptr },
			CLFLUSHOPT });
	if (b & (1u << 24))
		k.push_back({ "clwb", { RIO__FLUSH_CLWB, RIO_DOMAIN_CACHELINE,
			  nullptr },
			CLWB });
	return k;
}


// The events of one call, judged against [lo, lo+len) of buf.
struct Judge {
	const KindCase &kc;
	uintptr_t buf, bufsz, lo, len;
	bool copy;  // written back by flushes or whole lines of NT stores
	bool fence; // a drain ends the call

	std::string run() const
	{
		std::ostringstream why;
		uintptr_t l0 = lo & ~(uintptr_t)63;
		uintptr_t l1 = len ? (lo + len + 63) & ~(uintptr_t)63 : l0;
		std::vector<int> flushed(bufsz / 64);
		std::vector<uint64_t> nt(bufsz / 64); // bytes streamed, as bits
		size_t fences = 0, last_wb = 0, last_fence = 0;

		for (size_t i = 0; i < nev; i++) {
			const Ev &e = evs[i];
			if (is_fence(e.kind)) {
				if (e.kind == SFENCE)
					fences++;
				last_fence = i + 1;
				continue;
			}
			if (e.addr < buf || e.addr + e.len > buf + bufsz) {
				why << kind_name[e.kind] << " of "
				    << (void *)e.addr << ", outside the buffer";
				return why.str();
			}
			size_t line = (e.addr - buf) / 64;
			last_wb = i + 1;
			if (is_flush(e.kind)) {
				if (!copy && e.kind != kc.insn) {
					why << kind_name[e.kind] << " where "
					    << kind_name[kc.insn]
					    << " was expected";
					return why.str();
				}
				flushed[line]++;
			} else {
				unsigned o = (unsigned)((e.addr - buf) % 64);
				if (o + e.len > 64) {
					why << "non-temporal store across lines";
					return why.str();
				}
				nt[line] |= (e.len == 64 ? ~0ull :
					((1ull << e.len) - 1)) << o;
			}
		}
		size_t want_lines = kc.byte() ? 0 : (l1 - l0) / 64;
		for (size_t line = 0; line < bufsz / 64; line++) {
			uintptr_t a = buf + line * 64;
			bool in = !kc.byte() && a >= l0 && a < l1;
			int wb = flushed[line] + (nt[line] == ~0ull ? 1 : 0);
			if (nt[line] != 0 && nt[line] != ~0ull)
				wb = 99; // part of a line streamed
			if (wb != (in ? 1 : 0)) {
				why << "line " << (a - l0) / 64 << " of "
				    << want_lines << " (offset "
				    << (long)(a - lo) << " from the range) "
				    << "written back " << wb << " times, "
				    << "expected " << (in ? 1 : 0);
				return why.str();
			}
		}
		size_t want_fences = fence && !kc.byte() ? 1 : 0;
		if (fences != want_fences) {
			why << fences << " sfence executed, expected "
			    << want_fences;
			return why.str();
		}
		if (want_fences && last_fence < last_wb) {
			why << "a write-back after the last fence";
			return why.str();
		}
		return "";
	}
};

// Line-aligned, 8-aligned and odd starts, the first and last byte of a
// line; lengths within a line, a line and either side of one, two lines,
// either side of the non-temporal threshold, and long.
const size_t offsets[] = { 0, 1, 8, 32, 56, 63, 64 + 17 };
const size_t lengths[] = { 0, 1, 7, 8, 56, 63, 64, 65, 127, 128, 129, 255,
	256, 257, 320, 1000 };

} // namespace

TEST_CASE("the primitives execute a write-back of every line of the range "
	  "and a fence after the last",
	"[isa]")
{
	const size_t BUF = 16384;
	std::vector<uint8_t> store(BUF + 4096), src(BUF);
	uint8_t *buf = (uint8_t *)(((uintptr_t)store.data() + 4095) &
		~(uintptr_t)4095);
	for (size_t i = 0; i < BUF; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	Stepper st;
	std::vector<KindCase> ks = kinds();
	size_t checked = 0, bad = 0;
	std::string first;
	auto judge = [&](const KindCase &kc, const char *fn, size_t off,
			     size_t len, bool copy, bool fence) {
		Judge j{ kc, (uintptr_t)buf, BUF, (uintptr_t)buf + off, len,
			copy, fence };
		std::string why = j.run();
		checked++;
		if (!why.empty() && bad++ == 0)
			first = std::string(fn) + "(" + kc.name + ", offset " +
				std::to_string(off) + ", " +
				std::to_string(len) + " bytes): " + why;
	};

	for (const KindCase &kc : ks) {
		const rio_pool *p = kc.pool();
		// Resolve every call once before stepping (lazy binding).
		isa_persist(p, buf, 64);
		isa_memcpy_persist(p, buf, src.data(), 512);

		st.run([&] { isa_drain(p); });
		judge(kc, "rio_drain", 0, 0, false, true);
		for (size_t off : offsets)
			for (size_t len : lengths) {
				uint8_t *a = buf + 64 + off;
				for (bool drain : { false, true }) {
					auto fn = drain ? isa_persist : isa_flush;
					st.run([&] { fn(p, a, len); });
					judge(kc, drain ? "rio_persist" : "rio_flush",
						64 + off, len, false, drain);
				}
				for (bool drain : { false, true }) {
					auto fn = drain ? isa_memcpy_persist :
							  isa_memcpy_nodrain;
					memset(buf, 0, BUF);
					st.run([&] { fn(p, a, src.data(), len); });
					judge(kc, drain ? "rio_memcpy_persist" :
							  "rio_memcpy_nodrain",
						64 + off, len, true, drain);
					REQUIRE(memcmp(a, src.data(), len) == 0);
				}
			}
	}
	REQUIRE(checked == ks.size() * (1 + 4 * sizeof(offsets) /
		sizeof(offsets[0]) * sizeof(lengths) / sizeof(lengths[0])));
	verdict(broken, bad, checked, first);
}

TEST_CASE("the single-step recorder sees what it is shown", "[isa]")
{
	// The decoder against known instructions, so that a recorder seeing
	// nothing cannot pass: each addressing form the compiler may pick.
	alignas(64) static uint8_t line[256];
	if (kinds().size() < 4) {
		WARN("skipped: the CPU has no clwb or no clflushopt");
		return;
	}
	Stepper st;
	st.run([&] {
		uint8_t *q = line + 64;
		long i = 1;
		__asm__ volatile("clwb (%0)\n\t"
				 "clflushopt 64(%0)\n\t"
				 "clflush -64(%0,%1,2)\n\t"
				 "sfence\n\t"
				 "mfence"
				 :
				 : "r"(q), "r"(i)
				 : "memory");
	});
	std::vector<Ev> got(evs, evs + nev);
	REQUIRE(got.size() == 5);
	CHECK(got[0].kind == CLWB);
	CHECK(got[0].addr == (uintptr_t)line + 64);
	CHECK(got[1].kind == CLFLUSHOPT);
	CHECK(got[1].addr == (uintptr_t)line + 128);
	CHECK(got[2].kind == CLFLUSH);
	CHECK(got[2].addr == (uintptr_t)line + 2);
	CHECK(got[3].kind == SFENCE);
	CHECK(got[4].kind == MFENCE);
}
