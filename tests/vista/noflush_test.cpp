// SPDX-License-Identifier: BSD-3-Clause
// noflush_test.cpp -- no-flush (lazy) commit: VISTA_TX_NO_FLUSH and
// vista_flush() (tx.c N1-N3)
//
// [noflush]: the calls, their misuse, abort inside a held group; and
// [noflush-kill], a kill before and after vista_flush (a SIGKILL keeps
// every store: only the log decides, so a group that is not flushed must
// be rolled back whole).
// [noflush-crash]: power cuts (powercut.hpp, lines and words torn) at
// random fences of a writer that runs groups of no-flush transactions,
// some aborted, and flushes after each group; after recovery the counters
// must add up to the total, and the total must be the last flushed one
// or, if the power failed inside a flush, the one it was flushing.
// The broken build VISTA_BROKEN_NOFLUSH_TRUNCATE (a no-flush end discards
// its records) must be caught by [noflush-kill] and [noflush-crash].  CRASH_ITERATIONS, TEST_SEED.
#include "powercut.hpp"
#include "vista_test.hpp"

#include <sys/wait.h>

using vt::Env;

namespace {

#ifdef VISTA_BROKEN_NOFLUSH_TRUNCATE
const bool broken = true;
#else
const bool broken = false;
#endif

struct Root {
	int64_t total;
	int64_t pad[7];
	int64_t cell[256];
};

} // namespace

TEST_CASE("no-flush transactions: calls, misuse, abort inside a group",
	"[noflush]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	int64_t *w = (int64_t *)vista_segment_base(s);

	VREQUIRE_RC(vista_begin_transaction(v,
			VISTA_TX_NO_FLUSH | VISTA_TX_AUTO), -EINVAL);
	VREQUIRE_OK(vista_flush(v)); // nothing held
	uint64_t f0 = vt::stats(v).fences;

	// Two no-flush transactions: visible at once, no fence at their end.
	for (int i = 1; i <= 2; i++) {
		VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_NO_FLUSH));
		VREQUIRE_OK(vista_set_range(v, &w[0], 8));
		w[0] = i;
		uint64_t f = vt::stats(v).fences;
		VREQUIRE_OK(vista_end_transaction(v));
		REQUIRE(vt::stats(v).fences == f);
		REQUIRE_FALSE(vista_in_transaction(v));
	}
	REQUIRE(w[0] == 2);
	// Each logs its range (one record fence), also a byte the group
	// logged already: coalescing is per transaction (N1).
	REQUIRE(vt::stats(v).fences == f0 + 2);

	// An abort inside the group undoes this transaction only.
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_NO_FLUSH));
	struct vista_range r[2] = { { &w[0], 8 }, { &w[1], 8 } };
	VREQUIRE_OK(vista_set_ranges(v, 2, r));
	w[0] = 100;
	w[1] = 200;
	VREQUIRE_OK(vista_set_range(v, &w[0], 8)); // again: newest first
	w[0] = 300;
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(w[0] == 2);
	REQUIRE(w[1] == 0);

	// No heap inside; vista_flush refused inside a transaction.
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_NO_FLUSH));
	void *p = nullptr;
	VREQUIRE_RC(vista_malloc(s, 64, &p), -EINVAL);
	VREQUIRE_RC(vista_flush(v), VISTA_EINTX);
	VREQUIRE_OK(vista_end_transaction(v));

	// The flush is one commit fence.
	uint64_t f = vt::stats(v).fences;
	VREQUIRE_OK(vista_flush(v));
	REQUIRE(vt::stats(v).fences == f + 1);
	VREQUIRE_OK(vista_flush(v));
	REQUIRE(vt::stats(v).fences == f + 1);

	// A held group blocks unmapping its segment until flushed.
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_NO_FLUSH));
	VREQUIRE_OK(vista_set_range(v, &w[2], 8));
	w[2] = 7;
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_RC(vista_unmap(s), VISTA_EINTX);
	// A durable transaction commits the group first.
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_unmap(s));
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("thread exit, detach and fini make a held group durable",
	"[noflush]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	int64_t *w = (int64_t *)vista_segment_base(s);
	auto group = [&](int64_t val) {
		VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_NO_FLUSH));
		VREQUIRE_OK(vista_set_range(v, &w[0], 8));
		w[0] = val;
		VREQUIRE_OK(vista_end_transaction(v));
	};
	// A held group refuses the unmap of its segment (above): once the
	// thread that holds it exits, or detaches, the unmap goes through.
	int rc = -1;
	std::thread t([&] {
		if (vista_begin_transaction(v, VISTA_TX_NO_FLUSH) == 0 &&
		    vista_set_range(v, &w[1], 8) == 0) {
			w[1] = 5;
			rc = vista_end_transaction(v);
		}
	});
	t.join();
	VREQUIRE_OK(rc);
	group(1);
	VREQUIRE_OK(vista_thread_detach(v));
	VREQUIRE_OK(vista_unmap(s));
	s = vt::map(v, e.seg("a"), 0);
	w = (int64_t *)vista_segment_base(s);
	REQUIRE(w[0] == 1);
	REQUIRE(w[1] == 5);
	// fini flushes too: the value survives a reopen.
	group(2);
	VREQUIRE_OK(vista_fini(v));
	v = e.open();
	VREQUIRE_OK(vista_map(v, e.seg("a").c_str(), vt::addr(0), 1 << 20, 0,
		&s));
	REQUIRE(((int64_t *)vista_segment_base(s))[0] == 2);
	VREQUIRE_OK(vista_fini(v));
}

// A child runs three no-flush transactions (w[0] = 1, 2, 3), flushes
// after `flush_after` of them (0: never) and dies by _exit: no fini, no
// thread exit.  What does recovery leave?
static int64_t killed_group(int flush_after)
{
	Env e;
	{
		vista *v = e.open();
		vt::map(v, e.seg("a"), 0);
		VREQUIRE_OK(vista_fini(v));
	}
	vt::crash_in_child([&] {
		vista *v = nullptr;
		vista_segment *s = nullptr;
		CHILD_OK(e.init(&v));
		CHILD_OK(vista_map(v, e.seg("a").c_str(), vt::addr(0), 1 << 20,
			0, &s));
		int64_t *w = (int64_t *)vista_segment_base(s);
		for (int i = 1; i <= 3; i++) {
			CHILD_OK(vista_begin_transaction(v, VISTA_TX_NO_FLUSH));
			CHILD_OK(vista_set_range(v, &w[0], 8));
			w[0] = i;
			CHILD_OK(vista_end_transaction(v));
			if (i == flush_after)
				CHILD_OK(vista_flush(v));
		}
	});
	vista *v = e.open();
	vista_segment *s = nullptr;
	VREQUIRE_OK(vista_map(v, e.seg("a").c_str(), vt::addr(0), 1 << 20, 0,
		&s));
	int64_t got = *(int64_t *)vista_segment_base(s);
	VREQUIRE_OK(vista_fini(v));
	return got;
}

TEST_CASE("a killed process loses its no-flush group whole, and keeps "
	  "what it flushed",
	"[noflush][noflush-kill]")
{
	int64_t none = killed_group(0), two = killed_group(2);
	if (broken) {
		WARN("broken build: after a kill, no flush -> " << none
			<< ", flushed after 2 -> " << two);
		REQUIRE((none != 0 || two != 2));
	} else {
		REQUIRE(none == 0);
		REQUIRE(two == 2);
	}
}

TEST_CASE("no-flush groups under power cuts at random fences",
	"[noflush-crash]")
{
	const int group = 4, ntx = 40;
	int n = test::iterations(120);
	test::Rng rng(test::seed());
	int cuts = 0, violations = 0;
	std::string first;
	for (int it = 0; it < n; it++) {
		Env e(RIO_FORCE_CACHELINE);
		{
			vista *v = e.open();
			vt::map(v, e.seg("a"), 0);
			VREQUIRE_OK(vista_fini(v));
		}
		uint64_t cut_at = 1 + rng.below(ntx * 3);
		uint64_t seed = rng.next();
		int p[2];
		REQUIRE(pipe(p) == 0);
		fflush(nullptr);
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			vista *v = nullptr;
			vista_segment *s = nullptr;
			pc::install(cut_at, seed);
			CHILD_OK(e.init(&v));
			CHILD_OK(vista_map(v, e.seg("a").c_str(), vt::addr(0),
				1 << 20, 0, &s));
			Root *root = (Root *)vista_segment_base(s);
			test::Rng wr(seed);
			for (int i = 1; i <= ntx; i++) {
				int k = (int)wr.below(256);
				CHILD_OK(vista_begin_transaction(v,
					VISTA_TX_NO_FLUSH));
				struct vista_range r[2] = {
					{ &root->cell[k], 8 },
					{ &root->total, 8 } };
				CHILD_OK(vista_set_ranges(v, 2, r));
				root->cell[k] += i;
				root->total += i;
				if (wr.below(5) == 0)
					CHILD_OK(vista_abort_transaction(v));
				else
					CHILD_OK(vista_end_transaction(v));
				if (i % group == 0) {
					// Announce, flush, acknowledge.
					int64_t a[2] = { 0, root->total };
					if (write(p[1], a, sizeof(a)) != sizeof(a))
						_exit(20);
					CHILD_OK(vista_flush(v));
					a[0] = 1;
					if (write(p[1], a, sizeof(a)) != sizeof(a))
						_exit(20);
				}
			}
			_exit(vista_fini(v) ? 21 : 0);
		}
		close(p[1]);
		int64_t a[2], flushed = 0, flushing = 0;
		while (read(p[0], a, sizeof(a)) == (ssize_t)sizeof(a)) {
			if (a[0])
				flushed = a[1];
			else
				flushing = a[1];
		}
		close(p[0]);
		int st = 0;
		REQUIRE(waitpid(pid, &st, 0) == pid);
		INFO("iteration " << it << ", cut at fence " << cut_at);
		REQUIRE(((WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) ||
			(WIFEXITED(st) && WEXITSTATUS(st) == 0)));
		cuts += WIFSIGNALED(st);
		pc::adopt({ e.log, e.seg("a") });
		vista *v = e.open();
		vista_segment *s = nullptr;
		VREQUIRE_OK(vista_map(v, e.seg("a").c_str(), vt::addr(0),
			1 << 20, 0, &s));
		const Root *root = (const Root *)vista_segment_base(s);
		int64_t sum = 0;
		for (int k = 0; k < 256; k++)
			sum += root->cell[k];
		std::string why;
		if (sum != root->total)
			why = "cells sum to " + std::to_string(sum) +
				", total " + std::to_string(root->total);
		else if (root->total != flushed && root->total != flushing)
			why = "total " + std::to_string(root->total) +
				", last flushed " + std::to_string(flushed) +
				", flushing " + std::to_string(flushing);
		VREQUIRE_OK(vista_fini(v));
		if (!why.empty() && violations++ == 0)
			first = "iteration " + std::to_string(it) + ", cut at " +
				std::to_string(cut_at) + ": " + why;
	}
	INFO(first);
	REQUIRE(cuts > 0);
	if (broken) {
		WARN("broken build: " << violations << " violations in " << cuts
				      << " power cuts; first: " << first);
		REQUIRE(violations > 0);
	} else {
		REQUIRE(violations == 0);
	}
}
