// SPDX-License-Identifier: BSD-3-Clause
// newrange_test.cpp -- new ranges (vista_set_range_new, vista_set_ranges_new)
//
// [newrange]           the calls: abort and recovery leave a new range as
//                      the transaction stored it and put the old ranges
//                      back; commit keeps both; the overlap rules; what the
//                      commit hook sees; bad input (no transaction, out of
//                      range, n_old > n, log full) as for vista_set_range;
//                      -ENOTSUP in automatic transactions and redo mode; a
//                      log of format 5.0 logs new ranges with their images.
// [newrange-powercut]  a power failure at every fence of a run of
//                      transfers that each insert a history row declared
//                      new (powercut.hpp), then recovery: the state is that
//                      of the transactions that returned, or of one more,
//                      the history row of the next, uncommitted one aside
//                      (nobody reads it).  Built also against the broken
//                      builds new_unsummed (a new range left out of the
//                      commit checksum) and new_no_writeback (a new range
//                      not written back before the commit fence), which it
//                      must catch.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "txrun.hpp"

#include "log_layout.h"

using vt::Env;

namespace {

#if defined(VISTA_BROKEN_NEW_UNSUMMED) || defined(VISTA_BROKEN_NEW_NO_WRITEBACK)
const bool broken = true;
#else
const bool broken = false;
#endif

// A child that stores and dies inside a transaction; then recovery.
template <typename F> void die_in_tx(const Env &e, F body)
{
	vt::crash_in_child([&] {
		vista *v = nullptr;
		CHILD_OK(e.init(&v));
		vista_segment *s = nullptr;
		CHILD_OK(vista_map(v, e.seg("a").c_str(), vt::addr(0), 1 << 20,
			VISTA_CREATE, &s));
		CHILD_OK(vista_begin_transaction(v, 0));
		body(v, (char *)vista_segment_base(s));
	});
}

} // namespace

TEST_CASE("abort puts the old ranges back and leaves the new ones as "
	  "stored; commit keeps both; only old bytes are logged",
	"[newrange]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	char *b = (char *)vista_segment_base(s);
	memset(b, 'o', 200000);
	// Small ranges in one call (the first batch of a transaction), a big
	// new range past a descriptor's length, and ranges declared later
	// (the general path).
	struct vista_range r[3] = { { b, 16 }, { b + 64, 8 }, { b + 128, 100 } };
	for (int commit = 0; commit < 2; commit++) {
		uint64_t logged = vt::stats(v).bytes_logged;
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_set_ranges_new(v, 3, 2, r));
		VREQUIRE_OK(vista_set_range_new(v, b + 1000, 100000));
		VREQUIRE_OK(vista_set_range(v, b + 120000, 24));
		VREQUIRE_OK(vista_set_range_new(v, b + 130000, 50));
		REQUIRE(vt::stats(v).bytes_logged - logged == 16 + 8 + 24);
		memset(b, 'x', 200000);
		if (commit) {
			VREQUIRE_OK(vista_end_transaction(v));
			for (int i = 0; i < 200000; i++)
				REQUIRE(b[i] == 'x');
			break;
		}
		VREQUIRE_OK(vista_abort_transaction(v));
		for (int i = 0; i < 200000; i++) {
			bool old = i < 16 || (i >= 64 && i < 72) ||
				(i >= 120000 && i < 120024);
			INFO("byte " << i);
			REQUIRE(b[i] == (old ? 'o' : 'x'));
		}
		memset(b, 'o', 200000);
	}
	VREQUIRE_OK(vista_fini(v));
	v = e.open();
	s = vt::map(v, e.seg("a"), 0);
	b = (char *)vista_segment_base(s);
	REQUIRE(b[0] == 'x');
	REQUIRE(b[130049] == 'x');
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("abort writes a new range back as it is (the durable state "
	  "equals memory)",
	"[newrange]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	char *b = (char *)vista_segment_base(s);
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range_new(v, b + 4096, 4096));
	memset(b + 4096, 'x', 4096);
	vt::Tracer t;
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(t.flush_lines >= 64);
	REQUIRE(t.drains >= 1);
	REQUIRE(b[4096] == 'x');
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("recovery puts the old ranges back and leaves the new ones",
	"[newrange]")
{
	Env e;
	{
		vista *v = e.open();
		vista_segment *s = vt::map(v, e.seg("a"), 0);
		char *b = (char *)vista_segment_base(s);
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_set_range(v, b, 4096));
		memset(b, 'o', 4096);
		VREQUIRE_OK(vista_end_transaction(v));
		VREQUIRE_OK(vista_fini(v));
	}
	die_in_tx(e, [](vista *v, char *b) {
		struct vista_range r[2] = { { b + 8, 8 }, { b + 256, 512 } };
		CHILD_OK(vista_set_ranges_new(v, 2, 1, r));
		CHILD_OK(vista_set_range_new(v, b + 2048, 64));
		memset(b, 'x', 4096);
	});
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	char *b = (char *)vista_segment_base(s);
	REQUIRE(vt::stats(v).recovered_tx == 1);
	// The old range is back; the new ones keep what the child stored
	// (its stores outlive it), as do the bytes it never declared.
	for (int i = 0; i < 4096; i++) {
		INFO("byte " << i);
		REQUIRE(b[i] == (i >= 8 && i < 16 ? 'o' : 'x'));
	}
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("overlaps: a byte's first declaration in the transaction decides; "
	  "in one call, old wins",
	"[newrange]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	char *b = (char *)vista_segment_base(s);
	memset(b, 'o', 4096);
	auto aborted = [&](const std::function<void()> &declare) {
		memset(b, 'o', 4096);
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		declare();
		memset(b, 'x', 4096);
		VREQUIRE_OK(vista_abort_transaction(v));
	};
	SECTION("old, then new: put back")
	{
		aborted([&] {
			VREQUIRE_OK(vista_set_range(v, b + 100, 50));
			VREQUIRE_OK(vista_set_range_new(v, b + 80, 100));
		});
		for (int i = 80; i < 180; i++)
			REQUIRE(b[i] == (i >= 100 && i < 150 ? 'o' : 'x'));
	}
	SECTION("new, then old: not put back, except the bytes declared old "
		"first")
	{
		aborted([&] {
			VREQUIRE_OK(vista_set_range_new(v, b + 100, 50));
			VREQUIRE_OK(vista_set_range(v, b + 80, 100));
		});
		for (int i = 80; i < 180; i++)
			REQUIRE(b[i] == (i >= 100 && i < 150 ? 'x' : 'o'));
	}
	SECTION("one call, a byte old and new: old")
	{
		aborted([&] {
			struct vista_range r[3] = { { b + 100, 50 },
				{ b + 80, 100 }, { b + 300, 10 } };
			VREQUIRE_OK(vista_set_ranges_new(v, 3, 1, r));
		});
		for (int i = 80; i < 310; i++)
			REQUIRE(b[i] == (i >= 100 && i < 150 ? 'o' : 'x'));
	}
	SECTION("one call, the first, ranges of 256 bytes or more, old and new "
		"overlapping and touching (the general path's first batch)")
	{
		aborted([&] {
			struct vista_range r[4] = { { b + 100, 300 },
				{ b + 80, 600 }, { b + 680, 10 },
				{ b + 1000, 300 } };
			VREQUIRE_OK(vista_set_ranges_new(v, 4, 1, r));
			// Declared new first: this old declaration logs
			// nothing, and the bytes stay as stored.
			VREQUIRE_OK(vista_set_range(v, b + 1100, 20));
		});
		for (int i = 0; i < 1400; i++) {
			INFO("byte " << i);
			REQUIRE(b[i] == (i >= 100 && i < 400 ? 'o' : 'x'));
		}
	}
	SECTION("one call, later in the transaction (the general path)")
	{
		aborted([&] {
			VREQUIRE_OK(vista_set_range(v, b + 2000, 8));
			struct vista_range r[3] = { { b + 100, 50 },
				{ b + 80, 100 }, { b + 300, 10 } };
			VREQUIRE_OK(vista_set_ranges_new(v, 3, 1, r));
		});
		for (int i = 80; i < 310; i++)
			REQUIRE(b[i] == (i >= 100 && i < 150 ? 'o' : 'x'));
		REQUIRE(b[2000] == 'o');
	}
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("bad input is refused as by vista_set_range, declaring nothing",
	"[newrange]")
{
	Env e;
	e.log_size = 256 << 10; // lanes of 48 KiB or so
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	char *b = (char *)vista_segment_base(s);
	struct vista_range one = { b, 8 };

	VREQUIRE_RC(vista_set_range_new(v, b, 8), VISTA_ENOTX);
	VREQUIRE_RC(vista_set_ranges_new(v, 1, 0, &one), VISTA_ENOTX);
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_RC(vista_set_range_new(v, b - 4096, 8), VISTA_ERANGE);
	VREQUIRE_RC(vista_set_range_new(v, b + (1 << 20), 8), VISTA_ERANGE);
	VREQUIRE_RC(vista_set_range_new(v, &one, 8), VISTA_ERANGE);
	VREQUIRE_RC(vista_set_ranges_new(v, 1, 2, &one), -EINVAL);
	VREQUIRE_RC(vista_set_ranges_new(v, 1, 0, nullptr), -EINVAL);
	// One bad range: none of the others is declared.
	b[0] = 'o';
	struct vista_range r[2] = { { b, 8 }, { b - 64, 8 } };
	VREQUIRE_RC(vista_set_ranges_new(v, 2, 1, r), VISTA_ERANGE);
	VREQUIRE_RC(vista_set_ranges_new(v, 2, 0, r), VISTA_ERANGE);
	REQUIRE(vt::stats(v).bytes_logged == 0);
	// Log full: a new range costs its 8-byte descriptor.
	std::vector<struct vista_range> many(16000);
	for (size_t i = 0; i < many.size(); i++)
		many[i] = { b + 1024 + 16 * i, 1 };
	VREQUIRE_RC(vista_set_ranges_new(v, many.size(), 0, many.data()),
		VISTA_ELOGFULL);
	// The transaction goes on and aborts cleanly.
	VREQUIRE_OK(vista_set_range(v, b, 8));
	b[0] = 'x';
	VREQUIRE_OK(vista_set_range_new(v, b + 64, 8));
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(b[0] == 'o');
	// Nothing to declare: fine, as for vista_set_ranges.
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range_new(v, b, 0));
	VREQUIRE_OK(vista_set_ranges_new(v, 0, 0, nullptr));
	VREQUIRE_OK(vista_end_transaction(v));
	// An automatic transaction logs whole pages: refused.
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
	VREQUIRE_RC(vista_set_range_new(v, b, 8), -ENOTSUP);
	VREQUIRE_OK(vista_set_ranges_new(v, 1, 1, &one)); // all old: fine
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("redo mode refuses new ranges", "[newrange]")
{
	test::TempDir dir;
	std::string log = dir / "log", seg = dir / "seg";
	struct vista_opts o = {};
	o.log_path = log.c_str();
	o.log_size = 64 << 10;
	o.mode = VISTA_MODE_REDO;
	vista *v = nullptr;
	VREQUIRE_OK(vista_init(&o, &v));
	vista_segment *s = nullptr;
	VREQUIRE_OK(vista_map(v, seg.c_str(), vt::addr(3), 64 << 10,
		VISTA_CREATE, &s));
	char *b = (char *)vista_segment_base(s);
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_RC(vista_set_range_new(v, b, 8), -ENOTSUP);
	struct vista_range r[2] = { { b, 8 }, { b + 64, 8 } };
	VREQUIRE_RC(vista_set_ranges_new(v, 2, 1, r), -ENOTSUP);
	VREQUIRE_OK(vista_set_ranges_new(v, 2, 2, r));
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("the commit hook sees a new range with no before-image",
	"[newrange]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	char *b = (char *)vista_segment_base(s);
	struct Seen {
		std::vector<std::pair<size_t, bool>> r; // len, has before
		unsigned events = 0;
	} seen;
	VREQUIRE_OK(vista_set_tx_hook(v,
		[](void *arg, unsigned event, struct vista_txinfo *tx) {
			auto *sn = (Seen *)arg;
			struct vista_txrange r;
			sn->events |= event;
			while (vista_txinfo_next(tx, &r) == 1)
				sn->r.push_back({ r.len, r.before != nullptr });
			return 0;
		},
		&seen));
	for (int commit = 0; commit < 2; commit++) {
		seen.r.clear();
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		struct vista_range r[3] = { { b, 8 }, { b + 64, 16 },
			{ b + 128, 24 } };
		VREQUIRE_OK(vista_set_ranges_new(v, 3, 1, r));
		VREQUIRE_OK(vista_set_range(v, b + 512, 32));
		VREQUIRE_OK(commit ? vista_end_transaction(v) :
				     vista_abort_transaction(v));
		REQUIRE(seen.r.size() == 4);
		REQUIRE(seen.r[0] == std::make_pair((size_t)8, true));
		REQUIRE(seen.r[1] == std::make_pair((size_t)16, false));
		REQUIRE(seen.r[2] == std::make_pair((size_t)24, false));
		REQUIRE(seen.r[3] == std::make_pair((size_t)32, true));
	}
	REQUIRE(seen.events == (VISTA_HOOK_COMMIT | VISTA_HOOK_ABORT));
	VREQUIRE_OK(vista_set_tx_hook(v, nullptr, nullptr));
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a log of format 5.0 logs new ranges with their before-images",
	"[newrange]")
{
	Env e;
	VREQUIRE_OK(vista_fini(e.open()));
	struct vista_log_hdr h;
	std::string f = test::read_file(e.log);
	memcpy(&h, f.data() + RIO_POOL_HDR_SIZE, sizeof(h));
	h.minor = 0;
	h.incompat = 0;
	h.checksum = rio_checksum(&h, offsetof(struct vista_log_hdr, checksum),
		VISTA_LOG_CSUM_SEED);
	test::patch_file(e.log, RIO_POOL_HDR_SIZE, &h, sizeof(h));
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	char *b = (char *)vista_segment_base(s);
	memset(b, 'o', 64);
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range_new(v, b, 16));
	struct vista_range r[2] = { { b + 16, 8 }, { b + 32, 8 } };
	VREQUIRE_OK(vista_set_ranges_new(v, 2, 1, r));
	memset(b, 'x', 64);
	REQUIRE(vt::stats(v).bytes_logged == 32);
	VREQUIRE_OK(vista_abort_transaction(v));
	for (int i = 0; i < 40; i++)
		REQUIRE(b[i] == (i < 24 || i >= 32 ? 'o' : 'x'));
	VREQUIRE_OK(vista_fini(v));
	// Still 5.0: a reader of 5.0 can open it.
	f = test::read_file(e.log);
	memcpy(&h, f.data() + RIO_POOL_HDR_SIZE, sizeof(h));
	REQUIRE(h.incompat == 0);
}

// ---- power cuts ----

namespace {

using txrun::HIST_LEN;
using txrun::hist_at;
const size_t HIST_PIECES = 20; // declared so in every sixth transaction

struct Run {
	test::TempDir dir;
	std::string log = dir / "log", seg = dir / "seg";
	unsigned lanes = 1;

	int init(vista **v) const
	{
		struct vista_opts o = {};
		o.log_path = log.c_str();
		o.log_size = 256 << 10;
		o.lanes = lanes;
		o.rio_flags = RIO_FORCE_CACHELINE;
		*v = nullptr;
		return vista_init(&o, v);
	}
};

// Transaction i on a plain buffer (the model) or through vista (v): a
// transfer that inserts a history row, declared new in one of four ways
// (one of them in pieces, more than the one-pass first batch takes).
// Every fifth one first runs a transaction that it aborts.
int tx(vista *v, char *b, uint64_t i)
{
	txrun::transfer t = txrun::transfer_of(b, i);
	char *h = t.h;
	int rc = 0;
	if (v && i % 5 == 3) {
		rc = vista_begin_transaction(v, 0);
		struct vista_range r[2] = { { t.a, 8 }, { h, HIST_LEN } };
		if (rc == 0)
			rc = vista_set_ranges_new(v, 2, 1, r);
		if (rc)
			return rc;
		*t.a += 1000;
		memset(h, 0xee, HIST_LEN);
		if ((rc = vista_abort_transaction(v)) != 0)
			return rc;
	}
	if (v) {
		struct vista_range r[4] = { { t.a, 8 }, { t.c, 8 }, { b, 8 },
			{ h, HIST_LEN } };
		rc = vista_begin_transaction(v, 0);
		if (rc == 0 && i % 6 == 0)
			rc = vista_set_ranges_new(v, 4, 3, r);
		if (rc == 0 && i % 6 == 3) {
			// More than 16 ranges: the general path's first batch,
			// the row in touching pieces it merges.
			struct vista_range p[3 + HIST_PIECES];
			for (size_t k = 0; k < 3; k++)
				p[k] = r[k];
			for (size_t k = 0; k < HIST_PIECES; k++)
				p[3 + k] = { h + k * (HIST_LEN / HIST_PIECES),
					HIST_LEN / HIST_PIECES };
			rc = vista_set_ranges_new(v, 3 + HIST_PIECES, 3, p);
		}
		if (rc == 0 && i % 3 == 1) {
			rc = vista_set_ranges(v, 3, r);
			if (rc == 0)
				rc = vista_set_range_new(v, h, HIST_LEN);
		}
		if (rc == 0 && i % 3 == 2) {
			rc = vista_set_range_new(v, h, HIST_LEN);
			if (rc == 0)
				rc = vista_set_ranges(v, 3, r);
		}
		if (rc)
			return rc;
	}
	txrun::transfer_store(b, i, t);
	return v ? vista_end_transaction(v) : 0;
}

std::vector<char> model(uint64_t n)
{
	return txrun::model(tx, n);
}

// The state of the transactions that returned, or of one more -- the
// next one's history row aside: it is new in a transaction that did not
// commit, and nobody reads it.
std::string check(const Run &e, const std::string &report)
{
	return txrun::check(e, report, model, [](uint64_t c) {
		return std::make_pair(hist_at(c), HIST_LEN);
	});
}

} // namespace

TEST_CASE("new ranges: a power failure at every fence of a run",
	"[newrange-powercut]")
{
	// One lane: the commit stores no truncation (log.c L7); four: the
	// commit stores it lazily (L6).
	txrun::cut_every_fence<Run>(broken, 80, [](Run &) {}, tx, check);
	if (!broken)
		txrun::cut_every_fence<Run>(broken, 40,
			[](Run &e) { e.lanes = 4; }, tx, check);
}
