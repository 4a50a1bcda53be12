// SPDX-License-Identifier: BSD-3-Clause
// auto_test.cpp -- automatic ranges (write faults), protected segments,
// vista_prefault
#include "vista_test.hpp"

#include <fcntl.h>

#include <sstream>

using vt::Env;

static const size_t SEG = 1 << 20;

static char *page(vista_segment *s, int i)
{
	return (char *)vista_segment_base(s) + (size_t)i * 4096;
}

// In a child: an instance on e, segment `path` mapped, an automatic
// transaction begun (else exit 10), then fn(v, s).
static test::ChildResult auto_child(Env &e, const std::string &path,
	const std::function<void(vista *, vista_segment *)> &fn)
{
	return test::run_child([&] {
		vista *v = e.open();
		vista_segment *s = vt::map(v, path, 0, SEG);
		if (vista_begin_transaction(v, VISTA_TX_AUTO))
			_exit(10);
		fn(v, s);
	});
}

TEST_CASE("automatic transactions log each page at its first store", "[auto]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0, SEG);
	for (int i = 0; i < 16; i++)
		memset(page(s, i), 'a' + i, 4096);

	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
	page(s, 1)[0] = 'X';
	page(s, 1)[100] = 'X'; // same page: no second fault
	page(s, 7)[4095] = 'Y';
	memset(page(s, 10), 'Z', 3 * 4096);
	struct vista_stats st = vt::stats(v);
	REQUIRE(st.auto_faults == 5);
	REQUIRE(st.bytes_logged == 5 * 4096);
	REQUIRE(st.fences == 5); // a page record: one fence (L4, L2)
	VREQUIRE_OK(vista_end_transaction(v));
	REQUIRE(vt::stats(v).fences == 5 + 2);
	REQUIRE(page(s, 1)[100] == 'X');

	// The pages are protected again: the next transaction logs them
	// again, and abort puts them back.
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
	page(s, 1)[0] = 'Q';
	memset(page(s, 3), 'Q', 4096);
	REQUIRE(vt::stats(v).auto_faults == 7);
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(page(s, 1)[0] == 'X');
	for (int k = 0; k < 4096; k++)
		REQUIRE(page(s, 3)[k] == 'a' + 3);

	// A transaction that stores nothing costs no fence.
	uint64_t f = vt::stats(v).fences;
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
	REQUIRE(page(s, 5)[0] == 'f'); // loads do not fault
	VREQUIRE_OK(vista_end_transaction(v));
	REQUIRE(vt::stats(v).fences == f);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("between transactions an automatic segment is read-only", "[auto]")
{
	Env e;
	std::string a = e.seg("a");
	auto r = auto_child(e, a, [&](vista *v, vista_segment *s) {
		page(s, 2)[0] = 'x';
		if (vista_end_transaction(v))
			_exit(11);
		page(s, 2)[0] = 'y'; // outside a transaction: dies
		_exit(12);
	});
	REQUIRE(r.signal == SIGSEGV);
	vista *v = e.open();
	vista_segment *s = vt::map(v, a, 0, SEG);
	REQUIRE(page(s, 2)[0] == 'x');
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a crash inside an automatic transaction is rolled back", "[auto]")
{
	Env e;
	std::string a = e.seg("a");
	{
		vista *v = e.open();
		vista_segment *s = vt::map(v, a, 0, SEG);
		memset(page(s, 0), 'o', 64 * 4096);
		VREQUIRE_OK(vista_fini(v));
	}
	auto r = auto_child(e, a, [&](vista *, vista_segment *s) {
		for (int i = 0; i < 64; i += 3)
			page(s, i)[i] = 'x';
		kill(getpid(), SIGKILL);
	});
	REQUIRE(r.signal == SIGKILL);
	vista *v = e.open();
	vista_segment *s = vt::map(v, a, 0, SEG);
	for (int k = 0; k < 64 * 4096; k++)
		REQUIRE(page(s, 0)[k] == 'o');
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("the kernel cannot write a protected page; vista_prefault opens "
	  "it",
	"[auto]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0, SEG);
	std::string src = e.seg("src");
	test::write_file(src, std::string(10000, 'k'));
	memset(page(s, 0), 'o', 8 * 4096);
	int fd = open(src.c_str(), O_RDONLY);
	REQUIRE(fd >= 0);

	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
	errno = 0;
	REQUIRE(pread(fd, page(s, 1) + 100, 10000, 0) == -1);
	REQUIRE(errno == EFAULT);
	VREQUIRE_OK(vista_prefault(v, page(s, 1) + 100, 10000));
	REQUIRE(vt::stats(v).auto_faults == 3);
	REQUIRE(pread(fd, page(s, 1) + 100, 10000, 0) == 10000);
	VREQUIRE_OK(vista_prefault(v, page(s, 1), 10)); // already open
	REQUIRE(vt::stats(v).auto_faults == 3);
	int local;
	VREQUIRE_RC(vista_prefault(v, &local, 4), VISTA_ERANGE);
	VREQUIRE_OK(vista_abort_transaction(v));
	for (int k = 0; k < 8 * 4096; k++)
		REQUIRE(page(s, 0)[k] == 'o');
	close(fd);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("many scattered pages: protection changes stay coalesced", "[auto]")
{
	setenv("VISTA_VMA_LIMIT", "32", 1);
	Env e;
	e.log_size = 16 << 20;
	e.lanes = 2;
	vista *v = e.open();
	unsetenv("VISTA_VMA_LIMIT");
	vista_segment *s = vt::map(v, e.seg("a"), 0, 8 << 20);
	// Mappings (VMAs) inside the segment: each isolated open page in a
	// protected run costs up to two more.
	uintptr_t lo = (uintptr_t)vt::addr(0);
	uintptr_t hi = lo + vista_segment_footprint(8 << 20);
	auto maps = [&] {
		std::istringstream in(test::read_file("/proc/self/maps"));
		std::string line;
		long n = 0;
		while (std::getline(in, line)) {
			uintptr_t a = std::stoull(line, nullptr, 16);
			n += a >= lo && a < hi;
		}
		return n;
	};
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO)); // protects
	VREQUIRE_OK(vista_end_transaction(v));
	long before = maps();
	REQUIRE(before == 2); // headers and metadata; the read-only arena
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
	for (int i = 0; i < 2048; i += 7) // every 7th page
		page(s, i)[0] = 1;
	// Past 32 open pages the faults opened 16-page groups.
	REQUIRE(vt::stats(v).auto_faults > 1000);
	long during = maps();
	REQUIRE(during - before < 2 * 32 + 2 * (2048 / 16) + 8);
	VREQUIRE_OK(vista_end_transaction(v));
	REQUIRE(maps() == before);
	for (int i = 0; i < 2048; i += 7)
		REQUIRE(page(s, i)[0] == 1);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("RIO_PROTECT: explicit transactions open only what they declare",
	"[auto]")
{
	Env e(RIO_PROTECT);
	std::string a = e.seg("a");
	auto r = test::run_child([&] {
		vista *v = e.open();
		vista_segment *s = vt::map(v, a, 0, SEG);
		uint64_t *w = (uint64_t *)vista_segment_base(s);
		if (vista_begin_transaction(v, 0) ||
		    vista_set_range(v, &w[1000], 8))
			_exit(10);
		w[1000] = 5;
		if (vista_end_transaction(v))
			_exit(11);
		if (vista_begin_transaction(v, 0) ||
		    vista_set_range(v, &w[2000], 8))
			_exit(12);
		w[2000] = 6;
		if (vista_abort_transaction(v) || w[2000] != 0)
			_exit(13);
		fprintf(stderr, "stores ok\n");
		w[3000] = 7; // never declared: dies
		_exit(14);
	});
	INFO(r.err);
	REQUIRE(r.err.find("stores ok") != std::string::npos);
	REQUIRE(r.signal == SIGSEGV);
	vista *v = e.open();
	vista_segment *s = vt::map(v, a, 0, SEG);
	uint64_t *w = (uint64_t *)vista_segment_base(s);
	REQUIRE(w[1000] == 5);
	REQUIRE(w[3000] == 0);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("heap and root inside automatic transactions", "[auto]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0, SEG);
	uint64_t *root;
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
	VREQUIRE_OK(vista_root(s, 64, (void **)&root));
	char *p;
	VREQUIRE_OK(vista_malloc(s, 5000, (void **)&p));
	memset(p, 'p', 5000);
	root[0] = (uint64_t)(uintptr_t)p;
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
	VREQUIRE_OK(vista_free(s, p));
	root[0] = 0;
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(root[0] == (uint64_t)(uintptr_t)p);
	REQUIRE(p[4999] == 'p');
	REQUIRE(vt::blocks(s).size() == 2);
	VREQUIRE_OK(vista_heap_check(s, nullptr));
	// Explicit transactions on the protected segment, from the heap.
	void *q;
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_malloc(s, 100, &q));
	memset(q, 1, 100); // a fresh block is writable
	VREQUIRE_OK(vista_set_range(v, root, 8));
	root[0] = 1;
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("an automatic transaction whose log is full cannot store",
	"[auto]")
{
	Env e;
	e.log_size = 128 << 10;
	e.lanes = 2;
	std::string a = e.seg("a");
	auto r = auto_child(e, a, [&](vista *, vista_segment *s) {
		for (int i = 0; i < 200; i++)
			page(s, i)[0] = 1;
		_exit(11);
	});
	REQUIRE(r.signal == SIGSEGV);
	REQUIRE(r.err.find("log lane is full") != std::string::npos);
	vista *v = e.open();
	vista_segment *s = vt::map(v, a, 0, SEG);
	for (int i = 0; i < 200; i++)
		REQUIRE(page(s, i)[0] == 0);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a page logged again where the lane logged it before costs the "
	  "lines that changed",
	"[auto]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0, SEG);
	for (int k = 0; k < 4096; k++)
		page(s, 1)[k] = (char)(k * 7 + k / 64);
	vt::Tracer tr;
	for (int t = 0; t < 3; t++) {
		VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
		uint64_t lines = tr.flush_lines;
		page(s, 1)[1000 + t] = 'x'; // faults: the page is logged
		INFO("transaction " << t);
		// The first time the lane held something else there: the
		// record's 65 lines.  Then the header line (its tag
		// included, L4), and the line that differs from the image
		// logged last time: the store of transaction 0; none after
		// transaction 1 aborted.
		CHECK(tr.flush_lines - lines == (t == 0 ? 65u : t == 1 ? 2u :
								   1u));
		if (t == 1)
			VREQUIRE_OK(vista_abort_transaction(v));
		else
			VREQUIRE_OK(vista_end_transaction(v));
	}
	REQUIRE(page(s, 1)[1000] == 'x');
	REQUIRE(page(s, 1)[1001] == (char)(1001 * 7 + 1001 / 64));
	REQUIRE(page(s, 1)[1002] == 'x');
	VREQUIRE_OK(vista_fini(v));

	// What an earlier instance left in the lane is not trusted to be
	// durable (it may have died before its fence): written in full.
	v = e.open();
	s = vt::map(v, e.seg("a"), 0, SEG);
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
	uint64_t lines = tr.flush_lines;
	page(s, 1)[2000] = 'y';
	CHECK(tr.flush_lines - lines == 65);
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("vista_chain_transaction keeps the hot pages it changed open, "
	  "logged for the next transaction",
	"[auto][chain]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0, SEG);
	for (int i = 0; i < 8; i++)
		memset(page(s, i), 'a' + i, 4096);

	VREQUIRE_RC(vista_chain_transaction(v), VISTA_ENOTX);
	// Pages 1 and 2 are hot: the previous transaction had them open.
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
	page(s, 1)[0] = 'x';
	page(s, 2)[8] = 'x';
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
	page(s, 1)[0] = 'X';
	page(s, 2)[8] = 'X';
	page(s, 3)[0] = 'X'; // not hot: protected again at the chain
	REQUIRE(vt::stats(v).auto_faults == 5);
	struct vista_stats a = vt::stats(v);
	VREQUIRE_OK(vista_chain_transaction(v));
	struct vista_stats b = vt::stats(v);
	REQUIRE(vista_in_transaction(v));
	CHECK(b.tx_committed - a.tx_committed == 1);
	CHECK(b.tx_begun - a.tx_begun == 1);
	CHECK(b.auto_kept - a.auto_kept == 2);
	// Commit: 2 fences; the kept pages logged again: one more.
	CHECK(b.fences - a.fences == 3);
	// Commit: 3 pages, the lane header; then one record of both kept
	// pages (adjacent: one descriptor), 32 + 16 + 8192 bytes at most --
	// fewer: the lane holds most of those bytes already (L5 in log.c).
	CHECK(b.flushes - a.flushes > 3 * 64 + 1);
	CHECK(b.flushes - a.flushes <= 3 * 64 + 1 + (48 + 8192 + 63) / 64);

	// The kept pages take stores without a fault; others still fault.
	page(s, 1)[1] = 'Y';
	page(s, 2)[9] = 'Y';
	REQUIRE(vt::stats(v).auto_faults == 5);
	page(s, 3)[1] = 'Z';
	page(s, 5)[0] = 'Z';
	REQUIRE(vt::stats(v).auto_faults == 7);
	// Abort rolls back to what the first transaction committed.
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE_FALSE(vista_in_transaction(v));
	REQUIRE(page(s, 1)[0] == 'X');
	REQUIRE(page(s, 1)[1] == 'b');
	REQUIRE(page(s, 2)[8] == 'X');
	REQUIRE(page(s, 2)[9] == 'c');
	REQUIRE(page(s, 3)[0] == 'X');
	REQUIRE(page(s, 3)[1] == 'd');
	REQUIRE(page(s, 5)[0] == 'f');
	// Abort protected the pages again.
	VREQUIRE_OK(vista_begin_transaction(v, VISTA_TX_AUTO));
	page(s, 1)[2] = 'W';
	REQUIRE(vt::stats(v).auto_faults == 8);
	VREQUIRE_OK(vista_end_transaction(v));

	// An explicit transaction chains into an explicit one.
	uint64_t *w = (uint64_t *)page(s, 7);
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, w, 8));
	w[0] = 1;
	VREQUIRE_OK(vista_chain_transaction(v));
	REQUIRE(vista_in_transaction(v));
	VREQUIRE_OK(vista_set_range(v, w, 8));
	w[0] = 2;
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(w[0] == 1);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a page is kept open once hot, and protected again when left "
	  "unchanged",
	"[auto][chain]")
{
	Env e;
	std::string a = e.seg("a");
	auto r = auto_child(e, a, [&](vista *v, vista_segment *s) {
		page(s, 3)[0] = 'x';
		page(s, 4)[0] = 'x';
		page(s, 6)[0] = 'x';
		if (vista_chain_transaction(v)) // not hot yet: all protected
			_exit(11);
		page(s, 3)[0] = 'X';
		page(s, 4)[0] = 'X';
		if (vista_chain_transaction(v)) // 3 and 4 stay open
			_exit(12);
		page(s, 4)[1] = 'y';
		if (vista_chain_transaction(v)) // 4 stays open, 3 does not
			_exit(13);
		struct vista_stats st;
		vista_stats(v, &st);
		if (st.auto_faults != 5 || st.auto_kept != 3)
			_exit(14);
		page(s, 4)[2] = 'z'; // no fault
		vista_stats(v, &st);
		if (st.auto_faults != 5)
			_exit(15);
		page(s, 3)[1] = 'w'; // faults, logged again
		page(s, 6)[1] = 'w';
		vista_stats(v, &st);
		if (st.auto_faults != 7)
			_exit(16);
		if (vista_end_transaction(v))
			_exit(17);
		fprintf(stderr, "stores ok\n");
		page(s, 4)[3] = 'v'; // outside a transaction: dies
		_exit(18);
	});
	INFO(r.err);
	REQUIRE(r.err.find("stores ok") != std::string::npos);
	REQUIRE(r.signal == SIGSEGV);
	vista *v = e.open();
	vista_segment *s = vt::map(v, a, 0, SEG);
	REQUIRE(page(s, 3)[0] == 'X');
	REQUIRE(page(s, 3)[1] == 'w');
	REQUIRE(page(s, 6)[1] == 'w');
	REQUIRE(std::string(page(s, 4), 3) == "Xyz");
	REQUIRE(page(s, 4)[3] == 0);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a crash in a chained transaction rolls back to the chain's last "
	  "commit",
	"[auto][chain]")
{
	Env e;
	std::string a = e.seg("a");
	auto r = auto_child(e, a, [&](vista *v, vista_segment *s) {
		for (int t = 1; t <= 5; t++) {
			for (int i = 0; i < 16; i += 3)
				page(s, i)[t] = (char)t;
			if (vista_chain_transaction(v))
				_exit(11);
		}
		for (int i = 0; i < 16; i++) // kept pages and new ones
			page(s, i)[100] = 'k';
		kill(getpid(), SIGKILL);
	});
	REQUIRE(r.signal == SIGKILL);
	vista *v = e.open();
	vista_segment *s = vt::map(v, a, 0, SEG);
	for (int i = 0; i < 16; i++) {
		REQUIRE(page(s, i)[100] == 0);
		for (int t = 1; t <= 5; t++)
			REQUIRE(page(s, i)[t] == (i % 3 == 0 ? t : 0));
	}
	VREQUIRE_OK(vista_fini(v));
}
