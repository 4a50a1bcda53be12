/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.c -- the redo log: status blocks, record validation, appending
 *
 * Design (rvm_layout.h has the format):
 *  1. Records are built by rvm_end_transaction in the no_flush buffer with
 *     their ranges' new values; generation, sequence and checksum are
 *     stamped only when the record is written, so a truncation between
 *     commit and write cannot leave a record stamped with a dead
 *     generation.
 *  2. Records reach the log in buffer order, appended at tail; tail never
 *     passes log_size: a write that would is split at a record boundary,
 *     the log is truncated (applied and reset), and writing resumes at 0.
 *  3. A flush-mode commit returns only after fdatasync(log) covered every
 *     record up to and including its own (invariant of RVM's flush mode).
 *  4. Status blocks alternate slots; one is written and synced before
 *     anything that depends on it (a new segment name, a new generation).
 *  5. rvm__scan() accepts records in order while magic, generation,
 *     sequence, length and checksum hold: the first failure is the end of
 *     the log (a torn tail), never an error.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rvm_int.h"

static uint64_t
status_csum(const struct rvm_log_status *s)
{
	return rio_checksum(s, offsetof(struct rvm_log_status, checksum), 0);
}

rvm_return_t
rvm__status_write(void)
{
	struct rvm_log_status *s = &rvm__g.status;
	s->status_seq++;
	s->checksum = status_csum(s);
	uint64_t off = (s->status_seq & 1) * RVM_STATUS_SIZE;
	int rc = rvm__write_full(rvm__g.log_fd, s, sizeof(*s), off);
	/* The status block must be durable before anything relies on it: a
	 * record naming a new segment, or the first record of a new
	 * generation (after which the old generation's records are dead). */
	if (rc == 0)
		rc = rvm__sync(rvm__g.log_fd);
	if (rc)
		return rvm__fail("writing status block of log %s: %s",
			rvm__g.log_path, strerror(-rc));
	return RVM_SUCCESS;
}

static bool
status_valid(const struct rvm_log_status *s)
{
	return s->magic == RVM_LOG_MAGIC && s->checksum == status_csum(s);
}

rvm_return_t
rvm__status_read(int fd, struct rvm_log_status *out)
{
	struct rvm_log_status slot[2];
	int rc = rvm__read_full(fd, slot, sizeof(slot), 0);
	if (rc)
		return rvm__err(RVM_ELOG, "reading status blocks: %s",
			strerror(-rc));
	int best = -1;
	for (int i = 0; i < 2; i++)
		if (status_valid(&slot[i]) &&
		    (best < 0 || slot[i].status_seq > slot[best].status_seq))
			best = i;
	if (best < 0)
		return rvm__err(RVM_ELOG,
			"no valid status block (not an RVM log, or corrupt)");
	const struct rvm_log_status *s = &slot[best];
	if (s->major != RVM_LOG_MAJOR || s->incompat != 0)
		return rvm__err(RVM_ELOG_VERSION_SKEW,
			"log format %u.%u (incompat 0x%x); this library "
			"reads %u.x", s->major, s->minor, s->incompat,
			RVM_LOG_MAJOR);
	if (s->log_size < RVM_LOG_MIN_SIZE || s->nsegs > RVM_MAX_SEGMENTS ||
	    s->log_size % 8)
		return rvm__err(RVM_ELOG, "status block has invalid fields "
			"(log_size %llu, nsegs %u)",
			(unsigned long long)s->log_size, s->nsegs);
	for (uint32_t i = 0; i < s->nsegs; i++)
		if (memchr(s->segs[i].path, 0, RVM_SEG_PATH_MAX) == NULL ||
		    s->segs[i].path[0] == 0)
			return rvm__err(RVM_ELOG,
				"status block segment %u has a bad name", i);
	*out = *s;
	return RVM_SUCCESS;
}

static uint64_t
rec_csum(const struct rvm_rec_hdr *h)
{
	uint64_t c = rio_checksum(h, offsetof(struct rvm_rec_hdr, checksum), 0);
	return rio_checksum(h + 1, h->length - sizeof(*h), c);
}

int
rvm__scan(const uint8_t *area, uint64_t len, const struct rvm_log_status *st,
	uint64_t first_seq, rvm__range_fn fn, void *arg, uint64_t *nrec,
	uint64_t *end)
{
	uint64_t off = 0, n = 0;
	while (len - off >= sizeof(struct rvm_rec_hdr)) {
		const struct rvm_rec_hdr *h = (const void *)(area + off);
		if (h->magic != RVM_REC_MAGIC || h->generation != st->generation ||
		    h->seq != first_seq + n || h->length % 8 ||
		    h->length < sizeof(*h) || h->length > len - off ||
		    h->checksum != rec_csum(h))
			break;
		/* The record is whole; its ranges must lie inside it. */
		const uint8_t *p = (const uint8_t *)(h + 1);
		const uint8_t *e = area + off + h->length;
		bool ok = true;
		for (uint32_t i = 0; i < h->nranges && ok; i++) {
			const struct rvm_range_hdr *r = (const void *)p;
			ok = (size_t)(e - p) >= sizeof(*r) &&
				r->seg < st->nsegs &&
				r->length <= (uint64_t)(e - p) - sizeof(*r);
			if (ok && fn) {
				int rc = fn(r, r + 1, arg);
				if (rc)
					return rc;
			}
			if (ok)
				p += sizeof(*r) + RVM_ALIGN8(r->length);
		}
		if (!ok)
			break; /* checksummed but malformed: treat as the end */
		off += h->length;
		n++;
	}
	*nrec = n;
	*end = off;
	return 0;
}

/* Stamp generation, sequence and checksum on buf[0, len) (whole records). */
static void
stamp(uint8_t *buf, size_t len)
{
	for (size_t off = 0; off < len;) {
		struct rvm_rec_hdr *h = (void *)(buf + off);
		h->generation = rvm__g.status.generation;
		h->seq = rvm__g.next_seq++;
		h->checksum = rec_csum(h);
		off += h->length;
	}
}

/* The longest prefix of whole records in buf that is at most room bytes. */
static size_t
fitting(const uint8_t *buf, size_t len, uint64_t room)
{
	size_t off = 0;
	while (off < len) {
		const struct rvm_rec_hdr *h = (const void *)(buf + off);
		if (off + h->length > room)
			break;
		off += h->length;
	}
	return off;
}

rvm_return_t
rvm__log_write(bool sync)
{
	struct rvm__state *g = &rvm__g;
	size_t done = 0;
	bool wrote = false;

	while (done < g->buf_len) {
		size_t n = fitting(g->buf + done, g->buf_len - done,
			g->status.log_size - g->tail);
		if (n == 0 && g->tail == 0)
			return rvm__fail("a record larger than log %s", g->log_path);
		if (n == 0) {
			/* Full: apply what the log holds and start over. */
			rvm_return_t rc = rvm__truncate_locked();
			if (rc)
				return rc;
			continue;
		}
		stamp(g->buf + done, n);
		int rc = rvm__write_full(g->log_fd, g->buf + done, n,
			RVM_LOG_DATA_OFF + g->tail);
		if (rc)
			return rvm__fail("appending %zu bytes to log %s: %s", n,
				g->log_path, strerror(-rc));
		g->tail += n;
		done += n;
		g->stats.n_flush++;
		g->stats.bytes_logged += n;
		wrote = true;
	}
	g->buf_len = 0;
#ifndef RVM_BROKEN_NO_SYNC
	/* Flush mode: the records just written (and any no_flush ones before
	 * them) must be durable before the commit returns to the caller. */
	if (sync && wrote) {
		int rc = rvm__sync(g->log_fd);
		if (rc)
			return rvm__fail("fdatasync of log %s: %s", g->log_path,
				strerror(-rc));
	}
#else
	(void)sync;
	(void)wrote;
#endif
	if (g->tail * 100 >= (uint64_t)g->truncate_pct * g->status.log_size)
		return rvm__truncate_locked();
	return RVM_SUCCESS;
}
