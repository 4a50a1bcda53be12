// SPDX-License-Identifier: BSD-3-Clause
// thread_test.cpp -- one transaction and one lane per thread
#include <atomic>
#include <vector>

#include "vista_int.h"
#include "vista_test.hpp"

using vt::Env;

namespace {

// The lines written back and the fences, in order (0 marks a fence).
struct LineLog {
	static inline std::vector<uintptr_t> ev;
	static void flush(const rio_pool *, const void *a, size_t n,
		const void *)
	{
		for (uintptr_t l = (uintptr_t)a & ~(uintptr_t)63;
			l < (uintptr_t)a + n; l += 64)
			ev.push_back(l);
	}
	static void drain(const rio_pool *, const void *) { ev.push_back(0); }
	static void point(const rio_pool *, const char *, const void *) {}
	static void mapped(const rio_pool *, void *, size_t, const char *) {}
	static void unmapping(const rio_pool *, void *, size_t) {}
	static void discard(const rio_pool *, const void *, size_t,
		const void *) {}
	LineLog()
	{
		static const struct rio_trace_ops ops = { flush, drain, point,
			mapped, unmapping, discard };
		ev.clear();
		ev.reserve(1024);
		rio_trace_set(&ops);
	}
	~LineLog() { rio_trace_set(nullptr); }
};

} // namespace

TEST_CASE("another lane's first fence writes back a lane's lazy truncation "
	  "(L6)",
	"[thread]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *w = (uint64_t *)vista_segment_base(s);
	std::atomic<int> step{ 0 };

	// A thread commits with one fence, its truncation left for later,
	// and stays (its lane stays its own).
	std::thread t([&] {
		if (vista_begin_transaction(v, 0) || vista_set_range(v, w, 8))
			abort();
		w[0] = 7;
		if (vista_end_transaction(v))
			abort();
		step = 1;
		while (step != 2)
			std::this_thread::yield();
	});
	while (step != 1)
		std::this_thread::yield();
	const struct vista_lane *lazy = nullptr;
	for (unsigned i = 0; i < v->nlanes; i++)
		if (__atomic_load_n(&v->lanes[i].lazy, __ATOMIC_ACQUIRE))
			lazy = &v->lanes[i];
	REQUIRE(lazy != nullptr);
	REQUIRE(lazy->hdr->gen == lazy->gen); // stored, not yet fenced
	{
		// This thread's transaction on another lane: its first fence
		// comes after that lane header's write-back, before it
		// stores anything.
		LineLog log;
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_set_range(v, &w[64], 8));
		auto &ev = LineLog::ev;
		size_t fence = 0;
		while (fence < ev.size() && ev[fence] != 0)
			fence++;
		REQUIRE(fence < ev.size());
		bool covered = false;
		for (size_t i = 0; i < fence; i++)
			covered |= ev[i] == (uintptr_t)lazy->hdr;
		REQUIRE(covered);
		w[64] = 9;
		VREQUIRE_OK(vista_end_transaction(v));
	}
	step = 2;
	t.join();
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("threads run transactions side by side on their own lanes",
	"[thread]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *w = (uint64_t *)vista_segment_base(s);
	const int T = 4, N = 3000, C = 16;
	std::vector<std::thread> th;
	std::vector<uint64_t> want(T * C);

	for (int t = 0; t < T; t++)
		th.emplace_back([&, t] {
			test::Rng rng((uint64_t)t * 77 + 1);
			uint64_t *mine = w + t * 64; // its own cache lines
			for (int i = 0; i < N; i++) {
				int c = (int)rng.below(C);
				if (vista_begin_transaction(v, 0) ||
				    vista_set_range(v, &mine[c], 8))
					abort();
				mine[c] += 3;
				if (rng.below(4) == 0) {
					if (vista_abort_transaction(v))
						abort();
				} else {
					if (vista_end_transaction(v))
						abort();
					want[t * C + c] += 3;
				}
			}
		});
	for (auto &x : th)
		x.join();
	for (int t = 0; t < T; t++)
		for (int c = 0; c < C; c++)
			REQUIRE(w[t * 64 + c] == want[t * C + c]);
	struct vista_stats st = vt::stats(v);
	REQUIRE(st.tx_begun == T * N);
	REQUIRE(st.tx_committed + st.tx_aborted == T * N);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a thread that exits inside a transaction leaves it rolled back "
	  "and its lane free",
	"[thread]")
{
	Env e;
	e.lanes = 1;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *w = (uint64_t *)vista_segment_base(s);
	w[0] = 1;
	std::thread([&] {
		REQUIRE(vista_begin_transaction(v, 0) == 0);
		REQUIRE(vista_set_range(v, w, 8) == 0);
		w[0] = 2;
	}).join();
	REQUIRE(w[0] == 1);
	// The one lane is free again.
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_end_transaction(v));
	// While this thread holds it, no other thread gets it ...
	std::thread([&] {
		REQUIRE(vista_begin_transaction(v, 0) == VISTA_ENOLANE);
	}).join();
	// ... until it lets it go.
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_RC(vista_thread_detach(v), VISTA_EINTX);
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_thread_detach(v));
	VREQUIRE_OK(vista_thread_detach(v)); // nothing held: fine
	std::thread([&] {
		REQUIRE(vista_begin_transaction(v, 0) == 0);
		REQUIRE(vista_end_transaction(v) == 0);
	}).join();
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("threads allocate and free in one heap", "[thread]")
{
	Env e;
	e.lanes = 8;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0, 16 << 20);
	const int T = 4, N = 1500;
	std::vector<std::vector<void *>> live(T);

	std::vector<std::thread> th;
	for (int t = 0; t < T; t++)
		th.emplace_back([&, t] {
			test::Rng rng((uint64_t)t + 100);
			auto &mine = live[t];
			for (int i = 0; i < N; i++) {
				if (vista_begin_transaction(v, 0))
					abort();
				std::vector<void *> got;
				size_t nfree = 0;
				for (int k = 0; k < 3; k++) {
					void *p;
					size_t n = 1 + rng.below(k == 2 ? 9000 : 300);
					if (vista_malloc(s, n, &p))
						abort();
					memset(p, t, n);
					got.push_back(p);
				}
				if (!mine.empty() && rng.below(2)) {
					nfree = 1 + rng.below(mine.size() < 3 ? mine.size() : 3);
					for (size_t k = 0; k < nfree; k++)
						if (vista_free(s, mine[mine.size() - 1 - k]))
							abort();
				}
				if (rng.below(3) == 0) {
					if (vista_abort_transaction(v))
						abort();
				} else {
					if (vista_end_transaction(v))
						abort();
					mine.resize(mine.size() - nfree);
					mine.insert(mine.end(), got.begin(), got.end());
				}
			}
		});
	for (auto &x : th)
		x.join();
	std::map<uintptr_t, size_t> want;
	for (int t = 0; t < T; t++)
		for (void *p : live[t]) {
			REQUIRE(*(char *)p == t);
			want[(uintptr_t)p] = vista_usable_size(s, p);
		}
	REQUIRE(vt::blocks(s) == want);
	VREQUIRE_OK(vista_heap_check(s, nullptr));
	VREQUIRE_OK(vista_fini(v));
}
