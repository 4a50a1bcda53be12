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
 * Every thread (pkeys mode)
 *   PKRU is per thread: pkey_alloc() opens the new key to the calling
 *   thread only, a thread created later inherits its creator's rights, and
 *   a thread that existed before the pool was opened starts with the key
 *   denied entirely (the kernel's default PKRU).  The pool's baseline is
 *   what any thread may do without a window of its own: read while
 *   protected, read and write while not.  A thread whose rights for the
 *   key are stricter than the baseline faults (SEGV_PKUERR); the SIGSEGV
 *   handler then gives that thread the baseline (read-only for a read, so
 *   that a reader never gains write rights) and the access is retried
 *   (rio__pkey_grant).  A fault the baseline does not cover -- a store to
 *   a protected pool outside a window of this thread -- is a wild store.
 *   Windows stay per thread: a window opened in one thread lets no other
 *   thread write.
 *
 * Keys outlive their pool in threads (pkeys mode)
 *   P1. A thread's slot in pk_threads[] has rw[k] set whenever librio may
 *       have left write rights for key k in that thread's PKRU (window,
 *       rio_unprotect(), the opener's rights, a write granted by the
 *       handler).  Keys are allocated denied, so a key that never becomes
 *       a pool's leaves no rights behind.
 *   P2. A key is returned to the kernel (pkey_free) only when no live
 *       thread other than the closing one has rw[k]; otherwise it is held
 *       back (pk_held) until those threads are gone, so a pool that later
 *       gets the same key number is never writable through a grant made
 *       for the old pool.  The closing thread denies itself the key, and
 *       a thread that opens or closes a pool first denies itself every
 *       held key (pk_drop_held).
 *   P3. A thread that gains write rights without a slot (all taken) sets
 *       pk_untracked: from then on no key is ever returned.
 *   Rights a thread inherited at its creation are not tracked: a thread
 *   created while its creator held write rights (inside a window, or on
 *   an unprotected pool) keeps them, for that pool and for a later pool
 *   that gets the same key.
 *
 * Faults are reported by the SIGSEGV handler in signals.c, which first
 * gives a thread the pool's baseline (above), then offers the fault to
 * the fault hooks registered here.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

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

/* ---- which threads may hold write rights for which key (P1-P3) ---- */

#define RIO__MAX_PK_THREADS 256

static struct pk_thread {
	pid_t tid;                  /* 0: free */
	uint8_t rw[RIO__MAX_PKEYS]; /* P1 */
} pk_threads[RIO__MAX_PK_THREADS];
/* initial-exec: read by the SIGSEGV handler, which must not allocate. */
static __thread struct pk_thread *pk_me
	__attribute__((tls_model("initial-exec")));
static bool pk_untracked;  /* P3 */
static uint32_t pk_held;   /* P2: keys closed but not freed, under pk_lock */
static pthread_mutex_t pk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t pk_once = PTHREAD_ONCE_INIT;

/* This thread's slot, claimed on first use; async-signal-safe (the
 * handler grants rights too).  NULL when every slot is taken. */
static struct pk_thread *
pk_self(void)
{
	pid_t tid;

	if (pk_me != NULL)
		return pk_me;
	tid = (pid_t)syscall(SYS_gettid);
	for (int i = 0; i < RIO__MAX_PK_THREADS; i++) {
		pid_t zero = 0;
		/* relaxed: claims the slot; the rw[] it finds are cleared
		 * below and a scanner that reads them meanwhile at worst
		 * holds a key back (P2 errs on the safe side). */
		if (__atomic_compare_exchange_n(&pk_threads[i].tid, &zero, tid,
			    false, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
			for (int k = 0; k < RIO__MAX_PKEYS; k++)
				__atomic_store_n(&pk_threads[i].rw[k], 0,
					__ATOMIC_RELAXED);
			pk_me = &pk_threads[i];
			return pk_me;
		}
	}
	return NULL;
}

/* Record (P1) that this thread now may (w) or may not write key k. */
static void
pk_mark(int k, bool w)
{
	struct pk_thread *t = w ? pk_self() : pk_me;

	/* relaxed, here and in pk_granted(): rw[] and pk_untracked are
	 * read by pool close, which is ordered after every use of the pool
	 * by the caller (and after the handler by the registry's read
	 * sections); a stale 1 only holds a key back. */
	if (t != NULL)
		__atomic_store_n(&t->rw[k], (uint8_t)w, __ATOMIC_RELAXED);
	else if (w)
		__atomic_store_n(&pk_untracked, true, __ATOMIC_RELAXED);
}

static bool
thread_alive(pid_t tid)
{
	return syscall(SYS_tgkill, getpid(), tid, 0) == 0 || errno != ESRCH;
}

/* May a live thread other than `skip` write key k (P2)?  Frees the slots
 * of threads that are gone.  Under pk_lock. */
static bool
pk_granted(int k, const struct pk_thread *skip)
{
	bool granted = __atomic_load_n(&pk_untracked, __ATOMIC_RELAXED);

	for (int i = 0; i < RIO__MAX_PK_THREADS; i++) {
		struct pk_thread *t = &pk_threads[i];
		pid_t tid = __atomic_load_n(&t->tid, __ATOMIC_RELAXED);

		if (tid == 0 || t == skip)
			continue;
		if (!thread_alive(tid)) {
			/* Its PKRU died with it: the slot is free again. */
			__atomic_compare_exchange_n(&t->tid, &tid, 0, false,
				__ATOMIC_RELAXED, __ATOMIC_RELAXED);
			continue;
		}
		if (__atomic_load_n(&t->rw[k], __ATOMIC_RELAXED))
			granted = true;
	}
	return granted;
}

/* The child of fork() is one thread with the forking thread's PKRU: its
 * slot now belongs to the child's thread id; the others' threads are not
 * in this process (pk_granted() frees their slots). */
static void
pk_atfork_child(void)
{
	if (pk_me != NULL)
		__atomic_store_n(&pk_me->tid, (pid_t)syscall(SYS_gettid),
			__ATOMIC_RELAXED);
}

/* This thread gives up the rights it may still have for keys held back
 * (P2): their pools are closed, so that nothing it could do with them is
 * legal, and a held key is freed sooner.  Under pk_lock. */
static void
pk_drop_held(void)
{
	for (int k = 0; k < RIO__MAX_PKEYS; k++) {
		if ((pk_held & (1u << k)) && pk_me != NULL &&
		    __atomic_load_n(&pk_me->rw[k], __ATOMIC_RELAXED)) {
			pkey_windows[k] = 0;
			pkey_set(k, PKEY_DISABLE_ACCESS);
			pk_mark(k, false);
		}
	}
}

static void
pk_setup(void)
{
	pthread_atfork(NULL, NULL, pk_atfork_child);
}

bool
rio_pkeys_available(void)
{
	int k = pkey_alloc(0, PKEY_DISABLE_ACCESS); /* no rights left behind */
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
	/* Threads that existed before this open get the pool's baseline
	 * from the SIGSEGV handler: it must be there before the key is.
	 * RIO_NO_SIGNALS leaves the process's signals alone: such a pool is
	 * for the opener and the threads it creates afterwards (librio.3). */
	if (!(p->flags & RIO_NO_SIGNALS) && rio__signals_install() != 0)
		return 0; /* no handler: mprotect mode works in every thread */
	pthread_once(&pk_once, pk_setup);
	pthread_mutex_lock(&pk_lock);
	pk_drop_held();
	for (int k = 0; k < RIO__MAX_PKEYS; k++) {
		if ((pk_held & (1u << k)) && !pk_granted(k, NULL)) {
			pk_held &= ~(1u << k);
			pkey_free(k);
		}
	}
	p->pkey = pkey_alloc(0, PKEY_DISABLE_ACCESS);
	if (p->pkey < 0 || p->pkey >= RIO__MAX_PKEYS) {
		/* Normal on CPUs without PKU: use mprotect. */
		if (p->pkey >= 0)
			pkey_free(p->pkey);
		p->pkey = -1;
	} else if (pkey_mprotect(p->map_base, p->map_size,
			   PROT_READ | PROT_WRITE, p->pkey) != 0) {
		pkey_free(p->pkey);
		p->pkey = -1;
	} else {
		pkey_set(p->pkey, 0); /* the opener's rights, as before */
		pk_mark(p->pkey, true);
	}
	pthread_mutex_unlock(&pk_lock);
	return 0;
}

void
rio__protect_fini(rio_pool *p)
{
	if (p->pkey >= 0) {
		int k = p->pkey;

		pthread_mutex_lock(&pk_lock);
		pk_drop_held();
		pkey_windows[k] = 0;
		pkey_set(k, PKEY_DISABLE_ACCESS);
		pk_mark(k, false);
		if (pk_granted(k, pk_me))
			pk_held |= 1u << k; /* P2 */
		else
			pkey_free(k);
		pthread_mutex_unlock(&pk_lock);
		p->pkey = -1;
	}
}

/*
 * Signal context (SIGSEGV, SEGV_PKUERR on key `key` in open pool p; *pkru
 * is the interrupted thread's PKRU in the signal frame): give the thread the
 * pool's baseline for its key if its rights are stricter, so that the
 * access is retried with them.  A read gets read-only rights whatever the
 * baseline.  False when the thread already has the baseline: the fault is
 * the pool's own protection at work.
 */
bool
rio__pkey_grant(rio_pool *p, int key, uint32_t *pkru, bool write)
{
	int k = p->pkey;
	uint32_t have, want;

	if (k < 0 || k != key) /* not this pool's key: not ours to grant */
		return false;
	have = (*pkru >> (2 * k)) & 3u;
	/* relaxed: as in rio_protect(); a stale baseline is what a thread
	 * racing with rio_protect() or rio_unprotect() could have had. */
	want = write && !__atomic_load_n(&p->prot_on, __ATOMIC_RELAXED) ?
		0 : PKEY_DISABLE_WRITE;
	if ((have & ~want) == 0)
		return false;
	*pkru = (*pkru & ~(3u << (2 * k))) | (want << (2 * k));
	pk_mark(k, want == 0);
	return true;
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
		if (pkey_windows[p->pkey] == 0) {
			pkey_set(p->pkey, PKEY_DISABLE_WRITE);
			pk_mark(p->pkey, false);
		}
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
	if (p->pkey >= 0) {
		pkey_set(p->pkey, 0);
		pk_mark(p->pkey, true);
	} else if (p->prot_on)
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
		if (pkey_windows[p->pkey]++ == 0) {
			pkey_set(p->pkey, 0);
			pk_mark(p->pkey, true);
		}
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
		    __atomic_load_n(&p->prot_on, __ATOMIC_RELAXED)) {
			pkey_set(p->pkey, PKEY_DISABLE_WRITE);
			pk_mark(p->pkey, false);
		}
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
