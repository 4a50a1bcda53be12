// SPDX-License-Identifier: BSD-3-Clause
// pword_crash_test.cpp -- Trinity and Quadra (bench/tpcb_tpcc/
// backend_pword.c) under power cuts: a writer runs their debit-credit and
// acknowledges each commit through a pipe; the power fails at a random
// fence (tests/vista/powercut.hpp, in its whole-line mode: these designs
// assume a line persists in program order, which vista does not); the
// design's recovery must leave debit-credit's invariants intact with every
// acknowledged transaction committed (at most one more), and must leave a
// database on which transactions run and commit again.
//
// Broken builds (bench/tpcb_tpcc/meson.build), each caught here:
// TB_BROKEN_TRINITY_ONE_FENCE (no fence before Trinity's sequence moves)
// by [trinity]; TB_BROKEN_QUADRA_NO_COUNT (Quadra's recovery keeps the
// last transaction without checking its counts) by [quadra].
// CRASH_ITERATIONS and TEST_SEED as in every crash test.
#include "../common/test_util.hpp"
#include "../vista/powercut.hpp"

#include <sys/wait.h>

extern "C" {
#include "tpcbench.h"
}

namespace {

#if defined(TB_BROKEN_TRINITY_ONE_FENCE)
const char *const broken = "trinity";
#elif defined(TB_BROKEN_QUADRA_NO_COUNT)
const char *const broken = "quadra";
#else
const char *const broken = nullptr;
#endif

const int kTx = 60; // transactions per writer

tb_opts opts(const std::string &dir)
{
	tb_opts o{};
	o.workload = "debit-credit";
	o.domain = TB_DOMAIN_CACHELINE;
	o.db_size = 1u << 20;
	o.work_dir = dir.c_str();
	o.pmem_dir = "/dev/shm";
	return o;
}

// Create the database, then run kTx transactions with the power failing
// at fence cut_at; acknowledge each commit on fd.  Never returns.
[[noreturn]] void writer(const tb_backend *b, const std::string &dir,
	uint64_t cut_at, uint64_t seed, int fd)
{
	tb_opts o = opts(dir);
	const tb_workload *w = b->layout(o.workload);
	void *wl, *ctx, *db;
	if (b->setup(&o) || w->init(&o, o.db_size, seed, &wl) ||
	    b->open(&o, 0, true, &ctx, &db))
		_exit(30);
	w->populate(wl, db);
	if (b->loaded(ctx))
		_exit(31);
	pc::st().whole_lines = true;
	pc::install(cut_at, seed ^ 0x5555);
	for (uint64_t i = 1; i <= kTx; i++) {
		if (w->tx(wl, db, b, ctx) != 0)
			_exit(32);
		if (write(fd, &i, sizeof(i)) != (ssize_t)sizeof(i))
			_exit(33);
	}
	_exit(b->close(ctx) ? 34 : 0);
}

// Recover the database the power cut left and check it; "" if it holds.
std::string recover_and_check(const tb_backend *b, const std::string &dir,
	uint64_t acked)
{
	tb_opts o = opts(dir);
	const tb_workload *w = b->layout(o.workload);
	void *wl, *ctx, *db;
	char why[512] = "";
	if (b->setup(&o) || w->init(&o, o.db_size, 99, &wl))
		return "setup failed";
	if (b->open(&o, 0, false, &ctx, &db)) {
		w->fini(wl);
		return "recovery (open) failed";
	}
	std::string bad;
	uint64_t committed = 0, again = 0;
	if (w->check_recovered(wl, db, &committed, why, sizeof(why)))
		bad = std::string("after recovery: ") + why;
	else if (committed < acked || committed > acked + 1)
		bad = "committed " + std::to_string(committed) + ", acknowledged " +
			std::to_string(acked);
	for (int i = 0; bad.empty() && i < 20; i++)
		if (w->tx(wl, db, b, ctx) != 0)
			bad = "a transaction after recovery failed";
	if (bad.empty() &&
	    w->check_recovered(wl, db, &again, why, sizeof(why)))
		bad = std::string("after 20 more transactions: ") + why;
	else if (bad.empty() && again != committed + 20)
		bad = "20 more transactions took the head from " +
			std::to_string(committed) + " to " + std::to_string(again);
	b->close(ctx);
	w->fini(wl);
	b->teardown(false);
	return bad;
}

void campaign(const tb_backend *b, uint64_t fences_per_tx)
{
	int n = test::iterations(150);
	test::Rng rng(test::seed());
	int cuts = 0, violations = 0;
	std::string first;
	for (int it = 0; it < n; it++) {
		test::TempDir dir;
		std::string d = dir.path + "/db";
		uint64_t cut_at = 1 + rng.below(kTx * fences_per_tx);
		uint64_t seed = rng.next();
		int p[2];
		REQUIRE(pipe(p) == 0);
		fflush(nullptr);
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			writer(b, d, cut_at, seed, p[1]);
		}
		close(p[1]);
		uint64_t v, acked = 0;
		while (read(p[0], &v, sizeof(v)) == (ssize_t)sizeof(v))
			acked = v;
		close(p[0]);
		int st = 0;
		REQUIRE(waitpid(pid, &st, 0) == pid);
		INFO("iteration " << it << " cut at fence " << cut_at);
		REQUIRE(((WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) ||
			(WIFEXITED(st) && WEXITSTATUS(st) == 0)));
		cuts += WIFSIGNALED(st);
		pc::adopt({ d + "/" + b->name + ".0.pool" });
		std::string why = recover_and_check(b, d, acked);
		if (!why.empty() && violations++ == 0)
			first = "iteration " + std::to_string(it) + ", cut at " +
				std::to_string(cut_at) + ": " + why;
	}
	INFO(first);
	REQUIRE(cuts > 0);
	if (broken != nullptr && std::string(broken) == b->name) {
		WARN("broken build: " << violations << " violations in " << cuts
				      << " power cuts; first: " << first);
		REQUIRE(violations > 0);
	} else {
		REQUIRE(violations == 0);
	}
}

} // namespace

TEST_CASE("Trinity keeps debit-credit whole across power cuts", "[trinity]")
{
	campaign(&tb_backend_trinity, 2);
}

TEST_CASE("Quadra keeps debit-credit whole across power cuts", "[quadra]")
{
	campaign(&tb_backend_quadra, 1);
}
