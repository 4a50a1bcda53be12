/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * keeper.c -- TCP servers under the buffered protocol: the program's TCP
 *             sockets are dc-keeper's, seen through Unix stream sockets
 *
 * Under dc-run --protocol buffered ($DC_KEEPER set by dc-run, which
 * started the keeper), a TCP socket the program makes is a Unix stream
 * socket of the same number; the real one is dc-keeper's (a process of
 * its own that a crash of the program leaves running), so no crash of
 * the program ever closes or resets a client's connection.
 *
 *   socket(AF_INET[6], SOCK_STREAM)  a Unix stream socket, desc.tcp NEW
 *   bind      the keeper binds the real socket (DC_KP_BIND; its error is
 *             the call's); the Unix socket gets the listener's name
 *             "\0dc-kl-<dir hash>-<id>", id from a counter rolled back
 *             with the process (a recovered program binding again gets
 *             the id, and the keeper's socket, it had)
 *   listen    the Unix socket listens; the keeper listens (DC_KP_LISTEN)
 *             and connects each client it accepts to the Unix listener,
 *             with a hello (the connection's id, addresses) first
 *   accept    the Unix accept; libdc reads the hello (never the program)
 *   read ...  counted: desc.tcp_rpos
 *   write ... counted: desc.tcp_wpos; the keeper keeps the bytes
 *   getsockname, getpeername  the TCP addresses; IPPROTO_TCP options
 *             are accepted and have no effect
 *
 * Invariants (with dc-keeper.c K1-K5):
 *  1. Every commit is followed by a DC_KP_COMMIT naming, for each open
 *     connection, its (rpos, wpos) in the committed image, and each one
 *     closed in the interval with its final wpos: only then may the
 *     keeper send the output below wpos and forget the input below rpos.
 *     The message goes after the commit record (dc__held_release, H3;
 *     for a checkpoint written behind, the writer sends the positions
 *     taken at the stop, dc__kp_take and dc__kp_send, ckpt.c invariant
 *     8): a crash before it leaves the keeper with the older positions,
 *     which the recovery then brings up to date.
 *  2. A descriptor number means the same connection across a recovery:
 *     recovery asks the keeper for each connection of the checkpoint
 *     (DC_KP_ATTACH with its positions) and puts the new socket at the
 *     checkpoint's number; its input starts where the checkpoint had
 *     read.  Listeners are made again under their names.  Then
 *     DC_KP_RESUMED: the keeper offers the connections the checkpoint
 *     does not know (accepted in the lost interval) to the listener
 *     again, from their first byte.
 *  3. Output written while the program then waits (a reply, then
 *     epoll_wait) makes the wait end at the interval's tick, which
 *     commits (held.c invariant 7).
 *  4. A keeper lost under a running program (its control connection
 *     broken at a commit, or hung up at a tick while the program waits
 *     in a call, committing nothing: dc__kp_check) ends the run as a
 *     crash would, right after its last commit: the real sockets went
 *     with the keeper (the clients saw their connections end, the ports
 *     serve nobody), and only a
 *     recovery -- the same command again: a new keeper, the listeners
 *     bound again -- serves the ports again.  A program left running
 *     would be deaf for good.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "dc_int.h"
#include "keeper_proto.h"

#define K (dc__vol.kp)
#define MAX_CLOSED 512
/* a commit message lists every connection and every close: none is left
 * out (a connection missing from it would hold its output for good) */
_Static_assert(DC__MAX_DESC + MAX_CLOSED <= DC_KP_MAX_ENTS,
	"keeper: a commit message's entries");
_Static_assert(DC_KP_MAX_ENTS * sizeof(struct dc_kp_ent) <=
	sizeof(((struct dc__vols *)0)->io), "keeper: the commit's scratch");

/* Rolled back with the process: the listener ids given out, and the
 * connections closed since the last commit (invariant 1). */
static uint64_t next_lid;
static unsigned nclosed;
static struct {
	uint64_t id, wpos;
} closed[MAX_CLOSED];

/* untracked scratch for messages (the kernel writes into it) */
static char *
scratch(void)
{
	return dc__vol.held.buf;
}

static bool
enabled(void)
{
	if (K.on == 0) {
		const char *k = getenv("DC_KEEPER");
		const char *p = getenv("DC_PROTOCOL");
		K.on = k && *k && p && !strcmp(p, "buffered") ? 1 : -1;
	}
	return K.on > 0;
}

static struct dc__desc *
tdesc(long fd, int want)
{
	int d = dc__desc_of((int)fd);
	if (d < 0 || dc__st.desc[d].tcp == 0)
		return NULL;
	if (want && dc__st.desc[d].tcp != want)
		return NULL;
	return &dc__st.desc[d];
}

static socklen_t
lname(struct sockaddr_un *a, const char *pre, uint64_t id, bool with_id)
{
	K.hash = dc_kp_hash(dc__vol.dir); /* dc__vol.dir: set at recovery too */
	return dc_kp_addr(a, pre, K.hash, with_id ? &id : NULL);
}

/* One message, and its reply when rep is given (with a descriptor when
 * fd is).  0 or -errno with the message set. */
static int
call(struct dc_kp_msg *m, const struct dc_kp_ent *e, uint32_t n,
	struct dc_kp_msg *rep, int *fd)
{
	m->magic = DC_KP_MAGIC;
	m->n = n;
	struct iovec v[2] = { { m, sizeof(*m) },
		{ (void *)e, n * sizeof(*e) } };
	struct msghdr h = { .msg_iov = v, .msg_iovlen = n ? 2 : 1 };
	long r;
	do
		r = dc__sys6(SYS_sendmsg, K.fd, (long)&h, MSG_NOSIGNAL, 0, 0,
			0);
	while (r == -EINTR);
	if (r < 0)
		return dc__err((int)r, "dc-keeper: send: %s", strerror((int)-r));
	if (rep == NULL)
		return 0;
	struct dc_kp_msg *in = (struct dc_kp_msg *)(void *)scratch();
	char *cbuf = scratch() + sizeof(*in) + 64;
	struct iovec iv = { in, sizeof(*in) };
	struct msghdr rh = { .msg_iov = &iv, .msg_iovlen = 1,
		.msg_control = cbuf,
		.msg_controllen = CMSG_SPACE(sizeof(int)) };
	do
		r = dc__sys6(SYS_recvmsg, K.fd, (long)&rh, MSG_CMSG_CLOEXEC, 0,
			0, 0);
	while (r == -EINTR);
	if (r != (long)sizeof(*in) || in->magic != DC_KP_MAGIC ||
	    in->op != DC_KP_REPLY)
		return dc__err(r < 0 ? (int)r : -EPROTO, "dc-keeper: no reply "
			"(%ld)", r);
	*rep = *in;
	if (fd) {
		*fd = -1;
		struct cmsghdr *c = CMSG_FIRSTHDR(&rh);
		if (c && c->cmsg_type == SCM_RIGHTS)
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	}
	return 0;
}

/* The control connection of this incarnation, said hello to. */
static int
connect_keeper(bool fresh)
{
	if (K.fd > 0)
		return 0;
	struct sockaddr_un a;
	socklen_t l = lname(&a, DC_KP_NAME, 0, false);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return dc__err(-errno, "dc-keeper: socket: %s", strerror(errno));
	if (connect(fd, (struct sockaddr *)&a, l) != 0) {
		int e = errno;
		close(fd);
		return dc__err(-e, "dc-keeper for %s: %s (dc-run starts it)",
			dc__vol.dir, strerror(e));
	}
	K.fd = dc__own_fd(fd);
	struct dc_kp_msg m = { .op = DC_KP_HELLO, .a = fresh }, rep;
	int rc = call(&m, NULL, 0, &rep, NULL);
	if (rc) {
		close(K.fd);
		K.fd = 0;
	}
	return rc;
}

bool
dc__kp_dirty(void)
{
	return K.dirty;
}

static long
fail(int rc)
{
	dc__say("%s", rio_errormsg());
	return rc < 0 ? rc : -EIO;
}

static long
do_socket(long *a)
{
	int type = (int)a[1];
	long fd = dc__sys6(SYS_socket, AF_UNIX, SOCK_STREAM |
		(type & (SOCK_NONBLOCK | SOCK_CLOEXEC)), 0, 0, 0, 0);
	if (fd < 0)
		return fd;
	fd = dc__k_track_new((int)fd, "", ((type & SOCK_CLOEXEC) ? O_CLOEXEC :
		0) | ((type & SOCK_NONBLOCK) ? O_NONBLOCK : 0));
	if (fd < 0)
		return fd;
	struct dc__desc *x = &dc__st.desc[dc__desc_of((int)fd)];
	x->kind = DC__K_SOCK;
	x->sock_domain = (int)a[0];
	x->sock_type = SOCK_STREAM;
	x->sock_proto = (int)a[2];
	x->tcp = DC__TCP_NEW;
	return fd;
}

/* the Unix side of listener x on fd: named, and listening if it was */
static long
unix_listener(long fd, const struct dc__desc *x)
{
	struct sockaddr_un u;
	socklen_t ul = lname(&u, DC_KP_LNAME, x->tcp_id, true);
	long r = dc__sys6(SYS_bind, fd, (long)&u, ul, 0, 0, 0);
	if (r == 0 && x->tcp == DC__TCP_LISTEN)
		r = dc__sys6(SYS_listen, fd, x->tcp_backlog, 0, 0, 0, 0);
	return r;
}

static long
do_bind(long *a, struct dc__desc *x)
{
	if (x->tcp != DC__TCP_NEW)
		return -EINVAL;
	if ((size_t)a[2] > sizeof(struct sockaddr_storage))
		return -EINVAL;
	int rc = connect_keeper(!dc__vol.recovered);
	if (rc)
		return fail(rc);
	struct dc_kp_msg m = { .op = DC_KP_BIND, .id = ++next_lid,
		.addr_len = (uint32_t)a[2] }, rep;
	memcpy(&m.addr, (const void *)a[1], (size_t)a[2]);
	if ((rc = call(&m, NULL, 0, &rep, NULL)))
		return fail(rc);
	if (rep.err)
		return rep.err;
	x->tcp_id = m.id;
	x->bind_addr = rep.addr;
	x->bind_len = rep.addr_len;
	x->tcp = DC__TCP_BOUND;
	long r = unix_listener(a[0], x);
	dc__nd_event(); /* the port may be the kernel's choice */
	return r;
}

static long
do_listen(long *a, struct dc__desc *x)
{
	if (x->tcp != DC__TCP_BOUND && x->tcp != DC__TCP_LISTEN)
		return -EINVAL; /* an unbound listener: not supported */
	int backlog = a[1] > 0 ? (int)a[1] : 16;
	long r = dc__sys6(SYS_listen, a[0], backlog, 0, 0, 0, 0);
	if (r)
		return r;
	struct dc_kp_msg m = { .op = DC_KP_LISTEN, .id = x->tcp_id,
		.a = (uint64_t)backlog }, rep;
	int rc = call(&m, NULL, 0, &rep, NULL);
	if (rc)
		return fail(rc);
	if (rep.err)
		return rep.err;
	x->tcp = DC__TCP_LISTEN;
	x->tcp_backlog = backlog;
	return 0;
}

/* the hello a new connection starts with, read whole (the keeper writes
 * it as it connects: it is there or about to be) */
static int
read_hello(long fd, struct dc_kp_hello *h)
{
	char *b = scratch();
	size_t got = 0;
	while (got < sizeof(*h)) {
		long r = dc__sys6(SYS_recvfrom, fd, (long)(b + got),
			(long)(sizeof(*h) - got), MSG_DONTWAIT, 0, 0);
		if (r > 0) {
			got += (size_t)r;
			continue;
		}
		if (r == -EINTR)
			continue;
		if (r != -EAGAIN)
			return -1;
		struct pollfd p = { .fd = (int)fd, .events = POLLIN };
		if (dc__sys6(SYS_poll, (long)&p, 1, 2000, 0, 0, 0) == 0)
			return -1;
	}
	memcpy(h, b, sizeof(*h));
	return h->magic == DC_KP_MAGIC ? 0 : -1;
}

static long
do_accept(long nr, long *a, void *uc, struct dc__desc *lx)
{
	int flags = nr == SYS_accept4 ? (int)a[3] : 0;
	long b[6] = { a[0], 0, 0, flags, 0, 0 };
	for (;;) {
		long fd = dc__blocking(SYS_accept4, b, uc);
		if (fd < 0)
			return fd;
		struct dc_kp_hello h;
		if (read_hello(fd, &h) != 0) {
			/* a connection that died on the way: the next */
			dc__sys6(SYS_close, fd, 0, 0, 0, 0, 0);
			if (flags & SOCK_NONBLOCK)
				return -EAGAIN;
			continue;
		}
		fd = dc__k_track_new((int)fd, "", ((flags & SOCK_CLOEXEC) ?
			O_CLOEXEC : 0) | ((flags & SOCK_NONBLOCK) ? O_NONBLOCK :
			0));
		if (fd < 0)
			return fd;
		struct dc__desc *x = &dc__st.desc[dc__desc_of((int)fd)];
		x->kind = DC__K_SOCK;
		x->sock_domain = lx->sock_domain;
		x->sock_type = SOCK_STREAM;
		x->sock_proto = lx->sock_proto;
		x->tcp = DC__TCP_CONN;
		x->tcp_id = h.id;
		x->tcp_rpos = x->tcp_wpos = 0;
		x->tcp_shut = false;
		x->peer_addr = h.peer;
		x->peer_len = h.peer_len;
		x->bind_addr = h.local;
		x->bind_len = h.local_len;
		if (a[1] && a[2]) {
			socklen_t *lp = (socklen_t *)a[2];
			memcpy((void *)a[1], &h.peer, *lp < h.peer_len ? *lp :
				h.peer_len);
			*lp = h.peer_len;
		}
		dc__nd_event();
		return fd;
	}
}

static long
name_of(long *a, const struct sockaddr_storage *s, socklen_t l)
{
	socklen_t *lp = (socklen_t *)a[2];
	if (lp == NULL || a[1] == 0)
		return -EFAULT;
	memcpy((void *)a[1], s, *lp < l ? *lp : l);
	*lp = l;
	return 0;
}

static long
counted(long nr, long *a, void *uc, struct dc__desc *x, bool out)
{
	/* sendfile reads a file behind the held writes: they are
	 * performed first (held.c invariant 5) */
	if (nr == SYS_sendfile && dc__vol.held.nfile > 0 && dc__commit() < 0)
		return -EIO;
	long r = dc__blocking(nr, a, uc);
	if (r <= 0)
		return r;
	if (out) {
		x->tcp_wpos += (uint64_t)r;
		K.dirty = true;
		return r;
	}
	int fl = nr == SYS_recvfrom ? (int)a[3] : nr == SYS_recvmsg ?
		(int)a[2] : 0;
	if (!(fl & MSG_PEEK))
		x->tcp_rpos += (uint64_t)r;
	return r;
}

long
dc__kp_syscall(long nr, long *a, void *uc, bool *handled)
{
	struct dc__desc *x;
	*handled = false;
	switch (nr) {
	case SYS_epoll_create:
	case SYS_epoll_create1:
	case SYS_epoll_ctl:
		return dc__ep_syscall(nr, a, handled);
	case SYS_socket:
		if ((a[0] != AF_INET && a[0] != AF_INET6) ||
		    (a[1] & 0xf) != SOCK_STREAM || !enabled())
			return 0;
		*handled = true;
		return do_socket(a);
	case SYS_read:
	case SYS_readv:
	case SYS_recvfrom:
	case SYS_recvmsg:
		if ((x = tdesc(a[0], DC__TCP_CONN)) == NULL)
			return 0;
		*handled = true;
		return counted(nr, a, uc, x, false);
	case SYS_write:
	case SYS_writev:
	case SYS_sendto:
	case SYS_sendmsg:
	case SYS_sendfile:
		if ((x = tdesc(a[0], DC__TCP_CONN)) == NULL)
			return 0;
		*handled = true;
		return counted(nr, a, uc, x, true);
	case SYS_recvmmsg:
	case SYS_sendmmsg:
	case SYS_splice:
		if ((x = tdesc(nr == SYS_splice ? a[2] : a[0], 0)) == NULL &&
		    (nr != SYS_splice || (x = tdesc(a[0], 0)) == NULL))
			return 0;
		*handled = true;
		dc__refuse_call("recvmmsg, sendmmsg or splice on a TCP "
			"socket", "the keeper counts a connection's bytes "
			"through the other calls", -EOPNOTSUPP);
		return -EOPNOTSUPP;
	default:
		break;
	}
	if ((x = tdesc(a[0], 0)) == NULL)
		return 0;
	*handled = true;
	switch (nr) {
	case SYS_bind:
		return do_bind(a, x);
	case SYS_listen:
		return do_listen(a, x);
	case SYS_accept:
	case SYS_accept4:
		if (x->tcp != DC__TCP_LISTEN)
			return -EINVAL;
		return do_accept(nr, a, uc, x);
	case SYS_connect:
		dc__refuse_call("an outgoing TCP connection", "the keeper "
			"holds a server's connections only", -EPERM);
		return -EPERM;
	case SYS_getsockname:
		return name_of(a, &x->bind_addr, x->bind_len);
	case SYS_getpeername:
		if (x->tcp != DC__TCP_CONN)
			return -ENOTCONN;
		return name_of(a, &x->peer_addr, x->peer_len);
	case SYS_shutdown:
		if (x->tcp != DC__TCP_CONN)
			return -ENOTCONN;
		if (a[1] == SHUT_WR || a[1] == SHUT_RDWR) {
			x->tcp_shut = true;
			K.dirty = true;
		}
		return 0;
	case SYS_setsockopt:
		if (a[1] == SOL_SOCKET)
			return dc__sys6(nr, a[0], a[1], a[2], a[3], a[4], 0);
		return 0; /* TCP and IP options: no effect on the keeper's */
	case SYS_getsockopt:
		if (a[1] == SOL_SOCKET && a[2] == SO_DOMAIN) {
			if (a[3] && a[4] && *(socklen_t *)a[4] >= sizeof(int)) {
				*(int *)a[3] = x->sock_domain;
				*(socklen_t *)a[4] = sizeof(int);
			}
			return 0;
		}
		if (a[1] == SOL_SOCKET)
			return dc__sys6(nr, a[0], a[1], a[2], a[3], a[4], 0);
		if (a[3] && a[4] && *(socklen_t *)a[4] >= sizeof(int)) {
			*(int *)a[3] = 0;
			*(socklen_t *)a[4] = sizeof(int);
		}
		return 0;
	case SYS_close:
	case SYS_dup2:
	case SYS_dup3: {
		/* the last descriptor of a connection closes it: room in
		 * the list the commit sends first (invariant 1) */
		long victim = nr == SYS_close ? a[0] : a[1];
		struct dc__desc *v = tdesc(victim, DC__TCP_CONN);
		if (v && v->refs == 1 && nclosed >= MAX_CLOSED &&
		    dc__commit() < 0)
			return -EIO;
		*handled = false;
		return 0;
	}
	default:
		*handled = false;
		return 0;
	}
}

/* kstate.c: descriptor fd of description d is closed (last: its
 * description's last). */
void
dc__kp_dropped(int fd, int d, bool last)
{
	struct dc__desc *x = &dc__st.desc[d];
	dc__ep_dropped(fd, last);
	if (!last || x->tcp != DC__TCP_CONN)
		return;
	if (nclosed < MAX_CLOSED) {
		closed[nclosed].id = x->tcp_id;
		closed[nclosed].wpos = x->tcp_wpos;
		nclosed++;
	}
	K.dirty = true;
	x->tcp = 0;
}

/* The positions of the image in dc__st (invariant 1), into e; the
 * count. */
static uint32_t
positions(struct dc_kp_ent *e)
{
	uint32_t n = 0;
	for (int d = 0; d < DC__MAX_DESC && n < DC_KP_MAX_ENTS; d++) {
		const struct dc__desc *x = &dc__st.desc[d];
		if (x->refs == 0 || x->tcp != DC__TCP_CONN)
			continue;
		e[n++] = (struct dc_kp_ent){ .type = DC_KPE_CONN,
			.flags = x->tcp_shut ? DC_KPE_SHUT_WR : 0,
			.id = x->tcp_id, .rpos = x->tcp_rpos,
			.wpos = x->tcp_wpos };
	}
	for (unsigned i = 0; i < nclosed && n < DC_KP_MAX_ENTS; i++)
		e[n++] = (struct dc_kp_ent){ .type = DC_KPE_CLOSED,
			.id = closed[i].id, .wpos = closed[i].wpos };
	return n;
}

/* Invariant 4: the keeper is gone (rc says how); the run ends as at a
 * crash, its last commit the recovery's image.  Raw system calls only:
 * called by the background writer and the tick's handler too. */
static void
lost(int rc)
{
	dc__say("dc-keeper is gone (%s): the TCP connections and listening "
		"sockets it held went with it; the run ends as at a crash, "
		"run it again to recover (a new keeper serves the ports "
		"again)", strerror(-rc));
#ifndef DC_BROKEN_KEEPER_LOST_GOES_ON /* broken build: runs on, deaf */
	dc__sys6(SYS_kill, dc__sys6(SYS_getpid, 0, 0, 0, 0, 0, 0), SIGKILL, 0,
		0, 0, 0);
#endif
	dc__sys6(SYS_close, K.fd, 0, 0, 0, 0, 0);
	K.fd = 0;
}

/* Positions e[0..n) of generation gen, to the keeper.  Raw system calls
 * only: the background writer sends it too (ckpt.c invariant 8). */
static void
send_positions(uint64_t gen, const struct dc_kp_ent *e, uint32_t n)
{
	struct dc_kp_msg m = { .op = DC_KP_COMMIT, .gen = gen };
	int rc = call(&m, e, n, NULL, NULL);
	if (rc == -EPIPE || rc == -ECONNRESET || rc == -ENOTCONN)
		lost(rc); /* gen is committed, the recovery's image */
	else if (rc)
		dc__say("%s", rio_errormsg());
}

/* The image's positions (dc__st) as generation gen's.  Untracked
 * scratch: writing it dirties no page of the image. */
static void
send_image_positions(uint64_t gen)
{
	struct dc_kp_ent *e = (struct dc_kp_ent *)(void *)dc__vol.io;
	send_positions(gen, e, positions(e));
}

/* A tick that finds the program inside libdc, usually waiting in a call
 * (sud.c timer_handler): an idle program commits nothing, so no send finds a keeper lost since
 * its last commit; its hang-up on the control socket is looked for here
 * (invariant 4).  Raw system calls only: a signal handler. */
void
dc__kp_check(void)
{
	if (K.fd <= 0)
		return;
	struct pollfd p = { .fd = K.fd, .events = POLLRDHUP };
	if (dc__sys6(SYS_poll, (long)&p, 1, 0, 0, 0, 0) == 1 &&
	    (p.revents & (POLLHUP | POLLRDHUP | POLLERR)))
		lost(-ECONNRESET);
}

/* The next interval's closes start empty: a rollback to the image has
 * the list again and sends it again (the keeper takes it twice alike). */
static void
interval_done(void)
{
	nclosed = 0;
	K.dirty = false;
}

/* After the commit record of gen (held.c, H3). */
void
dc__kp_committed(uint64_t gen)
{
	if (K.fd <= 0)
		return;
	send_image_positions(gen);
	interval_done();
}

/* The background writer's release (ckpt.c invariant 8), taken with the
 * threads stopped: the image's positions into e, which holds
 * DC_KP_MAX_ENTS; the count, or UINT32_MAX without a keeper. */
uint32_t
dc__kp_take(struct dc_kp_ent *e)
{
	if (K.fd <= 0)
		return UINT32_MAX;
	uint32_t n = positions(e);
	interval_done();
	return n;
}

/* ... and sent by the writer once gen's commit record is durable. */
void
dc__kp_send(uint64_t gen, const struct dc_kp_ent *e, uint32_t n)
{
	if (n != UINT32_MAX && K.fd > 0)
		send_positions(gen, e, n);
}

/* Recovery (kstate.c reopen): description d again, as a new descriptor
 * (invariant 2); -errno with the message on failure. */
int
dc__kp_reopen(struct dc__desc *x)
{
	long fd;
	int rc;
	if (x->tcp == DC__TCP_CONN) {
		if ((rc = connect_keeper(false)))
			return rc;
		struct dc_kp_msg m = { .op = DC_KP_ATTACH, .id = x->tcp_id,
			.a = x->tcp_rpos, .b = x->tcp_wpos }, rep;
		int nfd = -1;
		if ((rc = call(&m, NULL, 0, &rep, &nfd)))
			return rc;
		if (rep.err || nfd < 0) {
			/* the keeper lost it (it was restarted): the
			 * program sees its client hang up */
			int sv[2];
			dc__say("TCP connection %llu is gone (%s): the "
				"program sees its client hang up",
				(unsigned long long)x->tcp_id, rep.err ==
				-ENOENT ? "the keeper does not hold it: was "
				"it started again?" : strerror(rep.err ?
					-rep.err : EPROTO));
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0,
				    sv) != 0)
				return dc__err(-errno, "socketpair: %s",
					strerror(errno));
			close(sv[1]);
			nfd = sv[0];
		}
		fd = nfd;
	} else {
		fd = dc__sys6(SYS_socket, AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC,
			0, 0, 0, 0);
		if (fd < 0)
			return dc__err((int)fd, "recreate a TCP socket: %s",
				strerror((int)-fd));
		if (x->tcp != DC__TCP_NEW && (rc = (int)unix_listener(fd, x)))
			return dc__err(rc, "listener %llu: %s",
				(unsigned long long)x->tcp_id, strerror(-rc));
	}
	if (x->flags & O_NONBLOCK)
		dc__sys6(SYS_fcntl, fd, F_SETFL, O_NONBLOCK, 0, 0, 0);
	return (int)fd;
}

/* Recovery, every descriptor back (held.c dc__held_recover_finish). */
int
dc__kp_resumed(void)
{
	int rc = dc__ep_restore();
	if (rc || !enabled())
		return rc;
	if ((rc = connect_keeper(false)))
		return rc;
	/* the listeners again: the keeper answers for one it holds, and
	 * binds one it does not (a keeper started again) */
	for (int d = 0; d < DC__MAX_DESC; d++) {
		const struct dc__desc *x = &dc__st.desc[d];
		if (x->refs == 0 || (x->tcp != DC__TCP_BOUND &&
			x->tcp != DC__TCP_LISTEN))
			continue;
		struct dc_kp_msg b = { .op = DC_KP_BIND, .id = x->tcp_id,
			.addr_len = x->bind_len, .addr = x->bind_addr }, rep;
		if ((rc = call(&b, NULL, 0, &rep, NULL)) == 0 && rep.err == 0 &&
		    x->tcp == DC__TCP_LISTEN) {
			b = (struct dc_kp_msg){ .op = DC_KP_LISTEN,
				.id = x->tcp_id, .a = (uint64_t)x->tcp_backlog };
			rc = call(&b, NULL, 0, &rep, NULL);
		}
		if (rc == 0 && rep.err)
			rc = dc__err(rep.err, "listener %llu: %s",
				(unsigned long long)x->tcp_id,
				strerror(-rep.err));
		if (rc)
			dc__say("%s", rio_errormsg());
	}
	send_image_positions(dc__vol.committed);
	struct dc_kp_msg m = { .op = DC_KP_RESUMED };
	return call(&m, NULL, 0, NULL, NULL);
}

/* The program ends (held.c dc__held_exit, after its last commit). */
void
dc__kp_exit(void)
{
	if (K.fd <= 0)
		return;
	struct dc_kp_msg m = { .op = DC_KP_BYE };
	if (call(&m, NULL, 0, NULL, NULL))
		dc__say("%s", rio_errormsg());
}
