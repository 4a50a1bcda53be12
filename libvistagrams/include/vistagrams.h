/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vistagrams.h -- libvistagrams: messages in local transactions (MLT)
 *
 * Vistagrams (Lowell, *Theory and Practice of Failure Transparency*, ch. 4)
 * on libvista.  A process sends and receives messages inside its local Vista
 * transactions, atomically with its changes to persistent data:
 *
 *   - a send inside a transaction is deferred to commit and dropped by
 *     abort; several sends in one transaction form an atomic group: if the
 *     transaction commits, every destination eventually delivers its
 *     message, and if it aborts, none does;
 *   - a receive is undone by abort: the message is delivered again;
 *   - committed messages survive crashes of the sender and the receiver:
 *     they are buffered in persistent tables (in a Vista segment) and
 *     retransmitted until acknowledged, and duplicates are filtered by the
 *     same tables, so every message is delivered exactly once.
 *
 * The protocol is request/response over UDP.  The process that sends a
 * request is the *client* of that cycle and the one that answers is the
 * *server*; any endpoint can play both roles.  A request is named by a
 * globally unique id (client node id, client incarnation, sequence number
 * from a persistent counter).  The response acknowledges the request and
 * the next request to the same server acknowledges the response, so a
 * cycle costs two datagrams in the common case.  A client retransmits
 * (with exponential backoff) to the server's *retransmit port*, which is
 * the server's port + 1; the server answers from its response table when
 * the response is committed, drops the retransmission when the request is
 * known but not answered yet, and treats it as new when it does not know
 * it.
 *
 * Transactions.  libvista's transactions have no commit hook, so a
 * transaction that sends or receives messages is begun and ended with
 * vg_begin()/vg_commit()/vg_abort(), which call vista_begin_transaction()/
 * vista_end_transaction()/vista_abort_transaction() and run the Vistagrams
 * commit protocol around them: the transaction's deferred operations are
 * made durable before Vista's commit point, and replayed (messages sent,
 * buffers freed) right after it.  Inside such a transaction the program
 * declares and changes its own persistent data with vista_set_range() as
 * usual.  A Vistagrams call made outside a transaction runs as a
 * transaction of its own.
 *
 * Threads.  An endpoint is used by one thread at a time (the application
 * serializes, as for Vista transactions); different endpoints may be used
 * by different threads at once.
 *
 * Return codes follow the stack: 0, -errno, a RIO_E* or VISTA_E* code from the
 * layers below, or a VG_E* code (-32000..-32999).  vg_errormsg() describes
 * the last failure of the calling thread.  docs/libvistagrams.3.md is the
 * manual; docs/FORMAT.md describes the wire format and the tables.
 */
#ifndef VISTAGRAMS_H
#define VISTAGRAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "vista.h"

#ifdef __cplusplus
extern "C" {
#endif

#define VG_EXPORT __attribute__((visibility("default")))

#define VG_VERSION_MAJOR 0
#define VG_VERSION_MINOR 1

/* ------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------ */

/* XX(name, value, message): the enum, vg_strerror() and vg_err_name(). */
#define VG_ERRNO_MAP(XX)                                                      \
	XX(VG_ENOTX, -32001, "no Vistagrams transaction is active on this "   \
		"thread")                                                     \
	XX(VG_EINTX, -32002, "a transaction is already active on this thread") \
	XX(VG_ENOTABLES, -32003, "the segment holds no Vistagrams tables")    \
	XX(VG_EBADMAGIC, -32004, "the segment holds something else than "     \
		"Vistagrams tables")                                          \
	XX(VG_EVERSION, -32005, "tables were made by a newer major version")  \
	XX(VG_EFEATURE, -32006, "tables use an unsupported incompat feature") \
	XX(VG_ECORRUPT, -32007, "persistent tables are corrupt")              \
	XX(VG_ENODE, -32008, "node id does not match the tables")             \
	XX(VG_ESMALL, -32009, "segment too small for the tables")             \
	XX(VG_EFULL, -32010, "table is full")                                 \
	XX(VG_EOPFULL, -32011, "too many deferred operations in one "         \
		"transaction")                                                \
	XX(VG_ETOOBIG, -32012, "message larger than the tables' maximum")     \
	XX(VG_ENOREQ, -32013, "no such request")                              \
	XX(VG_EANSWERED, -32014, "request already answered")                  \
	XX(VG_EUNCOMMITTED, -32015, "request sent in this transaction: its "  \
		"response can only be received after commit")                 \
	XX(VG_EFATAL, -32016, "endpoint is in an error state; close and "     \
		"reopen it")                                                  \
	XX(VG_EADDR, -32017, "unsupported or malformed address")              \
	XX(VG_EVOLATILE, -32018, "volatile endpoints have no transactions")   \
	XX(VG_EOTHERTX, -32019, "endpoint belongs to another vista instance "  \
		"or is in use by another thread's transaction")                \
	XX(VG_EEXPIRED, -32020, "the server reclaimed the response after the " \
		"client stayed silent past its horizon; the request may or "  \
		"may not have taken effect")

#define VG__ERRNO_ENUM(name, value, msg) name = (value),
enum vg_errno { VG_ERRNO_MAP(VG__ERRNO_ENUM) };
#undef VG__ERRNO_ENUM

/* Text and symbolic name ("VG_EFULL", "VISTA_ENOTX", "ETIMEDOUT", "OK") of
 * any return code of the stack. */
VG_EXPORT const char *vg_strerror(int rc);
VG_EXPORT const char *vg_err_name(int rc);
/* The calling thread's message for its last failure (= rio_errormsg()). */
VG_EXPORT const char *vg_errormsg(void);

/* ------------------------------------------------------------------------
 * Endpoints
 * ------------------------------------------------------------------------ */

typedef struct vg_endpoint vg_endpoint;

/* The globally unique id of a request. */
typedef struct vg_reqid {
	uint64_t node;        /* the client's node id */
	uint64_t incarnation; /* the client's tables (creation time, ns) */
	uint64_t seq;         /* the client's persistent counter, from 1 */
} vg_reqid;

/*
 * A lossy network for tests: every datagram the endpoint sends is dropped,
 * duplicated, held back until after the next one (reordered) or delayed
 * with these probabilities (0..1), from a deterministic generator.
 */
struct vg_faults {
	double drop;
	double duplicate;
	double reorder;
	double delay;
	uint32_t delay_max_us; /* delays are uniform in [0, this]; 0 = 2000 */
	uint64_t seed;         /* 0 = 1 */
};

#define VG_HORIZON_DEFAULT_MS 60000u /* one minute */
#define VG_HORIZON_NEVER UINT32_MAX

/* Flags for vg_endpoint_opts.flags */
#define VG_CREATE (1u << 0) /* create the tables if the segment has none */

struct vg_endpoint_opts {
	/* This node's id: non-zero, unique among the nodes that talk to each
	 * other.  Stored in the tables at creation and checked at open. */
	uint64_t node_id;
	/* Numeric IPv4 or IPv6 address to bind; NULL = "127.0.0.1". */
	const char *host;
	/* The normal port; the retransmit port is port + 1.  0 = any free
	 * pair (see vg_endpoint_address()). */
	uint16_t port;
	unsigned flags;

	/* Capacities, fixed when the tables are created (0 = default; the
	 * stored values are used when the tables exist already). */
	uint32_t max_requests;  /* outstanding requests (client), 64     */
	uint32_t max_responses; /* unacknowledged responses (server), 256 */
	uint32_t max_clients;   /* clients a server remembers (for ever;
				 * requests of more are dropped), 256   */
	uint32_t max_message;   /* payload bytes, 8192 (at most 65000)   */
	uint32_t max_ops;       /* deferred operations per transaction, 64 */

	/* Volatile settings (0 = default). */
	uint32_t rx_buffers;    /* received datagrams held at once, 256 */
	uint32_t rto_us;        /* first retransmission timeout, 10 ms  */
	uint32_t rto_max_us;    /* backoff limit, 1 s                   */
	uint32_t ack_delay_us;  /* an acknowledgement that found no request
				 * to ride on goes alone after this, 20 ms */
	struct vg_faults faults; /* all zero: a faithful network */
	/* Server (volatile): when the response table is full, an answered
	 * response whose client has sent nothing for this long (and at least
	 * this long after the response left) is reclaimed; the client then
	 * gets VG_EEXPIRED instead of it.  The thesis' client timeout, seen
	 * from the server.  0 = VG_HORIZON_DEFAULT_MS, VG_HORIZON_NEVER =
	 * never. */
	uint32_t horizon_ms;
};

/*
 * Bytes of segment user area the tables need for these capacities
 * (defaults filled in as vg_endpoint_open does).  Returns 0, or -EINVAL for
 * a capacity out of range (message above 65000 bytes, a table above 2^20
 * entries, ops above 4096).
 */
VG_EXPORT int vg_table_size(const struct vg_endpoint_opts *opts, size_t *size);

/*
 * Open an endpoint: find (or, with VG_CREATE, create) the tables in the
 * user area of `seg`, a segment of `v` used raw (no vista_malloc or
 * vista_root on it), bind the normal and retransmit UDP ports, and
 * recover: the deferred operations of the last committed transaction are
 * replayed (idempotently) and every committed request that is still
 * unanswered is retransmitted at the first opportunity.
 *
 * With v == NULL and seg == NULL the endpoint is *volatile*: the same
 * protocol with its tables in ordinary memory, no persistence and no
 * transactions (every call takes effect at once).  It is the baseline of
 * the benchmarks, and lets a node that does not need crash safety talk to
 * Vistagrams nodes.
 *
 * Returns 0, -EINVAL (bad options), VG_ENOTABLES (no tables and no
 * VG_CREATE), VG_EBADMAGIC, VG_EVERSION, VG_EFEATURE, VG_ECORRUPT,
 * VG_ENODE, VG_ESMALL, VG_EADDR, -EADDRINUSE, any error of vista_*, or
 * another -errno.  Nothing in the segment is changed when it fails, except
 * the recovery of a valid tables area.
 */
VG_EXPORT int vg_endpoint_open(vista *v, vista_segment *seg,
	const struct vg_endpoint_opts *opts, vg_endpoint **ep);

/*
 * Send the acknowledgements still waiting, close the sockets and free the
 * endpoint.  The tables stay in the segment.  Returns 0, or VG_EINTX if a
 * transaction is using the endpoint (nothing is closed then).
 */
VG_EXPORT int vg_endpoint_close(vg_endpoint *ep);

/* The address of the normal port (the retransmit port is its port + 1). */
VG_EXPORT int vg_endpoint_address(const vg_endpoint *ep,
	struct sockaddr_storage *addr, socklen_t *len);

/* 0, or VG_EFATAL (with the cause in vg_errormsg()) once a failure left the
 * endpoint's state uncertain: it must be closed and reopened. */
VG_EXPORT int vg_endpoint_error(const vg_endpoint *ep);

/* ------------------------------------------------------------------------
 * Transactions
 * ------------------------------------------------------------------------ */

/*
 * Begin a transaction on the calling thread: vista_begin_transaction(v,
 * flags) plus the Vistagrams context.  VISTA_TX_AUTO is refused (-EINVAL):
 * the tables are updated outside transactions as well, which automatic
 * ranges would roll back.  Returns 0, VG_EINTX, or an error of
 * vista_begin_transaction.
 */
VG_EXPORT int vg_begin(vista *v, unsigned flags);

/*
 * Commit: the deferred operations of every endpoint used in the
 * transaction are made durable, vista_end_transaction() commits them
 * atomically with the program's own updates (the commit point: one flag,
 * the endpoint's committed generation, becomes durable with the rest), and
 * then they are replayed -- requests and responses sent, answered requests
 * freed and their acknowledgements queued.  A crash during the replay is
 * finished by the next vg_endpoint_open().
 * Returns 0, VG_ENOTX, or the error of vista_end_transaction (the
 * endpoints of the transaction are then in their error state).  An
 * endpoint in its error state makes the commit fail with VG_EFATAL after
 * aborting the transaction.  An error of vista_set_range declaring the
 * requests whose responses the transaction received (done here if no
 * later call of the transaction did it) also aborts it, and is returned.
 */
VG_EXPORT int vg_commit(vista *v);

/*
 * Abort: vista_abort_transaction(), deferred sends dropped, received
 * messages put back to be delivered again.  Returns 0, VG_ENOTX, or the
 * error of vista_abort_transaction.
 */
VG_EXPORT int vg_abort(vista *v);

/* ------------------------------------------------------------------------
 * Messages (thesis Figure 4.3)
 *
 * timeout_ms: -1 waits for ever, 0 does not wait.  While a call waits it
 * also serves the network: retransmissions, the retransmit port,
 * acknowledgements.  A call that is not ready in time returns -ETIMEDOUT
 * and changes nothing.
 * ------------------------------------------------------------------------ */

/*
 * Send request `msg` (len <= max_message bytes) to the server whose normal
 * port is `to`.  The datagram leaves at commit; *seq (if not NULL)
 * receives the request's sequence number, to wait for its response with
 * vista_receive_response() in a later transaction.  Returns 0, VG_ETOOBIG,
 * VG_EFULL (max_requests outstanding; a request whose response this
 * transaction received still counts), VG_EOPFULL, VG_EADDR, VG_EFATAL,
 * VG_EOTHERTX, or an error of vista_set_range (the transaction can still
 * be aborted).
 */
VG_EXPORT int vista_send_request(vg_endpoint *ep, const struct sockaddr *to,
	socklen_t tolen, const void *msg, size_t len, uint64_t *seq);

/*
 * Receive the response to request *seq (or, with *seq == 0, to any
 * committed request; *seq then names it) into buf (cap bytes); *len gets
 * its length.  The request is forgotten and its response acknowledged when
 * the transaction commits; if it aborts, the response is delivered again.
 * Returns 0, -ETIMEDOUT, -EMSGSIZE (cap too small: *len says how much is
 * needed, nothing is consumed), VG_ENOREQ (no such outstanding request),
 * VG_EUNCOMMITTED (sent by this very transaction), VG_EOPFULL, VG_EFATAL,
 * VG_EOTHERTX, or VG_EEXPIRED: the server reclaimed the response because
 * this client sent it nothing for the server's horizon_ms; the request may
 * or may not have taken effect there, and will never take effect (again).
 * VG_EEXPIRED takes the request like a response (*seq names it, *len is
 * 0): it is forgotten when the transaction commits (a call outside a
 * transaction commits its own), and reported again if it aborts.
 */
VG_EXPORT int vista_receive_response(vg_endpoint *ep, uint64_t *seq,
	void *buf, size_t cap, size_t *len, int timeout_ms);

/*
 * Receive the next request into buf (cap bytes); *len gets its length and
 * *id its id.  The request is recorded in the response table in this
 * transaction: a retransmission of it is dropped from then on, and if the
 * transaction aborts the request is delivered again.
 * While max_responses requests are unanswered or unacknowledged the call
 * keeps waiting and serving the network (acknowledgements free entries;
 * after horizon_ms, the responses of silent clients are reclaimed), and a
 * new request that arrives then is dropped (full_dropped): its client
 * retransmits it.  A request of a client the peer table has no room for
 * (max_clients) is dropped as well (nopeer_dropped).
 * Returns 0, -ETIMEDOUT (nothing deliverable in time, the table being full
 * included), -EMSGSIZE (as above), VG_EFULL (the table is full of entries
 * this very transaction received; nothing is consumed), VG_EFATAL,
 * VG_EOTHERTX.
 */
VG_EXPORT int vista_receive_request(vg_endpoint *ep, vg_reqid *id, void *buf,
	size_t cap, size_t *len, int timeout_ms);

/*
 * Answer request *id with `msg`.  The response is buffered in the response
 * table (persistently) and leaves at commit; it is resent whenever the
 * client retransmits the request, until the client acknowledges it.
 * Returns 0, VG_ENOREQ (not received), VG_EANSWERED, VG_ETOOBIG,
 * VG_EOPFULL, VG_EFATAL, VG_EOTHERTX, or an error of vista_set_range.
 */
VG_EXPORT int vista_send_response(vg_endpoint *ep, const vg_reqid *id,
	const void *msg, size_t len);

/* vista_select() readiness bits */
#define VG_READY_REQUEST (1u << 0)  /* vista_receive_request would not wait */
#define VG_READY_RESPONSE (1u << 1) /* a response to a committed request  */

/*
 * Wait until at least one of n endpoints has a request or a response to
 * deliver; ready[i] gets the VG_READY_* bits of eps[i].  Returns 0 (some
 * ready[i] != 0), -ETIMEDOUT, -EINVAL, VG_EFATAL.
 */
VG_EXPORT int vista_select(vg_endpoint *const *eps, size_t n,
	unsigned *ready, int timeout_ms);

/*
 * Serve the network for up to timeout_ms without delivering anything:
 * receive and queue datagrams, answer the retransmit port, retransmit
 * overdue requests, send waiting acknowledgements.  For programs that do
 * long work between Vistagrams calls.  Returns 0 or VG_EFATAL.
 */
VG_EXPORT int vg_poll(vg_endpoint *ep, int timeout_ms);

/* ------------------------------------------------------------------------
 * Statistics
 * ------------------------------------------------------------------------ */

struct vg_stats {
	/* datagrams */
	uint64_t sent;               /* every datagram handed to the network */
	uint64_t received;           /* every datagram read from a socket */
	uint64_t requests_sent;      /* first transmissions, at commit */
	uint64_t responses_sent;     /* first transmissions, at commit */
	uint64_t acks_sent;          /* acknowledgements sent alone */
	uint64_t retransmitted;      /* requests sent again (retransmit port) */
	uint64_t responses_resent;   /* answers from the response table */
	uint64_t forwarded;          /* unknown retransmitted requests queued */
	/* drops */
	uint64_t duplicates_dropped; /* already received or already queued */
	uint64_t unanswered_dropped; /* retransmission of a request not yet
				      * answered (or answer not committed) */
	uint64_t stale_dropped;      /* acknowledged, finished, or from an
				      * older incarnation */
	uint64_t malformed_dropped;  /* bad magic, version, type, fields */
	uint64_t truncated_dropped;  /* shorter than its header says */
	uint64_t oversized_dropped;  /* longer than this endpoint accepts */
	uint64_t checksum_dropped;   /* checksum mismatch */
	uint64_t nobuf_dropped;      /* no receive buffer free */
	/* delivery and transactions */
	uint64_t requests_delivered;  /* by vista_receive_request, committed */
	uint64_t responses_delivered; /* by vista_receive_response, committed */
	uint64_t tx_committed;
	uint64_t tx_aborted;
	uint64_t ops_replayed;       /* deferred operations run at commit */
	uint64_t ops_recovered;      /* ... and again at open */
	uint64_t responses_freed;    /* response-table entries acknowledged */
	/* injected faults */
	uint64_t fault_dropped;
	uint64_t fault_duplicated;
	uint64_t fault_reordered;
	uint64_t fault_delayed;
	/* response-table pressure (server) and its outcome (client) */
	uint64_t full_dropped;       /* new requests dropped: table full */
	uint64_t nopeer_dropped;     /* requests of a client beyond
				      * max_clients, dropped */
	uint64_t responses_expired;  /* reclaimed: client silent past the
				      * horizon */
	uint64_t expired_sent;       /* "response expired" answers */
	uint64_t expired_delivered;  /* VG_EEXPIRED taken, committed */
};
VG_EXPORT int vg_stats(const vg_endpoint *ep, struct vg_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* VISTAGRAMS_H */
