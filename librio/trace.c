/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * trace.c -- the load-time switch of the persistence choke point
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
	__atomic_store_n(&rio__trace, ops, __ATOMIC_RELEASE);
	if (ops != NULL && ops->pool_mapped != NULL)
		rio__registry_foreach(replay_one, (void *)(uintptr_t)ops);
	return 0;
}

void
rio__trace_mapped(rio_pool *p)
{
	const struct rio_trace_ops *ops =
		__atomic_load_n(&rio__trace, __ATOMIC_ACQUIRE);
	if (ops != NULL && ops->pool_mapped != NULL)
		ops->pool_mapped(p, p->map_base, p->map_size, p->path);
}

void
rio__trace_unmapping(rio_pool *p)
{
	const struct rio_trace_ops *ops =
		__atomic_load_n(&rio__trace, __ATOMIC_ACQUIRE);
	if (ops != NULL && ops->pool_unmapping != NULL)
		ops->pool_unmapping(p, p->map_base, p->map_size);
}
