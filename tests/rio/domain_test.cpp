// SPDX-License-Identifier: BSD-3-Clause
// domain_test.cpp -- persistence domains: detection, forcing, primitives
#include <sys/mman.h>

#include "../common/test_util.hpp"
#include "rio_int.h"
#include "rio_testhook.h"

using test::TempDir;

static const size_t POOL = 1 << 20;

static uint32_t flush_kind(const rio_pool *p)
{
	return ((const struct rio__pool_hot *)(const void *)p)->flush_kind;
}

TEST_CASE("libpmem2 reports the page domain for a tmpfs file", "[domain]")
{
	TempDir d;
	rio_pool *p = nullptr;
	unsetenv("RIO_DOMAIN");
	REQUIRE_OK(rio_pool_create((d / "p").c_str(), POOL, 0, &p));
	REQUIRE(rio_pool_native_domain(p) == RIO_DOMAIN_PAGE);
	REQUIRE(rio_pool_domain(p) == RIO_DOMAIN_PAGE);
	REQUIRE(flush_kind(p) == RIO__FLUSH_MSYNC);
	REQUIRE_OK(rio_pool_close(p));

	enum rio_domain dom;
	REQUIRE_OK(rio_domain_of_path((d / "p").c_str(), &dom));
	REQUIRE(dom == RIO_DOMAIN_PAGE);
	REQUIRE_RC(rio_domain_of_path((d / "none").c_str(), &dom), -ENOENT);
}

TEST_CASE("each domain can be forced by flag or by RIO_DOMAIN", "[domain]")
{
	struct {
		unsigned flag;
		const char *env;
		enum rio_domain want;
	} cases[] = {
		{ RIO_FORCE_BYTE, "byte", RIO_DOMAIN_BYTE },
		{ RIO_FORCE_CACHELINE, "cacheline", RIO_DOMAIN_CACHELINE },
		{ RIO_FORCE_PAGE, "page", RIO_DOMAIN_PAGE },
	};
	for (auto &c : cases) {
		TempDir d;
		rio_pool *p = nullptr;
		INFO(c.env);
		unsetenv("RIO_DOMAIN");
		REQUIRE_OK(rio_pool_create((d / "p").c_str(), POOL, c.flag, &p));
		REQUIRE(rio_pool_domain(p) == c.want);
		REQUIRE(std::string(rio_domain_name(rio_pool_domain(p))) == c.env);
		REQUIRE_OK(rio_pool_close(p));

		setenv("RIO_DOMAIN", c.env, 1);
		REQUIRE_OK(rio_pool_open((d / "p").c_str(), 0, &p));
		REQUIRE(rio_pool_domain(p) == c.want);
		switch (c.want) {
		case RIO_DOMAIN_BYTE:
			// no flush instruction at all
			REQUIRE(flush_kind(p) == RIO__FLUSH_NONE);
			break;
		case RIO_DOMAIN_CACHELINE:
			// a real cache-line flush instruction
			REQUIRE(flush_kind(p) >= RIO__FLUSH_CLWB);
			REQUIRE(flush_kind(p) <= RIO__FLUSH_CLFLUSH);
			break;
		default:
			REQUIRE(flush_kind(p) == RIO__FLUSH_MSYNC);
		}
		// The primitives work on every domain.
		char *b = (char *)rio_pool_base(p);
		memset(b, 7, 300);
		rio_persist(p, b, 300);
		rio_flush(p, b + 4000, 10);
		rio_drain(p);
		rio_durable_point(p, "test");
		REQUIRE(rio_pool_error(p) == 0);
		REQUIRE_OK(rio_pool_close(p));
		unsetenv("RIO_DOMAIN");
	}
	REQUIRE(rio_domain_parse("bogus") == RIO_DOMAIN_NONE);
}

TEST_CASE("an unknown RIO_DOMAIN value is ignored", "[domain]")
{
	TempDir d;
	rio_pool *p = nullptr;
	setenv("RIO_DOMAIN", "fast", 1);
	REQUIRE_OK(rio_pool_create((d / "p").c_str(), POOL, 0, &p));
	REQUIRE(rio_pool_domain(p) == rio_pool_native_domain(p));
	REQUIRE_OK(rio_pool_close(p));
	unsetenv("RIO_DOMAIN");
}

// memcpy_persist takes the non-temporal path for large copies: check every
// alignment and length around the thresholds, with every flush instruction.
TEST_CASE("rio_memcpy_persist copies exactly, on every path", "[domain][memcpy]")
{
	const char *insns[] = { "clflush", "clflushopt", "clwb" };
	for (const char *insn : insns) {
		setenv("RIO_FLUSH", insn, 1);
		rio__cpu_init();
		TempDir d;
		rio_pool *p = nullptr;
		REQUIRE_OK(rio_pool_create((d / "p").c_str(), POOL,
			RIO_FORCE_CACHELINE, &p));
		char *b = (char *)rio_pool_base(p);
		std::vector<char> src(4096);
		for (size_t i = 0; i < src.size(); i++)
			src[i] = (char)(i * 7 + 3);
		for (size_t off : { 0, 1, 15, 63, 64, 65 }) {
			for (size_t len : { 0, 1, 63, 64, 255, 256, 257, 1000, 4000 }) {
				memset(b, 0x55, 8192);
				rio_memcpy_persist(p, b + off, src.data() + 5, len);
				INFO(insn << " off " << off << " len " << len);
				REQUIRE(memcmp(b + off, src.data() + 5, len) == 0);
				for (size_t i = 0; i < off; i++)
					REQUIRE(b[i] == 0x55);
				REQUIRE(b[off + len] == 0x55);
			}
		}
		REQUIRE_OK(rio_pool_close(p));
	}
	unsetenv("RIO_FLUSH");
	rio__cpu_init();
	REQUIRE(std::string(rio_flush_instruction()).size() > 0);
}

// A tracer sees every flush and drain with its caller, and pools mapped
// before it was installed.
static int n_flush, n_drain, n_point, n_mapped, n_unmapping, n_discard;
static size_t flushed_bytes, discarded_bytes;
static const struct rio_trace_ops counting = {
	[](const rio_pool *, const void *, size_t len, const void *caller) {
		n_flush++;
		flushed_bytes += len;
		REQUIRE(caller != nullptr);
	},
	[](const rio_pool *, const void *) { n_drain++; },
	[](const rio_pool *, const char *, const void *) { n_point++; },
	[](const rio_pool *, void *, size_t, const char *) { n_mapped++; },
	[](const rio_pool *, void *, size_t) { n_unmapping++; },
	[](const rio_pool *, const void *, size_t len, const void *caller) {
		n_discard++;
		discarded_bytes += len;
		REQUIRE(caller != nullptr);
	},
};

TEST_CASE("the trace hook sees the choke point", "[domain][trace]")
{
	TempDir d;
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_create((d / "p").c_str(), POOL, RIO_FORCE_BYTE, &p));
	n_flush = n_drain = n_point = n_mapped = n_unmapping = n_discard = 0;
	flushed_bytes = discarded_bytes = 0;
	REQUIRE_OK(rio_trace_set(&counting));
	REQUIRE(n_mapped == 1); // replayed for the open pool
	char *b = (char *)rio_pool_base(p);
	rio_persist(p, b, 100);
	rio_memcpy_persist(p, b + 200, b, 50);
	rio_durable_point(p, "commit");
	rio_durable_discard(p, b + 4096, 300);
	REQUIRE(n_discard == 1);
	REQUIRE(discarded_bytes == 300);
	REQUIRE(n_flush == 2);
	REQUIRE(flushed_bytes == 150);
	REQUIRE(n_drain == 2);
	REQUIRE(n_point == 1);
	REQUIRE_OK(rio_pool_close(p));
	REQUIRE(n_unmapping == 1);
	REQUIRE_OK(rio_trace_set(nullptr));
	REQUIRE_OK(rio_pool_open((d / "p").c_str(), 0, &p));
	REQUIRE(n_mapped == 1);
	rio_persist(p, b, 1);
	REQUIRE(n_flush == 2);
	REQUIRE_OK(rio_pool_close(p));
}

TEST_CASE("page domain: a failed msync puts the pool in its error state",
	"[domain][errors]")
{
	TempDir d;
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_create((d / "p").c_str(), POOL,
		RIO_FORCE_PAGE | RIO_SAFE_SYNC, &p));
	rio_sys_msync_fn saved = rio_testhook_msync([](void *, size_t, int) {
		errno = EIO;
		return -1;
	});
	rio_persist(p, rio_pool_base(p), 8);
	rio_testhook_msync(saved);
	REQUIRE(rio_pool_error(p) == RIO_EFATAL);
	// It sticks: later successes do not clear it, and safe sync refuses
	// to copy data of uncertain durability over the good image.
	rio_persist(p, rio_pool_base(p), 8);
	REQUIRE(rio_pool_error(p) == RIO_EFATAL);
	REQUIRE_RC(rio_safe_sync(p, nullptr), RIO_EFATAL);
	rio_pool_close(p);
	REQUIRE_OK(rio_pool_open((d / "p").c_str(), 0, &p));
	REQUIRE(rio_pool_error(p) == 0);
	REQUIRE_OK(rio_pool_close(p));
}

static int counted_msyncs;

TEST_CASE("the fault-injection hook swaps one entry and gives the old one "
	  "back", "[domain][errors]")
{
	TempDir d;
	rio_sys_msync_fn real = rio_testhook_msync(nullptr);
	REQUIRE(real != nullptr);
	// NULL reads the entry and changes nothing.
	REQUIRE(rio_testhook_msync(nullptr) == real);
	rio_sys_fdatasync_fn other = rio_testhook_fdatasync(nullptr);
	rio_sys_msync_fn counting = [](void *a, size_t n, int f) {
		counted_msyncs++;
		return msync(a, n, f);
	};
	counted_msyncs = 0;
	REQUIRE(rio_testhook_msync(counting) == real);
	rio_pool *p = nullptr;
	REQUIRE_OK(rio_pool_create((d / "p").c_str(), POOL, RIO_FORCE_PAGE,
		&p));
	rio_persist(p, rio_pool_base(p), 8);
	REQUIRE(counted_msyncs > 0);
	REQUIRE(rio_pool_error(p) == 0);
	// Swapping one entry leaves the others alone; the old one comes back.
	REQUIRE(rio_testhook_fdatasync(nullptr) == other);
	REQUIRE(rio_testhook_msync(real) == counting);
	int seen = counted_msyncs;
	rio_persist(p, rio_pool_base(p), 8);
	REQUIRE(counted_msyncs == seen);
	REQUIRE_OK(rio_pool_close(p));
	// An entry that does not exist is refused.
	REQUIRE(rio_testhook_swap(RIO_SYS_NCALLS, nullptr) == nullptr);
}
