/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * registry.c -- the process's open pools, readable from signal handlers
 *
 * A fixed array of atomic pool pointers.  Writers (open, close) take a
 * mutex among themselves; readers (the SIGSEGV and fatal-signal handlers)
 * take no lock: they load each slot atomically and announce themselves in
 * `readers`, which close waits to drain before it frees a pool.
 *
 * Memory ordering
 *   Q1. Publication: rio__registry_add() stores a slot with release after
 *       the pool is complete; a reader's acquire load of that slot makes
 *       every field of the pool (map_base, map_size, path, img...) visible
 *       before the reader uses it.
 *   Q2. Retirement is the store-buffering (Dekker) pattern:
 *
 *         rio__registry_remove()          reader (foreach, enter + find)
 *           slots[i] = NULL                 readers += 1
 *           seq_cst fence  (F_w)            seq_cst fence  (F_r)
 *           load readers                    load slots[i]
 *
 *       Each side stores to one word and then loads the other; release
 *       and acquire do not order a store before a later load, so without
 *       the fences both loads may read the old values: the writer sees no
 *       reader and frees the pool while the reader, having seen the old
 *       pointer, uses it.  The two seq_cst fences are totally ordered
 *       (C11 7.17.3: a modification sequenced before one seq_cst fence is
 *       seen by a load sequenced after a later one).  If F_w comes first,
 *       the reader's slot load sees NULL (or a newer pool); if F_r comes
 *       first, the writer's load of `readers` sees the increment (or a
 *       later value) and the writer waits.  Either way no reader uses a
 *       pool after remove returns.  (Without the fences the code was right
 *       on x86-64 only by accident: glibc's mutex unlock and the reader's
 *       lock xadd are locked instructions, full fences there.)  We chose
 *       two fences over seq_cst on the four accesses because the pairing
 *       is then written at the two points that need it, and the slot
 *       loads of a reader scanning 256 slots stay acquire loads (plain
 *       loads on x86-64).
 *   Q3. Drain: a reader's decrement is a release and the writer's load of
 *       `readers` an acquire; every change of `readers` is a
 *       read-modify-write, so a load that reads 0 synchronizes with the
 *       decrement of every reader counted before, and the reader's last
 *       use of the pool happens before the caller frees it.
 *
 * Async-signal-safety: readers run in signal handlers, possibly on the
 * thread that is inside rio__registry_remove() or holds `writers`.  They
 * take no lock and call nothing but lock-free atomics (pinned below) and
 * a fence, which compiles to one instruction (mfence or a locked
 * instruction on x86-64, dmb ish on arm64); both are async-signal-safe
 * (C11 7.14.1.1 allows lock-free atomic objects in handlers).  A handler
 * that interrupts a remover spinning on `readers` raises and then lowers
 * the count itself before the remover looks again.
 */
#include <errno.h>
#include <sched.h>

#include "rio_int.h"

_Static_assert(__atomic_always_lock_free(sizeof(int), 0),
	"the registry's reader count must be lock-free (signal handlers)");
_Static_assert(__atomic_always_lock_free(sizeof(rio_pool *), 0),
	"the registry's slots must be lock-free (signal handlers)");

static rio_pool *slots[RIO__MAX_POOLS];
static pthread_mutex_t writers = PTHREAD_MUTEX_INITIALIZER;
static int readers;

int
rio__registry_add(rio_pool *p)
{
	int i, rc = -EMFILE;

	pthread_mutex_lock(&writers);
	for (i = 0; i < RIO__MAX_POOLS; i++) {
		/* relaxed: slots change only under `writers`, held. */
		if (__atomic_load_n(&slots[i], __ATOMIC_RELAXED) == NULL) {
			p->reg_slot = i;
			/* Q1: pairs with the acquire slot loads in
			 * rio__registry_foreach() and rio__registry_find():
			 * makes the finished pool visible before its
			 * pointer. */
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
	/* Release is stronger than needed (a NULL publishes nothing;
	 * relaxed would do): what orders this store against the readers is
	 * F_w in rio__rs_quiesce() (Q2). */
	__atomic_store_n(&slots[p->reg_slot], NULL, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&writers);
	rio__rs_quiesce(&readers);
}

/*
 * Read sections (the pattern above, for any count of readers): a reader
 * brackets its loads of published pointers with rio__rs_enter() and
 * rio__rs_exit(); a writer that stored NULL over one calls
 * rio__rs_quiesce() before freeing what it pointed to.
 */
void
rio__rs_enter(int *count)
{
	/* Acq_rel is stronger than needed (relaxed would do: nothing is
	 * published or consumed through the increment); F_r below is what
	 * orders it before the pointer loads (Q2). */
	__atomic_fetch_add(count, 1, __ATOMIC_ACQ_REL);
	/* F_r (Q2): pairs with F_w in rio__rs_quiesce(): the increment is
	 * ordered before the caller's pointer loads, so a writer that misses
	 * it has already made its NULL visible to them. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
}

void
rio__rs_exit(int *count)
{
	/* Q3: pairs with the acquire load in rio__rs_quiesce(): makes the
	 * section's uses of what it loaded happen before the writer's free
	 * (the release half is the one needed). */
	__atomic_fetch_sub(count, 1, __ATOMIC_ACQ_REL);
}

void
rio__rs_quiesce(int *count)
{
	/* F_w (Q2): pairs with F_r in rio__rs_enter(): the caller's NULL
	 * store is ordered before the load of the count below, so a reader
	 * that still saw the old pointer is counted there. */
	__atomic_thread_fence(__ATOMIC_SEQ_CST);
	/* Wait for such a reader before the caller frees anything.  Acquire
	 * (Q3): pairs with the release decrement in rio__rs_exit(). */
	while (__atomic_load_n(count, __ATOMIC_ACQUIRE) != 0)
		sched_yield();
}

void
rio__registry_foreach(void (*fn)(rio_pool *p, void *arg), void *arg)
{
	rio__rs_enter(&readers);
	for (int i = 0; i < RIO__MAX_POOLS; i++) {
		/* Q1: pairs with the release store in rio__registry_add():
		 * makes the pool's fields visible before fn reads them. */
		rio_pool *p = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
		if (p != NULL)
			fn(p, arg);
	}
	rio__rs_exit(&readers);
}

void
rio__registry_enter(void)
{
	rio__rs_enter(&readers);
}

void
rio__registry_exit(void)
{
	rio__rs_exit(&readers);
}

/* Between rio__registry_enter() and rio__registry_exit() only. */
rio_pool *
rio__registry_find(const void *addr)
{
	uintptr_t a = (uintptr_t)addr;

	for (int i = 0; i < RIO__MAX_POOLS; i++) {
		/* Q1: pairs with the release store in rio__registry_add():
		 * makes map_base and map_size visible before they are
		 * compared. */
		rio_pool *p = __atomic_load_n(&slots[i], __ATOMIC_ACQUIRE);
		if (p != NULL && a >= (uintptr_t)p->map_base &&
		    a < (uintptr_t)p->map_base + p->map_size)
			return p;
	}
	return NULL;
}
