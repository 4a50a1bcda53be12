// SPDX-License-Identifier: BSD-3-Clause
// fc_io_test.cpp -- rio_fc_open/pread/pwrite/fsync/truncate/close and their
// errors
#include <sys/mman.h>

#include "fc_util.hpp"

using fct::Env;
using fct::get;
using fct::put;

TEST_CASE("write, read back, write back to disk", "[fc-io]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = fct::open_file(c, e.file("a"));
	std::string data = fct::pattern(3 * 4096 + 123, 1);

	put(f, 0, data);
	uint64_t size = 0;
	REQUIRE_OK(rio_fc_size(f, &size));
	REQUIRE(size == data.size());
	REQUIRE(get(f, 0, data.size() + 100) == data); // short at EOF
	REQUIRE(get(f, 4000, 200) == data.substr(4000, 200)); // across blocks
	REQUIRE(get(f, data.size(), 10).empty());
	// Nothing on disk yet (no thread, no sync): the cache holds it.
	REQUIRE(test::read_file(e.file("a")).empty());
	REQUIRE(fct::stats(c).blocks_dirty == 4);

	REQUIRE_OK(rio_fc_fsync(f)); // free: nothing to do
	REQUIRE(fct::stats(c).fsyncs == 1);
	REQUIRE(test::read_file(e.file("a")).empty());

	REQUIRE_OK(rio_fc_sync_all(c));
	REQUIRE(test::read_file(e.file("a")) == data);
	REQUIRE(fct::stats(c).blocks_dirty == 0);
	REQUIRE(fct::stats(c).blocks_clean == 4);
	REQUIRE_OK(rio_fc_close(f));
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("a")) == data);
}

TEST_CASE("partial blocks, overwrites and holes", "[fc-io]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = fct::open_file(c, e.file("h"));
	std::string model;
	test::Rng r(7);

	// A hole first: a write far past the end reads back zeros before it.
	put(f, 10000, "tail");
	model = std::string(10000, '\0') + "tail";
	REQUIRE(get(f, 0, 20000) == model);
	for (int i = 0; i < 200; i++) {
		size_t off = r.below(5 * 4096), n = 1 + r.below(6000);
		std::string s = fct::pattern(n, (uint64_t)i + 100);
		put(f, off, s);
		if (model.size() < off + n)
			model.resize(off + n, '\0');
		model.replace(off, n, s);
	}
	REQUIRE(get(f, 0, model.size() + 1) == model);
	REQUIRE_OK(rio_fc_sync_all(c));
	REQUIRE(test::read_file(e.file("h")) == model);
	// Superseded copies were reclaimed, not leaked.
	struct rio_fc_stats s = fct::stats(c);
	REQUIRE(s.blocks_free + s.blocks_dirty + s.blocks_clean +
			s.blocks_stale == s.blocks);
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
}

TEST_CASE("reads of an uncached file come from disk and stay", "[fc-io]")
{
	Env e;
	std::string data = fct::pattern(5 * 4096 + 7, 3);
	test::write_file(e.file("old"), data);
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = fct::open_file(c, e.file("old"), O_RDONLY);

	REQUIRE(get(f, 0, data.size()) == data);
	struct rio_fc_stats s = fct::stats(c);
	REQUIRE(s.read_misses == 6);
	REQUIRE(s.blocks_clean == 6);
	REQUIRE(get(f, 4096, 4096) == data.substr(4096, 4096));
	REQUIRE(fct::stats(c).read_hits == 1);
	// Read-only: writing and truncating are refused.
	REQUIRE_RC(rio_fc_pwrite(f, "x", 1, 0), -EBADF);
	REQUIRE_RC(rio_fc_truncate(f, 0), -EBADF);
	rio_fc_close(f);
	// Write-only: reading is refused.
	f = fct::open_file(c, e.file("old"), O_WRONLY);
	char b;
	REQUIRE_RC(rio_fc_pread(f, &b, 1, 0, nullptr), -EBADF);
	put(f, 1, "Z"); // a partial block read from the cached copy
	rio_fc_close(f);
	f = fct::open_file(c, e.file("old"), O_RDONLY);
	REQUIRE(get(f, 0, 3) == data.substr(0, 1) + "Z" + data.substr(2, 1));
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
	data[1] = 'Z';
	REQUIRE(test::read_file(e.file("old")) == data);
}

TEST_CASE("truncate shrinks, grows, zeroes the tail, atomically", "[fc-io]")
{
	Env e;
	std::string data = fct::pattern(3 * 4096, 5);
	test::write_file(e.file("t"), data);
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = fct::open_file(c, e.file("t"));

	put(f, 0, "HEAD");
	REQUIRE_OK(rio_fc_truncate(f, 100));
	REQUIRE(get(f, 0, 1000) == "HEAD" + data.substr(4, 96));
	// Growing again shows zeros, not the old bytes (cached or on disk).
	REQUIRE_OK(rio_fc_truncate(f, 3 * 4096));
	std::string want = "HEAD" + data.substr(4, 96) +
		std::string(3 * 4096 - 100, '\0');
	REQUIRE(get(f, 0, 3 * 4096) == want);
	REQUIRE_OK(rio_fc_sync_all(c));
	REQUIRE(test::read_file(e.file("t")) == want);
	// Truncate to zero, then write past the old end: the gap is zeros.
	REQUIRE_OK(rio_fc_truncate(f, 0));
	put(f, 5000, "x");
	REQUIRE(get(f, 0, 6000) == std::string(5000, '\0') + "x");
	REQUIRE_OK(rio_fc_sync_all(c));
	REQUIRE(test::read_file(e.file("t")) == std::string(5000, '\0') + "x");
	REQUIRE_RC(rio_fc_truncate(f, 1ull << 62), -EFBIG);
	REQUIRE_RC(rio_fc_pwrite(f, "x", 1, 1ull << 62), -EFBIG);
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
}

TEST_CASE("open: flags, paths and errors", "[fc-io]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = nullptr;

	REQUIRE_RC(rio_fc_open(c, e.file("missing").c_str(), O_RDONLY, &f),
		-ENOENT);
	REQUIRE(f == nullptr);
	f = fct::open_file(c, e.file("x"), O_RDWR | O_CREAT | O_EXCL);
	put(f, 0, "hello");
	rio_fc_close(f);
	REQUIRE_RC(rio_fc_open(c, e.file("x").c_str(),
			   O_RDWR | O_CREAT | O_EXCL, &f), -EEXIST);
	// O_TRUNC through the cache.
	f = fct::open_file(c, e.file("x"), O_RDWR | O_TRUNC);
	uint64_t size = 1;
	REQUIRE_OK(rio_fc_size(f, &size));
	REQUIRE(size == 0);
	rio_fc_close(f);

	// Outside the directory, the directory itself, a subdirectory.
	REQUIRE_RC(rio_fc_open(c, (e.tmp / "outside").c_str(),
			   O_RDWR | O_CREAT, &f), RIO_EOUTSIDE);
	REQUIRE(!test::exists(e.tmp / "outside"));
	REQUIRE_RC(rio_fc_open(c, e.dir.c_str(), O_RDONLY, &f), RIO_EOUTSIDE);
	REQUIRE_RC(rio_fc_open(c, (e.dir + "/../outside").c_str(),
			   O_RDWR | O_CREAT, &f), RIO_EOUTSIDE);
	REQUIRE(mkdir(e.file("sub").c_str(), 0755) == 0);
	REQUIRE_RC(rio_fc_open(c, e.file("sub").c_str(), O_RDONLY, &f),
		-EISDIR);
	REQUIRE_RC(rio_fc_open(c, e.file("x").c_str(), O_RDWR | O_DIRECTORY,
			   &f), -EINVAL);
	REQUIRE_RC(rio_fc_open(c, e.file(std::string(400, 'n')).c_str(),
			   O_RDWR | O_CREAT, &f), -ENAMETOOLONG);
	REQUIRE(rio_fc_covers(c, e.file("x").c_str()) == 1);
	REQUIRE(rio_fc_covers(c, (e.tmp / "x").c_str()) == 0);

	// A symbolic link from outside into the directory is the same file;
	// a relative path too.
	REQUIRE(symlink(e.file("x").c_str(), (e.tmp / "link").c_str()) == 0);
	f = fct::open_file(c, e.tmp / "link", O_RDWR);
	put(f, 0, "via link");
	rio_fc_close(f);
	char cwd[4096];
	REQUIRE(getcwd(cwd, sizeof(cwd)) != nullptr);
	REQUIRE(chdir(e.dir.c_str()) == 0);
	f = fct::open_file(c, "sub/../x", O_RDONLY);
	REQUIRE(chdir(cwd) == 0);
	REQUIRE(get(f, 0, 100) == "via link");
	REQUIRE(fct::stats(c).files == 1);
	uint64_t sz = 0;
	REQUIRE_OK(rio_fc_stat_size(c, e.file("x").c_str(), &sz));
	REQUIRE(sz == 8);
	REQUIRE_RC(rio_fc_stat_size(c, e.file("nothing").c_str(), &sz),
		-ENOENT);
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("x")) == "via link");
}

TEST_CASE("a full cache waits for write-back and loses nothing", "[fc-io]")
{
	Env e;
	// 512 KiB: about a hundred blocks, half of them allowed dirty.
	rio_fc_cache *c = fct::open_cache(e, 512 << 10);
	struct rio_fc_stats s0 = fct::stats(c);
	REQUIRE(s0.blocks < 128);
	std::string a = fct::pattern(4 << 20, 11), b = fct::pattern(1 << 20, 12);
	rio_fc_file *fa = fct::open_file(c, e.file("a"));
	rio_fc_file *fb = fct::open_file(c, e.file("b"));

	for (size_t off = 0; off < a.size(); off += 65536)
		REQUIRE_OK(rio_fc_pwrite(fa, a.data() + off, 65536, off));
	REQUIRE_OK(rio_fc_pwrite(fb, b.data(), b.size(), 0));
	struct rio_fc_stats s = fct::stats(c);
	REQUIRE(s.waits > 0);
	REQUIRE(s.writebacks > 0);
	REQUIRE(s.blocks_dirty <= s.blocks / 2);
	REQUIRE(get(fa, 0, a.size()) == a);
	REQUIRE(get(fb, 0, b.size()) == b);
	REQUIRE(fct::stats(c).evictions > 0);
	rio_fc_close(fa);
	rio_fc_close(fb);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("a")) == a);
	REQUIRE(test::read_file(e.file("b")) == b);
}

TEST_CASE("the background thread writes dirty blocks back", "[fc-io]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e, 4 << 20, 0, 0, 20);
	rio_fc_file *f = fct::open_file(c, e.file("bg"));
	std::string data = fct::pattern(40000, 9);

	put(f, 0, data);
	// Wait (bounded) for the thread; behaviour, not timing, is checked.
	for (int i = 0; i < 500 && fct::stats(c).blocks_dirty > 0; i++)
		usleep(10000);
	REQUIRE(fct::stats(c).blocks_dirty == 0);
	REQUIRE(test::read_file(e.file("bg")) == data);
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
}

TEST_CASE("threads writing and reading files concurrently", "[fc-io]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e, 1 << 20, 0, 0, 5);
	const int nt = 4;
	std::vector<std::string> want(nt);
	std::vector<pthread_t> th(nt);
	struct Arg {
		rio_fc_cache *c;
		std::string path;
		std::string *out;
		int id;
	};
	std::vector<Arg> args(nt);

	for (int t = 0; t < nt; t++) {
		args[t] = { c, e.file("t" + std::to_string(t)), &want[t], t };
		pthread_create(&th[t], nullptr, [](void *p) -> void * {
			Arg *a = (Arg *)p;
			rio_fc_file *f = nullptr;
			if (rio_fc_open(a->c, a->path.c_str(), O_RDWR | O_CREAT,
				    &f))
				return (void *)1;
			std::string model;
			test::Rng r((uint64_t)a->id);
			for (int i = 0; i < 300; i++) {
				size_t off = r.below(64 * 1024), n = 1 + r.below(9000);
				std::string s = fct::pattern(n, r.next());
				if (rio_fc_pwrite(f, s.data(), n, off))
					return (void *)2;
				if (model.size() < off + n)
					model.resize(off + n, '\0');
				model.replace(off, n, s);
				std::string back(n, '\0');
				size_t got = 0;
				if (rio_fc_pread(f, &back[0], n, off, &got) ||
				    back != s)
					return (void *)3;
			}
			*a->out = model;
			rio_fc_close(f);
			return nullptr;
		}, &args[t]);
	}
	for (int t = 0; t < nt; t++) {
		void *rv = nullptr;
		pthread_join(th[t], &rv);
		INFO("thread " << t);
		REQUIRE(rv == nullptr);
	}
	REQUIRE_OK(rio_fc_cache_close(c));
	for (int t = 0; t < nt; t++)
		REQUIRE(test::read_file(e.file("t" + std::to_string(t))) ==
			want[t]);
}

TEST_CASE("O_RDONLY|O_TRUNC truncates, and is written back", "[fc-io]")
{
	Env e;
	test::write_file(e.file("ro"), "some content");
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = fct::open_file(c, e.file("ro"), O_RDONLY | O_TRUNC);
	uint64_t size = 1;
	REQUIRE_OK(rio_fc_size(f, &size));
	REQUIRE(size == 0);
	REQUIRE_OK(rio_fc_sync_all(c));
	REQUIRE(test::read_file(e.file("ro")).empty());
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
}
