// SPDX-License-Identifier: BSD-3-Clause
// unit_test.cpp -- libckr: each algorithm's handlers against a reference
// copy over random updates across checkpoint periods, each slot's image
// against the state at its point of consistency, recovery, bad input.
//
//   [handlers]  reads equal the reference after every update, for every
//               algorithm and both storages; the slot of each epoch holds
//               exactly the state at its point of consistency although
//               the mutator kept writing while the writer ran.
//   [recover]   close and reopen: checkpoint + replayed log = reference.
//   [bad]       corrupt or truncated slot or log, sizes that do not match,
//               another log, a full log, a full log device (a refused
//               write: sticky), bad options, a second handle:
//               clear codes; one bad slot -> recovery from the other.
#include <signal.h>
#include <sys/resource.h>

#include "ckr_test.hpp"

using namespace ckrt;

namespace {

const char *sname(enum ckr_storage st)
{
	return st == CKR_STORAGE_FILE ? "file" : "pool";
}

// Actions through the log, as an application does.
void act(ckr *c, std::vector<uint32_t> &ref, test::Rng &r)
{
	Action a = { r.next(), (uint32_t)r.below(1000) + 1, 0 };
	CKR_REQUIRE_OK(ckr_log_append(c, &a, sizeof(a), nullptr));
	apply_ckr(c, a);
	apply_ref(ref, a);
}

} // namespace

TEST_CASE("handlers match a reference across periods", "[handlers]")
{
	test::Rng r(test::seed());
	// the state in small pages on both storages, in huge pages on files
	for (auto st : { CKR_STORAGE_FILE, CKR_STORAGE_POOL, (ckr_storage)0 })
		for (auto al : algos) {
			uint32_t fl = st == 0 ? CKR_HUGEPAGES : 0;
			if (st == 0)
				st = CKR_STORAGE_FILE;
			DYNAMIC_SECTION(ckr_algo_name(al) << "/" << sname(st)
				<< (fl ? "/hugepages" : ""))
			{
				test::TempDir d;
				const uint64_t nobjs = 64;
				const uint32_t osz = 256;
				auto o = opts(al, st, nobjs, osz);
				o.flags = fl;
				ckr *c;
				CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o, &c));
				uint64_t nw = ckr_nwords(c);
				REQUIRE(nw == nobjs * osz / 4);
				std::vector<uint32_t> ref(nw, 0);
				for (int p = 1; p <= 8; p++) {
					for (int k = 0; k < 3000; k++) {
						uint64_t i = r.below(nw);
						if (r.below(3) == 0) {
							REQUIRE(ckr_read(c, i) == ref[i]);
						} else {
							uint32_t v = (uint32_t)r.next();
							ckr_write(c, i, v);
							ref[i] = v;
						}
					}
					REQUIRE(ckr_point_of_consistency(c,
							CKR_POC_WAIT) == 1);
					std::vector<uint32_t> snap = ref;
					// the next period's writes race the writer
					for (int k = 0; k < 3000; k++) {
						uint64_t i = r.below(nw);
						uint32_t v = (uint32_t)r.next();
						ckr_write(c, i, v);
						ref[i] = v;
					}
					CKR_REQUIRE_OK(ckr_checkpoint_wait(c));
					int s = (p - 1) % 2;
					uint64_t ep = 0, ls = 9;
					CKR_REQUIRE_OK(ckr_slot_check(d.path.c_str(),
						st, s, &ep, &ls));
					REQUIRE(ep == (uint64_t)p);
					REQUIRE(ls == 0);
					REQUIRE(slot_data(d.path, st, nw, s) == snap);
				}
				REQUIRE(state_of(c) == ref);
				struct ckr_stats sts;
				ckr_stats(c, &sts);
				REQUIRE(sts.completed == 8);
				if (fl != 0 && sts.huge_bytes == 0)
					WARN("no transparent huge page was given");
				if (fl == 0)
					REQUIRE(sts.huge_bytes == 0);
				CKR_REQUIRE_OK(ckr_close(c));
			}
		}
}

TEST_CASE("recovery: newest checkpoint plus the log after it", "[recover]")
{
	test::Rng r(test::seed());
	for (auto st : { CKR_STORAGE_FILE, CKR_STORAGE_POOL })
		for (auto al : algos) {
			DYNAMIC_SECTION(ckr_algo_name(al) << "/" << sname(st))
			{
				test::TempDir d;
				auto o = opts(al, st, 32, 64);
				std::vector<uint32_t> ref(32 * 16, 0);
				ckr *c;
				// three runs, each recovering the one before
				for (int run = 0; run < 3; run++) {
					CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o,
						&c));
					REQUIRE(state_of(c) == ref);
					struct ckr_stats s0;
					ckr_stats(c, &s0);
					if (run > 0) {
						REQUIRE(s0.recovered_slot >= 0);
						REQUIRE(s0.replayed == 50);
					}
					for (int k = 0; k < 1000; k++) {
						act(c, ref, r);
						if (k % 100 == 49)
							REQUIRE(ckr_point_of_consistency(
								c, CKR_POC_WAIT) == 1);
					}
					REQUIRE(state_of(c) == ref);
					CKR_REQUIRE_OK(ckr_close(c));
				}
				uint64_t n = 0;
				REQUIRE(reference(d.path, st, ref.size(), &n) == ref);
				REQUIRE(n == 3000);
			}
		}
}

TEST_CASE("log truncation: the ring reuses what checkpoints released",
	"[truncate]")
{
	test::Rng r(test::seed());
	const uint64_t rs = ckr_rec_size(sizeof(Action));
	for (auto st : { CKR_STORAGE_FILE, CKR_STORAGE_POOL })
		for (auto al : { CKR_NAIVE, CKR_IPP, CKR_FORK }) {
			DYNAMIC_SECTION(ckr_algo_name(al) << "/" << sname(st))
			{
				test::TempDir d;
				auto o = opts(al, st, 32, 64);
				// room for 350 records: the records since the
				// older complete slot are up to three periods of
				// 100 while the newest checkpoint is being
				// written; not a multiple of one record: records
				// wrap with a gap before the ring's end
				o.log_capacity = 350 * rs + 24;
				std::vector<uint32_t> ref(32 * 16, 0), at_ck;
				ckr *c;
				uint64_t total = 0;
				// four runs, each recovering the one before; the
				// log is written about 6 times over
				for (int run = 0; run < 4; run++) {
					CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o,
						&c));
					REQUIRE(state_of(c) == ref);
					struct ckr_stats s0;
					ckr_stats(c, &s0);
					REQUIRE(s0.log_durable == total);
					if (run > 0)
						REQUIRE(s0.replayed == 30);
					for (int k = 0; k < 530; k++) {
						act(c, ref, r);
						if (k % 100 == 99) {
							REQUIRE(ckr_point_of_consistency(
								c, CKR_POC_WAIT) == 1);
							at_ck = ref;
						}
					}
					total += 530;
					CKR_REQUIRE_OK(ckr_close(c));
				}
				// the records since the older complete slot are
				// all there: a scan replays them from its log_seq
				uint64_t e0 = 0, e1 = 0, l0 = 0, l1 = 0, n = 0;
				CKR_REQUIRE_OK(ckr_slot_check(d.path.c_str(), st, 0,
					&e0, &l0));
				CKR_REQUIRE_OK(ckr_slot_check(d.path.c_str(), st, 1,
					&e1, &l1));
				uint64_t first = UINT64_MAX;
				CKR_REQUIRE_OK(ckr_log_scan(d.path.c_str(), st,
					[](void *ctx, uint64_t seq, const void *,
						size_t) {
						auto *f = (uint64_t *)ctx;
						if (*f == UINT64_MAX)
							*f = seq;
						return 0;
					}, &first, &n));
				REQUIRE(n == total);
				REQUIRE(first == std::min(l0, l1));
				REQUIRE(first > 0); // the start was reused
				// the newest slot damaged: the older one and
				// its log still give the state
				int newest = e0 > e1 ? 0 : 1;
				char z[8] = { 1, 2, 3, 4, 5, 6, 7, 8 };
				test::patch_file(ckpt_path(d.path, st),
					slot_off(st, 32 * 16, newest) + 40, z,
					sizeof(z));
				CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o, &c));
				REQUIRE(state_of(c) == ref);
				struct ckr_stats s1;
				ckr_stats(c, &s1);
				REQUIRE(s1.recovered_slot == (newest ^ 1));
				REQUIRE(s1.replayed == 130);
				CKR_REQUIRE_OK(ckr_close(c));
			}
		}
}

namespace {

// A directory with two complete slots (epochs 1 and 2) and actions after
// each; returns the reference state.
std::vector<uint32_t> two_slots(const std::string &dir, enum ckr_storage st,
	struct ckr_opts &o)
{
	test::Rng r(7);
	std::vector<uint32_t> ref(o.nobjs * o.obj_size / 4, 0);
	ckr *c;
	CKR_REQUIRE_OK(ckr_open(dir.c_str(), &o, &c));
	for (int k = 0; k < 300; k++) {
		act(c, ref, r);
		if (k == 99 || k == 199)
			REQUIRE(ckr_point_of_consistency(c, CKR_POC_WAIT) == 1);
	}
	CKR_REQUIRE_OK(ckr_close(c));
	uint64_t e0 = 0, e1 = 0;
	CKR_REQUIRE_OK(ckr_slot_check(dir.c_str(), st, 0, &e0, nullptr));
	CKR_REQUIRE_OK(ckr_slot_check(dir.c_str(), st, 1, &e1, nullptr));
	REQUIRE(e0 == 1);
	REQUIRE(e1 == 2);
	return ref;
}

void flip(const std::string &path, off_t off)
{
	std::string s = test::read_file(path);
	REQUIRE((size_t)off < s.size());
	char b = (char)(s[(size_t)off] ^ 0x40);
	test::patch_file(path, off, &b, 1);
}

struct ckr_stats reopen_ok(const std::string &dir, struct ckr_opts &o,
	const std::vector<uint32_t> &ref)
{
	ckr *c;
	CKR_REQUIRE_OK(ckr_open(dir.c_str(), &o, &c));
	REQUIRE(state_of(c) == ref);
	struct ckr_stats s;
	ckr_stats(c, &s);
	CKR_REQUIRE_OK(ckr_close(c));
	return s;
}

} // namespace

TEST_CASE("bad input: clear errors, the other slot when one is bad", "[bad]")
{
	for (auto st : { CKR_STORAGE_FILE, CKR_STORAGE_POOL }) {
		auto o = opts(CKR_BAZZ, st, 16, 256);
		uint64_t nw = 16 * 64;
		test::TempDir d;
		std::string ck = ckpt_path(d.path, st);
		std::string lg = d.path + (st == CKR_STORAGE_FILE ? "/log" :
			"/log.pool");
		DYNAMIC_SECTION("newest slot's data corrupt: " << sname(st))
		{
			auto ref = two_slots(d.path, st, o);
			flip(ck, slot_off(st, nw, 1) + CKR_HDR_SIZE + 100);
			CKR_REQUIRE_RC(ckr_slot_check(d.path.c_str(), st, 1,
				nullptr, nullptr), CKR_EDATA);
			auto s = reopen_ok(d.path, o, ref);
			REQUIRE(s.recovered_slot == 0);
			REQUIRE(s.recovered_epoch == 1);
			REQUIRE(s.bad_slots == 1);
			REQUIRE(s.replayed == 200);
		}
		DYNAMIC_SECTION("newest slot's header corrupt: " << sname(st))
		{
			auto ref = two_slots(d.path, st, o);
			flip(ck, slot_off(st, nw, 1) + 30);
			CKR_REQUIRE_RC(ckr_slot_check(d.path.c_str(), st, 1,
				nullptr, nullptr), CKR_ECORRUPT);
			auto s = reopen_ok(d.path, o, ref);
			REQUIRE(s.recovered_slot == 0);
			REQUIRE(s.bad_slots == 1);
		}
		DYNAMIC_SECTION("older slot's magic gone: " << sname(st))
		{
			auto ref = two_slots(d.path, st, o);
			flip(ck, slot_off(st, nw, 0) + 1);
			CKR_REQUIRE_RC(ckr_slot_check(d.path.c_str(), st, 0,
				nullptr, nullptr), CKR_EBADMAGIC);
			auto s = reopen_ok(d.path, o, ref);
			REQUIRE(s.recovered_slot == 1);
			REQUIRE(s.replayed == 100);
		}
		DYNAMIC_SECTION("first checkpoint's header torn: " << sname(st))
		{
			// A crash in the first checkpoint's W4: slot 0's header
			// half written, slot 1 never written.  No checkpoint
			// was ever complete: recovery replays the whole log.
			test::Rng r(7);
			std::vector<uint32_t> ref(nw, 0);
			ckr *c;
			CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o, &c));
			for (int k = 0; k < 100; k++)
				act(c, ref, r);
			REQUIRE(ckr_point_of_consistency(c, CKR_POC_WAIT) == 1);
			CKR_REQUIRE_OK(ckr_close(c));
			char z[64] = {};
			test::patch_file(ck, slot_off(st, nw, 0) + 64, z,
				sizeof(z));
			CKR_REQUIRE_RC(ckr_slot_check(d.path.c_str(), st, 0,
				nullptr, nullptr), CKR_ECORRUPT);
			auto s = reopen_ok(d.path, o, ref);
			REQUIRE(s.recovered_slot == -1);
			REQUIRE(s.bad_slots == 1);
			REQUIRE(s.replayed == 100);
		}
		DYNAMIC_SECTION("both slots corrupt: " << sname(st))
		{
			two_slots(d.path, st, o);
			std::string before = test::read_file(ck);
			flip(ck, slot_off(st, nw, 0) + CKR_HDR_SIZE + 5);
			flip(ck, slot_off(st, nw, 1) + 40);
			std::string bad = test::read_file(ck);
			ckr *c;
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o, &c),
				CKR_ECORRUPT);
			REQUIRE(test::read_file(ck) == bad); // nothing written
		}
		DYNAMIC_SECTION("another major version: " << sname(st))
		{
			two_slots(d.path, st, o);
			struct ckr_slot_hdr h;
			std::string s = test::read_file(ck);
			memcpy(&h, s.data() + slot_off(st, nw, 1), sizeof(h));
			h.major = CKR_MAJOR + 1;
			h.csum = rio_checksum(&h, offsetof(struct ckr_slot_hdr,
				csum), CKR_SLOT_CSUM_SEED);
			test::patch_file(ck, slot_off(st, nw, 1), &h, sizeof(h));
			ckr *c;
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o, &c),
				CKR_EVERSION);
		}
		DYNAMIC_SECTION("state or object size mismatch: " << sname(st))
		{
			two_slots(d.path, st, o);
			std::string before = test::read_file(ck);
			ckr *c;
			auto o2 = o;
			o2.nobjs = 17;
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o2, &c),
				CKR_ESIZE);
			o2 = o;
			o2.nobjs = 32;
			o2.obj_size = 128; // same bytes, other objects
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o2, &c),
				CKR_ESIZE);
			REQUIRE(test::read_file(ck) == before);
		}
		DYNAMIC_SECTION("truncated checkpoint file: " << sname(st))
		{
			two_slots(d.path, st, o);
			if (st == CKR_STORAGE_FILE) {
				REQUIRE(truncate(ck.c_str(),
					(off_t)ckr__slot_size(nw) + 4096) == 0);
				ckr *c;
				CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o, &c),
					CKR_ESIZE);
			}
		}
		DYNAMIC_SECTION("truncated log: the durable prefix" << sname(st))
		{
			auto ref = two_slots(d.path, st, o);
			if (st == CKR_STORAGE_FILE) {
				// cut into the record of action 250
				uint64_t cut = CKR_HDR_SIZE +
					250 * ckr_rec_size(sizeof(Action)) + 10;
				REQUIRE(truncate(lg.c_str(), (off_t)cut) == 0);
				// a shorter file: the log is refused, not
				// reformatted
				ckr *c;
				CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o, &c),
					CKR_ESIZE);
				REQUIRE(truncate(lg.c_str(), (off_t)(CKR_HDR_SIZE +
					o.log_capacity)) == 0);
			} else {
				// a torn record in the middle ends the log
				flip(lg, (off_t)(RIO_POOL_HDR_SIZE +
					CKR_HDR_SIZE +
					250 * ckr_rec_size(sizeof(Action)) + 20));
			}
			uint64_t n = 0;
			auto want = reference(d.path, st, nw, &n);
			REQUIRE(n == 250);
			auto s = reopen_ok(d.path, o, want);
			REQUIRE(s.replayed == 50);
			REQUIRE(want != ref);
		}
		DYNAMIC_SECTION("log header corrupt or of another log: "
				<< sname(st))
		{
			two_slots(d.path, st, o);
			off_t lo = st == CKR_STORAGE_POOL ? RIO_POOL_HDR_SIZE : 0;
			std::string save = test::read_file(lg);
			flip(lg, lo + 40); // reserved
			ckr *c;
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o, &c),
				CKR_ECORRUPT);
			flip(lg, lo + 40);
			flip(lg, lo + 3); // magic
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o, &c),
				CKR_EBADMAGIC);
			flip(lg, lo + 3);
			// a log of another directory: the slots do not go with it
			test::TempDir d2;
			auto o2 = o;
			o2.replay = nullptr;
			CKR_REQUIRE_OK(ckr_open(d2.path.c_str(), &o2, &c));
			CKR_REQUIRE_OK(ckr_close(c));
			std::string other = d2.path + (st == CKR_STORAGE_FILE ?
				"/log" : "/log.pool");
			REQUIRE(rename(other.c_str(), lg.c_str()) == 0);
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o, &c),
				CKR_EMISMATCH);
		}
		DYNAMIC_SECTION("full log: refused, nothing lost: " << sname(st))
		{
			auto o2 = o;
			o2.log_capacity = 10 * ckr_rec_size(sizeof(Action));
			ckr *c;
			CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o2, &c));
			std::vector<uint32_t> ref(nw, 0);
			test::Rng r(3);
			struct ckr_stats s0;
			for (int k = 0; k < 10; k++) {
				// log_free says what the next append may take
				ckr_stats(c, &s0);
				REQUIRE(s0.log_free == (10 - (uint64_t)k) *
					ckr_rec_size(sizeof(Action)));
				act(c, ref, r);
			}
			ckr_stats(c, &s0);
			REQUIRE(s0.log_free == 0);
			Action a = { 1, 1, 0 };
			CKR_REQUIRE_RC(ckr_log_append(c, &a, sizeof(a), nullptr),
				CKR_ELOGFULL);
			CKR_REQUIRE_OK(ckr_log_commit(c));
			CKR_REQUIRE_OK(ckr_close(c));
			auto s = reopen_ok(d.path, o2, ref);
			REQUIRE(s.replayed == 10);
		}
		// a file: a pool is all mapped at create
		if (st == CKR_STORAGE_FILE)
		DYNAMIC_SECTION("log device full: sticky error, nothing lost: "
			<< sname(st))
		{
			ckr *c;
			CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o, &c));
			std::vector<uint32_t> ref(nw, 0);
			test::Rng r(5);
			for (int k = 0; k < 10; k++)
				act(c, ref, r);
			CKR_REQUIRE_OK(ckr_log_commit(c));
			// the device takes no byte past the records written
			// so far: RLIMIT_FSIZE refuses the logger's next write
			// as a full device would (EFBIG for ENOSPC)
			struct rlimit old, lim;
			REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
			lim = old;
			lim.rlim_cur = CKR_HDR_SIZE +
				10 * ckr_rec_size(sizeof(Action));
			void (*h)(int) = signal(SIGXFSZ, SIG_IGN);
			REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
			Action a = { 1, 1, 0 };
			CKR_REQUIRE_OK(ckr_log_append(c, &a, sizeof(a), nullptr));
			int rc = ckr_log_commit(c);
			std::string msg = ckr_errormsg();
			// the next append is refused with the same error
			int rc2 = ckr_log_append(c, &a, sizeof(a), nullptr);
			int rc3 = ckr_close(c);
			REQUIRE(setrlimit(RLIMIT_FSIZE, &old) == 0);
			signal(SIGXFSZ, h);
			CKR_REQUIRE_RC(rc, -EFBIG);
			INFO(msg);
			// the logger's own message, handed to the caller
			REQUIRE(msg.find("pwrite") != std::string::npos);
			REQUIRE(msg.find("/log") != std::string::npos);
			CKR_REQUIRE_RC(rc2, -EFBIG);
			CKR_REQUIRE_RC(rc3, -EFBIG);
			// the 10 durable actions are all there
			auto s = reopen_ok(d.path, o, ref);
			REQUIRE(s.replayed == 10);
		}
		DYNAMIC_SECTION("one handle per directory: " << sname(st))
		{
			ckr *c, *c2;
			CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o, &c));
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o, &c2), -EBUSY);
			CKR_REQUIRE_OK(ckr_close(c));
			CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o, &c2));
			CKR_REQUIRE_OK(ckr_close(c2));
		}
		DYNAMIC_SECTION("bad options and records: " << sname(st))
		{
			ckr *c;
			auto o2 = o;
			o2.obj_size = 100;
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o2, &c),
				CKR_EINVAL);
			o2 = o;
			o2.algo = (enum ckr_algo)9;
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o2, &c),
				CKR_EINVAL);
			o2 = o;
			o2.nobjs = 0;
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o2, &c),
				CKR_EINVAL);
			o2 = o;
			o2.flags = 0x80;
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o2, &c),
				CKR_EINVAL);
			CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o, &c));
			char big[CKR_REC_MAX + 1] = {};
			CKR_REQUIRE_RC(ckr_log_append(c, big, sizeof(big),
				nullptr), CKR_ERECORD);
			CKR_REQUIRE_RC(ckr_log_append(c, big, 0, nullptr),
				CKR_ERECORD);
			Action a = { 1, 1, 0 };
			CKR_REQUIRE_OK(ckr_log_append(c, &a, sizeof(a), nullptr));
			CKR_REQUIRE_OK(ckr_close(c));
			o2 = o;
			o2.replay = nullptr; // one action to replay, no callback
			CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o2, &c),
				CKR_EINVAL);
		}
	}
}

TEST_CASE("group commit: the logger waits for log_group actions or a waiter",
	"[group]")
{
	for (auto st : { CKR_STORAGE_FILE, CKR_STORAGE_POOL }) {
		DYNAMIC_SECTION(sname(st))
		{
			test::TempDir d;
			auto o = opts(CKR_IPP, st, 64, 64);
			o.log_group = 500;
			ckr *c;
			struct ckr_stats s;
			CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o, &c));
			Action a = { 7, 3, 0 };
			for (int i = 0; i < 499; i++)
				CKR_REQUIRE_OK(ckr_log_append(c, &a, sizeof(a),
					nullptr));
			// a group of 499 is not taken, however long it waits
			usleep(20000);
			ckr_stats(c, &s);
			REQUIRE(s.log_durable == 0);
			REQUIRE(s.group_commits == 0);
			CKR_REQUIRE_OK(ckr_log_append(c, &a, sizeof(a), nullptr));
			CKR_REQUIRE_OK(ckr_log_wait(c, 500));
			// a waiter makes the logger take a smaller group
			for (int i = 0; i < 3; i++)
				CKR_REQUIRE_OK(ckr_log_append(c, &a, sizeof(a),
					nullptr));
			CKR_REQUIRE_OK(ckr_log_wait(c, 503));
			ckr_stats(c, &s);
			REQUIRE(s.log_durable == 503);
			REQUIRE(s.group_commits <= 2);
			CKR_REQUIRE_RC(ckr_log_wait(c, 504), CKR_EINVAL);
			// a checkpoint waits for its actions (W3) and completes
			REQUIRE(ckr_point_of_consistency(c, CKR_POC_WAIT) == 1);
			CKR_REQUIRE_OK(ckr_log_append(c, &a, sizeof(a), nullptr));
			CKR_REQUIRE_OK(ckr_checkpoint_wait(c));
			CKR_REQUIRE_OK(ckr_close(c));
			uint64_t n = 0;
			reference(d.path, st, 64 * 16, &n);
			REQUIRE(n == 504);
		}
	}
}

// HugePages_Free from /proc/meminfo.
static uint64_t hugetlb_free()
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[256];
	unsigned long long v = 0, r = 0;
	while (f != nullptr && fgets(line, sizeof(line), f) != nullptr)
		if (sscanf(line, "HugePages_Free: %llu", &v) == 1)
			r = v;
	if (f != nullptr)
		fclose(f);
	return r;
}

TEST_CASE("hugetlb: reserved huge pages or a clear error", "[hugetlb]")
{
	test::TempDir d;
	ckr *c;
	auto o = opts(CKR_IPP, CKR_STORAGE_FILE, 64, 64);
	o.flags = CKR_HUGEPAGES | CKR_HUGETLB;
	CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o, &c), CKR_EINVAL);
	o = opts(CKR_FORK, CKR_STORAGE_FILE, 64, 64);
	o.flags = CKR_HUGETLB;
	CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o, &c), CKR_EINVAL);
	uint64_t fr = hugetlb_free();
	// more than the free huge pages hold: refused, with the sysctl named
	o = opts(CKR_NAIVE, CKR_STORAGE_FILE, (fr + 2) * 512, 4096);
	o.flags = CKR_HUGETLB;
	CKR_REQUIRE_RC(ckr_open(d.path.c_str(), &o, &c), CKR_ENOHUGE);
	REQUIRE(strstr(ckr_errormsg(), "vm.nr_hugepages") != nullptr);
	if (fr < 8) {
		WARN("only " << fr << " free huge pages: the mapped case is "
			"not run (sysctl vm.nr_hugepages=8)");
		return;
	}
	// every algorithm but fork, in huge pages, recovers as in small ones
	for (auto al : { CKR_NAIVE, CKR_BACOU, CKR_BAZZ, CKR_IPP }) {
		test::TempDir d2;
		test::Rng r(test::seed());
		o = opts(al, CKR_STORAGE_FILE, 256, 64);
		o.flags = CKR_HUGETLB;
		std::vector<uint32_t> ref(256 * 16, 0);
		CKR_REQUIRE_OK(ckr_open(d2.path.c_str(), &o, &c));
		struct ckr_stats s;
		ckr_stats(c, &s);
		REQUIRE(s.huge_bytes >= 2u << 20);
		for (int p = 0; p < 3; p++) {
			for (int i = 0; i < 100; i++)
				act(c, ref, r);
			ckr_point_of_consistency(c, CKR_POC_WAIT);
		}
		REQUIRE(state_of(c) == ref);
		CKR_REQUIRE_OK(ckr_close(c));
		CKR_REQUIRE_OK(ckr_open(d2.path.c_str(), &o, &c));
		REQUIRE(state_of(c) == ref);
		CKR_REQUIRE_OK(ckr_close(c));
	}
}

TEST_CASE("recovery hands each action back with its own length", "[recover]")
{
	for (auto st : { CKR_STORAGE_FILE, CKR_STORAGE_POOL }) {
		DYNAMIC_SECTION(sname(st))
		{
			test::TempDir d;
			auto o = opts(CKR_NAIVE, st, 4, 64);
			ckr *c;
			const char msg[] = "abcdefghijklmnopq"; // 1..17 bytes
			CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o, &c));
			for (size_t n = 1; n < sizeof(msg); n++)
				CKR_REQUIRE_OK(ckr_log_append(c, msg, n,
					nullptr));
			CKR_REQUIRE_OK(ckr_close(c));
			std::vector<size_t> lens;
			o.replay = [](void *ctx, ckr *, uint64_t, const void *rec,
					   size_t len) {
				auto *v = (std::vector<size_t> *)ctx;
				if (memcmp(rec, "abcdefghijklmnopq", len) != 0)
					return 1;
				v->push_back(len);
				return 0;
			};
			o.replay_ctx = &lens;
			CKR_REQUIRE_OK(ckr_open(d.path.c_str(), &o, &c));
			CKR_REQUIRE_OK(ckr_close(c));
			REQUIRE(lens.size() == sizeof(msg) - 1);
			for (size_t n = 1; n < sizeof(msg); n++)
				REQUIRE(lens[n - 1] == n);
		}
	}
}
