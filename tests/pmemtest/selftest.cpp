// SPDX-License-Identifier: BSD-3-Clause
// selftest.cpp -- pmemtest on its own examples: every buggy variant is
// flagged (inconsistent images, or the lint it exists for), no correct
// version is, and every saved inconsistent image replays as inconsistent.
// Every run has --lints-fatal: a lint alone makes the exit status 3.
//
// PMEMTEST names the driver, PMT_EXAMPLES the folder of example programs
// and checker modules (set by meson).
#include "pmemtest_util.hpp"

#include <fstream>
#include <set>
#include <vector>
#include <sys/stat.h>

using pmt::env;
using pmt::Run;
using pmt::sh;

namespace {

struct Case {
	const char *example;
	const char *variant; // "" = the correct program
	const char *expect;  // "ok", "inconsistent", or the lint's title
};

const Case cases[] = {
	{ "counter_pair", "", "ok" },
	{ "counter_pair", "missing_flush", "inconsistent" },
	{ "counter_pair", "missing_fence", "inconsistent" },
	{ "counter_pair", "marker_first", "inconsistent" },
	{ "counter_pair", "redundant_flush", "redundant flush" },
	{ "counter_pair", "no_final_persist", "never made durable" },
	{ "append_log", "", "ok" },
	{ "append_log", "missing_flush", "inconsistent" },
	{ "append_log", "missing_fence", "inconsistent" },
	{ "append_log", "marker_first", "inconsistent" },
	{ "append_log", "wrong_range", "inconsistent" },
	{ "append_log", "unfenced_tail", "flush never fenced" },
	{ "list_insert", "", "ok" },
	{ "list_insert", "missing_flush", "inconsistent" },
	{ "list_insert", "missing_fence", "inconsistent" },
	{ "list_insert", "wrong_range", "inconsistent" },
	{ "undo_log", "", "ok" },
	{ "undo_log", "marker_first", "inconsistent" },
	{ "undo_log", "missing_fence", "inconsistent" },
	{ "undo_log", "no_log", "inconsistent" },
	{ "undo_log", "recovery_order", "ok" }, // its writer is correct
	{ "redo_log", "", "ok" },
	{ "redo_log", "marker_first", "inconsistent" },
	{ "redo_log", "missing_flush", "inconsistent" },
	{ "redo_log", "dpoint_early", "not durable at a durability point" },
	{ "ring_buffer", "", "ok" },
	{ "ring_buffer", "marker_first", "inconsistent" },
	{ "ring_buffer", "missing_flush", "inconsistent" },
	{ "ring_buffer", "full_window", "inconsistent" },
	{ "pointer_swap", "", "ok" },
	{ "pointer_swap", "missing_flush", "inconsistent" },
	{ "pointer_swap", "missing_fence", "inconsistent" },
	{ "multi_line_record", "", "ok" },
	{ "multi_line_record", "no_log", "inconsistent" },
	{ "kv_hash", "", "ok" },
	{ "kv_hash", "marker_first", "inconsistent" },
	{ "kv_hash", "wrong_range", "inconsistent" },
	{ "bitmap_alloc", "", "ok" },
	{ "bitmap_alloc", "missing_fence", "inconsistent" },
	{ "bitmap_alloc", "marker_first", "inconsistent" },
	{ "sorted_array", "", "ok" },
	{ "sorted_array", "no_log", "inconsistent" },
	{ "memcpy_batch", "", "ok" },
	{ "memcpy_batch", "missing_fence", "inconsistent" },
	{ "pmem_log", "", "ok" },
	{ "pmem_log", "marker_first", "inconsistent" },
	{ "pmem_log", "missing_flush", "inconsistent" },
};

std::string exe(const Case &c)
{
	std::string n = "ex_" + std::string(c.example);
	if (*c.variant)
		n += "_" + std::string(c.variant);
	return env("PMT_EXAMPLES") + "/" + n;
}

std::string lib(const char *example)
{
	return env("PMT_EXAMPLES") + "/libex_" + example + ".so:pmemtest_check";
}

void check_case(const Case &c, const std::string &mode)
{
	test::TempDir d;
	std::string check = mode == "lib" ?
		"--check-lib " + lib(c.example) :
		"--check '" + env("PMT_EXAMPLES") + "/ex_" + c.example +
			" check {image}'";
	std::string cmd = env("PMEMTEST") + " run --seed 7 --timeout 120 --workdir " +
		d.path + " --out " + d / "out" + " --max-failures 50 " +
		"--lints-fatal " + check + " -- " + exe(c) + " run " +
		d / "pool";
	Run r = sh(cmd);
	INFO(cmd << "\n" << r.out);
	auto [checked, bad, uniq] = pmt::summary(r.out);
	REQUIRE(checked > 0);
	std::string expect = c.expect;
	if (expect == "ok") {
		REQUIRE(r.code == 0);
		REQUIRE(bad == 0);
		REQUIRE(r.out.find("warning:") == std::string::npos);
	} else if (expect == "inconsistent") {
		REQUIRE(r.code == 1);
		REQUIRE(bad > 0);
		REQUIRE(uniq > 0);
		REQUIRE(uniq <= bad);
		// The first saved image reproduces the failure.
		std::smatch m;
		std::regex re("reproduce: pmemtest replay (\\S+)");
		REQUIRE(std::regex_search(r.out, m, re));
		Run rp = sh(env("PMEMTEST") + " replay " + m[1].str());
		INFO(rp.out);
		REQUIRE(rp.code == 1);
		REQUIRE(rp.out.find("INCONSISTENT") != std::string::npos);
	} else {
		REQUIRE(r.code == 3); // consistent, but --lints-fatal
		REQUIRE(bad == 0);
		REQUIRE(r.out.find("warning: " + expect) != std::string::npos);
	}
}

} // namespace

TEST_CASE("every example variant is judged as expected", "[examples]")
{
	for (const Case &c : cases) {
		DYNAMIC_SECTION(c.example << " " << (*c.variant ? c.variant :
						"(correct)"))
		{
			check_case(c, "lib");
		}
	}
}

TEST_CASE("command-mode checker judges like the library checker",
	"[command]")
{
	for (const Case &c : cases) {
		std::string ex = c.example;
		if (ex != "counter_pair" && ex != "undo_log" && ex != "pmem_log")
			continue;
		DYNAMIC_SECTION(c.example << " " << c.variant)
		{
			check_case(c, "cmd");
		}
	}
}

TEST_CASE("a plain checker command is started once per job and forked per "
	  "image; a shell command line, or --no-fork-server, runs it anew",
	"[command]")
{
	// The checker, a shell script, records its parent process: the fork
	// server (the script itself, stopped before main), the driver (which
	// forked the child that became the script), or sh -c.
	test::TempDir d;
	std::string script = d / "check.sh";
	{
		FILE *f = fopen(script.c_str(), "w");
		REQUIRE(f != nullptr);
		fprintf(f, "#!/bin/sh\n(echo $PPID; tr '\\0' ' ' < "
			"/proc/$PPID/cmdline; echo) >> %s/parents\nexit 0\n",
			d.path.c_str());
		fclose(f);
		REQUIRE(chmod(script.c_str(), 0755) == 0);
	}
	Case c = { "counter_pair", "", "ok" };
	// The parents' pids and command lines, one per image checked.
	auto parents = [&](const std::string &opts) {
		unlink((d / "parents").c_str());
		Run r = sh(env("PMEMTEST") + " run --seed 1 --jobs 1 "
			"--no-lints --workdir " + d.path + " --out " + d / "out" +
			" " + opts + " -- " + exe(c) + " run " + d / "pool");
		INFO(r.out);
		REQUIRE(r.code == 0);
		std::set<std::string> pids;
		std::vector<std::string> cmds;
		std::ifstream f(d / "parents");
		for (std::string pid, cmd; std::getline(f, pid) &&
			std::getline(f, cmd);) {
			pids.insert(pid);
			cmds.push_back(cmd);
		}
		REQUIRE((long)cmds.size() == pmt::summary(r.out).checked);
		REQUIRE(cmds.size() > 2);
		return std::make_pair(pids, cmds);
	};
	SECTION("plain words: one server") {
		auto [pids, cmds] = parents("--check '" + script + " {image}'");
		REQUIRE(pids.size() == 1);
		for (const std::string &cmd : cmds)
			REQUIRE(cmd.rfind("/bin/sh " + script + " ", 0) == 0);
	}
	SECTION("--no-fork-server") {
		auto [pids, cmds] = parents("--no-fork-server --check '" +
			script + " {image}'");
		for (const std::string &cmd : cmds)
			REQUIRE(cmd.find("pmemtest run ") != std::string::npos);
	}
	SECTION("a shell command line") {
		auto [pids, cmds] = parents("--check '" + script +
			" {image} && true'");
		REQUIRE(pids.size() == cmds.size());
		for (const std::string &cmd : cmds)
			REQUIRE(cmd.find(" -c ") != std::string::npos);
	}
}

TEST_CASE("a forked checker past --timeout is killed and the image counted "
	  "inconsistent", "[command]")
{
	test::TempDir d;
	Case c = { "counter_pair", "", "ok" };
	Run r = sh(env("PMEMTEST") + " run --seed 1 --jobs 1 --no-lints "
		"--timeout 1 --max-images 2 --workdir " + d.path + " --out " +
		d / "out" + " --check '/bin/sleep 30' -- " + exe(c) +
		" run " + d / "pool");
	INFO(r.out);
	REQUIRE(r.code == 1);
	REQUIRE(pmt::summary(r.out).bad == 2);
	REQUIRE(r.out.find("checker: timed out") != std::string::npos);
}

TEST_CASE("replay checks a copy and reproduces the failure every time",
	"[replay]")
{
	// Replaying checks a copy: the saved image itself is not changed
	// by the checker's recovery, so it fails again the second time.
	test::TempDir d;
	Case c = { "undo_log", "no_log", "inconsistent" };
	std::string cmd = env("PMEMTEST") + " run --seed 3 --timeout 120 --workdir " +
		d.path + " --out " + d / "out" + " --check-lib " +
		lib(c.example) + " -- " + exe(c) + " run " + d / "pool";
	Run r = sh(cmd);
	INFO(r.out);
	REQUIRE(r.code == 1);
	std::smatch m;
	std::regex re("reproduce: pmemtest replay (\\S+)");
	REQUIRE(std::regex_search(r.out, m, re));
	std::string img = m[1].str();
	std::string before = test::read_file(img + "/pool");
	REQUIRE(sh(env("PMEMTEST") + " replay " + img).code == 1);
	REQUIRE(sh(env("PMEMTEST") + " replay " + img).code == 1);
	REQUIRE(test::read_file(img + "/pool") == before);
	REQUIRE(sh(env("PMEMTEST") + " replay " + d / "nothing").code == 2);
}

TEST_CASE("recovery run twice must still be consistent", "[twice]")
{
	test::TempDir d;
	for (const char *ex : { "undo_log", "redo_log" }) {
		Case c = { ex, "", "ok" };
		Run r = sh(env("PMEMTEST") + " run --twice --workdir " + d.path +
			" --check-lib " + lib(ex) + " -- " + exe(c) + " run " +
			d / "pool");
		INFO(r.out);
		REQUIRE(r.code == 0);
	}
}

TEST_CASE("bad command lines are refused", "[usage]")
{
	REQUIRE(sh(env("PMEMTEST")).code == 2);
	REQUIRE(sh(env("PMEMTEST") + " run -- true").code == 2);
	REQUIRE(sh(env("PMEMTEST") + " run --check x --check-lib y:z -- true")
			.code == 2);
	REQUIRE(sh(env("PMEMTEST") + " run --k nope --check x -- true")
			.code == 2);
	REQUIRE(sh(env("PMEMTEST") + " run --no-lints --lints-fatal --check x "
				     "-- true").code == 2);
	Run r = sh(env("PMEMTEST") + " run --check-lib /nonexistent.so:f -- "
				     "true");
	REQUIRE(r.code == 2);
	REQUIRE(r.out.find("cannot load") != std::string::npos);
}

TEST_CASE("a crash during recovery is checked by tracing the recovery",
	"[recovery]")
{
	// The writer dies half way through a transaction (a process crash:
	// the pool keeps every store, the undo log is valid); then the
	// recovery (the example's check mode) runs under pmemtest, starting
	// from that pool, and every crash image of the recovery is checked.
	for (const char *variant : { "", "recovery_order" }) {
		test::TempDir d;
		Case c = { "undo_log", variant, "" };
		std::string pool = d / "pool";
		Run w = sh("EX_STOP_AT=3 " + exe(c) + " run " + pool);
		REQUIRE(w.code == 0);
		Run r = sh(env("PMEMTEST") + " run --seed 5 --timeout 120 --workdir " +
			d.path + " --out " + d / "out" + " --pool " + pool +
			" --check-lib " + lib("undo_log") + " -- " + exe(c) +
			" check " + pool);
		INFO(r.out);
		auto [checked, bad, uniq] = pmt::summary(r.out);
		(void)uniq;
		REQUIRE(checked > 1); // the recovery's own crash points
		if (*variant) {
			REQUIRE(r.code == 1);
			REQUIRE(bad > 0);
		} else {
			REQUIRE(r.code == 0);
			REQUIRE(bad == 0);
		}
	}
}

TEST_CASE("--crash-recovery crashes the checker's recovery at every fence",
	"[crash-recovery]")
{
	// undo_log's recovery restores the record, then drops the log; the
	// recovery_order build drops the log first.  Its writer is correct,
	// so only crashing its recovery can find the bug.
	for (const char *variant : { "", "recovery_order" }) {
		for (const char *mode : { "cmd", "lib" }) {
			if (*variant && std::string(mode) == "lib")
				continue; // the module's recovery is the good one
			test::TempDir d;
			Case c = { "undo_log", variant, "" };
			std::string check = std::string(mode) == "lib" ?
				"--check-lib " + lib("undo_log") :
				"--check '" + exe(c) + " check {image}'";
			Run r = sh(env("PMEMTEST") + " run --seed 3 --timeout 120 --workdir " +
				d.path + " --out " + d / "out" +
				" --crash-recovery 30 " + check + " -- " + exe(c) +
				" run " + d / "pool");
			INFO(r.out);
			pmt::Summary main = pmt::summary(r.out);
			pmt::Summary rec = pmt::summary(r.out,
				"recovery images: ");
			REQUIRE(main.bad == 0);
			REQUIRE(rec.checked > 0);
			if (*variant) {
				REQUIRE(rec.bad > 0);
				REQUIRE(r.code == 1);
				// One recovery bug, met in many sampled
				// images' recoveries: one group across the
				// nested runs.
				REQUIRE(rec.uniq == 1);
			} else {
				REQUIRE(rec.bad == 0);
				REQUIRE(r.code == 0);
			}
		}
	}
}
