/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * track.c -- finding written pages: two mechanisms behind one interface,
 *            and hot and cold regions
 *
 * The mechanism is chosen per run (dc__vol.tracking, `dc-run --tracking`);
 * everything else (redo log, shadow, recovery) is the same for both.
 *
 * UFFD (the default).  Every tracked range is registered with one
 * userfaultfd in WP mode with UFFD_FEATURE_WP_ASYNC: a write to a
 * write-protected page is resolved by the kernel inside the fault (the
 * page's uffd-wp bit is cleared; no message, no signal).  PAGEMAP_SCAN
 * with PM_SCAN_WP_MATCHING returns the pages whose bit is clear
 * ("written") and sets it again, atomically.  UFFD_FEATURE_WP_UNPOPULATED
 * makes a never-touched page count as protected, so untouched
 * reservations cost nothing.
 *
 * WP (the thesis' mechanism).  At each checkpoint every tracked writable
 * region but the pinned ones (below) is made read-only with mprotect, in
 * ranges (dc__vol.wp: one per region, or per run of neighbours with the
 * same protection).  The first write to a page faults (SIGSEGV on libdc's
 * alternate stack, sud.c); the handler gives the page its protection back
 * and records it (dc__vol.dirty).  The checkpoint takes the recorded pages
 * (dc__track_take: sorted, merged) instead of a scan and protects exactly
 * them again (dc__track_arm), one mprotect per run of neighbouring pages.
 * Each written run splits a VMA in up to three until then: the recorded
 * runs of an interval are bounded (DC__WP_DIRTY), and a range whose
 * mprotect fails (ENOMEM: vm.max_map_count) or that overflows the record
 * is opened whole (writable until the next checkpoint, which copies its
 * present pages): a region never fails.  The parts of pinned regions the
 * kernel writes on its own are never protected (the whole stack, the
 * rseq page of the TLS block); every checkpoint copies their present
 * pages (of the stack, only the live part above the stack pointer).
 *
 * UNDO (the thesis' design: seg.c) is WP over memory moved into the
 * persistent segment: a protected range of moved memory (dc__wpr.seg) has
 * its before-image logged before it becomes writable (log_before), and
 * the checkpoint copies none of it.
 *
 * A scan (UFFD) costs per VMA it walks (about 0.3-0.5 us each here),
 * whether or not anything was written, and a process has dozens of
 * tracked VMAs (every library's data and bss).  So, in UFFD mode, regions
 * are hot or cold:
 *   HOT   scanned at every checkpoint;
 *   COLD  a hot region whose pages were not written for COOL_AFTER
 *         checkpoints is made read-only (mprotect without PROT_WRITE) and
 *         not scanned (one that is not writable anyway just stops being
 *         scanned).  The first user-mode write faults (SIGSEGV,
 *         SEGV_ACCERR, sud.c hands it here), the region gets its real
 *         protection back and is hot again; the retried write then goes
 *         through the uffd-wp fault as usual.
 * State machine of a region (UFFD): HOT --idle COOL_AFTER checkpoints-->
 * COLD --write fault, or a system call that may write it, or a mapping
 * change over it--> HOT.  In WP mode no region is ever cold (nothing is
 * scanned); its pages go PROTECTED --write fault, or a system call that
 * may write them--> WRITTEN --checkpoint--> PROTECTED.  PINNED regions
 * never cool (UFFD) and are not protected (WP; of the TLS block only the
 * rseq page): the stack (the kernel writes signal frames onto it) and the
 * TLS block when glibc registered rseq (the kernel writes it on
 * preemption).  libdc's alternate signal stack and the page
 * of dc__st every checkpoint writes are not tracked at all (maps.c
 * invariant 2): every checkpoint copies them.
 *
 * Invariants:
 *  1. After dc__track_protect(a, b) (UFFD) or dc__track_arm (WP) no page
 *     of the tracked memory is "written".
 *  2. A write by the kernel (read(2) into a buffer) must not fail.  UFFD,
 *     hot regions: it goes through the same fault path and marks the page
 *     written: nothing is lost, nothing has to be pre-faulted.  A cold
 *     region (UFFD) or a protected page (WP) is made writable -- and, WP,
 *     recorded as written -- before any system call that may write it:
 *     one whose arguments point into it or up to NEAR (UFFD: 1 MiB, WP:
 *     WP_NEAR bytes) below it, whose buffer of known length (read, pread,
 *     recvfrom, getdents64, readlink, getrandom, getcwd, poll, epoll_wait)
 *     covers it, or whose iovecs (readv, recvmsg ...) do; a call that
 *     still fails with EFAULT is retried once after every region was made
 *     writable (dc__track_efault; WP: every range opened).
 *  3. The scan covers only VMAs registered in async mode (the kernel skips
 *     the rest under PM_SCAN_WP_MATCHING): libdc's own memory is never
 *     reported.  WP: libdc's memory is in no protected range.
 *  4. A cold region holds no written page (it cooled right after a scan
 *     that found none, and nothing can write it until it is hot again), so
 *     not scanning it loses nothing.  dc__st.reg[].prot is always the
 *     program's protection, never the cold or protected one.
 *  5. The cold state and the WP ranges and record live in dc__vol: a
 *     recovered process starts with every region hot (UFFD) or protected
 *     whole (WP).
 *  6. WP: every page of a protected range that is writable is recorded,
 *     or its range is open (copied whole).  While the ranges are
 *     suspended for a fold (dc__track_suspend .. dc__track_arm(true)) only
 *     libdc runs, and it records what it writes (dc__track_will_write).  A
 *     range a mapping change touches is cut out of the protected ranges
 *     (a fault there is the program's) and the next checkpoint folds.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dc_int.h"

/* WP and UNDO share the write-protect machinery */
bool
dc__track_wp(void)
{
	return dc__vol.tracking == DC_TRACK_WP ||
		dc__vol.tracking == DC_TRACK_UNDO;
}

bool
dc__track_undo(void)
{
	return dc__vol.tracking == DC_TRACK_UNDO;
}

/* raw call: runs in the SIGSEGV and SIGSYS handlers too */
static long
mprot(uint64_t a, uint64_t b, uint32_t prot)
{
	return dc__sys6(SYS_mprotect, (long)a, (long)(b - a), (long)prot, 0, 0,
		0);
}

static int
open_pagemap(void)
{
	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0)
		return dc__err(-errno, "open /proc/self/pagemap: %s",
			strerror(errno));
	dc__vol.pagemap_fd = dc__own_fd(pm);
	return 0;
}

int
dc__track_open(void)
{
	if (dc__track_wp()) /* PAGEMAP_SCAN still finds present pages */
		return open_pagemap();
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return dc__err(-errno, "userfaultfd: %s (needs Linux >= 6.7 "
			"and vm.unprivileged_userfaultfd=1 or CAP_SYS_PTRACE)",
			strerror(errno));
	struct uffdio_api api = { .api = UFFD_API,
		.features = UFFD_FEATURE_WP_ASYNC |
			UFFD_FEATURE_WP_UNPOPULATED };
	if (ioctl(fd, UFFDIO_API, &api) != 0) {
		int e = errno;
		close(fd);
		return dc__err(-e, "userfaultfd: write-protect async mode "
			"unavailable (Linux >= 6.7 needed): %s", strerror(e));
	}
	int rc = open_pagemap();
	if (rc) {
		close(fd);
		return rc;
	}
	dc__vol.uffd = dc__own_fd(fd);
	return 0;
}

int
dc__track_register(uint64_t a, uint64_t b)
{
	if (dc__track_wp())
		return 0;
	struct uffdio_register r = { .range = { a, b - a },
		.mode = UFFDIO_REGISTER_MODE_WP };
	if (ioctl(dc__vol.uffd, UFFDIO_REGISTER, &r) != 0)
		return dc__err(-errno, "userfaultfd register %#lx-%#lx: %s",
			(unsigned long)a, (unsigned long)b, strerror(errno));
	return 0;
}

int
dc__track_protect(uint64_t a, uint64_t b)
{
	if (dc__track_wp())
		return 0; /* dc__track_arm protects */
	struct uffdio_writeprotect w = { .range = { a, b - a },
		.mode = UFFDIO_WRITEPROTECT_MODE_WP };
	if (ioctl(dc__vol.uffd, UFFDIO_WRITEPROTECT, &w) != 0)
		return dc__err(-errno, "write-protect %#lx-%#lx: %s",
			(unsigned long)a, (unsigned long)b, strerror(errno));
	return 0;
}

/*
 * Written (or, with written=false, present) pages of [a, b) into vec.
 * Returns the number of ranges (walk_end tells where the walk stopped when
 * vec filled up) or -errno.
 */
long
dc__track_scan(uint64_t a, uint64_t b, bool written, bool protect,
	struct page_region *vec, size_t vlen, uint64_t *walk_end)
{
	struct pm_scan_arg arg;
	memset(&arg, 0, sizeof(arg));
	arg.size = sizeof(arg);
	arg.start = a;
	arg.end = b;
	arg.vec = (uint64_t)(uintptr_t)vec;
	arg.vec_len = vlen;
	if (written) {
		/* category and return masks exactly PAGE_IS_WRITTEN: the
		 * kernel's fast path.  With PM_SCAN_WP_MATCHING the walk
		 * skips VMAs that are not registered in async mode by itself
		 * (invariant 3). */
		arg.flags = protect ? PM_SCAN_WP_MATCHING : 0;
		arg.category_mask = PAGE_IS_WRITTEN;
		arg.return_mask = PAGE_IS_WRITTEN;
	} else {
		arg.category_anyof_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
		arg.return_mask = PAGE_IS_PRESENT | PAGE_IS_SWAPPED;
	}
	long k = ioctl(dc__vol.pagemap_fd, PAGEMAP_SCAN, &arg);
	if (k < 0)
		return dc__err(-errno, "PAGEMAP_SCAN %#lx-%#lx: %s",
			(unsigned long)a, (unsigned long)b, strerror(errno));
	if (walk_end)
		*walk_end = arg.walk_end;
	return k;
}

/* ---- hot and cold regions ---- */

#define COOL_AFTER 8
#define NEAR (1ull << 20) /* a pointer argument may reach this far */
#define WP_NEAR 512ull    /* ... in WP mode: the structures the kernel
                           * fills through a pointer (stat, statx,
                           * utsname, sigaction, timespec ...); longer
                           * buffers have their length in another
                           * argument, or EFAULT makes the call again */

extern const unsigned int __rseq_size __attribute__((weak));
extern const ptrdiff_t __rseq_offset __attribute__((weak));

static bool
contains(const struct dc__region *r, uint64_t a)
{
	return a >= r->start && a < r->end;
}

/* The page of glibc's rseq area, which the kernel writes on its own
 * (on preemption), or 0 when rseq is not registered. */
uint64_t
dc__track_rseq_page(void)
{
	if (&__rseq_size == NULL || __rseq_size == 0 ||
	    &__rseq_offset == NULL)
		return 0;
	return (dc__st.ctx.fsbase + (uint64_t)__rseq_offset) &
		~(DC__PAGE - 1);
}

/* Which regions may never cool (state machine above).  Moved memory
 * (UNDO) never is: its protection is what makes the undo log complete,
 * and the rseq page is never moved (ckpt.c). */
void
dc__track_pin(void)
{
	uint64_t tls = dc__st.ctx.fsbase, rp = dc__track_rseq_page();
	for (unsigned i = 0; i < dc__st.nreg; i++) {
		const struct dc__region *r = &dc__st.reg[i];
		dc__vol.pinned[i] = !(r->kind & DC__R_SEG) &&
			((r->kind & DC__R_STACK) ||
			 (rp && (contains(r, tls) || contains(r, rp))));
		dc__vol.idle[i] = 0;
	}
}

static void
warm(unsigned i)
{
	const struct dc__region *r = &dc__st.reg[i];
	if (r->prot & PROT_WRITE)
		mprot(r->start, r->end, r->prot);
	dc__vol.cold[i] = false;
	dc__vol.idle[i] = 0;
	dc__vol.ncold--;
	dc__st.stats.warmed++;
}

static unsigned wp_warm(uint64_t a, uint64_t b);

/* Make the cold regions overlapping [a, b) hot (WP: the protected pages
 * writable, recorded as written); returns how many. */
unsigned
dc__track_warm_range(uint64_t a, uint64_t b)
{
	unsigned k = 0;
	if (dc__track_wp())
		return wp_warm(a, b);
	if (dc__vol.ncold == 0 || b <= dc__vol.cold_lo || a >= dc__vol.cold_hi)
		return 0;
	for (unsigned i = 0; i < dc__st.nreg && dc__vol.ncold; i++)
		if (dc__vol.cold[i] && dc__st.reg[i].start < b &&
		    dc__st.reg[i].end > a) {
			warm(i);
			k++;
		}
	return k;
}

static unsigned wp_open_all(void);

unsigned
dc__track_warm_all(void)
{
	if (dc__track_wp())
		return wp_open_all();
	return dc__track_warm_range(0, UINT64_MAX);
}

static bool wp_fault(uint64_t addr, bool write);

/* SIGSEGV at addr: a write into a cold region (WP: a protected page)?
 * Then it is writable again and the faulting instruction can be
 * restarted. */
bool
dc__track_fault(uint64_t addr, bool write)
{
	if (dc__track_wp())
		return wp_fault(addr, write);
	return dc__track_warm_range(addr, addr + 1) > 0;
}

static void
warm_near(long v)
{
	uint64_t a = (uint64_t)v;
	if (dc__track_wp()) {
		if (a < UINT64_MAX - WP_NEAR)
			wp_warm(a, a + WP_NEAR);
	} else if (a + NEAR >= dc__vol.cold_lo && a < dc__vol.cold_hi) {
		dc__track_warm_range(a, a + NEAR);
	}
}

static void
warm_iov(const struct iovec *iov, long cnt)
{
	for (long i = 0; iov && i < cnt && i < 1024; i++)
		dc__track_warm_range((uint64_t)(uintptr_t)iov[i].iov_base,
			(uint64_t)(uintptr_t)iov[i].iov_base +
				iov[i].iov_len);
}

static void
warm_msg(const struct msghdr *m)
{
	if (m == NULL)
		return;
	warm_near((long)(uintptr_t)m->msg_name);
	warm_near((long)(uintptr_t)m->msg_control);
	warm_iov(m->msg_iov, (long)m->msg_iovlen);
}

/* Before a system call: make writable every cold region (WP: protected
 * page) it may write (invariant 2). */
void
dc__track_warm_args(long nr, const long *a)
{
	if (dc__vol.ncold == 0 && !dc__track_wp())
		return;
	for (int i = 0; i < 6; i++)
		warm_near(a[i]);
	switch (nr) { /* buffers whose length is known: all of it */
	case SYS_read:
	case SYS_pread64:
	case SYS_recvfrom:
	case SYS_getdents64:
	case SYS_readlink:
		dc__track_warm_range((uint64_t)a[1],
			(uint64_t)a[1] + (uint64_t)a[2]);
		break;
	case SYS_readlinkat:
		dc__track_warm_range((uint64_t)a[2],
			(uint64_t)a[2] + (uint64_t)a[3]);
		break;
	case SYS_getrandom:
	case SYS_getcwd:
		dc__track_warm_range((uint64_t)a[0],
			(uint64_t)a[0] + (uint64_t)a[1]);
		break;
	case SYS_poll:
	case SYS_ppoll:
		dc__track_warm_range((uint64_t)a[0],
			(uint64_t)a[0] + (uint64_t)a[1] * 8);
		break;
	case SYS_epoll_wait:
	case SYS_epoll_pwait:
		dc__track_warm_range((uint64_t)a[1],
			(uint64_t)a[1] + (uint64_t)a[2] * 12);
		break;
	default:
		break;
	}
	switch (nr) {
	case SYS_readv:
	case SYS_preadv:
	case SYS_preadv2:
		warm_iov((const struct iovec *)a[1], a[2]);
		break;
	case SYS_process_vm_readv:
		warm_iov((const struct iovec *)a[1], a[2]);
		break;
	case SYS_recvmsg:
		warm_msg((const struct msghdr *)a[1]);
		break;
	case SYS_recvmmsg: {
		const struct mmsghdr *v = (const void *)a[1];
		for (long i = 0; v && i < a[2] && i < 1024; i++)
			warm_msg(&v[i].msg_hdr);
		break;
	}
	default:
		break;
	}
}

/* A call failed with EFAULT: was it a cold region (WP: a protected page)?
 * Make every region writable; true when the call should be tried
 * again. */
bool
dc__track_efault(void)
{
	return dc__track_warm_all() > 0;
}

/* After the scan of a checkpoint: region i had written pages or not;
 * regions idle for COOL_AFTER checkpoints become cold.  Called from the
 * commit, between scan and apply: nothing writes tracked memory then, so a
 * region found clean is still clean when it is protected (invariant 4). */
void
dc__track_note(unsigned i, bool written)
{
	const struct dc__region *r = &dc__st.reg[i];
	if (written || dc__vol.pinned[i] || dc__thr_on()) { /* thread.c */
		dc__vol.idle[i] = 0;
		return;
	}
	if (++dc__vol.idle[i] < COOL_AFTER)
		return;
	/* A region without PROT_WRITE (an anonymous reservation) is cold
	 * as it is: only mprotect, mmap or mremap over it can make it
	 * writable, and those make it hot first (sud.c). */
	if ((r->prot & PROT_WRITE) &&
	    dc__sys6(SYS_mprotect, (long)r->start, (long)(r->end - r->start),
		    (long)(r->prot & ~PROT_WRITE), 0, 0, 0) != 0)
		return; /* stays hot */
	dc__vol.cold[i] = true;
	dc__vol.ncold++;
	if (dc__vol.ncold == 1 || r->start < dc__vol.cold_lo)
		dc__vol.cold_lo = r->start;
	if (dc__vol.ncold == 1 || r->end > dc__vol.cold_hi)
		dc__vol.cold_hi = r->end;
	dc__st.stats.cooled++;
}

/*
 * The mappings changed: the new region list nw, read from
 * /proc/self/maps, replaces dc__st.reg.  A new region that is exactly an
 * old cold one stays cold (its protection in nw is the cold one: the real
 * one comes back).  Any other cold region is made hot, and nw is not
 * usable: the kernel may have merged a cold region's read-only mapping
 * with a neighbour that has the same flags (a region that is read-only
 * anyway, or another cold one), and nw then holds one region with the
 * cold protection where there are two (invariant 4); recovery would give
 * that memory back read-only, and a region taken as read-only is never
 * scanned once it cools.  Returns true when it made a region hot: the
 * caller reads the maps again and calls again (each call with a true
 * return makes one cold region hot or more, so the loop ends).  Call
 * before classifying nw.
 */
bool
dc__track_refold(struct dc__region *nw, unsigned nn)
{
	bool *keep = dc__vol.keep;
	bool warmed = false;
	if (dc__vol.ncold == 0)
		return false;
	memset(keep, 0, sizeof(dc__vol.keep));
	unsigned j = 0;
	for (unsigned i = 0; i < dc__st.nreg; i++) {
		if (!dc__vol.cold[i])
			continue;
		const struct dc__region *o = &dc__st.reg[i];
		while (j < nn && nw[j].start < o->start)
			j++;
		if (j < nn && nw[j].start == o->start &&
		    nw[j].end == o->end && nw[j].ino == o->ino) {
			nw[j].prot = o->prot;
			keep[j] = true;
		} else {
			warm(i);
			warmed = true;
		}
	}
#ifdef DC_BROKEN_REFOLD_COLD_PROT
	/* broken build for the tests: nw is kept as read, with the cold
	 * protection of a merged mapping */
	(void)warmed;
#else
	if (warmed)
		return true; /* cold[] is still indexed like dc__st.reg */
#endif
	memset(dc__vol.cold, 0, sizeof(dc__vol.cold));
	for (unsigned k = 0; k < nn; k++)
		dc__vol.cold[k] = keep[k];
	return false;
}

/* ---- write protection (WP mode) ---- */

#define PAGE_DOWN(x) ((x) & ~(DC__PAGE - 1))
#define PAGE_UP(x) ((x) > UINT64_MAX - DC__PAGE ? PAGE_DOWN(UINT64_MAX) : \
	PAGE_DOWN((x) + DC__PAGE - 1))

/* The first protected range that ends after a. */
static unsigned
wp_first(uint64_t a)
{
	unsigned lo = 0, hi = dc__vol.nwp;
	while (lo < hi) {
		unsigned m = (lo + hi) / 2;
		if (dc__vol.wp[m].b <= a)
			lo = m + 1;
		else
			hi = m;
	}
	return lo;
}

/* Append to the record; the caller keeps within its bounds (the fault
 * path within DC__WP_DIRTY, the rest within the reserve behind it). */
static void
push(uint64_t a, uint64_t b)
{
	const unsigned cap = sizeof(dc__vol.dirty) / sizeof(dc__vol.dirty[0]);
	if (dc__vol.ndirty < cap && a < b)
		dc__vol.dirty[dc__vol.ndirty++] = (struct dc__span){ a, b };
}

static void
sift(struct dc__span *v, unsigned i, unsigned n)
{
	for (;;) {
		unsigned c = 2 * i + 1;
		if (c >= n)
			return;
		if (c + 1 < n && v[c + 1].a > v[c].a)
			c++;
		if (v[i].a >= v[c].a)
			return;
		struct dc__span t = v[i];
		v[i] = v[c];
		v[c] = t;
		i = c;
	}
}

/* Sort the record and merge overlapping and adjacent ranges: heapsort,
 * no allocation (it runs in the SIGSEGV handler too). */
static void
compact(void)
{
	struct dc__span *v = dc__vol.dirty;
	unsigned n = dc__vol.ndirty, k = 0;
	for (unsigned i = n / 2; i-- > 0;)
		sift(v, i, n);
	for (unsigned e = n; e-- > 1;) {
		struct dc__span t = v[0];
		v[0] = v[e];
		v[e] = t;
		sift(v, 0, e);
	}
	for (unsigned i = 0; i < n; i++) {
		if (k > 0 && v[i].a <= v[k - 1].b) {
			if (v[i].b > v[k - 1].b)
				v[k - 1].b = v[i].b;
		} else {
			v[k++] = v[i];
		}
	}
	dc__vol.ndirty = k;
}

/*
 * UNDO: the before-image of [a, b) of moved range k must be in the undo
 * log before the range becomes writable (seg.c invariant 1): a few pages
 * from memory, a long range from the segment file (its holes cost
 * nothing).  A log that cannot take it (the directory's file system is
 * full) stops the process: the last checkpoint is intact, and running
 * the program again resumes from it.
 */
#define LOG_FROM_MEM (64u * 1024u)

/* Raw calls and the stack only: no tracked byte may be written here (seg.c
 * invariant 5). */
__attribute__((noreturn)) static void
log_failed(int rc)
{
	static const char a[] = "dc: the undo log cannot take a before-image "
		"(errno ";
	static const char b[] = "; ENOSPC: the checkpoint directory's file "
		"system is full); stopping: the last checkpoint is intact and "
		"running the program again resumes from it\n";
	/* not strerror: gettext saves and restores errno, a TLS write */
	char num[12], *e = num + sizeof(num);
	unsigned u = rc < 0 ? (unsigned)-rc : (unsigned)rc;
	do
		*--e = (char)('0' + u % 10);
	while ((u /= 10) != 0);
	struct iovec v[3] = { { (void *)a, sizeof(a) - 1 },
		{ e, (size_t)(num + sizeof(num) - e) },
		{ (void *)b, sizeof(b) - 1 } };
	dc__sys6(SYS_writev, 2, (long)v, 3, 0, 0, 0);
	dc__sys6(SYS_exit_group, 70, 0, 0, 0, 0, 0);
	__builtin_unreachable();
}

static void
log_before(unsigned k, uint64_t a, uint64_t b)
{
	if (!dc__vol.wp[k].seg)
		return;
	int rc = b - a <= LOG_FROM_MEM ? dc__mu_log_mem(a, b) :
		dc__mu_log_shadow(a, b);
	if (rc)
		log_failed(rc);
}

/* Range k writable whole until the next checkpoint, which copies its
 * present pages (invariant 6; UNDO, a moved range: logged whole first). */
static bool
wp_open(unsigned k)
{
	struct dc__wpr *w = &dc__vol.wp[k];
	if (w->open)
		return true;
	log_before(k, w->a, w->b);
	if (mprot(w->a, w->b, w->prot) != 0)
		return false;
	w->open = true;
	dc__st.stats.warmed++;
	return true;
}

static unsigned
wp_open_all(void)
{
	unsigned n = 0;
	for (unsigned k = 0; k < dc__vol.nwp; k++)
		if (!dc__vol.wp[k].open && wp_open(k))
			n++;
	return n;
}

/* [a, b) of range k written: writable and recorded, or the range opened
 * when the record is full or the mprotect would need a VMA more than
 * vm.max_map_count allows.  UNDO: logged first, unless the caller is
 * about to replace the range (log false). */
static bool
wp_unprotect(unsigned k, uint64_t a, uint64_t b, bool log)
{
	if (dc__vol.wp[k].open)
		return true;
	bool room = dc__vol.ndirty < DC__WP_DIRTY;
	if (!room) {
		compact();
		room = dc__vol.ndirty < DC__WP_DIRTY * 3 / 4;
	}
	if (room && log)
		log_before(k, a, b);
	if (room && mprot(a, b, dc__vol.wp[k].prot) == 0) {
		push(a, b);
		return true;
	}
	return wp_open(k);
}

/* A buffer the program reads into again and again is writable already:
 * no second mprotect, no second record. */
static bool
recent(uint64_t a, uint64_t b)
{
	unsigned n = dc__vol.ndirty;
	for (unsigned i = 0; i < 4 && i < n; i++) {
		const struct dc__span *d = &dc__vol.dirty[n - 1 - i];
		if (d->a <= a && d->b >= b)
			return true;
	}
	return false;
}

static unsigned
wp_warm(uint64_t a, uint64_t b)
{
	unsigned n = 0;
	a = PAGE_DOWN(a);
	b = PAGE_UP(b);
	for (unsigned k = wp_first(a); k < dc__vol.nwp && dc__vol.wp[k].a < b;
	     k++) {
		const struct dc__wpr *w = &dc__vol.wp[k];
		uint64_t lo = a > w->a ? a : w->a, hi = b < w->b ? b : w->b;
		if (w->open || recent(lo, hi))
			continue;
		if (wp_unprotect(k, lo, hi, true))
			n++;
	}
	return n;
}

/* Pages a sequential writer's fault opens at most.  Each page opened
 * and not written costs its copy (WP: at the checkpoint; UNDO: its
 * before-image now), about a tenth of the fault it saves. */
#define FAULT_AROUND 16

static bool
wp_fault(uint64_t addr, bool write)
{
	unsigned k = wp_first(addr);
	if (!write || k == dc__vol.nwp || dc__vol.wp[k].a > addr ||
	    dc__vol.wp[k].open)
		return false; /* not a page libdc protected: the program's */
	dc__st.stats.wp_faults++;
	uint64_t a = PAGE_DOWN(addr), b = a + DC__PAGE;
	/* fault-around for sequential writers, as readahead: a fault on the
	 * page right after the last window opens twice as many pages (up to
	 * FAULT_AROUND), any other one page */
	unsigned n = 1;
	if (a == dc__vol.fa_next && dc__vol.fa_pages > 0)
		n = 2 * dc__vol.fa_pages < FAULT_AROUND ?
			2 * dc__vol.fa_pages : FAULT_AROUND;
	if (n > 1)
		b = a + n * DC__PAGE < dc__vol.wp[k].b ? a + n * DC__PAGE :
			dc__vol.wp[k].b;
	dc__vol.fa_next = b;
	dc__vol.fa_pages = (unsigned)((b - a) / DC__PAGE);
	return wp_unprotect(k, a, b, true);
}

/*
 * Cut [a, b) (page aligned) out of the protected ranges; the next
 * checkpoint folds.  give_back: the range first gets the program's
 * protection (wp_unprotect, logged unless !log); a range that stays
 * writable whole is left in place (the fold rebuilds it).  A cut that
 * would need one slot too many opens the range instead.
 */
static void
cut_out(uint64_t a, uint64_t b, bool give_back, bool log)
{
	unsigned k = wp_first(a);
	while (k < dc__vol.nwp && dc__vol.wp[k].a < b) {
		struct dc__wpr *w = &dc__vol.wp[k];
		uint64_t lo = a > w->a ? a : w->a, hi = b < w->b ? b : w->b;
		dc__st.maps_changed = true;
		if (give_back && (!wp_unprotect(k, lo, hi, log) || w->open)) {
			k++; /* writable whole; the fold rebuilds it */
		} else if (lo == w->a && hi == w->b) {
			memmove(w, w + 1, (dc__vol.nwp - k - 1) * sizeof(*w));
			dc__vol.nwp--;
		} else if (lo == w->a) {
			w->a = hi;
			k++;
		} else if (hi == w->b) {
			w->b = lo;
			k++;
		} else if (dc__vol.nwp < DC__WP_RANGES) {
			memmove(w + 1, w, (dc__vol.nwp - k) * sizeof(*w));
			dc__vol.nwp++;
			w->b = lo;
			w[1].a = hi;
			k += 2;
		} else {
			wp_open(k);
			k++;
		}
	}
}

/*
 * A mapping change over [a, b) (munmap, mprotect, mremap, mmap MAP_FIXED,
 * brk, madvise) is about to happen.  UFFD: the cold regions there are
 * made hot, so the kernel and /proc/self/maps see the program's
 * protection.  WP: [a, b) gets the program's protection back, is recorded
 * as written (the call may fail and leave it as it was) and is cut out of
 * the protected ranges, and the next checkpoint folds the maps
 * (invariant 6).  UNDO: moved memory is logged first unless log is false
 * (the caller replaces it before the program runs again: seg.c).
 */
void
dc__track_release(uint64_t a, uint64_t b, bool log)
{
	if (!dc__track_wp()) {
		dc__track_warm_range(a, b);
		return;
	}
	cut_out(PAGE_DOWN(a), PAGE_UP(b), true, log);
}

/*
 * An mprotect (or pkey_mprotect) of [a, b) to prot is about to happen.
 * WP: tracked memory that was not writable at the last fold is in no
 * protected range (rebuild), so nothing would record the stores the new
 * protection lets through (a PROT_NONE reservation or guard page, a
 * read-only mapping, made writable): when prot has PROT_WRITE, it is
 * recorded as written whole, and the next checkpoint (which folds: the
 * maps changed) copies its present pages; a record without room leaves
 * the next fold to copy every tracked region.  UNDO: moved memory there
 * is logged whole first, from the segment (invariant 6; seg.c invariant
 * 1).  UFFD: every tracked range is registered, whatever its protection:
 * nothing to do.
 */
void
dc__track_will_protect(uint64_t a, uint64_t b, int prot)
{
	if (!dc__track_wp() || !(prot & PROT_WRITE))
		return;
	a = PAGE_DOWN(a);
	b = PAGE_UP(b);
	for (unsigned i = 0; i < dc__st.nreg; i++) {
		const struct dc__region *r = &dc__st.reg[i];
		if (!(r->kind & DC__R_TRACKED) || (r->prot & PROT_WRITE) ||
		    r->end <= a || r->start >= b)
			continue;
		uint64_t lo = a > r->start ? a : r->start;
		uint64_t hi = b < r->end ? b : r->end;
#ifndef DC_BROKEN_WP_UNPROTECTED /* broken build: neither */
		if (dc__track_undo() && (r->kind & DC__R_SEG)) {
			int rc = dc__mu_log_shadow(lo, hi);
			if (rc)
				log_failed(rc);
			continue;
		}
		if (dc__vol.ndirty >= DC__WP_DIRTY)
			compact();
		if (dc__vol.ndirty < DC__WP_DIRTY) {
			push(lo, hi);
		} else {
			dc__st.chg_overflow = true;
			dc__st.maps_changed = true;
		}
#else
		(void)lo;
		(void)hi;
#endif
	}
}

/*
 * UNDO: [a, b) was unmapped or replaced (munmap, mmap MAP_FIXED, brk,
 * seg.c's private copies): its protection went with it, so it is only
 * cut out of the protected ranges, and the next checkpoint folds.  A
 * range that would need one slot too many is opened (logged) instead.
 */
void
dc__track_cut(uint64_t a, uint64_t b)
{
	cut_out(PAGE_DOWN(a), PAGE_UP(b), false, false);
}

/*
 * libdc is about to write [a, b) of tracked memory itself while the
 * ranges are suspended (the region table, in a fold): WP records it;
 * UNDO logs the before-image first if it is moved memory.
 */
void
dc__track_will_write(uint64_t a, uint64_t b)
{
	a = PAGE_DOWN(a);
	b = PAGE_UP(b);
	int rc;
	if (dc__track_undo() && dc__seg_any(a, b) &&
	    (rc = dc__mu_log_mem(a, b)))
		log_failed(rc);
	if (dc__track_wp())
		push(a, b);
}

/*
 * Before a fold (ckpt.c): UFFD: libdc's tables must not fault into
 * track.c while the region table is half written, so they are hot.  WP:
 * every protected range gets the program's protection back, so
 * /proc/self/maps shows the program's mappings, one VMA per mapping; the
 * open ranges stay recorded; libdc records what it writes until
 * dc__track_arm(true) (invariant 6).
 */
void
dc__track_suspend(void)
{
	if (!dc__track_wp()) {
		dc__track_warm_range((uint64_t)(uintptr_t)&dc__st,
			(uint64_t)(uintptr_t)(&dc__st + 1));
		return;
	}
	for (unsigned k = 0; k < dc__vol.nwp; k++) {
		struct dc__wpr *w = &dc__vol.wp[k];
		if (w->open)
			push(w->a, w->b);
		else
			mprot(w->a, w->b, w->prot);
	}
	dc__vol.nwp = 0;
}


/* WP: the part of pinned region r the kernel may write, never protected:
 * of the TLS block, the page of glibc's rseq area; the rest whole. */
static void
pin_span(const struct dc__region *r, uint64_t *a, uint64_t *b)
{
	*a = r->start;
	*b = r->end;
	uint64_t p = dc__track_rseq_page();
	if (!(r->kind & DC__R_STACK) && p && contains(r, p)) {
		*a = p;
		*b = p + DC__PAGE;
	}
}

/* ... and the part a checkpoint copies: of the stack, what lies above the
 * program's stack pointer less the red zone (below it is dead by the ABI:
 * the next signal frame or call overwrites it), when the pointer is known
 * to be in it. */
static void
live_span(const struct dc__region *r, uint64_t *a, uint64_t *b)
{
	pin_span(r, a, b);
	uint64_t sp = dc__st.ctx.rsp;
	if (!contains(r, sp))
		sp = dc__vol.prog_sp;
	if ((r->kind & DC__R_STACK) && contains(r, sp) &&
	    sp - r->start >= 128)
		*a = PAGE_DOWN(sp - 128);
}

/*
 * WP: the ranges written since the last checkpoint -- the recorded ones,
 * open ranges whole, the live part of pinned regions -- sorted and merged
 * in dc__vol.dirty; returns how many.  They may reach past tracked memory
 * (a region unmapped since): the caller clips them to the regions.
 */
unsigned
dc__track_take(void)
{
	for (unsigned k = 0; k < dc__vol.nwp; k++)
		if (dc__vol.wp[k].open)
			push(dc__vol.wp[k].a, dc__vol.wp[k].b);
	for (unsigned i = 0; i < dc__st.nreg; i++) {
		const struct dc__region *r = &dc__st.reg[i];
		uint64_t a, b;
		if (dc__vol.pinned[i] && (r->kind & DC__R_TRACKED) &&
		    (r->prot & PROT_READ)) {
			live_span(r, &a, &b);
			push(a, b);
		}
	}
	compact();
	return dc__vol.ndirty;
}

static void
add_range(unsigned *n, uint64_t a, uint64_t b, uint32_t prot, bool seg)
{
	struct dc__wpr *w = &dc__vol.wp[*n - (*n > 0)];
	if (a >= b)
		return;
	if (*n > 0 && w->b == a && w->prot == prot && w->seg == seg)
		w->b = b;
	else if (*n < DC__WP_RANGES)
		dc__vol.wp[(*n)++] = (struct dc__wpr){ a, b, prot, false,
			seg };
}

/* The protected ranges, new from the region list: every tracked writable
 * region but the pinned parts, neighbours with the same protection in one
 * range: at most DC__MAX_REGIONS + 2 (only the TLS region is split in
 * two), within DC__WP_RANGES. */
static void
rebuild(void)
{
	unsigned n = 0;
	for (unsigned i = 0; i < dc__st.nreg; i++) {
		const struct dc__region *r = &dc__st.reg[i];
		if (!(r->kind & DC__R_TRACKED) || !(r->prot & PROT_WRITE))
			continue;
		uint64_t a = r->end, b = r->end;
		bool seg = dc__track_undo() && (r->kind & DC__R_SEG);
		if (dc__vol.pinned[i])
			pin_span(r, &a, &b);
		uint64_t lo = r->start;
		if (seg && (r->kind & DC__R_STACK) &&
		    dc__vol.stack_prot_lo > lo) /* the dead part below */
			lo = dc__vol.stack_prot_lo < a ? dc__vol.stack_prot_lo :
				a;
		add_range(&n, lo, a, r->prot, seg);
		add_range(&n, b, r->end, r->prot, seg);
	}
	dc__vol.nwp = n;
}

/* Protect [a, b) of range k again; a range that cannot be is open. */
static void
wp_protect(unsigned k, uint64_t a, uint64_t b)
{
	struct dc__wpr *w = &dc__vol.wp[k];
	w->open = false;
	if (mprot(a, b, w->prot & ~(uint32_t)PROT_WRITE) != 0 &&
	    mprot(w->a, w->b, w->prot) == 0)
		w->open = true;
}

/*
 * WP, after the checkpoint took dc__track_take's ranges: protect exactly
 * them again (whole: the region list is new -- a fold, a recovery --
 * every range whole).  The next interval starts with nothing written
 * (invariant 1).  Nothing writes tracked memory between take and arm.
 */
int
dc__track_arm(bool whole)
{
	if (!dc__track_wp())
		return 0;
	if (whole) {
		rebuild();
		for (unsigned k = 0; k < dc__vol.nwp; k++)
			wp_protect(k, dc__vol.wp[k].a, dc__vol.wp[k].b);
	} else {
		for (unsigned s = 0, k = 0; s < dc__vol.ndirty; s++) {
			uint64_t a = dc__vol.dirty[s].a, b = dc__vol.dirty[s].b;
			while (k < dc__vol.nwp && dc__vol.wp[k].b <= a)
				k++;
			for (unsigned j = k; j < dc__vol.nwp &&
			     dc__vol.wp[j].a < b; j++) {
				const struct dc__wpr *w = &dc__vol.wp[j];
				wp_protect(j, a > w->a ? a : w->a,
					b < w->b ? b : w->b);
			}
		}
	}
	dc__vol.ndirty = 0;
	return 0;
}

/*
 * UNDO, the moved stack, once a new interval has begun (after the commit
 * record; thesis 5.3: "not write-protecting the portion of the stack that
 * is unused at the time of the checkpoint").  Below the program's stack
 * pointer (less the red zone) the stack is dead: a crash resumes with the
 * pointer above it, so it is neither protected nor logged.  The two pages
 * from there up -- the frames the program returns into first -- are
 * logged now and left writable, which costs a copy instead of a fault at
 * every checkpoint.  Above them the stack stays protected.  When the
 * program's stack pointer is not in the stack (a stack of its own), the
 * whole stack is protected.
 */
#define STACK_EAGER (2 * DC__PAGE)

static void
stack_interval(void)
{
	const struct dc__region *r = NULL;
	for (unsigned i = 0; i < dc__st.nreg && r == NULL; i++)
		if ((dc__st.reg[i].kind & (DC__R_SEG | DC__R_STACK)) ==
		    (DC__R_SEG | DC__R_STACK))
			r = &dc__st.reg[i];
	if (r == NULL)
		return;
	/* the stack's protected range, [cur, r->end), if any (none: all of
	 * it was below the boundary) */
	unsigned k = wp_first(r->end - 1);
	bool have = k < dc__vol.nwp && dc__vol.wp[k].a < r->end;
	if (have && (dc__vol.wp[k].b != r->end || !dc__vol.wp[k].seg ||
		     dc__vol.wp[k].open))
		return; /* opened whole (logged whole), or not ours */
	/* no slot to protect it again: it stays writable, and its live part
	 * is logged whole */
	bool whole = !have && dc__vol.nwp >= DC__WP_RANGES;
	uint64_t cur = have ? dc__vol.wp[k].a : r->end;
	uint32_t prot = r->prot;
	uint64_t sp = dc__st.ctx.rsp;
	if (!contains(r, sp))
		sp = dc__vol.prog_sp;
	uint64_t lo = r->start, hi = r->start;
	if (contains(r, sp) && sp - r->start >= 128) {
		lo = PAGE_DOWN(sp - 128);
		hi = lo + STACK_EAGER < r->end && !whole ? lo + STACK_EAGER :
			r->end;
	} else if (whole) {
		hi = r->end;
	}
	if (hi > lo) {
		int rc = dc__mu_log_mem(lo, hi);
		if (rc)
			log_failed(rc);
	}
	/* [cur, hi) becomes writable (dead, or logged just now); [hi, cur)
	 * is live again: protected */
	if (hi < cur &&
	    mprot(hi, cur, prot & ~(uint32_t)PROT_WRITE) != 0) {
		/* cannot protect it (vm.max_map_count): log it whole */
		int rc = dc__mu_log_mem(hi, cur);
		if (rc)
			log_failed(rc);
		hi = cur;
	}
	if (hi > cur)
		mprot(cur, hi, prot);
	dc__vol.stack_prot_lo = hi;
	if (hi >= r->end) {
		if (have) {
			memmove(&dc__vol.wp[k], &dc__vol.wp[k + 1],
				(dc__vol.nwp - k - 1) * sizeof(dc__vol.wp[0]));
			dc__vol.nwp--;
		}
	} else if (have) {
		dc__vol.wp[k].a = hi;
	} else {
		memmove(&dc__vol.wp[k + 1], &dc__vol.wp[k],
			(dc__vol.nwp - k) * sizeof(dc__vol.wp[0]));
		dc__vol.nwp++;
		dc__vol.wp[k] = (struct dc__wpr){ hi, r->end, prot, false,
			true };
	}
}

/*
 * UNDO, at the start of every interval (after the commit record, before
 * anything writes tracked memory; and after a recovery): a moved range
 * that is open -- writable whole because the checkpoint could not protect
 * it again (vm.max_map_count) -- has its before-image logged whole for
 * the new interval, as wp_open does within one; then the moved stack's
 * boundary (stack_interval).
 */
void
dc__track_interval(void)
{
	if (!dc__track_undo())
		return;
	for (unsigned k = 0; k < dc__vol.nwp; k++) {
		const struct dc__wpr *w = &dc__vol.wp[k];
		int rc;
		if (w->seg && w->open && (rc = dc__mu_log_shadow(w->a, w->b)))
			log_failed(rc);
	}
	stack_interval();
}
