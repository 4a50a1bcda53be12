/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * wire.c -- the stream's records (replica_layout.h), the diff, socket I/O
 *
 * Invariants
 *   W1. A record is handed to its consumer only once every byte of it has
 *       arrived and its checksum and shape verify (vr__read_rec); a peer
 *       that disconnects in the middle of one yields VR_ETRUNC, never a
 *       part of it.
 *   W2. Every refusal names the field and both values.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "vr_int.h"

static uint64_t
rec_check(const struct vr_rec_hdr *h, const void *payload, size_t plen)
{
	uint64_t c = rio_checksum(h, offsetof(struct vr_rec_hdr, check),
		VR_WIRE_SEED);
	return plen ? rio_checksum(payload, plen, c) : c;
}

void
vr__rec_fill(struct vr_rec_hdr *h, uint16_t type, uint32_t count,
	uint64_t seq, uint64_t epoch, size_t len)
{
	h->magic = VR_WIRE_MAGIC;
	h->type = type;
	h->major = VR_WIRE_MAJOR;
	h->len = (uint32_t)len;
	h->count = count;
	h->seq = seq;
	h->epoch = epoch;
	h->check = 0;
}

uint64_t
vr__rec_check(const struct vr_rec_hdr *h, const void *payload)
{
	return rec_check(h, payload, h->len - sizeof(*h));
}

void
vr__rec_seal(struct vr_rec_hdr *h, uint16_t type, uint32_t count,
	uint64_t seq, uint64_t epoch, size_t len, const void *payload)
{
	vr__rec_fill(h, type, count, seq, epoch, len);
	h->check = rec_check(h, payload, len - sizeof(*h));
}

int
vr__hdr_check(const struct vr_rec_hdr *h)
{
	if (h->magic != VR_WIRE_MAGIC)
		return vr__err(VR_ECORRUPT,
			"stream record: magic 0x%08x, expected 0x%08x",
			h->magic, VR_WIRE_MAGIC);
	if (h->major != VR_WIRE_MAJOR)
		return vr__err(VR_EVERSION,
			"stream record: wire major %u, this node speaks %u",
			h->major, VR_WIRE_MAJOR);
	if (h->type == 0 || h->type > VR_REC_MAXTYPE)
		return vr__err(VR_ECORRUPT, "stream record: unknown type %u",
			h->type);
	if (h->len < sizeof(*h) || h->len > VR_MAX_REC || h->len % 8)
		return vr__err(VR_ECORRUPT,
			"stream record (type %u): length %u not in [%zu, %u] "
			"or not a multiple of 8", h->type, h->len, sizeof(*h),
			VR_MAX_REC);
	return 0;
}

static int
pieces_check(const struct vr_rec_hdr *h, const char *p, size_t plen,
	uint64_t seg_size)
{
	const struct vr_piece *pc = (const void *)p;
	size_t need;

	if ((size_t)h->count > plen / sizeof(*pc))
		return vr__err(VR_ECORRUPT,
			"stream record %lu: %u pieces do not fit %zu bytes",
			(unsigned long)h->seq, h->count, plen);
	need = (size_t)h->count * sizeof(*pc);
	for (uint32_t i = 0; i < h->count; i++) {
		uint64_t off = vr_piece_off(&pc[i]);
		uint32_t len = vr_piece_len(&pc[i]);
		if (len == 0 || off > seg_size || len > seg_size - off)
			return vr__err(VR_ECORRUPT,
				"stream record %lu: piece %u {%lu, %u} is not "
				"inside the %lu-byte segment",
				(unsigned long)h->seq, i, (unsigned long)off,
				len, (unsigned long)seg_size);
		need += len;
	}
	/* the data back to back, then fewer than 8 bytes of padding */
	need = (need + 7) & ~(size_t)7;
	if (need != plen)
		return vr__err(VR_ECORRUPT,
			"stream record %lu: pieces add up to %zu bytes, the "
			"payload has %zu", (unsigned long)h->seq, need, plen);
	return 0;
}

int
vr__rec_verify(const struct vr_rec_hdr *h, const void *payload,
	uint64_t seg_size)
{
	size_t plen;
	int rc = vr__hdr_check(h);

	if (rc)
		return rc;
	plen = h->len - sizeof(*h);
	if (h->check != rec_check(h, payload, plen))
		return vr__err(VR_ECORRUPT,
			"stream record (type %u, seq %lu, %u bytes): checksum "
			"mismatch", h->type, (unsigned long)h->seq, h->len);
	switch (h->type) {
	case VR_REC_HELLO:
		if (plen != sizeof(struct vr_hello))
			goto size;
		break;
	case VR_REC_ACK:
	case VR_REC_COPY_END:
		if (plen != sizeof(struct vr_ack))
			goto size;
		break;
	case VR_REC_REFUSE:
		if (plen != sizeof(struct vr_refuse))
			goto size;
		break;
	case VR_REC_BEAT:
	case VR_REC_GRANT:
		if (plen != 0)
			goto size;
		break;
	case VR_REC_COPY:
		if (h->count != 1)
			return vr__err(VR_ECORRUPT,
				"COPY record with %u pieces", h->count);
		/* fall through */
	case VR_REC_REDO:
		return pieces_check(h, payload, plen, seg_size);
	}
	return 0;
size:
	return vr__err(VR_ECORRUPT,
		"stream record type %u: payload of %zu bytes", h->type, plen);
}

/* ---- the diff ---- */

/* The first index in [i, len) where b and c differ, or len: eight bytes
 * at a time (one load and one xor of each side per word; the lowest set
 * byte of the xor is the first difference, the formats being
 * little-endian). */
static inline size_t
next_diff(const unsigned char *b, const unsigned char *c, size_t i,
	size_t len)
{
	while (i + 8 <= len) {
		uint64_t x, y;
		memcpy(&x, b + i, 8);
		memcpy(&y, c + i, 8);
		if (x != y)
			return i + (size_t)(__builtin_ctzll(x ^ y) >> 3);
		i += 8;
	}
	if (i < len && len >= 8) {
		/* The last 1..7 bytes: the range's last word, less the bytes
		 * before i (no byte loop: its branches mispredict). */
		uint64_t x, y;
		unsigned skip = (unsigned)(i - (len - 8)) * 8;
		memcpy(&x, b + len - 8, 8);
		memcpy(&y, c + len - 8, 8);
		x = (x ^ y) >> skip;
		return x ? i + (size_t)(__builtin_ctzll(x) >> 3) : len;
	}
	while (i < len && b[i] == c[i])
		i++;
	return i;
}

/* One past the last index in [0, len) where b and c differ, or 0: eight
 * bytes at a time from the end (the highest set byte of the xor is the
 * last difference). */
static inline size_t
last_diff(const unsigned char *b, const unsigned char *c, size_t len)
{
	size_t i = len;

	while (i >= 8) {
		uint64_t x, y;
		memcpy(&x, b + i - 8, 8);
		memcpy(&y, c + i - 8, 8);
		if (x != y)
			return i - (size_t)(__builtin_clzll(x ^ y) >> 3);
		i -= 8;
	}
	while (i > 0 && b[i - 1] == c[i - 1])
		i--;
	return i;
}

int
vr_diff(const void *before, const void *cur, size_t len, size_t gap,
	uint64_t *ol, size_t max)
{
	const unsigned char *b = before, *c = cur;
	size_t i = next_diff(b, c, 0, len), n = 0;

	if (gap == 0)
		gap = 1; /* a run of changed bytes is one piece */
	if (len <= gap && i < len) {
		/* Two differences in the range have fewer than gap equal
		 * bytes between them: one piece, first to last difference
		 * (a counter's 8 bytes: two loads from each end, no loop). */
		if (max == 0)
			return -E2BIG;
		ol[0] = i;
		ol[1] = last_diff(b, c, len) - i;
		return 1;
	}
	while (i < len) {
		size_t lo = i, hi = i + 1;
		/* Extend while the next difference is fewer than gap equal
		 * bytes away; the one that is not begins the next piece. */
		for (;;) {
			i = next_diff(b, c, hi, len);
			if (i == len || i - hi >= gap)
				break;
			hi = i + 1;
		}
		if (n == max)
			return -E2BIG;
		ol[2 * n] = lo;
		ol[2 * n + 1] = hi - lo;
		n++;
	}
	return (int)n;
}

/* ---- sockets ---- */

int
vr__write_all(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len > 0) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd pf = { fd, POLLOUT, 0 };
				(void)poll(&pf, 1, 100);
				continue;
			}
			if (errno == EPIPE || errno == ECONNRESET ||
			    errno == ETIMEDOUT)
				return vr__err(VR_EPEERLOST, "send: the peer "
					"went away (%s)", strerror(errno));
			return vr__err(-errno, "send: %s", strerror(errno));
		}
		p += w;
		len -= (size_t)w;
	}
	return 0;
}

static uint64_t
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Read exactly len bytes.  VR_EPEERLOST on EOF before the first byte or
 * silence for timeout_ms (0: wait forever); VR_ETRUNC on EOF after it. */
int
vr__read_all(int fd, void *buf, size_t len, unsigned timeout_ms,
	const _Atomic int *stop)
{
	char *p = buf;
	size_t got = 0;
	uint64_t last = now_ms();

	while (got < len) {
		struct pollfd pf = { fd, POLLIN, 0 };
		int pr = poll(&pf, 1, 5);
		ssize_t r;
		if (pr < 0 && errno != EINTR)
			return vr__err(-errno, "poll: %s", strerror(errno));
		if (stop != NULL && atomic_load(stop))
			return -ECANCELED;
		if (pr <= 0) {
			if (timeout_ms && now_ms() - last > timeout_ms)
				return vr__err(VR_EPEERLOST,
					"the peer was silent for %u ms",
					timeout_ms);
			continue;
		}
		r = recv(fd, p + got, len - got, 0);
		if (r < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			if (errno == ECONNRESET)
				goto eof;
			return vr__err(-errno, "recv: %s", strerror(errno));
		}
		if (r == 0)
			goto eof;
		got += (size_t)r;
		last = now_ms();
	}
	return 0;
eof:
	if (got == 0)
		return vr__err(VR_EPEERLOST, "the peer closed the connection");
	return vr__err(VR_ETRUNC,
		"the peer closed the connection after %zu of %zu bytes", got,
		len);
}

int
vr__read_rec(int fd, void **buf, size_t *cap, unsigned timeout_ms,
	const _Atomic int *stop, uint64_t seg_size)
{
	struct vr_rec_hdr *h;
	int rc;

	if (*cap < sizeof(*h)) {
		void *nb = realloc(*buf, 4096);
		if (nb == NULL)
			return vr__err(-ENOMEM, "out of memory");
		*buf = nb;
		*cap = 4096;
	}
	rc = vr__read_all(fd, *buf, sizeof(*h), timeout_ms, stop);
	if (rc)
		return rc;
	h = *buf;
	rc = vr__hdr_check(h);
	if (rc)
		return rc;
	if (h->len > *cap) {
		void *nb = realloc(*buf, h->len);
		if (nb == NULL)
			return vr__err(-ENOMEM, "out of memory");
		*buf = nb;
		*cap = ((struct vr_rec_hdr *)nb)->len;
		h = nb;
	}
	rc = vr__read_all(fd, (char *)*buf + sizeof(*h), h->len - sizeof(*h),
		timeout_ms, stop);
	if (rc == VR_EPEERLOST && h->len > sizeof(*h))
		rc = vr__err(VR_ETRUNC,
			"the peer went away after the header of a %u-byte "
			"record", h->len);
	if (rc)
		return rc;
	return vr__rec_verify(h, (char *)*buf + sizeof(*h), seg_size);
}

/* ---- the buffered reader (the backup's stream) ---- */

int
vr__reader_fill(struct vr_reader *r, size_t need, unsigned timeout_ms,
	const VR_ATOMIC(int) *stop)
{
	uint64_t last = 0; /* the clock is read only once a recv finds
			    * nothing: not once per receive */

	while (r->hi - r->lo < need) {
		ssize_t got;
		if (r->cap - r->lo < need) {
			/* Make room: the record goes to the front. */
			memmove(r->buf, r->buf + r->lo, r->hi - r->lo);
			r->hi -= r->lo;
			r->lo = 0;
			if (r->cap < need) {
				size_t c = need > (256u << 10) ? need :
					(256u << 10);
				char *nb = realloc(r->buf, c);
				if (nb == NULL)
					return vr__err(-ENOMEM,
						"out of memory");
				r->buf = nb;
				r->cap = c;
			}
		}
		got = recv(r->fd, r->buf + r->hi, r->cap - r->hi,
			MSG_DONTWAIT);
		if (got > 0) {
			r->hi += (size_t)got;
			last = 0;
			continue;
		}
		if (got < 0 && (errno == EAGAIN || errno == EINTR)) {
			struct pollfd pf = { r->fd, POLLIN, 0 };
			(void)poll(&pf, 1, 5);
			if (stop != NULL && atomic_load(stop))
				return -ECANCELED;
			if (last == 0)
				last = now_ms();
			else if (timeout_ms && now_ms() - last > timeout_ms)
				return vr__err(VR_EPEERLOST,
					"the peer was silent for %u ms",
					timeout_ms);
			continue;
		}
		if (got < 0 && errno != ECONNRESET)
			return vr__err(-errno, "recv: %s", strerror(errno));
		if (r->hi == r->lo)
			return vr__err(VR_EPEERLOST,
				"the peer closed the connection");
		return vr__err(VR_ETRUNC, "the peer closed the connection "
			"after %zu of %zu bytes of a record", r->hi - r->lo,
			need);
	}
	return 0;
}

int
vr__reader_next(struct vr_reader *r, const struct vr_rec_hdr **out,
	unsigned timeout_ms, const VR_ATOMIC(int) *stop, uint64_t seg_size)
{
	const struct vr_rec_hdr *h;
	int rc = vr__reader_fill(r, sizeof(*h), timeout_ms, stop);

	if (rc)
		return rc;
	h = (const void *)(r->buf + r->lo);
	if ((rc = vr__hdr_check(h)) != 0)
		return rc;
	/* W1: all of it, before anything of it is used. */
	rc = vr__reader_fill(r, h->len, timeout_ms, stop);
	if (rc)
		return rc;
	h = (const void *)(r->buf + r->lo);
	rc = vr__rec_verify(h, h + 1, seg_size);
	if (rc)
		return rc;
	r->lo += h->len;
	*out = h;
	return 0;
}

bool
vr__reader_ready(const struct vr_reader *r)
{
	const struct vr_rec_hdr *h = (const void *)(r->buf + r->lo);

	if (r->hi - r->lo < sizeof(*h))
		return false;
	return vr__hdr_check(h) == 0 && r->hi - r->lo >= h->len;
}

int
vr__send_rec(int fd, uint16_t type, uint32_t count, uint64_t seq,
	uint64_t epoch, const void *payload, size_t plen)
{
	char buf[256];
	struct vr_rec_hdr *h = (void *)buf;

	if (plen > sizeof(buf) - sizeof(*h))
		return vr__err(-EINVAL, "vr__send_rec: %zu bytes", plen);
	memcpy(h + 1, payload, plen);
	vr__rec_seal(h, type, count, seq, epoch, sizeof(*h) + plen, h + 1);
	return vr__write_all(fd, buf, sizeof(*h) + plen);
}

static int
addr_of(const char *host, unsigned port, struct addrinfo **ai)
{
	struct addrinfo hints;
	char ps[16];
	int g;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_INET;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_PASSIVE;
	snprintf(ps, sizeof(ps), "%u", port);
	g = getaddrinfo(host, ps, &hints, ai);
	if (g)
		return vr__err(-EINVAL, "%s:%u: %s", host ? host : "*", port,
			gai_strerror(g));
	return 0;
}

static void
tune(int fd)
{
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int
vr__listen(const char *host, unsigned port, unsigned *bound)
{
	struct addrinfo *ai;
	struct sockaddr_in sa;
	socklen_t sl = sizeof(sa);
	int fd, one = 1, rc = addr_of(host, port, &ai);

	if (rc)
		return rc;
	fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		rc = vr__err(-errno, "socket: %s", strerror(errno));
		goto out;
	}
	(void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 4) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
		rc = vr__err(-errno, "listen on %s:%u: %s",
			host ? host : "*", port, strerror(errno));
		close(fd);
		goto out;
	}
	*bound = ntohs(sa.sin_port);
	rc = fd;
out:
	freeaddrinfo(ai);
	return rc;
}

int
vr__connect(const char *host, unsigned port, unsigned timeout_ms)
{
	struct addrinfo *ai;
	uint64_t t0 = now_ms();
	int fd, rc = addr_of(host, port, &ai);

	if (rc)
		return rc;
	for (;;) {
		fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0) {
			rc = vr__err(-errno, "socket: %s", strerror(errno));
			break;
		}
		if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
			tune(fd);
			rc = fd;
			break;
		}
		rc = -errno;
		close(fd);
		if (now_ms() - t0 >= timeout_ms) {
			rc = vr__err(rc, "connect to %s:%u: %s", host, port,
				strerror(-rc));
			break;
		}
		usleep(5000);
	}
	freeaddrinfo(ai);
	return rc;
}

void
vr__tune(int fd)
{
	tune(fd);
}
