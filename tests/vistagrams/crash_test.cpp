// SPDX-License-Identifier: BSD-3-Clause
// crash_test.cpp -- client and server SIGKILLed at random points, many
// times, and restarted, while they run the exactly-once workload
// (workload.hpp) over a slightly lossy network
//
// Writer: the client and server processes (restarted after every kill; a
// PENDING client redoes its receive, thesis Fig. 4.4).
// Checker: once the kills are done the client finishes its cycle and
// stops; then every finished cycle must have taken effect exactly once and
// the client must hold the server's committed answer.
// Broken writers (built from the same sources): VG_BROKEN_SEND_BEFORE_COMMIT
// sends a message as soon as it is logged, VG_BROKEN_FORGET_RESPONSE
// forgets a response once sent; the checker must catch both.
#include "../common/test_util.hpp"
#include "workload.hpp"

#include <sys/stat.h>
#include <sys/wait.h>

#include <random>

static struct vg_endpoint_opts crash_opts(uint64_t node, uint64_t seed)
{
	struct vg_endpoint_opts o = {};
	o.node_id = node;
	o.host = "127.0.0.1";
	o.max_requests = 4;
	o.max_responses = 64;
	o.max_clients = 4;
	o.max_message = 64;
	o.max_ops = 8;
	o.rx_buffers = 32;
	o.rto_us = 1000;
	o.rto_max_us = 8000;
	o.ack_delay_us = 2000;
	o.faults.drop = o.faults.duplicate = 0.02;
	o.faults.delay_max_us = 500;
	o.faults.seed = seed;
	return o;
}

static const uint64_t MAX_N = 100000;

static pid_t spawn(bool client, const std::string &dir, wl::Shared *sh,
	const struct vg_endpoint_opts &o)
{
	fflush(nullptr);
	pid_t p = fork();
	REQUIRE(p >= 0);
	if (p == 0) {
		if (client)
			wl::client_main(dir, sh, o, MAX_N);
		else
			wl::server_main(dir, sh, o, MAX_N);
		_exit(0);
	}
	return p;
}

TEST_CASE("client and server killed at random points: every request takes "
	  "effect exactly once",
	"[crash]")
{
	test::TempDir d;
	std::string cdir = d / "client", sdir = d / "server";
	mkdir(cdir.c_str(), 0755);
	mkdir(sdir.c_str(), 0755);
	uint64_t seed = test::seed();
	std::mt19937_64 rng(seed);
	auto co = crash_opts(1, seed * 2 + 1), so = crash_opts(2, seed * 2 + 2);
	wl::Shared *sh = wl::shared_new();
	const int target = test::iterations(200);
	int kills[2] = { 0, 0 };

	pid_t server = spawn(false, sdir, sh, so);
	while (sh->server_port == 0)
		usleep(1000);
	pid_t client = spawn(true, cdir, sh, co);
	std::string died;
	while (kills[0] + kills[1] < target && died.empty()) {
		// Mostly a few ms, sometimes long enough for many cycles.
		usleep((useconds_t)(rng() % 8 == 0 ? 20000 + rng() % 30000
						    : 500 + rng() % 6000));
		bool kc = rng() % 2;
		pid_t &victim = kc ? client : server;
		kill(victim, SIGKILL);
		int st;
		waitpid(victim, &st, 0);
		if (!WIFSIGNALED(st))
			died = std::string(kc ? "client" : "server") +
				" exited by itself, status " +
				std::to_string(st);
		kills[kc]++;
		victim = spawn(kc, kc ? cdir : sdir, sh, kc ? co : so);
	}
	INFO(died);
	REQUIRE(died.empty());

	// Let the client finish its cycle and stop.
	sh->stop = 1;
	int st = 0;
	bool exited = wl::wait_or_kill(client, 60000, &st);
	kill(server, SIGKILL);
	waitpid(server, nullptr, 0);
	INFO("client status " << st << ", " << sh->finished << " cycles");
	REQUIRE(exited);
	REQUIRE(WIFEXITED(st));
	REQUIRE(WEXITSTATUS(st) == 0);

	uint64_t cycles = 0;
	std::string bad = wl::check(cdir, sdir, co, so, MAX_N, &cycles);
	WARN(kills[1] << " client and " << kills[0] << " server kills, "
		      << cycles << " cycles");
	REQUIRE(kills[0] + kills[1] == target);
	REQUIRE(cycles > 0);
#if defined(VG_BROKEN_SEND_BEFORE_COMMIT) || defined(VG_BROKEN_FORGET_RESPONSE)
	WARN("broken build caught: " << bad);
	REQUIRE(!bad.empty());
#else
	INFO(bad);
	REQUIRE(bad.empty());
#endif
}
