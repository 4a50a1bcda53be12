/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vg_bench.c -- vg-bench: request/response round trips (thesis Figure 4.6)
 *
 *   vg-bench [-n CYCLES] [-r ROUNDS] [-s SIZES] [-S SYSTEMS] [-D DOMAIN]
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
 *               and answers in one; tables and messages in Vista segments
 *               in the DOMAIN persistence domain (default cacheline)
 *   vistagrams-1tx  the same, but the client receives response i and
 *               sends request i+1 in one transaction (a pipelined client:
 *               one commit per cycle instead of two)
 *   zeromq      ZeroMQ REQ/REP over TCP on 127.0.0.1: what one would use
 *               for volatile request/reply (if built with libzmq)
 *
 * Each round runs CYCLES cycles per size and system, interleaved; the
 * reported figure is, per size and system, the smallest of the rounds'
 * medians (robust against other load); throughput is one client with one
 * request outstanding, cycles per second of the fastest round (1 / mean).
 * Also counted, in a separate pass,
 * the persist barriers (drains) and flushed cache lines per cycle on each
 * side, through librio's tracing hook.  -o writes every round's median,
 * p99 and mean as CSV.  -S udp,vistagrams...: only those systems.  -q: a
 * quick smoke run.
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

#include "vistagrams.h"
#ifdef HAVE_ZMQ
#include <zmq.h>
#endif

enum sys { S_UDP, S_BASE, S_VG, S_VG1, S_ZMQ, NSYS };
static const char *sys_name[NSYS] = { "udp", "baseline", "vistagrams",
	"vistagrams-1tx", "zeromq" };

#define MAX_SIZES 32
#define MAX_MSG 8192

/* Shared with the server processes. */
struct shared {
	volatile int port[NSYS]; /* S_VG1 uses S_VG's server */
	volatile uint64_t drains, lines; /* the Vistagrams server's, traced */
	volatile int trace;              /* the server counts from now on */
};

static struct shared *sh;
static const char *dir = "/dev/shm";
static unsigned rio_flags = RIO_FORCE_CACHELINE;

#define CHECK(call)                                                         \
	do {                                                                \
		int rc_ = (call);                                           \
		if (rc_) {                                                  \
			fprintf(stderr, "vg-bench: %s: %s: %s\n", #call,    \
				vg_strerror(rc_), vg_errormsg());           \
			exit(1);                                            \
		}                                                           \
	} while (0)

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

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

static void
node_open(struct node *n, const char *name, uint64_t id, void *addr)
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

/* ---- servers ---- */

static void
serve_vg(int persistent)
{
	static char buf[MAX_MSG];
	struct node n;
	size_t len;
	vg_reqid id;

	node_open(&n, persistent ? "server" : NULL, 2,
		(void *)0x5d0000000000ull);
	sh->port[persistent ? S_VG : S_BASE] = ep_port(n.ep);
	for (;;) {
		if (persistent) {
			if (sh->trace && !counting) {
				rio_trace_set(&tracer);
				counting = 1;
			}
			CHECK(vg_begin(n.v, 0));
		}
		CHECK(vista_receive_request(n.ep, &id, buf, sizeof(buf), &len,
			-1));
		CHECK(vista_send_response(n.ep, &id, buf, len));
		if (persistent) {
			CHECK(vg_commit(n.v));
			if (counting) {
				sh->drains = t_drains;
				sh->lines = t_lines;
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
	sh->port[S_UDP] = ntohs(a.sin_port);
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
	sh->port[S_ZMQ] = atoi(strrchr(ep, ':') + 1);
	for (;;) {
		int n = zmq_recv(s, buf, sizeof(buf), 0);
		if (n >= 0)
			zmq_send(s, buf, (size_t)n, 0);
	}
}
#endif

static pid_t
spawn(enum sys s)
{
	pid_t p;

	fflush(NULL);
	if ((p = fork()) != 0)
		return p;
	switch (s) {
	case S_UDP:
		serve_udp();
		break;
	case S_BASE:
		serve_vg(0);
		break;
	case S_VG:
		serve_vg(1);
		break;
	case S_VG1:
		break;
	case S_ZMQ:
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
	struct sockaddr_in udp_to, base_to, vg_to;
	struct node base, vg;
	uint64_t pending; /* vistagrams-1tx: the request still out */
#ifdef HAVE_ZMQ
	void *zctx, *zsock;
#endif
	char out[MAX_MSG], in[MAX_MSG];
};

static void
cycle(struct client *c, enum sys s, size_t size)
{
	size_t len = 0;
	uint64_t seq;

	switch (s) {
	case S_UDP:
		if (sendto(c->udp_fd, c->out, size, 0,
			    (struct sockaddr *)&c->udp_to,
			    sizeof(c->udp_to)) < 0 ||
		    (len = (size_t)recv(c->udp_fd, c->in, sizeof(c->in), 0)) !=
			    size) {
			perror("vg-bench: udp");
			exit(1);
		}
		break;
	case S_BASE:
		CHECK(vista_send_request(c->base.ep,
			(struct sockaddr *)&c->base_to, sizeof(c->base_to),
			c->out, size, &seq));
		CHECK(vista_receive_response(c->base.ep, &seq, c->in,
			sizeof(c->in), &len, -1));
		break;
	case S_VG:
		CHECK(vg_begin(c->vg.v, 0));
		CHECK(vista_send_request(c->vg.ep, (struct sockaddr *)&c->vg_to,
			sizeof(c->vg_to), c->out, size, &seq));
		CHECK(vg_commit(c->vg.v));
		CHECK(vg_begin(c->vg.v, 0));
		CHECK(vista_receive_response(c->vg.ep, &seq, c->in,
			sizeof(c->in), &len, -1));
		CHECK(vg_commit(c->vg.v));
		break;
	case S_VG1:
		CHECK(vg_begin(c->vg.v, 0));
		if (c->pending) {
			seq = c->pending;
			CHECK(vista_receive_response(c->vg.ep, &seq, c->in,
				sizeof(c->in), &len, -1));
		} else {
			len = size; /* the first request of a run */
		}
		CHECK(vista_send_request(c->vg.ep, (struct sockaddr *)&c->vg_to,
			sizeof(c->vg_to), c->out, size, &c->pending));
		CHECK(vg_commit(c->vg.v));
		break;
	case S_ZMQ:
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
			sys_name[s], len, size);
		exit(1);
	}
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
	for (int i = 0; i < MAX_MSG; i++)
		c->out[i] = (char)(i * 7 + 1);
	c->udp_fd = socket(AF_INET, SOCK_DGRAM, 0);
	loopback(&c->udp_to, sh->port[S_UDP]);
	loopback(&c->base_to, sh->port[S_BASE]);
	loopback(&c->vg_to, sh->port[S_VG]);
	node_open(&c->base, NULL, 11, NULL);
	node_open(&c->vg, "client", 1, (void *)0x5d0100000000ull);
#ifdef HAVE_ZMQ
	char ep[64];
	snprintf(ep, sizeof(ep), "tcp://127.0.0.1:%d", sh->port[S_ZMQ]);
	c->zctx = zmq_ctx_new();
	c->zsock = zmq_socket(c->zctx, ZMQ_REQ);
	if (zmq_connect(c->zsock, ep) != 0) {
		fprintf(stderr, "vg-bench: zmq connect: %s\n",
			zmq_strerror(errno));
		exit(1);
	}
#endif
}

/* ---- statistics ---- */

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

struct result {
	double med, p99, mean; /* microseconds */
};

static struct result
measure(struct client *c, enum sys s, size_t size, int n, uint64_t *t)
{
	struct result r;
	uint64_t sum = 0;

	for (int i = 0; i < n / 10 + 2; i++) /* warm up */
		cycle(c, s, size);
	if (memcmp(c->in, c->out, size) != 0) {
		fprintf(stderr, "vg-bench: %s echoed other bytes\n",
			sys_name[s]);
		exit(1);
	}
	for (int i = 0; i < n; i++) {
		uint64_t t0 = now_ns();
		cycle(c, s, size);
		t[i] = now_ns() - t0;
		sum += t[i];
	}
	if (s == S_VG1) { /* take the last response: the endpoint is idle */
		size_t len;
		uint64_t seq = c->pending;
		CHECK(vg_begin(c->vg.v, 0));
		CHECK(vista_receive_response(c->vg.ep, &seq, c->in,
			sizeof(c->in), &len, -1));
		CHECK(vg_commit(c->vg.v));
		c->pending = 0;
	}
	qsort(t, (size_t)n, sizeof(*t), cmp_u64);
	r.med = (double)t[n / 2] / 1e3;
	r.p99 = (double)t[(size_t)n * 99 / 100] / 1e3;
	r.mean = (double)sum / n / 1e3;
	return r;
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

/* One table row: the median of each system, or its throughput (1 / the
 * smallest round mean, thousands of cycles per second); '-' for a system
 * not run. */
static void
row(size_t size, const struct result *r, int nsys, const bool *want,
	bool throughput)
{
	printf("| %zu |", size);
	for (int s = 0; s < NSYS; s++) {
		if (s < nsys && want[s])
			printf(" %.1f |", throughput ? 1e3 / r[s].mean
						     : r[s].med);
		else
			printf(" - |");
	}
}

/* Removes the segment and log node_open made in process `pid`. */
static void
remove_node(pid_t pid, const char *name)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s/vg-bench-%d-%s", dir, (int)pid, name);
	unlink(path);
	strcat(path, ".log");
	unlink(path);
}

static void
usage(FILE *f)
{
	fprintf(f, "usage: vg-bench [-n CYCLES] [-r ROUNDS] [-s SIZES] "
		"[-S SYSTEMS] [-D byte|cacheline|page] [-d DIR] [-o CSV] "
		"[-q]\n"
		"  -n CYCLES   cycles per size, system and round (5000)\n"
		"  -r ROUNDS   rounds; the smallest median is reported (3)\n"
		"  -s SIZES    message sizes in bytes, comma separated "
		"(8,16,...,8192)\n"
		"  -S SYSTEMS  udp,baseline,vistagrams,vistagrams-1tx,zeromq "
		"(all built)\n"
		"  -D DOMAIN   persistence domain of the Vistagrams segments "
		"(cacheline)\n"
		"  -d DIR      where the segments live (/dev/shm)\n"
		"  -o CSV      every round's median, p99 and mean\n"
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

int
main(int argc, char **argv)
{
	size_t sizes[MAX_SIZES];
	int nsizes = 0, n = 5000, rounds = 3, quick = 0, opt;
	const char *csv = NULL, *domain = "cacheline";
	pid_t pid[NSYS] = { 0 };
	int nsys = NSYS;
	bool want[NSYS] = { true, true, true, true, true };

	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0)) {
		usage(stdout);
		return 0;
	}
	for (size_t s = 8; s <= MAX_MSG; s *= 2)
		sizes[nsizes++] = s;
	while ((opt = getopt(argc, argv, "n:r:s:S:D:d:o:q")) != -1) {
		switch (opt) {
		case 'n':
			n = atoi(optarg);
			break;
		case 'r':
			rounds = atoi(optarg);
			break;
		case 's':
			nsizes = parse_sizes(optarg, sizes);
			break;
		case 'S':
			for (int k = 0; k < NSYS; k++) {
				/* whole names, comma separated */
				size_t l = strlen(sys_name[k]);
				const char *m = optarg;
				want[k] = false;
				while ((m = strstr(m, sys_name[k])) != NULL) {
					if ((m == optarg || m[-1] == ',') &&
					    (m[l] == ',' || m[l] == 0))
						want[k] = true;
					m += l;
				}
			}
			break;
		case 'D':
			domain = optarg;
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
		rounds = 1;
		sizes[0] = 8;
		sizes[1] = 4096;
		nsizes = 2;
	}
	if (nsizes <= 0 || n <= 0 || rounds <= 0 || optind != argc)
		goto usage;
	switch (rio_domain_parse(domain)) {
	case RIO_DOMAIN_BYTE:
		rio_flags = RIO_FORCE_BYTE;
		break;
	case RIO_DOMAIN_CACHELINE:
		rio_flags = RIO_FORCE_CACHELINE;
		break;
	case RIO_DOMAIN_PAGE:
		rio_flags = RIO_FORCE_PAGE;
		break;
	default:
		goto usage;
	}
#ifndef HAVE_ZMQ
	nsys = S_ZMQ;
#endif

	bool idle_held = hold_idle_latency();
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
		MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		return 1;
	memset((void *)sh, 0, sizeof(*sh));
	for (int s = 0; s < nsys; s++)
		if (s != S_VG1)
			pid[s] = spawn((enum sys)s);
	for (int s = 0; s < nsys; s++)
		while (s != S_VG1 && sh->port[s] == 0)
			usleep(1000);

	static struct client c;
	client_open(&c);
	uint64_t *t = malloc(sizeof(*t) * (size_t)n);
	static struct result best[MAX_SIZES][NSYS];
	FILE *out = csv ? fopen(csv, "w") : NULL;
	if (csv && out == NULL) {
		perror(csv);
		return 1;
	}
	if (out)
		fprintf(out, "round,size,system,median_us,p99_us,mean_us\n");
	for (int r = 0; r < rounds; r++) {
		for (int i = 0; i < nsizes; i++) {
			for (int s = 0; s < nsys; s++) {
				if (!want[s])
					continue;
				struct result x = measure(&c, (enum sys)s,
					sizes[i], n, t);
				double m = best[i][s].mean;
				if (r == 0 || x.med < best[i][s].med)
					best[i][s] = x;
				if (r > 0 && m < x.mean) /* throughput: best round */
					best[i][s].mean = m;
				if (out)
					fprintf(out, "%d,%zu,%s,%.2f,%.2f,%.2f\n",
						r, sizes[i], sys_name[s], x.med,
						x.p99, x.mean);
			}
		}
	}
	if (out)
		fclose(out);

	/* Persist barriers per cycle, counted apart (tracing costs time). */
	int fc = quick ? 100 : 1000;
	rio_trace_set(&tracer);
	sh->trace = 1;
	cycle(&c, S_VG, 64); /* the server turns its counter on */
	uint64_t s0 = sh->drains, l0 = sh->lines;
	counting = 1;
	for (int i = 0; i < fc; i++)
		cycle(&c, S_VG, 64);
	counting = 0;
	usleep(20000); /* the server publishes after its last commit */
	double cd = (double)t_drains / fc, cl = (double)t_lines / fc;
	double sd = (double)(sh->drains - s0) / fc;
	double sl = (double)(sh->lines - l0) / fc;
	rio_trace_set(NULL);

	printf("Request/response cycle on the loopback, microseconds "
	       "(smallest of %d round medians, %d cycles each);\n"
	       "Vistagrams in the %s domain, segments in %s; CPU idle exit "
	       "latency %s.\n\n",
		rounds, n, domain, dir,
		idle_held ? "held at 0 (/dev/cpu_dma_latency)" :
			    "not held (no access to /dev/cpu_dma_latency: "
			    "idle wake-ups are included)");
	printf("| size | udp | baseline | vistagrams | vistagrams 1 tx | "
	       "zeromq | vistagrams - baseline | 1 tx - baseline |\n"
	       "|---:|---:|---:|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < nsizes; i++) {
		row(sizes[i], best[i], nsys, want, false);
		for (int s = S_VG; s <= S_VG1; s++) {
			if (want[s] && want[S_BASE])
				printf(" %+.1f |",
					best[i][s].med - best[i][S_BASE].med);
			else
				printf(" - |");
		}
		printf("\n");
	}
	printf("\nThroughput, thousands of cycles per second (one client, one "
	       "request outstanding; 1 / mean of the fastest round):\n\n"
	       "| size | udp | baseline | vistagrams | vistagrams 1 tx | "
	       "zeromq |\n|---:|---:|---:|---:|---:|---:|\n");
	for (int i = 0; i < nsizes; i++) {
		row(sizes[i], best[i], nsys, want, true);
		printf("\n");
	}
	printf("\nPersist barriers per cycle (64 B): client %.1f drains, %.1f "
	       "lines flushed; server %.1f drains, %.1f lines flushed.\n",
		cd, cl, sd, sl);

	node_close(&c.vg);
	node_close(&c.base);
	for (int s = 0; s < nsys; s++) {
		if (pid[s] > 0) {
			kill(pid[s], SIGKILL);
			waitpid(pid[s], NULL, 0);
		}
	}
	remove_node(getpid(), "client");
	remove_node(pid[S_VG], "server");
	free(t);
	return 0;
usage:
	usage(stderr);
	return 2;
}
