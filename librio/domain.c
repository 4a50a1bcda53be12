/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * domain.c -- persistence domains: detection, forcing, and the out-of-line
 * parts of the persistence primitives
 *
 * The domain of a pool is what libpmem2 reports for its mapping
 * (pmem2_map_get_store_granularity): BYTE on eADR pmem, CACHE_LINE on ADR
 * pmem, PAGE on anything else.  It can be forced, so that every domain can
 * be measured on any machine:
 *   1. RIO_FORCE_BYTE / RIO_FORCE_CACHELINE / RIO_FORCE_PAGE open flags;
 *   2. otherwise the RIO_DOMAIN environment variable (byte|cacheline|page);
 *   3. otherwise libpmem2's answer.
 * A forced domain stronger than the native one is an emulation: the
 * instructions are really issued (clwb + sfence for cacheline), but on a
 * tmpfs file durability across power loss comes only from safe sync.
 *
 * The flush instruction is the best the CPU has (clwb > clflushopt >
 * clflush), found with CPUID once; RIO_FLUSH=clwb|clflushopt|clflush
 * overrides it (tests use this to run every path).
 */
#include <cpuid.h>
#include <emmintrin.h>
#include <errno.h>
#include <fcntl.h>
#include <libpmem2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rio_int.h"

static uint32_t cpu_flush = RIO__FLUSH_CLFLUSH;

__attribute__((constructor)) void
rio__cpu_init(void)
{
	unsigned a = 0, b = 0, c = 0, d = 0;
	const char *env = getenv("RIO_FLUSH");

	cpu_flush = RIO__FLUSH_CLFLUSH;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
		if (b & (1u << 24))
			cpu_flush = RIO__FLUSH_CLWB;
		else if (b & (1u << 23))
			cpu_flush = RIO__FLUSH_CLFLUSHOPT;
	}
	if (env == NULL)
		return;
	if (strcmp(env, "clflush") == 0)
		cpu_flush = RIO__FLUSH_CLFLUSH;
	else if (strcmp(env, "clflushopt") == 0 && (b & (1u << 23)))
		cpu_flush = RIO__FLUSH_CLFLUSHOPT;
	else if (strcmp(env, "clwb") == 0 && (b & (1u << 24)))
		cpu_flush = RIO__FLUSH_CLWB;
}

const char *
rio_flush_instruction(void)
{
	switch (cpu_flush) {
	case RIO__FLUSH_CLWB:
		return "clwb";
	case RIO__FLUSH_CLFLUSHOPT:
		return "clflushopt";
	default:
		return "clflush";
	}
}

uint32_t
rio__flush_kind_for(enum rio_domain d)
{
	switch (d) {
	case RIO_DOMAIN_BYTE:
		return RIO__FLUSH_NONE;
	case RIO_DOMAIN_CACHELINE:
		return cpu_flush;
	default:
		return RIO__FLUSH_MSYNC;
	}
}

enum rio_domain
rio__effective_domain(enum rio_domain native, unsigned flags)
{
	const char *env;
	enum rio_domain d;

	if (flags & RIO_FORCE_BYTE)
		return RIO_DOMAIN_BYTE;
	if (flags & RIO_FORCE_CACHELINE)
		return RIO_DOMAIN_CACHELINE;
	if (flags & RIO_FORCE_PAGE)
		return RIO_DOMAIN_PAGE;
	env = getenv("RIO_DOMAIN");
	if (env != NULL && (d = rio_domain_parse(env)) != RIO_DOMAIN_NONE)
		return d;
	return native;
}

const char *
rio_domain_name(enum rio_domain d)
{
	switch (d) {
	case RIO_DOMAIN_BYTE:
		return "byte";
	case RIO_DOMAIN_CACHELINE:
		return "cacheline";
	case RIO_DOMAIN_PAGE:
		return "page";
	default:
		return "none";
	}
}

enum rio_domain
rio_domain_parse(const char *s)
{
	if (s == NULL)
		return RIO_DOMAIN_NONE;
	if (strcmp(s, "byte") == 0)
		return RIO_DOMAIN_BYTE;
	if (strcmp(s, "cacheline") == 0)
		return RIO_DOMAIN_CACHELINE;
	if (strcmp(s, "page") == 0)
		return RIO_DOMAIN_PAGE;
	return RIO_DOMAIN_NONE;
}

/*
 * Page domain flush: msync(MS_SYNC) writes the covering pages to the file
 * and waits, so rio_drain() has nothing left to do.  A failure means data
 * the caller believes durable is not: the pool enters its error state
 * (rio_pool_error()) and stays there.
 */
void
rio__msync(const rio_pool *cp, const void *addr, size_t len)
{
	rio_pool *p = (rio_pool *)(uintptr_t)cp;
	uintptr_t start = (uintptr_t)addr & ~(uintptr_t)(RIO__PAGE - 1);
	uintptr_t end = (uintptr_t)addr + len;

	if (rio__sys.msync((void *)start, end - start, MS_SYNC) != 0) {
		int rc = rio__errno("msync(%p, %zu) of pool %s", addr, len,
			p->path);
		/* Pairs with the acquire load in rio_pool_error(); the
		 * sticky code is the only datum (the message is
		 * thread-local), so release is stronger than needed. */
		__atomic_store_n(&p->error, rc, __ATOMIC_RELEASE);
	}
}

/*
 * Non-temporal copy for the cacheline domain: the bytes bypass the cache,
 * so no flush is needed; the caller's rio_drain() (sfence) orders them.
 * Partial lines at either end are copied normally and flushed.
 */
void
rio__memcpy_nt(void *dst, const void *src, size_t len)
{
	char *d = dst;
	const char *s = src;
	size_t head = (RIO__CACHELINE - ((uintptr_t)d & (RIO__CACHELINE - 1))) &
		(RIO__CACHELINE - 1);

	if (head > len)
		head = len;
	if (head) {
		memcpy(d, s, head);
		rio__flush_lines(cpu_flush, d, head);
		d += head;
		s += head;
		len -= head;
	}
	while (len >= RIO__CACHELINE) {
		__m128i x0 = _mm_loadu_si128((const __m128i *)(const void *)s);
		__m128i x1 = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
		__m128i x2 = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
		__m128i x3 = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
		_mm_stream_si128((__m128i *)(void *)d, x0);
		_mm_stream_si128((__m128i *)(void *)(d + 16), x1);
		_mm_stream_si128((__m128i *)(void *)(d + 32), x2);
		_mm_stream_si128((__m128i *)(void *)(d + 48), x3);
		d += RIO__CACHELINE;
		s += RIO__CACHELINE;
		len -= RIO__CACHELINE;
	}
	if (len) {
		memcpy(d, s, len);
		rio__flush_lines(cpu_flush, d, len);
	}
}

static enum rio_domain
from_granularity(enum pmem2_granularity g)
{
	switch (g) {
	case PMEM2_GRANULARITY_BYTE:
		return RIO_DOMAIN_BYTE;
	case PMEM2_GRANULARITY_CACHE_LINE:
		return RIO_DOMAIN_CACHELINE;
	default:
		return RIO_DOMAIN_PAGE;
	}
}

/* libpmem2 returns -errno for system failures and its own codes, from
 * PMEM2_E_UNKNOWN down, for the rest. */
int
rio__pmem2_errno(int rc)
{
	if (rc < 0 && rc > PMEM2_E_UNKNOWN)
		return rc;
	switch (rc) {
	case PMEM2_E_NOSUPP:
	case PMEM2_E_SOURCE_TYPE_NOT_SUPPORTED:
		return -ENOTSUP;
	case PMEM2_E_INVALID_FILE_TYPE:
	case PMEM2_E_INVALID_FILE_HANDLE:
		return -ENODEV;
	case PMEM2_E_IO_FAIL:
		return -EIO;
	default:
		return -EINVAL;
	}
}

/* Map (a small part of) path through libpmem2 and ask. */
int
rio_domain_of_path(const char *path, enum rio_domain *out)
{
	struct pmem2_source *src = NULL;
	struct pmem2_config *cfg = NULL;
	struct pmem2_map *map = NULL;
	size_t size = 0, align = 0;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rio__errno("open %s", path);
	rc = pmem2_source_from_fd(&src, fd);
	if (rc == 0)
		rc = pmem2_source_size(src, &size);
	if (rc == 0)
		rc = pmem2_source_alignment(src, &align);
	if (rc == 0 && size == 0)
		rc = PMEM2_E_SOURCE_EMPTY;
	if (rc == 0)
		rc = pmem2_config_new(&cfg);
	if (rc == 0)
		rc = pmem2_config_set_required_store_granularity(cfg,
			PMEM2_GRANULARITY_PAGE);
	if (rc == 0)
		rc = pmem2_config_set_protection(cfg, PMEM2_PROT_READ);
	if (rc == 0)
		rc = pmem2_config_set_length(cfg, size < align ? size : align);
	if (rc == 0)
		rc = pmem2_map_new(&map, cfg, src);
	if (rc == 0) {
		*out = from_granularity(pmem2_map_get_store_granularity(map));
		pmem2_map_delete(&map);
	} else {
		rc = rio__err(rio__pmem2_errno(rc),
			"libpmem2 cannot map %s: %s", path, pmem2_errormsg());
	}
	if (cfg)
		pmem2_config_delete(&cfg);
	if (src)
		pmem2_source_delete(&src);
	close(fd);
	return rc;
}

enum rio_domain
rio__domain_of_map(struct pmem2_map *map)
{
	return from_granularity(pmem2_map_get_store_granularity(map));
}
