/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * track.c -- finding written pages: userfaultfd write-protect, async mode
 *
 * Every tracked range is registered with one userfaultfd in WP mode with
 * UFFD_FEATURE_WP_ASYNC: a write to a write-protected page is resolved by
 * the kernel inside the fault (the page's uffd-wp bit is cleared; no
 * message, no signal).  PAGEMAP_SCAN with PM_SCAN_WP_MATCHING returns the
 * pages whose bit is clear ("written") and sets it again, atomically.
 * UFFD_FEATURE_WP_UNPOPULATED makes a never-touched page count as
 * protected, so untouched reservations cost nothing.
 *
 * Invariants:
 *  1. After dc__track_protect(a, b) no page of [a, b) is "written".
 *  2. A write by the kernel (read(2) into a buffer) goes through the same
 *     fault path and marks the page written: nothing is lost, nothing has
 *     to be pre-faulted.
 *  3. The scan covers only VMAs registered in async mode (category mask
 *     PAGE_IS_WPALLOWED): libdc's own memory is never reported.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
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
		arg.flags = protect ? PM_SCAN_WP_MATCHING : 0;
		arg.category_mask = PAGE_IS_WRITTEN | PAGE_IS_WPALLOWED;
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
