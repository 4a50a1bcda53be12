/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dirty_uffd.c -- find the pages written since the last fence, without
 * scanning: userfaultfd asynchronous write-protection + PAGEMAP_SCAN
 *
 * Soft-dirty bits would do, but many kernels are built without them.
 * Instead every traced pool is registered with a userfaultfd in WP mode
 * with UFFD_FEATURE_WP_ASYNC: the kernel itself resolves the first write to
 * a protected page (no fault handler thread, no round trip) and only
 * records that the page was written.  At a fence the tracer asks
 * PAGEMAP_SCAN for the written pages of the pool and, in the same call,
 * write-protects them again (PM_SCAN_WP_MATCHING).  Only those pages are
 * compared with the shadow.  Linux >= 6.7; needs userfaultfd permission
 * (CAP_SYS_PTRACE, or vm.unprivileged_userfaultfd=1).
 *
 * Invariants
 *   U1. Between two collects, every page the process wrote is reported by
 *       the second: the written state is cleared only by the scan that
 *       reports it (atomically, in the kernel).
 *   U2. Any failure makes the caller fall back to scanning the region.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tracer_int.h"
#include "linux_compat.h"

#define PAGE 4096u
#define VEC 256

struct pmt_uffd {
	int uffd;
	int pagemap;
};

int
pmt_uffd_open(struct pmt_uffd **out)
{
	struct uffdio_api api = { .api = UFFD_API,
		.features = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED |
			UFFD_FEATURE_WP_HUGETLBFS_SHMEM };
	struct pmt_uffd *u = calloc(1, sizeof(*u));
	int rc;

	if (u == NULL)
		return -ENOMEM;
	u->pagemap = -1;
	u->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	if (u->uffd < 0 || ioctl(u->uffd, UFFDIO_API, &api) != 0)
		goto fail;
	u->pagemap = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
	if (u->pagemap < 0)
		goto fail;
	*out = u;
	return 0;
fail:
	rc = -errno;
	pmt_uffd_close(u);
	return rc ? rc : -EINVAL;
}

static int
protect(struct pmt_uffd *u, void *base, size_t size, bool on)
{
	struct uffdio_writeprotect wp = {
		.range = { .start = (uintptr_t)base, .len = size },
		.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0,
	};
	return ioctl(u->uffd, UFFDIO_WRITEPROTECT, &wp) == 0 ? 0 : -errno;
}

int
pmt_uffd_register(struct pmt_uffd *u, void *base, size_t size)
{
	struct uffdio_register reg = {
		.range = { .start = (uintptr_t)base, .len = size },
		.mode = UFFDIO_REGISTER_MODE_WP,
	};

	if (ioctl(u->uffd, UFFDIO_REGISTER, &reg) != 0)
		return -errno;
	/* Everything starts protected: the next write to any page is
	 * recorded (U1). */
	if (protect(u, base, size, true) != 0) {
		pmt_uffd_unregister(u, base, size);
		return -EINVAL;
	}
	return 0;
}

void
pmt_uffd_unregister(struct pmt_uffd *u, void *base, size_t size)
{
	struct uffdio_range r = { .start = (uintptr_t)base, .len = size };

	protect(u, base, size, false);
	ioctl(u->uffd, UFFDIO_UNREGISTER, &r);
}

int
pmt_uffd_collect(struct pmt_uffd *u, void *base, size_t size,
	void (*fn)(void *page, void *arg), void *arg)
{
	struct page_region vec[VEC];
	uint64_t start = (uintptr_t)base, end = start + size;

	while (start < end) {
		struct pm_scan_arg a = {
			.size = sizeof(a),
			.flags = PM_SCAN_WP_MATCHING | PM_SCAN_CHECK_WPASYNC,
			.start = start,
			.end = end,
			.vec = (uintptr_t)vec,
			.vec_len = VEC,
			.category_mask = PAGE_IS_WRITTEN,
			.return_mask = PAGE_IS_WRITTEN,
		};
		long n = ioctl(u->pagemap, PAGEMAP_SCAN, &a);
		if (n < 0)
			return -errno; /* U2 */
		for (long i = 0; i < n; i++)
			for (uint64_t p = vec[i].start; p < vec[i].end;
				p += PAGE)
				fn((void *)(uintptr_t)p, arg);
		if (a.walk_end <= start)
			return -EIO;
		start = a.walk_end;
	}
	return 0;
}

void
pmt_uffd_close(struct pmt_uffd *u)
{
	if (u == NULL)
		return;
	if (u->uffd >= 0)
		close(u->uffd);
	if (u->pagemap >= 0)
		close(u->pagemap);
	free(u);
}
