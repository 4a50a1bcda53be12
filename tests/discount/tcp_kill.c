/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcp_kill.c -- clients of the TCP echo server under dc-run --protocol
 *               buffered, the server SIGKILLed at random and recovered
 *
 *   dc-tcp-kill DC_RUN SERVER epoll|poll|threadsN|http|memcache KILLS SECONDS
 *               CLIENTS MIN MAX
 *
 * Starts `DC_RUN --protocol buffered --interval 20 -- SERVER PORT MODE`
 * (a free loopback port), connects CLIENTS clients, and has each send
 * requests of MIN..MAX payload bytes, one at a time, checking every
 * answer: the same client and sequence number, count == seq + 1 (each
 * request took effect once: none lost, none twice), the hash chained
 * from the nonces this client was sent (no answer of a rolled-back
 * interval reached it), the payload back byte for byte.  Meanwhile it
 * SIGKILLs the server 60-400 ms after each start and starts it again (the
 * same command: dc-run recovers it), KILLS times or for SECONDS at most.
 * A connection that ends or fails (a reset) fails the run, and so does a
 * request unanswered for 10 s.  Then a quit request ends the server,
 * which must exit 0 and close every client's connection in order (EOF).
 * http: SERVER is lighttpd, run with -D and a configuration made here,
 * serving three files of random bytes (MIN, halfway, MAX bytes); each
 * client asks for one at random over its keep-alive connection and
 * compares the response (200, the length, every byte) with the file; at
 * the end the server gets a SIGTERM instead of the quit request.
 * memcache: SERVER is memcached, run with -t 4 (four worker threads, and
 * its other five) on the port; each client sets its own keys, one a
 * request, values of MIN..MAX bytes made from the key, and every fourth
 * request gets one of its keys already acknowledged and compares the
 * value; after the kills every acknowledged key is read back (gets of
 * 50 keys) and compared, then SIGTERM.
 * Exit status 0 and a summary line; 1 and what went wrong.
 * Environment passed to dc-run as it is ($DC_KEEPER_BIN: a broken keeper).
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tcp_echo.h"

#define MAXCL 16

struct client {
	int fd;
	uint64_t seq, hash, answered;
	uint32_t len;
	int file;             /* http: the file asked for */
	double sent_at;
	size_t outl, outo, inl;
	char out[sizeof(struct te_req) + TE_MAXLEN];
	char in[sizeof(struct te_rep) + TE_MAXLEN];
};

static struct client cl[MAXCL];
static char dir[] = "/dev/shm/dc-tcp-kill-XXXXXX";
static char *srv_argv[24];
static pid_t srv;
/* http: lighttpd serving NFILE files of random bytes */
#define NFILE 3
static bool http;
/* memcache: memcached, each client's keys k<client>_<seq> */
static bool mc;
static uint32_t mc_lo, mc_hi;
static char *fbody[NFILE];
static size_t fsize[NFILE];

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void
die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

/* $TCP_EXPECT=fail (a broken build): a failure whose message holds one
 * of the |-separated words of $TCP_CAUGHT is the test passing. */
static void
die(const char *fmt, ...)
{
	char m[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(m, sizeof(m), fmt, ap);
	va_end(ap);
	if (srv > 0) {
		kill(srv, SIGKILL);
		waitpid(srv, NULL, 0);
	}
	char cmd[sizeof(dir) + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	(void)!system(cmd);
	const char *ex = getenv("TCP_EXPECT");
	if (ex && !strcmp(ex, "fail")) {
		char w[256];
		snprintf(w, sizeof(w), "%s", getenv("TCP_CAUGHT") ?
			getenv("TCP_CAUGHT") : "");
		for (char *t = strtok(w, "|"); t; t = strtok(NULL, "|"))
			if (strstr(m, t)) {
				printf("dc-tcp-kill: caught: %s\n", m);
				exit(0);
			}
		printf("dc-tcp-kill: failed otherwise than expected: %s\n", m);
		exit(1);
	}
	printf("dc-tcp-kill: FAIL: %s\n", m);
	fflush(stdout);
	exit(1);
}

static pid_t
start(void)
{
	pid_t p = fork();
	if (p == 0) {
		execv(srv_argv[0], srv_argv);
		_exit(127);
	}
	return p;
}

static int
free_port(void)
{
	/* below the ephemeral range, probed */
	srand((unsigned)(getpid() ^ (unsigned)time(NULL)));
	for (int t = 0; t < 200; t++) {
		int port = 20000 + rand() % 12000;
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET,
			.sin_port = htons((uint16_t)port),
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		int ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
		close(fd);
		if (ok)
			return port;
	}
	return -1;
}

static int
dial(int port, double within)
{
	double until = now() + within;
	while (now() < until) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		struct sockaddr_in a = { .sin_family = AF_INET,
			.sin_port = htons((uint16_t)port),
			.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		if (connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0) {
			int one = 1;
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one,
				sizeof(one));
			return fd;
		}
		close(fd);
		usleep(20000);
	}
	return -1;
}

/* memcache: the value of key k<cid>_<s>, made from the key */
static size_t
mc_value(uint32_t cid, uint64_t s, char *v)
{
	size_t len = mc_lo + (size_t)((cid * 7919u + s * 104729u) %
		(mc_hi - mc_lo + 1));
	for (size_t i = 0; i < len; i++)
		v[i] = (char)('a' + (s * 31 + i * 7 + cid) % 26);
	return len;
}

/* memcache: request seq is a get (of an earlier set) every fourth */
static bool
mc_is_get(uint64_t seq)
{
	return seq % 4 == 3;
}

static void
mc_request(struct client *c, uint32_t cid)
{
	char v[TE_MAXLEN];
	if (mc_is_get(c->seq)) {
		uint64_t s = (uint64_t)rand() % c->seq;
		if (mc_is_get(s))
			s--;
		c->file = (int)s; /* the key asked for */
		c->outl = (size_t)snprintf(c->out, sizeof(c->out),
			"get k%u_%llu\r\n", cid, (unsigned long long)s);
	} else {
		size_t len = mc_value(cid, c->seq, v);
		int h = snprintf(c->out, sizeof(c->out), "set k%u_%llu 0 0 "
			"%zu\r\n", cid, (unsigned long long)c->seq, len);
		memcpy(c->out + h, v, len);
		memcpy(c->out + h + len, "\r\n", 2);
		c->outl = (size_t)h + len + 2;
	}
	c->outo = c->inl = 0;
	c->sent_at = now();
}

/* memcache: is the answer to c's request whole?  A set must be
 * STORED; a get must find the key with its value exactly. */
static bool
mc_done(struct client *c, int i)
{
	if (!mc_is_get(c->seq)) {
		if (c->inl < 8)
			return false;
		if (c->inl > 8 || memcmp(c->in, "STORED\r\n", 8) != 0)
			die("client %d: set %llu answered \"%.*s\"", i,
				(unsigned long long)c->seq, (int)c->inl, c->in);
		return true;
	}
	if (c->inl >= 5 && !memcmp(c->in, "END\r\n", 5))
		die("client %d: key k%d_%d, acknowledged, lost", i, i,
			c->file);
	char *e = memchr(c->in, '\n', c->inl);
	if (e == NULL)
		return false;
	char v[TE_MAXLEN];
	size_t len = mc_value((uint32_t)i, (uint64_t)c->file, v);
	char head[64];
	int hl = snprintf(head, sizeof(head), "VALUE k%d_%d 0 %zu\r\n", i,
		c->file, len);
	if ((size_t)(e + 1 - c->in) != (size_t)hl ||
	    memcmp(c->in, head, (size_t)hl) != 0)
		die("client %d: get of k%d_%d answered \"%.*s\"", i, i,
			c->file, (int)(e - c->in), c->in);
	if (c->inl < (size_t)hl + len + 7)
		return false;
	if (c->inl > (size_t)hl + len + 7)
		die("client %d: more bytes than the answer to get %llu", i,
			(unsigned long long)c->seq);
	if (memcmp(c->in + hl, v, len) != 0 ||
	    memcmp(c->in + hl + len, "\r\nEND\r\n", 7) != 0)
		die("client %d: key k%d_%d: value differs", i, i, c->file);
	return true;
}

/* memcache, at the end: every key client i set and saw acknowledged,
 * read back 50 a get, each value exactly; the count read. */
static uint64_t
mc_verify(int i)
{
	struct client *c = &cl[i];
	static char in[50 * (TE_MAXLEN + 64) + 8];
	char v[TE_MAXLEN];
	uint64_t read = 0;
	for (uint64_t s0 = 0; s0 < c->seq; s0 += 50) {
		char q[50 * 32 + 8];
		size_t ql = (size_t)snprintf(q, sizeof(q), "get");
		for (uint64_t s = s0; s < s0 + 50 && s < c->seq; s++)
			if (!mc_is_get(s))
				ql += (size_t)snprintf(q + ql, sizeof(q) - ql,
					" k%d_%llu", i, (unsigned long long)s);
		ql += (size_t)snprintf(q + ql, sizeof(q) - ql, "\r\n");
		if (send(c->fd, q, ql, MSG_NOSIGNAL) != (ssize_t)ql)
			die("client %d: send of the reading back", i);
		size_t n = 0;
		while (n < 5 || memcmp(in + n - 5, "END\r\n", 5) != 0) {
			struct pollfd p = { c->fd, POLLIN, 0 };
			if (poll(&p, 1, 10000) != 1)
				die("client %d: reading back unanswered", i);
			ssize_t r = recv(c->fd, in + n, sizeof(in) - 1 - n, 0);
			if (r <= 0)
				die("client %d: reading back: %s", i, r ?
					strerror(errno) : "closed");
			n += (size_t)r;
		}
		size_t o = 0;
		for (uint64_t s = s0; s < s0 + 50 && s < c->seq; s++) {
			if (mc_is_get(s))
				continue;
			size_t len = mc_value((uint32_t)i, s, v);
			char head[64];
			int hl = snprintf(head, sizeof(head), "VALUE k%d_%llu "
				"0 %zu\r\n", i, (unsigned long long)s, len);
			if (o + (size_t)hl + len + 2 > n ||
			    memcmp(in + o, head, (size_t)hl) != 0)
				die("client %d: key k%d_%llu, acknowledged, "
					"lost or changed at the end", i, i,
					(unsigned long long)s);
			if (memcmp(in + o + hl, v, len) != 0)
				die("client %d: key k%d_%llu: value differs at "
					"the end", i, i, (unsigned long long)s);
			o += (size_t)hl + len + 2;
			read++;
		}
		if (n - o != 5)
			die("client %d: more than its keys read back", i);
	}
	return read;
}

static void
next_request(struct client *c, uint32_t cid, uint32_t lo, uint32_t hi)
{
	if (mc) {
		mc_request(c, cid);
		return;
	}
	if (http) {
		c->file = rand() % NFILE;
		c->outl = (size_t)snprintf(c->out, sizeof(c->out), "GET /f%d "
			"HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", c->file);
		c->outo = c->inl = 0;
		c->sent_at = now();
		return;
	}
	struct te_req q = { .magic = TE_REQ, .cid = cid, .seq = c->seq,
		.len = lo + (hi > lo ? (uint32_t)rand() % (hi - lo + 1) : 0) };
	memcpy(c->out, &q, sizeof(q));
	for (uint32_t i = 0; i < q.len; i++)
		c->out[sizeof(q) + i] = (char)(c->seq * 31 + i * 7 + cid);
	c->len = q.len;
	c->outl = sizeof(q) + q.len;
	c->outo = 0;
	c->inl = 0;
	c->sent_at = now();
}

static void
check(struct client *c, uint32_t cid)
{
	struct te_rep p;
	memcpy(&p, c->in, sizeof(p));
	if (p.magic != TE_REP || p.cid != cid || p.seq != c->seq ||
	    p.len != c->len)
		die("client %u: answer to request %llu malformed (cid %u seq "
			"%llu len %u)", cid, (unsigned long long)c->seq, p.cid,
			(unsigned long long)p.seq, p.len);
	if (p.count != c->seq + 1)
		die("client %u: request %llu took effect %s (the server's "
			"count is %llu)", cid, (unsigned long long)c->seq,
			p.count > c->seq + 1 ? "twice" : "after a lost one",
			(unsigned long long)p.count);
	uint64_t h = te_chain(c->hash, p.nonce, p.seq);
	if (p.hash != h)
		die("client %u: answer %llu does not follow the answers it "
			"was sent: an answer of a rolled-back interval reached "
			"it", cid, (unsigned long long)c->seq);
	if (memcmp(c->in + sizeof(p), c->out + sizeof(struct te_req), p.len))
		die("client %u: answer %llu: payload differs", cid,
			(unsigned long long)c->seq);
	c->hash = h;
	c->seq++;
	c->answered++;
}

/* http: is the response to c's request whole?  Checked: status 200,
 * the file's bytes exactly, keep-alive. */
static bool
http_done(struct client *c, int i)
{
	c->in[c->inl < sizeof(c->in) ? c->inl : sizeof(c->in) - 1] = '\0';
	char *e = strstr(c->in, "\r\n\r\n");
	if (e == NULL) {
		if (c->inl >= sizeof(c->in) - 1)
			die("client %d: a header without its end", i);
		return false;
	}
	size_t hl = (size_t)(e + 4 - c->in);
	char *h = strcasestr(c->in, "\r\nContent-Length:");
	if (strncmp(c->in, "HTTP/1.1 200", 12) != 0 || h == NULL || h > e)
		die("client %d: response %llu is not a 200 with a length: "
			"%.40s", i, (unsigned long long)c->seq, c->in);
	size_t len = strtoull(h + 17, NULL, 10);
	if (c->inl < hl + len)
		return false;
	if (c->inl > hl + len)
		die("client %d: more bytes than response %llu", i,
			(unsigned long long)c->seq);
	if (len != fsize[c->file] ||
	    memcmp(c->in + hl, fbody[c->file], len) != 0)
		die("client %d: response %llu: /f%d differs from the file", i,
			(unsigned long long)c->seq, c->file);
	char *cc = strcasestr(c->in, "\r\nConnection: close");
	if (cc && cc < e)
		die("client %d: the server closes the connection", i);
	return true;
}

/* Move each client's bytes; answers checked; die on any failure. */
static void
pump(int n, uint32_t lo, uint32_t hi, bool more, int ms)
{
	struct pollfd p[MAXCL];
	for (int i = 0; i < n; i++) {
		struct client *c = &cl[i];
		p[i] = (struct pollfd){ c->fd, POLLIN |
			(c->outo < c->outl ? POLLOUT : 0), 0 };
	}
	poll(p, (nfds_t)n, ms);
	for (int i = 0; i < n; i++) {
		struct client *c = &cl[i];
		if (p[i].revents & POLLOUT) {
			ssize_t r = send(c->fd, c->out + c->outo,
				c->outl - c->outo, MSG_DONTWAIT | MSG_NOSIGNAL);
			if (r < 0 && errno != EAGAIN)
				die("client %d: send: %s", i, strerror(errno));
			if (r > 0)
				c->outo += (size_t)r;
		}
		if (p[i].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = recv(c->fd, c->in + c->inl,
				sizeof(c->in) - c->inl, MSG_DONTWAIT);
			if (r == 0)
				die("client %d: the server closed the "
					"connection (request %llu)", i,
					(unsigned long long)c->seq);
			if (r < 0 && errno != EAGAIN)
				die("client %d: recv: %s (request %llu)", i,
					strerror(errno),
					(unsigned long long)c->seq);
			if (r > 0)
				c->inl += (size_t)r;
			if (http || mc) {
				if (http ? http_done(c, i) : mc_done(c, i)) {
					c->seq++;
					c->answered++;
					if (more)
						next_request(c, (uint32_t)i,
							lo, hi);
					else
						c->outl = c->outo = 0;
				}
				goto waited;
			}
			size_t want = sizeof(struct te_rep) + c->len;
			if (c->inl > want)
				die("client %d: more bytes than one answer to "
					"request %llu", i,
					(unsigned long long)c->seq);
			if (c->inl == want && c->outo == c->outl) {
				check(c, (uint32_t)i);
				if (more)
					next_request(c, (uint32_t)i, lo, hi);
				else
					c->outl = c->outo = 0;
			}
		}
	waited:
		if (c->outl && now() - c->sent_at > 10.0)
			die("client %d: request %llu unanswered for 10 s", i,
				(unsigned long long)c->seq);
	}
}

int
main(int argc, char **argv)
{
	if (argc != 9) {
		fprintf(stderr, "usage: dc-tcp-kill DC_RUN SERVER "
			"epoll|poll|threadsN|http|memcache "
			"KILLS SECONDS CLIENTS MIN MAX\n");
		return 2;
	}
	int kills = atoi(argv[4]), n = atoi(argv[6]);
	double secs = atof(argv[5]);
	uint32_t lo = (uint32_t)atoi(argv[7]), hi = (uint32_t)atoi(argv[8]);
	if (n < 1 || n > MAXCL || hi > TE_MAXLEN || lo > hi)
		return 2;
	signal(SIGPIPE, SIG_IGN);
	if (mkdtemp(dir) == NULL)
		return 2;
	int port = free_port();
	char ps[16];
	snprintf(ps, sizeof(ps), "%d", port);
	char ck[sizeof(dir) + 8];
	snprintf(ck, sizeof(ck), "%s/ck", dir);
	char *av[] = { argv[1], "--dir", ck, "--protocol", "buffered",
		"--interval", "20", "--", argv[2], ps, argv[3], NULL };
	memcpy(srv_argv, av, sizeof(av));
	char conf[sizeof(dir) + 16];
	char *hv[] = { argv[1], "--dir", ck, "--protocol", "buffered",
		"--interval", "20", "--", argv[2], "-D", "-f", conf, NULL };
	char *mv[] = { argv[1], "--dir", ck, "--protocol", "buffered",
		"--interval", "20", "--", argv[2], "-t", "4", "-p", ps, "-U",
		"0", "-l", "127.0.0.1", "-u", "root", NULL };
	if (!strcmp(argv[3], "memcache")) {
		mc = true;
		mc_lo = lo;
		mc_hi = hi;
		if (hi > 1000000 || hi > TE_MAXLEN - 64 || lo < 1)
			return 2;
		if (getuid() != 0) /* -u: only root may, and must */
			mv[17] = NULL;
		memcpy(srv_argv, mv, sizeof(mv));
	}
	if (!strcmp(argv[3], "http")) {
		/* lighttpd: its configuration and NFILE files, MIN..MAX
		 * bytes, in the run's directory */
		http = true;
		if (hi > TE_MAXLEN - 1024)
			return 2;
		memcpy(srv_argv, hv, sizeof(hv));
		snprintf(conf, sizeof(conf), "%s/l.conf", dir);
		FILE *f = fopen(conf, "w");
		if (f == NULL)
			return 2;
		fprintf(f, "server.document-root = \"%s\"\n"
			"server.port = %d\nserver.bind = \"127.0.0.1\"\n"
			"server.errorlog = \"%s/error.log\"\n"
			"server.max-worker = 0\n"
			"server.max-keep-alive-requests = 1000000\n"
			"server.max-keep-alive-idle = 300\n"
			"server.max-read-idle = 300\n"
			"server.max-write-idle = 300\n", dir, port, dir);
		fclose(f);
		for (int k = 0; k < NFILE; k++) {
			char fn[sizeof(dir) + 16];
			snprintf(fn, sizeof(fn), "%s/f%d", dir, k);
			fsize[k] = lo + (size_t)(hi - lo) * (size_t)k /
				(NFILE - 1);
			fbody[k] = malloc(fsize[k] + 1);
			for (size_t b = 0; b < fsize[k]; b++)
				fbody[k][b] = (char)rand();
			f = fopen(fn, "w");
			if (f == NULL || fwrite(fbody[k], 1, fsize[k], f) !=
			    fsize[k])
				return 2;
			fclose(f);
		}
	}
	setenv("DC_KEEPER_LINGER", "15", 0);
	srv = start();
	for (int i = 0; i < n; i++) {
		cl[i].fd = dial(port, 20.0);
		if (cl[i].fd < 0)
			die("client %d: cannot connect to port %d", i, port);
		cl[i].hash = TE_HASH0;
		next_request(&cl[i], (uint32_t)i, lo, hi);
	}
	double t0 = now();
	int done = 0;
	uint64_t before = 0;
	while (done < kills && now() - t0 < secs) {
		double at = now() + 0.06 + (rand() % 340) / 1000.0;
		while (now() < at)
			pump(n, lo, hi, true, 5);
		kill(srv, SIGKILL);
		int st;
		waitpid(srv, &st, 0);
		if (!WIFSIGNALED(st))
			die("the server ended by itself (status %d) before "
				"kill %d", WEXITSTATUS(st), done + 1);
		done++;
		if (getenv("TCP_VERBOSE"))
			fprintf(stderr, "kill %d at %.1f s\n", done, now() - t0);
		srv = start();
	}
	for (int i = 0; i < n; i++)
		before += cl[i].answered;
	/* every client answered again after the last recovery */
	uint64_t mark[MAXCL];
	for (int i = 0; i < n; i++)
		mark[i] = cl[i].answered;
	double until = now() + 20.0;
	for (bool all = false; !all;) {
		if (now() > until)
			die("no answers after the last recovery");
		pump(n, lo, hi, true, 5);
		all = true;
		for (int i = 0; i < n; i++)
			all &= cl[i].answered >= mark[i] + 3;
	}
	/* the answers in flight, then the quit (lighttpd: SIGTERM) */
	until = now() + 20.0;
	for (bool idle = false; !idle;) {
		pump(n, lo, hi, false, 5);
		idle = true;
		for (int i = 0; i < n; i++)
			idle &= cl[i].outl == 0;
		if (now() > until)
			die("answers still missing at the end");
	}
	uint64_t readback = 0;
	for (int i = 0; mc && i < n; i++)
		readback += mc_verify(i);
	if (http || mc) {
		kill(srv, SIGTERM);
	} else {
		int q = dial(port, 5.0);
		struct te_req qr = { .magic = TE_REQ, .cid = TE_QUIT };
		if (q < 0 || send(q, &qr, sizeof(qr), 0) !=
		    (ssize_t)sizeof(qr))
			die("cannot send the quit request");
		struct te_rep qp;
		struct pollfd pq = { q, POLLIN, 0 };
		if (poll(&pq, 1, 20000) != 1 ||
		    recv(q, &qp, sizeof(qp), MSG_WAITALL) !=
		    (ssize_t)sizeof(qp) || qp.magic != TE_REP)
			die("no answer to the quit request");
	}
	int st = 0;
	for (double u = now() + 20.0; waitpid(srv, &st, WNOHANG) == 0;
	     usleep(10000))
		if (now() > u)
			die("the server did not end at quit");
	srv = 0;
	/* lighttpd stopped with connections open ends as it ends alone
	 * (by the signal, re-raised), under dc-run with status 1 */
	if (!http && !mc && (!WIFEXITED(st) || WEXITSTATUS(st) != 0))
		die("the server did not exit 0 at quit (status %#x)", st);
	for (int i = 0; i < n; i++) {
		struct pollfd p = { cl[i].fd, POLLIN, 0 };
		char b;
		if (poll(&p, 1, 10000) != 1)
			die("client %d: not closed after the server ended", i);
		ssize_t r = recv(cl[i].fd, &b, 1, 0);
		if (r != 0)
			die("client %d: %s after the server ended", i,
				r < 0 ? strerror(errno) : "a byte more");
		close(cl[i].fd);
	}
	uint64_t total = 0;
	for (int i = 0; i < n; i++)
		total += cl[i].answered;
	if (getenv("TCP_EXPECT") && !strcmp(getenv("TCP_EXPECT"), "fail")) {
		printf("dc-tcp-kill: the broken build was not caught in %d "
			"kills\n", done);
		return 1;
	}
	printf("dc-tcp-kill: ok: %d kills, %d clients, %llu requests answered "
		"%s (%llu during the kills), port %d\n", done, n,
		(unsigned long long)total, http ? "with the files' bytes" :
		mc ? "with their values" : "exactly once",
		(unsigned long long)before, port);
	if (mc)
		printf("dc-tcp-kill: %llu acknowledged keys read back, every "
			"value exact\n", (unsigned long long)readback);
	char cmd[sizeof(dir) + 16];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	(void)!system(cmd);
	return 0;
}
