/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kstate.c -- kernel state recorded from system calls, re-established at
 *             recovery (thesis 5.2.2)
 *
 * Recorded in dc__st (rolled back with memory): the descriptor table
 * (descriptors -> shared descriptions with path, flags, kind, offset at
 * the last checkpoint, socket addresses), the current directory, umask,
 * interval timers, and the delayed deletions.  Signal handlers are
 * recorded by sud.c.
 *
 * Invariants:
 *  1. Every descriptor the program holds is in the table, or was refused
 *     (no untracked descriptor can exist: the calls that create them all
 *     pass through here).
 *  2. dup'ed descriptors share one description, reopened once at recovery
 *     and dup'ed to each number, so they share an offset again.
 *  3. Descriptors the process inherited (standard input/output/error, or
 *     anything its parent passed) are reused as the new run inherits
 *     them; a regular file among them gets its offset back.  Each is
 *     taken from the number it came at before any number is given its
 *     checkpointed description (a shell that redirected its standard
 *     output to a file and saved the original at 10 gets both back);
 *     a member of a process tree made again by its parent takes them
 *     from the tree's init instead (tree.c).
 *  4. An unlink or a rename over a file only renames the victim to a
 *     hidden name (logged as "rename back"); the hidden file is removed
 *     after a checkpoint that no longer has it open.  A crash between
 *     the commit and the removals rolls the list back with the process:
 *     the next commit removes them again (a removed file stays removed).
 *  5. The table of delayed deletions never fails a call while a
 *     checkpoint can empty it: a full table takes a checkpoint first
 *     (pend_room).
 *  6. The process keeps the id it had in its first run: getpid and gettid
 *     answer it, and kill, tkill and tgkill aimed at it reach this
 *     incarnation (each thread its own id: thread.c invariant 3).  A recovered run sees no new id, so what a program
 *     derives from it re-executes as it ran (SQLite resets its random
 *     generator when its process id changes, taking it for a fork: under
 *     the -LOG protocols the re-execution would then read /dev/urandom
 *     where the logged run read its input).
 *  7. The settings of each terminal the program holds (termios: raw
 *     mode, echo ...) and its window size are recorded at each
 *     checkpoint; recovery puts the settings back and has a full-screen
 *     program repaint: a SIGWINCH, and the first window size the program
 *     asks for after it is one row short, followed by a second SIGWINCH
 *     (a program that redraws only when the size changed sees two
 *     changes and ends at the real size; the terminal is never resized).
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <linux/kcmp.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>

#include "dc_int.h"

int
dc__desc_of(int fd)
{
	if (fd < 0 || fd >= DC__MAX_FD || dc__st.fd[fd].desc == 0)
		return -1;
	return dc__st.fd[fd].desc - 1;
}

/* The kernel is about to write into libdc's tables: they must not be cold
 * (track.c invariant 2: it would fail with EFAULT). */
static bool
hot(void *p, size_t n)
{
	dc__track_warm_range((uint64_t)(uintptr_t)p, (uint64_t)(uintptr_t)p + n);
	return true;
}

static int
kind_of(const struct stat *st, int fd)
{
	if (S_ISREG(st->st_mode))
		return DC__K_FILE;
	if (S_ISDIR(st->st_mode))
		return DC__K_DIR;
	if (S_ISFIFO(st->st_mode))
		return DC__K_PIPE;
	if (S_ISSOCK(st->st_mode))
		return DC__K_SOCK;
	if (S_ISCHR(st->st_mode))
		return isatty(fd) ? DC__K_TTY : DC__K_CHR;
	return DC__K_OTHER;
}

static int
new_desc(void)
{
	for (int i = 0; i < DC__MAX_DESC; i++)
		if (dc__st.desc[i].refs == 0) {
			memset(&dc__st.desc[i], 0, sizeof(dc__st.desc[i]));
			return i;
		}
	return -1;
}

static void
drop_fd(int fd)
{
	int d = dc__desc_of(fd);
	if (d < 0)
		return;
	dc__st.fd[fd].desc = 0;
	dc__st.desc[d].refs--;
	/* its epoll registrations, a TCP connection's close (keeper.c) */
	dc__kp_dropped(fd, d, dc__st.desc[d].refs == 0);
}

static void
set_fd(int fd, int d, bool cloexec)
{
	drop_fd(fd);
	dc__st.fd[fd].desc = (int16_t)(d + 1);
	dc__st.fd[fd].cloexec = cloexec;
	dc__st.desc[d].refs++;
}

static bool
own_fd(int fd)
{
	const struct dc__vols *v = &dc__vol;
	return fd >= DC__OWN_FD_BASE &&
		(fd == v->shadow_fd || fd == v->redo_fd || fd == v->ndlog_fd ||
			fd == v->fundo_fd || fd == v->uffd ||
			fd == v->pagemap_fd || fd == v->dirfd ||
			fd == v->events_fd || fd == v->tp_fd);
}

_Static_assert(DC__MAX_FD == 2048 && DC__MAX_DESC == 1280,
	"track_new's and do_dup's refusals name these limits");

/* Describe a descriptor that just appeared. */
static int
track_new(int fd, const char *path, int flags)
{
	struct stat st;
	if (fd >= DC__MAX_FD) {
		dc__refuse_call("a descriptor numbered 2048 or above",
			"libdc records descriptors 0-2047", -EMFILE);
		dc__sys6(SYS_close, fd, 0, 0, 0, 0, 0);
		return -EMFILE;
	}
	int d = new_desc();
	if (d < 0) {
		dc__refuse_call("a 1281st open file", "libdc records 1280 "
			"open file descriptions", -EMFILE);
		dc__sys6(SYS_close, fd, 0, 0, 0, 0, 0);
		return -EMFILE;
	}
	struct dc__desc *x = &dc__st.desc[d];
	if (fstat(fd, &st) == 0) {
		x->kind = kind_of(&st, fd);
		x->dev = st.st_dev;
		x->ino = st.st_ino;
	}
	x->flags = flags & ~(O_CREAT | O_TRUNC | O_EXCL | O_CLOEXEC);
	snprintf(x->path, sizeof(x->path), "%s", path ? path : "");
	set_fd(fd, d, (flags & O_CLOEXEC) != 0);
	return fd;
}

/* A descriptor made outside this file (a tree's pipe, tree.c). */
int
dc__k_track_new(int fd, const char *path, int flags)
{
	return track_new(fd, path, flags);
}

static void
abs_path(char *out, size_t n, int dirfd, const char *p)
{
	if (p[0] == '/') {
		snprintf(out, n, "%s", p);
		return;
	}
	const char *base = dc__st.cwd;
	int d = dc__desc_of(dirfd);
	if (dirfd != AT_FDCWD && d >= 0)
		base = dc__st.desc[d].path;
	snprintf(out, n, "%s/%s", base, p);
}

void
dc__k_init(void)
{
	unsigned m = (unsigned)dc__sys6(SYS_umask, 0, 0, 0, 0, 0, 0);
	dc__sys6(SYS_umask, m, 0, 0, 0, 0, 0);
	dc__st.umask = m;
	dc__st.vpid = (long)dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	if (getcwd(dc__st.cwd, sizeof(dc__st.cwd)) == NULL)
		dc__st.cwd[0] = '\0';
	for (int fd = 0; fd < DC__MAX_FD; fd++) {
		int fl = (int)dc__sys6(SYS_fcntl, fd, F_GETFL, 0, 0, 0, 0);
		if (fl < 0)
			continue;
		int cloexec = (int)dc__sys6(SYS_fcntl, fd, F_GETFD, 0, 0, 0,
			0);
		/* share a description with an earlier inherited fd? */
		int same = -1;
		for (int o = 0; o < fd && same < 0; o++)
			if (dc__st.fd[o].desc &&
			    dc__sys6(SYS_kcmp, getpid(), getpid(), KCMP_FILE,
				    o, fd, 0) == 0)
				same = dc__st.fd[o].desc - 1;
		if (same >= 0) {
			set_fd(fd, same, cloexec > 0);
			continue;
		}
		char link[64], path[DC__PATH];
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		ssize_t n = readlink(link, path, sizeof(path) - 1);
		path[n > 0 ? n : 0] = '\0';
		if (track_new(fd, path, fl | (cloexec > 0 ? O_CLOEXEC : 0)) >=
		    0) {
			dc__st.desc[dc__st.fd[fd].desc - 1].inherited = true;
			dc__st.desc[dc__st.fd[fd].desc - 1].home_fd = fd;
		}
	}
}

/* Invariant 7: the settings and window size of every terminal the
 * program holds, stored only when changed (the table's page stays clean
 * while nothing changes). */
static void
tty_record(void)
{
	bool done[DC__MAX_DESC] = { false };
	for (int fd = 0; fd < DC__MAX_FD; fd++) {
		int d = dc__desc_of(fd);
		if (d < 0 || done[d] || dc__st.desc[d].kind != DC__K_TTY)
			continue;
		done[d] = true;
		struct dc__desc *x = &dc__st.desc[d];
		struct termios t;
		struct winsize w;
		memset(&t, 0, sizeof(t)); /* the kernel fills a shorter one */
		if (dc__sys6(SYS_ioctl, fd, TCGETS, (long)&t, 0, 0, 0) != 0)
			continue;
		if (dc__sys6(SYS_ioctl, fd, TIOCGWINSZ, (long)&w, 0, 0, 0) != 0)
			memset(&w, 0, sizeof(w));
		if (!x->has_tio || memcmp(&t, &x->tio, sizeof(t)) ||
		    memcmp(&w, &x->ws, sizeof(w))) {
			x->has_tio = true;
			x->tio = t;
			x->ws = w;
		}
	}
}

/* Offsets at the checkpoint: lseek for each open regular file or
 * directory that a system call may have moved since the last checkpoint
 * (dc__vol.fd_touched, set by the dispatcher); stored only when changed,
 * so an idle interval leaves the table's pages clean. */
void
dc__k_before_commit(void)
{
	for (int fd = 0; fd < DC__MAX_FD; fd++) {
		if (!dc__vol.fd_touched[fd])
			continue;
		dc__vol.fd_touched[fd] = false;
		int d = dc__desc_of(fd);
		if (d < 0)
			continue;
		struct dc__desc *x = &dc__st.desc[d];
		if (x->kind != DC__K_FILE && x->kind != DC__K_DIR)
			continue;
		int64_t off = dc__sys6(SYS_lseek, fd, 0, SEEK_CUR, 0, 0, 0);
		if (off != x->offset)
			x->offset = off;
	}
	tty_record();
}

static bool
path_open(const char *p)
{
	for (int i = 0; i < DC__MAX_DESC; i++)
		if (dc__st.desc[i].refs > 0 && !strcmp(dc__st.desc[i].path, p))
			return true;
	return false;
}

/* Delayed deletions whose files are closed: the checkpoint just committed
 * no longer needs them. */
void
dc__k_after_commit(void)
{
	unsigned k = 0;
	for (unsigned i = 0; i < dc__st.npend; i++) {
		if (dc__vol.active && path_open(dc__st.pend[i])) {
			if (k != i)
				memcpy(dc__st.pend[k], dc__st.pend[i],
					DC__PATH);
			k++;
			continue;
		}
		dc__rstep();
		unlink(dc__st.pend[i]);
	}
	if (dc__st.npend != k)
		dc__st.npend = k;
}

/*
 * A clean exit removes the checkpoint, then every delayed deletion: the
 * checkpoint first, since it may hold a deleted file open (a recovery
 * would reopen it by its hidden name).  The names go to a list in the
 * checkpoint directory before, so a crash between the two is finished by
 * the next run of the program (dc_init calls dc__k_exit_deletes too):
 * no hidden file outlives the run.
 */
#define EXIT_LIST "deleting"

int
dc__k_exit_list(const char *dir)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/" EXIT_LIST, dir);
	if (dc__st.npend == 0)
		return 0;
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return dc__err(-errno, "open %s: %s", p, strerror(errno));
	int rc = 0;
	for (unsigned i = 0; i < dc__st.npend && rc == 0; i++)
		if (write(fd, dc__st.pend[i], strlen(dc__st.pend[i]) + 1) !=
		    (ssize_t)strlen(dc__st.pend[i]) + 1)
			rc = dc__err(-EIO, "write %s", p);
	/* The list must be durable before the checkpoint that also names
	 * these files is removed. */
	if (rc == 0)
		rc = dc__sync_fd(fd);
	close(fd);
	return rc;
}

void
dc__k_exit_deletes(const char *dir)
{
	char p[PATH_MAX];
	snprintf(p, sizeof(p), "%s/" EXIT_LIST, dir);
	int fd = open(p, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char *b = dc__vol.logtmp;
	ssize_t n = read(fd, b, sizeof(dc__vol.logtmp) - 1);
	close(fd);
	for (ssize_t o = 0; n > 0 && o < n; o += (ssize_t)strlen(b + o) + 1) {
		b[n] = '\0';
		dc__rstep();
		unlink(b + o);
	}
	unlink(p);
}

static void
rename_paths(const char *from, const char *to)
{
	for (int i = 0; i < DC__MAX_DESC; i++)
		if (dc__st.desc[i].refs > 0 &&
		    !strcmp(dc__st.desc[i].path, from))
			snprintf(dc__st.desc[i].path, DC__PATH, "%s", to);
}

/*
 * Room for one more delayed deletion (invariant 5).  A full table is
 * emptied by a checkpoint: the deletions whose files are closed are done
 * after it commits.  A checkpoint can be taken here, under every
 * protocol: committing more often than the protocol asks is always
 * allowed, and nothing of this call has happened yet.  Fails only when
 * every pending file is still open (or the checkpoint failed).
 */
static long
pend_room(void)
{
	if (dc__st.npend < DC__MAX_PEND)
		return 0;
#ifndef DC_BROKEN_PEND_NO_COMMIT
	/* resumed here by recovery (1): the deletions that followed this
	 * commit are not in its image; done again (a removed file stays
	 * removed) */
	int rc = dc__commit();
	if (rc < 0)
		return -EIO;
	if (rc == 1)
		dc__k_after_commit();
#endif
	if (dc__st.npend < DC__MAX_PEND)
		return 0;
	dc__refuse_call("an unlink or a rename over a file", "32 deleted "
		"files are still open; each is kept under a hidden name until "
		"it is closed", -ENOSPC);
	return -ENOSPC;
}

/* Move `path` out of the way under a hidden name (invariant 4). */
static long
hide(const char *path)
{
	long room = pend_room();
	if (room)
		return room;
	char tmp[DC__PATH], dir[DC__PATH], hidden[DC__PATH];
	snprintf(tmp, sizeof(tmp), "%s", path);
	snprintf(dir, sizeof(dir), "%s", dirname(tmp));
	snprintf(tmp, sizeof(tmp), "%s", path);
	/* unique: interval, incarnation (a rerun of the interval logs from
	 * seq 0 again), entry */
	int n = snprintf(hidden, sizeof(hidden), "%s/.dc-del-%lu-%lu-%lu-%s",
		dir, (unsigned long)dc__vol.committed + 1,
		(unsigned long)dc__vol.incarnation,
		(unsigned long)dc__vol.fu_seq, basename(tmp));
	if (n >= (int)sizeof(hidden))
		return -ENAMETOOLONG;
	int rc = dc__fu_log(DC_FU_RENAME, 0, path, hidden, NULL, 0);
	if (rc)
		return -EIO;
	if (rename(path, hidden) != 0)
		return -errno;
	rename_paths(path, hidden);
	snprintf(dc__st.pend[dc__st.npend++], DC__PATH, "%s", hidden);
	return 0;
}

static long
log_truncate(const char *path, int fd, int64_t len)
{
	struct stat st;
	if ((fd >= 0 ? fstat(fd, &st) : stat(path, &st)) != 0 ||
	    !S_ISREG(st.st_mode))
		return 0;
	int rfd = open(path, O_RDONLY | O_CLOEXEC);
	int rc = dc__fu_log(DC_FU_SIZE, st.st_size, path, NULL, NULL, 0);
	for (int64_t o = len; rc == 0 && rfd >= 0 && o < st.st_size;) {
		ssize_t k = pread(rfd, dc__vol.buf, sizeof(dc__vol.buf), o);
		if (k <= 0)
			break;
		rc = dc__fu_log(DC_FU_BYTES, o, path, NULL, dc__vol.buf,
			(uint64_t)k);
		o += k;
	}
	if (rfd >= 0)
		close(rfd);
	return rc ? -EIO : 0;
}

static long
do_open(int dirfd, const char *p, int flags, int mode)
{
	char path[DC__PATH];
	if ((flags & O_TMPFILE) == O_TMPFILE)
		return -EOPNOTSUPP; /* glibc's tmpfile() falls back */
	abs_path(path, sizeof(path), dirfd, p);
	struct stat st;
	bool existed = stat(path, &st) == 0;
	bool wr = (flags & O_ACCMODE) != O_RDONLY;
	if (existed && S_ISREG(st.st_mode) && wr && (flags & O_TRUNC) &&
	    log_truncate(path, -1, 0) != 0)
		return -EIO;
	if (!existed && (flags & O_CREAT) &&
	    dc__fu_log(DC_FU_CREATE, 0, path, NULL, NULL, 0) != 0)
		return -EIO;
	long fd = dc__sys6(SYS_openat, dirfd, (long)p, flags, mode, 0, 0);
	if (fd < 0)
		return fd;
	return track_new((int)fd, path, flags);
}

static long
do_dup(int old, long nfd, int flags)
{
	int d = dc__desc_of(old);
	if (nfd < 0)
		return nfd;
	if (nfd >= DC__MAX_FD) {
		dc__sys6(SYS_close, nfd, 0, 0, 0, 0, 0);
		dc__refuse_call("a descriptor numbered 2048 or above",
			"libdc records descriptors 0-2047", -EMFILE);
		return -EMFILE;
	}
	if (d < 0)
		return nfd;
	set_fd((int)nfd, d, (flags & O_CLOEXEC) != 0);
	return nfd;
}

/* A connection (a stream or sequenced-packet socket) is a conversation
 * with another process: recovery could reconnect, but not bring the peer
 * back to the point of the checkpoint.  A Unix-domain stream socket is
 * most often glibc asking nscd (getpwuid, getaddrinfo ...), which falls
 * back to reading the files itself when the socket fails: that refusal
 * is said with --verbose only, not on the program's screen. */
static void
refuse_socket(int domain, int type)
{
	const char *what = "a socket that is not a datagram socket";
	if (domain == AF_UNIX && type == SOCK_STREAM) {
		if (dc__st.verbose)
			dc__refuse_call("a Unix-domain stream socket (glibc's "
				"nscd lookup, which then reads the files "
				"itself)", "a connection cannot be brought "
				"back to its state at a checkpoint", -EPERM);
		return;
	} else if ((domain == AF_INET || domain == AF_INET6) &&
		 type == SOCK_STREAM)
		what = "a TCP socket";
	else if (type == SOCK_SEQPACKET)
		what = "a sequenced-packet socket";
	dc__refuse_call(what, "a connection cannot be brought back to its "
		"state at a checkpoint", -EPERM);
}

/* The program's own process id, as it knew it, to the real one of this
 * incarnation (kill, tkill, tgkill; a process group -pid too). */
static long
real_pid(long pid)
{
	long me = dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	if (dc__st.vpid == 0 || dc__st.vpid == me)
		return pid;
	if (pid == dc__st.vpid)
		return me;
	if (pid == -dc__st.vpid)
		return -me;
	return pid;
}

/* A thread id the program knows, to this incarnation's (thread.c
 * invariant 3). */
static long
real_tid(long tid)
{
	long r = dc__thr_real_tid(tid);
	return r >= 0 ? r : real_pid(tid);
}

/*
 * Invariant 7, the repaint a recovery asks for.  Some full-screen programs
 * (nvi) answer a SIGWINCH by asking the window size (TIOCGWINSZ)
 * and redraw only if it differs from the one they drew for; after a
 * recovery it does not.  So the first size asked of a terminal after the
 * recovery's SIGWINCH is answered one row short (one row more for a
 * one-row terminal) and a second SIGWINCH is made pending: the program
 * redraws for the short size, asks again when the signal arrives, gets the
 * real size and redraws the whole screen for it.  Only the answer is
 * changed, never the terminal: nothing else on it sees a resize, and a
 * program that never asks is left with nothing to undo.  A terminal that
 * reports no size (0 rows or columns) is answered as it is.
 */
static long
winch_bounce(long *a)
{
	struct winsize *w = (struct winsize *)a[2];
	hot(w, sizeof(*w)); /* the kernel writes it, then libdc */
	long r = dc__sys6(SYS_ioctl, a[0], a[1], a[2], 0, 0, 0);
	int d = dc__desc_of((int)a[0]);
	if (r != 0 || d < 0 || dc__st.desc[d].kind != DC__K_TTY)
		return r;
	dc__vol.winch_bounce = false;
	if (w->ws_row == 0 || w->ws_col == 0)
		return r;
	w->ws_row = w->ws_row > 1 ? w->ws_row - 1 : w->ws_row + 1;
	/* pending until the program runs with its own mask again: after
	 * this answer is in its memory */
	dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0), SIGWINCH,
		0, 0, 0, 0);
	return r;
}

long
dc__k_syscall(long nr, long *a, void *ucv, bool *handled)
{
	(void)ucv;
	long r;
	char p1[DC__PATH], p2[DC__PATH];
	struct stat st;
	*handled = true;
	switch (nr) {
	case SYS_open:
		return do_open(AT_FDCWD, (const char *)a[0], (int)a[1],
			(int)a[2]);
	case SYS_creat:
		return do_open(AT_FDCWD, (const char *)a[0],
			O_CREAT | O_WRONLY | O_TRUNC, (int)a[1]);
	case SYS_openat:
		return do_open((int)a[0], (const char *)a[1], (int)a[2],
			(int)a[3]);
	case SYS_close:
		if (own_fd((int)a[0]))
			return -EBADF;
		r = dc__sys6(nr, a[0], 0, 0, 0, 0, 0);
		if (r == 0)
			drop_fd((int)a[0]);
		return r;
	case SYS_dup:
		return do_dup((int)a[0], dc__sys6(nr, a[0], 0, 0, 0, 0, 0), 0);
	case SYS_dup2:
	case SYS_dup3:
		if (own_fd((int)a[1]))
			return -EBADF;
		r = dc__sys6(nr, a[0], a[1], a[2], 0, 0, 0);
		if (r >= 0 && a[0] != a[1])
			return do_dup((int)a[0], r,
				nr == SYS_dup3 ? (int)a[2] : 0);
		return r;
	case SYS_fcntl:
		r = dc__sys6(nr, a[0], a[1], a[2], 0, 0, 0);
		if (r < 0)
			return r;
		if (a[1] == F_DUPFD || a[1] == F_DUPFD_CLOEXEC)
			return do_dup((int)a[0], r,
				a[1] == F_DUPFD_CLOEXEC ? O_CLOEXEC : 0);
		if (a[1] == F_SETFD && dc__desc_of((int)a[0]) >= 0)
			dc__st.fd[a[0]].cloexec = (a[2] & FD_CLOEXEC) != 0;
		if (a[1] == F_SETFL && dc__desc_of((int)a[0]) >= 0) {
			struct dc__desc *x =
				&dc__st.desc[dc__desc_of((int)a[0])];
			x->flags = (x->flags & O_ACCMODE) |
				((int)a[2] & ~O_ACCMODE);
		}
		return r;
	case SYS_chdir:
	case SYS_fchdir:
		r = dc__sys6(nr, a[0], 0, 0, 0, 0, 0);
		if (r == 0 && hot(dc__st.cwd, sizeof(dc__st.cwd)) &&
		    getcwd(dc__st.cwd, sizeof(dc__st.cwd)) == NULL)
			dc__st.cwd[0] = '\0';
		return r;
	case SYS_umask:
		dc__st.umask = (unsigned)a[0] & 0777;
		return dc__sys6(nr, a[0], 0, 0, 0, 0, 0);
	case SYS_unlink:
	case SYS_unlinkat: {
		int dfd = nr == SYS_unlink ? AT_FDCWD : (int)a[0];
		const char *p = (const char *)(nr == SYS_unlink ? a[0] : a[1]);
		if (nr == SYS_unlinkat && (a[2] & AT_REMOVEDIR))
			return dc__sys6(nr, a[0], a[1], a[2], 0, 0, 0);
		abs_path(p1, sizeof(p1), dfd, p);
		if (lstat(p1, &st) != 0)
			return -errno;
		if (S_ISDIR(st.st_mode))
			return -EISDIR;
		return hide(p1);
	}
	case SYS_rename:
	case SYS_renameat:
	case SYS_renameat2: {
		bool two = nr != SYS_rename;
		if (nr == SYS_renameat2 && (a[4] & ~1l /* NOREPLACE */))
			{
			dc__refuse_call("renameat2 with RENAME_EXCHANGE or "
				"RENAME_WHITEOUT", "its undo is not logged",
				-EPERM);
			return -EPERM;
		}
		abs_path(p1, sizeof(p1), two ? (int)a[0] : AT_FDCWD,
			(const char *)(two ? a[1] : a[0]));
		abs_path(p2, sizeof(p2), two ? (int)a[2] : AT_FDCWD,
			(const char *)(two ? a[3] : a[1]));
		if (lstat(p1, &st) != 0)
			return -errno;
		if (lstat(p2, &st) == 0 && !S_ISDIR(st.st_mode) &&
		    !(nr == SYS_renameat2 && (a[4] & 1))) {
			r = hide(p2);
			if (r)
				return r;
		}
		if (dc__fu_log(DC_FU_RENAME, 0, p1, p2, NULL, 0) != 0)
			return -EIO;
		r = rename(p1, p2) == 0 ? 0 : -errno;
		if (r == 0)
			rename_paths(p1, p2);
		return r;
	}
	case SYS_ftruncate: {
		int d = dc__desc_of((int)a[0]);
		if (d >= 0 && dc__st.desc[d].kind == DC__K_FILE &&
		    log_truncate(dc__st.desc[d].path, (int)a[0], a[1]) != 0)
			return -EIO;
		return dc__sys6(nr, a[0], a[1], 0, 0, 0, 0);
	}
	case SYS_truncate:
		abs_path(p1, sizeof(p1), AT_FDCWD, (const char *)a[0]);
		if (log_truncate(p1, -1, a[1]) != 0)
			return -EIO;
		return dc__sys6(nr, a[0], a[1], 0, 0, 0, 0);
	case SYS_setitimer:
		r = dc__sys6(nr, a[0], a[1], a[2], 0, 0, 0);
		if (r == 0 && a[0] >= 0 && a[0] < 3 && a[1]) {
			const struct itimerval *v = (const void *)a[1];
			struct dc__itimer *t = &dc__st.itimer[a[0]];
			t->armed = v->it_value.tv_sec || v->it_value.tv_usec;
			t->interval = v->it_interval;
			t->expires_ns = rio_now_ns(CLOCK_MONOTONIC) +
				(uint64_t)v->it_value.tv_sec * 1000000000ull +
				(uint64_t)v->it_value.tv_usec * 1000ull;
		}
		return r;
	case SYS_alarm: {
		r = dc__sys6(nr, a[0], 0, 0, 0, 0, 0);
		struct dc__itimer *t = &dc__st.itimer[ITIMER_REAL];
		t->armed = a[0] != 0;
		t->interval = (struct timeval){ 0, 0 };
		t->expires_ns = rio_now_ns(CLOCK_MONOTONIC) +
			(uint64_t)a[0] * 1000000000ull;
		return r;
	}
	case SYS_socket: {
		int type = (int)a[1] & 0xf;
		if (type != SOCK_DGRAM) {
			refuse_socket((int)a[0], type);
			return -EPERM;
		}
		r = dc__sys6(nr, a[0], a[1], a[2], 0, 0, 0);
		if (r < 0)
			return r;
		r = track_new((int)r, "", ((int)a[1] & SOCK_CLOEXEC) ?
				O_CLOEXEC : 0);
		if (r >= 0) {
			struct dc__desc *x = &dc__st.desc[dc__desc_of((int)r)];
			x->sock_domain = (int)a[0];
			x->sock_type = (int)a[1] & ~(SOCK_CLOEXEC);
			x->sock_proto = (int)a[2];
		}
		return r;
	}
	case SYS_bind: {
		r = dc__sys6(nr, a[0], a[1], a[2], 0, 0, 0);
		int d = dc__desc_of((int)a[0]);
		if (r == 0 && d >= 0) {
			struct dc__desc *x = &dc__st.desc[d];
			x->bind_len = sizeof(x->bind_addr);
			hot(&x->bind_addr, sizeof(x->bind_addr));
			getsockname((int)a[0], (struct sockaddr *)&x->bind_addr,
				&x->bind_len);
		}
		if (r == 0)
			dc__nd_event(); /* the kernel may choose the port */
		return r;
	}
	case SYS_connect: {
		r = dc__sys6(nr, a[0], a[1], a[2], 0, 0, 0);
		int d = dc__desc_of((int)a[0]);
		if (r == 0 && d >= 0 && (size_t)a[2] <=
				sizeof(struct sockaddr_storage)) {
			struct dc__desc *x = &dc__st.desc[d];
			memcpy(&x->peer_addr, (const void *)a[1], (size_t)a[2]);
			x->peer_len = (socklen_t)a[2];
		}
		return r;
	}
	case SYS_ioctl:
		if (a[1] == TIOCGWINSZ && dc__vol.winch_bounce)
			return winch_bounce(a);
		*handled = false;
		return 0;
	case SYS_getpid:
		/* invariant 6 */
		return dc__st.vpid;
	case SYS_gettid: /* a thread's: thread.c invariant 3 */
		return dc__thr_gettid();
	case SYS_kill:
		return dc__sys6(nr, real_pid(a[0]), a[1], a[2], 0, 0, 0);
	case SYS_tkill:
		return dc__sys6(nr, real_tid(a[0]), a[1], a[2], 0, 0, 0);
	case SYS_tgkill:
		return dc__sys6(nr, real_pid(a[0]), real_tid(a[1]), a[2], 0, 0,
			0);
	case SYS_listen:
	case SYS_accept:
	case SYS_accept4:
		dc__refuse_call("listen or accept", "a listening socket's "
			"connections cannot be re-established by recovery",
			-EPERM);
		return -EPERM;
	default:
		*handled = false;
		return 0;
	}
}

/* ---- recovery ---- */

static int
reopen(struct dc__desc *x)
{
	int fd;
	if (x->tcp) /* through dc-keeper (keeper.c) */
		return dc__kp_reopen(x);
	if (x->kind == DC__K_EPOLL) { /* registrations: dc__ep_restore */
		fd = epoll_create1(EPOLL_CLOEXEC);
		return fd >= 0 ? fd : dc__err(-errno, "epoll_create1: %s",
			strerror(errno));
	}
	if (x->kind == DC__K_SOCK) {
		fd = socket(x->sock_domain, x->sock_type, x->sock_proto);
		if (fd < 0)
			return dc__err(-errno, "recreate socket: %s",
				strerror(errno));
		if (x->bind_len &&
		    bind(fd, (struct sockaddr *)&x->bind_addr, x->bind_len))
			return dc__err(-errno, "rebind socket: %s",
				strerror(errno));
		if (x->peer_len &&
		    connect(fd, (struct sockaddr *)&x->peer_addr, x->peer_len))
			return dc__err(-errno, "reconnect socket: %s",
				strerror(errno));
		return fd;
	}
	fd = open(x->path, x->flags | O_CLOEXEC);
	if (fd < 0)
		return dc__err(-errno, "reopen %s: %s", x->path,
			strerror(errno));
	struct stat st;
	if (fstat(fd, &st) == 0 && x->ino && st.st_ino != x->ino) {
		close(fd);
		return dc__err(DC_EMISMATCH, "%s is another file now (inode "
			"%lu, was %lu)", x->path, (unsigned long)st.st_ino,
			(unsigned long)x->ino);
	}
	if (x->kind == DC__K_FILE || x->kind == DC__K_DIR)
		lseek(fd, x->offset, SEEK_SET);
	return fd;
}

/*
 * Invariant 7: each terminal gets back the settings it had at the
 * checkpoint (raw mode, echo: what the program set and a shell may have
 * undone after the crash), at once (TCSANOW: nothing is in flight).  The
 * window size is the terminal's own -- it may have been resized meanwhile
 * -- and is not forced; a full-screen program is told to repaint instead
 * (dc__k_repaint, winch_bounce).
 */
static void
tty_restore(void)
{
#ifndef DC_BROKEN_NO_TTY_RESTORE
	bool done[DC__MAX_DESC] = { false };
	for (int fd = 0; fd < DC__MAX_FD; fd++) {
		int d = dc__desc_of(fd);
		if (d < 0 || done[d] || !dc__st.desc[d].has_tio)
			continue;
		done[d] = true;
		dc__sys6(SYS_ioctl, fd, TCSETS, (long)&dc__st.desc[d].tio, 0, 0,
			0);
	}
#endif
}

/* After a recovery, a program that holds a terminal and handles SIGWINCH
 * gets one, pending until it runs with its own mask again, and the next
 * window size it asks for is one row short (winch_bounce): curses
 * programs and editors answer with a full redraw of the screen the crash
 * left behind.  Call with every signal blocked. */
void
dc__k_repaint(void)
{
#ifdef DC_BROKEN_NO_TTY_RESTORE
	return;
#endif
	uintptr_t h = dc__st.sig[SIGWINCH].handler;
	if (h == (uintptr_t)SIG_DFL || h == (uintptr_t)SIG_IGN)
		return;
	for (int d = 0; d < DC__MAX_DESC; d++)
		if (dc__st.desc[d].refs > 0 && dc__st.desc[d].has_tio) {
#ifndef DC_BROKEN_WINCH_SAME_SIZE /* broken build: the size unchanged */
			dc__vol.winch_bounce = true;
#endif
			dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0,
				0), SIGWINCH, 0, 0, 0, 0);
			return;
		}
}

int
dc__k_restore(int keep_fd)
{
	dc__sys6(SYS_umask, dc__st.umask, 0, 0, 0, 0, 0);
	if (dc__st.cwd[0] && chdir(dc__st.cwd) != 0)
		return dc__err(-errno, "chdir %s: %s", dc__st.cwd,
			strerror(errno));
	int opened[DC__MAX_DESC];
	for (int d = 0; d < DC__MAX_DESC; d++)
		opened[d] = -1;
	/* invariant 3: the inherited descriptions first, while every
	 * number still holds what the process came with */
	for (int d = 0; d < DC__MAX_DESC; d++) {
		struct dc__desc *x = &dc__st.desc[d];
		if (x->refs == 0 || !x->inherited ||
		    (dc__vol.tree_forked == 1 && !dc__vol.tree_respawned))
			continue;
		if (dc__vol.tree && dc__vol.tree_forked == 2) {
			/* its parent's descriptors, not the tree's input */
			int nfd = dc__tree_inherited_reopen(x);
			opened[d] = nfd >= 0 ? dc__own_fd(nfd) : -1;
			continue;
		}
		struct stat st;
		if (fstat(x->home_fd, &st) == 0 && st.st_ino == x->ino &&
		    st.st_dev == x->dev)
			opened[d] = (int)fcntl(x->home_fd, F_DUPFD_CLOEXEC,
				DC__OWN_FD_BASE);
	}
	/* close what the checkpoint did not have open */
	for (int fd = 0; fd < DC__MAX_FD; fd++)
		if (dc__st.fd[fd].desc == 0 && fd != keep_fd)
			dc__sys6(SYS_close, fd, 0, 0, 0, 0, 0);
	for (int fd = 0; fd < DC__MAX_FD; fd++) {
		int d = dc__desc_of(fd);
		if (d < 0)
			continue;
		struct dc__desc *x = &dc__st.desc[d];
		if (dc__vol.tree_forked == 1 && !dc__vol.tree_respawned) {
			/* a fork's child: the parent's descriptions, shared
			 * through the exec (tree.c T4) */
			dc__sys6(SYS_fcntl, fd, F_SETFD,
				dc__st.fd[fd].cloexec ? FD_CLOEXEC : 0, 0, 0, 0);
			continue;
		}
		if (x->inherited && opened[d] < 0) {
			/* not found where it came: the number as it is */
			if (x->kind == DC__K_FILE)
				lseek(fd, x->offset, SEEK_SET);
			continue;
		}
		if (x->inherited && x->kind == DC__K_FILE)
			lseek(opened[d], x->offset, SEEK_SET);
		if (opened[d] < 0) {
			dc__rstep();
			/* a tree's pipe: from init, filled (tree.c) */
			int nfd = dc__vol.tree && x->kind == DC__K_PIPE ?
				dc__tree_pipe_reopen(x, fd) : reopen(x);
			if (nfd < 0)
				return nfd;
			opened[d] = dc__own_fd(nfd);
		}
		if (dup3(opened[d], fd, dc__st.fd[fd].cloexec ? O_CLOEXEC : 0) <
		    0)
			return dc__err(-errno, "dup3 to %d: %s", fd,
				strerror(errno));
	}
	for (int d = 0; d < DC__MAX_DESC; d++)
		if (opened[d] >= 0)
			close(opened[d]);
	tty_restore();
	for (int s = 1; s <= 64; s++)
		if (dc__st.sig[s].handler != 0 || dc__st.sig[s].flags != 0)
			dc__install_handler(s);
	uint64_t now = rio_now_ns(CLOCK_MONOTONIC);
	for (int w = 0; w < 3; w++) {
		struct dc__itimer *t = &dc__st.itimer[w];
		if (!t->armed)
			continue;
		uint64_t left = t->expires_ns > now ? t->expires_ns - now : 1000;
		struct itimerval v = { t->interval,
			{ (time_t)(left / 1000000000ull),
				(suseconds_t)(left % 1000000000ull / 1000) } };
		if (v.it_value.tv_sec == 0 && v.it_value.tv_usec == 0)
			v.it_value.tv_usec = 1;
		setitimer(w, &v, NULL);
	}
	return 0;
}
