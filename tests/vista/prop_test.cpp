// SPDX-License-Identifier: BSD-3-Clause
// prop_test.cpp -- random transactions against an in-memory model
//
// The model is what the segment must hold after each transaction: the
// bytes of committed transactions only.  Each transaction declares random
// (often overlapping) ranges, single or batched, stores random bytes into
// what it declared, allocates and frees heap blocks, and then commits or
// aborts; now and then it runs in a child that dies before committing, and
// the parent's recovery must give back the model exactly.
#include "vista_test.hpp"

using vt::Env;

static const size_t RAW = 64 << 10; // bytes of the raw segment checked

struct Model {
	std::vector<uint8_t> raw;
	std::map<uintptr_t, uint8_t> blocks; // heap block -> fill byte
};

struct World {
	Env &e;
	vista *v = nullptr;
	vista_segment *raw = nullptr, *heap = nullptr;
	explicit World(Env &env) : e(env) { open(); }
	void open()
	{
		v = e.open();
		raw = vt::map(v, e.seg("raw"), 0, 1 << 20);
		heap = vt::map(v, e.seg("heap"), 1, 4 << 20);
	}
	void close() { VREQUIRE_OK(vista_fini(v)); }
	uint8_t *bytes() { return (uint8_t *)vista_segment_base(raw); }
};

enum End { COMMIT, ABORT, LEAVE_OPEN };

// A call that must succeed (also in children, where REQUIRE cannot report).
#define MUST(expr)                                                         \
	do {                                                               \
		int rc_ = (expr);                                          \
		if (rc_ != 0) {                                            \
			fprintf(stderr, "%s: %s: %s\n", #expr,              \
				vista_err_name(rc_), vista_errormsg());    \
			abort();                                           \
		}                                                          \
	} while (0)

// One random transaction; returns true if it committed.  LEAVE_OPEN: the
// caller dies in the middle of it.
static bool run_tx(World &w, Model &m, test::Rng &rng, bool automatic,
	End end, std::map<uintptr_t, uint8_t> *blocks_after)
{
	uint8_t *b = w.bytes();
	int nops = 1 + (int)rng.below(12);
	std::map<uintptr_t, uint8_t> blocks = m.blocks;

	if (vista_begin_transaction(w.v, automatic ? VISTA_TX_AUTO : 0))
		return false;
	for (int k = 0; k < nops; k++) {
		switch (rng.below(6)) {
		case 0:
		case 1: { // one range, maybe over an earlier one
			size_t off = rng.below(RAW - 1);
			size_t len = 1 + rng.below(rng.below(4) ? 64 : 5000);
			if (off + len > RAW)
				len = RAW - off;
			if (!automatic)
				MUST(vista_set_range(w.v, b + off, len));
			for (size_t i = 0; i < len; i++)
				b[off + i] = (uint8_t)rng.next();
			break;
		}
		case 2: { // a batch, now and then past 16 ranges
			struct vista_range r[24];
			size_t n = 1 + rng.below(rng.below(8) ? 6 : 24);
			for (size_t i = 0; i < n; i++) {
				size_t off = rng.below(RAW - 256);
				r[i] = { b + off, 1 + rng.below(256) };
			}
			if (!automatic)
				MUST(vista_set_ranges(w.v, n, r));
			for (size_t i = 0; i < n; i++)
				memset(r[i].addr, (int)rng.next(), r[i].len);
			break;
		}
		case 3:
		case 4: { // allocate
			void *p;
			size_t n = 1 + rng.below(rng.below(8) ? 512 : 20000);
			MUST(vista_malloc(w.heap, n, &p));
			uint8_t f = (uint8_t)rng.next();
			memset(p, f, n < 64 ? n : 64);
			blocks[(uintptr_t)p] = f;
			break;
		}
		case 5: { // free one of ours
			if (blocks.empty())
				break;
			auto it = blocks.begin();
			std::advance(it, (long)rng.below(blocks.size()));
			MUST(vista_free(w.heap, (void *)it->first));
			blocks.erase(it);
			break;
		}
		}
	}
	*blocks_after = blocks;
	if (end == LEAVE_OPEN)
		return false;
	if (end == COMMIT) {
		MUST(vista_end_transaction(w.v));
		return true;
	}
	MUST(vista_abort_transaction(w.v));
	return false;
}

static void check(World &w, const Model &m)
{
	REQUIRE(memcmp(w.bytes(), m.raw.data(), RAW) == 0);
	auto got = vt::blocks(w.heap);
	REQUIRE(got.size() == m.blocks.size());
	for (auto &bl : m.blocks) {
		REQUIRE(got.count(bl.first) == 1);
		REQUIRE(*(uint8_t *)bl.first == bl.second);
	}
	VREQUIRE_OK(vista_heap_check(w.heap, nullptr));
}

static void property(unsigned flags, int iterations)
{
	Env e(flags);
	e.log_size = 8 << 20;
	test::Rng rng(test::seed());
	World w(e);
	Model m;
	m.raw.assign(w.bytes(), w.bytes() + RAW);

	for (int it = 0; it < iterations; it++) {
		bool automatic = rng.below(5) == 0;
		std::map<uintptr_t, uint8_t> after;
		INFO("iteration " << it << (automatic ? " (automatic)" : ""));
		if (it % 97 == 96) {
			// Commit one transaction, then die inside the next;
			// the child writes down what the first one left.
			w.close();
			uint64_t s = rng.next();
			std::string expect = e.dir / "expect";
			auto r = test::run_child([&] {
				test::Rng crng(s);
				World cw(e);
				Model cm = m;
				std::map<uintptr_t, uint8_t> bl;
				run_tx(cw, cm, crng, automatic, COMMIT, &bl);
				cm.blocks = bl;
				std::string out((char *)cw.bytes(), RAW);
				for (auto &x : bl)
					out.append((char *)&x, sizeof(x));
				test::write_file(expect, out);
				run_tx(cw, cm, crng, crng.below(2), LEAVE_OPEN, &bl);
				_exit(0);
			});
			INFO("child: signal " << r.signal << ", " << r.err);
			REQUIRE(r.exited);
			REQUIRE(r.code == 0);
			std::string ex = test::read_file(expect);
			REQUIRE(ex.size() >= RAW);
			m.raw.assign(ex.begin(), ex.begin() + RAW);
			m.blocks.clear();
			for (size_t o = RAW; o < ex.size();
				o += sizeof(std::pair<uintptr_t, uint8_t>)) {
				std::pair<uintptr_t, uint8_t> x;
				memcpy((void *)&x, ex.data() + o, sizeof(x));
				m.blocks[x.first] = x.second;
			}
			w.open();
			REQUIRE(vista_pending_lanes(w.v) == 0);
			check(w, m);
			continue;
		}
		End end = rng.below(3) ? COMMIT : ABORT;
		bool committed = run_tx(w, m, rng, automatic, end, &after);
		if (committed) {
			m.raw.assign(w.bytes(), w.bytes() + RAW);
			m.blocks = after;
		}
		check(w, m);
	}
	w.close();
	// And the model survives a clean reopen.
	w.open();
	check(w, m);
	w.close();
}

TEST_CASE("random transactions with aborts match the model (cacheline)",
	"[prop]")
{
	property(RIO_FORCE_CACHELINE, 1500);
}

TEST_CASE("random transactions with aborts match the model (byte)", "[prop]")
{
	property(RIO_FORCE_BYTE, 1500);
}
