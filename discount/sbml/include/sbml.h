/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sbml.h -- sender-based message logging (Johnson & Zwaenepoel)
 *
 * A fixed group of N processes (ids 0..N-1, one UDP address each) that
 * communicate only by messages and run deterministically between
 * receives.  Every message is kept in the volatile memory of its sender
 * (the send log); the receiver numbers the messages it receives (the
 * receive sequence number, RSN, which is also its state interval index)
 * and returns the number to the sender, who records it and acknowledges
 * it.  A process sends nothing new while an RSN it returned is
 * unacknowledged, unless every such RSN rides on that very message.
 *
 * Checkpoints are Discount Checking's (dc.h): the library's whole state
 * -- SSN, state interval index, dependency vector, RSN history, send log
 * -- is ordinary memory of the process, so dc_checkpoint() takes it with
 * the rest.  A process killed and started again resumes from its last
 * checkpoint; sbml then collects from every peer the messages it had
 * received since (their RSNs are in the senders' logs), checks from the
 * dependency vectors that no peer depends on a state it cannot re-create,
 * and delivers those messages again in RSN order before any new one.
 * The other processes never roll back.  docs/sbml.md is the manual.
 *
 * Conventions: one handle per process, not thread-safe (libdc runs
 * single-threaded processes); the protocol runs inside the calls (no
 * thread of its own), so a process computing for a long time answers its
 * peers late, never wrongly.
 *
 * Return codes: 0, -errno, a RIO_E* or DC_E* code of the layers below,
 * or an SBML_E* code (-37000..-37999).  sbml_errormsg() describes the
 * calling thread's last failure.
 */
#ifndef SBML_H
#define SBML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SBML_EXPORT __attribute__((visibility("default")))

#define SBML_ERRNO_MAP(XX)                                                   \
	XX(SBML_EADDR, -37001, "bad process address or process id")          \
	XX(SBML_ETOOBIG, -37002, "message larger than max_message")          \
	XX(SBML_ETIMEDOUT, -37003, "no answer from a peer in time")          \
	XX(SBML_ECONCURRENT, -37004,                                         \
		"concurrent failures: no consistent state can be recovered") \
	XX(SBML_EREPLAY, -37005,                                             \
		"re-execution diverged from the logged messages")            \
	XX(SBML_EFATAL, -37006, "the process is in its error state")         \
	XX(SBML_ELIMIT, -37007, "a table of the library is full")            \
	XX(SBML_ESTATE, -37008, "call out of order")

#define SBML__ERRNO_ENUM(name, value, msg) name = (value),
enum sbml_errno { SBML_ERRNO_MAP(SBML__ERRNO_ENUM) };
#undef SBML__ERRNO_ENUM

/* Text and name of any code of the stack (SBML_E*, DC_E*, RIO_E*,
 * -errno, 0), and the calling thread's last message. */
SBML_EXPORT const char *sbml_strerror(int rc);
SBML_EXPORT const char *sbml_err_name(int rc);
SBML_EXPORT const char *sbml_errormsg(void);

#define SBML_MAX_PROCS 64
#define SBML_MAX_MESSAGE 60000u
#define SBML_ANY (-1)

/*
 * The injectable lossy network (as libvistagrams'): each outgoing
 * datagram is, independently, dropped, delayed (up to delay_max_us),
 * reordered (held until the next datagram has left) or duplicated.
 * Deterministic for a seed.
 */
struct sbml_faults {
	double drop, delay, reorder, duplicate; /* probabilities 0..1 */
	uint32_t delay_max_us;                  /* 0: 2000 */
	uint64_t seed;
};

struct sbml_opts {
	unsigned nprocs;           /* N, 2..SBML_MAX_PROCS */
	unsigned self;             /* this process's id, < N */
	/* addrs[i]: "host:port" of process i (numeric IPv4, or [IPv6]:port) */
	const char *const *addrs;
	uint32_t group;            /* any non-zero tag; datagrams of another
	                            * group are dropped (0: 1) */
	uint32_t max_message;      /* 0: 4096; at most SBML_MAX_MESSAGE */
	unsigned rto_ms;           /* retransmission timeout, 0: 20 */
	unsigned rsn_delay_us;     /* how long an RSN or an acknowledgement
	                            * may wait for a packet to ride on
	                            * (Section 3.5), 0: 500 */
	unsigned timeout_ms;       /* a blocking call gives up after this
	                            * long without progress, 0: 30000 */
	unsigned linger_ms;        /* sbml_finish: silence after which a
	                            * finished process leaves, 0: 1000 */
	bool no_logging;           /* plain reliable messages: no send log, no
	                            * RSNs (the baseline of the benchmarks;
	                            * no recovery) */
	bool verbose;              /* recovery and refusals on stderr */
	const struct sbml_faults *faults; /* NULL: a perfect network */
};

typedef struct sbml sbml;

/*
 * Open this process's endpoint: bind its UDP address.  Under Discount
 * Checking (dc_init() already called, any protocol; DC_MANUAL is the one
 * meant) a process that dc_recovered() recovers here before returning:
 * see sbml_checkpoint().  Returns 0, SBML_EADDR (bad address, id or
 * count), -EINVAL (bad option), -errno (bind; *out is NULL after all of
 * these), or a recovery's codes (SBML_ECONCURRENT, SBML_ETIMEDOUT: *out
 * is the handle in its error state, for sbml_stats and sbml_close).
 */
SBML_EXPORT int sbml_open(const struct sbml_opts *opts, sbml **out);

/* Close the sockets and free the handle (a process that should stay
 * recoverable for its peers calls sbml_finish() first). */
SBML_EXPORT void sbml_close(sbml *s);

/*
 * Send len bytes to process dst (not self).  The message is copied into
 * the send log, tagged with the next SSN and the current state interval
 * index, and sent; it is retransmitted until its RSN comes back.  When
 * RSNs this process returned are unacknowledged and cannot all ride on
 * this message (some were returned to another process), the call first
 * sends them and waits for their acknowledgements, serving the network
 * meanwhile.  Returns 0 (the message is in the log: it will be delivered
 * exactly once, whatever the network or a failure of dst does),
 * SBML_EADDR, SBML_ETOOBIG, SBML_ETIMEDOUT (the acknowledgements did not
 * come; nothing sent), SBML_EFATAL.
 */
SBML_EXPORT int sbml_send(sbml *s, unsigned dst, const void *buf,
	size_t len);

/*
 * Receive the next message, from process src or from any (SBML_ANY).
 * Messages of one sender arrive in the order it sent them.  The message
 * starts a new state interval: its RSN is assigned and returned to the
 * sender (riding on the next packet to it, or after rsn_delay_us).  After
 * a recovery the logged messages come first, in RSN order, whatever src
 * asks.  Copies at most cap bytes; *len gets the message's length, *from
 * its sender (either may be NULL).  Waits at most timeout_ms (< 0: the
 * option's timeout).  Returns 0, SBML_ETIMEDOUT, SBML_ETOOBIG (cap too
 * small: the message is consumed, the first cap bytes copied),
 * SBML_EREPLAY (a replayed message is not from src), SBML_EFATAL.
 */
SBML_EXPORT int sbml_recv(sbml *s, int src, void *buf, size_t cap,
	size_t *len, unsigned *from, int timeout_ms);

/* Request/reply: send req to dst, then receive dst's next message into
 * rep.  Codes of sbml_send and sbml_recv. */
SBML_EXPORT int sbml_call(sbml *s, unsigned dst, const void *req,
	size_t reqlen, void *rep, size_t cap, size_t *replen);

/*
 * Serve the network without waiting and without delivering anything:
 * the datagrams that arrived (RSNs, acknowledgements, messages queued
 * for later receives, peers' recovery requests) and the timers
 * (retransmissions, RSNs and acknowledgements due).  A process that
 * computes for long calls it now and then, so that its peers are not
 * kept waiting for its acknowledgements (the send rule) or its replays;
 * what the program receives next does not change.  Returns 0 or
 * SBML_EFATAL.
 */
SBML_EXPORT int sbml_poll(sbml *s);

/*
 * Wait until every RSN this process returned is acknowledged and every
 * message it sent is fully logged (or timeout_ms, < 0: the option's).
 * Returns 0 or SBML_ETIMEDOUT.
 */
SBML_EXPORT int sbml_flush(sbml *s, int timeout_ms);

/*
 * Output to the outside world (Section 3.3): waits until every RSN this
 * process returned is acknowledged, so that the output depends only on
 * messages that a failure cannot lose, then writes buf to fd.  A regular
 * file opened after dc_init() is rolled back with the process by libdc
 * and rewritten identically by the re-execution.  Returns 0, -errno, or
 * sbml_flush()'s codes.
 */
SBML_EXPORT int sbml_output(sbml *s, int fd, const void *buf, size_t len);

/*
 * Take a checkpoint of the whole process (dc_checkpoint()).  First
 * waits until every RSN this process returned is acknowledged, and
 * purges the RSN history; after it, the peers drop from their send logs
 * the messages this process received before it (Section 4.3: every
 * datagram carries the checkpoint's state interval index).  Returns 0, 1
 * when the process has just resumed from this checkpoint and recovered
 * (the logged messages are now queued for replay), SBML_ECONCURRENT
 * (recovery refused: a peer depends on a state interval of this process
 * that died with another failed process; the message names them),
 * DC_ENOTINIT (Discount Checking is not running), sbml_flush()'s codes,
 * or dc_checkpoint()'s.
 */
SBML_EXPORT int sbml_checkpoint(sbml *s);

/*
 * End of the computation: flush, checkpoint (under Discount Checking),
 * announce DONE to every peer, and keep serving the peers (replays for a
 * recovering one, RSNs, acknowledgements) until every peer announced
 * DONE too, then linger until silence.  Returns 0, SBML_ETIMEDOUT, or
 * sbml_checkpoint()'s codes.
 */
SBML_EXPORT int sbml_finish(sbml *s);

struct sbml_stats {
	uint64_t sent, received;        /* application messages */
	uint64_t sends_immediate;       /* Table 4: nothing unacknowledged */
	uint64_t sends_piggybacked;     /* ... RSNs rode on the message */
	uint64_t sends_waited;          /* ... had to wait for acks */
	uint64_t packets_out, packets_in;
	uint64_t ctrl_packets;          /* RSN/ack packets of their own */
	uint64_t retransmits;
	uint64_t duplicates;            /* duplicate messages received */
	uint64_t dup_rsn_answered;      /* ... answered with their RSN */
	uint64_t dup_nolog_answered;    /* ... answered "need not log" */
	uint64_t drop_truncated, drop_malformed, drop_checksum;
	uint64_t drop_stale;            /* from an earlier incarnation */
	uint64_t drop_foreign;          /* other group, or not for us */
	uint64_t fault_dropped, fault_delayed, fault_reordered,
		fault_duplicated;
	uint64_t log_entries, log_bytes;      /* send log now */
	uint64_t log_entries_max, log_bytes_max;
	uint64_t log_gc_entries;              /* dropped after receivers'
	                                       * checkpoints */
	uint64_t history_entries;             /* RSN history now */
	uint64_t checkpoints;
	uint64_t recoveries;
	uint64_t replayed;                    /* delivered from the logs */
	uint64_t state_interval;              /* current index */
	uint64_t ssn;                         /* last SSN used */
};
SBML_EXPORT int sbml_stats(const sbml *s, struct sbml_stats *out);

/* This process's dependency vector: out[i] is the largest state interval
 * index of process i this process depends on (n entries copied). */
SBML_EXPORT int sbml_depvec(const sbml *s, uint64_t *out, unsigned n);

#ifdef __cplusplus
}
#endif

#endif /* SBML_H */
