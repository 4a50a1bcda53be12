// SPDX-License-Identifier: BSD-3-Clause
// vg_test.hpp -- helpers shared by the libvistagrams test programs
#pragma once

#include "../common/test_util.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <thread>

#include "vistagrams.h"

// REQUIRE_OK / REQUIRE_RC naming VG_E* and VISTA_E* codes too.
#define VG_REQUIRE_OK(expr) TEST_REQUIRE_OK(vg_err_name, vg_errormsg, expr)
#define VG_REQUIRE_RC(expr, want) \
	TEST_REQUIRE_RC(vg_err_name, vg_errormsg, expr, want)

namespace vgt {

// The checker's verdict `bad` (the first violation, or ""): a broken build
// must be caught (non-empty), a correct one must pass.
inline void require_caught(bool broken, const std::string &bad)
{
	if (broken) {
		WARN("broken build caught: " << bad);
		REQUIRE(!bad.empty());
	} else {
		INFO(bad);
		REQUIRE(bad.empty());
	}
}

// Fixed addresses for test segments (libvista maps segments where they
// were created), 4 GiB apart, away from libvista's own tests.
inline void *addr(int slot)
{
	return (void *)(uintptr_t)(0x5f0000000000ull + ((uint64_t)slot << 32));
}

// Small tables: quick to create, zero and check.
inline struct vg_endpoint_opts opts(uint64_t node)
{
	struct vg_endpoint_opts o = {};
	o.node_id = node;
	o.host = "127.0.0.1";
	o.flags = VG_CREATE;
	o.max_requests = 16;
	o.max_responses = 32;
	o.max_clients = 8;
	o.max_message = 1024;
	o.max_ops = 16;
	o.rx_buffers = 64;
	o.rto_us = 2000;
	o.rto_max_us = 50000;
	o.ack_delay_us = 5000;
	return o;
}

// A vista instance in a temporary directory; segments on demand.
struct World {
	std::unique_ptr<test::TempDir> own;
	std::string path;
	vista *v = nullptr;
	unsigned rio_flags = 0;
	std::vector<vg_endpoint *> eps; // closed by the destructor

	explicit World(unsigned flags = 0)
		: own(new test::TempDir()), path(own->path), rio_flags(flags)
	{
		init();
	}
	// On a directory that outlives this object (crash tests: a child
	// process and then its parent open the same files).
	explicit World(const std::string &dir, unsigned flags = 0)
		: path(dir), rio_flags(flags)
	{
		init();
	}
	~World()
	{
		// A failed REQUIRE may leave a transaction open.
		if (v && vista_in_transaction(v))
			vg_abort(v);
		for (vg_endpoint *ep : eps)
			vg_endpoint_close(ep);
		if (v)
			vista_fini(v);
	}
	vg_endpoint *open(vista_segment *s, const struct vg_endpoint_opts &o)
	{
		vg_endpoint *ep = nullptr;
		VG_REQUIRE_OK(vg_endpoint_open(v, s, &o, &ep));
		eps.push_back(ep);
		return ep;
	}
	// A volatile endpoint (no vista instance).
	vg_endpoint *open_volatile(const struct vg_endpoint_opts &o)
	{
		vg_endpoint *ep = nullptr;
		VG_REQUIRE_OK(vg_endpoint_open(nullptr, nullptr, &o, &ep));
		eps.push_back(ep);
		return ep;
	}
	void close(vg_endpoint *ep)
	{
		auto it = std::find(eps.begin(), eps.end(), ep);
		REQUIRE(it != eps.end());
		eps.erase(it);
		VG_REQUIRE_OK(vg_endpoint_close(ep));
	}
	void init()
	{
		struct vista_opts o = {};
		std::string log = path + "/log";
		o.log_path = log.c_str();
		o.log_size = 4 << 20;
		o.lanes = 8;
		o.rio_flags = rio_flags;
		int rc = vista_init(&o, &v);
		INFO("vista_init: " << vg_err_name(rc) << " " << vg_errormsg());
		REQUIRE(rc == 0);
	}
	// Close everything and open again, as after a crash or a restart.
	void restart()
	{
		for (vg_endpoint *ep : eps)
			VG_REQUIRE_OK(vg_endpoint_close(ep));
		eps.clear();
		REQUIRE(vista_fini(v) == 0);
		v = nullptr;
		init();
	}
	vista_segment *segment(int slot, size_t size = 2 << 20)
	{
		vista_segment *s = nullptr;
		std::string p = path + "/seg" + std::to_string(slot);
		int rc = vista_map(v, p.c_str(), addr(slot), size, VISTA_CREATE,
			&s);
		INFO("vista_map " << p << ": " << vg_err_name(rc) << " "
				  << vg_errormsg());
		REQUIRE(rc == 0);
		return s;
	}
};

inline struct sockaddr_storage address(vg_endpoint *ep, socklen_t *len)
{
	struct sockaddr_storage ss;
	VG_REQUIRE_OK(vg_endpoint_address(ep, &ss, len));
	return ss;
}

inline struct vg_stats stats(vg_endpoint *ep)
{
	struct vg_stats s;
	VG_REQUIRE_OK(vg_stats(ep, &s));
	return s;
}

// Send `msg` as one request in its own transaction; its sequence number.
inline uint64_t send(vista *v, vg_endpoint *c, vg_endpoint *server,
	const std::string &msg)
{
	socklen_t len;
	struct sockaddr_storage to = address(server, &len);
	uint64_t seq = 0;
	VG_REQUIRE_OK(vg_begin(v, 0));
	VG_REQUIRE_OK(vista_send_request(c, (struct sockaddr *)&to, len,
		msg.data(), msg.size(), &seq));
	VG_REQUIRE_OK(vg_commit(v));
	return seq;
}

// Receive one request and answer it with f(request), in one transaction.
inline vg_reqid serve_one(vista *v, vg_endpoint *s,
	const std::function<std::string(const std::string &)> &f,
	int timeout_ms = 2000)
{
	char buf[65536];
	size_t len = 0;
	vg_reqid id = {};
	VG_REQUIRE_OK(vg_begin(v, 0));
	int rc = vista_receive_request(s, &id, buf, sizeof(buf), &len,
		timeout_ms);
	if (rc) {
		vg_abort(v);
		VG_REQUIRE_OK(rc);
	}
	std::string resp = f(std::string(buf, len));
	VG_REQUIRE_OK(vista_send_response(s, &id, resp.data(), resp.size()));
	VG_REQUIRE_OK(vg_commit(v));
	return id;
}

// Receive the response to seq in its own transaction.
inline std::string receive(vista *v, vg_endpoint *c, uint64_t seq,
	int timeout_ms = 2000)
{
	char buf[65536];
	size_t len = 0;
	VG_REQUIRE_OK(vg_begin(v, 0));
	int rc = vista_receive_response(c, &seq, buf, sizeof(buf), &len,
		timeout_ms);
	if (rc) {
		vg_abort(v);
		VG_REQUIRE_OK(rc);
	}
	VG_REQUIRE_OK(vg_commit(v));
	return std::string(buf, len);
}

// A server loop on its own thread (its own endpoint, its own
// transactions on the shared vista instance) until stopped.
struct ServerThread {
	vista *v;
	vg_endpoint *ep;
	std::function<std::string(const std::string &)> f;
	std::atomic<bool> stop{ false };
	std::atomic<int> error{ 0 };
	std::atomic<uint64_t> served{ 0 };
	std::thread t;

	ServerThread(vista *vi, vg_endpoint *e,
		std::function<std::string(const std::string &)> fn)
		: v(vi), ep(e), f(std::move(fn))
	{
		t = std::thread([this] { run(); });
	}
	void run()
	{
		std::vector<char> buf(65536);
		while (!stop) {
			size_t len = 0;
			vg_reqid id;
			int rc = vg_begin(v, 0);
			if (rc == 0)
				rc = vista_receive_request(ep, &id, buf.data(),
					buf.size(), &len, 5);
			if (rc == -ETIMEDOUT) {
				vg_abort(v);
				continue;
			}
			if (rc == 0) {
				std::string r = f(std::string(buf.data(), len));
				rc = vista_send_response(ep, &id, r.data(),
					r.size());
			}
			if (rc == 0)
				rc = vg_commit(v);
			if (rc) {
				vg_abort(v);
				error = rc;
				return;
			}
			served++;
		}
	}
	// Stop and wait (a response leaves inside vg_commit, before the
	// thread counts it: counts are final only after this).
	void finish()
	{
		stop = true;
		if (t.joinable())
			t.join();
	}
	~ServerThread() { finish(); }
};

} // namespace vgt
