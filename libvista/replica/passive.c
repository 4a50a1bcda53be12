/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * passive.c -- the passive backup: a pool's write-backs, stored elsewhere
 *
 * Primary: librio's write tap (rio_set_persist_tap) calls tap_flush() for
 * each range written back and tap_drain() at each fence, on the flushing
 * thread.  tap_flush() copies the range's bytes, widened to whole 64-byte
 * lines (what the hardware writes back), into the open record in a ring;
 * tap_drain() seals it as a FENCE record.  A sender thread checksums and
 * streams sealed records to the backup and reads its acknowledgements.
 * The backup stores each record's pieces into copies of the pool files
 * and, at a FENCE, makes them durable before it reads the next record.
 *
 * Invariants
 *   P1. The backup stores no byte of a record before every piece of the
 *       earlier FENCE records is durable in its copies (apply()): its copy
 *       is always a state the primary's pools could have been left in by
 *       a power failure, given librio's model (written-back lines are
 *       durable after the next fence; others may or may not be).
 *   P2. The backup acknowledges seq only once the FENCE record seq is
 *       durable (P1's drain happened); 2-safe vr_passive_commit returns 0
 *       only once the fence sealed by the program's commit is acknowledged.
 *   P3. A record is used only whole and verified (checksum, pieces inside
 *       the pool files); a full copy counts only after COPY_END, its
 *       files fsynced, and the state's `copying` cleared durably after.
 *   P4. Sealed records in the ring are never rewritten before the sender
 *       passed them; the open record is never split across the ring's end
 *       (the producer wraps only between records).  The sender's runs of
 *       contiguous bytes end at a wrap mark and at the ring's end, which
 *       a record may reach exactly (no mark then).
 *   P5. A full copy is taken with the producers' lock held: no flush or
 *       fence of the program runs during it, and the open record is
 *       sealed first, so the stream after COPY_END holds exactly the
 *       write-backs after the copy.
 *   P6. The log tail.  Once a backup has taken its copy, the primary
 *       records every write-back, connected or not, and keeps the sealed
 *       records [keep, head) of its stream in the ring: records keep_seq
 *       + 1 .. seq.  It drops the oldest only for room, and only once
 *       sent (or with no backup connected).  The backup makes its
 *       position (stream, epoch, last FENCE stored) durable after that
 *       fence's drain and before it stores a byte of the next record
 *       (pos_write), so its copies hold that fence and at most lines of
 *       the records up to the next fence.  A rejoining backup names its
 *       position; if the ring holds every record after it (tail_at), the
 *       stream goes on from there with no copy, else a full copy.  The
 *       backup stores only the record after the last one it stored
 *       (seq + 1): a tail from a wrong place is refused, not stored.
 *   P7. 1-safe: vr_passive_commit returns 0 only for a commit whose
 *       fence record is <= granted, the largest limit the backup has
 *       made durable in its position file and granted back (GRANT).  A
 *       full copy sets granted to the copy's seq; a tail keeps it only
 *       for a backup whose durable limit is >= granted.  So a promoted
 *       backup misses at most limit - seq (its position) of the fence
 *       records, and each commit ends with its own fence record: at most
 *       that many commits that returned 0.  The sender offers seq +
 *       window whenever less than half a window is left.
 *
 * Node states (state file, durable; the function behind each transition):
 *   FRESH --vr_passive_serve--> PRIMARY --a backup of a newer epoch--> STALE
 *   FRESH/BACKUP/STALE --vr_passive_follow (full copy or tail)--> BACKUP
 *   BACKUP --vr_passive_promote (epoch + 1)--> PRIMARY
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "passive_layout.h"
#include "vr_int.h"

#define LINE 64u
#define VRP_BATCH_MS 1 /* 1-safe: the sender's longest nap */
#define HDR ((uint64_t)sizeof(struct vr_rec_hdr))
#define PAD8(x) (((x) + 7) & ~(uint64_t)7)

struct vrp_pool {
	rio_pool *pool;
	char *map;        /* the pool file's first byte (its header) */
	uint64_t size;    /* file bytes */
};

struct vr_passive {
	struct vr_passive_opts o;
	int state_fd;
	struct vr_state st;  /* the current slot's content */
	unsigned npools;
	struct vrp_pool pools[VRP_MAX_POOLS];
	struct rio_persist_tap tap;

	/* Primary: the ring; positions grow forever (p at ring[p & mask]).
	 *   sent <= head <= rec <= end: [sent, head) sealed, not yet sent;
	 *   [rec, end) the open record (header reserved, pieces after). */
	pthread_mutex_t lock;
	pthread_cond_t room;     /* sent moved or the backup went away */
	pthread_cond_t ackcv;    /* acked moved or the backup went away */
	char *ring;
	uint64_t mask;
	uint64_t sent, head, rec, end;
	uint32_t rcount;         /* pieces in the open record */
	uint64_t lastp;          /* position of its last piece descriptor */
	bool unfenced;           /* a WRITE record sealed since the last FENCE */
	bool live;               /* a backup has its copy: record writes */
	bool keeping;            /* a backup took a copy: keep a tail (P6) */
	uint64_t keep, keep_seq; /* oldest record kept; seq of the one before */
	uint64_t stream;         /* this stream's id (new at each serve) */
	uint64_t seq, fseq;      /* last record, last FENCE sealed */
	uint64_t ctarget;        /* 1-safe: the last commit's fence record */
	VR_ATOMIC(uint64_t) acked;
	VR_ATOMIC(uint64_t) granted; /* P7 */
	VR_ATOMIC(uint64_t) offered;
	VR_ATOMIC(int) stop;
	VR_ATOMIC(int) sleeping;
	VR_ATOMIC(int) stale;
	VR_ATOMIC(int) ready;    /* the backup acknowledged its full copy */
	/* One writer of the socket at a time: the sender thread, or a 2-safe
	 * commit that sends its own records (lock order: wlock, then lock). */
	pthread_mutex_t wlock;
	VR_ATOMIC(int) wbroken;  /* a commit's send failed: drop the backup */
	int efd, lfd, cfd;
	unsigned port;
	pthread_t thr;
	bool thr_on;

	/* Backup. */
	VR_ATOMIC(int) following;
	VR_ATOMIC(int) fstop;
	uint64_t applied;
	rio_pool *posp;          /* the position file (P6) */
	char pos_path[4096];     /* state_path + ".pos" (copied at open) */
	struct vrp_pos pos;      /* its current slot (gen 0: none) */
	bool drain_due;          /* VRP_BROKEN_FENCE_LATE only */
	VR_ATOMIC(uint64_t) announced;

	/* Statistics (producer's under lock; the others atomic). */
	uint64_t records, fences, piece_bytes, meta_bytes, class_bytes[4];
	uint64_t dropped;
	VR_ATOMIC(uint64_t) bytes_sent, copies, tails;
};

/* ---- records ---- */

static uint64_t
rec_check(const struct vr_rec_hdr *h, const void *payload, size_t plen)
{
	uint64_t c = rio_checksum(h, offsetof(struct vr_rec_hdr, check),
		VR_WIRE_SEED);
	return plen ? rio_checksum(payload, plen, c) : c;
}

static void
rec_fill(struct vr_rec_hdr *h, uint16_t type, uint32_t count, uint64_t seq,
	uint64_t epoch, uint64_t len)
{
	h->magic = VR_WIRE_MAGIC;
	h->type = type;
	h->major = VRP_WIRE_MAJOR;
	h->len = (uint32_t)len;
	h->count = count;
	h->seq = seq;
	h->epoch = epoch;
	h->check = 0;
}

static void
rec_seal(struct vr_rec_hdr *h)
{
	h->check = rec_check(h, h + 1, h->len - HDR);
}

int
vrp__hdr_check(const struct vr_rec_hdr *h)
{
	if (h->magic != VR_WIRE_MAGIC)
		return vr__err(VR_ECORRUPT,
			"passive record: magic 0x%08x, expected 0x%08x",
			h->magic, VR_WIRE_MAGIC);
	if (h->major != VRP_WIRE_MAJOR)
		return vr__err(VR_EVERSION,
			"passive record: wire major 0x%x, this node speaks "
			"0x%x (passive)", h->major, VRP_WIRE_MAJOR);
	if (h->type == 0 || h->type > VRP_REC_MAXTYPE)
		return vr__err(VR_ECORRUPT, "passive record: unknown type %u",
			h->type);
	if (h->len < HDR || h->len > VRP_MAX_REC + VR_COPY_CHUNK + 64 ||
	    h->len % 8)
		return vr__err(VR_ECORRUPT,
			"passive record (type %u): length %u out of range or "
			"not a multiple of 8", h->type, h->len);
	return 0;
}

/* Checksum, then shape: pieces inside the pool files (sizes), lengths
 * adding up to the payload. */
int
vrp__rec_verify(const struct vr_rec_hdr *h, unsigned npools,
	const uint64_t *sizes)
{
	const char *p = (const char *)(h + 1);
	size_t plen, at = 0;
	int rc = vrp__hdr_check(h);

	if (rc)
		return rc;
	plen = h->len - HDR;
	if (h->check != rec_check(h, p, plen))
		return vr__err(VR_ECORRUPT,
			"passive record (type %u, seq %lu, %u bytes): checksum "
			"mismatch", h->type, (unsigned long)h->seq, h->len);
	switch (h->type) {
	case VRP_REC_HELLO:
		return plen == sizeof(struct vrp_hello) ? 0 : vr__err(
			VR_ECORRUPT, "passive HELLO of %zu bytes", plen);
	case VRP_REC_ACK:
	case VRP_REC_COPY_END:
	case VRP_REC_GRANT:
		return plen == sizeof(struct vrp_ack) ? 0 : vr__err(
			VR_ECORRUPT, "passive ACK of %zu bytes", plen);
	case VRP_REC_REFUSE:
		return plen == sizeof(struct vr_refuse) ? 0 : vr__err(
			VR_ECORRUPT, "passive REFUSE of %zu bytes", plen);
	case VRP_REC_BEAT:
		return plen == 0 ? 0 : vr__err(VR_ECORRUPT,
			"passive BEAT of %zu bytes", plen);
	case VRP_REC_COPY:
		if (h->count != 1)
			return vr__err(VR_ECORRUPT,
				"passive COPY with %u pieces", h->count);
		break;
	}
	for (uint32_t i = 0; i < h->count; i++) {
		const struct vrp_piece *pc = (const void *)(p + at);
		if (plen - at < sizeof(*pc))
			return vr__err(VR_ECORRUPT,
				"passive record %lu: piece %u past the end",
				(unsigned long)h->seq, i);
		if (pc->len == 0 || pc->pool >= npools ||
		    pc->off > sizes[pc->pool] ||
		    pc->len > sizes[pc->pool] - pc->off)
			return vr__err(VR_ECORRUPT,
				"passive record %lu: piece %u {pool %u, %lu, "
				"%u} is not inside a pool file",
				(unsigned long)h->seq, i, pc->pool,
				(unsigned long)pc->off, pc->len);
		at += sizeof(*pc);
		if (plen - at < pc->len)
			return vr__err(VR_ECORRUPT,
				"passive record %lu: piece %u's data past the "
				"end", (unsigned long)h->seq, i);
		at += PAD8(pc->len);
	}
	if (at != plen)
		return vr__err(VR_ECORRUPT,
			"passive record %lu: pieces add up to %zu bytes, the "
			"payload has %zu", (unsigned long)h->seq, at, plen);
	return 0;
}

static int
send_small(int fd, uint16_t type, uint64_t seq, uint64_t epoch,
	const void *payload, size_t plen)
{
	char buf[256];
	struct vr_rec_hdr *h = (void *)buf;

	if (plen)
		memcpy(h + 1, payload, plen);
	rec_fill(h, type, 0, seq, epoch, HDR + plen);
	rec_seal(h);
	return vr__write_all(fd, buf, HDR + plen);
}

/* One whole, verified control record (HELLO, REFUSE...) into buf. */
static int
read_small(int fd, char *buf, size_t cap, unsigned timeout_ms,
	const VR_ATOMIC(int) *stop)
{
	struct vr_rec_hdr *h = (void *)buf;
	int rc = vr__read_all(fd, h, HDR, timeout_ms, stop);

	if (rc)
		return rc;
	if ((rc = vrp__hdr_check(h)))
		return rc;
	if (h->len > cap)
		return vr__err(VR_ECORRUPT,
			"passive record type %u of %u bytes where a control "
			"record was expected", h->type, h->len);
	rc = vr__read_all(fd, h + 1, h->len - HDR, timeout_ms, stop);
	if (rc == VR_EPEERLOST && h->len > HDR)
		rc = vr__err(VR_ETRUNC, "the peer went away inside a record");
	if (rc)
		return rc;
	return vrp__rec_verify(h, 0, NULL);
}

/* ---- the node state file ---- */

static int
state_write(vr_passive *n, const struct vr_state *ns)
{
	struct vr_state s = *ns;
	off_t at;

	s.stream = n->st.stream + 1; /* the generation */
	vr__state_seal(&s);
	at = (off_t)(s.stream % 2) * VRP_STATE_SLOT;
	if (pwrite(n->state_fd, &s, sizeof(s), at) != (ssize_t)sizeof(s))
		return vr__err(-errno, "%s: write state: %s",
			n->o.state_path, strerror(errno));
	/* The slot is durable before the state counts (a role or epoch
	 * change is acted on only after this). */
	if (fdatasync(n->state_fd))
		return vr__err(-errno, "%s: fdatasync: %s", n->o.state_path,
			strerror(errno));
	n->st = s;
	return 0;
}

static bool
state_valid(const struct vr_state *s)
{
	struct vr_state c = *s;

	if (memcmp(s->magic, VR_STATE_MAGIC, sizeof(VR_STATE_MAGIC)) != 0)
		return false;
	vr__state_seal(&c);
	return c.check == s->check;
}

static int
state_load(vr_passive *n)
{
	struct vr_state s[2];
	struct stat sb;
	int best = -1;

	n->state_fd = open(n->o.state_path, O_RDWR | O_CREAT | O_CLOEXEC,
		0644);
	if (n->state_fd < 0)
		return vr__err(-errno, "%s: %s", n->o.state_path,
			strerror(errno));
	if (fstat(n->state_fd, &sb))
		return vr__err(-errno, "%s: %s", n->o.state_path,
			strerror(errno));
	if (sb.st_size == 0) {
		struct vr_state f;
		memset(&f, 0, sizeof(f));
		memcpy(f.magic, VR_STATE_MAGIC, sizeof(VR_STATE_MAGIC));
		f.major = VR_STATE_MAJOR;
		f.role = VR_FRESH;
		memset(&n->st, 0, sizeof(n->st));
		return state_write(n, &f);
	}
	for (int i = 0; i < 2; i++) {
		if (pread(n->state_fd, &s[i], sizeof(s[i]),
			(off_t)i * VRP_STATE_SLOT) != (ssize_t)sizeof(s[i]) ||
		    !state_valid(&s[i]))
			continue;
		if (best < 0 || s[i].stream > s[best].stream)
			best = i;
	}
	if (best < 0)
		return vr__err(VR_ESTATE, "%s: no valid passive node state "
			"slot", n->o.state_path);
	if (s[best].major != VR_STATE_MAJOR)
		return vr__err(VR_EVERSION, "%s: node state major %u, this "
			"node reads %u", n->o.state_path, s[best].major,
			VR_STATE_MAJOR);
	n->st = s[best];
	return 0;
}

/* ---- the backup's position file (P6) ---- */

static void
pos_seal(struct vrp_pos *p)
{
	p->check = rio_checksum(p, offsetof(struct vrp_pos, check),
		VR_WIRE_SEED);
}

/* The current slot, read without mapping the file (a missing or
 * unreadable file, or no valid slot: no position, gen 0). */
static void
pos_load(vr_passive *n)
{
	struct vrp_pos s[2];
	int fd, best = -1;

	memset(&n->pos, 0, sizeof(n->pos));
	fd = open(n->pos_path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	if (pread(fd, s, sizeof(s), RIO_POOL_HDR_SIZE) == (ssize_t)sizeof(s))
		for (int i = 0; i < 2; i++) {
			struct vrp_pos c = s[i];
			pos_seal(&c);
			if (s[i].magic != VRP_POS_MAGIC || c.check != s[i].check)
				continue;
			if (best < 0 || s[i].gen > s[best].gen)
				best = i;
		}
	if (best >= 0)
		n->pos = s[best];
	close(fd);
}

/* Open the position file for writing, made if missing. */
static int
pos_open(vr_passive *n)
{
	const char *path = n->pos_path;
	int rc;

	if (n->posp)
		return 0;
	rc = rio_pool_open(path, RIO_NO_SIGNALS | n->o.rio_flags, &n->posp);
	if (rc == -ENOENT)
		rc = rio_pool_create(path, RIO_POOL_MIN_SIZE,
			RIO_NO_SIGNALS | n->o.rio_flags, &n->posp);
	if (rc)
		return vr__err(rc, "%s: position file: %s", path,
			rio_errormsg());
	return 0;
}

/* Make a new position durable in the older slot. */
static void
pos_write(vr_passive *n, uint64_t stream, uint64_t epoch, uint64_t seq,
	uint64_t limit)
{
	struct vrp_pos *slot = rio_pool_base(n->posp), p;

	memset(&p, 0, sizeof(p));
	p.magic = VRP_POS_MAGIC;
	p.gen = n->pos.gen + 1;
	p.stream = stream;
	p.epoch = epoch;
	p.seq = seq;
	p.limit = limit;
	pos_seal(&p);
	slot[p.gen % 2] = p;
	/* The slot is durable before the caller goes on: before a byte of
	 * the next record is stored (P6), before a limit is granted back
	 * (P7), before a full copy is marked complete (P3). */
	rio_persist(n->posp, &slot[p.gen % 2], sizeof(p));
	n->pos = p;
}

/* ---- the node ---- */

int
vr_passive_open(const struct vr_passive_opts *o, vr_passive **out)
{
	vr_passive *n;
	int rc;

	if (o == NULL || o->state_path == NULL || out == NULL)
		return vr__err(-EINVAL, "vr_passive_open: no state path");
	if (o->mode != 0 && o->mode != VR_1SAFE && o->mode != VR_2SAFE)
		return vr__err(-EINVAL, "vr_passive_open: mode %d (passive: "
			"1-safe or 2-safe)", (int)o->mode);
	if (o->ring_size && (o->ring_size & (o->ring_size - 1) ||
	    o->ring_size < (4u << 20)))
		return vr__err(-EINVAL, "vr_passive_open: ring of %zu bytes "
			"(a power of two >= 4 MiB)", o->ring_size);
	n = calloc(1, sizeof(*n));
	if (n == NULL)
		return vr__err(-ENOMEM, "out of memory");
	n->o = *o;
	if (!n->o.mode)
		n->o.mode = VR_2SAFE;
	if (!n->o.ring_size)
		n->o.ring_size = 16u << 20;
	if (!n->o.heartbeat_ms)
		n->o.heartbeat_ms = 10;
	if (!n->o.timeout_ms)
		n->o.timeout_ms = 100;
	n->efd = n->lfd = n->cfd = -1;
	pthread_mutex_init(&n->lock, NULL);
	pthread_mutex_init(&n->wlock, NULL);
	pthread_cond_init(&n->room, NULL);
	pthread_cond_init(&n->ackcv, NULL);
	if (!n->o.window)
		n->o.window = 16384;
	if ((size_t)snprintf(n->pos_path, sizeof(n->pos_path), "%s.pos",
		o->state_path) >= sizeof(n->pos_path)) {
		free(n);
		return vr__err(-ENAMETOOLONG, "%s: path too long",
			o->state_path);
	}
	if ((rc = state_load(n))) {
		if (n->state_fd >= 0)
			close(n->state_fd);
		free(n);
		return rc;
	}
	pos_load(n);
	*out = n;
	return 0;
}

static void sender_stop(vr_passive *n);

int
vr_passive_close(vr_passive *n)
{
	if (n == NULL)
		return 0;
	sender_stop(n);
	for (unsigned i = 0; i < n->npools; i++)
		if (n->st.role != VR_BACKUP && n->pools[i].pool)
			rio_set_persist_tap(n->pools[i].pool, NULL);
	if (n->lfd >= 0)
		close(n->lfd);
	if (n->efd >= 0)
		close(n->efd);
	close(n->state_fd);
	if (n->posp)
		(void)rio_pool_close(n->posp);
	free(n->ring);
	pthread_mutex_destroy(&n->lock);
	pthread_mutex_destroy(&n->wlock);
	pthread_cond_destroy(&n->room);
	pthread_cond_destroy(&n->ackcv);
	free(n);
	return 0;
}

int
vr_passive_status(const vr_passive *n, struct vr_passive_status *s)
{
	vr_passive *m = (vr_passive *)n;

	memset(s, 0, sizeof(*s));
	pthread_mutex_lock(&m->lock);
	s->role = (enum vr_role)n->st.role;
	s->epoch = n->st.epoch;
	memcpy(s->set_uuid, n->st.set_uuid, 16);
	s->seq = n->st.role == VR_BACKUP ? n->applied : n->seq;
	s->fenced = n->fseq;
	s->acked = atomic_load(&m->acked);
	s->connected = n->live;
	s->records = n->records;
	s->fences = n->fences;
	s->piece_bytes = n->piece_bytes;
	s->meta_bytes = n->meta_bytes;
	memcpy(s->class_bytes, n->class_bytes, sizeof(s->class_bytes));
	s->dropped = n->dropped;
	s->bytes_sent = atomic_load(&m->bytes_sent);
	s->copies = atomic_load(&m->copies);
	s->announced = atomic_load(&m->announced);
	s->tails = atomic_load(&m->tails);
	s->stream = n->st.role == VR_PRIMARY ? n->stream : n->pos.stream;
	s->kept_from = n->keep_seq;
	s->granted = atomic_load(&m->granted);
	/* P7: the position file's limit and fence, both durable. */
	s->limit = n->pos.gen ? n->pos.limit : 0;
	s->pos = n->pos.gen ? n->pos.seq : 0;
#ifdef VRP_BROKEN_WINDOW_ANNOUNCED
	/* Broken on purpose: the window from the heartbeats' last
	 * announcement, which misses the records sealed after it. */
	s->window = s->announced > s->pos ? s->announced - s->pos : 0;
#else
	s->window = s->limit > s->pos ? s->limit - s->pos : 0;
#endif
	pthread_mutex_unlock(&m->lock);
	return 0;
}

/* ---- primary: the producers (the tap) ---- */

static void
wake_sender(vr_passive *n)
{
	uint64_t one = 1;

	if (atomic_load(&n->sleeping) && n->efd >= 0)
		(void)!write(n->efd, &one, sizeof(one));
}

/* Seal the open record as `type` and open the next one after it. */
static void
seal(vr_passive *n, uint16_t type)
{
	struct vr_rec_hdr *h = (void *)(n->ring + (n->rec & n->mask));
	uint64_t len = PAD8(n->end - n->rec);

	/* The check is computed by the sender (P4: the record does not
	 * change once head passes it). */
	rec_fill(h, type, n->rcount, ++n->seq, n->st.epoch, len);
	n->meta_bytes += HDR;
	n->records++;
	if (type == VRP_REC_FENCE) {
		n->fseq = n->seq;
		n->fences++;
		n->unfenced = false;
	} else {
		n->unfenced = true;
	}
	n->head = n->rec = n->rec + len;
	n->end = n->rec + HDR;
	n->rcount = 0;
	if (!n->live)
		n->sent = n->head; /* kept for a tail, sent to no one (P6) */
	/* 1-safe: the sender ships what gathered every VRP_BATCH_MS; wake
	 * it early only when an eighth of the ring waits (a 2-safe commit
	 * wakes it itself). */
	if (n->head - n->sent > (n->mask + 1) / 8)
		wake_sender(n);
}

/* Drop the oldest record kept (P6).  Caller: keep < head. */
static void
drop_oldest(vr_passive *n)
{
	const struct vr_rec_hdr *h = (const void *)(n->ring +
		(n->keep & n->mask));

	if (h->magic == 0) {
		/* The producer wrapped here. */
		n->keep += n->mask + 1 - (n->keep & n->mask);
		return;
	}
	n->keep_seq = h->seq;
	n->keep += h->len;
}

/* Room in the ring up to position `upto`: drop the oldest records sent
 * (all of them with no backup).  False: the oldest is not sent yet. */
static bool
free_to(vr_passive *n, uint64_t upto)
{
	while (upto - n->keep > n->mask + 1) {
		if (n->keep >= n->sent)
			return false;
		drop_oldest(n);
	}
	return true;
}

/* Room for `need` more bytes in the open record, contiguous in the ring.
 * Returns false if nothing is recorded (no backup took a copy yet: drop
 * the write). */
static bool
make_room(vr_passive *n, uint64_t need)
{
	for (;;) {
		uint64_t at = n->rec & n->mask;
		if (!n->live && !n->keeping)
			return false;
		if (n->rcount && (n->end - n->rec + need > VRP_MAX_REC ||
		    at + (n->end - n->rec) + need > n->mask + 1)) {
			seal(n, VRP_REC_WRITE);
			continue;
		}
		if (at + HDR + need > n->mask + 1) {
			/* P4: wrap between records; a zero magic tells the
			 * sender to go on at the ring's start. */
			if (!free_to(n, n->end + (n->mask + 1 - at))) {
				wake_sender(n);
				pthread_cond_wait(&n->room, &n->lock);
				continue;
			}
			*(uint32_t *)(void *)(n->ring + at) = 0;
			n->head = n->rec = n->rec + (n->mask + 1 - at);
			n->end = n->rec + HDR;
			if (!n->live)
				n->sent = n->head;
			wake_sender(n);
			continue;
		}
		if (!free_to(n, n->end + need)) {
			wake_sender(n);
			pthread_cond_wait(&n->room, &n->lock);
			continue;
		}
		return true;
	}
}

static int
pool_index(const vr_passive *n, const rio_pool *p)
{
	for (unsigned i = 0; i < n->npools; i++)
		if (n->pools[i].pool == p)
			return (int)i;
	return -1;
}

static void
tap_flush(void *arg, const rio_pool *p, const void *addr, size_t len)
{
	vr_passive *n = arg;
	int idx = pool_index(n, p);
	struct vrp_pool *vp;
	uint64_t lo, hi;

	if (idx < 0)
		return;
	vp = &n->pools[idx];
	/* Whole lines: the hardware writes back lines, and a program may
	 * count on a line's other bytes going along. */
	lo = ((uint64_t)((const char *)addr - vp->map)) & ~(uint64_t)(LINE - 1);
	hi = ((uint64_t)((const char *)addr - vp->map) + len + LINE - 1) &
		~(uint64_t)(LINE - 1);
	if (hi > vp->size)
		hi = vp->size;
	pthread_mutex_lock(&n->lock);
	if (!n->live && !n->keeping) {
		n->dropped += hi - lo;
		pthread_mutex_unlock(&n->lock);
		return;
	}
	while (lo < hi) {
		uint64_t c = hi - lo < VRP_MAX_PIECE ? hi - lo : VRP_MAX_PIECE;
		struct vrp_piece *pc = n->rcount ?
			(void *)(n->ring + (n->lastp & n->mask)) : NULL;
		uint64_t grow;

		/* Coalesce with the open record's last piece when this range
		 * starts inside or right after it: the newer bytes win. */
		if (pc && pc->pool == (uint32_t)idx && lo >= pc->off &&
		    lo <= pc->off + pc->len &&
		    lo + c - pc->off <= VRP_MAX_PIECE) {
			uint64_t nlen = lo + c - pc->off > pc->len ?
				lo + c - pc->off : pc->len;
			grow = nlen - pc->len;
			if (grow && !make_room(n, grow))
				break;
			/* make_room may have sealed the record: then the
			 * piece is gone from it, start a new one. */
			if (n->rcount == 0)
				continue;
			memcpy((char *)(pc + 1) + (lo - pc->off),
				vp->map + lo, c);
			n->end += grow;
			n->piece_bytes += grow;
			if (n->o.classify)
				n->class_bytes[n->o.classify(
					n->o.classify_arg, (unsigned)idx, lo,
					(uint32_t)c) & 3] += grow;
			pc->len = (uint32_t)nlen;
			lo += c;
			continue;
		}
		if (!make_room(n, 8 + sizeof(*pc) + c))
			break;
		n->end = PAD8(n->end);
		n->lastp = n->end;
		pc = (void *)(n->ring + (n->end & n->mask));
		pc->off = lo;
		pc->len = (uint32_t)c;
		pc->pool = (uint32_t)idx;
		memcpy(pc + 1, vp->map + lo, c);
		n->end += sizeof(*pc) + c;
		n->rcount++;
		n->piece_bytes += c;
		n->meta_bytes += sizeof(*pc);
		if (n->o.classify)
			n->class_bytes[n->o.classify(n->o.classify_arg,
				(unsigned)idx, lo, (uint32_t)c) & 3] += c;
		lo += c;
	}
	if (lo < hi)
		n->dropped += hi - lo;
	pthread_mutex_unlock(&n->lock);
}

static void
tap_drain(void *arg, const rio_pool *p)
{
	vr_passive *n = arg;

	(void)p;
	pthread_mutex_lock(&n->lock);
	/* A fence orders every pool's earlier write-backs (one sfence per
	 * thread; the model treats it as the whole program's). */
	if ((n->live || n->keeping) && (n->rcount || n->unfenced) &&
	    (n->rcount || make_room(n, 0)))
		seal(n, VRP_REC_FENCE);
	pthread_mutex_unlock(&n->lock);
}

int
vr_passive_add_pool(vr_passive *n, rio_pool *pool)
{
	if (n->thr_on)
		return vr__err(-EBUSY, "vr_passive_add_pool: already serving");
	if (n->npools == VRP_MAX_POOLS)
		return vr__err(-E2BIG, "vr_passive_add_pool: at most %u pools",
			VRP_MAX_POOLS);
	if (rio_pool_domain(pool) == RIO_DOMAIN_BYTE)
		return vr__err(VR_EDOMAIN, "%s: byte domain: a program need "
			"not flush there, so its writes cannot be seen; use "
			"the active backup, or the cacheline or page domain",
			rio_pool_path(pool));
	if (pool_index(n, pool) >= 0)
		return vr__err(-EINVAL, "%s: added twice",
			rio_pool_path(pool));
	n->pools[n->npools].pool = pool;
	n->pools[n->npools].map = (char *)rio_pool_base(pool) -
		RIO_POOL_HDR_SIZE;
	n->pools[n->npools].size = rio_pool_size(pool) + RIO_POOL_HDR_SIZE;
	n->npools++;
	n->tap.flush = tap_flush;
	n->tap.drain = tap_drain;
	n->tap.arg = n;
	return rio_set_persist_tap(pool, &n->tap);
}

/* ---- primary: the sender thread ---- */

static int
send_timed(vr_passive *n, int fd, const void *buf, size_t len)
{
	const char *p = buf;
	uint64_t last = vr__now_us();

	while (len > 0) {
		ssize_t w = send(fd, p, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (w < 0) {
			struct pollfd pf = { fd, POLLOUT, 0 };
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				return vr__err(VR_EPEERLOST, "send: %s",
					strerror(errno));
			if (atomic_load(&n->stop))
				return -ECANCELED;
			if (vr__now_us() - last > n->o.timeout_ms * 1000ull)
				return vr__err(VR_EPEERLOST, "the backup took "
					"nothing for %u ms", n->o.timeout_ms);
			(void)poll(&pf, 1, 5);
			continue;
		}
		p += w;
		len -= (size_t)w;
		last = vr__now_us();
	}
	atomic_fetch_add(&n->bytes_sent, (uint64_t)(p - (const char *)buf));
	return 0;
}

static void
drop_backup(vr_passive *n)
{
	/* No commit is writing the socket while it closes. */
	pthread_mutex_lock(&n->wlock);
	pthread_mutex_lock(&n->lock);
	n->live = false;
	atomic_store(&n->ready, 0);
	/* Nothing is sent any more; what is sealed stays in the tail (P6),
	 * or, before any backup took a copy, the next one takes a full copy
	 * of it (P5). */
	n->sent = n->head;
	pthread_cond_broadcast(&n->room);
	pthread_cond_broadcast(&n->ackcv);
	pthread_mutex_unlock(&n->lock);
	if (n->cfd >= 0)
		close(n->cfd);
	n->cfd = -1;
	atomic_store(&n->wbroken, 0);
	pthread_mutex_unlock(&n->wlock);
}

/*
 * Where the stream goes on for a backup whose HELLO (header epoch `epoch`)
 * names its position: true and *at (the ring position of the record after
 * it) if the ring keeps every record after it, false for a full copy
 * (P6).  Caller holds lock.
 */
bool
vrp__tail_at(vr_passive *n, uint64_t epoch, const struct vrp_hello *bh,
	uint64_t *at)
{
	uint64_t p = n->keep, s = n->keep_seq;

	if (!(bh->flags & VRP_HELLO_POS) || !n->keeping ||
	    bh->stream != n->stream || epoch != n->st.epoch ||
	    bh->pos < n->keep_seq || bh->pos > n->seq)
		return false;
	/* P7: only a backup that holds every limit granted durably. */
	if (n->o.mode == VR_1SAFE && bh->limit < atomic_load(&n->granted))
		return false;
	while (s < bh->pos && p < n->head) {
		const struct vr_rec_hdr *h = (const void *)(n->ring +
			(p & n->mask));
		if (h->magic == 0) {
			p += n->mask + 1 - (p & n->mask);
			continue;
		}
		s = h->seq;
		p += h->len;
	}
	if (s != bh->pos)
		return false;
#ifdef VRP_BROKEN_TAIL_SKIP
	/* Broken on purpose: the tail starts one record late. */
	if (p < n->head) {
		const struct vr_rec_hdr *h = (const void *)(n->ring +
			(p & n->mask));
		if (h->magic == 0)
			p += n->mask + 1 - (p & n->mask);
		if (p < n->head)
			p += ((const struct vr_rec_hdr *)(const void *)
				(n->ring + (p & n->mask)))->len;
	}
#endif
	*at = p;
	return true;
}

/* The record at ring position `at` (past a wrap mark), NULL at head. */
const struct vr_rec_hdr *
vrp__ring_at(const vr_passive *n, uint64_t at)
{
	const struct vr_rec_hdr *h;

	if (at >= n->head)
		return NULL;
	h = (const void *)(n->ring + (at & n->mask));
	if (h->magic == 0)
		h = (const void *)n->ring;
	return h;
}

/* Where the next record starts in the ring (position, not offset). */
uint64_t
vrp__ring_head(vr_passive *n)
{
	uint64_t h;

	pthread_mutex_lock(&n->lock);
	h = n->head;
	pthread_mutex_unlock(&n->lock);
	return h;
}

/* The HELLO exchange, then the log tail (P6) or the full copy (P5).
 * 0: the backup is live. */
static int
welcome(vr_passive *n, int fd)
{
	char buf[256], *cb = NULL;
	struct vr_rec_hdr *h = (void *)buf;
	struct vrp_hello bh, ph;
	struct vr_refuse rf = { 0, 0 };
	uint64_t total = 0, done = 0;
	int rc;

	rc = read_small(fd, buf, sizeof(buf), n->o.timeout_ms * 10, &n->stop);
	if (rc)
		return rc;
	if (h->type != VRP_REC_HELLO)
		return vr__err(VR_ECORRUPT, "passive: type %u before HELLO",
			h->type);
	memcpy(&bh, h + 1, sizeof(bh));
	if (h->epoch > n->st.epoch) {
		struct vr_state s = n->st;
		s.role = VR_STALE;
		(void)state_write(n, &s);
		atomic_store(&n->stale, 1);
		rf.code = VR_ESTALE;
		(void)send_small(fd, VRP_REC_REFUSE, 0, n->st.epoch, &rf,
			sizeof(rf));
		return vr__err(VR_ESTALE, "a backup of epoch %lu: this "
			"primary (epoch %lu) is stale",
			(unsigned long)h->epoch, (unsigned long)n->st.epoch);
	}
	if (bh.role != VR_ROLE_BACKUP)
		rf.code = VR_ECORRUPT;
	else if (bh.npools != n->npools)
		rf.code = VR_ESIZE;
	else if (memcmp(bh.set_uuid, (uint8_t[16]){ 0 }, 16) != 0 &&
	    memcmp(bh.set_uuid, n->st.set_uuid, 16) != 0)
		rf.code = VR_EOTHERSET;
	if (rf.code) {
		(void)send_small(fd, VRP_REC_REFUSE, 0, n->st.epoch, &rf,
			sizeof(rf));
		return vr__err(rf.code, "passive: backup refused (role %u, "
			"%u pools for our %u, or another replica set)",
			bh.role, bh.npools, n->npools);
	}
	memset(&ph, 0, sizeof(ph));
	memcpy(ph.set_uuid, n->st.set_uuid, 16);
	ph.role = VR_ROLE_PRIMARY;
	ph.npools = (uint16_t)n->npools;
	ph.stream = n->stream;
	for (unsigned i = 0; i < n->npools; i++) {
		ph.size[i] = n->pools[i].size;
		total += ph.size[i];
	}
	cb = malloc(HDR + sizeof(struct vrp_piece) + VR_COPY_CHUNK);
	if (cb == NULL)
		return vr__err(-ENOMEM, "out of memory");
	/* P5, P6: the program's flushes and fences wait from here until the
	 * backup is live. */
	pthread_mutex_lock(&n->lock);
	{
		uint64_t at;
		if (vrp__tail_at(n, h->epoch, &bh, &at)) {
			/* P6: the records after the backup's position go out
			 * (again) from the ring; no copy. */
			ph.flags = VRP_HELLO_TAIL;
			ph.pos = bh.pos;
			rc = send_small(fd, VRP_REC_HELLO, 0, n->st.epoch, &ph,
				sizeof(ph));
			if (rc == 0) {
				n->sent = at;
				n->live = n->keeping = true;
				atomic_store(&n->offered,
					atomic_load(&n->granted));
				atomic_fetch_add(&n->tails, 1);
			}
			pthread_mutex_unlock(&n->lock);
			free(cb);
			return rc;
		}
	}
	/* P5: the open record is sealed (it stays in the tail, with its
	 * bytes in the copy); everything up to seq is superseded by the
	 * copy for this backup. */
	if (n->rcount)
		seal(n, VRP_REC_WRITE);
	n->sent = n->head;
	ph.pos = n->seq;
	rc = send_small(fd, VRP_REC_HELLO, 0, n->st.epoch, &ph, sizeof(ph));
	for (unsigned i = 0; i < n->npools && rc == 0; i++) {
		for (uint64_t off = 0; off < n->pools[i].size && rc == 0;
		     off += VR_COPY_CHUNK) {
			struct vr_rec_hdr *ch = (void *)cb;
			struct vrp_piece *pc = (void *)(ch + 1);
			uint64_t c = n->pools[i].size - off;
			if (c > VR_COPY_CHUNK)
				c = VR_COPY_CHUNK;
			pc->off = off;
			pc->len = (uint32_t)c;
			pc->pool = i;
			memcpy(pc + 1, n->pools[i].map + off, c);
			rec_fill(ch, VRP_REC_COPY, 1, 0, n->st.epoch,
				HDR + sizeof(*pc) + PAD8(c));
			rec_seal(ch);
			rc = send_timed(n, fd, cb, ch->len);
			done += c;
		}
	}
	if (rc == 0) {
		struct vrp_ack a = { n->seq };
		rc = send_small(fd, VRP_REC_COPY_END, n->seq, n->st.epoch, &a,
			sizeof(a));
	}
	if (rc == 0) {
		n->live = n->keeping = true;
		/* P7: the copy holds every record up to seq. */
		atomic_store(&n->granted, n->seq);
		atomic_store(&n->offered, n->seq);
		atomic_fetch_add(&n->copies, 1);
	}
	pthread_mutex_unlock(&n->lock);
	free(cb);
	(void)done;
	return rc;
}

/* Checksum and send the sealed records in [from, to). */
static int
send_records(vr_passive *n, int fd, uint64_t from, uint64_t to)
{
	uint64_t run = from; /* start of the contiguous bytes not yet sent */
	uint64_t p = from;
	int rc;

	while (p < to) {
		struct vr_rec_hdr *h = (void *)(n->ring + (p & n->mask));
		if (h->magic == 0) {
			/* The producer wrapped here. */
			if (p > run && (rc = send_timed(n, fd,
				n->ring + (run & n->mask), p - run)))
				return rc;
			p += n->mask + 1 - (p & n->mask);
			run = p;
			continue;
		}
		rec_seal(h);
		p += h->len;
		if ((p & n->mask) == 0) {
			/* The record ends exactly at the ring's end, with no
			 * wrap mark: the bytes after it are at the ring's
			 * start, so the run ends here (P4), never past the
			 * ring. */
#ifndef VRP_BROKEN_RUN_PAST_END
			if ((rc = send_timed(n, fd, n->ring + (run & n->mask),
				p - run)))
				return rc;
			run = p;
#endif
		}
	}
	if (p > run)
		return send_timed(n, fd, n->ring + (run & n->mask),
			p - run);
	return 0;
}

/* Read what the backup sent: acknowledgements. */
static int
read_acks(vr_passive *n, char *buf, size_t *have, uint64_t *last_in)
{
	bool full;
again:
	full = false;
	for (;;) {
		ssize_t r;
		if (*have == 4096) {
			full = true; /* parse first, then read on */
			break;
		}
		r = recv(n->cfd, buf + *have, 4096 - *have, MSG_DONTWAIT);
		if (r == 0)
			return vr__err(VR_EPEERLOST, "the backup closed the "
				"connection");
		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			return vr__err(VR_EPEERLOST, "recv: %s",
				strerror(errno));
		}
		*have += (size_t)r;
		*last_in = vr__now_us();
	}
	while (*have >= HDR) {
		struct vr_rec_hdr *h = (void *)buf;
		int rc = vrp__hdr_check(h);
		if (rc)
			return rc;
		if (h->len > 256)
			return vr__err(VR_ECORRUPT, "passive: a %u-byte record "
				"from the backup", h->len);
		if (*have < h->len)
			break;
		if ((rc = vrp__rec_verify(h, 0, NULL)))
			return rc;
		if (h->type == VRP_REC_ACK) {
			struct vrp_ack a;
			/* The first ACK of a connection is the full copy's. */
			atomic_store(&n->ready, 1);
			memcpy(&a, h + 1, sizeof(a));
			if (a.seq > atomic_load(&n->acked)) {
				atomic_store(&n->acked, a.seq);
				pthread_mutex_lock(&n->lock);
				pthread_cond_broadcast(&n->ackcv);
				pthread_mutex_unlock(&n->lock);
			}
		} else if (h->type == VRP_REC_GRANT) {
			/* P7: the backup made this limit durable. */
			struct vrp_ack a;
			memcpy(&a, h + 1, sizeof(a));
			pthread_mutex_lock(&n->lock);
			if (a.seq <= atomic_load(&n->offered) &&
			    a.seq > atomic_load(&n->granted)) {
				atomic_store(&n->granted, a.seq);
				pthread_cond_broadcast(&n->ackcv);
			}
			pthread_mutex_unlock(&n->lock);
		}
		memmove(buf, buf + h->len, *have - h->len);
		*have -= h->len;
	}
	if (full)
		goto again;
	return 0;
}

/* 1-safe: offer seq + window once less than half a window is left (P7).
 * Sender thread, a backup live. */
static int
offer(vr_passive *n)
{
	struct vrp_ack a;
	uint64_t q;
	int rc;

	if (n->o.mode != VR_1SAFE)
		return 0;
	pthread_mutex_lock(&n->lock);
	q = n->seq;
	pthread_mutex_unlock(&n->lock);
	if (atomic_load(&n->offered) >= q + n->o.window / 2)
		return 0;
	a.seq = q + n->o.window;
	pthread_mutex_lock(&n->wlock);
	rc = send_small(n->cfd, VRP_REC_GRANT, a.seq, n->st.epoch, &a,
		sizeof(a));
	pthread_mutex_unlock(&n->wlock);
	if (rc == 0)
		atomic_store(&n->offered, a.seq);
	return rc;
}

static void *
sender_main(void *arg)
{
	vr_passive *n = arg;
	char abuf[4096];
	size_t have = 0;
	uint64_t last_in = 0, last_out = 0;

	while (!atomic_load(&n->stop)) {
		uint64_t from, to, now;
		struct pollfd pf[2];
		int rc;

		if (n->cfd < 0) {
			struct pollfd lp = { n->lfd, POLLIN, 0 };
			int fd;
			if (poll(&lp, 1, 50) <= 0)
				continue;
			fd = accept4(n->lfd, NULL, NULL, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			vr__tune(fd);
			n->cfd = fd;
			if (welcome(n, fd)) {
				drop_backup(n);
				continue;
			}
			have = 0;
			last_in = last_out = vr__now_us();
			continue;
		}
		pthread_mutex_lock(&n->wlock);
		pthread_mutex_lock(&n->lock);
		from = n->sent;
		to = n->head;
		pthread_mutex_unlock(&n->lock);
		rc = atomic_load(&n->wbroken) ? vr__err(VR_EPEERLOST,
			"a commit could not send to the backup") : 0;
		if (rc == 0 && from < to) {
			rc = send_records(n, n->cfd, from, to);
			pthread_mutex_lock(&n->lock);
			if (n->live && n->sent == from)
				n->sent = to;
			pthread_cond_broadcast(&n->room);
			pthread_mutex_unlock(&n->lock);
			last_out = vr__now_us();
		}
		pthread_mutex_unlock(&n->wlock);
		if (rc == 0 && from >= to) {
			uint64_t one;
			atomic_store(&n->sleeping, 1);
			pthread_mutex_lock(&n->lock);
			to = n->head;
			pthread_mutex_unlock(&n->lock);
			if (to == from) {
				pf[0] = (struct pollfd){ n->efd, POLLIN, 0 };
				pf[1] = (struct pollfd){ n->cfd, POLLIN, 0 };
				(void)poll(pf, 2, n->o.mode == VR_1SAFE ?
					VRP_BATCH_MS : (int)n->o.heartbeat_ms);
			}
			atomic_store(&n->sleeping, 0);
			(void)!read(n->efd, &one, sizeof(one));
		}
		if (rc == 0)
			rc = read_acks(n, abuf, &have, &last_in);
		if (rc == 0)
			rc = offer(n);
		now = vr__now_us();
		if (rc == 0 && now - last_out > n->o.heartbeat_ms * 1000ull) {
			pthread_mutex_lock(&n->wlock);
			rc = send_small(n->cfd, VRP_REC_BEAT, n->seq,
				n->st.epoch, NULL, 0);
			pthread_mutex_unlock(&n->wlock);
			last_out = now;
		}
		if (rc == 0 && now - last_in > n->o.timeout_ms * 1000ull)
			rc = vr__err(VR_EPEERLOST, "the backup was silent for "
				"%u ms", n->o.timeout_ms);
		if (rc)
			drop_backup(n);
	}
	return NULL;
}

static void
sender_stop(vr_passive *n)
{
	if (!n->thr_on)
		return;
	atomic_store(&n->stop, 1);
	wake_sender(n);
	pthread_join(n->thr, NULL);
	n->thr_on = false;
	if (n->cfd >= 0)
		drop_backup(n);
}

int
vr_passive_serve(vr_passive *n, const char *host, unsigned port)
{
	int rc;

	if (n->thr_on)
		return 0;
	if (n->npools == 0)
		return vr__err(-EINVAL, "vr_passive_serve: no pool added");
	if (n->st.role == VR_BACKUP || n->st.role == VR_STALE)
		return vr__err(VR_ESTALE, "vr_passive_serve: this node is a "
			"%s (epoch %lu): promote it first",
			n->st.role == VR_BACKUP ? "backup" : "stale primary",
			(unsigned long)n->st.epoch);
	if (n->st.role == VR_FRESH) {
		struct vr_state s = n->st;
		uint64_t a = vr__random64(), b = vr__random64();
		memcpy(s.set_uuid, &a, 8);
		memcpy(s.set_uuid + 8, &b, 8);
		s.epoch = 1;
		s.role = VR_PRIMARY;
		s.seg_size = n->npools;
		if ((rc = state_write(n, &s)))
			return rc;
	}
	n->ring = aligned_alloc(4096, n->o.ring_size);
	if (n->ring == NULL)
		return vr__err(-ENOMEM, "passive ring of %zu bytes",
			n->o.ring_size);
	n->mask = n->o.ring_size - 1;
	n->sent = n->head = n->rec = n->keep = 0;
	n->keep_seq = n->seq;
	n->end = HDR;
	n->keeping = false;
	n->stream = vr__random64() | 1; /* P6: a tail only within it */
	atomic_store(&n->granted, n->seq);
	atomic_store(&n->offered, n->seq);
	n->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (n->efd < 0)
		return vr__err(-errno, "eventfd: %s", strerror(errno));
	rc = vr__listen(host, port, &n->port);
	if (rc < 0)
		return rc;
	n->lfd = rc;
	rc = pthread_create(&n->thr, NULL, sender_main, n);
	if (rc)
		return vr__err(-rc, "passive sender thread: %s", strerror(rc));
	n->thr_on = true;
	return 0;
}

unsigned
vr_passive_port(const vr_passive *n)
{
	return n->port;
}

int
vr_passive_wait_backup(vr_passive *n, unsigned timeout_ms)
{
	uint64_t t0 = vr__now_us();

	for (;;) {
		bool live;
		pthread_mutex_lock(&n->lock);
		live = n->live;
		pthread_mutex_unlock(&n->lock);
		if (live && atomic_load(&n->ready))
			return 0;
		if (atomic_load(&n->stale))
			return vr__err(VR_ESTALE, "a backup of a newer epoch "
				"exists");
		if (vr__now_us() - t0 > timeout_ms * 1000ull)
			return vr__err(VR_ENOBACKUP, "no backup took its copy "
				"within %u ms", timeout_ms);
		usleep(1000);
	}
}

static void
deadline_10ms(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_nsec += 10 * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/* P7: 0 only for a commit whose fence record is within the limit the
 * backup granted; past it, wait for a grant while a backup is live. */
static int
commit_1safe(vr_passive *n)
{
	uint64_t target, t0 = 0;
	int rc = 0;

	pthread_mutex_lock(&n->lock);
	if (!n->live && !n->keeping) {
		pthread_mutex_unlock(&n->lock);
		return vr__err(VR_ENOBACKUP, "no backup took a copy yet: "
			"committed locally, not replicated");
	}
	/* The commit's own fence record: write-backs after the last fence
	 * are sealed into one; a commit with none gets an empty one, so
	 * that no two commits share a fence record (P7 counts records). */
	if ((n->rcount || n->unfenced || n->fseq == n->ctarget) &&
	    (n->rcount || make_room(n, 0)))
		seal(n, VRP_REC_FENCE);
	target = n->ctarget = n->fseq;
	while (atomic_load(&n->granted) < target) {
		struct timespec ts;
		if (!n->live) {
			rc = vr__err(VR_ENOBACKUP, "fence record %lu past the "
				"1-safe limit %lu the backup granted, and no "
				"backup: committed locally, not replicated",
				(unsigned long)target,
				(unsigned long)atomic_load(&n->granted));
			break;
		}
		if (t0 == 0)
			t0 = vr__now_us();
		else if (vr__now_us() - t0 > n->o.timeout_ms * 1000ull) {
			rc = vr__err(VR_ENOBACKUP, "fence record %lu past the "
				"1-safe limit %lu: no grant within %u ms",
				(unsigned long)target,
				(unsigned long)atomic_load(&n->granted),
				n->o.timeout_ms);
			break;
		}
		wake_sender(n);
		deadline_10ms(&ts);
		pthread_cond_timedwait(&n->ackcv, &n->lock, &ts);
	}
	pthread_mutex_unlock(&n->lock);
	return rc;
}

int
vr_passive_commit(vr_passive *n)
{
	uint64_t target, t0;
	int rc = 0;

	if (atomic_load(&n->stale))
		return vr__err(VR_ESTALE, "a backup of a newer epoch exists: "
			"this primary may not commit");
	if (n->o.mode == VR_1SAFE)
		return commit_1safe(n);
	pthread_mutex_lock(&n->lock);
	if (!n->live) {
		/* The tap dropped this transaction's write-backs: no fence
		 * of it exists to wait for. */
		pthread_mutex_unlock(&n->lock);
		return vr__err(VR_ENOBACKUP, "no backup: committed locally, "
			"not replicated");
	}
	target = n->fseq;
	if ((n->rcount || n->unfenced) && (n->rcount || make_room(n, 0))) {
		/* Write-backs after the last fence: not a commit's yet. */
		seal(n, VRP_REC_FENCE);
		target = n->fseq;
	}
	/* Send the records itself if no one else is writing the socket (one
	 * wake-up fewer than through the sender thread); else wake it. */
	if (pthread_mutex_trylock(&n->wlock) == 0) {
		uint64_t from = n->sent, to = n->head;
		int fd = n->cfd;
		pthread_mutex_unlock(&n->lock);
		if (from < to && !atomic_load(&n->wbroken) &&
		    send_records(n, fd, from, to))
			atomic_store(&n->wbroken, 1);
		pthread_mutex_lock(&n->lock);
		if (n->live && n->sent == from && !atomic_load(&n->wbroken))
			n->sent = to;
		pthread_cond_broadcast(&n->room);
		pthread_mutex_unlock(&n->wlock);
		if (atomic_load(&n->wbroken))
			wake_sender(n); /* it drops the backup */
	} else {
		wake_sender(n);
	}
	t0 = vr__now_us();
#ifndef VRP_BROKEN_NO_WAIT
	while (atomic_load(&n->acked) < target) {
		struct timespec ts;
		if (!n->live) {
			rc = vr__err(VR_ENOBACKUP, "no backup: committed "
				"locally, not replicated");
			break;
		}
		if (vr__now_us() - t0 > n->o.timeout_ms * 1000ull) {
			rc = vr__err(VR_ENOBACKUP, "the backup did not "
				"acknowledge fence %lu within %u ms",
				(unsigned long)target, n->o.timeout_ms);
			break;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 10 * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&n->ackcv, &n->lock, &ts);
	}
#endif
	pthread_mutex_unlock(&n->lock);
	return rc;
}

/* ---- backup ---- */

static void
close_copies(vr_passive *n)
{
	for (unsigned i = 0; i < n->npools; i++) {
		if (n->pools[i].pool)
			(void)rio_pool_close(n->pools[i].pool);
		n->pools[i].pool = NULL;
	}
	n->npools = 0;
}

/*
 * Store a WRITE or FENCE record into the copies.  P1: at a FENCE, every
 * piece written back so far is made durable before this returns, so
 * before a byte of the next record is stored.
 */
int
vrp__apply(vr_passive *n, const struct vr_rec_hdr *h)
{
	const char *p = (const char *)(h + 1);
	size_t at = 0;

	for (uint32_t i = 0; i < h->count; i++) {
		const struct vrp_piece *pc = (const void *)(p + at);
		struct vrp_pool *vp = &n->pools[pc->pool];
		memcpy(vp->map + pc->off, pc + 1, pc->len);
		/* Written back now, durable at this record's fence or a
		 * later one (a WRITE record has none of its own). */
		rio_flush(vp->pool, vp->map + pc->off, pc->len);
		at += sizeof(*pc) + PAD8(pc->len);
	}
#ifdef VRP_BROKEN_FENCE_LATE
	/* Broken on purpose: the fence of the previous record, after this
	 * record's pieces are stored. */
	if (n->drain_due)
		for (unsigned i = 0; i < n->npools; i++)
			rio_drain(n->pools[i].pool);
	n->drain_due = h->type == VRP_REC_FENCE;
#else
	if (h->type == VRP_REC_FENCE)
		/* P1: every piece so far is durable before the next record
		 * is stored (one sfence orders every pool's write-backs;
		 * each pool is drained for the page domain's sake). */
		for (unsigned i = 0; i < n->npools; i++)
			rio_drain(n->pools[i].pool);
#endif
	if (h->type == VRP_REC_FENCE) {
		n->applied = h->seq;
		/* P6: after the drain above, before the next record. */
		if (n->posp)
			pos_write(n, n->pos.stream, n->pos.epoch, h->seq,
				n->pos.limit);
	}
	return 0;
}

/* Is a whole record already buffered (then an ack can wait for it)? */
static bool
rec_waiting(const struct vr_reader *r)
{
	const struct vr_rec_hdr *h = (const void *)(r->buf + r->lo);

	return r->hi - r->lo >= HDR && h->magic == VR_WIRE_MAGIC &&
		h->major == VRP_WIRE_MAJOR && r->hi - r->lo >= h->len;
}

/* Open the copies as pools (sizes: the primary's file sizes). */
static int
open_copies(vr_passive *n, const char *const *paths, unsigned npaths,
	const uint64_t *sizes)
{
	for (unsigned i = 0; i < npaths; i++) {
		rio_pool *pool;
		int rc = rio_pool_open(paths[i], RIO_NO_SIGNALS |
			n->o.rio_flags, &pool);
		if (rc)
			return rc;
		n->pools[i].pool = pool;
		n->pools[i].map = (char *)rio_pool_base(pool) -
			RIO_POOL_HDR_SIZE;
		n->pools[i].size = rio_pool_size(pool) + RIO_POOL_HDR_SIZE;
		n->npools = i + 1;
		if (sizes && n->pools[i].size != sizes[i])
			return vr__err(VR_ESIZE, "%s: %lu bytes, the primary's "
				"has %lu", paths[i],
				(unsigned long)n->pools[i].size,
				(unsigned long)sizes[i]);
	}
	return 0;
}

/* The copy files, written with pwrite during a full copy. */
static int open_copies(vr_passive *n, const char *const *paths,
	unsigned npaths, const uint64_t *sizes);

static int
copy_in(vr_passive *n, const char *const *paths,
	const struct vrp_hello *ph, uint64_t epoch, struct vr_reader *rd)
{
	int fds[VRP_MAX_POOLS];
	uint64_t sizes[VRP_MAX_POOLS], total = 0, done = 0;
	struct vr_state s = n->st;
	const struct vr_rec_hdr *h = NULL;
	int rc = 0;

	memcpy(s.set_uuid, ph->set_uuid, 16);
	s.epoch = epoch;
	s.role = VR_BACKUP;
	s.seg_size = ph->npools;
	s.copying = 1;
	/* The copy is marked incomplete before the files change. */
	if ((rc = state_write(n, &s)))
		return rc;
	for (unsigned i = 0; i < ph->npools; i++) {
		sizes[i] = ph->size[i];
		total += sizes[i];
		fds[i] = open(paths[i], O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
			0644);
		if (fds[i] < 0 || ftruncate(fds[i], (off_t)sizes[i])) {
			rc = vr__err(-errno, "%s: %s", paths[i],
				strerror(errno));
			for (unsigned j = 0; j <= i; j++)
				if (fds[j] >= 0)
					close(fds[j]);
			return rc;
		}
	}
	for (;;) {
		unsigned to = n->o.timeout_ms * 10;
		rc = vr__reader_fill(rd, HDR, to, &n->fstop);
		if (rc == 0) {
			h = (const void *)(rd->buf + rd->lo);
			if ((rc = vrp__hdr_check(h)) == 0 &&
			    (rc = vr__reader_fill(rd, h->len, to,
				&n->fstop)) == 0) {
				h = (const void *)(rd->buf + rd->lo);
				rc = vrp__rec_verify(h, ph->npools, sizes);
			}
		}
		if (rc == VR_EPEERLOST && rd->hi > rd->lo)
			rc = vr__err(VR_ETRUNC, "the primary went away "
				"inside a record of the full copy");
		if (rc)
			break;
		rd->lo += h->len;
		if (h->type == VRP_REC_COPY) {
			const struct vrp_piece *pc = (const void *)(h + 1);
			if (pwrite(fds[pc->pool], pc + 1, pc->len,
				(off_t)pc->off) != (ssize_t)pc->len) {
				rc = vr__err(-errno, "%s: write: %s",
					paths[pc->pool], strerror(errno));
				break;
			}
			done += pc->len;
			if (n->o.progress)
				n->o.progress(n->o.progress_arg, done, total);
			continue;
		}
		if (h->type == VRP_REC_COPY_END) {
			struct vrp_ack a;
			memcpy(&a, h + 1, sizeof(a));
			n->applied = a.seq;
			break;
		}
		if (h->type != VRP_REC_BEAT) {
			rc = vr__err(VR_ECORRUPT, "passive: record type %u "
				"inside the full copy", h->type);
			break;
		}
	}
	for (unsigned i = 0; i < ph->npools; i++) {
		/* P3: the copy is durable before it is marked complete. */
		if (rc == 0 && fsync(fds[i]))
			rc = vr__err(-errno, "%s: fsync: %s", paths[i],
				strerror(errno));
		close(fds[i]);
	}
	if (rc)
		return rc;
	if ((rc = open_copies(n, paths, ph->npools, sizes)))
		return rc;
	/* P6: the copy's position, durable before the copy counts. */
	pos_write(n, ph->stream, epoch, n->applied, n->applied);
	s = n->st;
	s.copying = 0;
	if ((rc = state_write(n, &s)))
		return rc;
	atomic_fetch_add(&n->copies, 1);
	return 0;
}

int
vr_passive_follow(vr_passive *n, const char *host, unsigned port,
	const char *const *paths, unsigned npaths)
{
	struct vr_reader rd = { -1, NULL, 0, 0, 0 };
	char buf[256];
	struct vr_rec_hdr *h = (void *)buf;
	struct vrp_hello bh, ph;
	uint64_t sizes[VRP_MAX_POOLS];
	uint64_t pepoch, last_ack = 0, rseq;
	int fd, rc;

	if (npaths == 0 || npaths > VRP_MAX_POOLS)
		return vr__err(-EINVAL, "vr_passive_follow: %u paths",
			npaths);
	if (n->thr_on || n->npools)
		return vr__err(-EBUSY, "vr_passive_follow: this node serves "
			"(or was given pools to serve)");
	atomic_store(&n->fstop, 0);
	if ((rc = pos_open(n)))
		return rc;
	fd = vr__connect(host, port, n->o.timeout_ms * 10);
	if (fd < 0)
		return fd;
	atomic_store(&n->following, 1);
	memset(&bh, 0, sizeof(bh));
	memcpy(bh.set_uuid, n->st.set_uuid, 16);
	bh.role = VR_ROLE_BACKUP;
	bh.npools = (uint16_t)npaths;
	/* P6: name the position only for whole copies of this epoch that
	 * open (a tail goes on from them). */
	if (n->st.role == VR_BACKUP && !n->st.copying && n->pos.gen &&
	    n->pos.epoch == n->st.epoch) {
		if (open_copies(n, paths, npaths, NULL) == 0) {
			bh.flags = VRP_HELLO_POS;
			bh.stream = n->pos.stream;
			bh.pos = n->pos.seq;
			bh.limit = n->pos.limit;
		} else {
			close_copies(n);
		}
	}
	if ((rc = send_small(fd, VRP_REC_HELLO, 0, n->st.epoch, &bh,
		sizeof(bh))))
		goto out;
	rc = read_small(fd, buf, sizeof(buf), n->o.timeout_ms * 10,
		&n->fstop);
	if (rc)
		goto out;
	if (h->type == VRP_REC_REFUSE) {
		struct vr_refuse rf;
		memcpy(&rf, h + 1, sizeof(rf));
		rc = vr__err(rf.code ? rf.code : VR_ECORRUPT, "the primary "
			"refused this backup: %s", vr_strerror(rf.code));
		goto out;
	}
	if (h->type != VRP_REC_HELLO) {
		rc = vr__err(VR_ECORRUPT, "passive: type %u before HELLO",
			h->type);
		goto out;
	}
	memcpy(&ph, h + 1, sizeof(ph));
	pepoch = h->epoch;
	{
		struct vr_refuse rf = { 0, 0 };
		if (ph.role != VR_ROLE_PRIMARY)
			rc = vr__err(VR_ECORRUPT, "passive: the peer is no "
				"primary (role %u)", ph.role);
		else if (ph.npools != npaths || ph.npools > VRP_MAX_POOLS)
			rc = vr__err(VR_ESIZE, "the primary replicates %u "
				"pools, this backup was given %u paths",
				ph.npools, npaths);
		else if (memcmp(n->st.set_uuid, (uint8_t[16]){ 0 }, 16) &&
		    memcmp(n->st.set_uuid, ph.set_uuid, 16))
			rc = vr__err(VR_EOTHERSET, "the primary replicates "
				"another replica set");
		else if (pepoch < n->st.epoch)
			rc = vr__err(VR_ESTALE, "the primary's epoch %lu is "
				"older than this node's %lu",
				(unsigned long)pepoch,
				(unsigned long)n->st.epoch);
		if (rc) {
			rf.code = rc;
			(void)send_small(fd, VRP_REC_REFUSE, 0, n->st.epoch,
				&rf, sizeof(rf));
			goto out;
		}
	}
	for (unsigned i = 0; i < ph.npools; i++)
		sizes[i] = ph.size[i];
	rd.fd = fd;
	if (ph.flags & VRP_HELLO_TAIL) {
		/* P6: the stream goes on after this backup's position. */
		if (!(bh.flags & VRP_HELLO_POS) || ph.pos != bh.pos ||
		    ph.stream != bh.stream || pepoch != n->pos.epoch) {
			rc = vr__err(VR_ECORRUPT, "the primary offers a log "
				"tail after record %lu of stream %016lx, this "
				"backup holds record %lu of stream %016lx",
				(unsigned long)ph.pos,
				(unsigned long)ph.stream,
				(unsigned long)bh.pos,
				(unsigned long)bh.stream);
			goto out;
		}
		for (unsigned i = 0; i < ph.npools; i++)
			if (n->pools[i].size != sizes[i]) {
				rc = vr__err(VR_ESIZE, "%s: %lu bytes, the "
					"primary's has %lu", paths[i],
					(unsigned long)n->pools[i].size,
					(unsigned long)sizes[i]);
				goto out;
			}
		n->applied = ph.pos;
		atomic_fetch_add(&n->tails, 1);
		if (n->o.tail)
			n->o.tail(n->o.progress_arg, ph.pos);
	} else {
		close_copies(n);
		if ((rc = copy_in(n, paths, &ph, pepoch, &rd)))
			goto out;
	}
	rseq = n->applied;
	{
		struct vrp_ack a = { n->applied };
		if ((rc = send_small(fd, VRP_REC_ACK, 0, n->st.epoch, &a,
			sizeof(a))))
			goto out;
	}
	for (;;) {
		const struct vr_rec_hdr *r = NULL;
		unsigned to = n->o.timeout_ms;
		rc = vr__reader_fill(&rd, HDR, to, &n->fstop);
		if (rc == 0) {
			r = (const void *)(rd.buf + rd.lo);
			if ((rc = vrp__hdr_check(r)) == 0 &&
			    (rc = vr__reader_fill(&rd, r->len, to,
				&n->fstop)) == 0) {
				r = (const void *)(rd.buf + rd.lo);
				/* P3: whole and verified before use. */
				rc = vrp__rec_verify(r, ph.npools, sizes);
			}
		}
		if (rc == VR_EPEERLOST && rd.hi > rd.lo)
			rc = vr__err(VR_ETRUNC, "the primary went away "
				"inside a record");
		if (rc)
			break;
		rd.lo += r->len;
		if (r->epoch != pepoch) {
			rc = vr__err(VR_ECORRUPT, "passive record of epoch "
				"%lu in a stream of epoch %lu",
				(unsigned long)r->epoch,
				(unsigned long)pepoch);
			break;
		}
		if ((r->type == VRP_REC_WRITE || r->type == VRP_REC_FENCE) &&
		    r->seq != rseq + 1) {
			/* P6: never a gap, nor a record stored twice out of
			 * order. */
			rc = vr__err(VR_ECORRUPT, "passive record %lu after "
				"record %lu: the stream skips or repeats",
				(unsigned long)r->seq, (unsigned long)rseq);
			break;
		}
		if (r->type == VRP_REC_WRITE || r->type == VRP_REC_FENCE) {
			rseq = r->seq;
#ifdef VRP_BROKEN_ACK_EARLY
			if (r->type == VRP_REC_FENCE) {
				struct vrp_ack a = { r->seq };
				if ((rc = send_small(fd, VRP_REC_ACK, 0,
					n->st.epoch, &a, sizeof(a))))
					break;
			}
#endif
			vrp__apply(n, r);
			atomic_fetch_add(&n->bytes_sent, r->len);
		} else if (r->type == VRP_REC_BEAT) {
			if (r->seq > atomic_load(&n->announced))
				atomic_store(&n->announced, r->seq);
		} else if (r->type == VRP_REC_GRANT) {
			/* P7: durable before it is granted back. */
			struct vrp_ack a;
			memcpy(&a, r + 1, sizeof(a));
			if (a.seq > n->pos.limit)
				pos_write(n, n->pos.stream, n->pos.epoch,
					n->pos.seq, a.seq);
			if ((rc = send_small(fd, VRP_REC_GRANT, a.seq,
				n->st.epoch, &a, sizeof(a))))
				break;
			continue;
		} else {
			rc = vr__err(VR_ECORRUPT, "passive: record type %u in "
				"the stream", r->type);
			break;
		}
		/* P2: acknowledge the last durable fence when nothing more
		 * is waiting (one ack covers a batch) or a heartbeat has
		 * passed since the last ack, and answer beats. */
		bool ack = r->type == VRP_REC_BEAT ||
			(r->type == VRP_REC_FENCE && (!rec_waiting(&rd) ||
			vr__now_us() - last_ack > n->o.heartbeat_ms * 1000ull));
#ifdef VRP_BROKEN_ACK_EARLY
		ack = r->type == VRP_REC_BEAT;
#endif
		if (ack) {
			struct vrp_ack a = { n->applied };
			last_ack = vr__now_us();
			if ((rc = send_small(fd, VRP_REC_ACK, 0, n->st.epoch,
				&a, sizeof(a))))
				break;
		}
	}
out:
	if (rc == -ECANCELED)
		rc = 0; /* vr_passive_stop (during a copy: still incomplete) */
	close_copies(n);
	free(rd.buf);
	close(fd);
	atomic_store(&n->following, 0);
	return rc;
}

void
vr_passive_stop(vr_passive *n)
{
	atomic_store(&n->fstop, 1);
}

int
vr_passive_promote(vr_passive *n)
{
	struct vr_state s = n->st;

	if (atomic_load(&n->following))
		return vr__err(-EBUSY, "vr_passive_promote: still following");
	if (s.copying)
		return vr__err(VR_EINCOMPLETE, "%s: a full copy was "
			"interrupted: the copies are not an image of the "
			"primary", n->o.state_path);
	if (s.role == VR_PRIMARY)
		return 0;
	if (s.role != VR_BACKUP)
		return vr__err(VR_ENOTPRIMARY, "vr_passive_promote: the node "
			"is %s, not a backup", s.role == VR_FRESH ? "fresh" :
			"stale");
	s.epoch++;
	s.role = VR_PRIMARY;
	/* The new epoch is durable before the node may serve. */
	return state_write(n, &s);
}
