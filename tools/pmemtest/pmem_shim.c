/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pmem_shim.c -- trace programs written against plain libpmem
 *
 * libpmemtest-trace.so exports libpmem's mapping and persistence functions;
 * being preloaded, its definitions win over libpmem's.  Each one calls the
 * real function (dlsym RTLD_NEXT) and tells the tracer what it did, in the
 * order that matters to the model: a copy's flush is logged after the copy
 * (its content is what was written back), a drain after the real drain.
 * Flags follow libpmem: PMEM_F_MEM_NOFLUSH means no flush and no drain,
 * PMEM_F_MEM_NODRAIN no drain.  pmem_msync is a flush plus a fence (msync
 * is synchronous).  Deep variants are traced like the plain ones.
 *
 * Invariants
 *   S1. When tracing is off these are the real functions plus one load.
 *   S2. libpmem may call its own exported functions (pmem_persist calling
 *       pmem_flush through the PLT would reach us again): a per-thread depth
 *       counter makes only the outermost call trace.
 */
#include <dlfcn.h>
#include <libpmem.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "tracer_int.h"

#define PMT_EXPORT __attribute__((visibility("default")))

static __thread int depth; /* S2 */

/* Trace only from the outermost shim call. */
#define ENTER() bool outer_ = depth++ == 0
#define LEAVE() depth--
#define TRACE(call)      \
	do {             \
		if (outer_) \
			call; \
	} while (0)

#define REAL(name)                                                        \
	static __typeof__(name) *real_##name;                             \
	if (real_##name == NULL) {                                        \
		real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name); \
		if (real_##name == NULL) {                                \
			fprintf(stderr, "pmemtest-trace: %s not found\n", \
				#name);                                   \
			abort();                                          \
		}                                                         \
	}

PMT_EXPORT void *
pmem_map_file(const char *path, size_t len, int flags, mode_t mode,
	size_t *mapped_lenp, int *is_pmemp)
{
	size_t mlen = 0;
	void *p;

	REAL(pmem_map_file);
	ENTER();
	p = real_pmem_map_file(path, len, flags, mode, &mlen, is_pmemp);
	if (mapped_lenp != NULL)
		*mapped_lenp = mlen;
	if (p != NULL)
		TRACE(pmt_tracer_mapped(NULL, p, mlen, path));
	LEAVE();
	return p;
}

PMT_EXPORT int
pmem_unmap(void *addr, size_t len)
{
	int rc;

	REAL(pmem_unmap);
	ENTER();
	TRACE(pmt_tracer_unmapping(addr, len));
	rc = real_pmem_unmap(addr, len);
	LEAVE();
	return rc;
}

/* A flush (if fl) around the real call, a fence after it (if fe). */
#define PMT_WRAP_VOID(name, fl, fe)                                       \
	PMT_EXPORT void name(const void *addr, size_t len)                \
	{                                                                 \
		REAL(name);                                               \
		ENTER();                                                  \
		if (fl)                                                   \
			TRACE(pmt_tracer_flush(addr, len));               \
		real_##name(addr, len);                                   \
		if (fe)                                                   \
			TRACE(pmt_tracer_fence());                        \
		LEAVE();                                                  \
	}
#define PMT_WRAP_INT(name, fl, fe)                                        \
	PMT_EXPORT int name(const void *addr, size_t len)                 \
	{                                                                 \
		int rc;                                                   \
		REAL(name);                                               \
		ENTER();                                                  \
		if (fl)                                                   \
			TRACE(pmt_tracer_flush(addr, len));               \
		rc = real_##name(addr, len);                              \
		if (fe)                                                   \
			TRACE(pmt_tracer_fence());                        \
		LEAVE();                                                  \
		return rc;                                                \
	}

PMT_WRAP_VOID(pmem_flush, 1, 0)
PMT_WRAP_VOID(pmem_persist, 1, 1)
PMT_WRAP_VOID(pmem_deep_flush, 1, 0)
PMT_WRAP_INT(pmem_msync, 1, 1)
PMT_WRAP_INT(pmem_deep_drain, 0, 1)
PMT_WRAP_INT(pmem_deep_persist, 1, 1)

PMT_EXPORT void
pmem_drain(void)
{
	REAL(pmem_drain);
	ENTER();
	real_pmem_drain();
	TRACE(pmt_tracer_fence());
	LEAVE();
}

/* After a write of [dst, dst+len) that libpmem flushed per `flags`. */
static void
written(void *dst, size_t len, unsigned flags)
{
	if (flags & PMEM_F_MEM_NOFLUSH)
		return;
	pmt_tracer_flush(dst, len);
	if (!(flags & PMEM_F_MEM_NODRAIN))
		pmt_tracer_fence();
}

#define PMT_WRAP_COPY(name, flags)                                        \
	PMT_EXPORT void *name(void *dst, const void *src, size_t len)     \
	{                                                                 \
		void *r;                                                  \
		REAL(name);                                               \
		ENTER();                                                  \
		r = real_##name(dst, src, len);                           \
		TRACE(written(dst, len, (flags)));                        \
		LEAVE();                                                  \
		return r;                                                 \
	}
#define PMT_WRAP_SET(name, flags)                                         \
	PMT_EXPORT void *name(void *dst, int c, size_t len)               \
	{                                                                 \
		void *r;                                                  \
		REAL(name);                                               \
		ENTER();                                                  \
		r = real_##name(dst, c, len);                             \
		TRACE(written(dst, len, (flags)));                        \
		LEAVE();                                                  \
		return r;                                                 \
	}

PMT_WRAP_COPY(pmem_memcpy_persist, 0)
PMT_WRAP_COPY(pmem_memmove_persist, 0)
PMT_WRAP_COPY(pmem_memcpy_nodrain, PMEM_F_MEM_NODRAIN)
PMT_WRAP_COPY(pmem_memmove_nodrain, PMEM_F_MEM_NODRAIN)
PMT_WRAP_SET(pmem_memset_persist, 0)
PMT_WRAP_SET(pmem_memset_nodrain, PMEM_F_MEM_NODRAIN)

#define PMT_WRAP_FLAGS(name, srctype)                                     \
	PMT_EXPORT void *name(void *dst, srctype src, size_t len,         \
		unsigned flags)                                           \
	{                                                                 \
		void *r;                                                  \
		REAL(name);                                               \
		ENTER();                                                  \
		r = real_##name(dst, src, len, flags);                    \
		TRACE(written(dst, len, flags));                          \
		LEAVE();                                                  \
		return r;                                                 \
	}

PMT_WRAP_FLAGS(pmem_memcpy, const void *)
PMT_WRAP_FLAGS(pmem_memmove, const void *)
PMT_WRAP_FLAGS(pmem_memset, int)
