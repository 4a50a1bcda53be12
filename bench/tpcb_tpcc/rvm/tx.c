/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tx.c -- transactions: begin, set_range, abort, end
 *
 * Design (thesis Fig. 3.1):
 *  1. rvm_set_range records the range and, in restore mode, appends the
 *     current bytes to the transaction's in-memory undo log (copy 1).
 *  2. rvm_abort_transaction copies the undo log back, newest range first,
 *     so overlapping ranges end with their oldest before-image.
 *  3. rvm_end_transaction builds one redo record holding each range's new
 *     bytes (copy 2) in the no_flush buffer; flush mode writes the buffer
 *     and syncs the log before returning (log.c); truncation later copies
 *     the bytes to the data files (copy 3).
 *  4. While a transaction has a range in a region, that region cannot be
 *     unmapped (region->busy).
 *  5. A tid is open between a successful begin and a successful end or
 *     abort; tid->tid points to its struct rvm__tx, NULL otherwise.
 */
#include <stdlib.h>
#include <string.h>

#include "rvm_int.h"

static struct rvm__tx *
tx_of(rvm_tid_t *tid)
{
	if (tid == NULL || tid->struct_id != rvm_tid_id)
		return NULL;
	return tid->tid;
}

rvm_return_t
rvm_begin_transaction(rvm_tid_t *tid, rvm_mode_t mode)
{
	struct rvm__state *g = &rvm__g;
	if (tid == NULL || tid->struct_id != rvm_tid_id)
		return rvm__err(RVM_ETID, "tid not initialized (rvm_init_tid)");
	if (tid->tid != NULL)
		return rvm__err(RVM_ETID, "tid already names an open transaction");
	if (mode != restore && mode != no_restore)
		return rvm__err(RVM_EMODE, "begin mode %s", rvm_mode(mode));
	pthread_mutex_lock(&g->lock);
	rvm_return_t rc = rvm__usable();
	if (rc) {
		pthread_mutex_unlock(&g->lock);
		return rc;
	}
	struct rvm__tx *tx = g->free_tx;
	if (tx)
		g->free_tx = tx->next_free;
	else
		tx = calloc(1, sizeof(*tx));
	if (tx)
		g->n_uncommit++;
	pthread_mutex_unlock(&g->lock);
	if (tx == NULL)
		return rvm__err(RVM_ENO_MEMORY, "transaction descriptor");
	tx->mode = mode;
	tx->nranges = 0;
	tx->undo_len = 0;
	tx->redo_bytes = sizeof(struct rvm_rec_hdr);
	gettimeofday(&tid->uname, NULL);
	tid->tid = tx;
	return RVM_SUCCESS;
}

static bool
grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return true;
	size_t n = *cap ? *cap : 16;
	while (n < need)
		n *= 2;
	void *q = realloc(*p, n * elem);
	if (q == NULL)
		return false;
	*p = q;
	*cap = n;
	return true;
}

static struct rvm__region *
region_of(const char *addr, size_t len)
{
	for (struct rvm__region *r = rvm__g.regions; r; r = r->next)
		if (addr >= r->vmaddr && len <= r->length &&
		    (size_t)(addr - r->vmaddr) <= r->length - len)
			return r;
	return NULL;
}

rvm_return_t
rvm_set_range(rvm_tid_t *tid, void *dest, rvm_length_t length)
{
	struct rvm__state *g = &rvm__g;
	struct rvm__tx *tx = tx_of(tid);
	if (tx == NULL)
		return rvm__err(RVM_ETID, "no open transaction");
	if (length == 0)
		return RVM_SUCCESS;
	if (!grow((void **)&tx->ranges, &tx->range_cap, tx->nranges + 1,
		    sizeof(*tx->ranges)) ||
	    (tx->mode == restore &&
		    !grow((void **)&tx->undo, &tx->undo_cap,
			    tx->undo_len + length, 1)))
		return rvm__err(RVM_ENO_MEMORY, "undo log for %lu bytes",
			length);
	pthread_mutex_lock(&g->lock);
	struct rvm__region *rg = region_of(dest, length);
	if (rg)
		rg->busy++;
	g->stats.n_ranges++;
	if (tx->mode == restore)
		g->stats.bytes_undo += length;
	pthread_mutex_unlock(&g->lock);
	if (rg == NULL)
		return rvm__err(RVM_ENOT_MAPPED,
			"[%p, +%lu) is not inside one mapped region", dest,
			length);
	struct rvm__range *r = &tx->ranges[tx->nranges++];
	r->addr = dest;
	r->len = length;
	r->rg = rg;
	r->undo_off = tx->undo_len;
	if (tx->mode == restore) {
		/* Copy 1: the before-image, to the in-memory undo log. */
		memcpy(tx->undo + tx->undo_len, dest, length);
		tx->undo_len += length;
	}
	tx->redo_bytes += sizeof(struct rvm_range_hdr) + RVM_ALIGN8(length);
	return RVM_SUCCESS;
}

rvm_return_t
rvm_modify_bytes(rvm_tid_t *tid, void *dest, const void *src,
	rvm_length_t length)
{
	if (src == NULL && length)
		return rvm__err(RVM_ESRC, "NULL source");
	rvm_return_t rc = rvm_set_range(tid, dest, length);
	if (rc == RVM_SUCCESS)
		memmove(dest, src, length);
	return rc;
}

/* Close the transaction: release its regions and recycle it. */
static void
finish(rvm_tid_t *tid, struct rvm__tx *tx)
{
	struct rvm__state *g = &rvm__g;
	/* lock held */
	for (size_t i = 0; i < tx->nranges; i++)
		tx->ranges[i].rg->busy--;
	tx->next_free = g->free_tx;
	g->free_tx = tx;
	g->n_uncommit--;
	tid->tid = NULL;
}

rvm_return_t
rvm_abort_transaction(rvm_tid_t *tid)
{
	struct rvm__state *g = &rvm__g;
	struct rvm__tx *tx = tx_of(tid);
	if (tx == NULL)
		return rvm__err(RVM_ETID, "no open transaction");
	if (tx->mode != restore)
		return rvm__err(RVM_EMODE,
			"a no_restore transaction cannot be aborted");
	for (size_t i = tx->nranges; i-- > 0;) {
		struct rvm__range *r = &tx->ranges[i];
		memcpy(r->addr, tx->undo + r->undo_off, r->len);
	}
	pthread_mutex_lock(&g->lock);
	g->stats.n_abort++;
	finish(tid, tx);
	pthread_mutex_unlock(&g->lock);
	return RVM_SUCCESS;
}

/* Copy 2: the record with every range's new bytes, into the buffer. */
static void
build_record(struct rvm__tx *tx, uint8_t *out)
{
	struct rvm_rec_hdr *h = (void *)out;
	memset(h, 0, sizeof(*h));
	h->magic = RVM_REC_MAGIC;
	h->nranges = (uint32_t)tx->nranges;
	h->length = tx->redo_bytes;
	uint8_t *p = (uint8_t *)(h + 1);
	for (size_t i = 0; i < tx->nranges; i++) {
		const struct rvm__range *r = &tx->ranges[i];
		struct rvm_range_hdr *rh = (void *)p;
		rh->seg = r->rg->seg;
		rh->reserved = 0;
		rh->offset = r->rg->offset + (uint64_t)(r->addr - r->rg->vmaddr);
		rh->length = r->len;
		memcpy(rh + 1, r->addr, r->len);
		size_t pad = RVM_ALIGN8(r->len) - r->len;
		memset((uint8_t *)(rh + 1) + r->len, 0, pad);
		p += sizeof(*rh) + r->len + pad;
	}
}

rvm_return_t
rvm_end_transaction(rvm_tid_t *tid, rvm_mode_t mode)
{
	struct rvm__state *g = &rvm__g;
	struct rvm__tx *tx = tx_of(tid);
	if (tx == NULL)
		return rvm__err(RVM_ETID, "no open transaction");
	if (mode != flush && mode != no_flush)
		return rvm__err(RVM_EMODE, "end mode %s", rvm_mode(mode));
	pthread_mutex_lock(&g->lock);
	rvm_return_t rc = rvm__usable();
	if (rc)
		goto out;
	if (tx->redo_bytes > g->status.log_size) {
		rc = rvm__err(RVM_ETOO_BIG, "transaction needs %zu log bytes, "
			"log %s holds %llu", tx->redo_bytes, g->log_path,
			(unsigned long long)g->status.log_size);
		goto out; /* still open: the caller may abort it */
	}
	if (tx->nranges == 0) {
		finish(tid, tx);
		goto out;
	}
	if (g->buf_len + tx->redo_bytes > g->buf_cap) {
		/* The buffer is full: write what it holds (no sync), as RVM
		 * does when its log buffer fills. */
		if (g->buf_len && (rc = rvm__log_write(false)))
			goto out;
		if (tx->redo_bytes > g->buf_cap) {
			uint8_t *nb = realloc(g->buf, tx->redo_bytes);
			if (nb == NULL) {
				rc = rvm__err(RVM_ENO_MEMORY, "log buffer");
				goto out;
			}
			g->buf = nb;
			g->buf_cap = tx->redo_bytes;
		}
	}
	build_record(tx, g->buf + g->buf_len);
	g->buf_len += tx->redo_bytes;
	if (mode == flush) {
		g->stats.n_flush_commit++;
		rc = rvm__log_write(true);
	} else {
		g->stats.n_no_flush_commit++;
	}
	/* Committed in memory even if the write failed: the failure is
	 * sticky, and what is durable is decided by the log. */
	finish(tid, tx);
out:
	pthread_mutex_unlock(&g->lock);
	return rc;
}

/* Write and sync the buffer; then, if asked, truncate the log. */
static rvm_return_t
flush_log(bool truncate)
{
	pthread_mutex_lock(&rvm__g.lock);
	rvm_return_t rc = rvm__usable();
	if (rc == RVM_SUCCESS)
		rc = rvm__log_write(true);
	if (rc == RVM_SUCCESS && truncate)
		rc = rvm__truncate_locked();
	pthread_mutex_unlock(&rvm__g.lock);
	return rc;
}

rvm_return_t
rvm_flush(void)
{
	return flush_log(false);
}

rvm_return_t
rvm_truncate(void)
{
	return flush_log(true);
}
