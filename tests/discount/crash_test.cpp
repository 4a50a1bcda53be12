// SPDX-License-Identifier: BSD-3-Clause
// crash_test.cpp -- unmodified bc, lua5.4 and ed under dc-run, SIGKILLed at
//                   random points under every protocol (harness.hpp)
//
// Writer: the program, fed a script at typist speed.  Checker: dc-equiv
// against a failure-free run on the input the surviving execution
// consumed, and the files it wrote.  Broken variant (DC_BROKEN build of
// libdc, CBNDVS without the commit before a visible event): the same
// checker must catch it.  Shares of the kills run with write-protect dirty
// tracking (dc-run --tracking wp) and with the memory in the persistent
// segment and an undo log (--tracking undo) instead of the default; a
// broken build of the latter that logs no before-image must be caught.
#include <cstring>
#include <functional>

#include "harness.hpp"

using dctest::Outcome;

static const char *const protos[] = { "cpvs", "cand", "cbndvs", "cand-log",
	"cbndvs-log" };

// Each leg (a protocol, and cbndvs with the other trackings) gets its
// share of the kills; a program that finishes before its share is used up
// (ed reads its script quickly) is run again from the start, in a fresh
// directory.
static void run_all(const dctest::Prog &p, int kills_total)
{
	struct Leg {
		const char *proto, *tracking;
	};
	std::vector<Leg> legs;
	for (const char *pr : protos)
		legs.push_back({ pr, nullptr });
	legs.push_back({ "cbndvs", "wp" });
	legs.push_back({ "cbndvs", "undo" });
	legs.push_back({ "cand-log", "undo" });
	test::Rng rng(test::seed());
	int per = kills_total / (int)legs.size() + 1, kills = 0;
	for (const Leg &l : legs) {
		int mine = 0;
		for (int runs = 0; mine < per && runs < 4 * per; runs++) {
			Outcome o = dctest::crash_run(p, l.proto, per - mine,
				rng, "", 4, "/dev/shm", l.tracking);
			INFO(o.why);
			WARN(p.name << " " << l.proto << " "
				    << (l.tracking ? l.tracking : "uffd")
				    << ": " << o.kills << " kills, " << o.lost
				    << " input bytes dropped by crashes");
			REQUIRE(o.equivalent);
			REQUIRE(o.files_equal);
			// write-protect tracking was in use: writes faulted
			// (undo: and were logged, the memory was moved)
			if (l.tracking)
				REQUIRE(dctest::stat_of(o.stats,
						"wp_faults") > 0);
			if (l.tracking && !strcmp(l.tracking, "undo")) {
				REQUIRE(dctest::stat_of(o.stats,
						"undo_bytes") > 0);
				REQUIRE(dctest::stat_of(o.stats,
						"seg_pages") > 0);
			}
			mine += o.kills;
		}
		kills += mine;
	}
	REQUIRE(kills >= kills_total);
}

static int total_kills()
{
	return test::iterations(50);
}

TEST_CASE("bc survives SIGKILL under every protocol", "[crash][bc]")
{
	run_all(dctest::bc_prog(), total_kills());
}

TEST_CASE("lua5.4 survives SIGKILL under every protocol", "[crash][lua]")
{
	run_all(dctest::lua_prog(dctest::env_or("DC_REPL", "repl.lua")),
		total_kills());
}

TEST_CASE("ed survives SIGKILL under every protocol", "[crash][ed]")
{
	run_all(dctest::ed_prog(), total_kills());
}

// A broken build must be caught: up to 6 kill runs, until one recovers
// to a state that differs from a clean run.
static void require_caught(const std::function<Outcome(test::Rng &)> &run)
{
	test::Rng rng(test::seed());
	int caught = 0;
	for (int runs = 0; runs < 6 && caught == 0; runs++) {
		Outcome o = run(rng);
		if (!o.equivalent || !o.files_equal) {
			caught++;
			WARN("broken variant caught: " << o.why);
		}
	}
	REQUIRE(caught > 0);
}

TEST_CASE("a protocol that skips the commit before a visible event is "
	  "caught", "[crash][broken]")
{
	std::string lib = dctest::env_or("DC_BROKEN_LIB", "");
	REQUIRE(!lib.empty());
	require_caught([&](test::Rng &rng) {
		return dctest::crash_run(dctest::bc_prog(), "cbndvs", 10, rng,
			lib);
	});
}

TEST_CASE("memory in the segment without before-images is caught",
	"[crash][broken-undo]")
{
	// the broken build writes no undo entry: a kill after the program
	// changed memory since its last checkpoint leaves the change in the
	// segment, and the recovered run diverges
	std::string lib = dctest::env_or("DC_BROKEN_UNDO_LIB", "");
	REQUIRE(!lib.empty());
	require_caught([&](test::Rng &rng) {
		return dctest::crash_run(dctest::bc_prog(), "cbndvs", 10, rng,
			lib, 4, "/dev/shm", "undo");
	});
}

TEST_CASE("bc survives SIGKILL with the redo log flushed at every commit",
	"[crash][flush]")
{
	// the test build of libdc, told to apply every checkpoint to the
	// shadow image at once: kills land inside flushes too
	std::string lib = dctest::env_or("DC_TEST_LIB", "");
	REQUIRE(!lib.empty());
	setenv("DC_TEST_REDO_MAX", "1", 1);
	test::Rng rng(test::seed());
	int kills = 0;
	for (const char *pr : { "cpvs", "cand-log" }) {
		Outcome o = dctest::crash_run(dctest::bc_prog(), pr,
			total_kills() / 4, rng, lib);
		INFO(o.why);
		REQUIRE(o.equivalent);
		REQUIRE(o.files_equal);
		kills += o.kills;
	}
	unsetenv("DC_TEST_REDO_MAX");
	REQUIRE(kills > 0);
}

TEST_CASE("bc survives SIGKILL with its checkpoint on a disk file system",
	"[crash][disk]")
{
	// /var/tmp (ext4 here): every log append and checkpoint is synced;
	// with the memory in the segment, every before-image too
	test::Rng rng(test::seed());
	for (const char *tr : { "uffd", "undo" }) {
		Outcome o = dctest::crash_run(dctest::bc_prog(), "cbndvs",
			total_kills() / 5, rng, "", 4, "/var/tmp", tr);
		INFO(tr << ": " << o.why);
		REQUIRE(o.equivalent);
		REQUIRE(o.files_equal);
		REQUIRE(o.kills > 0);
	}
}
