// SPDX-License-Identifier: BSD-3-Clause
// safesync_crash.cpp -- SIGKILL in the middle of rio_safe_sync, many times
//
// Writer: a child fills the whole pool with its iteration number i, calls
// rio_safe_sync(), and reports i to the parent once the call has returned.
// The parent kills it with SIGKILL after a random delay.
// Checker: the parent removes the pool file (the memory copy is lost) and
// opens the pool, which restores it from the image.  The image must always
// load, hold one iteration's content exactly (no torn page), and be at
// least as new as the last iteration the child reported as synced.
// Broken writer (RIO_BROKEN_INPLACE_SYNC build): the sync overwrites the
// newest image slot in place; the checker must catch it.
#include <random>

#include "../common/test_util.hpp"

using test::TempDir;

static const size_t POOL = 4 << 20;

struct Outcome {
	int kills = 0;
	int violations = 0;
	std::string first;
};

static void writer(const std::string &path, int ackfd, uint64_t start)
{
	rio_pool *p = nullptr;
	if (rio_pool_open(path.c_str(), RIO_NO_SIGNALS, &p))
		_exit(10);
	uint64_t *w = (uint64_t *)rio_pool_base(p);
	size_t n = rio_pool_size(p) / sizeof(uint64_t);
	for (uint64_t i = start;; i++) {
		for (size_t j = 0; j < n; j++)
			w[j] = i;
		if (rio_safe_sync(p, nullptr))
			_exit(11);
		if (write(ackfd, &i, sizeof(i)) != sizeof(i))
			_exit(12);
	}
}

static Outcome run(int iterations, uint64_t seed)
{
	TempDir d;
	std::string path = d / "pool";
	Outcome out;
	std::mt19937_64 rng(seed);
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_create(path.c_str(), POOL, RIO_SAFE_SYNC, &p));
	REQUIRE_OK(rio_pool_close(p));
	uint64_t next = 1;

	for (int it = 0; it < iterations; it++) {
		int fds[2];
		REQUIRE(pipe(fds) == 0);
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			close(fds[0]);
			writer(path, fds[1], next);
		}
		close(fds[1]);
		// Long enough for a few syncs of 4 MB, short enough that the
		// kill usually lands inside one.
		usleep((useconds_t)(500 + rng() % 6000));
		kill(pid, SIGKILL);
		int st;
		waitpid(pid, &st, 0);
		REQUIRE(WIFSIGNALED(st));
		out.kills++;
		uint64_t acked = 0, v;
		bool any = false;
		while (read(fds[0], &v, sizeof(v)) == sizeof(v)) {
			acked = v;
			any = true;
		}
		close(fds[0]);

		REQUIRE(unlink(path.c_str()) == 0);
		int rc = rio_pool_open(path.c_str(), RIO_NO_SIGNALS, &p);
		std::string why;
		if (rc != 0) {
			why = std::string("image does not load: ") + rio_errormsg();
		} else {
			const uint64_t *w = (const uint64_t *)rio_pool_base(p);
			size_t n = rio_pool_size(p) / sizeof(uint64_t);
			uint64_t got = w[0];
			for (size_t j = 1; j < n && why.empty(); j++)
				if (w[j] != got)
					why = "torn image: word " + std::to_string(j) +
						" is " + std::to_string(w[j]) +
						", word 0 is " + std::to_string(got);
			if (why.empty() && any && got < acked)
				why = "lost a synced iteration: image has " +
					std::to_string(got) + ", child had synced " +
					std::to_string(acked);
			next = std::max(got, acked) + 1;
			REQUIRE_OK(rio_pool_close(p));
		}
		if (!why.empty()) {
			if (out.violations++ == 0)
				out.first = "kill " + std::to_string(it) + ": " + why;
			// Start over from a fresh pool and image.
			unlink(path.c_str());
			unlink((path + ".img").c_str());
			REQUIRE_OK(rio_pool_create(path.c_str(), POOL,
				RIO_SAFE_SYNC, &p));
			REQUIRE_OK(rio_pool_close(p));
		}
	}
	return out;
}

TEST_CASE("SIGKILL during safe sync never leaves an unusable image",
	"[crash][safesync]")
{
	int n = test::iterations(200);
	Outcome o = run(n, test::seed());
	INFO(o.first);
	REQUIRE(o.kills == n);
#ifdef RIO_BROKEN_INPLACE_SYNC
	// The broken writer must be caught.
	WARN("broken in-place sync: " << o.violations << " of " << n
				      << " kills caught; first: " << o.first);
	REQUIRE(o.violations > 0);
#else
	REQUIRE(o.violations == 0);
#endif
}
