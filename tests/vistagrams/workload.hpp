// SPDX-License-Identifier: BSD-3-Clause
// workload.hpp -- the exactly-once workload of the fault and crash tests
//
// Client, cycle i = 1, 2, ...:
//   tx 1: send request "i"; state = PENDING(i, seq)            (commit)
//   tx 2: receive the response v; rec[i] = v; state = idle     (commit)
// After a restart a PENDING client redoes tx 2 (thesis Fig. 4.4).
// Server, each request "i":
//   tx: counter++; seen[i]++; given[i] = v = counter << 32 | nonce;
//       respond v                                              (commit)
// The nonce is random: re-executing a request gives another answer, so a
// response that escaped before its transaction committed (and was then
// rolled back) is caught.  Exactly once holds iff, for every finished
// cycle i, seen[i] == 1 and rec[i] == given[i], and counter equals the
// number of finished cycles.
// A cycle whose response the server reclaimed (the client was away past
// the server's horizon) ends with VG_EEXPIRED: rec[i] = EXPIRED, and the
// request must have run at most once (seen[i] <= 1); the counter is then
// the sum of seen[].  Requests whose payload is 0 are foreign (forged
// clients of a test): answered, never counted.
//
// The processes run outside Catch (forked): failures exit with a code and
// a message on stderr.
#pragma once

#include <sys/mman.h>
#include <sys/wait.h>
#include <signal.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <random>
#include <string>

#include "vistagrams.h"

namespace wl {

struct Shared {
	std::atomic<int> stop{ 0 };          // client: finish the cycle, exit
	std::atomic<int> server_port{ 0 };   // chosen by the first server
	std::atomic<uint64_t> finished{ 0 }; // cycles the client committed
	std::atomic<uint64_t> expired{ 0 };  // ... that ended VG_EEXPIRED
	std::atomic<uint64_t> reclaimed{ 0 }; // responses_expired, all servers
	std::atomic<int> hold{ 0 };          // client: stop after the next send
	std::atomic<uint64_t> held{ 0 };     // ... the cycle it stopped in
	std::atomic<uint64_t> served{ 0 };   // the last cycle a server committed
	struct vg_stats client_stats;        // of the last client run
	struct vg_stats server_stats;        // of the server, now and then
};

// rec[i] of a cycle that ended with VG_EEXPIRED
static const uint64_t EXPIRED = UINT64_MAX;

inline Shared *shared_new()
{
	void *p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE,
		MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	return new (p) Shared();
}

struct CState {
	uint64_t next_i;  // the next cycle to start (from 1)
	uint64_t pending; // a request is out: wait for its response
	uint64_t pending_seq;
	uint64_t reserved;
	uint64_t rec[];   // rec[i]: the response of cycle i
};

struct SEntry {
	uint64_t seen, given;
};
struct SState {
	uint64_t counter;
	uint64_t reserved[3];
	SEntry e[];
};

inline void *seg_addr(int which)
{
	return (void *)(uintptr_t)(0x5f8000000000ull + ((uint64_t)which << 32));
}

[[noreturn]] inline void die(int code, const char *what, int rc)
{
	fprintf(stderr, "%s: %s (%s): %s\n", what, vg_err_name(rc),
		vg_strerror(rc), vg_errormsg());
	_exit(code);
}

#define WL_OK(code, call)                      \
	do {                                   \
		int rc_ = (call);              \
		if (rc_)                       \
			die(code, #call, rc_); \
	} while (0)

// A process's vista instance, its segment, its endpoint; user data after
// the tables.
struct Node {
	vista *v = nullptr;
	vista_segment *seg = nullptr;
	vg_endpoint *ep = nullptr;
	void *data = nullptr;

	Node(const std::string &dir, int which, struct vg_endpoint_opts o,
		size_t data_bytes)
	{
		std::string log = dir + "/log", path = dir + "/seg";
		struct vista_opts vo = {};
		size_t tables;
		vo.log_path = log.c_str();
		vo.log_size = 2 << 20;
		vo.lanes = 2;
		WL_OK(20, vista_init(&vo, &v));
		WL_OK(21, vg_table_size(&o, &tables));
		tables = (tables + 4095) & ~(size_t)4095;
		WL_OK(22, vista_map(v, path.c_str(), seg_addr(which),
			tables + data_bytes, VISTA_CREATE, &seg));
		o.flags = VG_CREATE;
		WL_OK(23, vg_endpoint_open(v, seg, &o, &ep));
		data = (char *)vista_segment_base(seg) + tables;
	}
	~Node()
	{
		vg_endpoint_close(ep);
		vista_fini(v);
	}
};

inline void client_main(const std::string &dir, Shared *sh,
	struct vg_endpoint_opts o, uint64_t max_n)
{
	Node n(dir, 0, o, sizeof(CState) + 8 * (max_n + 1));
	auto *st = (CState *)n.data;
	struct sockaddr_in to = {};
	to.sin_family = AF_INET;
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	while (sh->server_port == 0)
		usleep(1000);
	to.sin_port = htons((uint16_t)sh->server_port);

	if (st->next_i == 0) { // first run
		WL_OK(30, vg_begin(n.v, 0));
		WL_OK(31, vista_set_range(n.v, st, sizeof(*st)));
		st->next_i = 1;
		WL_OK(32, vg_commit(n.v));
	}
	for (;;) {
		if (st->pending) { // PENDING: receive the response
			uint64_t i = st->next_i, seq = st->pending_seq, v = 0;
			size_t len = 0;
			WL_OK(40, vg_begin(n.v, 0));
			int rc = vista_receive_response(n.ep, &seq, &v,
				sizeof(v), &len, -1);
			if (rc == VG_EEXPIRED)
				v = EXPIRED;
			else if (rc || len != sizeof(v))
				die(41, "vista_receive_response", rc);
			struct vista_range r[2] = { { st, sizeof(*st) },
				{ &st->rec[i], 8 } };
			WL_OK(42, vista_set_ranges(n.v, 2, r));
			st->rec[i] = v;
			st->pending = 0;
			st->next_i = i + 1;
			WL_OK(43, vg_commit(n.v));
			sh->finished = i;
			if (v == EXPIRED)
				sh->expired++;
		}
		if (sh->stop || st->next_i > max_n)
			break;
		uint64_t i = st->next_i, seq;
		WL_OK(50, vg_begin(n.v, 0));
		WL_OK(51, vista_send_request(n.ep, (sockaddr *)&to, sizeof(to),
			&i, sizeof(i), &seq));
		WL_OK(52, vista_set_range(n.v, st, sizeof(*st)));
		st->pending = 1;
		st->pending_seq = seq;
		WL_OK(53, vg_commit(n.v));
		if (sh->hold) { // the test kills it here, request out
			sh->held = i;
			for (;;)
				pause();
		}
	}
	// The acknowledgement of the last response goes now.
	vg_poll(n.ep, 30);
	vg_stats(n.ep, &sh->client_stats);
}

inline void server_main(const std::string &dir, Shared *sh,
	struct vg_endpoint_opts o, uint64_t max_n)
{
	o.port = (uint16_t)sh->server_port.load();
	Node n(dir, 1, o, sizeof(SState) + sizeof(SEntry) * (max_n + 1));
	auto *st = (SState *)n.data;
	std::mt19937_64 rng((uint64_t)getpid() * 7919 + (uint64_t)time(nullptr));
	if (sh->server_port == 0) {
		struct sockaddr_storage ss;
		socklen_t len;
		WL_OK(60, vg_endpoint_address(n.ep, &ss, &len));
		sh->server_port = ntohs(((sockaddr_in *)&ss)->sin_port);
	}
	uint64_t reclaimed = 0;
	for (;;) {
		uint64_t i = 0;
		size_t len = 0;
		vg_reqid id;
		WL_OK(70, vg_begin(n.v, 0));
		int rc = vista_receive_request(n.ep, &id, &i, sizeof(i), &len,
			-1);
		if (rc || len != sizeof(i) || i > max_n)
			die(71, "vista_receive_request", rc);
		struct vg_stats vs;
		vg_stats(n.ep, &vs);
		sh->reclaimed += vs.responses_expired - reclaimed;
		reclaimed = vs.responses_expired;
		if (i == 0) { // foreign: answered, not counted
			WL_OK(75, vista_send_response(n.ep, &id, &i,
				sizeof(i)));
			WL_OK(76, vg_commit(n.v));
			continue;
		}
		struct vista_range r[2] = { { st, 8 }, { &st->e[i],
							   sizeof(SEntry) } };
		WL_OK(72, vista_set_ranges(n.v, 2, r));
		st->counter++;
		st->e[i].seen++;
		uint64_t v = st->counter << 32 | (rng() & 0xffffffffu);
		st->e[i].given = v;
		WL_OK(73, vista_send_response(n.ep, &id, &v, sizeof(v)));
		WL_OK(74, vg_commit(n.v));
		sh->served = i;
		if ((st->counter & 63) == 0)
			vg_stats(n.ep, &sh->server_stats);
	}
}

// After both processes are gone: the first violation of exactly once, or
// "".  *cycles gets the number of finished cycles.
inline std::string check(const std::string &cdir, const std::string &sdir,
	struct vg_endpoint_opts co, struct vg_endpoint_opts so, uint64_t max_n,
	uint64_t *cycles)
{
	co.port = so.port = 0;
	Node c(cdir, 0, co, sizeof(CState) + 8 * (max_n + 1));
	Node s(sdir, 1, so, sizeof(SState) + sizeof(SEntry) * (max_n + 1));
	auto *cs = (CState *)c.data;
	auto *ss = (SState *)s.data;
	uint64_t done = cs->next_i - 1;
	*cycles = done;
	if (cs->pending)
		return "the client still waits for cycle " +
			std::to_string(cs->next_i);
	uint64_t runs = 0;
	for (uint64_t i = 1; i <= done; i++) {
		runs += ss->e[i].seen;
		if (cs->rec[i] == EXPIRED) {
			if (ss->e[i].seen > 1)
				return "expired request " + std::to_string(i) +
					" took effect " +
					std::to_string(ss->e[i].seen) + " times";
			continue;
		}
		if (ss->e[i].seen != 1)
			return "request " + std::to_string(i) + " took effect " +
				std::to_string(ss->e[i].seen) + " times";
		if (cs->rec[i] != ss->e[i].given)
			return "cycle " + std::to_string(i) + ": the client got " +
				std::to_string(cs->rec[i] >> 32) + ":" +
				std::to_string(cs->rec[i] & 0xffffffffu) +
				", the server's committed answer is " +
				std::to_string(ss->e[i].given >> 32) + ":" +
				std::to_string(ss->e[i].given & 0xffffffffu);
	}
	if (ss->counter != runs)
		return "the server executed " + std::to_string(ss->counter) +
			" requests, the cycles " + std::to_string(runs);
	return "";
}

// Waits up to `ms` for `pid` to exit, SIGKILLs it if it does not; returns
// whether it exited by itself, with its status in *st either way.
inline bool wait_or_kill(pid_t pid, int ms, int *st)
{
	pid_t got = 0;
	for (int t = 0; t < ms && got == 0; t += 10) {
		got = waitpid(pid, st, WNOHANG);
		if (got == 0)
			usleep(10000);
	}
	if (got == pid)
		return true;
	kill(pid, SIGKILL);
	waitpid(pid, st, 0);
	return false;
}

} // namespace wl
