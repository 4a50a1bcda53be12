// SPDX-License-Identifier: BSD-3-Clause
// kill_test.cpp -- SIGKILL one process at a time of the paper's 4-process
// programs under Discount Checking and sender-based message logging
//
// The programs (bench/sbml/apps.c: nqueens, tsp, gauss, and request/reply
// nqueens followed by a token ring) each run once without failures; then,
// in campaigns with their own ports and checkpoint directories, a random
// process is SIGKILLed at a random moment and started again with the
// same command (libdc resumes it from its last checkpoint, sbml replays
// its logged messages).  The next kill waits until the restarted process
// said its replay is done, so failures are never concurrent.  Every
// process must exit 0 with exactly the failure-free run's output, and no
// process but the killed one is ever started again.  SBML_KILLS (default
// 20) is the number of kills to reach, spread over the programs in turn
// (bench/sbml/kill_campaign.sh runs more); SBML_PROGS (default all)
// picks programs by name ("tsp,gauss").
//
// [kill-two]: two processes killed together, once per run, the programs
// in turn: everything recovers with the failure-free outputs, or a
// recovery is refused loudly; a wrong output or a failure without a
// refusal fails the test.
//
// The program linked with a broken build (SBML_KILL_PROG_BROKEN) must
// fail: a refused recovery, a wrong output, or a hang.

#include "sbml_test.hpp"

#include <chrono>
#include <fstream>
#include <map>
#include <random>
#include <thread>

#ifndef SBML_KILL_PROG
#error "SBML_KILL_PROG must name the program"
#endif

namespace {

const unsigned N = 4;

// A program of the campaigns: its phases (sbml-apps APP:SIZE,...), the
// receives between checkpoints, the sleep per task or step (so that
// kills land inside), and a line of process 0's failure-free output that
// shows the computation itself is right.
struct Prog {
	const char *name, *phases, *every, *work, *answer;
};
const Prog progs[] = {
	{ "nqcalls", "nqcalls:8,ring:40", "4", "3000",
		"nqueens 8: 92 solutions" },
	{ "nqueens", "nqueens:10", "1", "30000",
		"nqueens 10: 724 solutions" },
	{ "tsp", "tsp:11", "4", "150000", "tsp 11: shortest tour" },
	{ "gauss", "gauss:48", "4", "6000", "residual below 1e-6" },
};

std::vector<const Prog *> chosen()
{
	std::vector<const Prog *> v;
	const char *e = getenv("SBML_PROGS");
	for (const Prog &p : progs)
		if (!e || std::string("," + std::string(e) + ",").find(
			"," + std::string(p.name) + ",") != std::string::npos)
			v.push_back(&p);
	REQUIRE(!v.empty());
	return v;
}

// A process's stderr goes through a pipe that a thread of the test
// appends to err.N: a regular file would be rolled back by libdc with the
// process (files are process state), losing the lines of the dead lives
// that the test counts.
struct Campaign {
	test::TempDir dir;
	std::vector<std::thread> relays;
	std::vector<std::string> addrs = sbt::free_addrs(N);
	std::vector<pid_t> pid = std::vector<pid_t>(N, -1);
	std::vector<int> starts = std::vector<int>(N, 0);
	std::vector<int> status = std::vector<int>(N, -1);
	const char *prog;
	const Prog &app;

	Campaign(const char *p, const Prog &a) : prog(p), app(a) {}
	~Campaign()
	{
		for (unsigned i = 0; i < N; i++)
			if (pid[i] > 0) {
				kill(pid[i], SIGKILL);
				waitpid(pid[i], nullptr, 0);
			}
		join_relays();
		for (unsigned i = 0; i < N; i++)
			(void)dc_discard((dir / ("dc" + std::to_string(i))).c_str());
	}
	std::string out(unsigned i) { return dir / ("out." + std::to_string(i)); }
	std::string err(unsigned i) { return dir / ("err." + std::to_string(i)); }

	// after every process ended: all of their stderr is in the files
	void join_relays()
	{
		for (auto &t : relays)
			t.join();
		relays.clear();
	}

	void spawn(unsigned i)
	{
		std::string self = std::to_string(i),
			    dc = dir / ("dc" + std::to_string(i)),
			    o = out(i), e = err(i);
		int pp[2];
		REQUIRE(pipe2(pp, O_CLOEXEC) == 0);
		pid_t p = fork();
		REQUIRE(p >= 0);
		if (p == 0) {
			int nul = open("/dev/null", O_RDWR);
			if (nul < 0)
				_exit(120);
			dup2(pp[1], 2);
			dup2(nul, 1);
			dup2(nul, 0);
			execl(prog, prog, "-d", dc.c_str(), "-c", app.every,
				"-o", o.c_str(), "-w", app.work, app.phases,
				self.c_str(), addrs[0].c_str(), addrs[1].c_str(),
				addrs[2].c_str(), addrs[3].c_str(), (char *)nullptr);
			_exit(121);
		}
		close(pp[1]);
		relays.emplace_back([fd = pp[0], e] {
			int to = open(e.c_str(), O_WRONLY | O_CREAT | O_APPEND,
				0644);
			char buf[4096];
			ssize_t n;
			while ((n = read(fd, buf, sizeof(buf))) > 0)
				if (to >= 0 && write(to, buf, (size_t)n) != n)
					break;
			close(fd);
			if (to >= 0)
				close(to);
		});
		pid[i] = p;
		starts[i]++;
	}

	unsigned count(unsigned i, const char *what)
	{
		std::ifstream f(err(i));
		std::string line;
		unsigned n = 0;
		while (std::getline(f, line))
			n += line.find(what) != std::string::npos;
		return n;
	}

	// reap the processes that ended; true when all have
	bool reap()
	{
		bool all = true;
		for (unsigned i = 0; i < N; i++) {
			if (pid[i] < 0)
				continue;
			int st;
			if (waitpid(pid[i], &st, WNOHANG) == pid[i]) {
				status[i] = st;
				pid[i] = -1;
			} else {
				all = false;
			}
		}
		return all;
	}

	bool wait_all(int seconds)
	{
		for (int t = 0; t < seconds * 100; t++) {
			if (reap())
				return true;
			usleep(10000);
		}
		return false;
	}

	std::string diagnostics()
	{
		std::string s;
		for (unsigned i = 0; i < N; i++)
			s += "--- err." + std::to_string(i) + "\n" +
				test::read_file(err(i));
		return s;
	}
};

std::map<std::string, std::vector<std::string>> references;

const std::vector<std::string> &failure_free(const Prog &app)
{
	auto &reference = references[app.name];
	if (!reference.empty())
		return reference;
	Campaign c(SBML_KILL_PROG, app); // the correct build's program
	for (unsigned i = 0; i < N; i++)
		c.spawn(i);
	bool ended = c.wait_all(120);
	if (ended)
		c.join_relays();
	INFO(c.diagnostics());
	REQUIRE(ended);
	for (unsigned i = 0; i < N; i++) {
		REQUIRE(WIFEXITED(c.status[i]));
		REQUIRE(WEXITSTATUS(c.status[i]) == 0);
		reference.push_back(test::read_file(c.out(i)));
	}
	INFO(reference[0]);
	REQUIRE(reference[0].find(app.answer) != std::string::npos);
	return reference;
}

// One campaign: kills until `budget` or the program ends.  Returns the
// kills done; `bad` says what went wrong, if anything.
unsigned campaign(const char *prog, const Prog &app, std::mt19937_64 &rng,
	unsigned budget, std::string &bad)
{
	const auto &ref = failure_free(app);
	INFO(prog << " " << app.phases);
	REQUIRE(access(prog, X_OK) == 0);
	Campaign c(prog, app);
	unsigned kills = 0;
	for (unsigned i = 0; i < N; i++)
		c.spawn(i);
	for (int t = 0; t < 2000; t++) {
		bool all = true;
		for (unsigned i = 0; i < N; i++)
			all &= c.count(i, "started") > 0;
		if (all)
			break;
		usleep(5000);
	}
	while (kills < budget) {
		usleep((useconds_t)(10000 + rng() % 70000));
		c.reap();
		unsigned alive = 0, done = 0;
		for (unsigned i = 0; i < N; i++) {
			alive += c.pid[i] > 0;
			done += c.count(i, "done:") > 0;
		}
		if (alive < N || done > 0)
			break; /* finishing: a kill now could restart a
				* process whose checkpoints are gone */
		unsigned v = (unsigned)(rng() % N);
		unsigned before = c.count(v, "replay done") +
			c.count(v, "finishing checkpoint");
		kill(c.pid[v], SIGKILL);
		int st;
		waitpid(c.pid[v], &st, 0);
		c.pid[v] = -1;
		if (!(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL)) {
			c.status[v] = st; /* it had ended on its own */
			break;
		}
		kills++;
		c.spawn(v);
		bool back = false;
		for (int t = 0; t < 3000 && !back; t++) {
			back = c.count(v, "replay done") +
					c.count(v, "finishing checkpoint") >
				before;
			if (!back) {
				c.reap();
				if (c.pid[v] < 0)
					break; /* died: reported below */
				usleep(5000);
			}
		}
		if (!back)
			break;
		usleep(50000); /* its re-sent messages get their RSNs */
	}
	if (!c.wait_all(90)) {
		bad = "hang\n" + c.diagnostics();
		return kills;
	}
	c.join_relays();
	for (unsigned i = 0; i < N; i++) {
		// the harness's own failures (no program to run) are no
		// verdict on the program
		REQUIRE(!(WIFEXITED(c.status[i]) &&
			WEXITSTATUS(c.status[i]) >= 120));
		if (!WIFEXITED(c.status[i]) || WEXITSTATUS(c.status[i]) != 0) {
			bad = "process " + std::to_string(i) + " ended with " +
				std::to_string(c.status[i]) + "\n" +
				c.diagnostics();
			return kills;
		}
		if (test::read_file(c.out(i)) != ref[i]) {
			bad = "process " + std::to_string(i) +
				": output differs from the failure-free run\n" +
				c.diagnostics();
			return kills;
		}
	}
	// only killed processes were started again
	for (unsigned i = 0; i < N; i++) {
		unsigned recovered = c.count(i, "replay done") +
			c.count(i, "finishing checkpoint");
		if ((unsigned)c.starts[i] - 1 != recovered) {
			bad = "process " + std::to_string(i) + " started " +
				std::to_string(c.starts[i]) + " times but " +
				"recovered " + std::to_string(recovered) +
				" times\n" + c.diagnostics();
			return kills;
		}
	}
	return kills;
}

// Two processes killed together, once per run, and restarted: either
// everything recovers with the failure-free outputs, or a recovery is
// refused loudly (SBML_ECONCURRENT names the processes) -- never a wrong
// output, never a silent hang.  Returns true if a refusal was seen;
// *killed_out says whether the two were killed (neither had ended yet).
[[maybe_unused]] bool campaign_two(const Prog &app, std::mt19937_64 &rng,
	std::string &bad, bool *killed_out)
{
	const auto &ref = failure_free(app);
	Campaign c(SBML_KILL_PROG, app);
	setenv("SBML_TIMEOUT_MS", "4000", 1); /* survivors give up soon */
	for (unsigned i = 0; i < N; i++)
		c.spawn(i);
	unsetenv("SBML_TIMEOUT_MS");
	for (int t = 0; t < 2000; t++) {
		bool all = true;
		for (unsigned i = 0; i < N; i++)
			all &= c.count(i, "started") > 0;
		if (all)
			break;
		usleep(5000);
	}
	usleep((useconds_t)(50000 + rng() % 400000));
	c.reap();
	unsigned v1 = (unsigned)(rng() % N),
		 v2 = (v1 + 1 + (unsigned)(rng() % (N - 1))) % N;
	bool killed = c.pid[v1] > 0 && c.pid[v2] > 0 &&
		c.count(v1, "done:") + c.count(v2, "done:") == 0;
	*killed_out = killed;
	if (killed) {
		kill(c.pid[v1], SIGKILL);
		kill(c.pid[v2], SIGKILL);
		for (unsigned v : { v1, v2 }) {
			waitpid(c.pid[v], nullptr, 0);
			c.pid[v] = -1;
		}
		setenv("SBML_TIMEOUT_MS", "4000", 1);
		c.spawn(v1);
		c.spawn(v2);
		unsetenv("SBML_TIMEOUT_MS");
	}
	bool ended = c.wait_all(60);
	if (ended)
		c.join_relays();
	bool refused = false;
	for (unsigned i = 0; i < N; i++)
		refused |= c.count(i, "recovery refused") > 0;
	if (!ended) {
		bad = "hang\n" + c.diagnostics();
		return refused;
	}
	bool all_ok = true;
	for (unsigned i = 0; i < N; i++) {
		REQUIRE(!(WIFEXITED(c.status[i]) &&
			WEXITSTATUS(c.status[i]) >= 120));
		bool ok = WIFEXITED(c.status[i]) &&
			WEXITSTATUS(c.status[i]) == 0;
		all_ok &= ok;
		if (ok && test::read_file(c.out(i)) != ref[i]) {
			bad = "process " + std::to_string(i) +
				": a wrong output\n" + c.diagnostics();
			return refused;
		}
	}
	if (!all_ok && !refused)
		bad = "a failure without a refusal\n" + c.diagnostics();
	return refused;
}

unsigned target_kills()
{
	const char *e = getenv("SBML_KILLS");
	return e ? (unsigned)atoi(e) : 20;
}

} // namespace

#ifndef SBML_KILL_PROG_BROKEN
TEST_CASE("one process at a time killed and restarted: the same output, "
	  "the others never restarted", "[kill]")
{
	std::mt19937_64 rng(getenv("SBML_SEED") ? atoll(getenv("SBML_SEED"))
						: 20260101);
	auto ps = chosen();
	unsigned want = target_kills(), kills = 0, runs = 0;
	std::map<std::string, unsigned> per;
	while (kills < want) {
		std::string bad;
		const Prog &app = *ps[runs % ps.size()];
		unsigned k = campaign(SBML_KILL_PROG, app, rng, 8, bad);
		INFO("campaign " << runs << " (" << app.phases << ") after " <<
			k << " kills");
		INFO(bad);
		REQUIRE(bad.empty());
		kills += k;
		per[app.name] += k;
		runs++;
		REQUIRE(runs < 10 * want + 10);
	}
	std::string split;
	for (auto &[name, k] : per)
		split += " " + name + " " + std::to_string(k);
	WARN(kills << " kills in " << runs << " runs (" << split.substr(1) <<
		"), every output equal");
}
TEST_CASE("two processes killed together: recovered, or refused loudly, "
	  "never a wrong output", "[kill-two]")
{
	std::mt19937_64 rng(getenv("SBML_SEED") ? atoll(getenv("SBML_SEED"))
						: 20260202);
	auto ps = chosen();
	unsigned runs = getenv("SBML_RUNS") ? atoi(getenv("SBML_RUNS")) : 4,
		 refusals = 0;
	for (unsigned r = 0; r < runs; r++) {
		std::string bad;
		const Prog &app = *ps[r % ps.size()];
		bool killed = false;
		refusals += campaign_two(app, rng, bad, &killed);
		INFO("run " << r << " (" << app.phases << ")");
		INFO(bad);
		REQUIRE(bad.empty());
		// the double kill happened: the program had not ended yet
		REQUIRE(killed);
	}
	WARN(runs << " double kills, " << refusals << " refused recoveries, "
		"no wrong output");
}
#else
TEST_CASE("the broken build fails under kills", "[kill-broken]")
{
	std::mt19937_64 rng(7);
	unsigned kills = 0;
	std::string bad;
	auto ps = chosen();
	for (unsigned run = 0; run < 40 && bad.empty() &&
		kills < 10 * target_kills(); run++)
		kills += campaign(SBML_KILL_PROG_BROKEN, *ps[run % ps.size()],
			rng, 8, bad);
	WARN("broken build after " << kills << " kills: " <<
		bad.substr(0, 600));
	REQUIRE(!bad.empty());
}
#endif
