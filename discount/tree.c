/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tree.c -- process trees under dc-run --tree: fork, execve, exit and
 *           the children made again at recovery (a process's side; the
 *           tree's init and coordinator are tools/dc-tree.c)
 *
 * Every process of the tree is a 2PC participant (twopc.c) whose index
 * is its pid, its directory TREE/p<pid>.  docs/ARCHITECTURE.md, "process
 * trees", has the design; the steps of a fork:
 *   T1. a round of the tree (dc__commit): the parent's checkpoint at the
 *       fork call is committed; fork_taker names the process that took it;
 *   T2. the parent's directory is copied into TREE/fork-<ppid>.tmp, each
 *       file durable (twopc.c's held copy);
 *   T3. the real fork (a process of its own, no CLONE_VM); the child waits
 *       on a pipe while the parent announces it (FORK, answered): from
 *       now on no round opens before the child joined (dc-tree.c
 *       invariant 3);
 *   T4. the child renames the copy to TREE/p<pid> and execs the same
 *       executable with the same arguments and DC_TREE_FORKED=1: its
 *       libdc recovers the copy, which resumes in this file inside the
 *       fork call; fork_taker is not its pid, so it answers 0.
 * The steps of an execve (dc__tree_exec), a commit point of the tree:
 *   E0. what the kernel would refuse is answered as it would (no round);
 *       a static or set-user-id program is refused (no libdc in it);
 *   E1. a round of the tree: the old image's checkpoint at the exec;
 *   E2. the new image's directory TREE/p<pid>-e<n+1> with its `image`
 *       (program, arguments, environment with libdc's settings), durable;
 *   E3. EXEC to init (answered): no round opens until the new image has
 *       joined;
 *   E4. the member's own settings and DC_TREE_FDS (the descriptors that
 *       are the tree's) into the environment;
 *   E5. the execve; the new image starts fresh under libdc, with its pid.
 * The steps of a clone with CLONE_VFORK (posix_spawn, system, popen: glibc
 * spawns with clone(CLONE_VM | CLONE_VFORK) on a stack of its own):
 *   V0. clone3 without CLONE_THREAD is answered ENOSYS, as a kernel before
 *       5.3 answers: glibc then calls clone;
 *   V1. a fork of the tree (T1-T4): the child is a member with memory and
 *       a checkpoint of its own, not the parent's memory; fork_sp, the
 *       parent's stack pointer at the call, goes with the checkpoint;
 *   V2. the child resumes on the stack the call names (as the kernel
 *       starts it) and keeps the parent's stack pointer (vfork_sp);
 *   V3. the parent waits in the call, taking part in rounds, its
 *       program's signals held, until the child has exec'd (its image 1's
 *       directory exists, E2) or exited;
 *   V4. a child that exits without exec'ing first writes TREE/p<pid>/vfork
 *       (tree_layout.h): its copy of the parent's stack from fork_sp up,
 *       which is where a vfork child's results go (posix_spawn's error
 *       number), durable before its EXIT;
 *   V5. the parent copies those bytes over its own stack, which has not
 *       changed since V1 (it waited in libdc, on libdc's stack), and
 *       returns the child's pid: glibc reads the exec's error there.
 * A tree recovered: each member resumes at its part of the committed
 * round and makes its children of the record again (clone3 with set_tid:
 * the same pids), each exec'ed with DC_TREE_FORKED=2, or, for a child
 * that had exited and was not yet waited for, exiting at once with its
 * status.
 *
 * Invariants:
 *  1. A child's first checkpoint is its parent's committed checkpoint of
 *     the fork call; the child commits nothing alone: its next commit is
 *     a round of the tree.
 *  2. The child is announced to init before it can join, and before the
 *     parent returns from the fork (the round after the fork includes it).
 *  3. A process that exits says so first (EXIT, answered) and leaves its
 *     directory: its exit is committed by the next round (its directory
 *     is removed by init once a round no longer has it).
 *  4. An image is part of a round only once its `image` file is durable
 *     and init knows it (E2, E3 before E5); until a round commits the new
 *     image, the record names the old one, whose checkpoint is at or
 *     before the exec call: recovery execs again.
 *  5. Every member made again runs the program of the image the record
 *     names, never its parent's (exec_member).
 *  6. A process changes no file before a committed round names it (its
 *     image, or it as a child): its first file change waits for a round
 *     (dc__tree_before_change).  Otherwise a crash before that round
 *     brings the tree back to where the image (or the child) did not
 *     exist yet; nothing undoes what it wrote -- its undo log is in a
 *     directory no recovery reads -- and the exec (or fork) done again
 *     writes it a second time (`sh -c 'echo 3 >> f'`: "3" twice).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "dc_int.h"
#include "tree_layout.h"
#include "twopc_layout.h"

#define TREE_WAIT_MS 30000

/* Tracked (checkpointed with the process): the pid of the process whose
 * checkpoint the fork call's round took (T1); the program's stack pointer
 * at a clone with CLONE_VFORK (V1), 0 for a fork; in a vfork child that
 * has not exec'd, its parent's stack pointer at the call (V2). */
static long fork_taker;
static uint64_t fork_sp;
static uint64_t vfork_sp;

/* Invariant 6: whether a committed round names this process as it runs
 * now; if not, the last committed round it knew at its start.  Zero in a
 * new image (a fresh start); set by dc__tree_resumed otherwise. */
static bool tree_named;
static uint64_t tree_base;

int
dc__tree_setup(void)
{
	const char *t = getenv("DC_TREE");
	dc__vol.tree = t && *t;
	if (!dc__vol.tree)
		return 0;
	if (!dc__vol.twopc)
		return dc__err(DC_EPROTOCOL, "tree: the processes of a tree "
			"commit together: protocol cpv-2pc or cbndv-2pc");
	snprintf(dc__vol.tree_dir, sizeof(dc__vol.tree_dir), "%s", t);
	const char *co = getenv("DC_2PC_COORD");
	snprintf(dc__vol.tree_coord, sizeof(dc__vol.tree_coord), "%s",
		co ? co : "");
	const char *f = getenv("DC_TREE_FORKED");
	dc__vol.tree_forked = f ? atoi(f) : 0;
	const char *g = getenv("DC_TREE_GEN");
	dc__vol.tree_gen = g ? (unsigned)atoi(g) : 0;
	return 0;
}

/* ---- messages to init ---- */

/* Send type (code) and wait for init's ANSWER naming `want`: 0 (yes),
 * 1 (init refused), DC_EFATAL (no answer). */
static int
tell(int type, int32_t status, int32_t code, uint64_t want)
{
	struct dc_2pc_msg m;
	for (int i = 0; i < TREE_WAIT_MS / 20; i++) {
		dc__twopc_send(type, 0, status, code, 0);
		while (dc__twopc_recv(&m, 20))
			/* anything else waits: a PREPARE comes again (the
			 * parent votes after the fork, the child with it) */
			if (m.type == DC_2PC_ANSWER && m.round == want &&
			    m.code == type)
				return m.status == 1 ? 0 : 1;
	}
	return dc__err(DC_EFATAL, "tree: no answer from the tree's init");
}

/* ---- making a child process ---- */

static ssize_t
slurp(const char *path, char *buf, size_t n)
{
	int fd = (int)dc__sys6(SYS_open, (long)path, O_RDONLY | O_CLOEXEC, 0,
		0, 0, 0);
	if (fd < 0)
		return fd;
	size_t got = 0;
	long r;
	while (got < n && (r = dc__sys6(SYS_read, fd, (long)(buf + got),
				   (long)(n - got), 0, 0, 0)) > 0)
		got += (size_t)r;
	dc__sys6(SYS_close, fd, 0, 0, 0, 0, 0);
	return got < n ? (ssize_t)got : -E2BIG;
}

/* A member's directory: TREE/p<pid> for its first image, TREE/p<pid>-e<gen>
 * after its gen-th execve (tree_layout.h). */
static void
dir_of(char *out, size_t n, long pid, unsigned gen)
{
	if (gen)
		snprintf(out, n, "%s/p%ld-e%u", dc__vol.tree_dir, pid, gen);
	else
		snprintf(out, n, "%s/p%ld", dc__vol.tree_dir, pid);
}

/* Read the image of directory d into buf (n bytes): its strings, split
 * into path, argv (ac) and envp (ec) by the caller.  Raw system calls
 * only.  Returns the header's counts, or -1 when there is no valid one. */
static int
image_read(const char *d, char *buf, size_t n, struct dc_tree_image *h)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/image", d);
	ssize_t got = slurp(p, buf, n);
	if (got < (ssize_t)sizeof(*h))
		return -1;
	memcpy(h, buf, sizeof(*h));
	if (h->magic != DC_TREE_IMAGE_MAGIC || h->len > DC_TREE_IMAGE_MAX ||
	    (size_t)got != sizeof(*h) + h->len ||
	    h->checksum != rio_checksum(buf + sizeof(*h), h->len,
			       rio_checksum(h, 24, DC_TREE_SEED)))
		return -1;
	return 0;
}

/*
 * In a new child (raw system calls only; its memory is a copy that the
 * exec discards): exec member `pid` of the tree in its image `gen`
 * (TREE/p<pid>[-e<gen>]/image: the program, arguments and environment
 * it runs), forked = 1 (a fork: the descriptors are the parent's, kept)
 * or 2 (made again at recovery: without a valid image the member ends,
 * status 70).  A fork's child without one runs this program again, as
 * the parent runs it.
 */
static void __attribute__((noreturn))
exec_member(long pid, int forked, unsigned gen)
{
	char *cmd = dc__vol.io, *env = dc__vol.io + (256 << 10);
	char **argv = (char **)(dc__vol.io + (768 << 10));
	char **envp = argv + 8192;
	const char *exe = "/proc/self/exe";
	char dir[PATH_MAX];
	dir_of(dir, sizeof(dir), pid, gen);
	struct dc_tree_image h;
	int ac = 0, ec = 0;
	ssize_t ne = 0;
	char *own;
	if (image_read(dir, cmd, 512 << 10, &h) == 0) {
		char *q = cmd + sizeof(h), *e = q + h.len;
		exe = q;
		q += strlen(q) + 1;
		for (uint32_t i = 0; i < h.argc && q < e && ac < 8190; i++) {
			argv[ac++] = q;
			q += strlen(q) + 1;
		}
		for (uint32_t i = 0; i < h.envc && q < e && ec < 8180; i++) {
			if (!dc_tree_member_var(q))
				envp[ec++] = q;
			q += strlen(q) + 1;
		}
		own = e;
	} else if (forked == 2) {
		/* the record names an image whose file is gone: running
		 * another program in its place (its parent's) would be worse
		 * than failing */
		dc__say("tree: member %ld: %s/image: no valid image", pid, dir);
		dc__sys6(SYS_exit_group, 70, 0, 0, 0, 0, 0);
		__builtin_unreachable();
	} else {
		ssize_t nc = slurp("/proc/self/cmdline", cmd, 256 << 10);
		ne = slurp("/proc/self/environ", env, (256 << 10) - 256);
		for (ssize_t i = 0; nc > 0 && i < nc && ac < 8190;
			i += (ssize_t)strlen(cmd + i) + 1)
			argv[ac++] = cmd + i;
		/* the root's environment, with this member's own settings */
		for (ssize_t i = 0; ne > 0 && i < ne && ec < 8180;
			i += (ssize_t)strlen(env + i) + 1)
			if (!dc_tree_member_var(env + i))
				envp[ec++] = env + i;
		own = env + (ne > 0 ? ne : 0);
	}
	argv[ac] = NULL;
	char *o = own;
	envp[ec++] = o;
	o += snprintf(o, 4200, "DC_DIR=%s", dir) + 1;
	envp[ec++] = o;
	o += snprintf(o, 64, "DC_2PC_ID=%ld", pid) + 1;
	envp[ec++] = o;
	o += snprintf(o, 128, "DC_2PC_COORD=%s", dc__vol.tree_coord) + 1;
	envp[ec++] = o;
	o += snprintf(o, 64, "DC_TREE_GEN=%u", gen) + 1;
	envp[ec++] = o;
	snprintf(o, 64, "DC_TREE_FORKED=%d", forked);
	envp[ec] = NULL;
	uint64_t none = 0;
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&none, 0, 8, 0, 0);
	dc__sys6(SYS_execve, (long)exe, (long)argv, (long)envp, 0, 0, 0);
	dc__sys6(SYS_exit_group, 70, 0, 0, 0, 0, 0);
	__builtin_unreachable();
}

/* Remove directory d and what is in it, two levels deep (a member's
 * directory and its 2pc-held copies): raw system calls only, no memory
 * allocated (a fork's child runs this on a copy of its parent, whose
 * allocator's locks glibc holds across fork). */
static void
rm_tree(const char *d, int depth)
{
	char ents[4096], p[PATH_MAX];
	int fd = (int)dc__sys6(SYS_open, (long)d, O_RDONLY | O_DIRECTORY |
		O_CLOEXEC, 0, 0, 0, 0);
	if (fd < 0)
		return;
	long n;
	while ((n = dc__sys6(SYS_getdents64, fd, (long)ents, sizeof(ents), 0,
			0, 0)) > 0)
		for (long o = 0; o < n;) {
			struct { uint64_t ino; int64_t off; unsigned short len;
				unsigned char type; char name[]; } *e =
				(void *)(ents + o);
			o += e->len;
			if (!strcmp(e->name, ".") || !strcmp(e->name, ".."))
				continue;
			snprintf(p, sizeof(p), "%s/%s", d, e->name);
			if (e->type == 4 /* DT_DIR */ && depth > 0)
				rm_tree(p, depth - 1);
			else
				dc__sys6(SYS_unlink, (long)p, 0, 0, 0, 0, 0);
		}
	dc__sys6(SYS_close, fd, 0, 0, 0, 0, 0);
	dc__sys6(SYS_rmdir, (long)d, 0, 0, 0, 0, 0);
}

static void
rm_member_dir(const char *d)
{
	if (dc__vol.tp_verbose &&
	    dc__sys6(SYS_access, (long)d, F_OK, 0, 0, 0, 0) == 0)
		dc__say("tree: %ld removes %s",
			dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0), d);
	rm_tree(d, 2);
}

/* d/image := the n bytes at buf, durable (fsync) before the caller goes
 * on: a round may name the image once the member is announced. */
static int
image_put(const char *d, const char *buf, size_t n)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/image", d);
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return dc__err(-errno, "%s: %s", p, strerror(errno));
	size_t off = 0;
	while (off < n) {
		ssize_t w = write(fd, buf + off, n - off);
		if (w <= 0) {
			int e = w < 0 ? errno : EIO;
			close(fd);
			return dc__err(-e, "%s: write: %s", p, strerror(e));
		}
		off += (size_t)w;
	}
	/* the image: durable before the member it describes can be part
	 * of a committed round (recovery executes it) */
	int rc = dc__sync_fd(fd);
	close(fd);
	return rc;
}

/* A fork's child runs its parent's image: from's image into to. */
static int
image_copy(const char *from, const char *to)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/image", from);
	ssize_t n = slurp(p, dc__vol.io, sizeof(dc__vol.io));
	if (n == -ENOENT)
		return 0; /* made again from the parent's program */
	if (n < 0)
		return dc__err((int)n, "%s: %s", p, strerror((int)-n));
	return image_put(to, dc__vol.io, (size_t)n);
}

/* ---- fork ---- */

/* What a child answers once its copy resumed it inside the fork call. */
static long
child_return(long nr, const long *a, ucontext_t *uc)
{
	long me = dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	dc__st.vpid = me; /* kstate.c invariant 6: its own id from now */
	/* V2: a vfork child (a fork's child of a vfork child is none) */
	vfork_sp = fork_sp;
	fork_sp = 0;
	if (nr == SYS_clone && a[1])
		uc->uc_mcontext.gregs[REG_RSP] = a[1]; /* the child's stack */

	if (nr == SYS_clone) {
		/* glibc's fork: the child's tid in its thread block */
		if ((a[0] & CLONE_CHILD_SETTID) && a[3])
			*(int *)a[3] = (int)me;
		if ((a[0] & CLONE_CHILD_CLEARTID) && a[3])
			dc__sys6(SYS_set_tid_address, a[3], 0, 0, 0, 0, 0);
	}
	if (dc__vol.tp_verbose)
		dc__say("tree: child %ld runs", me);
	return 0;
}

/* V4, in a vfork child that exits: TREE/p<pid>/vfork, durable. */
static void
vfork_put(void)
{
	uint64_t sp = vfork_sp, top = sp;
	vfork_sp = 0;
	/* the top of the stack mapping that holds sp */
	char *maps = dc__vol.io + (512 << 10);
	ssize_t n = slurp("/proc/self/maps", maps, (512 << 10) - 1);
	if (n == -E2BIG)
		n = (512 << 10) - 1;
	for (ssize_t i = 0; n > 0 && i < n;) {
		char *end;
		maps[n] = 0;
		uint64_t lo = strtoull(maps + i, &end, 16);
		uint64_t hi = *end == '-' ? strtoull(end + 1, &end, 16) : 0;
		if (sp >= lo && sp < hi)
			top = hi;
		char *nl = strchr(maps + i, '\n');
		if (nl == NULL)
			break;
		i = nl - maps + 1;
	}
	if (top - sp > DC_TREE_VFORK_MAX)
		top = sp + DC_TREE_VFORK_MAX;
	struct dc_tree_vfork h = { .magic = DC_TREE_VFORK_MAGIC,
		.version = DC_TREE_VERSION, .sp = sp, .len = top - sp };
	char *buf = dc__vol.io;
	/* the program's pages readable whatever their tracking state */
	dc__track_release(sp, top, false);
	memcpy(buf + sizeof(h), (const void *)(uintptr_t)sp, h.len);
	h.checksum = rio_checksum(buf + sizeof(h), h.len,
		rio_checksum(&h, 24, DC_TREE_SEED));
	memcpy(buf, &h, sizeof(h));
	char p[PATH_MAX], tmp[PATH_MAX + 8];
	snprintf(p, sizeof(p), "%s/vfork", dc__vol.dir);
	snprintf(tmp, sizeof(tmp), "%s.tmp", p);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t off = 0, want = sizeof(h) + h.len;
	while (fd >= 0 && off < want) {
		ssize_t w = write(fd, buf + off, want - off);
		if (w <= 0)
			break;
		off += (size_t)w;
	}
	/* the bytes: durable before the name (a torn file is none) */
	int rc = fd >= 0 && off == want ? dc__sync_fd(fd) : -EIO;
	if (fd >= 0)
		close(fd);
	if (rc == 0 && rename(tmp, p) == 0 &&
	    (fd = open(dc__vol.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
		/* the name: durable before the EXIT that a round commits
		 * (recovered exited, the child is not asked again) */
		rc = dc__sync_fd(fd);
		close(fd);
	} else
		rc = -EIO;
	if (rc)
		dc__say("tree: vfork child: %s: %s", p, strerror(errno));
}

/* V5: the bytes of TREE/p<pid>/vfork over this process's stack.  Whether
 * the file was there. */
static bool
vfork_take(const char *path, uint64_t sp)
{
	struct dc_tree_vfork h;
	char *buf = dc__vol.io;
	ssize_t n = slurp(path, buf, sizeof(h) + DC_TREE_VFORK_MAX);
	if (n < (ssize_t)sizeof(h))
		return false;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != DC_TREE_VFORK_MAGIC || h.sp != sp ||
	    h.len > DC_TREE_VFORK_MAX || (size_t)n != sizeof(h) + h.len ||
	    h.checksum != rio_checksum(buf + sizeof(h), h.len,
			       rio_checksum(&h, 24, DC_TREE_SEED)))
		return false;
	/* written as a system call writes memory: the next checkpoint
	 * has it (and UNDO logs what it replaces) */
	dc__track_release(sp, sp + h.len, true);
	memcpy((void *)(uintptr_t)sp, buf + sizeof(h), h.len);
	return true;
}

/* V3: wait, as a parent in vfork, until child pid has exec'd or exited;
 * rounds are taken part in meanwhile (a recovered parent resumes here,
 * its child made again with the same pid). */
static void
vfork_wait(long pid, uint64_t sp)
{
	char e1[PATH_MAX], vf[PATH_MAX];
	dir_of(e1, sizeof(e1), pid, 1);
	snprintf(vf, sizeof(vf), "%s/p%ld/vfork", dc__vol.tree_dir, pid);
	static ucontext_t quiet; /* the program's signals wait, as they
				  * do for a parent in vfork */
	memset(&quiet.uc_sigmask, 0xff, sizeof(quiet.uc_sigmask));
	struct timespec ts = { 0, 1000000 };
	long na[6] = { (long)&ts, 0, 0, 0, 0, 0 };
	for (;;) {
		if (dc__sys6(SYS_access, (long)e1, F_OK, 0, 0, 0, 0) == 0 ||
		    vfork_take(vf, sp))
			return;
		siginfo_t si;
		si.si_pid = 0;
		if (dc__sys6(SYS_waitid, P_PID, pid, (long)&si, WEXITED |
			    WNOHANG | WNOWAIT, 0, 0) == 0 && si.si_pid == pid) {
			/* ended: by V4's file (written before the exit) */
			if (vfork_take(vf, sp) || si.si_code == CLD_EXITED)
				return;
			/* killed before: a failure of the tree, which
			 * recovers; the program must not go on as if the
			 * spawn had worked (its error never came back) */
			dc__say("tree: a vfork child was killed by a signal: "
				"the tree recovers");
			dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0,
				0), SIGKILL, 0, 0, 0, 0);
		}
		dc__blocking(SYS_nanosleep, na, &quiet);
	}
}

long
dc__tree_fork(long nr, const long *a, void *ucv)
{
	ucontext_t *uc = ucv;
	const unsigned long bad = CLONE_THREAD | CLONE_SIGHAND |
		CLONE_FILES | CLONE_FS | CLONE_PARENT |
		CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWUSER | CLONE_NEWNET |
		CLONE_NEWIPC | CLONE_NEWUTS | CLONE_NEWCGROUP | CLONE_PIDFD |
		CLONE_PARENT_SETTID | CLONE_SETTLS | CLONE_PTRACE;
	if (nr == SYS_clone3) {
		uint64_t fl = 0;
		if (a[0] && a[1] >= 8)
			memcpy(&fl, (const void *)a[0], 8);
		if (!(fl & CLONE_THREAD))
			return -ENOSYS; /* V0: glibc calls clone */
	}
	/* shared memory only with CLONE_VFORK: the parent waits (V3) */
	if (nr == SYS_clone3 || (nr == SYS_clone && ((a[0] & bad) ||
		    (a[0] & (CLONE_VM | CLONE_VFORK)) == CLONE_VM))) {
		dc__refuse_call(nr == SYS_clone3 ? "clone3" :
			"clone with shared memory, descriptors or namespaces "
			"(a thread)",
			"a process of a tree has memory and descriptors of "
			"its own; fork, vfork and posix_spawn are supported",
			-ENOSYS);
		return -ENOSYS;
	}
	if (nr == SYS_clone && (a[0] & 0xff) != SIGCHLD) {
		dc__refuse_call("clone with an exit signal other than SIGCHLD",
			"the tree's processes are waited for as forks",
			-EINVAL);
		return -EINVAL;
	}
	/* T1 (V1) */
	fork_taker = dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	fork_sp = nr == SYS_clone && (a[0] & CLONE_VFORK) ?
		(uint64_t)uc->uc_mcontext.gregs[REG_RSP] : 0;
	int rc = dc__commit();
	if (rc == 1 && fork_taker != dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0))
		return child_return(nr, a, uc); /* T4: the copy resumed */
	uint64_t psp = fork_sp;
	fork_sp = 0;
	if (rc < 0)
		return -EAGAIN; /* the process is stopped by twopc.c first */
	/* T2 (also when the tree came back to T1: the fork again) */
	long me = dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	char tmp[PATH_MAX];
	snprintf(tmp, sizeof(tmp), "%s/fork-%ld.tmp", dc__vol.tree_dir, me);
	rm_member_dir(tmp);
	if ((rc = dc__twopc_copy_dir(dc__vol.dir, tmp)) != 0 ||
	    (rc = image_copy(dc__vol.dir, tmp)) != 0) {
		dc__say("tree: fork: %s", rio_errormsg());
		return -EAGAIN;
	}
	int gate[2];
	if (pipe2(gate, O_CLOEXEC) != 0)
		return -errno;
	/* T3 */
	long pid = dc__sys6(SYS_clone, SIGCHLD, 0, 0, 0, 0, 0);
	if (pid == 0) {
		char c;
		long self = dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
		dc__sys6(SYS_close, gate[1], 0, 0, 0, 0, 0);
		if (dc__sys6(SYS_read, gate[0], (long)&c, 1, 0, 0, 0) != 1)
			dc__sys6(SYS_exit_group, 70, 0, 0, 0, 0, 0);
		/* T4: the copy becomes this member's directory */
		char own[PATH_MAX];
		snprintf(own, sizeof(own), "%s/p%ld", dc__vol.tree_dir, self);
		rm_member_dir(own);
		if (dc__sys6(SYS_rename, (long)tmp, (long)own, 0, 0, 0, 0))
			dc__sys6(SYS_exit_group, 70, 0, 0, 0, 0, 0);
		/* every descriptor of the program survives the exec: the
		 * recovered child keeps them (kstate.c) */
		for (int fd = 0; fd < DC__MAX_FD; fd++)
			if (dc__st.fd[fd].desc != 0)
				dc__sys6(SYS_fcntl, fd, F_SETFD, 0, 0, 0, 0);
		exec_member(self, 1, 0);
	}
	close(gate[0]);
	if (pid < 0) {
		close(gate[1]);
		return pid;
	}
	/* invariant 2 */
	if ((rc = tell(DC_2PC_FORK, 0, (int32_t)pid, (uint64_t)pid)) == 1) {
		/* a tree of DC_TREE_MAX members: the child goes (the gate
		 * closed unopened), the fork fails */
		close(gate[1]);
		int st;
		dc__sys6(SYS_wait4, pid, (long)&st, 0, 0, 0, 0);
		dc__refuse_call("a fork in a tree of DC_TREE_MAX processes",
			"the tree's record holds at most 64 members",
			-EAGAIN);
		return -EAGAIN;
	}
	if (rc) {
		dc__say("tree: fork: %s", rio_errormsg());
		dc__sys6(SYS_kill, me, SIGKILL, 0, 0, 0, 0);
	}
	if (psp) {
		/* V3: image 1 of this pid is the child's from now (a
		 * directory left by an earlier process of this pid is of no
		 * round: T1 committed after it was waited for) */
		char e1[PATH_MAX];
		dir_of(e1, sizeof(e1), pid, 1);
		rm_member_dir(e1);
	}
	if (write(gate[1], "g", 1) != 1)
		dc__say("tree: fork: the child is gone");
	close(gate[1]);
	if (dc__vol.tp_verbose)
		dc__say("tree: %ld %s %ld", me, psp ? "vforked" : "forked",
			pid);
#ifdef DC_BROKEN_TREE_VFORK
	/* broken: the parent goes on at once, as after a fork */
	psp = 0;
#endif
	if (psp)
		vfork_wait(pid, psp);
	return pid;
}

/* ---- execve ---- */

/*
 * Would the kernel run path?  What it would refuse is answered as it
 * would, before any round (a shell tries each directory of $PATH and
 * takes ENOENT for "not here", ENOEXEC for "a script without #!").  A
 * program libdc cannot run in (static: no LD_PRELOAD; set-user-id:
 * LD_PRELOAD ignored) is refused.  0: go.
 */
static long
exec_check(const char *path)
{
	long r = dc__sys6(SYS_faccessat, AT_FDCWD, (long)path, X_OK, 0, 0, 0);
	if (r < 0)
		return r;
	int fd = (int)dc__sys6(SYS_open, (long)path, O_RDONLY | O_CLOEXEC, 0,
		0, 0, 0);
	if (fd < 0)
		return fd;
	struct stat st;
	Elf64_Ehdr eh;
	long n = dc__sys6(SYS_fstat, fd, (long)&st, 0, 0, 0, 0);
	if (n == 0 && !S_ISREG(st.st_mode))
		n = -EACCES;
	if (n == 0 && (st.st_mode & (S_ISUID | S_ISGID))) {
		dc__refuse_call("execve of a set-user-id or set-group-id program",
			"the kernel runs it without LD_PRELOAD, so outside "
			"libdc", -EPERM);
		n = -EPERM;
	}
	if (n == 0) {
		memset(&eh, 0, sizeof(eh));
		n = dc__sys6(SYS_pread64, fd, (long)&eh, sizeof(eh), 0, 0, 0);
		if (n >= 2 && !memcmp(&eh, "#!", 2))
			n = 0; /* a script: its interpreter runs */
		else if (n < (long)sizeof(eh) || memcmp(eh.e_ident, ELFMAG,
							SELFMAG))
			n = n < 0 ? n : -ENOEXEC;
		else {
			bool interp = false;
			for (unsigned i = 0; i < eh.e_phnum && i < 256; i++) {
				Elf64_Phdr ph;
				if (dc__sys6(SYS_pread64, fd, (long)&ph,
					    sizeof(ph), (long)(eh.e_phoff +
						    (uint64_t)i * eh.e_phentsize),
					    0, 0) == (long)sizeof(ph) &&
				    ph.p_type == PT_INTERP)
					interp = true;
			}
			n = 0;
			if (!interp) {
				dc__refuse_call("execve of a statically linked "
					"program", "libdc is preloaded into "
					"the programs of a tree; a static one "
					"cannot load it", -EPERM);
				n = -EPERM;
			}
		}
	}
	dc__sys6(SYS_close, fd, 0, 0, 0, 0, 0);
	return n;
}

/* Append string z (with its NUL) at *o in the image buffer. */
static bool
put_str(char *buf, size_t *o, const char *z)
{
	size_t l = strlen(z) + 1;
	if (*o + l > sizeof(struct dc_tree_image) + DC_TREE_IMAGE_MAX)
		return false;
	memcpy(buf + *o, z, l);
	*o += l;
	return true;
}

/* Is z one of the variables the tree's processes run libdc by? */
static bool
libdc_var(const char *z)
{
	return !strncmp(z, "DC_", 3) || !strncmp(z, "LD_PRELOAD=", 11) ||
		!strncmp(z, "GLIBC_TUNABLES=", 15);
}

/*
 * execve in a tree: a commit point (docs/ARCHITECTURE.md, "process trees",
 * E1-E5).  Returns only when the exec fails (-errno) or is refused.
 */
long
dc__tree_exec(long nr, const long *a, const void *ucv)
{
	const char *path = (const char *)a[0];
	char *const *argv = (char *const *)a[1], *const *envp =
		(char *const *)a[2];
	if (nr == SYS_execveat) {
		if ((int)a[0] != AT_FDCWD || a[4] != 0) {
			dc__refuse_call("execveat on a descriptor or with flags "
				"(fexecve)", "a member's image is made again "
				"from a path", -ENOSYS);
			return -ENOSYS;
		}
		path = (const char *)a[1];
		argv = (char *const *)a[2];
		envp = (char *const *)a[3];
	}
	long r = exec_check(path);
	if (r < 0)
		return r;
	/* E1: a round of the tree: the image before the exec is committed
	 * (rolled back to it, the process execs again from here) */
	int rc = dc__commit();
	if (rc < 0)
		return -EAGAIN; /* the process is stopped by twopc.c first */
	/* E2: the new image's directory, with the image, durable */
	long me = dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	unsigned gen = dc__vol.tree_gen + 1;
	char dir[PATH_MAX], tmp[PATH_MAX + 8];
	dir_of(dir, sizeof(dir), me, gen);
	snprintf(tmp, sizeof(tmp), "%s.tmp", dir);
	rm_member_dir(tmp);
	rm_member_dir(dir);
	char *buf = dc__vol.io;
	struct dc_tree_image h = { .magic = DC_TREE_IMAGE_MAGIC,
		.version = DC_TREE_VERSION };
	size_t o = sizeof(h);
	char abs[PATH_MAX];
	if (path[0] == '/')
		snprintf(abs, sizeof(abs), "%s", path);
	else
		snprintf(abs, sizeof(abs), "%s/%s", dc__st.cwd, path);
	bool ok = put_str(buf, &o, abs);
	for (int i = 0; ok && argv && argv[i]; i++, h.argc++)
		ok = put_str(buf, &o, argv[i]);
	for (int i = 0; ok && envp && envp[i]; i++)
		if (!libdc_var(envp[i]) && (ok = put_str(buf, &o, envp[i])))
			h.envc++;
	/* libdc's own settings, as this image was started with them */
	char *env = dc__vol.io + (512 << 10);
	ssize_t ne = slurp("/proc/self/environ", env, 256 << 10);
	for (ssize_t i = 0; ok && ne > 0 && i < ne;
		i += (ssize_t)strlen(env + i) + 1)
		if (libdc_var(env + i) && !dc_tree_member_var(env + i) &&
		    (ok = put_str(buf, &o, env + i)))
			h.envc++;
	if (!ok) {
		dc__say("tree: execve %s: the arguments and environment exceed "
			"%u bytes", path, DC_TREE_IMAGE_MAX);
		return -E2BIG;
	}
	h.len = o - sizeof(h);
	h.checksum = rio_checksum(buf + sizeof(h), h.len,
		rio_checksum(&h, 24, DC_TREE_SEED));
	memcpy(buf, &h, sizeof(h));
	if (mkdir(tmp, 0700) != 0 ||
	    (rc = image_put(tmp, buf, o)) != 0 ||
	    rename(tmp, dir) != 0) {
		dc__say("tree: execve: %s: %s", dir, strerror(errno));
		return -EAGAIN;
	}
	int tfd = open(dc__vol.tree_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	/* the new directory's name: durable before init is told (E3) */
	rc = tfd >= 0 ? dc__sync_fd(tfd) : -errno;
	if (tfd >= 0)
		close(tfd);
	if (rc) {
		dc__say("tree: execve: %s", strerror(-rc));
		return -EAGAIN;
	}
	/* E3: init holds every round until the new image joins */
	if (tell(DC_2PC_EXEC, 0, (int32_t)gen, (uint64_t)me) != 0) {
		dc__say("tree: execve: %s", rio_errormsg());
		dc__sys6(SYS_kill, me, SIGKILL, 0, 0, 0, 0);
	}
	/* E4: the environment: the image's, and this member's own; the
	 * descriptors that are the tree's (its pipes, files it opened),
	 * which the new image must not take for inherited from outside */
	char **nargv = (char **)(dc__vol.io + (768 << 10));
	char **nenv = nargv + 8192;
	int ac = 0, ec = 0;
	char *q = buf + sizeof(h);
	q += strlen(q) + 1;
	for (uint32_t i = 0; i < h.argc && ac < 8190; i++, q += strlen(q) + 1)
		nargv[ac++] = q;
	nargv[ac] = NULL;
	for (uint32_t i = 0; i < h.envc && ec < 8180; i++, q += strlen(q) + 1)
		nenv[ec++] = q;
	char *w = buf + o;
	nenv[ec++] = w;
	w += snprintf(w, PATH_MAX + 8, "DC_DIR=%s", dir) + 1;
	nenv[ec++] = w;
	w += snprintf(w, 64, "DC_2PC_ID=%ld", me) + 1;
	nenv[ec++] = w;
	w += snprintf(w, 128, "DC_2PC_COORD=%s", dc__vol.tree_coord) + 1;
	nenv[ec++] = w;
	w += snprintf(w, 64, "DC_TREE_GEN=%u", gen) + 1;
	nenv[ec++] = w;
	w += snprintf(w, 64, "DC_TREE_FORKED=3") + 1;
	nenv[ec++] = w;
	w += snprintf(w, 32, "DC_TREE_FDS=");
#ifndef DC_BROKEN_TREE_EXEC_FDS
	for (int fd = 0; fd < DC__MAX_FD && w < buf + o + 16000; fd++) {
		int d = dc__desc_of(fd);
		if (d >= 0 && !dc__st.fd[fd].cloexec && !dc__st.fd[fd].own &&
		    !dc__st.desc[d].inherited)
			w += snprintf(w, 16, "%d,", fd);
	}
#endif
	nenv[ec] = NULL;
	/* E5: the exec, with the program's signal mask; libdc's signal
	 * (a datagram of init may have raised it) is discarded, not left
	 * pending for a program that has no handler for it yet */
	const ucontext_t *uc = ucv;
	uint64_t mask;
	memcpy(&mask, &uc->uc_sigmask, sizeof(mask));
	mask &= ~(1ull << (DC__TIMER_SIG - 1));
	struct { long h; unsigned long f; long r; uint64_t m; } ign = {
		(long)SIG_IGN, 0, 0, 0 };
	dc__sys6(SYS_rt_sigaction, DC__TIMER_SIG, (long)&ign, 0, 8, 0, 0);
	if (dc__vol.tp_verbose)
		dc__say("tree: %ld execs %s (image %u)", me, abs, gen);
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&mask, 0, 8, 0, 0);
	r = dc__sys6(SYS_execve, (long)abs, (long)nargv, (long)nenv, 0, 0, 0);
	/* init waits for the new image: the tree recovers (and this exec
	 * is tried again from the round of E1) */
	dc__say("tree: execve %s failed after its round: %s", abs,
		strerror((int)-r));
	dc__sys6(SYS_kill, me, SIGKILL, 0, 0, 0, 0);
	return r;
}

/* A new image (DC_TREE_FORKED=3): the descriptors its previous image
 * had made in the tree (DC_TREE_FDS) are the tree's, not inherited from
 * outside: its pipes stay internal (no visible event), and recovery
 * makes them again (a pipe from init, a file by its path) instead of
 * taking what the recreated process inherits. */
void
dc__tree_adopt(void)
{
	if (!dc__vol.tree || dc__vol.tree_forked != 3)
		return;
	const char *l = getenv("DC_TREE_FDS");
	while (l && *l) {
		char *end;
		long fd = strtol(l, &end, 10);
		if (end == l)
			break;
		int d = dc__desc_of((int)fd);
		if (d >= 0)
			dc__st.desc[d].inherited = false;
		l = *end == ',' ? end + 1 : end;
	}
}

/* ---- exit ---- */

void
dc__tree_exit(long status)
{
	if (vfork_sp) /* V4 */
		vfork_put();
	/* invariant 3 */
	if (tell(DC_2PC_EXIT, (int32_t)status, 0,
		    (uint64_t)dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0)) < 0)
		dc__say("tree: exit: %s", rio_errormsg());
	dc__vol.active = false;
}

/* ---- wait ---- */

/*
 * A child's end was waited for: which one, and when, is a
 * non-deterministic event.  A child killed by a signal is a failure of
 * the tree (it may have been killed after it said EXIT, which init takes
 * for a normal exit): this process ends too, and init recovers the tree.
 */
void
dc__tree_waited(long nr, const long *a, long r)
{
	dc__nd_event();
	bool killed = false;
	if (nr == SYS_wait4 && r > 0 && a[1])
		killed = WIFSIGNALED(*(const int *)a[1]);
	if (nr == SYS_waitid && r == 0 && a[2]) {
		const siginfo_t *si = (const siginfo_t *)a[2];
		killed = si->si_pid > 0 && (si->si_code == CLD_KILLED ||
					    si->si_code == CLD_DUMPED);
	}
	if (!killed)
		return;
	dc__say("tree: a child was killed by a signal: the tree recovers");
	dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0), SIGKILL, 0,
		0, 0, 0);
}

/* ---- recovery: the children again ---- */

/*
 * A member (and any 2PC participant) joins before it recovers, so a
 * round may start meanwhile: the
 * coordinator's signal would serve it on the recovery's stack, under the
 * frames of the recovery, with half the process restored (a recovered
 * child died of SIGSEGV in recover.c so).  It stays pending until the
 * resume sets the checkpoint's mask, which never blocks it under 2PC.
 */
void
dc__tree_recovering(void)
{
	/* any 2PC participant: the coordinator's datagrams raise the
	 * signal whenever they arrive (twopc.c), recovery included */
	if (!dc__vol.tree && !dc__vol.twopc)
		return;
	uint64_t m = 1ull << (DC__TIMER_SIG - 1);
	dc__sys6(SYS_rt_sigprocmask, SIG_BLOCK, (long)&m, 0, 8, 0, 0);
}

static int
rec_read(struct dc_tree_rec *out)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/tree", dc__vol.tree_dir);
	static struct dc_tree_rec s[2];
	ssize_t r = slurp(p, (char *)s, sizeof(s));
	if (r == -E2BIG)
		r = sizeof(s);
	const struct dc_tree_rec *best = NULL;
	for (int i = 0; i < 2 && r >= (ssize_t)(DC_TREE_SLOT * (i + 1)); i++)
		if (s[i].magic == DC_TREE_MAGIC &&
		    s[i].nmembers <= DC_TREE_MAX &&
		    s[i].checksum == rio_checksum(&s[i], DC_TREE_SLOT - 8,
					     DC_TREE_SEED) &&
		    (best == NULL || s[i].seq > best->seq))
			best = &s[i];
	if (best == NULL)
		return dc__err(DC_ECORRUPT, "%s: no valid tree record", p);
	*out = *best;
	return 0;
}

/* Invariant 6, before any file change (fundo.c): a round first, once. */
int
dc__tree_before_change(void)
{
#ifdef DC_BROKEN_TREE_UNNAMED
	/* broken: a process changes files before any round names it */
	return 0;
#endif
	if (!dc__vol.tree || tree_named)
		return 0;
	if (dc__vol.tp_st.committed > tree_base) {
		tree_named = true; /* a round served meanwhile named it */
		return 0;
	}
	int rc = dc__commit();
	if (rc < 0)
		return rc;
	tree_named = true;
	return 0;
}

void
dc__tree_resumed(void)
{
	if (!dc__vol.tree)
		return;
	long me = dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	/* invariant 6: a fork's child, resumed from its parent's checkpoint,
	 * is named by no round yet; a process made again, by the one it is
	 * made from */
	if (dc__vol.tree_forked == 1 && !dc__vol.tree_respawned) {
		tree_named = false;
		tree_base = dc__vol.tp_st.committed;
	} else
		tree_named = true;
	if (dc__vol.tree_forked == 1 || dc__vol.tree_respawned)
		return; /* a fresh fork: no children yet */
	dc__vol.tree_respawned = true;
	static struct dc_tree_rec rec;
	if (rec_read(&rec) != 0) {
		dc__say("tree: %s", rio_errormsg());
		dc__sys6(SYS_kill, me, SIGKILL, 0, 0, 0, 0);
	}
	for (unsigned i = 0; i < rec.nmembers; i++) {
		const struct dc_tree_member *m = &rec.m[i];
		if (m->ppid != me)
			continue;
		pid_t set[1] = { m->pid };
		struct clone_args ca = { .exit_signal = SIGCHLD,
			.set_tid = (uint64_t)(uintptr_t)set,
			.set_tid_size = 1 };
		long c = dc__sys6(SYS_clone3, (long)&ca, sizeof(ca), 0, 0, 0,
			0);
		if (c == 0) {
			if (m->state == DC_TREE_EXITED)
				dc__sys6(SYS_exit_group, m->status, 0, 0, 0, 0,
					0);
			exec_member(m->pid, 2, m->gen);
		}
		if (c != m->pid) {
			dc__say("tree: cannot make child %d again: %s",
				m->pid, strerror(c < 0 ? (int)-c : EEXIST));
			dc__sys6(SYS_kill, me, SIGKILL, 0, 0, 0, 0);
		}
		if (dc__vol.tp_verbose)
			dc__say("tree: %ld made child %d again (%s)", me,
				m->pid, m->state == DC_TREE_EXITED ? "exited" :
				"running");
	}
	/* init lets go of the pipes once every member holds its ends */
	if (tell(DC_2PC_RESTORED, 0, 0, (uint64_t)me) < 0)
		dc__say("tree: %s", rio_errormsg());
}

/* ---- pipes ---- */

long
dc__tree_pipe(long nr, const long *a)
{
	int fds[2];
	int flags = nr == SYS_pipe2 ? (int)a[1] : 0;
	if (flags & ~(O_CLOEXEC | O_NONBLOCK)) {
		dc__refuse_call("pipe2 with O_DIRECT or notification flags",
			"a tree's pipe is a byte stream drained at each round",
			-EINVAL);
		return -EINVAL;
	}
	long r = dc__sys6(SYS_pipe2, (long)fds, flags, 0, 0, 0, 0);
	if (r < 0)
		return r;
	char path[64];
	for (int e = 0; e < 2; e++) {
		snprintf(path, sizeof(path), "pipe:%d", fds[e]);
		long t = dc__k_track_new(fds[e], path,
			(e ? O_WRONLY : O_RDONLY) | flags);
		if (t < 0) {
			if (e)
				dc__sys6(SYS_close, fds[0], 0, 0, 0, 0, 0);
			else
				dc__sys6(SYS_close, fds[1], 0, 0, 0, 0, 0);
			return t;
		}
	}
	((int *)a[0])[0] = fds[0];
	((int *)a[0])[1] = fds[1];
	return 0;
}

/* A write to a pipe made in the tree stays in the computation: not a
 * visible event (a send, twopc.c).  Pipes from outside are visible. */
bool
dc__tree_internal(int fd)
{
	int d = dc__desc_of(fd);
	return d >= 0 && dc__st.desc[d].kind == DC__K_PIPE &&
		!dc__st.desc[d].inherited;
}

/* Recovery (kstate.c): the pipe x of the committed round, from init. */
int
dc__tree_pipe_reopen(struct dc__desc *x, int fd0)
{
	static struct dc_tree_rec rec;
	static struct dc_tree_pipes h;
	int rc = rec_read(&rec);
	if (rc)
		return rc;
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/pipes-%lu", dc__vol.tree_dir,
		(unsigned long)rec.committed);
	ssize_t n = slurp(p, (char *)&h, sizeof(h));
	if ((n != -E2BIG && n != (ssize_t)sizeof(h)) ||
	    h.magic != DC_TREE_PIPES_MAGIC || h.npipes > DC_TREE_MAX_PIPES)
		return dc__err(DC_ECORRUPT, "%s: no pipes of round %lu", p,
			(unsigned long)rec.committed);
	long me = dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	for (unsigned j = 0; j < h.nfds && j < DC_TREE_MAX_PIPE_FDS; j++) {
		if (h.f[j].pid != me || h.f[j].fd != fd0 ||
		    h.f[j].pipe >= h.npipes)
			continue;
		int k = h.f[j].pipe;
		bool wr = (x->flags & O_ACCMODE) != O_RDONLY;
		snprintf(p, sizeof(p), "/proc/1/fd/%d",
			DC_TREE_PIPE_FD + 2 * k + (wr ? 1 : 0));
		int fd = open(p, (wr ? O_WRONLY : O_RDONLY) |
			(x->flags & O_NONBLOCK) | O_CLOEXEC);
		if (fd < 0)
			return dc__err(-errno, "tree: pipe %d from init: %s",
				k, strerror(errno));
		return fd;
	}
	return dc__err(DC_ECORRUPT, "tree: descriptor %d (%s) is on no pipe "
		"of round %lu", fd0, x->path, (unsigned long)rec.committed);
}

/* Recovery (kstate.c invariant 3), in a member made again by its parent:
 * a description the tree inherited from outside (the program's standard
 * streams), from init, which holds them all: init's own description of
 * the same file (pidfd_getfd), so every member made again shares it, and
 * its offset, as the members of the first run did.  Opening
 * /proc/1/fd/K instead gave each member a description of its own: a
 * shell made again wrote its next line over the one its child had
 * printed to the same regular file (the child's line lost).  -1 when
 * init has none. */
int
dc__tree_inherited_reopen(const struct dc__desc *x)
{
	char p[64];
	struct stat st;
	int pfd = (int)syscall(SYS_pidfd_open, 1, 0);
	for (int k = 0; k < DC_TREE_PIPE_FD; k++) {
		snprintf(p, sizeof(p), "/proc/1/fd/%d", k);
		if (stat(p, &st) != 0 || st.st_ino != x->ino ||
		    st.st_dev != x->dev)
			continue;
#ifndef DC_BROKEN_TREE_OWN_DESC /* broken: a description of its own */
		int fd = pfd < 0 ? -1 :
			(int)syscall(SYS_pidfd_getfd, pfd, k, 0); /* cloexec */
#else
		int fd = -1;
#endif
		if (fd < 0) /* no pidfd_getfd (before Linux 5.6) */
			fd = open(p, (x->flags & ~O_CREAT) | O_CLOEXEC);
		if (fd >= 0) {
			if (pfd >= 0)
				close(pfd);
			return fd;
		}
	}
	if (pfd >= 0)
		close(pfd);
	return -1;
}
