/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * track.c -- finding written pages: userfaultfd write-protect, async mode,
 *            and hot and cold regions
 *
 * Every tracked range is registered with one userfaultfd in WP mode with
 * UFFD_FEATURE_WP_ASYNC: a write to a write-protected page is resolved by
 * the kernel inside the fault (the page's uffd-wp bit is cleared; no
 * message, no signal).  PAGEMAP_SCAN with PM_SCAN_WP_MATCHING returns the
 * pages whose bit is clear ("written") and sets it again, atomically.
 * UFFD_FEATURE_WP_UNPOPULATED makes a never-touched page count as
 * protected, so untouched reservations cost nothing.
 *
 * A scan costs per VMA it walks (about 0.3-0.5 us each here), whether or
 * not anything was written, and a process has dozens of tracked VMAs
 * (every library's data and bss).  So regions are hot or cold:
 *   HOT   scanned at every checkpoint;
 *   COLD  a hot region whose pages were not written for COOL_AFTER
 *         checkpoints is made read-only (mprotect without PROT_WRITE) and
 *         not scanned (one that is not writable anyway just stops being
 *         scanned).  The first user-mode write faults (SIGSEGV,
 *         SEGV_ACCERR, sud.c hands it here), the region gets its real
 *         protection back and is hot again; the retried write then goes
 *         through the uffd-wp fault as usual.
 * State machine of a region: HOT --idle COOL_AFTER checkpoints--> COLD
 * --write fault, or a system call that may write it, or a mapping change
 * over it--> HOT.  PINNED regions never cool: the stack (the kernel writes
 * signal frames onto it) and the TLS block when glibc registered rseq (the
 * kernel writes it on preemption).  libdc's alternate signal stack and the
 * page of dc__st every checkpoint writes are not tracked at all (maps.c
 * invariant 2): every checkpoint copies them.
 *
 * Invariants:
 *  1. After dc__track_protect(a, b) no page of [a, b) is "written".
 *  2. A write by the kernel (read(2) into a buffer) goes through the same
 *     fault path and marks the page written: nothing is lost, nothing has
 *     to be pre-faulted -- for hot regions.  A cold region is made hot
 *     before any system call that may write it: one whose arguments point
 *     into it or up to 1 MiB below it, whose buffer of known length (read,
 *     pread, recvfrom, getdents64, readlink, getrandom) covers it, or whose
 *     iovecs (readv, recvmsg ...) do; a call that still fails with EFAULT
 *     is retried once after every region was made hot (dc__track_efault).
 *  3. The scan covers only VMAs registered in async mode (the kernel skips
 *     the rest under PM_SCAN_WP_MATCHING): libdc's own memory is never
 *     reported.
 *  4. A cold region holds no written page (it cooled right after a scan
 *     that found none, and nothing can write it until it is hot again), so
 *     not scanning it loses nothing.  dc__st.reg[].prot is always the
 *     program's protection, never the cold one.
 *  5. The cold state lives in dc__vol: a recovered process starts with
 *     every region hot.
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

int
dc__track_open(void)
{
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
	int pm = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (pm < 0) {
		int e = errno;
		close(fd);
		return dc__err(-e, "open /proc/self/pagemap: %s", strerror(e));
	}
	dc__vol.uffd = dc__own_fd(fd);
	dc__vol.pagemap_fd = dc__own_fd(pm);
	return 0;
}

int
dc__track_register(uint64_t a, uint64_t b)
{
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

extern const unsigned int __rseq_size __attribute__((weak));

static bool
contains(const struct dc__region *r, uint64_t a)
{
	return a >= r->start && a < r->end;
}

/* Which regions may never cool (state machine above). */
void
dc__track_pin(void)
{
	uint64_t tls = dc__st.ctx.fsbase;
	bool rseq = &__rseq_size != NULL && __rseq_size > 0;
	for (unsigned i = 0; i < dc__st.nreg; i++) {
		const struct dc__region *r = &dc__st.reg[i];
		dc__vol.pinned[i] = (r->kind & DC__R_STACK) ||
			(rseq && contains(r, tls));
		dc__vol.idle[i] = 0;
	}
}

static void
warm(unsigned i)
{
	const struct dc__region *r = &dc__st.reg[i];
	/* raw call: runs in the SIGSEGV handler too */
	if (r->prot & PROT_WRITE)
		dc__sys6(SYS_mprotect, (long)r->start,
			(long)(r->end - r->start), (long)r->prot, 0, 0, 0);
	dc__vol.cold[i] = false;
	dc__vol.idle[i] = 0;
	dc__vol.ncold--;
	dc__st.stats.warmed++;
}

/* Make the cold regions overlapping [a, b) hot; returns how many. */
unsigned
dc__track_warm_range(uint64_t a, uint64_t b)
{
	unsigned k = 0;
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

unsigned
dc__track_warm_all(void)
{
	return dc__track_warm_range(0, UINT64_MAX);
}

/* SIGSEGV at addr: a write into a cold region?  Then it is hot again and
 * the faulting instruction can be restarted. */
bool
dc__track_fault(uint64_t addr)
{
	return dc__track_warm_range(addr, addr + 1) > 0;
}

static void
warm_near(long v)
{
	uint64_t a = (uint64_t)v;
	if (a + NEAR >= dc__vol.cold_lo && a < dc__vol.cold_hi)
		dc__track_warm_range(a, a + NEAR);
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

/* Before a system call: make hot every cold region it may write
 * (invariant 2). */
void
dc__track_warm_args(long nr, const long *a)
{
	if (dc__vol.ncold == 0)
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
		dc__track_warm_range((uint64_t)a[0],
			(uint64_t)a[0] + (uint64_t)a[1]);
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

/* A call failed with EFAULT: was it a cold region?  Make every region hot;
 * true when the call should be tried again. */
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
	if (written || dc__vol.pinned[i]) {
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
 * The mappings changed: the new region list nw replaces dc__st.reg.  A new
 * region that is exactly an old cold one stays cold (its protection in nw,
 * read from /proc/self/maps, is the cold one: the real one comes back);
 * any other cold region is made hot first.  Call before classifying nw.
 */
void
dc__track_refold(struct dc__region *nw, unsigned nn)
{
	static bool keep[DC__MAX_REGIONS];
	if (dc__vol.ncold == 0)
		return;
	memset(keep, 0, sizeof(keep));
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
		}
	}
	memset(dc__vol.cold, 0, sizeof(dc__vol.cold));
	for (unsigned k = 0; k < nn; k++)
		dc__vol.cold[k] = keep[k];
}
