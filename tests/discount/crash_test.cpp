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

// A kill that lands while a finished run exits, after it removed its
// checkpoint, must be taken for the end of that run, not for a crash that
// lost all its input (the harness compared the program's whole output with
// a run on no input at all).  The test build keeps every exiting process
// alive 2 s after the removal; the last of each protocol's kills waits
// for its run to end and comes as soon as the checkpoint is gone
// (kill_ended), so it lands in that window however fast or slow the
// machine, and must end the campaign.
TEST_CASE("ed: a kill after a finished run removed its checkpoint ends the "
	"run", "[crash][ed-exit]")
{
	std::string lib = dctest::env_or("DC_TEST_LIB", "");
	REQUIRE(!lib.empty());
	setenv("DC_TEST_EXIT_WAIT_MS", "2000", 1);
	test::Rng rng(test::seed());
	int kills = 0, ended = 0;
	for (const char *pr : { "cpvs", "cand" }) {
		Outcome o = dctest::crash_run(dctest::ed_prog(), pr, 6, rng,
			lib, 4, "/dev/shm", nullptr, true);
		INFO(o.why);
		REQUIRE(o.equivalent);
		REQUIRE(o.files_equal);
		kills += o.kills;
		ended += o.ended_kills;
	}
	unsetenv("DC_TEST_EXIT_WAIT_MS");
	WARN(kills << " kills, " << ended << " of a finished run");
	REQUIRE(kills > 0);
	// the case happened: each protocol's last kill found its run ended,
	// and was taken for that
	REQUIRE(ended >= 2);
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

// sqlite3 fed its script from a file, output and errors to a pipe, in
// a fresh directory, under dc-run with protocol proto (none: without
// libdc).  Returns its output, the database (hex of its bytes' hash and
// size) and whether a journal or hidden file was left.
static std::string sqlite_from_file(const char *proto, const std::string &lib)
{
	test::TempDir d("/dev/shm");
	std::string work = d / "work";
	REQUIRE(mkdir(work.c_str(), 0700) == 0);
	dctest::Prog p = dctest::sqlite_prog();
	test::write_file(d / "in.sql", p.script);
	std::vector<std::string> argv;
	if (proto)
		argv = { dctest::env_or("DC_RUN", "dc-run"), "--dir", d / "ck",
			"--protocol", proto, "--" };
	argv.insert(argv.end(), p.argv.begin(), p.argv.end());
	std::vector<std::string> env;
	if (!lib.empty())
		env.push_back("DC_LIB=" + lib);
	int in = open((d / "in.sql").c_str(), O_RDONLY);
	REQUIRE(in >= 0);
	int out[2];
	REQUIRE(pipe(out) == 0);
	pid_t pid = dctest::spawn(argv, in, out[1], work, env);
	close(in);
	close(out[1]);
	std::string o;
	dctest::drain(out[0], o);
	close(out[0]);
	int st;
	waitpid(pid, &st, 0);
	o += "exit " + std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : -1) +
		"\n";
	for (auto &n : test::list_dir(work))
		o += n + " " + std::to_string(test::read_file(work + "/" + n)
						.size()) + "\n";
	std::string db = test::read_file(work + "/db.sqlite");
	o += "db " + std::to_string(std::hash<std::string>()(db)) + "\n";
	return o;
}

TEST_CASE("sqlite3 with its rollback journal runs and survives SIGKILL "
	  "under every protocol", "[crash][sqlite]")
{
	// no kill, script from a file: under cbndvs no checkpoint comes
	// (nothing visible follows input), and the journal is deleted at each
	// of 120 commits: the delayed deletions fill their table
	std::string ref = sqlite_from_file(nullptr, "");
	REQUIRE(ref.find("120|7260") != std::string::npos);
	for (const char *pr : protos) {
		INFO(pr);
		REQUIRE(sqlite_from_file(pr, "") == ref);
	}
	// typed at a terminal and killed, under a commit protocol and a
	// logging one (whose only checkpoints are those the full table of
	// deletions takes; the re-execution must see the process id the
	// logged run saw), with the default tracking (userfaultfd) and with
	// write protection.  A recovered sqlite3 has its heap in one mapping
	// (the fresh process grew it in one piece), and the first fold after
	// the recovery sees the ranges the checkpoint's own interval changed
	// (its heap grew then): the fold must copy and protect only those,
	// and leave the heap's other stores to the scan (ckpt.c invariant 5).
	// A fold that protected the whole heap lost them, and the next
	// recovery found the heap corrupt ("double free detected in tcache
	// 2"), most often with the machine loaded; tests/discount [part] and
	// its broken build check the fold itself.
	test::Rng rng(test::seed());
	int kills = 0;
	struct {
		const char *proto, *tracking;
	} legs[] = { { "cbndvs", nullptr }, { "cand-log", nullptr },
		{ "cbndvs", "wp" }, { "cand-log", "wp" } };
	for (auto &l : legs) {
		const char *pr = l.proto;
		const char *tr = l.tracking ? l.tracking : "uffd (default)";
		Outcome o = dctest::crash_run(dctest::sqlite_prog(), pr,
			total_kills() / 5, rng, "", 4, "/dev/shm", l.tracking);
		INFO(pr << "/" << tr << ": " << o.why);
		WARN(pr << "/" << tr << ": " << o.kills << " kills");
		REQUIRE(o.equivalent);
		REQUIRE(o.files_equal);
		kills += o.kills;
	}
	REQUIRE(kills > 0);
}

TEST_CASE("a full table of delayed deletions that fails the call is "
	  "caught", "[crash][sqlite-broken]")
{
	std::string lib = dctest::env_or("DC_BROKEN_PEND_LIB", "");
	REQUIRE(!lib.empty());
	std::string ref = sqlite_from_file(nullptr, "");
	std::string got = sqlite_from_file("cbndvs", lib);
	WARN("broken variant:\n" << got);
	REQUIRE(got != ref);
}
