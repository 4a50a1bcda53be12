// SPDX-License-Identifier: BSD-3-Clause
// harness.hpp -- running programs under dc-run, killing them, and judging
//                their visible output with the theory's equivalence
//
// The "user" types a script into a pipe at typist speed; the program's
// standard output and error go to a pseudo-terminal (a screen: line
// buffered, every line a visible event).  The harness SIGKILLs the program
// at random points and runs the same command again.  Keystrokes the
// program consumed are gone from the pipe, as for a real user: the input
// history of the surviving execution E is what the recovered process had
// consumed at its checkpoint (plus logged reads), then what it reads next.
// A recovery is consistent (Definition 1) when the observed output is
// equivalent (Definition 2, dc-equiv) to a failure-free run on E, and the
// files the program wrote are identical to that run's.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "../common/test_util.hpp"
#include "dc.h"

// DC_REQUIRE_OK / DC_REQUIRE_RC: as REQUIRE_OK / REQUIRE_RC, with
// libdc's names and message (its codes are unknown to rio_err_name, and a
// sanitizer build gives libdc a private librio whose message rio_errormsg
// does not see).
#define DC_REQUIRE_OK(expr) TEST_REQUIRE_OK(dc_err_name, dc_errormsg, expr)
#define DC_REQUIRE_RC(expr, want) \
	TEST_REQUIRE_RC(dc_err_name, dc_errormsg, expr, want)

namespace dctest {

inline std::string env_or(const char *k, const char *d)
{
	const char *v = getenv(k);
	return v ? v : d;
}

inline uint64_t now_ms()
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000 + (uint64_t)t.tv_nsec / 1000000;
}

// The dirty-tracking mechanism of the libdc runs this test starts
// (DC_TRACKING, read by dc_init), for as long as it lives.
struct Tracking {
	explicit Tracking(const char *t) { setenv("DC_TRACKING", t, 1); }
	~Tracking() { unsetenv("DC_TRACKING"); }
	Tracking(const Tracking &) = delete;
	Tracking &operator=(const Tracking &) = delete;
};

struct Prog {
	std::string name;
	std::vector<std::string> argv;
	std::string script;
};

inline void drain(int m, std::string &out)
{
	char buf[4096];
	for (;;) {
		ssize_t n = read(m, buf, sizeof(buf));
		if (n <= 0)
			break;
		out.append(buf, (size_t)n);
	}
}

// One read of what is there (the descriptor may block); bytes read.
inline ssize_t drain_once(int m, std::string &out)
{
	char buf[4096];
	ssize_t n = read(m, buf, sizeof(buf));
	if (n > 0)
		out.append(buf, (size_t)n);
	return n;
}

inline pid_t spawn(const std::vector<std::string> &argv, int in, int out,
	const std::string &cwd, const std::vector<std::string> &env)
{
	pid_t pid = fork();
	if (pid == 0) {
		if (chdir(cwd.c_str()) != 0)
			_exit(126);
		dup2(in, 0);
		dup2(out, 1);
		dup2(out, 2);
		for (int fd = 3; fd < 256; fd++)
			close(fd);
		for (auto &e : env)
			putenv(strdup(e.c_str()));
		std::vector<char *> a;
		for (auto &s : argv)
			a.push_back(strdup(s.c_str()));
		a.push_back(nullptr);
		execvp(a[0], a.data());
		_exit(127);
	}
	return pid;
}

// Run argv (standard input from /dev/null unless in, output and errors
// captured), optionally SIGKILLed after kill_ms; its wait status in *st.
inline std::string run_capture(const std::vector<std::string> &argv, int *st,
	const std::vector<std::string> &env = {}, int kill_ms = 0)
{
	int p[2];
	REQUIRE(pipe(p) == 0);
	pid_t pid = spawn(argv, 0, p[1], "/", env);
	close(p[1]);
	if (kill_ms) {
		usleep((useconds_t)kill_ms * 1000);
		kill(pid, SIGKILL);
	}
	waitpid(pid, st, 0);
	std::string out;
	drain(p[0], out);
	close(p[0]);
	return out;
}

// Failure-free run of the program on input E, fed through a pipe as the
// observed runs are (a program may tell a pipe from a file: GNU ed stops at
// the first error when its input is a regular file, and goes on when it is
// a pipe); output through a pty.
inline std::string reference(const Prog &p, const std::string &input,
	const std::string &cwd)
{
	int in[2];
	REQUIRE(pipe(in) == 0);
	int m, s;
	REQUIRE(openpty(&m, &s, nullptr, nullptr, nullptr) == 0);
	pid_t pid = spawn(p.argv, in[0], s, cwd, {});
	close(s);
	close(in[0]);
	fcntl(in[1], F_SETFL, O_NONBLOCK);
	fcntl(m, F_SETFL, O_NONBLOCK);
	signal(SIGPIPE, SIG_IGN);
	std::string out;
	size_t sent = 0;
	char buf[4096];
	for (;;) {
		if (in[1] >= 0 && sent < input.size()) {
			ssize_t k = write(in[1], input.data() + sent,
				input.size() - sent);
			if (k > 0)
				sent += (size_t)k;
			else if (k < 0 && errno != EAGAIN)
				sent = input.size(); // the program is gone
		}
		if (in[1] >= 0 && sent == input.size()) {
			close(in[1]);
			in[1] = -1;
		}
		struct pollfd pf = { m, POLLIN, 0 };
		poll(&pf, 1, in[1] >= 0 ? 5 : -1);
		ssize_t n = read(m, buf, sizeof(buf));
		if (n > 0)
			out.append(buf, (size_t)n);
		else if (!(n < 0 && errno == EAGAIN))
			break; // EIO: the program and its pty are gone
	}
	if (in[1] >= 0)
		close(in[1]);
	close(m);
	int st;
	waitpid(pid, &st, 0);
	return out;
}

inline std::string dir_listing(const std::string &d)
{
	std::string s;
	for (auto &n : test::list_dir(d))
		if (n.rfind(".dc-del-", 0) != 0)
			s += n + ":" + test::read_file(d + "/" + n) + "\n";
	return s;
}

struct Outcome {
	int kills = 0;
	int ended_kills = 0; // kills that found the run ended (checkpoint gone)
	bool equivalent = true;
	bool files_equal = true;
	std::string why;
	size_t lost = 0; // input bytes dropped by crashes
	std::string stats; // dc-run --stats of the run that finished
};

// The counter `key` of a dc-run --stats file (-1: absent).
inline long long stat_of(const std::string &stats, const std::string &key)
{
	size_t at = stats.find(key + "=");
	if (at != 0 && at != std::string::npos)
		at = stats.find("\n" + key + "=");
	if (at == std::string::npos)
		return -1;
	return atoll(stats.c_str() + stats.find('=', at) + 1);
}

// Run p under dc-run with `kills` SIGKILLs at random points; tracking:
// dc-run --tracking (and the finished run's counters in Outcome::stats).
// kill_ended: the last kill waits for its run to end, and comes as soon
// as the checkpoint is gone while the program is still alive -- exiting
// (the test build's DC_TEST_EXIT_WAIT_MS keeps it alive meanwhile);
// Outcome::ended_kills counts the kills taken for the end of the run.
inline Outcome crash_run(const Prog &p, const std::string &proto, int kills,
	test::Rng &rng, const std::string &lib, int tick_ms = 4,
	const char *base = "/dev/shm", const char *tracking = nullptr,
	bool kill_ended = false)
{
	test::TempDir d(base);
	std::string dir = d / "ckpt", cwd = d / "work", rcwd = d / "ref";
	REQUIRE(mkdir(cwd.c_str(), 0700) == 0);
	REQUIRE(mkdir(rcwd.c_str(), 0700) == 0);
	std::string dcrun = env_or("DC_RUN", "dc-run");
	std::vector<std::string> argv = { dcrun, "--dir", dir, "--protocol",
		proto };
	if (tracking)
		argv.insert(argv.end(), { "--tracking", tracking, "--stats",
						d / "stats" });
	argv.push_back("--");
	argv.insert(argv.end(), p.argv.begin(), p.argv.end());
	std::vector<std::string> env;
	if (!lib.empty())
		env.push_back("DC_LIB=" + lib);

	int in[2];
	REQUIRE(pipe(in) == 0);
	int m, s;
	REQUIRE(openpty(&m, &s, nullptr, nullptr, nullptr) == 0);
	fcntl(m, F_SETFL, O_NONBLOCK);
	const std::string &S = p.script;
	std::string observed, E, trace;
	size_t sent = 0, restart = 0;
	bool closed = false;
	Outcome o;

	for (int k = 0; k <= kills; k++) {
		bool last = k == kills;
		// A run that starts from a checkpoint (a recovery) has one
		// from its first instruction.
		struct dc_status at_spawn;
		bool recovering = dc_status(dir.c_str(), &at_spawn) == 0;
		pid_t pid = spawn(argv, in[0], s, cwd, env);
		uint64_t deadline = now_ms() + 15 + rng.below(120);
		// kill_ended: the last kill waits for the run to end
		bool end_kill = kill_ended && k == kills - 1;
		bool seen = recovering; // this run had a checkpoint
		uint64_t spawned = now_ms();
		if (end_kill)
			deadline = UINT64_MAX;
		bool exited = false, finished = false;
		while (!exited) {
			// typist: one line per tick
			if (sent < S.size()) {
				size_t nl = S.find('\n', sent);
				size_t n = (nl == std::string::npos ? S.size() :
								      nl + 1) -
					sent;
				REQUIRE(write(in[1], S.data() + sent, n) ==
					(ssize_t)n);
				sent += n;
			} else if (last && !closed) {
				close(in[1]);
				closed = true;
			}
			struct pollfd pf = { m, POLLIN, 0 };
			poll(&pf, 1, tick_ms);
			drain(m, observed);
			int st;
			if (waitpid(pid, &st, WNOHANG) == pid) {
				exited = finished = true;
				// ending by itself means exiting: a signal
				// (SIGILL, SIGSEGV ...) is a failure
				if (WIFSIGNALED(st)) {
					o.equivalent = false;
					o.why += p.name + "/" + proto +
						": died of signal " +
						std::to_string(WTERMSIG(st)) +
						"\n";
				}
				break;
			}
			if (end_kill) {
				// the kill once the checkpoint is gone
				struct dc_status now;
				int rc = dc_status(dir.c_str(), &now);
				if (rc == 0)
					seen = true;
				else if (seen && rc == DC_ENOCKPT)
					deadline = 0;
				if (deadline && now_ms() > spawned + 60000) {
					kill(pid, SIGKILL);
					waitpid(pid, &st, 0);
					FAIL("program did not end");
				}
			}
			if (!last && now_ms() >= deadline) {
				// A kill that lands after the exiting program
				// removed its checkpoint (ctl first, then the
				// logs, then the process exits) finds a program
				// that has finished: a checkpoint it had is
				// gone after the kill, and nothing else removes
				// a committed checkpoint.  It had one if it
				// started from one, if one is there just before
				// the kill, or if it read input: a run commits
				// its first checkpoint before the program's
				// first instruction (dc_init).  Asking only
				// just before the kill misses a removal that
				// came before that question, and would take
				// the end of the run for a crash that lost all
				// its input.
				struct dc_status pre, post;
				bool had = recovering ||
					dc_status(dir.c_str(), &pre) == 0;
				kill(pid, SIGKILL);
				waitpid(pid, &st, 0);
				exited = true;
				o.kills++;
				int left = 0;
				REQUIRE(ioctl(in[0], FIONREAD, &left) == 0);
				had = had || sent - (size_t)left > restart;
				finished = WIFEXITED(st) ||
					(had && dc_status(dir.c_str(), &post) ==
							DC_ENOCKPT);
				if (WIFEXITED(st))
					o.kills--; // it exited first
				else if (finished)
					o.ended_kills++;
			}
			if (last && now_ms() > deadline + 60000) {
				kill(pid, SIGKILL);
				waitpid(pid, &st, 0);
				FAIL("program did not finish");
			}
		}
		usleep(2000);
		drain(m, observed);
		if (last) {
			E += S.substr(restart);
			break;
		}
		int unread = 0;
		REQUIRE(ioctl(in[0], FIONREAD, &unread) == 0);
		size_t c_dead = sent - (size_t)unread;
		if (finished) { // the program ended by itself: done
			E += S.substr(restart, c_dead - restart);
			break;
		}
		std::string dead = E + S.substr(restart, c_dead - restart);
		struct dc_status st;
		size_t durable = 0;
		if (dc_status(dir.c_str(), &st) == 0)
			durable = (size_t)st.input_bytes;
		if (durable > dead.size())
			durable = dead.size();
		o.lost += dead.size() - durable;
		trace += "kill " + std::to_string(k) + ": sent " +
			std::to_string(sent) + " consumed " +
			std::to_string(c_dead) + " durable " +
			std::to_string(durable) + " of " +
			std::to_string(dead.size()) + "\n";
		E = dead.substr(0, durable);
		restart = c_dead;
		// no checkpoint at all: the next run starts from scratch
	}
	close(in[0]);
	if (!closed)
		close(in[1]);
	close(m);
	close(s);

	if (test::exists(d / "stats"))
		o.stats = test::read_file(d / "stats");
	std::string ref = reference(p, E, rcwd);
	test::write_file(d / "ref.out", ref);
	test::write_file(d / "obs.out", observed);
	std::string cmd = env_or("DC_EQUIV", "dc-equiv") + " " + (d / "ref.out") +
		" " + (d / "obs.out") + " > " + (d / "equiv.txt");
	int rc = system(cmd.c_str());
	bool eq = WIFEXITED(rc) && WEXITSTATUS(rc) == 0;
	if (!eq)
		o.why += p.name + "/" + proto + ": " +
			test::read_file(d / "equiv.txt");
	o.equivalent = o.equivalent && eq;
	std::string fa = dir_listing(cwd), fb = dir_listing(rcwd);
	o.files_equal = fa == fb;
	if (!o.files_equal && o.why.empty())
		o.why = p.name + "/" + proto + ": files differ:\n" + fa +
			"---- reference:\n" + fb;
	// DC_KEEP=1: keep a failing run (input E, outputs, files) for study
	if ((!o.files_equal || !o.equivalent) && getenv("DC_KEEP")) {
		test::write_file(d / "E.in", E);
		test::write_file(d / "trace.txt", trace);
		std::string c = "cp -a " + d.path + " /dev/shm/dcfail-" +
			std::to_string(getpid()) + "-" + proto;
		if (system(c.c_str()) == 0)
			WARN("kept in /dev/shm/dcfail-" << getpid() << "-"
							<< proto);
	}
	return o;
}

inline Prog bc_prog()
{
	std::string s = "scale=4\n";
	for (int i = 1; i <= 60; i++)
		s += "a[" + std::to_string(i) + "]=a[" + std::to_string(i - 1) +
			"]+" + std::to_string(i) + "; a[" + std::to_string(i) +
			"]*3/7\n";
	return { "bc", { "bc", "-q" }, s };
}

inline Prog lua_prog(const std::string &repl)
{
	std::string s = "t = {}\n";
	for (int i = 1; i <= 60; i++)
		s += "t[" + std::to_string(i) + "] = (t[" +
			std::to_string(i - 1) + "] or 1) * 3 % 1000003\n"
			"t[" + std::to_string(i) + "] .. \":\" .. #t\n";
	return { "lua", { "lua5.4", repl }, s };
}

inline Prog ed_prog()
{
	std::string s = "a\n";
	for (int i = 1; i <= 40; i++)
		s += "line " + std::to_string(i) + "\n";
	s += ".\n";
	for (int i = 1; i <= 20; i++)
		s += std::to_string(i) + "s/line/LINE/\n" + std::to_string(i) +
			"p\nw out.txt\n";
	s += "q\n";
	return { "ed", { "ed", "-s" }, s };
}

// sqlite3 with its default rollback journal: every statement a
// transaction that creates, writes and deletes db.sqlite-journal.
inline Prog sqlite_prog(int transactions = 120)
{
	std::string s = "create table t(a integer, b text);\n";
	for (int i = 1; i <= transactions; i++) {
		s += "insert into t values(" + std::to_string(i) + ", 'row " +
			std::to_string(i) + "');\n";
		if (i % 10 == 0)
			s += "select count(*), sum(a) from t;\n";
	}
	return { "sqlite3", { "sqlite3", "db.sqlite" }, s };
}

} // namespace dctest
