// SPDX-License-Identifier: BSD-3-Clause
// crash_pm.cpp -- libvista under pmemtest: every crash image of every
// fence of each workload (tests/pmemtest/vista_pm.c) must recover to a
// consistent state; so must every crash image of a recovery; and
// libvista's deliberately broken builds must be caught.
//
// PMEMTEST, VPM (the workload program), VPM_MOD (its checker module) and
// VPM_BROKEN (folder of the broken builds) are set by meson.
#include "../common/test_util.hpp"

#include <cstdio>
#include <regex>

namespace {

std::string env(const char *name)
{
	const char *v = getenv(name);
	REQUIRE(v != nullptr);
	return v;
}

struct Run {
	int code = -1;
	std::string out;
};

Run sh(const std::string &cmd)
{
	Run r;
	FILE *f = popen((cmd + " 2>&1").c_str(), "r");
	REQUIRE(f != nullptr);
	char buf[4096];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		r.out.append(buf, n);
	int st = pclose(f);
	r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return r;
}

long checked(const std::string &out, long *bad)
{
	std::smatch m;
	std::regex re("images: ([0-9]+) checked, ([0-9]+) inconsistent");
	REQUIRE(std::regex_search(out, m, re));
	*bad = std::stol(m[2]);
	return std::stol(m[1]);
}

const char *const scenarios[] = { "one_range", "many_ranges",
	"multi_segment", "heap", "abort", "auto", "debit_credit" };

std::string pmemtest(const test::TempDir &d, const std::string &args)
{
	return env("PMEMTEST") + " run --seed 11 --workdir " + d.path +
		" --out " + d / "out" + " --max-failures 20 " + args;
}

} // namespace

TEST_CASE("every crash image of every vista workload recovers",
	"[vista-workloads]")
{
	for (const char *sc : scenarios) {
		DYNAMIC_SECTION(sc)
		{
			test::TempDir d;
			Run r = sh(pmemtest(d, "--check-lib " + env("VPM_MOD") +
				":pm_check_" + sc + " -- " + env("VPM") + " " +
				sc + " run " + d.path));
			INFO(r.out);
			long bad;
			REQUIRE(checked(r.out, &bad) > 10);
			REQUIRE(bad == 0);
			REQUIRE(r.code == 0);
		}
	}
}

TEST_CASE("every crash image of a vista recovery recovers",
	"[vista-recovery]")
{
	// The writer dies inside transaction 5 (kill -9 semantics: every
	// store is in the pools); the recovery is then traced from there.
	for (const char *sc : { "one_range", "multi_segment", "heap",
		     "debit_credit" }) {
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
			Run r = sh(pmemtest(d, pools + " --twice --check-lib " +
				env("VPM_MOD") + ":pm_check_" + sc + " -- " +
				env("VPM") + " " + sc + " check " + d.path));
			INFO(r.out);
			long bad;
			REQUIRE(checked(r.out, &bad) > 1);
			REQUIRE(bad == 0);
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
			long bad;
			checked(r.out, &bad);
			REQUIRE(bad > 0);
			REQUIRE(r.code == 1);
		}
	}
}
