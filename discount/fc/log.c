/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * log.c -- the logical log: appends by the mutator, group commit by the
 *          logger thread, the scan that recovery and readers use
 *
 * Invariants:
 *   L1. Records are written once, in seq order, back to back in a ring
 *       after the header (a record that does not fit before its end goes
 *       at its start); the durable records form a chain from the scan's
 *       start (one writer, the logger, appending at log_tail).
 *   L2. `durable` advances only after the sync that made those records
 *       durable returned (G2 before G3).
 *   L3. A record is valid iff its seq is the next expected one and its
 *       checksum, seeded with this log's id, matches: a torn tail ends the
 *       log; a record of an earlier lap or an older log never passes.
 *   L4. Truncation: the ring reuses only the bytes of records before the
 *       log_seq of the older of the two newest complete checkpoints.  The
 *       head moves there when a checkpoint completes (after its W4,
 *       ckr__log_release), so while either slot is complete every record
 *       after it is in the log: recovery from the other slot, when one is
 *       bad, still finds its log.  An append that would pass the head
 *       fails (CKR_ELOGFULL) and changes nothing.
 *
 * Group commit, for the records appended since the last one: the logger
 * takes them once opts.log_group of them wait (1: at once), or sooner when
 * someone waits for them (ckr_log_wait, ckr_log_commit, the writer's W3,
 * an append that finds the buffer full, close), so the mutator runs the
 * next group while the last one is written (Section 5.5):
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

/* Is a valid record seq at off (L3)?  Its size in *rs, its payload's
 * length (as appended, without the padding) in *len. */
static bool
rec_ok(const char *p, uint64_t end, uint64_t off, uint64_t seq,
	uint64_t log_id, uint64_t *rs, uint32_t *len)
{
	struct ckr_rec_hdr rh;
	uint64_t csum;

	if (off + sizeof(rh) + 8 > end)
		return false;
	memcpy(&rh, p + off, sizeof(rh));
	if (rh.seq != seq || rh.len == 0 || rh.len > CKR_REC_MAX ||
	    rh.pad != 0)
		return false;
	*rs = ckr_rec_size(rh.len);
	*len = rh.len;
	if (off + *rs > end)
		return false;
	memcpy(&csum, p + off + *rs - 8, 8);
#ifdef CKR_BROKEN_NO_REC_CSUM
	(void)csum, (void)log_id;
	return true; /* broken: the header alone, a torn record passes */
#else
	return rio_checksum(p + off, *rs - 8, log_id) == csum;
#endif
}

/*
 * Scan the chain of valid records of the ring [CKR_HDR_SIZE, end) of p
 * from record start_seq at start_off (L1, L3): each record right after the
 * last, or at the ring's start if it is not there.  *len: the logical
 * bytes from start_off to *tail (wrapped ends included); *mark_len: those
 * before record mark_seq (if it is reached); *count: the next seq.
 */
static int
scan(const char *p, uint64_t end, uint64_t log_id, uint64_t start_off,
	uint64_t start_seq, uint64_t mark_seq, uint64_t *mark_len,
	uint64_t *tail, uint64_t *len,
	int (*fn)(void *ctx, uint64_t seq, const void *rec, size_t len),
	void *ctx, uint64_t *count)
{
	uint64_t off = start_off, seq = start_seq, n = 0, rs = 0;
	uint32_t rl = 0;
	int rc;

	for (;; seq++) {
		if (seq == mark_seq && mark_len != NULL)
			*mark_len = n;
		if (!rec_ok(p, end, off, seq, log_id, &rs, &rl)) {
			if (off == CKR_HDR_SIZE ||
			    !rec_ok(p, end, CKR_HDR_SIZE, seq, log_id, &rs, &rl))
				break;
			n += end - off; /* the writer wrapped here */
			off = CKR_HDR_SIZE;
		}
		if (fn != NULL && (rc = fn(ctx, seq, p + off +
			sizeof(struct ckr_rec_hdr), rl)) != 0)
			return rc;
		off += rs;
		n += rs;
	}
	*tail = off;
	*len = n;
	*count = seq;
	return 0;
}

/*
 * Scan the log media from its oldest retained record: record 0 at the
 * ring's start while it is there, else `oldest`'s (log_seq, log_off) (the
 * older complete slot; NULL if none).  See scan() for the outputs;
 * *start_off is where it started.
 */
int
ckr__log_scan_media(struct ckr_media *m, const struct ckr_slot_hdr *oldest,
	uint64_t mark_seq, uint64_t *mark_len, uint64_t *start_off,
	uint64_t *tail, uint64_t *len,
	int (*fn)(void *ctx, uint64_t seq, const void *rec, size_t len),
	void *ctx, uint64_t *count, uint64_t *log_id)
{
	struct ckr_log_hdr h;
	const char *p;
	uint64_t end, rs, seq0 = 0, off0 = CKR_HDR_SIZE;
	uint32_t rl;
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
	end = CKR_HDR_SIZE + h.capacity;
	if (m->kind == CKR_STORAGE_POOL) {
		p = m->base;
	} else {
		p = mmap(NULL, m->size, PROT_READ, MAP_SHARED, m->fd, 0);
		if (p == MAP_FAILED)
			return ckr__errno("mmap %s", m->path);
	}
	if (oldest != NULL &&
	    !rec_ok(p, end, CKR_HDR_SIZE, 0, h.log_id, &rs, &rl)) {
		if (oldest->log_off < CKR_HDR_SIZE || oldest->log_off > end ||
		    oldest->log_off % 8) {
			rc = ckr__err(CKR_ECORRUPT, "%s: a slot puts action %llu "
				"at %llu, outside the log's ring", m->path,
				(unsigned long long)oldest->log_seq,
				(unsigned long long)oldest->log_off);
			goto out;
		}
		seq0 = oldest->log_seq;
		off0 = oldest->log_off;
	}
	*start_off = off0;
	rc = scan(p, end, h.log_id, off0, seq0, mark_seq, mark_len, tail, len,
		fn, ctx, count);
out:
	if (m->kind != CKR_STORAGE_POOL)
		munmap((void *)p, m->size);
	return rc;
}

/* Open (or format) the log media and find its durable prefix. */
int
ckr__log_open(ckr *c, bool create)
{
	struct ckr_log_hdr h;
	uint64_t cap = c->opts.log_capacity;
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
	rc = log_hdr_check(&c->logm, &h);
	if (rc != 0)
		return rc;
	c->log_id = h.log_id;
	c->opts.log_capacity = h.capacity;
	return 0;
}

/*
 * Find the durable records (from the oldest retained one, given the
 * slots chosen at open: oldest and best complete, NULL if none) and set
 * the positions: the head at the scan's start, the last complete
 * checkpoint at best's log_seq (L4).
 */
int
ckr__log_recover(ckr *c, const struct ckr_slot_hdr *oldest,
	const struct ckr_slot_hdr *best)
{
	uint64_t start, tail, len, count, id, mark = 0;
	int rc;

	rc = ckr__log_scan_media(&c->logm, oldest, best ? best->log_seq : 0,
		&mark, &start, &tail, &len, NULL, NULL, &count, &id);
	if (rc != 0)
		return rc;
	c->log_tail = tail;
	c->head_lpos = start - CKR_HDR_SIZE;
	c->app_lpos = c->head_lpos + len;
	c->appended = c->durable = count;
	if (best != NULL) {
		c->prev_lpos = c->head_lpos + mark;
		c->have_prev = true;
	}
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
ckr__log_replay(ckr *c, const struct ckr_slot_hdr *best)
{
	struct replay_ctx r = { c, best != NULL ? best->log_seq : 0 };
	uint64_t start, tail, len, count, id;

	if (r.from >= c->durable)
		return 0;
	if (c->opts.replay == NULL)
		return ckr__err(CKR_EINVAL, "%s: %llu logged actions to replay "
			"and no replay callback", c->logm.path,
			(unsigned long long)(c->durable - r.from));
	/* from best itself: the records from its log_seq on are retained */
	return ckr__log_scan_media(&c->logm, best, 0, NULL, &start, &tail,
		&len, replay_one, &r, &count, &id);
}

/* After a checkpoint's W4: release the records before the previous
 * complete checkpoint (L4). */
void
ckr__log_release(ckr *c)
{
	pthread_mutex_lock(&c->llock);
	if (c->have_prev)
		c->head_lpos = c->prev_lpos;
	c->prev_lpos = c->ck_lpos;
	c->have_prev = true;
	pthread_mutex_unlock(&c->llock);
}

/* G1: write the group's records at log_tail, wrapping each record that
 * does not fit before the ring's end to its start (as the appender
 * placed it, L1). */
static int
log_write(ckr *c, const char *buf, size_t n)
{
	uint64_t end = CKR_HDR_SIZE + c->opts.log_capacity, at = c->log_tail;
	size_t run = 0, k = 0;
	int rc;

	while (k < n) {
		struct ckr_rec_hdr rh;
		uint64_t rs;

		memcpy(&rh, buf + k, sizeof(rh));
		rs = ckr_rec_size(rh.len);
		if (at + run + rs > end) {
			if (run > 0 &&
			    (rc = ckr__media_write(&c->logm, at, buf + k - run,
				     run)) != 0)
				return rc;
			at = CKR_HDR_SIZE;
			run = 0;
		}
		run += rs;
		k += rs;
	}
	rc = ckr__media_write(&c->logm, at, buf + n - run, run);
	if (rc == 0)
		c->log_tail = at + run;
	return rc;
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

		while (!(c->lfill > 0 && (c->lstop || c->lwant > c->taken ||
			       c->appended - c->taken >= c->lgroup)) &&
		       !(c->lfill == 0 && c->lstop))
			pthread_cond_wait(&c->lcond, &c->llock);
		if (c->lfill == 0)
			break;
		buf = c->lbuf[c->lcur];
		n = c->lfill;
		upto = c->appended;
		c->taken = upto;
		c->lcur ^= 1;
		c->lfill = 0;
		pthread_cond_broadcast(&c->ldone);
		pthread_mutex_unlock(&c->llock);
		rc = log_write(c, buf, n); /* G1 */
		/* G2: the records are durable before durable says so (L2) */
		if (rc == 0)
			rc = ckr__media_sync(&c->logm);
		pthread_mutex_lock(&c->llock);
		if (rc != 0) {
			ckr__fail(c, rc);
		} else {
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
	c->lgroup = c->opts.log_group > 1 ? c->opts.log_group : 1;
	c->taken = c->appended;
	c->lbuf[0] = malloc(LBUF_SIZE);
	c->lbuf[1] = malloc(LBUF_SIZE);
	if (c->lbuf[0] == NULL || c->lbuf[1] == NULL)
		return ckr__err(-ENOMEM, "log buffers");
	rc = pthread_create(&c->logger, NULL, logger_main, c);
	if (rc != 0)
		return ckr__err(-rc, "logger thread: %s", strerror(rc));
	pthread_setname_np(c->logger, "ckr-logger");
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
	if (n > c->lwant) {
		/* a waiter: the logger takes a group smaller than log_group */
		c->lwant = n;
		pthread_cond_signal(&c->lcond);
	}
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
	uint64_t rs, csum, at, cap = c->opts.log_capacity;
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
			ckr__fail_msg(c));
	}
	/* its place in the ring: after the last, or at the start (L1) */
	at = c->app_lpos;
	if (at % cap + rs > cap)
		at += cap - at % cap;
	if (at + rs - c->head_lpos > cap) {
		pthread_mutex_unlock(&c->llock);
		return ckr__err(CKR_ELOGFULL, "%s: record of %llu bytes does not "
			"fit: %llu of %llu bytes hold actions since the older "
			"complete checkpoint", c->logm.path,
			(unsigned long long)rs,
			(unsigned long long)(c->app_lpos - c->head_lpos),
			(unsigned long long)cap);
	}
	while (c->lfill + rs > c->lbufsz && ckr__sticky(c) == 0) {
		/* the buffer is full: the logger takes it, group or not */
		if (c->lwant < c->appended) {
			c->lwant = c->appended;
			pthread_cond_signal(&c->lcond);
		}
		pthread_cond_wait(&c->ldone, &c->llock);
	}
	if ((rc = ckr__sticky(c)) != 0) {
		pthread_mutex_unlock(&c->llock);
		return ckr__err(rc, "ckr log failed: %s", ckr__fail_msg(c));
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
	c->app_lpos = at + rs;
	if (seq != NULL)
		*seq = c->appended;
	c->appended++;
	if (c->appended - c->taken >= c->lgroup)
		pthread_cond_signal(&c->lcond);
	pthread_mutex_unlock(&c->llock);
	return 0;
}

int
ckr_log_wait(ckr *c, uint64_t n)
{
	uint64_t a;
	int rc;

	pthread_mutex_lock(&c->llock);
	a = c->appended;
	pthread_mutex_unlock(&c->llock);
	if (n > a)
		return ckr__err(CKR_EINVAL, "ckr_log_wait: %llu actions, only "
			"%llu appended", (unsigned long long)n,
			(unsigned long long)a);
	rc = ckr__log_wait(c, n);
	if (rc != 0)
		return ckr__err(rc, "%s: the handle failed: %s", c->logm.path,
			ckr__fail_msg(c));
	return 0;
}

int
ckr_log_commit(ckr *c)
{
	uint64_t n;

	int rc;

	pthread_mutex_lock(&c->llock);
	n = c->appended;
	pthread_mutex_unlock(&c->llock);
	rc = ckr__log_wait(c, n);
	if (rc != 0)
		return ckr__err(rc, "%s: the handle failed: %s", c->logm.path,
			ckr__fail_msg(c));
	return 0;
}

int
ckr_log_scan(const char *dir, enum ckr_storage storage,
	int (*fn)(void *ctx, uint64_t seq, const void *rec, size_t len),
	void *ctx, uint64_t *count)
{
	struct ckr_media m, ck;
	struct ckr_slot_hdr h[2], *oldest = NULL;
	uint64_t start, tail, len, id, n = 0;
	bool created;
	int rc;

	rc = ckr__media_open(&m, dir, "log", storage, 0, 0, false, &created);
	if (rc != 0)
		return rc;
	/* the log id, then the older complete slot of this log, if any */
	rc = ckr__log_scan_media(&m, NULL, 0, NULL, &start, &tail, &len, NULL,
		NULL, &n, &id);
	if (rc == 0 && ckr__media_open(&ck, dir, "ckpt", storage, 0, 0, false,
			       &created) == 0) {
		for (int s = 0; s < 2; s++)
			if (ckr__slot_read_hdr(&ck, 0, 0, s, &h[s], id,
				    true) == 0 &&
			    (oldest == NULL || h[s].epoch < oldest->epoch))
				oldest = &h[s];
		ckr__media_close(&ck);
	}
	if (rc == 0)
		rc = ckr__log_scan_media(&m, oldest, 0, NULL, &start, &tail,
			&len, fn, ctx, &n, &id);
	ckr__media_close(&m);
	if (count != NULL)
		*count = n;
	return rc;
}
