// SPDX-License-Identifier: BSD-3-Clause
// tb_crash_test.cpp -- the benchmark's own workloads and backends under
// kill -9 (bench/tpcb_tpcc/tb_crash.c): a writer runs transactions and
// acknowledges each commit through a pipe; it is SIGKILLed at a random
// moment; the backend's recovery (for rvm-rio: the Rio file cache's, then
// RVM's log replay) must leave the workload's invariants intact and every
// acknowledged transaction committed.  The broken build TB_BROKEN_RIO_LAZY
// (rvm-rio acknowledges each log write one write late) must be caught;
// so must Vista's Versions' and Trinity's and Quadra's broken builds (their
// test cases below).
//
// TB_CRASH (the program) and TB_CRASH_BROKEN, TB_CRASH_VV_LATE,
// TB_CRASH_PWORD_* (the broken ones) come from meson; CRASH_ITERATIONS
// and TEST_SEED as in every crash test.
#include "../common/test_util.hpp"

#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <time.h>
#include <string>
#include <sys/wait.h>
#include <vector>

using test::TempDir;

namespace {

std::string env(const char *name)
{
	const char *v = getenv(name);
	REQUIRE(v != nullptr);
	return v;
}

// Run argv to completion; its exit code (stderr and stdout inherited).
int run(const std::vector<std::string> &argv)
{
	std::vector<char *> a;
	for (const auto &s : argv)
		a.push_back(const_cast<char *>(s.c_str()));
	a.push_back(nullptr);
	fflush(nullptr);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		execv(a[0], a.data());
		_exit(127);
	}
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

uint64_t now_ms()
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

// Start the writer (transactions until killed), kill it after `ms`
// milliseconds; the last count it acknowledged.  `opts`: tb_crash options
// every command of the loop takes (--db-size).
uint64_t run_and_kill(const std::string &exe, const std::string &wl,
	const std::string &backend, const std::string &dir, unsigned ms,
	uint64_t seed, const std::vector<std::string> &opts)
{
	std::vector<std::string> argv = { exe, wl, backend, dir, "run", "0",
		"--seed", std::to_string(seed) };
	argv.insert(argv.end(), opts.begin(), opts.end());
	int p[2];
	REQUIRE(pipe(p) == 0);
	fflush(nullptr);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(p[0]);
		argv.insert(argv.end(), { "--acks", std::to_string(p[1]) });
		std::vector<char *> a;
		for (auto &x : argv)
			a.push_back(const_cast<char *>(x.c_str()));
		a.push_back(nullptr);
		execv(a[0], a.data());
		_exit(127);
	}
	close(p[1]);
	// Drain the acknowledgements while the writer runs: a full pipe
	// (8192 of them) would stop it in write(2), between two
	// transactions, and every kill would land there.
	std::string buf;
	char chunk[4096];
	ssize_t n;
	uint64_t until = now_ms() + ms;
	for (uint64_t now; (now = now_ms()) < until;) {
		struct pollfd pf = { p[0], POLLIN, 0 };
		if (poll(&pf, 1, (int)(until - now)) > 0 &&
		    (n = read(p[0], chunk, sizeof(chunk))) > 0)
			buf.append(chunk, (size_t)n);
	}
	kill(pid, SIGKILL);
	uint64_t acked = 0, v;
	while ((n = read(p[0], chunk, sizeof(chunk))) > 0)
		buf.append(chunk, (size_t)n);
	close(p[0]);
	for (size_t at = 0; at + sizeof(v) <= buf.size(); at += sizeof(v)) {
		memcpy(&v, buf.data() + at, sizeof(v));
		acked = v;
	}
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	// Killed by us, or an early failure the check below reports.
	INFO("writer status " << st);
	REQUIRE((WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL));
	return acked;
}

struct Outcome {
	int kills = 0, violations = 0;
	uint64_t acked = 0;
};

// kills rounds of: run + kill -9, recover and check.  Each round adds to
// the same database, so later rounds recover from deeper states (RVM's
// truncations, the cache's write-back).
Outcome kill_loop(const std::string &exe, const std::string &wl,
	const std::string &backend, int kills,
	const std::vector<std::string> &opts = {})
{
	TempDir d;
	std::string dir = d / "db";
	std::vector<std::string> create = { exe, wl, backend, dir, "create" };
	create.insert(create.end(), opts.begin(), opts.end());
	REQUIRE(run(create) == 0);
	std::string more;
	for (const auto &x : opts)
		more += " " + x;
	test::Rng rng(test::seed());
	Outcome o;
	uint64_t total = 0; // committed before this round's writer
	for (int i = 0; i < kills; i++) {
		// Each writer its own transactions (a seed of its own): the
		// same mix replayed from its start every round would skew it.
		uint64_t acked = run_and_kill(exe, wl, backend, dir,
			20 + (unsigned)rng.below(180), rng.next(), opts);
		o.kills++;
		o.acked += acked;
		// The writer counted from the state recovery left before it.
		std::string cmd = exe + " " + wl + " " + backend + " " + dir +
			" check --min " + std::to_string(total + acked) + more;
		FILE *f = popen(cmd.c_str(), "r");
		REQUIRE(f != nullptr);
		unsigned long long c = 0;
		int got = fscanf(f, "committed %llu", &c);
		int st = pclose(f);
		REQUIRE(WIFEXITED(st));
		if (WEXITSTATUS(st) == 1) {
			o.violations++;
			break; // the database is not what a correct run leaves
		}
		REQUIRE(WEXITSTATUS(st) == 0);
		REQUIRE(got == 1);
		total = c;
	}
	return o;
}

using OptsOf = const std::vector<std::string> &(*)(const std::string &wl);

const std::vector<std::string> &no_opts(const std::string &)
{
	static const std::vector<std::string> none;
	return none;
}

// A correct backend, killed `kills` times on each workload: every
// recovery leaves it consistent with every acknowledged transaction.
void both_workloads_hold(const std::string &backend, int kills,
	OptsOf opts = no_opts)
{
	for (const char *wl : { "debit-credit", "order-entry" }) {
		DYNAMIC_SECTION(backend << " " << wl)
		{
			Outcome o = kill_loop(env("TB_CRASH"), wl, backend,
				kills, opts(wl));
			REQUIRE(o.kills > 0);
			REQUIRE(o.acked > 0);
			REQUIRE(o.violations == 0);
		}
	}
}

// A broken build (the executable $exe_var names), killed up to `kills`
// times on workload wl: some recovery must find the fault.
void broken_is_caught(const char *exe_var, const char *wl,
	const std::string &backend, int kills,
	const std::vector<std::string> &opts = {})
{
	Outcome o = kill_loop(env(exe_var), wl, backend, kills, opts);
	REQUIRE(o.acked > 0);
	REQUIRE(o.violations > 0);
}

} // namespace

TEST_CASE("rvm-rio: kill -9 loses no acknowledged transaction",
	"[tb-crash-rvm-rio]")
{
	both_workloads_hold("rvm-rio:cacheline", test::iterations(12));
}

TEST_CASE("vista: kill -9 leaves debit-credit consistent and durable",
	"[tb-crash-vista]")
{
	Outcome o = kill_loop(env("TB_CRASH"), "debit-credit",
		"vista:cacheline", test::iterations(30));
	REQUIRE(o.acked > 0);
	REQUIRE(o.violations == 0);
}

// libvista's redo mode: transactions on a DRAM copy, a commit record per
// transaction, home locations written back at checkpoints.  Its broken
// build leaves a transaction's last range undeclared: the stores live only
// in the DRAM copy, and the kill loses them from a committed transaction.
TEST_CASE("vista redo mode: kill -9 leaves both workloads consistent and "
	"durable", "[tb-crash-vista-redo]")
{
	both_workloads_hold("vista:redo:cacheline", test::iterations(12));
}

TEST_CASE("vista redo mode: an undeclared range is caught",
	"[tb-crash-vista-redo-broken]")
{
	broken_is_caught("TB_CRASH_RANGE", "debit-credit",
		"vista:redo:cacheline", test::iterations(12));
}

TEST_CASE("a late acknowledgement in rvm-rio is caught",
	"[tb-crash-broken]")
{
	broken_is_caught("TB_CRASH_BROKEN", "debit-credit",
		"rvm-rio:cacheline", test::iterations(12));
}

// Vista's Versions 0-2 (bench/tpcb_tpcc/vversions.c): the undo list in the
// heap, the mirror by copy, the mirror by diff.
TEST_CASE("Vista's Versions 0-2: kill -9 leaves both workloads consistent "
	"and durable", "[tb-crash-vista-versions]")
{
	for (const char *b : { "vista:v0", "vista:v1", "vista:v2" })
		both_workloads_hold(b, test::iterations(8));
}

TEST_CASE("a commit mark written one transaction late is caught in each "
	"Version", "[tb-crash-vista-versions-broken]")
{
	// TB_CRASH_VV_LATE acknowledges a commit whose mark waits for the
	// next transaction: a kill in between rolls it back.
	for (const char *b : { "vista:v0", "vista:v1", "vista:v2" }) {
		DYNAMIC_SECTION(b)
		{
			broken_is_caught("TB_CRASH_VV_LATE", "debit-credit", b,
				test::iterations(12));
		}
	}
}

// Trinity and Quadra (bench/tpcb_tpcc/backend_pword.c) on their own layouts
// of both workloads.  Under kill -9 every store survives (the pool is a
// mapped file), so this tests what power cuts (pword_crash_test.cpp) do
// not: the designs' stores and recovery in program order, a kill inside
// recovery itself (each writer starts by recovering), and that a commit
// has its commit point behind it when it returns.  Order-entry's smallest
// scale needs 4 MiB of pwords (32 bytes for every 8-byte word).
namespace {

const std::vector<std::string> pword_oe_opts = { "--db-size",
	std::to_string(4u << 20) };

const std::vector<std::string> &pword_opts(const std::string &wl)
{
	return wl == "order-entry" ? pword_oe_opts : no_opts(wl);
}

} // namespace

TEST_CASE("Trinity: kill -9 leaves both workloads consistent and durable",
	"[tb-crash-trinity]")
{
	both_workloads_hold("trinity:cacheline", test::iterations(12),
		pword_opts);
}

TEST_CASE("Quadra: kill -9 leaves both workloads consistent and durable",
	"[tb-crash-quadra]")
{
	both_workloads_hold("quadra:cacheline", test::iterations(12),
		pword_opts);
}

TEST_CASE("a Trinity or Quadra commit acknowledged before its commit point "
	"is caught", "[tb-crash-pword-early-ack]")
{
	// TB_BROKEN_PWORD_EARLY_ACK: the commit returns first and reaches
	// its commit point (Trinity: the fences and p_seq; Quadra: the
	// counts and the fence) at the next begin; a kill in between undoes
	// an acknowledged transaction.
	for (const char *b : { "trinity:cacheline", "quadra:cacheline" })
		for (const char *wl : { "debit-credit", "order-entry" }) {
			DYNAMIC_SECTION(b << " " << wl)
			{
				broken_is_caught("TB_CRASH_PWORD_EARLY_ACK", wl,
					b, test::iterations(12),
					pword_opts(wl));
			}
		}
}

TEST_CASE("order-entry words stored without their old value are caught "
	"under kill -9", "[tb-crash-pword-raw-tail]")
{
	// TB_BROKEN_PWORD_RAW_TAIL: a kill inside a commit leaves words
	// recovery cannot undo, and order-entry's invariants break.
	for (const char *b : { "trinity:cacheline", "quadra:cacheline" }) {
		DYNAMIC_SECTION(b)
		{
			broken_is_caught("TB_CRASH_PWORD_RAW_TAIL",
				"order-entry", b, test::iterations(12),
				pword_oe_opts);
		}
	}
}
