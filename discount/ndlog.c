/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ndlog.c -- the input log of the -LOG protocols
 *
 * Under CAND-LOG and CBNDVS-LOG the results of read, readv, recvfrom, select and
 * poll on non-deterministic sources are appended to `ndlog` and made
 * durable before the call returns to the program, so those calls are
 * deterministic: after a crash the re-executed calls are answered from the
 * log, in order, until it is exhausted; then the calls go to the kernel
 * again and are logged after the replayed entries.
 *
 * Invariants:
 *  1. Entries carry the generation of their interval (committed + 1) and a
 *     sequence number; a commit starts a new, empty log.
 *  2. During replay the program issues the same calls in the same order
 *     (everything between them is deterministic); a call that does not
 *     match the next entry is a divergence (DC_EREPLAY, fatal).
 */
#include <string.h>

#include "dc_int.h"

int
dc__nd_append(int type, int64_t a, int64_t b, int64_t c, const void *d1,
	uint64_t l1, const void *d2, uint64_t l2)
{
	struct dc_log_ent h = { .type = (uint16_t)type,
		.gen = dc__vol.committed + 1, .a = a, .b = b, .c = c };
	int rc = dc__log_append(dc__vol.ndlog_fd, NULL, 0, &dc__vol.nd_off,
		&dc__vol.nd_seq, &h, d1, l1, d2, l2);
	if (rc)
		return dc__err(rc, "input log append: %s", strerror(-rc));
	dc__st.stats.logged_events++;
	return 0;
}

/* Find the valid entries of interval gen: their end, count, and the
 * standard-input bytes they hold. */
int
dc__nd_scan(uint64_t gen, uint64_t *end, uint64_t *count,
	uint64_t *stdin_bytes)
{
	uint64_t off = 0, seq = 0, in = 0;
	struct dc_log_ent e;
	while (dc__log_read(dc__vol.ndlog_fd, off, gen, seq, NULL, &e, NULL,
		       0) == 0) {
		if (e.type == DC_ND_READ && e.a == 0 && e.b > 0)
			in += (uint64_t)e.b;
		off += dc__log_span(e.len);
		seq++;
	}
	*end = off;
	*count = seq;
	if (stdin_bytes)
		*stdin_bytes = in;
	return 0;
}

/* The next entry to replay (payload into buf, at most max bytes). */
int
dc__nd_next(struct dc_log_ent *e, void *payload, uint64_t max)
{
	int rc = dc__log_read(dc__vol.ndlog_fd, dc__vol.replay_off,
		dc__vol.committed + 1, dc__vol.replay_seq, NULL, e, payload,
		max);
	if (rc)
		return dc__err(DC_EREPLAY, "input log entry %lu unreadable",
			(unsigned long)dc__vol.replay_seq);
	if (e->len > max)
		return dc__err(DC_EREPLAY, "input log entry %lu is larger "
			"(%lu) than the call's buffer (%lu)",
			(unsigned long)dc__vol.replay_seq,
			(unsigned long)e->len, (unsigned long)max);
	dc__vol.replay_off += dc__log_span(e->len);
	dc__vol.replay_seq++;
	if (dc__vol.replay_off >= dc__vol.replay_end)
		dc__vol.replaying = false;
	dc__st.stats.replayed_events++;
	return 0;
}
