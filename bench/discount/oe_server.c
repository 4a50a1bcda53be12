/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * oe_server.c -- an order-entry server over TCP (the TPC-C-like workload
 *                of the buffered protocol, held_tpcc.sh): an ordinary
 *                single-process epoll server, no libdc in it
 *
 *   dc-bench-oe-server PORT [DB_MIB] [--disk DIR [--pool-mb N]]
 *   dc-bench-oe-server --create DIR DB_MIB
 *
 * The database is tpcbench's order-entry (bench/tpcb_tpcc/
 * wl_order_entry.c: warehouse, district, customer, item, stock, order,
 * new-order and history tables, TPC-C's new-order / payment / delivery
 * mix) in DB_MIB MiB (default 16) of plain memory, through tpcbench's
 * "none" backend: the server keeps nothing on disk, so its durability is
 * dc-run's checkpoints.  Each OE_TX request (oe_proto.h) runs one
 * transaction and is answered after it; OE_CHECK runs the workload's
 * consistency conditions, against its own running totals, over the whole
 * database.  Non-blocking sockets, one epoll loop, per connection an
 * input and an output buffer.  SIGTERM ends it normally (exit 0: dc-run
 * writes its --stats).
 *
 * --disk DIR: the database is DIR/oe.data, which --create made, read in
 * 4 KiB blocks through a buffer of N MiB (default 16) that is smaller
 * than it, with a redo log DIR/oe.log (oe_disk.c).  The answers of a
 * round of the event loop leave after its transactions' log records are
 * durable (group commit): a connection's output buffer holds `safe`
 * bytes that may be sent, the rest waits for the round's commit.
 * OE_CHECK then also holds buffer + data file to the log.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "oe_disk.h"
#include "oe_proto.h"
#include "tpcbench.h"

#define MAXC 2048
#define BUF 65536

struct cl {
	int fd;
	uint64_t count, hash;
	size_t inl, outl, outo;
	size_t safe;   /* out[outo, safe) may be sent */
	bool pend;     /* in pend[]: answers wait for the group commit */
	char in[BUF], out[BUF];
};

static struct cl *cl[MAXC];
static int ep = -1, lfd;
static void *wl, *db, *bctx;
static uint64_t total;
static bool disk;
static const struct tb_backend *be = &tb_backend_none;
static struct cl *pend[MAXC]; /* --disk: answered in this round */
static int npend;
static volatile sig_atomic_t ending;

static void
on_term(int sig)
{
	(void)sig;
	ending = 1;
}

/* wl_order_entry.c and backend_none.c report through this (util.c's,
 * which would bring librio in) */
void
tb_err(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("oe-server: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

static void
want(struct cl *c, bool out)
{
	struct epoll_event ev = { .events = EPOLLIN | (out ? EPOLLOUT : 0),
		.data.ptr = c };
	epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &ev);
}

static void
drop(struct cl *c)
{
	for (int i = 0; i < MAXC; i++)
		if (cl[i] == c)
			cl[i] = NULL;
	for (int i = 0; c->pend && i < npend; i++)
		if (pend[i] == c)
			pend[i] = NULL;
	close(c->fd);
	free(c);
}

static void
flush_out(struct cl *c)
{
	while (c->outo < c->safe) {
		ssize_t r = write(c->fd, c->out + c->outo, c->safe - c->outo);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		c->outo += (size_t)r;
	}
	if (c->outo == c->outl)
		c->outo = c->outl = c->safe = 0;
	want(c, c->outo < c->safe);
}

/* 0, or -1: the connection is to be dropped */
static int
serve(struct cl *c)
{
	size_t used = 0;
	int rc = 0;
	while (c->inl - used >= sizeof(struct oe_req)) {
		struct oe_req q;
		memcpy(&q, c->in + used, sizeof(q));
		if (q.magic != OE_REQ || (q.op != OE_TX && q.op != OE_CHECK)) {
			fprintf(stderr, "oe-server: a malformed request\n");
			rc = -1;
			break;
		}
		if (c->outl + sizeof(struct oe_rep) > BUF)
			break; /* the answer waits for room */
		struct oe_rep p = { .magic = OE_REP, .op = q.op, .seq = q.seq };
		if (getrandom(&p.nonce, sizeof(p.nonce), 0) != 8) {
			rc = -1;
			break;
		}
		if (q.op == OE_TX) {
			int r = tb_order_entry.tx(wl, db, be, bctx);
			if (r < 0) {
				rc = -1;
				break;
			}
			p.result = (uint32_t)r;
			total++;
			c->count++;
			if (c->hash == 0)
				c->hash = TE_HASH0;
			c->hash = te_chain(c->hash, p.nonce, q.seq);
		} else {
			char why[256];
			p.result = (disk ? oe_disk_check(wl, why,
				sizeof(why)) : tb_order_entry.check(wl, db, why,
				sizeof(why))) == 0 ? 0 : 1;
			if (p.result)
				fprintf(stderr, "oe-server: inconsistent: %s\n",
					why);
		}
		p.count = c->count;
		p.hash = c->hash;
		p.total = total;
		memcpy(c->out + c->outl, &p, sizeof(p));
		c->outl += sizeof(p);
		used += sizeof(q);
	}
	memmove(c->in, c->in + used, c->inl - used);
	c->inl -= used;
	if (!disk)
		c->safe = c->outl;
	else if (c->safe < c->outl && !c->pend)
		c->pend = true, pend[npend++] = c;
	return rc;
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

static void
accept_all(void)
{
	for (;;) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);
		if (fd < 0)
			return;
		int one = 1;
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		struct cl *c = calloc(1, sizeof(*c));
		int i = 0;
		while (i < MAXC && cl[i])
			i++;
		if (c == NULL || i == MAXC) {
			close(fd);
			free(c);
			continue;
		}
		c->fd = fd;
		cl[i] = c;
		struct epoll_event ev = { .events = EPOLLIN, .data.ptr = c };
		epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
	}
}

/* --disk: the round's log records are durable (group commit), then its
 * answers may leave. */
static void
release(void)
{
	if (npend == 0)
		return;
	if (oe_disk_commit() != 0)
		exit(1);
	static struct cl *now[MAXC];
	int n = npend;
	memcpy(now, pend, sizeof(*now) * (size_t)n);
	npend = 0;
	for (int i = 0; i < n; i++) {
		struct cl *c = now[i];
		if (c == NULL)
			continue;
		c->pend = false;
		c->safe = c->outl;
		flush_out(c);
		/* requests left for want of room in out: served now, their
		 * answers go with the next round's commit */
		if (c->inl >= sizeof(struct oe_req) && serve(c) != 0)
			drop(c);
	}
}

static int
usage(void)
{
	fprintf(stderr, "usage: dc-bench-oe-server PORT [DB_MIB] [--disk DIR "
		"[--pool-mb N]]\n       dc-bench-oe-server --create DIR "
		"DB_MIB\n");
	return 2;
}

int
main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--create"))
		return oe_disk_create(argv[2], (size_t)atol(argv[3])) ? 1 : 0;
	if (argc < 2 || argv[1][0] == '-')
		return usage();
	int k = 2;
	size_t mib = 16;
	double pool = 16;
	const char *dir = NULL;
	if (k < argc && argv[k][0] != '-')
		mib = (size_t)atol(argv[k++]);
	for (; k < argc; k++) {
		if (!strcmp(argv[k], "--disk") && k + 1 < argc)
			dir = argv[++k];
		else if (!strcmp(argv[k], "--pool-mb") && k + 1 < argc)
			pool = atof(argv[++k]);
		else
			return usage();
	}
	if (dir) {
		disk = true;
		be = &oe_disk_backend;
		if (oe_disk_open(dir, mib, pool, &wl))
			return 1;
	} else {
		struct tb_opts o = { .workload = "order-entry",
			.backend = "none", .db_size = mib << 20, .seed = 1 };
		if (mib == 0 || tb_order_entry.init(&o, o.db_size, o.seed,
			&wl) || tb_backend_none.open(&o, 0, true, &bctx, &db))
			return 1;
		tb_order_entry.populate(wl, db);
	}
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	int one = 1;
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { .sin_family = AF_INET,
		.sin_port = htons((uint16_t)atoi(argv[1])),
		.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
	    listen(lfd, 1024) != 0) {
		perror("oe-server: listen");
		return 1;
	}
	ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev0 = { .events = EPOLLIN, .data.ptr = NULL };
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev0) != 0) {
		perror("oe-server: epoll");
		return 1;
	}
	struct sigaction sa = { .sa_handler = on_term };
	sigaction(SIGTERM, &sa, NULL);
	while (!ending) {
		struct epoll_event ev[32];
		int r = epoll_wait(ep, ev, 32, npend ? 0 : 1000);
		if (r < 0 && errno != EINTR) {
			perror("oe-server: epoll_wait");
			return 1;
		}
		for (int j = 0; j < r; j++) {
			struct cl *c = ev[j].data.ptr;
			if (c == NULL) {
				accept_all();
				continue;
			}
			/* a client dropped earlier in this round */
			bool live = false;
			for (int i = 0; i < MAXC && !live; i++)
				live = cl[i] == c;
			if (!live)
				continue;
			if (ev[j].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
				readable(c);
			} else if (ev[j].events & EPOLLOUT) {
				flush_out(c);
				if (serve(c) != 0)
					drop(c);
				else
					flush_out(c);
			}
		}
		release();
	}
	if (disk)
		oe_disk_stats(total);
	return 0;
}
