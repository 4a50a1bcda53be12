/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * protect.c -- protection of pool pages against wild stores
 *
 * Two mechanisms, chosen per pool at open:
 *   pkeys     the pool is tagged with a memory protection key
 *             (pkey_mprotect); rio_protect() and windows change only the
 *             calling thread's PKRU register: a window is per thread and
 *             costs a few tens of nanoseconds.  Used when pkey_alloc()
 *             succeeds (and RIO_NO_PKEYS is not set).
 *   mprotect  otherwise.  A window is process-wide; overlapping windows are
 *             reference-counted per page (win_count) and protection
 *             changes are coalesced into runs of pages, one system call per
 *             run, to keep the number of VMAs (vm.max_map_count) low.
 *
 * Invariants (mprotect mode, under prot_lock)
 *   G1. win_count[i] is the number of open windows covering user page i.
 *   G2. While prot_on, user page i is writable iff win_count[i] > 0, and
 *       the header page is read-only.  While !prot_on the mapping is
 *       writable (read-only pools excepted).
 *   G3. rio_write_end() changes nothing unless every page of its range is
 *       covered (RIO_EWINDOW otherwise).
 *
 * Faults are reported by the SIGSEGV handler in signals.c, which first
 * offers them to the fault hooks registered here.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>

#include "rio_int.h"

#define RIO__MAX_HOOKS 16
#define RIO__MAX_PKEYS 16

static struct {
	rio_fault_fn fn;
	void *ctx;
} hooks[RIO__MAX_HOOKS];
static pthread_mutex_t hooks_lock = PTHREAD_MUTEX_INITIALIZER;
static int hook_readers; /* handlers inside rio__fault_hooks_run */

static __thread uint32_t pkey_windows[RIO__MAX_PKEYS];

bool
rio_pkeys_available(void)
{
	int k = pkey_alloc(0, 0);
	if (k < 0)
		return false;
	pkey_free(k);
	return true;
}

int
rio__protect_init(rio_pool *p)
{
	size_t npages = p->size / RIO__PAGE;
	const char *no = getenv("RIO_NO_PKEYS");

	p->win_count = calloc(npages ? npages : 1, sizeof(*p->win_count));
	if (p->win_count == NULL)
		return rio__err(-ENOMEM, "out of memory for %zu page counters",
			npages);
	if (p->flags & RIO_RDONLY || (no != NULL && *no != '\0' && *no != '0'))
		return 0;
	p->pkey = pkey_alloc(0, 0);
	if (p->pkey < 0 || p->pkey >= RIO__MAX_PKEYS) {
		/* Normal on CPUs without PKU: use mprotect. */
		if (p->pkey >= 0)
			pkey_free(p->pkey);
		p->pkey = -1;
		return 0;
	}
	if (pkey_mprotect(p->map_base, p->map_size, PROT_READ | PROT_WRITE,
		    p->pkey) != 0) {
		pkey_free(p->pkey);
		p->pkey = -1;
	}
	return 0;
}

void
rio__protect_fini(rio_pool *p)
{
	if (p->pkey >= 0) {
		pkey_windows[p->pkey] = 0;
		pkey_set(p->pkey, 0);
		pkey_free(p->pkey);
		p->pkey = -1;
	}
}

static int
set_prot(rio_pool *p, void *addr, size_t len, int prot)
{
	RIO__STAT_ADD(p, mprotect_calls, 1);
	if (rio__sys.mprotect(addr, len, prot) != 0)
		return rio__errno("mprotect(%p, %zu) in pool %s", addr, len,
			p->path);
	return 0;
}

/*
 * Give pages first..last whose window count equals `count` the protection
 * `prot`, one mprotect per run of such pages.
 */
static int
apply_runs(rio_pool *p, size_t first, size_t last, uint16_t count, int prot)
{
	size_t i = first;

	while (i <= last) {
		size_t j;
		if (p->win_count[i] != count) {
			i++;
			continue;
		}
		for (j = i; j + 1 <= last && p->win_count[j + 1] == count; j++)
			;
		int rc = set_prot(p, p->base + i * RIO__PAGE,
			(j - i + 1) * RIO__PAGE, prot);
		if (rc)
			return rc;
		i = j + 1;
	}
	return 0;
}

int
rio_protect(rio_pool *p)
{
	int rc = 0;

	RIO__STAT_ADD(p, protect_calls, 1);
	if (p->flags & RIO_RDONLY)
		return 0; /* mapped read-only already */
	rc = rio__signals_install();
	if (rc == 0)
		rc = rio_sigaltstack_ensure();
	if (rc)
		return rc;
	pthread_mutex_lock(&p->prot_lock);
	if (p->pkey >= 0) {
		if (pkey_windows[p->pkey] == 0)
			pkey_set(p->pkey, PKEY_DISABLE_WRITE);
		/* relaxed, here and below: prot_on changes under prot_lock;
		 * atomic for its unlocked readers (rio_pool_protected(), the
		 * pkeys path of rio_write_end(), the SIGSEGV handler). */
		__atomic_store_n(&p->prot_on, true, __ATOMIC_RELAXED);
		goto out;
	}
	rc = set_prot(p, p->map_base, RIO_POOL_HDR_SIZE, PROT_READ);
	if (rc == 0 && p->size)
		rc = apply_runs(p, 0, p->size / RIO__PAGE - 1, 0, PROT_READ);
	if (rc == 0)
		__atomic_store_n(&p->prot_on, true, __ATOMIC_RELAXED);
out:
	pthread_mutex_unlock(&p->prot_lock);
	return rc;
}

int
rio_unprotect(rio_pool *p)
{
	int rc = 0;

	if (p->flags & RIO_RDONLY)
		return 0;
	pthread_mutex_lock(&p->prot_lock);
	if (p->pkey >= 0)
		pkey_set(p->pkey, 0);
	else if (p->prot_on)
		rc = set_prot(p, p->map_base, p->map_size,
			PROT_READ | PROT_WRITE);
	if (rc == 0) /* relaxed: as in rio_protect() */
		__atomic_store_n(&p->prot_on, false, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&p->prot_lock);
	return rc;
}

bool
rio_pool_protected(const rio_pool *p)
{
	/* relaxed: a snapshot of a flag changed under prot_lock; nothing is
	 * read on the strength of it, and the answer may be stale by the
	 * time the caller acts on it anyway. */
	return __atomic_load_n(&p->prot_on, __ATOMIC_RELAXED) ||
		(p->flags & RIO_RDONLY);
}

static int
window_range(rio_pool *p, void *addr, size_t len, size_t *first, size_t *last,
	const char *call)
{
	uintptr_t a = (uintptr_t)addr, b = (uintptr_t)p->base;

	if (len == 0 || a < b || a - b > p->size || len > p->size - (a - b))
		return rio__err(RIO_ERANGE,
			"%s(%p, %zu): range is outside pool %s [%p, +%zu)",
			call, addr, len, p->path, (void *)p->base, p->size);
	*first = (a - b) / RIO__PAGE;
	*last = (a - b + len - 1) / RIO__PAGE;
	return 0;
}

int
rio_write_begin(rio_pool *p, void *addr, size_t len)
{
	size_t first, last, i;
	int rc;

	rc = window_range(p, addr, len, &first, &last, "rio_write_begin");
	if (rc)
		return rc;
	if (p->flags & RIO_RDONLY)
		return rio__err(-EACCES, "pool %s is open read-only", p->path);
	RIO__STAT_ADD(p, window_opens, 1);
	if (p->pkey >= 0) {
		if (pkey_windows[p->pkey]++ == 0)
			pkey_set(p->pkey, 0);
		return 0;
	}
	pthread_mutex_lock(&p->prot_lock);
	for (i = first; i <= last; i++) {
		if (p->win_count[i] == UINT16_MAX) {
			while (i-- > first)
				p->win_count[i]--;
			pthread_mutex_unlock(&p->prot_lock);
			return rio__err(-EOVERFLOW,
				"more than %u windows over page %zu of %s",
				UINT16_MAX, i, p->path);
		}
	}
	for (i = first; i <= last; i++)
		p->win_count[i]++;
	if (p->prot_on) {
		rc = apply_runs(p, first, last, 1, PROT_READ | PROT_WRITE);
		if (rc) {
			/* Leave G1/G2 as they were before this call. */
			for (i = first; i <= last; i++)
				p->win_count[i]--;
			(void)apply_runs(p, first, last, 0, PROT_READ);
		}
	}
	pthread_mutex_unlock(&p->prot_lock);
	return rc;
}

int
rio_write_end(rio_pool *p, void *addr, size_t len)
{
	size_t first, last, i;
	int rc;

	rc = window_range(p, addr, len, &first, &last, "rio_write_end");
	if (rc)
		return rc;
	if (p->pkey >= 0) {
		if (pkey_windows[p->pkey] == 0)
			return rio__err(RIO_EWINDOW,
				"rio_write_end(%p, %zu): no open window on "
				"this thread", addr, len);
		RIO__STAT_ADD(p, window_closes, 1);
		/* relaxed: an unlocked snapshot; a protect or unprotect
		 * racing with this window's end sets PKRU itself. */
		if (--pkey_windows[p->pkey] == 0 &&
		    __atomic_load_n(&p->prot_on, __ATOMIC_RELAXED))
			pkey_set(p->pkey, PKEY_DISABLE_WRITE);
		return 0;
	}
	pthread_mutex_lock(&p->prot_lock);
	for (i = first; i <= last; i++) {
		if (p->win_count[i] == 0) {
			pthread_mutex_unlock(&p->prot_lock);
			return rio__err(RIO_EWINDOW,
				"rio_write_end(%p, %zu): page %zu of %s is in "
				"no open window", addr, len, i, p->path);
		}
	}
	for (i = first; i <= last; i++)
		p->win_count[i]--;
	RIO__STAT_ADD(p, window_closes, 1);
	if (p->prot_on)
		rc = apply_runs(p, first, last, 0, PROT_READ);
	pthread_mutex_unlock(&p->prot_lock);
	return rc;
}

/* ---- fault hooks ---- */

int
rio_fault_hook_add(rio_fault_fn fn, void *ctx)
{
	int rc = rio__signals_install();

	if (rc)
		return rc;
	pthread_mutex_lock(&hooks_lock);
	for (int i = 0; i < RIO__MAX_HOOKS; i++) {
		/* relaxed: hooks[] changes only under hooks_lock, held. */
		if (__atomic_load_n(&hooks[i].fn, __ATOMIC_RELAXED) == NULL) {
			hooks[i].ctx = ctx;
			/* Pairs with the acquire load in
			 * rio__fault_hooks_run(): makes ctx visible before
			 * fn, so a handler that sees fn calls it with its
			 * own ctx. */
			__atomic_store_n(&hooks[i].fn, fn, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&hooks_lock);
			return 0;
		}
	}
	pthread_mutex_unlock(&hooks_lock);
	return rio__err(-ENOSPC, "more than %d fault hooks", RIO__MAX_HOOKS);
}

int
rio_fault_hook_remove(rio_fault_fn fn, void *ctx)
{
	pthread_mutex_lock(&hooks_lock);
	for (int i = 0; i < RIO__MAX_HOOKS; i++) {
		if (hooks[i].fn == fn && hooks[i].ctx == ctx) {
			/* A NULL publishes nothing: release is stronger
			 * than needed. */
			__atomic_store_n(&hooks[i].fn, NULL, __ATOMIC_RELEASE);
			pthread_mutex_unlock(&hooks_lock);
			/* A handler that loaded fn before the store runs it
			 * inside a read section (rio__fault_hooks_run): wait
			 * for it, so that ctx may be freed once we return. */
			rio__rs_quiesce(&hook_readers);
			return 0;
		}
	}
	pthread_mutex_unlock(&hooks_lock);
	return rio__err(-ENOENT, "fault hook not registered");
}

/* Signal context: newest hook first, inside a read section so that
 * rio_fault_hook_remove() waits for a hook still running (and pool close,
 * which waits for the registry's readers, does not). */
bool
rio__fault_hooks_run(void *addr)
{
	bool done = false;

	rio__rs_enter(&hook_readers);
	for (int i = RIO__MAX_HOOKS - 1; i >= 0 && !done; i--) {
		/* Pairs with the release store in rio_fault_hook_add():
		 * makes the slot's ctx visible before fn is called. */
		rio_fault_fn fn = __atomic_load_n(&hooks[i].fn,
			__ATOMIC_ACQUIRE);
		done = fn != NULL && fn(addr, hooks[i].ctx);
	}
	rio__rs_exit(&hook_readers);
	return done;
}

int
rio_sigaltstack_ensure(void)
{
	stack_t old, ss;
	size_t size = 256 * 1024;

	if (sigaltstack(NULL, &old) != 0)
		return rio__errno("sigaltstack");
	if (!(old.ss_flags & SS_DISABLE))
		return 0;
	ss.ss_sp = mmap(NULL, size, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (ss.ss_sp == MAP_FAILED)
		return rio__errno("mmap alternate signal stack");
	ss.ss_size = size;
	ss.ss_flags = 0;
	if (sigaltstack(&ss, NULL) != 0) {
		int rc = rio__errno("sigaltstack");
		munmap(ss.ss_sp, size);
		return rc;
	}
	return 0;
}
