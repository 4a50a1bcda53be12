// SPDX-License-Identifier: BSD-3-Clause
// pm_test.cpp -- libckr's pool storage under pmemtest: every crash image
// of every fence of three checkpoints (tests/ckr/ckr_pm.c) leaves each
// slot incomplete or exactly its epoch's state, recovery loads the newest
// complete one, every checkpoint is durable when ckr_checkpoint_wait
// returns; and the broken build that writes a slot's header before its
// data is caught.
//
// The log pool: every crash image of every group commit (ckr_pm logrun)
// recovers the durable prefix, replaying each action as logged and none
// torn, and loses no acknowledged action; the broken build that checks a
// record by its header alone is caught.
//
// PMEMTEST, CKR_PM, CKR_PM_BROKEN and CKR_PM_BROKEN_CSUM are set by meson.
#include "../pmemtest/pmemtest_util.hpp"

using pmt::env;
using pmt::Run;
using pmt::sh;

namespace {

// pmemtest on ckr_pm (or a broken build of it), its directory DIR/ckr.
// Every single pending line and 8 random subsets per crash point; a fork
// server per job (a plain command).
Run ckr_pmemtest(const test::TempDir &d, const std::string &exe,
	const char *run = "run", const char *check = "check")
{
	std::string dir = d / "ckr";
	REQUIRE(sh(exe + " setup " + dir).code == 0);
	return sh(env("PMEMTEST") + " run --seed 7 --timeout 120 --workdir " +
		d.path + " --out " + d / "out" + " --max-failures 5 " +
		"--k 1 --random 8 --pool " + dir + "/ckpt.pool --pool " + dir +
		"/log.pool --check '" + exe + " " + check + " {dir}' -- " +
		exe + " " + run + " " + dir);
}

} // namespace

TEST_CASE("every crash image of a slot write recovers a whole checkpoint",
	"[pm]")
{
	test::TempDir d;
	Run r = ckr_pmemtest(d, env("CKR_PM"));
	INFO(r.out);
	pmt::Summary s = pmt::summary(r.out);
	REQUIRE(s.checked > 50);
	REQUIRE(s.bad == 0);
	REQUIRE(r.code == 0);
	// Every checkpoint was durable when ckr_checkpoint_wait returned.
	REQUIRE(r.out.find("not durable at a durability point") ==
		std::string::npos);
}

TEST_CASE("a slot marked complete before its data is durable is caught",
	"[pm-broken]")
{
	test::TempDir d;
	Run r = ckr_pmemtest(d, env("CKR_PM_BROKEN"));
	INFO(r.out);
	REQUIRE(pmt::summary(r.out).bad > 0);
	REQUIRE(r.code == 1);
}

TEST_CASE("every crash image of a group commit recovers the durable prefix",
	"[pm-log]")
{
	test::TempDir d;
	Run r = ckr_pmemtest(d, env("CKR_PM"), "logrun", "logcheck");
	INFO(r.out);
	pmt::Summary s = pmt::summary(r.out);
	REQUIRE(s.checked > 20);
	REQUIRE(s.bad == 0);
	REQUIRE(r.code == 0);
	// Every acknowledged action was durable when ckr_log_wait returned.
	REQUIRE(r.out.find("not durable at a durability point") ==
		std::string::npos);
}

TEST_CASE("a log scan that takes a torn record by its header is caught",
	"[pm-log-broken]")
{
	test::TempDir d;
	Run r = ckr_pmemtest(d, env("CKR_PM_BROKEN_CSUM"), "logrun",
		"logcheck");
	INFO(r.out);
	REQUIRE(pmt::summary(r.out).bad > 0);
	REQUIRE(r.code == 1);
}
