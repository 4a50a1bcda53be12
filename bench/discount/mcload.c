/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * mcload.c -- a memcached load client for held_memcached.sh: C connections,
 *             one request in flight on each, for T seconds
 *
 *   dc-bench-mcload PORT CONNS SECONDS [KEYS [VALUE_BYTES]]
 *
 * First sets every key k0..k(KEYS-1) (default 10000, values of
 * VALUE_BYTES, default 100), then runs the timed load: each connection
 * sends a request, waits for its whole answer, sends the next; nine in
 * ten are a get of a random key, one in ten a set.  A get's value is
 * checked against the key's (every value is made from its key), and a
 * set must answer STORED.  Prints one line:
 *   "req_per_s R mean_ms M p99_ms P errors E"
 * E counts wrong answers and connections lost (0 expected).
 * Exit 0, 1 when a connection cannot be made, 2 on bad arguments.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define MAXC 1024
#define MAXV 4096
#define MAXLAT (1 << 22)

struct conn {
	int fd;
	int key;
	int set;                /* the request in flight is a set */
	double t0;
	size_t outl, outo, inl;
	char out[MAXV + 64];
	char in[MAXV + 64];
};

static struct conn cs[MAXC];
static double lat[MAXLAT];
static size_t nlat;
static int vbytes = 100, nkeys = 10000;
static unsigned long errors;

static double
now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void
value(int key, char *v)
{
	for (int i = 0; i < vbytes; i++)
		v[i] = (char)('a' + (key * 31 + i * 7) % 26);
}

static void
request(struct conn *c, int set)
{
	c->key = rand() % nkeys;
	c->set = set;
	if (set) {
		int h = snprintf(c->out, sizeof(c->out), "set k%d 0 0 %d\r\n",
			c->key, vbytes);
		value(c->key, c->out + h);
		memcpy(c->out + h + vbytes, "\r\n", 2);
		c->outl = (size_t)h + (size_t)vbytes + 2;
	} else {
		c->outl = (size_t)snprintf(c->out, sizeof(c->out),
			"get k%d\r\n", c->key);
	}
	c->outo = c->inl = 0;
	c->t0 = now();
}

/* Is the answer whole?  1 yes (checked), 0 not yet. */
static int
answered(struct conn *c)
{
	if (c->set) {
		if (c->inl < 8)
			return 0;
		if (c->inl > 8 || memcmp(c->in, "STORED\r\n", 8) != 0)
			errors++;
		return 1;
	}
	if (c->inl >= 5 && !memcmp(c->in, "END\r\n", 5)) {
		errors++; /* every key was set first */
		return 1;
	}
	char *e = memchr(c->in, '\n', c->inl);
	if (e == NULL)
		return 0;
	size_t hl = (size_t)(e + 1 - c->in);
	if (c->inl < hl + (size_t)vbytes + 7)
		return 0;
	char v[MAXV];
	value(c->key, v);
	if (c->inl != hl + (size_t)vbytes + 7 ||
	    memcmp(c->in + hl, v, (size_t)vbytes) != 0)
		errors++;
	return 1;
}

static int
dial(int port)
{
	for (int t = 0; t < 100; t++) {
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
		usleep(50000);
	}
	return -1;
}

/* Move every connection's bytes until `until`, each answer followed by
 * the next request. */
static void
run(int n, double until)
{
	static struct pollfd p[MAXC];
	while (now() < until) {
		int live = 0;
		for (int i = 0; i < n; i++) {
			struct conn *c = &cs[i];
			p[i] = (struct pollfd){ c->outl ? c->fd : -1, POLLIN |
				(c->outo < c->outl ? POLLOUT : 0), 0 };
			live += c->outl != 0;
		}
		if (!live)
			return;
		poll(p, (nfds_t)n, 10);
		for (int i = 0; i < n; i++) {
			struct conn *c = &cs[i];
			if (p[i].revents & POLLOUT) {
				ssize_t r = send(c->fd, c->out + c->outo,
					c->outl - c->outo, MSG_NOSIGNAL);
				if (r > 0)
					c->outo += (size_t)r;
			}
			if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
				continue;
			ssize_t r = recv(c->fd, c->in + c->inl,
				sizeof(c->in) - c->inl, MSG_DONTWAIT);
			if (r == 0 || (r < 0 && errno != EAGAIN)) {
				errors++;
				c->outl = 0;
				continue;
			}
			if (r > 0)
				c->inl += (size_t)r;
			if (!answered(c))
				continue;
			if (nlat < MAXLAT)
				lat[nlat++] = (now() - c->t0) * 1000.0;
			request(c, rand() % 10 == 0);
		}
	}
}

static int
fill(int fd)
{
	static char b[500 * (MAXV + 64)];
	char v[MAXV];
	for (int k0 = 0; k0 < nkeys; k0 += 500) {
		size_t l = 0;
		int cnt = 0;
		for (int k = k0; k < k0 + 500 && k < nkeys; k++, cnt++) {
			l += (size_t)snprintf(b + l, 64, "set k%d 0 0 %d\r\n",
				k, vbytes);
			value(k, v);
			memcpy(b + l, v, (size_t)vbytes);
			memcpy(b + l + vbytes, "\r\n", 2);
			l += (size_t)vbytes + 2;
		}
		for (size_t o = 0; o < l;) {
			ssize_t w = send(fd, b + o, l - o, MSG_NOSIGNAL);
			if (w <= 0)
				return -1;
			o += (size_t)w;
		}
		size_t want = (size_t)cnt * 8, got = 0;
		while (got < want) {
			ssize_t r = recv(fd, b + got, want - got, 0);
			if (r <= 0)
				return -1;
			got += (size_t)r;
		}
		for (int i = 0; i < cnt; i++)
			if (memcmp(b + 8 * i, "STORED\r\n", 8) != 0)
				return -1;
	}
	return 0;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	if (argc < 4)
		return 2;
	int port = atoi(argv[1]), n = atoi(argv[2]);
	double secs = atof(argv[3]);
	if (argc > 4)
		nkeys = atoi(argv[4]);
	if (argc > 5)
		vbytes = atoi(argv[5]);
	if (n < 1 || n > MAXC || nkeys < 1 || vbytes < 1 || vbytes > MAXV)
		return 2;
	srand(12345);
	for (int i = 0; i < n; i++)
		if ((cs[i].fd = dial(port)) < 0) {
			fprintf(stderr, "mcload: cannot connect to %d\n", port);
			return 1;
		}
	/* every key set first: 500 sets a write on the first connection
	 * (held output answers once an interval) */
	if (fill(cs[0].fd) != 0) {
		fprintf(stderr, "mcload: setting the keys failed\n");
		return 1;
	}
	for (int i = 0; i < n; i++)
		request(&cs[i], rand() % 10 == 0);
	double t0 = now();
	run(n, t0 + secs);
	double el = now() - t0;
	double sum = 0;
	for (size_t i = 0; i < nlat; i++)
		sum += lat[i];
	qsort(lat, nlat, sizeof(lat[0]), cmp);
	printf("req_per_s %.0f mean_ms %.3f p99_ms %.3f errors %lu\n",
		(double)nlat / el, nlat ? sum / (double)nlat : 0.0,
		nlat ? lat[(size_t)((double)(nlat - 1) * 0.99)] : 0.0, errors);
	return 0;
}
