/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * reads.c -- which pages of the pools a library checker touched
 *
 * Read-driven exploration (images.c) branches only on the pending lines a
 * recovery read.  A library checker (--check-lib) runs in a child of the
 * driver; for an image whose reads are wanted (PMT_SUBMIT_READS: those of
 * the crash points so explored), before it is called, the child installs
 * itself in librio
 * (rio_trace_set), and every pool the checker maps whose file is one of
 * the slot's pool files is registered with a userfaultfd in minor-fault
 * mode and its page table entries dropped (MADV_DONTNEED: the file is
 * shared, its content stays).  The first access to each page, by the
 * checker or by the kernel on its behalf (a write(2) from the pool), then
 * stops in a fault; a handler thread appends (pool, page) to the slot's
 * reads file and maps the page (UFFDIO_CONTINUE).  A record is written
 * before the access completes, so the file is complete however the checker
 * ends (exit, signal, timeout).  A pool is also recorded as mapped
 * (page PMT_READS_MAPPED) together with its page 0: librio reads the
 * header with pread() before it maps the file.
 *
 * What is not seen: a checker that reads a pool file with read(2) or
 * pread(2) itself.  Pools the checker did not map count as read whole
 * (images.c), so such a checker is judged sound only when it maps them.
 *
 * Invariants
 *   R1. A page's record is in the file before the page is mapped for the
 *       access that faulted (so every read of a mapped pool is recorded).
 *   R2. Any failure to set up leaves the checker running untraced, its
 *       reads file saying nothing: every pool counts as read whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <rio.h>

#include "pmemtest_int.h"

#define MAPS_MAX 16

static struct {
	int uffd;
	int out;
	const struct pmt_reads_file *files;
	unsigned nfiles;
	struct {
		uintptr_t base, size;
		uint32_t pool;
	} map[MAPS_MAX];
	unsigned nmap; /* published with release (handler reads it) */
	int (*trace_set)(const struct rio_trace_ops *);
} R = { .uffd = -1, .out = -1 };

static void
record(uint32_t pool, uint32_t page)
{
	uint32_t rec[2] = { pool, page };
	/* R1: a short write loses the record; the driver then sees a
	 * truncated file and treats the image's reads as unknown. */
	if (write(R.out, rec, sizeof(rec)) != (ssize_t)sizeof(rec))
		R.out = -1;
}

static void *
handler(void *arg)
{
	(void)arg;
	for (;;) {
		struct uffd_msg msg;
		struct pollfd pf = { .fd = R.uffd, .events = POLLIN };

		if (poll(&pf, 1, -1) < 0 && errno != EINTR)
			return NULL;
		if (read(R.uffd, &msg, sizeof(msg)) != (ssize_t)sizeof(msg))
			continue;
		if (msg.event != UFFD_EVENT_PAGEFAULT)
			continue;
		uintptr_t a = (uintptr_t)msg.arg.pagefault.address &
			~(uintptr_t)(PMT_PAGE - 1);
		unsigned n = __atomic_load_n(&R.nmap, __ATOMIC_ACQUIRE);
		for (unsigned i = n; i-- > 0;)
			if (a >= R.map[i].base &&
			    a < R.map[i].base + R.map[i].size) {
				record(R.map[i].pool, (uint32_t)((a -
					R.map[i].base) / PMT_PAGE));
				break;
			}
		struct uffdio_continue c = {
			.range = { .start = a, .len = PMT_PAGE } };
		if (ioctl(R.uffd, UFFDIO_CONTINUE, &c) != 0) {
			struct uffdio_range w = { .start = a,
				.len = PMT_PAGE };
			ioctl(R.uffd, UFFDIO_WAKE, &w);
		}
	}
	return NULL;
}

static void
on_flush(const rio_pool *p, const void *a, size_t n, const void *c)
{
	(void)p, (void)a, (void)n, (void)c;
}

static void
on_drain(const rio_pool *p, const void *c)
{
	(void)p, (void)c;
}

static void
on_dpoint(const rio_pool *p, const char *w, const void *c)
{
	(void)p, (void)w, (void)c;
}

static void
on_mapped(const rio_pool *p, void *base, size_t size, const char *path)
{
	struct stat st;

	(void)p;
	if (path == NULL || stat(path, &st) != 0 || R.nmap >= MAPS_MAX)
		return;
	for (unsigned i = 0; i < R.nfiles; i++) {
		if (R.files[i].ino != st.st_ino || R.files[i].dev != st.st_dev)
			continue;
		struct uffdio_register reg = {
			.range = { .start = (uintptr_t)base, .len = size },
			.mode = UFFDIO_REGISTER_MODE_MINOR };
		if (ioctl(R.uffd, UFFDIO_REGISTER, &reg) != 0)
			return; /* R2: not recorded as mapped */
		/* Shared file mapping: dropping the entries keeps the
		 * content, and every page faults again at its next access. */
		if (madvise(base, size, MADV_DONTNEED) != 0)
			return;
		R.map[R.nmap].base = (uintptr_t)base;
		R.map[R.nmap].size = size;
		R.map[R.nmap].pool = R.files[i].pool;
		__atomic_store_n(&R.nmap, R.nmap + 1, __ATOMIC_RELEASE);
		record(R.files[i].pool, 0); /* the header, read by pread */
		record(R.files[i].pool, PMT_READS_MAPPED);
		return;
	}
}

static void
on_unmapping(const rio_pool *p, void *base, size_t size)
{
	(void)p, (void)base, (void)size;
}

static const struct rio_trace_ops ops = {
	.flush = on_flush,
	.drain = on_drain,
	.durable_point = on_dpoint,
	.pool_mapped = on_mapped,
	.pool_unmapping = on_unmapping,
};

static int
open_uffd(void)
{
	int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
	struct uffdio_api api = { .api = UFFD_API,
		.features = UFFD_FEATURE_MINOR_SHMEM };

	if (fd < 0)
		return -1;
	if (ioctl(fd, UFFDIO_API, &api) != 0 ||
	    !(api.features & UFFD_FEATURE_MINOR_SHMEM)) {
		close(fd);
		return -1;
	}
	return fd;
}

bool
pmt_reads_available(void)
{
	int fd = open_uffd();
	if (fd < 0)
		return false;
	close(fd);
	return true;
}

void
pmt_reads_begin(int out_fd, const struct pmt_reads_file *files,
	unsigned nfiles)
{
	pthread_t t;

	R.out = out_fd;
	R.files = files;
	R.nfiles = nfiles;
	R.trace_set = (int (*)(const struct rio_trace_ops *))(uintptr_t)
		rio_trace_set;
	R.uffd = open_uffd();
	if (R.uffd < 0)
		return; /* R2 */
	if (pthread_create(&t, NULL, handler, NULL) != 0) {
		close(R.uffd);
		R.uffd = -1;
		return;
	}
	pthread_detach(t);
	R.trace_set(&ops);
}
