/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sud.c -- seeing every system call: syscall user dispatch, the vDSO,
 *          signal delivery, and the recovery protocols that act on them
 *
 * PR_SET_SYSCALL_USER_DISPATCH sends SIGSYS for every `syscall` executed
 * outside [dc__sud_begin, dc__sud_end) while dc__vol.selector is BLOCK.
 * The handler (on libdc's alternate stack, every signal blocked) sets the
 * selector to ALLOW, classifies the call, applies the protocol, performs
 * the call itself, stores the result in the saved rax, and sets BLOCK
 * again before rt_sigreturn (issued from dc__restorer, inside the allowed
 * range).
 *
 * Invariants:
 *  1. libdc code runs with the selector at ALLOW; program code (including
 *     the program's signal handlers, called from the wrapper) at BLOCK.
 *  2. SIGSYS is never blocked: it is removed from every mask the program
 *     sets (a blocked SIGSYS would kill the process at the next call).
 *  3. Every handler the program installs is wrapped, so delivery is seen
 *     (a non-deterministic event), and uses dc__restorer.
 *  4. A commit for a visible event happens before the call; a commit for a
 *     non-deterministic event happens after it, once its result is in
 *     memory (the saved rax is written only after the commit returns,
 *     from a local that lives in the checkpointed frames).
 *  5. vDSO time functions are patched into real system calls so they
 *     trap like any other (thesis: gettimeofday is non-deterministic).
 *  6. From a SIGSEGV to the moment its handler has decided whether it is
 *     a cold-region (WP: protected-page) fault, every other signal is
 *     blocked (the handler's sa_mask).  Otherwise a signal pending at the
 *     fault -- the checkpoint timer, above all when commits on a disk
 *     file system take longer than the interval -- is delivered on top of
 *     the SIGSEGV frame before its handler's first instruction, and the
 *     commit it makes may warm the region (dc__track_refold, the
 *     arguments of its own calls): the handler then finds nothing cold,
 *     takes the fault for the program's and sets the default action, and
 *     the next cold-region fault kills the process.
 *  7. libdc's own signals never end a program's call: a blocking call
 *     that the interval's tick or a checkpoint's stop (thread.c)
 *     interrupted, while none of the program's handlers ran, is made
 *     again (blocking), with what is left of a relative timeout (struct
 *     again): the program sees one call that waited its time, never an
 *     EINTR no signal of its own caused.
 *  8. The direct path (dc__direct, direct.c) does what the trap does, by
 *     the same code (call_work, dc__dispatch): libdc's wrappers of the
 *     hot libc calls (read, write, pread, pwrite, fdatasync, send*,
 *     recv*, epoll_wait, poll, accept, getrandom, ...) enter it with every signal but SIGSEGV
 *     blocked and the selector at ALLOW, as the SIGSYS handler runs, so
 *     invariants 1, 4, 6 and 7 hold unchanged: a tick or a checkpoint's
 *     stop that comes meanwhile is pending until the wrapper puts back
 *     the program's mask at BLOCK (or interrupts a blocking call, which
 *     runs under the program's mask, as from the trap); a commit made in
 *     the work saves the wrapper's frame on the program's stack, and a
 *     run resumed there restores the program's mask from it, as
 *     rt_sigreturn does from the signal frame.  Anything else -- libc's
 *     internal calls, raw `syscall` instructions -- still traps: the
 *     direct path saves a signal, it sees nothing the trap would not.
 *     libdc's own calls of a wrapped entry go to the kernel as they
 *     are: from a program thread they come at ALLOW, and from the
 *     checkpoint writer, which shares the main thread's TLS and so its
 *     selector, the wrapper tells them by the stack (dc__on_writer).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <ucontext.h>
#include <unistd.h>

#include "dc_int.h"

#define ALLOW SYSCALL_DISPATCH_FILTER_ALLOW
#define BLOCK SYSCALL_DISPATCH_FILTER_BLOCK


/* The program's call, made by libdc.  EFAULT may be a cold region the
 * kernel could not write (track.c invariant 2): then once more, with every
 * region hot. */
static long
pass(long nr, const long *a)
{
	long r = dc__sys6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	if (r == -EFAULT && dc__track_efault())
		r = dc__sys6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	return r;
}

/* SIGSYS and SIGSEGV stay deliverable whatever the program asks
 * (invariant 2; track.c). */
static uint64_t
prot_mask(uint64_t m)
{
	m &= ~(1ull << (SIGSYS - 1));
	m &= ~(1ull << (SIGSEGV - 1));
	m &= ~(1ull << (DC__STOP_SIG - 1)); /* thread.c invariant 2 */
	if (dc__vol.twopc) /* the coordinator's signal (twopc.c) */
		m &= ~(1ull << (DC__TIMER_SIG - 1));
	return m;
}

static void timer_handler(int sig, siginfo_t *si, void *uc);

/* The tick's handler with or without SA_RESTART (held.c invariant 7). */
static void
tick_restarts(bool on)
{
	struct ksigaction ka = { .handler = (uintptr_t)timer_handler,
		.flags = SA_SIGINFO | SA_ONSTACK | SA_RESTORER |
			(on ? SA_RESTART : 0),
		.restorer = dc__restorer, .mask = DC__SIGS_BLOCKED };
	dc__sys6(SYS_rt_sigaction, DC__TIMER_SIG, (long)&ka, 0, 8, 0, 0);
}

/* The program's handlers run in this thread so far (sig_wrapper). */
static __thread unsigned prog_sigs;

/* A blocking call made again (invariant 7): its arguments, the relative
 * timeout among them rewritten to what is left of it.  Calls whose
 * timeout the kernel itself updates (select, pselect6, ppoll) and
 * absolute ones (TIMER_ABSTIME, FUTEX_WAIT_BITSET) are made again as
 * they are. */
struct again {
	long a[6];
	unsigned made;          /* calls made so far */
	int ix;                 /* the timeout's argument; -1: none */
	bool ms;                /* in milliseconds (an int), else a timespec */
	int clock;
	long t0;                /* the first call's start on clock (ns) */
	long end;               /* its deadline (ns); -1: not known yet */
	struct timespec ts;     /* the timespec of a call made again */
};

static long
clock_ns(int clock)
{
	struct timespec t;
	if (dc__sys6(SYS_clock_gettime, clock, (long)&t, 0, 0, 0, 0) != 0)
		return 0;
	return t.tv_sec * 1000000000l + t.tv_nsec;
}

static void
again_init(long nr, const long *a, struct again *g)
{
	memcpy(g->a, a, sizeof(g->a));
	g->made = 0;
	g->ix = -1;
	g->ms = false;
	g->clock = CLOCK_MONOTONIC;
	g->end = -1;
	switch (nr) {
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
		if ((int)a[3] > 0) {
			g->ix = 3;
			g->ms = true;
		}
		break;
	case SYS_poll:
		if ((int)a[2] > 0) {
			g->ix = 2;
			g->ms = true;
		}
		break;
	case SYS_nanosleep:
		g->ix = a[0] ? 0 : -1;
		break;
	case SYS_clock_nanosleep:
		if (!(a[1] & TIMER_ABSTIME) && a[2]) {
			g->ix = 2;
			g->clock = (int)a[0];
		}
		break;
	case SYS_epoll_pwait2:
	case SYS_rt_sigtimedwait:
		g->ix = a[nr == SYS_epoll_pwait2 ? 3 : 2] ?
			(nr == SYS_epoll_pwait2 ? 3 : 2) : -1;
		break;
	case SYS_futex:
		if ((a[1] & 0x7f) == FUTEX_WAIT && a[3])
			g->ix = 3;
		break;
	default:
		break;
	}
	if (g->ix >= 0) {
		g->t0 = clock_ns(g->clock);
		if (g->ms)
			g->end = g->t0 + (long)(int)a[g->ix] * 1000000l;
	}
}

/* Before a call made again: what is left of the timeout. */
static void __attribute__((unused))
again_left(struct again *g)
{
	if (g->ix < 0)
		return;
	if (g->end < 0) {
		/* the first call read the program's timespec without a
		 * fault (it returned EINTR, not EFAULT) */
		const struct timespec *u = (const void *)g->a[g->ix];
		g->end = g->t0 + u->tv_sec * 1000000000l + u->tv_nsec;
	}
	long left = g->end - clock_ns(g->clock);
	if (left < 0)
		left = 0;
	if (g->ms) {
		g->a[g->ix] = (left + 999999) / 1000000;
		return;
	}
	g->ts.tv_sec = left / 1000000000l;
	g->ts.tv_nsec = left % 1000000000l;
	g->a[g->ix] = (long)&g->ts;
}

/* The call under mask m, libdc's lock dropped meanwhile (thread.c): a
 * thread stopped by a checkpoint's round in the call makes it again. */
static long
call_masked(long nr, struct again *g, const uint64_t *m)
{
	uint64_t old, psp = dc__vol.prog_sp;
	bool lk = dc__thr_unlock();
	long r;
	do {
#ifndef DC_BROKEN_AGAIN_FULL /* broken build: made again with the whole
                              * timeout */
		if (g->made++ > 0)
			again_left(g);
#endif
		dc__thr_clear_stopped();
		dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)m, (long)&old,
			8, 0, 0);
		r = pass(nr, g->a);
		dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0,
			0);
	} while (r == -EINTR && dc__thr_was_stopped());
	if (lk)
		dc__thr_lock();
	dc__vol.prog_sp = psp;
	return r;
}

/* A call that may block: run it under the program's signal mask, so a
 * signal interrupts it (or restarts it) as it would without libdc.  With
 * output held (the buffered protocol), the interval's tick interrupts it
 * instead of being left to the next one: the checkpoint is taken, which
 * releases the output, and the call is made again (held.c invariant 7)
 * with what is left of its timeout.  With threads, the main
 * thread's calls always are (thread.c invariant 5: it takes every
 * checkpoint, and may wait in pthread_join while the others hold
 * output); the others' never.  Whatever libdc's signal interrupted the
 * call, it is made again with what is left of its timeout (invariant
 * 7). */
static long
blocking(long nr, const long *a, ucontext_t *uc)
{
	/* a program's handler that runs while the call waits ends it: its
	 * EINTR is the program's, never made again (a server's SIGTERM
	 * handler sets a flag its loop checks after epoll_wait) */
	unsigned sigs = prog_sigs;
	uint64_t m;
	memcpy(&m, &uc->uc_sigmask, 8);
	m = prot_mask(m);
	bool held = !dc__vol.twopc && dc__thr_me == 0 &&
		(dc__held_waiting() || dc__thr_on());
	if (held && dc__vol.held.tick_missed) {
		/* the tick came in libdc since the last checkpoint: its
		 * checkpoint now, before the wait (a run resumed here, 1,
		 * makes the call) */
		if (dc__commit() < 0)
			return -EIO;
		held = dc__held_waiting() || dc__thr_on();
	}
	if (held) {
		dc__vol.held.tick_missed = false;
		tick_restarts(false);
	}
	struct again g;
	again_init(nr, a, &g);
	unsigned ticks __attribute__((unused)) = dc__vol.ticks_in;
	long r = call_masked(nr, &g, &m);
	if (held) {
		/* threads: the tick interrupts the call made again too (a
		 * thread's output may fill meanwhile) */
		bool thr = dc__thr_on();
		if (!thr)
			tick_restarts(true);
		while (r == -EINTR && dc__vol.held.tick_missed &&
		       prog_sigs == sigs) {
			dc__vol.held.tick_missed = false;
			/* before the call, which has not happened: a run
			 * resumed here (1) makes it */
			if (dc__commit() < 0)
				return -EIO;
			if (thr) /* a run resumed here has SA_RESTART */
				tick_restarts(false);
			ticks = dc__vol.ticks_in;
			r = call_masked(nr, &g, &m);
		}
		if (thr)
			tick_restarts(true);
	}
	/* no output held: the tick's handler restarts what SA_RESTART
	 * restarts; what it does not (epoll_wait, poll, nanosleep, ...) is
	 * made again here (invariant 7) */
#ifndef DC_BROKEN_TICK_EINTR /* broken build: the tick's EINTR returned */
	while (r == -EINTR && dc__vol.ticks_in != ticks &&
	       prog_sigs == sigs && !dc__vol.tp_poked) {
		ticks = dc__vol.ticks_in;
		r = call_masked(nr, &g, &m);
	}
#endif
	/* the coordinator's signal interrupted the call: the round first,
	 * then the call again (twopc.c) */
	while (r == -EINTR && dc__vol.tp_poked && prog_sigs == sigs) {
		dc__twopc_serve();
		r = call_masked(nr, &g, &m);
	}
	return r;
}

long
dc__blocking(long nr, const long *a, void *uc)
{
	return blocking(nr, a, uc);
}

/* ---- protocol actions ---- */

void
dc__nd_event(void)
{
	dc__st.stats.nd_events++;
	switch (dc__st.protocol) {
	case DC_CAND:
	case DC_CAND_LOG:
		dc__commit();
		break;
	case DC_CBNDVS:
	case DC_CBNDVS_LOG:
	case DC_CBNDV_2PC:
		dc__st.nd_flag = true;
		break;
	default:
		break;
	}
}

static void
before_visible(void)
{
	dc__st.stats.visible_events++;
	switch (dc__st.protocol) {
	case DC_CPVS:
	case DC_CPV_2PC: /* a round (ckpt.c, twopc.c) */
		dc__commit();
		break;
	case DC_CBNDV_2PC:
		if (dc__st.nd_flag)
			dc__commit();
		break;
	case DC_CBNDVS:
	case DC_CBNDVS_LOG:
#ifndef DC_BROKEN_NO_VISIBLE_COMMIT
		if (dc__st.nd_flag)
			dc__commit();
#endif
		break;
	default:
		break;
	}
}

static int
fd_kind(int fd)
{
	int d = dc__desc_of(fd);
	if (d >= 0)
		return dc__st.desc[d].kind;
	struct stat st;
	if (fstat(fd, &st) != 0)
		return 0;
	if (S_ISREG(st.st_mode))
		return DC__K_FILE;
	if (S_ISFIFO(st.st_mode))
		return DC__K_PIPE;
	if (S_ISSOCK(st.st_mode))
		return DC__K_SOCK;
	if (S_ISCHR(st.st_mode))
		return isatty(fd) ? DC__K_TTY : DC__K_CHR;
	return DC__K_OTHER;
}

static bool
is_nd_kind(int k)
{
	return k == DC__K_TTY || k == DC__K_PIPE || k == DC__K_SOCK ||
		k == DC__K_CHR;
}

static void
fatal_replay(int rc)
{
	dc__say("replay: %s (%s); stopping", dc_strerror(rc), rio_errormsg());
	dc__vol.fatal = true;
	dc__sys6(SYS_exit_group, 70, 0, 0, 0, 0, 0);
}

static uint64_t
iov_total(const struct iovec *iov, long cnt)
{
	uint64_t t = 0;
	for (long i = 0; i < cnt; i++)
		t += iov[i].iov_len;
	return t;
}

static void
scatter(const struct iovec *iov, long cnt, const char *p, uint64_t n)
{
	for (long i = 0; i < cnt && n > 0; i++) {
		uint64_t k = iov[i].iov_len < n ? iov[i].iov_len : n;
		memcpy(iov[i].iov_base, p, k);
		p += k;
		n -= k;
	}
}

static void
gather(const struct iovec *iov, long cnt, char *p, uint64_t n)
{
	for (long i = 0; i < cnt && n > 0; i++) {
		uint64_t k = iov[i].iov_len < n ? iov[i].iov_len : n;
		memcpy(p, iov[i].iov_base, k);
		p += k;
		n -= k;
	}
}

/* Answer an input call from the log (replay after recovery). */
static long
replay(long nr, long *a, int type, int fd)
{
	char *pl = dc__vol.io;
	struct dc_log_ent e;
	int rc = dc__nd_next(&e, pl, sizeof(dc__vol.io));
	if (rc)
		fatal_replay(rc);
	if (e.type != type || e.a != fd) {
		dc__err(DC_EREPLAY, "call %ld on fd %d, log has type %u fd %ld",
			nr, fd, e.type, (long)e.a);
		fatal_replay(DC_EREPLAY);
	}
	switch (nr) {
	case SYS_read:
		memcpy((void *)a[1], pl, e.len);
		break;
	case SYS_readv:
		scatter((const struct iovec *)a[1], a[2], pl, e.len);
		break;
	case SYS_recvfrom: {
		uint64_t alen = (uint64_t)e.c, dl = e.len - alen;
		memcpy((void *)a[1], pl, dl);
		if (a[4] && a[5]) {
			socklen_t *lp = (socklen_t *)a[5];
			memcpy((void *)a[4], pl + dl,
				alen < *lp ? alen : *lp);
			*lp = (socklen_t)alen;
		}
		break;
	}
	case SYS_select:
	case SYS_pselect6: {
		size_t sl = ((size_t)a[0] + 63) / 64 * 8;
		for (int i = 0; i < 3; i++)
			if (a[1 + i])
				memcpy((void *)a[1 + i], pl + i * sl, sl);
		break;
	}
	case SYS_poll:
	case SYS_ppoll:
		memcpy((void *)a[0], pl, e.len);
		break;
	}
	if (fd == 0 && e.b > 0 && (nr == SYS_read || nr == SYS_readv))
		dc__st.stats.input_bytes += (uint64_t)e.b;
	return e.b;
}

static long
input(long nr, long *a, ucontext_t *uc, int type, int fd)
{
	bool log = DC__PROT_LOG(dc__st.protocol);
	if (log && dc__vol.replaying)
		return replay(nr, a, type, fd);
	long r = blocking(nr, a, uc);
	if (fd == 0 && r > 0 && (nr == SYS_read || nr == SYS_readv))
		dc__st.stats.input_bytes += (uint64_t)r;
	if (!log) {
		dc__nd_event();
		return r;
	}
	uint64_t n = r > 0 ? (uint64_t)r : 0;
	int rc = 0;
	switch (nr) {
	case SYS_read:
		rc = dc__nd_append(type, fd, r, 0, (void *)a[1], n, NULL, 0);
		break;
	case SYS_readv: {
		char *g = dc__vol.io;
		if (n > sizeof(dc__vol.io)) {
			rc = dc__err(DC_ELIMIT, "readv of %lu bytes cannot be "
				"logged", (unsigned long)n);
			break;
		}
		gather((const struct iovec *)a[1], a[2], g, n);
		rc = dc__nd_append(type, fd, r, 0, g, n, NULL, 0);
		break;
	}
	case SYS_recvfrom: {
		socklen_t al = a[5] ? *(socklen_t *)a[5] : 0;
		rc = dc__nd_append(type, fd, r, al, (void *)a[1], n,
			(void *)a[4], a[4] ? al : 0);
		break;
	}
	case SYS_select:
	case SYS_pselect6: {
		size_t sl = ((size_t)a[0] + 63) / 64 * 8;
		char *sets = dc__vol.io; /* 3 x at most 128 bytes */
		memset(sets, 0, 3 * sl);
		for (int i = 0; i < 3; i++)
			if (a[1 + i])
				memcpy(sets + i * sl, (void *)a[1 + i], sl);
		rc = dc__nd_append(type, fd, r, a[0], sets, 3 * sl, NULL, 0);
		break;
	}
	case SYS_poll:
	case SYS_ppoll:
		rc = dc__nd_append(type, fd, r, 0, (void *)a[0],
			(uint64_t)a[1] * sizeof(struct pollfd), NULL, 0);
		break;
	}
	if (rc) {
		/* not logged: fall back to committing after it */
		dc__say("input log: %s; committing instead", rio_errormsg());
		dc__nd_event();
	}
	return r;
}

/* write/pwrite/sendto... : visible events, or file changes to undo */
static long
output(long nr, long *a, ucontext_t *uc, int fd)
{
	int k = fd_kind(fd);
	/* /proc and /sys: state, not output; done at once, a thread's name
	 * recorded (kstate.c invariant 9) */
	if (dc__k_proc(fd)) {
		if (nr == SYS_write)
			dc__k_proc_write(fd, (const void *)a[1], (size_t)a[2]);
		return pass(nr, a);
	}
	if (k == DC__K_FILE && dc__vol.active) {
		int64_t off;
		uint64_t len;
		switch (nr) {
		case SYS_pwrite64:
			off = a[3];
			len = (uint64_t)a[2];
			break;
		case SYS_pwritev:
			off = a[3];
			len = iov_total((const struct iovec *)a[1], a[2]);
			break;
		default: {
			int fl = (int)dc__sys6(SYS_fcntl, fd, F_GETFL, 0, 0, 0,
				0);
			struct stat st;
			if (fl >= 0 && (fl & O_APPEND) && fstat(fd, &st) == 0)
				off = st.st_size;
			else
				off = dc__sys6(SYS_lseek, fd, 0, SEEK_CUR, 0, 0,
					0);
			len = nr == SYS_writev ?
				iov_total((const struct iovec *)a[1], a[2]) :
				(uint64_t)a[2];
		}
		}
		int rc = off >= 0 ? dc__fu_before_write(fd, off, len) : 0;
		if (rc) {
			dc__say("cannot log a file write: %s", rio_errormsg());
			return -EIO;
		}
		return pass(nr, a);
	}
	if (!is_nd_kind(k) || (dc__vol.twopc && k == DC__K_SOCK) ||
	    (dc__vol.tree && dc__tree_internal(fd)) ||
	    dc__k_internal(fd)) /* a pipe inside the process (kstate.c) */
		return blocking(nr, a, uc); /* 2pc: a send is not visible */
	before_visible();
	long r = blocking(nr, a, uc);
	dc__event(nr, a, r);
	return r;
}

/* ---- signals ---- */

static void sig_wrapper(int sig, siginfo_t *si, void *uc);
static void segv_handler(int sig, siginfo_t *si, void *uc);

static int
install(int sig, uintptr_t handler, unsigned long flags, uint64_t mask)
{
	struct ksigaction ka = { 0 };
	ka.mask = prot_mask(mask);
	if (sig == SIGSEGV) {
		/* always libdc's: cold-region faults first (track.c); on its
		 * own stack, and nested (a cold fault inside a handler);
		 * every other signal blocked (invariant 6) */
		ka.handler = (uintptr_t)segv_handler;
		ka.flags = SA_SIGINFO | SA_ONSTACK | SA_NODEFER | SA_RESTORER |
			(flags & SA_RESTART);
#ifndef DC_BROKEN_SEGV_UNMASKED
		ka.mask = DC__SIGS_BLOCKED;
#endif
	} else if (handler == (uintptr_t)SIG_DFL ||
		   handler == (uintptr_t)SIG_IGN) {
		ka.handler = handler;
		ka.flags = (flags & ~SA_SIGINFO) | SA_RESTORER;
	} else {
		ka.handler = (uintptr_t)sig_wrapper;
		ka.flags = flags | SA_SIGINFO | SA_RESTORER;
		ka.flags &= ~(unsigned long)SA_RESETHAND;
	}
	ka.restorer = dc__restorer;
	return (int)dc__sys6(SYS_rt_sigaction, sig, (long)&ka, 0, 8, 0, 0);
}

void
dc__install_handler(int sig)
{
	const struct dc__sigrec *r = &dc__st.sig[sig];
	uint64_t m;
	memcpy(&m, &r->mask, 8);
	install(sig, r->handler, r->flags, m);
}

/* The program's stack pointer while a handler of libdc runs, for a commit
 * made there (track.c copies the live part of the stack); the previous
 * one is returned, to be put back. */
static uint64_t
enter(void *ucv)
{
	uint64_t prev = dc__vol.prog_sp;
	const ucontext_t *uc = ucv;
	dc__vol.prog_sp = (uint64_t)uc->uc_mcontext.gregs[REG_RSP];
	return prev;
}

static void
sig_wrapper(int sig, siginfo_t *si, void *uc)
{
	volatile unsigned char *sel = dc__sel(); /* this thread's */
	unsigned char prev = *sel;
	/* the stack pointer is the committing thread's: the main one's */
	uint64_t psp = dc__thr_me == 0 ? enter(uc) : 0;
	*sel = ALLOW;
	/* a commit runs with every signal blocked (ckpt.c) */
	uint64_t all = DC__SIGS_BLOCKED, old;
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&old, 8, 0,
		0);
	dc__nd_event(); /* the state committed includes this signal's frame */
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0, 0);
	/* before the program's handler, which may longjmp out */
	if (dc__thr_me == 0)
		dc__vol.prog_sp = psp;
	struct dc__sigrec *r = &dc__st.sig[sig];
	uintptr_t h = r->handler;
	unsigned long fl = r->flags;
	if (fl & SA_RESETHAND) {
		r->handler = (uintptr_t)SIG_DFL;
		r->flags &= ~(unsigned long)SA_SIGINFO;
		dc__install_handler(sig);
	}
	*sel = BLOCK;
	if (h == (uintptr_t)SIG_IGN) {
		/* ignored meanwhile */
	} else if (h == (uintptr_t)SIG_DFL) {
		*sel = ALLOW;
		dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0), sig,
			0, 0, 0, 0);
	} else {
		prog_sigs++;
		if (fl & SA_SIGINFO)
			((void (*)(int, siginfo_t *, void *))h)(sig, si, uc);
		else
			((void (*)(int))h)(sig);
	}
#ifdef DC_TEST_CRASHPOINTS
	/* test builds: a tick missed between the handler and the end of the
	 * call it interrupted, as one can be */
	if (dc__vol.sig_tick)
		dc__vol.held.tick_missed = true;
#endif
	*sel = prev;
}

/* SIGSEGV: a write into a cold region (or, WP, a protected page) is made
 * good here; anything else is the program's (its handler through the
 * wrapper, or the default action: death, by the same fault again).
 * Every signal but SIGSEGV is blocked from the fault to the check
 * (invariant 6): the program's handler gets the program's mask back. */
static void
segv_handler(int sig, siginfo_t *si, void *uc)
{
	/* page-fault error code: bit 1 set for a write */
	bool write = ((ucontext_t *)uc)->uc_mcontext.gregs[REG_ERR] & 2;
#ifdef DC_TEST_CRASHPOINTS
	if (dc__vol.segv_tick) /* a tick between the fault and the check */
		dc__sys6(SYS_tgkill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0),
			dc__sys6(SYS_gettid, 0, 0, 0, 0, 0, 0), DC__TIMER_SIG,
			0, 0, 0);
#endif
	if (si->si_code == SEGV_ACCERR &&
	    dc__track_fault((uint64_t)(uintptr_t)si->si_addr, write))
		return;
	const struct dc__sigrec *r = &dc__st.sig[SIGSEGV];
	uintptr_t h = r->handler;
	if (h != (uintptr_t)SIG_DFL && h != (uintptr_t)SIG_IGN) {
		/* the mask the kernel would have set for the program's own
		 * handler: the interrupted one and the handler's */
		uint64_t m, hm;
		memcpy(&m, &((ucontext_t *)uc)->uc_sigmask, 8);
		memcpy(&hm, &r->mask, 8);
		m = prot_mask(m | hm);
		dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&m, 0, 8, 0,
			0);
		sig_wrapper(sig, si, uc);
		return;
	}
	struct ksigaction ka = { .handler = (uintptr_t)SIG_DFL,
		.flags = SA_RESTORER, .restorer = dc__restorer };
	dc__sys6(SYS_rt_sigaction, SIGSEGV, (long)&ka, 0, 8, 0, 0);
	if (si->si_code <= 0) /* sent, not a fault: send it again */
		dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0),
			SIGSEGV, 0, 0, 0, 0);
}

static long
do_sigaction(const long *a)
{
	int sig = (int)a[0];
	const struct ksigaction *act = (const void *)a[1];
	struct ksigaction *oact = (void *)a[2];
	if (sig < 1 || sig > 64)
		return -EINVAL;
	struct dc__sigrec *r = &dc__st.sig[sig];
	if (oact) {
		memset(oact, 0, sizeof(*oact));
		oact->handler = r->handler;
		oact->flags = r->flags;
		memcpy(&oact->mask, &r->mask, 8);
	}
	if (!act)
		return 0;
	if (sig == SIGKILL || sig == SIGSTOP)
		return -EINVAL;
	if (sig == SIGSYS || sig == DC__TIMER_SIG) {
		dc__refuse_call(sig == SIGSYS ? "a handler for SIGSYS" :
					"a handler for SIGRTMAX",
			sig == SIGSYS ? "libdc receives every system call "
					"through SIGSYS" :
					"libdc's checkpoint timer uses SIGRTMAX",
			-EINVAL);
		return -EINVAL;
	}
	struct dc__sigrec nr = { act->handler, act->flags, { { 0 } } };
	memcpy(&nr.mask, &act->mask, 8);
	int rc = install(sig, nr.handler, nr.flags, act->mask);
	if (rc == 0)
		*r = nr;
	return rc;
}

static long
do_sigprocmask(const long *a, ucontext_t *uc)
{
	int how = (int)a[0];
	const uint64_t *set = (const void *)a[1];
	uint64_t *oset = (void *)a[2], cur;
	memcpy(&cur, &uc->uc_sigmask, 8);
	if (oset)
		*oset = cur;
	if (set) {
		uint64_t s = *set;
		if (how == SIG_BLOCK)
			cur |= s;
		else if (how == SIG_UNBLOCK)
			cur &= ~s;
		else if (how == SIG_SETMASK)
			cur = s;
		else
			return -EINVAL;
		cur = prot_mask(cur);
		/* The handler's return restores uc_sigmask: that is where
		 * the program's mask lives while we run. */
		memcpy(&uc->uc_sigmask, &cur, 8);
	}
	return 0;
}

static long
do_sigaltstack(const long *a)
{
	const stack_t *ss = (const void *)a[0];
	stack_t *oss = (void *)a[1];
	if (oss)
		*oss = dc__st.prog_altstack;
	if (ss)
		dc__st.prog_altstack = *ss; /* libdc's stack stays in place */
	return 0;
}

/* ---- the dispatcher ---- */

static void
map_changed(uint64_t a, uint64_t len)
{
	dc__st.maps_changed = true;
	if (len == 0)
		return;
	uint64_t b = (a + len + DC__PAGE - 1) & ~(DC__PAGE - 1);
	a &= ~(DC__PAGE - 1);
	if (dc__st.nchg >= DC__MAX_CHG) {
		dc__st.chg_overflow = true;
		return;
	}
	dc__st.chg[dc__st.nchg].a = a;
	dc__st.chg[dc__st.nchg].b = b;
	dc__st.nchg++;
}

/* The same, for seg.c's private copies of memory mapped from the image. */
void
dc__map_changed(uint64_t a, uint64_t len)
{
	map_changed(a, len);
}

/* A mapping change over cold regions or protected pages: they get their
 * real protection first, so the kernel and /proc/self/maps see the
 * program's (track.c dc__track_release). */
static void
warm_span(long a, long len)
{
	dc__track_release((uint64_t)a, (uint64_t)a + (uint64_t)len, true);
}

/*
 * UNDO (seg.c): a call that would change moved memory's bytes behind the
 * undo log -- mremap (the mapping keeps its file offsets wherever it
 * goes), madvise(MADV_DONTNEED, MADV_FREE, MADV_REMOVE) (a shared page
 * keeps its bytes) -- first gets private memory there: a copy, or zeros
 * (what the advice gives private memory).  0 or -errno for the program.
 */
static long
privatize(long a, long len, bool zero)
{
	uint64_t lo = (uint64_t)a;
	uint64_t hi = ((uint64_t)a + (uint64_t)len + DC__PAGE - 1) &
		~(DC__PAGE - 1);
	/* an unaligned start fails in the kernel (EINVAL), changing nothing;
	 * anonymous memory mapped from the image (shadow.c invariant 3) is
	 * replaced the same way */
	if (len <= 0 || (lo & (DC__PAGE - 1)) ||
	    !(dc__track_undo() ? dc__seg_any(lo, hi) : dc__vol.image_mapped))
		return 0;
	dc__track_release(lo, hi, false);
	int rc = dc__seg_privatize(lo, hi, zero);
	if (rc) {
		dc__say("%s", rio_errormsg());
		return -ENOMEM;
	}
	return 0;
}

/* UNDO: an unmapped or replaced range only leaves the protected ranges
 * (its bytes cannot change any more; a failed call changed nothing). */
static void
cut_span(long a, long len)
{
	if (len > 0)
		dc__track_cut((uint64_t)a, (uint64_t)a + (uint64_t)len);
}

static long
refuse(const char *what, const char *why, long err)
{
	dc__refuse_call(what, why, (int)err);
	return err;
}

long
dc__dispatch(long nr, long *a, void *ucv)
{
	ucontext_t *uc = ucv;
	long r;
	bool handled = false;

	dc__st.stats.syscalls++;
	/* Any call naming a descriptor may move its offset (read, write,
	 * lseek, sendfile's and copy_file_range's other end): the next
	 * checkpoint asks the kernel.  Small non-descriptor arguments only
	 * cost an lseek. */
	for (int i = 0; i < 3; i++)
		if ((unsigned long)a[i] < DC__MAX_FD)
			dc__vol.fd_touched[a[i]] = true;
	/* epoll registrations; TCP through dc-keeper (keeper.c) */
	r = dc__kp_syscall(nr, a, uc, &handled);
	if (handled)
		return r;
	if (dc__held_on()) { /* the buffered protocol (held.c) */
		r = dc__held_syscall(nr, a, &handled);
		if (handled)
			return r;
	}
	switch (nr) {
	case SYS_read:
	case SYS_readv: {
		int k = fd_kind((int)a[0]);
		if (is_nd_kind(k))
			return input(nr, a, uc, DC_ND_READ, (int)a[0]);
		/* a regular file or directory does not wait for a signal:
		 * no need for the program's mask (two system calls less) */
		if (k == DC__K_FILE || k == DC__K_DIR)
			return pass(nr, a);
		return blocking(nr, a, uc);
	}
	case SYS_recvfrom:
		return input(nr, a, uc, DC_ND_RECV, (int)a[0]);
	case SYS_recvmsg:
	case SYS_recvmmsg:
		r = blocking(nr, a, uc);
		dc__nd_event();
		return r;
	case SYS_select:
	case SYS_pselect6:
		return input(nr, a, uc, DC_ND_SELECT, (int)a[0]);
	case SYS_poll:
	case SYS_ppoll:
		return input(nr, a, uc, DC_ND_POLL, (int)a[1]);
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
		r = blocking(nr, a, uc);
		dc__nd_event();
		return r;
	case SYS_write:
	case SYS_writev:
	case SYS_pwrite64:
	case SYS_pwritev:
		return output(nr, a, uc, (int)a[0]);
	case SYS_sendto:
	case SYS_sendmsg:
	case SYS_sendmmsg:
		if (dc__vol.twopc) /* a send is not visible (twopc.c) */
			return blocking(nr, a, uc);
		before_visible();
		r = blocking(nr, a, uc);
		dc__event(nr, a, r);
		return r;
	case SYS_clock_gettime:
	case SYS_gettimeofday:
	case SYS_time:
	case SYS_getrandom:
		r = pass(nr, a);
		dc__nd_event();
		return r;
	case SYS_futex: /* a thread's wait: libdc's lock dropped (thread.c) */
		if (dc__thr_on() && ((a[1] & 0x7f) == FUTEX_WAIT ||
				     (a[1] & 0x7f) == FUTEX_WAIT_BITSET))
			return blocking(nr, a, uc);
		return pass(nr, a);
	case SYS_nanosleep:
	case SYS_clock_nanosleep:
	case SYS_pause:
	case SYS_rt_sigsuspend:
	case SYS_rt_sigtimedwait:
		return blocking(nr, a, uc);
	case SYS_wait4:
	case SYS_waitid:
		r = blocking(nr, a, uc);
		if (dc__vol.tree) /* which child ended: tree.c */
			dc__tree_waited(nr, a, r);
		return r;
	case SYS_rt_sigaction:
		return do_sigaction(a);
	case SYS_rt_sigprocmask:
		return do_sigprocmask(a, uc);
	case SYS_sigaltstack:
		return do_sigaltstack(a);
	case SYS_mmap:
		if ((a[3] & MAP_SHARED) &&
		    ((a[3] & MAP_ANONYMOUS) || (a[2] & PROT_WRITE)))
			return refuse("a shared writable mapping (mmap "
				"MAP_SHARED)", "memory shared with another "
				"process cannot be rolled back", -EACCES);
		if ((a[3] & MAP_FIXED) && !dc__track_undo())
			warm_span(a[0], a[1]);
		r = pass(nr, a);
		if ((a[3] & MAP_FIXED) && r >= 0 && dc__track_undo())
			cut_span(a[0], a[1]);
		if (r >= 0)
			map_changed((uint64_t)r, (uint64_t)a[1]);
		if ((a[3] & MAP_FIXED) && r >= 0)
			map_changed((uint64_t)a[0], (uint64_t)a[1]);
		return r;
	case SYS_munmap:
		if (!dc__track_undo())
			warm_span(a[0], a[1]);
		r = pass(nr, a);
		if (r == 0 && dc__track_undo())
			cut_span(a[0], a[1]);
		if (r == 0)
			map_changed((uint64_t)a[0], (uint64_t)a[1]);
		return r;
	case SYS_mremap:
		if ((r = privatize(a[0], a[1], false)) < 0)
			return r;
		warm_span(a[0], a[1]);
		if (a[3] & MREMAP_FIXED)
			warm_span(a[4], a[2]);
		r = pass(nr, a);
		if (r >= 0) {
			map_changed((uint64_t)a[0], (uint64_t)a[1]);
			map_changed((uint64_t)r, (uint64_t)a[2]);
		}
		return r;
	case SYS_brk: {
		uint64_t old = (uint64_t)dc__sys6(SYS_brk, 0, 0, 0, 0, 0, 0);
		/* the heap's top page, and what a shrink unmaps (within the
		 * heap): out of the protected ranges */
		uint64_t cut = old - 1;
		for (unsigned i = 0; i < dc__st.nreg; i++)
			if ((dc__st.reg[i].kind & DC__R_HEAP) &&
			    (uint64_t)a[0] >= dc__st.reg[i].start &&
			    (uint64_t)a[0] < cut)
				cut = (uint64_t)a[0];
		if (!dc__track_undo())
			warm_span((long)cut, (long)(old + 1 - cut));
		r = pass(nr, a);
		if ((uint64_t)r != old) {
			uint64_t lo = old < (uint64_t)r ? old : (uint64_t)r;
			uint64_t hi = old < (uint64_t)r ? (uint64_t)r : old;
			if (dc__track_undo() && (uint64_t)r < old)
				cut_span((long)lo, (long)(hi - lo));
			map_changed(lo, hi - lo);
		}
		return r;
	}
	case SYS_mprotect:
	case SYS_pkey_mprotect:
		dc__maps_note_mprotect((uint64_t)a[0], (uint64_t)a[0] +
			(uint64_t)a[1]);
		dc__track_will_protect((uint64_t)a[0], (uint64_t)a[0] +
			(uint64_t)a[1], (int)a[2]);
		warm_span(a[0], a[1]);
		r = pass(nr, a);
		if (r == 0)
			dc__st.maps_changed = true;
		return r;
	case SYS_madvise:
		/* Guard pages (6.13) are page-table state that neither a
		 * checkpoint nor /proc/self/maps sees, and a checkpoint that
		 * copies one faults: answered as a kernel without them does,
		 * so the program falls back to mprotect(PROT_NONE), which is
		 * checkpointed. */
		if (a[2] == RIO_MADV_GUARD_INSTALL)
			return -EINVAL;
		if ((a[2] == MADV_DONTNEED || a[2] == MADV_FREE ||
		     a[2] == MADV_REMOVE) &&
		    (r = privatize(a[0], a[1], true)) < 0)
			return r;
		warm_span(a[0], a[1]);
		r = pass(nr, a);
		if (r == 0 && (a[2] == MADV_DONTNEED || a[2] == MADV_FREE ||
				      a[2] == MADV_REMOVE))
			map_changed((uint64_t)a[0], (uint64_t)a[1]);
		return r;
	case SYS_clone:
	case SYS_clone3:
	case SYS_fork:
	case SYS_vfork:
		if (dc__thr_is_thread(nr, a)) /* thread.c */
			return dc__thr_clone(nr, a, uc);
		if (dc__vol.tree) { /* a process of its own (tree.c) */
			if (dc__seg_privatize_image()) {
				dc__say("%s", rio_errormsg());
				return -ENOMEM;
			}
			return dc__tree_fork(nr == SYS_vfork ? SYS_fork : nr,
				a, uc);
		}
		if (nr == SYS_fork || nr == SYS_vfork)
			return refuse("fork", "libdc checkpoints one process",
				-EPERM);
		return refuse("a second thread or process (clone)",
			"libdc checkpoints one single-threaded process", -EPERM);
	case SYS_execve:
	case SYS_execveat:
		if (dc__vol.tree) /* a commit point of the tree (tree.c) */
			return dc__tree_exec(nr, a, uc);
		return refuse("execve", "a checkpoint cannot span another "
			"program", -EPERM);
	case SYS_pipe:
	case SYS_pipe2:
		if (dc__vol.tree) /* drained at each round (tree.c) */
			return dc__tree_pipe(nr, a);
		/* saved at each checkpoint (kstate.c invariant 8) */
		return dc__k_self_make(nr, a);
	case SYS_eventfd:
	case SYS_eventfd2:
		if (dc__vol.tree)
			return pass(nr, a);
		return dc__k_self_make(nr, a);
	case SYS_shmget:
	case SYS_shmat:
		return refuse("System V shared memory", "memory shared with "
			"another process cannot be rolled back", -EPERM);
	case SYS_io_uring_setup:
		return refuse("io_uring", "its requests bypass the system "
			"calls libdc sees", -EPERM);
	case SYS_userfaultfd:
		return refuse("userfaultfd", "libdc uses it itself", -EPERM);
	case SYS_prctl:
		if (a[0] == PR_SET_SYSCALL_USER_DISPATCH)
			return refuse("syscall user dispatch", "libdc uses it "
				"itself", -EPERM);
		r = pass(nr, a);
		if (r == 0 && a[0] == PR_SET_NAME) /* kstate.c invariant 9 */
			dc__thr_name(dc__thr_gettid(), (const char *)a[1], 16);
		return r;
	case SYS_arch_prctl:
		r = pass(nr, a);
		if (r == 0 && a[0] == 0x1002 /* ARCH_SET_FS */ &&
		    dc__thr_me == 0)
			dc__st.ctx.fsbase = (uint64_t)a[1];
		return r;
	case SYS_exit_group:
	case SYS_exit:
		if (nr == SYS_exit && dc__thr_on()) /* one thread (thread.c) */
			dc__thr_exit(a);
		if (dc__vol.tree && dc__vol.active) {
			/* its directory stays until a round commits the
			 * exit (tree.c invariant 3) */
			dc__tree_exit(a[0]);
			return pass(SYS_exit_group, a);
		}
		dc__twopc_exit((int)a[0]); /* 2PC: the end committed first */
		dc__cleanup_exit();
		return pass(SYS_exit_group, a);
	default:
		break;
	}
	r = dc__k_syscall(nr, a, uc, &handled);
	if (handled)
		return r;
	return pass(nr, a);
}

/* The work of one call of the program, shared by the trap (below) and
 * the direct path (dc__direct): the caller has set the selector to ALLOW
 * and blocked every signal; uc gives the program's mask and stack
 * pointer. */
static long
call_work(long nr, long *a, ucontext_t *uc)
{
	dc__thr_lock(); /* libdc's state is one for all threads */
	/* the program's errno is the program's: libdc's own calls (reading
	 * /proc, a round's files) must not leave theirs in it */
	int saved_errno = errno;
	uint64_t psp = enter(uc);
	dc__track_warm_args(nr, a);
	long r = dc__dispatch(nr, a, uc);
	errno = saved_errno;
	dc__vol.prog_sp = psp;
	dc__thr_unlock();
	return r;
}

static void
sigsys_handler(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	ucontext_t *uc = ucv;
	volatile unsigned char *sel = dc__sel(); /* this thread's */
	unsigned char prev = *sel;
	*sel = ALLOW;
	greg_t *g = uc->uc_mcontext.gregs;
	long a[6] = { g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10],
		g[REG_R8], g[REG_R9] };
	long r = call_work(si->si_syscall, a, uc);
	g[REG_RAX] = r;
	*sel = prev;
}

/*
 * The direct path (invariant 8): a libc wrapper of libdc (direct.c) calls
 * here instead of trapping.  It puts the thread in the state the SIGSYS
 * handler starts in -- every signal but SIGSEGV blocked, the selector at
 * ALLOW -- and keeps the program's mask and stack pointer where the
 * handler finds them in its frame.  Called from libdc itself (selector
 * ALLOW), or before the dispatch is on, it is the plain call.
 */
long
dc__direct(long nr, long *a)
{
	volatile unsigned char *sel = dc__sel(); /* this thread's */
	if (*sel != BLOCK)
		return dc__sys6(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	/* only the mask and the stack pointer are read (blocking, enter) */
	ucontext_t uc;
	uint64_t all = DC__SIGS_BLOCKED;
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all,
		(long)&uc.uc_sigmask, 8, 0, 0);
	*sel = ALLOW;
	uc.uc_mcontext.gregs[REG_RSP] =
		(greg_t)(uintptr_t)__builtin_frame_address(0);
	dc__st.stats.direct_calls++;
	/* a commit in the work saves this frame with the stack: a run
	 * resumed there comes back here, with uc's mask in it */
	long r = call_work(nr, a, &uc);
	*dc__sel() = BLOCK;
	/* a tick that came meanwhile is delivered here, at BLOCK: its
	 * checkpoint is taken as after a trapped call's sigreturn */
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&uc.uc_sigmask, 0, 8,
		0, 0);
	return r;
}

static void
timer_handler(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)si;
	(void)uc;
	unsigned char prev = dc__vol.selector;
	if (dc__vol.twopc) {
		/* the coordinator's signal: a round (twopc.c); inside libdc,
		 * after the call it interrupted (blocking) */
		if (prev != BLOCK || dc__vol.in_commit) {
			dc__vol.tp_poked = true;
			return;
		}
		uint64_t psp = enter(uc);
		dc__vol.selector = ALLOW;
		/* the signal may come between any two instructions of the
		 * program: between its errno = 0 and its check */
		int saved_errno = errno;
		dc__twopc_serve();
		errno = saved_errno;
		dc__vol.prog_sp = psp;
		dc__vol.selector = prev;
		return;
	}
	if (prev != BLOCK || dc__vol.in_commit) {
		/* inside libdc: the next tick will do, or the blocking call
		 * it interrupted takes the checkpoint (held.c invariant 7) */
		dc__vol.held.tick_missed = true;
		dc__vol.ticks_in++; /* invariant 7; untracked, as a tick
		                     * may come while memory is copied */
		if (!dc__vol.in_commit)
			dc__kp_check(); /* a wait that commits nothing */
		return;
	}
	dc__vol.selector = ALLOW;
	dc__thr_lock(); /* the main thread's (thread.c invariant 5) */
	uint64_t psp = enter(uc);
	int saved_errno = errno;
	dc__commit();
	errno = saved_errno;
	dc__thr_unlock();
	dc__vol.prog_sp = psp;
	dc__vol.selector = prev;
}

/* page-aligned: a range of libdc's own memory cut out of the tracked
 * regions (maps.c own_ranges), whose bounds must be pages */
static char altstack[256 * 1024] __attribute__((aligned(4096)));

void
dc__sud_altstack(uint64_t *a, uint64_t *b)
{
	*a = (uint64_t)(uintptr_t)altstack;
	*b = *a + sizeof(altstack);
}

int
dc__sud_start(void)
{
	stack_t ss = { .ss_sp = altstack, .ss_size = sizeof(altstack) };
	if (sigaltstack(&ss, NULL) != 0)
		return dc__err(-errno, "sigaltstack: %s", strerror(errno));
	struct ksigaction ka = { .handler = (uintptr_t)sigsys_handler,
		.flags = SA_SIGINFO | SA_ONSTACK | SA_RESTORER,
		.restorer = dc__restorer, .mask = DC__SIGS_BLOCKED };
	if (dc__sys6(SYS_rt_sigaction, SIGSYS, (long)&ka, 0, 8, 0, 0) != 0)
		return dc__err(-EINVAL, "cannot install the SIGSYS handler");
	/* SIGSEGV is always libdc's first (track.c); a handler the program
	 * had before is kept as the program's */
	struct ksigaction old;
	if (dc__sys6(SYS_rt_sigaction, SIGSEGV, 0, (long)&old, 8, 0, 0) == 0 &&
	    old.handler != (uintptr_t)segv_handler &&
	    dc__st.sig[SIGSEGV].handler == 0) {
		dc__st.sig[SIGSEGV].handler = old.handler;
		dc__st.sig[SIGSEGV].flags = old.flags & ~(unsigned long)
			SA_RESTORER;
		memcpy(&dc__st.sig[SIGSEGV].mask, &old.mask, 8);
	}
	dc__install_handler(SIGSEGV);
	ka.handler = (uintptr_t)timer_handler;
	/* 2pc: no restart, so a blocked call returns and the round runs */
	ka.flags = SA_SIGINFO | SA_ONSTACK | SA_RESTORER |
		(dc__vol.twopc ? 0 : SA_RESTART);
	dc__sys6(SYS_rt_sigaction, DC__TIMER_SIG, (long)&ka, 0, 8, 0, 0);
	/* SIGSYS must be deliverable (invariant 2) */
	uint64_t un = 1ull << (SIGSYS - 1);
	dc__sys6(SYS_rt_sigprocmask, SIG_UNBLOCK, (long)&un, 0, 8, 0, 0);
	dc__vol.selector = ALLOW;
	if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON,
		    (unsigned long)dc__sud_begin,
		    (unsigned long)(dc__sud_end - dc__sud_begin),
		    &dc__vol.selector) != 0)
		return dc__err(-errno, "syscall user dispatch: %s (Linux >= "
			"5.11 needed)", strerror(errno));
	return 0;
}

int
dc__timer_start(void)
{
	if (dc__st.interval_ms == 0)
		return 0;
	/* aimed at this thread, the main one: the one that commits
	 * (thread.c invariant 5) */
	struct sigevent ev = { .sigev_notify = SIGEV_THREAD_ID,
		.sigev_signo = DC__TIMER_SIG };
	ev._sigev_un._tid = (int)dc__sys6(SYS_gettid, 0, 0, 0, 0, 0, 0);
	if (timer_create(CLOCK_MONOTONIC, &ev, &dc__vol.timer) != 0)
		return dc__err(-errno, "timer_create: %s", strerror(errno));
	struct itimerspec its;
	its.it_interval.tv_sec = dc__st.interval_ms / 1000;
	its.it_interval.tv_nsec = (long)(dc__st.interval_ms % 1000) * 1000000;
	its.it_value = its.it_interval;
	if (timer_settime(dc__vol.timer, 0, &its, NULL) != 0)
		return dc__err(-errno, "timer_settime: %s", strerror(errno));
	dc__vol.timer_on = true;
	return 0;
}

/* Turn the vDSO's time functions into system calls (invariant 5). */
int
dc__vdso_patch(void)
{
	uintptr_t base = getauxval(AT_SYSINFO_EHDR);
	if (base == 0)
		return 0;
	const Elf64_Ehdr *eh = (const void *)base;
	const Elf64_Shdr *sh = (const void *)(base + eh->e_shoff);
	const Elf64_Sym *sym = NULL;
	const char *str = NULL;
	size_t nsym = 0;
	for (int i = 0; i < eh->e_shnum; i++)
		if (sh[i].sh_type == SHT_DYNSYM) {
			sym = (const void *)(base + sh[i].sh_offset);
			nsym = sh[i].sh_size / sizeof(*sym);
			str = (const char *)(base + sh[sh[i].sh_link].sh_offset);
		}
	if (sym == NULL)
		return 0;
	static const struct { const char *name; int nr; } fns[] = {
		{ "__vdso_clock_gettime", SYS_clock_gettime },
		{ "__vdso_gettimeofday", SYS_gettimeofday },
		{ "__vdso_time", SYS_time },
		{ "__vdso_getcpu", SYS_getcpu },
		{ "__vdso_clock_getres", SYS_clock_getres },
	};
	int mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC);
	if (mem < 0)
		return dc__err(-errno, "open /proc/self/mem: %s",
			strerror(errno));
	for (size_t i = 0; i < nsym; i++) {
		for (size_t f = 0; f < sizeof(fns) / sizeof(fns[0]); f++) {
			if (strcmp(str + sym[i].st_name, fns[f].name) ||
			    sym[i].st_value == 0)
				continue;
			/* mov $nr, %eax; syscall; ret */
			unsigned char code[8] = { 0xb8, (unsigned char)fns[f].nr,
				(unsigned char)(fns[f].nr >> 8), 0, 0, 0x0f,
				0x05, 0xc3 };
			uintptr_t at = base + sym[i].st_value;
			if (pwrite(mem, code, sizeof(code), (off_t)at) !=
			    (ssize_t)sizeof(code)) {
				int e = errno;
				close(mem);
				return dc__err(-e, "patching the vDSO: %s",
					strerror(e));
			}
			dc__vol.vdso_patched++;
		}
	}
	close(mem);
	return 0;
}
