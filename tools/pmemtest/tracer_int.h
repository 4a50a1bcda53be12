/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tracer_int.h -- the tracing side of pmemtest (runs inside the traced
 * process: libpmemtest-trace.so, or a driver child tracing a recovery)
 */
#ifndef PMEMTEST_TRACER_INT_H
#define PMEMTEST_TRACER_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "rio.h"

/* How the tracer finds the lines stored to between two events. */
enum pmt_dirty_mode {
	PMT_DIRTY_SCAN = 0, /* compare every mapped page with a shadow copy */
	PMT_DIRTY_UFFD = 1, /* userfaultfd async write-protect + PAGEMAP_SCAN */
	PMT_DIRTY_AUTO = 2, /* STORES where the kernel allows it, else UFFD,
			     * else SCAN */
	PMT_DIRTY_STORES = 3, /* every store, one instruction at a time:
			       * userfaultfd write-protect faults + single
			       * step (stores.c) */
};

struct pmt_tracer_cfg {
	const char *trace_path;  /* created with O_EXCL */
	const char *pools;       /* newline-separated paths to trace; NULL=all */
	unsigned stack_depth;    /* frames kept per call site, >= 1 */
	enum pmt_dirty_mode dirty;
	bool quiet;
};

/* tracer.c: every entry point takes the tracer's lock; all are no-ops
 * until pmt_tracer_start() succeeded and after pmt_tracer_stop(). */
int pmt_tracer_start(const struct pmt_tracer_cfg *cfg);
/* Write END (sig = 0 for a normal exit) and close the trace. */
void pmt_tracer_stop(int sig);
bool pmt_tracer_active(void);
void pmt_tracer_mapped(const void *handle, void *base, size_t size,
	const char *path);
void pmt_tracer_unmapping(void *base, size_t size);
void pmt_tracer_flush(const void *addr, size_t len);
void pmt_tracer_fence(void);
/* handle: the rio_pool (or NULL for every pool). */
void pmt_tracer_dpoint(const void *handle, const char *what);
void pmt_tracer_discard(const void *addr, size_t len);
/* The librio hook table that forwards to the functions above. */
extern const struct rio_trace_ops pmt_rio_ops;

/* callsite.c: capture and intern the caller's stack.  Frames inside the
 * module holding `self` are skipped.  Emits MODULE/STACK records through
 * the writer callback the first time a stack is seen. */
typedef void (*pmt_emit_fn)(uint16_t type, uint16_t aux, const void *p1,
	size_t n1, const void *p2, size_t n2);
void pmt_callsite_init(unsigned depth, pmt_emit_fn emit);
uint32_t pmt_callsite_capture(void);

/* dirty_uffd.c: page-granular write tracking with userfaultfd. */
struct pmt_uffd;
int pmt_uffd_open(struct pmt_uffd **u);
int pmt_uffd_register(struct pmt_uffd *u, void *base, size_t size);
void pmt_uffd_unregister(struct pmt_uffd *u, void *base, size_t size);
/* Collect pages of [base, base+size) written since the last call, and
 * write-protect them again: calls fn(page address) for each. */
int pmt_uffd_collect(struct pmt_uffd *u, void *base, size_t size,
	void (*fn)(void *page, void *arg), void *arg);
void pmt_uffd_close(struct pmt_uffd *u);

/* stores.c: per-store capture (see its head).  One per process. */
int pmt_stores_open(void);
int pmt_stores_register(void *base, size_t size);
void pmt_stores_unregister(void *base, size_t size);
/* Protect pages again (the end of a window, S1). */
int pmt_stores_protect(void *page, size_t len);
void pmt_stores_close(void);
void pmt_stores_forked(void);
/* tracer.c, from stores.c's signal handlers (S3).  begin: a store at addr
 * by the instruction at pc is about to be retried; true = single-step it.
 * end: the instruction ran (trap_pc: where it stopped); pages: those it
 * opened. */
bool pmt_tracer_step_begin(void *addr, void *pc);
void pmt_tracer_step_end(void *addr, void *pc, void *trap_pc,
	void *const *pages, unsigned n);

/* callsite.c: the stack of a store seen by a single step: frame 0 is the
 * storing instruction pc, the rest the stack below trap_pc (the
 * interrupted context of the signal handler). */
uint32_t pmt_callsite_capture_store(void *pc, void *trap_pc);

#endif /* PMEMTEST_TRACER_INT_H */
