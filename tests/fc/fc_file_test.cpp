// SPDX-License-Identifier: BSD-3-Clause
// fc_file_test.cpp -- unlink, rename, forget, files changed behind the
// cache, more files than file records
#include "fc_util.hpp"

using fct::Env;
using fct::get;
using fct::put;

TEST_CASE("unlink drops the cached blocks and the name", "[fc-file]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = fct::open_file(c, e.file("j"));
	put(f, 0, fct::pattern(10000, 1));
	rio_fc_close(f);
	REQUIRE(fct::stats(c).blocks_dirty == 3);
	REQUIRE_OK(rio_fc_unlink(c, e.file("j").c_str()));
	REQUIRE(!test::exists(e.file("j")));
	REQUIRE(fct::stats(c).blocks_dirty == 0);
	REQUIRE(fct::stats(c).blocks_free == fct::stats(c).blocks);
	// The same name again is a new, empty file.
	f = fct::open_file(c, e.file("j"));
	REQUIRE(get(f, 0, 10).empty());
	rio_fc_close(f);
	// Not cached: a plain unlink; missing; outside.
	test::write_file(e.file("plain"), "p");
	REQUIRE_OK(rio_fc_unlink(c, e.file("plain").c_str()));
	REQUIRE(!test::exists(e.file("plain")));
	REQUIRE_RC(rio_fc_unlink(c, e.file("plain").c_str()), -ENOENT);
	test::write_file(e.tmp / "out", "o");
	REQUIRE_RC(rio_fc_unlink(c, (e.tmp / "out").c_str()), RIO_EOUTSIDE);
	REQUIRE(test::exists(e.tmp / "out"));
	REQUIRE_OK(rio_fc_sync_all(c)); // settles the records
	REQUIRE(fct::stats(c).files == 1);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("j")).empty());
}

TEST_CASE("an unlinked file stays usable while open", "[fc-file]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = fct::open_file(c, e.file("tmp"));
	put(f, 0, "scratch");
	REQUIRE_OK(rio_fc_unlink(c, e.file("tmp").c_str()));
	REQUIRE(!test::exists(e.file("tmp")));
	put(f, 7, " data");
	REQUIRE(get(f, 0, 100) == "scratch data");
	// A new file of that name is another file.
	rio_fc_file *g = fct::open_file(c, e.file("tmp"));
	put(g, 0, "other");
	REQUIRE(get(f, 0, 100) == "scratch data");
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_sync_all(c));
	REQUIRE(fct::stats(c).files == 1);
	rio_fc_close(g);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("tmp")) == "other");
}

TEST_CASE("rename writes both files back and renames on disk", "[fc-file]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = fct::open_file(c, e.file("from"));
	rio_fc_file *g = fct::open_file(c, e.file("to"));
	put(f, 0, "moving");
	put(g, 0, "replaced");
	REQUIRE_RC(rio_fc_rename(c, e.file("from").c_str(), e.file("to").c_str()),
		-EBUSY); // open
	rio_fc_close(f);
	rio_fc_close(g);
	REQUIRE_OK(rio_fc_rename(c, e.file("from").c_str(),
		e.file("to").c_str()));
	REQUIRE(!test::exists(e.file("from")));
	REQUIRE(test::read_file(e.file("to")) == "moving");
	f = fct::open_file(c, e.file("to"), O_RDONLY);
	REQUIRE(get(f, 0, 100) == "moving");
	rio_fc_close(f);
	// In and out of the directory.
	test::write_file(e.tmp / "outside", "came in");
	REQUIRE_OK(rio_fc_rename(c, (e.tmp / "outside").c_str(),
		e.file("in").c_str()));
	f = fct::open_file(c, e.file("in"));
	put(f, 0, "CAME");
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_rename(c, e.file("in").c_str(),
		(e.tmp / "back").c_str()));
	REQUIRE(test::read_file(e.tmp / "back") == "CAME in");
	REQUIRE_RC(rio_fc_rename(c, (e.tmp / "back").c_str(),
			   (e.tmp / "x").c_str()), RIO_EOUTSIDE);
	REQUIRE_RC(rio_fc_rename(c, e.file("nope").c_str(),
			   e.file("y").c_str()), -ENOENT);
	REQUIRE_OK(rio_fc_cache_close(c));
}

TEST_CASE("a file changed behind the cache: dropped if clean, refused if "
	  "dirty", "[fc-file]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = fct::open_file(c, e.file("clean"));
	put(f, 0, "cached copy");
	REQUIRE_OK(rio_fc_sync_all(c));
	rio_fc_close(f);
	test::write_file(e.file("clean"), "changed on disk");
	f = fct::open_file(c, e.file("clean"), O_RDONLY);
	REQUIRE(get(f, 0, 100) == "changed on disk");
	rio_fc_close(f);

	f = fct::open_file(c, e.file("dirty"));
	put(f, 0, "unwritten");
	rio_fc_close(f);
	test::write_file(e.file("dirty"), "theirs");
	REQUIRE_RC(rio_fc_open(c, e.file("dirty").c_str(), O_RDONLY, &f),
		RIO_ECHANGED);
	REQUIRE_RC(rio_fc_open(c, e.file("dirty").c_str(), O_RDONLY, &f),
		RIO_ECHANGED); // sticks
	REQUIRE(fct::stats(c).conflicts == 1);
	REQUIRE(test::read_file(e.file("dirty")) == "theirs");
	REQUIRE_RC(rio_fc_forget(c, e.file("nothing").c_str()), -ENOENT);
	REQUIRE_OK(rio_fc_forget(c, e.file("dirty").c_str()));
	f = fct::open_file(c, e.file("dirty"), O_RDONLY);
	REQUIRE(get(f, 0, 100) == "theirs");
	REQUIRE_RC(rio_fc_forget(c, e.file("dirty").c_str()), -EBUSY);
	rio_fc_close(f);
	// Removed behind the cache while clean: just gone.
	f = fct::open_file(c, e.file("gone"));
	put(f, 0, "x");
	REQUIRE_OK(rio_fc_sync_all(c));
	rio_fc_close(f);
	REQUIRE(unlink(e.file("gone").c_str()) == 0);
	REQUIRE_RC(rio_fc_open(c, e.file("gone").c_str(), O_RDONLY, &f),
		-ENOENT);
	f = fct::open_file(c, e.file("gone"));
	REQUIRE(get(f, 0, 10).empty());
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
}

TEST_CASE("more files than file records", "[fc-file]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e, 1 << 20); // 64 records
	REQUIRE(fct::stats(c).file_slots == 64);
	for (int i = 0; i < 200; i++) {
		rio_fc_file *f = fct::open_file(c, e.file("f" + std::to_string(i)));
		put(f, 0, "file " + std::to_string(i));
		rio_fc_close(f);
	}
	REQUIRE(fct::stats(c).files <= 64);
	for (int i = 0; i < 200; i++) {
		rio_fc_file *f = fct::open_file(c,
			e.file("f" + std::to_string(i)), O_RDONLY);
		REQUIRE(get(f, 0, 100) == "file " + std::to_string(i));
		rio_fc_close(f);
	}
	// All open at once: the 65th cannot have a record.
	std::vector<rio_fc_file *> v;
	rio_fc_file *f = nullptr;
	int rc = 0;
	for (int i = 0; i < 65 && rc == 0; i++) {
		rc = rio_fc_open(c, e.file("f" + std::to_string(i)).c_str(),
			O_RDONLY, &f);
		if (rc == 0)
			v.push_back(f);
	}
	REQUIRE_RC(rc, -ENFILE);
	REQUIRE(v.size() == 64);
	for (auto *h : v)
		rio_fc_close(h);
	REQUIRE_OK(rio_fc_cache_close(c));
	for (int i = 0; i < 200; i++)
		REQUIRE(test::read_file(e.file("f" + std::to_string(i))) ==
			"file " + std::to_string(i));
}

TEST_CASE("dirty blocks of a file in conflict cannot stall writers forever",
	"[fc-file]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e, 512 << 10);
	struct rio_fc_stats s = fct::stats(c);
	uint64_t budget = s.blocks / 2; // dirty_max_pct 50
	rio_fc_file *f = fct::open_file(c, e.file("x"));
	put(f, 0, std::string((budget - 2) * 4096, 'x'));
	rio_fc_close(f);
	test::write_file(e.file("x"), "theirs");
	REQUIRE_RC(rio_fc_open(c, e.file("x").c_str(), O_RDONLY, &f),
		RIO_ECHANGED);
	f = fct::open_file(c, e.file("y"));
	std::string y(64 << 10, 'y');
	REQUIRE_RC(rio_fc_pwrite(f, y.data(), y.size(), 0), -ENOSPC);
	REQUIRE(test::read_file(e.file("x")) == "theirs");
	REQUIRE_OK(rio_fc_forget(c, e.file("x").c_str()));
	REQUIRE_OK(rio_fc_pwrite(f, y.data(), y.size(), 0));
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("y")) == y);
}
