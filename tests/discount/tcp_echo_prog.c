/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcp_echo_prog.c -- an ordinary single-process TCP echo server (no libdc
 *                    in it), run under dc-run --protocol buffered by
 *                    tcp_kill.c and bench/discount/held_tcp.sh
 *
 *   dc-tcp-echo PORT epoll|poll|threadsN
 *
 * Non-blocking sockets, one event loop (epoll, or poll), per connection
 * an input and an output buffer.  Each request (tcp_echo.h) is answered
 * with the client's count, a fresh random nonce, the chained hash, and
 * the payload back.  A request from client TE_QUIT ends the server
 * (exit 0) once its answer is written.  threadsN (N = 1..8): an
 * acceptor thread with an epoll set of its own hands each connection to
 * one of N worker threads (round robin, onto the worker's epoll set);
 * the counts and hashes are shared under a mutex; the main thread waits
 * for them all.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tcp_echo.h"

#define MAXC 64
#define BUF (2 * (TE_MAXLEN + 64))

struct cl {
	int fd, ep;             /* ep: the epoll set it is on */
	size_t inl, outl, outo;
	char in[BUF], out[BUF];
};

static struct cl *cl[MAXC];
static struct {
	uint64_t count, hash;
} st[TE_MAXCID];
static int ep = -1, lfd;
static bool use_poll;
static atomic_bool quitting;
/* threadsN: cl[] and st[] are shared by the threads */
static pthread_mutex_t cl_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t st_mu = PTHREAD_MUTEX_INITIALIZER;

static void
want(struct cl *c, bool out)
{
	if (use_poll)
		return;
	struct epoll_event ev = { .events = EPOLLIN | (out ? EPOLLOUT : 0),
		.data.ptr = c };
	epoll_ctl(c->ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void
drop(struct cl *c)
{
	pthread_mutex_lock(&cl_mu);
	for (int i = 0; i < MAXC; i++)
		if (cl[i] == c)
			cl[i] = NULL;
	pthread_mutex_unlock(&cl_mu);
	close(c->fd);
	free(c);
}

static void
flush_out(struct cl *c)
{
	while (c->outo < c->outl) {
		ssize_t r = write(c->fd, c->out + c->outo, c->outl - c->outo);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		c->outo += (size_t)r;
	}
	if (c->outo == c->outl)
		c->outo = c->outl = 0;
	want(c, c->outl > 0);
}

/* 0, or -1: the connection is to be dropped */
static int
serve(struct cl *c)
{
	for (;;) {
		struct te_req q;
		if (c->inl < sizeof(q))
			return 0;
		memcpy(&q, c->in, sizeof(q));
		if (q.magic != TE_REQ || q.len > TE_MAXLEN ||
		    (q.cid >= TE_MAXCID && q.cid != TE_QUIT)) {
			fprintf(stderr, "tcp-echo: a malformed request\n");
			return -1;
		}
		if (c->inl < sizeof(q) + q.len)
			return 0;
		if (c->outl + sizeof(struct te_rep) + q.len > BUF)
			return 0; /* the answer waits for room */
		struct te_rep p = { .magic = TE_REP, .cid = q.cid,
			.seq = q.seq, .len = q.len };
		if (getrandom(&p.nonce, sizeof(p.nonce), 0) != 8)
			return -1;
		pthread_mutex_lock(&st_mu);
		if (q.cid == TE_QUIT) {
			quitting = true;
		} else {
			st[q.cid].count++;
			if (st[q.cid].hash == 0)
				st[q.cid].hash = TE_HASH0;
			st[q.cid].hash = te_chain(st[q.cid].hash, p.nonce,
				q.seq);
			p.count = st[q.cid].count;
			p.hash = st[q.cid].hash;
		}
		pthread_mutex_unlock(&st_mu);
		memcpy(c->out + c->outl, &p, sizeof(p));
		memcpy(c->out + c->outl + sizeof(p), c->in + sizeof(q), q.len);
		c->outl += sizeof(p) + q.len;
		memmove(c->in, c->in + sizeof(q) + q.len,
			c->inl - sizeof(q) - q.len);
		c->inl -= sizeof(q) + q.len;
	}
}

static void
readable(struct cl *c)
{
	for (;;) {
		if (c->inl == BUF) {
			if (serve(c) != 0) {
				drop(c);
				return;
			}
			if (c->inl == BUF)
				break;
		}
		ssize_t r = read(c->fd, c->in + c->inl, BUF - c->inl);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			break;
		if (r <= 0) {
			if (r < 0)
				fprintf(stderr, "tcp-echo: read: %s\n",
					strerror(errno));
			drop(c);
			return;
		}
		c->inl += (size_t)r;
	}
	if (serve(c) != 0) {
		drop(c);
		return;
	}
	flush_out(c);
}

/* a new connection on epoll set e (-1: poll) */
static void
add_client(int fd, int e)
{
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	struct cl *c = calloc(1, sizeof(*c));
	pthread_mutex_lock(&cl_mu);
	int i = 0;
	while (i < MAXC && cl[i])
		i++;
	if (c == NULL || i == MAXC) {
		pthread_mutex_unlock(&cl_mu);
		close(fd);
		free(c);
		return;
	}
	c->fd = fd;
	c->ep = e;
	cl[i] = c;
	pthread_mutex_unlock(&cl_mu);
	if (e >= 0) {
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		epoll_ctl(e, EPOLL_CTL_ADD, fd, &ev);
	}
}

static bool
live(const void *who)
{
	pthread_mutex_lock(&cl_mu);
	bool l = false;
	for (int i = 0; i < MAXC && !l; i++)
		l = cl[i] == who;
	pthread_mutex_unlock(&cl_mu);
	return l;
}

/* quitting, and no client of epoll set e (-1: any) has output left */
static bool
done(int e)
{
	if (!quitting)
		return false;
	bool pending = false;
	pthread_mutex_lock(&cl_mu);
	for (int i = 0; i < MAXC; i++)
		if (cl[i] && (e < 0 || cl[i]->ep == e) && cl[i]->outl)
			pending = true;
	pthread_mutex_unlock(&cl_mu);
	return !pending;
}

static void
accept_all(void)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
		if (fd < 0)
			return;
		add_client(fd, use_poll ? -1 : ep);
	}
}

static void
event(void *who, uint32_t ev)
{
	if (who == NULL) {
		accept_all();
		return;
	}
	struct cl *c = who;
	if (ev & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		readable(c);
		return; /* c may be gone */
	}
	if (ev & EPOLLOUT) {
		flush_out(c);
		if (serve(c) != 0)
			drop(c);
		else
			flush_out(c);
	}
}

/* ---- threadsN ---- */

#define MAXW 8
static int wep[MAXW], nw;

/* a worker: the connections on its own epoll set */
static void *
worker(void *arg)
{
	int e = wep[(intptr_t)arg];
	while (!done(e)) {
		struct epoll_event ev[16];
		int r = epoll_wait(e, ev, 16, 200);
		if (r < 0 && errno != EINTR) {
			perror("tcp-echo: worker: epoll_wait");
			exit(1);
		}
		for (int j = 0; j < r; j++)
			if (live(ev[j].data.ptr))
				event(ev[j].data.ptr, ev[j].events);
	}
	return NULL;
}

/* the acceptor: each new connection to the next worker's set */
static void *
acceptor(void *arg)
{
	(void)arg;
	int a = epoll_create1(EPOLL_CLOEXEC), next = 0;
	struct epoll_event lev = { .events = EPOLLIN, .data.ptr = NULL };
	if (a < 0 || epoll_ctl(a, EPOLL_CTL_ADD, lfd, &lev) != 0) {
		perror("tcp-echo: acceptor: epoll");
		exit(1);
	}
	while (!quitting) {
		struct epoll_event ev;
		int r = epoll_wait(a, &ev, 1, 200);
		if (r < 0 && errno != EINTR) {
			perror("tcp-echo: acceptor: epoll_wait");
			exit(1);
		}
		for (int fd; r > 0 &&
		     (fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0;) {
			add_client(fd, wep[next]);
			next = (next + 1) % nw;
		}
	}
	return NULL;
}

static int
run_threads(void)
{
	pthread_t t[MAXW + 1];
	for (int w = 0; w < nw; w++)
		if ((wep[w] = epoll_create1(EPOLL_CLOEXEC)) < 0) {
			perror("tcp-echo: epoll");
			return 1;
		}
	for (int w = 0; w <= nw; w++) {
		int e = pthread_create(&t[w], NULL, w < nw ? worker : acceptor,
			(void *)(intptr_t)w);
		if (e != 0) {
			fprintf(stderr, "tcp-echo: pthread_create: %s\n",
				strerror(e));
			return 1;
		}
	}
	for (int w = 0; w <= nw; w++)
		pthread_join(t[w], NULL);
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: dc-tcp-echo PORT "
			"epoll|poll|threadsN\n");
		return 2;
	}
	use_poll = !strcmp(argv[2], "poll");
	if (!strncmp(argv[2], "threads", 7)) {
		nw = atoi(argv[2] + 7);
		if (nw < 1 || nw > MAXW) {
			fprintf(stderr, "tcp-echo: threadsN: N 1..%d\n", MAXW);
			return 2;
		}
	}
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)atoi(argv[1])),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(lfd, 64) != 0) {
		perror("tcp-echo: listen");
		return 1;
	}
	if (nw > 0)
		return run_threads();
	if (!use_poll) {
		ep = epoll_create1(EPOLL_CLOEXEC);
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = NULL };
		if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev) != 0) {
			perror("tcp-echo: epoll");
			return 1;
		}
	}
	for (;;) {
		if (done(-1))
			return 0;
		if (use_poll) {
			struct pollfd p[MAXC + 1];
			struct cl *w[MAXC + 1];
			int n = 0;
			p[n] = (struct pollfd){ lfd, POLLIN, 0 };
			w[n++] = NULL;
			for (int i = 0; i < MAXC; i++)
				if (cl[i]) {
					p[n] = (struct pollfd){ cl[i]->fd,
						(short)(POLLIN | (cl[i]->outl ?
							POLLOUT : 0)), 0 };
					w[n++] = cl[i];
				}
			int r = poll(p, (nfds_t)n, 1000);
			if (r < 0 && errno != EINTR) {
				perror("tcp-echo: poll");
				return 1;
			}
			for (int j = 0; j < n && r > 0; j++) {
				if (!p[j].revents)
					continue;
				/* a client dropped earlier in this round */
				if (w[j] == NULL || live(w[j]))
					event(w[j], (uint32_t)p[j].revents);
			}
		} else {
			struct epoll_event ev[16];
			int r = epoll_wait(ep, ev, 16, 1000);
			if (r < 0 && errno != EINTR) {
				perror("tcp-echo: epoll_wait");
				return 1;
			}
			for (int j = 0; j < r; j++)
				if (ev[j].data.ptr == NULL ||
				    live(ev[j].data.ptr))
					event(ev[j].data.ptr, ev[j].events);
		}
	}
}
