/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vr_int.h -- libvista_replica internals shared between its files
 *
 * Files: err.c (codes), wire.c (records, diff, socket I/O), node.c (the
 * state segment, open/close/promote/status), primary.c (the hook, the
 * ring, the sender thread), backup.c (vr_follow: log, acknowledge), blog.c
 * (the backup's redo log: append, apply in batches, recover), passive.c
 * (the passive backup: librio's write tap, its own stream).
 *
 * Node state machine (vr_state.role, durable; the function behind each
 * transition):
 *   FRESH --vr_serve--> PRIMARY --a backup of a higher epoch--> STALE
 *   FRESH/BACKUP/STALE --vr_follow (full copy if needed)--> BACKUP
 *   BACKUP --vr_promote (epoch + 1, new stream)--> PRIMARY
 * Only PRIMARY commits (the hook refuses otherwise).
 */
#ifndef VR_INT_H
#define VR_INT_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "blog_layout.h"
#include "replica_layout.h"
#include "rio.h"
#include "vista.h"
#include "vista_replica.h"

#define vr__err(rc, ...) rio_seterr((rc), __VA_ARGS__)

/* The tests (C++) include this header for the stream functions only. */
#ifdef __cplusplus
#define VR_ATOMIC(t) t
#else
#include <stdatomic.h>
#define VR_ATOMIC(t) _Atomic t
#endif

/* The backup's redo log (blog.c), used by vr_follow's thread only.
 * Positions are log positions (blog_layout.h). */
struct vr_blog {
	rio_pool *pool;           /* NULL: none (a primary, or not made) */
	char *area;               /* the entry area */
	struct vr_blog_slot *slot; /* the two checkpoint slots */
	uint64_t size;            /* area bytes, a power of two */
	bool have;                /* a slot is valid */
	/* The current slot: applied up to (stream, seq, pos); the first
	 * entry not applied is at off. */
	uint64_t gen, stream, seq, pos, off;
	uint64_t end;             /* next append position (DRAM only) */
	uint64_t fl;              /* entries before it are flushed */
	uint64_t lseq, lpos;      /* last record appended */
	/* An apply's segment lines to flush: a bit per line, and the list
	 * of the marked ones. */
	uint64_t *lines;
	uint32_t *dirty;
	size_t ndirty, dcap;
};

/* A buffered reader: records are parsed out of large receives. */
struct vr_reader {
	int fd;
	char *buf;
	size_t cap, lo, hi; /* unread bytes are [lo, hi) */
};
/* The start of a group of members that shares its 64-byte line with no
 * other group: what each commit writes, what the sender writes and what
 * both only read never sit on one line (a write by one core would evict
 * the line the other reads on every pass). */
#define VR_LINE __attribute__((aligned(64)))

struct vr_node {
	/* Read-mostly: set at open and vr_serve (stream, efd and lfd also
	 * when a stream is dropped or the sender stops). */
	vista *v;
	vista_segment *seg;       /* the replicated data segment */
	vista_segment *sseg;      /* the state segment */
	struct vr_state *st;      /* in sseg */
	char *base;               /* data segment user area */
	size_t size;
	struct vr_opts o;
	char *ring;
	uint64_t stream;          /* the primary's stream in DRAM */
	int efd;                  /* eventfd: wakes the sender */
	int lfd;                  /* listening socket */
	unsigned port;
	pthread_t thr;
	bool thr_on;

	/* Primary: the ring of queued records, byte positions grow forever
	 * (position p lives at ring[p & (ring_size - 1)]).
	 *   tail <= sent <= head;  tail: acknowledged (the backup may need
	 *   nothing before it); sent: written to the socket; head: queued.
	 * The producers' line: each commit writes it, under lock.  head is
	 * stored with release by a producer (primary.c R1) and loaded with
	 * acquire by the sender, which takes no lock to read it. */
	VR_LINE pthread_mutex_t lock; /* producers, the ring's pointers */
	VR_ATOMIC(uint64_t) head;
	VR_ATOMIC(uint64_t) seq;  /* last seq queued (relaxed: a count) */
	/* Statistics each commit bumps (under lock), vr_status reads. */
	VR_LINE VR_ATOMIC(uint64_t) records;
	VR_ATOMIC(uint64_t) data_bytes, meta_bytes;

	/* The consumer's line: the sender (and the acks) write it. */
	VR_LINE VR_ATOMIC(uint64_t) sent; /* written under lock or wlock */
	uint64_t tail;            /* under lock */
	/* o.whole_ranges: the records before it are sealed (their check
	 * written, primary.c P6); written under wlock and n->lock. */
	uint64_t sealed;
	uint64_t base_seq;        /* seq of the record ending at tail */
	VR_ATOMIC(uint64_t) acked;   /* last seq acknowledged */
	/* o.sender_diff (primary.c P7): the commits write whole-range
	 * records into qring at head; [raw, head) of qring are not diffed
	 * yet.  The diffed records, the stream, are [tail, dhead) of ring.
	 * raw and dhead are written under wlock by whoever pushes (with a
	 * connection), under n->lock when there is none (drop, full copy).
	 * Without it qring is ring and the stream ends at head. */
	VR_ATOMIC(uint64_t) raw, dhead;
	VR_ATOMIC(int) rwait;     /* producers waiting for qring room */
	char *qring;
	char *mirror;             /* the backup's copy, as sent so far */
	char *dout;               /* a diffed record, before the ring */
	size_t dcap;
	uint64_t *dol;            /* vr_diff's pieces */
	size_t dolcap;
	VR_ATOMIC(uint64_t) bytes_sent, copies;

	/* Read by each commit, written seldom: on a GRANT, a full copy, a
	 * connection made or lost. */
	/* 1-safe (replica_layout.h GRANT): a commit of a seq past granted
	 * does not return 0. */
	VR_LINE VR_ATOMIC(uint64_t) granted;
	VR_ATOMIC(uint64_t) copy_gen;
	VR_ATOMIC(int) alone;        /* no backup: records are dropped */
	VR_ATOMIC(int) connected;
	VR_ATOMIC(int) stop;

	/* The sender's: written on each of its passes. */
	VR_LINE VR_ATOMIC(int) sleeping; /* the sender is in poll() */
	VR_ATOMIC(int) waiters;
	/* offered: the largest 1-safe limit sent (sender). */
	VR_ATOMIC(uint64_t) offered;
	VR_ATOMIC(uint64_t) last_in; /* us: the backup was last heard */
	VR_ATOMIC(int) wbroken;   /* a commit's send failed: drop it */
	VR_ATOMIC(int) rbroken;   /* a commit's read failed: drop it */
	pthread_mutex_t wlock;    /* one writer of the socket at a time */
	int sfd;                  /* the backup's connection, -1 if none */
	pthread_mutex_t rlock;    /* one reader of the backup's acks */
	struct vr_reader rd;      /* ... and its buffer (fd -1: none) */
	pthread_cond_t room;      /* tail moved (producers wait) */
	pthread_cond_t ackcv;     /* acked moved (2-safe waiters) */

	/* Backup. */
	VR_LINE VR_ATOMIC(int) following;
	VR_ATOMIC(uint64_t) announced;
	int cfd;                  /* vr_follow's connection */
	struct vr_blog blog;
	char *blog_path;          /* o.state_path + ".redo" (a copy) */
	VR_ATOMIC(uint64_t) bseq; /* last record acknowledged (vr_status) */
	VR_ATOMIC(uint64_t) applies; /* log batches applied */
};

/* err.c */

/* wire.c */
void vr__rec_seal(struct vr_rec_hdr *h, uint16_t type, uint32_t count,
	uint64_t seq, uint64_t epoch, size_t len, const void *payload);
/* The header without its check (the sender seals it later), and the
 * check of a filled header and its payload. */
void vr__rec_fill(struct vr_rec_hdr *h, uint16_t type, uint32_t count,
	uint64_t seq, uint64_t epoch, size_t len);
uint64_t vr__rec_check(const struct vr_rec_hdr *h, const void *payload);
int vr__hdr_check(const struct vr_rec_hdr *h);
int vr__rec_verify(const struct vr_rec_hdr *h, const void *payload,
	uint64_t seg_size);
int vr__write_all(int fd, const void *buf, size_t len);
int vr__read_all(int fd, void *buf, size_t len, unsigned timeout_ms,
	const VR_ATOMIC(int) *stop);
int vr__read_rec(int fd, void **buf, size_t *cap, unsigned timeout_ms,
	const VR_ATOMIC(int) *stop, uint64_t seg_size);
int vr__reader_fill(struct vr_reader *r, size_t need, unsigned timeout_ms,
	const VR_ATOMIC(int) *stop);
/* The next whole, verified record (valid until the next call). */
int vr__reader_next(struct vr_reader *r, const struct vr_rec_hdr **out,
	unsigned timeout_ms, const VR_ATOMIC(int) *stop, uint64_t seg_size);
bool vr__reader_ready(const struct vr_reader *r);
int vr__send_rec(int fd, uint16_t type, uint32_t count, uint64_t seq,
	uint64_t epoch, const void *payload, size_t plen);
int vr__listen(const char *host, unsigned port, unsigned *bound);
int vr__connect(const char *host, unsigned port, unsigned timeout_ms);
void vr__tune(int fd);
uint64_t vr__now_us(void);

/* node.c */
void vr__state_seal(struct vr_state *s);
int vr__state_set(vr_node *n, const struct vr_state *ns);
int vr__node_role(const vr_node *n);

uint64_t vr__random64(void);

/* blog.c */
int vr__blog_open(vr_node *n, bool create);
void vr__blog_close(vr_node *n);
int vr__blog_recover(vr_node *n);
int vr__blog_append(vr_node *n, const struct vr_rec_hdr *h, uint64_t pos);
void vr__blog_fence(vr_node *n);
int vr__blog_apply(vr_node *n);
bool vr__blog_due(const vr_node *n);
int vr__blog_reset(vr_node *n);
void vr__crash_point(const char *name);

/* primary.c */
int vr__hook(void *arg, unsigned event, struct vista_txinfo *tx);
void vr__primary_stop(vr_node *n);
/* The calling thread applies records (backup.c): the hook lets its
 * transactions through. */
void vr__set_applying(bool on);

/* passive.c (the tests use these) */
int vrp__hdr_check(const struct vr_rec_hdr *h);
int vrp__rec_verify(const struct vr_rec_hdr *h, unsigned npools,
	const uint64_t *sizes);
int vrp__apply(vr_passive *n, const struct vr_rec_hdr *h);
struct vrp_hello;
bool vrp__tail_at(vr_passive *n, uint64_t epoch, const struct vrp_hello *bh,
	uint64_t *at);
const struct vr_rec_hdr *vrp__ring_at(const vr_passive *n, uint64_t at);
uint64_t vrp__ring_head(vr_passive *n);

#endif /* VR_INT_H */
