/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt.c -- committing a checkpoint: redo log, commit record, shadow image
 *
 * A checkpoint of generation g (dc__commit):
 *   0. the registers are saved (dc__save_ctx); what follows runs on a
 *      stack that is no part of the image (body_stack): the pages of the
 *      program's stack below the saved stack pointer are tracked too,
 *      and a redo page whose bytes changed between checksum and write
 *      would fail verification at recovery;
 *   1. mapping changes since the last commit are folded in: new tracked
 *      ranges are registered and copied whole, the changed parts of the
 *      others copied, dropped ranges punched (invariant 5);
 *   2. the written pages, from the tracking mechanism (track.c): UFFD,
 *      PAGEMAP_SCAN over the hot regions returns them and protects them
 *      again; WP, the pages recorded by write faults are taken and
 *      protected again; libdc's own first page of state and the live part
 *      of its signal stack are added (add_own);
 *   3. the segment of g is appended to the redo log: header, entries,
 *      pages (one pwritev), made durable (redo.c);
 *   4. the commit record (slot g & 1) naming the segment's offset, length
 *      and checksum is written and persisted: THE CHECKPOINT IS DURABLE
 *      HERE;
 *   5. the log is flushed into the shadow when it must be (redo.c);
 *   6. the interval's logs start over (their entries now carry g + 1).
 * Under the buffered protocol, 3-5 are written behind (invariant 8): with
 * the threads stopped, 0-2 and the copy of the pages named by 2 into a
 * staging area; then the program runs on while libdc's writer thread
 * makes 3, 4, tells the keeper (held.c H4) and makes 5.
 *
 * Invariants:
 *  1. The shadow holds exactly the image of generation words.applied; the
 *     redo log holds the segments applied+1 .. committed (redo.c
 *     invariant 1), so a committed checkpoint is never lost.
 *  2. The bytes the segment holds and the shadow gets are those of the
 *     checkpoint's instant, never of a later store: written in place,
 *     no byte the segment copies is written between the scan (2) and the
 *     end of the flush (5) (body_stack; the threads stopped); written
 *     behind, they are copied into the staging area before any thread
 *     runs again, and the segment and the flush read that copy only.
 *  3. Recovery applies the pending segments when applied < committed;
 *     applying is idempotent (same pages to the same offsets, same
 *     punches).
 *  4. A commit record is valid only with its magic and checksum; the valid
 *     slot with the higher generation is the committed checkpoint.
 *  5. The fold (1) write-protects exactly the ranges it copies -- regions
 *     new to tracking whole, and of the others the parts a mapping change
 *     touched -- so every page written in the interval and not copied by
 *     the fold is still "written" for the scan (2).  (Protecting a whole
 *     region because a change touched some of it would clear the written
 *     state of its other pages, and their stores would be in no
 *     checkpoint: a heap whose program break moved within its last page,
 *     a mapping with a few pages given back by madvise, and after a
 *     recovery -- the heap one mapping, the change list the checkpoint's
 *     own -- the heap, when the checkpoint's interval moved the break.)
 *  6. The region table covers the program's live stack at every commit:
 *     a stack pointer below the stack's region and in none makes the
 *     commit fold (stack_grew), so frames the grown stack holds are
 *     copied, and recovery grows the stack down to them.
 *  7. The region table holds the program's protection of every region,
 *     never a cold one (track.c invariant 4): the fold reads the maps
 *     again after making hot a cold region whose mapping the kernel
 *     merged with a neighbour (dc__track_refold).  Recovery gives every
 *     region the protection of the table.
 *  8. The checkpoint written behind (buffered protocol; not the first,
 *     not one with a fold's punches, held records or delayed deletions,
 *     not UNDO, 2PC or a tree, not on a disk file system; $DC_CKPT_SYNC
 *     turns it off): its writer is a thread of libdc made by clone3
 *     without the program knowing -- no dispatch (clone clears it), every
 *     signal blocked, in no thread table, so never stopped, checkpointed
 *     or trapped; it shares the main thread's TLS and makes raw system
 *     calls only.  Its stack, the keeper's positions and the staging
 *     area are one mapping of libdc's own (maps.c invariant 2).  The
 *     output of generation g leaves only after g's commit record is
 *     durable: the keeper's positions, taken at the stop, are sent by
 *     the writer after the record (held.c H3 before H4).  One checkpoint
 *     in flight: a commit (and the end of the run) first waits for the
 *     writer, and an error of the writer leaves the checkpoint before
 *     it the last (fatal, as an error of a commit in place).  While it
 *     writes g, the program's interval is g + 1 (dc__open_gen).  Recovery
 *     is unchanged: a segment without its commit record is not there.
 *
 * State machine of the directory: EMPTY --create--> CREATED (no valid
 * commit: a new run starts over) --first commit--> COMMITTED(g)
 * --commit--> COMMITTED(g+1) ... --clean exit--> removed.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/magic.h>
#include <linux/sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "dc_int.h"
#include "keeper_proto.h"
#include "pkru.h"
#include "rio_int.h"


#ifdef DC_TEST_CRASHPOINTS
/* Test build only: DC_CRASH_AT=point:gen kills the process at that point
 * of the commit of generation gen (redo: segment durable, no commit
 * record; committed: record durable, log not flushed; apply: half way
 * through the flush of the log; redo-part: the segment half written; a
 * checkpoint written behind is killed at redo 50 ms late, as by a slow
 * sync), and DC_TEST_REDO_MAX sets the log size
 * that makes a commit flush (1: every commit), DC_TEST_MUNDO_MAX the
 * undo log's size past which an append fails as on a full file system
 * (seg.c), DC_TEST_SEGV_TICK=1 sends the checkpoint timer's signal at
 * the start of every SIGSEGV handler, the tick that arrives between a
 * fault and its check (sud.c invariant 6), DC_TEST_EXIT_WAIT_MS=N keeps
 * an exiting process alive N ms after it removed its checkpoint (a kill
 * then finds a run that has finished; tests/discount/crash_test.cpp
 * [ed-exit]), DC_TEST_BG_DELAY_US holds the checkpoint writer back that
 * long before each checkpoint it writes, as on a loaded machine
 * (invariant 8).  Read once per
 * incarnation, into untracked memory: the environment is process memory,
 * and a recovered process has the checkpoint's. */
void
dc__crashpoint_init(void)
{
	const char *e = getenv("DC_CRASH_AT");
	snprintf(dc__vol.crash_at, sizeof(dc__vol.crash_at), "%s",
		e ? e : "");
	e = getenv("DC_TEST_REDO_MAX");
	if (e)
		dc__vol.redo_max = strtoull(e, NULL, 10);
	e = getenv("DC_TEST_MUNDO_MAX");
	dc__vol.mu_cap = e ? strtoull(e, NULL, 10) : 0;
	e = getenv("DC_TEST_SEGV_TICK");
	dc__vol.segv_tick = e && e[0] == '1';
	e = getenv("DC_TEST_SIG_TICK");
	dc__vol.sig_tick = e && e[0] == '1';
	e = getenv("DC_TEST_EXIT_WAIT_MS");
	dc__vol.exit_wait_ms = e ? strtoull(e, NULL, 10) : 0;
	e = getenv("DC_TEST_BG_DELAY_US");
	dc__vol.bg_delay_ns = e ? strtoull(e, NULL, 10) * 1000 : 0;
}

static bool
crash_armed(const char *point, uint64_t gen)
{
	const char *e = dc__vol.crash_at;
	size_t n = strlen(point);
	return !strncmp(e, point, n) && e[n] == ':' &&
		strtoull(e + n + 1, NULL, 10) == gen;
}

/* Test builds' waits: raw, as the writer and the handlers run them. */
static void
sleep_ns(uint64_t ns)
{
	struct timespec t = { (time_t)(ns / 1000000000),
		(long)(ns % 1000000000) };
	dc__sys6(SYS_nanosleep, (long)&t, 0, 0, 0, 0, 0);
}

static void
crash_now(void)
{
	dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0), SIGKILL,
		0, 0, 0, 0);
}

void
dc__crashpoint(const char *point, uint64_t gen)
{
	if (crash_armed(point, gen))
		crash_now();
}

/* The background writer's: 50 ms pass first, as on a device whose sync
 * takes that long, while the program runs on -- whatever it or the
 * writer let out meanwhile reaches the peers before the crash. */
static void
crashpoint_slow(const char *point, uint64_t gen)
{
	if (!crash_armed(point, gen))
		return;
	sleep_ns(50 * 1000 * 1000);
	crash_now();
}
#else
#define crashpoint_slow(point, gen) ((void)0)
#endif
#define CSUM_CHUNK (64u * 1024u)

static char *
path_in(char *buf, size_t n, const char *dir, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
	return buf;
}

int
dc__own_fd(int fd)
{
	int nfd = fcntl(fd, F_DUPFD_CLOEXEC, DC__OWN_FD_BASE);
	if (nfd < 0)
		return fd;
	close(fd);
	return nfd;
}

int
dc__sync_fd(int fd)
{
	/* On tmpfs a completed write survives the death of the process
	 * (Rio's model: the memory outlives the process); elsewhere the
	 * data must reach the device first. */
	if (dc__vol.dir_is_mem)
		return 0;
	/* raw: the background writer shares the main thread's TLS, errno
	 * with it (invariant 8) */
	long r = dc__sys6(SYS_fdatasync, fd, 0, 0, 0, 0, 0);
	if (r != 0)
		return dc__err((int)r, "fdatasync: %s", strerror((int)-r));
	return 0;
}

static struct dc_words *
words(void)
{
	return (struct dc_words *)(void *)(dc__vol.ctlb + DC_CTL_WORDS_OFF);
}

static struct dc_commit *
slot(uint64_t gen)
{
	return (struct dc_commit *)(void *)(dc__vol.ctlb + DC_CTL_COMMIT_OFF +
		256u * (unsigned)(gen & 1));
}

static bool
commit_valid(const struct dc_commit *c)
{
	return c->magic == DC_COMMIT_MAGIC && c->gen != 0 &&
		c->checksum == rio_checksum(c, 248, DC_COMMIT_SEED);
}

const struct dc_commit *
dc__last_commit(void)
{
	const struct dc_commit *a = slot(0), *b = slot(1), *best = NULL;
	if (commit_valid(a))
		best = a;
	if (commit_valid(b) && (best == NULL || b->gen > best->gen))
		best = b;
	return best;
}

static int
open_own(const char *dir, const char *name, int flags)
{
	char p[PATH_MAX];
	int fd = open(path_in(p, sizeof(p), dir, name),
		flags | O_CLOEXEC | O_RDWR, 0600);
	if (fd < 0)
		return dc__err(-errno, "open %s: %s", p, strerror(errno));
	return dc__own_fd(fd);
}

static unsigned
ctl_flags(void)
{
	return RIO_NO_SIGNALS | (dc__vol.dir_is_mem ? RIO_FORCE_BYTE : 0);
}

/*
 * librio tags a pool's mapping with a memory protection key of its own
 * when the CPU has them (librio/protect.c).  A signal handler starts with
 * the default PKRU, which denies every key but 0, and libdc commits inside
 * its handlers (SIGSYS, the timer): the commit record's store would fault
 * (SEGV_PKUERR).  The ctl mapping goes back to key 0, which every thread
 * and every handler may access.  A pool librio left untagged (mprotect
 * mode: a kernel without the call, or a CPU without protection keys, where
 * the kernel allocates no key, not even 0, and pkey_mprotect refuses it
 * with EINVAL) has nothing to undo.
 */
static int
ctl_key0(void)
{
	void *a = dc__vol.ctlb - RIO_POOL_HDR_SIZE;
	size_t len = RIO_POOL_HDR_SIZE + DC_CTL_SIZE;
	if (dc__vol.ctl->pkey < 0)
		return 0;
	if (syscall(SYS_pkey_mprotect, a, len, PROT_READ | PROT_WRITE, 0) ==
	    0)
		return 0;
	return dc__err(-errno, "pkey_mprotect of the ctl mapping %p: %s", a,
		strerror(errno));
}

static int
open_logs(const char *dir, int extra)
{
	int fds[5];
	const char *names[5] = { "shadow", "redo", "ndlog", "fundo", "mundo" };
	for (int i = 0; i < 5; i++) {
		fds[i] = open_own(dir, names[i], extra);
		if (fds[i] < 0) {
			int rc = fds[i];
			while (i-- > 0)
				close(fds[i]);
			return rc;
		}
	}
	dc__vol.shadow_fd = fds[0];
	dc__vol.redo_fd = fds[1];
	dc__vol.ndlog_fd = fds[2];
	dc__vol.fundo_fd = fds[3];
	dc__vol.mundo_fd = fds[4];
	dc__mu_restart();
	return dc__seg_identify();
}

static int
mkdirs(const char *dir)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s", dir);
	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0700) != 0 && errno != EEXIST)
			return dc__err(-errno, "mkdir %s: %s", p,
				strerror(errno));
		*s = '/';
	}
	if (mkdir(p, 0700) != 0 && errno != EEXIST)
		return dc__err(-errno, "mkdir %s: %s", p, strerror(errno));
	return 0;
}

static void
probe_fs(const char *dir)
{
	struct statfs sf;
	dc__vol.dir_is_mem = statfs(dir, &sf) == 0 &&
		(sf.f_type == TMPFS_MAGIC || sf.f_type == RAMFS_MAGIC);
}

/* Create a fresh directory content.  ctl is created last: a directory
 * without a valid ctl commit is "no checkpoint". */
int
dc__files_create(const char *dir)
{
	char p[PATH_MAX];
	int rc = mkdirs(dir);
	if (rc)
		return rc;
	probe_fs(dir);
	unlink(path_in(p, sizeof(p), dir, "ctl"));
	rc = open_logs(dir, O_CREAT | O_TRUNC);
	if (rc)
		return rc;

	struct rio_pool_opts o = { .layout = DC_CTL_LAYOUT };
	rio_pool *pool;
	rc = rio_pool_create_opts(path_in(p, sizeof(p), dir, "ctl"),
		RIO_POOL_HDR_SIZE + DC_CTL_SIZE, ctl_flags(), &o, &pool);
	if (rc)
		return rc;
	dc__vol.ctl = pool;
	dc__vol.ctlb = rio_pool_base(pool);
	if ((rc = ctl_key0()))
		return rc;

	struct dc_superblock *sb = (struct dc_superblock *)(void *)
		dc__vol.ctlb;
	memset(sb, 0, sizeof(*sb));
	sb->magic = DC_SB_MAGIC;
	sb->major = DC_MAJOR;
	sb->minor = DC_MINOR;
	sb->ctime_ns = rio_now_ns(CLOCK_REALTIME);
	sb->ctl_addr = (uint64_t)(uintptr_t)dc__vol.ctlb;
	struct stat st;
	if (stat("/proc/self/exe", &st) == 0) {
		sb->exe_dev = st.st_dev;
		sb->exe_ino = st.st_ino;
		sb->exe_size = (uint64_t)st.st_size;
	}
	ssize_t n = readlink("/proc/self/exe", sb->exe, sizeof(sb->exe) - 1);
	if (n > 0)
		sb->exe[n] = '\0';
	sb->st_addr = (uint64_t)(uintptr_t)&dc__st;
	sb->checksum = rio_checksum(sb, 4088, DC_SB_SEED);
	/* The superblock must be durable before any commit record refers
	 * to this directory. */
	rio_persist(pool, sb, sizeof(*sb));
	return 0;
}

/* The superblock's identity and versioning (librio/hdr.c, H1..H8).  A
 * directory is always written (recovery, further checkpoints); libdc has
 * no error of its own for a feature: an unknown incompat bit is a newer
 * format (DC_EVERSION). */
static const uint64_t sb_magic = DC_SB_MAGIC;
static const struct rio__hdr_rule sb_rule = {
	.what = "checkpoint directory",
	.magic = &sb_magic,
	.magic_len = sizeof(sb_magic),
	.major = DC_MAJOR,
	.minor = DC_MINOR,
	.fields = RIO__HDR_INCOMPAT,
	.incompat_known = 0,
	.code = {
		[RIO__HDR_BADMAGIC] = DC_ECORRUPT,
		[RIO__HDR_BADCSUM] = DC_ECORRUPT,
		[RIO__HDR_VERSION] = DC_EVERSION,
		[RIO__HDR_FEATURE] = DC_EVERSION,
		[RIO__HDR_RESERVED] = DC_ECORRUPT,
	},
};

static int
check_sb(const struct dc_superblock *sb, const char *dir)
{
	struct rio__hdr_view v = {
		.magic = &sb->magic,
		.csum_ok = sb->checksum == rio_checksum(sb, 4088, DC_SB_SEED),
		.major = sb->major,
		.minor = sb->minor,
		.incompat = sb->incompat,
		.reserved = { { sb->reserved, sizeof(sb->reserved) } },
	};
	char why[160];
	int rc = rio__hdr_check(&sb_rule, &v, RIO__HDR_WRITE, why,
		sizeof(why));

	if (rc)
		return dc__err(rc, "%s/ctl: %s", dir, why);
	return 0;
}

/* The superblock and commit slots of a ctl file, read without mapping it.
 * Returns the committed record (NULL: none, the directory holds no
 * checkpoint) or sets *rc for a corrupt or newer directory. */
static char ctl_blk[DC_CTL_WORDS_OFF + sizeof(struct dc_words)];

static const struct dc_commit *
ctl_read(const char *dir, int *rc)
{
	char p[PATH_MAX];
	*rc = 0;
	int fd = open(path_in(p, sizeof(p), dir, "ctl"), O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		if (errno != ENOENT)
			*rc = dc__err(-errno, "open %s: %s", p,
				strerror(errno));
		return NULL;
	}
	ssize_t n = pread(fd, ctl_blk, sizeof(ctl_blk), RIO_POOL_HDR_SIZE);
	close(fd);
	if (n != (ssize_t)sizeof(ctl_blk))
		return NULL; /* half-created */
	const struct dc_commit *a = (const void *)(ctl_blk + DC_CTL_COMMIT_OFF);
	const struct dc_commit *b = a + 1, *c = NULL;
	if (commit_valid(a))
		c = a;
	if (commit_valid(b) && (c == NULL || b->gen > c->gen))
		c = b;
	/* No valid commit record: a crash during creation (before or
	 * while the superblock was written) or before the first commit;
	 * there is nothing to recover, whatever the superblock says. */
	if (c == NULL)
		return NULL;
	*rc = check_sb((const struct dc_superblock *)(void *)ctl_blk, dir);
	return *rc ? NULL : c;
}

/* Open an existing directory; *have = a committed checkpoint exists. */
int
dc__files_open(const char *dir, bool *have)
{
	char p[PATH_MAX];
	int rc;
	*have = false;
	probe_fs(dir);
	if (ctl_read(dir, &rc) == NULL)
		return rc;
	const struct dc_superblock *sb = (const void *)ctl_blk;
	if (sb->st_addr != (uint64_t)(uintptr_t)&dc__st)
		return dc__err(DC_EMISMATCH, "recovery refused: libdc is at "
			"another address than at the checkpoint (address-space "
			"randomisation on, or another libdc build)");
	struct rio_pool_opts o = { .layout = DC_CTL_LAYOUT,
		.addr = (void *)(uintptr_t)(sb->ctl_addr - RIO_POOL_HDR_SIZE) };
	rio_pool *pool;
	rc = rio_pool_open_opts(path_in(p, sizeof(p), dir, "ctl"),
		ctl_flags(), &o, &pool);
	if (rc)
		return dc__err(rc == RIO_EADDRINUSE ? DC_EMISMATCH : rc,
			"recovery refused: %s cannot be mapped where the "
			"checkpointed program had it (%#lx; another program?): "
			"%s", p, (unsigned long)sb->ctl_addr, rio_errormsg());
	dc__vol.ctl = pool;
	dc__vol.ctlb = rio_pool_base(pool);
	if ((rc = ctl_key0()))
		return rc;
	const struct dc_commit *c = dc__last_commit();
	if (c == NULL)
		return 0;
	rc = open_logs(dir, 0);
	if (rc)
		return rc;
	dc__vol.committed = c->gen;
	dc__vol.incarnation = words()->incarnation;
	*have = true;
	return 0;
}

/* ---- folding mapping changes in ---- */

static bool
overlaps_chg(uint64_t a, uint64_t b)
{
	for (unsigned i = 0; i < dc__st.nchg; i++)
		if (dc__st.chg[i].a < b && dc__st.chg[i].b > a)
			return true;
	return false;
}

static bool
inside_old_tracked(const struct dc__region *old, unsigned nold, uint64_t a,
	uint64_t b)
{
	for (unsigned i = 0; i < nold; i++)
		if ((old[i].kind & DC__R_TRACKED) && old[i].start <= a &&
		    old[i].end >= b)
			return true;
	return false;
}

static int
add_ent(unsigned *n, uint64_t a, uint64_t len, uint64_t op)
{
	if (*n >= DC__MAX_ENTS)
		return dc__err(DC_ELIMIT, "checkpoint has more than %u "
			"ranges", DC__MAX_ENTS);
	dc__vol.ents[(*n)++] = (struct dc_redo_ent){ a, len, op };
	return 0;
}

static int scan_range(unsigned *n, uint64_t lo, uint64_t hi, bool written);

/* Copy every present page of [a, b) (a range new to tracking). */
static int
add_present(unsigned *n, uint64_t a, uint64_t b)
{
	return scan_range(n, a, b, false);
}

/* UNDO: may region r be moved into the segment (seg.c)?  Tracked,
 * readable, not moved yet, not a read-only file mapping's private copies
 * (maps.c DC__R_COW: never written again but through an mprotect; they
 * stay private and are copied, as in WP mode), and not what the kernel
 * writes on its own (track.c: the stack, the page of glibc's rseq
 * area). */
static bool
movable(const struct dc__region *r)
{
	uint64_t rp = dc__track_rseq_page();
	return dc__track_undo() && (r->kind & DC__R_TRACKED) &&
		!(r->kind & (DC__R_SEG | DC__R_COW)) && (r->prot & PROT_READ) &&
		!(rp >= r->start && rp < r->end) &&
		!(dc__st.stack_keep_lo && r->start == dc__st.stack_keep_lo);
}

/* Split region j of nw at [p, p + len) (inside it): up to three regions
 * in its place, a file mapping's offsets following. */
static int
split_at(struct dc__region *nw, unsigned *nn, unsigned j, uint64_t p,
	uint64_t len)
{
	const struct dc__region r = nw[j];
	uint64_t cut[4] = { r.start, p, p + len < r.end ? p + len : r.end,
		r.end };
	struct dc__region piece[3];
	unsigned k = 0;
	for (unsigned c = 0; c < 3; c++) {
		if (cut[c] >= cut[c + 1])
			continue;
		piece[k] = r;
		piece[k].start = cut[c];
		piece[k].end = cut[c + 1];
		if (r.ino)
			piece[k].off = r.off + (cut[c] - r.start);
		k++;
	}
	if (*nn + k - 1 > DC__MAX_REGIONS)
		return dc__err(DC_ELIMIT, "more than %u mappings",
			DC__MAX_REGIONS);
	memmove(&nw[j + k], &nw[j + 1], (*nn - j - 1) * sizeof(*nw));
	memcpy(&nw[j], piece, k * sizeof(*nw));
	*nn += k - 1;
	return 0;
}

/*
 * UNDO: the top of the stack -- from the page of the argument strings up:
 * argv, the environment, the auxiliary vector's strings -- stays private
 * anonymous memory of its own: the kernel reads /proc/PID/cmdline and
 * environ from anonymous memory only, so moved, they would read empty
 * (ps, pgrep).  It is split off the stack here and stays "[stack]":
 * pinned, as the whole stack is with the other trackings (never
 * protected; its live part copied by every checkpoint, track.c).  A
 * program whose frames are all there (a shallow one) has nothing moved
 * but the room below.
 */
static int
split_stack_args(struct dc__region *nw, unsigned *nn)
{
	if (!dc__track_undo())
		return 0;
	if (dc__st.stack_keep_lo == 0) {
		uint64_t a = dc__arg_start();
		if (a == 0)
			return 0;
		dc__st.stack_keep_lo = a & ~(DC__PAGE - 1);
	}
	uint64_t p = dc__st.stack_keep_lo;
	for (unsigned j = 0; j < *nn; j++) {
		const struct dc__region *r = &nw[j];
		if ((r->kind & DC__R_STACK) && !(r->kind & DC__R_SEG) &&
		    p > r->start && p < r->end)
			return split_at(nw, nn, j, p, r->end - p);
	}
	return 0;
}

/* UNDO: the moved stack cannot grow down (the segment is no growing
 * mapping), so it is moved with room below: its soft limit (at most
 * 64 MiB; 8 MiB when unlimited), less a 1 MiB gap above the next
 * mapping below.  The room is a hole of the segment: free until used. */
#define STACK_ROOM_MAX (64ull << 20)
#define STACK_ROOM_DEFAULT (8ull << 20)
#define STACK_GAP (1ull << 20)

static uint64_t
stack_room_lo(const struct dc__region *nw, unsigned j)
{
	const struct dc__region *r = &nw[j];
	struct rlimit rl;
	uint64_t room = STACK_ROOM_DEFAULT;
	if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
		room = rl.rlim_cur < STACK_ROOM_MAX ? rl.rlim_cur :
			STACK_ROOM_MAX;
	uint64_t lo = r->end > room ? (r->end - room) & ~(DC__PAGE - 1) : 0;
	if (j > 0 && nw[j - 1].end + STACK_GAP > lo)
		lo = nw[j - 1].end + STACK_GAP;
	return lo < r->start ? lo : r->start;
}

/* UNDO: a moved region inside the moved stack's range is the stack (the
 * maps show it as the shadow file, no longer "[stack]"), for
 * dc__track_interval. */
static void
mark_stack(struct dc__region *nw, unsigned nn)
{
	for (unsigned j = 0; j < nn; j++) {
		if ((nw[j].kind & DC__R_SEG) &&
		    nw[j].start >= dc__st.seg_stack_lo &&
		    nw[j].end <= dc__st.seg_stack_hi)
			nw[j].kind |= DC__R_STACK;
	}
}

/* UNDO: the page of glibc's rseq area becomes a region of its own, so the
 * rest of its mapping (which the kernel may have merged with the
 * program's own anonymous memory) can be moved. */
static int
split_rseq(struct dc__region *nw, unsigned *nn)
{
	uint64_t p = dc__track_rseq_page();
	if (!p || !dc__track_undo())
		return 0;
	for (unsigned j = 0; j < *nn; j++) {
		const struct dc__region *r = &nw[j];
		if (p >= r->start && p < r->end &&
		    (r->kind & DC__R_TRACKED) &&
		    !(r->kind & (DC__R_SEG | DC__R_STACK)))
			return split_at(nw, nn, j, p, DC__PAGE);
	}
	return 0;
}

static bool
overlaps_old_tracked(const struct dc__region *old, unsigned nold,
	uint64_t a, uint64_t b)
{
	for (unsigned i = 0; i < nold; i++)
		if ((old[i].kind & DC__R_TRACKED) && old[i].start < b &&
		    old[i].end > a)
			return true;
	return false;
}

/* A punch of [a, b), minus the moved regions of nw (UNDO: the segment
 * there is the memory itself). */
static int
add_punch(unsigned *n, const struct dc__region *nw, unsigned nn, uint64_t a,
	uint64_t b)
{
	for (unsigned j = 0; j < nn && a < b; j++) {
		if (!(nw[j].kind & DC__R_SEG) || nw[j].end <= a)
			continue;
		if (nw[j].start >= b)
			break;
		int rc;
		if (nw[j].start > a &&
		    (rc = add_ent(n, a, nw[j].start - a, DC_REDO_PUNCH)))
			return rc;
		a = nw[j].end;
	}
	return a < b ? add_ent(n, a, b - a, DC_REDO_PUNCH) : 0;
}

/*
 * [a, b) of tracked region r, new to tracking or changed by a mapping
 * change: its present pages copied (when readable), then protected.  Only
 * what was copied is protected (invariant 5): the rest of a region that a
 * change touches in part (madvise over some of its pages, a program break
 * moved within its last page) keeps its written pages for the scan that
 * follows the fold.
 */
static int
copy_protect(unsigned *n, const struct dc__region *r, uint64_t a, uint64_t b)
{
	int rc = (r->prot & PROT_READ) ? add_present(n, a, b) : 0;
	return rc ? rc : dc__track_protect(a, b);
}

static int
fold_maps(unsigned *n)
{
	struct dc__region *nw = dc__vol.fresh, *old = dc__st.reg;
	unsigned nn, nold = dc__st.nreg;
	bool all = dc__st.chg_overflow || nold == 0;
	int rc = dc__maps_read(nw, DC__MAX_REGIONS, &nn);
	if (rc)
		return rc;
	/* a cold region whose mapping is not its own any more was made hot:
	 * the maps again, with the program's protections (track.c
	 * invariant 4; invariant 7 below) */
	while (dc__track_refold(nw, nn))
		if ((rc = dc__maps_read(nw, DC__MAX_REGIONS, &nn)))
			return rc;
	dc__maps_classify(nw, nn);
	dc__maps_folded();
	if ((rc = split_rseq(nw, &nn)) || (rc = split_stack_args(nw, &nn)))
		return rc;
	mark_stack(nw, nn);

	/* UNDO: move new private memory into the segment, the redo log
	 * applied first (seg.c invariant 4) */
	bool flushed = false;
	for (unsigned j = 0; j < nn; j++) {
		struct dc__region *r = &nw[j];
		if (!movable(r))
			continue;
		if (!flushed && (rc = dc__redo_flush_pending()))
			return rc;
		flushed = true;
		bool stack = r->kind & DC__R_STACK;
		uint64_t lo = stack ? stack_room_lo(nw, j) : r->start;
		if ((rc = dc__seg_convert(r, overlaps_old_tracked(old, nold,
			     lo, r->end), lo)))
			return rc;
		if (stack) {
			dc__st.seg_stack_lo = r->start;
			dc__st.seg_stack_hi = r->end;
		}
	}

	/* punch: every changed range, and old tracked memory that is gone */
	for (unsigned i = 0; i < dc__st.nchg && !all; i++)
		if ((rc = add_punch(n, nw, nn, dc__st.chg[i].a,
			     dc__st.chg[i].b)))
			return rc;
	for (unsigned i = 0; i < nold; i++) {
		if (!(old[i].kind & DC__R_TRACKED))
			continue;
		uint64_t a = old[i].start;
		for (unsigned j = 0; j < nn && a < old[i].end; j++) {
			if (!(nw[j].kind & DC__R_TRACKED) ||
			    nw[j].end <= a || nw[j].start >= old[i].end)
				continue;
			if (nw[j].start > a &&
			    (rc = add_ent(n, a, nw[j].start - a,
				     DC_REDO_PUNCH)))
				return rc;
			a = nw[j].end;
		}
		if (a < old[i].end &&
		    (rc = add_ent(n, a, old[i].end - a, DC_REDO_PUNCH)))
			return rc;
	}
	/* new tracked private memory, and the changed parts of the rest:
	 * register, copy what is present, protect what was copied
	 * (invariant 5) */
	for (unsigned j = 0; j < nn; j++) {
		struct dc__region *r = &nw[j];
		if ((r->kind & DC__R_SHARED) && (r->prot & PROT_WRITE)) {
			dc__refuse("a shared writable mapping");
			return dc__err(DC_EUNSUPPORTED, "shared writable "
				"mapping %#lx-%#lx %s", (unsigned long)r->start,
				(unsigned long)r->end, r->path);
		}
		if (!(r->kind & DC__R_TRACKED) || (r->kind & DC__R_SEG))
			continue;
		bool fresh = all ||
			!inside_old_tracked(old, nold, r->start, r->end);
		if (!fresh && !overlaps_chg(r->start, r->end))
			continue;
		if ((rc = dc__track_register(r->start, r->end)))
			return rc;
		if (fresh) {
			if ((rc = copy_protect(n, r, r->start, r->end)))
				return rc;
			continue;
		}
		for (unsigned i = 0; i < dc__st.nchg; i++) {
			uint64_t a = dc__st.chg[i].a > r->start ?
				dc__st.chg[i].a : r->start;
			uint64_t b = dc__st.chg[i].b < r->end ?
				dc__st.chg[i].b : r->end;
			if (a < b && (rc = copy_protect(n, r, a, b)))
				return rc;
		}
#ifdef DC_BROKEN_FOLD_PROTECT_WHOLE
		/* broken build for the tests: the whole region is protected
		 * again, so the stores of the interval outside its changed
		 * part are never scanned */
		if ((rc = dc__track_protect(r->start, r->end)))
			return rc;
#endif
	}
	unsigned most = nn > nold ? nn : nold;
	dc__track_will_write((uint64_t)(uintptr_t)&dc__st.nreg,
		(uint64_t)(uintptr_t)&dc__st.reg[most]);
	memcpy(old, nw, nn * sizeof(*nw));
	dc__st.nreg = nn;
	dc__track_pin();
	return 0;
}

/* Pages of [lo, hi) into redo entries: written ones (protected again),
 * or, with written=false, present ones. */
static int
scan_range(unsigned *n, uint64_t lo, uint64_t hi, bool written)
{
	while (lo < hi) {
		uint64_t wend = hi;
		long k = dc__track_scan(lo, hi, written, written, dc__vol.scan,
			DC__SCAN_VEC, &wend);
		if (k < 0)
			return (int)k;
		for (long i = 0; i < k; i++) {
			int rc = add_ent(n, dc__vol.scan[i].start,
				dc__vol.scan[i].end - dc__vol.scan[i].start,
				DC_REDO_PAGES);
			if (rc)
				return rc;
		}
		if (k < DC__SCAN_VEC || wend <= lo)
			break;
		lo = wend;
	}
	return 0;
}

/*
 * One PAGEMAP_SCAN per run of hot tracked regions that are neighbours in
 * the region list (nothing but libdc's own cut-out memory or unmapped
 * space between them): the walk costs per VMA visited, so cold regions and
 * the untracked VMAs between regions (library text) are not walked.  Each
 * region learns whether it was written (track.c cools idle ones).
 */
static int
scan_written(unsigned *n)
{
	const struct dc__region *reg = dc__st.reg;
	unsigned nreg = dc__st.nreg;
	for (unsigned i = 0; i < nreg;) {
		if (!(reg[i].kind & DC__R_TRACKED) || dc__vol.cold[i]) {
			i++;
			continue;
		}
		unsigned j = i + 1;
		while (j < nreg && (reg[j].kind & DC__R_TRACKED) &&
		       !dc__vol.cold[j])
			j++;
		unsigned n0 = *n;
		int rc = scan_range(n, reg[i].start, reg[j - 1].end, true);
		if (rc)
			return rc;
		/* attribute the written ranges to the regions */
		unsigned e = n0;
		for (unsigned k = i; k < j; k++) {
			while (e < *n && dc__vol.ents[e].addr +
					dc__vol.ents[e].len <= reg[k].start)
				e++;
			dc__track_note(k, e < *n &&
				dc__vol.ents[e].addr < reg[k].end);
		}
		i = j;
	}
	return 0;
}

/* WP: longer written ranges (open ranges, pinned regions) are copied by
 * their present pages, shorter ones as they are. */
#define WP_COPY 16

/*
 * WP: the ranges the write faults recorded (track.c dc__track_take),
 * clipped to the tracked regions, then protected again: the whole region
 * list after a fold.
 */
static int
take_written(unsigned *n, bool folded)
{
	const struct dc__region *reg = dc__st.reg;
	unsigned k = dc__track_take(), nreg = dc__st.nreg, i = 0;
	int rc = 0;
	for (unsigned s = 0; s < k && rc == 0; s++) {
		uint64_t a = dc__vol.dirty[s].a, b = dc__vol.dirty[s].b;
		while (i < nreg && reg[i].end <= a)
			i++;
		for (unsigned j = i; j < nreg && reg[j].start < b && rc == 0;
		     j++) {
			/* UNDO: moved memory is the segment itself */
			if (!(reg[j].kind & DC__R_TRACKED) ||
			    !(reg[j].prot & PROT_READ) ||
			    (dc__track_undo() && (reg[j].kind & DC__R_SEG)))
				continue;
			uint64_t lo = a > reg[j].start ? a : reg[j].start;
			uint64_t hi = b < reg[j].end ? b : reg[j].end;
			rc = hi - lo > WP_COPY * DC__PAGE ?
				scan_range(n, lo, hi, false) :
				add_ent(n, lo, hi - lo, DC_REDO_PAGES);
		}
	}
	int rc2 = dc__track_arm(folded);
	return rc ? rc : rc2;
}

/* What is cut out of tracking but part of every checkpoint (maps.c
 * invariant 2): the first page of dc__st, and the live part of the
 * alternate signal stack when the commit runs on it (the frames of the
 * dispatch or timer handler, the program's registers in the signal frame
 * above them). */
static int
add_own(unsigned *n)
{
	int rc = add_ent(n, (uint64_t)(uintptr_t)&dc__st, DC__HOT_USED,
		DC_REDO_PAGES);
	uint64_t a0, a1, sp = dc__st.ctx.rsp & ~(DC__PAGE - 1);
	dc__sud_altstack(&a0, &a1);
	if (rc == 0 && sp >= a0 && sp < a1)
		rc = add_ent(n, sp, a1 - sp, DC_REDO_PAGES);
	return rc;
}

/*
 * Invariant 6: the main stack's mapping grows down when the program
 * touches the page below it -- a page fault, no system call, so no
 * mapping change is noted.  When the program's stack pointer (less the
 * red zone) is below the stack region of the table and in no region at
 * all, the stack grew since the last fold: this checkpoint folds, and the
 * grown region is copied whole.
 */
static bool
stack_grew(void)
{
#ifdef DC_BROKEN_STACK_NO_FOLD /* broken build: never noticed */
	return false;
#endif
	uint64_t sp = dc__st.ctx.rsp, a0, a1;
	uint64_t s0 = (uint64_t)(uintptr_t)dc__vol.stack;
	dc__sud_altstack(&a0, &a1);
	if ((sp >= a0 && sp < a1) ||
	    (sp >= s0 && sp < s0 + sizeof(dc__vol.stack)))
		sp = dc__vol.prog_sp; /* a commit in a handler of libdc */
	if (sp < 128 + DC__PAGE)
		return false;
	sp = (sp - 128) & ~(DC__PAGE - 1);
	bool below = false;
	for (unsigned i = 0; i < dc__st.nreg; i++) {
		const struct dc__region *r = &dc__st.reg[i];
		if (sp >= r->start && sp < r->end)
			return false;
		if ((r->kind & DC__R_STACK) && !(r->kind & DC__R_SEG) &&
		    sp < r->start)
			below = true;
	}
	return below;
}

/* $DC_CKPT_TIMES (held_tpcc.sh's breakdown): phase i of the commit ends
 * now -- 0 fold, scan and own pages, 1 redo segment (checksum and write;
 * written behind: the staging copy and the hand-over), 2 held output
 * sealed and commit record, 3 flush into the shadow, 4 the keeper told
 * and held output released -- its thread CPU time and clock time added
 * to the sums; i < 0 starts a commit.  All of it runs with the program's
 * threads stopped.  Raw clock reads: a commit may run in a signal
 * handler. */
static uint64_t
ct_now(clockid_t id)
{
	struct timespec t;
	dc__sys6(SYS_clock_gettime, id, (long)&t, 0, 0, 0, 0);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static void
ct_mark(int i)
{
	if (!dc__vol.ct_say)
		return;
	uint64_t c = ct_now(CLOCK_THREAD_CPUTIME_ID), w = ct_now(CLOCK_MONOTONIC);
	if (i >= 0) {
		dc__vol.ct_cpu[i] += c - dc__vol.ct_last_cpu;
		dc__vol.ct_wall[i] += w - dc__vol.ct_last_wall;
	}
	dc__vol.ct_last_cpu = c;
	dc__vol.ct_last_wall = w;
	if (i == 4)
		dc__vol.ct_n++;
}

/* ... said every 50 checkpoints, with the writer's phases (invariant 8:
 * segment; record and keeper; flush) and its waits; called when the
 * writer is idle. */
static void
ct_report(void)
{
	if (!dc__vol.ct_say || dc__vol.ct_n < 50)
		return;
	const uint64_t *a = dc__vol.ct_cpu, *b = dc__vol.ct_wall;
	const uint64_t *wa = dc__vol.ct_wcpu, *wb = dc__vol.ct_wwall;
	uint64_t k = dc__vol.ct_n * 1000, stop = 0;
	for (int i = 0; i < 5; i++)
		stop += b[i];
	dc__say("checkpoint times over %lu (us each, cpu/clock): fold+scan "
		"%lu/%lu redo %lu/%lu commit %lu/%lu flush %lu/%lu release "
		"%lu/%lu; stopped %lu; %lu KiB copied each, %lu flushes; "
		"behind %lu of %lu, writer: segment %lu/%lu record %lu/%lu "
		"flush %lu/%lu, waited for %lu times (%lu us each)",
		(unsigned long)dc__vol.ct_n, (unsigned long)(a[0] / k),
		(unsigned long)(b[0] / k), (unsigned long)(a[1] / k),
		(unsigned long)(b[1] / k), (unsigned long)(a[2] / k),
		(unsigned long)(b[2] / k), (unsigned long)(a[3] / k),
		(unsigned long)(b[3] / k), (unsigned long)(a[4] / k),
		(unsigned long)(b[4] / k), (unsigned long)(stop / k),
		(unsigned long)(dc__vol.ct_bytes / dc__vol.ct_n >> 10),
		(unsigned long)dc__vol.ct_flushes,
		(unsigned long)dc__vol.bg_commits,
		(unsigned long)(dc__vol.bg_commits + dc__vol.bg_syncs),
		(unsigned long)(wa[0] / k), (unsigned long)(wb[0] / k),
		(unsigned long)(wa[1] / k), (unsigned long)(wb[1] / k),
		(unsigned long)(wa[2] / k), (unsigned long)(wb[2] / k),
		(unsigned long)dc__vol.bg_waits,
		(unsigned long)(dc__vol.bg_waits ? dc__vol.bg_wait_ns / 1000 /
			dc__vol.bg_waits : 0));
	memset(dc__vol.ct_cpu, 0, sizeof(dc__vol.ct_cpu));
	memset(dc__vol.ct_wall, 0, sizeof(dc__vol.ct_wall));
	memset(dc__vol.ct_wcpu, 0, sizeof(dc__vol.ct_wcpu));
	memset(dc__vol.ct_wwall, 0, sizeof(dc__vol.ct_wwall));
	dc__vol.ct_n = dc__vol.ct_bytes = dc__vol.ct_flushes = 0;
	dc__vol.bg_commits = dc__vol.bg_syncs = 0;
	dc__vol.bg_waits = dc__vol.bg_wait_ns = 0;
}

/* The commit record's fields known at the stop (the segment's come
 * with it). */
static void
take_record(struct dc_commit *c, unsigned n)
{
	memset(c, 0, sizeof(*c));
	c->magic = DC_COMMIT_MAGIC;
	c->protocol = (uint32_t)dc__st.protocol;
	c->time_ns = dc__vol.commit_time;
	c->checkpoints = dc__st.stats.checkpoints;
	c->input_bytes = dc__st.stats.input_bytes;
	uint64_t pages = 0;
	for (unsigned i = 0; i < n; i++)
		if (dc__vol.ents[i].op == DC_REDO_PAGES)
			pages += (dc__vol.ents[i].len + DC__PAGE - 1) / DC__PAGE;
	c->pages = pages;
}

/* Step 4: the commit record of gen (fields r, segment seg), durable. */
static void
write_record(uint64_t gen, const struct dc_commit *r,
	const struct dc_redo_seg *seg)
{
	/* The segment is durable (dc__redo_append synced it); now the commit
	 * record that vouches for it.  Invariant 4: generations advance by
	 * one, so slot gen & 1 is the one the committed checkpoint's valid
	 * record is not in. */
	DC_ASSERT(gen == dc__vol.committed + 1, "ckpt 4");
	DC_ASSERT(dc__vol.committed == 0 ||
		dc__last_commit() == slot(dc__vol.committed), "ckpt 4");
	struct dc_commit *c = slot(gen);
	*c = *r;
	c->gen = gen;
	c->redo_off = seg->off;
	c->redo_len = seg->len;
	c->redo_csum = seg->csum;
	c->checksum = rio_checksum(c, 248, DC_COMMIT_SEED);
	/* Commit point: once this record is durable, generation gen is the
	 * checkpoint a crash returns to. */
	rio_persist(dc__vol.ctl, c, sizeof(*c));
	DC_ASSERT(dc__last_commit() == c, "ckpt 4");
	__atomic_store_n(&dc__vol.committed, gen, __ATOMIC_RELEASE);
	dc__mu_restart(); /* with committed: seg.c invariant 2 */
}

/* Step 6, and the counters: a new interval, whose log entries carry
 * gen + 1 and start at 0. */
static void
interval_start(const struct dc_commit *r, uint64_t seg_len)
{
	dc__vol.nd_off = dc__vol.nd_seq = 0;
	dc__vol.fu_off = dc__vol.fu_seq = 0;
	dc__vol.replaying = false;
	if (dc__st.maps_changed) { /* written only when set: page stays clean */
		dc__st.nchg = 0;
		dc__st.chg_overflow = false;
		dc__st.maps_changed = false;
	}
	dc__st.stats.pages_copied += r->pages;
	dc__st.stats.redo_bytes_total += seg_len;
	if (seg_len > dc__st.stats.redo_bytes_max)
		dc__st.stats.redo_bytes_max = seg_len;
	dc__vol.ct_bytes += seg_len;
}

/* ---- the background writer (invariant 8) ---- */

#define BG_STACK DC__BG_STACK
#define BG_KP (((uint64_t)DC_KP_MAX_ENTS * sizeof(struct dc_kp_ent) + \
	DC__PAGE - 1) & ~(uint64_t)(DC__PAGE - 1))
#define BG_STAGE (256ull << 20) /* reserved; used as far as a checkpoint
                                 * copies */

long dc__thr_clone3(struct clone_args *ca, size_t size, void (*fn)(void));

static long
bg_futex(volatile uint32_t *w, int op, uint32_t v)
{
	return dc__sys6(SYS_futex, (long)w, op | FUTEX_PRIVATE_FLAG, v, 0, 0,
		0);
}

static struct dc_kp_ent *
bg_kp(void)
{
	return (struct dc_kp_ent *)(void *)(dc__vol.bg_map + BG_STACK);
}

static char *
bg_stage(void)
{
	return dc__vol.bg_map + BG_STACK + BG_KP;
}

/* The writer's phase i (0 segment, 1 record and release, 2 flush) ends
 * now, for $DC_CKPT_TIMES; i < 0 starts one.  Its own CPU clock. */
static void
wt_mark(int i, uint64_t *cpu, uint64_t *wall)
{
	if (!dc__vol.ct_say)
		return;
	uint64_t c = ct_now(CLOCK_THREAD_CPUTIME_ID), w = ct_now(CLOCK_MONOTONIC);
	if (i >= 0) {
		dc__vol.ct_wcpu[i] += c - *cpu;
		dc__vol.ct_wwall[i] += w - *wall;
	}
	*cpu = c;
	*wall = w;
}

/* Steps 3-5 of generation bg_gen, from the staged bytes. */
static int
bg_write(void)
{
	uint64_t gen = dc__vol.bg_gen, cpu = 0, wall = 0;
	unsigned n = dc__vol.bg_n;
#ifdef DC_BROKEN_BG_LIVE
	/* Deliberately broken: the segment is read from the program's
	 * memory as it is now, stores made after the stop included
	 * (invariant 8; caught by dc-bg-ckpt-broken-live). */
	const char *data = NULL;
#else
	const char *data = bg_stage();
#endif
	struct dc_redo_seg seg;
	wt_mark(-1, &cpu, &wall);
	int rc = dc__redo_append(gen, n, data, &seg);
	if (rc)
		return rc;
	wt_mark(0, &cpu, &wall);
#ifdef DC_BROKEN_BG_EARLY_RELEASE
	/* Deliberately broken: the keeper is told once the segment is
	 * written, before the commit record (held.c H3; caught by
	 * dc-bg-ckpt-broken-early). */
	dc__kp_send(gen, bg_kp(), dc__vol.bg_kpn);
#endif
	crashpoint_slow("redo", gen);
	write_record(gen, &dc__vol.bg_rec, &seg);
	dc__crashpoint("committed", gen);
#ifndef DC_BROKEN_BG_EARLY_RELEASE
	/* held.c H4: the output of the committed interval, no sooner */
	dc__kp_send(gen, bg_kp(), dc__vol.bg_kpn);
#endif
	wt_mark(1, &cpu, &wall);
	uint64_t flushes = dc__st.stats.redo_flushes;
	rc = dc__redo_committed(gen, n, data, &seg);
	dc__vol.ct_flushes += dc__st.stats.redo_flushes - flushes;
	wt_mark(2, &cpu, &wall);
	return rc;
}

/* The writer: a thread of libdc's own, never the program's (no dispatch,
 * every signal blocked, no TLS of its own: raw system calls only). */
static void
bg_main(void)
{
	for (;;) {
		while (!__atomic_load_n(&dc__vol.bg_go, __ATOMIC_ACQUIRE))
			bg_futex(&dc__vol.bg_go, FUTEX_WAIT, 0);
		dc__vol.bg_go = 0;
#ifdef DC_TEST_CRASHPOINTS
		if (dc__vol.bg_delay_ns)
			sleep_ns(dc__vol.bg_delay_ns);
#endif
		dc__vol.bg_rc = bg_write();
		__atomic_store_n(&dc__vol.bg_busy, 0, __ATOMIC_RELEASE);
		bg_futex(&dc__vol.bg_busy, FUTEX_WAKE, 1);
	}
}

/* The writer and its mapping, once an incarnation (recovery starts
 * without them). */
static int
bg_start(void)
{
	if (dc__vol.bg_map != NULL)
		return 0;
	uint64_t len = BG_STACK + BG_KP + BG_STAGE;
	long m = dc__sys6(SYS_mmap, 0, (long)len, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m < 0 && m > -4096)
		return dc__err((int)m, "checkpoint writer: mmap: %s",
			strerror((int)-m));
	/* libdc's own memory before it exists for the maps (maps.c
	 * invariant 2) */
	dc__vol.bg_map = (char *)m;
	dc__vol.bg_len = len;
	struct clone_args ca = { .flags = CLONE_VM | CLONE_FS | CLONE_FILES |
		CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM,
		.stack = (uint64_t)m, .stack_size = BG_STACK };
	/* every signal blocked, for good: the writer inherits the mask, and
	 * the program's signals go to the program's threads */
	uint64_t all = ~0ull, old = 0;
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&all, (long)&old, 8,
		0, 0);
	long t = dc__thr_clone3(&ca, sizeof(ca), bg_main);
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0, 0);
	if (t < 0) {
		dc__sys6(SYS_munmap, m, (long)len, 0, 0, 0, 0);
		dc__vol.bg_map = NULL;
		return dc__err((int)t, "checkpoint writer: clone3: %s",
			strerror((int)-t));
	}
	return 0;
}

/* One checkpoint in flight: the writer's must be done before the next
 * commit starts (or the run ends).  Its error, which leaves the
 * checkpoint before it the last. */
int
dc__bg_wait(void)
{
	if (__atomic_load_n(&dc__vol.bg_busy, __ATOMIC_ACQUIRE)) {
		uint64_t t0 = ct_now(CLOCK_MONOTONIC);
		dc__vol.bg_waits++;
		while (__atomic_load_n(&dc__vol.bg_busy, __ATOMIC_ACQUIRE))
			bg_futex(&dc__vol.bg_busy, FUTEX_WAIT, 1);
		dc__vol.bg_wait_ns += ct_now(CLOCK_MONOTONIC) - t0;
	}
	int rc = dc__vol.bg_rc;
	dc__vol.bg_rc = 0;
	return rc;
}

/* May this checkpoint (n entries) be written behind?  The buffered
 * protocol's, with nothing to perform after the record but the keeper's
 * release; not the first; on a memory file system (the writer's flushes
 * would be glibc's); no range dropped; within the staging area. */
static bool
bg_can(unsigned n)
{
	if (dc__vol.bg_off || dc__st.protocol != DC_BUFFERED ||
	    dc__vol.committed == 0 || dc__track_undo() || dc__vol.twopc ||
	    dc__vol.tree || !dc__vol.dir_is_mem || dc__vol.redo_hold ||
	    dc__held_records() || dc__st.npend > 0)
		return false;
	uint64_t bytes = 0;
	for (unsigned i = 0; i < n; i++) {
		if (dc__vol.ents[i].op != DC_REDO_PAGES)
			return false;
		bytes += dc__vol.ents[i].len;
	}
	return bytes <= BG_STAGE;
}

/* Invariant 8: the checkpoint's bytes taken, with every thread stopped,
 * into the staging area; the record's fields and the keeper's positions
 * too; the writer given the rest. */
static int
bg_hand(uint64_t gen, unsigned n)
{
	int rc = bg_start();
	if (rc)
		return rc;
	char *d = bg_stage();
	uint64_t at = 0;
	for (unsigned i = 0; i < n; i++) {
		const struct dc_redo_ent *e = &dc__vol.ents[i];
#ifdef DC_BROKEN_BG_LIVE
		(void)d; /* not copied: the writer reads the memory */
#else
		memcpy(d + at, (const void *)(uintptr_t)e->addr, e->len);
#endif
		at += e->len;
	}
	/* nothing is held (bg_can): no record to seal; the tick's */
	if ((rc = dc__held_seal(gen)))
		return rc;
	take_record(&dc__vol.bg_rec, n);
	dc__vol.bg_kpn = dc__kp_take(bg_kp());
	interval_start(&dc__vol.bg_rec, sizeof(struct dc_redo_hdr) +
		(uint64_t)n * sizeof(struct dc_redo_ent) + at);
	dc__vol.bg_gen = gen;
	dc__vol.bg_n = n;
	__atomic_store_n(&dc__vol.bg_staged, gen, __ATOMIC_RELEASE);
	dc__vol.bg_commits++;
	__atomic_store_n(&dc__vol.bg_busy, 1, __ATOMIC_RELEASE);
	__atomic_store_n(&dc__vol.bg_go, 1, __ATOMIC_RELEASE);
	bg_futex(&dc__vol.bg_go, FUTEX_WAKE, 1);
	return 0;
}

static int
commit_body(void)
{
	uint64_t gen = dc__st.gen;
	unsigned n = 0;
	int rc = 0;

	ct_mark(-1);
	if (!dc__st.maps_changed && dc__st.nreg > 0 && stack_grew())
		dc__st.maps_changed = true;
	bool folded = dc__st.maps_changed || dc__st.nreg == 0;
	if (folded) {
		/* the fold rewrites the region table and reads the maps */
		dc__track_suspend();
		rc = fold_maps(&n);
	}
	if (!rc)
		rc = dc__track_wp() ? take_written(&n, folded) :
			scan_written(&n);
	if (!rc)
		rc = add_own(&n);
	ct_mark(0);
	if (!rc && bg_can(n)) {
		rc = bg_hand(gen, n);
		ct_mark(1);
		ct_mark(4);
		return rc;
	}
	dc__vol.bg_syncs++;
	struct dc_redo_seg seg;
	if (!rc)
		rc = dc__redo_append(gen, n, NULL, &seg);
	if (rc)
		return rc;
	ct_mark(1);
	dc__crashpoint("redo", gen);
	/* held.c H1, H2: the interval's held output is durable and named as
	 * gen's before the commit record exists -- on tmpfs the record's
	 * stores into the mapped ctl file already outlive the process, so
	 * the seal must come before the slot is written, not merely before
	 * its persist. */
	if ((rc = dc__held_seal(gen)))
		return rc;
	struct dc_commit r;
	take_record(&r, n);
	/* UNDO on a disk file system: the segment (the memory written this
	 * interval, the regions moved in) must be durable before the record
	 * that makes it the checkpoint; on tmpfs its writes are. */
	if (dc__track_undo() && !dc__vol.dir_is_mem &&
	    (rc = dc__sync_fd(dc__vol.shadow_fd)))
		return rc;
	write_record(gen, &r, &seg);
	dc__track_interval();
	dc__crashpoint("committed", gen);
	ct_mark(2);
	uint64_t flushes = dc__st.stats.redo_flushes;
	if ((rc = dc__redo_committed(gen, n, NULL, &seg)))
		return rc;
	dc__vol.ct_flushes += dc__st.stats.redo_flushes - flushes;
	ct_mark(3);
	/* Invariant 1: the shadow is at most at the committed generation. */
	DC_ASSERT(words()->applied <= gen, "ckpt 1");
	interval_start(&r, seg.len);
	dc__k_after_commit();
	/* held.c H4, H5: the output of the committed interval */
	rc = dc__held_release(gen);
	ct_mark(4);
	return rc;
}

/*
 * The stack commit_body runs on (invariant 2): never a page this
 * checkpoint copies, since the frames below the saved stack pointer would
 * change a page between its checksum and its write.  On the alternate
 * signal stack (a handler's commit), a page below the copied part of it:
 * a SIGSEGV taken meanwhile (a cold region, track.c) nests below on the
 * same stack.  Elsewhere, dc__vol.stack: a SIGSEGV then starts at the top
 * of the alternate stack, which holds no live frame.
 */
static void *
body_stack(void)
{
	uint64_t a0, a1, sp = dc__st.ctx.rsp & ~(DC__PAGE - 1);
	dc__sud_altstack(&a0, &a1);
	if (sp >= a0 + 65536 && sp < a1)
		return (void *)(uintptr_t)(sp - 64);
	return dc__vol.stack + sizeof(dc__vol.stack);
}

/*
 * A signal handler starts with the kernel's default PKRU, which denies
 * every key but 0.  The ctl mapping is on key 0 (ctl_key0), but a commit
 * made in the dispatch or timer handler also reads the program's memory
 * and writes librio's other pools, which may carry keys of their own.  The
 * commit grants itself every key and puts the caller's PKRU back
 * (sigreturn restores the interrupted one anyway).  Returns the previous
 * PKRU, or UINT64_MAX without PKU.
 */
static uint64_t
pkru_open(void)
{
	static int have = -1;
	uint32_t old;

	if (have < 0)
		have = rio_pku_os();
	if (!have)
		return UINT64_MAX;
	old = rio_rdpkru();
	rio_wrpkru(0); /* every key's rights */
	return old;
}

static void
pkru_close(uint64_t old)
{
	if (old != UINT64_MAX)
		rio_wrpkru((uint32_t)old);
}

/* The commit of gen failed (rc): the fatal state, the checkpoint before
 * it intact. */
static int
commit_failed(uint64_t gen, int rc)
{
	dc__vol.fatal = true;
	dc__say("checkpoint %lu failed: %s (%s); the last checkpoint (%lu) "
		"is intact", (unsigned long)gen, dc_strerror(rc),
		rio_errormsg(), (unsigned long)dc__vol.committed);
	return DC_EFATAL;
}

/*
 * Take a checkpoint.  Returns 0 when committed, 1 when the process has
 * just been resumed here by recovery, or an error (the process is then in
 * the fatal state: the previous checkpoint is intact).
 */
int
dc__commit(void)
{
	if (!dc__vol.active || dc__vol.in_commit)
		return 0;
	if (dc__vol.fatal)
		return DC_EFATAL;
	/* invariant 8: one checkpoint in flight */
	int brc = dc__bg_wait();
	ct_report();
	if (brc)
		return commit_failed(dc__vol.bg_gen, brc);
	/* the two-phase-commit protocols: after the first checkpoint, every
	 * commit is a round of the computation (twopc.c invariant 4) */
	if (dc__vol.twopc && !dc__vol.tp_local && dc__vol.committed != 0)
		return dc__twopc_round();
	/* every other thread stopped at a safe point, its registers saved
	 * (thread.c steps 1-3); 1: another thread's request, the main
	 * thread committed meanwhile */
	int st = dc__thr_stop();
	if (st)
		return st > 0 ? 0 : st;
	if (dc__st.pre_checkpoint) {
		unsigned char sel = dc__vol.selector;
		dc__vol.in_commit = 1;
		dc__vol.selector = SYSCALL_DISPATCH_FILTER_BLOCK;
		dc__st.pre_checkpoint(dc__st.cb_arg);
		dc__vol.selector = sel;
		dc__vol.in_commit = 0;
	}
	dc__vol.commit_time = rio_now_ns(CLOCK_REALTIME); /* one clock read */
	dc__k_before_commit();
	if (dc__st.maps_changed)
		dc__st.brk_end = (uint64_t)syscall(SYS_brk, 0);
	dc__st.nd_flag = false;
	dc__st.gen = dc__vol.committed + 1;
	dc__st.stats.checkpoints++;
	/* Every caller runs with all signals blocked (the dispatch and timer
	 * handlers, dc_checkpoint, the signal wrapper), except the first
	 * commit, which says what its mask is.  The FS base is kept current
	 * by the dispatcher (arch_prctl). */
	if (dc__vol.resume_mask) {
		dc__st.ctx.mask = *dc__vol.resume_mask;
	} else {
		uint64_t m = DC__SIGS_BLOCKED;
		memcpy(&dc__st.ctx.mask, &m, sizeof(m));
	}
	if (dc__save_ctx(&dc__st.ctx) != 0) {
		dc__tree_resumed(); /* a tree's member: its children (tree.c) */
		dc__thr_go(); /* the threads recovery made again (thread.c) */
		return 1; /* resumed by recovery */
	}
	dc__vol.in_commit = 1;
	uint64_t pkru = pkru_open();
	int rc = dc__call_on_stack(body_stack(), commit_body);
	pkru_close(pkru);
	dc__vol.in_commit = 0;
	dc__thr_go(); /* thread.c step 5 */
	return rc ? commit_failed(dc__st.gen, rc) : 0;
}

int
dc__commit_first(void)
{
	sigset_t mask;
	sigprocmask(SIG_BLOCK, NULL, &mask);
	syscall(SYS_arch_prctl, 0x1003 /* ARCH_GET_FS */,
		&dc__st.ctx.fsbase);
	dc__st.maps_changed = true;
	dc__st.chg_overflow = true;
	dc__st.nreg = 0;
	dc__vol.resume_mask = &mask;
	int rc = dc__commit();
	dc__vol.resume_mask = NULL;
	return rc;
}

/* ---- end of a run ---- */

static void
remove_dir_files(const char *dir)
{
	static const char *const names[] = { "ctl", "shadow", "redo", "ndlog",
		"fundo", "mundo", "held", "rename" };
	char p[PATH_MAX];
	/* ctl first: without it the directory holds no checkpoint, so a
	 * crash half way leaves nothing that could be recovered wrongly. */
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		unlink(path_in(p, sizeof(p), dir, names[i]));
	rmdir(dir);
}

/* dc-run --stats FILE: the run's counters, one key=value per line,
 * written when it ends normally. */
static void
write_stats(const char *path)
{
	const struct dc_stats *s = &dc__st.stats;
	char b[1024];
	int n = snprintf(b, sizeof(b), "checkpoints=%lu\npages_copied=%lu\n"
		"visible_events=%lu\nnd_events=%lu\nlogged_events=%lu\n"
		"replayed_events=%lu\nsyscalls=%lu\ninput_bytes=%lu\n"
		"recoveries=%lu\nredo_bytes_max=%lu\nredo_bytes_total=%lu\n"
		"cooled=%lu\nwarmed=%lu\nredo_flushes=%lu\nwp_faults=%lu\n"
		"undo_bytes=%lu\nseg_pages=%lu\ndirect_calls=%lu\n",
		(unsigned long)s->checkpoints, (unsigned long)s->pages_copied,
		(unsigned long)s->visible_events, (unsigned long)s->nd_events,
		(unsigned long)s->logged_events,
		(unsigned long)s->replayed_events, (unsigned long)s->syscalls,
		(unsigned long)s->input_bytes, (unsigned long)s->recoveries,
		(unsigned long)s->redo_bytes_max,
		(unsigned long)s->redo_bytes_total, (unsigned long)s->cooled,
		(unsigned long)s->warmed, (unsigned long)s->redo_flushes,
		(unsigned long)s->wp_faults, (unsigned long)s->undo_bytes,
		(unsigned long)s->seg_pages, (unsigned long)s->direct_calls);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return;
	if (write(fd, b, (size_t)n) != n)
		dc__say("--stats %s: short write", path);
	close(fd);
}

void
dc__cleanup_exit(void)
{
	if (!dc__vol.active)
		return;
	dc__held_exit(); /* a last commit performs the held output */
	/* the writer's checkpoint, if that commit had nothing to do */
	if (dc__bg_wait() != 0)
		dc__say("the last checkpoint failed: %s", rio_errormsg());
	/* The checkpoint first, then every delayed deletion, open or not:
	 * the run is complete (kstate.c, dc__k_exit_list). */
	dc__vol.active = false;
	if (dc__k_exit_list(dc__vol.dir) != 0)
		dc__say("%s", rio_errormsg());
	remove_dir_files(dc__vol.dir);
#ifdef DC_TEST_CRASHPOINTS
	if (dc__vol.exit_wait_ms)
		sleep_ns(dc__vol.exit_wait_ms * 1000000);
#endif
	dc__k_exit_deletes(dc__vol.dir);
	rmdir(dc__vol.dir);
	if (dc__vol.stats_path[0])
		write_stats(dc__vol.stats_path);
}

int
dc_discard(const char *dir)
{
	if (dir == NULL)
		return dc__err(-EINVAL, "dc_discard: no directory");
	remove_dir_files(dir);
	return 0;
}

int
dc_status(const char *dir, struct dc_status *out)
{
	char p[PATH_MAX];
	int rc;
	memset(out, 0, sizeof(*out));
	const struct dc_commit *c = ctl_read(dir, &rc);
	if (c == NULL)
		return rc ? rc : dc__err(DC_ENOCKPT, "%s: no committed "
			"checkpoint", dir);
	const struct dc_superblock *sb = (const void *)ctl_blk;
	const struct dc_words *w = (const void *)(ctl_blk + DC_CTL_WORDS_OFF);
	out->generation = c->gen;
	out->incarnation = w->incarnation;
	out->checkpoints = c->checkpoints;
	out->protocol = c->protocol;
	memcpy(out->exe, sb->exe, sizeof(out->exe));
	out->exe[sizeof(out->exe) - 1] = '\0';
	out->input_bytes = c->input_bytes;
	/* logged standard-input reads of the interval will be replayed */
	int nfd = open(path_in(p, sizeof(p), dir, "ndlog"),
		O_RDONLY | O_CLOEXEC);
	if (nfd >= 0) {
		uint64_t off = 0, seq = 0;
		struct dc_log_ent e;
		while (dc__log_read(nfd, off, c->gen + 1, seq, NULL, &e, NULL,
			       0) == 0) {
			if (e.type == DC_ND_READ && e.a == 0 && e.b > 0)
				out->input_bytes += (uint64_t)e.b;
			off += sizeof(e) + ((e.len + 7) & ~7ull);
			seq++;
		}
		close(nfd);
	}
	return 0;
}
