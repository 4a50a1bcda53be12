// SPDX-License-Identifier: BSD-3-Clause
// test_util.hpp -- helpers shared by the test suites of every library
#pragma once

#include <catch2/catch.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "rio.h"

// TEST_REQUIRE_OK(name, msg, call): the call returns 0; on failure prints
// the expression, the code's name (name(rc)) and the library's thread
// error message (msg()).  TEST_REQUIRE_RC(name, msg, call, code): the call
// fails with exactly `code` and says why.  Each library's tests name their
// pair once: REQUIRE_OK/REQUIRE_RC (librio), VREQUIRE_* (libvista),
// VG_REQUIRE_* (libvistagrams), DC_REQUIRE_* (libdc).
#define TEST_REQUIRE_OK(name, msg, expr)                                  \
	do {                                                              \
		int rc_ = (expr);                                         \
		INFO(#expr << " -> " << name(rc_) << ": " << msg());      \
		REQUIRE(rc_ == 0);                                        \
	} while (0)
#define TEST_REQUIRE_RC(name, msg, expr, want)                            \
	do {                                                              \
		int rc_ = (expr);                                         \
		INFO(#expr << " -> " << name(rc_) << ": " << msg());      \
		REQUIRE(std::string(name(rc_)) == std::string(name(want))); \
		REQUIRE(rc_ == (want));                                   \
		REQUIRE(std::string(msg()).size() > 0);                   \
	} while (0)

#define REQUIRE_OK(expr) TEST_REQUIRE_OK(rio_err_name, rio_errormsg, expr)
#define REQUIRE_RC(expr, want) \
	TEST_REQUIRE_RC(rio_err_name, rio_errormsg, expr, want)

namespace test {

// A fresh directory (on /dev/shm unless told otherwise), removed with
// everything in it when the object goes.
struct TempDir {
	std::string path;
	explicit TempDir(const char *base = "/dev/shm")
	{
		std::string tmpl = std::string(base) + "/riotest-XXXXXX";
		std::vector<char> buf(tmpl.begin(), tmpl.end());
		buf.push_back('\0');
		REQUIRE(mkdtemp(buf.data()) != nullptr);
		path = buf.data();
	}
	~TempDir()
	{
		nftw(path.c_str(),
			[](const char *p, const struct stat *, int, struct FTW *) {
				return remove(p);
			},
			16, FTW_DEPTH | FTW_PHYS);
	}
	std::string operator/(const std::string &name) const
	{
		return path + "/" + name;
	}
	TempDir(const TempDir &) = delete;
	TempDir &operator=(const TempDir &) = delete;
};

inline std::string read_file(const std::string &path)
{
	std::string s;
	int fd = open(path.c_str(), O_RDONLY);
	if (fd < 0)
		return s;
	char buf[65536];
	ssize_t n;
	while ((n = read(fd, buf, sizeof(buf))) > 0)
		s.append(buf, (size_t)n);
	close(fd);
	return s;
}

inline void write_file(const std::string &path, const std::string &data)
{
	int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	REQUIRE(write(fd, data.data(), data.size()) == (ssize_t)data.size());
	close(fd);
}

inline void patch_file(const std::string &path, off_t off, const void *buf,
	size_t n)
{
	int fd = open(path.c_str(), O_WRONLY);
	REQUIRE(fd >= 0);
	REQUIRE(pwrite(fd, buf, n, off) == (ssize_t)n);
	close(fd);
}

// Names in a directory, sorted, without . and ..
inline std::vector<std::string> list_dir(const std::string &path)
{
	std::vector<std::string> v;
	DIR *d = opendir(path.c_str());
	REQUIRE(d != nullptr);
	while (struct dirent *e = readdir(d))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			v.push_back(e->d_name);
	closedir(d);
	std::sort(v.begin(), v.end());
	return v;
}

inline bool exists(const std::string &path)
{
	struct stat st;
	return stat(path.c_str(), &st) == 0;
}

// Result of a child process: exit code, or the signal that killed it, and
// what it wrote on stderr.
struct ChildResult {
	bool exited = false;
	int code = -1;
	int signal = 0;
	std::string err;
};

// Run fn in a forked child (stderr captured); the child exits 0 if fn
// returns.  Catch assertions inside fn do not reach the parent: check
// results through the exit code, the files, or stderr.
inline ChildResult run_child(const std::function<void()> &fn)
{
	int pipefd[2];
	REQUIRE(pipe(pipefd) == 0);
	fflush(nullptr);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(pipefd[0]);
		dup2(pipefd[1], STDERR_FILENO);
		fn();
		_exit(0);
	}
	close(pipefd[1]);
	ChildResult r;
	char buf[4096];
	ssize_t n;
	while ((n = read(pipefd[0], buf, sizeof(buf))) > 0)
		r.err.append(buf, (size_t)n);
	close(pipefd[0]);
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	if (WIFEXITED(st)) {
		r.exited = true;
		r.code = WEXITSTATUS(st);
	} else if (WIFSIGNALED(st)) {
		r.signal = WTERMSIG(st);
	}
	return r;
}

// Deterministic fast PRNG (splitmix64) for tests that must replay.
struct Rng {
	uint64_t s;
	explicit Rng(uint64_t seed) : s(seed) {}
	uint64_t next()
	{
		uint64_t z = (s += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		return z ^ (z >> 31);
	}
	uint64_t below(uint64_t n) { return n ? next() % n : 0; }
};

// Seed from TEST_SEED if set (to replay a failure), else from the clock;
// printed so every run can be reproduced.
inline uint64_t seed()
{
	const char *s = getenv("TEST_SEED");
	uint64_t v = s ? strtoull(s, nullptr, 0) : (uint64_t)time(nullptr);
	WARN("TEST_SEED=" << v);
	return v;
}

// Iterations of a crash test: CRASH_ITERATIONS overrides the default.
inline int iterations(int dflt)
{
	const char *s = getenv("CRASH_ITERATIONS");
	return s ? atoi(s) : dflt;
}

} // namespace test
