/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * stores.c -- every store to a traced pool, one instruction at a time
 *
 * The pools are registered with a userfaultfd in synchronous write-protect
 * mode.  The first write to a protected page blocks the writing thread in
 * the kernel and posts a fault message; a handler thread reads it and
 *   1. lifts the protection of the page without waking the writer,
 *   2. queues SIG_STEP at the writer (rt_tgsigqueueinfo, the address in
 *      the signal's value),
 *   3. wakes the writer.
 * Back in user mode the writer takes SIG_STEP before it retries the store:
 * the handler asks the tracer whether to step (pmt_tracer_step_begin:
 * the store's instruction address is in the signal context) and if so sets
 * the trap flag.  The store executes, the CPU traps (SIGTRAP), and the
 * SIGTRAP handler clears the trap flag and has the tracer compare the page
 * with its shadow (pmt_tracer_step_end: the lines this one instruction
 * changed, or the line it stored its old value into) and protect it again.
 * So each instruction storing to a pool is seen alone, in program order,
 * with its call stack, and the program still runs natively between stores.
 * A write from the kernel (a system call filling a pool buffer) blocks the
 * call, not fails it, and is seen as one store when the call returns.
 *
 * Invariants
 *   S1. A page is writable only between steps 1 and the SIGTRAP (or the
 *       next sweep, pmt_stores_protect) that protects it again; every store
 *       while it is writable is seen by the comparison that ends the
 *       window (the tracer's shadow is compared, not the stores counted).
 *   S2. The handler thread never takes the tracer's lock: it only lifts
 *       protection and signals, so a writer blocked in a fault never waits
 *       for a thread that waits for it.
 *   S3. A thread that is inside the tracer holds its lock but never stores
 *       to a pool, so SIG_STEP and the trap are never taken while the
 *       thread itself holds the lock.
 *   S4. Any failure to set the mechanism up leaves nothing registered: the
 *       tracer falls back to page tracking or scanning.
 *   S5. Both handlers open every protection key first (WRPKRU 0): the
 *       kernel enters a signal handler with only key 0 accessible, and a
 *       pool librio guards with a key would fault on the tracer's reads.
 *       Returning from the handler restores the program's own PKRU.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "tracer_int.h"
#include "linux_compat.h"
#include "pkru.h"

#define PAGE 4096u
#define TF 0x100ull /* EFLAGS trap flag */
#define MAX_OPEN 8  /* pages one instruction may open (a page crossing) */

static struct {
	int uffd;
	int stop[2]; /* pipe: ends the handler thread */
	pthread_t thread;
	bool on;
	int sig;
	struct sigaction old_trap, old_step;
} S = { .uffd = -1, .stop = { -1, -1 } };

/* The step in flight on this thread: pages opened for it. */
static __thread struct {
	bool stepping;
	unsigned n;
	void *page[MAX_OPEN];
	void *addr; /* the first store address */
	void *pc;   /* the storing instruction */
} step;

static bool has_pku;

/* S5 */
static inline void
open_keys(void)
{
	if (has_pku)
		rio_wrpkru(0); /* every key's rights */
}

static int
protect(void *page, size_t len, bool on, bool wake)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = (uintptr_t)page, .len = len },
		.mode = (on ? UFFDIO_WRITEPROTECT_MODE_WP : 0) |
			(wake ? 0 : UFFDIO_WRITEPROTECT_MODE_DONTWAKE),
	};
	return ioctl(S.uffd, UFFDIO_WRITEPROTECT, &wp) == 0 ? 0 : -errno;
}

static void *
handler_main(void *arg)
{
	pid_t pid = getpid();
	sigset_t all;

	(void)arg;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, NULL);
	for (;;) {
		struct pollfd pf[2] = { { .fd = S.uffd, .events = POLLIN },
			{ .fd = S.stop[0], .events = POLLIN } };
		struct uffd_msg msg[16];
		ssize_t n;

		if (poll(pf, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			return NULL;
		}
		if (pf[1].revents)
			return NULL;
		n = read(S.uffd, msg, sizeof(msg));
		if (n <= 0)
			continue;
		for (ssize_t i = 0; i < n / (ssize_t)sizeof(msg[0]); i++) {
			uintptr_t a = (uintptr_t)msg[i].arg.pagefault.address;
			uintptr_t pg = a & ~(uintptr_t)(PAGE - 1);
			siginfo_t si;
			struct uffdio_range r = { .start = pg, .len = PAGE };

			if (msg[i].event != UFFD_EVENT_PAGEFAULT)
				continue;
			/* 1. writable, writer still asleep; 2. the step
			 * signal is pending before it returns to user
			 * mode; 3. wake it. */
			protect((void *)pg, PAGE, false, false);
			memset(&si, 0, sizeof(si));
			si.si_signo = S.sig;
			si.si_code = SI_QUEUE;
			si.si_pid = pid;
			si.si_uid = getuid();
			si.si_value.sival_ptr = (void *)a;
			syscall(SYS_rt_tgsigqueueinfo, pid,
				(pid_t)msg[i].arg.pagefault.feat.ptid, S.sig,
				&si);
			ioctl(S.uffd, UFFDIO_WAKE, &r);
		}
	}
}

static void
on_step(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	void *addr = si->si_value.sival_ptr;
	void *pg = (void *)((uintptr_t)addr & ~(uintptr_t)(PAGE - 1));
	int saved = errno;

	(void)sig;
	open_keys();
	if (step.stepping) {
		/* One instruction, a second page (or the same page again,
		 * re-protected by a sweep in between): one more to close. */
		if (step.n < MAX_OPEN)
			step.page[step.n++] = pg;
		errno = saved;
		return;
	}
	if (!pmt_tracer_step_begin(addr,
		    (void *)uc->uc_mcontext.gregs[REG_RIP])) {
		errno = saved; /* over budget: the page stays open (S1) */
		return;
	}
	step.stepping = true;
	step.n = 1;
	step.page[0] = pg;
	step.addr = addr;
	step.pc = (void *)uc->uc_mcontext.gregs[REG_RIP];
	uc->uc_mcontext.gregs[REG_EFL] |= TF;
	errno = saved;
}

static void
on_trap(int sig, siginfo_t *si, void *ctx)
{
	ucontext_t *uc = ctx;
	int saved = errno;

	if (!step.stepping) {
		/* Not ours: whoever handled SIGTRAP before. */
		if (S.old_trap.sa_flags & SA_SIGINFO &&
		    S.old_trap.sa_sigaction != NULL)
			S.old_trap.sa_sigaction(sig, si, ctx);
		else if (S.old_trap.sa_handler != SIG_DFL &&
			 S.old_trap.sa_handler != SIG_IGN)
			S.old_trap.sa_handler(sig);
		else if (S.old_trap.sa_handler == SIG_DFL) {
			sigaction(SIGTRAP, &S.old_trap, NULL);
			raise(SIGTRAP);
		}
		errno = saved;
		return;
	}
	open_keys();
	uc->uc_mcontext.gregs[REG_EFL] &= ~TF;
	step.stepping = false;
	pmt_tracer_step_end(step.addr, step.pc,
		(void *)uc->uc_mcontext.gregs[REG_RIP], step.page, step.n);
	errno = saved;
}

int
pmt_stores_open(void)
{
	struct uffdio_api api = { .api = UFFD_API,
		.features = UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_EXACT_ADDRESS |
			UFFD_FEATURE_WP_UNPOPULATED |
			UFFD_FEATURE_WP_HUGETLBFS_SHMEM };
	struct sigaction sa;
	int rc;

	if (S.on)
		return 0;
	has_pku = rio_pku_os();
	S.sig = SIGRTMIN + 5;
	S.uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (S.uffd < 0)
		return -errno;
	if (ioctl(S.uffd, UFFDIO_API, &api) != 0 ||
	    pipe2(S.stop, O_CLOEXEC) != 0) {
		rc = -errno;
		goto fail;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sa.sa_sigaction = on_step;
	if (sigaction(S.sig, &sa, &S.old_step) != 0) {
		rc = -errno;
		goto fail;
	}
	sa.sa_sigaction = on_trap;
	if (sigaction(SIGTRAP, &sa, &S.old_trap) != 0) {
		rc = -errno;
		sigaction(S.sig, &S.old_step, NULL);
		goto fail;
	}
	rc = pthread_create(&S.thread, NULL, handler_main, NULL);
	if (rc != 0) {
		rc = -rc;
		sigaction(SIGTRAP, &S.old_trap, NULL);
		sigaction(S.sig, &S.old_step, NULL);
		goto fail;
	}
	S.on = true;
	return 0;
fail:
	close(S.uffd);
	S.uffd = -1;
	if (S.stop[0] >= 0) {
		close(S.stop[0]);
		close(S.stop[1]);
	}
	S.stop[0] = S.stop[1] = -1;
	return rc; /* S4 */
}

int
pmt_stores_register(void *base, size_t size)
{
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)base, .len = size },
		.mode = UFFDIO_REGISTER_MODE_WP,
	};

	if (!S.on)
		return -EINVAL;
	if (ioctl(S.uffd, UFFDIO_REGISTER, &reg) != 0)
		return -errno;
	if (protect(base, size, true, true) != 0) {
		pmt_stores_unregister(base, size);
		return -EINVAL;
	}
	return 0;
}

void
pmt_stores_unregister(void *base, size_t size)
{
	struct uffdio_range r = { .start = (uintptr_t)base, .len = size };

	if (!S.on)
		return;
	protect(base, size, false, true);
	ioctl(S.uffd, UFFDIO_UNREGISTER, &r);
}

int
pmt_stores_protect(void *page, size_t len)
{
	return protect(page, len, true, true);
}

void
pmt_stores_close(void)
{
	char c = 0;

	if (!S.on)
		return;
	if (write(S.stop[1], &c, 1) == 1)
		pthread_join(S.thread, NULL);
	close(S.uffd); /* unregisters every range, wakes any writer */
	close(S.stop[0]);
	close(S.stop[1]);
	S.uffd = S.stop[0] = S.stop[1] = -1;
	sigaction(SIGTRAP, &S.old_trap, NULL);
	sigaction(S.sig, &S.old_step, NULL);
	S.on = false;
}

void
pmt_stores_forked(void)
{
	/* The child has no handler thread, and its mappings are not
	 * registered (no UFFD_FEATURE_EVENT_FORK): nothing to step. */
	S.on = false;
	S.uffd = S.stop[0] = S.stop[1] = -1;
	step.stepping = false;
}
