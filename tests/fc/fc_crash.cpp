// SPDX-License-Identifier: BSD-3-Clause
// fc_crash.cpp -- SIGKILL writers of the file cache at random points, many
// times, and check that every acknowledged operation is on disk after
// recovery and that no block is torn.
//
// Writer: a child performs the operations of fc_crash_ops.h (block-sized
// and smaller writes, truncates, unlinks, syncs, and safe saves -- a
// temporary file, in the same directory or another one, renamed over an
// open target -- on four files), through
// the API (a forked child) or as a plain program under librio-fs.so
// (fc_crash_writer), and reports each operation's number on a pipe once
// it has returned.  The parent kills it after a random delay.
// Checker: the parent recovers the cache (rio_fc_cache_open writes every
// dirty block back) and closes it, then reads the files from disk: they
// must equal the model after operations 1..A or 1..A+1, A the last one
// acknowledged.  A torn block, a lost acknowledged write, a resurrected
// truncated or unlinked block all show as a mismatch.
// Power failure: in the "power" mode the child also copies, at every
// drain, the pool lines flushed since the last one to a shadow file: the
// persistence domain's contents.  After the kill the shadow replaces the
// pool (the memory copy is lost; only what was persisted survives).
// Broken builds: RIO_BROKEN_FC_NOPERSIST (data not flushed before the
// write is acknowledged) must be caught by the power mode;
// RIO_BROKEN_FC_ORDER (recovery replays the older of two copies) by the
// kill mode.  Each test passes only if it catches its broken build.
#include <poll.h>
#include <sys/wait.h>

#include <utility>

#include "fc_crash_ops.h"
#include "fc_util.hpp"

using fct::Env;

namespace {

enum Mode { KILL_API, POWER_API, KILL_SHIM };

const size_t POOL = 768 << 10;

struct Model {
	std::string f[FCX_FILES]; // a missing file reads as empty

	void apply(uint64_t seed, uint64_t k)
	{
		struct fcx_op op;
		fcx_op(seed, k, &op);
		std::string &s = f[op.file];
		switch (op.kind) {
		case FCX_WRITE:
			if (s.size() < op.off + op.len)
				s.resize(op.off + op.len, '\0');
			fcx_data(seed, k, (unsigned char *)&s[op.off], op.len);
			break;
		case FCX_TRUNC:
			s.resize(op.size, '\0');
			break;
		case FCX_UNLINK:
			s.clear();
			break;
		case FCX_SAVE:
			s.assign(op.len, '\0');
			fcx_data(seed, k, (unsigned char *)&s[0], op.len);
			break;
		default:
			break;
		}
	}
	bool operator==(const Model &o) const
	{
		for (int i = 0; i < FCX_FILES; i++)
			if (f[i] != o.f[i])
				return false;
		return true;
	}
};

// ---- the power-failure emulation: a shadow of the persistence domain ----

int shadow_fd = -1;
const char *pool_map;
thread_local std::vector<std::pair<const char *, size_t>> pending;

const struct rio_trace_ops shadow_ops = {
	[](const rio_pool *, const void *a, size_t n, const void *) {
		pending.emplace_back((const char *)a, n);
	},
	[](const rio_pool *, const void *) {
		// What the drain makes durable reaches the "media", in an
		// arbitrary order: a kill in the middle of this loop leaves
		// any subset of the lines flushed since the last drain, as
		// the hardware may.
		static thread_local uint64_t r = (uint64_t)getpid();
		for (size_t i = pending.size(); i > 1; i--) {
			r = fcx_mix(r);
			std::swap(pending[i - 1], pending[r % i]);
		}
		for (auto &p : pending)
			if (pwrite(shadow_fd, p.first, p.second,
				    p.first - pool_map) != (ssize_t)p.second)
				_exit(20);
		pending.clear();
	},
	[](const rio_pool *, const char *, const void *) {},
	[](const rio_pool *, void *base, size_t, const char *) {
		pool_map = (const char *)base;
	},
	[](const rio_pool *, void *, size_t) {},
	nullptr,
};

// ---- writers ----

[[noreturn]] void api_writer(const Env &e, uint64_t seed, uint64_t k, int ack,
	bool power)
{
	if (power) {
		shadow_fd = open((e.pool + ".shadow").c_str(), O_WRONLY);
		if (shadow_fd < 0)
			_exit(21);
		rio_trace_set(&shadow_ops);
	}
	struct rio_fc_opts o = {};
	o.writeback_ms = 3;
	o.pool_flags = RIO_FORCE_CACHELINE | RIO_NO_SIGNALS;
	rio_fc_cache *c = nullptr;
	if (rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c))
		_exit(22);
	rio_fc_file *h[FCX_FILES] = {};
	static unsigned char buf[FCX_SAVE_MAX];
	mkdir(e.file(FCX_SUBDIR).c_str(), 0755);
	for (;; k++) {
		struct fcx_op op;
		fcx_op(seed, k, &op);
		std::string path = e.file("f" + std::to_string(op.file));
		rio_fc_file *&f = h[op.file];
		int rc = 0;
		if (op.kind == FCX_SAVE) {
			// Rename over the target while it is open here.
			char tmp[PATH_MAX];
			rio_fc_file *t = nullptr;
			fcx_tmp_name(&op, tmp, sizeof(tmp), e.dir.c_str());
			fcx_data(seed, k, buf, op.len);
			rc = rio_fc_open(c, tmp, O_WRONLY | O_CREAT | O_TRUNC, &t);
			if (rc == 0)
				rc = rio_fc_pwrite(t, buf, op.len, 0);
			if (rc == 0)
				rc = rio_fc_fsync(t);
			if (t != nullptr)
				rio_fc_close(t);
			if (rc == 0)
				rc = rio_fc_rename(c, tmp, path.c_str());
			rio_fc_close(f);
			f = nullptr;
		} else if (op.kind == FCX_UNLINK) {
			rio_fc_close(f);
			f = nullptr;
			rc = rio_fc_unlink(c, path.c_str());
			if (rc == -ENOENT)
				rc = 0;
		} else {
			if (f == nullptr &&
			    rio_fc_open(c, path.c_str(), O_RDWR | O_CREAT, &f))
				_exit(23);
			if (op.kind == FCX_WRITE) {
				fcx_data(seed, k, buf, op.len);
				rc = rio_fc_pwrite(f, buf, op.len, op.off);
			} else if (op.kind == FCX_TRUNC) {
				rc = rio_fc_truncate(f, op.size);
			} else {
				rc = rio_fc_sync_all(c);
			}
		}
		if (rc) {
			fprintf(stderr, "writer: op %llu: %s\n",
				(unsigned long long)k, rio_errormsg());
			_exit(24);
		}
		if (write(ack, &k, sizeof(k)) != sizeof(k))
			_exit(25);
	}
}

pid_t start_writer(Mode mode, const Env &e, uint64_t seed, uint64_t first,
	int ack)
{
	if (mode == KILL_SHIM)
		return fct::spawn({ getenv("FC_CRASH_WRITER"), e.dir,
					  std::to_string(seed), std::to_string(first),
					  std::to_string(ack) },
			{ "LD_PRELOAD=" + fct::preload(), "RIO_FS_DIR=" + e.dir,
				"RIO_FS_POOL=" + e.pool, "RIO_FS_WRITEBACK_MS=3" },
			"", e.tmp / "writer.err", ack);
	fflush(nullptr);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		api_writer(e, seed, first, ack, mode == POWER_API);
	return pid;
}

// ---- the checker ----

struct Outcome {
	int kills = 0, violations = 0, acked = 0;
	std::string first;
};

Model read_disk(const Env &e)
{
	Model m;
	for (int i = 0; i < FCX_FILES; i++)
		m.f[i] = test::read_file(e.file("f" + std::to_string(i)));
	return m;
}

std::string describe(const Model &want, const Model &got)
{
	for (int i = 0; i < FCX_FILES; i++) {
		if (want.f[i] == got.f[i])
			continue;
		size_t j = 0;
		while (j < want.f[i].size() && j < got.f[i].size() &&
		       want.f[i][j] == got.f[i][j])
			j++;
		return "file f" + std::to_string(i) + ": " +
			std::to_string(got.f[i].size()) + " bytes, expected " +
			std::to_string(want.f[i].size()) +
			"; first difference at byte " + std::to_string(j) +
			" (block " + std::to_string(j / FCX_BS) + ")";
	}
	return "";
}

void make_cache(const Env &e)
{
	struct rio_fc_opts o = {};
	o.flags = RIO_FC_CREATE | RIO_FC_NO_THREAD;
	o.pool_size = POOL;
	rio_fc_cache *c = nullptr;
	REQUIRE_OK(rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c));
	REQUIRE_OK(rio_fc_cache_close(c));
}

Outcome run(Mode mode, int iterations, uint64_t seed, bool stop_at_first)
{
	Env e;
	Outcome out;
	test::Rng rng(seed);
	Model m;
	uint64_t next = 1;

	make_cache(e);
	for (int it = 0; it < iterations; it++) {
		if (mode == POWER_API)
			test::write_file(e.pool + ".shadow",
				test::read_file(e.pool));
		int fds[2];
		REQUIRE(pipe(fds) == 0);
		pid_t pid = start_writer(mode, e, seed, next, fds[1]);
		close(fds[1]);
		uint64_t a = next - 1, v;
		// One kill in four lands while the writer starts (its cache
		// open); the others once it is writing, however loaded the
		// machine is.
		if (rng.below(4) == 0) {
			usleep((useconds_t)rng.below(3000));
		} else {
			struct pollfd p = { fds[0], POLLIN, 0 };
			if (poll(&p, 1, 5000) == 1 &&
			    read(fds[0], &v, sizeof(v)) == sizeof(v))
				a = v;
			usleep((useconds_t)(200 + rng.below(12000)));
		}
		kill(pid, SIGKILL);
		int st = fct::wait_status(pid);
		while (read(fds[0], &v, sizeof(v)) == sizeof(v))
			a = v;
		close(fds[0]);
		out.kills++;
		out.acked += (int)(a + 1 - next);
		std::string why;
		if (!WIFSIGNALED(st))
			why = "writer stopped by itself (status " +
				std::to_string(st) + "): " +
				test::read_file(e.tmp / "writer.err");
		if (mode == POWER_API)
			REQUIRE(rename((e.pool + ".shadow").c_str(),
					e.pool.c_str()) == 0);

		// Recovery, then the disk.
		rio_fc_cache *c = nullptr;
		struct rio_fc_opts o = {};
		o.flags = RIO_FC_NO_THREAD;
		int rc = rio_fc_cache_open(e.pool.c_str(), e.dir.c_str(), &o, &c);
		if (rc == 0) {
			if (fct::stats(c).conflicts && why.empty())
				why = "recovery reported a conflict";
			rc = rio_fc_cache_close(c);
		}
		if (rc && why.empty())
			why = std::string("recovery failed: ") + rio_errormsg();
		Model ma = m;
		for (uint64_t k = next; k <= a; k++)
			ma.apply(seed, k);
		Model mb = ma;
		mb.apply(seed, a + 1);
		Model got = read_disk(e);
		if (why.empty()) {
			if (got == ma)
				m = ma;
			else if (got == mb)
				m = mb;
			else
				why = "acknowledged op " + std::to_string(a) +
					": " + describe(ma, got);
		}
		next = a + 2;
		if (!why.empty()) {
			if (out.violations++ == 0)
				out.first = "kill " + std::to_string(it) + ": " + why;
			if (stop_at_first)
				break;
			// Go on from a fresh cache and what the disk holds.
			unlink(e.pool.c_str());
			make_cache(e);
			m = read_disk(e);
		}
	}
	return out;
}

void report(const char *what, const Outcome &o)
{
	WARN(what << ": " << o.kills << " kills, " << o.acked
		  << " operations acknowledged, " << o.violations
		  << " violations" << (o.first.empty() ? "" : "; first: ")
		  << o.first);
}

} // namespace

#if !defined(RIO_BROKEN_FC_NOPERSIST) && !defined(RIO_BROKEN_FC_ORDER)

TEST_CASE("kill -9 of a writer using the API", "[crash][fc-crash-api]")
{
	int n = test::iterations(120);
	Outcome o = run(KILL_API, n, test::seed(), false);
	report("API, kill -9", o);
	REQUIRE(o.kills == n);
	REQUIRE(o.acked > n);
	REQUIRE(o.violations == 0);
}

TEST_CASE("power failure under a writer using the API",
	"[crash][fc-crash-power]")
{
	int n = test::iterations(100);
	Outcome o = run(POWER_API, n, test::seed(), false);
	report("API, power failure", o);
	REQUIRE(o.kills == n);
	REQUIRE(o.acked > n);
	REQUIRE(o.violations == 0);
}

TEST_CASE("kill -9 of a plain program under librio-fs.so",
	"[crash][fc-crash-shim]")
{
	int n = test::iterations(100);
	Outcome o = run(KILL_SHIM, n, test::seed(), false);
	report("shim, kill -9", o);
	REQUIRE(o.kills == n);
	REQUIRE(o.acked > n);
	REQUIRE(o.violations == 0);
}

#elif defined(RIO_BROKEN_FC_NOPERSIST)

TEST_CASE("broken: writes acknowledged before their data is durable",
	"[crash][fc-crash-broken]")
{
	Outcome o = run(POWER_API, test::iterations(150), test::seed(), true);
	report("broken (no persist), power failure", o);
	REQUIRE(o.violations > 0);
}

#else

TEST_CASE("broken: recovery replays the older copy of a block",
	"[crash][fc-crash-broken]")
{
	Outcome o = run(KILL_API, test::iterations(150), test::seed(), true);
	report("broken (replay order), kill -9", o);
	REQUIRE(o.violations > 0);
}

#endif
