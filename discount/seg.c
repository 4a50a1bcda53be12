/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * seg.c -- tracking "undo" (the thesis' design): the process's memory in a
 *          persistent segment, before-images in an undo log
 *
 * With DC_TRACK_UNDO the tracked memory is not copied at checkpoints: it
 * is MOVED into the persistent segment, the shadow file (shadow.c), mapped
 * MAP_SHARED at the same addresses, each byte at its own offset.  The
 * program then runs directly in the segment.  A checkpoint interval starts
 * with every segment page write-protected (track.c, as in WP mode); the
 * first write to a page faults and its before-image is appended to the
 * undo log `mundo` before the page becomes writable (copy-on-write into
 * the log, thesis 5.3).  A commit is then the commit record alone: the
 * segment already holds the new image; the log's entries belong to the
 * interval after the committed generation and are dead from the commit on.
 * After a crash, recovery rolls the segment back by applying the entries
 * of the interval newest first, then maps it again.
 *
 * The main stack is moved too, with room below it to grow into (a shared
 * mapping does not grow down; ckpt.c), and protected above the program's
 * stack pointer only, its two lowest live pages logged at once at each
 * checkpoint (track.c dc__track_interval).  Memory that is not
 * moved stays private and is tracked as in WP mode (its written pages
 * copied into the redo log at the checkpoint): the top of the stack from
 * the argument strings up (the kernel reads /proc/PID/cmdline from
 * anonymous memory only), the page of glibc's rseq area (the kernel
 * writes it on its own), memory that is not readable, and libdc's own
 * cut-out memory.
 *
 * A region is moved at the checkpoint that first sees it (ckpt.c
 * fold_maps): its bytes are written into the segment (the segment's old
 * bytes there logged first when the committed image has memory there),
 * then the segment is mapped over it.  Program calls that would change a
 * moved range's bytes behind the log's back are turned into calls on
 * private memory (sud.c): munmap and MAP_FIXED leave the segment as it was,
 * mremap and madvise(MADV_DONTNEED and the like) first replace the range
 * by a private copy (or private zeros), mprotect logs the range whole.
 * Such a range is moved again by the next checkpoint.
 *
 * Invariants:
 *  1. Before a byte of a moved range changes, its old value is durable in
 *     the undo log (tmpfs: written; elsewhere also fdatasync'ed), tagged
 *     with generation committed + 1 and the incarnation: the fault
 *     handler, the system-call path (a read(2) into a protected page) and
 *     the checkpoint's own writes (the region table, moves) all log first.
 *  2. The undo log of an interval starts at offset 0 (seq 0) and each
 *     entry names the previous one; the cursor is reset in the same step
 *     that advances dc__vol.committed, so a fault between the commit
 *     record and the reset cannot be logged under the wrong interval.
 *  3. Entries are undone newest first, so the oldest before-image of a
 *     byte wins; undoing is idempotent (a crash during recovery undoes
 *     the same entries again: the incarnation is bumped only after).
 *  4. The segment and the redo log never cover the same bytes while
 *     both are live: redo entries are of private memory only, and the
 *     redo log is flushed into the shadow before a region is moved.
 *  5. The append path uses raw system calls (or stores into the log's
 *     mapped window: tmpfs, where a store is as durable as a write) and
 *     this file's own scratch
 *     (dc__vol.mu_buf), and writes no tracked memory (not even the error
 *     message, which is thread-local: the TLS block is moved memory too):
 *     it runs in the SIGSEGV handler, which may interrupt libdc itself,
 *     and a write there would fault into it again.  It returns -errno;
 *     its callers outside the handler say what failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "dc_int.h"

#define SYS(nr, a, b, c, d, e, f) \
	dc__sys6(nr, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), \
		(long)(f))
#define MU_CHUNK ((uint64_t)DC__LOG_CHUNK) /* payload bytes per entry:
                                            * one checksum piece */
#define MU_WINDOW (16ull << 20) /* mapped part of the log (tmpfs) */
#define MU_SHRINK MU_WINDOW      /* give back what grew past it */

/* The shadow's identity as /proc/self/maps shows it (dev "maj:min"). */
int
dc__seg_identify(void)
{
	struct stat st;
	if (fstat(dc__vol.shadow_fd, &st) != 0)
		return dc__err(-errno, "fstat shadow: %s", strerror(errno));
	dc__vol.shadow_dev = ((uint64_t)major(st.st_dev) << 32) |
		minor(st.st_dev);
	dc__vol.shadow_ino = st.st_ino;
	return 0;
}

/* Is r (from /proc/self/maps) the shadow, mapped at its own offsets? */
bool
dc__seg_is(const struct dc__region *r)
{
	if (!(r->kind & DC__R_SHARED) || r->ino != dc__vol.shadow_ino ||
	    r->dev != dc__vol.shadow_dev || dc__vol.shadow_ino == 0)
		return false;
	const uint64_t win = 1ull << DC_SLOT_SHIFT;
	for (uint64_t x = r->start; x < r->end; x = (x | (win - 1)) + 1)
		if (dc__shadow_off(x) != (int64_t)(r->off + (x - r->start)))
			return false;
	return true;
}

/* Does [a, b) overlap a moved region of the last fold?  (A range only
 * stops being moved between folds, never starts.) */
bool
dc__seg_any(uint64_t a, uint64_t b)
{
	for (unsigned i = 0; i < dc__st.nreg; i++)
		if ((dc__st.reg[i].kind & DC__R_SEG) &&
		    dc__st.reg[i].start < b && dc__st.reg[i].end > a)
			return true;
	return false;
}

/* ---- the undo log (invariants 1, 2 and 5) ---- */

/* Append one entry to the interval's undo log through the format's one
 * writer (log.c), chained to the previous entry by b.  The payload is one
 * checksum piece (len <= MU_CHUNK, a multiple of 8: no pad). */
static int
mu_append(int type, uint64_t a, int64_t c, const void *data, uint64_t len)
{
#ifdef DC_BROKEN_NO_UNDO
	/* broken variant (tests): before-images are not logged */
	(void)type, (void)a, (void)c, (void)data, (void)len;
	return 0;
#endif
#ifdef DC_TEST_CRASHPOINTS
	if (dc__vol.mu_cap && dc__vol.mu_off + dc__log_span(len) >
	    dc__vol.mu_cap)
		return -ENOSPC; /* DC_TEST_MUNDO_MAX */
#endif
	struct dc_log_ent h = { .type = (uint16_t)type,
		.gen = dc__vol.committed + 1, .inc = dc__vol.incarnation,
		.a = (int64_t)a, .b = dc__vol.mu_prev, .c = c };
	int64_t here = (int64_t)dc__vol.mu_off;
	int rc = dc__log_append(dc__vol.mundo_fd, dc__vol.mu_map,
		dc__vol.mu_map_len, &dc__vol.mu_off, &dc__vol.mu_seq, &h, data,
		len, NULL, 0);
	if (rc)
		return rc;
	dc__vol.mu_prev = here;
	dc__st.stats.undo_bytes += len;
	return 0;
}

/* Log the before-image of [a, b) (page aligned) from memory: a page
 * about to be written, a buffer the kernel is about to fill.  0 or -errno
 * (invariant 5). */
int
dc__mu_log_mem(uint64_t a, uint64_t b)
{
	for (uint64_t x = a; x < b; x += MU_CHUNK) {
		uint64_t k = b - x < MU_CHUNK ? b - x : MU_CHUNK;
		int rc = mu_append(DC_MU_BYTES, x, 0,
			(const void *)(uintptr_t)x, k);
		if (rc)
			return rc;
	}
	return 0;
}

static long
log_extent(void *arg, uint64_t a, uint64_t b)
{
	(void)arg;
	for (uint64_t x = a; x < b; x += MU_CHUNK) {
		uint64_t k = b - x < MU_CHUNK ? b - x : MU_CHUNK;
		char *buf = dc__vol.mu_buf;
		int64_t off = dc__shadow_off(x);
		for (uint64_t o = 0; o < k;) {
			long r = SYS(SYS_pread64, dc__vol.shadow_fd, buf + o,
				k - o, (uint64_t)off + o, 0, 0);
			if (r <= 0)
				return r < 0 ? (int)r : -EIO;
			o += (uint64_t)r;
		}
		int rc = mu_append(DC_MU_BYTES, x, 0, buf, k);
		if (rc)
			return rc;
	}
	return 0;
}

/*
 * Log the before-image of [a, b) (page aligned) from the segment file:
 * its stored extents, then one entry saying the whole range was a hole.
 * Undone newest first, the range is punched, then the extents come back.
 * For long ranges (a whole region): holes cost nothing.  0 or -errno
 * (invariant 5).
 */
int
dc__mu_log_shadow(uint64_t a, uint64_t b)
{
	long rc = dc__shadow_extents(a, b, log_extent, NULL);
	if (rc)
		return (int)rc;
	return mu_append(DC_MU_ZERO, a, (int64_t)(b - a), NULL, 0);
}

/*
 * UNDO on tmpfs: map the log's first MU_WINDOW bytes, so an append is two
 * stores instead of a system call.  Where the kernel chooses, after
 * recovery has rebuilt the address space (a fixed place could be a
 * mapping of the checkpoint); cut out of tracking (maps.c).  Appends past
 * the window are written.
 */
int
dc__mu_map(void)
{
	if (!dc__track_undo() || !dc__vol.dir_is_mem || dc__vol.mu_map)
		return 0;
	struct stat st;
	if (fstat(dc__vol.mundo_fd, &st) != 0)
		return dc__err(-errno, "fstat mundo: %s", strerror(errno));
	if ((uint64_t)st.st_size < MU_WINDOW &&
	    ftruncate(dc__vol.mundo_fd, (off_t)MU_WINDOW) != 0)
		return dc__err(-errno, "mundo: %s", strerror(errno));
	void *p = mmap(NULL, MU_WINDOW, PROT_READ | PROT_WRITE, MAP_SHARED,
		dc__vol.mundo_fd, 0);
	if (p == MAP_FAILED)
		return dc__err(-errno, "map mundo: %s", strerror(errno));
	dc__vol.mu_map = p;
	dc__vol.mu_map_len = MU_WINDOW;
	return 0;
}

/* A new interval: the log starts over (invariant 2).  Called where
 * dc__vol.committed advances. */
void
dc__mu_restart(void)
{
	/* what grew past the window is given back; the window stays (it
	 * is mapped) */
	if (dc__vol.mu_off > MU_SHRINK && dc__vol.mundo_fd >= 0)
		SYS(SYS_ftruncate, dc__vol.mundo_fd,
			dc__vol.mu_map ? dc__vol.mu_map_len : 0, 0, 0, 0, 0);
	dc__vol.mu_off = dc__vol.mu_seq = 0;
	dc__vol.mu_prev = -1;
}

/*
 * Recovery: roll the segment back to the committed generation -- the
 * entries of the interval after it, of the incarnation that crashed,
 * newest first (invariant 3).
 */
static int
mu_apply(const struct dc_log_ent *e, const char *pl)
{
	if (e->type == DC_MU_BYTES)
		return dc__shadow_write(pl, e->len, (uint64_t)e->a);
	if (e->type == DC_MU_ZERO && e->c >= 0)
		return dc__shadow_punch((uint64_t)e->a, (uint64_t)e->c);
	return dc__err(DC_ECORRUPT, "undo log: entry type %u", e->type);
}

int
dc__mu_undo(void)
{
	uint64_t n;
	int rc = dc__log_undo(dc__vol.mundo_fd, dc__vol.committed + 1,
		dc__vol.incarnation, MU_CHUNK, mu_apply, "undo log", &n);
	if (rc)
		return rc;
	if (n > 0 && dc__st.verbose)
		dc__say("undid %lu segment changes of the interval after "
			"generation %lu", (unsigned long)n,
			(unsigned long)dc__vol.committed);
	/* The rolled-back segment is durable before the incarnation that
	 * makes these entries stale (recover.c). */
	return dc__sync_fd(dc__vol.shadow_fd);
}

/* ---- moving regions in, and out ---- */

/*
 * Move region r (tracked, readable, private or the shadow at the wrong
 * offsets) into the segment, mapped over [map_lo, r->end) (map_lo <
 * r->start: the stack, given room to grow below into unmapped space).
 * log_old: the committed image has memory somewhere there, so the
 * segment's bytes are logged first.  The segment's range becomes exactly
 * the memory -- a hole, then the present pages of anonymous memory, or
 * every page of a file's -- and is mapped over it.  r is rewritten as
 * what /proc/self/maps will show.  Runs in the checkpoint, on a stack
 * outside tracked memory (a temporary one, for the stack itself), with
 * the region writable (dc__track_suspend): nothing changes r's bytes
 * meanwhile.
 */
int
dc__seg_convert(struct dc__region *r, bool log_old, uint64_t map_lo)
{
	uint64_t a = r->start, b = r->end, pages = 0;
	int rc;
	if (map_lo > a)
		map_lo = a;
	if (log_old && (rc = dc__mu_log_shadow(map_lo, b)))
		return dc__err(rc, "undo log: the segment's bytes at "
			"%#lx-%#lx: %s", (unsigned long)a, (unsigned long)b,
			strerror(-rc));
	if ((rc = dc__shadow_punch(map_lo, b - map_lo)))
		return rc;
	if ((r->kind & DC__R_ANON) && !(r->kind & DC__R_SHARED)) {
		for (uint64_t lo = a; lo < b;) {
			uint64_t wend = b;
			long k = dc__track_scan(lo, b, false, false,
				dc__vol.scan, DC__SCAN_VEC, &wend);
			if (k < 0)
				return (int)k;
			for (long i = 0; i < k; i++) {
				uint64_t x = dc__vol.scan[i].start;
				uint64_t y = dc__vol.scan[i].end;
				if ((rc = dc__shadow_write(
					     (const void *)(uintptr_t)x, y - x,
					     x)))
					return rc;
				pages += (y - x) / DC__PAGE;
			}
			if (k < DC__SCAN_VEC || wend <= lo)
				break;
			lo = wend;
		}
	} else {
		if ((rc = dc__shadow_write((const void *)(uintptr_t)a, b - a,
			     a)))
			return rc;
		pages = (b - a) / DC__PAGE;
	}
	long m = dc__shadow_map(map_lo, b, (int)r->prot);
	if (m < 0)
		return dc__err((int)m, "map the segment over %#lx-%#lx: %s",
			(unsigned long)map_lo, (unsigned long)b,
			strerror((int)-m));
	r->start = a = map_lo;
	r->kind = DC__R_TRACKED | DC__R_SEG | (r->kind & DC__R_STACK);
	r->dev = dc__vol.shadow_dev;
	r->ino = dc__vol.shadow_ino;
	r->off = (uint64_t)dc__shadow_off(a);
	snprintf(r->path, sizeof(r->path), "%s/shadow", dc__vol.dir);
	dc__st.stats.seg_pages += pages;
	return 0;
}

/*
 * Before a program call that would change the bytes of moved memory in
 * [a, b) without going through the log (mremap moves a mapping with its
 * file offsets; madvise(MADV_DONTNEED) leaves a shared page as it was):
 * each moved piece is replaced by private memory with its protection --
 * a copy of its bytes, or zeros.  The segment keeps the bytes (the
 * committed image may need them); the next checkpoint moves the range in
 * again.  The same for anonymous memory recovery mapped privately from
 * the image (shadow.c invariant 3; madvise would give back the image's
 * bytes, mremap would carry file offsets a later punch clears, a fork's
 * child would see the image change): the copy is of the memory's own
 * bytes, and the next checkpoint copies its pages as it does any new
 * private memory.  Call after dc__track_release(a, b, false): the
 * protections are the program's, so /proc/self/maps shows them.
 */
int
dc__seg_privatize(uint64_t a, uint64_t b, bool zero)
{
	struct dc__region *v = dc__vol.fresh;
	unsigned nv;
	int rc = dc__maps_read(v, DC__MAX_REGIONS, &nv);
	if (rc)
		return rc;
	bool left = false; /* image mapped outside [a, b) */
	for (unsigned i = 0; i < nv; i++) {
		uint64_t lo = v[i].start > a ? v[i].start : a;
		uint64_t hi = v[i].end < b ? v[i].end : b;
		bool image = dc__shadow_is_private(&v[i]);
		if (image && (v[i].start < a || v[i].end > b))
			left = true;
		if (lo >= hi)
			continue;
		if (!image && !dc__seg_is(&v[i]))
			continue;
		long prot = (long)v[i].prot;
		long r;
#ifdef DC_BROKEN_IMAGE_SHARED
		/* broken build for the tests: memory mapped from the image
		 * stays so, whatever the call does to it */
		if (image)
			continue;
#endif
		if (zero) {
			r = SYS(SYS_mmap, lo, hi - lo, prot, MAP_PRIVATE |
				MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		} else if ((r = SYS(SYS_mmap, 0, hi - lo, PROT_READ |
				    PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
				    0)) >= 0) {
			/* the copy, with the piece's protection, then moved
			 * over it in one call */
			long t = r;
			if (image) {
				/* the memory's bytes, readable for the copy
				 * (it is replaced right after) */
				if (!(prot & PROT_READ))
					SYS(SYS_mprotect, lo, hi - lo, prot |
						PROT_READ, 0, 0, 0);
				memcpy((void *)t, (const void *)(uintptr_t)lo,
					hi - lo);
				rc = 0;
			} else {
				rc = dc__shadow_read((void *)t, hi - lo, lo);
			}
			if (rc == 0)
				r = SYS(SYS_mprotect, t, hi - lo, prot, 0, 0, 0);
			else
				r = -EIO;
			if (r >= 0)
				r = SYS(SYS_mremap, t, hi - lo, hi - lo,
					MREMAP_MAYMOVE | MREMAP_FIXED, lo, 0);
			if (r < 0)
				SYS(SYS_munmap, t, hi - lo, 0, 0, 0, 0);
		}
		if (r < 0)
			return dc__err((int)r, "replace the segment at "
				"%#lx-%#lx by private memory: %s",
				(unsigned long)lo, (unsigned long)hi,
				strerror((int)-r));
		dc__track_cut(lo, hi);
		if (image) /* new private memory: the next fold copies it */
			dc__map_changed(lo, hi - lo);
	}
	if (!left)
		dc__vol.image_mapped = false;
	return 0;
}

/*
 * Before a fork (dc-run --tree): every piece of anonymous memory recovery
 * mapped from the image becomes a private copy, so the child shares no
 * page with the shadow, which the parent's next flushes rewrite (shadow.c
 * invariant 3).  The pieces get the program's protection first (cold or
 * protected ones are read-only in the maps).
 */
int
dc__seg_privatize_image(void)
{
	if (!dc__vol.image_mapped)
		return 0;
	struct dc__region *v = dc__vol.fresh;
	unsigned nv;
	int rc = dc__maps_read(v, DC__MAX_REGIONS, &nv);
	if (rc)
		return rc;
	for (unsigned i = 0; i < nv; i++)
		if (dc__shadow_is_private(&v[i]))
			dc__track_release(v[i].start, v[i].end, false);
	return dc__seg_privatize(0, 1ull << 47, false);
}
