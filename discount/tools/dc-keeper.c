/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dc-keeper.c -- holds the TCP connections of a program run under
 *                dc-run --protocol buffered, across its crashes
 *
 *   dc-keeper --dir D [--ready FD] [--pid PID] [--verbose]
 *
 * Started by dc-run (once per checkpoint directory: a second one finds
 * the control socket taken, names its run's PID to the first, DC_KP_RUN,
 * and leaves), outside the program: a SIGKILL of the program leaves it,
 * and with it every real TCP socket, untouched.
 *
 * Its life (K6): it watches every run it was named (PID: dc-run, which
 * becomes the program; a pidfd each) and the program's control
 * connection.  When neither is left -- the program's last exit, dc-run's
 * failure before it, a crash -- it ends at once if it holds nothing (no
 * connection, no listener: a recovery's dc-run starts a keeper again),
 * else once the checkpoint directory is gone (dc-run --discard), or
 * $DC_KEEPER_LINGER seconds (default 120; 0: never) with no recovery.
 * The program's libdc asks it to bind and listen (DC_KP_BIND,
 * DC_KP_LISTEN); the keeper accepts the clients and hands each one to the
 * program as a Unix stream connection to the program's own listener, so
 * the program's accept, epoll and reads see an ordinary stream.  Every
 * byte it forwards is kept; every byte the program writes is kept too,
 * and sent to the client only when a commit message says the checkpoint
 * that follows it has committed.  docs/ARCHITECTURE.md, "TCP through the
 * keeper", has the whole design; keeper_proto.h the messages.
 *
 * The loop waits on one epoll set: the control sockets, the listeners,
 * and each connection's two sockets for what they wait for now (arm).
 * A connection with events is pumped; after a control message that may
 * concern them all (a commit, a resume) and every 100 ms every
 * connection is (a sweep), after an attach only that one.
 *
 * Per connection, positions in its two streams:
 *
 *   input   in_base <= fwd <= in_end: [in_base, in_end) kept, fwd
 *           forwarded to the program's socket; in_base is the program's
 *           read position at the last commit (rpos): input past it may
 *           have to reach a recovered program again
 *   output  out_base <= W, out_end: [out_base, out_end) received from
 *           the program, not yet sent; out_base is what the client has
 *           been sent; W the program's write position at the last
 *           commit (wpos): only [out_base, min(W, out_end)) may be sent
 *
 * Invariants:
 *  K1. Output is sent only below W, the write position of a committed
 *      checkpoint (DC_KP_COMMIT, or DC_KP_ATTACH at a recovery to it).
 *  K2. A recovery to a checkpoint whose positions are (rpos, wpos) drops
 *      the output received past wpos (the lost interval's: the recovered
 *      program writes it again) and forwards the input again from rpos
 *      (the recovered program reads it again).
 *  K3. Output is sent exactly once: out_base only grows, and a recovery
 *      never moves W below it (a checkpoint's wpos is >= every W the
 *      keeper was told before it).
 *  K4. A connection no checkpoint has listed (accepted, or waiting in
 *      the program's listen queue, in the lost interval) is offered to
 *      the recovered program again from input position 0, its output
 *      dropped: it was never sent (W = 0).
 *  K5. A connection is closed only when a commit lists it as closed, and
 *      after its output up to the close is sent.
 *  K6. The keeper never ends while a run it was named lives, while the
 *      program is connected, or while it holds a connection or a
 *      listener a recovery may ask for (the checkpoint directory exists,
 *      the linger not over); it ends as soon as none of these holds.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "keeper_proto.h"

#define MAX_CONN 2048  /* connections held at once (a power of two: a
                        * connection's id names its slot) */
#define MAX_LIS 16
#define IN_CAP (4u << 20)   /* input kept beyond rpos before reading stops */
#define OUT_CAP (16u << 20) /* output received before reading stops */

struct buf {
	char *p;
	size_t len, cap;
};

struct conn {
	bool used;
	uint64_t id, lid;
	int tcp, u;          /* the client's socket; the keeper's end of the
	                      * program's, or -1 */
	bool attached;       /* to this incarnation of the program */
	bool pending;        /* to be offered to the program's listener */
	bool known;          /* listed open by a commit */
	bool closing;        /* closed by a commit: flush to W, then close */
	bool all;            /* the program ended: everything it wrote */
	bool shut_wr, tcp_shut;
	bool tcp_eof, u_eof, u_shut;
	double shut_at;
	struct buf in;
	uint64_t in_base, fwd;
	struct buf out;
	uint64_t out_base, W;
	struct dc_kp_hello hello;
	size_t hello_left;
	int treg, ureg;      /* the descriptors in the epoll set, or -1 */
	uint32_t tmask, umask; /* ... with these events */
};

struct lis {
	bool used, listening;
	uint64_t lid;
	int tcp;
	struct sockaddr_storage addr;
	socklen_t alen;
};

static struct conn conns[MAX_CONN];
static struct lis liss[MAX_LIS];
static uint64_t next_id;
static uint64_t hash;
static int ctl = -1, ctl_lis = -1, ep = -1;

/* epoll tags: what kind of descriptor (high half), which (low half) */
enum { T_CTL_LIS = 1, T_CTL, T_LIS, T_TCP, T_U, T_RUN };
/* the runs the keeper was named (K6): a pidfd each, -1 once ended */
#define MAX_RUN 8
static int runs[MAX_RUN] = { -1, -1, -1, -1, -1, -1, -1, -1 };
#define TAG(k, i) ((uint64_t)(k) << 32 | (uint32_t)(i))

static void
ep_add(int fd, uint64_t tag)
{
	struct epoll_event e = { .events = EPOLLIN, .data.u64 = tag };
	if (epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e) != 0) {
		fprintf(stderr, "dc-keeper: epoll_ctl: %s\n", strerror(errno));
		exit(1);
	}
}
static bool bye, verbose;

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
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
	fputs("dc-keeper: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void
buf_add(struct buf *b, const char *p, size_t n)
{
	if (b->len + n > b->cap) {
		size_t c = b->cap ? b->cap : 65536;
		while (c < b->len + n)
			c *= 2;
		char *q = realloc(b->p, c);
		if (q == NULL) {
			fprintf(stderr, "dc-keeper: out of memory\n");
			exit(1);
		}
		b->p = q;
		b->cap = c;
	}
	memcpy(b->p + b->len, p, n);
	b->len += n;
}

static void
buf_cut(struct buf *b, size_t n)
{
	memmove(b->p, b->p + n, b->len - n);
	b->len -= n;
}

static socklen_t
lname(struct sockaddr_un *a, const char *pre, uint64_t id, bool with_id)
{
	return dc_kp_addr(a, pre, hash, with_id ? &id : NULL);
}

/* Ids are (++next_id) * MAX_CONN + slot: unique for the keeper's life,
 * and a commit's thousand entries each find their connection at once. */
static struct conn *
conn_of(uint64_t id)
{
	struct conn *c = &conns[id % MAX_CONN];
	return c->used && c->id == id ? c : NULL;
}

static struct lis *
lis_of(uint64_t lid)
{
	for (int i = 0; i < MAX_LIS; i++)
		if (liss[i].used && liss[i].lid == lid)
			return &liss[i];
	return NULL;
}

static void
conn_free(struct conn *c)
{
	say("connection %llu closed", (unsigned long long)c->id);
	if (c->tcp >= 0)
		close(c->tcp);
	if (c->u >= 0)
		close(c->u);
	free(c->in.p);
	free(c->out.p);
	memset(c, 0, sizeof(*c));
}

/* What the dead incarnation wrote into its socket is read to its end
 * (the program's side is closed: this ends), then the socket goes. */
static void
drain(struct conn *c)
{
	if (c->u < 0)
		return;
	char b[65536];
	for (;;) {
		ssize_t r = read(c->u, b, sizeof(b));
		if (r > 0) {
			buf_add(&c->out, b, (size_t)r);
			continue;
		}
		if (r < 0 && errno == EINTR)
			continue;
		break;
	}
	close(c->u); /* out of the epoll set with it */
	c->u = -1;
	c->ureg = -1;
	c->u_eof = false;
	c->u_shut = false;
}

/* Offer c to the program's listener (K4): a new Unix connection whose
 * first bytes are the hello; 0 or -1 (the listener is not there yet). */
static void arm(struct conn *c);
static void pump(struct conn *c, short tev, short uev);

static int
offer(struct conn *c)
{
	struct sockaddr_un a;
	socklen_t l = lname(&a, DC_KP_LNAME, c->lid, true);
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&a, l) != 0) {
		close(fd);
		return -1;
	}
	c->u = fd;
	c->pending = false;
	c->attached = true;
	c->hello_left = sizeof(c->hello);
	c->fwd = c->in_base;
	say("connection %llu offered", (unsigned long long)c->id);
	arm(c);
	return 0;
}

static void
offer_pending(void)
{
	if (ctl < 0)
		return;
	for (int i = 0; i < MAX_CONN; i++)
		if (conns[i].used && conns[i].pending)
			offer(&conns[i]);
}

static void
reply(int32_t err, const struct sockaddr_storage *addr, socklen_t alen,
	int fd)
{
	struct dc_kp_msg m = { .magic = DC_KP_MAGIC, .op = DC_KP_REPLY,
		.err = err };
	if (addr) {
		m.addr = *addr;
		m.addr_len = alen;
	}
	struct iovec v = { &m, sizeof(m) };
	union {
		struct cmsghdr h;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct msghdr h = { .msg_iov = &v, .msg_iovlen = 1 };
	if (fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		h.msg_control = cm.b;
		h.msg_controllen = sizeof(cm.b);
		struct cmsghdr *c = CMSG_FIRSTHDR(&h);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	if (sendmsg(ctl, &h, MSG_NOSIGNAL) < 0)
		say("reply: %s", strerror(errno));
}

static void
do_bind(const struct dc_kp_msg *m)
{
	struct lis *l = lis_of(m->id);
	struct sockaddr_storage b;
	socklen_t bl = sizeof(b);
	if (l && getsockname(l->tcp, (struct sockaddr *)&b, &bl) == 0 &&
	    ((l->alen == m->addr_len &&
	      !memcmp(&l->addr, &m->addr, m->addr_len)) ||
	     (bl == m->addr_len && !memcmp(&b, &m->addr, bl)))) {
		/* the same bind made again by a recovered program (as it
		 * asked, or as it was bound: a port 0 chosen) */
		reply(0, &b, bl, -1);
		return;
	}
	if (l) {
		close(l->tcp);
		memset(l, 0, sizeof(*l));
	}
	for (int i = 0; i < MAX_LIS && !l; i++)
		if (!liss[i].used)
			l = &liss[i];
	if (l == NULL || m->addr_len > sizeof(m->addr)) {
		reply(-EMFILE, NULL, 0, -1);
		return;
	}
	int fd = socket(m->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK |
		SOCK_CLOEXEC, 0);
	int one = 1;
	if (fd < 0) {
		reply(-errno, NULL, 0, -1);
		return;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&m->addr, m->addr_len) != 0) {
		int e = errno;
		close(fd);
		reply(-e, NULL, 0, -1);
		return;
	}
	l->used = true;
	l->lid = m->id;
	l->tcp = fd;
	l->addr = m->addr;
	l->alen = m->addr_len;
	bl = sizeof(b);
	getsockname(fd, (struct sockaddr *)&b, &bl);
	say("listener %llu bound", (unsigned long long)m->id);
	reply(0, &b, bl, -1);
}

static void
do_listen(const struct dc_kp_msg *m)
{
	struct lis *l = lis_of(m->id);
	if (l == NULL) {
		reply(-EINVAL, NULL, 0, -1);
		return;
	}
	if (!l->listening && listen(l->tcp, (int)m->a) != 0) {
		reply(-errno, NULL, 0, -1);
		return;
	}
	if (!l->listening)
		ep_add(l->tcp, TAG(T_LIS, l - liss));
	l->listening = true;
	reply(0, NULL, 0, -1);
	offer_pending();
}

static void
do_commit(const struct dc_kp_msg *m, const struct dc_kp_ent *e)
{
	for (uint32_t i = 0; i < m->n; i++) {
		struct conn *c = conn_of(e[i].id);
		if (c == NULL)
			continue;
		if (e[i].wpos > c->W)
			c->W = e[i].wpos;
		if (e[i].type == DC_KPE_CLOSED) {
			c->closing = true;
			continue;
		}
		c->known = true;
		c->shut_wr = (e[i].flags & DC_KPE_SHUT_WR) != 0;
		/* input below the committed read position is never needed
		 * again */
		if (e[i].rpos > c->in_base && e[i].rpos <= c->in_base +
		    c->in.len) {
			buf_cut(&c->in, e[i].rpos - c->in_base);
			c->in_base = e[i].rpos;
		}
	}
}

/* K2: the connection back as it was at the checkpoint. */
static void
do_attach(const struct dc_kp_msg *m)
{
	struct conn *c = conn_of(m->id);
	uint64_t rpos = m->a, wpos = m->b;
	if (c == NULL || c->closing) {
		reply(-ENOENT, NULL, 0, -1);
		return;
	}
	drain(c);
	uint64_t out_end = c->out_base + c->out.len;
	if (wpos < c->out_base)
		fprintf(stderr, "dc-keeper: connection %llu: %llu bytes sent, "
			"the checkpoint wrote %llu\n", (unsigned long long)c->id,
			(unsigned long long)c->out_base,
			(unsigned long long)wpos);
	else if (out_end > wpos)
		c->out.len = wpos - c->out_base; /* the lost interval's */
	if (wpos > c->W)
		c->W = wpos;
	if (rpos < c->in_base || rpos > c->in_base + c->in.len) {
		reply(-EIO, NULL, 0, -1);
		return;
	}
#ifdef DC_BROKEN_KEEPER_NO_REPLAY
	/* Deliberately broken: the input the lost interval read is not
	 * forwarded again (K2; caught by dc-held-tcp-broken-replay). */
	if (c->fwd < rpos)
		c->fwd = rpos;
#else
	c->fwd = rpos;
#endif
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		reply(-errno, NULL, 0, -1);
		return;
	}
	fcntl(sv[0], F_SETFL, O_NONBLOCK);
	c->u = sv[0];
	c->attached = true;
	c->known = true;
	c->pending = false;
	c->hello_left = 0;
	reply(0, NULL, 0, sv[1]);
	close(sv[1]);
	pump(c, 0, 0);
	arm(c);
	say("connection %llu attached at in %llu out %llu",
		(unsigned long long)c->id, (unsigned long long)rpos,
		(unsigned long long)wpos);
}

/* K4, K5: what the recovered program did not take back. */
static void
do_resumed(void)
{
	for (int i = 0; i < MAX_CONN; i++) {
		struct conn *c = &conns[i];
		if (!c->used || c->attached || c->closing)
			continue;
		drain(c);
		if (c->known) {
			/* open at a commit, gone from the checkpoint after
			 * it: its close was committed */
			c->closing = true;
			continue;
		}
		c->out.len = 0; /* never sent: W = 0 */
		c->fwd = c->in_base;
		c->pending = true;
	}
	offer_pending();
}

static void
do_hello(const struct dc_kp_msg *m)
{
	bye = false;
	if (m->a) {
		/* a fresh run: nothing here belongs to it */
		for (int i = 0; i < MAX_CONN; i++)
			if (conns[i].used)
				conn_free(&conns[i]);
		for (int i = 0; i < MAX_LIS; i++)
			if (liss[i].used) {
				close(liss[i].tcp);
				memset(&liss[i], 0, sizeof(liss[i]));
			}
	}
	for (int i = 0; i < MAX_CONN; i++)
		conns[i].attached = false;
	reply(0, NULL, 0, -1);
}

static void
do_bye(void)
{
	bye = true;
	for (int i = 0; i < MAX_CONN; i++)
		if (conns[i].used) {
			conns[i].closing = true;
			conns[i].all = true;
		}
	for (int i = 0; i < MAX_LIS; i++)
		if (liss[i].used) {
			close(liss[i].tcp);
			memset(&liss[i], 0, sizeof(liss[i]));
		}
}

/* One control message; true when it may concern every connection (a
 * commit, a resume), false when one or none (an attach, a bind). */
static bool
ctl_read(void)
{
	static char b[sizeof(struct dc_kp_msg) +
		DC_KP_MAX_ENTS * sizeof(struct dc_kp_ent)];
	ssize_t r = recv(ctl, b, sizeof(b), 0);
	if (r <= 0) {
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			return false;
		say("the program is gone");
		close(ctl);
		ctl = -1;
		return true;
	}
	const struct dc_kp_msg *m = (const void *)b;
	if ((size_t)r < sizeof(*m) || m->magic != DC_KP_MAGIC ||
	    m->n > DC_KP_MAX_ENTS ||
	    (size_t)r != sizeof(*m) + m->n * sizeof(struct dc_kp_ent)) {
		fprintf(stderr, "dc-keeper: a malformed message (%zd bytes)\n",
			r);
		return false;
	}
	const struct dc_kp_ent *e = (const void *)(m + 1);
	switch (m->op) {
	case DC_KP_HELLO: do_hello(m); break;
	case DC_KP_LISTEN: do_listen(m); break;
	case DC_KP_COMMIT: do_commit(m, e); break;
	case DC_KP_ATTACH: do_attach(m); return false;
	case DC_KP_BIND: do_bind(m); return false;
	case DC_KP_RESUMED: do_resumed(); break;
	case DC_KP_BYE: do_bye(); break;
	default:
		fprintf(stderr, "dc-keeper: unknown message %u\n", m->op);
	}
	return true;
}

/* One descriptor of a connection in the epoll set with the events it
 * waits for now (none: out of the set, as the kernel would still report
 * a hang-up to an empty mask). */
static void
watch(int fd, int *reg, uint32_t *mask, uint32_t want, uint64_t tag)
{
	if (fd < 0 || (*reg == fd && *mask == want))
		return;
	if (want == 0) {
		if (*reg == fd)
			epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
		*reg = -1;
		*mask = 0;
		return;
	}
	struct epoll_event e = { .events = want, .data.u64 = tag };
	if (epoll_ctl(ep, *reg == fd ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd,
		    &e) != 0) {
		fprintf(stderr, "dc-keeper: epoll_ctl: %s\n", strerror(errno));
		exit(1);
	}
	*reg = fd;
	*mask = want;
}

/* What c waits for: input from the client while the kept input is
 * short, room to send the client output below W; output from the program
 * while the kept output is short, room to forward it input. */
static void
arm(struct conn *c)
{
	uint32_t t = 0, u = 0;
	if (!c->used)
		return;
	if (!c->tcp_eof && (c->in.len < IN_CAP || c->tcp_shut))
		t |= EPOLLIN;
	uint64_t oe = c->out_base + c->out.len;
	if (c->out_base < (c->W < oe ? c->W : oe))
		t |= EPOLLOUT;
	if (!c->u_eof && c->out.len < OUT_CAP)
		u |= EPOLLIN;
	if (c->attached && (c->hello_left || c->fwd < c->in_base + c->in.len))
		u |= EPOLLOUT;
	unsigned i = (unsigned)(c - conns);
	watch(c->tcp, &c->treg, &c->tmask, t, TAG(T_TCP, i));
	watch(c->u, &c->ureg, &c->umask, u, TAG(T_U, i));
}

static void
accept_all(struct lis *l)
{
	for (;;) {
		struct sockaddr_storage peer;
		socklen_t pl = sizeof(peer);
		int fd = accept4(l->tcp, (struct sockaddr *)&peer, &pl,
			SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		struct conn *c = NULL;
		for (int i = 0; i < MAX_CONN && !c; i++)
			if (!conns[i].used)
				c = &conns[i];
		if (c == NULL) {
			close(fd);
			return;
		}
		/* the keeper sends what a commit released at once: no
		 * segment waits for an acknowledgement (Nagle) */
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		memset(c, 0, sizeof(*c));
		c->used = true;
		c->id = ++next_id * MAX_CONN + (uint64_t)(c - conns);
		c->lid = l->lid;
		c->tcp = fd;
		c->u = -1;
		c->treg = c->ureg = -1;
		c->pending = true;
		c->hello.magic = DC_KP_MAGIC;
		c->hello.id = c->id;
		c->hello.peer = peer;
		c->hello.peer_len = pl;
		socklen_t ll = sizeof(c->hello.local);
		getsockname(fd, (struct sockaddr *)&c->hello.local, &ll);
		c->hello.local_len = ll;
		say("connection %llu accepted", (unsigned long long)c->id);
		offer(c);
		arm(c);
	}
}

/* Move bytes: client -> kept input -> program; program -> kept output
 * -> client (K1). */
static void
pump(struct conn *c, short tev, short uev)
{
	char b[65536];
	if ((tev & (POLLIN | POLLHUP | POLLERR)) && !c->tcp_eof &&
	    !c->tcp_shut) {
		ssize_t r = read(c->tcp, b, sizeof(b));
		if (r > 0)
			buf_add(&c->in, b, (size_t)r);
		else if (r == 0 || (errno != EAGAIN && errno != EINTR))
			c->tcp_eof = true;
	}
	if (c->tcp_shut && (tev & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t r = read(c->tcp, b, sizeof(b));
		if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
			c->tcp_eof = true;
	}
	if (c->u >= 0 && c->attached) {
		while (c->hello_left > 0) {
			ssize_t r = write(c->u, (char *)&c->hello +
				sizeof(c->hello) - c->hello_left, c->hello_left);
			if (r <= 0)
				break;
			c->hello_left -= (size_t)r;
		}
		uint64_t in_end = c->in_base + c->in.len;
		while (c->hello_left == 0 && c->fwd < in_end) {
			ssize_t r = send(c->u, c->in.p + (c->fwd - c->in_base),
				in_end - c->fwd, MSG_NOSIGNAL | MSG_DONTWAIT);
			if (r <= 0)
				break;
			c->fwd += (uint64_t)r;
		}
		if (c->tcp_eof && c->fwd == in_end && c->hello_left == 0 &&
		    !c->u_shut) {
			shutdown(c->u, SHUT_WR);
			c->u_shut = true;
		}
	}
	if (c->u >= 0 && !c->u_eof && (uev & (POLLIN | POLLHUP | POLLERR))) {
		ssize_t r = read(c->u, b, sizeof(b));
		if (r > 0)
			buf_add(&c->out, b, (size_t)r);
		else if (r == 0 || (errno != EAGAIN && errno != EINTR))
			c->u_eof = true;
	}
	uint64_t out_end = c->out_base + c->out.len;
	if (c->all)
		c->W = out_end;
#ifdef DC_BROKEN_KEEPER_EARLY
	/* Deliberately broken: output is sent as it arrives, before the
	 * commit of the interval that wrote it (K1; caught by
	 * dc-held-tcp-broken-early). */
	uint64_t lim = out_end;
#else
	uint64_t lim = c->W < out_end ? c->W : out_end;
#endif
	while (c->out_base < lim && !c->tcp_shut) {
		ssize_t r = send(c->tcp, c->out.p, lim - c->out_base,
			MSG_NOSIGNAL | MSG_DONTWAIT);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno != EAGAIN) {
			/* the client is gone: nothing to deliver to */
			c->tcp_eof = true;
			buf_cut(&c->out, (size_t)(lim - c->out_base));
			c->out_base = lim;
			break;
		}
		if (r <= 0)
			break;
		buf_cut(&c->out, (size_t)r);
		c->out_base += (uint64_t)r;
	}
	/* K5: a committed close, once its output is out */
	if (c->closing && !c->tcp_shut && c->out_base >= c->W &&
	    (!c->all || c->u_eof || c->u < 0)) {
		shutdown(c->tcp, SHUT_WR);
		c->tcp_shut = true;
		c->shut_at = now();
	} else if (c->shut_wr && !c->tcp_shut && c->out_base >= c->W &&
		   c->out_base == out_end && c->u_eof) {
		shutdown(c->tcp, SHUT_WR);
	}
	if (c->tcp_shut && (c->tcp_eof || now() - c->shut_at > 2.0))
		conn_free(c);
}

/* ---- the keeper's life (K6) ---- */

/* Watch the run pid: a pidfd that becomes readable when it ends. */
static void
run_watch(long pid)
{
	int fd = (int)syscall(SYS_pidfd_open, (pid_t)pid, 0);
	if (fd < 0) {
		say("run %ld: %s", pid, strerror(errno));
		return;
	}
	for (int i = 0; i < MAX_RUN; i++)
		if (runs[i] < 0) {
			runs[i] = fd;
			ep_add(fd, TAG(T_RUN, i));
			say("run %ld watched", pid);
			return;
		}
	close(fd); /* MAX_RUN runs at once: the linger covers the rest */
}

static bool
runs_live(void)
{
	for (int i = 0; i < MAX_RUN; i++)
		if (runs[i] >= 0)
			return true;
	return false;
}

static bool
holds(void)
{
#ifdef DC_BROKEN_KEEPER_RUN_END /* broken build: ends with its runs */
	return false;
#endif
	for (int i = 0; i < MAX_CONN; i++)
		if (conns[i].used)
			return true;
	for (int i = 0; i < MAX_LIS; i++)
		if (liss[i].used)
			return true;
	return false;
}

/* A connection to the control listener: a keeper naming its run
 * (DC_KP_RUN: answered, closed), else the program's libdc, whose
 * control connection it becomes. */
static void
ctl_accept(void)
{
	int fd = accept4(ctl_lis, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		return;
	/* both send at once after connecting */
	struct timeval tv = { 2, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct dc_kp_msg m;
	ssize_t r = recv(fd, &m, sizeof(m), MSG_PEEK);
	tv.tv_sec = 0;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (r == (ssize_t)sizeof(m) && m.magic == DC_KP_MAGIC &&
	    m.op == DC_KP_RUN) {
		(void)!recv(fd, &m, sizeof(m), 0);
		run_watch((long)m.a);
		struct dc_kp_msg rep = { .magic = DC_KP_MAGIC,
			.op = DC_KP_REPLY };
		(void)!send(fd, &rep, sizeof(rep), MSG_NOSIGNAL);
		close(fd);
		return;
	}
	if (ctl >= 0)
		close(ctl);
	ctl = fd;
	ep_add(ctl, TAG(T_CTL, 0));
}

/* A second keeper for the directory: name the run pid to the first one;
 * true when it answered (it watches the run), false when it is gone (it
 * ended meanwhile: bind again). */
static bool
name_run(const struct sockaddr_un *a, socklen_t al, long pid)
{
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return false;
	struct timeval tv = { 5, 0 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	struct dc_kp_msg m = { .magic = DC_KP_MAGIC, .op = DC_KP_RUN,
		.a = (uint64_t)pid }, rep;
	bool ok = connect(fd, (const struct sockaddr *)a, al) == 0 &&
		send(fd, &m, sizeof(m), MSG_NOSIGNAL) == (ssize_t)sizeof(m) &&
		recv(fd, &rep, sizeof(rep), 0) == (ssize_t)sizeof(rep) &&
		rep.op == DC_KP_REPLY;
	close(fd);
	return ok;
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = { { "dir", 1, 0, 'd' },
		{ "ready", 1, 0, 'r' }, { "verbose", 0, 0, 'v' },
		{ "pid", 1, 0, 'p' }, { 0, 0, 0, 0 } };
	const char *dir = NULL;
	int ready = -1, c;
	long pid = 0;
	while ((c = getopt_long(argc, argv, "d:r:vp:", lo, NULL)) != -1) {
		switch (c) {
		case 'd': dir = optarg; break;
		case 'r': ready = atoi(optarg); break;
		case 'v': verbose = true; break;
		case 'p': pid = atol(optarg); break;
		default:
			dir = NULL;
			optind = argc + 1;
			break;
		}
	}
#ifdef DC_BROKEN_KEEPER_LINGER /* broken build: no run watched, nor
                                * the directory */
	pid = 0;
#endif
	if (dir == NULL || optind != argc) {
		fprintf(stderr, "usage: dc-keeper --dir D [--ready FD] "
			"[--pid PID] [--verbose]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	/* two descriptors a connection: the soft limit as far as it goes */
	struct rlimit nf;
	if (getrlimit(RLIMIT_NOFILE, &nf) == 0 && nf.rlim_cur < nf.rlim_max) {
		nf.rlim_cur = nf.rlim_max;
		(void)setrlimit(RLIMIT_NOFILE, &nf);
	}
	hash = dc_kp_hash(dir);
	const char *lg = getenv("DC_KEEPER_LINGER");
	double linger = lg && *lg ? atof(lg) : 120.0;
	struct sockaddr_un a;
	socklen_t al = lname(&a, DC_KP_NAME, 0, false);
	for (int t = 0;; t++) {
		ctl_lis = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
		if (ctl_lis >= 0 &&
		    bind(ctl_lis, (struct sockaddr *)&a, al) == 0 &&
		    listen(ctl_lis, 4) == 0)
			break;
		int e = errno;
		if (ctl_lis >= 0)
			close(ctl_lis);
		/* one keeper per directory: the first one watches this run
		 * too (K6), unless it ended meanwhile */
		bool named = e == EADDRINUSE && (pid == 0 ||
			name_run(&a, al, pid));
		if (named || e != EADDRINUSE || t == 50) {
			if (ready >= 0)
				(void)!write(ready, named ? "1" : "0", 1);
			return named ? 0 : 1;
		}
		usleep(20000);
	}
	if (ready >= 0) {
		(void)!write(ready, "1", 1);
		close(ready);
	}
	double alone = now(), swept = 0;
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0) {
		fprintf(stderr, "dc-keeper: epoll_create1: %s\n",
			strerror(errno));
		return 1;
	}
	ep_add(ctl_lis, TAG(T_CTL_LIS, 0));
	if (pid > 0)
		run_watch(pid);
	static struct epoll_event ev[512];
	for (;;) {
		int r = epoll_wait(ep, ev, 512, 100);
		if (r < 0 && errno != EINTR)
			return 1;
		/* every connection is looked at after a control message
		 * (a commit raises W, an attach or a resume changes many)
		 * and at least every 100 ms (closes that wait for time) */
		bool sweep = r <= 0 || now() - swept > 0.1;
		/* control and listeners first: a commit read in this round
		 * counts for the bytes moved in it */
		for (int j = 0; j < r; j++) {
			uint32_t kind = (uint32_t)(ev[j].data.u64 >> 32);
			uint32_t i = (uint32_t)ev[j].data.u64;
			if (kind == T_CTL_LIS) {
				ctl_accept();
			} else if (kind == T_RUN && i < MAX_RUN &&
				   runs[i] >= 0) {
				say("a run ended");
				close(runs[i]); /* out of the set too */
				runs[i] = -1;
			} else if (kind == T_CTL) {
				if (ctl >= 0 && ctl_read())
					sweep = true;
			} else if (kind == T_LIS && i < MAX_LIS &&
				   liss[i].used) {
				accept_all(&liss[i]);
			}
		}
		for (int j = 0; j < r; j++) {
			uint32_t kind = (uint32_t)(ev[j].data.u64 >> 32);
			uint32_t i = (uint32_t)ev[j].data.u64;
			if ((kind != T_TCP && kind != T_U) || i >= MAX_CONN ||
			    !conns[i].used)
				continue;
			short e = (short)ev[j].events;
			pump(&conns[i], kind == T_TCP ? e : 0,
				kind == T_U ? e : 0);
			arm(&conns[i]);
		}
		if (sweep) {
			swept = now();
			for (int i = 0; i < MAX_CONN; i++)
				if (conns[i].used) {
					pump(&conns[i], 0, 0);
					arm(&conns[i]);
				}
		}
		offer_pending();
		/* K6.  Without a run named (a keeper started by hand), the
		 * control connection alone, as before */
		if (ctl >= 0 || runs_live()) {
			alone = now();
			continue;
		}
		bool any = false;
		for (int i = 0; i < MAX_CONN; i++)
			any |= conns[i].used;
		struct stat st;
		bool gone = sweep && stat(dir, &st) != 0 && errno == ENOENT;
#ifdef DC_BROKEN_KEEPER_LINGER
		gone = false;
#endif
		if ((bye && !any) || (pid > 0 && !holds()) ||
		    (linger > 0 && now() - alone > linger) || gone) {
			say("no run left%s", holds() ? ", the linger over or "
				"the checkpoint gone" : "");
			return 0;
		}
	}
}
