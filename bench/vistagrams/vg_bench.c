/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vg_bench.c -- vg-bench: request/response round trips (thesis Figure 4.6)
 *
 *   vg-bench [-n CYCLES] [-b BLOCK] [-s SIZES] [-S SYSTEMS] [-D DOMAINS]
 *            [-d DIR] [-o CSV] [-q]
 *
 * A client sends requests of SIZES bytes (default 8,16,...,8192) and the
 * server echoes them; the time of one request/response cycle on the
 * loopback, with client and server in two processes, for:
 *
 *   udp         raw UDP echo: sendto/recvfrom, nothing else (the floor)
 *   baseline    the same reliable request/response protocol as Vistagrams
 *               (ids, retransmission tables, acks, checksums), volatile:
 *               no transactions, no persistence (volatile endpoints)
 *   vistagrams  the recoverable application: the client sends in one
 *               transaction and receives in the next, the server receives
 *               and answers in one; tables and messages in Vista segments,
 *               once per persistence domain of DOMAINS (default
 *               cacheline,byte: ADR and eADR, the Rio model the thesis
 *               measured), each with its own server
 *   vistagrams-1tx  the same, but the client receives response i and
 *               sends request i+1 in one transaction (a pipelined client:
 *               one commit per cycle instead of two)
 *   zeromq      ZeroMQ REQ/REP over TCP on 127.0.0.1: what one would use
 *               for volatile request/reply (if built with libzmq)
 *
 * Method.  A difference of 2 us in a 25 us cycle is smaller than the drift
 * of a VM over the seconds that separate two sequential measurements, so
 * the systems are measured side by side: for each size, the run is cut
 * into CYCLES / BLOCK rounds, and each round runs BLOCK + 1 cycles of
 * every system in turn (the order rotates from round to round; the first
 * cycle of each block, which pays for the switch, is not counted).  A
 * system's time is the median of all its cycles.  Its cost over the
 * baseline is the median, over the rounds, of (its block's median - the
 * baseline's block median in the same round), with a distribution-free
 * 95% confidence interval (order statistics of the round differences);
 * Vistagrams' cost of persistence is taken the same way, cacheline minus
 * byte.  Throughput is one client with one request outstanding, 1 / the
 * mean cycle.  Also counted, in a separate pass, the persist barriers
 * (drains) and flushed cache lines per cycle on each side, through librio's
 * tracing hook.  -o writes, per size and system, the median, p99, mean and
 * the difference with its interval as CSV.  -S udp,vistagrams...: only
 * those systems.  -q: a quick smoke run.
 *
 * Every cycle wakes a process that sleeps in poll().  On an idle machine
 * (a VM above all) the CPU it sleeps on enters an idle state whose exit
 * costs tens of microseconds, and that, not the protocol, would be
 * measured.  So, as latency benchmarks do (cyclictest), vg-bench asks the
 * kernel for zero idle exit latency through /dev/cpu_dma_latency for as
 * long as it runs (root only; the output says whether it held).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <sched.h>
#include <math.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rio_clock.h"
#include "vistagrams.h"
#ifdef HAVE_ZMQ
#include <zmq.h>
#endif

/* What a system runs; the Vistagrams kinds once per domain. */
enum kind { K_UDP, K_BASE, K_VG, K_VG1, K_ZMQ, NKIND };
static const char *kind_name[NKIND] = { "udp", "baseline", "vistagrams",
	"vistagrams-1tx", "zeromq" };

#define MAX_SIZES 32
#define MAX_MSG 8192
#define MAX_DOM 3
#define MAX_SYS (NKIND + 2 * (MAX_DOM - 1))

struct sys {
	enum kind kind;
	int dom; /* K_VG, K_VG1: index into dom_flags */
};

static struct sys sys[MAX_SYS];
static int nsys;
static unsigned dom_flags[MAX_DOM]; /* RIO_FORCE_* of each domain */
static const char *dom_name[MAX_DOM];
static int ndom;

/* Shared with the server processes. */
struct shared {
	volatile int port_udp, port_base, port_zmq, port_vg[MAX_DOM];
	volatile uint64_t drains[MAX_DOM], lines[MAX_DOM]; /* traced */
	volatile int trace; /* 1 + the domain whose server counts from now */
};

static struct shared *sh;
static const char *dir = "/dev/shm";

#define CHECK(call)                                                         \
	do {                                                                \
		int rc_ = (call);                                           \
		if (rc_) {                                                  \
			fprintf(stderr, "vg-bench: %s: %s: %s\n", #call,    \
				vg_strerror(rc_), vg_errormsg());           \
			exit(1);                                            \
		}                                                           \
	} while (0)

/* ---- counting persist barriers (librio's tracing hook) ---- */

static uint64_t t_drains, t_lines;
static int counting;

static void
t_flush(const rio_pool *p, const void *a, size_t n, const void *caller)
{
	(void)p;
	(void)caller;
	if (counting && n)
		t_lines += ((uintptr_t)a + n - 1) / 64 - (uintptr_t)a / 64 + 1;
}

static void
t_drain(const rio_pool *p, const void *caller)
{
	(void)p;
	(void)caller;
	if (counting)
		t_drains++;
}

static void
t_point(const rio_pool *p, const char *w, const void *c)
{
	(void)p;
	(void)w;
	(void)c;
}

static void
t_mapped(const rio_pool *p, void *b, size_t s, const char *path)
{
	(void)p;
	(void)b;
	(void)s;
	(void)path;
}

static void
t_unmapping(const rio_pool *p, void *b, size_t s)
{
	(void)p;
	(void)b;
	(void)s;
}

static const struct rio_trace_ops tracer = { t_flush, t_drain, t_point,
	t_mapped, t_unmapping };

/* ---- Vistagrams nodes ---- */

struct node {
	vista *v;
	vista_segment *seg;
	vg_endpoint *ep;
};

/* Opens a node: volatile when name is NULL, else with its tables in a
 * Vista segment of DIR in the persistence domain rio_flags. */
static void
node_open(struct node *n, const char *name, uint64_t id, void *addr,
	unsigned rio_flags)
{
	char path[4096], log[4200];
	struct vista_opts vo = { 0 };
	struct vg_endpoint_opts o = { 0 };
	size_t tables;

	o.node_id = id;
	o.flags = VG_CREATE;
	o.max_message = MAX_MSG;
	if (name == NULL) { /* volatile */
		n->v = NULL;
		CHECK(vg_endpoint_open(NULL, NULL, &o, &n->ep));
		return;
	}
	snprintf(path, sizeof(path), "%s/vg-bench-%d-%s", dir, (int)getpid(),
		name);
	snprintf(log, sizeof(log), "%s.log", path);
	unlink(path);
	unlink(log);
	vo.log_path = log;
	vo.rio_flags = rio_flags;
	CHECK(vista_init(&vo, &n->v));
	CHECK(vg_table_size(&o, &tables));
	CHECK(vista_map(n->v, path, addr, tables, VISTA_CREATE, &n->seg));
	CHECK(vg_endpoint_open(n->v, n->seg, &o, &n->ep));
}

static void
node_close(struct node *n)
{
	char path[4096];
	const char *p = NULL;

	if (n->seg)
		p = rio_pool_path(vista_segment_pool(n->seg));
	if (p)
		snprintf(path, sizeof(path), "%s", p);
	vg_endpoint_close(n->ep);
	if (n->v) {
		vista_fini(n->v);
		unlink(path);
		strcat(path, ".log");
		unlink(path);
	}
}

static int
ep_port(vg_endpoint *ep)
{
	struct sockaddr_storage ss;
	socklen_t len;

	CHECK(vg_endpoint_address(ep, &ss, &len));
	return ntohs(((struct sockaddr_in *)&ss)->sin_port);
}

/* Where the segments of domain d are mapped: fixed, so that the client's
 * and the servers' tables never share an address range. */
static void *
seg_addr(bool server, int d)
{
	return (void *)(0x5d0000000000ull + (server ? 0 : 0x100000000000ull) +
		(uint64_t)d * 0x1000000000ull);
}

/* ---- servers ---- */

/* The Vistagrams server of domain d, or (d < 0) the volatile baseline. */
static void
serve_vg(int d)
{
	static char buf[MAX_MSG];
	char name[32];
	struct node n;
	size_t len;
	vg_reqid id;

	snprintf(name, sizeof(name), "server-%s", d >= 0 ? dom_name[d] : "");
	node_open(&n, d >= 0 ? name : NULL, 2, d >= 0 ? seg_addr(true, d) : 0,
		d >= 0 ? dom_flags[d] : 0);
	if (d >= 0)
		sh->port_vg[d] = ep_port(n.ep);
	else
		sh->port_base = ep_port(n.ep);
	for (;;) {
		if (d >= 0) {
			if (sh->trace == d + 1 && !counting) {
				rio_trace_set(&tracer);
				counting = 1;
			}
			CHECK(vg_begin(n.v, 0));
		}
		CHECK(vista_receive_request(n.ep, &id, buf, sizeof(buf), &len,
			-1));
		CHECK(vista_send_response(n.ep, &id, buf, len));
		if (d >= 0) {
			CHECK(vg_commit(n.v));
			if (counting) {
				sh->drains[d] = t_drains;
				sh->lines[d] = t_lines;
			}
		}
	}
}

static void
serve_udp(void)
{
	static char buf[65536];
	struct sockaddr_in a = { 0 };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_DGRAM, 0);

	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		perror("vg-bench: udp server");
		exit(1);
	}
	sh->port_udp = ntohs(a.sin_port);
	for (;;) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(fd, buf, sizeof(buf), 0,
			(struct sockaddr *)&from, &fl);
		if (n >= 0)
			sendto(fd, buf, (size_t)n, 0, (struct sockaddr *)&from,
				fl);
	}
}

#ifdef HAVE_ZMQ
static void
serve_zmq(void)
{
	static char buf[MAX_MSG];
	char ep[256];
	size_t eplen = sizeof(ep);
	void *ctx = zmq_ctx_new();
	void *s = zmq_socket(ctx, ZMQ_REP);

	if (zmq_bind(s, "tcp://127.0.0.1:*") != 0 ||
	    zmq_getsockopt(s, ZMQ_LAST_ENDPOINT, ep, &eplen) != 0) {
		fprintf(stderr, "vg-bench: zmq server: %s\n",
			zmq_strerror(errno));
		exit(1);
	}
	sh->port_zmq = atoi(strrchr(ep, ':') + 1);
	for (;;) {
		int n = zmq_recv(s, buf, sizeof(buf), 0);
		if (n >= 0)
			zmq_send(s, buf, (size_t)n, 0);
	}
}
#endif

/* Pins the calling process to CPU `cpu`, if the machine has it.  The
 * client runs on one CPU and every server on another: a cycle then always
 * costs the same two wake-ups, whichever system runs, instead of whatever
 * the scheduler's placement of each server makes it. */
static bool
pin(int cpu)
{
	cpu_set_t set;

	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	return sysconf(_SC_NPROCESSORS_ONLN) > cpu &&
		sched_setaffinity(0, sizeof(set), &set) == 0;
}

/* Starts the server of kind k (domain d for Vistagrams) in a child. */
static pid_t
spawn(enum kind k, int d)
{
	pid_t p;

	fflush(NULL);
	if ((p = fork()) != 0)
		return p;
	pin(1);
	switch (k) {
	case K_UDP:
		serve_udp();
		break;
	case K_BASE:
		serve_vg(-1);
		break;
	case K_VG:
		serve_vg(d);
		break;
	case K_ZMQ:
#ifdef HAVE_ZMQ
		serve_zmq();
#endif
		break;
	default:
		break;
	}
	_exit(0);
}

/* ---- clients: one cycle each ---- */

struct client {
	int udp_fd;
	struct sockaddr_in udp_to, base_to, vg_to[MAX_DOM];
	struct node base, vg[MAX_DOM];
	uint64_t pending[MAX_DOM]; /* vistagrams-1tx: the request still out */
#ifdef HAVE_ZMQ
	void *zctx, *zsock;
#endif
	char out[MAX_MSG], in[MAX_MSG];
};

static void
cycle(struct client *c, const struct sys *s, size_t size)
{
	struct node *vg = &c->vg[s->dom];
	struct sockaddr *to = (struct sockaddr *)&c->vg_to[s->dom];
	size_t len = 0;
	uint64_t seq;

	switch (s->kind) {
	case K_UDP:
		if (sendto(c->udp_fd, c->out, size, 0,
			    (struct sockaddr *)&c->udp_to,
			    sizeof(c->udp_to)) < 0 ||
		    (len = (size_t)recv(c->udp_fd, c->in, sizeof(c->in), 0)) !=
			    size) {
			perror("vg-bench: udp");
			exit(1);
		}
		break;
	case K_BASE:
		CHECK(vista_send_request(c->base.ep,
			(struct sockaddr *)&c->base_to, sizeof(c->base_to),
			c->out, size, &seq));
		CHECK(vista_receive_response(c->base.ep, &seq, c->in,
			sizeof(c->in), &len, -1));
		break;
	case K_VG:
		CHECK(vg_begin(vg->v, 0));
		CHECK(vista_send_request(vg->ep, to, sizeof(c->vg_to[0]),
			c->out, size, &seq));
		CHECK(vg_commit(vg->v));
		CHECK(vg_begin(vg->v, 0));
		CHECK(vista_receive_response(vg->ep, &seq, c->in,
			sizeof(c->in), &len, -1));
		CHECK(vg_commit(vg->v));
		break;
	case K_VG1:
		CHECK(vg_begin(vg->v, 0));
		if (c->pending[s->dom]) {
			seq = c->pending[s->dom];
			CHECK(vista_receive_response(vg->ep, &seq, c->in,
				sizeof(c->in), &len, -1));
		} else {
			len = size; /* the first request of a block */
		}
		CHECK(vista_send_request(vg->ep, to, sizeof(c->vg_to[0]),
			c->out, size, &c->pending[s->dom]));
		CHECK(vg_commit(vg->v));
		break;
	case K_ZMQ:
#ifdef HAVE_ZMQ
		if (zmq_send(c->zsock, c->out, size, 0) < 0 ||
		    zmq_recv(c->zsock, c->in, sizeof(c->in), 0) != (int)size) {
			fprintf(stderr, "vg-bench: zmq: %s\n",
				zmq_strerror(errno));
			exit(1);
		}
		len = size;
#endif
		break;
	default:
		break;
	}
	if (len != size) {
		fprintf(stderr, "vg-bench: %s echoed %zu bytes of %zu\n",
			kind_name[s->kind], len, size);
		exit(1);
	}
}

/* vistagrams-1tx: takes the response still out, so that the endpoint is
 * idle while the other systems run. */
static void
settle(struct client *c, const struct sys *s)
{
	struct node *vg = &c->vg[s->dom];
	uint64_t seq = c->pending[s->dom];
	size_t len;

	if (s->kind != K_VG1 || seq == 0)
		return;
	CHECK(vg_begin(vg->v, 0));
	CHECK(vista_receive_response(vg->ep, &seq, c->in, sizeof(c->in), &len,
		-1));
	CHECK(vg_commit(vg->v));
	c->pending[s->dom] = 0;
}

static void
loopback(struct sockaddr_in *a, int port)
{
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_port = htons((uint16_t)port);
	a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

static void
client_open(struct client *c)
{
	char name[32];

	for (int i = 0; i < MAX_MSG; i++)
		c->out[i] = (char)(i * 7 + 1);
	c->udp_fd = socket(AF_INET, SOCK_DGRAM, 0);
	loopback(&c->udp_to, sh->port_udp);
	loopback(&c->base_to, sh->port_base);
	node_open(&c->base, NULL, 11, NULL, 0);
	for (int d = 0; d < ndom; d++) {
		snprintf(name, sizeof(name), "client-%s", dom_name[d]);
		loopback(&c->vg_to[d], sh->port_vg[d]);
		node_open(&c->vg[d], name, 1, seg_addr(false, d), dom_flags[d]);
	}
#ifdef HAVE_ZMQ
	char ep[64];
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", sh->port_zmq);
	c->zctx = zmq_ctx_new();
	c->zsock = zmq_socket(c->zctx, ZMQ_REQ);
	if (zmq_connect(c->zsock, ep) != 0) {
		fprintf(stderr, "vg-bench: zmq connect: %s\n",
			zmq_strerror(errno));
		exit(1);
	}
#endif
}

/* ---- measurement and statistics ---- */

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int
cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The median of n values (sorted in place). */
static uint64_t
median_u64(uint64_t *t, size_t n)
{
	qsort(t, n, sizeof(*t), cmp_u64);
	return t[n / 2];
}

/* A median with its distribution-free 95% confidence interval: the order
 * statistics n/2 -+ 1.96 sqrt(n) / 2 of the sorted values. */
struct est {
	double med, lo, hi;
};

static struct est
median_ci(double *x, int n)
{
	double h = 0.98 * sqrt((double)n);
	int lo = (int)floor(n / 2.0 - h), hi = (int)ceil(n / 2.0 + h);

	qsort(x, (size_t)n, sizeof(*x), cmp_dbl);
	if (lo < 0)
		lo = 0;
	if (hi > n - 1)
		hi = n - 1;
	return (struct est){ x[n / 2], x[lo], x[hi] };
}

/* Per system, for one size. */
struct result {
	double med, p99, mean; /* microseconds, over every cycle counted */
	struct est over;      /* minus the baseline, paired by round */
	bool has_over;
};

/* What one size measures: every cycle's time and every block's median,
 * per system. */
struct run {
	int rounds, block;
	uint64_t *t[MAX_SYS];   /* rounds * block cycle times */
	double *bmed[MAX_SYS];  /* per round: the block's median, us */
};

/* One block: BLOCK + 1 cycles of system s, the first not counted. */
static void
run_block(struct client *c, const struct sys *s, size_t size, int block,
	uint64_t *t, double *bmed)
{
	uint64_t tmp[block];

	cycle(c, s, size);
	for (int i = 0; i < block; i++) {
		uint64_t t0 = rio_now_ns(CLOCK_MONOTONIC);
		cycle(c, s, size);
		t[i] = rio_now_ns(CLOCK_MONOTONIC) - t0;
	}
	settle(c, s);
	memcpy(tmp, t, sizeof(tmp));
	*bmed = (double)median_u64(tmp, (size_t)block) / 1e3;
}

static void
measure(struct client *c, size_t size, struct run *r)
{
	for (int k = 0; k < nsys; k++) { /* warm up, and check the echo */
		for (int i = 0; i < r->block * 4; i++)
			cycle(c, &sys[k], size);
		settle(c, &sys[k]);
		if (memcmp(c->in, c->out, size) != 0) {
			fprintf(stderr, "vg-bench: %s echoed other bytes\n",
				kind_name[sys[k].kind]);
			exit(1);
		}
	}
	for (int b = 0; b < r->rounds; b++) {
		for (int j = 0; j < nsys; j++) {
			int k = (b + j) % nsys;
			run_block(c, &sys[k], size, r->block,
				r->t[k] + (size_t)b * r->block,
				&r->bmed[k][b]);
		}
	}
}

/* x's block medians minus y's, paired by round: median and interval. */
static struct est
paired(const struct run *r, int x, int y)
{
	double d[r->rounds];

	for (int b = 0; b < r->rounds; b++)
		d[b] = r->bmed[x][b] - r->bmed[y][b];
	return median_ci(d, r->rounds);
}

static struct result
summarize(struct run *r, int k, int base)
{
	size_t n = (size_t)r->rounds * r->block;
	struct result x = { 0 };
	uint64_t sum = 0;

	for (size_t i = 0; i < n; i++)
		sum += r->t[k][i];
	qsort(r->t[k], n, sizeof(uint64_t), cmp_u64);
	x.med = (double)r->t[k][n / 2] / 1e3;
	x.p99 = (double)r->t[k][n * 99 / 100] / 1e3;
	x.mean = (double)sum / (double)n / 1e3;
	if (base >= 0 && k != base &&
	    (sys[k].kind == K_VG || sys[k].kind == K_VG1)) {
		x.over = paired(r, k, base);
		x.has_over = true;
	}
	return x;
}

static int
parse_sizes(const char *s, size_t *sizes)
{
	int n = 0;
	char *end;

	while (*s && n < MAX_SIZES) {
		unsigned long v = strtoul(s, &end, 10);
		if (end == s || v == 0 || v > MAX_MSG)
			return -1;
		sizes[n++] = v;
		s = *end == ',' ? end + 1 : end;
	}
	return n;
}

/* "vistagrams cacheline", or the kind's name alone. */
static const char *
sys_label(const struct sys *s, char *buf, size_t len)
{
	if (s->kind == K_VG || s->kind == K_VG1)
		snprintf(buf, len, "%s %s", kind_name[s->kind],
			dom_name[s->dom]);
	else
		snprintf(buf, len, "%s", kind_name[s->kind]);
	return buf;
}

static int
find_sys(enum kind k, int d)
{
	for (int i = 0; i < nsys; i++)
		if (sys[i].kind == k &&
		    ((k != K_VG && k != K_VG1) || sys[i].dom == d))
			return i;
	return -1;
}

/* A table of every system per size: its median cycle, or its throughput
 * (thousands of cycles per second, 1 / the mean cycle). */
static void
sys_table(const size_t *sizes, int nsizes, struct result res[][MAX_SYS],
	bool throughput)
{
	char lbl[64];

	printf("| size |");
	for (int k = 0; k < nsys; k++)
		printf(" %s |", sys_label(&sys[k], lbl, sizeof(lbl)));
	printf("\n|---:|");
	for (int k = 0; k < nsys; k++)
		printf("---:|");
	printf("\n");
	for (int i = 0; i < nsizes; i++) {
		printf("| %zu |", sizes[i]);
		for (int k = 0; k < nsys; k++)
			printf(" %.1f |", throughput ? 1e3 / res[i][k].mean :
						       res[i][k].med);
		printf("\n");
	}
}

/* Removes the segment and log node_open made in process `pid`. */
static void
remove_node(pid_t pid, const char *name, const char *dom)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/vg-bench-%d-%s-%s", dir, (int)pid,
		name, dom);
	unlink(path);
	strcat(path, ".log");
	unlink(path);
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: vg-bench [-n CYCLES] [-b BLOCK] [-s SIZES] "
		"[-S SYSTEMS] [-D DOMAINS] [-d DIR] [-o CSV] [-q]\n"
		"  -n CYCLES   cycles counted per size and system (10000)\n"
		"  -b BLOCK    cycles per block; CYCLES / BLOCK rounds (25)\n"
		"  -s SIZES    message sizes in bytes, comma separated "
		"(8,16,...,8192)\n"
		"  -S SYSTEMS  udp,baseline,vistagrams,vistagrams-1tx,zeromq "
		"(all built)\n"
		"  -D DOMAINS  persistence domains of the Vistagrams segments, "
		"comma separated\n"
		"              (cacheline,byte; also page)\n"
		"  -d DIR      where the segments live (/dev/shm)\n"
		"  -o CSV      per size and system: median, p99, mean and "
		"the cost over the baseline\n"
		"  -q          quick smoke run (200 cycles, 8 and 4096 B)\n");
}

/* Hold the CPUs out of deep idle states while the process lives (PM QoS:
 * the request stands while the file is open).  Returns whether it holds. */
static bool
hold_idle_latency(void)
{
	int32_t zero = 0;
	int fd = open("/dev/cpu_dma_latency", O_WRONLY | O_CLOEXEC);

	if (fd < 0)
		return false;
	if (write(fd, &zero, sizeof(zero)) != (ssize_t)sizeof(zero)) {
		close(fd);
		return false;
	}
	return true; /* fd stays open until exit */
}

/* -S: which kinds; -D: which domains.  Whole names, comma separated. */
static bool
listed(const char *list, const char *name)
{
	size_t l = strlen(name);

	for (const char *m = list; (m = strstr(m, name)) != NULL; m += l)
		if ((m == list || m[-1] == ',') && (m[l] == ',' || m[l] == 0))
			return true;
	return false;
}

static int
parse_domains(const char *list)
{
	static const char *names[] = { "cacheline", "byte", "page" };
	static const unsigned flags[] = { RIO_FORCE_CACHELINE, RIO_FORCE_BYTE,
		RIO_FORCE_PAGE };
	size_t used = 0;

	ndom = 0;
	for (int i = 0; i < 3; i++) {
		if (!listed(list, names[i]))
			continue;
		dom_name[ndom] = names[i];
		dom_flags[ndom++] = flags[i];
		used += strlen(names[i]) + 1;
	}
	return ndom > 0 && used == strlen(list) + 1 ? 0 : -1;
}

/* Persist barriers per cycle of a Vistagrams system (the thesis client or
 * the pipelined one, in its domain), counted on both sides through the
 * tracing hook, apart from the timing (tracing costs time). */
static void
count_barriers(struct client *c, struct sys s, int cycles)
{
	int d = s.dom;

	t_drains = t_lines = 0;
	rio_trace_set(&tracer);
	sh->trace = d + 1;
	cycle(c, &s, 64); /* the server turns its counter on */
	uint64_t s0 = sh->drains[d], l0 = sh->lines[d];
	counting = 1;
	for (int i = 0; i < cycles; i++)
		cycle(c, &s, 64);
	counting = 0;
	usleep(20000); /* the server publishes after its last commit */
	rio_trace_set(NULL);
	printf("Persist barriers per cycle, %s, %s domain (64 B): client "
	       "%.1f drains, %.1f lines flushed; server %.1f drains, %.1f "
	       "lines flushed%s.\n",
		kind_name[s.kind], dom_name[d], (double)t_drains / cycles,
		(double)t_lines / cycles,
		(double)(sh->drains[d] - s0) / cycles,
		(double)(sh->lines[d] - l0) / cycles,
		dom_flags[d] == RIO_FORCE_BYTE ?
			" (the same calls; in the byte domain a drain is a "
			"compiler barrier and a flush writes nothing back)" :
			"");
}

int
main(int argc, char **argv)
{
	size_t sizes[MAX_SIZES];
	int nsizes = 0, n = 10000, block = 25, quick = 0, opt;
	const char *csv = NULL, *domains = "cacheline,byte";
	const char *systems = "udp,baseline,vistagrams,vistagrams-1tx,zeromq";
	pid_t pid[NKIND + MAX_DOM] = { 0 }, vg_pid[MAX_DOM] = { 0 };
	char lbl[64];

	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	for (size_t s = 8; s <= MAX_MSG; s *= 2)
		sizes[nsizes++] = s;
	while ((opt = getopt(argc, argv, "n:b:s:S:D:d:o:q")) != -1) {
		switch (opt) {
		case 'n':
			n = atoi(optarg);
			break;
		case 'b':
			block = atoi(optarg);
			break;
		case 's':
			nsizes = parse_sizes(optarg, sizes);
			break;
		case 'S':
			systems = optarg;
			break;
		case 'D':
			domains = optarg;
			break;
		case 'd':
			dir = optarg;
			break;
		case 'o':
			csv = optarg;
			break;
		case 'q':
			quick = 1;
			break;
		default:
			goto usage;
		}
	}
	if (quick) {
		n = 200;
		block = 10;
		sizes[0] = 8;
		sizes[1] = 4096;
		nsizes = 2;
	}
	if (nsizes <= 0 || block <= 0 || n < block || block > 1000 ||
	    optind != argc || parse_domains(domains) != 0)
		goto usage;
	for (int k = 0; k < NKIND; k++) {
		if (!listed(systems, kind_name[k]))
			continue;
#ifndef HAVE_ZMQ
		if (k == K_ZMQ)
			continue;
#endif
		for (int d = 0; d < (k == K_VG || k == K_VG1 ? ndom : 1); d++)
			sys[nsys++] = (struct sys){ (enum kind)k, d };
	}
	if (nsys == 0)
		goto usage;

	bool idle_held = hold_idle_latency();
	bool pinned = pin(0) && sysconf(_SC_NPROCESSORS_ONLN) > 1;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset((void *)sh, 0, sizeof(*sh));
	/* Every server, whatever -S says: the client opens every node. */
	int nproc = 0;
	pid[nproc++] = spawn(K_UDP, 0);
	pid[nproc++] = spawn(K_BASE, 0);
#ifdef HAVE_ZMQ
	pid[nproc++] = spawn(K_ZMQ, 0);
	while (sh->port_zmq == 0)
		usleep(1000);
#endif
	for (int d = 0; d < ndom; d++)
		pid[nproc++] = vg_pid[d] = spawn(K_VG, d);
	while (sh->port_udp == 0 || sh->port_base == 0)
		usleep(1000);
	for (int d = 0; d < ndom; d++)
		while (sh->port_vg[d] == 0)
			usleep(1000);

	static struct client c;
	client_open(&c);
	struct run r = { n / block, block, { 0 }, { 0 } };
	for (int k = 0; k < nsys; k++) {
		r.t[k] = malloc(sizeof(uint64_t) * (size_t)r.rounds * block);
		r.bmed[k] = malloc(sizeof(double) * (size_t)r.rounds);
		if (r.t[k] == NULL || r.bmed[k] == NULL)
			return 1;
	}
	static struct result res[MAX_SIZES][MAX_SYS];
	static struct est pers[MAX_SIZES][2]; /* cacheline - byte, VG/VG1 */
	int base = find_sys(K_BASE, 0);
	int dcl = -1, dby = -1;
	for (int d = 0; d < ndom; d++) {
		if (strcmp(dom_name[d], "cacheline") == 0)
			dcl = d;
		if (strcmp(dom_name[d], "byte") == 0)
			dby = d;
	}
	FILE *out = csv ? fopen(csv, "w") : NULL;
	if (csv && out == NULL) {
		perror(csv);
		return 1;
	}
	if (out)
		fprintf(out, "size,system,domain,median_us,p99_us,mean_us,"
			     "over_baseline_us,over_lo_us,over_hi_us\n");
	for (int i = 0; i < nsizes; i++) {
		fprintf(stderr, "vg-bench: %zu B: %d rounds of %d cycles per "
				"system\n", sizes[i], r.rounds, block);
		measure(&c, sizes[i], &r);
		for (int j = 0; j < 2; j++) {
			enum kind k = j ? K_VG1 : K_VG;
			int x = find_sys(k, dcl), y = find_sys(k, dby);
			pers[i][j] = x >= 0 && y >= 0 ? paired(&r, x, y) :
				(struct est){ NAN, NAN, NAN };
		}
		for (int k = 0; k < nsys; k++) {
			struct result *x = &res[i][k];
			*x = summarize(&r, k, base);
			if (out == NULL)
				continue;
			fprintf(out, "%zu,%s,%s,%.2f,%.2f,%.2f", sizes[i],
				kind_name[sys[k].kind],
				sys[k].kind == K_VG || sys[k].kind == K_VG1 ?
					dom_name[sys[k].dom] : "",
				x->med, x->p99, x->mean);
			if (x->has_over)
				fprintf(out, ",%.2f,%.2f,%.2f\n", x->over.med,
					x->over.lo, x->over.hi);
			else
				fprintf(out, ",,,\n");
		}
	}
	if (out)
		fclose(out);

	printf("Request/response cycle on the loopback, median microseconds "
	       "(%d cycles per size and system, in %d rounds of %d, the "
	       "systems side by side);\nVistagrams segments in %s; %s; CPU "
	       "idle exit latency %s.\n\n",
		r.rounds * block, r.rounds, block, dir,
		pinned ? "the client on CPU 0, the servers on CPU 1" :
			 "processes not pinned (one CPU)",
		idle_held ? "held at 0 (/dev/cpu_dma_latency)" :
			    "not held (no access to /dev/cpu_dma_latency: "
			    "idle wake-ups are included)");
	sys_table(sizes, nsizes, res, false);

	bool any_vg = find_sys(K_VG, 0) >= 0 || find_sys(K_VG1, 0) >= 0;
	if (base >= 0 && any_vg) {
		int within[MAX_SYS] = { 0 }, surely[MAX_SYS] = { 0 };
		printf("\nCost over the baseline, microseconds per cycle: the "
		       "median of the rounds' paired differences, [95%% "
		       "interval]%s:\n\n| size |",
			dcl >= 0 && dby >= 0 ? "; and the cost of persistence, "
					       "cacheline minus byte" : "");
		for (int k = 0; k < nsys; k++)
			if (res[0][k].has_over)
				printf(" %s |",
					sys_label(&sys[k], lbl, sizeof(lbl)));
		if (dcl >= 0 && dby >= 0)
			printf(" persistence, vistagrams | persistence, "
			       "1 tx |");
		printf("\n|---:|");
		for (int k = 0; k < nsys; k++)
			if (res[0][k].has_over)
				printf("---:|");
		if (dcl >= 0 && dby >= 0)
			printf("---:|---:|");
		printf("\n");
		for (int i = 0; i < nsizes; i++) {
			printf("| %zu |", sizes[i]);
			for (int k = 0; k < nsys; k++) {
				struct est e = res[i][k].over;
				if (!res[i][k].has_over)
					continue;
				printf(" %+.2f [%+.2f, %+.2f] |", e.med, e.lo,
					e.hi);
				within[k] += e.med <= 2.0;
				surely[k] += e.hi <= 2.0;
			}
			for (int j = 0; dcl >= 0 && dby >= 0 && j < 2; j++) {
				if (isnan(pers[i][j].med))
					printf(" - |");
				else
					printf(" %+.2f [%+.2f, %+.2f] |",
						pers[i][j].med, pers[i][j].lo,
						pers[i][j].hi);
			}
			printf("\n");
		}
		printf("\nWithin 2 us of the baseline (median; whole "
		       "interval), of %d sizes:", nsizes);
		for (int k = 0; k < nsys; k++)
			if (res[0][k].has_over)
				printf(" %s %d; %d.",
					sys_label(&sys[k], lbl, sizeof(lbl)),
					within[k], surely[k]);
		printf("\n");
	}

	printf("\nThroughput, thousands of cycles per second (one client, one "
	       "request outstanding; 1 / the mean cycle):\n\n");
	sys_table(sizes, nsizes, res, true);
	printf("\n");
	for (int i = 0; i < nsys; i++)
		if (sys[i].kind == K_VG || sys[i].kind == K_VG1)
			count_barriers(&c, sys[i], quick ? 100 : 1000);

	for (int d = 0; d < ndom; d++)
		node_close(&c.vg[d]);
	node_close(&c.base);
	for (int p = 0; p < nproc; p++) {
		kill(pid[p], SIGKILL);
		waitpid(pid[p], NULL, 0);
	}
	for (int d = 0; d < ndom; d++)
		remove_node(vg_pid[d], "server", dom_name[d]);
	for (int k = 0; k < nsys; k++) {
		free(r.t[k]);
		free(r.bmed[k]);
	}
	return 0;
usage:
	usage(stderr);
	return 2;
}
