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
 *  3. Recovery maps anonymous memory from the image privately (copy on
 *     write) instead of copying it in.  A page of such a mapping the
 *     process has not written since shows the shadow's bytes there, so the
 *     shadow must change there only to what the page holds anyway: a
 *     checkpoint writes the process's own bytes at their own addresses,
 *     and it punches only ranges the process no longer has mapped from
 *     the image -- the change list restored with the checkpoint is
 *     cleared, being in the image already (recover.c), and a call that
 *     would make the image's file show through otherwise turns the range
 *     into private memory first (seg.c dc__seg_privatize):
 *     madvise(MADV_DONTNEED, MADV_FREE, MADV_REMOVE) would give back the
 *     shadow's bytes instead of zeros, mremap would carry the file
 *     offsets of the old addresses (punched at the next checkpoint), and
 *     a fork's child (dc-run --tree) would see the parent's later
 *     checkpoints.  maps.c classifies such a mapping as anonymous.
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dc_int.h"
#include "rio_int.h"

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
static int
window_off_new(uint64_t a, int64_t *off)
{
	if ((*off = window_off(a)) >= 0)
		return 0;
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
	*off = (int64_t)((t->n - 1) << DC_SLOT_SHIFT);
	return 0;
}

/*
 * Call fn for each piece of [a, a + len) that lies in one window, in
 * order, with the piece's file offset (-1: its window has no slot; with
 * create, one is taken first).  Stops at the first non-zero return.
 */
struct piece {
	char *p;                /* caller's buffer for [a0, ...) */
	uint64_t a0;
};
typedef long (*piece_fn)(struct piece *c, uint64_t a, uint64_t k, int64_t off);

static long
each_piece(uint64_t a, uint64_t len, bool create, piece_fn fn,
	struct piece *c)
{
	while (len > 0) {
		uint64_t room = SLOT_SIZE - (a & (SLOT_SIZE - 1));
		uint64_t k = len < room ? len : room;
		int64_t w;
		if (create) {
			int rc = window_off_new(a, &w);
			if (rc)
				return rc;
		} else {
			w = window_off(a);
		}
		long rc = fn(c, a, k, w < 0 ? -1 :
			w + (int64_t)(a & (SLOT_SIZE - 1)));
		if (rc)
			return rc;
		a += k;
		len -= k;
	}
	return 0;
}

static long
write_piece(struct piece *c, uint64_t a, uint64_t k, int64_t off)
{
	int rc = dc__pwrite_mem(dc__vol.shadow_fd, c->p + (a - c->a0), k,
		(off_t)off);
	return rc ? dc__err(rc, "shadow: write at %ld: %s", (long)off,
		strerror(-rc)) : 0;
}

int
dc__shadow_write(const void *src, uint64_t len, uint64_t a)
{
	struct piece c = { (char *)(uintptr_t)src, a };
	return (int)each_piece(a, len, true, write_piece, &c);
}

static long
punch_piece(struct piece *c, uint64_t a, uint64_t k, int64_t off)
{
	(void)c;
	if (off < 0 || fallocate(dc__vol.shadow_fd, FALLOC_FL_PUNCH_HOLE |
				     FALLOC_FL_KEEP_SIZE, off, (off_t)k) == 0)
		return 0;
	return dc__err(errno == EOPNOTSUPP ? DC_EFS : -errno, "shadow: punch "
		"%#lx+%#lx: %s (the directory needs a file system with hole "
		"punching: tmpfs, ext4, xfs, btrfs)", (unsigned long)a,
		(unsigned long)k, strerror(errno));
}

int
dc__shadow_punch(uint64_t a, uint64_t len)
{
	return (int)each_piece(a, len, false, punch_piece, NULL);
}

/* Raw reads from here on (invariant 2). */
static long
read_piece(struct piece *c, uint64_t a, uint64_t k, int64_t off)
{
	char *p = c->p + (a - c->a0);
	for (uint64_t o = 0; off >= 0 && o < k;) {
		long r = SYS(SYS_pread64, dc__vol.shadow_fd, p + o, k - o,
			(uint64_t)off + o, 0, 0);
		if (r < 0)
			return dc__err((int)r, "shadow: read %#lx",
				(unsigned long)a);
		if (r == 0) { /* past the end: a hole */
			memset(p + o, 0, k - o);
			return 0;
		}
		o += (uint64_t)r;
	}
	if (off < 0)
		memset(p, 0, k);
	return 0;
}

/* Read [a, a + len) of the image (zeros where nothing is stored). */
int
dc__shadow_read(void *dst, uint64_t len, uint64_t a)
{
	struct piece c = { dst, a };
	return (int)each_piece(a, len, false, read_piece, &c);
}

/*
 * The stored (non-hole) extents of the piece [a, a + k) at file offset lo,
 * in address order: fn(arg, start, end, file offset of start) for each,
 * stopping at the first that fails.  Raw calls only (invariant 2).
 */
typedef long (*extent_fn)(void *arg, uint64_t a, uint64_t b, int64_t off);

static long
each_extent(uint64_t a, uint64_t k, int64_t lo, extent_fn fn, void *arg)
{
	int sfd = dc__vol.shadow_fd;
	uint64_t hi = (uint64_t)lo + k;
	long off = lo < 0 ? -ENXIO : SYS(SYS_lseek, sfd, lo, SEEK_DATA, 0, 0, 0);
	while (off >= 0 && (uint64_t)off < hi) {
		long hole = SYS(SYS_lseek, sfd, off, SEEK_HOLE, 0, 0, 0);
		if (hole < 0 || (uint64_t)hole > hi)
			hole = (long)hi;
		long rc = fn(arg, a + ((uint64_t)off - (uint64_t)lo),
			a + ((uint64_t)hole - (uint64_t)lo), off);
		if (rc || (uint64_t)hole >= hi)
			return rc;
		off = SYS(SYS_lseek, sfd, hole, SEEK_DATA, 0, 0, 0);
	}
	return off < 0 && off != -ENXIO ? off : 0;
}

/* One stored extent, read into memory at its addresses. */
static long
copy_extent(void *arg, uint64_t a, uint64_t b, int64_t off)
{
	(void)arg;
	for (uint64_t o = 0; o < b - a;) {
		long r = SYS(SYS_pread64, dc__vol.shadow_fd, a + o, b - a - o,
			off + (int64_t)o, 0, 0);
		if (r <= 0)
			return r < 0 ? r : -EIO;
		o += (uint64_t)r;
	}
	return 0;
}

/* The stored extents of a piece, into memory at their addresses. */
static long
copy_piece(struct piece *c, uint64_t a, uint64_t k, int64_t lo)
{
	(void)c;
	return each_extent(a, k, lo, copy_extent, NULL);
}

/*
 * Recovery: copy the stored extents of [a, b) into memory at their
 * addresses (the memory was just cleared).  Raw system calls only
 * (invariant 2); returns 0 or the failing call's -errno.
 */
long
dc__shadow_copy_in(uint64_t a, uint64_t b)
{
	return each_piece(a, b - a, false, copy_piece, NULL);
}

/* copy_over: the end of what is done, the holes before it given back */
struct over {
	uint64_t next;
};

static long
drop(uint64_t a, uint64_t b)
{
	long r = a < b ? SYS(SYS_madvise, a, b - a, MADV_DONTNEED, 0, 0, 0) :
		0;
	return r < 0 ? r : 0;
}

static long
over_extent(void *arg, uint64_t a, uint64_t b, int64_t off)
{
	struct over *o = arg;
	long r = drop(o->next, a);
	o->next = b;
	return r ? r : copy_extent(NULL, a, b, off);
}

static long
over_piece(struct piece *c, uint64_t a, uint64_t k, int64_t lo)
{
	struct over o = { a };
	(void)c;
	long r = each_extent(a, k, lo, over_extent, &o);
	return r ? r : drop(o.next, a + k);
}

/*
 * Recovery, over a private file mapping the fresh process has already
 * (maps.c DC__R_COW: an object's relocated RELRO part -- libdc's own
 * among them, which its code reads while it runs): the stored extents of
 * [a, b) are copied in, and only the pages between them go back to the
 * file's bytes (MADV_DONTNEED), so no stored page is ever cleared on the
 * way.  Raw system calls only (invariant 2); 0 or -errno.
 */
long
dc__shadow_copy_over(uint64_t a, uint64_t b)
{
	return each_piece(a, b - a, false, over_piece, NULL);
}

/* File offset of the byte at a, or -1 when its window has no slot. */
int64_t
dc__shadow_off(uint64_t a)
{
	int64_t w = window_off(a);
	return w < 0 ? -1 : w + (int64_t)(a & (SLOT_SIZE - 1));
}

static long
map_piece(struct piece *c, uint64_t a, uint64_t k, int64_t off)
{
	long prot = (long)(uintptr_t)c->p;
	long r = SYS(SYS_mmap, a, k, prot, MAP_SHARED | MAP_FIXED,
		dc__vol.shadow_fd, off);
	return r < 0 ? r : 0;
}

/*
 * Map [a, b) of the image at a, shared (UNDO: the memory IS the image
 * from here on; seg.c).  Windows get their slots first.  Raw calls only:
 * recovery maps with it (invariant 2).  Returns 0 or -errno.
 */
long
dc__shadow_map(uint64_t a, uint64_t b, int prot)
{
	struct piece c = { (char *)(uintptr_t)(long)prot, a };
	return each_piece(a, b - a, true, map_piece, &c);
}

/* A piece of the committed image, mapped privately at its addresses: the
 * shadow's pages where its window has a slot (a hole reads zero), zeros
 * where it has none.  The file is grown to the piece's end first: a
 * private file page past the end of its file is SIGBUS, and growing only
 * adds a hole, which the image reads as zero already. */
static long
map_private_piece(struct piece *c, uint64_t a, uint64_t k, int64_t off)
{
	long prot = (long)(uintptr_t)c->p;
	long r;
	if (off < 0)
		return (r = SYS(SYS_mmap, a, k, prot, MAP_PRIVATE |
			    MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1,
			    0)) < 0 ? r : 0;
	struct stat st;
	if ((r = SYS(SYS_fstat, dc__vol.shadow_fd, &st, 0, 0, 0, 0)) < 0)
		return r;
	if ((uint64_t)st.st_size < (uint64_t)off + k &&
	    (r = SYS(SYS_ftruncate, dc__vol.shadow_fd, (uint64_t)off + k, 0,
		     0, 0, 0)) < 0)
		return r;
	r = SYS(SYS_mmap, a, k, prot, MAP_PRIVATE | MAP_FIXED | MAP_NORESERVE,
		dc__vol.shadow_fd, off);
	return r < 0 ? r : 0;
}

/*
 * Recovery (invariant 3): [a, b) of anonymous memory becomes the committed
 * image itself, mapped privately (copy on write) instead of copied in.
 * Raw calls only (invariant 2).  Returns 0 or -errno.
 */
long
dc__shadow_map_private(uint64_t a, uint64_t b, int prot)
{
	struct piece c = { (char *)(uintptr_t)(long)prot, a };
	return each_piece(a, b - a, false, map_private_piece, &c);
}

/* Is r (from /proc/self/maps) a private mapping of the shadow: anonymous
 * memory recovery mapped from the image (invariant 3)? */
bool
dc__shadow_is_private(const struct dc__region *r)
{
	return !(r->kind & DC__R_SHARED) && dc__vol.shadow_ino != 0 &&
		r->ino == dc__vol.shadow_ino && r->dev == dc__vol.shadow_dev;
}

struct extents {
	long (*fn)(void *arg, uint64_t a, uint64_t b);
	void *arg;
};

/* extent_fn over struct extents: the caller's callback, without the
 * file offset. */
static long
extent_call(void *arg, uint64_t a, uint64_t b, int64_t off)
{
	const struct extents *x = arg;
	(void)off;
	return x->fn(x->arg, a, b);
}

static long
extent_piece(struct piece *c, uint64_t a, uint64_t k, int64_t lo)
{
	return each_extent(a, k, lo, extent_call, c->p);
}

/*
 * Call fn(arg, ea, eb) for each stored extent of [a, b), by address, in
 * order (a hole is zero).  Raw calls only: the SIGSEGV handler uses it
 * (seg.c).  Returns 0, fn's first non-zero return, or -errno.
 */
long
dc__shadow_extents(uint64_t a, uint64_t b,
	long (*fn)(void *arg, uint64_t a, uint64_t b), void *arg)
{
	struct extents x = { fn, arg };
	return each_piece(a, b - a, false, extent_piece,
		&(struct piece){ (char *)&x, a });
}
