/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * signals.c -- fatal signals: report wild stores, safe-sync, then die
 *
 * librio installs one handler (SA_SIGINFO | SA_ONSTACK) for SIGSEGV,
 * SIGBUS, SIGABRT, SIGILL and SIGFPE, the first time a pool needs it
 * (an image to keep, protection, a pool tagged with a protection key, or
 * a fault hook).  On SIGSEGV it
 *   0. on a protection-key fault in an open pool by a thread whose rights
 *      for the pool's key are stricter than the pool's baseline (a thread
 *      that existed before the pool was opened), gives that thread the
 *      baseline and retries the access (protect.c, "Every thread");
 *   1. offers the fault to the registered fault hooks (libvista automatic
 *      ranges, discount): a hook that resolves it ends the handler and the
 *      store is retried;
 *   2. if the address is inside a protected pool, it is a wild store: the
 *      handler prints the address, the pool and the offset;
 * then, for every fatal signal, it safe-syncs every pool that has an image
 * and lets the process die: of the signal itself after a wild store, or
 * through the handler that was installed before librio's (a debugger's or a
 * sanitizer's) otherwise.
 *
 * Everything here is async-signal-safe: write(2), no stdio, no malloc, no
 * locks that a normal path could hold on this thread.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include "pkru.h"
#include "rio_int.h"

static const int fatal_sigs[] = { SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE };
#define NSIGS (sizeof(fatal_sigs) / sizeof(fatal_sigs[0]))

static struct sigaction previous[NSIGS];
static pthread_once_t install_once = PTHREAD_ONCE_INIT;
static int install_rc;
static int dying; /* first thread to take the fatal path */

/* ---- protection keys across the handler ----
 *
 * The kernel runs a handler with the default PKRU, which denies every key
 * but 0 (so a pool tagged with a key cannot even be read), and restores
 * the PKRU saved in the signal frame when the handler returns.  The
 * handler therefore first takes the rights of the code it interrupted (a
 * fault hook reads and writes pools as that code could), and before it
 * returns from a resolved fault it stores the rights it leaves into the
 * frame, so a window a hook opened stays open for the retried store.
 * The saved PKRU is state component 9 of the frame's XSAVE area, which
 * the kernel writes in the standard (non-compacted) format, at the offset
 * CPUID leaf 0xD sub-leaf 9 gives.
 */
#define XSAVE_SW_OFF 464        /* struct _fpx_sw_bytes in the fxsave area */
#define XSAVE_MAGIC1 0x46505853u /* FP_XSTATE_MAGIC1: an XSAVE area follows */
#define XSAVE_HDR_OFF 512       /* xstate_bv */
#define XFEATURE_PKRU 9

static unsigned pkru_off; /* 0: no PKRU in XSAVE (or not x86-64) */

static void
pkru_probe(void)
{
#if defined(__x86_64__)
	unsigned a, b, c, d;

	if (__get_cpuid_count(0xd, 0, &a, &b, &c, &d) &&
	    (a & (1u << XFEATURE_PKRU)) &&
	    __get_cpuid_count(0xd, XFEATURE_PKRU, &a, &b, &c, &d) && a >= 4)
		pkru_off = b;
#endif
}

/* The interrupted context's PKRU in the frame, or NULL (no pkeys). */
static uint32_t *
frame_pkru(void *ucp)
{
#if defined(__x86_64__)
	ucontext_t *uc = ucp;
	char *fp;
	uint32_t magic1;
	uint64_t xfeatures, *bv;

	if (pkru_off == 0 || uc == NULL || uc->uc_mcontext.fpregs == NULL)
		return NULL;
	fp = (char *)uc->uc_mcontext.fpregs;
	memcpy(&magic1, fp + XSAVE_SW_OFF, sizeof(magic1));
	memcpy(&xfeatures, fp + XSAVE_SW_OFF + 8, sizeof(xfeatures));
	if (magic1 != XSAVE_MAGIC1 || !(xfeatures & (1u << XFEATURE_PKRU)))
		return NULL;
	bv = (uint64_t *)(void *)(fp + XSAVE_HDR_OFF);
	if (!(*bv & (1u << XFEATURE_PKRU))) {
		/* The component is in its init state, PKRU 0 (all
		 * allowed): make that explicit so it can be read and
		 * written like a saved value. */
		*(uint32_t *)(void *)(fp + pkru_off) = 0;
		*bv |= 1u << XFEATURE_PKRU;
	}
	return (uint32_t *)(void *)(fp + pkru_off);
#else
	(void)ucp;
	return NULL;
#endif
}


/* Was the faulting access a store?  The page-fault error code's bit 1;
 * a read when it cannot be told (the grant is then read-only, and a store
 * faults once more). */
static bool
fault_was_write(void *ucp)
{
#if defined(__x86_64__)
	ucontext_t *uc = ucp;

	return (uc->uc_mcontext.gregs[REG_ERR] & 2) != 0;
#else
	(void)ucp;
	return false;
#endif
}

/* A protection-key fault in an open pool by a thread whose rights for its
 * key are stricter than the pool's baseline (one that existed before the
 * pool was opened starts with none): give it the baseline in the frame
 * (protect.c, "Every thread") and say whether the access may be retried. */
static bool
pkey_baseline(siginfo_t *si, uint32_t *pkru, void *uc)
{
	rio_pool *p;
	bool granted = false;

	rio__registry_enter();
	p = rio__registry_find(si->si_addr);
	if (p != NULL)
		granted = rio__pkey_grant(p, (int)si->si_pkey, pkru,
			fault_was_write(uc));
	rio__registry_exit();
	return granted;
}

static int
sig_index(int sig)
{
	for (unsigned i = 0; i < NSIGS; i++)
		if (fatal_sigs[i] == sig)
			return (int)i;
	return -1;
}

/* ---- async-signal-safe output ---- */

struct sbuf {
	char b[768];
	size_t n;
};

static void
sb_str(struct sbuf *s, const char *str)
{
	while (*str && s->n < sizeof(s->b) - 1)
		s->b[s->n++] = *str++;
}

static void
sb_hex(struct sbuf *s, uintptr_t v)
{
	char tmp[2 + 16];
	int i = 0;

	sb_str(s, "0x");
	do {
		tmp[i++] = "0123456789abcdef"[v & 15];
		v >>= 4;
	} while (v && i < 16);
	while (i > 0 && s->n < sizeof(s->b) - 1)
		s->b[s->n++] = tmp[--i];
}

static void
sb_dec(struct sbuf *s, uint64_t v)
{
	char tmp[24];
	int i = 0;

	do {
		tmp[i++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (i > 0 && s->n < sizeof(s->b) - 1)
		s->b[s->n++] = tmp[--i];
}

static void
sb_flush(struct sbuf *s)
{
	size_t off = 0;

	while (off < s->n) {
		ssize_t w = write(STDERR_FILENO, s->b + off, s->n - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	s->n = 0;
}

static void
sync_one(rio_pool *p, void *arg)
{
	struct sbuf *s = arg;
	uint64_t gen = 0;
	int rc;

	/* relaxed: the sticky error code, read whole (rio__msync() stores
	 * it); nothing else is read on the strength of it. */
	if (p->img == NULL || __atomic_load_n(&p->error, __ATOMIC_RELAXED))
		return;
	/* Under pkeys the handler runs with the default PKRU, which may deny
	 * access to the pool's key: reading is all safe sync needs. */
	if (p->pkey >= 0)
		pkey_set(p->pkey, PKEY_DISABLE_WRITE);
	rc = rio__image_sync(p, true, &gen);
	sb_str(s, "rio: safe sync of ");
	sb_str(s, p->path);
	if (rc == 0) {
		sb_str(s, " to ");
		sb_str(s, p->image_path);
		sb_str(s, " done (generation ");
		sb_dec(s, gen);
		sb_str(s, ")\n");
	} else {
		sb_str(s, " failed: ");
		sb_str(s, rio_err_name(rc));
		sb_str(s, "; the image keeps its previous generation\n");
	}
	sb_flush(s);
}

static void
report_wild_store(struct sbuf *s, rio_pool *p, void *addr)
{
	sb_str(s, "rio: wild store to ");
	sb_hex(s, (uintptr_t)addr);
	sb_str(s, " in write-protected pool ");
	sb_str(s, p->path);
	sb_str(s, " (offset ");
	sb_hex(s, (uintptr_t)addr - (uintptr_t)p->map_base);
	sb_str(s, "); the store was blocked\n");
	sb_flush(s);
}

/* Reset sig to its default action and let the pending signal kill us. */
static void
die_of(int sig)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_DFL;
	sigemptyset(&sa.sa_mask);
	sigaction(sig, &sa, NULL);
	/* The signal is blocked while its handler runs: it is delivered,
	 * with the default action, as soon as the handler returns. */
	raise(sig);
}

void
rio__chain_previous(int sig, siginfo_t *si, void *uc)
{
	int i = sig_index(sig);
	struct sigaction *old = i >= 0 ? &previous[i] : NULL;

	if (old == NULL || old->sa_handler == SIG_DFL ||
	    old->sa_handler == SIG_IGN) {
		die_of(sig);
		return;
	}
	/* Reinstall the previous handler so that a fault that recurs after
	 * it returns reaches it directly, then call it now. */
	sigaction(sig, old, NULL);
	if (old->sa_flags & SA_SIGINFO)
		old->sa_sigaction(sig, si, uc);
	else
		old->sa_handler(sig);
}

void
rio__fatal(int sig, siginfo_t *si, void *uc, bool wild_store)
{
	struct sbuf s = { .n = 0 };

	/* A lock word taken by exchange (a handler cannot block on a
	 * mutex).  Acquire pairs with the release store below, by a fatal
	 * path whose chained handler returned: makes its work visible
	 * before ours; the release half orders nothing and is stronger
	 * than needed.  The images themselves are ordered by take()/give()
	 * in image.c. */
	if (__atomic_exchange_n(&dying, 1, __ATOMIC_ACQ_REL)) {
		/* Another thread is already syncing and will end the
		 * process; wait for it rather than race on the images. */
		for (;;)
			pause();
	}
	rio__registry_foreach(sync_one, &s);
	if (wild_store)
		die_of(sig);
	else
		rio__chain_previous(sig, si, uc);
	/* Pairs with the acquire exchange above: a previous handler chose
	 * to return (the fault was not fatal after all); the next fatal
	 * path starts after everything this one did. */
	__atomic_store_n(&dying, 0, __ATOMIC_RELEASE);
}

static void
handler(int sig, siginfo_t *si, void *uc)
{
	int saved_errno = errno;
	bool wild = false;
	uint32_t *pkru = frame_pkru(uc);

	if (pkru != NULL)
		rio_wrpkru(*pkru); /* the interrupted code's rights */
	if (sig == SIGSEGV) {
		struct sbuf s = { .n = 0 };
		rio_pool *p;

		if (pkru != NULL && si->si_code == SEGV_PKUERR &&
		    pkey_baseline(si, pkru, uc)) {
			errno = saved_errno;
			return; /* this thread now has the baseline: retry */
		}
		if (rio__fault_hooks_run(si->si_addr)) {
			if (pkru != NULL)
				*pkru = rio_rdpkru(); /* windows the hook opened */
			errno = saved_errno;
			return; /* resolved: retry the store */
		}
		rio__registry_enter();
		p = rio__registry_find(si->si_addr);
		/* relaxed: prot_on is stored under prot_lock, which a
		 * handler cannot take; this only chooses the message. */
		if (p != NULL &&
		    __atomic_load_n(&p->prot_on, __ATOMIC_RELAXED) &&
		    (si->si_code == SEGV_ACCERR || si->si_code == SEGV_PKUERR)) {
			report_wild_store(&s, p, si->si_addr);
			wild = true;
		}
		rio__registry_exit();
	}
	rio__fatal(sig, si, uc, wild);
	errno = saved_errno;
}

static void
install(void)
{
	struct sigaction sa;

	pkru_probe();
	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = handler;
	sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
	sigemptyset(&sa.sa_mask);
	for (unsigned i = 0; i < NSIGS; i++) {
		if (sigaction(fatal_sigs[i], &sa, &previous[i]) != 0) {
			install_rc = rio__errno("sigaction(%d)", fatal_sigs[i]);
			return;
		}
	}
}

int
rio__signals_install(void)
{
	pthread_once(&install_once, install);
	return install_rc;
}
