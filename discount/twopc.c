/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * twopc.c -- CPV-2PC and CBNDV-2PC: a participant's side of the
 *            distributed checkpoint (thesis 6.2.2)
 *
 * Under the two protocols a computation of several processes commits
 * together: before any participant executes a visible event (a write to
 * a terminal, pipe or character device; sends between participants are
 * not visible), every participant takes a checkpoint and the coordinator
 * (tools/dc-coord.c) commits them as one, by two-phase commit over UDP.
 * CBNDV-2PC starts the round only when the process about to do the
 * visible event has done a non-deterministic event since its last commit.
 *
 * The participant's state lives beside its checkpoint directory DIR, in
 * DIR/2pc-state: the state record (twopc_layout.h), two slots.
 *
 * The prepared checkpoint beside the committed one.  A round that aborts
 * must bring the participant back to its generation g, its part of the
 * last committed round C.  The prepared commit of g + 1 overwrites almost
 * nothing of g: its redo segment goes past the end of the log (redo.c
 * invariant 1), and with dc__vol.redo_hold set it does not flush the log
 * into the shadow (redo.c invariant 5); the one record it overwrites is
 * its commit record's slot, (g + 1) & 1, which holds g - 1's, a record no
 * recovery needs.  The undo of the prepare is therefore: clear that slot.
 * Nothing is copied: a round costs the prepared commit and two records.
 *
 * Persist order of round R (participant at local generation g, part of
 * committed round C):
 *   P1. record HOLDING(R, C, gen_base g, gen_prep g + 1), durable: the
 *       undo's description.  A crash before it is durable: the record
 *       still says IDLE, DIR holds g.
 *   P2. libdc's commit of g + 1 (ckpt.c), the flush held back: the
 *       prepared checkpoint.  From P1 on, recovery asks the coordinator
 *       what became of R before it reads DIR.
 *   P3. VOTE yes(R, g + 1) sent; the participant waits for the decision,
 *       sending the vote again every DC_2PC_RESEND_MS.
 *   P4. COMMIT: record IDLE(C = R), durable, then ACK; then the flush P2
 *       held back, if one is due (dc__redo_settle); the program goes on
 *       (the initiator's visible event is released only here).
 *       ABORT: record ABORTED(R), durable; the process ends (SIGKILL):
 *       its launcher restarts it, and recovery undoes the prepare.
 *
 * Recovery (dc__twopc_setup, before libdc opens DIR):
 *   IDLE      DIR is the committed part: nothing to do.
 *   HOLDING   ASK(R): the coordinator answers committed (the record goes
 *             IDLE(R): DIR holds g + 1) or aborted (ABORTED(R)); a round
 *             it never saw all votes of is aborted (presumed abort).
 *   ABORTED   U1. every commit record of DIR/ctl past gen_base cleared,
 *             durable (refused, nothing changed, if the shadow holds a
 *             generation past gen_base: the prepare was flushed into it);
 *             U2. record IDLE(C).  Redone from the start if the process
 *             dies half way (U1 is idempotent).
 *   Then JOIN: the coordinator rolls the other participants back (it
 *   tells them to end with ROLLBACK; their launchers restart them) when
 *   this process is a new incarnation in the current epoch.
 *
 * Invariants:
 *  1. A participant votes yes only after the record naming its base
 *     generation (P1) and its prepared checkpoint (P2) are durable, in
 *     that order: no prepared commit record exists that a HOLDING or
 *     ABORTED record does not name.
 *  2. A participant continues past a round only once the coordinator's
 *     decision is known; the decision is durable at the coordinator
 *     (dc-coord checkpoints before it sends it).
 *  3. Whenever the record says HOLDING or ABORTED, DIR less the commit
 *     records past gen_base is generation gen_base: the shadow, `applied`
 *     and the redo segments up to gen_base untouched since P1 (redo.c
 *     invariant 5).
 *  4. No local commit happens outside a round once the first checkpoint
 *     is taken (ckpt.c routes dc__commit here).
 *
 * State machine of the record: (none) --first checkpoint--> IDLE(0)
 * --hold (P1)--> HOLDING(R) --commit (P4)--> IDLE(R)
 *                HOLDING(R) --abort (P4, or ASK)--> ABORTED(R)
 *                ABORTED(R) --undo (recovery U1, U2)--> IDLE(C).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ckpt_layout.h"
#include "dc_int.h"
#include "twopc_layout.h"

#define DC_2PC_RESEND_MS 20
#define DC_2PC_WAIT_MS 30000 /* longest wait for the coordinator */

static const char *const files[] = { "ctl", "shadow", "redo", "ndlog",
	"fundo", "mundo" };
#define NFILES (sizeof(files) / sizeof(files[0]))

bool
dc__twopc_parse(const char *name, enum dc_protocol *out)
{
	if (name && !strcasecmp(name, "cpv-2pc")) {
		*out = DC_CPV_2PC;
		return true;
	}
	if (name && !strcasecmp(name, "cbndv-2pc")) {
		*out = DC_CBNDV_2PC;
		return true;
	}
	return false;
}

static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ---- datagrams ---- */

static void
msg_send(int type, uint64_t round, int32_t status, int32_t code,
	uint64_t gen)
{
	struct dc_2pc_msg m = { .magic = DC_2PC_MAGIC,
		.version = DC_2PC_VERSION, .type = (uint16_t)type,
		.part = dc__vol.tp_part, .round = round,
		.epoch = dc__vol.tp_epoch, .gen = gen, .status = status,
		.code = code };
	m.pid = (int32_t)dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0);
	m.checksum = rio_checksum(&m, 56, DC_2PC_SEED);
	dc__sys6(SYS_sendto, dc__vol.tp_fd, (long)&m, sizeof(m), 0,
		(long)&dc__vol.tp_coord, sizeof(dc__vol.tp_coord));
}

/* Next valid datagram within ms milliseconds: 1, or 0 on time out. */
static int
msg_recv(struct dc_2pc_msg *m, int ms)
{
	struct pollfd p = { .fd = dc__vol.tp_fd, .events = POLLIN };
	for (;;) {
		long r = dc__sys6(SYS_recvfrom, dc__vol.tp_fd, (long)m,
			sizeof(*m), MSG_DONTWAIT, 0, 0);
		if (r == (long)sizeof(*m) && m->magic == DC_2PC_MAGIC &&
		    m->version == DC_2PC_VERSION &&
		    m->checksum == rio_checksum(m, 56, DC_2PC_SEED))
			return 1;
		if (r >= 0 || r == -EINTR)
			continue; /* not a datagram of ours: dropped */
		if (ms <= 0)
			return 0;
		struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
		long n = dc__sys6(SYS_ppoll, (long)&p, 1, (long)&ts, 0, 8, 0);
		ms = 0; /* one wait per call: the callers' loops resend */
		if (n <= 0 && n != -EINTR)
			return 0;
	}
}

/* ---- the state record ---- */

static char *
side(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", dc__vol.dir, name);
	return buf;
}

static int
state_read(struct dc_2pc_state *out)
{
	char p[PATH_MAX];
	int fd = open(side(p, sizeof(p), "2pc-state"), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : dc__err(-errno, "%s: %s", p,
			strerror(errno));
	struct dc_2pc_state s[2];
	ssize_t r = pread(fd, s, sizeof(s), 0);
	close(fd);
	const struct dc_2pc_state *best = NULL;
	for (int i = 0; i < 2 && r >= (ssize_t)(64 * (i + 1)); i++)
		if (s[i].magic == DC_2PC_STATE_MAGIC &&
		    s[i].checksum == rio_checksum(&s[i], 56, DC_2PC_SEED) &&
		    (best == NULL || s[i].seq > best->seq))
			best = &s[i];
	if (best == NULL)
		return 0;
	if (best->version != DC_2PC_STATE_VERSION)
		return dc__err(DC_EVERSION, "%s: state record format %u, this "
			"libdc reads format %u only (format 1 kept a full copy "
			"of the directory in 2pc-held); finish or discard the "
			"computation with the libdc that started it", p,
			(unsigned)best->version, DC_2PC_STATE_VERSION);
	*out = *best;
	return 1;
}

/* Write the next record (slot seq & 1) and make it durable. */
static int
state_write(int state, uint64_t round, uint64_t committed, uint64_t base)
{
	struct dc_2pc_state s = { .magic = DC_2PC_STATE_MAGIC,
		.version = DC_2PC_STATE_VERSION, .state = (uint16_t)state,
		.seq = dc__vol.tp_st.seq + 1, .round = round,
		.committed = committed, .gen_base = base,
		.gen_prep = base ? base + 1 : 0 };
	s.checksum = rio_checksum(&s, 56, DC_2PC_SEED);
	char p[PATH_MAX];
	int fd = open(side(p, sizeof(p), "2pc-state"),
		O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		return dc__err(-errno, "%s: %s", p, strerror(errno));
	ssize_t w = pwrite(fd, &s, sizeof(s), (off_t)(64 * (s.seq & 1)));
	/* The record is what recovery acts on: durable before the step it
	 * announces (the prepared commit, the release, the undo) happens. */
	int rc = w == (ssize_t)sizeof(s) ? dc__sync_fd(fd) :
		dc__err(w < 0 ? -errno : -EIO, "%s: write", p);
	close(fd);
	if (rc == 0)
		dc__vol.tp_st = s;
	return rc;
}

/* ---- copies (a fork's child, tree.c) ---- */

/* Copy src to dst (created), holes kept, made durable. */
static int
copy_file(int sdir, int ddir, const char *name, const char *dname)
{
	int s = openat(sdir, name, O_RDONLY | O_CLOEXEC);
	if (s < 0)
		return errno == ENOENT ? 0 : dc__err(-errno, "open %s: %s",
			name, strerror(errno));
	int d = openat(ddir, dname, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC,
		0600);
	if (d < 0) {
		int e = errno;
		close(s);
		return dc__err(-e, "create %s: %s", dname, strerror(e));
	}
	struct stat st;
	int rc = fstat(s, &st) == 0 && ftruncate(d, st.st_size) == 0 ? 0 :
		-errno;
	off_t off = 0;
	while (rc == 0 && off < st.st_size) {
		off_t a = lseek(s, off, SEEK_DATA);
		if (a < 0)
			break; /* only a hole is left */
		off_t b = lseek(s, a, SEEK_HOLE);
		if (b < 0)
			b = st.st_size;
		loff_t in = a, out = a;
		while (in < b) {
			ssize_t n = copy_file_range(s, &in, d, &out,
				(size_t)(b - in), 0);
			if (n <= 0) {
				rc = n < 0 ? -errno : -EIO;
				break;
			}
		}
		off = b;
	}
	/* The copy is the committed part recovery may have to put back
	 * (invariant 3): durable before the record that names it. */
	if (rc == 0)
		rc = dc__sync_fd(d);
	close(s);
	close(d);
	return rc ? dc__err(rc, "copy %s: %s", name, strerror(-rc)) : 0;
}

/* ---- the undo of an aborted prepare ---- */

static bool
names_prepared(const struct dc_commit *c, uint64_t base)
{
	return c->magic == DC_COMMIT_MAGIC && c->gen > base;
}

/*
 * U1: the commit records of DIR/ctl past generation base cleared, durable
 * (invariant 3: the rest of DIR is generation base).  Read and written
 * through the file: libdc has not mapped the directory yet.  Refused,
 * with nothing changed, when the shadow holds a generation past base --
 * a prepare that flushed into it, which no record can undo.
 */
static int
undo_prepared(uint64_t base)
{
	char p[PATH_MAX];
	int fd = open(side(p, sizeof(p), "ctl"), O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return dc__err(DC_ECORRUPT, "%s: %s (the record says a round "
			"aborted)", p, strerror(errno));
	struct {
		struct dc_commit slot[2];
		char gap[DC_CTL_WORDS_OFF - DC_CTL_COMMIT_OFF -
			2 * sizeof(struct dc_commit)];
		struct dc_words w;
	} b;
	const off_t at = RIO_POOL_HDR_SIZE + DC_CTL_COMMIT_OFF;
	int rc = 0;
	if (pread(fd, &b, sizeof(b), at) != (ssize_t)sizeof(b))
		rc = dc__err(DC_ECORRUPT, "%s: short read of the commit "
			"records", p);
	else if (b.w.applied > base)
		rc = dc__err(DC_ECORRUPT, "%s: the shadow holds generation "
			"%lu, past %lu, the part of the last committed round: "
			"the aborted round's prepared checkpoint was applied to "
			"it", p, (unsigned long)b.w.applied,
			(unsigned long)base);
	bool cleared = false;
	for (int i = 0; i < 2 && !rc; i++) {
		if (!names_prepared(&b.slot[i], base))
			continue;
		static const struct dc_commit zero;
		off_t o = at + (off_t)(i * (int)sizeof(zero));
		if (pwrite(fd, &zero, sizeof(zero), o) != (ssize_t)sizeof(zero))
			rc = dc__err(-EIO, "%s: clearing commit slot %d", p, i);
		cleared = true;
	}
	/* the cleared record: durable before the state record says IDLE,
	 * which would let a later crash skip the undo and recover the
	 * aborted generation */
	if (!rc && cleared)
		rc = dc__sync_fd(fd);
	close(fd);
	return rc;
}

/* ---- setup and recovery ---- */

static int
ask(uint64_t round, int *committed)
{
	struct dc_2pc_msg m;
	uint64_t end = now_ms() + DC_2PC_WAIT_MS;
	while (now_ms() < end) {
		msg_send(DC_2PC_ASK, round, 0, 0, 0);
		while (msg_recv(&m, DC_2PC_RESEND_MS * 5))
			if (m.type == DC_2PC_ANSWER && m.round == round) {
				*committed = m.status == 1;
				return 0;
			}
	}
	return dc__err(DC_EFATAL, "2pc: no answer from the coordinator about "
		"round %lu in %d ms", (unsigned long)round, DC_2PC_WAIT_MS);
}

static int
resolve(void)
{
	int rc = state_read(&dc__vol.tp_st);
	if (rc <= 0)
		return rc;
	const struct dc_2pc_state *s = &dc__vol.tp_st;
	if (s->state == DC_2PC_HOLDING) {
		int committed = 0;
		if ((rc = ask(s->round, &committed)))
			return rc;
		if (dc__vol.tp_verbose)
			dc__say("2pc: round %lu was %s", (unsigned long)s->round,
				committed ? "committed" : "aborted");
		if (committed)
			return state_write(DC_2PC_IDLE, s->round, s->round, 0);
		if ((rc = state_write(DC_2PC_ABORTED, s->round, s->committed,
			     s->gen_base)))
			return rc;
	}
	if (s->state == DC_2PC_ABORTED) {
		if ((rc = undo_prepared(s->gen_base)))
			return rc;
		return state_write(DC_2PC_IDLE, s->committed, s->committed, 0);
	}
	return 0;
}

static int
join(void)
{
	struct dc_2pc_msg m;
	uint64_t end = now_ms() + DC_2PC_WAIT_MS;
	while (now_ms() < end) {
		msg_send(DC_2PC_JOIN, dc__vol.tp_st.committed, 0, 0,
			dc__vol.tp_incarnation);
		/* JOIN again every 100 ms whatever else arrives meanwhile (a
		 * rollback's ROLLBACKs come every 20 ms until this JOIN is
		 * seen in the new epoch) */
		uint64_t next = now_ms() + DC_2PC_RESEND_MS * 5, t;
		while ((t = now_ms()) < next)
			if (msg_recv(&m, (int)(next - t)) &&
			    m.type == DC_2PC_WELCOME) {
				if (m.status < 0)
					return dc__err(DC_EPROTOCOL, "2pc: the "
						"coordinator refused participant "
						"%u (%d participants)",
						dc__vol.tp_part, (int)m.nparts);
				dc__vol.tp_epoch = m.epoch;
				return 0;
			}
	}
	return dc__err(DC_EFATAL, "2pc: no coordinator at the address of "
		"DC_2PC_COORD in %d ms", DC_2PC_WAIT_MS);
}

int
dc__twopc_setup(int protocol)
{
	dc__vol.twopc = protocol == DC_CPV_2PC || protocol == DC_CBNDV_2PC;
	dc__vol.tp_fd = -1;
	if (!dc__vol.twopc)
		return 0;
	if (dc__vol.tracking == DC_TRACK_UNDO)
		return dc__err(DC_EUNSUPPORTED, "2pc: tracking \"undo\" writes "
			"the checkpoint in place, so a prepared checkpoint "
			"could not be aborted; use uffd or wp");
	const char *co = getenv("DC_2PC_COORD");
	const char *id = getenv("DC_2PC_ID");
	dc__vol.tp_verbose = getenv("DC_VERBOSE") != NULL;
	if (co == NULL || id == NULL || *id == '\0')
		return dc__err(-EINVAL, "2pc: DC_2PC_COORD (host:port of "
			"dc-coord) and DC_2PC_ID (this participant's index) "
			"must be set");
	char host[64];
	const char *colon = strrchr(co, ':');
	char *end;
	unsigned long port = colon ? strtoul(colon + 1, &end, 10) : 0;
	unsigned long part = strtoul(id, &end, 10);
	if (colon == NULL || (size_t)(colon - co) >= sizeof(host) ||
	    port == 0 || port > 65535 || *end != '\0' ||
	    part > (getenv("DC_TREE") ? 4194304ul : 1023ul))
		return dc__err(-EINVAL, "2pc: DC_2PC_COORD '%s' / DC_2PC_ID "
			"'%s': want host:port and 0..1023", co, id);
	memcpy(host, co, (size_t)(colon - co));
	host[colon - co] = '\0';
	struct sockaddr_in *a = (struct sockaddr_in *)&dc__vol.tp_coord;
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
		return dc__err(-EINVAL, "2pc: DC_2PC_COORD host '%s' is not "
			"an IPv4 address", host);
	dc__vol.tp_part = (uint32_t)part;
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return dc__err(-errno, "2pc: socket: %s", strerror(errno));
	dc__vol.tp_fd = dc__own_fd(fd);
	/* The coordinator's signal may come once joined, before libdc's
	 * handler is in place (sud.c installs it): ignored until then.  It
	 * is raised here by the kernel, not sent by the coordinator: every
	 * datagram arriving on this socket raises SIGRTMAX in this process
	 * (O_ASYNC, F_SETSIG), so a coordinator on another host reaches a
	 * participant blocked in a call or computing in program code. */
	struct sigaction ign = { .sa_handler = SIG_IGN };
	sigaction(DC__TIMER_SIG, &ign, NULL);
	struct f_owner_ex own = { .type = F_OWNER_PID, .pid = getpid() };
	fd = dc__vol.tp_fd;
	if (fd < 0 || fcntl(fd, F_SETOWN_EX, &own) != 0 ||
	    fcntl(fd, F_SETSIG, DC__TIMER_SIG) != 0 ||
	    fcntl(fd, F_SETFL, O_ASYNC) != 0)
		return dc__err(-errno, "2pc: signal on arrival (O_ASYNC): %s",
			strerror(errno));
	/* the incarnation: tells the coordinator this start from an earlier
	 * one, whatever the pids on other hosts */
	if (getrandom(&dc__vol.tp_incarnation,
		    sizeof(dc__vol.tp_incarnation), 0) !=
	    (ssize_t)sizeof(dc__vol.tp_incarnation))
		return dc__err(-errno, "2pc: getrandom: %s", strerror(errno));
#ifdef DC_TEST_CRASHPOINTS
	const char *tf = getenv("DC_TEST_2PC_FAIL");
	snprintf(dc__vol.tp_fail, sizeof(dc__vol.tp_fail), "%s", tf ? tf : "");
#endif
	int rc = resolve();
	if (rc == 0)
		rc = join();
	dc__vol.tp_prepared = dc__vol.tp_st.committed;
	return rc;
}

/* The first checkpoint is the participant's part of round 0. */
int
dc__twopc_first(void)
{
	if (!dc__vol.twopc)
		return 0;
	memset(&dc__vol.tp_st, 0, sizeof(dc__vol.tp_st));
	return state_write(DC_2PC_IDLE, 0, 0, 0);
}

/* ---- rounds ---- */

/* The computation rolled back past this incarnation (another participant
 * recovered, or a round aborted): this process ends, before anything
 * else it would do; its launcher restarts it at its part of the last
 * committed round (the record needs no change: IDLE, or HOLDING, which
 * recovery resolves by ASK).  Returns false for any other message. */
static bool
rolled_back(const struct dc_2pc_msg *m)
{
	if (m->type != DC_2PC_ROLLBACK || m->epoch <= dc__vol.tp_epoch)
		return false;
	dc__say("2pc: the computation rolled back to round %lu (epoch %lu); "
		"participant %u ends to be restarted",
		(unsigned long)m->round, (unsigned long)m->epoch,
		dc__vol.tp_part);
	dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0), SIGKILL,
		0, 0, 0, 0);
	return true;
}

/* P1: the record that names what an abort undoes (HOLDING: base g, the
 * prepared g + 1).  The test build fails it while $DC_TEST_2PC_FAIL
 * exists, as on a full file system: the participant then votes no. */
static int
hold(uint64_t r, uint64_t c, uint64_t g)
{
#ifdef DC_TEST_CRASHPOINTS
	if (dc__vol.tp_fail[0] && access(dc__vol.tp_fail, F_OK) == 0)
		return dc__err(-ENOSPC, "2pc: %s exists (test: the hold fails "
			"as on a full file system)", dc__vol.tp_fail);
#endif
	return state_write(DC_2PC_HOLDING, r, c, g);
}

/* P2: the prepared commit, its flush held back (redo.c invariant 5). */
static int
prepare(void)
{
	dc__vol.tp_local = true;
#ifndef DC_BROKEN_2PC_FLUSH_PREPARED
	dc__vol.redo_hold = true;
#endif
	/* (broken build: the prepare flushes into the shadow as any commit
	 * would, overwriting pages of the base generation no undo names) */
	int rc = dc__commit();
	dc__vol.redo_hold = false;
	dc__vol.tp_local = false;
	return rc;
}

/* Take part in round r.  Returns 0 once committed, 1 when resumed by
 * recovery at its prepared checkpoint, or DC_EFATAL. */
static int
take_part(uint64_t r)
{
	uint64_t c = dc__vol.tp_st.committed, g = dc__vol.committed;
#ifndef DC_BROKEN_2PC_HOLD_LATE
	int rc = hold(r, c, g);
	bool held = rc == 0; /* recovery knows what to undo */
	if (!rc && (rc = prepare()) == 1)
		return 1; /* recovery found round r committed */
#else
	/* broken: the record naming the undo is written after the prepared
	 * commit, so a crash between the two leaves a prepared checkpoint
	 * no record names (invariant 1): recovery takes it as committed */
	int rc = prepare();
	if (rc == 1)
		return 1;
	dc__crashpoint("2pc-prepared", r);
	if (!rc)
		rc = hold(r, c, g);
	bool held = true;
#endif
#ifndef DC_BROKEN_2PC_HOLD_LATE
	/* test build: DC_CRASH_AT=2pc-prepared:R, prepared but no vote */
	dc__crashpoint("2pc-prepared", r);
#endif
	dc__vol.tp_prepared = r;
	if (rc) {
		dc__say("2pc: participant %u cannot commit round %lu: %s (%s)",
			dc__vol.tp_part, (unsigned long)r, dc_strerror(rc),
			rio_errormsg());
		msg_send(DC_2PC_VOTE, r, 1, rc, 0);
	} else {
		msg_send(DC_2PC_VOTE, r, 0, 0, dc__vol.committed);
	}
#ifdef DC_BROKEN_2PC_NO_WAIT
	/* broken: the prepared checkpoint taken as committed, no decision
	 * awaited */
	if (rc == 0)
		return state_write(DC_2PC_IDLE, r, r, 0);
#endif
	struct dc_2pc_msg m;
	uint64_t end = now_ms() + DC_2PC_WAIT_MS;
	while (now_ms() < end) {
		if (!msg_recv(&m, DC_2PC_RESEND_MS)) {
			if (rc)
				msg_send(DC_2PC_VOTE, r, 1, rc, 0);
			else
				msg_send(DC_2PC_VOTE, r, 0, 0,
					dc__vol.committed);
			continue;
		}
		if (rolled_back(&m))
			return DC_EFATAL;
		if (m.type != DC_2PC_DECISION || m.round != r)
			continue;
		if (m.status == 1 && rc == 0) {
			/* Invariant 2: released only now. */
			if ((rc = state_write(DC_2PC_IDLE, r, r, 0)))
				break;
			msg_send(DC_2PC_ACK, r, 0, 0, 0);
			/* P4: the flush the prepare held back, before any
			 * other commit (redo.c invariant 5); a failure is a
			 * failed commit: the next one stops the process */
			if ((rc = dc__redo_settle())) {
				dc__vol.fatal = true;
				dc__say("2pc: flush after round %lu: %s (%s)",
					(unsigned long)r, dc_strerror(rc),
					rio_errormsg());
			}
			return 0;
		}
		dc__say("2pc: round %lu aborted (reason %d, participant %d); "
			"participant %u rolls back to round %lu",
			(unsigned long)r, (int)m.reason, (int)m.code,
			dc__vol.tp_part, (unsigned long)c);
		/* without the record (P1 failed), DIR still holds
		 * generation g, the part of round c: nothing to undo */
		if (held)
			state_write(DC_2PC_ABORTED, r, c, g);
		break;
	}
	if (now_ms() >= end)
		dc__say("2pc: no decision for round %lu in %d ms",
			(unsigned long)r, DC_2PC_WAIT_MS);
	/* ABORT or no decision: the record says what recovery must do; the
	 * launcher restarts the process */
	dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0), SIGKILL,
		0, 0, 0, 0);
	return DC_EFATAL;
}

/* Answer what the coordinator sent.  Returns take_part's code when a
 * round was taken part in, else 0; *r is that round. */
static int
serve_one(const struct dc_2pc_msg *m, uint64_t *r)
{
	if (m->type == DC_2PC_PREPARE && m->round > dc__vol.tp_prepared) {
		*r = m->round;
		return take_part(m->round);
	}
	if (m->type == DC_2PC_DECISION && m->round <= dc__vol.tp_prepared &&
	    m->status == 1)
		msg_send(DC_2PC_ACK, m->round, 0, 0, 0);
	if (rolled_back(m))
		return DC_EFATAL;
	return 0;
}

/* The coordinator's signal (sud.c): take part in what it asks. */
void
dc__twopc_serve(void)
{
	dc__vol.tp_poked = false;
	if (!dc__vol.twopc || !dc__vol.active || dc__vol.tp_fd < 0)
		return;
	struct dc_2pc_msg m;
	uint64_t r = 0;
	while (msg_recv(&m, 0))
		if (serve_one(&m, &r) != 0)
			return;
}

/* A commit wanted (a visible event, dc_checkpoint, a full table):
 * a round.  Returns 0 once a round this process prepared in after the
 * request committed, 1 when resumed by recovery, DC_EFATAL. */
int
dc__twopc_round(void)
{
	if (dc__vol.fatal) {
		/* a failed local commit: the visible event waits for
		 * nothing, so the process stops before it */
		dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0),
			SIGKILL, 0, 0, 0, 0);
		return DC_EFATAL;
	}
#ifdef DC_BROKEN_TREE_CHILD_ALONE
	/* broken: a fork's child commits on its own, not in a round */
	if (dc__vol.tree && dc__vol.tree_forked) {
		dc__vol.tp_local = true;
		int lrc = dc__commit();
		dc__vol.tp_local = false;
		return lrc;
	}
#endif
	uint64_t base = dc__vol.tp_prepared;
	msg_send(DC_2PC_REQUEST, base, 0, 0, 0);
#ifdef DC_BROKEN_2PC_EARLY_VISIBLE
	/* broken: the visible event goes out; the round follows when the
	 * coordinator's signal comes */
	return 0;
#endif
	struct dc_2pc_msg m;
	uint64_t end = now_ms() + DC_2PC_WAIT_MS;
	while (now_ms() < end) {
		if (!msg_recv(&m, DC_2PC_RESEND_MS)) {
			msg_send(DC_2PC_REQUEST, base, 0, 0, 0);
			continue;
		}
		uint64_t r = 0;
		int rc = serve_one(&m, &r);
		if (rc != 0)
			return rc;
		if (r > base)
			return 0;
	}
	/* the visible event must not go out without its round: the
	 * process ends here, before it (its launcher starts it again) */
	dc__say("2pc: no round from the coordinator in %d ms; participant %u "
		"stops before its visible event", DC_2PC_WAIT_MS,
		dc__vol.tp_part);
	dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0), SIGKILL,
		0, 0, 0, 0);
	return DC_EFATAL;
}

/* The process ends (exit_group, outside a tree).  Its end is seen
 * outside -- its launcher, its parent -- so a round commits it first, as
 * a visible event; then the coordinator is told (EXIT, answered) and
 * leaves it out of every later round and rollback: every later
 * distributed checkpoint has it ended, so another participant's failure
 * no longer waits for a process that cannot start again. */
void
dc__twopc_exit(int status)
{
	if (!dc__vol.twopc || !dc__vol.active || dc__vol.tree)
		return;
	int rc = dc__commit();
	if (rc < 0) {
		dc__say("2pc: participant %u ends without a round: %s (%s)",
			dc__vol.tp_part, dc_strerror(rc), rio_errormsg());
		return;
	}
#ifdef DC_BROKEN_2PC_EXIT_UNTOLD
	/* broken: the coordinator is not told; a later rollback waits for
	 * this participant, which cannot start again */
	return;
#endif
	struct dc_2pc_msg m;
	uint64_t end = now_ms() + DC_2PC_WAIT_MS;
	while (now_ms() < end) {
		msg_send(DC_2PC_EXIT, dc__vol.tp_st.committed, status, 0, 0);
		uint64_t next = now_ms() + DC_2PC_RESEND_MS * 5, t;
		while ((t = now_ms()) < next) {
			if (!msg_recv(&m, (int)(next - t)))
				continue;
			if (m.type == DC_2PC_ANSWER && m.code == DC_2PC_EXIT)
				return;
			/* a round opened before the coordinator saw the
			 * EXIT: take part (resumed there by recovery, 1,
			 * the wait starts over); a rollback: end, to be
			 * restarted at the exit's round */
			uint64_t r = 0;
			int src = serve_one(&m, &r);
			if (src < 0)
				return;
			if (r != 0)
				end = now_ms() + DC_2PC_WAIT_MS;
		}
	}
	dc__say("2pc: no answer to participant %u's exit in %d ms: a later "
		"failure of another participant waits for this one",
		dc__vol.tp_part, DC_2PC_WAIT_MS);
}

/* ---- for process trees (tree.c) ---- */

void
dc__twopc_send(int type, uint64_t round, int32_t status, int32_t code,
	uint64_t gen)
{
	msg_send(type, round, status, code, gen);
}

int
dc__twopc_recv(struct dc_2pc_msg *m, int ms)
{
	return msg_recv(m, ms);
}

/* A fork's child starts from its parent's committed part: DIR's files
 * and state record copied into `to` (created), each durable. */
int
dc__twopc_copy_dir(const char *from, const char *to)
{
	int s = open(from, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (s < 0)
		return dc__err(-errno, "%s: %s", from, strerror(errno));
	int rc = mkdir(to, 0700) == 0 ? 0 : dc__err(-errno, "mkdir %s: %s",
		to, strerror(errno));
	int d = rc ? -1 : open(to, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (!rc && d < 0)
		rc = dc__err(-errno, "%s: %s", to, strerror(errno));
	for (unsigned i = 0; !rc && i < NFILES; i++)
		rc = copy_file(s, d, files[i], files[i]);
	if (!rc)
		rc = copy_file(s, d, "2pc-state", "2pc-state");
	/* the copied names: durable before the child is made from them */
	if (!rc)
		rc = dc__sync_fd(d);
	if (d >= 0)
		close(d);
	close(s);
	return rc;
}
