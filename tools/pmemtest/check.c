/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * check.c -- run the checker on every crash image, several at once
 *
 * Each of `jobs` slots owns a directory holding one file per pool, kept
 * open by the driver.  To check an image the driver forks; the child
 * (which sees the model as it is at that instant, copy-on-write) rewrites
 * the slot's files as dur plus the chosen lines, removes anything else the
 * previous checker left in the directory, and then either calls the
 * library checker (loaded once, before any fork) or execs the command:
 * directly when it is plain words starting with a path, else through
 * /bin/sh (starting a shell costs as much as a small checker).  A file
 * is rewritten with pwrite (no page faults): its non-zero
 * pages (model.c M5) are written over, its zero pages punched out, then
 * the chosen lines written: a mostly empty 4 MiB pool costs a few system
 * calls, not a 4 MiB copy and 1024 page faults.  Exit status 0 means consistent; any other status, a signal, or
 * running past the timeout means inconsistent.
 *
 * Invariants
 *   K1. A slot is used by one child at a time; the driver touches a slot's
 *       files only while no child owns it.
 *   K2. After a child exits, every slot file still mapped is the file in
 *       the directory (same inode): a checker that replaced or removed one
 *       makes the driver map the new one before the next image.
 *   K3. Every child is reaped; one that runs past the timeout is killed
 *       with its process group.
 *
 *   F1. A plain command (exec_simple) gets a fork server per slot: the
 *       command itself, started once with the slot's {image} and {dir}
 *       under the preload library, which stops it before main and forks
 *       it for every image (preload.c).  The child checking an image
 *       asks the slot's server, and exits as the checker did.
 *   F2. The checker forked by the server joins the asking child's
 *       process group: a timeout's kill reaches it (K3).
 *   F3. Answers carry the request's number; one for an earlier request
 *       (its asker killed by a timeout) is skipped.  A server that is gone
 *       makes the child exec the command itself.
 *
 * Slot state machine: FREE --submit (fork)--> BUSY --reap--> FREE.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "forkserver.h"
#include "pmemtest_int.h"
#include "rio_int.h"

#define OUTPUT_MAX 4096

struct slot_file {
	int fd;      /* -1: not open */
	dev_t dev;
	ino_t ino;
};

struct slot {
	pid_t pid;            /* 0: FREE */
	char *dir;
	int out_fd;
	int reads_fd;         /* the checker's reads (reads.c), or -1 */
	struct slot_file *f;  /* [pool id] */
	unsigned nf;
	uint64_t deadline;
	struct pmt_job *job;
	pid_t server;         /* fork server (F1), 0 if none */
	int to_server, from_server;
	uint64_t server_seq;
};

struct pmt_runner {
	struct pmt_check_opts o;
	struct slot *slots;
	unsigned nslots;
	pmt_fail_fn on_fail;
	void *arg;
	uint64_t seq;
	uint64_t checked;
	sigset_t chld;
};

char *
pmt_expand_cmd(const char *tmpl, const char *image, const char *dir)
{
	size_t cap = strlen(tmpl) + 1, n = 0;
	char *s = pmt_xmalloc(cap);

	for (const char *p = tmpl; *p;) {
		const char *ins = NULL;
		size_t skip = 1;
		if (strncmp(p, "{image}", 7) == 0) {
			ins = image;
			skip = 7;
		} else if (strncmp(p, "{dir}", 5) == 0) {
			ins = dir;
			skip = 5;
		}
		size_t add = ins ? strlen(ins) : 1;
		if (n + add + 1 > cap) {
			cap = (n + add + 1) * 2;
			s = pmt_xrealloc(s, cap);
		}
		if (ins)
			memcpy(s + n, ins, add);
		else
			s[n] = *p;
		n += add;
		p += skip;
	}
	s[n] = '\0';
	return s;
}

struct pmt_runner *
pmt_runner_new(const struct pmt_check_opts *o, pmt_fail_fn on_fail,
	void *arg)
{
	struct pmt_runner *r = pmt_xcalloc(1, sizeof(*r));

	r->o = *o;
	r->on_fail = on_fail;
	r->arg = arg;
	r->nslots = o->jobs ? o->jobs : 1;
	r->slots = pmt_xcalloc(r->nslots, sizeof(*r->slots));
	for (unsigned i = 0; i < r->nslots; i++) {
		struct slot *s = &r->slots[i];
		char *out = pmt_xasprintf("%s/out-%u", o->workdir, i);
		s->dir = pmt_xasprintf("%s/slot-%u", o->workdir, i);
		if (pmt_mkdir_p(s->dir) != 0)
			pmt_die("cannot create %s: %m", s->dir);
		s->out_fd = open(out, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
			0600);
		if (s->out_fd < 0)
			pmt_die("cannot create %s: %m", out);
		free(out);
		s->reads_fd = -1;
		if (o->reads) {
			out = pmt_xasprintf("%s/reads-%u", o->workdir, i);
			s->reads_fd = open(out, O_RDWR | O_CREAT | O_TRUNC |
				O_CLOEXEC, 0600);
			if (s->reads_fd < 0)
				pmt_die("cannot create %s: %m", out);
			free(out);
		}
	}
	/* Children are reaped with sigtimedwait (K3): SIGCHLD stays
	 * pending instead of being delivered. */
	sigemptyset(&r->chld);
	sigaddset(&r->chld, SIGCHLD);
	sigprocmask(SIG_BLOCK, &r->chld, NULL);
	return r;
}

static void
slot_close(struct slot *s, unsigned i)
{
	if (s->f[i].fd >= 0)
		close(s->f[i].fd);
	s->f[i].fd = -1;
}

/* Open dir/<name> of every present pool (creating it), K2. */
static void
slot_prepare(struct slot *s, struct pmt_model *m)
{
	if (s->nf < m->npools) {
		s->f = pmt_xrealloc(s->f, m->npools * sizeof(*s->f));
		for (unsigned i = s->nf; i < m->npools; i++)
			s->f[i].fd = -1;
		s->nf = m->npools;
	}
	for (unsigned i = 0; i < m->npools; i++) {
		struct pmt_pool *p = &m->pools[i];
		struct slot_file *f = &s->f[i];
		char *path;
		struct stat st;

		if (!p->present)
			continue;
		path = pmt_xasprintf("%s/%s", s->dir, p->name);
		if (f->fd >= 0 && stat(path, &st) == 0 &&
		    st.st_ino == f->ino && st.st_dev == f->dev) {
			free(path);
			continue;
		}
		slot_close(s, i);
		unlink(path);
		f->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
		if (f->fd < 0 || fstat(f->fd, &st) != 0)
			pmt_die("cannot create %s: %m", path);
		f->dev = st.st_dev;
		f->ino = st.st_ino;
		free(path);
	}
}

/* In the child: write all of buf or give up on the image. */
static void
pwrite_all(int fd, const void *buf, size_t n, off_t off)
{
	if (rio__pwrite_all(fd, buf, n, off) != 0)
		_exit(125); /* the image could not be written */
}

/* In the child: one pool file becomes dur + its chosen lines. */
static void
write_pool(int fd, struct pmt_model *m, struct pmt_pool *p,
	const struct pmt_lref *chosen, size_t n)
{
	if (ftruncate(fd, (off_t)p->size) != 0)
		_exit(125);
	/* Runs of pages: non-zero ones are written over (already allocated
	 * from the previous image, mostly), zero ones punched out (free when
	 * they are holes already).  Whatever the previous checker wrote is
	 * overwritten either way. */
	for (uint64_t pg = 0; pg < p->npages;) {
		bool data = p->nz[pg] != 0;
		uint64_t end = pg + 1;
		while (end < p->npages && (p->nz[end] != 0) == data)
			end++;
		uint64_t off = pg * PMT_PAGE;
		uint64_t len = end * PMT_PAGE > p->size ? p->size - off :
			(end - pg) * PMT_PAGE;
		if (data)
			pwrite_all(fd, p->dur + off, len, (off_t)off);
		else if (fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
				 (off_t)off, (off_t)len) != 0)
			pwrite_all(fd, p->dur + off, len, (off_t)off);
		pg = end;
	}
	for (size_t i = 0; i < n; i++)
		if (chosen[i].pool == p->id)
			pwrite_all(fd, pmt_model_data(m, chosen[i]), PMT_LINE,
				(off_t)(chosen[i].line * PMT_LINE));
}

static bool
is_pool_name(struct pmt_model *m, const char *name)
{
	for (unsigned i = 0; i < m->npools; i++)
		if (m->pools[i].present && strcmp(m->pools[i].name, name) == 0)
			return true;
	return false;
}

/* In the child: the slot becomes the image. */
static void
child_materialize(struct slot *s, struct pmt_model *m,
	const struct pmt_lref *chosen, size_t n)
{
	DIR *d = opendir(s->dir);
	struct dirent *e;

	while (d != NULL && (e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 ||
		    strcmp(e->d_name, "..") == 0 || is_pool_name(m, e->d_name))
			continue;
		char *p = pmt_xasprintf("%s/%s", s->dir, e->d_name);
		if (unlink(p) != 0)
			pmt_rm_rf(p);
		free(p);
	}
	if (d != NULL)
		closedir(d);
	for (unsigned i = 0; i < m->npools; i++)
		if (m->pools[i].present)
			write_pool(s->f[i].fd, m, &m->pools[i], chosen, n);
}

/* A command of plain words (no quote, variable, glob, redirection,
 * separator or assignment for the shell to act on) is executed directly:
 * the shell would only split it at blanks and exec it, and starting it
 * costs as much as a small checker.  Returns only if it is not one. */
#define ARGS_MAX 64
static char *
split_simple(const char *cmd, char **argv)
{
	char *c, *save = NULL;
	int n = 0;

	if (strpbrk(cmd, "\"'\\$`;&|<>()*?[]{}~#=%!\n") != NULL)
		return NULL;
	c = pmt_xstrdup(cmd);
	for (char *w = strtok_r(c, " \t", &save); w != NULL &&
		n < ARGS_MAX - 1; w = strtok_r(NULL, " \t", &save))
		argv[n++] = w;
	if (n == 0 || n == ARGS_MAX - 1 || strchr(argv[0], '/') == NULL) {
		free(c); /* a builtin or a PATH search: the shell's job */
		return NULL;
	}
	argv[n] = NULL;
	return c;
}

static void
exec_simple(const char *cmd)
{
	char *argv[ARGS_MAX], *c = split_simple(cmd, argv);

	if (c == NULL)
		return;
	execv(argv[0], argv);
	free(c);
}


/* F1: start the slot's fork server, if the command is plain words. */
static void
server_start(struct pmt_runner *r, struct slot *s, const char *image)
{
	char *cmd = pmt_expand_cmd(r->o.cmd, image, s->dir);
	char *argv[ARGS_MAX], *c = split_simple(cmd, argv);
	int req[2], ans[2];
	pid_t pid;

	free(cmd);
	if (c == NULL)
		return;
	if (pipe2(req, O_CLOEXEC) != 0 || pipe2(ans, O_CLOEXEC) != 0)
		pmt_die("pipe: %m");
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		pmt_die("fork: %m");
	if (pid == 0) {
		const char *old = getenv("LD_PRELOAD");
		char *pre = old && *old ? pmt_xasprintf("%s:%s",
			r->o.server_lib, old) : pmt_xstrdup(r->o.server_lib);
		char spec[32];
		int in = dup(req[0]), out = dup(ans[1]); /* not CLOEXEC */
		snprintf(spec, sizeof(spec), "%d,%d", in, out);
		setenv("LD_PRELOAD", pre, 1);
		setenv("PMEMTEST_FORKSERVER", spec, 1);
		dup2(s->out_fd, STDOUT_FILENO);
		dup2(s->out_fd, STDERR_FILENO);
		sigprocmask(SIG_UNBLOCK, &r->chld, NULL);
		execv(argv[0], argv);
		_exit(127);
	}
	close(req[0]);
	close(ans[1]);
	free(c);
	/* It says hello before main; a program the preload library does not
	 * reach (linked statically) runs main instead: no server. */
	struct pollfd pf = { .fd = ans[0], .events = POLLIN };
	struct fs_msg hello;
	if (poll(&pf, 1, 10000) != 1 ||
	    fs_io(ans[0], &hello, sizeof(hello), false) != 0) {
		int st;
		kill(pid, SIGKILL);
		while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
			;
		close(req[1]);
		close(ans[0]);
		return;
	}
	s->server = pid;
	s->to_server = req[1];
	s->from_server = ans[0];
}


/* In the child checking an image: the slot's server checks it (F1-F3);
 * returns only if the server is gone. */
static void
ask_server(struct slot *s)
{
	struct fs_msg m = { .seq = s->server_seq, .val = (int32_t)getpid() };
	int rc;

	signal(SIGPIPE, SIG_IGN); /* a server gone: EPIPE, not death */
	rc = fs_io(s->to_server, &m, sizeof(m), true);
	while (rc == 0) {
		rc = fs_io(s->from_server, &m, sizeof(m), false);
		if (rc == 0 && m.seq == s->server_seq)
			break; /* F3: else an earlier request's answer */
	}
	signal(SIGPIPE, SIG_DFL);
	if (rc != 0 || m.val == -1)
		return; /* gone, or it could not fork */
	if (WIFSIGNALED(m.val)) {
		signal(WTERMSIG(m.val), SIG_DFL);
		raise(WTERMSIG(m.val));
	}
	_exit(WIFEXITED(m.val) ? WEXITSTATUS(m.val) : 1);
}

static void
run_child(struct pmt_runner *r, struct slot *s, struct pmt_model *m,
	const struct pmt_lref *chosen, size_t n, bool reads)
{
	const char *iname = m->pools[r->o.image_pool < m->npools ?
		r->o.image_pool : 0].name;
	char *image = pmt_xasprintf("%s/%s", s->dir, iname);
	int rc;

	setpgid(0, 0);
	sigprocmask(SIG_UNBLOCK, &r->chld, NULL);
	if (ftruncate(s->out_fd, 0) != 0 || lseek(s->out_fd, 0, SEEK_SET) != 0)
		_exit(126);
	dup2(s->out_fd, STDOUT_FILENO);
	dup2(s->out_fd, STDERR_FILENO);
	child_materialize(s, m, chosen, n);
	if (r->o.fn != NULL) {
		if (s->reads_fd >= 0 && reads) {
			struct pmt_reads_file *f = pmt_xcalloc(m->npools + 1,
				sizeof(*f));
			unsigned nf = 0;
			for (unsigned i = 0; i < m->npools; i++)
				if (m->pools[i].present)
					f[nf++] = (struct pmt_reads_file){
						s->f[i].dev, s->f[i].ino, i };
			pmt_reads_begin(s->reads_fd, f, nf);
		}
		rc = r->o.fn(image, s->dir);
		if (rc == 0 && r->o.twice)
			rc = r->o.fn(image, s->dir);
		fflush(NULL);
		_exit(rc == 0 ? 0 : 1);
	}
	if (s->server > 0)
		ask_server(s);
	char *one = pmt_expand_cmd(r->o.cmd, image, s->dir);
	if (!r->o.twice)
		exec_simple(one);
	char *cmd = r->o.twice ? pmt_xasprintf("(%s) && (%s)", one, one) : one;
	execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
	_exit(127);
}

static void
describe(struct pmt_model *m, struct pmt_line_desc *d, struct pmt_lref l)
{
	d->l = l;
	d->li = *pmt_model_li(m, l);
	/* Now, not when the checker is done: the model moves on meanwhile
	 * (report signatures must not depend on timing). */
	d->store_site = pmt_model_store_site(m, &d->li);
	d->nvers = pmt_model_nvers(m, l);
	d->delta = pmt_model_hash(m, l)[0] - d->li.hdur[0];
	d->delta_cur = d->li.hcur[0] - d->li.hdur[0];
	if (l.ver) {
		const struct pmt_hval *v = pmt_model_hval(m, l);
		d->ver_stack = v->stack;
		d->ver_rec = v->store_rec;
		d->ver_epoch = v->epoch;
		d->torn = v->torn;
		d->wide = v->wide;
	} else {
		d->ver_stack = d->li.store_stack;
		d->ver_rec = d->li.store_rec;
		d->ver_epoch = d->li.store_epoch;
	}
}

static struct pmt_job *
job_new(struct pmt_runner *r, struct pmt_model *m, const struct pmt_cp *cp,
	const struct pmt_lref *chosen, size_t n, const struct pmt_lref *pend,
	size_t npend)
{
	struct pmt_job *j = pmt_xcalloc(1, sizeof(*j));
	size_t lost_max = 32, nd = 0; /* report.c infers from these */

	j->seq = ++r->seq;
	j->cp = *cp;
	j->nchosen = n;
	j->npending = npend;
	j->chosen = pmt_xmalloc((n + 1) * sizeof(*chosen));
	memcpy(j->chosen, chosen, n * sizeof(*chosen));
	j->desc = pmt_xmalloc((n + lost_max + 1) * sizeof(*j->desc));
	for (size_t i = 0; i < n; i++)
		describe(m, &j->desc[nd++], chosen[i]);
	/* pend and chosen are both sorted: the lost lines are the rest. */
	for (size_t i = 0, c = 0; i < npend && nd < n + lost_max; i++) {
		if (c < n && pend[i].pool == chosen[c].pool &&
		    pend[i].line == chosen[c].line) {
			c++;
			continue;
		}
		describe(m, &j->desc[nd++], pend[i]);
	}
	j->ndesc = nd;
	{
		uint64_t k[2];
		pmt_image_key(m, chosen, n, k);
		j->key = k[0];
	}
	return j;
}

void
pmt_job_free(struct pmt_job *j)
{
	if (j == NULL)
		return;
	free(j->chosen);
	free(j->desc);
	free(j->output);
	free(j->saved);
	free(j->reads);
	free(j);
}

/* The pages the checker of the slot's last image read (reads.c). */
static void
load_reads(struct slot *s, struct pmt_job *j)
{
	struct stat st;

	j->nreads = SIZE_MAX;
	if (s->reads_fd < 0 || fstat(s->reads_fd, &st) != 0 ||
	    st.st_size % (2 * sizeof(uint32_t)) != 0)
		return;
	j->reads = pmt_xmalloc((size_t)st.st_size + 1);
	if (pread(s->reads_fd, j->reads, (size_t)st.st_size, 0) !=
	    st.st_size) {
		free(j->reads);
		j->reads = NULL;
		return;
	}
	j->nreads = (size_t)st.st_size / (2 * sizeof(uint32_t));
}

static void
reap(struct pmt_runner *r, struct slot *s, int status, struct pmt_model *m)
{
	struct pmt_job *j = s->job;

	s->pid = 0;
	s->job = NULL;
	r->checked += !(j->flags & PMT_SUBMIT_PROBE);
	j->status = status;
	if (j->flags & PMT_SUBMIT_READS)
		load_reads(s, j);
	else
		j->nreads = SIZE_MAX;
	if (r->o.on_done != NULL)
		r->o.on_done(j, r->o.done_arg);
	if (j->flags & PMT_SUBMIT_PROBE)
		pmt_job_free(j); /* checked before: judged then */
	else if (j->timed_out || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		char buf[OUTPUT_MAX + 1];
		ssize_t k = pread(s->out_fd, buf, OUTPUT_MAX, 0);
		buf[k > 0 ? k : 0] = '\0';
		j->output = pmt_xstrdup(buf);
		r->on_fail(j, r->arg);
	} else {
		pmt_job_free(j);
	}
	(void)m;
}

/* Reap one child (blocking, K3). */
static void
wait_one(struct pmt_runner *r)
{
	for (;;) {
		int status;
		pid_t pid = waitpid(-1, &status, WNOHANG);
		if (pid > 0) {
			for (unsigned i = 0; i < r->nslots; i++)
				if (r->slots[i].pid == pid) {
					reap(r, &r->slots[i], status, NULL);
					return;
				}
			continue; /* not ours */
		}
		if (pid < 0 && errno == ECHILD)
			return;
		uint64_t now = rio_now_ns(CLOCK_MONOTONIC);
		uint64_t next = now + 1000000000ull;
		for (unsigned i = 0; i < r->nslots; i++) {
			struct slot *s = &r->slots[i];
			if (s->pid == 0 || s->deadline == 0)
				continue;
			if (s->deadline <= now && !s->job->timed_out) {
				s->job->timed_out = true;
				kill(-s->pid, SIGKILL);
				kill(s->pid, SIGKILL);
			} else if (s->deadline < next) {
				next = s->deadline;
			}
		}
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 100000000 };
		if (next > now && next - now < 100000000ull)
			ts.tv_nsec = (long)(next - now);
		sigtimedwait(&r->chld, NULL, &ts);
	}
}

void
pmt_runner_submit(struct pmt_runner *r, struct pmt_model *m,
	const struct pmt_cp *cp, const struct pmt_lref *chosen, size_t n,
	const struct pmt_lref *pending, size_t npending, unsigned flags)
{
	struct slot *s = NULL;
	pid_t pid;

	for (;;) {
		for (unsigned i = 0; i < r->nslots && s == NULL; i++)
			if (r->slots[i].pid == 0)
				s = &r->slots[i];
		if (s != NULL)
			break;
		wait_one(r);
	}
	slot_prepare(s, m); /* K1, K2 */
	if (r->o.server_lib != NULL && r->o.cmd != NULL && !r->o.twice &&
	    s->server == 0) {
		char *image = pmt_xasprintf("%s/%s", s->dir, m->pools[
			r->o.image_pool < m->npools ? r->o.image_pool : 0].name);
		s->server = -1; /* tried */
		server_start(r, s, image);
		free(image);
	}
	s->server_seq++;
	/* Empty until the child records: no record, every pool read. */
	if (s->reads_fd >= 0 && (ftruncate(s->reads_fd, 0) != 0 ||
		lseek(s->reads_fd, 0, SEEK_SET) != 0))
		pmt_die("cannot reset %s/reads: %m", r->o.workdir);
	s->job = job_new(r, m, cp, chosen, n, pending, npending);
	s->job->flags = flags;
	if (flags & PMT_SUBMIT_PROBE) {
		/* Not a new image: numbers stay those of the images. */
		s->job->seq = 0;
		r->seq--;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		pmt_die("fork: %m");
	if (pid == 0)
		run_child(r, s, m, chosen, n, flags & PMT_SUBMIT_READS);
	s->pid = pid;
	s->deadline = r->o.timeout_s ?
		rio_now_ns(CLOCK_MONOTONIC) +
		(uint64_t)r->o.timeout_s * 1000000000ull : 0;
}

void
pmt_runner_wait_all(struct pmt_runner *r)
{
	for (;;) {
		bool busy = false;
		for (unsigned i = 0; i < r->nslots; i++)
			busy |= r->slots[i].pid != 0;
		if (!busy)
			return;
		wait_one(r);
	}
}

uint64_t
pmt_runner_checked(const struct pmt_runner *r)
{
	return r->checked;
}

void
pmt_runner_free(struct pmt_runner *r)
{
	if (r == NULL)
		return;
	pmt_runner_wait_all(r);
	for (unsigned i = 0; i < r->nslots; i++) {
		struct slot *s = &r->slots[i];
		for (unsigned k = 0; k < s->nf; k++)
			slot_close(s, k);
		free(s->f);
		if (s->server > 0) {
			int st;
			close(s->to_server); /* the server exits at EOF */
			close(s->from_server);
			while (waitpid(s->server, &st, 0) < 0 && errno == EINTR)
				;
		}
		free(s->dir);
		close(s->out_fd);
		if (s->reads_fd >= 0)
			close(s->reads_fd);
	}
	free(r->slots);
	sigprocmask(SIG_UNBLOCK, &r->chld, NULL);
	free(r);
}
