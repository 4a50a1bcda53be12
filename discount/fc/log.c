/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.c -- the logical log: appends by the mutator, group commit by the
 *          logger thread, the scan that recovery and readers use
 *
 * Invariants:
 *   L1. Records are written once, in seq order, back to back after the
 *       header; the durable records form a prefix (one writer, the logger,
 *       appending at log_tail).
 *   L2. `durable` advances only after the sync that made those records
 *       durable returned (G2 before G3).
 *   L3. A record is valid iff its seq is the next expected one and its
 *       checksum, seeded with this log's id, matches: a torn tail ends the
 *       log; a record of an older log of the same path never passes.
 *
 * Group commit, for the records appended since the last one:
 *   G1  write them at log_tail         crash: some may be durable, any
 *                                      torn one ends the prefix (L3)
 *   G2  sync                           crash after: all durable
 *   G3  durable = their last seq + 1   waiters (ckr_log_commit, the
 *                                      writer's W3) proceed
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ckr_int.h"
#include "rio_int.h"

#define LBUF_SIZE (1u << 20)

static const struct rio__hdr_rule log_rule =
	CKR__HDR_RULE("ckr log", CKR_LOG_MAGIC);

static uint64_t
log_hdr_csum(const struct ckr_log_hdr *h)
{
	return rio_checksum(h, offsetof(struct ckr_log_hdr, csum),
		CKR_LOG_CSUM_SEED);
}

static int
log_hdr_check(const struct ckr_media *m, const struct ckr_log_hdr *h)
{
	struct rio__hdr_view v;
	char why[256];
	int rc;

	CKR__HDR_VIEW(v, h, log_hdr_csum(h) == h->csum);
	v.reserved[1].p = &h->pad;
	v.reserved[1].n = sizeof(h->pad);
	rc = rio__hdr_check(&log_rule, &v, RIO__HDR_WRITE, why, sizeof(why));
	if (rc != 0)
		return ckr__err(rc, "%s: %s", m->path, why);
	if (h->capacity + CKR_HDR_SIZE > m->size)
		return ckr__err(CKR_ESIZE, "%s: header says %llu record bytes, "
			"the file holds %llu", m->path,
			(unsigned long long)h->capacity,
			(unsigned long long)(m->size - CKR_HDR_SIZE));
	return 0;
}

/* Scan the valid prefix of records in [CKR_HDR_SIZE, size) of p (L3). */
static int
scan(const char *p, uint64_t size, uint64_t log_id, uint64_t *tail,
	int (*fn)(void *ctx, uint64_t seq, const void *rec, size_t len),
	void *ctx, uint64_t *count)
{
	uint64_t off = CKR_HDR_SIZE, seq = 0;
	int rc;

	for (;;) {
		struct ckr_rec_hdr rh;
		uint64_t rs, csum;

		if (off + sizeof(rh) + 8 > size)
			break;
		memcpy(&rh, p + off, sizeof(rh));
		if (rh.seq != seq || rh.len == 0 || rh.len > CKR_REC_MAX ||
		    rh.pad != 0)
			break;
		rs = ckr_rec_size(rh.len);
		if (off + rs > size)
			break;
		memcpy(&csum, p + off + rs - 8, 8);
		if (rio_checksum(p + off, rs - 8, log_id) != csum)
			break;
		if (fn != NULL && (rc = fn(ctx, seq, p + off + sizeof(rh),
					   rh.len)) != 0)
			return rc;
		off += rs;
		seq++;
	}
	*tail = off;
	*count = seq;
	return 0;
}

int
ckr__log_scan_media(struct ckr_media *m, uint64_t *tail,
	int (*fn)(void *ctx, uint64_t seq, const void *rec, size_t len),
	void *ctx, uint64_t *count, uint64_t *log_id)
{
	struct ckr_log_hdr h;
	const char *p;
	int rc;

	if (m->size < CKR_HDR_SIZE)
		return ckr__err(CKR_ESIZE, "%s: %llu bytes, smaller than a log "
			"header", m->path, (unsigned long long)m->size);
	rc = ckr__media_read(m, 0, &h, sizeof(h));
	if (rc != 0)
		return rc;
	rc = log_hdr_check(m, &h);
	if (rc != 0)
		return rc;
	*log_id = h.log_id;
	if (m->kind == CKR_STORAGE_POOL)
		return scan(m->base, CKR_HDR_SIZE + h.capacity, h.log_id, tail,
			fn, ctx, count);
	p = mmap(NULL, m->size, PROT_READ, MAP_SHARED, m->fd, 0);
	if (p == MAP_FAILED)
		return ckr__errno("mmap %s", m->path);
	rc = scan(p, CKR_HDR_SIZE + h.capacity, h.log_id, tail, fn, ctx, count);
	munmap((void *)p, m->size);
	return rc;
}

/* Open (or format) the log media and find its durable prefix. */
int
ckr__log_open(ckr *c, bool create)
{
	struct ckr_log_hdr h;
	uint64_t tail, count, cap = c->opts.log_capacity;
	bool created;
	int rc;

	rc = ckr__media_open(&c->logm, c->dir, "log", c->opts.storage,
		CKR_HDR_SIZE + cap, c->opts.rio_flags, create, &created);
	if (rc != 0)
		return rc;
	rc = ckr__media_read(&c->logm, 0, &h, sizeof(h));
	if (rc != 0)
		return rc;
	if (created || rio__all_zero(&h, sizeof(h))) {
		/* A log whose header was never made durable holds no
		 * durable record (records follow the header's sync), and no
		 * slot can name it: format it. */
		memset(&h, 0, sizeof(h));
		memcpy(h.magic, CKR_LOG_MAGIC, 8);
		h.major = CKR_MAJOR;
		h.minor = CKR_MINOR;
		if (getentropy(&h.log_id, sizeof(h.log_id)) != 0)
			return ckr__errno("getentropy");
		h.capacity = cap;
		h.csum = log_hdr_csum(&h);
		rc = ckr__media_write(&c->logm, 0, &h, sizeof(h));
		/* the header is durable before any record is appended */
		if (rc == 0)
			rc = ckr__media_sync(&c->logm);
		if (rc != 0)
			return rc;
	}
	rc = ckr__log_scan_media(&c->logm, &tail, NULL, NULL, &count,
		&c->log_id);
	if (rc != 0)
		return rc;
	c->log_tail = tail;
	c->log_reserved = tail - CKR_HDR_SIZE;
	c->opts.log_capacity = h.capacity;
	c->appended = c->durable = count;
	return 0;
}

struct replay_ctx {
	ckr *c;
	uint64_t from;
};

static int
replay_one(void *ctx, uint64_t seq, const void *rec, size_t len)
{
	struct replay_ctx *r = ctx;
	int rc;

	if (seq < r->from)
		return 0;
	rc = r->c->opts.replay(r->c->opts.replay_ctx, r->c, seq, rec, len);
	if (rc != 0)
		return ckr__err(CKR_EREPLAY, "replay of action %llu returned %d",
			(unsigned long long)seq, rc);
	r->c->st.replayed++;
	return 0;
}

int
ckr__log_replay(ckr *c, uint64_t from)
{
	struct replay_ctx r = { c, from };
	uint64_t tail, count, id;

	if (from >= c->durable)
		return 0;
	if (c->opts.replay == NULL)
		return ckr__err(CKR_EINVAL, "%s: %llu logged actions to replay "
			"and no replay callback", c->logm.path,
			(unsigned long long)(c->durable - from));
	return ckr__log_scan_media(&c->logm, &tail, replay_one, &r, &count,
		&id);
}

static void *
logger_main(void *arg)
{
	ckr *c = arg;

	pthread_mutex_lock(&c->llock);
	for (;;) {
		char *buf;
		size_t n;
		uint64_t upto;
		int rc;

		while (c->lfill == 0 && !c->lstop)
			pthread_cond_wait(&c->lcond, &c->llock);
		if (c->lfill == 0)
			break;
		buf = c->lbuf[c->lcur];
		n = c->lfill;
		upto = c->appended;
		c->lcur ^= 1;
		c->lfill = 0;
		pthread_cond_broadcast(&c->ldone);
		pthread_mutex_unlock(&c->llock);
		rc = ckr__media_write(&c->logm, c->log_tail, buf, n); /* G1 */
		/* G2: the records are durable before durable says so (L2) */
		if (rc == 0)
			rc = ckr__media_sync(&c->logm);
		pthread_mutex_lock(&c->llock);
		if (rc != 0) {
			ckr__fail(c, rc);
		} else {
			c->log_tail += n;
			c->durable = upto; /* G3 */
			c->st.group_commits++;
		}
		pthread_cond_broadcast(&c->ldone);
	}
	pthread_mutex_unlock(&c->llock);
	return NULL;
}

int
ckr__log_start(ckr *c)
{
	int rc;

	c->lbufsz = LBUF_SIZE;
	c->lbuf[0] = malloc(LBUF_SIZE);
	c->lbuf[1] = malloc(LBUF_SIZE);
	if (c->lbuf[0] == NULL || c->lbuf[1] == NULL)
		return ckr__err(-ENOMEM, "log buffers");
	rc = pthread_create(&c->logger, NULL, logger_main, c);
	if (rc != 0)
		return ckr__err(-rc, "logger thread: %s", strerror(rc));
	return 0;
}

void
ckr__log_stop(ckr *c)
{
	pthread_mutex_lock(&c->llock);
	c->lstop = true;
	pthread_cond_broadcast(&c->lcond);
	pthread_mutex_unlock(&c->llock);
	pthread_join(c->logger, NULL);
}

int
ckr__log_wait(ckr *c, uint64_t n)
{
	int rc;

	pthread_mutex_lock(&c->llock);
	while (c->durable < n && ckr__sticky(c) == 0)
		pthread_cond_wait(&c->ldone, &c->llock);
	rc = c->durable >= n ? 0 : ckr__sticky(c);
	pthread_mutex_unlock(&c->llock);
	return rc;
}

int
ckr_log_append(ckr *c, const void *rec, size_t len, uint64_t *seq)
{
	struct ckr_rec_hdr rh;
	uint64_t rs, csum;
	char *p;
	int rc;

	if (rec == NULL || len == 0 || len > CKR_REC_MAX)
		return ckr__err(CKR_ERECORD, "log record of %zu bytes (1..%u)",
			len, CKR_REC_MAX);
	rs = ckr_rec_size((uint32_t)len);
	pthread_mutex_lock(&c->llock);
	if ((rc = ckr__sticky(c)) != 0) {
		pthread_mutex_unlock(&c->llock);
		return ckr__err(rc, "ckr handle failed before: %s",
			ckr_strerror(rc));
	}
	if (c->log_reserved + rs > c->opts.log_capacity) {
		pthread_mutex_unlock(&c->llock);
		return ckr__err(CKR_ELOGFULL, "%s: record of %llu bytes does not "
			"fit: %llu of %llu bytes used", c->logm.path,
			(unsigned long long)rs,
			(unsigned long long)c->log_reserved,
			(unsigned long long)c->opts.log_capacity);
	}
	while (c->lfill + rs > c->lbufsz && ckr__sticky(c) == 0)
		pthread_cond_wait(&c->ldone, &c->llock);
	if ((rc = ckr__sticky(c)) != 0) {
		pthread_mutex_unlock(&c->llock);
		return ckr__err(rc, "ckr log failed: %s", ckr_strerror(rc));
	}
	p = c->lbuf[c->lcur] + c->lfill;
	rh.seq = c->appended;
	rh.len = (uint32_t)len;
	rh.pad = 0;
	memcpy(p, &rh, sizeof(rh));
	memcpy(p + sizeof(rh), rec, len);
	memset(p + sizeof(rh) + len, 0, rs - 8 - sizeof(rh) - len);
	csum = rio_checksum(p, rs - 8, c->log_id);
	memcpy(p + rs - 8, &csum, 8);
	c->lfill += rs;
	c->log_reserved += rs;
	if (seq != NULL)
		*seq = c->appended;
	c->appended++;
	pthread_cond_signal(&c->lcond);
	pthread_mutex_unlock(&c->llock);
	return 0;
}

int
ckr_log_commit(ckr *c)
{
	uint64_t n;

	pthread_mutex_lock(&c->llock);
	n = c->appended;
	pthread_mutex_unlock(&c->llock);
	return ckr__log_wait(c, n);
}

int
ckr_log_scan(const char *dir, enum ckr_storage storage,
	int (*fn)(void *ctx, uint64_t seq, const void *rec, size_t len),
	void *ctx, uint64_t *count)
{
	struct ckr_media m;
	uint64_t tail, id, n = 0;
	bool created;
	int rc;

	rc = ckr__media_open(&m, dir, "log", storage, 0, 0, false, &created);
	if (rc != 0)
		return rc;
	rc = ckr__log_scan_media(&m, &tail, fn, ctx, &n, &id);
	ckr__media_close(&m);
	if (count != NULL)
		*count = n;
	return rc;
}
