/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vg_int.h -- libvistagrams internals shared between its source files
 *
 * Module map (one concept per file):
 *   err.c       return codes, messages
 *   wire.c      datagram encode/parse (wire_layout.h)
 *   net.c       UDP sockets, addresses, the injectable lossy network
 *   table.c     the persistent hash tables (table_layout.h)
 *   oplog.c     the deferred-operation log: append, replay
 *   endpoint.c  open (create, validate, recover), close, stats
 *   txn.c       vg_begin/vg_commit/vg_abort, the per-thread context
 *   client.c    requests out, responses in, retransmission, acks
 *   server.c    requests in, responses out, the retransmit port, peers
 *   pump.c      the event loop: sockets, timers, vista_select, vg_poll
 */
#ifndef VG_INT_H
#define VG_INT_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rio_assert.h"
#include "rio_clock.h"
#include "rio_int.h"
#include "table_layout.h"
#include "vistagrams.h"
#include "wire_layout.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VG__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* err.c */
/* Set the stack's thread-local message (rio_seterr); returns rc. */
#define vg__err(rc, ...) rio_seterr((rc), __VA_ARGS__)
#define vg__errno rio__errno /* "<context>: <strerror(errno)>", -errno */
/* Put the endpoint in its error state (sticky) and return VG_EFATAL. */
int vg__fatal(vg_endpoint *ep, int cause, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* 0, or VG_EFATAL with the saved cause as this thread's message. */
int vg__check(const vg_endpoint *ep);

/* ------------------------------------------------------------------------
 * wire.c
 * ------------------------------------------------------------------------ */

/* Why a datagram was refused: selects the drop counter. */
enum vg__wire_verdict {
	VG__WIRE_OK = 0,
	VG__WIRE_MALFORMED = 1,
	VG__WIRE_TRUNCATED = 2,
	VG__WIRE_OVERSIZED = 3,
	VG__WIRE_CHECKSUM = 4,
};

/* A parsed datagram; pointers refer to the buffer given to the parser. */
struct vg__wire {
	uint8_t type;
	uint16_t flags;
	uint16_t nacks;
	uint32_t payload_len;
	uint64_t src_node, src_inc;
	uint64_t req_node, req_inc, seq, low;
	const uint8_t *acks;    /* nacks little-endian u64, unaligned */
	const uint8_t *payload;
};

enum vg__wire_verdict vg__wire_parse(const void *buf, size_t len,
	uint32_t max_message, struct vg__wire *out);
uint64_t vg__wire_ack(const struct vg__wire *w, unsigned i);
uint64_t vg__wire_payload_csum(const void *payload, size_t len);
/* Fill *h from w (type ... low, nacks, payload_len) and compute the
 * checksum over h, acks[] and the payload whose hash is payload_csum. */
void vg__wire_seal(struct vg_wire_hdr *h, const struct vg__wire *w,
	const uint64_t *acks, uint64_t payload_csum);

/* ------------------------------------------------------------------------
 * net.c
 * ------------------------------------------------------------------------ */

struct vg__held; /* a datagram held back by the fault injector */

struct vg__net {
	int fd;          /* normal port */
	int rfd;         /* retransmit port (normal + 1) */
	struct sockaddr_storage self;
	socklen_t selflen;
	/* fault injection (vg_faults) */
	bool faulty;
	struct vg_faults f;
	uint64_t rng;
	struct vg__held *held; /* sorted by due time */
};

int vg__net_open(vg_endpoint *ep, const char *host, uint16_t port);
void vg__net_close(vg_endpoint *ep);
/* Send one datagram made of up to three parts (through the fault
 * injector).  Errors are counted and ignored: loss is what the protocol
 * recovers from. */
void vg__net_send(vg_endpoint *ep, const struct sockaddr *to, socklen_t tolen,
	const void *a, size_t alen, const void *b, size_t blen, const void *c,
	size_t clen);
/* Release held datagrams that are due; the next due time (or UINT64_MAX). */
uint64_t vg__net_tick(vg_endpoint *ep, uint64_t now);
void vg__net_drop_held(vg_endpoint *ep);

int vg__addr_from_sockaddr(const struct sockaddr *sa, socklen_t len,
	struct vg_addr *out);
/* port_add: 0 for the normal port, 1 for the retransmit port. */
socklen_t vg__addr_to_sockaddr(const struct vg_addr *a, unsigned port_add,
	struct sockaddr_storage *out);
bool vg__addr_valid(const struct vg_addr *a);

/* ------------------------------------------------------------------------
 * Volatile state
 * ------------------------------------------------------------------------ */

/* A received datagram. */
struct vg__pkt {
	struct vg__pkt *next;
	struct vg__wire w;
	struct sockaddr_storage from;
	socklen_t fromlen;
	uint32_t len;
	bool retrans;     /* arrived on the retransmit port */
	uint8_t data[];
};

#define VG__DOOM_BATCH 16
/* A payload up to this long is declared new in the transaction with its
 * slot (not logged, covered by Vista's commit record, no drain of its
 * own); a longer one is written raw and drained before the commit point
 * (client.c send_request_tx, server.c S8).  Measured by vg-bench in the
 * cacheline domain, quiet machine: at 128 bytes both ways cost the same
 * (+1.58 declared, +1.64 raw, us a cycle over the volatile baseline); at
 * 256 declaring cost more (+2.15 against +1.82), and at 1-8 KiB +0.8 to
 * +2.1 us more (the commit's checksum over the payload, and its lines
 * written back at the commit rather than right after the copy). */
#ifndef VG__DECLARED_PAYLOAD_MAX
#define VG__DECLARED_PAYLOAD_MAX 128u
#endif

/* Per request slot (client). */
struct vg__reqv {
	int32_t prev, next; /* outstanding list of its destination */
	int32_t dest;       /* index in ep->dests, -1 = none */
	bool pending;       /* filled by the open transaction */
	bool outstanding;   /* committed, on its destination's list */
	bool consumed;      /* response taken by the open transaction */
	bool sweep;         /* ... whose commit frees tombstones (T4) */
	uint32_t rto_us;
	uint64_t due_ns;    /* next retransmission */
	struct vg__pkt *resp;
};

/* A server this endpoint sends requests to (client). */
struct vg__dest {
	struct vg_addr addr;
	struct sockaddr_storage sa, rsa; /* normal, retransmit port */
	socklen_t salen;
	int32_t head, tail;  /* outstanding requests, ascending seq */
	uint32_t nacks;      /* finished since the last datagram to it */
	uint64_t acks[VG_WIRE_MAX_ACKS];
	uint64_t ack_since;  /* when the oldest of them was queued */
};

/* Undo records of the open transaction for the volatile state. */
enum vg__undo_kind {
	VG__U_REQ_INSERT,   /* request slot filled */
	VG__U_RESP_INSERT,  /* response slot filled (receive) */
	VG__U_RESP_ANSWER,  /* response slot answered (was committed) */
	VG__U_RESP_TAKEN,   /* request slot's response consumed */
};
struct vg__undo {
	uint32_t kind;
	uint32_t slot;
};

/* An endpoint's share of the thread's open transaction. */
struct vg__eptx {
	bool joined;
	bool implicit;       /* a call running as its own transaction */
	const void *owner;   /* the thread context that joined */
	uint64_t gen;        /* committed_gen + 1 */
	uint32_t nops;
	uint32_t ops_declared; /* records [0, this) of the log declared */
	bool txhdr_declared;
	bool raw_dirty;      /* raw stores flushed, not drained yet */
	struct vg__undo *undo;
	uint32_t nundo, undo_cap;
	uint32_t undo_declared; /* the requests taken by undo[0..this) have
				   their state words declared */
	struct vg__pkt *taken_head, *taken_tail; /* requests received */
	vg_endpoint *next;   /* next endpoint of the transaction */
};

struct vg_endpoint {
	vista *v;            /* NULL: volatile endpoint */
	vista_segment *seg;
	rio_pool *pool;
	bool protect;        /* pool is write-protected: raw stores need windows */
	int error;           /* sticky VG_EFATAL cause, 0 = healthy */
	char errmsg[256];

	/* persistent area */
	uint8_t *area;
	void *vol_area;      /* volatile endpoint: malloc'ed area */
	struct vg_super *sb;
	struct vg_txhdr *txh;
	struct vg_op *ops;   /* 2 * max_ops records */
	struct vg_req_slot *req;
	uint8_t *req_buf;
	struct vg_resp_slot *resp;
	uint8_t *resp_buf;
	struct vg_peer_slot *peer;
	uint32_t req_mask, resp_mask, peer_mask;
	uint32_t max_message, max_ops;
	uint64_t buf_stride;
	uint64_t node, inc;

	struct vg__net net;
	uint32_t rto_us, rto_max_us, ack_delay_us;
	uint64_t horizon_ns;  /* UINT64_MAX: never reclaim */

	/* packet buffers */
	struct vg__pkt *free_pkts;
	void *pkt_mem;
	size_t pkt_size;
	uint8_t *scratch;    /* receive target when no buffer is free */

	/* client */
	struct vg__reqv *reqv;
	uint32_t req_live;
	uint32_t resp_ready; /* outstanding with a response, not consumed */
	struct vg__dest *dests;
	uint32_t ndests, dests_cap;
	uint64_t committed_next_seq;
	uint64_t next_due_ns; /* earliest retransmission, UINT64_MAX = none */

	/* server */
	uint8_t *resp_pending;
	uint64_t *resp_since; /* per response slot: when it was sent */
	uint32_t *resp_window; /* per response slot received by the open
				  transaction: bytes of its buffer declared
				  with it (server.c, S8) */
	uint64_t *peer_heard; /* per peer slot: its last datagram */
	uint64_t reclaim_due; /* no response expires before this */
	bool gc_dirty;        /* a watermark or incarnation moved since the
				 last collection */
	uint32_t inbox_max;   /* requests queued at most (pump.c P3: the rest of
				 the receive buffers stay for acks) */
	uint32_t resp_live;
	uint32_t peers_used;
	bool wm_undrained;   /* a watermark store is not drained yet */
	/* acknowledged responses below their watermark, forgotten in a
	 * batch behind one drain of the watermarks */
	struct vg__doomed {
		uint32_t slot;
		uint64_t node, inc, seq;
	} doomed[VG__DOOM_BATCH];
	uint32_t ndoomed;
	uint64_t doomed_since; /* forgotten at the latest ack_delay later */
	struct vg__pkt *inbox_head, *inbox_tail;
	uint32_t inbox_len;
	uint32_t gc_countdown;

	struct vg__eptx tx;
	struct vg_stats st;
};

static inline bool
vg__volatile(const vg_endpoint *ep)
{
	return ep->v == NULL;
}

static inline uint8_t *
vg__req_buf(const vg_endpoint *ep, uint32_t slot)
{
	return ep->req_buf + (uint64_t)slot * ep->buf_stride;
}

static inline uint8_t *
vg__resp_buf(const vg_endpoint *ep, uint32_t slot)
{
	return ep->resp_buf + (uint64_t)slot * ep->buf_stride;
}

/* ------------------------------------------------------------------------
 * Persistence: the only places the library touches the segment's
 * durability, all through librio's choke point and libvista.
 * ------------------------------------------------------------------------ */

static inline void
vg__flush(vg_endpoint *ep, const void *addr, size_t len)
{
	if (ep->pool)
		rio_flush(ep->pool, addr, len);
}

static inline void
vg__drain(vg_endpoint *ep)
{
	if (ep->pool)
		rio_drain(ep->pool);
}

/*
 * Before a store outside transactions into bytes the thread's last Vista
 * transaction may have declared (a response forgotten or reclaimed, a
 * tombstone freed): that transaction is ended for good first, or a crash
 * before the next one could roll it back (vista_settle, L8 in libvista's
 * log.c).  true if it fenced: every line written back before it is then
 * durable too, and the caller's own drain, if it needs one, is folded in.
 * Costs a load when there is nothing to settle.
 */
static inline bool
vg__settle(vg_endpoint *ep)
{
#ifndef VG_BROKEN_NO_SETTLE
	/* An error (the instance in its error state) settles nothing: the
	 * caller's drain still runs, and the next commit reports it. */
	return !vg__volatile(ep) && vista_settle(ep->v) == 1;
#else
	/* Deliberately broken (crash test): the committed transaction's
	 * bytes are stored over while recovery may still judge it by
	 * them. */
	(void)ep;
	return false;
#endif
}

/* Open/close a write window for stores made outside vista_set_range. */
static inline void
vg__raw_begin(vg_endpoint *ep, void *addr, size_t len)
{
	if (VG__UNLIKELY(ep->protect))
		(void)rio_write_begin(ep->pool, addr, len);
}

static inline void
vg__raw_end(vg_endpoint *ep, void *addr, size_t len)
{
	if (VG__UNLIKELY(ep->protect))
		(void)rio_write_end(ep->pool, addr, len);
}

/* One 8-byte store outside transactions, flushed (not drained). */
static inline void
vg__raw_store64(vg_endpoint *ep, uint64_t *word, uint64_t value)
{
	vg__raw_begin(ep, word, sizeof(*word));
	/* relaxed: an 8-byte store that must not tear (a crash keeps the old
	 * or the new word); its durability comes from the flush here and
	 * the caller's drain, and an endpoint has one thread at a time. */
	__atomic_store_n(word, value, __ATOMIC_RELAXED);
	vg__raw_end(ep, word, sizeof(*word));
	vg__flush(ep, word, sizeof(*word));
}

/*
 * Declare ranges in the open Vista transaction (before storing to them).
 * The txhdr is added to the batch the first time in a transaction, and so
 * are the state words of the requests whose responses were taken since
 * the last declaration (stored only at the commit point), so each call
 * costs at most one persist barrier.  The last nnew of the ranges are new
 * (vista_set_ranges_new): bytes no committed header refers to -- a
 * payload, an op record of the open generation -- whose old content is
 * never needed, so nothing of them is logged.  Volatile endpoints:
 * nothing.
 */
int vg__declare(vg_endpoint *ep, const struct vista_range *a, size_t na,
	size_t nnew, bool with_txhdr);
/* Copy a payload raw into a buffer no committed header refers to, and
 * flush it; vg_commit drains it before the commit point (T2, X2). */
void vg__raw_payload(vg_endpoint *ep, uint8_t *buf, const void *msg,
	size_t len);

/* ------------------------------------------------------------------------
 * table.c
 * ------------------------------------------------------------------------ */

/* Find key; *ins (if not NULL) gets the first FREE or DELETED slot on the
 * way, for an insertion (-1 if none). */
int32_t vg__req_find(const vg_endpoint *ep, uint64_t seq, int32_t *ins);
int32_t vg__resp_find(const vg_endpoint *ep, uint64_t node, uint64_t inc,
	uint64_t seq, int32_t *ins);
/* The slot of node, or -1; *ins as above (FREE slots only). */
int32_t vg__peer_find(const vg_endpoint *ep, uint64_t node, int32_t *ins);
/* Delete a request slot inside a transaction (its header declared): true
 * if other tombstones can go once it commits (vg__req_sweep then). */
bool vg__req_delete_tx(vg_endpoint *ep, uint32_t slot);
void vg__req_sweep(vg_endpoint *ep, uint32_t slot);
/* Delete a response slot outside transactions, with T4's clean-up; raw,
 * flushed. */
void vg__resp_delete(vg_endpoint *ep, uint32_t slot);
uint64_t vg__req_slot_csum(const struct vg_req_slot *s, uint32_t index);
uint64_t vg__resp_slot_csum(const struct vg_resp_slot *s, uint32_t index);
/* Check every slot of every table (open); VG_ECORRUPT with the first
 * violation. */
int vg__tables_check(vg_endpoint *ep);

/* ------------------------------------------------------------------------
 * oplog.c
 * ------------------------------------------------------------------------ */

/* Append a deferred operation to the open transaction's log (the txhdr
 * must be declared).  declared: the record (at vg__op_next) was declared
 * in this transaction (vg__op_undeclared), else it is written raw (L4).  VG_EOPFULL when the
 * log is full. */
int vg__op_append(vg_endpoint *ep, enum vg_op_type type, uint32_t slot,
	uint64_t node, uint64_t inc, uint64_t seq);
/* The first record of the open transaction's log not declared yet: its
 * range, to declare in a batch the transaction pays anyway (L4); the
 * caller declares it, then vg__op_declared() counts it.  NULL when the
 * log has no room left. */
struct vg_op *vg__op_undeclared(vg_endpoint *ep);
void vg__op_declared(vg_endpoint *ep);
/* Room for n more operations in this transaction? */
int vg__op_room(vg_endpoint *ep, uint32_t n);
/* Check log `gen` (n records) before replaying it. */
int vg__op_check(vg_endpoint *ep, uint64_t gen, uint32_t n);
/* Run log `gen`; every operation is idempotent. */
void vg__op_replay(vg_endpoint *ep, uint64_t gen, uint32_t n,
	bool recovering);

/* ------------------------------------------------------------------------
 * txn.c
 * ------------------------------------------------------------------------ */

/* A public call's transaction: joins the thread's open transaction, or
 * runs as its own (begun here, committed/aborted by vg__call_end). */
int vg__call_begin(vg_endpoint *ep);
int vg__call_end(vg_endpoint *ep, int rc);
int vg__undo_push(vg_endpoint *ep, enum vg__undo_kind kind, uint32_t slot);

/* ------------------------------------------------------------------------
 * client.c / server.c
 * ------------------------------------------------------------------------ */

void vg__client_on_response(vg_endpoint *ep, struct vg__pkt *p);
/* Retransmissions and lone acknowledgements due; next due time. */
uint64_t vg__client_timers(vg_endpoint *ep, uint64_t now);
void vg__client_send_req(vg_endpoint *ep, uint32_t slot, bool retrans);
/* Commit/abort of the open transaction, for the client's state. */
void vg__client_replay_send(vg_endpoint *ep, uint32_t slot);
/* A response taken by the transaction about to commit (forget the
 * request, in the transaction), and that just committed. */
void vg__client_precommit_taken(vg_endpoint *ep, uint32_t slot);
void vg__client_commit_taken(vg_endpoint *ep, uint32_t slot);
/* Rebuild destinations and outstanding lists from the table (open). */
int vg__client_recover(vg_endpoint *ep);
void vg__client_flush_acks(vg_endpoint *ep);
bool vg__client_ready(const vg_endpoint *ep);

void vg__server_on_request(vg_endpoint *ep, struct vg__pkt *p);
void vg__server_on_ack(vg_endpoint *ep, struct vg__pkt *p);
/* Forget the acknowledged responses waiting for it (close, idle). */
void vg__server_forget_doomed(vg_endpoint *ep);
/* ... when they have waited ack_delay; the next due time. */
uint64_t vg__server_timers(vg_endpoint *ep, uint64_t now);
void vg__server_replay_send(vg_endpoint *ep, uint32_t slot);
int vg__server_recover(vg_endpoint *ep);
bool vg__server_ready(const vg_endpoint *ep);
/* Put received requests back at the head of the inbox (abort). */
void vg__server_requeue(vg_endpoint *ep, struct vg__pkt *head,
	struct vg__pkt *tail);

/* ------------------------------------------------------------------------
 * pump.c
 * ------------------------------------------------------------------------ */

void vg__pkt_free(vg_endpoint *ep, struct vg__pkt *p);
/* Serve the network of n endpoints until ready(eps, n, arg) holds or the
 * timeout passes.  Returns 0, -ETIMEDOUT, VG_EFATAL. */
int vg__wait(vg_endpoint *const *eps, size_t n, int timeout_ms,
	bool (*ready)(vg_endpoint *const *eps, size_t n, void *arg), void *arg);

/* ------------------------------------------------------------------------
 * Test seams (unit tests link the static archive)
 * ------------------------------------------------------------------------ */

/*
 * Called at the labelled points of commit and replay ("commit:before",
 * "commit:after", "replay:op"); a test makes it _exit() there to crash at
 * an exact point.  NULL in production.
 */
extern void (*vg__crash_hook)(const char *where);
#define VG__CRASH_POINT(where)                 \
	do {                                   \
		if (VG__UNLIKELY(vg__crash_hook)) \
			vg__crash_hook(where);  \
	} while (0)

#ifdef __cplusplus
}
#endif

#endif /* VG_INT_H */
