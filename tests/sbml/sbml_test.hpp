// SPDX-License-Identifier: BSD-3-Clause
// sbml_test.hpp -- helpers of the sbml tests: free loopback ports, groups
// of processes inside one test process, driving them
#pragma once

#include "test_util.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include "dc.h"
#include "sbml_int.h"
}

#define SBML_REQUIRE_OK(expr) \
	TEST_REQUIRE_OK(sbml_err_name, sbml_errormsg, expr)
#define SBML_REQUIRE_RC(expr, want) \
	TEST_REQUIRE_RC(sbml_err_name, sbml_errormsg, expr, want)

namespace sbt {

// n loopback UDP ports free right now (bound to port 0, then closed).
inline std::vector<std::string> free_addrs(unsigned n)
{
	std::vector<int> fds;
	std::vector<std::string> out;
	static bool seeded;
	if (!seeded) {
		srandom((unsigned)getpid() ^ (unsigned)time(nullptr));
		seeded = true;
	}
	for (unsigned i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_DGRAM, 0);
		REQUIRE(fd >= 0);
		// below the ephemeral range (32768..): a port the kernel
		// hands out could be taken by another test's socket between
		// this probe and the program's bind
		sockaddr_in a{};
		a.sin_family = AF_INET;
		a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		int tries = 0;
		do {
			REQUIRE(++tries < 1000);
			a.sin_port = htons((uint16_t)(20000 + random() % 12000));
		} while (bind(fd, (sockaddr *)&a, sizeof(a)) != 0);
		out.push_back("127.0.0.1:" + std::to_string(ntohs(a.sin_port)));
		fds.push_back(fd);
	}
	for (int fd : fds)
		close(fd);
	return out;
}

// A group of n processes, all handles in this test process.
struct Group {
	std::vector<std::string> addrs;
	std::vector<const char *> cstr;
	std::vector<sbml *> h;
	sbml_opts base{};

	explicit Group(unsigned n, const sbml_faults *f = nullptr,
		unsigned timeout_ms = 20000)
	{
		addrs = free_addrs(n);
		for (auto &a : addrs)
			cstr.push_back(a.c_str());
		base.nprocs = n;
		base.addrs = cstr.data();
		base.faults = f;
		base.timeout_ms = timeout_ms;
		base.rto_ms = 5;
		h.resize(n, nullptr);
		for (unsigned i = 0; i < n; i++)
			open(i);
	}
	void open(unsigned i)
	{
		sbml_opts o = base;
		o.self = i;
		SBML_REQUIRE_OK(sbml_open(&o, &h[i]));
	}
	~Group()
	{
		for (auto *s : h)
			sbml_close(s);
	}
	// pump every handle except `busy` once
	void pump_others(int busy = -1)
	{
		for (unsigned i = 0; i < h.size(); i++)
			if ((int)i != busy && h[i])
				(void)sbml__pump(h[i], sbml__now_ns() + 1000000);
	}
	// receive on process i, pumping the others meanwhile
	int recv(unsigned i, int src, std::string &out, unsigned *from = nullptr,
		unsigned tries = 20000)
	{
		char buf[SBML_MAX_MESSAGE];
		size_t len = 0;
		int rc = SBML_ETIMEDOUT;
		for (unsigned t = 0; t < tries && rc == SBML_ETIMEDOUT; t++) {
			rc = sbml_recv(h[i], src, buf, sizeof(buf), &len, from,
				1);
			if (rc == SBML_ETIMEDOUT)
				pump_others((int)i);
		}
		if (rc == 0)
			out.assign(buf, len);
		return rc;
	}
	// pump everybody until pred() holds
	template <class P> bool drive(P pred, unsigned rounds = 20000)
	{
		for (unsigned r = 0; r < rounds; r++) {
			if (pred())
				return true;
			pump_others();
		}
		return pred();
	}
};

inline unsigned log_len(const sbml *s, unsigned dst)
{
	unsigned n = 0;
	for (const sbml__msg *m = s->peer[dst].log; m; m = m->next)
		n++;
	return n;
}

inline bool all_fully_logged(const sbml *s, unsigned dst)
{
	for (const sbml__msg *m = s->peer[dst].log; m; m = m->next)
		if (m->rsn == 0)
			return false;
	return true;
}

} // namespace sbt
