// SPDX-License-Identifier: BSD-3-Clause
// crash_pm.cpp -- libvista under pmemtest: every crash image of every
// fence of each workload (tests/pmemtest/vista_pm.c) must recover to a
// consistent state, with no lint (every flush needed, everything a commit
// promises durable at its durability point); so must every crash image of
// a recovery; and libvista's deliberately broken builds must be caught.
//
// PMEMTEST, VPM (the workload program), VPM_MOD (its checker module) and
// VPM_BROKEN (folder of the broken builds) are set by meson.
#include "pmemtest_util.hpp"

using pmt::env;
using pmt::Run;
using pmt::sh;

namespace {

const char *const scenarios[] = { "one_range", "many_ranges",
	"multi_segment", "heap", "abort", "auto", "auto_chain",
	"debit_credit" };

std::string pmemtest(const test::TempDir &d, const std::string &args)
{
	return env("PMEMTEST") + " run --seed 11 --timeout 120 --workdir " + d.path +
		" --out " + d / "out" + " --max-failures 20 " + args;
}

// A run with --lints-fatal passed.  Scanning (no userfaultfd here) cannot
// see a store that puts a line's old value back, so there it may call a
// needed flush redundant: only that lint is tolerated then.
void require_no_lints(const Run &r)
{
	if (r.out.find("stores found by userfaultfd") != std::string::npos) {
		REQUIRE(r.code == 0);
		return;
	}
	WARN("no userfaultfd: redundant-flush lints are not checked");
	REQUIRE((r.code == 0 || r.code == 3));
	for (const char *lint : { "warning: flush never fenced",
		     "warning: not durable at a durability point",
		     "warning: never made durable" })
		REQUIRE(r.out.find(lint) == std::string::npos);
}

} // namespace

TEST_CASE("every crash image of every vista workload recovers",
	"[vista-workloads]")
{
	for (const char *sc : scenarios) {
		DYNAMIC_SECTION(sc)
		{
			test::TempDir d;
			Run r = sh(pmemtest(d, "--lints-fatal --check-lib " +
				env("VPM_MOD") + ":pm_check_" + sc + " -- " +
				env("VPM") + " " + sc + " run " + d.path));
			INFO(r.out);
			pmt::Summary s = pmt::summary(r.out);
			REQUIRE(s.checked > 10);
			REQUIRE(s.bad == 0);
			require_no_lints(r);
		}
	}
}

TEST_CASE("every crash image of a vista recovery recovers",
	"[vista-recovery]")
{
	// The writer dies inside transaction 5 (kill -9 semantics: every
	// store is in the pools); the recovery is then traced from there.
	for (const char *sc : { "one_range", "multi_segment", "heap",
		     "auto_chain", "debit_credit" }) {
		DYNAMIC_SECTION(sc)
		{
			test::TempDir d;
			Run w = sh("VPM_STOP_AT=5 " + env("VPM") + " " + sc +
				" run " + d.path);
			REQUIRE(w.code == 0);
			std::string pools = " --pool " + d / "log" + " --pool " +
				d / "seg0";
			if (std::string(sc) == "multi_segment")
				pools += " --pool " + d / "seg1";
			Run r = sh(pmemtest(d, pools + " --twice --lints-fatal "
				"--check-lib " + env("VPM_MOD") + ":pm_check_" + sc +
				" -- " + env("VPM") + " " + sc + " check " +
				d.path));
			INFO(r.out);
			pmt::Summary s = pmt::summary(r.out);
			REQUIRE(s.checked > 1);
			REQUIRE(s.bad == 0);
			require_no_lints(r);
		}
	}
}

TEST_CASE("vista recovery crashed at every fence (--crash-recovery)",
	"[vista-crash-recovery]")
{
	for (const char *sc : { "multi_segment", "heap" }) {
		DYNAMIC_SECTION(sc)
		{
			test::TempDir d;
			Run r = sh(pmemtest(d, "--crash-recovery 12 --check-lib " +
				env("VPM_MOD") + ":pm_check_" + sc + " -- " +
				env("VPM") + " " + sc + " run " + d.path));
			INFO(r.out);
			pmt::Summary rec = pmt::summary(r.out,
				"recovery images: ");
			REQUIRE(rec.checked > 0);
			REQUIRE(rec.bad == 0);
			REQUIRE(pmt::summary(r.out).bad == 0);
			REQUIRE(r.code == 0);
		}
	}
}

TEST_CASE("libvista's broken builds are caught", "[vista-broken]")
{
	// Each broken build checks itself (command mode: its own, broken,
	// recovery runs on each image).  The test passes only if pmemtest
	// finds an inconsistent image.
	for (const char *b : { "commit_order", "no_log_persist" }) {
		DYNAMIC_SECTION(b)
		{
			test::TempDir d;
			std::string exe = env("VPM_BROKEN") + "/vista_pm_broken_" + b;
			Run r = sh(pmemtest(d, "--check '" + exe +
				" one_range check {dir}' -- " + exe +
				" one_range run " + d.path));
			INFO(r.out);
			REQUIRE(pmt::summary(r.out).bad > 0);
			REQUIRE(r.code == 1);
		}
	}
}
