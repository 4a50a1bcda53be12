// SPDX-License-Identifier: BSD-3-Clause
// crash_pm.cpp -- libvista under pmemtest: every crash image of every
// fence of each workload (tests/pmemtest/vista_pm.c) must recover to a
// consistent state, with no lint (every flush needed, everything a commit
// promises durable at its durability point); so must every crash image of
// a recovery; and libvista's deliberately broken builds must be caught.
// Debit-credit runs as the benchmark's own code (bench/tpcb_tpcc/tb_crash.c:
// the workload and the vista backend).
//
// PMEMTEST, VPM (the workload program), VPM_MOD (its checker module),
// VPM_BROKEN (folder of the broken builds), TB_CRASH, TB_CRASH_MOD and
// TB_CRASH_BROKEN (tpcbench's) are set by meson.
#include "pmemtest_util.hpp"

using pmt::env;
using pmt::Run;
using pmt::sh;

namespace {

const char *const scenarios[] = { "one_range", "many_ranges",
	"multi_segment", "heap", "abort", "abort_persisted", "auto",
	"auto_chain", "redo" };

std::string pmemtest(const test::TempDir &d, const std::string &args)
{
	return env("PMEMTEST") + " run --seed 11 --timeout 120 --workdir " + d.path +
		" --out " + d / "out" + " --max-failures 20 " + args;
}

// pmemtest's run R checked more than MIN crash images, none inconsistent
// (the caller's INFO shows the output).
void require_images_consistent(const Run &r, long min)
{
	pmt::Summary s = pmt::summary(r.out);
	REQUIRE(s.checked > min);
	REQUIRE(s.bad == 0);
}

// ... and pmemtest said so with its exit code.
void require_consistent(const Run &r, long min)
{
	INFO(r.out);
	require_images_consistent(r, min);
	REQUIRE(r.code == 0);
}

// The same for a run with --lints-fatal: no lint either (exit 0).
// Scanning (no userfaultfd here) cannot see a store that puts a line's
// old value back, so there it may call a needed flush redundant: only
// that lint is tolerated then.
void require_consistent_no_lints(const Run &r, long min)
{
	if (r.out.find("stores found by userfaultfd") != std::string::npos) {
		require_consistent(r, min);
		return;
	}
	INFO(r.out);
	require_images_consistent(r, min);
	WARN("no userfaultfd: redundant-flush lints are not checked");
	REQUIRE((r.code == 0 || r.code == 3));
	for (const char *lint : { "warning: flush never fenced",
		     "warning: not durable at a durability point",
		     "warning: never made durable" })
		REQUIRE(r.out.find(lint) == std::string::npos);
}

// pmemtest's run R found an inconsistent image: a broken build caught.
void require_caught(const Run &r)
{
	INFO(r.out);
	REQUIRE(pmt::summary(r.out).bad > 0);
	REQUIRE(r.code == 1);
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
			require_consistent_no_lints(r, 10);
		}
	}
}

// A transaction of 800 scattered cells (vista_pm.c, scattered): the
// declared set outgrows its flat array and is chunked, and the commit
// writes back every chunk.  Its crash points hold up to 660 pending lines,
// so each tries at most 100 subsets (every single line first).  Lints are
// not fatal here: the one-fence commit's truncation line is written back
// once more before the next transaction's records go over the old ones
// (log.c L6: another lane may have stored to it), which a one-threaded
// trace calls redundant.
const char *const scattered_args = " --max-per-fence 100 ";

TEST_CASE("every crash image of a transaction of scattered cells recovers",
	"[vista-scattered]")
{
	test::TempDir d;
	Run r = sh(pmemtest(d, std::string(scattered_args) + "--check-lib " +
		env("VPM_MOD") + ":pm_check_scattered -- " + env("VPM") +
		" scattered run " + d.path));
	require_consistent(r, 500);
}

TEST_CASE("every crash image of a vista recovery recovers",
	"[vista-recovery]")
{
	// The writer dies inside transaction 5 (kill -9 semantics: every
	// store is in the pools); the recovery is then traced from there.
	for (const char *sc : { "one_range", "multi_segment", "heap",
		     "auto_chain", "redo" }) {
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
			require_consistent_no_lints(r, 1);
		}
	}
}

TEST_CASE("vista recovery crashed at every fence (--crash-recovery)",
	"[vista-crash-recovery]")
{
	for (const char *sc : { "multi_segment", "heap", "redo" }) {
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
	// finds an inconsistent image.  fast_no_flush and fast_commit_order
	// break only the common commit path, which traced runs take as
	// untraced ones do; abort_no_drain shows only once the aborted
	// stores may have reached memory (abort_persisted).  torn_trusted
	// shows at set_range's fence: the record's first line (its tag and
	// a's image) may reach media without its second (b's image), and a
	// recovery that does not verify the check restores a stale b.
	// redo_commit_early (redo mode: a commit record that vouches only for
	// itself, fenced before the after-images) shows at the second fence
	// of a commit; redo_reuse_early (a checkpoint slot durable before the
	// home lines it vouches for) at the checkpoint's last fence.
	// chunk_first_only (a chunked range set written back only in part)
	// shows once the next transaction's fence has made the commit final.
	const std::pair<const char *, const char *> builds[] = {
		{ "commit_order", "one_range" },
		{ "no_log_persist", "one_range" },
		{ "fast_no_flush", "one_range" },
		{ "fast_commit_order", "one_range" },
		{ "abort_no_drain", "abort_persisted" },
		{ "torn_trusted", "one_range" },
		{ "redo_commit_early", "redo" },
		{ "redo_reuse_early", "redo" },
		{ "chunk_first_only", "scattered" },
	};
	for (const auto &b : builds) {
		DYNAMIC_SECTION(b.first)
		{
			test::TempDir d;
			std::string exe = env("VPM_BROKEN") + "/vista_pm_broken_" +
				b.first;
			std::string sc = std::string(" ") + b.second + " ";
			std::string more = std::string(b.second) == "scattered" ?
				scattered_args : "";
			Run r = sh(pmemtest(d, more + "--check '" + exe + sc +
				"check {dir}' -- " + exe + sc + "run " + d.path));
			require_caught(r);
		}
	}
}

// ---- debit-credit: tpcbench's workload and vista backend ----

namespace {

// tb_crash on a 1 MiB debit-credit database in DIR/db (vista, cacheline).
std::string tbc(const std::string &exe, const test::TempDir &d,
	const std::string &verb)
{
	return exe + " debit-credit vista " + d / "db" + " " + verb;
}

std::string tb_pools(const test::TempDir &d)
{
	return " --pool " + d / "db/vista.0.log" + " --pool " +
		d / "db/vista.0.seg";
}

std::string tb_checker()
{
	return " --check-lib " + env("TB_CRASH_MOD") +
		":tb_pm_check_debit_credit -- ";
}

} // namespace

TEST_CASE("every crash image of tpcbench's debit-credit on vista recovers",
	"[tpcb-debit-credit]")
{
	// The database is built before tracing; pmemtest then sees every
	// fence of 20 transactions, and the checker reopens each image
	// (vista's recovery) and checks the workload's invariants.
	test::TempDir d;
	REQUIRE(sh(tbc(env("TB_CRASH"), d, "create")).code == 0);
	Run r = sh(pmemtest(d, tb_pools(d) + tb_checker() +
		tbc(env("TB_CRASH"), d, "run 20")));
	require_consistent(r, 100);
}

TEST_CASE("every crash image of a debit-credit recovery recovers",
	"[tpcb-debit-credit-recovery]")
{
	// The writer dies in transaction 5 after its stores (kill -9
	// semantics); the recovery is traced, each image checked twice.
	test::TempDir d;
	REQUIRE(sh(tbc(env("TB_CRASH"), d, "create")).code == 0);
	REQUIRE(sh(tbc(env("TB_CRASH"), d, "run 10 --stop-at 5")).code == 0);
	Run r = sh(pmemtest(d, tb_pools(d) + " --twice" + tb_checker() +
		tbc(env("TB_CRASH"), d, "check")));
	require_consistent(r, 1);
}

TEST_CASE("debit-credit with a range not declared to vista is caught",
	"[tpcb-debit-credit-broken]")
{
	test::TempDir d;
	REQUIRE(sh(tbc(env("TB_CRASH"), d, "create")).code == 0);
	Run r = sh(pmemtest(d, tb_pools(d) + tb_checker() +
		tbc(env("TB_CRASH_BROKEN"), d, "run 20")));
	require_caught(r);
}

// ---- the Rio file cache (tests/pmemtest/fc_pm.c) ----

namespace {

// pmemtest on fc_pm (or a broken build of it), its cache in DIR/fc.  One
// check at a time (they share the disk files); every single pending line
// and 4 random subsets per crash point: a block write leaves up to two
// blocks of lines pending, too many for every pair.
Run fc_pmemtest(const test::TempDir &d, const std::string &exe)
{
	std::string fc = d / "fc";
	REQUIRE(sh(exe + " setup " + fc).code == 0);
	return sh(pmemtest(d, "--jobs 1 --k 1 --random 4 --pool " + fc +
		"/cache.pool --check '" + exe + " check {image} " + fc +
		"' -- " + exe + " run " + fc));
}

} // namespace

TEST_CASE("every crash image of Rio file cache writes recovers whole",
	"[fc]")
{
	test::TempDir d;
	Run r = fc_pmemtest(d, env("FC_PM"));
	require_consistent(r, 100);
	// Every acknowledged write was durable when rio_fc_pwrite returned.
	INFO(r.out);
	REQUIRE(r.out.find("not durable at a durability point") ==
		std::string::npos);
}

TEST_CASE("the file cache's broken builds are caught", "[fc-broken]")
{
	// nopersist: a write acknowledged before its data is flushed; order:
	// recovery replays the older of two copies of a block.
	for (const char *b : { "nopersist", "order" }) {
		DYNAMIC_SECTION(b)
		{
			test::TempDir d;
			Run r = fc_pmemtest(d, env("VPM_BROKEN") +
				"/fc_pm_broken_" + b);
			require_caught(r);
		}
	}
}
