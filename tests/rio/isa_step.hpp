// SPDX-License-Identifier: BSD-3-Clause
// isa_step.hpp -- what the CPU executes: single-step a call (EFLAGS.TF, a
// SIGTRAP after every instruction) and record each cache-line write-back
// (clwb, clflushopt, clflush), non-temporal store and fence, with the
// address it computes from the trapped registers.  For tests of the
// persistence primitives (tests/rio/isa_test.cpp) and of the code built on
// them (tests/vista/isa_test.cpp): a tracer is told of a flush or a drain
// before the instructions run, so only this sees what really ran.
#pragma once

#include <signal.h>
#include <ucontext.h>

#include <cstdint>
#include <cstring>
#include <string>

#include <catch2/catch.hpp>

namespace isa {

// EFLAGS.TF on and off: from the instruction after the popfq on, the CPU
// raises a debug trap after each instruction.  Functions of their own, so
// that pushfq cannot clobber a caller's red zone.
__attribute__((noinline)) inline void step_on()
{
	__asm__ volatile("pushfq\n\torq $0x100, (%%rsp)\n\tpopfq"
		::: "memory", "cc");
}

__attribute__((noinline)) inline void step_off()
{
	__asm__ volatile("pushfq\n\tandq $~0x100, (%%rsp)\n\tpopfq"
		::: "memory", "cc");
}

enum Kind { CLWB, CLFLUSHOPT, CLFLUSH, NT, SFENCE, MFENCE };
inline const char *const kind_name[] = { "clwb", "clflushopt", "clflush",
	"non-temporal store", "sfence", "mfence" };

struct Ev {
	Kind kind;
	uintptr_t addr;
	unsigned len;
};

// Filled by the SIGTRAP handler: preallocated, no allocation there.
inline Ev evs[1 << 16];
inline size_t nev;
inline bool overflow;

inline uint64_t reg(const mcontext_t &m, unsigned n)
{
	static const int map[16] = { REG_RAX, REG_RCX, REG_RDX, REG_RBX,
		REG_RSP, REG_RBP, REG_RSI, REG_RDI, REG_R8, REG_R9, REG_R10,
		REG_R11, REG_R12, REG_R13, REG_R14, REG_R15 };
	return (uint64_t)m.gregs[map[n & 15]];
}

// The effective address of the memory operand whose ModRM byte is at q.
inline uintptr_t ea(const mcontext_t &m, const uint8_t *q, uint8_t rex)
{
	unsigned mod = q[0] >> 6, rm = q[0] & 7;
	uintptr_t a = 0;
	q++;
	if (rm == 4) {
		uint8_t sib = *q++;
		unsigned idx = ((sib >> 3) & 7) | ((rex & 2u) << 2);
		unsigned base = (sib & 7) | ((rex & 1u) << 3);
		if (idx != 4)
			a += reg(m, idx) << (sib >> 6);
		if ((sib & 7) == 5 && mod == 0) {
			int32_t d;
			memcpy(&d, q, 4);
			q += 4;
			a += (uintptr_t)(intptr_t)d;
		} else {
			a += reg(m, base);
		}
	} else if (rm == 5 && mod == 0) {
		int32_t d;
		memcpy(&d, q, 4);
		return (uintptr_t)(q + 4) + (uintptr_t)(intptr_t)d; // rip-rel.
	} else {
		a = reg(m, rm | ((rex & 1u) << 3));
	}
	if (mod == 1)
		a += (uintptr_t)(intptr_t)(int8_t)q[0];
	else if (mod == 2) {
		int32_t d;
		memcpy(&d, q, 4);
		a += (uintptr_t)(intptr_t)d;
	}
	return a;
}

inline void record(Kind k, uintptr_t a, unsigned len)
{
	if (nev == sizeof(evs) / sizeof(evs[0])) {
		overflow = true;
		return;
	}
	evs[nev++] = { k, a, len };
}

// The instruction the CPU has just stopped before (legacy encodings: the
// primitives use no VEX form of these).
inline void on_trap(int, siginfo_t *, void *ucv)
{
	const mcontext_t &m = ((ucontext_t *)ucv)->uc_mcontext;
	const uint8_t *p = (const uint8_t *)m.gregs[REG_RIP];
	bool opsize = false;
	uint8_t rex = 0;

	for (;; p++) {
		if (*p == 0x66)
			opsize = true;
		else if (*p != 0xf2 && *p != 0xf3 && *p != 0x2e &&
			 *p != 0x36 && *p != 0x3e && *p != 0x26 &&
			 *p != 0x64 && *p != 0x65 && *p != 0x67)
			break;
	}
	if ((*p & 0xf0) == 0x40)
		rex = *p++;
	if (p[0] != 0x0f)
		return;
	const uint8_t *modrm = p + 2;
	unsigned mod = *modrm >> 6, r = (*modrm >> 3) & 7;
	switch (p[1]) {
	case 0xae:
		if (mod == 3) {
			if (*modrm == 0xf8)
				record(SFENCE, 0, 0);
			else if (*modrm == 0xf0)
				record(MFENCE, 0, 0);
		} else if (r == 6 && opsize) {
			record(CLWB, ea(m, modrm, rex), 64);
		} else if (r == 7) {
			record(opsize ? CLFLUSHOPT : CLFLUSH, ea(m, modrm, rex),
				64);
		}
		break;
	case 0xe7: // movntdq (66), movntq
	case 0x2b: // movntps, movntpd (66)
		if (mod != 3)
			record(NT, ea(m, modrm, rex), p[1] == 0xe7 && !opsize ? 8 : 16);
		break;
	case 0xc3: // movnti
		if (mod != 3)
			record(NT, ea(m, modrm, rex), (rex & 8) ? 8 : 4);
		break;
	default:
		break;
	}
}

struct Stepper {
	struct sigaction old;
	Stepper()
	{
		struct sigaction sa = {};
		sa.sa_sigaction = on_trap;
		sa.sa_flags = SA_SIGINFO;
		sigemptyset(&sa.sa_mask);
		REQUIRE(sigaction(SIGTRAP, &sa, &old) == 0);
	}
	~Stepper() { sigaction(SIGTRAP, &old, nullptr); }
	template <class F> void run(F f)
	{
		nev = 0;
		overflow = false;
		step_on();
		f();
		step_off();
		REQUIRE(!overflow);
	}
};

inline bool is_flush(Kind k)
{
	return k == CLWB || k == CLFLUSHOPT || k == CLFLUSH;
}
inline bool is_fence(Kind k) { return k == SFENCE || k == MFENCE; }

// A correct build shows no bad call; a broken build must show one.
inline void verdict(bool broken, size_t bad, size_t checked,
	const std::string &first)
{
	INFO(first);
	if (broken) {
		WARN("broken build caught in " << bad << " of " << checked
					       << " calls; first: " << first);
		REQUIRE(bad > 0);
	} else {
		REQUIRE(bad == 0);
	}
}

} // namespace isa
