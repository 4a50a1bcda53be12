/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pkru.h -- the x86 protection-key rights register, read and written
 * once for the whole tree (librio's fault handler, discount's commit,
 * tools/pmemtest's store tracer)
 *
 * RDPKRU and WRPKRU are spelled as bytes so that no -mpku is needed.
 * rio_pku_os() says whether the kernel enabled protection keys (CPUID
 * leaf 7, ECX bit 4, OSPKE); without it both instructions fault, so every
 * caller asks first.  Elsewhere than x86-64 there are no keys.
 */
#ifndef RIO_PKRU_H
#define RIO_PKRU_H

#include <stdbool.h>
#include <stdint.h>

#if defined(__x86_64__)
#include <cpuid.h>

static inline bool
rio_pku_os(void)
{
	unsigned a, b, c, d;

	return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 4));
}

static inline uint32_t
rio_rdpkru(void)
{
	uint32_t eax, edx;

	__asm__ volatile(".byte 0x0f,0x01,0xee" /* rdpkru */
			 : "=a"(eax), "=d"(edx) : "c"(0));
	return eax;
}

/* "memory": no access may move across a change of rights. */
static inline void
rio_wrpkru(uint32_t v)
{
	__asm__ volatile(".byte 0x0f,0x01,0xef" /* wrpkru */
			 : : "a"(v), "c"(0), "d"(0) : "memory");
}
#else
static inline bool rio_pku_os(void) { return false; }
static inline uint32_t rio_rdpkru(void) { return 0; }
static inline void rio_wrpkru(uint32_t v) { (void)v; }
#endif

#endif /* RIO_PKRU_H */
