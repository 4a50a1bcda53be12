/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * net.c -- the UDP socket, the group's addresses, the lossy network
 *
 * A process owns one non-blocking UDP socket bound to its own address
 * (opts.addrs[self]); every packet goes out of it.  Fault injection
 * (struct sbml_faults) stands between the protocol and sendto(): each
 * outgoing datagram is, independently, dropped, delayed (held until a
 * random due time), reordered (held until the next datagram has left) or
 * duplicated (a second copy after a random delay).  Held datagrams are
 * copies released by sbml__net_tick() from the event loop.  The
 * generator is splitmix64 from the options' seed, so a run replays.
 *
 * Invariants
 *   N1. A send never blocks and never fails the caller: EAGAIN, ENOBUFS
 *       and the like are losses, which retransmission repairs.
 *   N2. Only datagrams from a group member's address are parsed (others
 *       are counted as foreign).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sbml_int.h"

struct sbml__held {
	struct sbml__held *next;
	uint64_t due;
	bool after_next;
	unsigned dst;
	size_t len;
	uint8_t data[];
};

#define DEFAULT_DELAY_MAX_US 2000u
#define RCVBUF_BYTES (4 << 20)

uint64_t
sbml__now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "a.b.c.d:port" or "[v6]:port", numeric only. */
int
sbml__parse_addr(const char *str, struct sockaddr_storage *ss,
	socklen_t *len)
{
	char host[128];
	const char *colon, *h = str;
	size_t hl;
	char *end;
	unsigned long port;
	struct addrinfo hints, *ai = NULL;
	int rc;

	if (str == NULL)
		return sbml__err(SBML_EADDR, "no address");
	colon = strrchr(str, ':');
	if (colon == NULL)
		return sbml__err(SBML_EADDR, "address '%s' has no ':port'", str);
	hl = (size_t)(colon - str);
	if (hl >= 2 && str[0] == '[' && str[hl - 1] == ']') {
		h = str + 1;
		hl -= 2;
	}
	if (hl == 0 || hl >= sizeof(host))
		return sbml__err(SBML_EADDR, "address '%s': bad host", str);
	memcpy(host, h, hl);
	host[hl] = 0;
	errno = 0;
	port = strtoul(colon + 1, &end, 10);
	if (errno || *end || colon[1] == 0 || port == 0 || port > 65535)
		return sbml__err(SBML_EADDR, "address '%s': bad port", str);
	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_DGRAM;
	hints.ai_flags = AI_NUMERICHOST;
	rc = getaddrinfo(host, NULL, &hints, &ai);
	if (rc != 0 || ai == NULL)
		return sbml__err(SBML_EADDR, "address '%s': host is not a "
			"numeric IPv4 or IPv6 address", str);
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
	else
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
	return 0;
}

int
sbml__net_open(sbml *s)
{
	struct sbml__peer *me = &s->peer[s->self];
	int rcv = RCVBUF_BYTES;
	int fd = socket(me->addr.ss_family,
		SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return sbml__errno("socket");
	/* A deeper queue rides out bursts; the kernel may cap it. */
	(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	if (bind(fd, (struct sockaddr *)&me->addr, me->addrlen) < 0) {
		int rc = sbml__errno("bind %s (process %u)",
			s->o.addrs[s->self], s->self);
		close(fd);
		return rc;
	}
	s->fd = fd;
	return 0;
}

static void
raw_send(sbml *s, unsigned dst, const void *buf, size_t len)
{
	const struct sbml__peer *p = &s->peer[dst];

	/* N1: a failure is a loss; retransmission repairs it. */
	if (sendto(s->fd, buf, len, MSG_DONTWAIT,
		    (const struct sockaddr *)&p->addr, p->addrlen) >= 0)
		s->st.packets_out++;
}

static uint64_t
rng_next(sbml *s)
{
	uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static bool
chance(sbml *s, double p)
{
	if (p <= 0)
		return false;
	return (double)(rng_next(s) >> 11) * 0x1.0p-53 < p;
}

static uint64_t
random_delay_ns(sbml *s)
{
	uint32_t max = s->f.delay_max_us ? s->f.delay_max_us
					 : DEFAULT_DELAY_MAX_US;
	return (rng_next(s) % ((uint64_t)max + 1)) * 1000;
}

static void
hold(sbml *s, unsigned dst, const void *buf, size_t len, uint64_t due,
	bool after_next)
{
	struct sbml__held *h = malloc(sizeof(*h) + len), **pp;

	if (h == NULL)
		return; /* a loss */
	h->due = due;
	h->after_next = after_next;
	h->dst = dst;
	h->len = len;
	memcpy(h->data, buf, len);
	for (pp = &s->held; *pp && (*pp)->due <= due; pp = &(*pp)->next)
		;
	h->next = *pp;
	*pp = h;
}

static void
release(sbml *s, struct sbml__held **pp)
{
	struct sbml__held *h = *pp;

	*pp = h->next;
	raw_send(s, h->dst, h->data, h->len);
	free(h);
}

void
sbml__net_send(sbml *s, unsigned dst, const void *buf, size_t len)
{
	uint64_t now;

	if (!s->faulty) {
		raw_send(s, dst, buf, len);
		return;
	}
	now = sbml__now_ns();
	if (chance(s, s->f.drop)) {
		s->st.fault_dropped++;
		return;
	}
	if (chance(s, s->f.delay)) {
		s->st.fault_delayed++;
		hold(s, dst, buf, len, now + random_delay_ns(s), false);
	} else if (chance(s, s->f.reorder)) {
		s->st.fault_reordered++;
		hold(s, dst, buf, len, now + random_delay_ns(s), true);
		return;
	} else {
		raw_send(s, dst, buf, len);
		/* reordered datagrams go out right after this one */
		for (struct sbml__held **pp = &s->held; *pp;) {
			if ((*pp)->after_next)
				release(s, pp);
			else
				pp = &(*pp)->next;
		}
	}
	if (chance(s, s->f.duplicate)) {
		s->st.fault_duplicated++;
		hold(s, dst, buf, len, now + random_delay_ns(s), false);
	}
}

uint64_t
sbml__net_tick(sbml *s, uint64_t now)
{
	while (s->held && s->held->due <= now)
		release(s, &s->held);
	return s->held ? s->held->due : UINT64_MAX;
}

void
sbml__net_drop_held(sbml *s)
{
	while (s->held) {
		struct sbml__held *h = s->held;
		s->held = h->next;
		free(h);
	}
}
