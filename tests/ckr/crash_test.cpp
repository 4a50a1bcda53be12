// SPDX-License-Identifier: BSD-3-Clause
// crash_test.cpp -- libckr under SIGKILL at random points
//
// A child runs an application on one directory: it recovers (ckr_open with
// the replay callback), then logs and applies actions as fast as it is
// allowed, calls ckr_point_of_consistency every few actions (so the writer
// is almost always writing a slot) and commits the log now and then (so
// the logger is always in a group commit).  It is killed with SIGKILL at a
// random moment: in a mutation, in a slot write, in a group commit.  The
// checker then
//   C1. recovers the directory: the state must equal the state reached by
//       replaying, from the start, the durable prefix of the log;
//   C2. checks both slots: none may have a valid header over data that does
//       not match it (CKR_EDATA: ckpt.c I1).
// Over every algorithm and both storages; the next child continues the
// same directory.
//
// [kill-ring] does the same with a log ring that wraps many times, C1
// against the durable actions regenerated from the children's seeds.
//
// Broken builds (meson: ckr_crash_broken_*) link a libckr made with
// -DCKR_BROKEN_HDR_BEFORE_DATA (caught by C2; every other child of its
// campaign dies in the window, between the header and the data, by
// CKR_TEST_KILL_IN_WINDOW, so that the window is hit on a fast machine
// too) or -DCKR_BROKEN_WRITER_READS_LIVE (caught by C1: the slot holds
// actions after its log_seq, which recovery then applies twice).  Neither
// touches the fork snapshot's path; every other algorithm must catch each
// in [kill].  -DCKR_BROKEN_RELEASE_EARLY (the ring's head moves to a
// checkpoint's log_seq when it starts) must be caught by [kill-ring] in
// at least half of its ten campaigns (algorithm x storage).
#include <time.h>

#include <sstream>

#include "ckr_test.hpp"

using namespace ckrt;

namespace {

#if defined(CKR_BROKEN_HDR_BEFORE_DATA) || \
	defined(CKR_BROKEN_WRITER_READS_LIVE) || \
	defined(CKR_BROKEN_RELEASE_EARLY)
const bool broken = true;
#else
const bool broken = false;
#endif

const uint64_t NOBJS = 256;
const uint32_t OSZ = 4096;

// [kill]: a log that never wraps; [kill-ring]: a ring of 4 KiB (about
// 100 records, less than three checkpoint periods: the child often finds
// it full and takes a checkpoint) that wraps many times in every child.
uint64_t log_cap = 64ull << 20;

struct ckr_opts crash_opts(enum ckr_algo al, enum ckr_storage st)
{
	auto o = opts(al, st, NOBJS, OSZ);
	o.log_capacity = log_cap;
	return o;
}

// The actions a child with seed `seed` appends, in order.
Action child_action(test::Rng &r)
{
	Action a = { r.next(), (uint32_t)r.below(1000) + 1, 0 };
	return a;
}

[[noreturn]] void child(const std::string &dir, enum ckr_algo al,
	enum ckr_storage st, uint64_t seed, int ready)
{
	auto o = crash_opts(al, st);
#ifdef CKR_BROKEN_HDR_BEFORE_DATA
	// every other child dies in the broken window itself (ckpt.c
	// broken_window), however fast its slot writes are: a kill from the
	// parent lands there only by chance
	if (seed & 1)
		setenv("CKR_TEST_KILL_IN_WINDOW", "1", 1);
#endif
	ckr *c;
	int rc = ckr_open(dir.c_str(), &o, &c);
	if (rc != 0) {
		fprintf(stderr, "recovery: %s: %s\n", ckr_err_name(rc),
			ckr_errormsg());
		_exit(3);
	}
	// recovered: the parent's clock for the kill starts now
	char one = 1;
	if (write(ready, &one, 1) != 1)
		_exit(7);
	close(ready);
	test::Rng r(seed);
	struct timespec nap = { 0, 20000 };
	for (uint64_t k = 0;; k++) {
		Action a = child_action(r);
		rc = ckr_log_append(c, &a, sizeof(a), nullptr);
		// a full ring: checkpoints release it (docs/ckr.md)
		for (int t = 0; rc == CKR_ELOGFULL && t < 3; t++) {
			if (ckr_point_of_consistency(c, CKR_POC_WAIT) < 0 ||
			    ckr_checkpoint_wait(c) != 0)
				_exit(8);
			rc = ckr_log_append(c, &a, sizeof(a), nullptr);
		}
		if (rc != 0)
			_exit(4);
		apply_ckr(c, a);
		if (k % 37 == 36 && ckr_point_of_consistency(c, 0) < 0)
			_exit(5);
		if (k % 101 == 100 && ckr_log_commit(c) != 0)
			_exit(6);
		if (k % 32 == 31)
			nanosleep(&nap, nullptr); // bound the log's growth
	}
}

struct Outcome {
	int kills = 0, violations = 0;
	std::string first;
	void violation(const std::string &why)
	{
		if (violations++ == 0)
			first = why;
	}
};

Outcome campaign(enum ckr_algo al, enum ckr_storage st, int n, uint64_t seed,
	bool stop_at_first)
{
	test::TempDir d;
	test::Rng r(seed);
	Outcome o;
	uint64_t nw = NOBJS * OSZ / 4;
	// every durable action so far, regenerated from the children's
	// seeds: the reference needs no log (a ring keeps only its tail)
	std::vector<uint32_t> ref(nw, 0);
	uint64_t nref = 0;
	for (int it = 0; it < n && !(stop_at_first && o.violations); it++) {
		uint64_t cs = r.next();
		int p[2];
		REQUIRE(pipe(p) == 0);
		fflush(nullptr);
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			close(p[0]);
			child(d.path, al, st, cs, p[1]);
		}
		close(p[1]);
		// one kill in eight may land in recovery itself; the others
		// 0..20 ms after it, in mutation, slot writes, group commits
		struct timespec t = { 0, (long)r.below(20000000) };
		if (r.below(8) == 0) {
			t.tv_nsec = (long)r.below(5000000);
		} else {
			char one;
			(void)!read(p[0], &one, 1);
		}
		close(p[0]);
		int status = 0;
		pid_t gone = 0;
#ifdef CKR_BROKEN_HDR_BEFORE_DATA
		// a child that dies in the broken window itself (child(); the
		// fork snapshot's path has none) gets there however slow the
		// machine: up to 10 s, not t
		for (int ms = 0; (cs & 1) && al != CKR_FORK && gone == 0 &&
		     ms < 10000; ms++) {
			gone = waitpid(pid, &status, WNOHANG);
			if (gone == 0)
				usleep(1000);
		}
		REQUIRE(gone >= 0);
#endif
		if (gone == 0) {
			nanosleep(&t, nullptr);
			kill(pid, SIGKILL);
			REQUIRE(waitpid(pid, &status, 0) == pid);
		}
		std::ostringstream where;
		where << ckr_algo_name(al) << "/"
		      << (st == CKR_STORAGE_FILE ? "file" : "pool")
		      << " kill " << it << ": ";
		if (!WIFSIGNALED(status)) {
			o.violation(where.str() + "child exited with " +
				std::to_string(WEXITSTATUS(status)));
			continue;
		}
		o.kills++;
		// C1 (ckr_open waits for a snapshot child to be gone)
		auto o2 = crash_opts(al, st);
		ckr *c;
		int orc = ckr_open(d.path.c_str(), &o2, &c);
		if (orc != 0) {
			o.violation(where.str() + "recovery failed: " +
				ckr_err_name(orc) + ": " + ckr_errormsg());
			continue;
		}
		// C1 against the journal: the child appended from action
		// nref on; the durable ones are the recovered log's
		struct ckr_stats rs;
		ckr_stats(c, &rs);
		if (rs.log_durable < nref) {
			o.violation(where.str() + "the log lost durable actions");
			ckr_close(c);
			continue;
		}
		test::Rng cr(cs);
		for (; nref < rs.log_durable; nref++)
			apply_ref(ref, child_action(cr));
		if (state_of(c) != ref)
			o.violation(where.str() + "recovered state differs from "
				"the durable actions applied in order (" +
				std::to_string(nref) + " actions)");
		uint64_t count = 0;
		auto want = log_cap > (1u << 20) ?
			reference(d.path, st, nw, &count) : ref;
		if (getenv("CKR_CRASH_DEBUG")) {
			struct ckr_stats sts;
			ckr_stats(c, &sts);
			fprintf(stderr, "%s epoch %llu slot %d bad %d actions %llu\n",
				where.str().c_str(),
				(unsigned long long)sts.recovered_epoch,
				sts.recovered_slot, sts.bad_slots,
				(unsigned long long)count);
		}
		if (state_of(c) != want)
			o.violation(where.str() + "recovered state differs from "
				"the replay of the durable log (" +
				std::to_string(count) + " actions)");
		// C2
		for (int s = 0; s < 2; s++) {
			int rc = ckr_slot_check(d.path.c_str(), st, s, nullptr,
				nullptr);
			if (rc == CKR_EDATA)
				o.violation(where.str() + ckr_errormsg());
		}
		CKR_REQUIRE_OK(ckr_close(c));
	}
	return o;
}

void kill_all(uint64_t seed, int per, int bmul)
{
	int n = test::iterations(per);
#ifdef CKR_BROKEN_RELEASE_EARLY
	// Its window is the writer's slot write while the mutator fills the
	// ring, narrow where the writer is fast and the mutator slow (BACOU
	// on pools): the campaign over every algorithm and storage must catch
	// it, in at least half of them.
	int caught = 0;
	std::string firsts;
	for (auto st : { CKR_STORAGE_FILE, CKR_STORAGE_POOL })
		for (auto al : algos) {
			Outcome o = campaign(al, st, bmul * n, seed + al * 7 + st,
				true);
			caught += o.violations > 0;
			firsts += o.first + "\n";
		}
	WARN("broken build caught in " << caught << " of 10 campaigns:\n"
		<< firsts);
	REQUIRE(caught >= 5);
	return;
#endif
	for (auto st : { CKR_STORAGE_FILE, CKR_STORAGE_POOL })
		for (auto al : algos) {
			bool affected = al != CKR_FORK;
			DYNAMIC_SECTION(ckr_algo_name(al) << "/"
				<< (st == CKR_STORAGE_FILE ? "file" : "pool"))
			{
				// a broken build's campaign is longer (its
				// window is a fraction of the writer's time)
				// and ends at the first violation
				bool b = broken && affected;
				Outcome o = campaign(al, st, b ? bmul * n : n,
					seed + al * 7 + st, b);
				INFO(o.first);
				if (b) {
					WARN("broken build: " << o.violations
						<< " violations in " << o.kills
						<< " kills; first: " << o.first);
					REQUIRE(o.violations > 0);
				} else {
					// the count, for the suite's log
					WARN(ckr_algo_name(al) << "/"
						<< (st == CKR_STORAGE_FILE ?
							"file" : "pool")
						<< ": " << o.kills
						<< " kills, 0 violations");
					REQUIRE(o.kills >= n);
					REQUIRE(o.violations == 0);
				}
			}
		}
}

} // namespace

TEST_CASE("SIGKILL at random points: recovery = replay of the durable log",
	"[kill]")
{
	log_cap = 64ull << 20;
	kill_all(test::seed(), 20, 4);
}

// The same with a log ring that wraps (truncation, log.c L4): the
// recovered state must still be every durable action applied in order,
// the journal regenerated from the children's seeds.  The broken build
// release_early (the head moves to a checkpoint's log_seq when it starts,
// not to the previous one's after W4) must be caught: a kill during its
// slot write leaves the older slot, whose actions the ring overwrote.
TEST_CASE("SIGKILL with a wrapping log ring", "[kill-ring]")
{
	log_cap = 4u << 10;
	kill_all(test::seed() + 1, 10, 16);
}
