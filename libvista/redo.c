/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * redo.c -- redo mode (VISTA_MODE_REDO): a DRAM working copy, a redo log
 *
 * The program stores into a DRAM copy of the segment's user area after
 * vista_set_range, as in undo mode.  set_range keeps the before-image in
 * DRAM (for abort) and persists nothing.  Commit appends one record -- the
 * after-images of the declared ranges behind a commit record whose check
 * covers them -- to the ring of the redo log, writes it back and fences
 * ONCE (R1); the transaction is durable after that fence.  The home copy in
 * the segment pool is written lazily, at a checkpoint: each dirty line is
 * copied from DRAM and written back once however many transactions wrote
 * it (coalesced).
 *
 * Persist order (docs/FORMAT.md, "Redo mode"):
 *  R1  commit: record stores, every line of it written back, fence F1.
 *      F1 makes the record durable; the transaction returned after F1 is
 *      replayed by recovery.  Lines persist in any order before F1: the
 *      check over the whole record is what keeps a torn record out.
 *  R2  checkpoint (when half the ring is used, at unmap, after recovery):
 *      every dirty line copied DRAM -> home and written back, fence F2:
 *      home now holds every transaction below next_seq (a line copied
 *      earlier may reach media any time before: it holds only committed
 *      bytes, the checkpoint runs between transactions).  Then the next
 *      checkpoint slot {n+1, next_seq, tail, seg_id}, written back, fence
 *      F3: the ring before tail may be reused from now on.  Without F2
 *      first, a crash could find the slot past records whose data is not
 *      home yet (lost transactions); without F3 before the ring is reused,
 *      a crash could find the old slot and replay a prefix of records
 *      partly overwritten (older images over newer home data).
 *  R3  abort: the before-images back into DRAM; nothing persisted.
 *  R4  recovery (vista_map): replay seq, seq+1, ... from the current slot
 *      while each record verifies, onto home, then R2 (F2, F3) with
 *      the log empty; then the DRAM copy is loaded from home.
 *
 * Scope: one segment per instance, used raw (no heap), one transaction at
 * a time (one lane: another thread's vista_begin_transaction gets
 * VISTA_ENOLANE while one runs), no VISTA_TX_AUTO, no VISTA_TX_NO_FLUSH,
 * no transaction hook.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "redo_layout.h"
#include "rio_int.h"
#include "vista_int.h"

struct redo_range {
	uint64_t off, len;
};

struct vista_redo {
	rio_pool *log;
	struct vista_redo_hdr *hdr;
	struct vista_redo_ckpt *ckpt; /* two slots */
	char *area;
	uint64_t area_size;
	uint64_t salt;
	uint64_t ck_n;      /* current checkpoint number */
	uint64_t next_seq;  /* the next commit's seq */
	uint64_t tail;      /* where the next record goes */
	uint64_t used;      /* ring bytes since the last checkpoint */
	uint64_t pend_seg;  /* seg_id of records found at init, 0 if none */
	uint64_t pend_seq, pend_pos;
	int lock_fd;

	struct vista_segment *seg;
	char *dram;         /* the working copy (seg->user) */
	char *home;         /* its home copy in the pool */
	size_t size;
	uint64_t seg_id;
	uint64_t *dirty;    /* bit per line of the user area */
	uint32_t *dlist;    /* dirty lines, in the order they became dirty */
	size_t ndirty;

	/* The running transaction's thread (pthread_self, 0 if none) and
	 * whether one runs: begin takes `active` with a compare-exchange, so
	 * two threads never both run one. */
	uint64_t owner;
	bool active;
	struct redo_range *r;
	size_t nr, rcap;
	char *undo;         /* before-images, in range order */
	size_t undo_n, undo_cap;
	size_t rec_len;     /* the record's bytes so far */
	struct vista_stats st;
};

#define LINE 64u
#define PREFETCH_AHEAD 8u /* lines (measured: 4-16 alike) */
#define ROUND(x, a) (((x) + (a) - 1) & ~(uint64_t)((a) - 1))

static uint64_t
hdr_csum(const void *h)
{
	return rio_checksum(h, 4088, VISTA_LOG_CSUM_SEED);
}

/* A redo segment's header: its fields, not `bind`. */
static uint64_t
rseg_csum(const struct vista_rseg_hdr *h)
{
	return rio_checksum(h, 64, VISTA_SEGENT_CSUM_SEED);
}

/* One 8-byte store, durable before anything relies on it. */
static void
rseg_bind(struct vista_redo *r, uint64_t val)
{
	struct vista_rseg_hdr *h = rio_pool_base(r->seg->pool);
	__atomic_store_n(&h->bind, val, __ATOMIC_RELAXED);
	rio_persist(r->seg->pool, &h->bind, 8);
	r->st.fences++;
}

static int
mode_err(const char *call)
{
	return vista__err(-ENOTSUP, "%s: not available in redo mode "
				    "(VISTA_MODE_REDO)", call);
}

/* ---- the log ---- */

static int
log_format(struct vista_redo *r)
{
	struct vista_redo_hdr *h = r->hdr;
	size_t user = rio_pool_size(r->log);
	struct vista_redo_hdr tmp;
	uint64_t salt;

	if (user < VISTA_REDO_AREA_OFF + VISTA_REDO_MIN_AREA)
		return vista__err(-EINVAL, "redo log %s: %zu bytes is too "
			"small (at least %u)", rio_pool_path(r->log), user,
			VISTA_REDO_AREA_OFF + VISTA_REDO_MIN_AREA);
	if (getrandom(&salt, sizeof(salt), 0) != sizeof(salt))
		salt = (uint64_t)(uintptr_t)&tmp ^ 0x5bd1e9955bd1e995ull;
	/* Empty checkpoint slots (their checks fail): written back here,
	 * durable at the header's fence below, before the magic makes the
	 * log valid. */
	memset((char *)h + VISTA_REDO_CKPT_OFF, 0, 2 * sizeof(*r->ckpt));
	rio_flush(r->log, (char *)h + VISTA_REDO_CKPT_OFF,
		2 * sizeof(*r->ckpt));
	memset(&tmp, 0, sizeof(tmp));
	memcpy(tmp.magic, VISTA_REDO_MAGIC, sizeof(tmp.magic));
	tmp.major = VISTA_REDO_MAJOR;
	tmp.hdr_size = VISTA_REDO_HDR_SIZE;
	tmp.area_off = VISTA_REDO_AREA_OFF;
	tmp.area_size = (user - VISTA_REDO_AREA_OFF) & ~(uint64_t)4095;
	tmp.salt = salt;
	tmp.checksum = hdr_csum(&tmp);
	/* Body (and the slots above) durable, then the magic: a crash
	 * before leaves a zero magic, and the next open formats again. */
	vista__write_header(r->log, h, &tmp, sizeof(tmp));
	return 0;
}

static int
log_check(struct vista_redo *r)
{
	const struct vista_redo_hdr *h = r->hdr;
	const char *path = rio_pool_path(r->log);

	if (memcmp(h->magic, VISTA_REDO_MAGIC, 8) != 0 ||
	    h->checksum != hdr_csum(h))
		return vista__err(VISTA_ECORRUPT, "redo log %s: bad header "
			"(magic or checksum)", path);
	if (h->major != VISTA_REDO_MAJOR)
		return vista__err(VISTA_ELAYOUT, "redo log %s: format %u, this "
			"library reads %u", path, h->major, VISTA_REDO_MAJOR);
	if (h->hdr_size != VISTA_REDO_HDR_SIZE ||
	    h->area_off != VISTA_REDO_AREA_OFF || h->area_size % 4096 ||
	    h->area_size < VISTA_REDO_MIN_AREA ||
	    h->area_off + h->area_size > rio_pool_size(r->log))
		return vista__err(VISTA_ECORRUPT,
			"redo log %s: invalid header fields", path);
	return 0;
}

static bool
ckpt_ok(const struct vista_redo *r, const struct vista_redo_ckpt *c,
	unsigned slot)
{
	return c->n != 0 && (c->n & 1) == slot &&
		c->check == vista_redo_ckpt_check(r->salt, c) &&
		c->pos < r->area_size && c->pos % LINE == 0 &&
		rio__all_zero(c->reserved, sizeof(c->reserved));
}

/* The current checkpoint slot, or NULL if none was ever written. */
static const struct vista_redo_ckpt *
ckpt_current(const struct vista_redo *r)
{
	const struct vista_redo_ckpt *a = &r->ckpt[0], *b = &r->ckpt[1];
	bool ao = ckpt_ok(r, a, 0), bo = ckpt_ok(r, b, 1);

	if (ao && bo)
		return a->n > b->n ? a : b;
	return ao ? a : bo ? b : NULL;
}

/* The record of seq at pos, if it is complete; a filler there sends the
 * reader to offset 0 (*pos updated). */
static const struct vista_redo_rec *
rec_at(const struct vista_redo *r, uint64_t seg_id, uint64_t seq,
	uint64_t *pos)
{
	for (int hop = 0; hop < 2; hop++) {
		const struct vista_redo_rec *h = (const void *)(r->area + *pos);
		uint64_t room = r->area_size - *pos;
		if (h->seq != seq || h->len < sizeof(*h) || h->len > room ||
		    h->reserved != 0 || (h->flags & ~VISTA_REDO_WRAP) ||
		    (uint64_t)h->count * sizeof(struct vista_redo_desc) >
			    h->len - sizeof(*h))
			return NULL;
#ifdef VISTA_BROKEN_REDO_COMMIT_EARLY
		/* Broken: the commit record vouches for itself only. */
		if (h->check != rio_checksum((const char *)h + 8, 24,
				    vista_redo_seed(r->salt, seg_id, seq)))
			return NULL;
#else
		if (h->check != rio_checksum((const char *)h + 8, h->len - 8,
				    vista_redo_seed(r->salt, seg_id, seq)))
			return NULL;
#endif
		if (!(h->flags & VISTA_REDO_WRAP))
			return h;
		*pos = 0;
	}
	return NULL;
}

static uint64_t
stride(uint64_t len)
{
	return ROUND(len, LINE);
}

/* Apply a verified record to home (descriptors checked against size). */
static int
replay(struct vista_redo *r, const struct vista_redo_rec *h)
{
	const struct vista_redo_desc *d = (const void *)(h + 1);
	const char *data = (const char *)(d + h->count);
	const char *end = (const char *)h + h->len;

	for (uint32_t i = 0; i < h->count; i++) {
		uint64_t off = d[i].off, len = d[i].len;
		if (len == 0 || off + len > r->size ||
		    data + ROUND(len, 8) > end)
			return vista__err(VISTA_ECORRUPT, "redo log %s: record "
				"%llu: descriptor %u out of bounds",
				rio_pool_path(r->log),
				(unsigned long long)h->seq, i);
		memcpy(r->home + off, data, len);
		/* Durable at the checkpoint's F2 (R4). */
		rio_flush(r->seg->pool, r->home + off, len);
		data += ROUND(len, 8);
	}
	return 0;
}

/* R2: write the dirty lines home (F2), then the checkpoint slot (F3).
 * A failed persist (page domain: msync) stops it before the slot: the
 * instance goes to its error state (VISTA_EFATAL) and the log keeps
 * every record. */
static int
checkpoint(vista *v, struct vista_redo *r)
{
#ifdef VISTA_BROKEN_REDO_REUSE_EARLY
	bool slot_first = true; /* broken: the ring is freed first */
#else
	bool slot_first = false;
#endif
	struct vista_redo_ckpt c = { 0 }, *s;

	for (int pass = 0; pass < 2; pass++) {
		if (pass == (slot_first ? 1 : 0)) {
			for (size_t i = 0; i < r->ndirty; i++) {
				uint64_t off = (uint64_t)r->dlist[i] * LINE;
				/* The lines are scattered and cold: start
				 * loading (and owning) a few ahead. */
				if (i + PREFETCH_AHEAD < r->ndirty) {
					uint64_t po = (uint64_t)r->dlist[
						i + PREFETCH_AHEAD] * LINE;
					__builtin_prefetch(r->dram + po, 0);
					__builtin_prefetch(r->home + po, 1);
				}
				memcpy(r->home + off, r->dram + off, LINE);
				/* Durable at F2 below. */
				rio_flush(r->seg->pool, r->home + off, LINE);
				r->dirty[r->dlist[i] / 64] = 0;
			}
			r->st.flushes += r->ndirty;
			r->ndirty = 0;
			/* F2: home holds every transaction below
			 * next_seq before the slot says so. */
			rio_drain(r->seg->pool);
			r->st.fences++;
			int e = rio_pool_error(r->seg->pool);
			if (e)
				return vista__set_fatal(v, e,
					"the checkpoint's write-back");
		} else {
			c.n = r->ck_n + 1;
			c.seq = r->next_seq;
			c.pos = r->tail;
			c.seg_id = r->seg_id;
			c.check = vista_redo_ckpt_check(r->salt, &c);
			s = &r->ckpt[c.n & 1];
			*s = c;
			rio_flush(r->log, s, sizeof(*s));
			r->st.flushes++;
			/* F3: the slot is durable; from here on the
			 * ring before tail may be reused. */
			rio_drain(r->log);
			r->st.fences++;
			r->ck_n = c.n;
			r->used = 0;
		}
	}
	int e = rio_pool_error(r->log);
	return e ? vista__set_fatal(v, e, "the checkpoint") : 0;
}

int
vista__redo_init(vista *v, const struct vista_opts *o)
{
	struct vista_redo *r;
	int rc;

	if (o->rio_flags & RIO_PROTECT)
		return vista__err(-EINVAL, "vista_init: RIO_PROTECT does not "
			"apply to redo mode (the program works on DRAM)");
	r = calloc(1, sizeof(*r));
	if (r == NULL)
		return vista__err(-ENOMEM, "out of memory");
	r->lock_fd = -1;
	v->redo = r;
	rc = vista__log_pool_open(o, VISTA_REDO_LAYOUT, "redo-mode vista "
		"log (an undo-mode log opens with VISTA_MODE_UNDO)", &r->log,
		&r->lock_fd);
	if (rc)
		return rc;
	r->hdr = rio_pool_base(r->log);
	if (rio__all_zero(r->hdr, 8) && (rc = log_format(r)) != 0)
		return rc;
	if ((rc = log_check(r)) != 0)
		return rc;
	r->ckpt = (void *)((char *)r->hdr + VISTA_REDO_CKPT_OFF);
	r->area = (char *)r->hdr + VISTA_REDO_AREA_OFF;
	r->area_size = r->hdr->area_size;
	r->salt = r->hdr->salt;
	const struct vista_redo_ckpt *c = ckpt_current(r);
	if (c != NULL) {
		uint64_t pos = c->pos;
		r->ck_n = c->n;
		if (rec_at(r, c->seg_id, c->seq, &pos) != NULL) {
			/* Committed transactions not home yet: replayed
			 * when their segment is mapped. */
			r->pend_seg = c->seg_id;
			r->pend_seq = c->seq;
			r->pend_pos = c->pos;
		}
	}
	v->log = r->log;
	v->nlanes = 0;
	v->sealed = rio_pool_domain(r->log) == RIO_DOMAIN_BYTE;
	v->seg_rio_flags = (o->rio_flags & ~(RIO_PROTECT | RIO_FORCE_BYTE |
				   RIO_FORCE_CACHELINE | RIO_FORCE_PAGE)) |
		(rio_pool_domain(r->log) == RIO_DOMAIN_BYTE ? RIO_FORCE_BYTE :
		 rio_pool_domain(r->log) == RIO_DOMAIN_CACHELINE ?
			 RIO_FORCE_CACHELINE : RIO_FORCE_PAGE);
	return 0;
}

/* ---- the segment ---- */

static void
seg_drop(struct vista_redo *r)
{
	struct vista_segment *s = r->seg;

	if (s == NULL)
		return;
	if (s->pool != NULL)
		rio_pool_close(s->pool);
	if (r->dram != NULL)
		munmap(r->dram, r->size);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
	free(r->dirty);
	free(r->dlist);
	free(s);
	r->seg = NULL;
	r->dram = r->home = NULL;
	r->dirty = NULL;
	r->dlist = NULL;
	r->ndirty = 0;
}

/* The header of a new segment (its home copy is zero).  Body, then
 * magic: a crash before leaves a zero magic, and the next vista_map with
 * VISTA_CREATE formats again. */
static void
seg_format(struct vista_redo *r, rio_pool *pool, void *addr, size_t size)
{
	struct vista_rseg_hdr tmp = { 0 };

	memcpy(tmp.magic, VISTA_RSEG_MAGIC, 8);
	tmp.major = VISTA_REDO_MAJOR;
	tmp.hdr_size = 4096;
	tmp.addr = (uintptr_t)addr;
	tmp.size = size;
	do {
		if (getrandom(&tmp.seg_id, 8, 0) != 8)
			tmp.seg_id = rio_mix64((uintptr_t)&tmp ^ r->salt);
	} while (tmp.seg_id == 0);
	tmp.checksum = rseg_csum(&tmp);
	vista__write_header(pool, rio_pool_base(pool), &tmp, sizeof(tmp));
}

static int
seg_create(vista *v, struct vista_redo *r, const char *path, void *addr,
	size_t size, rio_pool **pool)
{
	struct rio_pool_opts po = { .layout = VISTA_RSEG_LAYOUT };
	int rc;

	if (addr == NULL || size == 0)
		return vista__err(-EINVAL, "vista_map(%s): a new segment needs "
			"an address and a size", path);
	size = ROUND(size, 4096);
	rc = rio_pool_create_opts(path, RIO_POOL_HDR_SIZE + 4096 + size,
		v->seg_rio_flags, &po, pool);
	if (rc)
		return rc;
	seg_format(r, *pool, addr, size);
	return 0;
}

int
vista__redo_map(vista *v, const char *path, void *addr, size_t size,
	unsigned flags, vista_segment **out)
{
	struct vista_redo *r = v->redo;
	struct rio_pool_opts po = { .layout = VISTA_RSEG_LAYOUT };
	rio_pool *pool = NULL;
	struct vista_segment *s;
	int rc;

	if (r->seg != NULL)
		return vista__err(-ENOSPC, "vista_map(%s): a redo-mode instance "
			"maps one segment", path);
	rc = rio_pool_open_opts(path, v->seg_rio_flags, &po, &pool);
	if (rc == 0 && (flags & VISTA_EXCL)) {
		rio_pool_close(pool);
		return vista__err(-EEXIST, "vista_map: %s exists", path);
	}
	if (rc == -ENOENT && (flags & VISTA_CREATE))
		rc = seg_create(v, r, path, addr, size, &pool);
	if (rc == RIO_ELAYOUT)
		return vista__err(VISTA_ELAYOUT, "%s is not a redo-mode vista "
			"segment (an undo-mode segment maps under "
			"VISTA_MODE_UNDO): %s", path, rio_errormsg());
	if (rc)
		return rc;
	s = calloc(1, sizeof(*s));
	if (s == NULL) {
		rio_pool_close(pool);
		return vista__err(-ENOMEM, "out of memory");
	}
	s->v = v;
	s->pool = pool;
	s->lock_fd = -1;
	r->seg = s;
	const struct vista_rseg_hdr *h = rio_pool_base(pool);
	if (rio__all_zero(h->magic, 8)) {
		/* A create that crashed before its header was durable. */
		if (!(flags & VISTA_CREATE) || addr == NULL) {
			rc = vista__err(VISTA_ECORRUPT, "vista_map(%s): the "
				"segment's creation never finished; map it "
				"with VISTA_CREATE and its address", path);
			goto fail;
		}
		seg_format(r, pool, addr,
			(rio_pool_size(pool) - 4096) & ~(size_t)4095);
	}
	if (memcmp(h->magic, VISTA_RSEG_MAGIC, 8) != 0 ||
	    h->checksum != rseg_csum(h) || h->major != VISTA_REDO_MAJOR ||
	    h->size % 4096 || h->size == 0 || h->addr % 4096 ||
	    h->seg_id == 0 || 4096 + h->size > rio_pool_size(pool)) {
		rc = vista__err(VISTA_ECORRUPT, "vista_map(%s): bad segment "
			"header", path);
		goto fail;
	}
	if (addr != NULL && (uintptr_t)addr != h->addr) {
		rc = vista__err(-EINVAL, "vista_map(%s): the segment maps at "
			"0x%llx, not %p", path, (unsigned long long)h->addr,
			addr);
		goto fail;
	}
	s->lock_fd = open(path, O_RDONLY | O_CLOEXEC);
	if (s->lock_fd < 0 || flock(s->lock_fd, LOCK_EX | LOCK_NB) != 0) {
		rc = vista__err(VISTA_EMAPPED, "vista_map(%s): mapped by "
			"another instance or process", path);
		goto fail;
	}
	if (h->bind != 0 && h->bind != r->salt) {
		rc = vista__err(VISTA_EOTHERLOG, "vista_map(%s): the segment "
			"was not unmapped cleanly and belongs to another redo "
			"log", path);
		goto fail;
	}
	if (r->pend_seg != 0 && r->pend_seg != h->seg_id) {
		rc = vista__err(VISTA_EPENDING, "vista_map(%s): the log holds "
			"committed transactions of another segment, not home "
			"yet; map that one first", path);
		goto fail;
	}
	r->size = h->size;
	r->seg_id = h->seg_id;
	r->home = (char *)rio_pool_base(pool) + 4096;
	r->dirty = calloc(h->size / LINE / 64 + 1, 8);
	r->dlist = malloc(h->size / LINE * sizeof(uint32_t));
	if (r->dirty == NULL || r->dlist == NULL) {
		rc = vista__err(-ENOMEM, "out of memory");
		goto fail;
	}
	void *m = mmap((void *)(uintptr_t)h->addr, h->size,
		PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (m == MAP_FAILED || m != (void *)(uintptr_t)h->addr) {
		if (m != MAP_FAILED)
			munmap(m, h->size);
		rc = vista__err(RIO_EADDRINUSE, "vista_map(%s): 0x%llx + %llu "
			"is in use", path, (unsigned long long)h->addr,
			(unsigned long long)h->size);
		goto fail;
	}
	r->dram = m;
	if (h->bind != r->salt)
		/* Bound to this log before any record can name it: only
		 * this log can bring it up to date after a crash. */
		rseg_bind(r, r->salt);
	/* R4: replay what the log holds for this segment, in order. */
	if (r->pend_seg == h->seg_id) {
		uint64_t seq = r->pend_seq, pos = r->pend_pos;
		const struct vista_redo_rec *rec;
		while ((rec = rec_at(r, r->seg_id, seq, &pos)) != NULL) {
			if ((rc = replay(r, rec)) != 0)
				goto fail;
			r->st.recovered_tx++;
			pos += stride(rec->len);
			if (pos == r->area_size)
				pos = 0;
			seq++;
		}
		r->next_seq = seq;
		r->tail = pos;
		r->pend_seg = 0;
	} else {
		const struct vista_redo_ckpt *c = ckpt_current(r);
		r->next_seq = c != NULL ? c->seq : 1;
		r->tail = c != NULL ? c->pos : 0;
	}
	/* F2 makes the replayed images home, F3 a slot naming this segment
	 * and the first free record (R2 with nothing dirty in DRAM). */
	if ((rc = checkpoint(v, r)) != 0)
		goto fail;
	memcpy(r->dram, r->home, r->size);
	s->user = r->dram;
	s->user_size = r->size;
	s->base = rio_pool_base(pool);
	*out = s;
	return 0;
fail:
	seg_drop(r);
	return rc;
}

int
vista__redo_unmap(vista_segment *s)
{
	struct vista_redo *r = s->v->redo;

	if (__atomic_load_n(&r->active, __ATOMIC_RELAXED))
		return vista__err(VISTA_EINTX, "vista_unmap: a transaction is "
			"running");
	/* R2: everything committed is home, the log empty; then the
	 * segment is clean (any redo log may map it).  After a failed
	 * checkpoint it stays bound: only this log can finish it. */
	int crc = checkpoint(s->v, r);
	if (crc == 0)
		rseg_bind(r, 0);
	int rc = rio_pool_close(s->pool);
	s->pool = NULL;
	seg_drop(r);
	return crc ? crc : rc;
}

int
vista__redo_fini(vista *v)
{
	struct vista_redo *r = v->redo;
	int rc = 0;

	if (r == NULL)
		return 0;
	if (__atomic_load_n(&r->active, __ATOMIC_RELAXED))
		return vista__err(VISTA_EINTX, "vista_fini: a transaction is "
			"running");
	if (r->seg != NULL)
		rc = vista__redo_unmap(r->seg);
	return rc;
}

void
vista__redo_free(vista *v)
{
	struct vista_redo *r = v->redo;

	if (r == NULL)
		return;
	seg_drop(r);
	if (r->log != NULL)
		rio_pool_close(r->log);
	if (r->lock_fd >= 0)
		close(r->lock_fd);
	free(r->r);
	free(r->undo);
	free(r);
	v->redo = NULL;
	v->log = NULL;
}

/* Is [addr, addr+len) inside the DRAM copy? */
static bool
inside(const struct vista_redo *r, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr;
	return a >= (uintptr_t)r->dram && len <= r->size &&
		a - (uintptr_t)r->dram <= r->size - len;
}

int
vista__redo_persist(vista_segment *s, const void *addr, size_t len)
{
	struct vista_redo *r = s->v->redo;
	uintptr_t a = (uintptr_t)addr;

	if (!inside(r, addr, len))
		return vista__err(VISTA_ERANGE, "vista_segment_persist: the "
			"range is not inside the segment");
	if (__atomic_load_n(&r->active, __ATOMIC_RELAXED))
		return vista__err(VISTA_EINTX, "vista_segment_persist: a "
			"transaction is running");
	uint64_t off = a - (uintptr_t)r->dram;
	memcpy(r->home + off, addr, len);
	/* The range home, then durable: it is older than every record the
	 * log may replay over it later. */
	rio_persist(s->pool, r->home + off, len);
	r->st.fences++;
	return 0;
}

/* ---- transactions ---- */

static uint64_t
self(void)
{
	return (uint64_t)pthread_self();
}

int
vista__redo_begin(vista *v, unsigned flags)
{
	struct vista_redo *r = v->redo;

	if (flags & ~VISTA_TX_AUTO & ~VISTA_TX_NO_FLUSH)
		return vista__err(-EINVAL,
			"vista_begin_transaction: unknown flags 0x%x", flags);
	if (flags)
		return mode_err("vista_begin_transaction(VISTA_TX_AUTO or "
				"VISTA_TX_NO_FLUSH)");
	if (r->seg == NULL)
		return vista__err(-EINVAL, "vista_begin_transaction: no "
			"segment is mapped");
	/* relaxed: the sticky error flag (vista__set_fatal()). */
	if (__atomic_load_n(&v->fatal, __ATOMIC_RELAXED))
		return vista__err(VISTA_EFATAL, "vista_begin_transaction: the "
			"instance is in its error state; reopen it");
	bool idle = false;
	/* acquire: pairs with the release in tx_end(); the previous
	 * transaction's DRAM state is this one's. */
	if (!__atomic_compare_exchange_n(&r->active, &idle, true, false,
		    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
		/* relaxed: only this thread ever stores its own id. */
		return __atomic_load_n(&r->owner, __ATOMIC_RELAXED) == self() ?
			vista__err(VISTA_EINTX, "vista_begin_transaction: a "
				"transaction is already active on this thread") :
			vista__err(VISTA_ENOLANE, "vista_begin_transaction: "
				"another thread's transaction is running (redo "
				"mode runs one at a time)");
	__atomic_store_n(&r->owner, self(), __ATOMIC_RELAXED);
	r->nr = r->undo_n = 0;
	r->rec_len = sizeof(struct vista_redo_rec);
	r->st.tx_begun++;
	return 0;
}

static bool
mine(const struct vista_redo *r)
{
	/* relaxed: a thread finds its own id only if it stored it. */
	return __atomic_load_n(&r->owner, __ATOMIC_RELAXED) == self();
}

/* The transaction is over: another thread may begin. */
static void
tx_end(struct vista_redo *r)
{
	__atomic_store_n(&r->owner, 0, __ATOMIC_RELAXED);
	/* release: pairs with the acquire in vista__redo_begin(). */
	__atomic_store_n(&r->active, false, __ATOMIC_RELEASE);
}

static int
declare(struct vista_redo *r, void *addr, size_t len, const char *call)
{
	uintptr_t a = (uintptr_t)addr;

	if (!inside(r, addr, len))
		return vista__err(VISTA_ERANGE, "%s(%p, %zu): the range is not "
			"inside the segment's user area", call, addr, len);
	size_t pieces = (len + VISTA_REDO_DESC_MAX_LEN - 1) /
		VISTA_REDO_DESC_MAX_LEN;
	size_t more = pieces * sizeof(struct vista_redo_desc) + ROUND(len, 8) +
		pieces * 8;
	/* Half the ring is the largest record: with at most half used
	 * before a commit, a record and a filler always fit (R2). */
	if (r->rec_len + more + LINE > r->area_size / 4)
		return vista__err(VISTA_ELOGFULL, "%s: the transaction's after-"
			"images outgrow a quarter of the redo log (%llu bytes)",
			call, (unsigned long long)r->area_size);
	if (r->nr + pieces > r->rcap) {
		size_t cap = r->rcap ? r->rcap * 2 : 64;
		while (cap < r->nr + pieces)
			cap *= 2;
		void *p = realloc(r->r, cap * sizeof(*r->r));
		if (p == NULL)
			return vista__err(-ENOMEM, "out of memory");
		r->r = p;
		r->rcap = cap;
	}
	if (r->undo_n + len > r->undo_cap) {
		size_t cap = r->undo_cap ? r->undo_cap * 2 : 4096;
		while (cap < r->undo_n + len)
			cap *= 2;
		void *p = realloc(r->undo, cap);
		if (p == NULL)
			return vista__err(-ENOMEM, "out of memory");
		r->undo = p;
		r->undo_cap = cap;
	}
	/* The before-image, in DRAM only (R3). */
	memcpy(r->undo + r->undo_n, addr, len);
	r->undo_n += len;
	uint64_t off = a - (uintptr_t)r->dram;
	while (len > 0) {
		uint64_t n = len < VISTA_REDO_DESC_MAX_LEN ? len :
			VISTA_REDO_DESC_MAX_LEN;
		r->r[r->nr++] = (struct redo_range){ off, n };
		r->rec_len += sizeof(struct vista_redo_desc) + ROUND(n, 8);
		off += n;
		len -= n;
	}
	r->st.bytes_logged += 0;
	return 0;
}

int
vista__redo_set_range(vista *v, void *addr, size_t len)
{
	struct vista_redo *r = v->redo;

	if (!mine(r))
		return vista__err(VISTA_ENOTX, "vista_set_range: no "
			"transaction is active on this thread");
	r->st.set_ranges++;
	return len == 0 ? 0 : declare(r, addr, len, "vista_set_range");
}

int
vista__redo_set_ranges(vista *v, size_t n, const struct vista_range *rg)
{
	struct vista_redo *r = v->redo;
	size_t nr = r->nr, un = r->undo_n, rl = r->rec_len;

	if (!mine(r))
		return vista__err(VISTA_ENOTX, "vista_set_ranges: no "
			"transaction is active on this thread");
	if (n > 0 && rg == NULL)
		return vista__err(-EINVAL, "vista_set_ranges: NULL ranges");
	r->st.set_ranges++;
	for (size_t i = 0; i < n; i++) {
		if (rg[i].len == 0)
			continue;
		int rc = declare(r, rg[i].addr, rg[i].len, "vista_set_ranges");
		if (rc) {
			/* Every range or none. */
			r->nr = nr;
			r->undo_n = un;
			r->rec_len = rl;
			return rc;
		}
	}
	return 0;
}

static void
mark_dirty(struct vista_redo *r, uint64_t off, uint64_t len)
{
	for (uint64_t l = off / LINE; l <= (off + len - 1) / LINE; l++) {
		uint64_t bit = 1ull << (l % 64);
		if (!(r->dirty[l / 64] & bit)) {
			r->dirty[l / 64] |= bit;
			r->dlist[r->ndirty++] = (uint32_t)l;
		}
	}
}

/* R1: the record, one fence. */
int
vista__redo_commit(vista *v)
{
	struct vista_redo *r = v->redo;

	if (!mine(r))
		return vista__err(VISTA_ENOTX, "vista_end_transaction: no "
			"transaction is active on this thread");
	if (r->nr == 0)
		goto done;
	uint64_t len = r->rec_len, st = stride(len);
	if (r->tail + st > r->area_size) {
		/* A filler sends the reader to offset 0; written back with
		 * the record, under the same fence. */
		struct vista_redo_rec *f = (void *)(r->area + r->tail);
		f->seq = r->next_seq;
		f->len = sizeof(*f);
		f->count = 0;
		f->flags = VISTA_REDO_WRAP;
		f->reserved = 0;
		f->check = rio_checksum((char *)f + 8, sizeof(*f) - 8,
			vista_redo_seed(r->salt, r->seg_id, r->next_seq));
		rio_flush(r->log, f, sizeof(*f));
		r->st.flushes++;
		r->used += r->area_size - r->tail;
		r->tail = 0;
	}
	struct vista_redo_rec *h = (void *)(r->area + r->tail);
	struct vista_redo_desc *d = (void *)(h + 1);
	char *data = (char *)(d + r->nr);
	for (size_t i = 0; i < r->nr; i++) {
		d[i] = (struct vista_redo_desc){ r->r[i].off, r->r[i].len };
		memcpy(data, r->dram + r->r[i].off, r->r[i].len);
		if (r->r[i].len % 8)
			memset(data + r->r[i].len, 0, 8 - r->r[i].len % 8);
		data += ROUND(r->r[i].len, 8);
		r->st.bytes_logged += r->r[i].len;
	}
	h->seq = r->next_seq;
	h->len = (uint32_t)len;
	h->count = (uint32_t)r->nr;
	h->flags = 0;
	h->reserved = 0;
	uint64_t seed = vista_redo_seed(r->salt, r->seg_id, r->next_seq);
#ifdef VISTA_BROKEN_REDO_COMMIT_EARLY
	/* Broken on purpose: the commit record vouches for itself only and
	 * is made durable before the after-images are written back. */
	h->check = rio_checksum((char *)h + 8, 24, seed);
	rio_flush(r->log, h, sizeof(*h));
	rio_drain(r->log);
	rio_flush(r->log, (char *)h + LINE, st > LINE ? st - LINE : 0);
#else
	h->check = rio_checksum((char *)h + 8, len - 8, seed);
	rio_flush(r->log, h, st);
#endif
	r->st.flushes += st / LINE;
	/* F1: the record -- commit record and after-images -- is durable:
	 * the transaction is committed. */
	rio_drain(r->log);
	r->st.fences++;
	r->tail += st;
	if (r->tail == r->area_size)
		r->tail = 0;
	r->used += st;
	r->next_seq++;
	/* Home is written at the next checkpoint (R2), each line once. */
	for (size_t i = 0; i < r->nr; i++)
		mark_dirty(r, r->r[i].off, r->r[i].len);
done:
	r->st.tx_committed++;
	int e = rio_pool_error(r->log);
	if (e)
		e = vista__set_fatal(v, e, "vista_end_transaction");
	else if (r->used > r->area_size / 2)
		e = checkpoint(v, r);
	tx_end(r);
	return e;
}

/* R3: before-images back into DRAM, newest first. */
int
vista__redo_abort(vista *v)
{
	struct vista_redo *r = v->redo;
	size_t u = r->undo_n;

	if (!mine(r))
		return vista__err(VISTA_ENOTX, "vista_abort_transaction: no "
			"transaction is active on this thread");
	for (size_t i = r->nr; i-- > 0;) {
		u -= r->r[i].len;
		memcpy(r->dram + r->r[i].off, r->undo + u, r->r[i].len);
	}
	r->st.tx_aborted++;
	tx_end(r);
	return 0;
}

bool
vista__redo_in_tx(const vista *v)
{
	return mine(v->redo);
}

void
vista__redo_stats(const vista *v, struct vista_stats *out)
{
	*out = v->redo->st;
}

int
vista__redo_refuse(const char *call)
{
	return mode_err(call);
}

unsigned
vista__redo_pending(const vista *v)
{
	return v->redo->pend_seg != 0;
}
