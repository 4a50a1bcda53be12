// SPDX-License-Identifier: BSD-3-Clause
// crash_test.cpp -- random transactions killed at random points
//
// Writer: a child runs random transactions on two segments A and B:
// transfers between counters (in one segment or across both), objects
// allocated from the heap holding an amount taken from a counter, objects
// freed giving their amount back, big transactions, aborts, automatic
// transactions (often chained with vista_chain_transaction).  Every
// transaction also sets A's root `seq` to its number, and after each
// commit the child reports that number to the parent.
//
// Checker: the parent recovers (vista_init, vista_map) and checks
//   - the counters plus the objects' amounts add up to the initial total;
//   - each heap is consistent (vista_heap_check), and its blocks are
//     exactly the root and the objects the slots point to: no leak, no
//     block twice, no slot pointing at a free block;
//   - A's seq is at least the last commit reported (nothing durable lost).
//
// Crashes:
//   [powercut]  cacheline domain; the power fails at a random persist
//               barrier, with flushed lines lost, torn or kept and other
//               lines evicted at random (powercut.hpp).
//   [lazy]      the same, the writer running only transfers within A:
//               transactions of one segment, committed with one fence and
//               a truncation made durable by the next transaction.
//   [solo]      the same with a log of one lane, where a one-fence commit
//               stores no truncation at all: the next transaction's first
//               record ends it (log.c L7, recover.c C7); every other run
//               mixes in transactions of both segments, heap operations,
//               automatic transactions and aborts.
//   [kill]      byte domain; the parent sends SIGKILL after a random delay.
//   [recovery]  power cuts while recovering from a power cut.
//   [partial]   after a cut, a run maps A alone, recovers it and commits
//               new work to it; a later run maps B: A's new work must stay.
//   [done]      power cuts at every fence of a partial recovery whose lane
//               header still holds an older transaction's done bits, each
//               pending line torn: the header must never pair this
//               transaction's generation with the old bits.
//
// Broken builds (meson: vista_crash_broken_*) link a libvista made with
// -DVISTA_BROKEN_COMMIT_ORDER, _NO_LOG_PERSIST, _PARTIAL_REDO, _DONE_ORDER,
// _RUN_CHECK_NO_FLUSH, _LAZY_COMMIT_EARLY, _LAZY_NO_COVER, _ONE_SLOT,
// _SOLO_OVERWRITE or _TORN_TRUSTED: the test that must catch them passes
// only if it does.
#include <poll.h>

#include <sstream>

#include "powercut.hpp"
#include "vista_test.hpp"

namespace {

const int NC = 32, NS = 32;

// [lazy]: the writer runs only transfers within A, each a transaction of
// one segment (the one-fence commit, tx.c commit_lazy).
bool one_segment = false;
// [solo]: the log has one lane.
unsigned n_lanes = 4;
const int64_t INITIAL = 1000;
const int64_t TOTAL = 2 * NC * INITIAL;

struct Obj {
	int64_t value;
	uint64_t self;
};

struct Root {
	uint64_t seq;
	int64_t counter[NC];
	Obj *slot[NS];
};

struct Files {
	test::TempDir dir;
	std::string log = dir / "log", a = dir / "a", b = dir / "b";
	std::vector<std::string> all() const { return { log, a, b }; }
};

struct Inst {
	vista *v = nullptr;
	vista_segment *seg[2] = { nullptr, nullptr };
	Root *root[2] = { nullptr, nullptr };
};

int open_inst(const Files &f, unsigned flags, Inst &in, bool map_a = true,
	bool map_b = true, bool b_first = false)
{
	struct vista_opts o = {};
	o.log_path = f.log.c_str();
	o.log_size = 512 << 10;
	o.lanes = n_lanes;
	o.rio_flags = flags;
	int rc = vista_init(&o, &in.v);
	for (int k = 0; k < 2 && rc == 0; k++) {
		int which = b_first ? 1 - k : k;
		if (!(which == 0 ? map_a : map_b))
			continue;
		rc = vista_map(in.v, (which == 0 ? f.a : f.b).c_str(),
			vt::addr(which), 256 << 10, VISTA_CREATE,
			&in.seg[which]);
	}
	// Every segment is mapped before the roots are read: with one lane,
	// a transaction of the crashed run that touched both holds it until
	// both are recovered.
	for (int k = 0; k < 2 && rc == 0; k++)
		if (in.seg[k] != nullptr)
			rc = vista_root(in.seg[k], sizeof(Root),
				(void **)&in.root[k]);
	return rc;
}

void setup(const Files &f, unsigned flags)
{
	for (auto &p : f.all()) {
		unlink(p.c_str());
		unlink((p + ".shadow").c_str());
	}
	Inst in;
	VREQUIRE_OK(open_inst(f, flags, in));
	VREQUIRE_OK(vista_begin_transaction(in.v, 0));
	for (int k = 0; k < 2; k++) {
		VREQUIRE_OK(vista_set_range(in.v, in.root[k]->counter,
			sizeof(in.root[k]->counter)));
		for (int i = 0; i < NC; i++)
			in.root[k]->counter[i] = INITIAL;
	}
	VREQUIRE_OK(vista_end_transaction(in.v));
	VREQUIRE_OK(vista_fini(in.v));
}

// ---- the writer ----

struct Writer {
	Inst &in;
	test::Rng rng;
	bool automatic = false;
	bool chained = false; // vista_chain_transaction began this one
	Writer(Inst &i, uint64_t seed) : in(i), rng(seed) {}

	void fail(const char *what, int rc)
	{
		fprintf(stderr, "writer: %s: %s: %s\n", what, vista_err_name(rc),
			vista_errormsg());
		_exit(20);
	}
	void decl(void *p, size_t n)
	{
		int rc;
		if (!automatic && (rc = vista_set_range(in.v, p, n)) != 0)
			fail("set_range", rc);
	}
	void transfer()
	{
		int x = (int)rng.below(2), y = (int)rng.below(2);
		if (one_segment)
			x = y = 0;
		int i = (int)rng.below(NC), j = (int)rng.below(NC);
		int64_t amt = (int64_t)rng.below(50);
		Root *rx = in.root[x], *ry = in.root[y];
		if (rx->counter[i] < amt)
			return;
		if (!automatic && rng.below(2)) {
			struct vista_range r[2] = { { &rx->counter[i], 8 },
				{ &ry->counter[j], 8 } };
			int rc = vista_set_ranges(in.v, 2, r);
			if (rc)
				fail("set_ranges", rc);
		} else {
			decl(&rx->counter[i], 8);
			decl(&ry->counter[j], 8);
		}
		rx->counter[i] -= amt;
		ry->counter[j] += amt;
	}
	void alloc()
	{
		int x = (int)rng.below(2), z = (int)rng.below(2);
		int k = (int)rng.below(NS), i = (int)rng.below(NC);
		Root *rx = in.root[x], *rz = in.root[z];
		int64_t amt = (int64_t)rng.below(50);
		Obj *o;
		if (rx->slot[k] != nullptr || rz->counter[i] < amt)
			return;
		size_t size = sizeof(Obj) + (rng.below(4) ? rng.below(200) :
						      rng.below(6000));
		int rc = vista_malloc(in.seg[x], size, (void **)&o);
		if (rc == VISTA_ENOMEM)
			return;
		if (rc)
			fail("malloc", rc);
		o->value = amt;
		o->self = (uint64_t)(uintptr_t)o;
		decl(&rx->slot[k], 8);
		decl(&rz->counter[i], 8);
		rx->slot[k] = o;
		rz->counter[i] -= amt;
	}
	void release()
	{
		int x = (int)rng.below(2), y = (int)rng.below(2);
		int k = (int)rng.below(NS), j = (int)rng.below(NC);
		Root *rx = in.root[x], *ry = in.root[y];
		Obj *o = rx->slot[k];
		if (o == nullptr)
			return;
		decl(&rx->slot[k], 8);
		decl(&ry->counter[j], 8);
		ry->counter[j] += o->value;
		rx->slot[k] = nullptr;
		int rc = vista_free(in.seg[x], o);
		if (rc)
			fail("free", rc);
	}
	// One transaction; returns its number if it committed, else 0.
	uint64_t tx()
	{
		Root *ra = in.root[0];
		uint64_t t = ra->seq + 1;
		unsigned kind = (unsigned)rng.below(10);
		bool abort_it = rng.below(6) == 0;
		int rc;

		if (one_segment)
			kind = 0;
		if (chained) {
			automatic = true;
		} else {
			automatic = !one_segment && rng.below(8) == 0;
			rc = vista_begin_transaction(in.v,
				automatic ? VISTA_TX_AUTO : 0);
			if (rc)
				fail("begin", rc);
		}
		decl(&ra->seq, 8);
		ra->seq = t;
		switch (kind) {
		case 0: case 1: case 2: case 3:
			transfer();
			break;
		case 4: case 5:
			alloc();
			break;
		case 6: case 7:
			release();
			break;
		default: // big
			for (int n = 0; n < 20; n++) {
				transfer();
				if (n % 5 == 0)
					alloc();
				if (n % 7 == 0)
					release();
			}
		}
		if (abort_it) {
			chained = false;
			if ((rc = vista_abort_transaction(in.v)) != 0)
				fail("abort", rc);
			return 0;
		}
		// Automatic transactions often chain: the pages they changed
		// stay open for the next one.
		chained = automatic && rng.below(2);
		if ((rc = chained ? vista_chain_transaction(in.v) :
				    vista_end_transaction(in.v)) != 0)
			fail("commit", rc);
		return t;
	}
};

// Run transactions forever, reporting each commit on fd.
[[noreturn]] void writer(const Files &f, unsigned flags, uint64_t seed, int fd)
{
	Inst in;
	int rc = open_inst(f, flags, in);
	if (rc) {
		fprintf(stderr, "writer: open: %s: %s\n", vista_err_name(rc),
			vista_errormsg());
		_exit(21);
	}
	Writer w(in, seed);
	for (;;) {
		uint64_t t = w.tx();
		if (t && write(fd, &t, sizeof(t)) != sizeof(t))
			_exit(22);
	}
}

// ---- the checker ----

std::string check_inst(Inst &in, uint64_t acked)
{
	int64_t sum = 0;
	std::ostringstream why;
	for (int k = 0; k < 2; k++) {
		Root *r = in.root[k];
		std::map<uintptr_t, size_t> want;
		if (vista_heap_check(in.seg[k], nullptr) != 0)
			return std::string("heap: ") + vista_errormsg();
		want[(uintptr_t)r] = 0;
		for (int i = 0; i < NC; i++)
			sum += r->counter[i];
		for (int s = 0; s < NS; s++) {
			Obj *o = r->slot[s];
			if (o == nullptr)
				continue;
			if (!want.emplace((uintptr_t)o, 0).second) {
				why << "segment " << k << ": two slots hold "
				    << o;
				return why.str();
			}
			if (vista_usable_size(in.seg[k], o) < sizeof(Obj)) {
				why << "segment " << k << ": slot " << s
				    << " points at " << o
				    << ", which is not allocated";
				return why.str();
			}
			if (o->self != (uint64_t)(uintptr_t)o) {
				why << "object " << o << " is damaged";
				return why.str();
			}
			sum += o->value;
		}
		auto got = vt::blocks(in.seg[k]);
		for (auto &g : got)
			if (!want.count(g.first)) {
				why << "segment " << k << ": block "
				    << (void *)g.first << " is leaked";
				return why.str();
			}
		if (got.size() != want.size()) {
			why << "segment " << k << ": " << want.size()
			    << " objects in use, " << got.size()
			    << " blocks allocated";
			return why.str();
		}
	}
	if (sum != TOTAL) {
		why << "the money does not add up: " << sum << " != " << TOTAL;
		return why.str();
	}
	if (in.root[0]->seq < acked) {
		why << "lost a committed transaction: seq " << in.root[0]->seq
		    << ", the writer had committed " << acked;
		return why.str();
	}
	return "";
}

std::string check(const Files &f, unsigned flags, uint64_t acked,
	bool b_first = false)
{
	Inst in;
	int rc = open_inst(f, flags, in, true, true, b_first);
	if (rc)
		return std::string("recovery failed: ") + vista_err_name(rc) +
			": " + vista_errormsg();
	std::string why = check_inst(in, acked);
	int frc = vista_fini(in.v);
	if (why.empty() && frc)
		why = std::string("vista_fini: ") + vista_err_name(frc);
	return why;
}

uint64_t drain_acks(int fd)
{
	uint64_t v, last = 0;
	while (read(fd, &v, sizeof(v)) == sizeof(v))
		last = v;
	return last;
}

// Fork a writer; the power fails at its drain number cut_at (powercut),
// or the parent kills it after delay_us (kill).  Returns the last commit
// it reported, and whether the writer died as intended.
struct Run {
	uint64_t acked = 0;
	bool killed = false;
	std::string err;
	std::string why; // a violation seen before the checker ran
};

Run run_writer(const Files &f, unsigned flags, uint64_t seed, uint64_t cut_at,
	unsigned delay_us)
{
	int fds[2], errp[2];
	REQUIRE(pipe(fds) == 0);
	REQUIRE(pipe(errp) == 0);
	fflush(nullptr);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		close(errp[0]);
		dup2(errp[1], 2);
		if (cut_at)
			pc::install(cut_at, seed ^ 0x5555);
		writer(f, flags, seed, fds[1]);
	}
	close(fds[1]);
	close(errp[1]);
	if (!cut_at) {
		usleep(delay_us);
		kill(pid, SIGKILL);
	}
	Run r;
	r.acked = drain_acks(fds[0]);
	close(fds[0]);
	char buf[512];
	ssize_t n;
	while ((n = read(errp[0], buf, sizeof(buf))) > 0)
		r.err.append(buf, (size_t)n);
	close(errp[0]);
	int st;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	r.killed = WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL;
	if (cut_at)
		pc::adopt(f.all());
	return r;
}

// Power cut in a child that only recovers.
void cut_recovery(const Files &f, unsigned flags, uint64_t seed,
	uint64_t cut_at)
{
	auto r = test::run_child([&] {
		pc::install(cut_at, seed);
		Inst in;
		int rc = open_inst(f, flags, in);
		_exit(rc ? 30 : 0);
	});
	INFO(r.err);
	REQUIRE((r.signal == SIGKILL || (r.exited && r.code == 0)));
	pc::adopt(f.all());
}

struct Outcome {
	int kills = 0, violations = 0;
	std::string first;
	void note(int it, const std::string &why)
	{
		if (why.empty())
			return;
		if (getenv("CRASH_VERBOSE"))
			fprintf(stderr, "iteration %d: %s\n", it, why.c_str());
		if (violations++ == 0)
			first = "iteration " + std::to_string(it) + ": " + why;
	}
};

// Which broken build this test program was made for, if any.
enum Broken { NONE, COMMIT_ORDER, NO_LOG_PERSIST, PARTIAL_REDO,
	DONE_ORDER, RUN_CHECK_NO_FLUSH, LAZY_COMMIT_EARLY, LAZY_NO_COVER,
	ONE_SLOT, SOLO_OVERWRITE, TORN_TRUSTED };
#if defined(VISTA_BROKEN_COMMIT_ORDER)
const Broken broken = COMMIT_ORDER;
#elif defined(VISTA_BROKEN_NO_LOG_PERSIST)
const Broken broken = NO_LOG_PERSIST;
#elif defined(VISTA_BROKEN_PARTIAL_REDO)
const Broken broken = PARTIAL_REDO;
#elif defined(VISTA_BROKEN_DONE_ORDER)
const Broken broken = DONE_ORDER;
#elif defined(VISTA_BROKEN_RUN_CHECK_NO_FLUSH)
const Broken broken = RUN_CHECK_NO_FLUSH;
#elif defined(VISTA_BROKEN_LAZY_COMMIT_EARLY)
const Broken broken = LAZY_COMMIT_EARLY;
#elif defined(VISTA_BROKEN_LAZY_NO_COVER)
const Broken broken = LAZY_NO_COVER;
#elif defined(VISTA_BROKEN_ONE_SLOT)
const Broken broken = ONE_SLOT;
#elif defined(VISTA_BROKEN_SOLO_OVERWRITE)
const Broken broken = SOLO_OVERWRITE;
#elif defined(VISTA_BROKEN_TORN_TRUSTED)
const Broken broken = TORN_TRUSTED;
#else
const Broken broken = NONE;
#endif

// A test passes if a correct build shows no violation, and a broken build
// it is meant to catch shows one.
void verdict(const Outcome &o, int n, bool catches)
{
	INFO(o.first);
	REQUIRE(o.kills >= n);
	if (broken != NONE && catches) {
		WARN("broken build: " << o.violations << " violations in "
				      << o.kills << " crashes; first: "
				      << o.first);
		REQUIRE(o.violations > 0);
	} else {
		REQUIRE(o.violations == 0);
	}
}
// A series of crashes on one set of files.
// Cuts for a campaign of n: a broken build it must catch goes on until
// the first violation, up to 40 times as many (some orders are caught
// once in about 800 cuts: one_slot), so that catching it does not depend
// on the seed; a correct build runs n.
int broken_budget(int n, bool catches)
{
	return broken != NONE && catches ? 40 * n : n;
}

struct Campaign {
	unsigned flags;
	int n;
	test::Rng rng;
	Files f;
	Outcome o;
	Campaign(unsigned fl, int dflt)
		: flags(fl), n(test::iterations(dflt)), rng(test::seed())
	{
		setup(f, flags);
	}
	// A writer that loses power at a random barrier (cut) or is killed
	// after a random delay.
	Run writer(bool cut)
	{
		Run r = cut ? run_writer(f, flags, rng.next(), 1 + rng.below(600), 0) :
			      run_writer(f, flags, rng.next(), 0,
				      (unsigned)(300 + rng.below(4000)));
		INFO(r.err);
		if (!r.killed && r.err.find("writer: open:") != std::string::npos) {
			// What the last recovery left does not open again.
			r.why = "the files recovered last do not open: " + r.err;
			o.kills++;
			return r;
		}
		REQUIRE(r.killed);
		o.kills++;
		if (getenv("CRASH_VERBOSE"))
			fprintf(stderr, "acked %llu\n", (unsigned long long)r.acked);
		return r;
	}
	// Record the checker's verdict; true to go on.
	bool judge(int it, const std::string &why, bool catches)
	{
		o.note(it, why);
		if (why.empty())
			return true;
		if (catches)
			return false; // caught: enough
		setup(f, flags); // start over from good files
		return true;
	}
	void verdict(bool catches) const
	{
		::verdict(o, catches && o.violations ? o.kills : n, catches);
	}
};

} // namespace

TEST_CASE("power cuts at random persist barriers (cacheline)",
	"[crash][powercut]")
{
	bool catches = broken == COMMIT_ORDER || broken == NO_LOG_PERSIST ||
		broken == RUN_CHECK_NO_FLUSH;
	Campaign c(RIO_FORCE_CACHELINE, 300);
	for (int it = 0; it < c.n; it++) {
		Run r = c.writer(true);
		if (!c.judge(it, r.why.empty() ? check(c.f, c.flags, r.acked) :
				    r.why, catches))
			break;
	}
	c.verdict(catches);
}

TEST_CASE("power cuts at random persist barriers, transactions of one "
	  "segment (the one-fence commit)",
	"[crash][lazy]")
{
	bool catches = broken == NO_LOG_PERSIST || broken == LAZY_COMMIT_EARLY ||
		broken == LAZY_NO_COVER || broken == COMMIT_ORDER;
	one_segment = true;
	Campaign c(RIO_FORCE_CACHELINE, broken_budget(150, catches));
	for (int it = 0; it < c.n; it++) {
		// Cuts within the first transactions' fences, where the
		// commits are.
		Run r = run_writer(c.f, c.flags, c.rng.next(),
			1 + c.rng.below(120), 0);
		std::string why;
		if (!r.killed && r.err.find("writer: open:") != std::string::npos)
			why = "the files recovered last do not open: " + r.err;
		if (!r.killed && why.empty()) {
			INFO(r.err);
			REQUIRE(r.killed);
		}
		c.o.kills++;
		if (!c.judge(it, why.empty() ? check(c.f, c.flags, r.acked) :
				    why, catches))
			break;
	}
	one_segment = false;
	c.verdict(catches);
}

TEST_CASE("power cuts at random persist barriers, a log of one lane (the "
	  "commit stores no truncation)",
	"[crash][solo]")
{
	bool catches = broken == NO_LOG_PERSIST || broken == LAZY_COMMIT_EARLY ||
		broken == COMMIT_ORDER || broken == ONE_SLOT ||
		broken == SOLO_OVERWRITE || broken == TORN_TRUSTED;
	n_lanes = 1;
	Campaign c(RIO_FORCE_CACHELINE, broken_budget(200, catches));
	for (int it = 0; it < c.n; it++) {
		// Odd runs: one-segment transactions only (every commit the
		// one-fence commit); even runs: the whole mix.
		one_segment = it % 2 == 1;
		Run r = run_writer(c.f, c.flags, c.rng.next(),
			1 + c.rng.below(one_segment ? 120 : 400), 0);
		std::string why;
		if (!r.killed && r.err.find("writer: open:") != std::string::npos)
			why = "the files recovered last do not open: " + r.err;
		if (!r.killed && why.empty()) {
			INFO(r.err);
			REQUIRE(r.killed);
		}
		c.o.kills++;
		if (!c.judge(it, why.empty() ? check(c.f, c.flags, r.acked) :
				    why, catches))
			break;
	}
	one_segment = false;
	n_lanes = 4;
	c.verdict(catches);
}

TEST_CASE("SIGKILL at random moments (byte domain)", "[crash][kill]")
{
	Campaign c(RIO_FORCE_BYTE, 200);
	for (int it = 0; it < c.n; it++) {
		Run r = c.writer(false);
		c.judge(it, check(c.f, c.flags, r.acked), false);
	}
	c.verdict(false);
}

TEST_CASE("power cuts during recovery from a power cut", "[crash][recovery]")
{
	Campaign c(RIO_FORCE_CACHELINE, 150);
	for (int it = 0; it < c.n; it++) {
		Run r = c.writer(true);
		// Recovery itself loses power, once or twice.
		for (int k = 0; k < 1 + (int)c.rng.below(2); k++) {
			cut_recovery(c.f, c.flags, c.rng.next(),
				1 + c.rng.below(12));
			c.o.kills++;
		}
		c.judge(it, check(c.f, c.flags, r.acked, c.rng.below(2)), false);
	}
	c.verdict(false);
}

// Run 2 maps A alone (rolling back its part of the interrupted
// transaction) and commits transfers inside A; returns A's seq after them.
static uint64_t work_on_a_alone(Campaign &c)
{
	Inst in;
	VREQUIRE_OK(open_inst(c.f, c.flags, in, true, false));
	Root *ra = in.root[0];
	for (int t = 0; t < 5; t++) {
		int i = (int)c.rng.below(NC), j = (int)c.rng.below(NC);
		VREQUIRE_OK(vista_begin_transaction(in.v, 0));
		VREQUIRE_OK(vista_set_range(in.v, &ra->seq, 8));
		VREQUIRE_OK(vista_set_range(in.v, &ra->counter[i], 8));
		VREQUIRE_OK(vista_set_range(in.v, &ra->counter[j], 8));
		ra->seq += 1000;
		int64_t amt = ra->counter[i] < 10 ? 0 : 10;
		ra->counter[i] -= amt;
		ra->counter[j] += amt;
		VREQUIRE_OK(vista_end_transaction(in.v));
	}
	uint64_t seq = ra->seq;
	VREQUIRE_OK(vista_fini(in.v));
	return seq;
}

TEST_CASE("partial recovery: A alone, new work on A, then B",
	"[crash][partial]")
{
	bool catches = broken == PARTIAL_REDO;
	Campaign c(RIO_FORCE_CACHELINE, 150);
	for (int it = 0; it < c.n; it++) {
		c.writer(true);
		uint64_t seq_a = work_on_a_alone(c);
		// Run 3: everything, B or A first.
		Inst in;
		int rc = open_inst(c.f, c.flags, in, true, true, c.rng.below(2));
		std::string why;
		if (rc)
			why = std::string("recovery failed: ") + vista_errormsg();
		else if (in.root[0]->seq != seq_a)
			why = "A's seq went from " + std::to_string(seq_a) +
				" to " + std::to_string(in.root[0]->seq) +
				": old before-images of A were applied again";
		else
			why = check_inst(in, 0);
		if (rc == 0)
			VREQUIRE_OK(vista_fini(in.v));
		if (!c.judge(it, why, catches))
			break;
	}
	c.verdict(catches);
}

// A transfer of amt from A's counter 0 to B's, left open: the process
// dies with the transaction's stores in the pools (kill semantics).
static void interrupted_transfer(const Files &f, unsigned flags, int64_t amt)
{
	auto r = test::run_child([&] {
		Inst in;
		if (open_inst(f, flags, in) ||
		    vista_begin_transaction(in.v, 0) ||
		    vista_set_range(in.v, &in.root[0]->counter[0], 8) ||
		    vista_set_range(in.v, &in.root[1]->counter[0], 8))
			_exit(30);
		in.root[0]->counter[0] -= amt;
		in.root[1]->counter[0] += amt;
		_exit(0);
	});
	INFO(r.err);
	REQUIRE((r.exited && r.code == 0));
}

// Map one segment alone (recovering its part), then close.
static void recover_alone(const Files &f, unsigned flags, bool a)
{
	Inst in;
	VREQUIRE_OK(open_inst(f, flags, in, a, !a));
	VREQUIRE_OK(vista_fini(in.v));
}

static void copy_files(const std::vector<std::string> &from,
	const std::vector<std::string> &to)
{
	for (size_t i = 0; i < from.size(); i++) {
		test::write_file(to[i], test::read_file(from[i]));
		unlink((to[i] + ".shadow").c_str());
	}
}

TEST_CASE("partial recovery's done bits under power cuts at every fence",
	"[crash][done]")
{
	// 1. A transaction on A and B dies; 2. B is recovered alone: the lane
	// header says done = {B} for that generation; 3. A alone: the lane
	// is truncated, done[] keeps {B} (of an older generation now);
	// 4. another transaction on A and B dies in the same lane.
	// 5. A is recovered alone and the power fails at each of its fences
	// in turn, every pending line torn: done[] = {A} must be durable
	// before done_gen names the new generation, or the header can say
	// "B done" for it and B's before-image is never applied.
	// 6. Everything is recovered: the money must add up.
	bool catches = broken == DONE_ORDER;
	Campaign c(RIO_FORCE_CACHELINE, 40);
	interrupted_transfer(c.f, c.flags, 10);
	recover_alone(c.f, c.flags, false);
	recover_alone(c.f, c.flags, true);
	interrupted_transfer(c.f, c.flags, 7);
	std::vector<std::string> snap = { c.f.dir / "log.snap",
		c.f.dir / "a.snap", c.f.dir / "b.snap" };
	copy_files(c.f.all(), snap);
	// The fences of step 5, counted in a run that loses no power.
	auto dry = test::run_child([&] {
		pc::install(0, 1);
		Inst in;
		int rc = open_inst(c.f, c.flags, in, true, false);
		_exit(rc ? 255 : (int)std::min<uint64_t>(pc::st().drains, 250));
	});
	INFO(dry.err);
	REQUIRE(dry.exited);
	REQUIRE(dry.code >= 2);
	REQUIRE(dry.code < 250);
	bool go = true;
	for (int cut_at = 1; cut_at <= dry.code && go; cut_at++)
		for (int it = 0; it < c.n && go; it++) {
			copy_files(snap, c.f.all());
			uint64_t seed = c.rng.next();
			auto r = test::run_child([&] {
				pc::install((uint64_t)cut_at, seed, true);
				Inst in;
				int rc = open_inst(c.f, c.flags, in, true, false);
				_exit(rc ? 30 : 0);
			});
			INFO(r.err);
			REQUIRE(r.signal == SIGKILL);
			pc::adopt(c.f.all());
			c.o.kills++;
			std::string why = check(c.f, c.flags, 0);
			if (!why.empty())
				why = "power cut at fence " +
					std::to_string(cut_at) + ": " + why;
			go = c.judge(it, why, catches);
		}
	c.verdict(catches);
}
