/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * thread.c -- the threads of a checkpointed process: made through libdc,
 *             stopped at every checkpoint, made again by recovery
 *
 * A thread is made by the program's clone3 with CLONE_THREAD (pthread),
 * which libdc performs itself (dc__thr_clone): the new thread sets up
 * its own syscall user dispatch (a selector byte of its own, in dc__vol),
 * its own alternate signal stack, and then enters the program with the
 * registers the program's call had.  Every thread has a slot: 0 is the
 * main thread, the others' numbers live in the thread's own TLS
 * (dc__thr_me), so a handler knows its thread without a system call.
 *
 * One lock (dc__vol.thr.lock) serialises libdc: a handler takes it
 * before touching libdc's state and drops it around every call that may
 * block (sud.c call_masked), so a thread waiting in accept or on a futex
 * holds nobody up.
 *
 * A checkpoint is taken by the main thread only (the timer is aimed at
 * it).  Round of generation g (dc__commit):
 *   1. the main thread holds the lock: no other thread is inside libdc but
 *      in a blocking call or waiting for the lock (dc__thr_stop);
 *   2. it sends DC__STOP_SIG to every other thread (tgkill) and waits for
 *      all to have parked;
 *   3. each, in stop_handler (on its own alternate stack, which is part
 *      of the image), saves its registers (dc__save_ctx) and its FS base
 *      into its slot of the table -- tracked memory, so the checkpoint
 *      holds them -- counts itself parked and waits for the release;
 *   4. the checkpoint is taken as for one thread: the signal frames on the
 *      threads' alternate stacks hold their full registers and masks;
 *   5. the release (dc__thr_go): every thread returns from its handler,
 *      a call the signal interrupted is made again (sud.c call_masked).
 * Recovery (dc__thr_recreate), once memory is the checkpoint's: each
 * thread of the table is made again by clone3 with its FS base and its
 * clear-child-tid word, sets up its dispatch and alternate stack, and
 * resumes its saved registers: inside stop_handler of step 3, where it
 * parks; the main thread resumes in dc__commit and releases them (5).
 *
 * Invariants:
 *  1. A thread's registers and frames in a checkpoint are those of step 3
 *     of that checkpoint's round: no thread but the committing one runs
 *     from the end of step 2 to the release, so no tracked byte changes
 *     between the scan and the flush (ckpt.c invariant 2) and the image
 *     is one instant of the whole process.
 *  2. DC__STOP_SIG is never blocked in program code (sud.c prot_mask),
 *     nor while a thread waits for the lock or for a commit it asked for
 *     (wait_open); libdc blocks it everywhere else, and every such place
 *     ends in one of those or in program code.
 *  3. The thread ids the program sees are those of the thread's first
 *     run (vtid): gettid answers it, tkill and tgkill aimed at it reach
 *     the thread's present one (kstate.c invariant 6).  No two threads
 *     of the table, nor a thread and the process, share an id: a thread
 *     whose kernel id is already one of them (a recovered thread's first
 *     id, or the process's, which the kernel may give out again after
 *     a recovery) gets the next free one instead, written where
 *     CLONE_PARENT_SETTID and CLONE_CHILD_SETTID had the kernel write
 *     its id (glibc's struct pthread: pthread_kill aims there) before
 *     the thread enters the program, and returned by the clone.
 *  4. A thread that ends writes no tracked byte once the lock is
 *     dropped: its clear-child-tid word is cleared and woken by libdc
 *     under the lock, and the lock is released by the same few
 *     instructions that end it (thr_exit_asm), with no stack.
 *  5. Only the main thread commits: another that needs a checkpoint (its
 *     held output is full) sends the main thread its tick and waits for
 *     the next release.
 *  6. A checkpoint writes the process's memory to its files with raw
 *     system calls (dc__pwrite_mem, the redo log's pwritev): once a
 *     process has a second thread, glibc's wrappers of cancellation
 *     points set and clear the calling thread's cancellation type in its
 *     struct pthread -- tracked memory -- around the call, so the bytes
 *     read would differ from the bytes checksummed.
 *
 * What is not supported (refused with a message, or documented): threads
 * outside the buffered and periodic protocols, under --tree or 2PC, with
 * tracking other than uffd; clone without CLONE_THREAD|CLONE_SETTLS (a
 * thread made without pthread); legacy clone(2) for threads; the main
 * thread ending before the others; robust and priority-inheritance
 * futexes (kernel state bound to thread ids).
 */
#include <asm/prctl.h>
#include <errno.h>
#include <linux/futex.h>
#include <linux/sched.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "dc_int.h"

#define ALLOW SYSCALL_DISPATCH_FILTER_ALLOW
#define BLOCK SYSCALL_DISPATCH_FILTER_BLOCK
#define V (dc__vol.thr)
#define ALT_SIZE (256u * 1024u)
#define STOP_BIT (1ull << (DC__STOP_SIG - 1))

__thread int dc__thr_me __attribute__((tls_model("initial-exec")));

/* Rolled back with the process: which threads exist, and each one's
 * registers at the last checkpoint (step 3). */
struct thr {
	uint32_t used;
	int32_t vtid;           /* its id in its first run (invariant 3) */
	uint64_t ctid;          /* CLONE_CHILD_CLEARTID word, or 0 */
	uint64_t gen;           /* the checkpoint whose round saved ctx */
	struct dc__ctx ctx;     /* step 3's registers; ctx.fsbase its TLS */
	char name[16];          /* its name, if the program gave it one
	                         * (kstate.c invariant 9) */
};
static struct {
	bool on;                /* a thread was made: the lock is in use */
	unsigned n;             /* threads besides the main one */
	unsigned next;          /* the next slot to try */
	uint64_t gen;           /* the generation of the round under way */
	struct thr t[DC__MAX_THREADS];
} T;
/* The threads' alternate signal stacks: tracked, part of every image
 * (their frames are the threads' registers at step 3).  Never cold: the
 * kernel writes signal frames there (dc__track_note). */
static char alt[DC__MAX_THREADS][ALT_SIZE] __attribute__((aligned(4096)));


/* ---- raw pieces: clone3 whose child runs fn on the new stack, and the
 * end of a thread (invariant 4) ---- */
long dc__thr_clone3(struct clone_args *ca, size_t size, void (*fn)(void));
__attribute__((noreturn)) void dc__thr_enter(const long *gregs);
__attribute__((noreturn)) void dc__thr_exit_asm(volatile int *lock,
	long status);
__asm__(
	"	.text\n"
	"	.globl dc__thr_clone3\n"
	"	.hidden dc__thr_clone3\n"
	"	.type dc__thr_clone3, @function\n"
	"dc__thr_clone3:\n"
	"	movq %rdx, %r9\n"
	"	movl $435, %eax\n" /* clone3 */
	"	syscall\n"
	"	testq %rax, %rax\n"
	"	jnz 1f\n"
	"	xorl %ebp, %ebp\n"
	"	andq $-16, %rsp\n"
	"	call *%r9\n"
	"	ud2\n"
	"1:	ret\n"
	"	.size dc__thr_clone3, .-dc__thr_clone3\n"
	/* dc__thr_enter(gregs): the program's registers (ucontext order),
	 * rax 0 as a new thread's clone returns; rcx and r11, which a
	 * system call clobbers, carry the base and the target */
	"	.globl dc__thr_enter\n"
	"	.hidden dc__thr_enter\n"
	"	.type dc__thr_enter, @function\n"
	"dc__thr_enter:\n"
	"	movq %rdi, %rcx\n"
	"	movq 0(%rcx), %r8\n"
	"	movq 8(%rcx), %r9\n"
	"	movq 16(%rcx), %r10\n"
	"	movq 32(%rcx), %r12\n"
	"	movq 40(%rcx), %r13\n"
	"	movq 48(%rcx), %r14\n"
	"	movq 56(%rcx), %r15\n"
	"	movq 64(%rcx), %rdi\n"
	"	movq 72(%rcx), %rsi\n"
	"	movq 80(%rcx), %rbp\n"
	"	movq 88(%rcx), %rbx\n"
	"	movq 96(%rcx), %rdx\n"
	"	movq 128(%rcx), %r11\n"
	"	movq 120(%rcx), %rsp\n"
	"	xorl %eax, %eax\n"
	"	jmp *%r11\n"
	"	.size dc__thr_enter, .-dc__thr_enter\n"
	/* dc__thr_exit_asm(lock, status): drop the lock, wake a waiter,
	 * exit; registers only */
	"	.globl dc__thr_exit_asm\n"
	"	.hidden dc__thr_exit_asm\n"
	"	.type dc__thr_exit_asm, @function\n"
	"dc__thr_exit_asm:\n"
	"	movq %rsi, %r8\n"
	"	movl $0, (%rdi)\n"
	"	movl $202, %eax\n" /* futex */
	"	movl $129, %esi\n" /* FUTEX_WAKE_PRIVATE */
	"	movl $1, %edx\n"
	"	syscall\n"
	"	movq %r8, %rdi\n"
	"	movl $60, %eax\n" /* exit */
	"	syscall\n"
	"	ud2\n"
	"	.size dc__thr_exit_asm, .-dc__thr_exit_asm\n");

static long
futex(volatile void *w, int op, uint32_t v)
{
	return dc__sys6(SYS_futex, (long)w, op | FUTEX_PRIVATE_FLAG, v, 0, 0,
		0);
}

/* Wait while *w == v, DC__STOP_SIG deliverable meanwhile (invariant 2):
 * a round may stop the thread here. */
static void
wait_open(volatile uint32_t *w, uint32_t v)
{
	uint64_t m = DC__SIGS_BLOCKED & ~STOP_BIT, old;
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&m, (long)&old, 8, 0,
		0);
	while (*w == v)
		futex(w, FUTEX_WAIT, v);
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0, 0);
}

bool
dc__thr_on(void)
{
	return T.on;
}

/* ---- the lock (a futex: 0 free, 1 held, 2 held with waiters) ---- */

void
dc__thr_lock(void)
{
	if (!T.on || V.owner == dc__thr_me + 1)
		return;
	int c = 0;
	if (!atomic_compare_exchange_strong((_Atomic int *)&V.lock, &c, 1)) {
		if (c != 2)
			c = atomic_exchange((_Atomic int *)&V.lock, 2);
		while (c != 0) {
			wait_open((volatile uint32_t *)&V.lock, 2);
			c = atomic_exchange((_Atomic int *)&V.lock, 2);
		}
	}
	V.owner = dc__thr_me + 1;
}

/* Drop the lock if this thread holds it; returns whether it did. */
bool
dc__thr_unlock(void)
{
	if (!T.on || V.owner != dc__thr_me + 1)
		return false;
	V.owner = 0;
	if (atomic_exchange((_Atomic int *)&V.lock, 0) == 2)
		futex(&V.lock, FUTEX_WAKE, 1);
	return true;
}

/* ---- stopping and releasing (steps 2, 3, 5) ---- */

/* Step 3's wait, on a stack of its own (invariant 1): from the moment it
 * counts itself parked the thread writes no tracked byte -- the frames
 * of its calls would change its alternate stack under the copy. */
static int
park(void)
{
	uint32_t rel = V.release;
	atomic_fetch_add((_Atomic uint32_t *)&V.parked, 1);
	futex(&V.parked, FUTEX_WAKE, 1);
	while (V.release == rel)
		futex(&V.release, FUTEX_WAIT, rel);
	return 0;
}

static void
stop_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	volatile unsigned char *sel = dc__sel();
	unsigned char prev = *sel;
	*sel = ALLOW;
	int saved_errno = errno;
	struct thr *t = &T.t[dc__thr_me];
	if (dc__save_ctx(&t->ctx) == 0) { /* step 3 */
		dc__sys6(SYS_arch_prctl, ARCH_GET_FS, (long)&t->ctx.fsbase,
			0, 0, 0, 0);
		t->gen = T.gen;
	}
	/* here too when recovery resumed the thread (dc__thr_recreate) */
	V.stopped[dc__thr_me] = true;
	dc__call_on_stack(V.wait_stack[dc__thr_me] +
		sizeof(V.wait_stack[0]), park);
	errno = saved_errno;
	*dc__sel() = prev;
}

static void
install_stop(void)
{
	struct ksigaction ka = { .handler = (uintptr_t)stop_handler,
		.flags = SA_SIGINFO | SA_ONSTACK | SA_RESTORER | SA_RESTART,
		.restorer = dc__restorer, .mask = DC__SIGS_BLOCKED };
	dc__sys6(SYS_rt_sigaction, DC__STOP_SIG, (long)&ka, 0, 8, 0, 0);
}

static uint64_t
now_ns(void)
{
	struct timespec ts;
	dc__sys6(SYS_clock_gettime, CLOCK_MONOTONIC, (long)&ts, 0, 0, 0, 0);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
wait_parked(unsigned n)
{
	uint32_t p;
	while ((p = V.parked) < n)
		futex(&V.parked, FUTEX_WAIT, p);
}

int
dc__thr_stop(void)
{
	if (!T.on)
		return 0;
	if (dc__thr_me != 0) {
		/* invariant 5: the main thread's tick, then its release */
		uint32_t rel = V.release;
		dc__sys6(SYS_tgkill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0),
			V.tid[0], DC__TIMER_SIG, 0, 0, 0);
		bool lk = dc__thr_unlock();
		wait_open(&V.release, rel);
		if (lk)
			dc__thr_lock();
		return 1;
	}
	long pid = dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	V.t0 = V.say ? now_ns() : 0;
	T.gen = dc__vol.committed + 1;
	V.parked = 0;
	unsigned n = 0;
	for (unsigned s = 1; s < DC__MAX_THREADS; s++)
		if (T.t[s].used) {
			dc__sys6(SYS_tgkill, pid, V.tid[s], DC__STOP_SIG, 0, 0,
				0);
			n++;
		}
	DC_ASSERT(n == T.n, "thread 1");
#ifndef DC_BROKEN_THREAD_NO_WAIT /* broken build: memory copied while
                                  * the threads still run */
	wait_parked(n);
#endif
	if (V.say)
		V.stop_ns += now_ns() - V.t0;
	return 0;
}

void
dc__thr_go(void)
{
	if (!T.on || dc__thr_me != 0)
		return;
#ifndef DC_BROKEN_THREAD_NO_WAIT
	wait_parked(T.n); /* recovery: every thread made again has parked */
#endif
	V.parked = 0;
	atomic_fetch_add((_Atomic uint32_t *)&V.release, 1);
	futex(&V.release, FUTEX_WAKE, INT32_MAX);
	if (V.say && V.t0) {
		V.ckpt_ns += now_ns() - V.t0;
		if (++V.nt == 100) {
			dc__say("threads: %u besides the main one; 100 "
				"checkpoints: stopping them %lu us, the whole "
				"checkpoint %lu us (means)", T.n,
				(unsigned long)(V.stop_ns / 100000),
				(unsigned long)(V.ckpt_ns / 100000));
			V.nt = 0;
			V.stop_ns = V.ckpt_ns = 0;
		}
	}
}

bool
dc__thr_was_stopped(void)
{
	return V.stopped[dc__thr_me];
}

void
dc__thr_clear_stopped(void)
{
	V.stopped[dc__thr_me] = false;
}

/* ---- making a thread ---- */

/* A new thread, on its own stack: its dispatch, its alternate stack,
 * the program's mask, then the program's registers. */
/* A new thread of slot s: its alternate signal stack and its own
 * dispatch selector, switched on (libdc's code, ALLOW, meanwhile). */
static void
own_dispatch(int s)
{
	stack_t ss = { .ss_sp = alt[s], .ss_size = ALT_SIZE };
	dc__sys6(SYS_sigaltstack, (long)&ss, 0, 0, 0, 0, 0);
	V.sel[s] = ALLOW;
	dc__sys6(SYS_prctl, PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON,
		(long)dc__sud_begin, (long)(dc__sud_end - dc__sud_begin),
		(long)&V.sel[s], 0);
}

static void
child_start(void)
{
	int s = V.child;
	dc__thr_me = s;
	own_dispatch(s);
	while (V.named == 0) /* invariant 3: its id where glibc reads it */
		futex(&V.named, FUTEX_WAIT, 0);
	V.sel[s] = BLOCK;
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&V.mask[s], 0, 8, 0,
		0);
	V.ready = 1;
	futex(&V.ready, FUTEX_WAKE, 1);
	dc__thr_enter(V.regs[s]);
}

/* Invariant 3: r, the kernel's id of the thread of slot s, or the next
 * id no thread of the table nor the process has (PID_MAX_LIMIT wraps
 * to 300, as the kernel's ids do). */
static int32_t
free_vtid(int32_t r, unsigned s)
{
	int32_t v = r;
	for (;;) {
		bool taken = v == dc__st.vpid;
		for (unsigned k = 1; k < DC__MAX_THREADS && !taken; k++)
			taken = k != s && T.t[k].used && T.t[k].vtid == v;
#ifdef DC_BROKEN_TID_REUSE /* broken build: the kernel's id, always */
		taken = false;
#endif
		if (!taken)
			return v;
		v = v + 1 < (1 << 22) ? v + 1 : 300;
	}
}

bool
dc__thr_is_thread(long nr, const long *a)
{
	if (nr == SYS_clone)
		return (a[0] & CLONE_THREAD) != 0;
	if (nr != SYS_clone3 || (size_t)a[1] < CLONE_ARGS_SIZE_VER0)
		return false;
	const struct clone_args *ca = (const void *)a[0];
	return (ca->flags & CLONE_THREAD) != 0;
}

static long
refuse(const char *what, const char *why, long err)
{
	dc__refuse_call(what, why, (int)err);
	return err;
}

long
dc__thr_clone(long nr, const long *a, void *ucv)
{
	ucontext_t *uc = ucv;
	if (nr == SYS_clone)
		return refuse("a thread made by clone(2)", "libdc makes "
			"threads through clone3, as pthread_create does",
			-ENOSYS); /* glibc then tries clone3 */
	if (dc__st.protocol != DC_BUFFERED && dc__st.protocol != DC_PERIODIC)
		return refuse("a second thread", "threads are checkpointed "
			"under the buffered and periodic protocols only",
			-EPERM);
	if (dc__vol.tree || dc__vol.twopc)
		return refuse("a second thread", "the members of a process "
			"tree or of a two-phase commit are single-threaded",
			-EPERM);
	if (dc__vol.tracking != DC_TRACK_UFFD)
		return refuse("a second thread", "threads need the uffd "
			"tracking", -EPERM);
	struct clone_args ca;
	memset(&ca, 0, sizeof(ca));
	memcpy(&ca, (const void *)a[0], (size_t)a[1] < sizeof(ca) ?
		(size_t)a[1] : sizeof(ca));
	const uint64_t need = CLONE_VM | CLONE_THREAD | CLONE_SIGHAND |
		CLONE_SETTLS;
	if ((ca.flags & need) != need || (ca.flags & CLONE_VFORK) ||
	    ca.stack == 0 || ca.set_tid_size != 0 || ca.cgroup != 0)
		return refuse("a thread made without pthread's clone3 flags",
			"libdc re-creates threads with their own stack and "
			"TLS (CLONE_VM, CLONE_SIGHAND, CLONE_SETTLS)", -EPERM);
	if (T.n + 1 >= DC__MAX_THREADS)
		return refuse("a thread", "libdc checkpoints at most 16 "
			"threads", -EAGAIN);
	unsigned s = 0;
	for (unsigned k = 0; k < DC__MAX_THREADS - 1 && s == 0; k++) {
		unsigned c = 1 + (T.next + k) % (DC__MAX_THREADS - 1);
		if (!T.t[c].used)
			s = c;
	}
	T.next = s; /* round robin: an ended thread's stack rests a while */
	if (!T.on) {
		/* from now on: every cold region hot, none cools (its
		 * mapping may hold a thread's stack or TLS, which the kernel
		 * writes), the lock in use, held by this thread */
		dc__track_warm_all();
		install_stop();
		V.say = getenv("DC_THREAD_TIMES") != NULL;
		V.tid[0] = (int)dc__sys6(SYS_gettid, 0, 0, 0, 0, 0, 0);
		V.lock = 1;
		V.owner = dc__thr_me + 1;
		T.on = true;
	}
	memcpy(V.regs[s], uc->uc_mcontext.gregs, sizeof(V.regs[s]));
	V.regs[s][REG_RSP] = (long)(ca.stack + ca.stack_size);
	uint64_t m;
	memcpy(&m, &uc->uc_sigmask, 8);
	V.mask[s] = m & ~(STOP_BIT | (1ull << (SIGSYS - 1)) |
		(1ull << (SIGSEGV - 1)));
	V.child = (int)s;
	V.ready = 0;
	V.named = 0;
	memset(&T.t[s], 0, sizeof(T.t[s]));
	T.t[s].used = 1;
	T.t[s].ctid = (ca.flags & CLONE_CHILD_CLEARTID) ? ca.child_tid : 0;
	T.t[s].ctx.fsbase = ca.tls;
	long r = dc__thr_clone3((struct clone_args *)a[0], (size_t)a[1],
		child_start);
	if (r < 0) {
		T.t[s].used = 0;
		return r;
	}
	V.tid[s] = (int)r;
	int32_t v = free_vtid((int32_t)r, s);
	if (v != r) {
		/* invariant 3: the kernel wrote r for the program */
		if (ca.flags & CLONE_PARENT_SETTID)
			*(volatile int32_t *)(uintptr_t)ca.parent_tid = v;
		if (ca.flags & CLONE_CHILD_SETTID)
			*(volatile int32_t *)(uintptr_t)ca.child_tid = v;
	}
	T.t[s].vtid = v;
	T.n++;
	V.named = 1;
	futex(&V.named, FUTEX_WAKE, 1);
	while (V.ready == 0)
		futex(&V.ready, FUTEX_WAIT, 0);
	return v;
}

/* SYS_exit of a thread but the main one (invariant 4); the main one ends
 * the process as before (returns 0). */
long
dc__thr_exit(const long *a)
{
	int me = dc__thr_me;
	if (!T.on)
		return 0;
	if (me == 0) {
		if (T.n == 0)
			return 0;
		dc__say("refused: the main thread ended before its other "
			"threads; libdc's checkpoints are taken by the main "
			"thread: the process ends");
		dc__sys6(SYS_exit_group, 70, 0, 0, 0, 0, 0);
	}
	struct thr *t = &T.t[me];
	uint64_t ctid = t->ctid;
	t->used = 0;
	T.n--;
	V.tid[me] = 0;
	if (ctid) {
		/* the kernel would clear it after the lock is dropped */
		dc__sys6(SYS_set_tid_address, 0, 0, 0, 0, 0, 0);
		*(volatile int *)(uintptr_t)ctid = 0;
		dc__sys6(SYS_futex, (long)ctid, FUTEX_WAKE, INT32_MAX, 0, 0, 0);
	}
	V.owner = 0;
	dc__thr_exit_asm(&V.lock, a[0]);
}

/* ---- thread ids (invariant 3) ---- */

long
dc__thr_gettid(void)
{
	return dc__thr_me == 0 ? dc__st.vpid : T.t[dc__thr_me].vtid;
}

/* A thread id the program knows, to this incarnation's; -1 if it is no
 * thread of the table. */
long
dc__thr_real_tid(long tid)
{
	if (!T.on)
		return -1;
	for (unsigned s = 1; s < DC__MAX_THREADS; s++)
		if (T.t[s].used && T.t[s].vtid == tid)
			return V.tid[s];
	return -1;
}

/* ---- recovery ---- */

static void
child_resume(void)
{
	int s = V.child;
	own_dispatch(s);
	uint64_t m = DC__SIGS_BLOCKED;
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&m, 0, 8, 0, 0);
	dc__resume_ctx(&T.t[s].ctx); /* into stop_handler (step 3) */
}

/* Memory is the checkpoint's: make its threads again, each parked in
 * stop_handler until the main thread's dc__commit releases them.  The
 * main thread holds the lock, as it did at the checkpoint. */
int
dc__thr_recreate(void)
{
	if (!T.on) {
		dc__thr_names_restore();
		dc__k_proc_restore();
		return 0;
	}
	install_stop();
	V.say = getenv("DC_THREAD_TIMES") != NULL;
	V.tid[0] = (int)dc__sys6(SYS_gettid, 0, 0, 0, 0, 0, 0);
	V.lock = 1;
	V.owner = 1;
	V.parked = 0;
	V.release = 0;
	unsigned made = 0;
	for (unsigned s = 1; s < DC__MAX_THREADS; s++) {
		if (!T.t[s].used)
			continue;
		/* invariant 1: saved by the checkpoint's own round */
		DC_ASSERT(T.t[s].gen == dc__st.gen, "thread 1");
		struct clone_args ca;
		memset(&ca, 0, sizeof(ca));
		ca.flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND |
			CLONE_THREAD | CLONE_SYSVSEM | CLONE_SETTLS |
			(T.t[s].ctid ? CLONE_CHILD_CLEARTID : 0);
		ca.child_tid = T.t[s].ctid;
		ca.tls = T.t[s].ctx.fsbase;
		ca.stack = (uint64_t)(uintptr_t)V.stack;
		ca.stack_size = sizeof(V.stack);
		V.child = (int)s;
		long r = dc__thr_clone3(&ca, sizeof(ca), child_resume);
		if (r < 0)
			return dc__err((int)r, "re-making thread %d: clone3: %s",
				T.t[s].vtid, strerror((int)-r));
		V.tid[s] = (int)r;
		made++;
		/* off the shared first stack before the next one uses it */
		wait_parked(made);
	}
	DC_ASSERT(made == T.n, "thread 1");
	dc__thr_names_restore();
	dc__k_proc_restore();
	return 0;
}

/* ---- names (kstate.c invariant 9) ---- */

/* A thread's name, as the program sets it (a write to its comm file,
 * prctl(PR_SET_NAME)): up to 15 bytes, a final newline dropped. */
void
dc__thr_name(long vtid, const char *name, size_t n)
{
	int s = -1;
	if (vtid == dc__st.vpid)
		s = 0;
	for (unsigned i = 1; s < 0 && i < DC__MAX_THREADS; i++)
		if (T.t[i].used && T.t[i].vtid == vtid)
			s = (int)i;
	if (s < 0)
		return;
	size_t k = strnlen(name, n);
	if (k > 0 && name[k - 1] == '\n')
		k--;
	if (k > sizeof(T.t[s].name) - 1)
		k = sizeof(T.t[s].name) - 1;
	char b[16] = { 0 };
	memcpy(b, name, k);
	if (memcmp(b, T.t[s].name, sizeof(b)) != 0)
		memcpy(T.t[s].name, b, sizeof(b));
}

/* Recovery: each thread made again, and the main thread, get the names
 * they had at the checkpoint. */
void
dc__thr_names_restore(void)
{
	for (unsigned s = 0; s < DC__MAX_THREADS; s++) {
		if (!T.t[s].name[0] || (s > 0 && !T.t[s].used))
			continue;
		if (s == 0) {
			dc__sys6(SYS_prctl, PR_SET_NAME, (long)T.t[0].name, 0,
				0, 0, 0);
			continue;
		}
		char p[64];
		snprintf(p, sizeof(p), "/proc/self/task/%d/comm", V.tid[s]);
		long fd = dc__sys6(SYS_openat, AT_FDCWD, (long)p,
			O_WRONLY | O_CLOEXEC, 0, 0, 0);
		if (fd < 0)
			continue;
		dc__sys6(SYS_write, fd, (long)T.t[s].name,
			(long)strlen(T.t[s].name), 0, 0, 0);
		dc__sys6(SYS_close, fd, 0, 0, 0, 0, 0);
	}
}

/* ---- invariant 6 ---- */

int
dc__pwrite_mem(int fd, const void *buf, size_t n, off_t off)
{
	const char *p = buf;
	while (n > 0) {
		long w = dc__sys6(SYS_pwrite64, fd, (long)p, (long)n,
			(long)off, 0, 0);
		if (w == -EINTR)
			continue;
		if (w < 0)
			return (int)w;
		if (w == 0)
			return -EIO;
		p += w;
		n -= (size_t)w;
		off += w;
	}
	return 0;
}
