/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * shadow.c -- the shadow image: the tracked memory of generation
 *             `applied`, in a sparse file addressed through slots
 *
 * The process's byte at address a is stored in `shadow` at
 *
 *     slot(a) * 1 GiB + (a mod 1 GiB)
 *
 * where slot(a) is the index of a's 1 GiB-aligned window in the slot table
 * of the ctl pool (FORMAT.md).  A process uses a handful of windows (the
 * executable and heap, the libraries and mappings, the stack), so the file
 * spans a few GiB of mostly holes on any file system with sparse files and
 * SEEK_DATA (tmpfs, ext4, xfs, btrfs); a hole is "zero" (anonymous) or "the
 * file's byte" (private file mapping), and a mapping that moves or grows
 * needs no bookkeeping.
 *
 * Invariants:
 *  1. A window's slot is durable in the table (base, then count) before
 *     any byte is written at its offsets; slots are appended, never
 *     changed or removed while the directory lives.  So every byte ever
 *     written is found again by a later process, and a window without a
 *     slot has nothing stored.
 *  2. Reads and the extent copy of recovery use raw system calls only
 *     (recover.c invariant 3).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dc_int.h"

#define SLOT_SIZE (1ull << DC_SLOT_SHIFT)
#define SYS(nr, a, b, c, d, e, f) \
	dc__sys6(nr, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), \
		(long)(f))

static struct dc_slots *
slots(void)
{
	return (struct dc_slots *)(void *)(dc__vol.ctlb + DC_CTL_SLOTS_OFF);
}

/* File offset of the window holding a, or -1 when it has no slot. */
static int64_t
window_off(uint64_t a)
{
	const struct dc_slots *t = slots();
	uint64_t base = a & ~(SLOT_SIZE - 1);
	unsigned n = t->n < DC_SLOTS ? (unsigned)t->n : DC_SLOTS;
	unsigned h = dc__vol.slot_hint;
	if (h < n && t->base[h] == base)
		return (int64_t)((uint64_t)h << DC_SLOT_SHIFT);
	for (unsigned i = 0; i < n; i++)
		if (t->base[i] == base) {
			dc__vol.slot_hint = i;
			return (int64_t)((uint64_t)i << DC_SLOT_SHIFT);
		}
	return -1;
}

/* The window's offset, taking a new slot if it has none (invariant 1). */
static int64_t
window_off_new(uint64_t a)
{
	int64_t off = window_off(a);
	if (off >= 0)
		return off;
	struct dc_slots *t = slots();
	if (t->n >= DC_SLOTS)
		return dc__err(DC_ELIMIT, "shadow: the process uses more than "
			"%u GiB windows of address space", DC_SLOTS);
	t->base[t->n] = a & ~(SLOT_SIZE - 1);
	/* The base must be durable before the count that makes it valid. */
	rio_persist(dc__vol.ctl, &t->base[t->n], sizeof(uint64_t));
	t->n++;
	/* The slot must be durable before bytes are written at its offsets
	 * (invariant 1). */
	rio_persist(dc__vol.ctl, &t->n, sizeof(uint64_t));
	return (int64_t)((t->n - 1) << DC_SLOT_SHIFT);
}

/* Length of [a, a + len) that stays inside a's window. */
static uint64_t
in_window(uint64_t a, uint64_t len)
{
	uint64_t room = SLOT_SIZE - (a & (SLOT_SIZE - 1));
	return len < room ? len : room;
}

int
dc__shadow_write(const void *src, uint64_t len, uint64_t a)
{
	const char *p = src;
	while (len > 0) {
		int64_t w = window_off_new(a);
		if (w < 0)
			return (int)w;
		uint64_t k = in_window(a, len);
		uint64_t off = (uint64_t)w + (a & (SLOT_SIZE - 1));
		int rc = dc__pwrite_all(dc__vol.shadow_fd, p, k, off);
		if (rc)
			return rc;
		p += k;
		a += k;
		len -= k;
	}
	return 0;
}

int
dc__shadow_punch(uint64_t a, uint64_t len)
{
	while (len > 0) {
		uint64_t k = in_window(a, len);
		int64_t w = window_off(a);
		if (w >= 0 &&
		    fallocate(dc__vol.shadow_fd, FALLOC_FL_PUNCH_HOLE |
				    FALLOC_FL_KEEP_SIZE,
			    w + (int64_t)(a & (SLOT_SIZE - 1)), (off_t)k) != 0)
			return dc__err(errno == EOPNOTSUPP ? DC_EFS : -errno,
				"shadow: punch %#lx+%#lx: %s (the directory "
				"needs a file system with hole punching: tmpfs, "
				"ext4, xfs, btrfs)", (unsigned long)a,
				(unsigned long)k, strerror(errno));
		a += k;
		len -= k;
	}
	return 0;
}

/* Read [a, a + len) of the image (zeros where nothing is stored). */
int
dc__shadow_read(void *dst, uint64_t len, uint64_t a)
{
	char *p = dst;
	while (len > 0) {
		uint64_t k = in_window(a, len);
		int64_t w = window_off(a);
		if (w < 0) {
			memset(p, 0, k);
		} else {
			uint64_t off = (uint64_t)w + (a & (SLOT_SIZE - 1));
			for (uint64_t o = 0; o < k;) {
				long r = SYS(SYS_pread64, dc__vol.shadow_fd,
					p + o, k - o, off + o, 0, 0);
				if (r < 0)
					return dc__err((int)r, "shadow: read "
						"%#lx", (unsigned long)a);
				if (r == 0) { /* past the end: a hole */
					memset(p + o, 0, k - o);
					break;
				}
				o += (uint64_t)r;
			}
		}
		p += k;
		a += k;
		len -= k;
	}
	return 0;
}

/*
 * Recovery: copy the stored extents of [a, b) into memory at their
 * addresses (the memory was just cleared).  Raw system calls only
 * (invariant 2); returns 0 or the failing call's -errno.
 */
long
dc__shadow_copy_in(uint64_t a, uint64_t b)
{
	int sfd = dc__vol.shadow_fd;
	while (a < b) {
		uint64_t k = in_window(a, b - a);
		int64_t w = window_off(a);
		if (w >= 0) {
			uint64_t lo = (uint64_t)w + (a & (SLOT_SIZE - 1));
			uint64_t hi = lo + k;
			long off = SYS(SYS_lseek, sfd, lo, SEEK_DATA, 0, 0, 0);
			while (off >= 0 && (uint64_t)off < hi) {
				long hole = SYS(SYS_lseek, sfd, off, SEEK_HOLE,
					0, 0, 0);
				if (hole < 0 || (uint64_t)hole > hi)
					hole = (long)hi;
				for (long o = off; o < hole;) {
					long r = SYS(SYS_pread64, sfd,
						a + ((uint64_t)o - lo),
						hole - o, o, 0, 0);
					if (r <= 0)
						return r < 0 ? r : -EIO;
					o += r;
				}
				if ((uint64_t)hole >= hi)
					break;
				off = SYS(SYS_lseek, sfd, hole, SEEK_DATA, 0, 0,
					0);
			}
			if (off < 0 && off != -ENXIO)
				return off;
		}
		a += k;
	}
	return 0;
}
