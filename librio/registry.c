/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * registry.c -- the process's open pools, readable from signal handlers
 *
 * A fixed array of atomic pool pointers.  Writers (open, close) take a
 * mutex among themselves; readers (the SIGSEGV and fatal-signal handlers)
 * take no lock: they load each slot atomically and announce themselves in
 * `readers`, which close waits to drain before it frees a pool.
 */
#include <errno.h>
#include <sched.h>

#include "rio_int.h"

static rio_pool *slots[RIO__MAX_POOLS];
static pthread_mutex_t writers = PTHREAD_MUTEX_INITIALIZER;
static int readers;

int
rio__registry_add(rio_pool *p)
{
	int i, rc = -EMFILE;

	pthread_mutex_lock(&writers);
	for (i = 0; i < RIO__MAX_POOLS; i++) {
		if (__atomic_load_n(&slots[i], __ATOMIC_RELAXED) == NULL) {
			p->reg_slot = i;
			__atomic_store_n(&slots[i], p, __ATOMIC_RELEASE);
			rc = 0;
			break;
		}
	}
	pthread_mutex_unlock(&writers);
	if (rc)
		return rio__err(rc, "more than %d pools open in this process",
			RIO__MAX_POOLS);
	return 0;
}

void
rio__registry_remove(rio_pool *p)
{
	pthread_mutex_lock(&writers);
	__atomic_store_n(&slots[p->reg_slot], NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&writers);
	/* A handler that loaded the pointer before the store may still use
	 * the pool: wait for it before the caller frees anything. */
	while (__atomic_load_n(&readers, __ATOMIC_ACQUIRE) != 0)
		sched_yield();
}

void
rio__registry_foreach(void (*fn)(rio_pool *p, void *arg), void *arg)
{
	__atomic_fetch_add(&readers, 1, __ATOMIC_ACQ_REL);
	for (int i = 0; i < RIO__MAX_POOLS; i++) {
		rio_pool *p = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
		if (p != NULL)
			fn(p, arg);
	}
	__atomic_fetch_sub(&readers, 1, __ATOMIC_ACQ_REL);
}

void
rio__registry_enter(void)
{
	__atomic_fetch_add(&readers, 1, __ATOMIC_ACQ_REL);
}

void
rio__registry_exit(void)
{
	__atomic_fetch_sub(&readers, 1, __ATOMIC_ACQ_REL);
}

/* Between rio__registry_enter() and rio__registry_exit() only. */
rio_pool *
rio__registry_find(const void *addr)
{
	uintptr_t a = (uintptr_t)addr;

	for (int i = 0; i < RIO__MAX_POOLS; i++) {
		rio_pool *p = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
		if (p != NULL && a >= (uintptr_t)p->map_base &&
		    a < (uintptr_t)p->map_base + p->map_size)
			return p;
	}
	return NULL;
}
