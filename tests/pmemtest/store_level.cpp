// SPDX-License-Identifier: BSD-3-Clause
// store_level.cpp -- pmemtest on the bugs that need store-level crash
// states, subsets beyond k, line-exact lints and reports by missing
// operation, and on ports of published persistent-memory bug classes:
// every buggy twin is flagged where its source says (a BUG-SITE comment),
// every fixed twin is clean.
//
// PMEMTEST names the driver, PMT_EXAMPLES the folder of example programs
// and checker modules, PMT_EXAMPLES_SRC their sources (set by meson).
#include "pmemtest_util.hpp"

#include <fstream>

using pmt::env;
using pmt::Run;
using pmt::sh;

namespace {

struct Twin {
	const char *example;
	const char *variant; // "" = the fixed twin
	const char *expect;  // "ok", "inconsistent", or a lint's title
	const char *marker;  // BUG-SITE comment naming the line, or ""
	const char *say;     // what the report says before "(FILE:LINE)"
	long max_unique;     // failure groups at most (0: no bound)
};

// The line of `marker` in an example's source.
long site_line(const char *example, const char *marker)
{
	std::ifstream f(env("PMT_EXAMPLES_SRC") + "/" + example + ".c");
	std::string l;
	long n = 0;
	while (std::getline(f, l)) {
		n++;
		size_t at = l.find(std::string("/* ") + marker + " */");
		if (at != std::string::npos)
			return n;
	}
	FAIL("no " << marker << " in " << example << ".c");
	return 0;
}

std::string name(const Twin &t)
{
	std::string n = t.example;
	if (*t.variant)
		n += "_" + std::string(t.variant);
	return n;
}

Run run_twin(const Twin &t, const std::string &extra, test::TempDir &d)
{
	std::string ex = env("PMT_EXAMPLES");
	std::string cmd = env("PMEMTEST") + " run --seed 7 --timeout 120 " +
		"--workdir " + d.path + " --out " + d / "out" +
		" --max-failures 400 --lints-fatal " + extra + " --check-lib " +
		ex + "/libex_" + name(t) + ".so:pmemtest_check -- " + ex +
		"/ex_" + name(t) + " run " + d / "pool";
	Run r = sh(cmd);
	r.out = cmd + "\n" + r.out;
	return r;
}

void check_twin(const Twin &t, const std::string &extra = "")
{
	test::TempDir d;
	Run r = run_twin(t, extra, d);
	INFO(r.out);
	auto [checked, bad, uniq] = pmt::summary(r.out);
	REQUIRE(checked > 0);
	std::string expect = t.expect;
	if (expect == "ok") {
		REQUIRE(r.code == 0);
		REQUIRE(bad == 0);
		REQUIRE(r.out.find("warning:") == std::string::npos);
		return;
	}
	if (expect == "inconsistent") {
		REQUIRE(r.code == 1);
		REQUIRE(bad > 0);
		if (t.max_unique)
			REQUIRE(uniq <= t.max_unique);
	} else {
		REQUIRE(r.code == 3);
		REQUIRE(bad == 0);
		REQUIRE(r.out.find("warning: " + expect) != std::string::npos);
	}
	if (*t.marker) {
		std::string at = std::string(t.say) + "(" + t.example + ".c:" +
			std::to_string(site_line(t.example, t.marker)) + ")";
		INFO("expected: " << at);
		REQUIRE(r.out.find(at) != std::string::npos);
	}
}

const Twin twins[] = {
	// 1. valid, then data, into one line before one flush and fence.
	{ "line_flag", "", "ok", "", "", 0 },
	{ "line_flag", "flag_first", "inconsistent", "BUG-SITE",
		"store order within one line: the store at ex_run ", 1 },
	// 2. a recovery wrong only when 7 of the 8 pending lines are in.
	{ "parity_stripe", "", "ok", "", "", 0 },
	{ "parity_stripe", "repair_self", "inconsistent", "", "", 0 },
	// ... and when, besides, one line of nine must not be in: found by
	// read-driven exploration, at the fence of the update.
	{ "stripe_intent", "", "ok", "", "", 0 },
	{ "stripe_intent", "unannounced", "inconsistent", "BUG-SITE",
		"ex_run ", 1 },
	// 3. a redundant persist hidden, per page, by a store next door.
	{ "neighbour_persist", "", "ok", "", "", 0 },
	{ "neighbour_persist", "redundant_persist", "redundant flush",
		"BUG-SITE", "<- ex_run ", 0 },
	// 4. data flushed, flag stored later on the same page: a fence is
	// missing, not a flush; one missing operation, one group.
	{ "flag_after_flush", "", "ok", "", "", 0 },
	{ "flag_after_flush", "missing_fence", "inconsistent",
		"BUG-SITE fence", "likely missing: a fence after the flush at "
		"ex_run ", 1 },
	{ "flag_after_flush", "missing_flush", "inconsistent",
		"BUG-SITE flush", "likely missing: a flush (and fence) of the "
		"line stored at ex_run ", 1 },
};

const Twin ports[] = {
	{ "pstack", "", "ok", "", "", 0 },
	{ "pstack", "node_unpersisted", "inconsistent", "BUG-SITE flush",
		"likely missing: a flush (and fence) of the line stored at "
		"push ", 0 },
	{ "pstack", "top_early", "inconsistent", "", "", 1 },
	{ "cceh_split", "", "ok", "", "", 0 },
	{ "cceh_split", "segment_unpersisted", "inconsistent",
		"BUG-SITE flush", "likely missing: a flush (and fence) of the "
		"line stored at split ", 1 },
	{ "cceh_split", "key_first", "inconsistent", "BUG-SITE",
		"store order within one line: the store at put ", 0 },
};

} // namespace

TEST_CASE("each buggy twin is flagged at its line, each fixed twin is clean",
	"[twins]")
{
	for (const Twin &t : twins)
		DYNAMIC_SECTION(name(t)) { check_twin(t); }
}

TEST_CASE("the 7-of-8 recovery bug is found without raising k, and the "
	  "run says how much of the crash-state space it tried", "[twins]")
{
	// k stays 2 and no random subsets: the all-but-one images reach
	// the repair.  The summary states the coverage.
	test::TempDir d;
	Twin t = { "parity_stripe", "repair_self", "inconsistent", "", "", 0 };
	Run r = run_twin(t, "--k 2 --random 0", d);
	INFO(r.out);
	REQUIRE(r.code == 1);
	REQUIRE(r.out.find("pmemtest: crash states: 2^") != std::string::npos);
	REQUIRE(r.out.find("% of them tried") != std::string::npos);
}

TEST_CASE("read-driven exploration branches only on the lines recovery "
	  "read: the 7-of-8 bug that needs a ninth line out is found, and "
	  "every state of 41 pending lines but the intermediate values is "
	  "covered", "[twins]")
{
	test::TempDir d;
	Twin t = { "stripe_intent", "unannounced", "inconsistent", "", "", 0 };
	Run r = run_twin(t, "", d);
	INFO(r.out);
	REQUIRE(r.code == 1);
	REQUIRE(r.out.find("pmemtest: read-driven exploration at 3 crash "
		"points") != std::string::npos);
	// The recovery reads the intent and stripe page, never the
	// payload's: 2^9 images for each of the three updates, not 2^41.
	auto [checked, bad, uniq] = pmt::summary(r.out);
	REQUIRE(checked < 4000);
	REQUIRE(bad > 0);
	// The same trace and seed explored by subsets (k, all but one,
	// random) misses it: two lines must be out at once.
	test::TempDir d2;
	Run s = run_twin(t, "--explore subsets", d2);
	INFO(s.out);
	REQUIRE(s.code == 0);
	REQUIRE(s.out.find("exploration by subsets") != std::string::npos);
}

TEST_CASE("--tear: a record published by one 16-byte store is found torn "
	  "at its store; without --tear, and with the key stored alone, "
	  "last, it is clean", "[twins]")
{
	const Twin fixed = { "wide_record", "", "ok", "", "", 0 };
	const Twin bug = { "wide_record", "wide_publish", "inconsistent",
		"BUG-SITE", "likely missing: an atomic store: the store at "
		"ex_run ", 1 };
	SECTION("fixed, torn") { check_twin(fixed, "--tear"); }
	SECTION("buggy, torn") { check_twin(bug, "--tear"); }
	SECTION("buggy, whole stores") {
		// One instruction's store to one line is in memory or not.
		check_twin({ "wide_record", "wide_publish", "ok", "", "", 0 });
	}
	SECTION("the run says what it tore") {
		test::TempDir d;
		Run r = run_twin(bug, "--tear", d);
		INFO(r.out);
		REQUIRE(r.out.find("pmemtest: --tear: 16 stores wider than 8 "
			"bytes torn") != std::string::npos);
	}
}

TEST_CASE("--explore: bad values and a command checker are refused",
	  "[twins]")
{
	test::TempDir d;
	Twin t = { "stripe_intent", "", "ok", "", "", 0 };
	Run r = run_twin(t, "--explore everything", d);
	INFO(r.out);
	REQUIRE(r.code == 2);
	REQUIRE(r.out.find("--explore must be reads or subsets") !=
		std::string::npos);
	std::string ex = env("PMT_EXAMPLES");
	Run c = sh(env("PMEMTEST") + " run --explore reads --workdir " +
		d.path + " --check '" + ex + "/ex_stripe_intent check {image}' "
		"-- " + ex + "/ex_stripe_intent run " + d / "pool");
	INFO(c.out);
	REQUIRE(c.code == 2);
	REQUIRE(c.out.find("--explore reads needs --check-lib") !=
		std::string::npos);
}

TEST_CASE("ports of published bug classes: each bug flagged, each fixed "
	  "program clean", "[ports]")
{
	for (const Twin &t : ports)
		DYNAMIC_SECTION(name(t)) { check_twin(t); }
}

TEST_CASE("one bug is one failure group: a missing flush with an unordered "
	  "flush beside it, a store the compiler moved, a marker persisted "
	  "first, an unlogged shift, a half-flushed node", "[grouping]")
{
	// Examples whose checker is one module for every variant.
	struct {
		const char *example, *variant;
	} bugs[] = {
		{ "redo_log", "missing_flush" },
		{ "pmem_log", "marker_first" },
		{ "sorted_array", "no_log" },
		{ "list_insert", "wrong_range" },
	};
	std::string ex = env("PMT_EXAMPLES");
	for (const auto &b : bugs) {
		DYNAMIC_SECTION(b.example << "_" << b.variant) {
			test::TempDir d;
			std::string cmd = env("PMEMTEST") + " run --seed 7 "
				"--timeout 120 --no-lints --workdir " + d.path +
				" --out " + d / "out" + " --max-failures 400 "
				"--check-lib " + ex + "/libex_" + b.example +
				".so:pmemtest_check -- " + ex + "/ex_" +
				b.example + "_" + b.variant + " run " +
				d / "pool";
			Run r = sh(cmd);
			INFO(cmd << "\n" << r.out);
			auto [checked, bad, uniq] = pmt::summary(r.out);
			REQUIRE(r.code == 1);
			REQUIRE(bad > 1);
			REQUIRE(uniq == 1);
		}
	}
}
