/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * primary.c -- the primary: the commit hook, the ring, the sender thread
 *
 * Commit path (vr_commit, application thread):
 *   1. vista_end_transaction calls vr__hook before anything is durable:
 *      the hook diffs every declared range of the data segment against
 *      its before-image, takes the next seq and writes a REDO record of
 *      the changed bytes straight into the ring (blocking while the
 *      backup is a whole ring behind: head + len - tail > ring_size),
 *      unsealed: the sender computes its check (P6), off the committing
 *      thread.  With o.whole_ranges the hook copies each range whole
 *      (no diff, no before-image read);
 *   2. Vista commits locally;
 *   3. 1-safe returns if seq <= granted (else it waits for a GRANT while
 *      a backup is connected, P5); 2-safe waits until acked >= seq;
 *      pipelined until acked >= seq - window.
 * The sender thread writes [sent, head) to the socket, reads ACKs (which
 * move tail and acked), sends a BEAT every heartbeat_ms, and declares the
 * backup lost after timeout_ms of silence.  1-safe and pipelined records
 * wait up to o.batch_ms for it (1-safe: one send per o.batch_ms however
 * fast they come, unless an eighth of the ring waits); a 2-safe commit
 * writes its own record (wlock) and reads its own ack (rlock) when it can
 * take the lock.
 * Lock order: wlock before rlock (only drop_fd takes both); n->lock is
 * taken inside either, never the other way round.
 *
 * Ring pointers (byte positions, only growing):
 *   tail <= sent <= head <= tail + ring_size; each is a record boundary.
 *   The bytes in [tail, head) are stable: producers write only past head.
 *   Producers write head and seq under n->lock (one committing thread
 *   finds it uncontended: the sender no longer takes it to read them);
 *   tail moves under n->lock (acks), sent under n->lock or wlock.  Each
 *   group sits on a cache line of its own (vr_int.h VR_LINE).
 *
 * Memory order (the sender reads head with no lock)
 *   R1. A producer writes the whole record into the ring with plain
 *       stores, then stores head past it with release: every byte of
 *       the record is visible to a thread that sees the new head.
 *   R2. The sender (and a 2-safe committer pushing its own record)
 *       loads sent, then head with acquire, and reads only [sent, head):
 *       whole records, all bytes written (P1).  The producers never
 *       write below head, and tail <= sent keeps them off [sent, head).
 *   R3. Waking the sender: it stores sleeping = 1 (seq_cst) and then
 *       loads head; a producer that wants it awake stores head, then a
 *       full fence, then loads sleeping.  At least one sees the other's
 *       store, so a record is never left unnoticed until the next
 *       timeout.  1-safe wakes only when an eighth of the ring waits:
 *       no fence and no system call on most commits.
 *
 * Invariants
 *   P1. A record enters the ring whole (header, pieces, data, check) and
 *       head moves past it only then, so the sender never sends a part.
 *   P2. 2-safe: vr_commit returns 0 only once the backup has acknowledged
 *       the record, i.e. made it durable (backup.c B2).
 *   P3. After a full copy, a thread whose transaction may have been
 *       running during it sends its ranges whole, not diffed: the copy
 *       may hold its uncommitted stores (commit) that the diff would not
 *       see, or that its abort puts back (abort: the before-images go).
 *   P4. A node that is not PRIMARY refuses every commit touching the
 *       data segment (the hook returns the error before anything is
 *       durable).
 *   P5. 1-safe: vr_commit returns 0 only for a seq <= granted, the
 *       largest limit the backup has made durable and granted back
 *       (replica_layout.h GRANT); a full copy lowers granted to the seq
 *       it covers, and a backup resumes from the ring's tail only if its
 *       own durable limit is >= granted.  So a promoted backup misses at
 *       most its limit - applied of the transactions whose commit
 *       returned.  The sender offers seq + window whenever less than
 *       half a window is left.
 *   P6. A record enters the ring with check 0 and is
 *       sealed (its check computed over its stable bytes) by whoever
 *       pushes it, under wlock, before any byte of it is written to the
 *       socket; `sealed` >= sent marks how far that has gone.  A backup
 *       refuses an unsealed record (wire.c W1), so a record is never
 *       applied unverified.
 *   P7. o.sender_diff: the committing thread queues each range whole
 *       (its after-bytes; an abort's before-images, P3) at head, and
 *       whoever pushes diffs the records in [raw, head), in ring order,
 *       under wlock, against n->mirror, writes each as the record of its
 *       changed bytes at dhead, copies those bytes into the mirror, and
 *       only then seals (P6) and sends [sent, dhead).  The mirror is
 *       what the backup's copy holds once it has applied every record
 *       below dhead: a full copy sends the mirror's own bytes, copied
 *       from the segment under n->lock, and drops every record queued
 *       (raw = dhead = head), so a record is diffed against the copy
 *       the backup has, never against the segment's later bytes.  A
 *       diffed record is never longer than its input (a new piece costs
 *       8 bytes and splits only on 8 equal bytes or more), so dhead <=
 *       raw and the output never passes the input still to be read; the
 *       stream's positions (sent, tail, the backup's acks) count dhead's
 *       bytes.  The bytes in [dhead, raw) are never sent.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <sys/socket.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <unistd.h>

#include "vr_int.h"

uint16_t vr__seg_major(void);

/* Per thread: the scratch buffer a record is built in, the last copy
 * generation it saw, the seq of its last commit. */
struct vr_tls {
	vr_node *n;
	uint64_t gen;
	uint64_t seq;
	bool applying;
	char *buf;
	size_t cap;
	uint64_t *ol;
	size_t olcap;
};
/* initial-exec: no __tls_get_addr call on each commit (the library is
 * linked, not dlopen'd). */
#define VR_TLS __thread __attribute__((tls_model("initial-exec")))
static VR_TLS struct vr_tls tls;
/* The pieces of the record being built, gathered before anything is
 * copied: {offset in the segment, source, length}.  build() then writes
 * the header, the piece table and the data in one pass into tls.buf (one
 * copy of the changed bytes, no intermediate data area). */
struct gpiece {
	uint64_t off;
	const char *src;
	uint32_t len;
};
struct builder {
	size_t np, dlen;
	struct gpiece *p;
	size_t pcap;
};
static VR_TLS struct builder bld;

static pthread_key_t tls_key;
static pthread_once_t tls_once = PTHREAD_ONCE_INIT;

static void
tls_free(void *p)
{
	struct vr_tls *t = p;
	free(t->buf);
	free(t->ol);
	free(bld.p);
	bld.p = NULL;
	bld.pcap = 0;
	t->buf = NULL;
	t->ol = NULL;
	t->cap = t->olcap = 0;
}

static void
tls_init(void)
{
	(void)pthread_key_create(&tls_key, tls_free);
}

void
vr__set_applying(bool on)
{
	tls.applying = on;
}

/* Grow *buf to hold `need` bytes. */
static int
grow(void *buf, size_t *cap, size_t need)
{
	void **b = buf;
	size_t c = *cap ? *cap : 4096;
	void *nb;

	if (need <= *cap)
		return 0;
	while (c < need)
		c *= 2;
	nb = realloc(*b, c);
	if (nb == NULL)
		return vr__err(-ENOMEM, "out of memory");
	*b = nb;
	*cap = c;
	return 0;
}

static int
reserve(size_t need)
{
	bool first = tls.buf == NULL;
	int rc = grow(&tls.buf, &tls.cap, need);

	if (rc == 0 && first && tls.buf != NULL) {
		/* The thread's buffer is freed when the thread ends. */
		(void)pthread_once(&tls_once, tls_init);
		(void)pthread_setspecific(tls_key, &tls);
	}
	return rc;
}

static int
add_piece(uint64_t off, const char *src, size_t len)
{
	while (len > 0) {
		uint32_t l = len > VR_PIECE_MAX_LEN ? VR_PIECE_MAX_LEN :
			(uint32_t)len;
		if (bld.np == bld.pcap) {
			size_t c = bld.pcap ? 2 * bld.pcap : 64;
			struct gpiece *np = realloc(bld.p, c * sizeof(*np));
			if (np == NULL)
				return vr__err(-ENOMEM, "out of memory");
			bld.p = np;
			bld.pcap = c;
		}
		bld.p[bld.np++] = (struct gpiece){ off, src, l };
		bld.dlen += l;
		off += l;
		src += l;
		len -= l;
	}
	return 0;
}

/* Bytes of Vista's log read ahead past a range's before-image: the next
 * ranges' images and descriptors (a 64-byte-aligned record follows). */
#define VR_PREFETCH 256

/* Equal bytes between two changed runs of a range are sent along while
 * there are fewer than this: a new piece costs its 8-byte descriptor, so
 * a gap of 8 or more is cheaper split (order-entry: 636 record bytes a
 * transaction at 8, 665 at 16; bench/replica/oe_bytes.c). */
#define VR_DIFF_GAP sizeof(struct vr_piece)

/* The REDO record of the transaction: into tls.buf, its length. */
static int
build(vr_node *n, unsigned event, struct vista_txinfo *tx, bool whole,
	bool diff, bool gather, size_t *out_len, uint64_t *data_bytes,
	bool *touched)
{
	struct vista_txrange r;
	struct vr_piece *pc;
	size_t total;
	char *d;
	int rc;

	bld.np = 0;
	bld.dlen = 0;
	*out_len = 0;
	*data_bytes = 0;
	*touched = false;
	while (vista_txinfo_next(tx, &r) == 1) {
		uint64_t off0;
		int k;
		/* The before-images live in Vista's log, whose lines were
		 * written back when the ranges were declared; a CPU whose
		 * write-back also evicts (clwb on AMD Zen) makes each a miss.
		 * Ask for this range's lines and the next few at once, so
		 * that the misses overlap instead of following each other. */
		if (diff && r.before != NULL)
			for (size_t pf = 0; pf < r.len + VR_PREFETCH; pf += 64)
				__builtin_prefetch((const char *)r.before + pf,
					0, 3);
		if (r.seg != n->seg)
			continue;
		*touched = true;
		off0 = (uint64_t)((char *)r.addr - n->base);
		if ((char *)r.addr < n->base || off0 + r.len > n->size)
			continue; /* heap metadata: refused by the caller */
		if (event == VISTA_HOOK_ABORT && r.before == NULL) {
			/* A new range (no before-image): the abort leaves it
			 * as the transaction stored it, and so does the
			 * backup, in diff mode too. */
			rc = add_piece(off0, r.addr, r.len);
			*data_bytes += r.len;
			if (rc)
				return rc;
			continue;
		}
		if (event == VISTA_HOOK_ABORT && !whole)
			continue;
		if (event == VISTA_HOOK_ABORT) {
			/* P3: put the before-images back on the backup. */
			rc = add_piece(off0, r.before, r.len);
			*data_bytes += r.len;
			if (rc)
				return rc;
			continue;
		}
		if (!diff || r.before == NULL) { /* new range: whole */
			rc = add_piece(off0, r.addr, r.len);
			*data_bytes += r.len;
			if (rc)
				return rc;
			continue;
		}
		for (;;) {
			size_t max = tls.olcap / 2;
			k = max ? vr_diff(r.before, r.addr, r.len,
					VR_DIFF_GAP, tls.ol, max) : -E2BIG;
			if (k != -E2BIG)
				break;
			max = max ? 2 * max : 64;
			uint64_t *no = realloc(tls.ol, 2 * max * sizeof(*no));
			if (no == NULL)
				return vr__err(-ENOMEM, "out of memory");
			tls.ol = no;
			tls.olcap = 2 * max;
		}
		for (int i = 0; i < k; i++) {
			rc = add_piece(off0 + tls.ol[2 * i],
				(const char *)r.addr + tls.ol[2 * i],
				tls.ol[2 * i + 1]);
			*data_bytes += tls.ol[2 * i + 1];
			if (rc)
				return rc;
		}
	}
	if (bld.np == 0)
		return 0;
	total = sizeof(struct vr_rec_hdr) + bld.np * sizeof(*pc) +
		((bld.dlen + 7) & ~(size_t)7);
	if (gather) {
		/* The caller writes the record into the ring (put_rec). */
		*out_len = total;
		return 0;
	}
	rc = reserve(total);
	if (rc)
		return rc;
	pc = (struct vr_piece *)(tls.buf + sizeof(struct vr_rec_hdr));
	d = (char *)(pc + bld.np);
	for (size_t i = 0; i < bld.np; i++) {
		pc[i] = vr_piece_make(bld.p[i].off, bld.p[i].len);
		memcpy(d, bld.p[i].src, bld.p[i].len);
		d += bld.p[i].len;
	}
	/* the record's padding: zeros up to its end (a multiple of 8) */
	memset(d, 0, (size_t)(tls.buf + total - d));
	*out_len = total;
	return 0;
}

static void drop_locked(vr_node *n);
static void wait_1ms(vr_node *n, pthread_cond_t *cv);

/* The end of the stream: the first position past the records that may
 * be sent (with o.sender_diff, those diffed, P7). */
static inline uint64_t
stream_end(vr_node *n)
{
	return n->o.sender_diff ? atomic_load_explicit(&n->dhead,
		memory_order_relaxed) : atomic_load_explicit(&n->head,
		memory_order_relaxed);
}

static void
wake_sender(vr_node *n)
{
	uint64_t one = 1;
	/* R3: the head stored before (release only) is ordered before
	 * the load of sleeping. */
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&n->sleeping))
		(void)!write(n->efd, &one, sizeof(one));
}

/* Copy ring bytes [p, p + len) out (they may wrap). */
static void
ring_read(const vr_node *n, const char *ring, uint64_t p, void *out,
	size_t len)
{
	size_t at = p & (n->o.ring_size - 1), first = n->o.ring_size - at;

	if (first >= len) {
		memcpy(out, ring + at, len);
	} else {
		memcpy(out, ring + at, first);
		memcpy((char *)out + first, ring, len - first);
	}
}

/*
 * Write the check of each record in [from, to) into the
 * ring (P6).  The records' other bytes are stable (producers write past
 * head only), and wlock keeps other sealers out.  Sealing twice writes
 * the same check.  Caller holds wlock.
 */
static int
seal_ring(vr_node *n, uint64_t from, uint64_t to)
{
	size_t mask = n->o.ring_size - 1;

	for (uint64_t p = from; p < to;) {
		struct vr_rec_hdr rh, *hp;
		size_t at = p & mask;
		uint64_t c;
		ring_read(n, n->ring, p, &rh, sizeof(rh));
		if (at + rh.len <= n->o.ring_size) {
			hp = (struct vr_rec_hdr *)(n->ring + at);
			c = vr__rec_check(hp, hp + 1);
		} else {
			/* A record across the ring's end: checked from a
			 * linear copy. */
			if (reserve(rh.len))
				return vr__err(-ENOMEM, "out of memory");
			ring_read(n, n->ring, p, tls.buf, rh.len);
			hp = (struct vr_rec_hdr *)tls.buf;
			c = vr__rec_check(hp, hp + 1);
		}
		/* The check is 8-aligned in an 8-aligned record: one piece
		 * of the ring. */
		memcpy(n->ring + ((p + offsetof(struct vr_rec_hdr, check)) &
			mask), &c, sizeof(c));
		p += rh.len;
	}
	pthread_mutex_lock(&n->lock);
	n->sealed = to;
	pthread_mutex_unlock(&n->lock);
	return 0;
}

/*
 * Write the queued whole records [sent, head) to fd, at most about `max`
 * bytes (whole records; at least one).  Caller holds wlock.  An error
 * leaves the connection unusable (a record may be cut).
 */
static int diff_ring(vr_node *n, uint64_t h);

static int
push_locked(vr_node *n, int fd, uint64_t max, bool *cut)
{
	uint64_t s, h, z;
	int rc = 0;

	/* R2: sent first, then head (acquire: the records' bytes below it
	 * are visible); sealed is written under wlock, which we hold. */
	s = atomic_load_explicit(&n->sent, memory_order_relaxed);
	h = atomic_load_explicit(&n->head, memory_order_acquire);
	if (n->o.sender_diff) {
		/* P7: the whole-range records diffed first; the stream
		 * ends at dhead. */
		if (atomic_load_explicit(&n->raw, memory_order_relaxed) < h &&
		    (rc = diff_ring(n, h)) != 0)
			return rc;
		h = atomic_load_explicit(&n->dhead, memory_order_relaxed);
	}
	if (cut)
		*cut = false;
	z = n->sealed;
	/* (sealed behind sent: the ring was emptied since; the records
	 * from sent on are unsealed) */
	if (z < s || z > h)
		z = s;
	if (h - s > max) {
		/* A bounded burst, so that acks are read between. */
		uint64_t p = s;
		while (p < h) {
			struct vr_rec_hdr rh;
			ring_read(n, n->ring, p, &rh, sizeof(rh));
			if (p != s && p + rh.len > s + max)
				break;
			p += rh.len;
		}
		if (cut)
			*cut = p < h;
		h = p;
	}
#ifndef VR_BROKEN_SEAL_LATE
	/* P6: sealed before any byte of them is written. */
	if (z < h && (rc = seal_ring(n, z, h)) != 0)
		return rc;
#endif
	if (s < h) {
		size_t at = s & (n->o.ring_size - 1);
		size_t len = h - s, first = n->o.ring_size - at;
		if (first >= len) {
			rc = vr__write_all(fd, n->ring + at, len);
		} else {
			rc = vr__write_all(fd, n->ring + at, first);
			if (rc == 0)
				rc = vr__write_all(fd, n->ring, len - first);
		}
		if (rc == 0) {
			pthread_mutex_lock(&n->lock);
			if (n->sent < h)
				n->sent = h;
			pthread_mutex_unlock(&n->lock);
			atomic_fetch_add(&n->bytes_sent, len);
		}
	}
#ifdef VR_BROKEN_SEAL_LATE
	/* wrong: the records went out unsealed (P6) */
	if (z < h && (rc = seal_ring(n, z, h)) != 0)
		return rc;
#endif
	return rc;
}

/* A counter with one writer at a time (n->lock), read by vr_status. */
static inline void
bump(VR_ATOMIC(uint64_t) *c, uint64_t d)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed)
		+ d, memory_order_relaxed);
}

/* Copy `len` bytes to ring position p (they may wrap). */
static inline void
ring_put(vr_node *n, char *ring, uint64_t p, const void *src, size_t len)
{
	size_t at = p & (n->o.ring_size - 1), first = n->o.ring_size - at;

	if (first >= len) {
		memcpy(ring + at, src, len);
	} else {
		memcpy(ring + at, src, first);
		memcpy(ring, (const char *)src + first, len - first);
	}
}

/*
 * The REDO record of the gathered pieces (bld), `len`
 * bytes, written at head with no check (the sender seals it, P6): the
 * header, the piece table, the after-bytes, the padding.  One copy of
 * the ranges, no intermediate buffer.  At p0, the head; under n->lock,
 * room made.
 */
static void
put_rec(vr_node *n, uint64_t p0, uint64_t seq, size_t len)
{
	size_t mask = n->o.ring_size - 1;
	struct vr_rec_hdr rh;
	uint64_t p = p0;
	static const char zero[8];

	vr__rec_fill(&rh, VR_REC_REDO, (uint32_t)bld.np, seq, n->st->epoch,
		len);
	ring_put(n, n->qring, p, &rh, sizeof(rh));
	p += sizeof(rh);
	/* Pieces are 8 bytes at 8-aligned positions: none wraps. */
	for (size_t i = 0; i < bld.np; i++, p += sizeof(struct vr_piece)) {
		struct vr_piece pc = vr_piece_make(bld.p[i].off,
			bld.p[i].len);
		memcpy(n->qring + (p & mask), &pc, sizeof(pc));
	}
	for (size_t i = 0; i < bld.np; i++) {
		ring_put(n, n->qring, p, bld.p[i].src, bld.p[i].len);
		p += bld.p[i].len;
	}
	ring_put(n, n->qring, p, zero, (size_t)(p0 + len - p));
}

/* Copy a run of the sender's diff: most are a counter's few bytes, copied
 * without a call. */
static inline void
copy_run(char *d, const char *s, size_t n)
{
	uint64_t a, b;

	if (n >= 8 && n <= 16) {
		memcpy(&a, s, 8);
		memcpy(&b, s + n - 8, 8);
		memcpy(d, &a, 8);
		memcpy(d + n - 8, &b, 8);
	} else if (n < 8) {
		for (size_t i = 0; i < n; i++)
			d[i] = s[i];
	} else {
		memcpy(d, s, n);
	}
}

/* Records whose mirror lines diff_ring asks for ahead of the one it
 * diffs: the mirror is the segment's size, and a record's ranges fall
 * anywhere in it, so each is a miss; asked for together, they overlap. */
#define VR_MIRROR_AHEAD 16
/* Bytes of qring asked for ahead of the records read: the committing
 * thread wrote them on another core, so each line is a transfer. */
#define VR_QRING_AHEAD 4096

/* Ask for the mirror lines of the record at qring position p; its end. */
static uint64_t
mirror_prefetch(vr_node *n, uint64_t p)
{
	size_t mask = n->o.ring_size - 1;
	struct vr_rec_hdr rh;
	uint64_t q = p + sizeof(rh);

	ring_read(n, n->qring, p, &rh, sizeof(rh));
	/* Pieces are 8 bytes at 8-aligned positions: none wraps. */
	for (uint32_t i = 0; i < rh.count && i < 8; i++, q += 8) {
		const struct vr_piece *pc = (const void *)(n->qring +
			(q & mask));
		const char *m = n->mirror + vr_piece_off(pc);
		uint32_t l = vr_piece_len(pc);
		for (uint32_t o = 0; o < l && o < 256; o += 64)
			__builtin_prefetch(m + o, 1, 3);
		__builtin_prefetch(m + l - 1, 1, 3);
	}
	return p + rh.len;
}

/*
 * o.sender_diff: rewrite the whole-range records [raw, h) as records of
 * their bytes that differ from the mirror, at dhead, and bring the
 * mirror up to them (P7).  Caller holds wlock.
 */
static int
diff_ring(vr_node *n, uint64_t h)
{
	size_t mask = n->o.ring_size - 1;
	uint64_t r = atomic_load_explicit(&n->raw, memory_order_relaxed);
	uint64_t d = atomic_load_explicit(&n->dhead, memory_order_relaxed);
	uint64_t dbytes = 0, mbytes = 0, t, pf = r, qpf = r & ~(uint64_t)63;
	unsigned ahead = 0;

	pthread_mutex_lock(&n->lock);
	t = n->tail;
	pthread_mutex_unlock(&n->lock);
	while (r < h) {
		struct vr_rec_hdr rh, *oh;
		const struct vr_piece *ip;
		const char *src;
		struct vr_piece *op;
		size_t at = r & mask, len;
		char *od;
		int rc;

		ring_read(n, n->qring, r, &rh, sizeof(rh));
		/* The stream ring full (its output is no longer than
		 * rh.len): the rest waits for the backup's acks. */
		if (d + rh.len - t > n->o.ring_size)
			break;
		for (; qpf < h && qpf < r + VR_QRING_AHEAD; qpf += 64)
			__builtin_prefetch(n->qring + (qpf & mask), 0, 3);
		for (; pf < h && ahead < VR_MIRROR_AHEAD; ahead++)
			pf = mirror_prefetch(n, pf);
		ahead--;
		if (at + rh.len <= n->o.ring_size) {
			ip = (const void *)(n->qring + at + sizeof(rh));
		} else {
			/* A record across the ring's end: read from a linear
			 * copy. */
			if (reserve(rh.len))
				return vr__err(-ENOMEM, "out of memory");
			ring_read(n, n->qring, r, tls.buf, rh.len);
			ip = (const void *)(tls.buf + sizeof(rh));
		}
		src = (const char *)(ip + rh.count);
		bld.np = 0;
		bld.dlen = 0;
		for (uint32_t i = 0; i < rh.count; i++) {
			uint64_t off = vr_piece_off(&ip[i]);
			uint32_t l = vr_piece_len(&ip[i]);
			/* Runs at least 9 bytes apart: at most l / 9 + 1. */
			size_t max = l / 9 + 2;
			int k;
			if ((rc = grow(&n->dol, &n->dolcap,
				     2 * max * sizeof(*n->dol))) != 0)
				return rc;
			k = vr_diff(n->mirror + off, src, l, VR_DIFF_GAP,
				n->dol, max);
			for (int j = 0; j < k; j++) {
				uint64_t o = n->dol[2 * j], ol = n->dol[2 * j + 1];
				if ((rc = add_piece(off + o, src + o, ol)) != 0)
					return rc;
#ifndef VR_BROKEN_MIRROR_BEHIND
				/* The backup will hold these bytes. */
				copy_run(n->mirror + off + o, src + o, ol);
#endif
				/* (wrong without it: the next record is diffed
				 * against bytes the backup no longer has) */
			}
			src += l;
		}
		len = sizeof(rh) + bld.np * sizeof(*op) +
			((bld.dlen + 7) & ~(size_t)7);
		/* len <= rh.len (P7): the ring has room for it at d.  Built
		 * in place, or in dout if it crosses the ring's end. */
		if ((d & mask) + len <= n->o.ring_size) {
			oh = (struct vr_rec_hdr *)(n->ring + (d & mask));
		} else {
			if ((rc = grow(&n->dout, &n->dcap, len)) != 0)
				return rc;
			oh = (struct vr_rec_hdr *)n->dout;
		}
		vr__rec_fill(oh, rh.type, (uint32_t)bld.np, rh.seq, rh.epoch,
			len);
		op = (struct vr_piece *)(oh + 1);
		od = (char *)(op + bld.np);
		for (size_t i = 0; i < bld.np; i++) {
			op[i] = vr_piece_make(bld.p[i].off, bld.p[i].len);
			copy_run(od, bld.p[i].src, bld.p[i].len);
			od += bld.p[i].len;
		}
		memset(od, 0, (size_t)((char *)oh + len - od));
		if ((char *)oh == n->dout)
			ring_put(n, n->ring, d, n->dout, len);
		dbytes += bld.dlen;
		mbytes += len - bld.dlen;
		d += len;
		r += rh.len;
	}
	bump(&n->data_bytes, dbytes);
	bump(&n->meta_bytes, mbytes);
	/* dhead before raw (release): a reader that sees the new raw sees
	 * the new dhead (unsent()). */
	atomic_store_explicit(&n->dhead, d, memory_order_relaxed);
	atomic_store_explicit(&n->raw, r, memory_order_release);
	if (atomic_load(&n->rwait)) {
		/* Producers wait for room in the ring they write. */
		pthread_mutex_lock(&n->lock);
		pthread_cond_broadcast(&n->room);
		pthread_mutex_unlock(&n->lock);
	}
	return 0;
}

int
vr__hook(void *arg, unsigned event, struct vista_txinfo *tx)
{
	vr_node *n = arg;
	struct vr_rec_hdr *h;
	uint64_t gen, dbytes, seq, pending, p0;
	size_t len;
	bool whole, touched, gather;
	int role, rc;

	tls.seq = 0;
	if (tls.applying)
		return 0;
	gen = atomic_load(&n->copy_gen);
	whole = tls.n != n || tls.gen != gen;
	gather = event == VISTA_HOOK_COMMIT;
	rc = build(n, event, tx, whole, !whole && !n->o.whole_ranges &&
		!n->o.sender_diff, gather, &len, &dbytes, &touched);
	if (rc)
		return event == VISTA_HOOK_COMMIT ? rc : 0;
	if (!touched)
		return 0; /* not the replicated segment: local only */
	role = vr__node_role(n);
	if (event == VISTA_HOOK_COMMIT && role != VR_PRIMARY)
		/* P4 */
		return vr__err(role == VR_STALE ? VR_ESTALE : VR_ENOTPRIMARY,
			"commit refused: this node is %s (epoch %lu)",
			role == VR_STALE ? "stale" : role == VR_BACKUP ?
			"a backup" : "not a primary yet",
			(unsigned long)n->st->epoch);
	if (vista_txinfo_flags(tx) & VISTA_TXI_HEAP)
		return event == VISTA_HOOK_COMMIT ? vr__err(VR_EHEAP,
			"commit refused: the transaction allocated or freed "
			"heap blocks of a replicated segment") : 0;
	if (event == VISTA_HOOK_COMMIT && n->ring == NULL)
		return vr__err(VR_ENOTPRIMARY,
			"commit refused: vr_serve has not run");
	/* An abort sends only what it does not put back: everything after
	 * a copy (P3), else its new ranges (build). */
	if (event == VISTA_HOOK_ABORT && ((!whole && len == 0) ||
		    n->ring == NULL))
		return 0;
	tls.n = n;
	tls.gen = gen;
	if (len == 0)
		return 0; /* nothing changed: nothing to send or wait for */
	if (len > n->o.ring_size)
		return event == VISTA_HOOK_COMMIT ? vr__err(VR_ETOOBIG,
			"commit refused: a %zu-byte redo record, the ring "
			"holds %zu", len, n->o.ring_size) : 0;
	h = (struct vr_rec_hdr *)tls.buf;
	pthread_mutex_lock(&n->lock);
	/* The ring written here is emptied by the acks, or with
	 * o.sender_diff by the sender's diff (P7). */
	while (!atomic_load(&n->alone) && n->head + len - (n->o.sender_diff ?
		    atomic_load_explicit(&n->raw, memory_order_acquire) :
		    n->tail) > n->o.ring_size) {
		if (!atomic_load(&n->connected)) {
			/* Full, and nobody to empty it. */
			drop_locked(n);
			break;
		}
		if (n->o.sender_diff) {
			/* Wake the sender to diff; it signals room when
			 * producers wait (or we look again in 1 ms). */
			wake_sender(n);
			atomic_fetch_add(&n->rwait, 1);
			wait_1ms(n, &n->room);
			atomic_fetch_sub(&n->rwait, 1);
			continue;
		}
		/* The backup is a whole ring behind: wait for its acks. */
		pthread_cond_wait(&n->room, &n->lock);
	}
	/* (Under n->lock: the only writers of seq and head.) */
	seq = atomic_load_explicit(&n->seq, memory_order_relaxed) + 1;
	atomic_store_explicit(&n->seq, seq, memory_order_relaxed);
	tls.seq = seq;
	if (atomic_load(&n->alone)) {
		/* No backup: nothing queued (it will get a full copy). */
		pthread_mutex_unlock(&n->lock);
		return 0;
	}
	p0 = atomic_load_explicit(&n->head, memory_order_relaxed);
#ifdef VR_BROKEN_HEAD_EARLY
	/* wrong: head passes the record before its bytes are written (R1) */
	atomic_store_explicit(&n->head, p0 + len, memory_order_release);
	/* and, every 64th record, 1 ms before they are: a reader that
	 * spins on head (tests/replica/ring_test.cpp) finds the window on
	 * any machine, not only when it happens to read in the copy's
	 * microseconds */
	if (seq % 64 == 0) {
		struct timespec ms = { 0, 1000000 };

		nanosleep(&ms, NULL);
	}
#endif
	if (gather) {
		/* Straight into the ring, unsealed (P6). */
		put_rec(n, p0, seq, len);
	} else {
		vr__rec_fill(h, VR_REC_REDO, (uint32_t)bld.np, seq,
			n->st->epoch, len);
		ring_put(n, n->qring, p0, tls.buf, len);
	}
	/* P1, R1: head passes the record once it is whole.  The release
	 * store orders every byte of the record written above before the
	 * new head: a sender that loads head with acquire (R2) and sees
	 * it reads the whole record, with no lock between the two. */
	atomic_store_explicit(&n->head, p0 + len, memory_order_release);
	pending = p0 + len - (n->o.sender_diff ? atomic_load_explicit(
		&n->raw, memory_order_relaxed) : atomic_load_explicit(
		&n->sent, memory_order_relaxed));
	/* The counters vr_status reads: written only here, under n->lock,
	 * so a plain load and store (no locked add on each commit).  With
	 * o.sender_diff the sender counts the bytes it sends (diff_ring,
	 * under wlock). */
	bump(&n->records, 1);
	if (!n->o.sender_diff) {
		bump(&n->data_bytes, dbytes);
		bump(&n->meta_bytes, len - dbytes);
	}
	pthread_mutex_unlock(&n->lock);
	if (n->o.mode != VR_2SAFE) {
		/* 1-safe and pipelined: the sender ships a batch each
		 * o.batch_ms (a millisecond unless set), or as soon as an
		 * eighth of the ring waits: no system call on most
		 * commits. */
		if (pending >= n->o.ring_size / 8)
			wake_sender(n);
		return 0;
	}
	if (pthread_mutex_trylock(&n->wlock) == 0) {
		/* 2-safe: the committing thread sends its record itself,
		 * one wake-up less on the way to the acknowledgement. */
		if (n->sfd >= 0 && push_locked(n, n->sfd, 256u << 10, NULL))
			atomic_store(&n->wbroken, 1);
		pthread_mutex_unlock(&n->wlock);
		if (!atomic_load(&n->wbroken))
			return 0;
	}
	wake_sender(n);
	return 0;
}

/* ---- the sender thread ---- */

/* No backup to keep the records for: drop them and begin a new stream, so
 * that a backup that comes back is given a full copy.  Under n->lock. */
static void
drop_locked(vr_node *n)
{
	atomic_store(&n->alone, 1);
	n->stream = vr__random64();
	n->tail = n->sent = stream_end(n);
	/* P7: the records not diffed go too. */
	atomic_store(&n->raw, n->head);
	n->base_seq = n->seq;
	pthread_cond_broadcast(&n->room);
	pthread_cond_broadcast(&n->ackcv);
}

/* The connection is gone: the ring keeps its records, so a backup that
 * reconnects before the ring fills resumes from its log tail. */
static void
lost(vr_node *n)
{
	pthread_mutex_lock(&n->lock);
	atomic_store(&n->connected, 0);
	pthread_cond_broadcast(&n->ackcv);
	pthread_mutex_unlock(&n->lock);
}

static bool
role_ok(const vr_node *n)
{
	return vr__node_role(n) == VR_PRIMARY;
}

static int
refuse(vr_node *n, int fd, int code, const char *fmt, const char *a)
{
	struct vr_refuse r = { code, 0 };
	(void)vr__send_rec(fd, VR_REC_REFUSE, 0, 0, n->st->epoch, &r,
		sizeof(r));
	return vr__err(code, fmt, a);
}

/* Full copy to the backup on fd, with the producers held off: the
 * segment as the committed-or-running transactions left it, then
 * COPY_END with the stream position from which records follow. */
static int
full_copy(vr_node *n, int fd)
{
	char *buf = malloc(sizeof(struct vr_rec_hdr) +
		sizeof(struct vr_piece) + VR_COPY_CHUNK);
	struct vr_ack end;
	int rc = 0;

	if (buf == NULL)
		return vr__err(-ENOMEM, "out of memory");
	/* P3: threads running a transaction now send it whole. */
	atomic_fetch_add(&n->copy_gen, 1);
	for (size_t off = 0; off < n->size && rc == 0; off += VR_COPY_CHUNK) {
		size_t l = n->size - off < VR_COPY_CHUNK ? n->size - off :
			VR_COPY_CHUNK;
		struct vr_rec_hdr *h = (void *)buf;
		struct vr_piece *pc = (void *)(h + 1);
		*pc = vr_piece_make(off, (uint32_t)l);
#ifndef VR_BROKEN_MIRROR_STALE
		if (n->mirror) {
			/* P7: the bytes sent are the mirror's (running
			 * transactions may store into the segment meanwhile). */
			memcpy(n->mirror + off, n->base + off, l);
			memcpy(pc + 1, n->mirror + off, l);
		} else
#endif
		/* (wrong without it: the records that follow are diffed
		 * against what the backup had before this copy) */
		memcpy(pc + 1, n->base + off, l);
		memset((char *)(pc + 1) + l, 0, ((l + 7) & ~(size_t)7) - l);
		vr__rec_seal(h, VR_REC_COPY, 1, n->seq, n->st->epoch,
			sizeof(*h) + sizeof(*pc) + ((l + 7) & ~(size_t)7), pc);
		rc = vr__write_all(fd, buf, h->len);
		atomic_fetch_add(&n->bytes_sent, h->len);
	}
	free(buf);
	if (rc)
		return rc;
	end = (struct vr_ack){ n->seq, stream_end(n), n->stream };
	rc = vr__send_rec(fd, VR_REC_COPY_END, 0, n->seq, n->st->epoch, &end,
		sizeof(end));
	if (rc == 0) {
		n->tail = n->sent = end.pos;
		/* P7: the records not diffed yet are in the copy. */
		atomic_store(&n->raw, n->head);
		n->base_seq = n->seq;
		/* P5: the copy holds every seq up to here, and the backup's
		 * limit is this seq (COPY_END). */
		atomic_store(&n->granted, n->seq);
		atomic_store(&n->offered, n->seq);
		atomic_fetch_add(&n->copies, 1);
	}
	return rc;
}

/* A backup connected: HELLO both ways, then resume or copy. */
static int
handshake(vr_node *n, int fd)
{
	void *buf = NULL;
	size_t cap = 0;
	const struct vr_hello *bh;
	struct vr_hello me;
	int rc = vr__read_rec(fd, &buf, &cap, n->o.timeout_ms * 2, &n->stop,
		n->size);

	if (rc)
		goto out;
	if (((struct vr_rec_hdr *)buf)->type != VR_REC_HELLO) {
		rc = refuse(n, fd, VR_ECORRUPT, "a backup began with %s",
			"another record than HELLO");
		goto out;
	}
	bh = (const void *)((char *)buf + sizeof(struct vr_rec_hdr));
	if (bh->seg_major != vr__seg_major()) {
		rc = refuse(n, fd, VR_EVERSION, "backup refused: %s",
			"another segment layout version");
		goto out;
	}
	if (bh->seg_size != n->size) {
		rc = refuse(n, fd, VR_ESIZE, "backup refused: %s",
			"another segment size");
		goto out;
	}
	if (memcmp(bh->set_uuid, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 16) &&
	    memcmp(bh->set_uuid, n->st->set_uuid, 16)) {
		rc = refuse(n, fd, VR_EOTHERSET, "backup refused: %s",
			"it replicates another segment");
		goto out;
	}
	if (((struct vr_rec_hdr *)buf)->epoch > n->st->epoch) {
		/* The peer was promoted after us: we are stale for good. */
		struct vr_state s = *n->st;
		s.role = VR_STALE;
		(void)vr__state_set(n, &s);
		rc = refuse(n, fd, VR_ESTALE, "%s", "this primary is stale: "
			"its peer has a newer epoch; it refuses writes from "
			"now on");
		pthread_cond_broadcast(&n->ackcv);
		goto out;
	}
	pthread_mutex_lock(&n->lock);
	me = (struct vr_hello){ .seg_major = vr__seg_major(),
		.role = VR_ROLE_PRIMARY, .stream = n->stream,
		.seg_size = n->size };
	memcpy(me.set_uuid, n->st->set_uuid, 16);
	if (((struct vr_rec_hdr *)buf)->epoch == n->st->epoch &&
	    bh->stream == n->stream && bh->pos >= n->tail &&
	    bh->pos <= stream_end(n) &&
	    bh->limit >= atomic_load(&n->granted)) {
		/* Resume from the log tail the ring still holds (P5: this
		 * backup knows every limit granted). */
		me.seq = bh->seq;
		me.pos = bh->pos;
		n->sent = bh->pos;
		atomic_store(&n->offered, atomic_load(&n->granted));
		rc = vr__send_rec(fd, VR_REC_HELLO, 0, n->seq, n->st->epoch,
			&me, sizeof(me));
	} else {
		me.seq = 0;
		me.pos = 0;
		rc = vr__send_rec(fd, VR_REC_HELLO, 0, n->seq, n->st->epoch,
			&me, sizeof(me));
		if (rc == 0)
			rc = full_copy(n, fd);
	}
	if (rc == 0) {
		atomic_store(&n->alone, 0);
		atomic_store(&n->connected, 1);
	}
	pthread_mutex_unlock(&n->lock);
out:
	free(buf);
	return rc;
}

static void
on_ack(vr_node *n, const struct vr_rec_hdr *h)
{
	const struct vr_ack *a = (const void *)(h + 1);

	pthread_mutex_lock(&n->lock);
	/* pos <= head, not sent: the ack may be read before the thread
	 * that sent the record has moved `sent` past it. */
	if (a->stream == n->stream && a->pos >= n->tail &&
	    a->pos <= stream_end(n)) {
		n->tail = a->pos;
		if (n->sent < a->pos)
			n->sent = a->pos;
		if (a->seq > atomic_load(&n->acked))
			atomic_store(&n->acked, a->seq);
		pthread_cond_broadcast(&n->room);
		if (atomic_load(&n->waiters))
			pthread_cond_broadcast(&n->ackcv);
	}
	pthread_mutex_unlock(&n->lock);
}

/* The backup made `limit` durable (P5). */
static void
on_grant(vr_node *n, uint64_t limit)
{
	pthread_mutex_lock(&n->lock);
	if (limit <= atomic_load(&n->offered) &&
	    limit > atomic_load(&n->granted)) {
		atomic_store_explicit(&n->granted, limit,
			memory_order_release);
		if (atomic_load(&n->waiters))
			pthread_cond_broadcast(&n->ackcv);
	}
	pthread_mutex_unlock(&n->lock);
}

/* 1-safe: offer seq + window once less than half a window is left (P5).
 * Sender thread, connected. */
static int
offer(vr_node *n, int fd)
{
	uint64_t q, l;
	int rc;

	q = atomic_load_explicit(&n->seq, memory_order_relaxed);
	if (atomic_load(&n->offered) >= q + n->o.window / 2)
		return 0;
	l = q + n->o.window;
	pthread_mutex_lock(&n->wlock);
	rc = vr__send_rec(fd, VR_REC_GRANT, 0, l, n->st->epoch, NULL, 0);
	pthread_mutex_unlock(&n->wlock);
	if (rc == 0)
		atomic_store(&n->offered, l);
	return rc;
}

/* Read whatever the backup sent (acks, answers to beats) without
 * waiting for more.  Caller holds rlock, with n->rd.fd open. */
static int
read_acks(vr_node *n)
{
	for (;;) {
		const struct vr_rec_hdr *h;
		struct pollfd pf = { n->rd.fd, POLLIN, 0 };
		int rc;
		if (!vr__reader_ready(&n->rd) && (poll(&pf, 1, 0) <= 0 ||
			    !(pf.revents & (POLLIN | POLLHUP | POLLERR))))
			return 0;
		rc = vr__reader_next(&n->rd, &h, n->o.timeout_ms, &n->stop,
			n->size);
		if (rc)
			return rc;
		atomic_store(&n->last_in, vr__now_us());
		if (h->type == VR_REC_ACK)
			on_ack(n, h);
		else if (h->type == VR_REC_GRANT)
			on_grant(n, h->seq);
	}
}

/* The connection is closed: under both socket locks. */
static void
drop_fd(vr_node *n, int fd)
{
	pthread_mutex_lock(&n->wlock);
	pthread_mutex_lock(&n->rlock);
	n->sfd = -1;
	n->rd.fd = -1;
	n->rd.lo = n->rd.hi = 0;
	close(fd);
	pthread_mutex_unlock(&n->rlock);
	pthread_mutex_unlock(&n->wlock);
}

/* Bytes of records queued and not written to the socket yet (R2; with
 * o.sender_diff, counting the records not diffed yet whole, P7). */
static uint64_t
unsent(vr_node *n)
{
	uint64_t s = atomic_load_explicit(&n->sent, memory_order_relaxed);
	uint64_t h = atomic_load_explicit(&n->head, memory_order_acquire);
	uint64_t r, d;

	if (!n->o.sender_diff)
		return h - s;
	/* raw first (acquire): with a new raw comes its dhead (diff_ring);
	 * an older raw only overstates the bytes waiting. */
	r = atomic_load_explicit(&n->raw, memory_order_acquire);
	d = atomic_load_explicit(&n->dhead, memory_order_relaxed);
	return (h > r ? h - r : 0) + (d > s ? d - s : 0);
}

static void *
sender(void *arg)
{
	vr_node *n = arg;
	int fd = -1;
	uint64_t last_out = 0, last_push = 0;
	bool busy = false, more = false, full = false;

	while (!atomic_load(&n->stop)) {
		struct pollfd pf[2];
		uint64_t now, u;
		int rc;

		if (fd < 0) {
			pf[0] = (struct pollfd){ n->lfd, POLLIN, 0 };
			if (poll(pf, 1, (int)n->o.heartbeat_ms) <= 0)
				continue;
			fd = accept4(n->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			vr__tune(fd);
			{
				/* A cut link: a send blocked on a full
				 * buffer fails after this long (unacknowledged
				 * data, or a zero window) instead of holding
				 * the ring's locks for many minutes.  Longer
				 * than the silence that drops a backup: a
				 * slow one is the heartbeats' to judge. */
				unsigned ut = 10 * n->o.timeout_ms < 2000 ?
					2000 : 10 * n->o.timeout_ms;
				(void)setsockopt(fd, IPPROTO_TCP,
					TCP_USER_TIMEOUT, &ut, sizeof(ut));
			}
			if (role_ok(n) && handshake(n, fd) == 0) {
				last_out = vr__now_us();
				atomic_store(&n->last_in, last_out);
				pthread_mutex_lock(&n->wlock);
				pthread_mutex_lock(&n->rlock);
				atomic_store(&n->wbroken, 0);
				atomic_store(&n->rbroken, 0);
				n->rd.fd = fd;
				n->rd.lo = n->rd.hi = 0;
				n->sfd = fd;
				pthread_mutex_unlock(&n->rlock);
				pthread_mutex_unlock(&n->wlock);
				continue;
			}
			close(fd);
			fd = -1;
			continue;
		}
		/* Send what is queued (whole records, P1; R2). */
		u = unsent(n);
		rc = atomic_load(&n->wbroken) ? vr__err(VR_EPEERLOST,
			"a commit's send failed") : 0;
		now = vr__now_us();
		/* 1-safe: one send per o.batch_ms however fast records
		 * come, unless a burst was cut short or an eighth of the
		 * ring waits (the producers wake us then). */
		if (rc == 0 && u > 0 && (n->o.mode != VR_1SAFE || more ||
			    now - last_push >= n->o.batch_ms * 1000ull ||
			    u >= n->o.ring_size / 8)) {
			uint64_t s0 = atomic_load(&n->sent);
			uint64_t r0 = atomic_load(&n->raw);
			pthread_mutex_lock(&n->wlock);
			rc = push_locked(n, fd, 256u << 10, &more);
			pthread_mutex_unlock(&n->wlock);
			last_push = now;
			/* o.sender_diff, nothing sent or diffed: the stream
			 * ring is full; wait for acks, do not spin. */
			full = n->o.sender_diff && atomic_load(&n->sent) == s0 &&
				atomic_load(&n->raw) == r0;
		}
		if (rc == 0 && n->o.mode == VR_1SAFE)
			rc = offer(n, fd);
		now = vr__now_us();
		if (rc == 0 && now - last_out >= n->o.heartbeat_ms * 1000u) {
			/* Every heartbeat, busy or not: the backup learns the
			 * last seq queued (the 1-safe loss window). */
			uint64_t q = atomic_load_explicit(&n->seq,
				memory_order_relaxed);
			pthread_mutex_lock(&n->wlock);
			rc = vr__send_rec(fd, VR_REC_BEAT, 0, q, n->st->epoch,
				NULL, 0);
			pthread_mutex_unlock(&n->wlock);
			last_out = now;
		}
		/* Wait for an ack, a producer or the heartbeat; not on the
		 * socket while a committing thread reads it (busy). */
		pf[0] = (struct pollfd){ busy ? -1 : fd, POLLIN, 0 };
		busy = false;
		pf[1] = (struct pollfd){ n->efd, POLLIN, 0 };
		/* R3: sleeping is set (seq_cst) before head is read; a
		 * producer stores head before it reads sleeping (a full
		 * fence between, wake_sender), so one of the two sees the
		 * other's store: a record is never left behind unwoken. */
		atomic_store(&n->sleeping, 1);
		u = unsent(n);
		if (rc == 0 && poll(pf, 2, u > 0 && !full && (more ||
				n->o.mode != VR_1SAFE) ? 0 :
			    n->o.mode != VR_2SAFE ? (int)n->o.batch_ms :
			    (int)n->o.heartbeat_ms) > 0) {
			if (pf[1].revents & POLLIN) {
				uint64_t x;
				(void)!read(n->efd, &x, sizeof(x));
			}
			/* Acks, unless a committing thread reads them. */
			if (rc == 0 && (pf[0].revents & (POLLIN | POLLHUP |
					    POLLERR))) {
				if (pthread_mutex_trylock(&n->rlock) == 0) {
					rc = read_acks(n);
					pthread_mutex_unlock(&n->rlock);
				} else {
					busy = true;
				}
			}
		}
		atomic_store(&n->sleeping, 0);
		if (rc == 0 && atomic_load(&n->rbroken))
			rc = vr__err(VR_EPEERLOST, "a commit's read failed");
		if (rc == 0 && vr__now_us() - atomic_load(&n->last_in) >
		    (uint64_t)n->o.timeout_ms * 1000u)
			rc = vr__err(VR_EPEERLOST, "the backup was silent "
				"for %u ms", n->o.timeout_ms);
		if (rc) {
			drop_fd(n, fd);
			fd = -1;
			lost(n);
		}
	}
	if (fd >= 0)
		drop_fd(n, fd);
	return NULL;
}

/* ---- the API ---- */

int
vr_serve(vr_node *n, const char *host, unsigned port)
{
	int rc, fd;

	if (n == NULL)
		return vr__err(-EINVAL, "vr_serve: NULL node");
	if (n->ring != NULL)
		return vr__err(-EBUSY, "vr_serve: already serving");
	if (n->st->role == VR_FRESH) {
		/* The first primary of a new replica set. */
		struct vr_state s = *n->st;
		uint64_t a = vr__random64(), b = vr__random64();
		memcpy(s.set_uuid, &a, 8);
		memcpy(s.set_uuid + 8, &b, 8);
		s.role = VR_PRIMARY;
		s.epoch = 1;
		rc = vr__state_set(n, &s);
		if (rc)
			return rc;
	}
	if (n->st->role == VR_STALE)
		return vr__err(VR_ESTALE, "vr_serve: this node's epoch %lu is "
			"older than its peer's: it rejoins as a backup "
			"(vr_follow)", (unsigned long)n->st->epoch);
	if (n->st->role != VR_PRIMARY)
		return vr__err(VR_ENOTPRIMARY, "vr_serve: this node is a "
			"backup: promote it first (vr_promote)");
	n->ring = malloc(n->o.ring_size);
	if (n->ring == NULL)
		return vr__err(-ENOMEM, "out of memory");
	n->qring = n->ring;
	/* P7: the ring the commits write, and the mirror (filled by each
	 * full copy: nothing is diffed before one). */
	if (n->o.sender_diff && ((n->qring = malloc(n->o.ring_size)) ==
		    NULL || (n->mirror = calloc(1, n->size)) == NULL)) {
		free(n->qring);
		free(n->ring);
		n->ring = n->qring = NULL;
		return vr__err(-ENOMEM, "out of memory: a %zu-byte mirror of "
			"the segment and a second ring (vr_opts.sender_diff)",
			n->size);
	}
	n->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (n->efd < 0) {
		rc = vr__err(-errno, "eventfd: %s", strerror(errno));
		goto fail;
	}
	fd = vr__listen(host, port, &n->port);
	if (fd < 0) {
		rc = fd;
		goto fail;
	}
	n->lfd = fd;
	n->stream = vr__random64();
	n->head = n->sent = n->tail = n->sealed = 0;
	atomic_store(&n->raw, 0);
	atomic_store(&n->dhead, 0);
	atomic_store(&n->granted, n->seq);
	atomic_store(&n->offered, n->seq);
	atomic_store(&n->alone, 1);
	atomic_store(&n->stop, 0);
	rc = -pthread_create(&n->thr, NULL, sender, n);
	if (rc) {
		vr__err(rc, "pthread_create: %s", strerror(-rc));
		goto fail;
	}
	n->thr_on = true;
	return 0;
fail:
	if (n->lfd >= 0)
		close(n->lfd);
	if (n->efd >= 0)
		close(n->efd);
	n->lfd = n->efd = -1;
	if (n->qring != n->ring)
		free(n->qring);
	free(n->ring);
	n->ring = n->qring = NULL;
	free(n->mirror);
	n->mirror = NULL;
	return rc;
}

unsigned
vr_port(const vr_node *n)
{
	return n ? n->port : 0;
}

void
vr__primary_stop(vr_node *n)
{
	if (n->thr_on) {
		atomic_store(&n->stop, 1);
		wake_sender(n);
		pthread_join(n->thr, NULL);
		n->thr_on = false;
	}
	if (n->lfd >= 0)
		close(n->lfd);
	if (n->efd >= 0)
		close(n->efd);
	n->lfd = n->efd = -1;
}

int
vr_wait_backup(vr_node *n, unsigned timeout_ms)
{
	uint64_t t0 = vr__now_us();

	while (!atomic_load(&n->connected)) {
		if (vr__now_us() - t0 > (uint64_t)timeout_ms * 1000u)
			return vr__err(VR_ENOBACKUP, "no backup connected "
				"within %u ms", timeout_ms);
		usleep(1000);
	}
	return 0;
}

/* Under n->lock: sleep on cv for at most a millisecond. */
static void
wait_1ms(vr_node *n, pthread_cond_t *cv)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += 1000000;
	if (ts.tv_nsec >= 1000000000) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000;
	}
	(void)pthread_cond_timedwait(cv, &n->lock, &ts);
}

/* Wait until acked >= seq: spin a little (the round trip is tens of
 * microseconds), then sleep on the condition. */
static int
wait_acked(vr_node *n, uint64_t seq)
{
	uint64_t t0 = vr__now_us(), limit;
	int rc = 0;

	limit = t0 + (uint64_t)n->o.timeout_ms * 2000u;
	if (atomic_load_explicit(&n->acked, memory_order_acquire) >= seq)
		return 0;
	if (n->o.mode == VR_2SAFE && pthread_mutex_trylock(&n->rlock) == 0) {
		/* 2-safe: the committing thread waits in poll on the
		 * backup's socket and reads the ack itself -- one wake-up,
		 * as for a round trip.  (Others wait for it below.) */
		while (atomic_load(&n->acked) < seq && n->rd.fd >= 0 &&
		    !atomic_load(&n->rbroken) && vr__now_us() < limit &&
		    vr__now_us() - atomic_load(&n->last_in) <=
			    (uint64_t)n->o.timeout_ms * 1000u) {
			/* (A silent backup: leave the socket to the sender,
			 * which drops it, and wait below.) */
			struct pollfd pf = { n->rd.fd, POLLIN, 0 };
			if (!vr__reader_ready(&n->rd))
				(void)poll(&pf, 1, 1);
			if (read_acks(n)) {
				atomic_store(&n->rbroken, 1);
				wake_sender(n);
			}
		}
		pthread_mutex_unlock(&n->rlock);
		if (atomic_load(&n->acked) >= seq)
			return 0;
	}
	pthread_mutex_lock(&n->lock);
	atomic_fetch_add(&n->waiters, 1);
	while (atomic_load(&n->acked) < seq) {
		uint64_t now = vr__now_us();
		if (now >= limit || vr__node_role(n) != VR_PRIMARY) {
			rc = vr__err(VR_ENOBACKUP, "seq %lu committed locally "
				"but not acknowledged by a backup within %u ms",
				(unsigned long)seq, 2 * n->o.timeout_ms);
			break;
		}
		wait_1ms(n, &n->ackcv);
	}
	atomic_fetch_sub(&n->waiters, 1);
	pthread_mutex_unlock(&n->lock);
	return rc;
}

/* 1-safe past the limit granted (P5): wait for a GRANT while a backup is
 * connected; without one, the transaction is committed but not covered. */
static int
wait_granted(vr_node *n, uint64_t seq)
{
	uint64_t limit = vr__now_us() + (uint64_t)n->o.timeout_ms * 2000u;
	int rc = 0;

	pthread_mutex_lock(&n->lock);
	atomic_fetch_add(&n->waiters, 1);
	while (atomic_load(&n->granted) < seq) {
		if (!atomic_load(&n->connected) || vr__now_us() >= limit ||
		    vr__node_role(n) != VR_PRIMARY) {
			rc = vr__err(VR_ENOBACKUP, "seq %lu committed locally "
				"past the 1-safe limit %lu a backup granted "
				"(%s): not replicated", (unsigned long)seq,
				(unsigned long)atomic_load(&n->granted),
				atomic_load(&n->connected) ? "no grant in time"
				: "no backup connected");
			break;
		}
		wake_sender(n);
		wait_1ms(n, &n->ackcv);
	}
	atomic_fetch_sub(&n->waiters, 1);
	pthread_mutex_unlock(&n->lock);
	return rc;
}

int
vr_commit(vr_node *n)
{
	uint64_t seq;
	int rc;

	tls.seq = 0;
	rc = vista_end_transaction(n->v);
	if (rc)
		return rc;
	seq = tls.seq;
	if (seq == 0)
		return 0;
	if (n->o.mode == VR_1SAFE)
		/* P5 */
		return seq <= atomic_load_explicit(&n->granted,
			memory_order_acquire) ? 0 : wait_granted(n, seq);
#ifdef VR_BROKEN_NO_WAIT
	return 0; /* wrong: 2-safe returns before the backup's persist */
#endif
	if (n->o.mode == VR_PIPELINED) {
		if (seq <= n->o.window)
			return 0;
		seq -= n->o.window;
	}
	return wait_acked(n, seq);
}

int
vr_sync(vr_node *n)
{
	uint64_t seq;

	seq = atomic_load_explicit(&n->seq, memory_order_relaxed);
	return seq ? wait_acked(n, seq) : 0;
}

uint64_t
vr_last_seq(void)
{
	return tls.seq;
}
