/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * direct.c -- the hot calls of libc without a trap (sud.c invariant 8)
 *
 * libdc is preloaded before libc, so these wrappers are the ones a
 * program's calls of read, write, pread, pwrite, fdatasync, fsync, send,
 * sendfile, epoll_wait, poll, accept, getrandom (and the fortified
 * __read_chk, __recv_chk, ...) bind to.  Each makes the same system call
 * (the same number and arguments as libc's wrapper) through dc__direct, which runs the dispatch's work for
 * it as the SIGSYS handler would, without the signal, its frame and
 * rt_sigreturn.  libc's other entries and raw `syscall` instructions
 * still trap, so nothing escapes the dispatch.  $DC_DIRECT=0 turns the
 * wrappers into plain calls, which trap (the trapped path, for tests and
 * measurements side by side).
 *
 * Unlike libc's wrappers, these are no cancellation points.  libdc's own
 * calls of them (librio's fdatasync, a pread at recovery) come with the
 * selector at ALLOW and go straight to the kernel, or from the
 * checkpoint writer, which has no TLS of its own (dc__on_writer).
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dc_int.h"

#define WRAP __attribute__((visibility("default")))

static bool direct_off;

__attribute__((constructor)) static void
direct_init(void)
{
	const char *e = getenv("DC_DIRECT");
	direct_off = e && strcmp(e, "0") == 0;
}

/* The call, direct or trapped, returned as libc's wrapper does. */
static long
call(long nr, long a0, long a1, long a2, long a3, long a4, long a5)
{
	long r;
	if (direct_off) /* an instruction outside libdc's range: it traps */
		return syscall(nr, a0, a1, a2, a3, a4, a5);
	if (dc__on_writer()) {
		/* libdc's own call (librio's fdatasync, a pread), from a
		 * thread whose dc__sel() is the main thread's: straight to
		 * the kernel, as libdc's calls are (sud.c invariant 8) */
		r = dc__sys6(nr, a0, a1, a2, a3, a4, a5);
		goto out;
	}
#ifdef DC_BROKEN_DIRECT_NO_HOLD
	/* Deliberately broken: the program's output calls go straight to
	 * the kernel, past the dispatch, so a send of an interval a crash
	 * loses is not held (held.c H3; caught by
	 * dc-held-udp-broken-direct). */
	if (nr == SYS_write || nr == SYS_writev || nr == SYS_sendto ||
	    nr == SYS_sendmsg || nr == SYS_sendfile)
		r = dc__sys6(nr, a0, a1, a2, a3, a4, a5);
	else
#endif
	{
		long a[6] = { a0, a1, a2, a3, a4, a5 };
		r = dc__direct(nr, a);
	}
out:
	if ((unsigned long)r >= -4095ul) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

#define L(x) ((long)(x))

WRAP ssize_t
read(int fd, void *b, size_t n)
{
	return call(SYS_read, fd, L(b), L(n), 0, 0, 0);
}

WRAP ssize_t
write(int fd, const void *b, size_t n)
{
	return call(SYS_write, fd, L(b), L(n), 0, 0, 0);
}

WRAP ssize_t
readv(int fd, const struct iovec *v, int n)
{
	return call(SYS_readv, fd, L(v), n, 0, 0, 0);
}

WRAP ssize_t
writev(int fd, const struct iovec *v, int n)
{
	return call(SYS_writev, fd, L(v), n, 0, 0, 0);
}

WRAP ssize_t
recv(int fd, void *b, size_t n, int fl)
{
	return call(SYS_recvfrom, fd, L(b), L(n), fl, 0, 0);
}

WRAP ssize_t
recvfrom(int fd, void *b, size_t n, int fl, struct sockaddr *sa,
	socklen_t *len)
{
	return call(SYS_recvfrom, fd, L(b), L(n), fl, L(sa), L(len));
}

WRAP ssize_t
recvmsg(int fd, struct msghdr *m, int fl)
{
	return call(SYS_recvmsg, fd, L(m), fl, 0, 0, 0);
}

WRAP ssize_t
send(int fd, const void *b, size_t n, int fl)
{
	return call(SYS_sendto, fd, L(b), L(n), fl, 0, 0);
}

WRAP ssize_t
sendto(int fd, const void *b, size_t n, int fl, const struct sockaddr *sa,
	socklen_t len)
{
	return call(SYS_sendto, fd, L(b), L(n), fl, L(sa), len);
}

WRAP ssize_t
sendmsg(int fd, const struct msghdr *m, int fl)
{
	return call(SYS_sendmsg, fd, L(m), fl, 0, 0, 0);
}

WRAP int
accept4(int fd, struct sockaddr *sa, socklen_t *len, int fl)
{
	return (int)call(SYS_accept4, fd, L(sa), L(len), fl, 0, 0);
}

WRAP int
epoll_wait(int ep, struct epoll_event *ev, int n, int ms)
{
	return (int)call(SYS_epoll_wait, ep, L(ev), n, ms, 0, 0);
}

WRAP int
epoll_pwait(int ep, struct epoll_event *ev, int n, int ms,
	const sigset_t *m)
{
	/* the kernel's sigset size, as libc passes it */
	return (int)call(SYS_epoll_pwait, ep, L(ev), n, ms, L(m), 8);
}

WRAP int
poll(struct pollfd *p, nfds_t n, int ms)
{
	return (int)call(SYS_poll, L(p), L(n), ms, 0, 0, 0);
}

WRAP ssize_t
getrandom(void *b, size_t n, unsigned fl)
{
	return call(SYS_getrandom, L(b), L(n), fl, 0, 0, 0);
}

/* The fortified entries (_FORTIFY_SOURCE, as distributions build their
 * packages) a program calls instead of read, recv, recvfrom and poll
 * when the buffer's size is known: the same check as libc's, then the
 * call. */
extern void __chk_fail(void) __attribute__((noreturn));
ssize_t __read_chk(int fd, void *b, size_t n, size_t blen);
ssize_t __recv_chk(int fd, void *b, size_t n, size_t blen, int fl);
ssize_t __recvfrom_chk(int fd, void *b, size_t n, size_t blen, int fl,
	struct sockaddr *sa, socklen_t *len);
int __poll_chk(struct pollfd *p, nfds_t n, int ms, size_t plen);

WRAP ssize_t
__read_chk(int fd, void *b, size_t n, size_t blen)
{
	if (n > blen)
		__chk_fail();
	return call(SYS_read, fd, L(b), L(n), 0, 0, 0);
}

WRAP ssize_t
__recv_chk(int fd, void *b, size_t n, size_t blen, int fl)
{
	if (n > blen)
		__chk_fail();
	return call(SYS_recvfrom, fd, L(b), L(n), fl, 0, 0);
}

WRAP ssize_t
__recvfrom_chk(int fd, void *b, size_t n, size_t blen, int fl,
	struct sockaddr *sa, socklen_t *len)
{
	if (n > blen)
		__chk_fail();
	return call(SYS_recvfrom, fd, L(b), L(n), fl, L(sa), L(len));
}

WRAP int
__poll_chk(struct pollfd *p, nfds_t n, int ms, size_t plen)
{
	if (plen / sizeof(*p) < n)
		__chk_fail();
	return (int)call(SYS_poll, L(p), L(n), ms, 0, 0, 0);
}

WRAP int
accept(int fd, struct sockaddr *sa, socklen_t *len)
{
	return (int)call(SYS_accept, fd, L(sa), L(len), 0, 0, 0);
}

/* A file's reads and writes at an offset (a database's blocks and log:
 * held under --disk buffer/rename, served from what is held) and its
 * flush (free for a held file, held.c).  On x86-64 pread and pread64
 * (pwrite and pwrite64, __pread_chk and __pread64_chk) are the one call:
 * the second name is an alias of the first.  <unistd.h> renames the
 * first to the second here (_FILE_OFFSET_BITS=64), so each is declared
 * by its assembler name. */
ssize_t w_pread(int, void *, size_t, long) __asm__("pread");
ssize_t w_pwrite(int, const void *, size_t, long) __asm__("pwrite");
ssize_t w_pread_chk(int, void *, size_t, long, size_t)
	__asm__("__pread_chk");

WRAP ssize_t
w_pread(int fd, void *b, size_t n, long off)
{
	return call(SYS_pread64, fd, L(b), L(n), off, 0, 0);
}

WRAP ssize_t
w_pwrite(int fd, const void *b, size_t n, long off)
{
	return call(SYS_pwrite64, fd, L(b), L(n), off, 0, 0);
}

WRAP ssize_t
w_pread_chk(int fd, void *b, size_t n, long off, size_t blen)
{
	if (n > blen)
		__chk_fail();
	return call(SYS_pread64, fd, L(b), L(n), off, 0, 0);
}

WRAP ssize_t w_pread64(int, void *, size_t, long) __asm__("pread64")
	__attribute__((alias("pread")));
WRAP ssize_t w_pwrite64(int, const void *, size_t, long)
	__asm__("pwrite64") __attribute__((alias("pwrite")));
WRAP ssize_t w_pread64_chk(int, void *, size_t, long, size_t)
	__asm__("__pread64_chk") __attribute__((alias("__pread_chk")));

WRAP int
fdatasync(int fd)
{
	return (int)call(SYS_fdatasync, fd, 0, 0, 0, 0, 0);
}

WRAP int
fsync(int fd)
{
	return (int)call(SYS_fsync, fd, 0, 0, 0, 0, 0);
}

/* <sys/sendfile.h> left out: with 64-bit offsets it renames sendfile;
 * on x86-64 both names are the one call */
ssize_t sendfile(int out, int in, off_t *off, size_t n);
ssize_t sendfile64(int out, int in, off_t *off, size_t n);

WRAP ssize_t
sendfile(int out, int in, off_t *off, size_t n)
{
	return call(SYS_sendfile, out, in, L(off), L(n), 0, 0);
}

WRAP ssize_t
sendfile64(int out, int in, off_t *off, size_t n)
{
	return call(SYS_sendfile, out, in, L(off), L(n), 0, 0);
}
