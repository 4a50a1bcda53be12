/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * isa_probe.c -- librio's inline persistence primitives, compiled as C
 * with the project's flags (as libvista and every other caller compiles
 * them), behind calls that isa_test.cpp single-steps (isa_step.hpp).
 */
#include "rio.h"

#define PROBE __attribute__((noinline, visibility("default")))

PROBE void isa_flush(const rio_pool *p, const void *a, size_t n);
PROBE void isa_drain(const rio_pool *p);
PROBE void isa_persist(const rio_pool *p, const void *a, size_t n);
PROBE void isa_memcpy_nodrain(const rio_pool *p, void *d, const void *s,
	size_t n);
PROBE void isa_memcpy_persist(const rio_pool *p, void *d, const void *s,
	size_t n);

void
isa_flush(const rio_pool *p, const void *a, size_t n)
{
	rio_flush(p, a, n);
}

void
isa_drain(const rio_pool *p)
{
	rio_drain(p);
}

void
isa_persist(const rio_pool *p, const void *a, size_t n)
{
	rio_persist(p, a, n);
}

void
isa_memcpy_nodrain(const rio_pool *p, void *d, const void *s, size_t n)
{
	rio_memcpy_nodrain(p, d, s, n);
}

void
isa_memcpy_persist(const rio_pool *p, void *d, const void *s, size_t n)
{
	rio_memcpy_persist(p, d, s, n);
}
