/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * isa_probe.c -- librio's inline persistence primitives, compiled as C
 * with the project's flags (as libvista and every other caller compiles
 * them), behind calls that isa_test.cpp single-steps; and the switch of
 * the trap flag that makes the CPU stop after every instruction.
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
PROBE void isa_step_on(void);
PROBE void isa_step_off(void);

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

/*
 * EFLAGS.TF: from the instruction after the popfq on, the CPU raises a
 * debug trap (SIGTRAP) after each instruction.  Own functions, not inline
 * asm in a caller, so that pushfq cannot clobber a caller's red zone.
 */
void
isa_step_on(void)
{
	__asm__ volatile("pushfq\n\torq $0x100, (%%rsp)\n\tpopfq"
		::: "memory", "cc");
}

void
isa_step_off(void)
{
	__asm__ volatile("pushfq\n\tandq $~0x100, (%%rsp)\n\tpopfq"
		::: "memory", "cc");
}
