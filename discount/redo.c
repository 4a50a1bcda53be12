/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redo.c -- the redo log: one segment per checkpoint, applied to the
 *           shadow image lazily
 *
 * A checkpoint appends one segment (header, entries, pages; one pwritev)
 * at the end of the log; its commit record vouches for it.  The shadow is
 * not written at every checkpoint: segments pile up until the log passes
 * DC_REDO_MAX bytes, a segment drops ranges (punches), or too many are
 * pending; then the log is FLUSHED: the pending older segments are applied
 * from the file newest first, each page once (a page written by a newer
 * segment is skipped in older ones), then the newest segment straight from
 * memory, in order; `applied` is persisted and the log starts again at
 * offset 0.  A page the program writes at every checkpoint (its stack,
 * libdc's state) is written to the shadow once per flush instead of once
 * per checkpoint.
 *
 * State machine of the log: EMPTY (applied == committed, next segment at
 * 0) --commit--> PENDING(k segments) --commit--> PENDING(k + 1) ...
 * --flush, or recovery--> EMPTY.
 *
 * Invariants:
 *  1. The log holds exactly the segments applied+1 .. committed, back to
 *     back from offset 0, each durable before its commit record.  A
 *     segment is only ever written at the end of the log; offset 0 is
 *     reused only when the log is EMPTY (applied is durable first).
 *  2. Only the newest segment of the log may hold punches (a segment with
 *     punches is flushed by its own commit), so the older ones are pure
 *     page copies and can be applied in any order that keeps the newest
 *     copy of each page.
 *  3. Applying is idempotent: a crash during a flush or a recovery leaves
 *     `applied` behind, and the next recovery applies the same segments
 *     again with the same result.
 *  4. Recovery verifies every pending segment (magic, generation sequence,
 *     checksum; the newest also against its commit record) before the
 *     shadow is changed.
 *  5. A 2PC prepare (dc__vol.redo_hold, twopc.c P2) writes nothing but its
 *     segment past the end of the log and its commit record: no flush, so
 *     the shadow, `applied` and the log's older segments stay those of the
 *     generation before, to which an abort returns by clearing that
 *     record.  A flush the prepare would have made (the log past
 *     redo_max, punches, full tables) is made from the file by
 *     dc__redo_settle once the round committed, before any other commit:
 *     invariant 2 holds at every commit.
 */
#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "dc_int.h"
#include "rio_int.h"

#define CHUNK (64u * 1024u)

static int
pread_all(int fd, void *buf, uint64_t len, uint64_t off)
{
	char *p = buf;
	while (len > 0) {
		ssize_t k = pread(fd, p, len, (off_t)off);
		if (k <= 0) {
			if (k < 0 && errno == EINTR)
				continue;
			return dc__err(k < 0 ? -errno : DC_ECORRUPT,
				"redo: short read at %lu", (unsigned long)off);
		}
		p += k;
		len -= (uint64_t)k;
		off += (uint64_t)k;
	}
	return 0;
}

static uint64_t
csum_range(const char *p, uint64_t len, uint64_t c)
{
	for (uint64_t o = 0; o < len; o += CHUNK) {
		uint64_t k = len - o < CHUNK ? len - o : CHUNK;
		c = rio_checksum(p + o, k, c);
	}
	return c;
}

/* Checksum of a segment: header up to csum, entries, data. */
static uint64_t
hdr_csum(const struct dc_redo_hdr *h)
{
	return rio_checksum(h, offsetof(struct dc_redo_hdr, csum),
		DC_REDO_SEED);
}

/* ---- appending (the commit) ---- */

/* Where entry e's bytes are: the memory it names, or with data (the
 * pages staged at the stop, ckpt.c invariant 8) the next *at bytes of
 * data, back to back in entry order. */
static const char *
ent_src(const struct dc_redo_ent *e, const char *data, uint64_t *at)
{
	if (data == NULL)
		return (const char *)(uintptr_t)e->addr;
	const char *p = data + *at;
	*at += e->len;
	return p;
}

/*
 * Write the segment of generation gen from dc__vol.ents[0..n) and their
 * bytes (the memory they name, or data: ent_src), at the end of the log,
 * durably.  Out: its offset, length and checksum, for the commit record.
 */
int
dc__redo_append(uint64_t gen, unsigned n, const char *data,
	struct dc_redo_seg *out)
{
	struct dc_redo_ent *e = dc__vol.ents;
	struct iovec *iov = dc__vol.iov;
	struct dc_redo_hdr h = { .magic = DC_REDO_MAGIC, .gen = gen, .n = n };
	uint64_t len = sizeof(h) + (uint64_t)n * sizeof(*e);
	for (unsigned i = 0; i < n; i++) {
		if (e[i].op == DC_REDO_PAGES)
			len += e[i].len;
		else
			h.flags |= DC_REDO_F_PUNCH;
	}
	h.len = len;
	uint64_t c = hdr_csum(&h);
	c = csum_range((const char *)e, (uint64_t)n * sizeof(*e), c);
	uint64_t at = 0;
	for (unsigned i = 0; i < n; i++)
		if (e[i].op == DC_REDO_PAGES)
			c = csum_range(ent_src(&e[i], data, &at), e[i].len, c);
	h.csum = c;

	uint64_t start = dc__vol.redo_end, off = start;
	int ni = 0;
	iov[ni++] = (struct iovec){ &h, sizeof(h) };
	iov[ni++] = (struct iovec){ e, (size_t)n * sizeof(*e) };
	at = 0;
	for (unsigned i = 0; i <= n; i++) {
		bool last = i == n, cut = false;
		if (!last && e[i].op == DC_REDO_PAGES)
			iov[ni++] = (struct iovec){
				(void *)(uintptr_t)ent_src(&e[i], data, &at),
				e[i].len };
#ifdef DC_TEST_CRASHPOINTS
		/* test builds: the first half of the segment goes out alone,
		 * so crash point "redo-part" finds it half written */
		cut = i == n / 2 && ni > 0;
#endif
		if (ni == DC__IOV || (last && ni > 0) || cut) {
			uint64_t want = 0;
			for (int k = 0; k < ni; k++)
				want += iov[k].iov_len;
			/* raw: no cancellation wrapper writes the TLS block
			 * under the copy (thread.c invariant 6) */
			long got = dc__sys6(SYS_pwritev, dc__vol.redo_fd,
				(long)iov, ni, (long)off, 0, 0);
			if (got != (long)want) {
				/* rare short write: finish vector by vector */
				uint64_t o = off;
				for (int k = 0; k < ni; k++) {
					int rc = dc__pwrite_mem(dc__vol.redo_fd,
						iov[k].iov_base,
						iov[k].iov_len, (off_t)o);
					if (rc)
						return dc__err(rc, "redo log: "
							"write at %lu: %s",
							(unsigned long)o,
							strerror(-rc));
					o += iov[k].iov_len;
				}
			}
			off += want;
			ni = 0;
			if (cut)
				dc__crashpoint("redo-part", gen);
		}
	}
	out->off = start;
	out->len = len;
	out->csum = c;
	out->punch = (h.flags & DC_REDO_F_PUNCH) != 0;
	/* The segment must be durable before the commit record names it. */
	return dc__sync_fd(dc__vol.redo_fd);
}

/* ---- applying ---- */

/* Pages already applied by a newer segment in this flush (invariant 2):
 * an open-addressing set of page addresses. */
static void
seen_clear(void)
{
	memset(dc__vol.seen, 0, sizeof(dc__vol.seen));
}

/* Add page a; false when it was there already. */
static bool
seen_add(uint64_t a)
{
	uint64_t key = a | 1; /* 0 marks a free slot */
	size_t mask = DC__SEEN - 1;
	size_t i = (size_t)((a >> 12) * 0x9e3779b97f4a7c15ull >> 40) & mask;
	for (size_t probes = 0; probes <= mask; probes++, i = (i + 1) & mask) {
		if (dc__vol.seen[i] == key)
			return false;
		if (dc__vol.seen[i] == 0) {
			dc__vol.seen[i] = key;
			return true;
		}
	}
	return true; /* full (cannot happen: the log is bounded) */
}

/* Apply the pages of [a, a + len) stored at redo offset data, except
 * those a newer segment applied. */
static int
apply_pages_from_file(uint64_t a, uint64_t len, uint64_t data)
{
	char *buf = dc__vol.rbuf; /* its own: the writer flushes while the
	                           * program's threads use dc__vol.buf */
	uint64_t run = 0, run_a = 0, run_d = 0;
	for (uint64_t o = 0; o <= len; o += DC__PAGE) {
		bool take = o < len && seen_add(a + o);
		if (take && run == 0) {
			run_a = a + o;
			run_d = data + o;
		}
		if (take) /* the last piece may be shorter (libdc's page) */
			run += len - o < DC__PAGE ? len - o : DC__PAGE;
		if ((take && run < sizeof(dc__vol.rbuf)) || run == 0)
			continue;
		int rc = pread_all(dc__vol.redo_fd, buf, run, run_d);
		if (!rc)
			rc = dc__shadow_write(buf, run, run_a);
		if (rc)
			return rc;
		run = 0;
	}
	return 0;
}

/* Apply the segment at off (header h) from the file; with dedup, pages
 * already seen are skipped and the segment's are added.  verify: compute
 * the checksum instead (header, all entries, then each entry's data in
 * the 64 KiB pieces dc__redo_append checksummed). */
static int
segment_pass(uint64_t off, const struct dc_redo_hdr *h, bool verify,
	bool dedup, uint64_t *csum)
{
	struct dc_redo_ent *e = (struct dc_redo_ent *)(void *)dc__vol.io;
	uint64_t per = sizeof(dc__vol.io) / sizeof(*e);
	uint64_t eoff = off + sizeof(*h);
	uint64_t data = eoff + h->n * sizeof(*e);
	uint64_t c = hdr_csum(h);
	int rc = 0;
	for (uint64_t i0 = 0; verify && i0 < h->n && !rc; i0 += per) {
		uint64_t k = h->n - i0 < per ? h->n - i0 : per;
		rc = pread_all(dc__vol.redo_fd, e, k * sizeof(*e),
			eoff + i0 * sizeof(*e));
		c = csum_range((const char *)e, k * sizeof(*e), c);
	}
	for (uint64_t i0 = 0; i0 < h->n && !rc; i0 += per) {
		uint64_t k = h->n - i0 < per ? h->n - i0 : per;
		rc = pread_all(dc__vol.redo_fd, e, k * sizeof(*e),
			eoff + i0 * sizeof(*e));
		for (uint64_t i = 0; i < k && !rc; i++) {
			if (e[i].op == DC_REDO_PUNCH) {
				if (!verify)
					rc = dc__shadow_punch(e[i].addr,
						e[i].len);
				continue;
			}
			if (data + e[i].len > off + h->len)
				return dc__err(DC_ECORRUPT, "redo: segment of "
					"generation %lu is shorter than its "
					"entries", (unsigned long)h->gen);
			if (dedup && !verify) {
				rc = apply_pages_from_file(e[i].addr, e[i].len,
					data);
				data += e[i].len;
				continue;
			}
			for (uint64_t o = 0; o < e[i].len && !rc; o += CHUNK) {
				uint64_t m = e[i].len - o < CHUNK ?
					e[i].len - o : CHUNK;
				rc = pread_all(dc__vol.redo_fd, dc__vol.buf, m,
					data + o);
				if (rc)
					break;
				if (verify)
					c = rio_checksum(dc__vol.buf, m, c);
				else
					rc = dc__shadow_write(dc__vol.buf, m,
						e[i].addr + o);
			}
			data += e[i].len;
		}
	}
	if (csum)
		*csum = c;
	return rc;
}

/* Walk the log: the offsets of the segments applied+1 .. last (invariant
 * 1), into dc__vol.segs; fails on a gap or a bad header. */
static int
collect(uint64_t applied, uint64_t last, unsigned *nseg)
{
	uint64_t off = 0;
	unsigned k = 0;
	for (uint64_t g = applied + 1; g <= last; g++) {
		struct dc_redo_hdr h;
		int rc = pread_all(dc__vol.redo_fd, &h, sizeof(h), off);
		if (rc)
			return rc;
		if (h.magic != DC_REDO_MAGIC || h.gen != g ||
		    h.len < sizeof(h) + h.n * sizeof(struct dc_redo_ent) ||
		    k >= DC__MAX_SEGS)
			return dc__err(DC_ECORRUPT, "redo: segment of "
				"generation %lu missing or damaged at offset "
				"%lu", (unsigned long)g, (unsigned long)off);
		dc__vol.segs[k++].off = off;
		off += h.len;
	}
	*nseg = k;
	return 0;
}

/* Recovery: apply segments [0, nseg) of dc__vol.segs from the file, the
 * older ones newest first with dedup, then the newest in order. */
static int
apply_segments(unsigned nseg)
{
	seen_clear();
	for (unsigned s = nseg - 1; s-- > 0;) {
		struct dc_redo_hdr h;
		int rc = pread_all(dc__vol.redo_fd, &h, sizeof(h),
			dc__vol.segs[s].off);
		if (rc)
			return rc;
		if (h.flags & DC_REDO_F_PUNCH)
			return dc__err(DC_ECORRUPT, "redo: an older segment "
				"(generation %lu) drops ranges",
				(unsigned long)h.gen);
		if ((rc = segment_pass(dc__vol.segs[s].off, &h, false, true,
			     NULL)))
			return rc;
	}
	struct dc_redo_hdr h;
	int rc = pread_all(dc__vol.redo_fd, &h, sizeof(h),
		dc__vol.segs[nseg - 1].off);
	return rc ? rc : segment_pass(dc__vol.segs[nseg - 1].off, &h, false,
		false, NULL);
}

static int
set_applied(uint64_t gen)
{
	int rc = dc__sync_fd(dc__vol.shadow_fd);
	if (rc)
		return rc;
	struct dc_words *w = (struct dc_words *)(void *)(dc__vol.ctlb +
		DC_CTL_WORDS_OFF);
	/* Invariant 1: applied only moves forward, and never past the
	 * committed generation (ckpt.c invariant 1). */
	DC_ASSERT(w->applied <= gen && gen <= dc__vol.committed, "redo 1");
	w->applied = gen;
	/* The shadow holds gen (synced above); applied must be durable
	 * before the log restarts at offset 0 (invariant 1). */
	rio_persist(dc__vol.ctl, &w->applied, sizeof(uint64_t));
	dc__vol.redo_end = 0;
	dc__vol.redo_pending = 0;
	dc__vol.pend_n = 0;
	return 0;
}

/* Remember a pending segment: where it is and a copy of its entries. */
static void
keep_pending(const struct dc_redo_seg *seg, unsigned n)
{
	unsigned k = dc__vol.redo_pending;
	dc__vol.segs[k].off = seg->off;
	dc__vol.segs[k].first = dc__vol.pend_n;
	dc__vol.segs[k].n = n;
	memcpy(&dc__vol.pend_ents[dc__vol.pend_n], dc__vol.ents,
		(size_t)n * sizeof(struct dc_redo_ent));
	dc__vol.pend_n += n;
	dc__vol.redo_pending = k + 1;
}

/* Flush: the pending older segments from the file, newest first, each
 * page once and none the newest segment (in dc__vol.ents, n entries)
 * writes; then the newest from memory or data (ent_src), in order. */
static int
flush(uint64_t gen, unsigned n, const char *data)
{
	const struct dc_redo_ent *e = dc__vol.ents;
	int rc = 0;
	seen_clear();
	for (unsigned i = 0; i < n; i++)
		for (uint64_t o = 0; e[i].op == DC_REDO_PAGES && o < e[i].len;
		     o += DC__PAGE)
			seen_add(e[i].addr + o);
	for (unsigned s = dc__vol.redo_pending; s-- > 0 && !rc;) {
		const struct dc_redo_ent *pe =
			&dc__vol.pend_ents[dc__vol.segs[s].first];
		uint32_t pn = dc__vol.segs[s].n;
		uint64_t foff = dc__vol.segs[s].off +
			sizeof(struct dc_redo_hdr) + pn * sizeof(*pe);
		for (uint32_t i = 0; i < pn && !rc; i++) {
			rc = apply_pages_from_file(pe[i].addr, pe[i].len, foff);
			foff += pe[i].len;
		}
	}
	uint64_t at = 0;
	for (unsigned i = 0; i < n && !rc; i++) {
		if (i == n / 2)
			dc__crashpoint("apply", gen);
		rc = e[i].op == DC_REDO_PUNCH ?
			dc__shadow_punch(e[i].addr, e[i].len) :
			dc__shadow_write(ent_src(&e[i], data, &at), e[i].len,
				e[i].addr);
	}
	if (rc)
		return rc;
	dc__st.stats.redo_flushes++;
	return set_applied(gen);
}

/*
 * After the commit of generation gen (segment seg, entries in dc__vol.ents
 * and their bytes unchanged since the scan: memory, or the staged data):
 * flush the log when it must be (header comment), else leave the segment
 * pending.  The pending older segments never hold punches (invariant 2),
 * so their entries are page copies.
 */
int
dc__redo_committed(uint64_t gen, unsigned n, const char *data,
	const struct dc_redo_seg *seg)
{
	dc__vol.redo_end = seg->off + seg->len;
	bool fits = dc__vol.redo_pending + 1 < DC__MAX_SEGS &&
		dc__vol.pend_n + n <= DC__PEND_ENTS;
	if (!seg->punch && dc__vol.redo_end <= dc__vol.redo_max && fits) {
		keep_pending(seg, n);
		return 0;
	}
	if (dc__vol.redo_hold) {
		/* invariant 5: a prepare leaves the shadow alone; the flush
		 * waits for the round's decision */
		if (fits)
			keep_pending(seg, n);
		dc__vol.redo_due = true;
		return 0;
	}
	return flush(gen, n, data);
}

/*
 * After a 2PC round committed (twopc.c P4), before any other commit: the
 * flush its prepare held back (invariant 5), from the file as recovery
 * makes it -- the program's memory has moved on since the scan, and the
 * prepared segment may hold punches -- then `applied` and the log
 * restarted.  A crash in it leaves `applied` behind: recovery applies the
 * same segments again (invariant 3).
 */
int
dc__redo_settle(void)
{
	if (!dc__vol.redo_due)
		return 0;
	dc__vol.redo_due = false;
	const struct dc_words *w = (const void *)(dc__vol.ctlb +
		DC_CTL_WORDS_OFF);
	unsigned nseg = 0;
	int rc = collect(w->applied, dc__vol.committed, &nseg);
	if (!rc && nseg > 0)
		rc = apply_segments(nseg);
	if (rc)
		return rc;
	dc__st.stats.redo_flushes++;
	return set_applied(dc__vol.committed);
}

/* UNDO, before a region is moved into the segment (seg.c invariant 4):
 * the pending segments applied, the log empty. */
int
dc__redo_flush_pending(void)
{
	if (dc__vol.redo_pending == 0)
		return 0;
	return flush(dc__vol.committed, 0, NULL);
}

/* Recovery: verify and apply what the last process left pending
 * (invariants 3 and 4). */
int
dc__redo_recover(const struct dc_commit *cm)
{
	const struct dc_words *w = (const void *)(dc__vol.ctlb +
		DC_CTL_WORDS_OFF);
	dc__vol.redo_end = 0;
	dc__vol.redo_pending = 0;
	dc__vol.pend_n = 0;
	if (w->applied >= cm->gen)
		return 0;
	unsigned nseg = 0;
	int rc = collect(w->applied, cm->gen, &nseg);
	if (rc)
		return rc;
	for (unsigned s = 0; s < nseg; s++) {
		struct dc_redo_hdr h;
		uint64_t c;
		if ((rc = pread_all(dc__vol.redo_fd, &h, sizeof(h),
			     dc__vol.segs[s].off)) ||
		    (rc = segment_pass(dc__vol.segs[s].off, &h, true, false, &c)))
			return rc;
		bool newest = s == nseg - 1;
		if (c != h.csum || (newest && (dc__vol.segs[s].off != cm->redo_off ||
						      h.len != cm->redo_len ||
						      c != cm->redo_csum)))
			return dc__err(DC_ECORRUPT, "redo segment of "
				"generation %lu does not match its checksum or "
				"commit record", (unsigned long)h.gen);
	}
	if (nseg == 0)
		return dc__err(DC_ECORRUPT, "redo: no segment");
	if ((rc = apply_segments(nseg)))
		return rc;
	return set_applied(cm->gen);
}
