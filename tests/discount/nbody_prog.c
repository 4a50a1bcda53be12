/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * nbody_prog.c -- a TreadMarks-like parallel Barnes-Hut N-body over UDP
 *                 (the thesis' Figure 6.6 application, written for the
 *                 benchmark and the 2PC kill tests)
 *
 *   nbody RANK NPROC PORT BODIES STEPS PRINT_EVERY
 *
 * NPROC processes, rank r at port PORT + r of 127.0.0.1, or of the r-th
 * IPv4 address of $NBODY_HOSTS (comma-separated: ranks on other hosts,
 * e.g. network namespaces).  Each owns
 * BODIES / NPROC bodies; every step it sends its bodies' positions and
 * masses to every other rank (the "diffs"), waits for theirs, builds the
 * Barnes-Hut octree over all bodies, computes the forces on its own and
 * moves them.  Rank 0 prints the system's energy and centre of mass every
 * PRINT_EVERY steps and at the end -- the computation's only visible
 * events.  Messages carry the step; a rank keeps its last two steps' to
 * send again to a rank that asks (a lost datagram, a restarted peer).
 * A rank that lacks a peer's message of its step sends its own again
 * every 20 ms marked ASK: the peer answers (ANSWER) with its message of
 * that step even when it has ours already.  (Without the mark, three
 * ranks rolled back with one message each lost in a ring -- 1 lacks 2's,
 * 2 lacks 3's, 3 lacks 1's -- sent to each other for ever.)
 *
 * The result does not depend on the order messages arrive in (the tree
 * is built by body index), so a failure-free run and a recovered one
 * print the same lines.
 *
 * $NBODY_PROTOCOL (a dc protocol name, or unset/"none": no libdc) and
 * $DC_DIR choose the checkpointing.  Exit: 0 done; 1 dc_init failed;
 * 2 usage; 3 the ranks disagree about the step (an inconsistent
 * recovery: a rank two steps ahead of this one).  A rank left behind by
 * an inconsistent recovery waits for steps no one sends again: the
 * computation never ends.
 *
 * $NBODY_LOSE=STEP (a test of the resend rule): each rank loses every
 * message of step STEP from the next rank, (r + 1) % NPROC, except its
 * answers: a ring of lost datagrams, as a rollback can leave, that only
 * asking mends.
 *
 * $NBODY_DEAF=MS (a test of the end, finish()): rank 2 loses every
 * message of the last step from rank 3 that comes before it is at that
 * step or in its first MS ms there, answers too, as a rank whose socket
 * a rollback made again after rank 3 sent; rank 3 itself has every
 * message at once, and must not end before rank 2 has its.
 *
 * $NBODY_EXIT_GATE=FILE (the kill tests): a rank that is done ends only
 * once FILE exists (at most 2 min), so that a test can hold a rank alive
 * after the computation (to kill it there) or let its last rollback end
 * before any rank does.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <dc.h>

#define MAXB 8192
#define MAXP 8
#define NB_MAGIC 0x4e424f44u
#define END_STEP 0xffffffffu /* the end's messages (finish()) */

struct body {
	double x[3], v[3], m;
};
struct wire {
	double x[3], m;
};
struct hdr {
	uint32_t magic, rank, step, n;
	uint32_t kind;  /* SENT, ASK (the sender lacks mine of `step`), ANSWER;
			 * at END_STEP: QUERY, DONE, FIN */
	uint32_t pad;   /* at END_STEP: the nonce of rank 0's query */
};
enum { SENT, ASK, ANSWER, QUERY, DONE, FIN };

static struct body b[MAXB];
static struct node {
	double c[3], half;     /* cube */
	double cm[3], m;       /* centre of mass */
	int child[8];          /* node index, or -1 */
	int body;              /* leaf: body index, -1 none, -2 internal */
} tree[4 * MAXB];
static int ntree;
static int rank_, nproc, nbodies, per;
static int sock;
static unsigned base_port;
static struct in_addr host[MAXP];     /* rank r's address */
/* my last two steps' messages, to send again */
static unsigned char keep[2][sizeof(struct hdr) + MAXB / 2 * sizeof(struct wire)];
static size_t keep_len[2];
static unsigned keep_step[2];
static unsigned char got[MAXP];       /* step s message from rank r */
static unsigned char got_next[MAXP];  /* step s + 1, early */
static struct body next_buf[MAXB];
static long lose_step = -1;           /* $NBODY_LOSE */
static long deaf_ms = -1;             /* $NBODY_DEAF */
static uint64_t deaf_until;           /* rank 2 hears rank 3 from then
				       * (0: not yet at the last step) */
static unsigned last_step;            /* STEPS */

static void
fail(const char *what, unsigned a, unsigned c)
{
	fprintf(stderr, "nbody %d: %s (%u, %u)\n", rank_, what, a, c);
	exit(3);
}

static int
own_lo(int r)
{
	return r * per;
}

static void
send_to(int r, const void *p, size_t n)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)(base_port + (unsigned)r)),
		.sin_addr = host[r] };
	sendto(sock, p, n, 0, (struct sockaddr *)&a, sizeof(a));
}

/* Each rank's address: $NBODY_HOSTS's r-th, or the loopback. */
static int
hosts(const char *list)
{
	for (int r = 0; r < nproc; r++)
		host[r].s_addr = htonl(INADDR_LOOPBACK);
	if (list == NULL || *list == '\0')
		return 0;
	char buf[MAXP * 16];
	if (strlen(list) >= sizeof(buf))
		goto bad;
	strcpy(buf, list);
	char *save, *h = strtok_r(buf, ",", &save);
	for (int r = 0; r < nproc; r++, h = strtok_r(NULL, ",", &save))
		if (h == NULL || inet_pton(AF_INET, h, &host[r]) != 1)
			goto bad;
	if (h == NULL)
		return 0;
bad:
	fprintf(stderr, "nbody: NBODY_HOSTS '%s': want %d IPv4 addresses, "
		"comma-separated\n", list, nproc);
	return -1;
}

static void
pack(unsigned step)
{
	unsigned i = step & 1;
	struct hdr *h = (struct hdr *)(void *)keep[i];
	h->magic = NB_MAGIC;
	h->rank = (uint32_t)rank_;
	h->step = step;
	h->n = (uint32_t)per;
	h->kind = SENT;
	h->pad = 0;
	struct wire *w = (struct wire *)(void *)(h + 1);
	for (int k = 0; k < per; k++) {
		const struct body *q = &b[own_lo(rank_) + k];
		memcpy(w[k].x, q->x, sizeof(q->x));
		w[k].m = q->m;
	}
	keep_len[i] = sizeof(*h) + (size_t)per * sizeof(*w);
	keep_step[i] = step;
}

static void
store(const struct hdr *h, const struct wire *w, struct body *dst)
{
	for (unsigned k = 0; k < h->n; k++) {
		memcpy(dst[k].x, w[k].x, sizeof(w[k].x));
		dst[k].m = w[k].m;
	}
}

/* My message of `step` again, to rank r, who asked for it. */
static void
answer(int r, unsigned step)
{
	unsigned i = step & 1;
	if (keep_step[i] != step)
		return;
	struct hdr *h = (struct hdr *)(void *)keep[i];
	h->kind = ANSWER;
	send_to(r, keep[i], keep_len[i]);
	h->kind = SENT;
}

static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* One datagram in, at step s.  Returns its kind when it was one of the
 * end's (QUERY, DONE, FIN: finish()), else 0. */
static int
take(unsigned s, const unsigned char *buf, ssize_t n)
{
	const struct hdr *h = (const void *)buf;
	if (n < (ssize_t)sizeof(*h) || h->magic != NB_MAGIC ||
	    h->rank >= (unsigned)nproc || (int)h->rank == rank_)
		return 0;
	if (h->step == END_STEP)
		return h->kind == QUERY || h->kind == DONE || h->kind == FIN ?
			(int)h->kind : 0;
	if (n != (ssize_t)(sizeof(*h) + h->n * sizeof(struct wire)) ||
	    h->n != (unsigned)per)
		return 0;
	const struct wire *w = (const void *)(h + 1);
	if (h->step == lose_step && (int)h->rank == (rank_ + 1) % nproc &&
	    h->kind != ANSWER)
		return 0;
	if (deaf_ms >= 0 && rank_ == 2 && h->rank == 3 &&
	    h->step == last_step && (!deaf_until || now_ms() < deaf_until))
		return 0;
	if (h->step == s) {
		if (!got[h->rank])
			store(h, w, &b[own_lo((int)h->rank)]);
		got[h->rank] = 1;
		if (h->kind == ASK)
			answer((int)h->rank, s);
	} else if (h->step == s + 1) {
		/* the sender is ahead: it has mine of step s */
		store(h, w, &next_buf[own_lo((int)h->rank)]);
		got_next[h->rank] = 1;
	} else if (h->step + 1 == s) {
		/* the sender is behind and lost mine of its step: again */
		answer((int)h->rank, h->step);
	} else if (h->step > s + 1) {
		fail("a rank is two steps ahead", h->step, s);
	}
	/* older: a retransmission that was queued, stale */
	return 0;
}

/* Exchange step s's positions with every other rank. */
static void
exchange(unsigned s)
{
	static unsigned char buf[65536];
	pack(s);
	memset(got, 0, sizeof(got));
	for (int r = 0; r < nproc; r++)
		if (got_next[r]) {
			for (int k = 0; k < per; k++) {
				memcpy(b[own_lo(r) + k].x, next_buf[own_lo(r) + k].x,
					sizeof(b[0].x));
				b[own_lo(r) + k].m = next_buf[own_lo(r) + k].m;
			}
			got[r] = 1;
			got_next[r] = 0;
		}
	unsigned i = s & 1;
	for (int r = 0; r < nproc; r++)
		if (r != rank_)
			send_to(r, keep[i], keep_len[i]);
	struct hdr *mine = (struct hdr *)(void *)keep[i];
	uint64_t sent = now_ms();
	for (;;) {
		int missing = 0;
		for (int r = 0; r < nproc; r++)
			missing += r != rank_ && !got[r];
		if (!missing)
			break;
		/* every 20 ms, mine again, asking for theirs -- timed, not
		 * left to a quiet poll: the others' asking keeps it busy */
		uint64_t t = now_ms();
		if (t - sent >= 20) {
			mine->kind = ASK;
			for (int r = 0; r < nproc; r++)
				if (r != rank_ && !got[r])
					send_to(r, keep[i], keep_len[i]);
			mine->kind = SENT;
			sent = t;
		}
		struct pollfd p = { .fd = sock, .events = POLLIN };
		if (poll(&p, 1, (int)(sent + 20 - t > 20 ? 20 :
			    sent + 20 - t)) <= 0)
			continue;
		ssize_t n;
		while ((n = recv(sock, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			take(s, buf, n);
	}
}

/* ---- Barnes-Hut ---- */

static int
new_node(const double c[3], double half)
{
	if (ntree >= (int)(sizeof(tree) / sizeof(tree[0])))
		fail("tree full", (unsigned)ntree, 0);
	struct node *t = &tree[ntree];
	memcpy(t->c, c, sizeof(t->c));
	t->half = half;
	t->m = 0;
	memset(t->cm, 0, sizeof(t->cm));
	for (int k = 0; k < 8; k++)
		t->child[k] = -1;
	t->body = -1;
	return ntree++;
}

static int
octant(const struct node *t, const double x[3])
{
	return (x[0] > t->c[0]) | (x[1] > t->c[1]) << 1 | (x[2] > t->c[2]) << 2;
}

static void
insert(int n, int i, int depth)
{
	struct node *t = &tree[n];
	if (t->body == -1) {
		t->body = i;
		return;
	}
	if (depth > 60)
		return; /* coincident bodies: merged */
	if (t->body >= 0) {
		int old = t->body;
		t->body = -2;
		insert(n, old, depth);
	}
	int o = octant(&tree[n], b[i].x);
	if (tree[n].child[o] < 0) {
		double c[3], h = tree[n].half / 2;
		for (int k = 0; k < 3; k++)
			c[k] = tree[n].c[k] + ((o >> k) & 1 ? h : -h);
		int ch = new_node(c, h);
		tree[n].child[o] = ch;
	}
	insert(tree[n].child[o], i, depth + 1);
}

static void
mass(int n)
{
	struct node *t = &tree[n];
	if (t->body >= 0) {
		t->m = b[t->body].m;
		memcpy(t->cm, b[t->body].x, sizeof(t->cm));
		return;
	}
	double m = 0, cm[3] = { 0, 0, 0 };
	for (int k = 0; k < 8; k++) {
		int c = t->child[k];
		if (c < 0)
			continue;
		mass(c);
		m += tree[c].m;
		for (int d = 0; d < 3; d++)
			cm[d] += tree[c].m * tree[c].cm[d];
	}
	t->m = m;
	for (int d = 0; d < 3; d++)
		t->cm[d] = m > 0 ? cm[d] / m : t->c[d];
}

static void
force(int n, int i, double a[3])
{
	const struct node *t = &tree[n];
	if (t->m == 0 || t->body == i)
		return;
	double d[3], r2 = 1e-4;
	for (int k = 0; k < 3; k++) {
		d[k] = t->cm[k] - b[i].x[k];
		r2 += d[k] * d[k];
	}
	if (t->body >= 0 || (2 * t->half) * (2 * t->half) < 0.25 * r2) {
		double f = t->m / (r2 * sqrt(r2));
		for (int k = 0; k < 3; k++)
			a[k] += f * d[k];
		return;
	}
	for (int k = 0; k < 8; k++)
		if (t->child[k] >= 0)
			force(t->child[k], i, a);
}

static void
step_once(void)
{
	ntree = 0;
	double c[3] = { 0, 0, 0 }, half = 1;
	for (int i = 0; i < nbodies; i++)
		for (int k = 0; k < 3; k++)
			while (fabs(b[i].x[k]) > half)
				half *= 2;
	int root = new_node(c, half);
	for (int i = 0; i < nbodies; i++)
		insert(root, i, 0);
	mass(root);
	const double dt = 1e-3;
	for (int i = own_lo(rank_); i < own_lo(rank_) + per; i++) {
		double a[3] = { 0, 0, 0 };
		force(root, i, a);
		for (int k = 0; k < 3; k++)
			b[i].v[k] += dt * a[k];
	}
	for (int i = own_lo(rank_); i < own_lo(rank_) + per; i++)
		for (int k = 0; k < 3; k++)
			b[i].x[k] += dt * b[i].v[k];
}

/*
 * The end.  A rank that ended answers no ASK, so no rank may end while
 * another still lacks one of its messages: rank 0 asks every 20 ms
 * (QUERY) until each other rank has answered DONE -- it has every
 * message of the last step -- and only then sends FIN; a rank ends on
 * FIN.  All the while each answers ASKs (take()).  Under the 2PC
 * protocols a rank's end is committed by a round that holds every
 * other's state of that moment, which is past its DONE, so no rollback
 * after an end brings back a rank that lacks an ended one's message.
 * (Before: rank 0 sent FIN once its own exchange was over, rank 3 ended
 * on it, and ranks 1-2, whose copy of rank 3's last message was lost in
 * a rollback, asked it for ever.)  The query's nonce is the clock when
 * rank 0 began to ask: a DONE or FIN of an earlier life, still in
 * flight from a rank that had not yet rolled back, never counts.
 */
static void
finish(unsigned steps)
{
	static unsigned char buf[65536];
	struct hdr m = { NB_MAGIC, (uint32_t)rank_, END_STEP, 0, 0, 0 };
	if (rank_ != 0) {
		uint32_t answered = 0; /* the last query answered DONE */
		for (;;) {
			struct pollfd p = { .fd = sock, .events = POLLIN };
			if (poll(&p, 1, 20) <= 0)
				continue;
			ssize_t n;
			while ((n = recv(sock, buf, sizeof(buf),
				    MSG_DONTWAIT)) > 0) {
				const struct hdr *h = (const void *)buf;
				int k = take(steps, buf, n);
				if (k == QUERY) {
					m.kind = DONE;
					m.pad = answered = h->pad;
					send_to(0, &m, sizeof(m));
				} else if (k == FIN && answered != 0 &&
					   h->pad == answered) {
					m.kind = FIN;
					m.pad = answered;
					send_to(0, &m, sizeof(m));
					return;
				}
			}
		}
	}
	uint32_t nonce = (uint32_t)now_ms() | 1;
	unsigned char done[MAXP] = { 0 }, acked[MAXP] = { 0 };
	int left = nproc - 1;
	uint64_t last = 0;
	/* ask until every rank is done (no bound: a rank that never gets
	 * there leaves the computation unfinished, as exchange() would),
	 * then FIN until each acknowledged it, 250 times at most */
	for (int fins = 0; fins < 250;) {
		uint64_t t = now_ms();
		if (t - last >= 20) {
			m.kind = left ? QUERY : FIN;
			m.pad = nonce;
			int sent = 0;
			for (int r = 1; r < nproc; r++)
				if (left ? !done[r] : !acked[r]) {
					send_to(r, &m, sizeof(m));
					sent++;
				}
			if (!sent)
				return;
			fins += !left;
			last = t;
		}
		struct pollfd p = { .fd = sock, .events = POLLIN };
		if (poll(&p, 1, 20) <= 0)
			continue;
		ssize_t n;
		while ((n = recv(sock, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
			const struct hdr *h = (const void *)buf;
			int k = take(steps, buf, n);
			if (k == DONE && h->pad == nonce && !done[h->rank]) {
				done[h->rank] = 1;
				if (--left == 0)
					last = 0; /* FIN at once */
			} else if (k == FIN && h->pad == nonce) {
				acked[h->rank] = 1;
			}
		}
	}
}

/* $NBODY_EXIT_GATE: wait for the test's leave to end. */
static void
exit_gate(void)
{
	const char *gate = getenv("NBODY_EXIT_GATE");
	if (gate == NULL || *gate == '\0')
		return;
	for (int i = 0; i < 6000 && access(gate, F_OK) != 0; i++)
		usleep(20000);
}

static void
report(unsigned s)
{
	double cm[3] = { 0, 0, 0 }, m = 0;
	for (int i = 0; i < nbodies; i++) {
		m += b[i].m;
		for (int k = 0; k < 3; k++)
			cm[k] += b[i].m * b[i].x[k];
	}
	printf("step %u mass %.6f centre %.9f %.9f %.9f\n", s, m, cm[0] / m,
		cm[1] / m, cm[2] / m);
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	if (argc != 7) {
		fprintf(stderr, "usage: nbody RANK NPROC PORT BODIES STEPS "
			"PRINT_EVERY\n");
		return 2;
	}
	rank_ = atoi(argv[1]);
	nproc = atoi(argv[2]);
	base_port = (unsigned)atoi(argv[3]);
	nbodies = atoi(argv[4]);
	unsigned steps = (unsigned)atoi(argv[5]);
	unsigned every = (unsigned)atoi(argv[6]);
	if (nproc < 1 || nproc > MAXP || rank_ < 0 || rank_ >= nproc ||
	    nbodies < nproc || nbodies > MAXB || nbodies % nproc || !every ||
	    nbodies / nproc * sizeof(struct wire) + sizeof(struct hdr) > 65000)
		return 2;
	per = nbodies / nproc;
	if (hosts(getenv("NBODY_HOSTS")) != 0)
		return 2;
	if (getenv("NBODY_LOSE"))
		lose_step = atol(getenv("NBODY_LOSE"));
	if (getenv("NBODY_DEAF"))
		deaf_ms = atol(getenv("NBODY_DEAF"));
	last_step = steps;
	const char *proto = getenv("NBODY_PROTOCOL");
	if (proto && *proto && strcmp(proto, "none") != 0) {
		struct dc_opts o = { 0 };
		if (dc_protocol_parse(proto, &o.protocol) != 0) {
			fprintf(stderr, "nbody: %s\n", dc_errormsg());
			return 2;
		}
		int rc = dc_init(&o);
		if (rc) {
			fprintf(stderr, "nbody %d: dc_init: %s: %s\n", rank_,
				dc_strerror(rc), dc_errormsg());
			return 1;
		}
	}
	sock = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)(base_port + (unsigned)rank_)),
		.sin_addr = host[rank_] };
	int big = 1 << 20;
	setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	if (bind(sock, (struct sockaddr *)&a, sizeof(a)) != 0) {
		fprintf(stderr, "nbody %d: bind: %s\n", rank_, strerror(errno));
		return 1;
	}
	/* the same bodies in every rank: a Plummer-like ball from one seed */
	uint64_t seed = 12345;
	for (int i = 0; i < nbodies; i++) {
		for (int k = 0; k < 3; k++) {
			seed = seed * 6364136223846793005ull +
				1442695040888963407ull;
			b[i].x[k] = (double)(seed >> 11) / (double)(1ull << 53)
				* 2 - 1;
			b[i].v[k] = 0;
		}
		b[i].m = 1.0 / nbodies;
	}
	for (unsigned s = 0; s < steps; s++) {
		exchange(s);
		if (rank_ == 0 && s % every == 0)
			report(s);
		step_once();
	}
	deaf_until = now_ms() + (uint64_t)(deaf_ms > 0 ? deaf_ms : 0);
	exchange(steps);
	if (rank_ == 0)
		report(steps);
	finish(steps);
	exit_gate();
	return 0;
}
