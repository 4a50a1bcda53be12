/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * truncate.c -- applying the redo log to the data files, and recovery
 *
 * Design (epoch truncation, RVM section 5):
 *  0. Write-ahead: the log is synced before any of its records is applied
 *     to a data file.  Records written without a sync (no_flush commits
 *     written when the buffer filled, or just before a truncation) would
 *     otherwise reach a data file durably while the durable log lacks
 *     them; a power failure before the reset would then replay the older
 *     records over newer data and leave a mix of transactions (the crash
 *     test found exactly that).
 *  1. Truncation reads the records written so far back from the log,
 *     writes their ranges to the data files -- sorted by place, each run
 *     of overlapping or adjacent ranges merged into one write holding the
 *     newest bytes, as RVM's truncation does -- syncs every data file it wrote,
 *     and only then resets the log by a new status block with the next
 *     generation.  Order matters: a log reset before the data files are
 *     durable would forget committed transactions on a power failure
 *     (the RVM_BROKEN_TRUNC_ORDER build does exactly that, for the crash
 *     test to catch).
 *  2. Recovery is truncation of whatever the log holds at rvm_initialize,
 *     stopping at the first invalid record.  Applying a record twice
 *     writes the same bytes twice, so a crash during recovery is recovered
 *     by running it again.
 *  3. Records in the no_flush buffer are not in the log and are not
 *     touched; they are written after the reset.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

#include "rvm_int.h"

rvm_return_t
rvm__seg_open(uint32_t i, bool create)
{
	struct rvm__state *g = &rvm__g;
	if (g->segs[i].fd >= 0)
		return RVM_SUCCESS;
	const char *path = g->status.segs[i].path;
	int fd = rvm__io->open(path, O_RDWR | (create ? O_CREAT : 0), 0644);
	if (fd < 0)
		return rvm__err(RVM_EIO, "opening data file %s: %s", path,
			strerror(-fd));
	g->segs[i].fd = fd;
	return RVM_SUCCESS;
}

/* One range of a record, in log order (idx). */
struct change {
	uint32_t seg;
	uint64_t off, len;
	const uint8_t *data;
	size_t idx;
};

struct changes {
	struct change *v;
	size_t n, cap;
};

static int
collect(const struct rvm_range_hdr *r, const void *data, void *arg)
{
	struct changes *c = arg;
	if (c->n == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 1024;
		struct change *v = realloc(c->v, cap * sizeof(*v));
		if (v == NULL)
			return -1;
		c->v = v;
		c->cap = cap;
	}
	c->v[c->n] = (struct change){ r->seg, r->offset, r->length, data, c->n };
	c->n++;
	return 0;
}

static int
by_place(const void *x, const void *y)
{
	const struct change *a = x, *b = y;
	if (a->seg != b->seg)
		return a->seg < b->seg ? -1 : 1;
	if (a->off != b->off)
		return a->off < b->off ? -1 : 1;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

static int
by_idx(const void *x, const void *y)
{
	const struct change *a = x, *b = y;
	return a->idx < b->idx ? -1 : a->idx > b->idx;
}

/*
 * Write the changes to the data files as RVM's truncation does: sorted by
 * place, each run of overlapping or adjacent ranges merged into one write
 * whose bytes are the ranges applied in log order (the newest wins).
 */
static rvm_return_t
apply_changes(struct changes *c)
{
	struct rvm__state *g = &rvm__g;
	qsort(c->v, c->n, sizeof(*c->v), by_place);
	uint8_t *buf = NULL;
	size_t cap = 0;
	rvm_return_t rc = RVM_SUCCESS;
	for (size_t i = 0, j; i < c->n && rc == RVM_SUCCESS; i = j) {
		uint32_t seg = c->v[i].seg;
		uint64_t lo = c->v[i].off, hi = lo + c->v[i].len;
		for (j = i + 1; j < c->n && c->v[j].seg == seg &&
		     c->v[j].off <= hi; j++)
			if (c->v[j].off + c->v[j].len > hi)
				hi = c->v[j].off + c->v[j].len;
		if (hi - lo > cap) {
			uint8_t *nb = realloc(buf, hi - lo);
			if (nb == NULL) {
				rc = rvm__err(RVM_ENO_MEMORY, "truncation buffer");
				break;
			}
			buf = nb;
			cap = hi - lo;
		}
		qsort(c->v + i, j - i, sizeof(*c->v), by_idx);
		for (size_t k = i; k < j; k++)
			memcpy(buf + (c->v[k].off - lo), c->v[k].data, c->v[k].len);
		if ((rc = rvm__seg_open(seg, false)))
			break;
		int e = rvm__write_full(g->segs[seg].fd, buf, hi - lo, lo);
		if (e)
			rc = rvm__err(RVM_EIO, "writing %llu bytes at %llu of %s: %s",
				(unsigned long long)(hi - lo), (unsigned long long)lo,
				g->status.segs[seg].path, strerror(-e));
		g->segs[seg].dirty = true;
		g->stats.bytes_applied += hi - lo;
	}
	free(buf);
	return rc;
}

static rvm_return_t
sync_data(void)
{
	struct rvm__state *g = &rvm__g;
	for (uint32_t i = 0; i < g->status.nsegs; i++) {
		if (!g->segs[i].dirty)
			continue;
		int e = rvm__sync(g->segs[i].fd);
		if (e)
			return rvm__err(RVM_EIO, "fdatasync of %s: %s",
				g->status.segs[i].path, strerror(-e));
		g->segs[i].dirty = false;
	}
	return RVM_SUCCESS;
}

static rvm_return_t
reset_log(void)
{
	struct rvm__state *g = &rvm__g;
	g->status.generation++;
	g->status.first_seq = g->next_seq;
	g->tail = 0;
	return rvm__status_write();
}

/*
 * Apply log[0, len) (status st, first sequence first_seq): the records'
 * ranges go to the data files, which are then synced, and the log is
 * reset.  *nrec gets the records applied.  strict: every byte must be a
 * valid record (our own log during normal operation).
 */
static rvm_return_t
apply_and_reset(uint64_t len, bool strict, uint64_t *nrec)
{
	struct rvm__state *g = &rvm__g;
	uint8_t *area = malloc(len ? len : 1);
	if (area == NULL)
		return rvm__err(RVM_ENO_MEMORY, "%llu bytes to read the log",
			(unsigned long long)len);
	int e = rvm__read_full(g->log_fd, area, len, RVM_LOG_DATA_OFF);
	if (e) {
		free(area);
		return rvm__err(RVM_EIO, "reading log %s: %s", g->log_path,
			strerror(-e));
	}
	/* Write-ahead (invariant 0): every record about to be applied is
	 * durable in the log before the first data file write.  (The
	 * RVM_BROKEN_APPLY_UNSYNCED build skips it, for the crash test.) */
#ifndef RVM_BROKEN_APPLY_UNSYNCED
	e = rvm__sync(g->log_fd);
#endif
	if (e) {
		free(area);
		return rvm__err(RVM_EIO, "fdatasync of log %s: %s", g->log_path,
			strerror(-e));
	}
	struct changes c = { 0 };
	uint64_t end = 0;
	e = rvm__scan(area, len, &g->status, g->status.first_seq, collect, &c,
		nrec, &end);
	rvm_return_t rc;
	if (e)
		rc = rvm__err(RVM_ENO_MEMORY, "truncation index");
	else if (strict && end != len)
		rc = rvm__err(RVM_EINTERNAL, "log %s: record at %llu does not "
			"verify", g->log_path, (unsigned long long)end);
	else
		rc = apply_changes(&c);
	free(c.v);
	free(area);
	if (rc)
		return rc;
#ifndef RVM_BROKEN_TRUNC_ORDER
	/* First the data files must hold every applied range durably ... */
	rc = sync_data();
	if (rc)
		return rc;
	/* ... then the records may die: the new generation is durable when
	 * reset_log returns, and new records are written after it. */
	g->next_seq = g->status.first_seq + *nrec;
	return reset_log();
#else
	/* Broken on purpose: the log forgets its records before the data
	 * files are durable. */
	g->next_seq = g->status.first_seq + *nrec;
	rc = reset_log();
	if (rc)
		return rc;
	return sync_data();
#endif
}

rvm_return_t
rvm__truncate_locked(void)
{
	struct rvm__state *g = &rvm__g;
	if (g->tail == 0)
		return RVM_SUCCESS;
	uint64_t n;
	rvm_return_t rc = apply_and_reset(g->tail, true, &n);
	if (rc)
		return rvm__fail("truncating log %s: %s", g->log_path,
			rvm_errormsg());
	g->stats.n_truncation++;
	return RVM_SUCCESS;
}

rvm_return_t
rvm__recover(void)
{
	struct rvm__state *g = &rvm__g;
	uint64_t n = 0;
	rvm_return_t rc = apply_and_reset(g->status.log_size, false, &n);
	if (rc)
		return rc;
	g->stats.recovered_tx += n;
	return RVM_SUCCESS;
}
