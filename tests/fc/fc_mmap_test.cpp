// SPDX-License-Identifier: BSD-3-Clause
// fc_mmap_test.cpp -- rio_fc_mmap: stores go straight into the cache
#include <sys/mman.h>

#include "fc_util.hpp"

using fct::Env;
using fct::get;
using fct::put;

TEST_CASE("stores through a mapping are the cache's data", "[fc-mmap]")
{
	Env e;
	std::string base = fct::pattern(3 * 4096, 1);
	test::write_file(e.file("m"), base);
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = fct::open_file(c, e.file("m"));
	put(f, 4096, "cached before mapping");
	void *addr = nullptr;

	REQUIRE_OK(rio_fc_mmap(f, 0, 3 * 4096, PROT_READ | PROT_WRITE, &addr));
	char *m = (char *)addr;
	REQUIRE(std::string(m, 10) == base.substr(0, 10)); // read in
	REQUIRE(std::string(m + 4096, 21) == "cached before mapping");
	memcpy(m + 8000, "STORED", 6);
	REQUIRE_OK(rio_fc_msync(f, m + 8000, 6));
	REQUIRE(get(f, 8000, 6) == "STORED");
	// A write into a mapped block is seen through the mapping.
	put(f, 100, "written");
	REQUIRE(std::string(m + 100, 7) == "written");
	REQUIRE(fct::stats(c).blocks_dirty == 3); // writable: all dirty
	// Write-back does not clean a block that may still change.
	REQUIRE_OK(rio_fc_sync_all(c));
	REQUIRE(fct::stats(c).blocks_dirty == 3);
	std::string disk = test::read_file(e.file("m"));
	REQUIRE(disk.substr(8000, 6) == "STORED");
	memcpy(m + 9000, "LATER", 5);
	// Mapped blocks are pinned: no truncate under them.
	REQUIRE_RC(rio_fc_truncate(f, 100), -EBUSY);
	REQUIRE_RC(rio_fc_munmap(f, m + 4096, 4096), -EINVAL);
	REQUIRE_OK(rio_fc_munmap(f, m, 3 * 4096));
	REQUIRE_OK(rio_fc_sync_all(c));
	REQUIRE(fct::stats(c).blocks_dirty == 0);
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
	disk = test::read_file(e.file("m"));
	REQUIRE(disk.substr(9000, 5) == "LATER");
	REQUIRE(disk.substr(100, 7) == "written");
	REQUIRE(disk.size() == base.size());
}

TEST_CASE("mapping errors, and mappings end with their handle", "[fc-mmap]")
{
	Env e;
	rio_fc_cache *c = fct::open_cache(e);
	rio_fc_file *f = fct::open_file(c, e.file("e"));
	void *addr = nullptr;

	put(f, 0, std::string(5000, 'e'));
	REQUIRE_RC(rio_fc_mmap(f, 100, 4096, PROT_READ, &addr), -EINVAL);
	REQUIRE_RC(rio_fc_mmap(f, 0, 0, PROT_READ, &addr), -EINVAL);
	REQUIRE_RC(rio_fc_mmap(f, 0, 4096, PROT_EXEC, &addr), -EINVAL);
	REQUIRE_RC(rio_fc_mmap(f, 0, 3 * 4096, PROT_READ, &addr), -ENXIO);
	REQUIRE_RC(rio_fc_mmap(f, 0, 1 << 30, PROT_READ, &addr), -ENOSPC);
	rio_fc_file *ro = fct::open_file(c, e.file("e"), O_RDONLY);
	REQUIRE_RC(rio_fc_mmap(ro, 0, 4096, PROT_READ | PROT_WRITE, &addr),
		-EACCES);
	// A read-only mapping of the whole last block is fine (past the
	// size reads zeros), and stays clean.
	REQUIRE_OK(rio_fc_mmap(ro, 0, 2 * 4096, PROT_READ, &addr));
	REQUIRE(((char *)addr)[4999] == 'e');
	REQUIRE(((char *)addr)[5000] == '\0');
	REQUIRE_OK(rio_fc_sync_all(c));
	REQUIRE(fct::stats(c).blocks_dirty == 0);
	// Closing the handle unmaps.
	rio_fc_close(ro);
	REQUIRE_OK(rio_fc_truncate(f, 10));
	rio_fc_close(f);
	REQUIRE_OK(rio_fc_cache_close(c));
	REQUIRE(test::read_file(e.file("e")) == std::string(10, 'e'));
}
