/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckpt.c -- the asynchronous writer: double-backup slots, one per epoch
 *
 * Invariants:
 *   I1. A slot whose header passes its checks holds, durably, the data its
 *       data checksum describes: the header is invalidated and made durable
 *       before any data of the new epoch is written (W1), and written last,
 *       after the data is durable (W2 -> W4).
 *   I2. A complete slot of epoch E never includes an action that is not
 *       durable in the log: the header waits for the log to be durable
 *       through its log_seq (W3).
 *   I3. The writer reads only the period image of each word: the copy no
 *       mutator write of the running period touches (NAIVE: the shadow;
 *       BACOU: the shadow or the object under its lock; BAZZ: AS_~MW;
 *       IPP: the previous Odd/Even merged into the writer's copy; FORK: the
 *       child's copy-on-write image).
 *   I4. Writes alternate between the slots, so the other slot keeps the
 *       previous complete checkpoint while one is being written.
 *
 * Persist order of one checkpoint into slot s (the crash outcome of each):
 *   W1  zero the header, sync       crash: slot s incomplete, the other
 *                                   slot (I4) or an empty start is used
 *   W2  fill + write data, sync     crash: slot s incomplete (header zero)
 *   W3  wait: log durable >= log_seq
 *   W4  write the header, sync      crash before: incomplete; after:
 *                                   slot s is complete (epoch E)
 *       release the log before the previous complete checkpoint (L4
 *       in log.c): its slot is the one the next checkpoint overwrites
 *   W5  busy = 0                    the mutator may start the next period
 *
 * Deliberately broken builds (discount/fc/meson.build), each caught by
 * tests/ckr/crash_test.cpp:
 *   CKR_BROKEN_HDR_BEFORE_DATA  W4 before W2: a slot marked complete while
 *                               its data is still being written (I1);
 *   CKR_BROKEN_WRITER_READS_LIVE the writer reads the mutator's current
 *                               cells, already overwritten for the next
 *                               period (I3);
 *   CKR_BROKEN_RELEASE_EARLY    the log before a checkpoint is released
 *                               when it starts, not after W4 (log.c L4):
 *                               caught by [kill-ring].
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckr_int.h"
#include "rio_int.h"

static const struct rio__hdr_rule slot_rule =
	CKR__HDR_RULE("ckr checkpoint slot", CKR_SLOT_MAGIC);

static uint64_t
hdr_csum(const struct ckr_slot_hdr *h)
{
	return rio_checksum(h, offsetof(struct ckr_slot_hdr, csum),
		CKR_SLOT_CSUM_SEED);
}

/*
 * Read and check slot `slot`'s header; nwords 0 takes the state size from
 * the header (a reader without options).  With check_log the slot must go
 * with log log_id.  Then verify the data checksum.
 */
int
ckr__slot_read_hdr(struct ckr_media *m, uint64_t nwords, uint32_t obj_size,
	int slot, struct ckr_slot_hdr *h, uint64_t log_id, bool check_log)
{
	struct rio__hdr_view v;
	char why[256];
	uint64_t off, csum, left, base;
	char *buf;
	int rc;

	if (nwords == 0) {
		if (m->size < 2 * (CKR_HDR_SIZE + 4096) || m->size % 8192)
			return ckr__err(CKR_ESIZE, "%s: size %llu is not two "
				"slots", m->path, (unsigned long long)m->size);
	} else if (m->size != 2 * ckr__slot_size(nwords)) {
		return ckr__err(CKR_ESIZE, "%s: %llu bytes, but a state of "
			"%llu words needs %llu", m->path,
			(unsigned long long)m->size, (unsigned long long)nwords,
			(unsigned long long)(2 * ckr__slot_size(nwords)));
	}
	base = (uint64_t)slot * (m->size / 2);
	rc = ckr__media_read(m, base, h, sizeof(*h));
	if (rc != 0)
		return rc;
	if (rio__all_zero(h, sizeof(*h)))
		return ckr__err(CKR_EBADMAGIC, "%s: slot %d was never "
			"completed (empty header)", m->path, slot);
	CKR__HDR_VIEW(v, h, hdr_csum(h) == h->csum);
	rc = rio__hdr_check(&slot_rule, &v, RIO__HDR_WRITE, why, sizeof(why));
	if (rc != 0)
		return ckr__err(rc, "%s: slot %d: %s", m->path, slot, why);
	if (nwords == 0)
		nwords = h->nwords;
	if (h->nwords != nwords || ckr__slot_size(nwords) != m->size / 2 ||
	    h->obj_size < 4 || (h->obj_size & (h->obj_size - 1)) ||
	    (obj_size != 0 && h->obj_size != obj_size) ||
	    h->chunk != CKR_CHUNK)
		return ckr__err(CKR_ESIZE, "%s: slot %d holds %llu words of "
			"objects of %u bytes (chunk %u), not %llu words of "
			"objects of %u", m->path, slot,
			(unsigned long long)h->nwords, h->obj_size, h->chunk,
			(unsigned long long)nwords, obj_size);
	if (check_log && h->log_id != log_id)
		return ckr__err(CKR_EMISMATCH, "%s: slot %d goes with log "
			"%016llx, this log is %016llx", m->path, slot,
			(unsigned long long)h->log_id,
			(unsigned long long)log_id);
	buf = malloc(CKR_CHUNK);
	if (buf == NULL)
		return ckr__err(-ENOMEM, "slot check: no memory");
	csum = CKR_DATA_CSUM_SEED;
	off = base + CKR_HDR_SIZE;
	for (left = nwords * 4; left > 0;) {
		size_t n = left < CKR_CHUNK ? left : CKR_CHUNK;

		rc = ckr__media_read(m, off, buf, n);
		if (rc != 0) {
			free(buf);
			return rc;
		}
		csum = rio_checksum(buf, n, csum);
		off += n;
		left -= n;
	}
	free(buf);
	if (csum != h->data_csum)
		return ckr__err(CKR_EDATA, "%s: slot %d (epoch %llu): data "
			"checksum mismatch under a valid header", m->path, slot,
			(unsigned long long)h->epoch);
	return 0;
}

int
ckr__slot_load(struct ckr_media *m, uint64_t nwords, int slot,
	const struct ckr_slot_hdr *h, uint32_t *dst)
{
	(void)h;
	return ckr__media_read(m, (uint64_t)slot * ckr__slot_size(nwords) +
		CKR_HDR_SIZE, dst, nwords * 4);
}

/* BACOU: the mutator's first write to object blk in this period. */
void
ckr__bacou_slow(ckr *c, uint64_t blk)
{
	uint8_t *st = &c->hot.blk[blk];
	uint64_t w0 = blk << c->hot.obj_shift;

	for (;;) {
		uint8_t s = __atomic_load_n(st, __ATOMIC_ACQUIRE);

		if (s >= CKR__BLK_COPIED)
			return;
		if (s == CKR__BLK_CLEAN &&
		    __atomic_compare_exchange_n(st, &s, CKR__BLK_LOCKED, false,
			    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			memcpy(c->shadow + w0, c->hot.as + w0,
				(size_t)c->obj_words * 4);
			/* release: the shadow copy is visible before COPIED */
			__atomic_store_n(st, CKR__BLK_COPIED, __ATOMIC_RELEASE);
			return;
		}
		__builtin_ia32_pause();
	}
}

/* Copy the period image of words [w0, w0 + n) to dst (I3). */
static void
fill(ckr *c, uint64_t w0, uint64_t n, uint32_t *dst)
{
	struct ckr__hot *h = &c->hot;

	switch (h->algo) {
	case CKR_NAIVE:
	case CKR_FORK:
#ifdef CKR_BROKEN_WRITER_READS_LIVE
		memcpy(dst, h->as + w0, n * 4);
#else
		memcpy(dst, (h->algo == CKR_NAIVE ? c->shadow : h->as) + w0,
			n * 4);
#endif
		return;
	case CKR_BACOU:
		for (uint64_t k = 0; k < n; k += c->obj_words) {
			uint64_t b = (w0 + k) >> h->obj_shift;
			uint8_t *st = &h->blk[b];
			size_t bytes = (size_t)c->obj_words * 4;
#ifdef CKR_BROKEN_WRITER_READS_LIVE
			(void)st;
			memcpy(dst + k, h->as + w0 + k, bytes);
			continue;
#endif
			for (;;) {
				uint8_t s = __atomic_load_n(st,
					__ATOMIC_ACQUIRE);

				if (s == CKR__BLK_COPIED) {
					memcpy(dst + k, c->shadow + w0 + k,
						bytes);
					break;
				}
				if (s == CKR__BLK_CLEAN &&
				    __atomic_compare_exchange_n(st, &s,
					    CKR__BLK_LOCKED, false,
					    __ATOMIC_ACQUIRE,
					    __ATOMIC_RELAXED)) {
					memcpy(dst + k, h->as + w0 + k, bytes);
					/* release: our reads are done before
					 * the mutator may write the object */
					__atomic_store_n(st, CKR__BLK_WRITTEN,
						__ATOMIC_RELEASE);
					break;
				}
				__builtin_ia32_pause();
			}
		}
		return;
	case CKR_BAZZ:
		for (uint64_t k = 0; k < n; k++) {
			uint64_t i = w0 + k;
			const struct ckr__zz_bits *b = &h->bits[i >> 8];
#ifdef CKR_BROKEN_WRITER_READS_LIVE
			unsigned src = (b->mr[(i >> 6) & 3] >> (i & 63)) & 1;
#else
			unsigned src = !((b->mw[(i >> 6) & 3] >> (i & 63)) & 1);
#endif
			dst[k] = h->zz[src][i];
		}
		return;
	case CKR_IPP: {
		unsigned prev = h->cur ^ 1;

		for (uint64_t k = 0; k < n; k++) {
			struct ckr__ipp_rec *r = &h->ipp[w0 + k];

			if (r->mark[prev]) {
				c->ck[w0 + k] = r->cp[prev];
				r->mark[prev] = 0;
			}
#ifdef CKR_BROKEN_WRITER_READS_LIVE
			dst[k] = r->as;
#else
			dst[k] = c->ck[w0 + k];
#endif
		}
		return;
	}
	}
}

/* W2: fill and write the data of slot s; returns its checksum in *csum. */
static int
write_data(ckr *c, int s, uint64_t *csum)
{
	struct ckr_media *m = &c->ckpt;
	uint64_t nwords = c->hot.nwords, base, cw = CKR_CHUNK / 4;
	int rc;

	base = (uint64_t)s * ckr__slot_size(nwords) + CKR_HDR_SIZE;
	*csum = CKR_DATA_CSUM_SEED;
	for (uint64_t w = 0; w < nwords; w += cw) {
		uint64_t n = nwords - w < cw ? nwords - w : cw;
		uint32_t *dst = m->kind == CKR_STORAGE_POOL ?
			(uint32_t *)(m->base + base + w * 4) : c->stage;

		fill(c, w, n, dst);
		*csum = rio_checksum(dst, n * 4, *csum);
		if (m->kind == CKR_STORAGE_POOL)
			/* the lines are drained at the sync below */
			rio_flush(m->pool, dst, n * 4);
		else if ((rc = ckr__media_write(m, base + w * 4, dst,
				  n * 4)) != 0)
			return rc;
	}
	return 0;
}

static void
make_hdr(ckr *c, struct ckr_slot_hdr *h, uint64_t csum)
{
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, CKR_SLOT_MAGIC, 8);
	h->major = CKR_MAJOR;
	h->minor = CKR_MINOR;
	h->algo = c->hot.algo;
	h->epoch = c->epoch;
	h->log_seq = c->ck_log_seq;
	h->nwords = c->hot.nwords;
	h->obj_size = c->opts.obj_size;
	h->chunk = CKR_CHUNK;
	h->data_csum = csum;
	h->log_id = c->log_id;
	h->log_off = CKR_HDR_SIZE + c->ck_lpos % c->opts.log_capacity;
	h->csum = hdr_csum(h);
}

static int
write_hdr(ckr *c, int s, const struct ckr_slot_hdr *h)
{
	uint64_t off = (uint64_t)s * ckr__slot_size(c->hot.nwords);
	int rc = ckr__media_write(&c->ckpt, off, h, sizeof(*h));

	/* W4 (or W1): the header is durable before the slot is reported
	 * complete (or, for W1, before any data of the new epoch is written) */
	return rc != 0 ? rc : ckr__media_sync(&c->ckpt);
}

/* The fork child: W1 and W2 from its copy-on-write image; the checksum
 * goes to the parent's writer through the pipe. */
static void
fork_child(ckr *c, int fd)
{
	struct ckr_slot_hdr z;
	uint64_t csum;
	int s = c->next_slot;

	memset(&z, 0, sizeof(z));
	if (write_hdr(c, s, &z) != 0 || write_data(c, s, &csum) != 0 ||
	    ckr__media_sync(&c->ckpt) != 0)
		_exit(1);
	if (write(fd, &csum, sizeof(csum)) != (ssize_t)sizeof(csum))
		_exit(1);
	_exit(0);
}

int
ckr__fork_start(ckr *c)
{
	int p[2];
	pid_t pid;

	if (pipe2(p, O_CLOEXEC) != 0)
		return ckr__errno("fork snapshot: pipe");
	pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return ckr__errno("fork snapshot: fork");
	}
	if (pid == 0) {
		close(p[0]);
		/* a snapshot child never outlives a crashed parent: it would
		 * go on writing a slot the next run reuses */
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		fork_child(c, p[1]);
	}
	close(p[1]);
	c->child = pid;
	c->child_pipe = p[0];
	return 0;
}

static int
fork_wait(ckr *c, uint64_t *csum)
{
	ssize_t n;
	int status = 0;

	do
		n = read(c->child_pipe, csum, sizeof(*csum));
	while (n < 0 && errno == EINTR);
	close(c->child_pipe);
	c->child_pipe = -1;
	while (waitpid(c->child, &status, 0) < 0 && errno == EINTR)
		;
	if (n != (ssize_t)sizeof(*csum) || !WIFEXITED(status) ||
	    WEXITSTATUS(status) != 0)
		return ckr__err(-EIO, "fork snapshot: child %d failed writing "
			"slot %d (status 0x%x)", (int)c->child, c->next_slot,
			status);
	return 0;
}

#ifdef CKR_BROKEN_HDR_BEFORE_DATA
/* The broken build only: with CKR_TEST_KILL_IN_WINDOW=1 in the
 * environment (tests/ckr/crash_test.cpp sets it in some children), the
 * process dies here, its slot's header written and its data not, so that
 * the crash test catches the broken order on any machine, and not only
 * when a kill from outside happens to land in the slot write. */
static void
broken_window(void)
{
	const char *e = getenv("CKR_TEST_KILL_IN_WINDOW");

	if (e != NULL && strcmp(e, "1") == 0)
		raise(SIGKILL);
}
#endif

static int
write_checkpoint(ckr *c)
{
	struct ckr_slot_hdr h;
	uint64_t csum = 0;
	int s = c->next_slot, rc;

#ifdef CKR_BROKEN_RELEASE_EARLY
	/* broken: the log before this checkpoint released before it is
	 * complete, while the older slot still needs it (L4) */
	pthread_mutex_lock(&c->llock);
	c->head_lpos = c->ck_lpos;
	pthread_mutex_unlock(&c->llock);
#endif
	if (c->hot.algo == CKR_FORK) {
		rc = fork_wait(c, &csum);
	} else {
#ifdef CKR_BROKEN_HDR_BEFORE_DATA
		/* broken: the whole image staged, the header written and
		 * made durable before the data is written */
		uint32_t *all = malloc(c->hot.nwords * 4);
		uint64_t cw = CKR_CHUNK / 4;

		if (all == NULL)
			return ckr__err(-ENOMEM, "broken writer");
		csum = CKR_DATA_CSUM_SEED;
		for (uint64_t w = 0; w < c->hot.nwords; w += cw) {
			uint64_t n = c->hot.nwords - w < cw ?
				c->hot.nwords - w : cw;
			fill(c, w, n, all + w);
			csum = rio_checksum(all + w, n * 4, csum);
		}
		rc = ckr__log_wait(c, c->ck_log_seq);
		make_hdr(c, &h, csum);
		if (rc == 0)
			rc = write_hdr(c, s, &h);
		if (rc == 0)
			broken_window();
		if (rc == 0)
			rc = ckr__media_write(&c->ckpt,
				(uint64_t)s * ckr__slot_size(c->hot.nwords) +
					CKR_HDR_SIZE,
				all, c->hot.nwords * 4);
		if (rc == 0)
			rc = ckr__media_sync(&c->ckpt);
		free(all);
		if (rc == 0) {
			c->next_slot ^= 1;
			ckr__log_release(c);
		}
		return rc;
#else
		memset(&h, 0, sizeof(h));
		rc = write_hdr(c, s, &h); /* W1 */
		if (rc == 0)
			rc = write_data(c, s, &csum);
		/* W2: the data is durable before the header can say so */
		if (rc == 0)
			rc = ckr__media_sync(&c->ckpt);
#endif
	}
	if (rc == 0)
		rc = ckr__log_wait(c, c->ck_log_seq); /* W3 */
	if (rc == 0) {
		make_hdr(c, &h, csum);
		rc = write_hdr(c, s, &h); /* W4 */
	}
	if (rc == 0) {
		c->next_slot ^= 1; /* I4 */
		ckr__log_release(c); /* L4: after W4 */
	}
	return rc;
}

void *
ckr__writer_main(void *arg)
{
	ckr *c = arg;
	int rc;

	pthread_mutex_lock(&c->wlock);
	for (;;) {
		while (atomic_load(&c->busy) == 0 && !c->wstop)
			pthread_cond_wait(&c->wcond, &c->wlock);
		if (atomic_load(&c->busy) == 0)
			break;
		pthread_mutex_unlock(&c->wlock);
		rc = write_checkpoint(c);
		if (rc != 0)
			ckr__fail(c, rc);
		pthread_mutex_lock(&c->wlock);
		if (rc == 0)
			c->st.completed++;
		/* W5, release: the writer's reads of this period's image are
		 * done before the mutator starts the next period */
		atomic_store_explicit(&c->busy, 0, memory_order_release);
		pthread_cond_broadcast(&c->wcond);
	}
	pthread_mutex_unlock(&c->wlock);
	return NULL;
}
