/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * init.c -- starting Discount Checking: dc_init, the preload constructor,
 *           dc_checkpoint and the small public calls
 *
 * State machine of a process: OFF --dc_init, no checkpoint--> RUNNING
 * (first checkpoint committed) ; OFF --dc_init, checkpoint found-->
 * recover.c (never returns; the process continues as RUNNING from the
 * checkpoint) ; RUNNING --a checkpoint fails--> FATAL (no further
 * checkpoints; dc_checkpoint returns DC_EFATAL) ; RUNNING --exit-->
 * directory removed.
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/auxv.h>
#include <sys/personality.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dc_int.h"

struct dc__st dc__st __attribute__((aligned(4096)));
RIO_STATIC_ASSERT(offsetof(struct dc__st, nreg) == DC__HOT,
	"the hot fields of dc__st fill exactly its first page");
union dc__vol_pages dc__volp __attribute__((aligned(4096)));



static const char *const names[] = { "cpvs", "cand", "cbndvs", "cand-log",
	"cbndvs-log", "periodic", "manual", "buffered" };

int
dc_protocol_parse(const char *name, enum dc_protocol *out)
{
	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
		if (name && !strcasecmp(name, names[i])) {
			*out = (enum dc_protocol)i;
			return 0;
		}
	if (dc__twopc_parse(name, out))
		return 0;
	return dc__err(DC_EPROTOCOL, "unknown protocol '%s' (cpvs, cand, "
		"cbndvs, cand-log, cbndvs-log, periodic, manual, buffered, "
		"cpv-2pc, cbndv-2pc)",
		name ? name : "");
}

const char *
dc_protocol_name(enum dc_protocol p)
{
	if (p == DC_CPV_2PC || p == DC_CBNDV_2PC)
		return p == DC_CPV_2PC ? "cpv-2pc" : "cbndv-2pc";
	return (unsigned)p < sizeof(names) / sizeof(names[0]) ? names[p] : "?";
}

static const char *const trackers[] = { "uffd", "uffd", "wp", "undo" };

int
dc_tracking_parse(const char *name, enum dc_tracking *out)
{
	for (int i = DC_TRACK_UFFD; i <= DC_TRACK_UNDO; i++)
		if (name && !strcasecmp(name, trackers[i])) {
			*out = (enum dc_tracking)i;
			return 0;
		}
	return dc__err(-EINVAL, "unknown dirty tracking '%s' (uffd, wp, undo)",
		name ? name : "");
}

const char *
dc_tracking_name(enum dc_tracking t)
{
	return (unsigned)t <= DC_TRACK_UNDO ? trackers[t] : "?";
}

static uint64_t
fnv(const char *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

static void
default_dir(char *out, size_t n)
{
	char cmd[4096], exe[256] = "prog";
	ssize_t k = 0;
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		k = read(fd, cmd, sizeof(cmd));
		close(fd);
	}
	uint64_t h = fnv(cmd, k > 0 ? (size_t)k : 0, 0xcbf29ce484222325ull);
	if (getcwd(cmd, sizeof(cmd)))
		h = fnv(cmd, strlen(cmd), h);
	ssize_t e = readlink("/proc/self/exe", cmd, sizeof(cmd) - 1);
	if (e > 0) {
		cmd[e] = '\0';
		const char *b = strrchr(cmd, '/');
		snprintf(exe, sizeof(exe), "%s", b ? b + 1 : cmd);
	}
	snprintf(out, n, "/dev/shm/dc-%u/%s-%016llx", (unsigned)getuid(), exe,
		(unsigned long long)h);
}

static bool
single_threaded(void)
{
	char buf[1024];
	int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return true;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return true;
	buf[n] = '\0';
	const char *p = strrchr(buf, ')');
	for (int field = 2; p && field < 20; field++)
		p = strchr(p + 1, ' ');
	return p == NULL || atoi(p + 1) <= 1;
}

/*
 * Linked mode: checkpoints only make sense at fixed addresses.  When
 * randomisation is on, turn it off and run the program again from the
 * start (dc_init is the first line of main, so nothing has happened).
 */
/* libdc's own descriptors go at DC__OWN_FD_BASE and above, past every
 * number the program's table records: a soft RLIMIT_NOFILE below that
 * (1,024 is common) is raised as far as the hard limit lets it.  Below
 * it, they stay where the kernel put them (dc__own_fd). */
static void
fd_room(void)
{
	struct rlimit l;
	rlim_t want = DC__OWN_FD_BASE + 256;
	if (getrlimit(RLIMIT_NOFILE, &l) != 0 || l.rlim_cur >= want)
		return;
	l.rlim_cur = l.rlim_max < want ? l.rlim_max : want;
	(void)setrlimit(RLIMIT_NOFILE, &l);
}

static int
reexec_without_aslr(void)
{
	int pers = personality(0xffffffff);
	if (pers == -1 || (pers & ADDR_NO_RANDOMIZE))
		return 0;
	if (getenv("DC_REEXEC"))
		return dc__err(DC_EUNSUPPORTED, "cannot turn address-space "
			"randomisation off");
	static char cmd[65536];
	static char *argv[1024];
	int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, cmd, sizeof(cmd) - 1) : -1;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return dc__err(-EIO, "cannot read /proc/self/cmdline");
	cmd[n] = '\0';
	int argc = 0;
	for (char *p = cmd; p < cmd + n && argc < 1023; p += strlen(p) + 1)
		argv[argc++] = p;
	argv[argc] = NULL;
	if (personality((unsigned long)pers | ADDR_NO_RANDOMIZE) == -1)
		return dc__err(-errno, "personality: %s", strerror(errno));
	setenv("DC_REEXEC", "1", 1);
	if (!getenv("GLIBC_TUNABLES"))
		setenv("GLIBC_TUNABLES", "glibc.pthread.rseq=0", 1);
	execv("/proc/self/exe", argv);
	return dc__err(-errno, "re-exec without randomisation: %s",
		strerror(errno));
}

int
dc_init(const struct dc_opts *opts)
{
	struct dc_opts o = { 0 };
	if (opts)
		o = *opts;
	if (dc__vol.active)
		return dc__err(DC_EINIT, "dc_init: already running");
	if ((unsigned)o.protocol > DC_BUFFERED && o.protocol != DC_CPV_2PC &&
	    o.protocol != DC_CBNDV_2PC)
		return dc__err(DC_EPROTOCOL, "dc_init: protocol %d",
			(int)o.protocol);
	if ((o.protocol == DC_PERIODIC || o.protocol == DC_BUFFERED) &&
	    o.interval_ms == 0)
		return dc__err(-EINVAL, "dc_init: the %s protocol needs an "
			"interval", dc_protocol_name(o.protocol));
	if ((unsigned)o.tracking > DC_TRACK_UNDO)
		return dc__err(-EINVAL, "dc_init: dirty tracking %d",
			(int)o.tracking);
	const char *tr = getenv("DC_TRACKING");
	int rc1;
	if (o.tracking == DC_TRACK_DEFAULT && tr && *tr &&
	    (rc1 = dc_tracking_parse(tr, &o.tracking)) != 0)
		return rc1;
	if (o.tracking == DC_TRACK_DEFAULT)
		o.tracking = DC_TRACK_UFFD;
	int rc0 = reexec_without_aslr();
	if (rc0)
		return rc0;
	if (!single_threaded())
		return dc__err(DC_EUNSUPPORTED, "dc_init: the process already "
			"has a second thread");
	dc__vol.selector = SYSCALL_DISPATCH_FILTER_ALLOW;
	fd_room();
	dc__vol.tracking = (int)o.tracking;
	dc__vol.shadow_fd = dc__vol.redo_fd = dc__vol.ndlog_fd = -1;
	dc__vol.fundo_fd = dc__vol.uffd = dc__vol.pagemap_fd = -1;
	dc__vol.mundo_fd = -1;
	dc__vol.dirfd = -1;
	memset(dc__vol.fd_touched, 1, sizeof(dc__vol.fd_touched));
	dc__vol.redo_max = DC_REDO_MAX;
	dc__crashpoint_init();
	dc__vol.ct_say = getenv("DC_CKPT_TIMES") != NULL;
	/* every checkpoint written in place, none behind (ckpt.c
	 * invariant 8): for comparisons */
	dc__vol.bg_off = getenv("DC_CKPT_SYNC") != NULL;
	const char *sp = getenv("DC_STATS");
	snprintf(dc__vol.stats_path, sizeof(dc__vol.stats_path), "%s",
		sp ? sp : "");
	int rce = dc__events_open(getenv("DC_EVENTS"));
	if (rce)
		return rce;
	const char *dir = o.dir ? o.dir : getenv("DC_DIR");
	if (dir && *dir)
		snprintf(dc__vol.dir, sizeof(dc__vol.dir), "%s", dir);
	else
		default_dir(dc__vol.dir, sizeof(dc__vol.dir));

	/* the two-phase-commit protocols: an undecided round resolved, the
	 * coordinator told (twopc.c), before the directory is read */
	if ((rc1 = dc__twopc_setup((int)o.protocol)) != 0)
		return rc1;
	/* process trees: a member's settings (tree.c) */
	if ((rc1 = dc__tree_setup()) != 0)
		return rc1;
	/* a previous run that crashed while exiting left its delayed
	 * deletions to do (kstate.c) */
	dc__k_exit_deletes(dc__vol.dir);
	bool have = false;
	int rc = dc__files_open(dc__vol.dir, &have);
	if (rc)
		return rc;
	if (have) {
		if (o.verbose)
			dc__say("recovering %s from generation %lu",
				dc__vol.dir, (unsigned long)dc__vol.committed);
		return dc__recover(); /* returns only when refused/failed */
	}
	if (dc__vol.ctl) {
		rio_pool_close(dc__vol.ctl);
		dc__vol.ctl = NULL;
		dc__vol.ctlb = NULL;
	}
	if ((rc = dc__files_create(dc__vol.dir)))
		return rc;
	if ((rc = dc__held_start(o.protocol == DC_BUFFERED)))
		return rc;
	dc__st.protocol = (int)o.protocol;
	dc__st.interval_ms = o.interval_ms;
	dc__st.verbose = o.verbose;
	dc__st.on_recover = o.on_recover;
	dc__st.pre_checkpoint = o.pre_checkpoint;
	dc__st.cb_arg = o.arg;
	dc__st.ctl0 = dc__vol.ctl;
	dc__st.ctl_fd0 = dc__ctl_fd();
	dc__st.vdso = getauxval(AT_SYSINFO_EHDR);
	if ((rc = dc__objs_read(dc__st.obj, DC__MAX_OBJ, &dc__st.nobj)) ||
	    (rc = dc__track_open()) || (rc = dc__mu_map()))
		goto fail;
	dc__k_init();
	dc__tree_adopt(); /* a new image's descriptors of the tree */
	if ((rc = dc__vdso_patch()) || (rc = dc__sud_start()))
		goto fail;
	dc__vol.active = true;
	rc = dc__commit_first();
	if (rc < 0)
		goto fail;
	if (rc == 0 && (rc = dc__twopc_first()))
		goto fail;
	if (rc == 0 && o.verbose)
		dc__say("checkpointing into %s (protocol %s, tracking %s)",
			dc__vol.dir, dc_protocol_name(o.protocol),
			dc_tracking_name(o.tracking));
	if (!dc__vol.timer_on && (rc = dc__timer_start()))
		goto fail;
	dc__vol.selector = SYSCALL_DISPATCH_FILTER_BLOCK;
	return 0;
fail:
	dc__vol.active = false;
	prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0);
	dc__vol.selector = SYSCALL_DISPATCH_FILTER_ALLOW;
	dc_discard(dc__vol.dir);
	return rc;
}

int
dc_checkpoint(void)
{
	if (!dc__vol.active)
		return dc__err(DC_ENOTINIT, "dc_checkpoint: not running");
	unsigned char sel = dc__vol.selector;
	uint64_t all = DC__SIGS_BLOCKED, old;
	dc__vol.selector = SYSCALL_DISPATCH_FILTER_ALLOW;
	dc__sys6(SYS_rt_sigprocmask, SIG_BLOCK, (long)&all, (long)&old, 8, 0,
		0);
	int rc = dc__commit();
	dc__sys6(SYS_rt_sigprocmask, SIG_SETMASK, (long)&old, 0, 8, 0, 0);
	dc__vol.selector = sel; /* restored with the frame after a resume */
	return rc;
}

bool
dc_recovered(void)
{
	return dc__vol.recovered;
}

int
dc_stats(struct dc_stats *out)
{
	if (!dc__vol.active)
		return dc__err(DC_ENOTINIT, "dc_stats: not running");
	*out = dc__st.stats;
	return 0;
}

/* dc-run's preload: DC_PRELOAD=1 and the options in the environment. */
__attribute__((constructor)) static void
dc_preload(void)
{
	const char *on = getenv("DC_PRELOAD");
	if (on == NULL || strcmp(on, "1") != 0)
		return;
	struct dc_opts o = { 0 };
	const char *p = getenv("DC_PROTOCOL");
	enum dc_protocol proto = DC_CBNDVS;
	if (p && dc_protocol_parse(p, &proto) != 0) {
		dc__say("%s", rio_errormsg());
		_exit(70);
	}
	o.protocol = proto;
	const char *iv = getenv("DC_INTERVAL");
	o.interval_ms = iv ? (unsigned)strtoul(iv, NULL, 10) : 0;
	o.verbose = getenv("DC_VERBOSE") != NULL;
	int rc = dc_init(&o);
	if (rc) {
		dc__say("cannot start: %s: %s", dc_strerror(rc),
			rio_errormsg());
		_exit(70);
	}
}
