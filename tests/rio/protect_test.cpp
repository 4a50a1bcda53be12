// SPDX-License-Identifier: BSD-3-Clause
// protect_test.cpp -- write windows, and wild stores caught in a child
#include "../common/test_util.hpp"

#include <sys/mman.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

using test::TempDir;

static const size_t POOL = 1 << 20;
static const char PATTERN[] = "the pool survives wild stores";

// A pool holding PATTERN at offset 0 and at offset 64 KiB.
static std::string make_pool(TempDir &d, unsigned flags = 0)
{
	std::string path = d / "p";
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_create(path.c_str(), POOL, flags, &p));
	char *b = (char *)rio_pool_base(p);
	strcpy(b, PATTERN);
	strcpy(b + 65536, PATTERN);
	REQUIRE_OK(rio_pool_close(p));
	return path;
}

static void expect_intact(const std::string &path)
{
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_open(path.c_str(), RIO_NO_RESTORE, &p));
	char *b = (char *)rio_pool_base(p);
	REQUIRE(std::string(b) == PATTERN);
	REQUIRE(std::string(b + 65536) == PATTERN);
	REQUIRE_OK(rio_pool_close(p));
}

TEST_CASE("a store outside any window is caught, the pool stays intact",
	"[protect]")
{
	TempDir d;
	std::string path = make_pool(d);
	auto r = test::run_child([&] {
		rio_pool *p = nullptr;
		if (rio_pool_open(path.c_str(), RIO_PROTECT, &p))
			_exit(10);
		volatile char *b = (char *)rio_pool_base(p);
		b[65536] = 'X'; // wild
		_exit(11);      // not reached
	});
	INFO(r.err);
	REQUIRE(r.signal == SIGSEGV);
	REQUIRE(r.err.find("wild store to 0x") != std::string::npos);
	REQUIRE(r.err.find(path) != std::string::npos);
	REQUIRE(r.err.find("offset 0x11000") != std::string::npos);
	expect_intact(path);
}

TEST_CASE("the header page is protected too", "[protect]")
{
	TempDir d;
	std::string path = make_pool(d);
	auto r = test::run_child([&] {
		rio_pool *p = nullptr;
		if (rio_pool_open(path.c_str(), RIO_PROTECT, &p))
			_exit(10);
		volatile char *hdr = (char *)rio_pool_base(p) - RIO_POOL_HDR_SIZE;
		hdr[0] = 'X';
		_exit(11);
	});
	REQUIRE(r.signal == SIGSEGV);
	expect_intact(path);
}

TEST_CASE("windows open and close writable ranges; they nest", "[protect]")
{
	TempDir d;
	std::string path = make_pool(d);
	auto r = test::run_child([&] {
		rio_pool *p = nullptr;
		if (rio_pool_open(path.c_str(), 0, &p) || rio_protect(p))
			_exit(10);
		char *b = (char *)rio_pool_base(p);
		if (!rio_pool_protected(p))
			_exit(11);
		// outer window over two pages, inner over one of them
		if (rio_write_begin(p, b + 8192, 8192) ||
		    rio_write_begin(p, b + 12288, 100))
			_exit(12);
		b[8192] = 'a';
		b[12288] = 'b';
		if (rio_write_end(p, b + 12288, 100))
			_exit(13);
		b[12289] = 'c'; // still inside the outer window
		if (rio_write_end(p, b + 8192, 8192))
			_exit(14);
		struct rio_stats st;
		rio_stats(p, &st);
		if (st.window_opens != 2 || st.window_closes != 2)
			_exit(15);
		// unprotect/protect round trip
		if (rio_unprotect(p))
			_exit(16);
		b[0] = PATTERN[0];
		if (rio_protect(p))
			_exit(17);
		fprintf(stderr, "about to store outside\n");
		b[12290] = 'd'; // closed: caught
		_exit(18);
	});
	INFO(r.err);
	REQUIRE(r.err.find("about to store outside") != std::string::npos);
	REQUIRE(r.signal == SIGSEGV);
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_open(path.c_str(), 0, &p));
	char *b = (char *)rio_pool_base(p);
	REQUIRE(b[8192] == 'a');
	REQUIRE(b[12288] == 'b');
	REQUIRE(b[12289] == 'c');
	REQUIRE(b[12290] == 0);
	REQUIRE_OK(rio_pool_close(p));
}

/* Pages' windows are counted only by mprotect mode: under protection keys a
 * window opens the whole pool to its thread (rio.h). */
struct MprotectMode {
	MprotectMode() { setenv("RIO_NO_PKEYS", "1", 1); }
	~MprotectMode() { unsetenv("RIO_NO_PKEYS"); }
};

TEST_CASE("window misuse under protection keys", "[protect][badinput]")
{
	if (!rio_pkeys_available()) {
		WARN("skipped: the CPU has no protection keys");
		return;
	}
	TempDir d;
	std::string path = make_pool(d);
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_open(path.c_str(), RIO_PROTECT, &p));
	char *b = (char *)rio_pool_base(p);
	REQUIRE_RC(rio_write_begin(p, b - 1, 10), RIO_ERANGE);
	REQUIRE_RC(rio_write_end(p, b, 8), RIO_EWINDOW);
	REQUIRE_OK(rio_write_begin(p, b, 8));
	REQUIRE_OK(rio_write_end(p, b, 8));
	REQUIRE_RC(rio_write_end(p, b, 8), RIO_EWINDOW);
	REQUIRE_OK(rio_pool_close(p));
}

TEST_CASE("window misuse returns errors and changes nothing", "[protect][badinput]")
{
	MprotectMode m;
	TempDir d;
	std::string path = make_pool(d);
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_open(path.c_str(), RIO_PROTECT, &p));
	char *b = (char *)rio_pool_base(p);
	REQUIRE_RC(rio_write_begin(p, b - 1, 10), RIO_ERANGE);
	REQUIRE_RC(rio_write_begin(p, b + rio_pool_size(p) - 4, 8), RIO_ERANGE);
	REQUIRE_RC(rio_write_begin(p, b, 0), RIO_ERANGE);
	REQUIRE_RC(rio_write_begin(p, (char *)&p, 8), RIO_ERANGE);
	REQUIRE_RC(rio_write_end(p, b, 8), RIO_EWINDOW);
	REQUIRE_OK(rio_write_begin(p, b, 8));
	// closing a wider range than was opened is refused, nothing changes
	REQUIRE_RC(rio_write_end(p, b, 8192), RIO_EWINDOW);
	b[1] = 'x'; // the window is still open
	REQUIRE_OK(rio_write_end(p, b, 8));
	REQUIRE_RC(rio_write_end(p, b, 8), RIO_EWINDOW);
	REQUIRE_OK(rio_pool_close(p));

	REQUIRE_OK(rio_pool_open(path.c_str(), RIO_RDONLY, &p));
	REQUIRE_RC(rio_write_begin(p, rio_pool_base(p), 8), -EACCES);
	REQUIRE(rio_pool_protected(p));
	REQUIRE_OK(rio_pool_close(p));
}

TEST_CASE("protection changes are coalesced into runs", "[protect]")
{
	MprotectMode m;
	TempDir d;
	std::string path = make_pool(d);
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_open(path.c_str(), 0, &p));
	struct rio_stats st0, st1;
	rio_stats(p, &st0);
	REQUIRE_OK(rio_protect(p));
	rio_stats(p, &st1);
	// header + one run for the whole user area
	REQUIRE(st1.mprotect_calls - st0.mprotect_calls == 2);
	char *b = (char *)rio_pool_base(p);
	REQUIRE_OK(rio_write_begin(p, b, 64 * 4096));
	rio_stats(p, &st0);
	REQUIRE(st0.mprotect_calls - st1.mprotect_calls == 1);
	REQUIRE_OK(rio_write_end(p, b, 64 * 4096));
	REQUIRE_OK(rio_pool_close(p));
}

TEST_CASE("a wild store safe-syncs the pool before dying", "[protect][safesync]")
{
	TempDir d;
	std::string path = make_pool(d, RIO_SAFE_SYNC);
	auto r = test::run_child([&] {
		rio_pool *p = nullptr;
		if (rio_pool_open(path.c_str(), RIO_PROTECT, &p))
			_exit(10);
		char *b = (char *)rio_pool_base(p);
		rio_write_begin(p, b + 200000, 6);
		strcpy(b + 200000, "saved");
		rio_write_end(p, b + 200000, 6);
		*(volatile char *)b = 'X'; // wild
		_exit(11);
	});
	INFO(r.err);
	REQUIRE(r.signal == SIGSEGV);
	REQUIRE(r.err.find("safe sync of") != std::string::npos);
	// The memory copy is lost ("reboot"): the image has the last store.
	REQUIRE(unlink(path.c_str()) == 0);
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_open(path.c_str(), 0, &p));
	REQUIRE(rio_pool_restored(p));
	char *b = (char *)rio_pool_base(p);
	REQUIRE(std::string(b + 200000) == "saved");
	REQUIRE(std::string(b) == PATTERN);
	REQUIRE_OK(rio_pool_close(p));
}

// Fault hooks see write faults first: a hook that opens the page resolves
// the fault (how libvista's automatic ranges work).
static rio_pool *hook_pool;
static int hook_calls;
static bool open_page(void *addr, void *)
{
	char *b = (char *)rio_pool_base(hook_pool);
	if ((char *)addr < b || (char *)addr >= b + rio_pool_size(hook_pool))
		return false;
	hook_calls++;
	return rio_write_begin(hook_pool, (void *)((uintptr_t)addr & ~4095ul),
		       4096) == 0;
}

TEST_CASE("fault hooks resolve faults before they are called wild",
	"[protect][hooks]")
{
	TempDir d;
	std::string path = make_pool(d);
	REQUIRE_OK(rio_pool_open(path.c_str(), RIO_PROTECT, &hook_pool));
	REQUIRE_OK(rio_fault_hook_add(open_page, nullptr));
	char *b = (char *)rio_pool_base(hook_pool);
	hook_calls = 0;
	b[5000] = 'h';
	b[5001] = 'i'; // same page: no second fault
	REQUIRE(hook_calls == 1);
	REQUIRE_OK(rio_write_end(hook_pool, b + 4096, 4096));
	REQUIRE_OK(rio_fault_hook_remove(open_page, nullptr));
	REQUIRE_RC(rio_fault_hook_remove(open_page, nullptr), -ENOENT);
	REQUIRE_OK(rio_pool_close(hook_pool));
}

// rio_fault_hook_remove() returns only when no handler still runs the
// hook it removed, so the caller may free the hook's context.
static std::atomic<int> slow_state; // 1: inside the hook, 2: hook done
static bool slow_open(void *addr, void *ctx)
{
	if (!open_page(addr, ctx))
		return false;
	slow_state = 1;
	usleep(200 * 1000); // long enough for a remover that does not wait
	slow_state = 2;
	return true;
}

TEST_CASE("removing a fault hook waits for a handler still running it",
	"[protect][hooks]")
{
	TempDir d;
	std::string path = make_pool(d);
	REQUIRE_OK(rio_pool_open(path.c_str(), RIO_PROTECT, &hook_pool));
	int ctx;
	REQUIRE_OK(rio_fault_hook_add(slow_open, &ctx));
	char *b = (char *)rio_pool_base(hook_pool);
	slow_state = 0;
	int end_rc = -1;
	std::thread t([&] {
		b[5000] = 'h';
		end_rc = rio_write_end(hook_pool, b + 4096, 4096);
	});
	while (slow_state == 0)
		usleep(1000);
	int rc = rio_fault_hook_remove(slow_open, &ctx);
	int state = slow_state;
	t.join();
	REQUIRE_OK(rc);
	REQUIRE(state == 2);
	REQUIRE(b[5000] == 'h');
	REQUIRE_OK(end_rc);
	REQUIRE_OK(rio_pool_close(hook_pool));
}

// ---- every thread, whenever it was created ----
//
// PKRU is per thread: a thread that existed before a pool was opened starts
// with the pool's key denied.  Each case runs in pkeys mode (when the CPU
// has protection keys) and in mprotect mode.

// A thread that runs, one after the other, the jobs it is given.  It starts
// with every key but 0 denied, as a thread of a fresh process does (the
// test binary's main thread may hold rights left by earlier cases).
class Worker {
public:
	Worker() : t_([this] { loop(); }) {}
	~Worker()
	{
		{
			std::lock_guard<std::mutex> l(m_);
			quit_ = true;
		}
		cv_.notify_all();
		t_.join();
	}
	void run(std::function<void()> fn)
	{
		std::unique_lock<std::mutex> l(m_);
		job_ = std::move(fn);
		cv_.notify_all();
		cv_.wait(l, [&] { return !job_; });
	}

private:
	void loop()
	{
		if (rio_pkeys_available())
			for (int k = 1; k < 16; k++)
				pkey_set(k, PKEY_DISABLE_ACCESS);
		std::unique_lock<std::mutex> l(m_);
		for (;;) {
			cv_.wait(l, [&] { return job_ || quit_; });
			if (!job_)
				return;
			auto job = job_;
			l.unlock();
			job();
			l.lock();
			job_ = nullptr;
			cv_.notify_all();
		}
	}
	std::mutex m_;
	std::condition_variable cv_;
	std::function<void()> job_;
	bool quit_ = false;
	std::thread t_; // last: starts once the rest exists
};

// The modes to run a case in; pkeys is reported as skipped without PKU.
static std::vector<bool> modes_no_pkeys()
{
	if (rio_pkeys_available())
		return { false, true };
	WARN("pkeys mode skipped: the CPU has no protection keys; "
	     "mprotect mode only");
	return { true };
}

struct Mode {
	explicit Mode(bool no_pkeys)
	{
		if (no_pkeys)
			setenv("RIO_NO_PKEYS", "1", 1);
	}
	~Mode() { unsetenv("RIO_NO_PKEYS"); }
};

TEST_CASE("a thread created before the open reads the pool and writes in "
	  "its own windows", "[protect][threads]")
{
	for (bool no_pkeys : modes_no_pkeys())
		for (bool create : { false, true }) {
		Mode mode(no_pkeys);
		INFO((no_pkeys ? "mprotect mode" : "pkeys mode")
			<< (create ? ", created" : ", opened"));
		TempDir d;
		std::string path = create ? d / "new" : make_pool(d);
		auto r = test::run_child([&] {
			Worker w; // exists before the pool
			rio_pool *p = nullptr;
			int rc = create ? rio_pool_create(path.c_str(), POOL,
						  RIO_PROTECT, &p)
					: rio_pool_open(path.c_str(),
						  RIO_PROTECT, &p);
			if (rc)
				_exit(10);
			char *b = (char *)rio_pool_base(p);
			int code = 0;
			w.run([&] {
				std::string want = create ? "" : PATTERN;
				if (std::string(b) != want)
					code = 12;
				fprintf(stderr, "read done\n");
				if (rio_write_begin(p, b + 8192, 16))
					code = 13;
				strcpy(b + 8192, "worker");
				if (rio_write_end(p, b + 8192, 16))
					code = 14;
				fprintf(stderr, "window done\n");
			});
			// and with protection off, without a window
			if (rio_unprotect(p))
				_exit(15);
			w.run([&] { b[12288] = 'u'; });
			if (rio_pool_close(p))
				_exit(16);
			_exit(code);
		});
		INFO(r.err);
		REQUIRE(r.err.find("read done") != std::string::npos);
		REQUIRE(r.err.find("window done") != std::string::npos);
		REQUIRE(r.exited);
		REQUIRE(r.code == 0);
		rio_pool *p = nullptr;
		REQUIRE_OK(rio_pool_open(path.c_str(), 0, &p));
		char *b = (char *)rio_pool_base(p);
		REQUIRE(std::string(b + 8192) == "worker");
		REQUIRE(b[12288] == 'u');
		REQUIRE_OK(rio_pool_close(p));
	}
}

TEST_CASE("a store without a window by a thread created before the open "
	  "is a wild store", "[protect][threads]")
{
	for (bool no_pkeys : modes_no_pkeys()) {
		Mode mode(no_pkeys);
		INFO((no_pkeys ? "mprotect mode" : "pkeys mode"));
		TempDir d;
		std::string path = make_pool(d);
		auto r = test::run_child([&] {
			Worker w;
			rio_pool *p = nullptr;
			if (rio_pool_open(path.c_str(), RIO_PROTECT, &p))
				_exit(10);
			volatile char *b = (char *)rio_pool_base(p);
			w.run([&] {
				if (b[65536] != PATTERN[0])
					_exit(12);
				fprintf(stderr, "read done\n");
				b[65536] = 'X'; // wild
			});
			_exit(11); // not reached
		});
		INFO(r.err);
		REQUIRE(r.err.find("read done") != std::string::npos);
		REQUIRE(r.signal == SIGSEGV);
		REQUIRE(r.err.find("wild store to 0x") != std::string::npos);
		REQUIRE(r.err.find("offset 0x11000") != std::string::npos);
		expect_intact(path);
	}
}

TEST_CASE("a window in one thread lets no other thread write (pkeys)",
	"[protect][threads]")
{
	if (!rio_pkeys_available()) {
		WARN("skipped: the CPU has no protection keys (in mprotect "
		     "mode a window is process-wide)");
		return;
	}
	TempDir d;
	std::string path = make_pool(d);
	auto r = test::run_child([&] {
		Worker w;
		rio_pool *p = nullptr;
		if (rio_pool_open(path.c_str(), RIO_PROTECT, &p))
			_exit(10);
		char *b = (char *)rio_pool_base(p);
		if (rio_write_begin(p, b, 4096))
			_exit(11);
		b[0] = PATTERN[0]; // the opener's own window
		w.run([&] { *(volatile char *)b = 'X'; });
		_exit(12);
	});
	INFO(r.err);
	REQUIRE(r.signal == SIGSEGV);
	REQUIRE(r.err.find("wild store to 0x") != std::string::npos);
	expect_intact(path);
}

TEST_CASE("a thread's window on a closed pool does not open the next pool",
	"[protect][threads]")
{
	for (bool no_pkeys : modes_no_pkeys())
		for (bool left_open : { true, false }) {
		Mode mode(no_pkeys);
		// left_open: the window is still open when the pool closes;
		// otherwise it ended while the pool was unprotected.
		INFO((no_pkeys ? "mprotect mode" : "pkeys mode")
			<< (left_open ? ", window left open"
				      : ", window ended unprotected"));
		TempDir d;
		std::string first = make_pool(d);
		std::string second = d / "second";
		auto r = test::run_child([&] {
			Worker w;
			rio_pool *p = nullptr;
			if (rio_pool_open(first.c_str(),
				    left_open ? RIO_PROTECT : 0, &p))
				_exit(10);
			char *b = (char *)rio_pool_base(p);
			w.run([&] {
				if (rio_write_begin(p, b, 4096))
					_exit(11);
				b[100] = 'w';
				if (!left_open && rio_write_end(p, b, 4096))
					_exit(12);
			});
			if (rio_pool_close(p))
				_exit(13);
			if (rio_pool_create(second.c_str(), POOL, RIO_PROTECT,
				    &p))
				_exit(14);
			volatile char *c = (char *)rio_pool_base(p);
			w.run([&] {
				if (c[0] != 0)
					_exit(15);
				fprintf(stderr, "read done\n");
				c[0] = 'X'; // wild
			});
			_exit(16);
		});
		INFO(r.err);
		REQUIRE(r.err.find("read done") != std::string::npos);
		REQUIRE(r.signal == SIGSEGV);
		REQUIRE(r.err.find("wild store to 0x") != std::string::npos);
		REQUIRE(r.err.find(second) != std::string::npos);
	}
}

TEST_CASE("keys held back for a thread are returned once it is gone",
	"[protect][threads]")
{
	if (!rio_pkeys_available()) {
		WARN("skipped: the CPU has no protection keys");
		return;
	}
	TempDir d;
	std::string path = make_pool(d);
	auto r = test::run_child([&] {
		// More pools than the CPU has keys, one after the other, each
		// left with a window open by a thread that then ends.
		for (int i = 0; i < 24; i++) {
			rio_pool *p = nullptr;
			if (rio_pool_open(path.c_str(), RIO_PROTECT, &p))
				_exit(10);
			struct rio_stats st;
			rio_stats(p, &st);
			if (st.mprotect_calls != 0) // fell back: keys leaked
				_exit(20 + (i < 70 ? i : 70));
			char *b = (char *)rio_pool_base(p);
			std::thread t([&] { rio_write_begin(p, b, 4096); });
			t.join();
			if (rio_pool_close(p))
				_exit(11);
		}
		_exit(0);
	});
	INFO(r.err);
	REQUIRE(r.exited);
	REQUIRE(r.code == 0);

	// The same with a thread that lives on: it gives the rights up when
	// it opens a pool itself.
	std::string other = d / "q";
	{
		rio_pool *q = nullptr;
		REQUIRE_OK(rio_pool_create(other.c_str(), POOL, 0, &q));
		REQUIRE_OK(rio_pool_close(q));
	}
	r = test::run_child([&] {
		Worker w;
		for (int i = 0; i < 24; i++) {
			rio_pool *p = nullptr;
			if (rio_pool_open(path.c_str(), RIO_PROTECT, &p))
				_exit(10);
			struct rio_stats st;
			rio_stats(p, &st);
			if (st.mprotect_calls != 0)
				_exit(20 + i);
			char *b = (char *)rio_pool_base(p);
			w.run([&] { rio_write_begin(p, b, 4096); });
			if (rio_pool_close(p))
				_exit(11);
			w.run([&] {
				rio_pool *q = nullptr;
				if (rio_pool_open(other.c_str(), 0, &q) ||
				    rio_pool_close(q))
					_exit(12);
			});
		}
		_exit(0);
	});
	INFO(r.err);
	REQUIRE(r.exited);
	REQUIRE(r.code == 0);
}
