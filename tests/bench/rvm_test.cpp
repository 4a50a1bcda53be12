// SPDX-License-Identifier: BSD-3-Clause
// rvm_test.cpp -- the RVM baseline: transactions, truncation, recovery,
// group commit, bad input, sticky I/O failures
#include <atomic>
#include <thread>

#include "rvm_util.hpp"

using rvmtest::Opts;
using rvmtest::Region;
using test::TempDir;

static const size_t SEG = 64 * 1024;

// One transaction that sets w[i] = v for each i in idx.
static void put(std::initializer_list<size_t> idx, uint64_t v, uint64_t *w,
	rvm_mode_t end = flush)
{
	rvm_tid_t tid;
	rvm_init_tid(&tid);
	RVM_OK(rvm_begin_transaction(&tid, restore));
	for (size_t i : idx) {
		RVM_OK(rvm_set_range(&tid, &w[i], sizeof(w[i])));
		w[i] = v;
	}
	RVM_OK(rvm_end_transaction(&tid, end));
}

static uint64_t file_word(const std::string &path, size_t i)
{
	std::string s = test::read_file(path);
	REQUIRE(s.size() >= (i + 1) * 8);
	uint64_t v;
	memcpy(&v, s.data() + i * 8, 8);
	return v;
}

TEST_CASE("commit, terminate, initialize: the data survives", "[rvm]")
{
	TempDir d;
	Opts o(d / "log", 64 * 1024);
	RVM_OK(RVM_INIT(&o.o));
	Region r(d / "data", SEG);
	RVM_OK(rvm_map(&r.r, nullptr));
	REQUIRE(r.r.vmaddr != nullptr);
	REQUIRE(r.words()[7] == 0);
	put({7, 100}, 42, r.words());
	RVM_OK(rvm_terminate());
	// The commit is in the log, not yet in the data file.
	REQUIRE(file_word(d / "data", 7) == 0);

	RVM_OK(RVM_INIT(&o.o)); // recovery replays the log
	REQUIRE(rvmtest::stats().recovered_tx == 1);
	REQUIRE(file_word(d / "data", 7) == 42);
	Region r2(d / "data", SEG);
	RVM_OK(rvm_map(&r2.r, nullptr));
	REQUIRE(r2.words()[7] == 42);
	REQUIRE(r2.words()[100] == 42);
	// The map is a copy: the file is not changed by stores.
	r2.words()[8] = 9;
	REQUIRE(file_word(d / "data", 8) == 0);
	RVM_OK(rvm_unmap(&r2.r));
	RVM_OK(rvm_terminate());
}

TEST_CASE("abort restores before-images, newest first", "[rvm]")
{
	TempDir d;
	Opts o(d / "log", 64 * 1024);
	RVM_OK(RVM_INIT(&o.o));
	Region r(d / "data", SEG);
	RVM_OK(rvm_map(&r.r, nullptr));
	uint64_t *w = r.words();
	put({0, 1, 2}, 5, w);
	rvm_tid_t tid;
	rvm_init_tid(&tid);
	RVM_OK(rvm_begin_transaction(&tid, restore));
	RVM_OK(rvm_set_range(&tid, &w[0], 16));
	w[0] = 10;
	w[1] = 11;
	RVM_OK(rvm_set_range(&tid, &w[1], 16)); // overlaps w[1]
	w[1] = 12;
	w[2] = 13;
	RVM_OK(rvm_abort_transaction(&tid));
	REQUIRE(w[0] == 5);
	REQUIRE(w[1] == 5);
	REQUIRE(w[2] == 5);
	REQUIRE(tid.tid == nullptr);
	// A no_restore transaction cannot abort, and stays open.
	RVM_OK(rvm_begin_transaction(&tid, no_restore));
	RVM_OK(rvm_set_range(&tid, &w[3], 8));
	RVM_RC(rvm_abort_transaction(&tid), RVM_EMODE);
	w[3] = 3;
	RVM_OK(rvm_end_transaction(&tid, flush));
	REQUIRE(rvmtest::stats().n_abort == 1);
	RVM_OK(rvm_terminate());
	RVM_OK(RVM_INIT(&o.o));
	REQUIRE(file_word(d / "data", 1) == 5);
	REQUIRE(file_word(d / "data", 3) == 3);
	RVM_OK(rvm_terminate());
}

TEST_CASE("no_flush commits are lost by a crash before the next flush",
	"[rvm]")
{
	TempDir d;
	Opts o(d / "log", 64 * 1024);
	auto res = test::run_child([&] {
		if (RVM_INIT(&o.o))
			_exit(2);
		Region r(d / "data", SEG);
		if (rvm_map(&r.r, nullptr))
			_exit(3);
		put({1}, 11, r.words(), flush);
		put({2}, 22, r.words(), no_flush);
		_exit(0); // no rvm_terminate: the buffer dies with us
	});
	REQUIRE(res.exited);
	REQUIRE(res.code == 0);
	RVM_OK(RVM_INIT(&o.o));
	REQUIRE(file_word(d / "data", 1) == 11);
	REQUIRE(file_word(d / "data", 2) == 0);
	RVM_OK(rvm_terminate());
}

TEST_CASE("group commit: G-1 no_flush commits share one write and one sync",
	"[rvm]")
{
	TempDir d;
	Opts o(d / "log", 256 * 1024);
	RVM_OK(RVM_INIT(&o.o));
	Region r(d / "data", SEG);
	RVM_OK(rvm_map(&r.r, nullptr));
	rvm_statistics_t a = rvmtest::stats();
	for (int i = 0; i < 8; i++)
		put({(size_t)i}, (uint64_t)i + 1, r.words(),
			i == 7 ? flush : no_flush);
	rvm_statistics_t b = rvmtest::stats();
	REQUIRE(b.n_flush - a.n_flush == 1);
	REQUIRE(b.n_syncs - a.n_syncs == 1);
	REQUIRE(b.n_no_flush_commit - a.n_no_flush_commit == 7);
	REQUIRE(b.n_flush_commit - a.n_flush_commit == 1);
	REQUIRE(b.bytes_logged - a.bytes_logged ==
		8 * (sizeof(rvm_rec_hdr) + sizeof(rvm_range_hdr) + 8));
	RVM_OK(rvm_terminate());
}

TEST_CASE("truncation applies the log to the data file and resets it",
	"[rvm]")
{
	TempDir d;
	Opts o(d / "log", 64 * 1024, 50);
	RVM_OK(RVM_INIT(&o.o));
	Region r(d / "data", 256 * 1024);
	RVM_OK(rvm_map(&r.r, nullptr));
	uint64_t *w = r.words();
	size_t n = 256 * 1024 / 8;
	test::Rng rng(7);
	for (int t = 0; t < 3000; t++)
		put({rng.below(n), rng.below(n)}, (uint64_t)t, w);
	rvm_statistics_t s = rvmtest::stats();
	REQUIRE(s.n_truncation > 5);
	REQUIRE(s.bytes_applied > 0);
	RVM_OK(rvm_truncate());
	// After an explicit truncation the data file is the memory image.
	std::string f = test::read_file(d / "data");
	REQUIRE(f.size() == 256 * 1024);
	REQUIRE(memcmp(f.data(), w, f.size()) == 0);
	rvm_options_t q;
	rvm_init_options(&q);
	RVM_OK(rvm_query(&q, nullptr));
	REQUIRE(q.log_empty == rvm_true);
	RVM_OK(rvm_terminate());
}

TEST_CASE("recovery ignores a torn tail and dead generations", "[rvm]")
{
	TempDir d;
	Opts o(d / "log", 64 * 1024);
	RVM_OK(RVM_INIT(&o.o));
	Region r(d / "data", SEG);
	RVM_OK(rvm_map(&r.r, nullptr));
	put({1}, 11, r.words());
	put({2}, 22, r.words());
	RVM_OK(rvm_terminate());
	// Tear the second record: flip a byte of its data.
	size_t rec = sizeof(rvm_rec_hdr) + sizeof(rvm_range_hdr) + 8;
	std::string log = test::read_file(d / "log");
	char c = log[RVM_LOG_DATA_OFF + rec + rec - 3] ^ 0x5a;
	test::patch_file(d / "log", RVM_LOG_DATA_OFF + 2 * rec - 3, &c, 1);
	RVM_OK(RVM_INIT(&o.o));
	REQUIRE(rvmtest::stats().recovered_tx == 1);
	REQUIRE(file_word(d / "data", 1) == 11);
	REQUIRE(file_word(d / "data", 2) == 0);
	RVM_OK(rvm_terminate());
	// The first record is still in the file, but its generation is dead:
	// a change made to the data file behind RVM's back is not undone.
	uint64_t five = 5;
	test::patch_file(d / "data", 8, &five, 8);
	RVM_OK(RVM_INIT(&o.o));
	REQUIRE(rvmtest::stats().recovered_tx == 0);
	REQUIRE(file_word(d / "data", 1) == 5);
	RVM_OK(rvm_terminate());
}

TEST_CASE("bad input gets a clear error and loses nothing", "[rvm]")
{
	TempDir d;
	Opts o(d / "log", 64 * 1024);
	RVM_RC(rvm_initialize("RVM Interface Version 0.9", &o.o),
		RVM_EVERSION_SKEW);
	o.o.create_log_file = rvm_false;
	RVM_RC(RVM_INIT(&o.o), RVM_ELOG); // missing
	o.o.create_log_file = rvm_true;
	RVM_OK(RVM_INIT(&o.o));
	RVM_RC(RVM_INIT(&o.o), RVM_EINIT);
	rvm_offset_t len = RVM_MK_OFFSET(0, 64 * 1024);
	RVM_RC(rvm_create_log(&o.o, &len, 0644), RVM_ELOG); // exists

	Region r(d / "data", SEG);
	RVM_OK(rvm_map(&r.r, nullptr));
	Region again(d / "data", SEG);
	RVM_RC(rvm_map(&again.r, nullptr), RVM_EOVERLAP);
	Region odd(d / "data2", 1000);
	RVM_RC(rvm_map(&odd.r, nullptr), RVM_ERANGE);
	Region longname(std::string(200, 'x'), SEG);
	RVM_RC(rvm_map(&longname.r, nullptr), RVM_ENAME_TOO_LONG);

	rvm_tid_t tid;
	rvm_init_tid(&tid);
	RVM_RC(rvm_set_range(&tid, r.words(), 8), RVM_ETID);
	RVM_RC(rvm_begin_transaction(&tid, flush), RVM_EMODE);
	RVM_OK(rvm_begin_transaction(&tid, restore));
	RVM_RC(rvm_begin_transaction(&tid, restore), RVM_ETID);
	uint64_t outside = 0;
	RVM_RC(rvm_set_range(&tid, &outside, 8), RVM_ENOT_MAPPED);
	RVM_RC(rvm_set_range(&tid, r.r.vmaddr + SEG - 4, 8), RVM_ENOT_MAPPED);
	RVM_OK(rvm_set_range(&tid, r.words(), 8));
	r.words()[0] = 1;
	RVM_RC(rvm_unmap(&r.r), RVM_EUNCOMMIT);
	RVM_RC(rvm_terminate(), RVM_EUNCOMMIT);
	RVM_RC(rvm_end_transaction(&tid, restore), RVM_EMODE);
	// A transaction larger than the log: refused, still abortable.
	RVM_OK(rvm_set_range(&tid, r.r.vmaddr, SEG));
	Region big(d / "big", 128 * 1024);
	RVM_OK(rvm_map(&big.r, nullptr));
	RVM_OK(rvm_set_range(&tid, big.r.vmaddr, 128 * 1024));
	RVM_RC(rvm_end_transaction(&tid, flush), RVM_ETOO_BIG);
	RVM_OK(rvm_abort_transaction(&tid));
	REQUIRE(r.words()[0] == 0);
	RVM_OK(rvm_unmap(&r.r));
	RVM_OK(rvm_unmap(&big.r));
	RVM_OK(rvm_terminate());
	RVM_RC(rvm_terminate(), RVM_EINIT);

	// Corrupt status blocks: not a log.
	std::string good = test::read_file(d / "log");
	test::write_file(d / "notlog", std::string(16384, 'z'));
	Opts bad(d / "notlog", 64 * 1024);
	bad.o.create_log_file = rvm_false;
	RVM_RC(RVM_INIT(&bad.o), RVM_ELOG);
	// A newer major version: refused, file untouched.
	std::string v2 = good;
	for (int slot = 0; slot < 2; slot++) {
		rvm_log_status s;
		memcpy(&s, v2.data() + slot * RVM_STATUS_SIZE, sizeof(s));
		s.major = 2;
		s.checksum = rio_checksum(&s, offsetof(rvm_log_status, checksum), 0);
		memcpy(&v2[slot * RVM_STATUS_SIZE], &s, sizeof(s));
	}
	test::write_file(d / "log", v2);
	RVM_RC(RVM_INIT(&o.o), RVM_ELOG_VERSION_SKEW);
	REQUIRE(test::read_file(d / "log") == v2);
	test::write_file(d / "log", good);
	RVM_OK(RVM_INIT(&o.o));
	RVM_OK(rvm_terminate());
}

TEST_CASE("a data file missing at recovery fails it; the log survives",
	"[rvm]")
{
	TempDir d;
	Opts o(d / "log", 64 * 1024);
	RVM_OK(RVM_INIT(&o.o));
	Region r(d / "data", SEG);
	RVM_OK(rvm_map(&r.r, nullptr));
	put({3}, 33, r.words());
	RVM_OK(rvm_terminate());
	std::string data = test::read_file(d / "data");
	REQUIRE(rename((d / "data").c_str(), (d / "saved").c_str()) == 0);
	RVM_RC(RVM_INIT(&o.o), RVM_EIO);
	REQUIRE(!test::exists(d / "data"));
	REQUIRE(rename((d / "saved").c_str(), (d / "data").c_str()) == 0);
	RVM_OK(RVM_INIT(&o.o));
	REQUIRE(rvmtest::stats().recovered_tx == 1);
	REQUIRE(file_word(d / "data", 3) == 33);
	RVM_OK(rvm_terminate());
}

static int fail_sync(int) { return -EIO; }

TEST_CASE("a failed log sync sticks until terminate", "[rvm]")
{
	TempDir d;
	Opts o(d / "log", 64 * 1024);
	RVM_OK(RVM_INIT(&o.o));
	Region r(d / "data", SEG);
	RVM_OK(rvm_map(&r.r, nullptr));
	struct rvm_io_ops broken = rvm_io_posix;
	broken.fdatasync = fail_sync;
	rvm__io = &broken;
	rvm_tid_t tid;
	rvm_init_tid(&tid);
	RVM_OK(rvm_begin_transaction(&tid, restore));
	RVM_OK(rvm_set_range(&tid, r.words(), 8));
	RVM_RC(rvm_end_transaction(&tid, flush), RVM_ETERMINATED);
	rvm__io = &rvm_io_posix;
	RVM_RC(rvm_begin_transaction(&tid, restore), RVM_ETERMINATED);
	RVM_RC(rvm_flush(), RVM_ETERMINATED);
	RVM_RC(rvm_terminate(), RVM_ETERMINATED);
	RVM_OK(RVM_INIT(&o.o));
	RVM_OK(rvm_terminate());
}

// A table that counts its calls and passes them to POSIX.
static int io_calls;
static int count_open(const char *p, int f, mode_t m)
{
	io_calls++;
	return rvm_io_posix.open(p, f, m);
}
static ssize_t count_pwrite(int fd, const void *b, size_t n, off_t o)
{
	io_calls++;
	return rvm_io_posix.pwrite(fd, b, n, o);
}

TEST_CASE("rvm_set_io swaps the file-access table only while not "
	"initialized", "[rvm]")
{
	TempDir d;
	struct rvm_io_ops counting = rvm_io_posix;
	counting.open = count_open;
	counting.pwrite = count_pwrite;
	io_calls = 0;
	RVM_OK(rvm_set_io(&counting));
	Opts o(d / "log", 64 * 1024);
	RVM_OK(RVM_INIT(&o.o));
	RVM_RC(rvm_set_io(nullptr), RVM_EINIT); // files open through it
	Region r(d / "data", SEG);
	RVM_OK(rvm_map(&r.r, nullptr));
	int opened = io_calls;
	REQUIRE(opened >= 3); // log created, log opened, data file
	rvm_tid_t tid;
	rvm_init_tid(&tid);
	RVM_OK(rvm_begin_transaction(&tid, restore));
	RVM_OK(rvm_set_range(&tid, r.words(), 8));
	r.words()[0] = 7;
	RVM_OK(rvm_end_transaction(&tid, flush));
	REQUIRE(io_calls > opened); // the log write
	RVM_OK(rvm_terminate());
	RVM_OK(rvm_set_io(nullptr)); // POSIX again
	io_calls = 0;
	RVM_OK(RVM_INIT(&o.o));
	Region r2(d / "data", SEG);
	RVM_OK(rvm_map(&r2.r, nullptr));
	REQUIRE(r2.words()[0] == 7);
	REQUIRE(io_calls == 0);
	RVM_OK(rvm_terminate());
}

TEST_CASE("threads run their own transactions on one log", "[rvm]")
{
	TempDir d;
	Opts o(d / "log", 64 * 1024);
	RVM_OK(RVM_INIT(&o.o));
	const int T = 4, N = 500;
	std::vector<Region *> regions;
	for (int t = 0; t < T; t++) {
		regions.push_back(new Region(d / ("data" + std::to_string(t)),
			SEG));
		RVM_OK(rvm_map(&regions[t]->r, nullptr));
	}
	std::vector<std::thread> th;
	std::atomic<int> bad{0};
	for (int t = 0; t < T; t++)
		th.emplace_back([&, t] {
			uint64_t *w = regions[t]->words();
			rvm_tid_t tid;
			rvm_init_tid(&tid);
			for (int i = 0; i < N; i++) {
				if (rvm_begin_transaction(&tid, restore) ||
				    rvm_set_range(&tid, &w[i % 64], 8) ||
				    rvm_set_range(&tid, &w[100], 8))
					bad++;
				w[i % 64] = (uint64_t)i;
				w[100]++;
				if (rvm_end_transaction(&tid,
					    i % 4 == 3 ? flush : no_flush))
					bad++;
			}
		});
	for (auto &x : th)
		x.join();
	REQUIRE(bad == 0);
	REQUIRE(rvmtest::stats().n_truncation > 0);
	RVM_OK(rvm_terminate());
	RVM_OK(RVM_INIT(&o.o));
	for (int t = 0; t < T; t++) {
		std::string f = d / ("data" + std::to_string(t));
		REQUIRE(file_word(f, 100) == (uint64_t)N);
		REQUIRE(file_word(f, (N - 1) % 64) == (uint64_t)(N - 1));
		delete regions[t];
	}
	RVM_OK(rvm_terminate());
}
