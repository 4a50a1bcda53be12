// SPDX-License-Identifier: BSD-3-Clause
// vv_pm_test.cpp -- Vista's Versions 0-2 (bench/tpcb_tpcc/vversions.c)
// under pmemtest: tpcbench's debit-credit through tb_crash, a power
// failure at every fence of each Version's commit, set_ranges and
// recovery; every crash image must recover (tb_crash's checker module:
// the workload's invariants after the Version's recovery), and each
// Version's broken build must be caught:
//   V0_LINK_EARLY       V0 names undo records before they are durable;
//   V1_MIRROR_FIRST     V1 copies into the mirror before the commit mark;
//   V2_DIFF_NO_PERSIST  V2's diff stores into the mirror, never flushed.
//
// PMEMTEST, TB_CRASH, TB_CRASH_MOD and TB_CRASH_VV_<BROKEN> are set by
// meson.  bench/tpcb_tpcc/versions_crash.sh is the longer campaign.
#include "../pmemtest/pmemtest_util.hpp"

using pmt::env;
using pmt::Run;
using pmt::sh;

namespace {

const char *const versions[] = { "v0", "v1", "v2" };

// tb_crash on a 1 MiB debit-credit database in DIR/db.
std::string tbc(const std::string &exe, const std::string &ver,
	const std::string &dir, const std::string &verb)
{
	return exe + " debit-credit vista:" + ver + " " + dir + " " + verb;
}

// pmemtest over the Version's one pool; the checker is the correct
// tb_crash's module (libtb_crash_check.so: the Version's recovery, then
// the invariants), so pmemtest explores by what the recovery reads and
// covers every crash state of every fence.
Run pmemtest(const test::TempDir &d, const std::string &ver,
	const std::string &extra, const std::string &writer)
{
	std::string pool = d / ("db/vista-" + ver + ".0.pool");
	return sh(env("PMEMTEST") + " run --seed 11 --timeout 120 --workdir " +
		d.path + " --out " + d / "out" + " --max-failures 1 --pool " +
		pool + extra + " --check-lib " + env("TB_CRASH_MOD") +
		":tb_pm_check_debit_credit_" + ver + " -- " + writer);
}

// pmemtest's run R checked more than MIN images, none inconsistent.
void require_recovers(const Run &r, long min)
{
	INFO(r.out);
	pmt::Summary s = pmt::summary(r.out);
	REQUIRE(s.checked > min);
	REQUIRE(s.bad == 0);
	REQUIRE(r.code == 0);
}

} // namespace

TEST_CASE("every crash image of debit-credit on Versions 0-2 recovers",
	"[vv-pm]")
{
	for (const char *ver : versions) {
		DYNAMIC_SECTION(ver)
		{
			test::TempDir d;
			std::string db = d / "db";
			REQUIRE(sh(tbc(env("TB_CRASH"), ver, db, "create")).code ==
				0);
			Run r = pmemtest(d, ver, "",
				tbc(env("TB_CRASH"), ver, db, "run 4"));
			require_recovers(r, 20);
		}
	}
}

TEST_CASE("every crash image of a Version's recovery recovers",
	"[vv-pm-recovery]")
{
	// The writer dies in transaction 5 after its stores (kill -9
	// semantics); the recovery is traced, each image checked twice.
	for (const char *ver : versions) {
		DYNAMIC_SECTION(ver)
		{
			test::TempDir d;
			std::string db = d / "db";
			REQUIRE(sh(tbc(env("TB_CRASH"), ver, db, "create")).code ==
				0);
			REQUIRE(sh(tbc(env("TB_CRASH"), ver, db,
				"run 10 --stop-at 5")).code == 0);
			Run r = pmemtest(d, ver, " --twice",
				tbc(env("TB_CRASH"), ver, db, "check"));
			require_recovers(r, 1);
		}
	}
}

TEST_CASE("each Version's broken persist order is caught", "[vv-pm-broken]")
{
	const std::pair<const char *, const char *> builds[] = {
		{ "v0", "V0_LINK_EARLY" },
		{ "v1", "V1_MIRROR_FIRST" },
		{ "v2", "V2_DIFF_NO_PERSIST" },
	};
	for (const auto &b : builds) {
		DYNAMIC_SECTION(b.second)
		{
			test::TempDir d;
			std::string db = d / "db";
			REQUIRE(sh(tbc(env("TB_CRASH"), b.first, db, "create"))
					.code == 0);
			std::string exe = env(("TB_CRASH_VV_" +
				std::string(b.second)).c_str());
			Run r = pmemtest(d, b.first, "",
				tbc(exe, b.first, db, "run 5"));
			INFO(r.out);
			REQUIRE(pmt::summary(r.out).bad > 0);
			REQUIRE(r.code == 1);
		}
	}
}
