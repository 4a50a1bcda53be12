/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.c -- the append-only logs of an interval (ndlog, fundo)
 *
 * An entry is a struct dc_log_ent header and its payload padded to 8
 * bytes, appended by dc__log_append -- the format's one writer, for all
 * three logs -- and made durable before the caller acts on it (the
 * action the entry guards comes after).
 *
 * Invariants:
 *  1. An entry is valid when its magic, generation, sequence number (and,
 *     when asked, incarnation) are the expected ones and its checksum
 *     matches: entries of an older interval, of an older incarnation, or
 *     torn by a crash are never taken for current ones.
 *  2. Entries of one interval are read from offset 0 with seq 0, 1, ...;
 *     the first invalid entry ends the log.
 *  3. An undo that is not idempotent as a whole (fundo: renames, removals
 *     and writes to files they bring back depend on each other's order)
 *     pops the log: once an entry is applied, the log is truncated at it
 *     before the next older one is applied.  Re-applying the one entry a
 *     crash interrupted is harmless (each entry alone is idempotent,
 *     fundo.c invariant 2), so a crash anywhere in the undo is recovered
 *     by running it again.  A before-image log of memory (mundo) needs no
 *     pop: its entries are bytes at fixed addresses, and applying all of
 *     them newest first gives the oldest image whatever the start.
 */
#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dc_int.h"

#define CHUNK DC__LOG_CHUNK

/* Checksum of the header (csum = 0) and the payload d1 ++ d2, chained
 * over 64 KiB pieces of the payload: the reader reproduces it piecewise.
 * Async-signal-safe when the payload is in one piece (d2 empty); a piece
 * that straddles d1 and d2 is gathered in dc__vol.logtmp. */
static uint64_t
log_csum(const struct dc_log_ent *h, const void *p1, uint64_t l1,
	const void *p2, uint64_t l2)
{
	const char *d1 = p1, *d2 = p2;
	char *tmp = dc__vol.logtmp;
	struct dc_log_ent t = *h;
	t.csum = 0;
	uint64_t c = rio_checksum(&t, sizeof(t), DC_LOG_SEED);
	uint64_t total = l1 + l2;
	for (uint64_t o = 0; o < total; o += CHUNK) {
		uint64_t k = total - o < CHUNK ? total - o : CHUNK;
		if (o + k <= l1) {
			c = rio_checksum(d1 + o, k, c);
		} else if (o >= l1) {
			c = rio_checksum(d2 + (o - l1), k, c);
		} else {
			memcpy(tmp, d1 + o, l1 - o);
			memcpy(tmp + (l1 - o), d2, k - (l1 - o));
			c = rio_checksum(tmp, k, c);
		}
	}
	return c;
}

/*
 * The one writer of the format (ndlog.c, fundo.c, seg.c's mundo): fills
 * h's magic, seq, len and csum, then writes the entry at *off -- stored
 * into win when the log's first win_len bytes are mapped there and the
 * entry fits (tmpfs: a store is what a write would make the file's page;
 * a torn entry fails its checksum), else one pwritev -- and makes it
 * durable before returning (fdatasync unless the directory is memory):
 * the caller acts on what the entry guards only after (invariant 1 of
 * fundo.c and seg.c).  Then *off and *seq advance.
 *
 * Raw system calls, no error message, no write to anything but the log,
 * *off and *seq: it runs in the SIGSEGV handler (seg.c invariant 5).
 * Returns 0, -errno, or -ENOSPC for a short write; the caller says what
 * failed.
 */
int
dc__log_append(int fd, char *win, uint64_t win_len, uint64_t *off,
	uint64_t *seq, struct dc_log_ent *h, const void *d1, uint64_t l1,
	const void *d2, uint64_t l2)
{
	static const char zero[8];
	h->magic = DC_LOG_MAGIC;
	h->seq = *seq;
	h->len = l1 + l2;
	h->csum = log_csum(h, d1, l1, d2, l2);
	uint64_t want = dc__log_span(h->len);
	uint64_t pad = want - sizeof(*h) - h->len;
	if (win != NULL && *off + want <= win_len) {
		char *p = win + *off;
		memcpy(p, h, sizeof(*h));
		p += sizeof(*h);
		if (l1)
			memcpy(p, d1, l1);
		if (l2)
			memcpy(p + l1, d2, l2);
		if (pad)
			memset(p + l1 + l2, 0, pad);
	} else {
		struct iovec iov[4] = { { h, sizeof(*h) } };
		int n = 1;
		if (l1)
			iov[n++] = (struct iovec){ (void *)d1, l1 };
		if (l2)
			iov[n++] = (struct iovec){ (void *)d2, l2 };
		if (pad)
			iov[n++] = (struct iovec){ (void *)zero, pad };
		long k = dc__sys6(SYS_pwritev, fd, (long)iov, n, (long)*off,
			0, 0);
		if (k != (long)want)
			return k < 0 ? (int)k : -ENOSPC;
		/* The entry must be durable before what it guards happens;
		 * on tmpfs the write itself is (ckpt.c dc__sync_fd). */
		if (!dc__vol.dir_is_mem &&
		    (k = dc__sys6(SYS_fdatasync, fd, 0, 0, 0, 0, 0)) < 0)
			return (int)k;
	}
	*off += want;
	*seq += 1;
	return 0;
}

/*
 * Read and verify the entry at off; its payload goes to `payload` when
 * it fits in max bytes.  Returns 0, or DC_ENOCKPT when there is no valid
 * entry there (end of the log).
 */
int
dc__log_read(int fd, uint64_t off, uint64_t gen, uint64_t seq,
	const uint64_t *inc, struct dc_log_ent *e, void *payload, uint64_t max)
{
	char *tmp = dc__vol.logtmp;
	if (pread(fd, e, sizeof(*e), (off_t)off) != (ssize_t)sizeof(*e))
		return DC_ENOCKPT;
	if (e->magic != DC_LOG_MAGIC || e->gen != gen || e->seq != seq ||
	    (inc != NULL && e->inc != *inc) || e->len > (1ull << 40))
		return DC_ENOCKPT;
	struct dc_log_ent t = *e;
	t.csum = 0;
	uint64_t c = rio_checksum(&t, sizeof(t), DC_LOG_SEED);
	bool into = payload != NULL && e->len <= max;
	for (uint64_t o = 0; o < e->len; o += CHUNK) {
		uint64_t k = e->len - o < CHUNK ? e->len - o : CHUNK;
		char *dst = into ? (char *)payload + o : tmp;
		if (pread(fd, dst, k, (off_t)(off + sizeof(*e) + o)) !=
		    (ssize_t)k)
			return DC_ENOCKPT;
		c = rio_checksum(dst, k, c);
	}
	return c == e->csum ? 0 : DC_ENOCKPT;
}

/*
 * Undo a log of before-images (fundo, mundo): the entries of (gen, inc)
 * from offset 0 in order, then applied newest first by following each
 * entry's `b` (the offset of the previous one, -1 for the first).  Each
 * payload is read into dc__vol.io; an entry longer than max is corrupt.
 * Returns the number of entries applied through *n, 0 or an error.
 *
 * pop (fundo): each entry applied is then cut off the log (invariant 3),
 * so a crash during the undo resumes at the entry it was applying.
 */
static int
undo_walk(int fd, uint64_t gen, uint64_t inc, uint64_t max,
	int (*apply)(const struct dc_log_ent *e, const char *payload),
	const char *what, uint64_t *n, bool pop)
{
	uint64_t off = 0, seq = 0, last = UINT64_MAX;
	struct dc_log_ent e;
	char *pl = dc__vol.io;

	while (dc__log_read(fd, off, gen, seq, &inc, &e, NULL, 0) == 0) {
		last = off;
		off += dc__log_span(e.len);
		seq++;
	}
	uint64_t k = seq, at = last;
	for (; k > 0 && at != UINT64_MAX; k--) {
		if (dc__log_read(fd, at, gen, k - 1, &inc, &e, pl,
			    sizeof(dc__vol.io)) != 0 || e.len > max)
			return dc__err(DC_ECORRUPT, "%s entry %lu at %lu "
				"unreadable", what, (unsigned long)(k - 1),
				(unsigned long)at);
		dc__rstep();
		int rc = apply(&e, pl);
		if (rc)
			return rc;
		dc__rstep();
#ifndef DC_BROKEN_UNDO_NO_POP
		/* The entry's effect is durable (apply synced it where a
		 * crash of the machine could lose it); only then is the
		 * entry cut off, made durable before the next one is
		 * applied: an entry is never applied again once an older
		 * one has been. */
		if (pop) {
			if (ftruncate(fd, (off_t)at) != 0)
				return dc__err(-errno, "%s: cut entry %lu: %s",
					what, (unsigned long)(k - 1),
					strerror(errno));
			if ((rc = dc__sync_fd(fd)))
				return rc;
			dc__rstep();
		}
#else
		(void)pop;
#endif
		at = e.b < 0 ? UINT64_MAX : (uint64_t)e.b;
	}
	if (k != 0)
		return dc__err(DC_ECORRUPT, "%s: chain broken at entry %lu",
			what, (unsigned long)(k - 1));
	*n = seq;
	return 0;
}

int
dc__log_undo(int fd, uint64_t gen, uint64_t inc, uint64_t max,
	int (*apply)(const struct dc_log_ent *e, const char *payload),
	const char *what, uint64_t *n)
{
	return undo_walk(fd, gen, inc, max, apply, what, n, false);
}

int
dc__log_undo_pop(int fd, uint64_t gen, uint64_t inc, uint64_t max,
	int (*apply)(const struct dc_log_ent *e, const char *payload),
	const char *what, uint64_t *n)
{
	return undo_walk(fd, gen, inc, max, apply, what, n, true);
}
