// SPDX-License-Identifier: BSD-3-Clause
// rvm_crash.cpp -- SIGKILL during RVM transactions, then a process crash
// or a power failure, then recovery
//
// Writer: a child runs transactions on a 640 KiB region with a 64 KiB log
// (so truncations are frequent): each moves a random amount between two
// slots (their sum stays 0), fills one 512-byte block with the
// transaction number, and bumps the transaction counter; one in ten is
// aborted after its stores.  Commits are grouped (1, 8 or 64 per flush); after
// each flush commit returns, the child reports the counter to the parent.
// Every file access of the child goes through an I/O table that models
// what a power failure keeps: beside each file, a ".durable" copy holds
// what fdatasync made durable, and a ".pending" journal the writes since
// the last sync.
// The parent kills the child with SIGKILL at a random moment, then
// simulates either a process crash (the files as they are: the page cache
// survives) or a power failure: the ".durable" copy plus a random subset
// of the pending writes, in order, some torn at a 512-byte sector (a
// device may have written any of them back, whole or in part), and
// recovers with rvm_initialize.
// Checker: slots sum to 0, each block holds one transaction number no
// newer than the counter, and the counter is at least the last one the
// child reported (a flush commit is durable when it returns).
// Broken writers must be caught: RVM_BROKEN_NO_SYNC (a flush commit
// returns before fdatasync), RVM_BROKEN_TRUNC_ORDER (truncation resets the
// log before the data file is synced), RVM_BROKEN_APPLY_UNSYNCED
// (truncation applies records not yet durable in the log).
#include <map>
#include <random>

#include "rvm_util.hpp"

using rvmtest::Opts;
using rvmtest::Region;
using test::TempDir;

static const size_t SEG = 640 * 1024;
static const size_t LOG = 64 * 1024;
static const size_t SLOTS = 16, BLOCK_WORDS = 64, BLOCKS = 64;
static const size_t BLOCK0 = 512; // word index of the first block

// ---- the power-failure model ----
//
// Per file: "<path>.durable" (what syncs made durable) and
// "<path>.pending" (each write since the last sync: off, len, bytes).

struct Shadow {
	int sfd, pfd;
	std::vector<std::pair<off_t, size_t>> dirty;
};
static std::map<int, Shadow> shadows;

static int sh_open(const char *path, int flags, mode_t mode)
{
	int fd = rvm_io_posix.open(path, flags, mode);
	if (fd < 0)
		return fd;
	std::string s = std::string(path) + ".durable";
	std::string p = std::string(path) + ".pending";
	int sfd = open(s.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	int pfd = open(p.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (sfd < 0 || pfd < 0)
		_exit(90);
	shadows[fd] = Shadow{sfd, pfd, {}};
	return fd;
}

static ssize_t sh_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	ssize_t n = pwrite(fd, buf, len, off);
	if (n > 0) {
		Shadow &s = shadows[fd];
		uint64_t h[2] = {(uint64_t)off, (uint64_t)n};
		std::string rec((const char *)h, sizeof(h));
		rec.append((const char *)buf, (size_t)n);
		if (write(s.pfd, rec.data(), rec.size()) != (ssize_t)rec.size())
			_exit(92);
		s.dirty.push_back({off, (size_t)n});
	}
	return n;
}

// fdatasync: every write so far becomes durable, in write order.  The
// journal is emptied first: a kill during the copy leaves a prefix of
// the writes durable, which a device may do too.
static int sh_fdatasync(int fd)
{
	Shadow &s = shadows[fd];
	if (ftruncate(s.pfd, 0))
		_exit(93);
	std::vector<char> buf;
	for (auto &d : s.dirty) {
		buf.resize(d.second);
		if (pread(fd, buf.data(), d.second, d.first) != (ssize_t)d.second ||
		    pwrite(s.sfd, buf.data(), d.second, d.first) !=
			    (ssize_t)d.second)
			_exit(91);
	}
	s.dirty.clear();
	return 0;
}

static int sh_ftruncate(int fd, off_t len)
{
	if (ftruncate(shadows[fd].sfd, len))
		return -errno;
	return rvm_io_posix.ftruncate(fd, len);
}

static int sh_close(int fd)
{
	close(shadows[fd].sfd);
	close(shadows[fd].pfd);
	shadows.erase(fd);
	return rvm_io_posix.close(fd);
}

static const rvm_io_ops shadow_ops = {
	sh_open, pread, sh_pwrite, sh_fdatasync, sh_ftruncate,
	rvm_io_posix.size, sh_close, rvm_io_posix.unlink,
};

// Power failure: a random subset of the pending writes reaches the
// durable copy, in order, some of them torn at a sector boundary.
static void lose_power(const std::string &path, std::mt19937_64 &rng)
{
	std::string j = test::read_file(path + ".pending");
	int sfd = open((path + ".durable").c_str(), O_WRONLY);
	REQUIRE(sfd >= 0);
	for (size_t at = 0; at + 16 <= j.size();) {
		uint64_t h[2];
		memcpy(h, j.data() + at, sizeof(h));
		size_t len = (size_t)h[1];
		if (at + 16 + len > j.size())
			break; // the journal entry itself was cut by the kill
		size_t keep = 0;
		switch (rng() % 4) {
		case 0: case 1: keep = len; break;                  // written back
		case 2: keep = (rng() % (len / 512 + 1)) * 512; break; // torn
		default: break;                                    // not at all
		}
		keep = std::min(keep, len);
		if (keep)
			REQUIRE(pwrite(sfd, j.data() + at + 16, keep, (off_t)h[0]) ==
				(ssize_t)keep);
		at += 16 + len;
	}
	close(sfd);
}

static void copy_file(const std::string &from, const std::string &to)
{
	test::write_file(to, test::read_file(from));
}

// ---- writer ----

[[noreturn]] static void writer(const std::string &dir, int ackfd,
	uint64_t seed, int group)
{
	rvm__io = &shadow_ops;
	Opts o(dir + "/log", LOG);
	o.o.create_log_file = rvm_false;
	if (RVM_INIT(&o.o))
		_exit(10);
	Region r(dir + "/data", SEG);
	if (rvm_map(&r.r, nullptr))
		_exit(11);
	uint64_t *w = r.words();
	std::mt19937_64 rng(seed);
	rvm_tid_t tid;
	rvm_init_tid(&tid);
	for (uint64_t i = 1;; i++) {
		size_t a = 1 + rng() % SLOTS, b = 1 + rng() % SLOTS;
		uint64_t *blk = &w[BLOCK0 + (rng() % BLOCKS) * BLOCK_WORDS];
		uint64_t v = rng();
		if (rvm_begin_transaction(&tid, restore) ||
		    rvm_set_range(&tid, &w[0], 8) ||
		    rvm_set_range(&tid, &w[a], 8) ||
		    rvm_set_range(&tid, &w[b], 8) ||
		    rvm_set_range(&tid, blk, BLOCK_WORDS * 8))
			_exit(12);
		uint64_t n = ++w[0];
		w[a] += v;
		w[b] -= v;
		for (size_t j = 0; j < BLOCK_WORDS; j++)
			blk[j] = n;
		if (rng() % 10 == 0) {
			if (rvm_abort_transaction(&tid))
				_exit(13);
			continue;
		}
		bool fl = i % (uint64_t)group == 0;
		if (rvm_end_transaction(&tid, fl ? flush : no_flush))
			_exit(14);
		if (fl && write(ackfd, &n, sizeof(n)) != sizeof(n))
			_exit(15);
	}
}

// ---- checker ----

static std::string check(const std::string &dir, uint64_t acked,
	uint64_t *count)
{
	Opts o(dir + "/log", LOG);
	o.o.create_log_file = rvm_false;
	if (RVM_INIT(&o.o))
		return std::string("recovery failed: ") + rvm_errormsg();
	Region r(dir + "/data", SEG);
	if (rvm_map(&r.r, nullptr)) {
		rvm_terminate();
		return std::string("map failed: ") + rvm_errormsg();
	}
	const uint64_t *w = r.words();
	std::string why;
	uint64_t sum = 0;
	for (size_t i = 1; i <= SLOTS; i++)
		sum += w[i];
	if (sum != 0)
		why = "slots do not sum to 0: a transaction was half applied";
	for (size_t k = 0; k < BLOCKS && why.empty(); k++) {
		const uint64_t *blk = &w[BLOCK0 + k * BLOCK_WORDS];
		for (size_t j = 1; j < BLOCK_WORDS; j++)
			if (blk[j] != blk[0])
				why = "block " + std::to_string(k) + " is torn";
		if (blk[0] > w[0])
			why = "block " + std::to_string(k) + " is newer than "
				"the counter";
	}
	if (why.empty() && w[0] < acked)
		why = "lost a flush-committed transaction: counter " +
			std::to_string(w[0]) + " < acknowledged " +
			std::to_string(acked);
	*count = w[0];
	RVM_OK(rvm_unmap(&r.r));
	RVM_OK(rvm_terminate());
	return why;
}

// An empty database, its log, and their ".durable" copies.
static void fresh(const TempDir &d)
{
	for (const char *f : {"log", "data", "log.durable", "data.durable",
		     "log.pending", "data.pending"})
		unlink((d / f).c_str());
	Opts o(d / "log", LOG);
	RVM_OK(RVM_INIT(&o.o));
	Region r(d / "data", SEG);
	RVM_OK(rvm_map(&r.r, nullptr));
	RVM_OK(rvm_terminate());
	for (const char *f : {"log", "data"})
		copy_file(d / f, d / (std::string(f) + ".durable"));
}

struct Outcome {
	int kills = 0, power = 0, violations = 0;
	std::string first;
};

static Outcome run(int iterations, uint64_t seed)
{
	TempDir d;
	Outcome out;
	std::mt19937_64 rng(seed);
	fresh(d);

	for (int it = 0; it < iterations; it++) {
		int fds[2];
		REQUIRE(pipe(fds) == 0);
		static const int groups[] = {1, 8, 64};
		int group = groups[rng() % 3];
		uint64_t cseed = rng();
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			close(fds[0]);
			writer(d.path, fds[1], cseed, group);
		}
		close(fds[1]);
		usleep((useconds_t)(1000 + rng() % 15000));
		kill(pid, SIGKILL);
		int st;
		waitpid(pid, &st, 0);
		INFO("writer exit " << (WIFEXITED(st) ? WEXITSTATUS(st) : 0));
		REQUIRE(WIFSIGNALED(st));
		out.kills++;
		uint64_t acked = 0, v;
		while (read(fds[0], &v, sizeof(v)) == sizeof(v))
			acked = v;
		close(fds[0]);

		// Power failure: only what was synced survives.  Process
		// crash: everything written survives (the page cache).
		bool power = rng() % 10 < 7;
		out.power += power;
		for (const char *f : {"log", "data"}) {
			std::string real = d / f, dur = real + ".durable";
			if (power) {
				lose_power(real, rng);
				copy_file(dur, real);
			} else {
				copy_file(real, dur);
			}
			test::write_file(real + ".pending", "");
		}
		uint64_t count = 0;
		std::string why = check(d.path, acked, &count);
		for (const char *f : {"log", "data"})
			copy_file(d / f, d / (std::string(f) + ".durable"));
		if (!why.empty() && out.violations++ == 0)
			out.first = "kill " + std::to_string(it) + " (" +
				(power ? "power failure" : "process crash") +
				", group " + std::to_string(group) + "): " + why;
		if (!why.empty())
			fresh(d); // start over from an empty database
	}
	return out;
}

TEST_CASE("SIGKILL and power failure during RVM transactions lose no "
	  "flush commit and tear none", "[crash][rvm]")
{
#if defined(RVM_BROKEN_NO_SYNC) || defined(RVM_BROKEN_TRUNC_ORDER) || \
	defined(RVM_BROKEN_APPLY_UNSYNCED)
	// The windows are narrow (truncation: 2-10% of kills): more kills,
	// so missing every one is unlikely (below 1e-5 at the observed rates).
	int n = test::iterations(400);
#else
	int n = test::iterations(100);
#endif
	Outcome o = run(n, test::seed());
	INFO(o.first);
	REQUIRE(o.kills == n);
	REQUIRE(o.power > 0);
#if defined(RVM_BROKEN_NO_SYNC) || defined(RVM_BROKEN_TRUNC_ORDER) || \
	defined(RVM_BROKEN_APPLY_UNSYNCED)
	WARN("broken RVM: " << o.violations << " of " << n
			    << " crashes caught; first: " << o.first);
	REQUIRE(o.violations > 0);
#else
	REQUIRE(o.violations == 0);
#endif
}
