// SPDX-License-Identifier: BSD-3-Clause
// tx_test.cpp -- transactions: every call, every misuse, and the fence budget
#include "vista_test.hpp"

using vt::Env;

TEST_CASE("commit keeps the stores, abort restores the before-images",
	"[tx]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *w = (uint64_t *)vista_segment_base(s);

	REQUIRE_FALSE(vista_in_transaction(v));
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	REQUIRE(vista_in_transaction(v));
	VREQUIRE_OK(vista_set_range(v, w, 16));
	w[0] = 1;
	w[1] = 2;
	VREQUIRE_OK(vista_end_transaction(v));
	REQUIRE_FALSE(vista_in_transaction(v));
	REQUIRE(w[0] == 1);

	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, w, 8));
	w[0] = 10;
	VREQUIRE_OK(vista_set_range(v, w + 1, 8));
	w[1] = 20;
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(w[0] == 1);
	REQUIRE(w[1] == 2);

	struct vista_stats st = vt::stats(v);
	REQUIRE(st.tx_begun == 2);
	REQUIRE(st.tx_committed == 1);
	REQUIRE(st.tx_aborted == 1);
	REQUIRE(st.set_ranges == 3);
	REQUIRE(st.bytes_logged == 32);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("overlapping and repeated ranges are logged once; abort restores "
	  "the oldest image",
	"[tx]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	char *b = (char *)vista_segment_base(s);
	memset(b, 'o', 256);

	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, b + 10, 10));
	memset(b + 10, 'x', 10);
	VREQUIRE_OK(vista_set_range(v, b + 10, 10)); // same: no copy
	VREQUIRE_OK(vista_set_range(v, b + 15, 3));  // inside: no copy
	VREQUIRE_OK(vista_set_range(v, b + 5, 30));  // grows both ways
	memset(b + 5, 'y', 30);
	VREQUIRE_OK(vista_set_range(v, b + 35, 5)); // adjacent: merged
	struct vista_stats st = vt::stats(v);
	REQUIRE(st.bytes_logged == 10 + 5 + 15 + 5);
	REQUIRE(st.ranges_coalesced == 3);
	VREQUIRE_OK(vista_abort_transaction(v));
	for (int i = 0; i < 256; i++)
		REQUIRE(b[i] == 'o');
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("vista_set_ranges declares a batch, merged within itself", "[tx]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *w = (uint64_t *)vista_segment_base(s);
	for (int i = 0; i < 64; i++)
		w[i] = (uint64_t)i;

	VREQUIRE_OK(vista_begin_transaction(v, 0));
	struct vista_range r[] = { { w + 8, 16 }, { w, 8 }, { w + 9, 16 },
		{ w + 40, 0 }, { w + 20, 8 } };
	VREQUIRE_OK(vista_set_ranges(v, 5, r));
	REQUIRE(vt::stats(v).bytes_logged == 8 + 24 + 8);
	w[0] = w[8] = w[9] = w[10] = w[20] = 99;
	VREQUIRE_OK(vista_abort_transaction(v));
	for (int i = 0; i < 64; i++)
		REQUIRE(w[i] == (uint64_t)i);

	// A bad range anywhere in the batch: nothing is declared.
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	int local;
	struct vista_range bad[] = { { w, 8 }, { &local, 4 } };
	VREQUIRE_RC(vista_set_ranges(v, 2, bad), VISTA_ERANGE);
	REQUIRE(vt::stats(v).bytes_logged == 40);
	VREQUIRE_OK(vista_set_ranges(v, 0, nullptr));
	VREQUIRE_RC(vista_set_ranges(v, 1, nullptr), -EINVAL);
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("vista_set_ranges merges small and large batches in any order",
	"[tx]")
{
	// Batches up to 16 ranges and larger ones are sorted differently;
	// either way every byte is logged once.
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *w = (uint64_t *)vista_segment_base(s);
	for (int i = 0; i < 256; i++)
		w[i] = (uint64_t)i;

	for (size_t n : { 2, 5, 16, 17, 40 }) {
		// Range i covers words 4i..4i+4: each overlaps the next.
		// Declared in a scrambled order (7 is prime to every n).
		std::vector<struct vista_range> r(n);
		for (size_t k = 0; k < n; k++) {
			size_t i = (k * 7 + 3) % n;
			r[k] = { w + 4 * i, 5 * 8 };
		}
		struct vista_stats a = vt::stats(v);
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_set_ranges(v, n, r.data()));
		struct vista_stats b = vt::stats(v);
		INFO("n = " << n);
		REQUIRE(b.bytes_logged - a.bytes_logged == (4 * n + 1) * 8);
		for (size_t i = 0; i < 4 * n + 1; i++)
			w[i] = 1000;
		VREQUIRE_OK(vista_abort_transaction(v));
		for (int i = 0; i < 256; i++)
			REQUIRE(w[i] == (uint64_t)i);
	}
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("calls out of order are refused and change nothing", "[tx]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *w = (uint64_t *)vista_segment_base(s);
	w[0] = 7;

	VREQUIRE_RC(vista_set_range(v, w, 8), VISTA_ENOTX);
	VREQUIRE_RC(vista_end_transaction(v), VISTA_ENOTX);
	VREQUIRE_RC(vista_abort_transaction(v), VISTA_ENOTX);
	VREQUIRE_RC(vista_prefault(v, w, 8), VISTA_ENOTX);
	VREQUIRE_RC(vista_begin_transaction(nullptr, 0), -EINVAL);
	VREQUIRE_RC(vista_begin_transaction(v, 0x80), -EINVAL);
	struct vista_range r = { w, 8 };
	VREQUIRE_RC(vista_set_ranges(v, 1, &r), VISTA_ENOTX);

	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_RC(vista_begin_transaction(v, 0), VISTA_EINTX);
	VREQUIRE_RC(vista_begin_transaction(v, VISTA_TX_AUTO), VISTA_EINTX);
	VREQUIRE_OK(vista_set_range(v, w, 8));
	w[0] = 8;
	// The nested begin did not disturb the running transaction.
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(w[0] == 7);
	VREQUIRE_RC(vista_abort_transaction(v), VISTA_ENOTX);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("ranges outside a mapped segment are refused", "[tx]")
{
	Env e;
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	vista_segment *s2 = vt::map(v, e.seg("b"), 1);
	char *b = (char *)vista_segment_base(s);
	size_t n = vista_segment_size(s);
	static char outside[64];

	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_RC(vista_set_range(v, outside, 8), VISTA_ERANGE);
	VREQUIRE_RC(vista_set_range(v, b - 8, 16), VISTA_ERANGE); // straddles
	VREQUIRE_RC(vista_set_range(v, b + n - 8, 16), VISTA_ERANGE);
	VREQUIRE_RC(vista_set_range(v, b - 4096, 8), VISTA_ERANGE); // header
	VREQUIRE_RC(vista_set_range(v, (void *)UINTPTR_MAX, 2), VISTA_ERANGE);
	VREQUIRE_OK(vista_set_range(v, b + n - 8, 8));
	VREQUIRE_OK(vista_set_range(v, b, 0)); // empty: nothing to do
	VREQUIRE_OK(vista_set_range(v, vista_segment_base(s2), 8));
	REQUIRE(vt::stats(v).bytes_logged == 16);
	// A segment in use by a transaction cannot go away.
	VREQUIRE_RC(vista_unmap(s2), VISTA_EINTX);
	VREQUIRE_RC(vista_fini(v), VISTA_EINTX);
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_unmap(s2));
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_RC(vista_set_range(v, vista_segment_base(s) , 1ull << 40),
		VISTA_ERANGE);
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a full log lane fails set_range; the transaction still aborts "
	  "or commits cleanly",
	"[tx]")
{
	Env e;
	e.lanes = 2;
	e.log_size = 256 << 10; // ~100 KiB per lane
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0, 4 << 20);
	char *b = (char *)vista_segment_base(s);
	memset(b, 'o', 1 << 20);

	VREQUIRE_OK(vista_begin_transaction(v, 0));
	int i, rc = 0;
	for (i = 0; i < 1000; i++) {
		rc = vista_set_range(v, b + i * 4096, 4096);
		if (rc)
			break;
		memset(b + i * 4096, 'x', 4096);
	}
	REQUIRE(rc == VISTA_ELOGFULL);
	REQUIRE(i > 10);
	REQUIRE(std::string(vista_errormsg()).find("full") != std::string::npos);
	// One more small range may still fit, a big one not.
	VREQUIRE_RC(vista_set_range(v, b + 900 * 4096, 65536), VISTA_ELOGFULL);
	VREQUIRE_OK(vista_abort_transaction(v));
	for (int k = 0; k < (i + 1) * 4096; k++)
		REQUIRE(b[k] == 'o');

	// Or keep what was declared before the failure.
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, b, 4096));
	memset(b, 'y', 4096);
	VREQUIRE_RC(vista_set_range(v, b + 4096, 1 << 20), VISTA_ELOGFULL);
	VREQUIRE_OK(vista_end_transaction(v));
	REQUIRE(b[0] == 'y');
	REQUIRE(b[4096] == 'o');
	VREQUIRE_OK(vista_fini(v));
}

// In the cacheline domain a transaction of k set_ranges costs k + 1 fences:
// one per set_range, one for the data and the commit record at commit.
TEST_CASE("fence budget: k set_ranges cost k + 1 fences; a batch costs 2",
	"[tx][budget]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *w = (uint64_t *)vista_segment_base(s);
	REQUIRE(rio_pool_domain(vista_segment_pool(s)) == RIO_DOMAIN_CACHELINE);
	vt::Tracer tr;

	for (int k = 0; k <= 5; k++) {
		struct vista_stats a = vt::stats(v);
		tr.reset();
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		for (int i = 0; i < k; i++) {
			VREQUIRE_OK(vista_set_range(v, &w[i * 16], 8));
			w[i * 16]++;
		}
		VREQUIRE_OK(vista_end_transaction(v));
		struct vista_stats b = vt::stats(v);
		// Each record: one fence, its tag written back with it
		// (L4, L2); the commit: one fence for the data and the
		// commit record, the truncation lazy (L6).
		uint64_t want = k == 0 ? 0 : (uint64_t)k + 1;
		CHECK(b.fences - a.fences == want);
		CHECK(tr.drains == want);
		// Lines: k records (one line each, tag included), k data
		// lines, the commit record, the lane header: 2k + 2.
		CHECK(b.flushes - a.flushes == (k ? 2 * (uint64_t)k + 2 : 0));
		CHECK(tr.flush_lines == b.flushes - a.flushes);
	}

	// Ranges declared again, or in one cache line, cost nothing more.
	struct vista_stats a = vt::stats(v);
	tr.reset();
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, w, 8));
	VREQUIRE_OK(vista_set_range(v, w, 8));
	VREQUIRE_OK(vista_set_range(v, w + 1, 8));
	VREQUIRE_OK(vista_end_transaction(v));
	struct vista_stats b = vt::stats(v);
	CHECK(b.fences - a.fences == 2 + 1);
	// 2 records, 1 data line, the commit record, the lane header.
	CHECK(b.flushes - a.flushes == 2 + 1 + 1 + 1);

	// vista_set_ranges: many ranges, one record and one fence (its tag
	// goes with it, L4 in log.c), then the commit's fence.
	a = b;
	tr.reset();
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	struct vista_range r[4] = { { &w[0], 8 }, { &w[16], 8 }, { &w[32], 8 },
		{ &w[48], 50 } };
	VREQUIRE_OK(vista_set_ranges(v, 4, r));
	VREQUIRE_OK(vista_end_transaction(v));
	b = vt::stats(v);
	CHECK(b.fences - a.fences == 2);
	CHECK(tr.drains == 2);
	VREQUIRE_OK(vista_fini(v));
}

// A long image is compared with what the lane holds where it goes and
// only the lines that differ are written (L5 in log.c); after an image
// with no line in common the next 64 long images are copied without
// looking, then comparing resumes.
TEST_CASE("long images stop being compared with the lane after one with "
	  "nothing in common, for 64 images",
	"[tx][budget]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	char *b = (char *)vista_segment_base(s);
	char *x = b + 4096, *y = b + 8192;
	for (int i = 0; i < 1024; i++) {
		x[i] = (char)(i * 7 + 1);
		y[i] = (char)(i * 7 + 2); // differs from x in every line
	}
	vt::Tracer tr;
	// Lines written back by declaring `p` at the start of the lane (an
	// abort resets the lane, L3): 1 header line (40 bytes, the image's
	// first 24 with it) and the image's 16 other lines, or the header
	// alone when the lane holds the image already.
	auto declare = [&](char *p) {
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		uint64_t lines = tr.flush_lines;
		struct vista_range r = { p, 1024 };
		VREQUIRE_OK(vista_set_ranges(v, 1, &r));
		lines = tr.flush_lines - lines;
		VREQUIRE_OK(vista_abort_transaction(v));
		return lines;
	};
	CHECK(declare(x) == 17); // the lane held nothing this process wrote
	CHECK(declare(x) == 1);  // the same image at the same place
	CHECK(declare(y) == 17); // nothing in common: compared, all written
	for (int k = 0; k < 64; k++) {
		INFO("image " << k << " after the one with nothing in common");
		CHECK(declare(y) == 17); // copied without looking
	}
	CHECK(declare(y) == 1); // compared again
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("abort flushes each line it restored once, after its last store",
	"[tx][budget]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *w = (uint64_t *)vista_segment_base(s);
	vt::Tracer tr;

	// Three records, two of them in one line; the records' lines are
	// flushed when they are written, the data lines once at abort.
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, &w[0], 8));
	VREQUIRE_OK(vista_set_range(v, &w[1], 8));
	VREQUIRE_OK(vista_set_range(v, &w[16], 8));
	w[0] = w[1] = w[16] = 7;
	uint64_t lines = tr.flush_lines, drains = tr.drains;
	VREQUIRE_OK(vista_abort_transaction(v));
	CHECK(tr.flush_lines - lines == 2 + 1); // lines 0 and 2, lane header
	CHECK(tr.drains - drains == 2);
	REQUIRE(w[0] == 0);
	REQUIRE(w[1] == 0);
	REQUIRE(w[16] == 0);

	// Heap undo: three blocks of one run share a bitmap word and the
	// run's page map entry.
	vista_segment *h = vt::map(v, e.seg("heap"), 1);
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	void *p[3];
	for (void *&x : p)
		VREQUIRE_OK(vista_malloc(h, 64, &x));
	lines = tr.flush_lines;
	VREQUIRE_OK(vista_abort_transaction(v));
	// Bitmap word, page map entry (its check), lane header.
	CHECK(tr.flush_lines - lines == 2 + 1);
	struct vista_heap_info hi;
	VREQUIRE_OK(vista_heap_check(h, &hi));
	REQUIRE(hi.blocks == 0);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("byte domain: no cache line is ever flushed", "[tx][budget]")
{
	Env e(RIO_FORCE_BYTE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *w = (uint64_t *)vista_segment_base(s);
	REQUIRE(rio_pool_domain(vista_segment_pool(s)) == RIO_DOMAIN_BYTE);

	for (int t = 0; t < 100; t++) {
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_set_range(v, &w[t % 7], 8));
		w[t % 7]++;
		if (t % 3 == 0) {
			void *p;
			VREQUIRE_OK(vista_malloc(s, 100, &p));
		}
		if (t % 2)
			VREQUIRE_OK(vista_abort_transaction(v));
		else
			VREQUIRE_OK(vista_end_transaction(v));
	}
	struct vista_stats st = vt::stats(v);
	REQUIRE(st.flushes == 0);
	REQUIRE(st.fences > 0); // ordering points, compiler barriers here
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("a transaction with nothing declared costs no fence", "[tx][budget]")
{
	Env e(RIO_FORCE_CACHELINE);
	vista *v = e.open();
	vt::map(v, e.seg("a"), 0);
	vt::Tracer tr;
	for (int i = 0; i < 10; i++) {
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_end_transaction(v));
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_abort_transaction(v));
	}
	REQUIRE(tr.drains == 0);
	REQUIRE(vt::stats(v).fences == 0);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("the page domain persists with msync and commits correctly",
	"[tx]")
{
	Env e(RIO_FORCE_PAGE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *w = (uint64_t *)vista_segment_base(s);
	REQUIRE(rio_pool_domain(vista_segment_pool(s)) == RIO_DOMAIN_PAGE);
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, w, 8));
	w[0] = 5;
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, w, 8));
	w[0] = 6;
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(w[0] == 5);
	VREQUIRE_OK(vista_fini(v));
}

// librio's fault-injection hook: make msync fail.
#include "rio_testhook.h"

TEST_CASE("a failed persist puts the instance in its error state", "[tx]")
{
	Env e(RIO_FORCE_PAGE);
	vista *v = e.open();
	vista_segment *s = vt::map(v, e.seg("a"), 0);
	uint64_t *w = (uint64_t *)vista_segment_base(s);

	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, w, 8));
	w[0] = 1;
	rio_sys_msync_fn real = rio_testhook_msync([](void *, size_t, int) {
		errno = EIO;
		return -1;
	});
	VREQUIRE_RC(vista_end_transaction(v), VISTA_EFATAL);
	rio_testhook_msync(real);
	REQUIRE(std::string(vista_errormsg()).find("uncertain") !=
		std::string::npos);
	// It sticks: nothing more until the instance is reopened.
	VREQUIRE_RC(vista_begin_transaction(v, 0), VISTA_EFATAL);
	vista_segment *s2;
	VREQUIRE_RC(vista_map(v, e.seg("b").c_str(), vt::addr(1), 4096,
			    VISTA_CREATE, &s2),
		VISTA_EFATAL);
	vista_fini(v); // the pools report their error; the instance is gone
	v = e.open();
	s = vt::map(v, e.seg("a"), 0);
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_fini(v));
}

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vista_int.h"

#ifndef NDEBUG
// The lane state machine (vista_int.h) is checked where the state changes:
// IDLE -> COMMITTING is no edge of it, so the change aborts, naming M1.
TEST_CASE("a lane state change off the state machine aborts, naming its "
	"invariant", "[tx]")
{
	int fd[2];
	REQUIRE(pipe(fd) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct rlimit nocore = { 0, 0 };
		static struct vista_lane l; // zero: IDLE
		(void)setrlimit(RLIMIT_CORE, &nocore);
		dup2(fd[1], 2);
		vista__lane_set_state(&l, VISTA__TX_ACTIVE);  // an edge
		vista__lane_set_state(&l, VISTA__TX_IDLE);    // an edge
		vista__lane_set_state(&l, VISTA__TX_COMMITTING); // none
		_exit(0);
	}
	close(fd[1]);
	std::string out;
	char buf[256];
	ssize_t n;
	while ((n = read(fd[0], buf, sizeof(buf))) > 0)
		out.append(buf, (size_t)n);
	close(fd[0]);
	int st = 0;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	REQUIRE(WIFSIGNALED(st));
	REQUIRE(WTERMSIG(st) == SIGABRT);
	INFO(out);
	REQUIRE(out.find("libvista: invariant M1 violated: ") != std::string::npos);
	// the condition as written, not macro-expanded
	REQUIRE(out.find("VISTA__TX_EDGE(l->state, to)") != std::string::npos);
	REQUIRE(out.find("(vista_int.h:") != std::string::npos);
}
#endif
