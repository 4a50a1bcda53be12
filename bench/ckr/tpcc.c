/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tpcc.c -- the order-entry engine of tpcc.h: capture backend, libckr
 *           logical logging, the ARIES-style baseline, recovery
 *
 * Invariants:
 *   T1. Transaction t runs from its seed alone (tpcc_tx_seed(S, t)) on the
 *       database the transactions before it left: replaying t from its
 *       logged seed redoes exactly what it did.
 *   T2. TPCC_CKR: an action is appended before the transaction runs, so
 *       the log is never behind the state; the state is libckr's, and a
 *       checkpoint's log_seq says which actions it holds (ckr.h).
 *   T3. TPCC_ARIES: one redo record per transaction, rolled back or not,
 *       so log sequence number == transaction number.  A rolled-back
 *       transaction wrote in place before it put the words back, so its
 *       record holds every word it declared, as restored (a compensation
 *       record): the copy may have caught what it wrote.  For the same
 *       reason a committed record holds every word of an inserted row
 *       (tb_range.fresh), changed or not: order-entry clears the row
 *       before it fills it.  Other declared words are written once, so
 *       a word that ends as it began was never anything else.  A fuzzy
 *       checkpoint records the log position of its start (lsn, taken
 *       between two transactions); every word a transaction after lsn
 *       wrote is in some record >= lsn, so redo from lsn over any mix of
 *       older and newer words the copy caught gives the state after the
 *       last durable record.
 *   T4. TPCC_ARIES, write-ahead: a checkpoint is complete only when every
 *       transaction whose writes the copy may hold is durable in the log
 *       (A3 below), else recovery could show a transaction the log lost.
 *
 * The fuzzy checkpoint (thread ck_main), into slot s of "aries.ck":
 *   A1  copy the live database chunk by chunk into the slot's data, while
 *       the mutator goes on                crash: the slot is torn, its old
 *                                          header no longer matches its
 *                                          data: the other slot is used
 *   A2  fdatasync                          the data is durable
 *   A3  wait until the mutator appended the transaction in flight at the
 *       end of the copy, and the log is durable up to it (T4)
 *   A4  write the header (epoch, lsn, data checksum), fdatasync
 *                                          complete; the mutator then lets
 *                                          the log ring release the records
 *                                          before the previous slot's lsn
 *   A5  (the mutator, before each transaction) while the log's ring
 *       cannot take the largest record a transaction can log: finish
 *       the checkpoint running, acknowledge it, start the next, until
 *       the ring has released enough (aries_room); a full log makes the
 *       mutator wait, never fails the run
 *
 * Broken build (bench/ckr/meson.build): CKR_TPCC_BROKEN_ARIES_LATE_LSN
 * records the log position at the end of the copy instead of its start,
 * so the records of the transactions that ran during the copy are not
 * redone; the crash campaign (ckr-tpcc crash) must catch it.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rio.h"
#include "tpcc.h"

/* The order-entry tables and transactions, unchanged (T1 needs their
 * random state, which the file keeps private). */
#include "../tpcb_tpcc/wl_order_entry.c"

#define OBJ_SIZE 4096u
#define MAX_RANGES 64
#define BEFORE_WORDS (1u << 16)
#define CHUNK (1u << 20)
#define ARIES_MAGIC "ARIESCK"
#define ARIES_SEED 0x4152494553434b00ull

/* TPCC_CKR's logical record: the load (kind 0) or a transaction. */
struct act {
	uint32_t kind;
	uint32_t type; /* 0 new-order, 1 payment, 2 delivery */
	uint64_t seed;
};

/* TPCC_ARIES's redo record: header, then nruns x { w0, n, n words }. */
struct redo {
	uint64_t txno;
	uint32_t nruns;
	uint32_t aborted;
};

/* An ARIES slot header (the first 64 bytes of the slot's 4 KiB). */
struct aslot {
	char magic[8];
	uint64_t epoch, lsn, next_tx, dsize, data_csum, reserved;
	uint64_t csum; /* rio_checksum of the 56 bytes before */
};
_Static_assert(sizeof(struct aslot) == 64, "aries slot header");

struct tpcc {
	struct tpcc_opts o;
	struct oe *w;
	char *db;
	size_t dbsz;
	uint64_t nwords;
	struct tb_backend be;
	/* capture: the ranges of the transaction running, as words */
	size_t nr;
	uint32_t rw0[MAX_RANGES], rnw[MAX_RANGES];
	bool rnew[MAX_RANGES]; /* an inserted row (tb_range.fresh) */
	uint32_t *before;
	size_t bfill;
	/* TPCC_CKR */
	ckr *c;
	bool loaded;
	/* TPCC_ARIES */
	ckr *lc;
	int ckfd;
	char *rec;
	size_t rfill;
	uint32_t *stage;
	pthread_t ckt;
	bool ck_started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool ck_req, ck_stop, ck_unacked;
	uint64_t ck_lsn, epoch;
	int next_slot;
	/* ARIES: 2 x records appended, + 1 while a transaction runs (A3) */
	_Atomic uint64_t pub_appended;
	atomic_int ck_err;
	uint64_t appended;
	uint64_t room;      /* ARIES: log bytes surely free (aries_room) */
	struct tpcc_stats st;
};

uint64_t
tpcc_tx_seed(uint64_t S, uint64_t t)
{
	uint64_t s = S ^ (t * 0xd1b54a32d192ed03ull);

	return tb_rand(&s);
}

static uint32_t
tx_type(uint64_t seed)
{
	uint64_t k = tb_below(&seed, MIX_NEW + MIX_PAY + MIX_DEL);

	return k < MIX_NEW ? 0 : k < MIX_NEW + MIX_PAY ? 1 : 2;
}

/* ---- the capture backend ---- */

static int
cap_begin(void *ctx)
{
	struct tpcc *e = ctx;

	e->nr = 0;
	e->bfill = 0;
	return 0;
}

static int
cap_set_ranges(void *ctx, size_t n, const struct tb_range *r)
{
	struct tpcc *e = ctx;

	for (size_t i = 0; i < n; i++) {
		size_t a = (size_t)((char *)r[i].addr - e->db);
		uint32_t w0 = (uint32_t)(a / 4);
		uint32_t w1 = (uint32_t)((a + r[i].len + 3) / 4);

		if (e->nr == MAX_RANGES || e->bfill + (w1 - w0) > BEFORE_WORDS ||
		    a + r[i].len > e->dbsz) {
			fprintf(stderr, "ckr-tpcc: a transaction declares more "
				"than the capture holds\n");
			return -1;
		}
		e->rw0[e->nr] = w0;
		e->rnw[e->nr] = w1 - w0;
		e->rnew[e->nr] = r[i].fresh;
		memcpy(e->before + e->bfill, e->db + (size_t)w0 * 4,
			(size_t)(w1 - w0) * 4);
		e->bfill += w1 - w0;
		e->nr++;
	}
	return 0;
}

static int
cap_abort(void *ctx)
{
	struct tpcc *e = ctx;
	size_t b = e->bfill;

	/* in reverse, so with overlapping ranges the first image wins */
	for (size_t i = e->nr; i-- > 0;) {
		b -= e->rnw[i];
		memcpy(e->db + (size_t)e->rw0[i] * 4, e->before + b,
			(size_t)e->rnw[i] * 4);
	}
	return 0;
}

/* ARIES: add word w (value v) to the redo record, extending the last run
 * when it is adjacent. */
static void
redo_word(struct tpcc *e, uint32_t w, uint32_t v, uint32_t **run)
{
	if (*run != NULL && (*run)[0] + (*run)[1] == w) {
		(*run)[1]++;
	} else {
		*run = (uint32_t *)(e->rec + e->rfill);
		(*run)[0] = w;
		(*run)[1] = 1;
		e->rfill += 8;
		((struct redo *)e->rec)->nruns++;
	}
	memcpy(e->rec + e->rfill, &v, 4);
	e->rfill += 4;
}

static int
cap_commit(void *ctx)
{
	struct tpcc *e = ctx;
	const uint32_t *db = (const uint32_t *)e->db;
	uint32_t *run = NULL;
	size_t b = 0;

	for (size_t i = 0; i < e->nr; i++) {
		for (uint32_t k = 0; k < e->rnw[i]; k++) {
			uint32_t w = e->rw0[i] + k;

			/* ARIES logs every word of an inserted row: the
			 * engine clears the row before it fills it, so a
			 * word that ends as it was may have been caught by
			 * the fuzzy copy in between (T3) */
			if (db[w] == e->before[b + k] &&
			    !(e->o.mode == TPCC_ARIES && e->rnew[i]))
				continue;
			if (e->o.mode == TPCC_CKR)
				ckr_write(e->c, w, db[w]);
			else if (e->o.mode == TPCC_ARIES)
				redo_word(e, w, db[w], &run);
		}
		b += e->rnw[i];
	}
	return 0;
}

/* ARIES, after a rollback: every word the transaction declared, as the
 * rollback left it (T3). */
static void
redo_restored(struct tpcc *e)
{
	const uint32_t *db = (const uint32_t *)e->db;
	uint32_t *run = NULL;

	for (size_t i = 0; i < e->nr; i++)
		for (uint32_t k = 0; k < e->rnw[i]; k++)
			redo_word(e, e->rw0[i] + k, db[e->rw0[i] + k], &run);
}

/* ---- transactions ---- */

/* Run the transaction of seed `seed` (T1). */
static int
run_seed(struct tpcc *e, uint64_t seed)
{
	int rc;

	e->w->rng = seed;
	rc = oe_tx(e->w, e->db, &e->be, e);
	if (rc == 0 && tx_type(seed) == 0)
		e->st.new_orders++;
	if (rc == 1)
		e->st.rollbacks++;
	return rc;
}

static void
ck_fail(struct tpcc *e, const char *what, int rc)
{
	fprintf(stderr, "ckr-tpcc: %s: %s: %s: %s\n", e->o.dir ? e->o.dir : "-",
		what, ckr_err_name(rc), ckr_errormsg());
}

/*
 * ARIES, between two transactions: wait until the redo log's ring holds
 * room for the largest record a transaction can log (A5).  Space comes
 * back only as fuzzy checkpoints complete and are acknowledged to the log
 * (tpcc_poc): so finish the one running, acknowledge it, start another,
 * until the log has released enough.  No transaction is in flight
 * meanwhile, so A3 waits for none.
 */
static int
aries_room(struct tpcc *e)
{
	const uint64_t need = 2 * (sizeof(struct redo) + 12ull * BEFORE_WORDS
		+ 64);
	struct ckr_stats s;

	/* e->room: log_free when last asked, less what was appended since
	 * (counted twice: a record that wraps wastes up to its size), so
	 * the log is asked only when it may be short */
	if (e->room >= need)
		return 0;
	for (int i = 0;; i++) {
		int rc;

		ckr_stats(e->lc, &s);
		e->room = s.log_free;
		if (s.log_free >= need)
			return 0;
		if (i == 0)
			e->st.log_waits++;
		if (i == 16) {
			fprintf(stderr, "ckr-tpcc: %s: the redo log (%llu "
				"bytes) cannot take a record of up to %llu "
				"bytes even after %d checkpoints: make it "
				"larger (-L)\n", e->o.dir,
				(unsigned long long)e->o.log_capacity,
				(unsigned long long)need / 2, i);
			return -1;
		}
		pthread_mutex_lock(&e->lock);
		while (e->ck_req && atomic_load(&e->ck_err) == 0)
			pthread_cond_wait(&e->cond, &e->lock);
		if (atomic_load(&e->ck_err) != 0) {
			pthread_mutex_unlock(&e->lock);
			return -1;
		}
		if (e->ck_unacked) {
			/* the complete checkpoint lets the ring release the
			 * records before the one before it (tpcc_poc) */
			e->ck_unacked = false;
			pthread_mutex_unlock(&e->lock);
			rc = ckr_point_of_consistency(e->lc, CKR_POC_WAIT);
			if (rc >= 0)
				rc = ckr_checkpoint_wait(e->lc);
			if (rc < 0) {
				ck_fail(e, "waiting for log space", rc);
				return -1;
			}
			continue;
		}
		e->ck_lsn = e->appended; /* between two transactions (T3) */
		e->ck_req = true;
		pthread_cond_signal(&e->cond);
		pthread_mutex_unlock(&e->lock);
	}
}

int
tpcc_tx(struct tpcc *e, uint64_t t)
{
	uint64_t seed = tpcc_tx_seed(e->o.seed, t);
	int rc;

	if (e->o.mode == TPCC_CKR) {
		struct act a = { 1, tx_type(seed), seed };

		rc = ckr_log_append(e->c, &a, sizeof(a), NULL); /* T2 */
		if (rc != 0) {
			ck_fail(e, "ckr_log_append", rc);
			return -1;
		}
		return run_seed(e, seed);
	}
	if (e->o.mode == TPCC_ARIES) {
		struct redo *h = (struct redo *)e->rec;

		if (aries_room(e) != 0)
			return -1;
		/* in flight (A3).  x86-TSO makes stores visible in program
		 * order; the fence keeps the compiler from moving the
		 * transaction's stores to the database above this one */
		atomic_store_explicit(&e->pub_appended, 2 * e->appended + 1,
			memory_order_relaxed);
		atomic_thread_fence(memory_order_seq_cst);
		h->txno = t;
		h->nruns = 0;
		h->aborted = 0;
		e->rfill = sizeof(*h);
	}
	rc = run_seed(e, seed);
	if (e->o.mode == TPCC_ARIES && rc >= 0) {
		if (rc == 1) { /* rolled back: a record all the same (T3) */
			((struct redo *)e->rec)->aborted = 1;
			((struct redo *)e->rec)->nruns = 0;
			e->rfill = sizeof(struct redo);
			redo_restored(e);
		}
		int lr = ckr_log_append(e->lc, e->rec, e->rfill, NULL);
		if (lr != 0) {
			ck_fail(e, "ckr_log_append (redo)", lr);
			return -1;
		}
		e->st.log_bytes += e->rfill;
		e->room -= e->room < 2 * (e->rfill + 24) ? e->room :
			2 * (e->rfill + 24);
		e->appended++;
		atomic_store_explicit(&e->pub_appended, 2 * e->appended,
			memory_order_release);
	}
	return rc;
}

/* ---- TPCC_CKR ---- */

static void
state_to_db(struct tpcc *e)
{
	uint32_t *db = (uint32_t *)e->db;

	for (uint64_t i = 0; i < e->nwords; i++)
		db[i] = ckr_read(e->c, i);
	e->loaded = true;
}

/* The load (action 0): populate the working copy, then the state. */
static void
load(struct tpcc *e, uint64_t seed)
{
	const uint32_t *db = (const uint32_t *)e->db;

	memset(e->db, 0, e->dbsz);
	e->w->rng = seed;
	oe_populate(e->w, e->db);
	if (e->o.mode != TPCC_CKR)
		return;
	for (uint64_t i = 0; i < e->nwords; i++)
		if (db[i] != ckr_read(e->c, i))
			ckr_write(e->c, i, db[i]);
}

static int
replay_cb(void *ctx, ckr *c, uint64_t seq, const void *rec, size_t len)
{
	struct tpcc *e = ctx;
	struct act a;

	e->c = c; /* ckr_open has not returned it yet */
	if (len != sizeof(a))
		return -1;
	memcpy(&a, rec, sizeof(a));
	if (!e->loaded)
		state_to_db(e);
	if (a.kind == 0 && seq == 0) {
		if (a.seed != e->o.seed)
			return -2; /* the log of another run */
		load(e, a.seed);
		return 0;
	}
	if (a.kind != 1 || seq == 0 ||
	    a.seed != tpcc_tx_seed(e->o.seed, seq - 1))
		return -3;
	return run_seed(e, a.seed) < 0 ? -4 : 0;
}

static int
ckr_mode_open(struct tpcc *e, uint64_t *next_tx)
{
	struct ckr_opts co;
	struct ckr_stats s;
	int rc;

	memset(&co, 0, sizeof(co));
	co.algo = e->o.algo;
	co.storage = CKR_STORAGE_FILE;
	co.nobjs = e->dbsz / OBJ_SIZE;
	co.obj_size = OBJ_SIZE;
	co.log_capacity = e->o.log_capacity;
	co.log_group = e->o.group;
	co.flags = e->o.ckr_flags;
	co.replay = replay_cb;
	co.replay_ctx = e;
	rc = ckr_open(e->o.dir, &co, &e->c);
	if (rc != 0) {
		ck_fail(e, "ckr_open", rc);
		return -1;
	}
	if (!e->loaded)
		state_to_db(e);
	ckr_stats(e->c, &s);
	e->st.huge_bytes = s.huge_bytes;
	if (s.log_appended == 0) {
		struct act a = { 0, 0, e->o.seed };

		rc = ckr_log_append(e->c, &a, sizeof(a), NULL);
		if (rc != 0) {
			ck_fail(e, "ckr_log_append (load)", rc);
			return -1;
		}
		load(e, e->o.seed);
		*next_tx = 0;
	} else {
		*next_tx = s.log_appended - 1;
	}
	return 0;
}

/* ---- TPCC_ARIES ---- */

static uint64_t
aslot_off(const struct tpcc *e, int s)
{
	return (uint64_t)s * (4096 + e->dbsz);
}

static uint64_t
aslot_csum(const struct aslot *h)
{
	return rio_checksum(h, offsetof(struct aslot, csum), ARIES_SEED);
}

static int
pwrite_all(int fd, const void *buf, size_t n, uint64_t off)
{
	const char *p = buf;

	while (n > 0) {
		ssize_t k = pwrite(fd, p, n, (off_t)off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		off += (uint64_t)k;
		n -= (size_t)k;
	}
	return 0;
}

static int
pread_all(int fd, void *buf, size_t n, uint64_t off)
{
	char *p = buf;

	while (n > 0) {
		ssize_t k = pread(fd, p, n, (off_t)off);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		off += (uint64_t)k;
		n -= (size_t)k;
	}
	return 0;
}

/* Slot s complete (header and data match)?  Its data left in dst. */
static bool
aslot_read(struct tpcc *e, int s, struct aslot *h, char *dst)
{
	uint64_t cs = 0;

	if (pread_all(e->ckfd, h, sizeof(*h), aslot_off(e, s)) != 0 ||
	    memcmp(h->magic, ARIES_MAGIC, 8) != 0 || aslot_csum(h) != h->csum ||
	    h->dsize != e->dbsz)
		return false;
	if (pread_all(e->ckfd, dst, e->dbsz, aslot_off(e, s) + 4096) != 0)
		return false;
	for (size_t off = 0; off < e->dbsz; off += CHUNK)
		cs = rio_checksum(dst + off, e->dbsz - off < CHUNK ?
			e->dbsz - off : CHUNK, cs);
	return cs == h->data_csum;
}

/* A4 for a slot whose data is durable. */
static int
aslot_commit(struct tpcc *e, int s, uint64_t epoch, uint64_t lsn,
	uint64_t csum)
{
	struct aslot h;

	memset(&h, 0, sizeof(h));
	memcpy(h.magic, ARIES_MAGIC, 8);
	h.epoch = epoch;
	h.lsn = lsn;
	h.next_tx = lsn;
	h.dsize = e->dbsz;
	h.data_csum = csum;
	h.csum = aslot_csum(&h);
	if (pwrite_all(e->ckfd, &h, sizeof(h), aslot_off(e, s)) != 0)
		return -1;
	/* the header is durable: the slot is complete before the log
	 * behind it may be released */
	return fdatasync(e->ckfd);
}

static void *
ck_main(void *arg)
{
	struct tpcc *e = arg;

	pthread_mutex_lock(&e->lock);
	for (;;) {
		uint64_t lsn, cs = 0, end;
		int s, rc = 0;

		while (!e->ck_req && !e->ck_stop)
			pthread_cond_wait(&e->cond, &e->lock);
		if (e->ck_stop)
			break;
		lsn = e->ck_lsn;
		s = e->next_slot;
		pthread_mutex_unlock(&e->lock);
		/* A1: the live database, 8 bytes at a time (the mutator
		 * writes between our loads: that is the fuzziness, T3) */
		for (size_t off = 0; off < e->dbsz && rc == 0; off += CHUNK) {
			size_t n = e->dbsz - off < CHUNK ? e->dbsz - off : CHUNK;
			const uint64_t *src = (const uint64_t *)(e->db + off);
			uint64_t *dst = (uint64_t *)e->stage;

			for (size_t i = 0; i < n / 8; i++)
				dst[i] = __atomic_load_n(&src[i],
					__ATOMIC_RELAXED);
			cs = rio_checksum(e->stage, n, cs);
			rc = pwrite_all(e->ckfd, e->stage, n,
				aslot_off(e, s) + 4096 + off);
		}
		/* A2: the data is durable before a header names it */
		if (rc == 0)
			rc = fdatasync(e->ckfd);
		/* A3: the transaction in flight at the end of the copy (its
		 * writes may be in it; none while the mutator waits for log
		 * space between two) and all before it are durable (T4).
		 * The fence keeps the copy's loads before this one. */
		atomic_thread_fence(memory_order_seq_cst);
		end = atomic_load_explicit(&e->pub_appended,
			memory_order_acquire);
		end = end / 2 + (end & 1);
		while (rc == 0 && atomic_load_explicit(&e->pub_appended,
			memory_order_acquire) / 2 < end) {
			pthread_mutex_lock(&e->lock);
			bool stop = e->ck_stop;
			pthread_mutex_unlock(&e->lock);
			if (stop)
				break;
			usleep(50);
		}
		if (rc == 0 && atomic_load(&e->pub_appended) / 2 < end) {
			pthread_mutex_lock(&e->lock);
			break; /* stopping: the checkpoint stays incomplete */
		}
		if (rc == 0 && (rc = ckr_log_wait(e->lc, end)) != 0)
			ck_fail(e, "ckr_log_wait (checkpoint)", rc);
#ifdef CKR_TPCC_BROKEN_ARIES_LATE_LSN
		lsn = end - 1;
#endif
		if (rc == 0)
			rc = aslot_commit(e, s, e->epoch + 1, lsn, cs);
		pthread_mutex_lock(&e->lock);
		if (rc != 0) {
			atomic_store(&e->ck_err, -1);
			fprintf(stderr, "ckr-tpcc: checkpoint to %s/aries.ck "
				"failed\n", e->o.dir);
		} else {
			e->epoch++;
			e->next_slot ^= 1;
			e->ck_unacked = true;
			e->st.checkpoints++;
		}
		e->ck_req = false;
		pthread_cond_broadcast(&e->cond);
	}
	pthread_mutex_unlock(&e->lock);
	return NULL;
}

struct redo_ctx {
	struct tpcc *e;
	uint64_t lsn, first, n;
	int bad;
};

/* Redo record seq if it is at or after the checkpoint's lsn (T3). */
static int
redo_cb(void *ctx, uint64_t seq, const void *rec, size_t len)
{
	struct redo_ctx *r = ctx;
	struct redo h;
	const char *p = rec, *end = p + len;

	if (r->n == 0)
		r->first = seq;
	r->n++;
	if (len < sizeof(h))
		return r->bad = -1;
	memcpy(&h, p, sizeof(h));
	if (h.txno != seq)
		return r->bad = -1;
	if (seq < r->lsn)
		return 0;
	p += sizeof(h);
	for (uint32_t i = 0; i < h.nruns; i++) {
		uint32_t w0, n;

		if (end - p < 8)
			return r->bad = -1;
		memcpy(&w0, p, 4);
		memcpy(&n, p + 4, 4);
		p += 8;
		if ((size_t)(end - p) < (size_t)n * 4 ||
		    ((uint64_t)w0 + n) * 4 > r->e->dbsz)
			return r->bad = -1;
		memcpy(r->e->db + (size_t)w0 * 4, p, (size_t)n * 4);
		p += (size_t)n * 4;
	}
	return 0;
}

static int
noop_replay(void *ctx, ckr *c, uint64_t seq, const void *rec, size_t len)
{
	(void)ctx, (void)c, (void)seq, (void)rec, (void)len;
	return 0; /* the redo ran before the handle was opened */
}

static int
aries_open(struct tpcc *e, uint64_t *next_tx)
{
	char path[4200], alog[4200];
	struct aslot h[2];
	bool ok[2];
	struct ckr_opts co;
	struct ckr_stats s;
	struct stat sb;
	uint64_t want = 2 * (4096 + (uint64_t)e->dbsz), count = 0;
	int best = -1, rc;

	snprintf(path, sizeof(path), "%s/aries.ck", e->o.dir);
	snprintf(alog, sizeof(alog), "%s/alog", e->o.dir);
	e->ckfd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (e->ckfd < 0 || fstat(e->ckfd, &sb) != 0) {
		perror(path);
		return -1;
	}
	if (sb.st_size == 0 && ftruncate(e->ckfd, (off_t)want) != 0) {
		perror(path);
		return -1;
	}
	if ((uint64_t)sb.st_size != want && sb.st_size != 0) {
		fprintf(stderr, "ckr-tpcc: %s holds %lld bytes, not %llu: "
			"another database size\n", path, (long long)sb.st_size,
			(unsigned long long)want);
		return -1;
	}
	for (int k = 0; k < 2; k++) {
		ok[k] = aslot_read(e, k, &h[k], e->db);
		if (ok[k] && (best < 0 || h[k].epoch > h[best].epoch))
			best = k;
	}
	if (best < 0) {
		/* never checkpointed: no transaction ran (one runs only
		 * after the first checkpoint is complete) */
		if (access(alog, F_OK) == 0 &&
		    ckr_log_scan(alog, CKR_STORAGE_FILE, NULL, NULL,
			    &count) == 0 && count > 0) {
			fprintf(stderr, "ckr-tpcc: %s: %llu redo records and no "
				"complete checkpoint\n", e->o.dir,
				(unsigned long long)count);
			return -1;
		}
		load(e, e->o.seed);
		uint64_t cs = 0;
		for (size_t off = 0; off < e->dbsz; off += CHUNK)
			cs = rio_checksum(e->db + off, e->dbsz - off < CHUNK ?
				e->dbsz - off : CHUNK, cs);
		/* the first checkpoint's data is durable before its header */
		if (pwrite_all(e->ckfd, e->db, e->dbsz, aslot_off(e, 0) + 4096)
			!= 0 || fdatasync(e->ckfd) != 0 ||
		    aslot_commit(e, 0, 1, 0, cs) != 0) {
			perror(path);
			return -1;
		}
		e->epoch = 1;
		e->next_slot = 1;
	} else {
		struct redo_ctx r = { e, h[best].lsn, 0, 0, 0 };

		if (!aslot_read(e, best, &h[best], e->db)) {
			fprintf(stderr, "ckr-tpcc: %s: slot %d changed\n", path,
				best);
			return -1;
		}
		e->epoch = h[best].epoch;
		e->next_slot = best ^ 1;
		rc = ckr_log_scan(alog, CKR_STORAGE_FILE, redo_cb, &r, &count);
		if (rc != 0 && !(rc == -ENOENT && h[best].lsn == 0)) {
			if (r.bad == 0)
				ck_fail(e, "ckr_log_scan", rc);
			else
				fprintf(stderr, "ckr-tpcc: %s: a bad redo "
					"record\n", alog);
			return -1;
		}
		if (count < h[best].lsn || (r.n > 0 && r.first > h[best].lsn)) {
			fprintf(stderr, "ckr-tpcc: %s: the log does not reach "
				"back to the checkpoint's position %llu\n",
				alog, (unsigned long long)h[best].lsn);
			return -1;
		}
	}
	memset(&co, 0, sizeof(co));
	co.algo = CKR_NAIVE;
	co.storage = CKR_STORAGE_FILE;
	co.nobjs = 1;
	co.obj_size = 64;
	co.log_capacity = e->o.log_capacity;
	co.log_group = e->o.group;
	co.replay = noop_replay;
	rc = ckr_open(alog, &co, &e->lc);
	if (rc != 0) {
		ck_fail(e, "ckr_open (redo log)", rc);
		return -1;
	}
	ckr_stats(e->lc, &s);
	e->appended = s.log_appended;
	atomic_store(&e->pub_appended, 2 * e->appended);
	*next_tx = e->appended;
	rc = pthread_create(&e->ckt, NULL, ck_main, e);
	if (rc != 0) {
		fprintf(stderr, "ckr-tpcc: checkpointer: %s\n", strerror(rc));
		return -1;
	}
	pthread_setname_np(e->ckt, "aries-ckpt");
	e->ck_started = true;
	return 0;
}

/* ---- the engine ---- */

size_t
tpcc_db_size(const struct tpcc *e)
{
	return e->dbsz;
}

const void *
tpcc_db(const struct tpcc *e)
{
	return e->db;
}

int
tpcc_open(const struct tpcc_opts *o, struct tpcc **out, uint64_t *next_tx)
{
	struct tpcc *e = calloc(1, sizeof(*e));

	*out = NULL;
	if (e == NULL)
		return -1;
	e->o = *o;
	e->ckfd = -1;
	pthread_mutex_init(&e->lock, NULL);
	pthread_cond_init(&e->cond, NULL);
	e->dbsz = (o->db_size + OBJ_SIZE - 1) / OBJ_SIZE * OBJ_SIZE;
	e->nwords = e->dbsz / 4;
	e->be = (struct tb_backend){ .name = "capture", .can_abort = true,
		.begin = cap_begin, .set_ranges = cap_set_ranges,
		.commit = cap_commit, .abort = cap_abort };
	*out = e;
	if (oe_init(NULL, e->dbsz, o->seed, (void **)&e->w) != 0)
		return -1;
	e->st.warehouses = e->w->W;
	e->db = mmap(NULL, e->dbsz, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	e->before = malloc(BEFORE_WORDS * 4);
	e->rec = malloc(sizeof(struct redo) + 12 * BEFORE_WORDS);
	e->stage = malloc(CHUNK);
	if (e->db == MAP_FAILED || !e->before || !e->rec || !e->stage) {
		if (e->db == MAP_FAILED)
			e->db = NULL;
		fprintf(stderr, "ckr-tpcc: out of memory\n");
		return -1;
	}
	if (o->mode != TPCC_NONE && mkdir(o->dir, 0755) != 0 &&
	    errno != EEXIST) {
		perror(o->dir);
		return -1;
	}
	if (o->mode == TPCC_CKR)
		return ckr_mode_open(e, next_tx);
	if (o->mode == TPCC_ARIES)
		return aries_open(e, next_tx);
	load(e, o->seed);
	*next_tx = 0;
	return 0;
}

int
tpcc_poc(struct tpcc *e)
{
	int rc = 0;

	if (e->o.mode == TPCC_CKR) {
		rc = ckr_point_of_consistency(e->c, 0);
		if (rc < 0) {
			ck_fail(e, "ckr_point_of_consistency", rc);
			return -1;
		}
		return rc;
	}
	if (e->o.mode != TPCC_ARIES)
		return 0;
	if (atomic_load(&e->ck_err) != 0)
		return -1;
	pthread_mutex_lock(&e->lock);
	if (e->ck_req)
		goto out;
	if (e->ck_unacked) {
		/* the last checkpoint is complete: the log ring may release
		 * the records before the one before it (T3, tpcc.h) */
		rc = ckr_point_of_consistency(e->lc, 0);
		if (rc < 0) {
			ck_fail(e, "ckr_point_of_consistency (redo log)", rc);
			pthread_mutex_unlock(&e->lock);
			return -1;
		}
		if (rc == 0)
			goto out;
		e->ck_unacked = false;
	}
	e->ck_lsn = e->appended; /* between two transactions (T3) */
	e->ck_req = true;
	pthread_cond_signal(&e->cond);
	rc = 1;
out:
	pthread_mutex_unlock(&e->lock);
	return rc;
}

int
tpcc_durable(struct tpcc *e, uint64_t n)
{
	int rc = 0;

	if (e->o.mode == TPCC_CKR)
		rc = ckr_log_wait(e->c, n + 1); /* action 0 is the load */
	else if (e->o.mode == TPCC_ARIES)
		rc = ckr_log_wait(e->lc, n);
	if (rc != 0) {
		ck_fail(e, "ckr_log_wait", rc);
		return -1;
	}
	return 0;
}

uint64_t
tpcc_logged(struct tpcc *e)
{
	struct ckr_stats s;

	if (e->o.mode == TPCC_CKR) {
		ckr_stats(e->c, &s);
		return s.log_appended;
	}
	return e->appended;
}

void
tpcc_stats(struct tpcc *e, struct tpcc_stats *st)
{
	struct ckr_stats s;

	if (e->o.mode == TPCC_CKR && e->c != NULL) {
		ckr_stats(e->c, &s);
		e->st.checkpoints = s.completed;
		/* records of 16 + 16 + 8 bytes (ckr_layout.h) */
		e->st.log_bytes = s.log_appended * (16 + sizeof(struct act) + 8);
	}
	pthread_mutex_lock(&e->lock);
	*st = e->st;
	pthread_mutex_unlock(&e->lock);
}

void
tpcc_state(struct tpcc *e, void *buf)
{
	uint32_t *p = buf;

	if (e->o.mode != TPCC_CKR) {
		memcpy(buf, e->db, e->dbsz);
		return;
	}
	for (uint64_t i = 0; i < e->nwords; i++)
		p[i] = ckr_read(e->c, i);
}

int
tpcc_close(struct tpcc *e)
{
	int rc = 0;

	if (e == NULL)
		return 0;
	if (e->ck_started) {
		/* a checkpoint in progress stays incomplete (A3 waits for
		 * a transaction that no longer comes) */
		pthread_mutex_lock(&e->lock);
		e->ck_stop = true;
		pthread_cond_broadcast(&e->cond);
		pthread_mutex_unlock(&e->lock);
		pthread_join(e->ckt, NULL);
		rc |= atomic_load(&e->ck_err);
	}
	if (e->c != NULL && ckr_close(e->c) != 0) {
		ck_fail(e, "ckr_close", -1);
		rc = -1;
	}
	if (e->lc != NULL && ckr_close(e->lc) != 0) {
		ck_fail(e, "ckr_close (redo log)", -1);
		rc = -1;
	}
	if (e->ckfd >= 0)
		close(e->ckfd);
	if (e->w != NULL)
		oe_fini(e->w);
	if (e->db != NULL)
		munmap(e->db, e->dbsz);
	free(e->before);
	free(e->rec);
	free(e->stage);
	pthread_mutex_destroy(&e->lock);
	pthread_cond_destroy(&e->cond);
	free(e);
	return rc != 0 ? -1 : 0;
}

int
tpcc_durable_prefix(const struct tpcc_opts *o, uint64_t *n)
{
	char path[4200];
	uint64_t count = 0;
	int rc;

	if (o->mode == TPCC_CKR)
		snprintf(path, sizeof(path), "%s", o->dir);
	else
		snprintf(path, sizeof(path), "%s/alog", o->dir);
	rc = ckr_log_scan(path, CKR_STORAGE_FILE, NULL, NULL, &count);
	if (rc == -ENOENT) {
		*n = 0;
		return 0;
	}
	if (rc != 0) {
		fprintf(stderr, "ckr-tpcc: ckr_log_scan %s: %s: %s\n", path,
			ckr_err_name(rc), ckr_errormsg());
		return -1;
	}
	/* TPCC_CKR: action 0 is the load */
	*n = o->mode == TPCC_CKR ? (count > 0 ? count - 1 : 0) : count;
	return 0;
}

size_t
tpcc_size_for(uint32_t warehouses)
{
	struct oe t;
	size_t hist = (2u << 20) / sizeof(struct oe_hist) *
		sizeof(struct oe_hist);

	memset(&t, 0, sizeof(t));
	t.W = 1;
	scale(&t, 1.0);
	return ((size_t)warehouses * layout(&t, hist) + OBJ_SIZE - 1) /
		OBJ_SIZE * OBJ_SIZE;
}
