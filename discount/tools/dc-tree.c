/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dc-tree.c -- dc-run --tree: the launcher, the tree's init, and the
 *              coordinator of the tree's two-phase commits
 *
 * The launcher (dc-run's process) makes a new pid and mount namespace
 * and forks the tree's init into it (pid 1), then waits.  Init mounts a
 * /proc of its own, opens the coordinator's UDP port on the loopback
 * ($DC_2PC_COORD for every member), and starts the program as pid 2
 * ($DC_DIR = TREE/p2, $DC_2PC_ID = 2) -- or, when TREE/tree holds a
 * record, recovers the tree: the root is made again with pid 2 (clone3,
 * set_tid) and recovers its checkpoint; each member makes its own
 * children again (tree.c).
 *
 * A round R (docs/ARCHITECTURE.md, "process trees"):
 *   T-C1. a REQUEST from a joined member, every live member joined, no
 *         round open, no fork announced whose child has not joined:
 *         R = last + 1, the record (last = R) durable; PREPARE(R) and
 *         SIGRTMAX to every live member, again every 20 ms to non-voters;
 *   T-C2. every vote yes: the record (committed = R, the members alive
 *         or exited-unwaited) durable: THE TREE'S CHECKPOINT IS
 *         COMMITTED HERE; then DECISION(R, commit) to every voter;
 *   T-C3. a no vote, no vote in --vote-ms, a member that died without
 *         saying EXIT, a JOIN from a new incarnation: init exits without
 *         a word to the launcher; the kernel kills the namespace; the
 *         launcher starts the tree again, which recovers round
 *         `committed` (every member's part of it is its newest
 *         checkpoint: presumed abort answers ASK about any other round).
 *
 * Invariants:
 *  1. A decision is durable in the record before any member hears it.
 *  2. Round numbers are never reused: `last` is durable before PREPARE.
 *  3. A round opens only when every member that must take part in it --
 *     every member of the record still alive, every child announced by
 *     FORK -- has joined: a child is never left out of the round that
 *     commits its parent after the fork.
 *  4. Any failure of a process of the tree is a failure of the whole
 *     tree: every process returns to the committed round.
 *  5. A member's directory (each image's) is removed only after a durable
 *     record no longer names it (commit_round): a round that fails before
 *     its record returns to a tree whose every directory is there.  A
 *     member that execs (EXEC) is a pending one again until its new
 *     image joins (invariant 3); the record names the new image from the
 *     round that commits it on, and the old image's directory goes after.
 *  6. The record says the program ended (`finished`) before init removes
 *     the directories: a restart then only finishes the removal.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dc.h"
#include "rio.h"
#include "tree_layout.h"
#include "twopc_layout.h"
#include "dc-tree.h"

#define RESEND_MS 20
#define VOTE_MS 10000
#define MAX_IDLE_RESTARTS 50 /* restarts in a row with no round committed */

static bool verbose;
static const char *tdir;

static void
say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
say(const char *fmt, ...)
{
	if (!verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "dc-tree: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- the record ---- */

static struct dc_tree_rec rec;

static int
rec_read(const char *dir, struct dc_tree_rec *out)
{
	char p[4096];
	snprintf(p, sizeof(p), "%s/tree", dir);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	static struct dc_tree_rec s[2];
	ssize_t r = pread(fd, s, sizeof(s), 0);
	close(fd);
	const struct dc_tree_rec *best = NULL;
	for (int i = 0; i < 2 && r >= (ssize_t)(DC_TREE_SLOT * (i + 1)); i++)
		if (s[i].magic == DC_TREE_MAGIC &&
		    s[i].version == DC_TREE_VERSION &&
		    s[i].nmembers <= DC_TREE_MAX &&
		    s[i].checksum == rio_checksum(&s[i], DC_TREE_SLOT - 8,
					     DC_TREE_SEED) &&
		    (best == NULL || s[i].seq > best->seq))
			best = &s[i];
	if (best == NULL)
		return 0;
	*out = *best;
	return 1;
}

/* The next record into slot seq & 1, durable before what it announces. */
static void
rec_write(void)
{
	rec.magic = DC_TREE_MAGIC;
	rec.version = DC_TREE_VERSION;
	rec.seq++;
	rec.checksum = rio_checksum(&rec, DC_TREE_SLOT - 8, DC_TREE_SEED);
	char p[4096];
	snprintf(p, sizeof(p), "%s/tree", tdir);
	int fd = open(p, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	ssize_t w = fd < 0 ? -1 : pwrite(fd, &rec, sizeof(rec),
		(off_t)(DC_TREE_SLOT * (rec.seq & 1)));
	/* The record is the tree's commit point (invariants 1, 2): durable
	 * before the DECISION or PREPARE that follows it. */
	if (w != (ssize_t)sizeof(rec) || fdatasync(fd) != 0) {
		fprintf(stderr, "dc-tree: %s: cannot write the tree record: "
			"%s\n", p, strerror(errno));
		_exit(70);
	}
	close(fd);
}

/* ---- init's view of the members ---- */

enum { M_FREE = 0, M_EXPECTED, M_JOINED, M_EXITING, M_GONE, M_ZOMBIE };

static struct mem {
	int pid, ppid, state, status, pidfd;
	unsigned gen, rec_gen; /* its image, and the one the record names */
	unsigned long long start; /* start time (/proc stat field 22): the
	                           * process, not a later one with its pid */
	bool in_rec, voted, yes, restored;
	struct sockaddr_in addr;
} mem[DC_TREE_MAX];

static int sock = -1;
static int npipes_held; /* recovery: pipes init holds until all restored */
static int open_round; /* 0 none, 1 voting */
static uint64_t opened_ms;

static void reply_to(const struct sockaddr_in *to, int type, uint32_t part,
	uint64_t round, int status, int code);
#define reply(to, type, part, round, status) \
	reply_to(to, type, part, round, status, 0)

static struct mem *
find(int pid)
{
	for (int i = 0; i < DC_TREE_MAX; i++)
		if (mem[i].state != M_FREE && mem[i].pid == pid)
			return &mem[i];
	return NULL;
}

/* $DC_TREE_MAX: a smaller limit than DC_TREE_MAX (tests) */
static int max_members = DC_TREE_MAX;

static struct mem *
add(int pid, int ppid, int state)
{
	struct mem *m = find(pid);
	int used = 0;
	for (int i = 0; i < DC_TREE_MAX; i++)
		used += mem[i].state != M_FREE;
	for (int i = 0; m == NULL && used < max_members && i < DC_TREE_MAX;
		i++)
		if (mem[i].state == M_FREE)
			m = &mem[i];
	if (m == NULL)
		return NULL;
	memset(m, 0, sizeof(*m));
	m->pid = pid;
	m->ppid = ppid;
	m->state = state;
	m->pidfd = -1;
	return m;
}

static void
reply_to(const struct sockaddr_in *to, int type, uint32_t part,
	uint64_t round, int status, int code)
{
	struct dc_2pc_msg m = { .magic = DC_2PC_MAGIC,
		.version = DC_2PC_VERSION, .type = (uint16_t)type,
		.part = part, .round = round, .epoch = rec.restarts,
		.pid = 1, .status = status, .code = code };
	m.checksum = rio_checksum(&m, 56, DC_2PC_SEED);
	sendto(sock, &m, sizeof(m), 0, (const struct sockaddr *)to,
		sizeof(*to));
}

/* T-C3: a failure of the tree.  Init ends; the kernel kills every
 * process of the namespace; the launcher starts the tree again. */
static void
fail_tree(const char *why, int pid)
{
	fprintf(stderr, "dc-tree: %s (pid %d); the tree returns to round "
		"%lu\n", why, pid, (unsigned long)rec.committed);
	_exit(75);
}

/* Directory d and what is in it, `depth` levels of directories deep. */
static void
rm_tree(const char *d, int depth)
{
	DIR *dir = opendir(d);
	struct dirent *e;
	while (dir && (e = readdir(dir))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char p[4400];
		snprintf(p, sizeof(p), "%s/%s", d, e->d_name);
		if (e->d_type == DT_DIR && depth > 0)
			rm_tree(p, depth - 1);
		else
			unlink(p);
	}
	if (dir)
		closedir(dir);
	else
		unlink(d); /* a file */
	rmdir(d);
}

/* A member's directory of image gen, with the files twopc.c keeps
 * beside it. */
static void
rm_image(int pid, unsigned gen)
{
	char p[4200];
	if (gen)
		snprintf(p, sizeof(p), "%s/p%d-e%u", tdir, pid, gen);
	else
		snprintf(p, sizeof(p), "%s/p%d", tdir, pid);
	if (access(p, F_OK) == 0)
		say("removes %s", p);
	rm_tree(p, 2);
}

/* Every directory of a member: each of its images. */
static void
rm_member(int pid)
{
	char pre[32];
	int l = snprintf(pre, sizeof(pre), "p%d-e", pid);
	DIR *d = opendir(tdir);
	struct dirent *e;
	while (d && (e = readdir(d)))
		if (!strncmp(e->d_name, pre, (size_t)l)) {
			char p[4400];
			snprintf(p, sizeof(p), "%s/%s", tdir, e->d_name);
			say("removes %s", p);
			rm_tree(p, 2);
		}
	if (d)
		closedir(d);
	rm_image(pid, 0);
}

/* The state letter of process pid, 0 when there is none; *start its
 * start time; *flags (when not NULL) its kernel flags, the 9th field:
 * PF_EXITING (0x4) is set before the kernel closes its descriptors. */
static char
proc_state(int pid, unsigned long long *start, unsigned long *flags)
{
	char p[64], b[1024];
	snprintf(p, sizeof(p), "/proc/%d/stat", pid);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	ssize_t n = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (n <= 0)
		return 0;
	b[n] = '\0';
	const char *q = strrchr(b, ')');
	if (q == NULL || q[1] != ' ')
		return 0;
	char st = q[2];
	/* fields 3 .. 22: the flags are the 6th after the state, the start
	 * time the 19th */
	const char *f = q + 2;
	for (int i = 0; f && i < 19; i++) {
		f = strchr(f, ' ');
		if (f)
			f++;
		if (i == 5 && flags)
			*flags = f ? strtoul(f, NULL, 10) : 0;
	}
	*start = f ? strtoull(f, NULL, 10) : 0;
	return st;
}

/* m's process (not another with its pid) exists; zombie: not waited */
static bool
exists(const struct mem *m, bool zombie_only)
{
	unsigned long long s = 0;
	char st = proc_state(m->pid, &s, NULL);
	if (st == 0 || (m->start && s != m->start))
		return false;
	return zombie_only ? st == 'Z' : true;
}

static bool
all_joined(void)
{
	for (int i = 0; i < DC_TREE_MAX; i++)
		if (mem[i].state == M_EXPECTED)
			return false;
	return true;
}

static void
prepare(bool all)
{
	for (int i = 0; i < DC_TREE_MAX; i++) {
		struct mem *m = &mem[i];
		if (m->state != M_JOINED || (!all && m->voted))
			continue;
		reply(&m->addr, DC_2PC_PREPARE, (uint32_t)m->pid,
			rec.last, 0);
		kill(m->pid, SIGRTMAX);
	}
}

/* ---- pipes ---- */

static uint64_t own_pipe[DC_TREE_MAX_PIPES]; /* outside the tree */
static int nown;

static char proc_state(int pid, unsigned long long *start,
	unsigned long *flags);

static bool
pipe_ino(const char *path, uint64_t *ino)
{
	char l[64];
	ssize_t n = readlink(path, l, sizeof(l) - 1);
	if (n <= 0)
		return false;
	l[n] = '\0';
	return sscanf(l, "pipe:[%lu]", (unsigned long *)ino) == 1;
}

/* The pipes init holds when it starts came from outside the tree (the
 * program's standard streams): never drained, never made again. */
static void
note_own_pipes(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d && (e = readdir(d)) && nown < DC_TREE_MAX_PIPES) {
		char p[300];
		snprintf(p, sizeof(p), "/proc/self/fd/%s", e->d_name);
		if (pipe_ino(p, &own_pipe[nown]))
			nown++;
	}
	if (d)
		closedir(d);
}

static bool
own(uint64_t ino)
{
	for (int i = 0; i < nown; i++)
		if (own_pipe[i] == ino)
			return true;
	return false;
}

/* T-C2, before the record: every pipe a member holds is drained, its
 * bytes written back, and the bytes saved in TREE/pipes-R.  Every member
 * is stopped in its round (it voted), so nothing reads or writes them.
 * A member killed after its vote lists no descriptors once the kernel
 * closed them, which it does before the process is a zombie: its pipes
 * would be missing from the round its checkpoint is in, and every
 * recovery to that round would fail.  So each member must be alive and
 * not exiting (PF_EXITING) once its descriptors are read; else the round
 * fails, as when it died before. */
static void
save_pipes(uint64_t round)
{
	static struct dc_tree_pipes h;
	static char *data;
	static size_t cap;
	size_t dlen = 0;
	memset(&h, 0, sizeof(h));
	for (int i = 0; i < DC_TREE_MAX; i++) {
		if (mem[i].state != M_JOINED)
			continue;
		char dp[64];
		snprintf(dp, sizeof(dp), "/proc/%d/fd", mem[i].pid);
		DIR *d = opendir(dp);
		if (d == NULL)
			fail_tree("a member died in the round", mem[i].pid);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			char p[400];
			uint64_t ino;
			snprintf(p, sizeof(p), "%s/%s", dp, e->d_name);
			if (!pipe_ino(p, &ino) || own(ino))
				continue;
			int seen = -1;
			for (int k = 0; k < h.npipes; k++)
				if (h.p[k].ino == ino)
					seen = k;
			if (h.nfds == DC_TREE_MAX_PIPE_FDS)
				fail_tree("more pipe descriptors than "
					"DC_TREE_MAX_PIPE_FDS", mem[i].pid);
			h.f[h.nfds++] = (struct dc_tree_pipe_fd){
				.pid = mem[i].pid,
				.fd = (int16_t)atoi(e->d_name),
				.pipe = (uint16_t)(seen >= 0 ? seen :
					h.npipes) };
			if (seen >= 0)
				continue;
			if (h.npipes == DC_TREE_MAX_PIPES)
				fail_tree("more pipes than DC_TREE_MAX_PIPES",
					mem[i].pid);
			int fd = open(p, O_RDWR | O_NONBLOCK | O_CLOEXEC);
			if (fd < 0)
				fail_tree("cannot open a pipe of a member",
					mem[i].pid);
			size_t start = dlen;
			for (;;) {
				if (cap - dlen < 65536) {
					cap = cap ? cap * 2 : 1 << 20;
					data = realloc(data, cap);
					if (data == NULL)
						fail_tree("out of memory", 0);
				}
				ssize_t r = read(fd, data + dlen, cap - dlen);
				if (r <= 0)
					break;
				dlen += (size_t)r;
			}
			/* the bytes go back, in order, before anyone runs */
			size_t off = start;
			while (off < dlen) {
				ssize_t w = write(fd, data + off, dlen - off);
				if (w <= 0)
					fail_tree("cannot refill a pipe",
						mem[i].pid);
				off += (size_t)w;
			}
#ifdef DC_BROKEN_TREE_PIPE_LOST
			/* broken: the unread bytes are not in the checkpoint */
			dlen = start;
#endif
			close(fd);
			h.p[h.npipes].ino = ino;
			h.p[h.npipes].len = (uint32_t)(dlen - start);
			h.npipes++;
		}
		closedir(d);
	}
	/* a member that died while its descriptors were read: the list
	 * may miss some, so the round is not committed (presumed abort) */
	for (int i = 0; i < DC_TREE_MAX; i++) {
		if (mem[i].state != M_JOINED)
			continue;
		unsigned long long s = 0;
		unsigned long fl = 0;
		char st = proc_state(mem[i].pid, &s, &fl);
		if (st == 0 || st == 'Z' || st == 'X' || (fl & 0x4) ||
		    (mem[i].start && s != mem[i].start)) {
			say("member %d: state %c, start %llu (joined %llu)",
				mem[i].pid, st ? st : '-', s, mem[i].start);
			fail_tree("a member died in the round", mem[i].pid);
		}
	}
	if (verbose) {
		char b[2048];
		int o = 0;
		for (unsigned j = 0; j < h.nfds && o < 2000; j++)
			o += snprintf(b + o, sizeof(b) - (size_t)o, " %d:%d=%u",
				h.f[j].pid, h.f[j].fd, h.f[j].pipe);
		say("round %lu: %u pipes:%s", (unsigned long)round,
			(unsigned)h.npipes, o ? b : " none");
	}
	if (h.npipes == 0)
		return;
	h.magic = DC_TREE_PIPES_MAGIC;
	h.version = DC_TREE_VERSION;
	h.round = round;
	h.bytes = dlen;
	h.checksum = rio_checksum(data, dlen, rio_checksum(h.p, sizeof(h.p) +
		sizeof(h.f), DC_TREE_SEED));
	char p[4200], t[4200];
	snprintf(p, sizeof(p), "%s/pipes-%lu", tdir, (unsigned long)round);
	snprintf(t, sizeof(t), "%s.tmp", p);
	int fd = open(t, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	bool ok = fd >= 0 && write(fd, &h, sizeof(h)) == (ssize_t)sizeof(h) &&
		(dlen == 0 || write(fd, data, dlen) == (ssize_t)dlen);
	/* the pipes of round R: durable, and under their name, before the
	 * record commits R (invariant 1) */
	ok = ok && fdatasync(fd) == 0 && rename(t, p) == 0;
	if (fd >= 0)
		close(fd);
	int dfd = open(tdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	ok = ok && dfd >= 0 && fsync(dfd) == 0;
	if (dfd >= 0)
		close(dfd);
	if (!ok) {
		fprintf(stderr, "dc-tree: %s: %s\n", p, strerror(errno));
		_exit(70);
	}
}

/* Recovery: the pipes of the committed round again, held by init at
 * DC_TREE_PIPE_FD + 2k (read) and + 2k + 1 (write), filled. */
static int
make_pipes(void)
{
	char p[4200];
	snprintf(p, sizeof(p), "%s/pipes-%lu", tdir,
		(unsigned long)rec.committed);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : -errno;
	static struct dc_tree_pipes h;
	struct stat st;
	char *data = NULL;
	int rc = -EIO;
	if (fstat(fd, &st) == 0 && read(fd, &h, sizeof(h)) ==
	    (ssize_t)sizeof(h) && h.magic == DC_TREE_PIPES_MAGIC &&
	    h.npipes <= DC_TREE_MAX_PIPES &&
	    (uint64_t)st.st_size == sizeof(h) + h.bytes &&
	    (data = malloc(h.bytes + 1)) != NULL &&
	    read(fd, data, h.bytes) == (ssize_t)h.bytes &&
	    h.checksum == rio_checksum(data, h.bytes,
			      rio_checksum(h.p, sizeof(h.p) + sizeof(h.f),
				      DC_TREE_SEED)))
		rc = 0;
	close(fd);
	size_t off = 0;
	for (int k = 0; rc == 0 && k < h.npipes; k++) {
		int pp[2];
		if (pipe2(pp, O_CLOEXEC) != 0) {
			rc = -errno;
			break;
		}
		if (h.p[k].len > 65536)
			fcntl(pp[1], F_SETPIPE_SZ, (int)h.p[k].len);
		if (dup3(pp[0], DC_TREE_PIPE_FD + 2 * k, O_CLOEXEC) < 0 ||
		    dup3(pp[1], DC_TREE_PIPE_FD + 2 * k + 1, O_CLOEXEC) < 0 ||
		    (h.p[k].len && write(pp[1], data + off, h.p[k].len) !=
				    (ssize_t)h.p[k].len))
			rc = -errno;
		close(pp[0]);
		close(pp[1]);
		off += h.p[k].len;
	}
	free(data);
	if (rc == 0) {
		npipes_held = h.npipes;
		say("%u pipes made again", (unsigned)h.npipes);
	}
	return rc;
}

/* T-C2: every live member voted yes. */
static void
commit_round(void)
{
	int n = 0, ngone = 0, nleft = 0, nexit = 0;
	int gone[DC_TREE_MAX];
	static struct dc_tree_rec prev;
	prev = rec; /* the previous record (the crash point below) */
	for (int i = 0; i < DC_TREE_MAX; i++) {
		struct mem *m = &mem[i];
		nexit += m->pid != 2 && (m->state == M_EXITING ||
			m->state == M_GONE || m->state == M_ZOMBIE);
		if (m->state == M_JOINED) {
			rec.m[n++] = (struct dc_tree_member){ .pid = m->pid,
				.ppid = m->ppid, .state = DC_TREE_RUNNING,
				.gen = (uint16_t)m->gen };
			m->in_rec = true;
		} else if ((m->state == M_EXITING && exists(m, false)) ||
			   ((m->state == M_GONE || m->state == M_ZOMBIE) &&
			    exists(m, true))) {
			/* exiting or exited, not yet waited for */
			if (m->state != M_EXITING)
				m->state = M_ZOMBIE;
			rec.m[n++] = (struct dc_tree_member){ .pid = m->pid,
				.ppid = m->ppid, .state = DC_TREE_EXITED,
				.gen = (uint16_t)m->gen, .status = m->status };
		} else if (m->state == M_GONE || m->state == M_ZOMBIE) {
			/* waited for: out of the tree; its directories go
			 * once the record without it is durable (a round that
			 * fails before returns to one that has it) */
			for (unsigned j = 0; j < prev.nmembers; j++)
				nleft += prev.m[j].pid == m->pid &&
					prev.m[j].state == DC_TREE_RUNNING;
#ifndef DC_BROKEN_TREE_RM_EARLY
			gone[ngone++] = m->pid;
#else
			/* broken: removed before the record */
			rm_member(m->pid);
#endif
			m->state = M_FREE;
		}
	}
	rec.nmembers = (uint16_t)n;
	int lp = open("/proc/sys/kernel/ns_last_pid", O_RDONLY | O_CLOEXEC);
	char lb[32] = "";
	if (lp >= 0 && read(lp, lb, sizeof(lb) - 1) > 0)
		rec.last_pid = strtoull(lb, NULL, 10);
	if (lp >= 0)
		close(lp);
	save_pipes(rec.last);
	uint64_t before = rec.committed;
#ifdef DC_TEST_CRASHPOINTS
	/* test build: $DC_TREE_CRASH=commit:FILE -- init dies in the first
	 * round a waited-for member leaves that the previous record has
	 * running (recovery makes it again), before the record (once);
	 * exit:FILE -- in the first round after a member other than the
	 * root said EXIT (recovery returns to a round the member ran in) */
	const char *cr = getenv("DC_TREE_CRASH");
	const char *cf = cr == NULL ? NULL :
		!strncmp(cr, "commit:", 7) && nleft ? cr + 7 :
		!strncmp(cr, "exit:", 5) && nexit ? cr + 5 : NULL;
	if (cf && access(cf, F_OK) != 0) {
		close(open(cf, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
		fprintf(stderr, "dc-tree: crash point: init dies before the "
			"record of round %lu\n", (unsigned long)rec.last);
		_exit(75);
	}
#endif
	rec.committed = rec.last;
	rec_write(); /* invariant 1 */
	char op[4200];
	snprintf(op, sizeof(op), "%s/pipes-%lu", tdir, (unsigned long)before);
	unlink(op);
	for (int k = 0; k < ngone; k++)
		rm_member(gone[k]);
	/* an image the record no longer names (the member exec'ed since
	 * the previous record): its directory goes, after the record */
	for (int i = 0; i < DC_TREE_MAX; i++)
		if (mem[i].state != M_FREE && mem[i].gen != mem[i].rec_gen) {
			rm_image(mem[i].pid, mem[i].rec_gen);
			mem[i].rec_gen = mem[i].gen;
		}
	open_round = 0;
	say("round %lu committed (%d members)", (unsigned long)rec.last, n);
	for (int i = 0; i < DC_TREE_MAX; i++)
		if (mem[i].state == M_JOINED && mem[i].voted)
			reply(&mem[i].addr, DC_2PC_DECISION,
				(uint32_t)mem[i].pid, rec.last, 1);
}

static void
on_msg(const struct dc_2pc_msg *msg, const struct sockaddr_in *from)
{
	int pid = (int)msg->part;
	struct mem *m = find(pid);
	switch (msg->type) {
	case DC_2PC_JOIN:
		if (m == NULL || m->state != M_EXPECTED) {
			if (m && m->state == M_JOINED && m->addr.sin_port ==
			    from->sin_port)
				break; /* a resent JOIN */
			if (m && m->state == M_JOINED)
				fail_tree("a member joined again: it failed "
					"and recovered", pid);
			reply(from, DC_2PC_WELCOME, (uint32_t)pid, 0, -1);
			fprintf(stderr, "dc-tree: pid %d is no member of the "
				"tree\n", pid);
			break;
		}
		m->state = M_JOINED;
		m->addr = *from;
		if (m->pidfd < 0) {
			m->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
			proc_state(pid, &m->start, NULL);
		}
		say("member %d joined", pid);
		reply(from, DC_2PC_WELCOME, (uint32_t)pid, rec.committed, 0);
		if (open_round)
			prepare(false);
		break;
	case DC_2PC_FORK: {
		if (m == NULL || m->state != M_JOINED)
			break;
		int child = msg->code;
		struct mem *c = find(child);
		if (c && c->state != M_EXPECTED && c->state != M_JOINED) {
			/* the pid of a member that was waited for, used
			 * again (the child renamed its copy over its dir) */
			c->state = M_FREE;
			c = NULL;
		}
		if (c == NULL) {
			c = add(child, pid, M_EXPECTED);
			if (c == NULL) {
				/* refused: the parent's fork fails */
				fprintf(stderr, "dc-tree: member %d cannot fork: "
					"the tree has %d members (DC_TREE_MAX)\n",
					pid, max_members);
				reply_to(from, DC_2PC_ANSWER, (uint32_t)pid,
					(uint64_t)child, 0, DC_2PC_FORK);
				break;
			}
			/* a child that dies before it joins is seen too */
			c->pidfd = (int)syscall(SYS_pidfd_open, child, 0);
			proc_state(child, &c->start, NULL);
			say("member %d forked %d", pid, child);
		}
		reply_to(from, DC_2PC_ANSWER, (uint32_t)pid, (uint64_t)child,
			1, DC_2PC_FORK);
		break;
	}
	case DC_2PC_EXIT:
		if (m == NULL || (m->state != M_JOINED &&
				  m->state != M_EXITING))
			break;
		if (m->state == M_JOINED) {
			m->state = M_EXITING;
			m->status = msg->status;
			say("member %d exits (%d)", pid, msg->status);
		}
		reply_to(from, DC_2PC_ANSWER, (uint32_t)pid, (uint64_t)pid, 1,
			DC_2PC_EXIT);
		break;
	case DC_2PC_REQUEST:
		if (m == NULL || m->state != M_JOINED)
			break;
		m->addr = *from;
		if (open_round) {
			prepare(false);
			break;
		}
		if (!all_joined())
			break; /* the requester asks again */
		/* T-C1 */
		rec.last++;
		rec_write(); /* invariant 2 */
		open_round = 1;
		opened_ms = now_ms();
		for (int i = 0; i < DC_TREE_MAX; i++)
			mem[i].voted = mem[i].yes = false;
		say("round %lu opened by %d", (unsigned long)rec.last, pid);
		prepare(true);
		break;
	case DC_2PC_VOTE:
		if (!open_round || msg->round != rec.last || m == NULL ||
		    m->state != M_JOINED)
			break;
		m->voted = true;
		m->yes = msg->status == 0;
		if (!m->yes)
			fail_tree("a member voted no", pid);
		for (int i = 0; i < DC_TREE_MAX; i++)
			if (mem[i].state == M_JOINED && !mem[i].voted)
				return;
		/* a child announced during the round takes part in it
		 * (invariant 3): its parent's vote came after the fork */
		if (!all_joined())
			return;
		commit_round();
		break;
	case DC_2PC_EXEC:
		/* E3: the member's next image must join before any round
		 * (invariant 3); a resent EXEC is only answered */
		if (m == NULL)
			break;
		if ((m->state == M_JOINED || m->state == M_EXPECTED) &&
		    msg->code > 0 && (unsigned)msg->code != m->gen) {
			m->state = M_EXPECTED;
			m->gen = (unsigned)msg->code;
			say("member %d execs (image %u)", pid, m->gen);
		}
		reply_to(from, DC_2PC_ANSWER, (uint32_t)pid, (uint64_t)pid, 1,
			DC_2PC_EXEC);
		break;
	case DC_2PC_ACK:
		break;
	case DC_2PC_RESTORED: {
		if (m == NULL)
			break;
		m->restored = true;
		reply_to(from, DC_2PC_ANSWER, (uint32_t)pid, (uint64_t)pid, 1,
			DC_2PC_RESTORED);
		bool all = true;
		for (int i = 0; i < DC_TREE_MAX; i++)
			if (mem[i].in_rec && (mem[i].state == M_EXPECTED ||
					      mem[i].state == M_JOINED))
				all = all && mem[i].restored;
		if (all && npipes_held) {
			/* every member holds its ends: init's go, so a
			 * reader sees the end of a pipe its writers closed */
			for (int k = 0; k < 2 * npipes_held; k++)
				close(DC_TREE_PIPE_FD + k);
			say("every member restored; init closed %d pipes",
				npipes_held);
			npipes_held = 0;
		}
		break;
	}
	case DC_2PC_ASK: {
		/* presumed abort: only the committed round is committed (a
		 * member undecided about an older one cannot exist: every
		 * abort restarts the whole tree, and every member resolves
		 * its round when it starts) */
		uint64_t r = msg->round;
		reply(from, DC_2PC_ANSWER, (uint32_t)pid, r,
			r == rec.committed);
		say("member %d asked about round %lu: %s", pid,
			(unsigned long)r, r == rec.committed ? "committed" :
			"aborted");
		break;
	}
	default:
		break;
	}
}

/* A member's process ended. */
static void
ended(struct mem *m)
{
	close(m->pidfd);
	m->pidfd = -1;
	if (m->state != M_EXITING)
		fail_tree("a member died", m->pid);
	m->state = M_GONE;
}

static bool
all_gone(void)
{
	for (int i = 0; i < DC_TREE_MAX; i++)
		if (mem[i].state == M_EXPECTED || mem[i].state == M_JOINED ||
		    mem[i].state == M_EXITING)
			return false;
	return true;
}

/* ---- images (tree_layout.h) ---- */

/* The root's first image, TREE/p2/image: the program as execvp finds
 * it, its arguments, init's environment.  A fork's child copies its
 * parent's image, so every member made again runs the program it ran. */
static int
root_image(char **argv)
{
	char path[4096] = "";
	if (strchr(argv[0], '/')) {
		if (argv[0][0] == '/')
			snprintf(path, sizeof(path), "%s", argv[0]);
		else {
			char cwd[3000];
			if (getcwd(cwd, sizeof(cwd)) == NULL)
				return -errno;
			snprintf(path, sizeof(path), "%s/%s", cwd, argv[0]);
		}
	} else {
		const char *pp = getenv("PATH");
		char dirs[4096];
		snprintf(dirs, sizeof(dirs), "%s", pp ? pp : "/usr/bin:/bin");
		for (char *sv, *d = strtok_r(dirs, ":", &sv); d;
			d = strtok_r(NULL, ":", &sv)) {
			snprintf(path, sizeof(path), "%s/%s", *d ? d : ".",
				argv[0]);
			if (access(path, X_OK) == 0)
				break;
			path[0] = '\0';
		}
	}
	if (path[0] == '\0')
		return 0; /* execvp will say why */
	static char buf[sizeof(struct dc_tree_image) + DC_TREE_IMAGE_MAX];
	struct dc_tree_image h = { .magic = DC_TREE_IMAGE_MAGIC,
		.version = DC_TREE_VERSION };
	size_t o = sizeof(h);
	extern char **environ;
	bool ok = true;
#define PUT(z) do { size_t l_ = strlen(z) + 1; \
		if (o + l_ > sizeof(buf)) { ok = false; break; } \
		memcpy(buf + o, z, l_); o += l_; } while (0)
	PUT(path);
	for (int i = 0; ok && argv[i]; i++, h.argc++)
		PUT(argv[i]);
	for (int i = 0; ok && environ[i]; i++)
		if (!dc_tree_member_var(environ[i])) {
			PUT(environ[i]);
			h.envc++;
		}
#undef PUT
	if (!ok)
		return -E2BIG;
	h.len = o - sizeof(h);
	h.checksum = rio_checksum(buf + sizeof(h), h.len,
		rio_checksum(&h, 24, DC_TREE_SEED));
	memcpy(buf, &h, sizeof(h));
	char d[4200], f[4300];
	snprintf(d, sizeof(d), "%s/p2", tdir);
	snprintf(f, sizeof(f), "%s/image", d);
	if (mkdir(d, 0700) != 0 && errno != EEXIST)
		return -errno;
	int fd = open(f, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	bool w = write(fd, buf, o) == (ssize_t)o;
	/* the image: durable before the root can commit a round (a
	 * child made again from a copy of it executes it) */
	w = w && fdatasync(fd) == 0;
	close(fd);
	return w ? 0 : -EIO;
}

/* The image of member pid, gen > 0: argv and envp point into buf. */
static int
image_load(int pid, unsigned gen, char *buf, size_t n, char **path,
	char **argv, char **envp, int max)
{
	char f[4300];
	snprintf(f, sizeof(f), "%s/p%d-e%u/image", tdir, pid, gen);
	int fd = open(f, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t got = read(fd, buf, n);
	close(fd);
	struct dc_tree_image h;
	if (got < (ssize_t)sizeof(h))
		return -EIO;
	memcpy(&h, buf, sizeof(h));
	if (h.magic != DC_TREE_IMAGE_MAGIC || h.len > DC_TREE_IMAGE_MAX ||
	    (size_t)got != sizeof(h) + h.len || h.argc >= (uint32_t)max ||
	    h.envc >= (uint32_t)max ||
	    h.checksum != rio_checksum(buf + sizeof(h), h.len,
			      rio_checksum(&h, 24, DC_TREE_SEED)))
		return -EIO;
	char *q = buf + sizeof(h);
	*path = q;
	q += strlen(q) + 1;
	int ac = 0, ec = 0;
	for (uint32_t i = 0; i < h.argc; i++, q += strlen(q) + 1)
		argv[ac++] = q;
	argv[ac] = NULL;
	for (uint32_t i = 0; i < h.envc; i++, q += strlen(q) + 1)
		if (!dc_tree_member_var(q))
			envp[ec++] = q;
	envp[ec] = NULL;
	return ec;
}

static pid_t
spawn(int pid, unsigned gen, char **argv)
{
	char v[4096];
	pid_t set[1] = { pid };
	struct clone_args ca = { .exit_signal = SIGCHLD,
		.set_tid = (uint64_t)(uintptr_t)set, .set_tid_size = 1 };
	long c = syscall(SYS_clone3, &ca, sizeof(ca));
	if (c != 0)
		return (pid_t)c;
	prctl(PR_SET_PDEATHSIG, 0);
	if (gen)
		snprintf(v, sizeof(v), "%s/p%d-e%u", tdir, pid, gen);
	else
		snprintf(v, sizeof(v), "%s/p%d", tdir, pid);
	setenv("DC_DIR", v, 1);
	snprintf(v, sizeof(v), "%d", pid);
	setenv("DC_2PC_ID", v, 1);
	snprintf(v, sizeof(v), "%u", gen);
	setenv("DC_TREE_GEN", v, 1);
	sigset_t none;
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (gen) {
		/* the root after an execve: its image (tree_layout.h) */
		static char buf[sizeof(struct dc_tree_image) +
			DC_TREE_IMAGE_MAX + 1];
		static char *av[8192], *ev[8192 + 8];
		char *path;
		int ec = image_load(pid, gen, buf, sizeof(buf), &path, av, ev,
			8192);
		if (ec < 0) {
			fprintf(stderr, "dc-run: %s/image: %s\n", v,
				strerror(-ec));
			_exit(70);
		}
		static char own[5][4200];
		const char *names[] = { "DC_DIR", "DC_2PC_ID", "DC_2PC_COORD",
			"DC_TREE_GEN", "DC_TREE_FORKED" };
		for (int i = 0; i < 5; i++) {
			const char *val = i == 4 ? "0" : getenv(names[i]);
			snprintf(own[i], sizeof(own[i]), "%s=%s", names[i],
				val ? val : "");
			ev[ec++] = own[i];
		}
		ev[ec] = NULL;
		execve(path, av, ev);
		fprintf(stderr, "dc-run: %s: %s\n", path, strerror(errno));
		_exit(127);
	}
	execvp(argv[0], argv);
	fprintf(stderr, "dc-run: %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* The program ended with status: the record says so first (durable), so
 * a restart in the middle of the removals finishes them instead of
 * recovering members whose directories are half gone; then every
 * member's directory, the pipes of rounds, forks a recovery discarded;
 * the record last.  Writes "D<status>" for the launcher. */
static int
finish(int report, int status)
{
#ifndef DC_BROKEN_TREE_FINISH_UNMARKED
	if (rec.finished == 0) {
		rec.finished = 0x100u | (unsigned)(status & 0xff);
		rec_write();
	}
#endif
#ifdef DC_TEST_CRASHPOINTS
	/* test build: $DC_TREE_CRASH=finish:FILE -- init dies once the
	 * directories are removed, before the record, once (FILE made
	 * then) */
	const char *cr = getenv("DC_TREE_CRASH");
	const char *mark = cr && !strncmp(cr, "finish:", 7) ? cr + 7 : NULL;
	if (mark && access(mark, F_OK) == 0)
		mark = NULL;
#endif
	char t[4200];
	/* again until nothing is left: a directory read while its entries
	 * go may skip some */
	for (int pass = 0, more = 1; more && pass < 8; pass++) {
		more = 0;
		DIR *d = opendir(tdir);
		struct dirent *e;
		while (d && (e = readdir(d))) {
			if (!strcmp(e->d_name, "tree") || e->d_name[0] == '.')
				continue;
			snprintf(t, sizeof(t), "%s/%s", tdir, e->d_name);
			rm_tree(t, 3);
			more = 1;
		}
		if (d)
			closedir(d);
	}
#ifdef DC_TEST_CRASHPOINTS
	if (mark) {
		close(open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
		fprintf(stderr, "dc-tree: crash point: init dies with the "
			"directories removed, the record not yet\n");
		_exit(75);
	}
#endif
	snprintf(t, sizeof(t), "%s/tree", tdir);
	unlink(t);
	rmdir(tdir);
	/* the directory is gone before the launcher hears it (init dies
	 * with the launcher) */
	char b[16];
	int l = snprintf(b, sizeof(b), "D%d", status);
	if (write(report, b, (size_t)l) != l)
		return 70;
	return 0;
}

/* pid 1 of the tree's namespace.  Writes "D<status>" to report when the
 * program is done; ends without a word for the launcher to recover. */
static int
init_main(char **argv, int report)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() == 0 && kill(getpid(), 0) != 0)
		_exit(75);
	if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0 ||
	    mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
		    NULL) != 0) {
		fprintf(stderr, "dc-run: --tree: cannot mount the tree's "
			"/proc: %s\n", strerror(errno));
		return 70;
	}
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET,
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	if (sock < 0 || bind(sock, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    getsockname(sock, (struct sockaddr *)&a, &al) != 0) {
		fprintf(stderr, "dc-run: --tree: coordinator socket: %s\n",
			strerror(errno));
		return 70;
	}
	char v[64];
	snprintf(v, sizeof(v), "127.0.0.1:%u", (unsigned)ntohs(a.sin_port));
	setenv("DC_2PC_COORD", v, 1);
	sigset_t chld;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &chld, NULL);
	int sfd = signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);

	note_own_pipes();
	int rc = rec_read(tdir, &rec);
	if (rc < 0) {
		fprintf(stderr, "dc-run: %s/tree: %s\n", tdir, strerror(-rc));
		return 70;
	}
	if (rc == 0) {
		memset(&rec, 0, sizeof(rec));
		rec.nmembers = 1;
		rec.m[0] = (struct dc_tree_member){ .pid = 2,
			.state = DC_TREE_RUNNING };
		if ((rc = root_image(argv)) != 0) {
			fprintf(stderr, "dc-run: %s/p2/image: %s\n", tdir,
				strerror(-rc));
			return 70;
		}
		rec_write();
	} else if (rec.finished) {
		say("the program had ended (%u); removing the directory",
			(unsigned)(rec.finished & 0xff));
		return finish(report, (int)(rec.finished & 0xff));
	} else {
		rec.restarts++;
		rec_write();
		say("recovering the tree at round %lu (%u members)",
			(unsigned long)rec.committed, (unsigned)rec.nmembers);
	}
	for (unsigned i = 0; i < rec.nmembers; i++) {
		struct mem *m = add(rec.m[i].pid, rec.m[i].ppid,
			rec.m[i].state == DC_TREE_RUNNING ? M_EXPECTED :
			M_ZOMBIE);
		if (m == NULL)
			return 70;
		m->in_rec = true;
		m->status = rec.m[i].status;
		m->gen = m->rec_gen = rec.m[i].gen;
	}
	if (rec.last_pid > 2) {
		/* new pids after the committed round's (ns_last_pid) */
		int lp = open("/proc/sys/kernel/ns_last_pid",
			O_WRONLY | O_CLOEXEC);
		char lb[32];
		int l = snprintf(lb, sizeof(lb), "%lu",
			(unsigned long)rec.last_pid);
		if (lp < 0 || write(lp, lb, (size_t)l) != l)
			say("ns_last_pid: %s", strerror(errno));
		if (lp >= 0)
			close(lp);
	}
	if ((rc = make_pipes()) != 0) {
		fprintf(stderr, "dc-run: %s/pipes-%lu: %s\n", tdir,
			(unsigned long)rec.committed, strerror(-rc));
		return 70;
	}
	/* the root; it makes its own children again (tree.c) */
	struct mem *root = find(2);
	if (root == NULL || root->state != M_EXPECTED) {
		fprintf(stderr, "dc-run: %s/tree: no root in the record\n",
			tdir);
		return 70;
	}
	pid_t r = spawn(2, root->gen, argv);
	if (r != 2) {
		fprintf(stderr, "dc-run: --tree: cannot start the root with "
			"pid 2: %s\n", strerror(r < 0 ? errno : EEXIST));
		return 70;
	}
	int root_status = 0;
	for (;;) {
		struct pollfd p[2 + DC_TREE_MAX];
		struct mem *pm[2 + DC_TREE_MAX];
		int n = 0;
		p[n++] = (struct pollfd){ .fd = sock, .events = POLLIN };
		p[n++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		for (int i = 0; i < DC_TREE_MAX; i++)
			if (mem[i].pidfd >= 0 && mem[i].state != M_FREE) {
				pm[n] = &mem[i];
				p[n++] = (struct pollfd){ .fd = mem[i].pidfd,
					.events = POLLIN };
			}
		int k = poll(p, (nfds_t)n, open_round ? RESEND_MS : 200);
		if (k > 0 && (p[0].revents & POLLIN)) {
			struct dc_2pc_msg msg;
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			ssize_t got;
			while ((got = recvfrom(sock, &msg, sizeof(msg),
					MSG_DONTWAIT, (struct sockaddr *)&from,
					&fl)) >= 0) {
				if (got == (ssize_t)sizeof(msg) &&
				    msg.magic == DC_2PC_MAGIC &&
				    msg.version == DC_2PC_VERSION &&
				    msg.checksum == rio_checksum(&msg, 56,
							    DC_2PC_SEED))
					on_msg(&msg, &from);
				fl = sizeof(from);
			}
		}
		if (k > 0 && (p[1].revents & POLLIN)) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) > 0)
				;
			int st;
			pid_t w;
			while ((w = waitpid(-1, &st, WNOHANG)) > 0) {
				struct mem *m = find(w);
				/* A root killed after it said EXIT (a kill
				 * aimed at the tree, landing as it leaves)
				 * ended as it said: its status is the one it
				 * told, not the signal's. */
				if (w == 2 && m && m->state == M_EXITING &&
				    WIFSIGNALED(st))
					root_status = m->status;
				else if (w == 2)
					root_status = WIFEXITED(st) ?
						WEXITSTATUS(st) :
						128 + WTERMSIG(st);
				if (m && m->state != M_EXITING &&
				    m->state != M_GONE && m->state != M_ZOMBIE)
					fail_tree("a member died", w);
				if (m && m->pidfd >= 0)
					ended(m);
				else if (m)
					m->state = M_GONE;
			}
		}
		for (int i = 2; k > 0 && i < n; i++)
			if (p[i].revents & (POLLIN | POLLHUP))
				if (pm[i]->pidfd >= 0)
					ended(pm[i]);
		if (open_round && now_ms() - opened_ms > VOTE_MS)
			fail_tree("a member did not vote in time", 0);
		if (open_round)
			prepare(false);
		if (!open_round && all_gone())
			return finish(report, root_status);
	}
}

int
dc_tree_launch(const char *dir, char **argv, bool verb)
{
	tdir = dir;
	verbose = verb;
	const char *mx = getenv("DC_TREE_MAX");
	if (mx && atoi(mx) >= 1 && atoi(mx) <= DC_TREE_MAX)
		max_members = atoi(mx);
	if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
		/* the default directory's parent, /dev/shm/dc-UID */
		char up[4096];
		snprintf(up, sizeof(up), "%s", dir);
		char *s = strrchr(up, '/');
		if (s)
			*s = '\0';
		mkdir(up, 0700);
		if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
			fprintf(stderr, "dc-run: %s: %s\n", dir,
				strerror(errno));
			return 70;
		}
	}
	uint64_t last_committed = UINT64_MAX;
	int idle = 0;
	for (;;) {
		int pfd[2];
		if (pipe2(pfd, O_CLOEXEC) != 0)
			return 70;
		/* init in a new pid namespace (pid 1) and mount namespace
		 * (its own /proc), a fresh pair at every start */
		struct clone_args ca = { .flags = CLONE_NEWPID | CLONE_NEWNS,
			.exit_signal = SIGCHLD };
		pid_t p = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
		if (p < 0) {
			fprintf(stderr, "dc-run: --tree: cannot make the "
				"tree's pid namespace: %s (needs "
				"CAP_SYS_ADMIN)\n", strerror(errno));
			return 70;
		}
		if (p == 0) {
			close(pfd[0]);
			_exit(init_main(argv, pfd[1]));
		}
		close(pfd[1]);
		char b[16] = "";
		ssize_t got = read(pfd[0], b, sizeof(b) - 1);
		close(pfd[0]);
		int st = 0;
		waitpid(p, &st, 0);
		if (got > 1 && b[0] == 'D') {
			b[got] = '\0';
			return atoi(b + 1);
		}
		if (WIFEXITED(st) && WEXITSTATUS(st) == 70)
			return 70;
		struct dc_tree_rec now = { 0 };
		rec_read(dir, &now);
		idle = now.committed == last_committed ? idle + 1 : 0;
		last_committed = now.committed;
		if (idle >= MAX_IDLE_RESTARTS) {
			fprintf(stderr, "dc-run: --tree: %d recoveries in a row "
				"without a committed round; giving up (the "
				"checkpoint is kept)\n", idle);
			return 70;
		}
		say("the tree ended (%s %d); recovering",
			WIFEXITED(st) ? "status" : "signal",
			WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
	}
}
