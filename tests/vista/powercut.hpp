// SPDX-License-Identifier: BSD-3-Clause
// powercut.hpp -- power failures emulated through librio's persistence
// choke point, for crash tests of code that uses rio_flush/rio_drain
//
// A SIGKILL keeps every store a process made (the page cache outlives it),
// so it cannot show a missing flush or a fence in the wrong place.  This
// tracer keeps, for every pool, a shadow file holding only what the
// persistence domain is guaranteed to hold in the cacheline domain: lines
// flushed (rio_flush) and then fenced (rio_drain).  At a chosen drain it
// "cuts the power": each line flushed since the last drain reaches the
// shadow completely, partly (a random subset of its 8-byte words: only
// aligned 8-byte stores are failure-atomic) or not at all, and each other
// line whose memory differs from the shadow may have been evicted
// (written back) meanwhile; then the process dies of SIGKILL.  The shadow
// files are the memory after the power failure: copy them over the pools
// and run recovery on them.
//
// Everything here runs in signal context too (libvista's fault hook
// persists pages), so the hooks use only preallocated memory.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "rio.h"

namespace pc {

struct Shadow {
	const rio_pool *pool = nullptr;
	const char *live = nullptr; // the mapping (header included)
	size_t size = 0;
	char *dur = nullptr; // the shadow file, mapped
	size_t dur_size = 0;
	char path[512];
};

struct State {
	Shadow sh[16];
	int nsh = 0;
	struct Line {
		uint32_t shadow;
		uint64_t off;
	};
	Line pend[1 << 16];
	size_t npend = 0;
	uint64_t drains = 0, cut_at = 0;
	uint64_t rng = 1;
	bool tear_all = false; // every pending line torn at the cut
	// Lines persist whole or not at all (never a subset of their words):
	// the model of designs that rely on in-order persistence within a
	// line (Trinity, Quadra: tests/bench/pword_crash_test.cpp).
	bool whole_lines = false;
	uint64_t next()
	{
		uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
		z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
		return z ^ (z >> 31);
	}
};

inline State &st()
{
	static State *s = new State;
	return *s;
}

inline int find(const void *addr)
{
	State &s = st();
	uintptr_t a = (uintptr_t)addr;
	for (int i = 0; i < s.nsh; i++)
		if (a >= (uintptr_t)s.sh[i].live &&
		    a < (uintptr_t)s.sh[i].live + s.sh[i].size)
			return i;
	return -1;
}

inline void persist_line(const Shadow &h, uint64_t off, int how)
{
	// how: 0 nothing, 1 all, 2 a random subset of 8-byte words
	if (how == 2 && st().whole_lines)
		how = 1;
	if (how == 1) {
		memcpy(h.dur + off, h.live + off, 64);
	} else if (how == 2) {
		uint64_t m = st().next();
		for (int w = 0; w < 8; w++)
			if (m & (1u << w))
				memcpy(h.dur + off + 8 * w, h.live + off + 8 * w, 8);
	}
}

inline void apply_pending()
{
	State &s = st();
	for (size_t i = 0; i < s.npend; i++)
		persist_line(s.sh[s.pend[i].shadow], s.pend[i].off, 1);
	s.npend = 0;
}

// The power fails now.
[[noreturn]] inline void cut()
{
	State &s = st();
	for (size_t i = 0; i < s.npend; i++) {
		uint64_t r = s.next() % 4; // 1/4 lost, 1/2 whole, 1/4 torn
		persist_line(s.sh[s.pend[i].shadow], s.pend[i].off,
			s.tear_all || r == 3 ? 2 : r == 0 ? 0 : 1);
	}
	for (int k = 0; k < s.nsh; k++) {
		Shadow &h = s.sh[k];
		for (uint64_t off = 0; off + 64 <= h.size; off += 64)
			if (memcmp(h.dur + off, h.live + off, 64) != 0 &&
			    s.next() % 8 == 0) // evicted before the failure
				persist_line(h, off, s.next() % 2 ? 1 : 2);
	}
	kill(getpid(), SIGKILL);
	for (;;)
		pause();
}

inline void on_flush(const rio_pool *, const void *addr, size_t len,
	const void *)
{
	State &s = st();
	int k = find(addr);
	if (k < 0 || len == 0)
		return;
	uintptr_t base = (uintptr_t)s.sh[k].live;
	uintptr_t a = (uintptr_t)addr & ~(uintptr_t)63;
	for (; a < (uintptr_t)addr + len; a += 64) {
		if (s.npend == sizeof(s.pend) / sizeof(s.pend[0]))
			apply_pending(); // a flushed line may persist any time
		s.pend[s.npend++] = { (uint32_t)k, a - base };
	}
}

inline void on_drain(const rio_pool *, const void *)
{
	State &s = st();
	if (++s.drains == s.cut_at)
		cut();
	apply_pending();
}

inline void on_point(const rio_pool *, const char *, const void *) {}

inline void on_mapped(const rio_pool *p, void *base, size_t size,
	const char *path)
{
	State &s = st();
	Shadow *h = nullptr;
	std::string sp = std::string(path) + ".shadow";
	for (int i = 0; i < s.nsh; i++)
		if (sp == s.sh[i].path)
			h = &s.sh[i];
	if (h == nullptr) {
		if (s.nsh == 16)
			abort();
		h = &s.sh[s.nsh++];
		snprintf(h->path, sizeof(h->path), "%s", sp.c_str());
	} else if (h->dur != nullptr) {
		munmap(h->dur, h->dur_size);
	}
	// A pool being mapped is durable as its file holds it -- unless a
	// shadow exists already: then the shadow is what is durable.
	int fd = open(h->path, O_RDWR | O_CREAT | O_EXCL, 0644);
	bool fresh = fd >= 0;
	if (!fresh)
		fd = open(h->path, O_RDWR);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0)
		abort();
	h->dur = (char *)mmap(nullptr, size, PROT_READ | PROT_WRITE,
		MAP_SHARED, fd, 0);
	close(fd);
	if (h->dur == MAP_FAILED)
		abort();
	if (fresh)
		memcpy(h->dur, base, size);
	h->dur_size = size;
	h->pool = p;
	h->live = (const char *)base;
	h->size = size;
}

inline void on_unmapping(const rio_pool *p, void *, size_t)
{
	State &s = st();
	apply_pending();
	for (int i = 0; i < s.nsh; i++)
		if (s.sh[i].pool == p) {
			s.sh[i].pool = nullptr;
			s.sh[i].live = nullptr;
			s.sh[i].size = 0;
		}
}

// Install in a child: the power fails at drain number cut_at (0: never).
// tear_all: every line pending then keeps a random subset of its 8-byte
// words (the cases that tell one word of a line from another, every time).
inline void install(uint64_t cut_at, uint64_t seed, bool tear_all = false)
{
	// A discarded range changes nothing here: its lines may be evicted
	// or not, like any other dirty line.
	static const struct rio_trace_ops ops = { on_flush, on_drain,
		on_point, on_mapped, on_unmapping, nullptr };
	State &s = st();
	s.cut_at = cut_at;
	s.rng = seed;
	s.tear_all = tear_all;
	rio_trace_set(&ops);
}

// In the parent, after the child died: the shadows become the pools.
inline void adopt(const std::vector<std::string> &pools)
{
	for (auto &p : pools) {
		std::string sp = p + ".shadow";
		if (access(sp.c_str(), F_OK) == 0 &&
		    rename(sp.c_str(), p.c_str()) != 0)
			abort();
	}
}

} // namespace pc
