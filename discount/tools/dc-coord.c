/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dc-coord.c -- the coordinator of CPV-2PC and CBNDV-2PC
 *
 *   dc-coord --port P --parts N [--bind ADDR] [--dir D] [--vote-ms T]
 *            [--stats FILE] [--verbose] [--defer-ms N --defer-round R]
 *
 * Runs the two-phase commits of a computation of N participants (libdc
 * under protocol cpv-2pc or cbndv-2pc, DC_2PC_COORD=ADDR:P,
 * DC_2PC_ID=0..N-1; ADDR is 127.0.0.1 unless --bind names another of this
 * host's IPv4 addresses) and orders its rollbacks.  It reaches the
 * participants by datagram only (each datagram raises a signal in the
 * participant: twopc.c), never by process id, so they may run on other
 * hosts.  It is itself made
 * recoverable by linking it with libdc (thesis 6.2.2): its state -- the
 * participants, the epoch, the rounds and their outcomes -- is ordinary
 * memory, checkpointed (protocol manual) at each change that must
 * survive it, before the message that announces it is sent.  Run it
 * again after a crash with the same arguments: it continues from its
 * last checkpoint.
 *
 * A round R (docs/ARCHITECTURE.md, "Two-phase commit"):
 *   C1. a REQUEST from a joined participant, all N joined in the current
 *       epoch, no round open: R = last + 1 is opened; checkpoint;
 *   C2. PREPARE(R) to every participant, again every 20 ms to those that
 *       have not voted;
 *   C3. every vote yes: outcome COMMIT recorded, `committed` = R;
 *       checkpoint (THE DISTRIBUTED CHECKPOINT IS COMMITTED HERE); then
 *       DECISION(R, commit) to all, again until each acknowledges;
 *   C3'. a vote no, --vote-ms without every vote, or a participant that
 *       joins again meanwhile: outcome ABORT with the reason; the epoch
 *       moves on; checkpoint; DECISION(R, abort) to all, and ROLLBACK
 *       (below).
 * A rollback: a participant that JOINs when it already joined in the
 * current epoch is a new incarnation (it failed and recovered): the epoch
 * moves on; checkpoint; ROLLBACK(epoch) to every participant not joined
 * in the new epoch, again every 20 ms until it joins: each ends itself
 * and is restarted by its launcher, so the whole computation returns to
 * the last committed distributed checkpoint.  A participant's first JOIN
 * in an epoch is its first run, or its restart after such a rollback.
 * An EXIT (a participant's exit, committed first by a round it asked
 * for): it is marked ended, durably, then answered; an ended participant
 * is in no later round and counts as joined in every later epoch, until
 * it JOINs again.
 * After a rollback, WELCOME waits until all N joined in the new epoch:
 * every incarnation of the discarded execution has ended by then, so
 * none of its datagrams reaches a recovered participant's sockets, which
 * recovery makes after WELCOME.
 *
 * Invariants:
 *  1. A decision is durable (checkpointed) before any participant hears
 *     of it; an ASK about a round with no recorded COMMIT is answered
 *     ABORT (presumed abort), and the open round is aborted first.
 *  2. Round numbers are never reused: the opening of a round is durable
 *     before its PREPARE is sent.
 *  3. Rounds are sequential: one open at a time.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "dc.h"
#include "rio.h"
#include "twopc_layout.h"

#define MAXP 64
#define HIST 1024
#define RESEND_MS 20

enum { OPEN_NONE = 0, OPEN_VOTING = 1, OPEN_DECIDED = 2 };

/* Everything here is checkpointed by libdc with the rest of memory. */
static struct {
	unsigned nparts;
	uint64_t epoch;
	uint64_t last;          /* last round opened */
	uint64_t committed;     /* last round committed */
	uint64_t commits, aborts, rollbacks;
	int open;               /* state of round `last` */
	uint64_t opened_ms;
	int outcome[HIST];      /* 1 commit, 2 abort, by round % HIST */
	uint64_t outcome_round[HIST];
	struct part {
		struct sockaddr_in addr;
		int pid;                /* for messages only */
		uint64_t incarnation;   /* the JOIN's: random per start */
		uint64_t joined_epoch;  /* epoch + 1 when joined in it; 0 */
		bool voted, yes, acked;
		bool ended;     /* exited after a round committed its exit
		                 * (EXIT): in no later round or rollback */
		int code;
	} p[MAXP];
} co;

static int sock = -1;
static bool verbose;
static unsigned vote_ms = 2000;
static const char *stats_path;
/* --defer-ms N --defer-round R (tests: a slow coordinator): a round
 * requested after round R committed opens only N ms after it */
static unsigned defer_ms;
static uint64_t defer_round, defer_from;

static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static void
say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
say(const char *fmt, ...)
{
	if (!verbose)
		return;
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "dc-coord: ");
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* Make the coordinator's state durable (invariants 1, 2). */
static void
persist(void)
{
	int rc = dc_checkpoint();
	if (rc < 0) {
		fprintf(stderr, "dc-coord: checkpoint: %s: %s\n",
			dc_strerror(rc), dc_errormsg());
		exit(70);
	}
	if (rc == 1) {
		/* resumed here after a crash: an open round's votes come
		 * again, its time starts over */
		fprintf(stderr, "dc-coord: recovered (epoch %lu, round %lu, "
			"committed %lu)\n", (unsigned long)co.epoch,
			(unsigned long)co.last, (unsigned long)co.committed);
		co.opened_ms = now_ms();
	}
}

static void
send_to(unsigned k, int type, uint64_t round, int status, int reason,
	int code)
{
	struct part *q = &co.p[k];
	if (q->addr.sin_family != AF_INET)
		return;
	struct dc_2pc_msg m = { .magic = DC_2PC_MAGIC,
		.version = DC_2PC_VERSION, .type = (uint16_t)type, .part = k,
		.nparts = co.nparts, .round = round, .epoch = co.epoch,
		.pid = (int32_t)getpid(), .status = status, .reason = reason,
		.code = code };
	m.checksum = rio_checksum(&m, 56, DC_2PC_SEED);
	sendto(sock, &m, sizeof(m), 0, (struct sockaddr *)&q->addr,
		sizeof(q->addr));
}

static void
stats(void)
{
	if (!stats_path)
		return;
	FILE *f = fopen(stats_path, "w");
	if (!f)
		return;
	unsigned joined = 0, ended = 0;
	for (unsigned k = 0; k < co.nparts; k++) {
		joined += co.p[k].joined_epoch == co.epoch + 1;
		ended += co.p[k].ended;
	}
	fprintf(f, "rounds=%lu\ncommits=%lu\naborts=%lu\nrollbacks=%lu\n"
		"epoch=%lu\njoined=%u\nended=%u\n", (unsigned long)co.last,
		(unsigned long)co.commits, (unsigned long)co.aborts,
		(unsigned long)co.rollbacks, (unsigned long)co.epoch, joined,
		ended);
	fclose(f);
}

/* The participants a rollback has not reached yet (not joined in this
 * epoch) are told to end; sent again every RESEND_MS until they join. */
static void
roll_back_others(void)
{
	if (co.epoch == 0)
		return;
	for (unsigned k = 0; k < co.nparts; k++)
		if (co.p[k].joined_epoch != co.epoch + 1 && !co.p[k].ended)
			send_to(k, DC_2PC_ROLLBACK, co.committed, 0, 0, 0);
}

/* C3': the open round aborts; everyone goes back to `committed`. */
static void
abort_round(int reason, int blame)
{
	uint64_t r = co.last;
	co.outcome[r % HIST] = 2;
	co.outcome_round[r % HIST] = r;
	co.open = OPEN_NONE;
	co.aborts++;
	co.epoch++;
	persist(); /* invariant 1: the abort durable before it is told */
	fprintf(stderr, "dc-coord: round %lu aborted (reason %d, participant "
		"%d); the computation returns to round %lu\n",
		(unsigned long)r, reason, blame, (unsigned long)co.committed);
	for (unsigned k = 0; k < co.nparts; k++)
		send_to(k, DC_2PC_DECISION, r, 0, reason, blame);
	roll_back_others();
	stats();
}

/* Every participant joined in this epoch, or ended. */
static bool
all_joined(void)
{
	for (unsigned k = 0; k < co.nparts; k++)
		if (co.p[k].joined_epoch != co.epoch + 1 && !co.p[k].ended)
			return false;
	return true;
}

/* C3 once every participant that has not ended voted yes. */
static void
decide(void)
{
	for (unsigned j = 0; j < co.nparts; j++)
		if (!co.p[j].voted && !co.p[j].ended)
			return;
	/* C3: the distributed checkpoint commits */
	co.outcome[co.last % HIST] = 1;
	co.outcome_round[co.last % HIST] = co.last;
	co.committed = co.last;
	co.open = OPEN_DECIDED;
	co.commits++;
	if (co.last == defer_round && defer_ms)
		defer_from = now_ms();
	persist();
	say("round %lu committed", (unsigned long)co.last);
	/* to the ended too: one whose EXIT overtook its vote waits for it */
	for (unsigned j = 0; j < co.nparts; j++)
		send_to(j, DC_2PC_DECISION, co.last, 1, 0, 0);
	stats();
}

/* A decided round is closed once every participant that has not ended
 * acknowledged it. */
static void
close_if_acked(void)
{
	for (unsigned j = 0; j < co.nparts; j++)
		if (!co.p[j].acked && !co.p[j].ended)
			return;
	co.open = OPEN_NONE;
}

static void
prepare_all(bool all)
{
	for (unsigned k = 0; k < co.nparts; k++) {
		if ((!all && co.p[k].voted) || co.p[k].ended)
			continue;
		send_to(k, DC_2PC_PREPARE, co.last, 0, 0, 0);
	}
}

static void
on_msg(const struct dc_2pc_msg *m, const struct sockaddr_in *from)
{
	if (m->part >= co.nparts) {
		struct dc_2pc_msg n = { .magic = DC_2PC_MAGIC,
			.version = DC_2PC_VERSION, .type = DC_2PC_WELCOME,
			.part = m->part, .nparts = co.nparts, .status = -1 };
		n.checksum = rio_checksum(&n, 56, DC_2PC_SEED);
		sendto(sock, &n, sizeof(n), 0, (const struct sockaddr *)from,
			sizeof(*from));
		return;
	}
	unsigned k = m->part;
	struct part *q = &co.p[k];
	switch (m->type) {
	case DC_2PC_JOIN: {
		/* a participant that had ended runs again (restarted at
		 * its exit's round): in the rounds again */
		bool was_ended = q->ended;
		q->ended = false;
		bool again = q->joined_epoch == co.epoch + 1 &&
			q->incarnation != m->gen;
		q->addr = *from;
		q->pid = m->pid;
		q->incarnation = m->gen;
		if (again) {
			/* a new incarnation: the computation rolls back */
			co.rollbacks++;
			if (co.open == OPEN_VOTING) {
				abort_round(DC_2PC_R_RECOVERED, (int)k);
			} else {
				co.epoch++;
				persist();
				fprintf(stderr, "dc-coord: participant %u "
					"recovered; the computation returns to "
					"round %lu\n", k,
					(unsigned long)co.committed);
			}
		}
		if (q->joined_epoch != co.epoch + 1 || again || was_ended) {
			q->joined_epoch = co.epoch + 1;
			persist();
		}
		say("participant %u joined (pid %d, epoch %lu)", k, m->pid,
			(unsigned long)co.epoch);
		roll_back_others();
		/* after a rollback, WELCOME only once every incarnation of
		 * the discarded execution has ended (all joined again), then
		 * to all; a participant sends JOIN again until it comes */
		if (co.epoch == 0)
			send_to(k, DC_2PC_WELCOME, co.committed, 0, 0, 0);
		else if (all_joined())
			for (unsigned j = 0; j < co.nparts; j++)
				send_to(j, DC_2PC_WELCOME, co.committed, 0, 0,
					0);
		stats();
		break;
	}
	case DC_2PC_REQUEST:
		q->addr = *from;
		if (co.open == OPEN_VOTING) {
			prepare_all(false);
			break;
		}
		if (!all_joined() || q->joined_epoch != co.epoch + 1)
			break; /* the requester asks again */
		if (defer_from && co.committed == defer_round &&
		    now_ms() - defer_from < defer_ms)
			break;
		/* C1 */
		co.last++;
		co.open = OPEN_VOTING;
		co.opened_ms = now_ms();
		for (unsigned j = 0; j < co.nparts; j++) {
			co.p[j].voted = co.p[j].yes = co.p[j].acked = false;
			co.p[j].code = 0;
		}
		persist(); /* invariant 2 */
		co.opened_ms = now_ms();
		say("round %lu opened by participant %u",
			(unsigned long)co.last, k);
		prepare_all(true);
		break;
	case DC_2PC_VOTE:
		if (co.open != OPEN_VOTING || m->round != co.last)
			break;
		q->voted = true;
		q->yes = m->status == 0;
		q->code = m->code;
		if (!q->yes) {
			abort_round(DC_2PC_R_NO, (int)k);
			break;
		}
		decide();
		break;
	case DC_2PC_ACK:
		if (m->round == co.last && co.open == OPEN_DECIDED) {
			q->acked = true;
			close_if_acked();
		}
		break;
	case DC_2PC_EXIT:
		/* the participant's exit was committed by a round it asked
		 * for (twopc.c, dc__twopc_exit): every later distributed
		 * checkpoint has it ended, so no round or rollback waits
		 * for it; durable before the answer lets it end */
		q->addr = *from;
		if (!q->ended) {
			q->ended = true;
			persist();
			say("participant %u ended (status %d)", k,
				(int)m->status);
			if (co.open == OPEN_VOTING)
				decide();
			else if (co.open == OPEN_DECIDED)
				close_if_acked();
			stats();
		}
		send_to(k, DC_2PC_ANSWER, m->round, 1, 0, DC_2PC_EXIT);
		break;
	case DC_2PC_ASK: {
		q->addr = *from;
		uint64_t r = m->round;
		if (co.open == OPEN_VOTING && r == co.last)
			abort_round(DC_2PC_R_RECOVERED, (int)k);
		int out = r >= 1 && co.outcome_round[r % HIST] == r ?
			co.outcome[r % HIST] : 2;
		struct dc_2pc_msg n = { .magic = DC_2PC_MAGIC,
			.version = DC_2PC_VERSION, .type = DC_2PC_ANSWER,
			.part = k, .nparts = co.nparts, .round = r,
			.epoch = co.epoch, .status = out == 1 };
		n.checksum = rio_checksum(&n, 56, DC_2PC_SEED);
		sendto(sock, &n, sizeof(n), 0, (const struct sockaddr *)from,
			sizeof(*from));
		say("participant %u asked about round %lu: %s", k,
			(unsigned long)r, out == 1 ? "committed" : "aborted");
		break;
	}
	default:
		break;
	}
}

static void
usage(void)
{
	fprintf(stderr, "usage: dc-coord --port P --parts N [--bind ADDR] "
		"[--dir D] [--vote-ms T] [--stats FILE] [--verbose]\n");
	exit(2);
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "port", required_argument, 0, 'p' },
		{ "parts", required_argument, 0, 'n' },
		{ "bind", required_argument, 0, 'b' },
		{ "dir", required_argument, 0, 'd' },
		{ "vote-ms", required_argument, 0, 't' },
		{ "stats", required_argument, 0, 's' },
		{ "verbose", no_argument, 0, 'v' },
		{ "defer-ms", required_argument, 0, 'D' },
		{ "defer-round", required_argument, 0, 'R' },
		{ 0, 0, 0, 0 } };
	unsigned long port = 0, n = 0;
	const char *dir = NULL;
	struct in_addr bind_addr = { htonl(INADDR_LOOPBACK) };
	int c;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'p': port = strtoul(optarg, NULL, 10); break;
		case 'n': n = strtoul(optarg, NULL, 10); break;
		case 'b':
			if (inet_pton(AF_INET, optarg, &bind_addr) != 1) {
				fprintf(stderr, "dc-coord: --bind %s: not an "
					"IPv4 address\n", optarg);
				usage();
			}
			break;
		case 'd': dir = optarg; break;
		case 't': vote_ms = (unsigned)strtoul(optarg, NULL, 10); break;
		case 's': stats_path = optarg; break;
		case 'v': verbose = true; break;
		case 'D': defer_ms = (unsigned)strtoul(optarg, NULL, 10); break;
		case 'R': defer_round = strtoull(optarg, NULL, 10); break;
		default: usage();
		}
	}
	if (port == 0 || port > 65535 || n == 0 || n > MAXP || vote_ms == 0) {
		fprintf(stderr, "dc-coord: --port 1..65535 and --parts 1..%d "
			"are needed\n", MAXP);
		usage();
	}
	co.nparts = (unsigned)n;
	struct dc_opts o = { .dir = dir, .protocol = DC_MANUAL,
		.verbose = verbose };
	int rc = dc_init(&o);
	if (rc) {
		fprintf(stderr, "dc-coord: dc_init: %s: %s\n",
			dc_strerror(rc), dc_errormsg());
		return 70;
	}
	/* the socket is opened under libdc: a recovered coordinator has it
	 * back, bound to the same port, from its checkpoint */
	sock = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in a = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)port), .sin_addr = bind_addr };
	int one = 1;
	setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (sock < 0 || bind(sock, (struct sockaddr *)&a, sizeof(a)) != 0) {
		fprintf(stderr, "dc-coord: port %lu: %s\n", port,
			strerror(errno));
		return 1;
	}
	persist(); /* the bound socket in the checkpoint */
	uint64_t last_send = 0;
	for (;;) {
		struct pollfd p = { .fd = sock, .events = POLLIN };
		bool rolling = co.epoch > 0 && !all_joined();
		int t = co.open != OPEN_NONE || rolling ? RESEND_MS : 1000;
		int k = poll(&p, 1, t);
		if (k > 0) {
			struct dc_2pc_msg m;
			struct sockaddr_in from;
			socklen_t fl = sizeof(from);
			ssize_t r = recvfrom(sock, &m, sizeof(m), 0,
				(struct sockaddr *)&from, &fl);
			if (r == (ssize_t)sizeof(m) &&
			    m.magic == DC_2PC_MAGIC &&
			    m.version == DC_2PC_VERSION &&
			    m.checksum == rio_checksum(&m, 56, DC_2PC_SEED))
				on_msg(&m, &from);
		}
		uint64_t now = now_ms();
		if (co.open == OPEN_VOTING && now - co.opened_ms > vote_ms) {
			int blame = -1;
			for (unsigned j = 0; j < co.nparts; j++)
				if (!co.p[j].voted && !co.p[j].ended)
					blame = (int)j;
			abort_round(DC_2PC_R_TIMEOUT, blame);
		}
		if (now - last_send < RESEND_MS)
			continue;
		last_send = now;
		if (co.open == OPEN_VOTING)
			prepare_all(false);
		else if (co.open == OPEN_DECIDED)
			for (unsigned j = 0; j < co.nparts; j++)
				if (!co.p[j].acked)
					send_to(j, DC_2PC_DECISION, co.last, 1,
						0, 0);
		if (rolling)
			roll_back_others();
	}
}
