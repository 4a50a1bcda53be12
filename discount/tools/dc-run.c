/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dc-run.c -- run an unmodified program under Discount Checking
 *
 *   dc-run [--dir D] [--protocol P] [--interval MS] [--stats F]
 *          [--events F] [--tracking uffd|wp|undo] [--disk buffer|rename]
 *          [--verbose] -- prog args
 *   dc-run --status [--dir D] -- prog args     (what a crash would resume)
 *   dc-run --discard [--dir D] -- prog args    (forget a checkpoint)
 *
 * Turns address-space randomisation off (personality ADDR_NO_RANDOMIZE,
 * inherited by the program through exec), preloads libdc.so with its
 * options in the environment, switches glibc's rseq registration off, and
 * execs the program.  Running the same command again after a crash
 * recovers it.  The default directory is derived from the working
 * directory and the command line, so "the same command" finds it.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/personality.h>
#include <sys/wait.h>
#include <unistd.h>

#include "dc.h"
#include "dc-tree.h"

static const char help[] =
	"usage: dc-run [--dir D] [--protocol P] [--interval MS] [--stats F]\n"
	"              [--events F] [--tracking uffd|wp|undo]\n"
	"              [--disk buffer|rename] [--verbose] --\n"
	"              program [args...]\n"
	"       dc-run --tree [options] -- program [args...]\n"
	"       dc-run --status|--discard [--dir D] -- program [args...]\n"
	"\n"
	"Runs an unmodified, dynamically linked program under Discount\n"
	"Checking.  After a crash, running the same command again (same\n"
	"directory, arguments, environment and redirections) continues the\n"
	"program from its last checkpoint.\n"
	"\n"
	"  --dir D        checkpoint directory; default\n"
	"                 /dev/shm/dc-UID/PROGRAM-HASH (of the working\n"
	"                 directory and the command line).  Any file system\n"
	"                 with sparse files and hole punching: tmpfs (fast:\n"
	"                 memory that outlives the process), or a disk file\n"
	"                 system such as ext4, xfs, btrfs (every log append\n"
	"                 and checkpoint is then fdatasync'ed: slower)\n"
	"  --protocol P   when to commit (default cbndvs):\n"
	"                 cpvs        before every visible event (write to a\n"
	"                             terminal, pipe, socket)\n"
	"                 cand        after every non-deterministic event\n"
	"                             (input, time, signals)\n"
	"                 cbndvs      before a visible event that follows a\n"
	"                             non-deterministic one\n"
	"                 cand-log, cbndvs-log  the same, with input logged\n"
	"                             and replayed instead of committed\n"
	"                 periodic    every --interval MS only (no guarantee\n"
	"                             for visible output)\n"
	"                 manual      only dc_checkpoint() calls\n"
	"                 cpv-2pc, cbndv-2pc  the processes of a computation\n"
	"                             commit together through dc-coord\n"
	"                             ($DC_2PC_COORD, $DC_2PC_ID; sends are\n"
	"                             not visible)\n"
	"                 buffered    every --interval MS only; output to\n"
	"                             files, terminals, pipes, datagram and\n"
	"                             TCP sockets is held and performed\n"
	"                             after the next commit; a TCP server's\n"
	"                             connections are held by dc-keeper,\n"
	"                             which dc-run starts, across crashes\n"
	"  --interval MS  also commit every MS milliseconds\n"
	"  --tracking T   how written pages are found (default uffd):\n"
	"                 uffd  userfaultfd write protection, async mode,\n"
	"                       scanned at each checkpoint; written pages\n"
	"                       copied into a redo log\n"
	"                 wp    mprotect; the first write to a page faults\n"
	"                       and is recorded; copied into the redo log\n"
	"                 undo  the memory is moved into a persistent\n"
	"                       segment; the first write to a page faults\n"
	"                       and logs its before-image (the thesis' design)\n"
	"  --disk S       buffered: how a file write is held (default\n"
	"                 buffer): buffer  data and metadata appended to a\n"
	"                 persistent buffer; rename  data appended to a\n"
	"                 rename area, the mapping written at the commit\n"
	"  --stats F      write the run's counters to F when it ends\n"
	"  --events F     append every visible event (each write to a\n"
	"                 terminal, pipe or socket) to F, one C-escaped\n"
	"                 line per call, for dc-equiv --events\n"
	"  --tree         the program and every process it forks are one\n"
	"                 computation: they commit together (cpv-2pc or\n"
	"                 cbndv-2pc, the default), in a pid namespace of\n"
	"                 their own; the failure of any of them brings them\n"
	"                 all back to the last commit, with the same pids\n"
	"                 (needs CAP_SYS_ADMIN; D holds one directory per\n"
	"                 process and the tree record)\n"
	"  --verbose      say what is recovered\n"
	"  --status       print what a crash would resume, run nothing\n"
	"  --discard      forget the checkpoint, run nothing\n"
	"\n"
	"Refused at the call (\"dc: refused ...\" on stderr; the call fails,\n"
	"the program goes on): threads, fork and pipes (without --tree),\n"
	"exec, stream sockets (but a TCP server's under buffered), shared\n"
	"writable mappings.  Needs Linux >= 6.7,\n"
	"x86-64.  Exit status 70: Discount Checking could not start or\n"
	"refused to recover.\n"
	"\n"
	"Every system call is dispatched by libdc.  The program's read,\n"
	"write, recv*, send*, sendfile, accept, epoll_wait, poll and\n"
	"getrandom are made without a SIGSYS (cheaper; no cancellation\n"
	"points); DC_DIRECT=0 in the environment traps them too.\n"
	"See docs/discount.md.\n";

static void
usage(bool ok)
{
	fputs(help, ok ? stdout : stderr);
	exit(ok ? 0 : 2);
}

/*
 * --protocol buffered: the keeper of the program's TCP connections
 * (dc-keeper.c), outside the program so that its crash leaves them open.
 * One per checkpoint directory: a keeper that finds another one there
 * leaves at once, so a recovery finds the connections where they were.
 * $DC_KEEPER_BIN names it, else the dc-keeper beside dc-run, else $PATH's.
 * It outlives dc-run (setsid, a grandchild): with its stdout and stderr
 * on /dev/null, or appended to $DC_KEEPER_LOG.  --pid names this
 * process, the program once exec'd: the keeper ends when the runs it was
 * named have ended and nothing it holds may serve a recovery
 * (dc-keeper.c K6).
 */
static int
start_keeper(const char *dir, const char *self_dir)
{
	char bin[PATH_MAX] = "dc-keeper";
	if (getenv("DC_KEEPER_BIN"))
		snprintf(bin, sizeof(bin), "%s", getenv("DC_KEEPER_BIN"));
	else if (self_dir) {
		char cand[PATH_MAX + 16];
		snprintf(cand, sizeof(cand), "%s/dc-keeper", self_dir);
		if (access(cand, X_OK) == 0)
			snprintf(bin, sizeof(bin), "%s", cand);
	}
	int rp[2];
	if (pipe(rp) != 0)
		return -1;
	char me[24];
	snprintf(me, sizeof(me), "%ld", (long)getpid());
	pid_t pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		setsid();
		unsetenv("LD_PRELOAD"); /* never under libdc */
		unsetenv("DC_PRELOAD");
		if (fork() != 0)
			_exit(0);
		const char *log = getenv("DC_KEEPER_LOG");
		int nul = open("/dev/null", O_RDWR);
		int out = log ? open(log, O_WRONLY | O_CREAT | O_APPEND, 0600) :
			nul;
		dup2(nul, 0);
		dup2(out < 0 ? nul : out, 1);
		dup2(out < 0 ? nul : out, 2);
		for (int fd = 3; fd < 1024; fd++)
			if (fd != rp[1])
				close(fd);
		char rfd[16];
		snprintf(rfd, sizeof(rfd), "%d", rp[1]);
		execlp(bin, bin, "--dir", dir, "--ready", rfd, "--pid", me,
			log ? "--verbose" : (char *)NULL, (char *)NULL);
		_exit(127);
	}
	close(rp[1]);
	waitpid(pid, NULL, 0);
	char c = 0;
	ssize_t n;
	do
		n = read(rp[0], &c, 1);
	while (n < 0 && errno == EINTR);
	close(rp[0]);
	if (n != 1 || c != '1') {
		fprintf(stderr, "dc-run: %s did not start\n", bin);
		return -1;
	}
	return 0;
}

static uint64_t
fnv(const char *p, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 0x100000001b3ull;
	return h;
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = { { "dir", 1, 0, 'd' },
		{ "protocol", 1, 0, 'p' }, { "interval", 1, 0, 'i' },
		{ "verbose", 0, 0, 'v' }, { "status", 0, 0, 's' },
		{ "discard", 0, 0, 'x' }, { "help", 0, 0, 'h' },
		{ "stats", 1, 0, 'S' }, { "tracking", 1, 0, 't' },
		{ "events", 1, 0, 'e' }, { "disk", 1, 0, 'D' },
		{ "tree", 0, 0, 'T' }, { 0, 0, 0, 0 } };
	const char *dir = NULL, *proto = "cbndvs", *interval = NULL;
	const char *stats = NULL, *tracking = NULL, *events = NULL;
	const char *disk = NULL;
	bool verbose = false, status = false, discard = false;
	bool tree = false, proto_set = false;
	int c;
	while ((c = getopt_long(argc, argv, "+d:p:i:vsxhS:t:e:D:", lo, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'p': proto = optarg; proto_set = true; break;
		case 'i': interval = optarg; break;
		case 'v': verbose = true; break;
		case 's': status = true; break;
		case 'x': discard = true; break;
		case 'S': stats = optarg; break;
		case 't': tracking = optarg; break;
		case 'e': events = optarg; break;
		case 'D': disk = optarg; break;
		case 'T': tree = true; break;
		case 'h': usage(true); break;
		default: usage(false);
		}
	}
	if (optind >= argc)
		usage(false);
	if (tree && !proto_set)
		proto = "cbndv-2pc";
	enum dc_protocol p;
	if (dc_protocol_parse(proto, &p) != 0) {
		fprintf(stderr, "dc-run: %s\n", dc_errormsg());
		return 2;
	}
	enum dc_tracking tr = DC_TRACK_DEFAULT;
	if (tracking && dc_tracking_parse(tracking, &tr) != 0) {
		fprintf(stderr, "dc-run: %s\n", dc_errormsg());
		return 2;
	}
	if ((p == DC_PERIODIC || p == DC_BUFFERED) && interval == NULL) {
		fprintf(stderr, "dc-run: --protocol %s needs "
			"--interval MS\n", dc_protocol_name(p));
		return 2;
	}
	if (tree && p != DC_CPV_2PC && p != DC_CBNDV_2PC) {
		fprintf(stderr, "dc-run: --tree: the processes of a tree commit "
			"together: --protocol cpv-2pc or cbndv-2pc, not %s\n",
			dc_protocol_name(p));
		return 2;
	}
	if (disk && strcmp(disk, "buffer") && strcmp(disk, "rename")) {
		fprintf(stderr, "dc-run: --disk %s: buffer or rename\n", disk);
		return 2;
	}
	char dbuf[PATH_MAX];
	if (dir == NULL) {
		char cwd[PATH_MAX] = "";
		uint64_t h = 0xcbf29ce484222325ull;
		if (getcwd(cwd, sizeof(cwd)))
			h = fnv(cwd, strlen(cwd) + 1, h);
		for (int i = optind; i < argc; i++)
			h = fnv(argv[i], strlen(argv[i]) + 1, h);
		char tmp[PATH_MAX];
		snprintf(tmp, sizeof(tmp), "%s", argv[optind]);
		snprintf(dbuf, sizeof(dbuf), "/dev/shm/dc-%u/%s-%016llx",
			(unsigned)getuid(), basename(tmp),
			(unsigned long long)h);
		dir = dbuf;
	}
	if (status) {
		struct dc_status st;
		int rc = dc_status(dir, &st);
		if (rc) {
			printf("dir=%s\ngeneration=0\n", dir);
			return rc == DC_ENOCKPT ? 1 : 3;
		}
		printf("dir=%s\ngeneration=%llu\nincarnation=%llu\n"
		       "checkpoints=%llu\ninput_bytes=%llu\nprotocol=%s\n"
		       "exe=%s\n",
			dir, (unsigned long long)st.generation,
			(unsigned long long)st.incarnation,
			(unsigned long long)st.checkpoints,
			(unsigned long long)st.input_bytes,
			dc_protocol_name((enum dc_protocol)st.protocol),
			st.exe);
		return 0;
	}
	if (discard)
		return dc_discard(dir) == 0 ? 0 : 3;

	/* libdc.so beside dc-run (build tree, install prefix), else $DC_LIB,
	 * else the loader's search path. */
	char lib[PATH_MAX] = "libdc.so", self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (getenv("DC_LIB")) {
		snprintf(lib, sizeof(lib), "%s", getenv("DC_LIB"));
	} else if (n > 0) {
		self[n] = '\0';
		char cand[PATH_MAX + 16];
		snprintf(cand, sizeof(cand), "%s/libdc.so", dirname(self));
		if (access(cand, R_OK) == 0)
			snprintf(lib, sizeof(lib), "%s", cand);
		else {
			snprintf(cand, sizeof(cand), "%s/../lib/libdc.so", self);
			if (access(cand, R_OK) == 0)
				snprintf(lib, sizeof(lib), "%s", cand);
		}
	}
	const char *pre = getenv("LD_PRELOAD");
	char pbuf[2 * PATH_MAX];
	if (pre && *pre)
		snprintf(pbuf, sizeof(pbuf), "%s:%s", lib, pre);
	else
		snprintf(pbuf, sizeof(pbuf), "%s", lib);
	setenv("LD_PRELOAD", pbuf, 1);
	setenv("DC_PRELOAD", "1", 1);
	setenv("DC_DIR", dir, 1);
	setenv("DC_PROTOCOL", dc_protocol_name(p), 1);
	if (tracking)
		setenv("DC_TRACKING", dc_tracking_name(tr), 1);
	if (interval)
		setenv("DC_INTERVAL", interval, 1);
	if (verbose)
		setenv("DC_VERBOSE", "1", 1);
	if (stats)
		setenv("DC_STATS", stats, 1);
	if (events)
		setenv("DC_EVENTS", events, 1);
	if (disk)
		setenv("DC_DISK", disk, 1);
	if (p == DC_BUFFERED && !tree) {
		char sd[PATH_MAX];
		ssize_t k = readlink("/proc/self/exe", sd, sizeof(sd) - 1);
		if (k > 0)
			sd[k] = '\0';
		if (start_keeper(dir, k > 0 ? dirname(sd) : NULL) != 0)
			return 3;
		setenv("DC_KEEPER", "1", 1);
	}
	/* glibc's rseq area would be registered by the fresh process, not
	 * the recovered one: switch it off (docs/discount.md). */
	const char *tun = getenv("GLIBC_TUNABLES");
	char tbuf[4096];
	if (tun && *tun && !strstr(tun, "glibc.pthread.rseq"))
		snprintf(tbuf, sizeof(tbuf), "%s:glibc.pthread.rseq=0", tun);
	else
		snprintf(tbuf, sizeof(tbuf), "%s",
			tun && *tun ? tun : "glibc.pthread.rseq=0");
	setenv("GLIBC_TUNABLES", tbuf, 1);

	int pers = personality(0xffffffff);
	if (pers == -1 || (!(pers & ADDR_NO_RANDOMIZE) &&
				  personality((unsigned long)pers |
					  ADDR_NO_RANDOMIZE) == -1)) {
		fprintf(stderr, "dc-run: cannot turn address randomisation "
			"off: %s\n", strerror(errno));
		return 3;
	}
	if (tree) {
		/* process trees (dc-tree.c): the processes find the tree's
		 * directory here, and their own below it */
		setenv("DC_TREE", dir, 1);
		return dc_tree_launch(dir, argv + optind, verbose);
	}
	execvp(argv[optind], argv + optind);
	fprintf(stderr, "dc-run: %s: %s\n", argv[optind], strerror(errno));
	return 127;
}
