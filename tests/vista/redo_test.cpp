// SPDX-License-Identifier: BSD-3-Clause
// redo_test.cpp -- redo mode (VISTA_MODE_REDO, libvista/redo.c)
//
// [redo]          the calls: commit, abort, reopen, one fence a commit,
//                 coalesced write-back, the other mode's pools refused,
//                 what redo mode does not support.
// [redo-kill]     SIGKILL at random moments of a run of transactions, then
//                 recovery: the state is exactly that of the transactions
//                 that returned (or of one more).
// [redo-powercut] a power failure at every fence of a run (powercut.hpp),
//                 the same check.  Built also against the broken builds
//                 redo_commit_early (the commit record vouches only for
//                 itself and is made durable before the after-images) and
//                 redo_reuse_early (a checkpoint frees the ring before the
//                 home write-back is durable), which it must catch.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "txrun.hpp"

namespace {

#if defined(VISTA_BROKEN_REDO_COMMIT_EARLY) || \
	defined(VISTA_BROKEN_REDO_REUSE_EARLY)
const bool broken = true;
#else
const bool broken = false;
#endif

using txrun::SEG;
using txrun::HIST_LEN;

struct Redo {
	test::TempDir dir;
	std::string log = dir / "log", seg = dir / "seg";
	size_t log_size = 4096 + 8192 + (16 << 10); // a 16 KiB ring
	unsigned mode = VISTA_MODE_REDO;

	int init(vista **v) const
	{
		struct vista_opts o = {};
		o.log_path = log.c_str();
		o.log_size = log_size;
		o.rio_flags = RIO_FORCE_CACHELINE;
		o.mode = mode;
		*v = nullptr;
		return vista_init(&o, v);
	}
};

vista *open_ok(const Redo &e)
{
	vista *v = nullptr;
	VREQUIRE_OK(e.init(&v));
	return v;
}

char *map_ok(vista *v, const Redo &e, vista_segment **s = nullptr)
{
	vista_segment *sg = nullptr;
	VREQUIRE_OK(vista_map(v, e.seg.c_str(), vt::addr(3), SEG, VISTA_CREATE,
		&sg));
	if (s)
		*s = sg;
	return (char *)vista_segment_base(sg);
}

// Transaction i on a plain buffer (the model) or through vista (v).
// Every fifth one first runs a transaction that it aborts.
int tx(vista *v, char *b, uint64_t i)
{
	txrun::transfer t = txrun::transfer_of(b, i);
	if (v && i % 5 == 3) {
		int rc = vista_begin_transaction(v, 0);
		struct vista_range r[2] = { { t.a, 8 }, { t.h, HIST_LEN } };
		if (rc == 0)
			rc = vista_set_ranges(v, 2, r);
		if (rc)
			return rc;
		*t.a += 1000;
		memset(t.h, 0xee, HIST_LEN);
		if ((rc = vista_abort_transaction(v)) != 0)
			return rc;
	}
	if (v) {
		struct vista_range r[4] = { { t.a, 8 }, { t.c, 8 }, { b, 8 },
			{ t.h, HIST_LEN } };
		int rc = vista_begin_transaction(v, 0);
		if (rc == 0)
			rc = vista_set_ranges(v, 4, r);
		if (rc)
			return rc;
	}
	txrun::transfer_store(b, i, t);
	return v ? vista_end_transaction(v) : 0;
}

std::vector<char> model(uint64_t n)
{
	return txrun::model(tx, n);
}

void run(const Redo &e, const std::string &report, uint64_t n)
{
	txrun::run(e, report, n, tx);
}

using txrun::fresh;
using txrun::reported;

std::string check(const Redo &e, const std::string &report)
{
	return txrun::check(e, report, model, [](uint64_t) {
		return std::make_pair((size_t)0, (size_t)0);
	});
}

} // namespace

TEST_CASE("redo: commit, abort, reopen", "[redo]")
{
	Redo e;
	vista *v = open_ok(e);
	vista_segment *s;
	char *b = map_ok(v, e, &s);
	REQUIRE(vista_segment_size(s) == SEG);
	for (uint64_t i = 0; i < 300; i++)
		VREQUIRE_OK(tx(v, b, i));
	REQUIRE(memcmp(b, model(300).data(), SEG) == 0);
	// Abort puts the DRAM copy back.
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	VREQUIRE_OK(vista_set_range(v, b + 100, 50));
	VREQUIRE_RC(vista_begin_transaction(v, 0), VISTA_EINTX);
	memset(b + 100, 0x5a, 50);
	VREQUIRE_OK(vista_abort_transaction(v));
	REQUIRE(memcmp(b, model(300).data(), SEG) == 0);
	VREQUIRE_RC(vista_end_transaction(v), VISTA_ENOTX);
	VREQUIRE_OK(vista_fini(v));

	v = open_ok(e);
	b = map_ok(v, e);
	REQUIRE(memcmp(b, model(300).data(), SEG) == 0);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("redo: one fence a commit, a line written back once", "[redo]")
{
	Redo e;
	e.log_size = 4096 + 8192 + (1 << 20);
	vista *v = open_ok(e);
	vista_segment *s;
	char *b = map_ok(v, e, &s);
	vt::Tracer t;
	for (int i = 0; i < 100; i++) {
		VREQUIRE_OK(vista_begin_transaction(v, 0));
		VREQUIRE_OK(vista_set_range(v, b + 64 * (i % 4), 8));
		b[64 * (i % 4)] = (char)i;
		VREQUIRE_OK(vista_end_transaction(v));
	}
	REQUIRE(t.drains == 100);
	REQUIRE(t.flush_lines == 100); // one record line each
	struct vista_stats st = vt::stats(v);
	// and vista_map's: the segment bound to the log, a checkpoint.
	REQUIRE(st.fences == 100 + 3);
	t.reset();
	// The checkpoint writes the four lines back once each, fences
	// them (F2), then its slot (F3); then the segment is clean.
	VREQUIRE_OK(vista_unmap(s));
	REQUIRE(t.drains == 3);
	REQUIRE(t.flush_lines == 4 + 1 + 1);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("redo: the other mode's pools and what redo mode refuses",
	"[redo]")
{
	Redo e;
	fresh(e);
	vista *v = nullptr;
	e.mode = VISTA_MODE_UNDO;
	VREQUIRE_RC(e.init(&v), VISTA_ELAYOUT);
	REQUIRE(strstr(vista_errormsg(), "VISTA_MODE_REDO") != nullptr);
	e.mode = 7;
	VREQUIRE_RC(e.init(&v), -EINVAL);

	// An undo-mode log and segment, refused by redo mode.
	vt::Env u(RIO_FORCE_CACHELINE);
	vista *uv = u.open();
	vt::map(uv, u.seg("s"), 4);
	VREQUIRE_OK(vista_fini(uv));
	Redo r2;
	r2.log = u.log;
	VREQUIRE_RC(r2.init(&v), VISTA_ELAYOUT);
	REQUIRE(strstr(vista_errormsg(), "VISTA_MODE_UNDO") != nullptr);
	Redo r3;
	v = open_ok(r3);
	vista_segment *s = nullptr;
	VREQUIRE_RC(vista_map(v, u.seg("s").c_str(), nullptr, 0, 0, &s),
		VISTA_ELAYOUT);
	// A redo segment under undo mode.
	uv = u.open();
	VREQUIRE_RC(vista_map(uv, e.seg.c_str(), nullptr, 0, 0, &s),
		VISTA_ELAYOUT);
	REQUIRE(strstr(vista_errormsg(), "VISTA_MODE_REDO") != nullptr);
	VREQUIRE_OK(vista_fini(uv));

	char *b = map_ok(v, r3, &s);
	void *p;
	VREQUIRE_RC(vista_root(s, 64, &p), -ENOTSUP);
	VREQUIRE_RC(vista_malloc(s, 64, &p), -ENOTSUP);
	VREQUIRE_RC(vista_begin_transaction(v, VISTA_TX_AUTO), -ENOTSUP);
	VREQUIRE_RC(vista_flush(v), -ENOTSUP);
	VREQUIRE_OK(vista_begin_transaction(v, 0));
	// One transaction at a time: another thread waits its turn.
	int other = 0, other_end = 0;
	std::thread([&] {
		other = vista_begin_transaction(v, 0);
		other_end = vista_end_transaction(v);
	}).join();
	REQUIRE(other == VISTA_ENOLANE);
	REQUIRE(other_end == VISTA_ENOTX);
	VREQUIRE_RC(vista_set_range(v, b + SEG - 4, 8), VISTA_ERANGE);
	// More after-images than a quarter of the ring.
	VREQUIRE_RC(vista_set_range(v, b, SEG), VISTA_ELOGFULL);
	VREQUIRE_OK(vista_set_range(v, b, 64));
	b[0] = 9;
	VREQUIRE_OK(vista_chain_transaction(v));
	VREQUIRE_OK(vista_set_range(v, b + 8, 8));
	b[8] = 10;
	VREQUIRE_OK(vista_end_transaction(v));
	VREQUIRE_OK(vista_fini(v));
	v = open_ok(r3);
	b = map_ok(v, r3);
	REQUIRE(b[0] == 9);
	REQUIRE(b[8] == 10);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("redo: a log holding another segment's transactions",
	"[redo]")
{
	Redo e;
	fresh(e);
	vt::crash_in_child([&] {
		vista *v = nullptr;
		CHILD_OK(e.init(&v));
		vista_segment *s;
		CHILD_OK(vista_map(v, e.seg.c_str(), nullptr, 0, 0, &s));
		char *b = (char *)vista_segment_base(s);
		CHILD_OK(vista_begin_transaction(v, 0));
		CHILD_OK(vista_set_range(v, b, 8));
		b[0] = 1;
		CHILD_OK(vista_end_transaction(v));
	});
	vista *v = open_ok(e);
	REQUIRE(vista_pending_lanes(v) == 1);
	vista_segment *s;
	VREQUIRE_RC(vista_map(v, (e.dir / "other").c_str(), vt::addr(5), SEG,
			    VISTA_CREATE, &s),
		VISTA_EPENDING);
	// The segment under another log: refused, nothing lost.
	Redo other;
	vista *ov = open_ok(other);
	VREQUIRE_RC(vista_map(ov, e.seg.c_str(), nullptr, 0, 0, &s),
		VISTA_EOTHERLOG);
	VREQUIRE_OK(vista_fini(ov));
	char *b = map_ok(v, e);
	REQUIRE(b[0] == 1); // replayed
	REQUIRE(vista_pending_lanes(v) == 0);
	REQUIRE(vt::stats(v).recovered_tx == 1);
	VREQUIRE_OK(vista_fini(v));
}

TEST_CASE("redo: SIGKILL at random moments, then recovery", "[redo-kill]")
{
	Redo e;
	fresh(e);
	std::string report = e.dir / "report";
	test::Rng rng(test::seed());
	int n = test::iterations(12);
	for (int it = 0; it < n; it++) {
		fflush(nullptr);
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			run(e, report, UINT64_MAX);
			_exit(0);
		}
		usleep((useconds_t)(2000 + rng.below(30000)));
		kill(pid, SIGKILL);
		int st;
		REQUIRE(waitpid(pid, &st, 0) == pid);
		std::string why = check(e, report);
		INFO("kill " << it << ": " << why);
		REQUIRE(why.empty());
	}
	REQUIRE(reported(report) > 0);
}

TEST_CASE("redo: a power failure at every fence of a run", "[redo-powercut]")
{
	txrun::cut_every_fence<Redo>(broken, 150, [](Redo &) {}, tx, check);
}
