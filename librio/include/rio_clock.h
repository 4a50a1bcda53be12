/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rio_clock.h -- a clock read in nanoseconds, the one definition for the
 *                libraries, tools and benchmarks of the tree
 *
 * Header only (static inline): a tool or benchmark includes it without
 * linking librio.  Async-signal-safe, as clock_gettime(2) is.
 */
#ifndef RIO_CLOCK_H
#define RIO_CLOCK_H

#include <stdint.h>
#include <time.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Nanoseconds on clock clk: CLOCK_MONOTONIC for intervals, deadlines and
 * ages; CLOCK_REALTIME for times written into a persistent header (they
 * must mean something after a reboot).
 */
static inline uint64_t
rio_now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#ifdef __cplusplus
}
#endif

#endif /* RIO_CLOCK_H */
