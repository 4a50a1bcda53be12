/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recover.c -- resuming a process from its last checkpoint
 *
 * Runs in dc_init of a fresh process of the same program (same command,
 * address-space randomisation off, so the executable, libraries, vDSO,
 * stack top and brk base are where they were).
 *
 *   1. verify and apply the redo segments the shadow does not have yet,
 *      and undo the segment's changes of the interval after the
 *      checkpoint (tracking "undo": seg.c) -- both only bring the image
 *      to the committed generation;
 *   2. read the checkpoint's dc__st from the shadow (it is at the same
 *      address in this process) and CHECK, changing nothing: executable,
 *      loaded objects (address, name, build-id), vDSO address, read-only
 *      mappings.  A mismatch is refused with the difference named;
 *   3. undo the interval's file changes, bump the incarnation;
 *   4. on the recovery stack (inside dc__vol), rebuild the address space
 *      with raw system calls only: brk, unmap what the checkpoint did not
 *      have, map what is missing; map the image privately over every
 *      readable anonymous region but the heap and the stack (shadow.c
 *      invariant 3: restart costs no copy, each page is read at its first
 *      touch); MADV_DONTNEED the other tracked regions and copy the
 *      shadow's data extents into them (tracking "undo": map the segment
 *      shared over each moved region instead);
 *   5. dc__st is now the checkpoint's: re-establish the kernel state,
 *      write-protect all tracked memory (it equals the shadow), and jump to
 *      the saved registers.
 *
 * Invariants:
 *  1. Nothing is changed before every check of step 2 has passed, but
 *     the image's files being brought to the committed generation.
 *  2. Every step is idempotent: a crash anywhere during recovery is
 *     recovered by running the program again.  Steps 1 and 4 rewrite the
 *     same bytes; step 3 cuts each undone entry off the file-undo log
 *     (log.c invariant 3), so a rerun resumes the undo where it stopped;
 *     step 5 only opens and maps; the deletions delayed past the
 *     checkpoint (kstate.c invariant 4) are redone after the next commit
 *     of the resumed run (removing a removed file changes nothing).
 *  3. Step 4 calls no libc function that keeps state: libc's memory is
 *     being replaced under it.
 */
#include <errno.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dc_int.h"

#define SYS(nr, a, b, c, d, e, f) \
	dc__sys6(nr, (long)(a), (long)(b), (long)(c), (long)(d), (long)(e), \
		(long)(f))

/* Phase i of recovery starts (dc__vol.rt): a raw clock read, since step 4
 * uses it too.  0 dc__recover, 1 redo applied, 2 checks done, 3 files
 * undone and held output performed, 4 rebuild starts, 5 memory rebuilt,
 * 6 kernel state and tracking back (the resume). */
static void
rtime(unsigned i)
{
	struct timespec t;
	if (SYS(SYS_clock_gettime, CLOCK_MONOTONIC, &t, 0, 0, 0, 0) == 0)
		dc__vol.rt[i] = (uint64_t)t.tv_sec * 1000000000ull +
			(uint64_t)t.tv_nsec;
}

/* $DC_RECOVERY_TIMES: the phases' durations, in microseconds, with the
 * image's size (bench/discount/restart.sh). */
static void
say_times(void)
{
	const uint64_t *t = dc__vol.rt;
	uint64_t bytes = 0;
	for (unsigned i = 0; i < dc__st.nreg; i++)
		if (dc__st.reg[i].kind & DC__R_TRACKED)
			bytes += dc__st.reg[i].end - dc__st.reg[i].start;
	dc__say("recovery times (us): redo %lu checks %lu files %lu "
		"prepare %lu memory %lu kernel %lu total %lu; tracked %lu KiB",
		(unsigned long)((t[1] - t[0]) / 1000),
		(unsigned long)((t[2] - t[1]) / 1000),
		(unsigned long)((t[3] - t[2]) / 1000),
		(unsigned long)((t[4] - t[3]) / 1000),
		(unsigned long)((t[5] - t[4]) / 1000),
		(unsigned long)((t[6] - t[5]) / 1000),
		(unsigned long)((t[6] - t[0]) / 1000),
		(unsigned long)(bytes >> 10));
}

static int
verify(const struct dc__st *o)
{
	struct dc__obj *now = (struct dc__obj *)dc__vol.buf;
	unsigned n = 0;
	unsigned max = (unsigned)(sizeof(dc__vol.buf) / sizeof(*now));
	if (max > DC__MAX_OBJ)
		max = DC__MAX_OBJ;
	int rc = dc__objs_read(now, max, &n);
	if (rc)
		return rc;
	if (o->nobj != n)
		return dc__err(DC_EMISMATCH, "recovery refused: %u objects "
			"loaded now, %u at the checkpoint (LD_PRELOAD or a "
			"dlopen differs)", n, o->nobj);
	for (unsigned i = 0; i < n; i++) {
		const struct dc__obj *a = &o->obj[i], *b = &now[i];
		if (a->base != b->base || strcmp(a->name, b->name) ||
		    a->id_len != b->id_len ||
		    memcmp(a->build_id, b->build_id, a->id_len))
			return dc__err(DC_EMISMATCH, "recovery refused: "
				"object %u is %s at %#lx now, was %s at %#lx "
				"(or its build-id changed: rebuilt or "
				"upgraded)", i, b->name[0] ? b->name : "(main)",
				(unsigned long)b->base,
				a->name[0] ? a->name : "(main)",
				(unsigned long)a->base);
	}
	if (o->vdso != getauxval(AT_SYSINFO_EHDR))
		return dc__err(DC_EMISMATCH, "recovery refused: vDSO at %#lx, "
			"was %#lx (address randomisation on? run under "
			"dc-run)", getauxval(AT_SYSINFO_EHDR),
			(unsigned long)o->vdso);
	struct dc__region *f = dc__vol.fresh;
	unsigned nf;
	if ((rc = dc__maps_read(f, DC__MAX_REGIONS, &nf)))
		return rc;
	dc__maps_classify(f, nf);
	for (unsigned i = 0; i < nf; i++) {
		if (!(f[i].kind & DC__R_FIXED))
			continue;
		bool found = false;
		for (unsigned j = 0; j < o->nreg && !found; j++) {
			const struct dc__region *c = &o->reg[j];
			if (c->start == f[i].start && c->end == f[i].end &&
			    c->ino == f[i].ino && c->off == f[i].off &&
			    !strcmp(c->path, f[i].path))
				found = true;
			else if ((c->kind & DC__R_TRACKED) &&
				 c->start < f[i].end && c->end > f[i].start &&
				 !(f[i].kind & DC__R_SPECIAL))
				break;
		}
		if (!found)
			return dc__err(DC_EMISMATCH, "recovery refused: "
				"mapping %#lx-%#lx %s is not in the "
				"checkpoint", (unsigned long)f[i].start,
				(unsigned long)f[i].end, f[i].path);
	}
	return 0;
}

#ifdef DC_TEST_CRASHPOINTS
/* Test build: DC_CRASH_AT=rstep:N kills the process at its N-th step of
 * recovery (invariant 2: a crash anywhere there is recovered by running
 * again).  The steps: between the phases, around every file undo and its
 * cut (log.c), every region rebuilt, every descriptor reopened, every
 * delayed deletion after the resume (kstate.c).  Raw calls only: it runs
 * in step 4 too. */
static void
rstep_init(void)
{
	const char *e = dc__vol.crash_at;
	uint64_t n = 0;
	if (strncmp(e, "rstep:", 6) == 0)
		for (e += 6; *e >= '0' && *e <= '9'; e++)
			n = n * 10 + (uint64_t)(*e - '0');
	dc__vol.rstep_kill = n;
	dc__vol.rstep = 0;
}

void
dc__rstep(void)
{
	if (++dc__vol.rstep == dc__vol.rstep_kill)
		dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0),
			SIGKILL, 0, 0, 0, 0);
}
#else
#define rstep_init() ((void)0)
#endif

/* ---- step 4: raw system calls only (invariant 3) ---- */

/* Raw formatting for die: libc's memory is being replaced under step 4
 * (invariant 3), so not even snprintf, whose state is part of it. */
static char *
put_s(char *p, char *end, const char *s)
{
	while (*s && p < end)
		*p++ = *s++;
	return p;
}

static char *
put_hex(char *p, char *end, uint64_t v)
{
	char d[16];
	int n = 0;
	do
		d[n++] = "0123456789abcdef"[v & 15];
	while ((v >>= 4) && n < 16);
	p = put_s(p, end, "0x");
	while (n > 0 && p < end)
		*p++ = d[--n];
	return p;
}

static char *
put_dec(char *p, char *end, long v)
{
	char d[20];
	int n = 0;
	uint64_t u = v < 0 ? -(uint64_t)v : (uint64_t)v;
	if (v < 0)
		p = put_s(p, end, "-");
	do
		d[n++] = (char)('0' + u % 10);
	while ((u /= 10) && n < 20);
	while (n > 0 && p < end)
		*p++ = d[--n];
	return p;
}

__attribute__((noreturn)) static void
die(const char *what, long err)
{
	char msg[320], *p = msg, *end = msg + sizeof(msg) - 1;
	p = put_s(p, end, "dc: recovery failed while rebuilding memory (");
	p = put_s(p, end, what);
	p = put_s(p, end, ": ");
	p = put_dec(p, end, err);
	const struct dc__region *die_reg = dc__vol.rebuilding;
	if (die_reg) {
		p = put_s(p, end, ", region ");
		p = put_hex(p, end, die_reg->start);
		p = put_s(p, end, "-");
		p = put_hex(p, end, die_reg->end);
		p = put_s(p, end, " kind ");
		p = put_hex(p, end, die_reg->kind);
		p = put_s(p, end, " ");
		p = put_s(p, end, die_reg->path);
	}
	p = put_s(p, end, "); run the program again to retry\n");
	SYS(SYS_write, 2, msg, p - msg, 0, 0, 0);
	SYS(SYS_exit_group, 70, 0, 0, 0, 0, 0);
	__builtin_unreachable();
}

static bool
covered(const struct dc__st *o, uint64_t a, uint64_t b, uint64_t *next)
{
	for (unsigned j = 0; j < o->nreg; j++) {
		const struct dc__region *c = &o->reg[j];
		if (c->start <= a && c->end > a) {
			*next = c->end < b ? c->end : b;
			return true;
		}
	}
	uint64_t nx = b;
	for (unsigned j = 0; j < o->nreg; j++)
		if (o->reg[j].start > a && o->reg[j].start < nx)
			nx = o->reg[j].start;
	*next = nx;
	return false;
}

static bool
fresh_has(uint64_t a, uint64_t b, const char *path, uint64_t off)
{
	for (unsigned i = 0; i < dc__vol.nfresh; i++) {
		const struct dc__region *f = &dc__vol.fresh[i];
		if (f->start == a && f->end == b && !strcmp(f->path, path) &&
		    f->off == off)
			return true;
	}
	return false;
}

static void
map_region(const struct dc__region *c, int prot)
{
	long fd = -1;
	int flags = MAP_PRIVATE | MAP_FIXED;
	if (c->kind & (DC__R_ANON | DC__R_SEG) || c->path[0] != '/') {
		flags |= MAP_ANONYMOUS | MAP_NORESERVE;
	} else {
		fd = SYS(SYS_openat, AT_FDCWD, c->path, O_RDONLY | O_CLOEXEC,
			0, 0, 0);
		if (fd < 0)
			die(c->path, fd);
		if (c->kind & DC__R_SHARED)
			flags = MAP_SHARED | MAP_FIXED;
	}
	long r = SYS(SYS_mmap, c->start, c->end - c->start, prot, flags, fd,
		fd >= 0 ? c->off : 0);
	if (fd >= 0)
		SYS(SYS_close, fd, 0, 0, 0, 0, 0);
	if (r < 0)
		die("mmap", r);
}

/*
 * Is c anonymous memory that recovery maps from the image privately
 * instead of copying it in (shadow.c invariant 3)?  Not the heap (the
 * program break extends the heap's own mapping), not the stack (a
 * growing mapping), not unreadable memory (a copy that replaces it must
 * read it: seg.c), nothing under tracking "undo" (the segment is mapped
 * shared there).
 */
static bool
image_mappable(const struct dc__region *c)
{
	return (c->kind & DC__R_ANON) && (c->prot & PROT_READ) &&
		!(c->kind & (DC__R_HEAP | DC__R_STACK | DC__R_SEG |
			     DC__R_COW | DC__R_SHARED)) &&
		!dc__track_undo();
}

static void
rebuild_memory(void)
{
	const struct dc__st *o = &dc__vol.old;
	long r;
	/* brk first, so the heap has the checkpoint's extent */
	if (o->brk_end)
		SYS(SYS_brk, o->brk_end, 0, 0, 0, 0, 0);
	/* unmap tracked memory the checkpoint did not have */
	for (unsigned i = 0; i < dc__vol.nfresh; i++) {
		const struct dc__region *f = &dc__vol.fresh[i];
		if (!(f->kind & DC__R_TRACKED) || (f->kind & DC__R_HEAP))
			continue;
		for (uint64_t a = f->start, nx; a < f->end; a = nx)
			if (!covered(o, a, f->end, &nx) &&
			    (r = SYS(SYS_munmap, a, nx - a, 0, 0, 0, 0)) < 0)
				die("munmap", r);
	}
	for (unsigned j = 0; j < o->nreg; j++) {
		const struct dc__region *c = &o->reg[j];
		dc__vol.rebuilding = c;
		if (c->kind & DC__R_SPECIAL)
			continue;
		if (c->kind & DC__R_FIXED) {
			if (!fresh_has(c->start, c->end, c->path, c->off))
				map_region(c, (int)c->prot);
			continue;
		}
		if ((c->kind & DC__R_SEG) && dc__track_undo()) {
			/* UNDO: the segment, rolled back, is the memory */
			if ((r = dc__shadow_map(c->start, c->end,
				     (int)c->prot)) < 0)
				die("map the segment", r);
			continue;
		}
		if (image_mappable(c)) {
			/* the image itself, copy on write: mapped, not read
			 * in (shadow.c invariant 3) */
			if ((r = dc__shadow_map_private(c->start, c->end,
				     (int)c->prot)) < 0)
				die("map the image", r);
			dc__vol.image_mapped = true;
			dc__rstep();
			continue;
		}
		if (c->kind & DC__R_SEG) {
			/* moved memory, recovered by another tracking: a
			 * private copy of the segment */
			map_region(c, (int)c->prot | PROT_READ | PROT_WRITE);
		} else if (c->kind & DC__R_STACK) {
			/* grow the stack down to the checkpoint's extent: a
			 * user-mode touch below the stack expands it */
			volatile char *lo = (volatile char *)(uintptr_t)c->start;
			*lo = *lo;
		} else if (!(c->kind & DC__R_HEAP) &&
			   !fresh_has(c->start, c->end, c->path, c->off)) {
			map_region(c, (int)c->prot | PROT_READ | PROT_WRITE);
		}
		uint64_t len = c->end - c->start;
		if ((r = SYS(SYS_mprotect, c->start, len,
			     PROT_READ | PROT_WRITE, 0, 0, 0)) < 0)
			die("mprotect", r);
		if (c->kind & DC__R_COW) { /* maybe libdc's own RELRO */
			if ((r = dc__shadow_copy_over(c->start, c->end)) < 0)
				die("read shadow", r);
		} else if ((r = SYS(SYS_madvise, c->start, len, MADV_DONTNEED,
				    0, 0, 0)) < 0) {
			die("madvise", r);
		} else if ((r = dc__shadow_copy_in(c->start, c->end)) < 0) {
			die("read shadow", r);
		}
		if ((r = SYS(SYS_mprotect, c->start, len, c->prot, 0, 0, 0)) <
		    0)
			die("mprotect", r);
		dc__rstep();
	}
	dc__vol.rebuilding = NULL;
}

static void
restore_and_resume(void)
{
	rtime(4);
	rebuild_memory();
	/* what every checkpoint copies explicitly (ckpt.c add_own): the
	 * first page of dc__st, the alternate signal stack */
	uint64_t a0, a1;
	long r;
	dc__sud_altstack(&a0, &a1);
	if ((r = dc__shadow_copy_in((uint64_t)(uintptr_t)&dc__st,
		     (uint64_t)(uintptr_t)&dc__st + DC__HOT)) < 0 ||
	    (r = dc__shadow_copy_in(a0, a1)) < 0)
		die("read shadow", r);
	/* dc__st is the checkpoint's from here on (step 5).  Its list of
	 * mapping changes is the one its own fold took in (the commit
	 * clears it after the copy): already in the image, and punched
	 * again it would clear pages still mapped from the image (shadow.c
	 * invariant 3) */
	dc__st.nchg = 0;
	dc__st.chg_overflow = false;
	if (dc__vol.ctl_fd1 != dc__st.ctl_fd0) {
		SYS(SYS_dup2, dc__vol.ctl_fd1, dc__st.ctl_fd0, 0, 0, 0, 0);
		SYS(SYS_close, dc__vol.ctl_fd1, 0, 0, 0, 0, 0);
	}
	/* the first run's handle is valid again: same mapping, same fd */
	dc__vol.ctl = dc__st.ctl0;
	dc__rstep();
	rtime(5);
	int rc = dc__k_restore(dc__st.ctl_fd0);
	if (rc == 0) /* the held output, to the restored descriptors */
		rc = dc__held_recover_finish();
	if (rc == 0)
		rc = dc__mu_map();
	for (unsigned i = 0; rc == 0 && i < dc__st.nreg; i++) {
		const struct dc__region *c = &dc__st.reg[i];
		if (!(c->kind & DC__R_TRACKED))
			continue;
		rc = dc__track_register(c->start, c->end);
		if (rc == 0)
			rc = dc__track_protect(c->start, c->end);
	}
	dc__track_pin(); /* every region hot (track.c invariant 5) */
	if (rc == 0)
		rc = dc__track_arm(true); /* WP: every region protected */
	if (rc == 0)
		dc__track_interval(); /* UNDO: the moved stack's dead part */
	/* the threads, parked until dc__commit's release; before the timer:
	 * a tick taken here would write its frame over the top of the
	 * alternate stack, where the checkpoint's frames are */
	if (rc == 0)
		rc = dc__thr_recreate();
	if (rc == 0)
		rc = dc__timer_start();
	if (rc) {
		dc__say("recovery failed: %s (%s); run the program again to "
			"retry", dc_strerror(rc), rio_errormsg());
		SYS(SYS_exit_group, 70, 0, 0, 0, 0, 0);
	}
	dc__rstep();
	rtime(6);
	if (dc__vol.rt_say)
		say_times();
	dc__st.stats.recoveries++;
	dc__st.maps_changed = true; /* re-read the maps at the next commit */
	dc__vol.active = true;
	dc__vol.recovered = true;
	if (dc__st.verbose)
		dc__say("recovered generation %lu (incarnation %lu, %lu input "
			"events to replay)", (unsigned long)dc__vol.committed,
			(unsigned long)dc__vol.incarnation,
			(unsigned long)(dc__vol.replaying ?
					dc__vol.nd_seq : 0));
	if (dc__st.on_recover) {
		dc__vol.selector = SYSCALL_DISPATCH_FILTER_BLOCK;
		dc__st.on_recover(dc__st.cb_arg);
	}
	dc__vol.selector = SYSCALL_DISPATCH_FILTER_ALLOW;
	SYS(SYS_arch_prctl, 0x1002 /* ARCH_SET_FS */, dc__st.ctx.fsbase, 0, 0,
		0, 0);
	/* every signal blocked: the repaint request stays pending until
	 * the program runs with its own mask */
	uint64_t all = ~0ull;
	SYS(SYS_rt_sigprocmask, SIG_BLOCK, &all, 0, 8, 0, 0);
	dc__k_repaint();
	SYS(SYS_rt_sigprocmask, SIG_SETMASK, &dc__st.ctx.mask, 0, 8, 0, 0);
	dc__resume_ctx(&dc__st.ctx);
}

static int
find_fd_of(const char *path)
{
	struct stat want, st;
	if (stat(path, &want) != 0)
		return -1;
	for (int fd = 0; fd < DC__OWN_FD_BASE; fd++)
		if (fstat(fd, &st) == 0 && st.st_ino == want.st_ino &&
		    st.st_dev == want.st_dev)
			return fd;
	return -1;
}

int
dc__ctl_fd(void)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/ctl", dc__vol.dir);
	return find_fd_of(p);
}

int
dc__recover(void)
{
	const struct dc_commit *cm = dc__last_commit();
	if (cm == NULL)
		return dc__err(DC_ENOCKPT, "no committed checkpoint");
	rtime(0);
	dc__vol.rt_say = getenv("DC_RECOVERY_TIMES") != NULL;
	rstep_init();
	dc__rstep();
	/* a 2PC participant: no round served on the recovery stack (tree.c) */
	dc__tree_recovering();
	int rc = dc__redo_recover(cm);
	if (rc)
		return rc;
	rtime(1);
	/* Step 1 done: the shadow holds the committed generation
	 * (ckpt.c invariant 1). */
	DC_ASSERT(((const struct dc_words *)(const void *)(dc__vol.ctlb +
		DC_CTL_WORDS_OFF))->applied == cm->gen &&
		dc__vol.committed == cm->gen, "ckpt 1");
	dc__rstep();
	/* the segment's changes of the interval after the checkpoint (UNDO,
	 * seg.c): it holds dc__st too */
	if ((rc = dc__mu_undo()))
		return rc;
	dc__rstep();
	/* the checkpoint's own dc__st, read from where it lives */
	if ((rc = dc__shadow_read(&dc__vol.old, sizeof(dc__vol.old),
		     (uint64_t)(uintptr_t)&dc__st)))
		return rc;
	if (dc__vol.old.gen != dc__vol.committed)
		return dc__err(DC_ECORRUPT, "shadow holds generation %lu, "
			"commit record says %lu",
			(unsigned long)dc__vol.old.gen,
			(unsigned long)dc__vol.committed);
	if ((rc = verify(&dc__vol.old)))
		return rc;
	rtime(2);

	/* step 3: files, then the incarnation (fundo.c invariant 2) */
	if ((rc = dc__fu_undo()))
		return rc;
	struct dc_words *w = (struct dc_words *)(void *)(dc__vol.ctlb +
		DC_CTL_WORDS_OFF);
	/* Step 3: the incarnation moves on by one, once the file undo is
	 * complete (fundo.c invariant 2). */
	DC_ASSERT(w->incarnation == dc__vol.incarnation, "fundo 2");
	w->incarnation = dc__vol.incarnation + 1;
	/* The undo is complete (its writes synced by fundo.c when the
	 * directory is not memory); the new incarnation makes the applied
	 * entries stale before anything can append new ones. */
	rio_persist(dc__vol.ctl, &w->incarnation, sizeof(uint64_t));
	dc__vol.incarnation = w->incarnation;
	dc__rstep();
	/* the held output of the committed interval, performed (again);
	 * that of the lost one dropped (held.c invariant 3) */
	if ((rc = dc__held_recover()))
		return rc;
	rtime(3);
	uint64_t end, count;
	dc__nd_scan(dc__vol.committed + 1, &end, &count, NULL);
	dc__vol.replay_off = 0;
	dc__vol.replay_seq = 0;
	dc__vol.replay_end = end;
	dc__vol.nd_off = end;
	dc__vol.nd_seq = count;
	dc__vol.replaying = count > 0;
	dc__vol.fu_off = dc__vol.fu_seq = 0;

	dc__vol.ctl_fd1 = dc__ctl_fd();
	if ((rc = dc__track_open()) || (rc = dc__vdso_patch()) ||
	    (rc = dc__sud_start()))
		return rc;
	dc__vol.nfresh = 0;
	if ((rc = dc__maps_read(dc__vol.fresh, DC__MAX_REGIONS,
		     &dc__vol.nfresh)))
		return rc;
	dc__maps_classify(dc__vol.fresh, dc__vol.nfresh);
	dc__switch_stack(dc__vol.stack + sizeof(dc__vol.stack),
		restore_and_resume);
}
