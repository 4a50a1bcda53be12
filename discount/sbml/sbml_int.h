/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sbml_int.h -- sender-based message logging, internals
 *
 * Everything here lives in the process's ordinary memory (the handle and
 * malloc'ed lists), so a Discount Checking checkpoint holds it: SSNs,
 * state interval index, dependency vector, RSN history, send log, the
 * queue of arrived messages.  Only the sockets are kernel state (libdc
 * rebinds them at recovery).
 */
#ifndef SBML_INT_H
#define SBML_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "rio.h"
#include "rio_int.h"
#include "sbml.h"
#include "wire_layout.h"

#define SBML__UNLIKELY(x) __builtin_expect(!!(x), 0)

/* A message: an entry of the send log (peer = destination), of the
 * arrival queue or of the replay list (peer = sender). */
struct sbml__msg {
	struct sbml__msg *next;
	uint64_t ssn;
	uint64_t sii;      /* sender's state interval index at the send */
	uint64_t rsn;      /* send log: 0 = partially logged; replay: RSN */
	uint64_t last_tx;  /* send log: last transmission (ns) */
	uint64_t arrival;  /* queue: arrival order */
	uint32_t len;
	uint32_t peer;
	uint8_t data[];
};

/* An RSN this process assigned (the RSN history, Section 3.2). */
struct sbml__hist {
	uint64_t ssn, rsn, last_tx;
	uint32_t src;
	bool acked;
};

/* A parsed datagram; pointers lie inside the received bytes. */
struct sbml__wire {
	uint8_t type, src, dst;
	uint16_t flags, nrsn, nack;
	uint32_t payload_len, group;
	uint64_t inc, ssn, sii, arg, ckpt;
	const uint8_t *rsns, *acks, *payload;
};

enum sbml__verdict {
	SBML__WIRE_OK = 0,
	SBML__WIRE_TRUNCATED,
	SBML__WIRE_MALFORMED,
	SBML__WIRE_CHECKSUM,
};

struct sbml__held; /* a datagram the fault injector holds back */

struct sbml__peer {
	struct sockaddr_storage addr;
	socklen_t addrlen;
	uint64_t inc;          /* highest incarnation seen (stale below) */
	uint64_t ssn_to;       /* last SSN sent to it */
	uint64_t delivered;    /* last SSN delivered from it (FIFO) */
	uint64_t dv;           /* dependency vector entry */
	uint64_t ckpt;         /* its checkpoint's state interval index */
	struct sbml__msg *log, *log_tail; /* send log to it, by ssn */
	struct sbml__msg *first_partial;  /* ... its first entry without
	                                   * RSN (NULL: none); all before it
	                                   * are fully logged */
	unsigned partial;      /* ... entries without RSN */
	struct sbml__msg *queue;          /* arrived, undelivered, by ssn */
	uint64_t acks[SBML_WIRE_MAX_ACKS]; /* RSNs of it to acknowledge */
	unsigned nacks;
	uint64_t acks_since;   /* oldest pending ack (ns) */
	/* recovery of this process: the answer of this peer */
	bool rec_end, rec_recovering, rec_done_acked;
	uint64_t rec_got, rec_dv, rec_tx; /* rec_got: kept from rec_from on */
	uint64_t rec_from;     /* the window asked: its first RSN */
	struct sbml__msg *rec_last; /* its last REPLAY kept (where the
	                        * next one goes into the replay list) */
	/* termination */
	bool done_rcvd, done_acked;
	struct sbml__msg *replay_at; /* the log entry its last answer's
	                        * window stopped before (NULL: none) */
	/* a recovery of the peer asked us for replays */
	bool replay_l_known;
};

struct sbml {
	struct sbml_opts o;
	struct sbml_faults f;
	bool faulty;
	uint64_t rng;
	int fd;
	unsigned n, self;
	uint64_t inc;          /* incarnation: CLOCK_REALTIME ns at start */
	uint64_t sii;          /* state interval index */
	uint64_t ckpt_sii;     /* ... at the last checkpoint */
	uint64_t arrivals;
	int error;             /* sticky (SBML_EFATAL) */
	char errmsg[256];
	struct sbml__peer peer[SBML_MAX_PROCS];
	/* RSN history since the last checkpoint; unacked entries are the
	 * RSNs still owed an acknowledgement */
	struct sbml__hist *hist;
	size_t nhist, caphist, first_unacked;
	unsigned unacked;
	/* recovery */
	bool recovering;       /* collecting, checking */
	bool replaying;        /* delivering the replay list */
	struct sbml__msg *replay;        /* by rsn */
	uint64_t replay_last;  /* L */
	/* termination */
	bool finishing;        /* at or past sbml_finish's checkpoint */
	bool announcing;       /* DONE is being sent (after it) */
	struct sbml__held *held;
	uint64_t next_tick;
	uint8_t *rxbuf, *txbuf;
	size_t bufsize;
	struct sbml_stats st;
};

uint64_t sbml__now_ns(void);

/* err.c */
/* the stack's one message (librio): errors and "<context>: <strerror>" */
#define sbml__err(rc, ...) rio_seterr((rc), __VA_ARGS__)
#define sbml__errno rio__errno
int sbml__fatal(sbml *s, int cause, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
int sbml__check(const sbml *s);

/* wire.c */
size_t sbml__wire_seal(uint8_t *buf, const struct sbml__wire *w,
	const struct sbml_wire_rsn *rsns, const uint64_t *acks,
	const void *payload);
enum sbml__verdict sbml__wire_parse(const void *buf, size_t len,
	uint32_t max_message, struct sbml__wire *out);
void sbml__wire_rsn(const struct sbml__wire *w, unsigned i,
	struct sbml_wire_rsn *out);
uint64_t sbml__wire_ack(const struct sbml__wire *w, unsigned i);

/* net.c */
int sbml__parse_addr(const char *s, struct sockaddr_storage *ss,
	socklen_t *len);
int sbml__net_open(sbml *s);
void sbml__net_send(sbml *s, unsigned dst, const void *buf, size_t len);
uint64_t sbml__net_tick(sbml *s, uint64_t now);
void sbml__net_drop_held(sbml *s);

/* proto.c */
void sbml__send_pkt(sbml *s, unsigned dst, struct sbml__wire *w,
	const void *payload);
int sbml__pump(sbml *s, uint64_t deadline);
void sbml__free_list(struct sbml__msg **head);
void sbml__log_gc(sbml *s, unsigned dst);

/* recover.c */
int sbml__recover(sbml *s);
void sbml__on_replay_pkt(sbml *s, const struct sbml__wire *w);
void sbml__recover_tick(sbml *s, uint64_t now);

#endif /* SBML_INT_H */
