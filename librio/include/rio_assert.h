/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rio_assert.h -- the invariant checks of librio, libvista, libvistagrams
 * and discount (internal: beside rio.h for the layers above, not installed)
 *
 * Each library states its invariants as numbered prose in its file heads
 * (tx.c T1-T5, heap.c A1-A6, fc_block.c's persist order, ...).  An
 * assertion names the one it checks:
 *
 *	RIO_ASSERT(st == RIO__FC_DIRTY, "B2");
 *
 * and, when the condition is false, writes one line to stderr and aborts:
 *
 *	librio: invariant B2 violated: st == RIO__FC_DIRTY (fc_block.c:212)
 *
 * On in debug and test builds, compiled to nothing under NDEBUG (meson's
 * b_ndebug=if-release: the default debugoptimized build checks).  The
 * condition of a disabled assertion is not evaluated, only type-checked,
 * so it must have no side effects.  Cheap checks only (a compare, no
 * loops): the macros sit on the hot paths.
 *
 * The failure path allocates nothing and calls only write(2) and abort(),
 * both async-signal-safe, so assertions may sit in signal handlers
 * (librio's fault handler, libvista's write-fault hook).  discount, whose
 * code runs while libc's memory is being replaced, formats with
 * rio__assert_format() and writes and exits with raw system calls of its
 * own (DC_ASSERT, dc_int.h).  (Models: LMDB's mdb_cassert, PMDK's ASSERT.)
 */
#ifndef RIO_ASSERT_H
#define RIO_ASSERT_H

#include <stddef.h>
#include <stdlib.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Append s to buf[*n..cap), truncating; no libc. */
static inline void
rio__assert_put(char *buf, size_t cap, size_t *n, const char *s)
{
	while (*s != '\0' && *n < cap)
		buf[(*n)++] = *s++;
}

/*
 * "<lib>: invariant <label> violated: <cond> (<file>:<line>)\n" into buf
 * (at most cap bytes, cut short if longer); returns its length.  Uses no
 * libc, so discount may call it while libc's memory is being replaced.
 */
static inline size_t
rio__assert_format(char *buf, size_t cap, const char *lib,
	const char *label, const char *cond, const char *file, int line)
{
	char num[16];
	size_t n = 0, k = sizeof(num) - 1;
	const char *base = file;
	unsigned u = line > 0 ? (unsigned)line : 0;

	for (const char *p = file; *p != '\0'; p++)
		if (*p == '/')
			base = p + 1;
	num[k] = '\0';
	do {
		num[--k] = (char)('0' + u % 10);
		u /= 10;
	} while (u != 0 && k > 0);
	rio__assert_put(buf, cap, &n, lib);
	rio__assert_put(buf, cap, &n, ": invariant ");
	rio__assert_put(buf, cap, &n, label);
	rio__assert_put(buf, cap, &n, " violated: ");
	rio__assert_put(buf, cap, &n, cond);
	rio__assert_put(buf, cap, &n, " (");
	rio__assert_put(buf, cap, &n, base);
	rio__assert_put(buf, cap, &n, ":");
	rio__assert_put(buf, cap, &n, &num[k]);
	rio__assert_put(buf, cap, &n, ")\n");
	if (n == cap)
		buf[cap - 1] = '\n';
	return n;
}

/* Say which invariant failed, then abort().  Async-signal-safe. */
__attribute__((cold, noinline, noreturn, unused)) static void
rio__assert_fail(const char *lib, const char *label, const char *cond,
	const char *file, int line)
{
	char buf[512];
	size_t n = rio__assert_format(buf, sizeof(buf), lib, label, cond,
		file, line);
	ssize_t w = write(2, buf, n);

	(void)w; /* nothing better to do: abort() follows either way */
	abort();
}

/* text is the condition as written (stringized by the macros below,
 * before any macro in it is expanded). */
#ifdef NDEBUG
/* Type-checked, never evaluated. */
#define RIO__ASSERT_LIB(lib, cond, text, label) ((void)sizeof(!(cond)))
#else
#define RIO__ASSERT_LIB(lib, cond, text, label) \
	(__builtin_expect(!!(cond), 1) ? (void)0 : \
	    rio__assert_fail(lib, label, text, __FILE__, __LINE__))
#endif

/* One per library, so the message says whose invariant failed. */
#define RIO_ASSERT(cond, label) \
	RIO__ASSERT_LIB("librio", cond, #cond, label)
#define VISTA_ASSERT(cond, label) \
	RIO__ASSERT_LIB("libvista", cond, #cond, label)
#define VG_ASSERT(cond, label) \
	RIO__ASSERT_LIB("libvistagrams", cond, #cond, label)

#ifdef __cplusplus
}
#endif

#endif /* RIO_ASSERT_H */
