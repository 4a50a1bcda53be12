// SPDX-License-Identifier: BSD-3-Clause
// ranges_test.cpp -- the declared-range set (libvista/ranges.c) against a
// byte model, flat and chunked
//
// Random additions (scattered, overlapping, adjacent) into an address
// space that is never dereferenced; after each one the set's gaps over a
// random window and its membership of a random address must be the
// model's, and now and then the whole set, run by run, must be exactly
// the model's maximal declared intervals in order (R1, R4).
#include "vista_test.hpp"

#include "vista_int.h"

namespace {

struct Model {
	uintptr_t base;
	std::vector<uint8_t> in; // 1: declared
	Model(uintptr_t b, size_t size) : base(b), in(size, 0) {}
	void add(uintptr_t lo, uintptr_t hi)
	{
		for (uintptr_t a = lo; a < hi; a++)
			in[a - base] = 1;
	}
	// The undeclared parts of [lo, hi), as vista__ranges_gaps finds them.
	std::vector<vista_gap> gaps(uintptr_t lo, uintptr_t hi) const
	{
		std::vector<vista_gap> g;
		for (uintptr_t a = lo; a < hi; a++) {
			if (in[a - base])
				continue;
			if (!g.empty() && g.back().hi == a)
				g.back().hi = a + 1;
			else
				g.push_back(vista_gap{ a, a + 1 });
		}
		return g;
	}
	// Maximal declared intervals, in order.
	std::vector<vista_gap> intervals() const
	{
		std::vector<vista_gap> v;
		for (size_t i = 0; i < in.size(); i++) {
			if (!in[i])
				continue;
			uintptr_t a = base + i;
			if (!v.empty() && v.back().hi == a)
				v.back().hi = a + 1;
			else
				v.push_back(vista_gap{ a, a + 1 });
		}
		return v;
	}
};

// The set as a list, run by run; checks R4's shape on the way.
std::vector<vista_gap> listed(const vista_ranges &r)
{
	const vista_rrun *rr;
	vista_rrun one;
	uint32_t nr = vista__ranges_runs(&r, &rr, &one), total = 0;
	std::vector<vista_gap> v;

	for (uint32_t k = 0; k < nr; k++) {
		if (r.c != nullptr)
			REQUIRE((rr[k].n >= 1 && rr[k].n <= VISTA__RCHUNK));
		for (uint32_t i = 0; i < rr[k].n; i++)
			v.push_back(vista_gap{ rr[k].v[i].lo, rr[k].v[i].hi });
		total += rr[k].n;
	}
	REQUIRE(total == r.n);
	return v;
}

void same(const std::vector<vista_gap> &a, const std::vector<vista_gap> &b)
{
	REQUIRE(a.size() == b.size());
	for (size_t i = 0; i < a.size(); i++) {
		INFO("interval " << i);
		REQUIRE(a[i].lo == b[i].lo);
		REQUIRE(a[i].hi == b[i].hi);
	}
}

// What the set has allocated: an addition that allocates changes one of
// these (a flat array grows, a chunk is made, the directory or the spare
// list grows).
struct Held {
	uint32_t cap, ccap, spcap, chunks;
	bool chunked;
	explicit Held(const vista_ranges &r)
	    : cap(r.cap), ccap(r.ccap), spcap(r.spcap), chunks(r.nc + r.nspare),
	      chunked(r.c != nullptr)
	{
	}
};

// Additions within a reservation allocate nothing (R5): the same memory
// held after as before, unless the set was cut into chunks on the way
// (which may allocate, and may fail harmlessly).
void require_nothing_allocated(const Held &before, const vista_ranges &r)
{
	Held after(r);
	if (before.chunked != after.chunked)
		return;
	REQUIRE(after.cap == before.cap);
	REQUIRE(after.ccap == before.ccap);
	REQUIRE(after.spcap == before.spcap);
	REQUIRE(after.chunks == before.chunks);
}

// nadd random additions of 1..maxlen bytes into `size` bytes; returns
// whether the set was chunked at the end.
bool campaign(test::Rng &rng, vista_ranges &r, size_t size, size_t maxlen,
	int nadd, bool batches)
{
	const uintptr_t base = 1u << 20;
	auto *seg = reinterpret_cast<vista_segment *>(0x1000);
	Model m(base, size);

	vista__ranges_clear(&r);
	for (int k = 0; k < nadd;) {
		// Now and then a reservation for a batch, then its additions
		// (which must then succeed without allocating).
		int batch = batches && rng.below(8) == 0 ? 1 + (int)rng.below(200) : 1;
		if (batch > 1)
			REQUIRE(vista__ranges_reserve(&r, (uint32_t)batch) == 0);
		Held held(r);
		for (int b = 0; b < batch && k < nadd; b++, k++) {
			uintptr_t lo = base + rng.below(size - 1);
			uintptr_t hi = lo + 1 + rng.below(maxlen);
			if (hi > base + size)
				hi = base + size;
			REQUIRE(vista__ranges_add(&r, lo, hi, seg) == 0);
			m.add(lo, hi);
		}
		if (batch > 1)
			require_nothing_allocated(held, r);
		// gaps over a random window, with room for all of them and
		// with too little room
		uintptr_t lo = base + rng.below(size - 1);
		uintptr_t hi = lo + 1 + rng.below(4 * maxlen);
		if (hi > base + size)
			hi = base + size;
		std::vector<vista_gap> want = m.gaps(lo, hi);
		vista_gap g[64];
		uint32_t ng = vista__ranges_gaps(&r, lo, hi, g, 64);
		if (want.size() > 64) {
			REQUIRE(ng == 65);
		} else {
			same(std::vector<vista_gap>(g, g + ng), want);
			if (!want.empty())
				REQUIRE(vista__ranges_gaps(&r, lo, hi, g,
						(uint32_t)want.size() - 1) ==
					want.size());
		}
		uintptr_t a = base + rng.below(size);
		REQUIRE(vista__ranges_contains(&r, a) == (m.in[a - base] != 0));
		if (k % 500 == 0 || k == nadd)
			same(listed(r), m.intervals());
	}
	same(listed(r), m.intervals());
	return r.c != nullptr;
}

} // namespace

TEST_CASE("the range set matches a byte model, flat and chunked", "[ranges]")
{
	test::Rng rng(test::seed());
	vista_ranges r;
	vista__ranges_init(&r);

	SECTION("few ranges stay flat")
	{
		REQUIRE_FALSE(campaign(rng, r, 4096, 16, 200, false));
	}
	SECTION("scattered cells: thousands of intervals, chunked")
	{
		REQUIRE(campaign(rng, r, 1 << 20, 4, 12000, false));
		REQUIRE(r.n > 5000);
	}
	SECTION("dense and adjacent: merges across chunk boundaries")
	{
		// Fills the space: the intervals first multiply, then merge
		// into few (chunks empty and go back to the spares).
		REQUIRE(campaign(rng, r, 64 << 10, 24, 20000, true));
		REQUIRE(r.n < 2000);
	}
	SECTION("a reservation holds when its additions split every full "
		"chunk")
	{
		const uintptr_t base = 1u << 20;
		auto *seg = reinterpret_cast<vista_segment *>(0x1000);
		vista__ranges_clear(&r);
		// 512 cells 16 bytes apart: flat, full
		for (uintptr_t i = 0; i < 512; i++)
			REQUIRE(vista__ranges_add(&r, base + 16 * i,
					base + 16 * i + 1, seg) == 0);
		REQUIRE(r.c == nullptr);
		// one cell before each: the first addition cuts the set into
		// 16 chunks of 32, the rest fill each to 64, no split
		for (uintptr_t i = 0; i < 512; i++)
			REQUIRE(vista__ranges_add(&r, base + 16 * i - 8,
					base + 16 * i - 7, seg) == 0);
		REQUIRE(r.c != nullptr);
		REQUIRE(r.nc == 16);
		for (uint32_t k = 0; k < r.nc; k++)
			REQUIRE(r.c[k].n == VISTA__RCHUNK);
		// 20 reserved: a chunk past the last, a split of each of the
		// 16 full chunks, then 3 more into the halves
		REQUIRE(vista__ranges_reserve(&r, 20) == 0);
		Held held(r);
		REQUIRE(vista__ranges_add(&r, base + 16 * 600,
				base + 16 * 600 + 1, seg) == 0);
		for (uintptr_t k = 0; k < 16; k++)
			REQUIRE(vista__ranges_add(&r, base + 16 * (32 * k + 5) - 4,
					base + 16 * (32 * k + 5) - 3, seg) == 0);
		for (uintptr_t k = 0; k < 3; k++)
			REQUIRE(vista__ranges_add(&r, base + 16 * (32 * k + 7) - 4,
					base + 16 * (32 * k + 7) - 3, seg) == 0);
		require_nothing_allocated(held, r);
		REQUIRE(r.nc == 33);
		REQUIRE(r.n == 1024 + 20);
	}
	SECTION("a reservation too large to count is refused, the set "
		"unchanged")
	{
		const uintptr_t base = 1u << 20;
		auto *seg = reinterpret_cast<vista_segment *>(0x1000);
		vista__ranges_clear(&r);
		REQUIRE(vista__ranges_add(&r, base, base + 4, seg) == 0);
		Held held(r);
		REQUIRE(vista__ranges_reserve(&r, UINT32_MAX) == -ENOMEM);
		REQUIRE(vista__ranges_reserve(&r, UINT32_MAX / 4) == -ENOMEM);
		require_nothing_allocated(held, r);
		REQUIRE(r.n == 1);
		REQUIRE(r.owed == 0);
		REQUIRE(vista__ranges_contains(&r, base + 3));
	}
	SECTION("reservations for batches, and the set reused after clear")
	{
		for (int round = 0; round < 4; round++)
			campaign(rng, r, 256 << 10, 8, 4000, true);
		vista__ranges_clear(&r);
		REQUIRE(r.c == nullptr);
		REQUIRE(r.n == 0);
		REQUIRE(r.nspare <= 64); // the spares kept for the next
		REQUIRE_FALSE(vista__ranges_contains(&r, 1u << 20));
	}
	vista__ranges_fini(&r);
}
