/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * trace.c -- the load-time switch of the persistence choke point, and the
 *            per-pool write tap (rio_set_persist_tap)
 *
 * rio__trace is NULL unless a tracer (tools/pmemtest's preload library)
 * calls rio_trace_set().  The inline primitives in rio.h test it with one
 * predictable branch, so tracing costs nothing measurable when off.
 */
#include "rio_int.h"

const struct rio_trace_ops *rio__trace;

static void
replay_one(rio_pool *p, void *arg)
{
	const struct rio_trace_ops *ops = arg;
	ops->pool_mapped(p, p->map_base, p->map_size, p->path);
}

int
rio_trace_set(const struct rio_trace_ops *ops)
{
	/* Pairs with the acquire loads in rio__trace_mapped() and
	 * rio__trace_unmapping(): makes the ops table visible before the
	 * pointer.  The inline primitives of rio.h read rio__trace with a
	 * plain load: that is data-race-free only because the tracer sets it
	 * from a constructor, before the program starts a thread.  Also set
	 * before any pool is open: a pool opened while this runs could be
	 * missed by both this store-then-scan and its open's
	 * register-then-load (the store-buffering pattern, unfenced here). */
	__atomic_store_n(&rio__trace, ops, __ATOMIC_RELEASE);
	if (ops != NULL && ops->pool_mapped != NULL)
		rio__registry_foreach(replay_one, (void *)(uintptr_t)ops);
	return 0;
}

void
rio__trace_mapped(rio_pool *p)
{
	/* Pairs with the release store in rio_trace_set(): makes the ops
	 * table visible before it is called. */
	const struct rio_trace_ops *ops =
		__atomic_load_n(&rio__trace, __ATOMIC_ACQUIRE);
	if (ops != NULL && ops->pool_mapped != NULL)
		ops->pool_mapped(p, p->map_base, p->map_size, p->path);
}

void
rio__trace_unmapping(rio_pool *p)
{
	/* As in rio__trace_mapped(). */
	const struct rio_trace_ops *ops =
		__atomic_load_n(&rio__trace, __ATOMIC_ACQUIRE);
	if (ops != NULL && ops->pool_unmapping != NULL)
		ops->pool_unmapping(p, p->map_base, p->map_size);
}

int
rio_set_persist_tap(rio_pool *p, const struct rio_persist_tap *tap)
{
	/* Release: the tap's fields are visible before the pointer to a
	 * thread that synchronizes with this one later; the primitives'
	 * relaxed load relies on the documented rule (no concurrent flush
	 * while it changes). */
	__atomic_store_n(&p->hot.tap, tap, __ATOMIC_RELEASE);
	return 0;
}
