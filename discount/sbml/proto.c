/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * proto.c -- the logging protocol of Section 3.3 with the optimizations
 * of Section 3.5: send, receive, RSNs, acknowledgements, retransmission
 *
 * A message M from X to Y:
 *   1. X copies M into its send log (peer[Y].log), tags it with the next
 *      SSN to Y and X's state interval index, and sends it: M is
 *      *partially logged*; X retransmits it every rto until its RSN comes.
 *   2. Y queues M (FIFO per sender by SSN, duplicates dropped).  When
 *      the program receives it, Y increments its state interval index,
 *      which becomes M's RSN, raises its dependency-vector entry for X to
 *      M's tag, appends {X, ssn, rsn} to the RSN history and owes X the
 *      RSN: it rides on the next packet to X, or leaves in a CTRL packet
 *      after rsn_delay, and again every rto until acknowledged.
 *   3. X records the RSN (M is *fully logged*) and acknowledges it; the
 *      acknowledgement rides on the next packet to Y or leaves after
 *      rsn_delay -- at once when the RSN came in a packet of its own
 *      (CTRL): it found nothing to ride, so Y may be waiting for this
 *      acknowledgement to send (P1), and nothing would bring it sooner.
 *      An RSN for a message already recorded is acknowledged again (the
 *      first acknowledgement was lost).
 *
 * Invariants
 *   P1. (Section 3.3) A DATA packet leaves only when every RSN this
 *       process owes is either acknowledged or carried by that packet --
 *       so every RSN it owes is for the packet's destination.  sbml_send
 *       waits (serving the network) until this holds.  Retransmissions
 *       carry every RSN then owed to the destination.
 *   P2. (Section 3.5) The RSN entries and acknowledgements of a packet
 *       are handled before the message it carries is queued.
 *   P3. Every packet to a peer carries all RSNs owed to it (up to 64),
 *       so what a sender has recorded of a receiver's RSNs is always a
 *       prefix of what the receiver returned to it.
 *   P4. A duplicate (SSN at or below the last delivered from its sender)
 *       is never delivered again: it is answered with its RSN from the
 *       history, or with RSN 0 ("need not be logged") when the history
 *       was purged by a checkpoint since.
 *   P5. Packets from an earlier incarnation of a peer are dropped
 *       (stale): an RSN from a life that recovery rolled back must not
 *       make a message fully logged.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stddef.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dc.h"
#include "sbml_int.h"

#define NS_US 1000ull
#define NS_MS 1000000ull
#define HIST_KEEP_NOLOG 1024 /* no_logging: history kept for duplicates */

static uint64_t
rto_ns(const sbml *s)
{
	return (uint64_t)s->o.rto_ms * NS_MS;
}

static uint64_t
delay_ns(const sbml *s)
{
	return (uint64_t)s->o.rsn_delay_us * NS_US;
}

void
sbml__free_list(struct sbml__msg **head)
{
	while (*head) {
		struct sbml__msg *m = *head;
		*head = m->next;
		free(m);
	}
}

static void
log_count(sbml *s, const struct sbml__msg *m, int sign)
{
	if (sign > 0) {
		s->st.log_entries++;
		s->st.log_bytes += m->len;
		if (s->st.log_entries > s->st.log_entries_max)
			s->st.log_entries_max = s->st.log_entries;
		if (s->st.log_bytes > s->st.log_bytes_max)
			s->st.log_bytes_max = s->st.log_bytes;
	} else {
		s->st.log_entries--;
		s->st.log_bytes -= m->len;
	}
}

static struct sbml__msg *
next_partial(struct sbml__msg *m)
{
	while (m && m->rsn != 0)
		m = m->next;
	return m;
}

/* The link field *pp belongs to the entry before, or is the head. */
static void
log_unlink(sbml *s, struct sbml__peer *p, struct sbml__msg **pp)
{
	struct sbml__msg *m = *pp;

	*pp = m->next;
	if (p->log_tail == m)
		p->log_tail = pp == &p->log ? NULL
			: (struct sbml__msg *)((char *)pp -
				offsetof(struct sbml__msg, next));
	if (p->first_partial == m)
		p->first_partial = next_partial(m->next);
	if (p->replay_at == m)
		p->replay_at = NULL;
	if (m->rsn == 0)
		p->partial--;
	log_count(s, m, -1);
	free(m);
}

/* Section 4.3: messages the receiver got before its checkpoint are never
 * needed again. */
void
sbml__log_gc(sbml *s, unsigned dst)
{
	struct sbml__peer *p = &s->peer[dst];

	for (struct sbml__msg **pp = &p->log; *pp;) {
		if ((*pp)->rsn != 0 && (*pp)->rsn <= p->ckpt) {
			s->st.log_gc_entries++;
			log_unlink(s, p, pp);
		} else {
			pp = &(*pp)->next;
		}
	}
}

/* ---- building packets ---- */

/* P1, P3: every RSN owed to dst, and the acknowledgements for it. */
static void
attach(sbml *s, unsigned dst, struct sbml__wire *w,
	struct sbml_wire_rsn *rsns, uint64_t *acks, uint64_t now)
{
	struct sbml__peer *p = &s->peer[dst];

	w->nrsn = 0;
	for (size_t i = s->first_unacked; i < s->nhist; i++) {
		struct sbml__hist *h = &s->hist[i];
		if (h->acked || h->src != dst)
			continue;
		if (w->nrsn == SBML_WIRE_MAX_RSNS)
			break;
		rsns[w->nrsn].ssn = h->ssn;
		rsns[w->nrsn].rsn = h->rsn;
		w->nrsn++;
		h->last_tx = now + rto_ns(s); /* next due */
		if (s->o.no_logging) {
			/* a delivery acknowledgement, sent once; a lost
			 * one is repaired by the duplicate's answer (P4) */
			h->acked = true;
			s->unacked--;
		}
	}
	w->nack = (uint16_t)p->nacks;
	memcpy(acks, p->acks, sizeof(uint64_t) * p->nacks);
	p->nacks = 0;
}

void
sbml__send_pkt(sbml *s, unsigned dst, struct sbml__wire *w,
	const void *payload)
{
	struct sbml_wire_rsn rsns[SBML_WIRE_MAX_RSNS];
	uint64_t acks[SBML_WIRE_MAX_ACKS];
	size_t len;

	w->src = (uint8_t)s->self;
	w->dst = (uint8_t)dst;
	w->group = s->o.group;
	w->inc = s->inc;
	w->ckpt = s->ckpt_sii;
	if (w->type == SBML_PKT_DATA || w->type == SBML_PKT_CTRL) {
		attach(s, dst, w, rsns, acks, sbml__now_ns());
	} else {
		w->nrsn = w->nack = 0;
	}
	if (w->type != SBML_PKT_DATA && w->type != SBML_PKT_REPLAY)
		w->payload_len = 0;
	len = sbml__wire_seal(s->txbuf, w, rsns, acks, payload);
	sbml__net_send(s, dst, s->txbuf, len);
}

static void
send_ctrl(sbml *s, unsigned dst)
{
	struct sbml__wire w = { .type = SBML_PKT_CTRL };

	s->st.ctrl_packets++;
	sbml__send_pkt(s, dst, &w, NULL);
}

static void
send_data(sbml *s, struct sbml__msg *m, bool retrans)
{
	struct sbml__wire w = {
		.type = SBML_PKT_DATA,
		.flags = retrans ? SBML_PKT_F_RETRANS : 0,
		.ssn = m->ssn,
		.sii = m->sii,
		.payload_len = m->len,
	};

	m->last_tx = sbml__now_ns();
	if (retrans)
		s->st.retransmits++;
	sbml__send_pkt(s, m->peer, &w, m->data);
}

static void
queue_ack(sbml *s, unsigned src, uint64_t rsn)
{
	struct sbml__peer *p = &s->peer[src];

	for (unsigned i = 0; i < p->nacks; i++)
		if (p->acks[i] == rsn)
			return;
	if (p->nacks == 0)
		p->acks_since = sbml__now_ns();
	p->acks[p->nacks++] = rsn;
	/* a full packet's worth (a blast's RSNs came at once): it goes now,
	 * so that the receiver may send again (Section 3.5) */
	if (p->nacks == SBML_WIRE_MAX_ACKS)
		send_ctrl(s, src); /* empties the list */
}

/* ---- receiving packets ---- */

/* Step 3: an RSN for our message ssn to src. */
static void
on_rsn(sbml *s, unsigned src, uint64_t ssn, uint64_t rsn)
{
	struct sbml__peer *p = &s->peer[src];
	struct sbml__msg *m = p->log;

	/* Every entry before the first partially logged one is fully
	 * logged: an RSN for one of them came again (our acknowledgement
	 * was lost or is on its way) and is acknowledged again without a
	 * search of a log that may be long. */
	if (rsn != 0 && !s->o.no_logging &&
	    (p->first_partial == NULL || ssn < p->first_partial->ssn) &&
	    ssn <= p->ssn_to) {
		queue_ack(s, src, rsn);
		return;
	}
	/* RSNs come for the oldest partially logged messages: start there */
	if (p->first_partial && p->first_partial->ssn <= ssn)
		m = p->first_partial;
	while (m && m->ssn != ssn)
		m = m->next;
	if (m == NULL) {
		/* purged by a checkpoint of src, or not sent yet again
		 * by this recovering process (then src asks again) */
		if (ssn <= p->ssn_to && rsn != 0 && !s->o.no_logging)
			queue_ack(s, src, rsn);
		return;
	}
	if (rsn == 0 || s->o.no_logging) {
		/* delivered, and need not be logged (no_logging: the
		 * entries go in order, from the head) */
		struct sbml__msg **pp = &p->log;
		while (*pp != m)
			pp = &(*pp)->next;
		log_unlink(s, p, pp);
		return;
	}
	if (m->rsn == 0) {
		m->rsn = rsn;
		p->partial--;
		if (p->first_partial == m)
			p->first_partial = next_partial(m->next);
	}
	queue_ack(s, src, m->rsn);
}

static struct sbml__hist *
hist_find_rsn(sbml *s, uint64_t rsn)
{
	if (s->nhist == 0 || rsn < s->hist[0].rsn)
		return NULL;
	uint64_t i = rsn - s->hist[0].rsn;
	if (i >= s->nhist || s->hist[i].rsn != rsn)
		return NULL;
	return &s->hist[i];
}

static void
advance_unacked(sbml *s)
{
	while (s->first_unacked < s->nhist && s->hist[s->first_unacked].acked)
		s->first_unacked++;
}

static void
on_ack(sbml *s, unsigned src, uint64_t rsn)
{
	struct sbml__hist *h = hist_find_rsn(s, rsn);

	if (h == NULL || h->src != src || h->acked)
		return;
	h->acked = true;
	s->unacked--;
	advance_unacked(s);
}

static struct sbml__hist *
hist_find(sbml *s, unsigned src, uint64_t ssn)
{
	for (size_t i = s->nhist; i-- > 0;)
		if (s->hist[i].src == src && s->hist[i].ssn == ssn)
			return &s->hist[i];
	return NULL;
}

static void
on_data(sbml *s, const struct sbml__wire *w)
{
	struct sbml__peer *p = &s->peer[w->src];
	struct sbml__msg **pp, *m;

	if (w->ssn <= p->delivered) {
		/* P4 */
		struct sbml__hist *h = hist_find(s, w->src, w->ssn);
		struct sbml_wire_rsn r = { w->ssn, h ? h->rsn : 0 };
		struct sbml__wire c = { .type = SBML_PKT_CTRL };
		size_t len;

		s->st.duplicates++;
		if (h)
			s->st.dup_rsn_answered++;
		else
			s->st.dup_nolog_answered++;
		/* the answer alone: an RSN owed is re-sent by the timers */
		c.src = (uint8_t)s->self;
		c.dst = w->src;
		c.group = s->o.group;
		c.inc = s->inc;
		c.ckpt = s->ckpt_sii;
		c.nrsn = 1;
		c.nack = 0;
		len = sbml__wire_seal(s->txbuf, &c, &r, NULL, NULL);
		s->st.ctrl_packets++;
		sbml__net_send(s, w->src, s->txbuf, len);
		return;
	}
	for (pp = &p->queue; *pp && (*pp)->ssn < w->ssn; pp = &(*pp)->next)
		;
	if (*pp && (*pp)->ssn == w->ssn) {
		s->st.duplicates++; /* queued already */
		return;
	}
	m = malloc(sizeof(*m) + w->payload_len);
	if (m == NULL)
		return; /* a loss: the sender retransmits */
	memset(m, 0, sizeof(*m));
	m->ssn = w->ssn;
	m->sii = w->sii;
	m->arrival = ++s->arrivals;
	m->len = w->payload_len;
	m->peer = w->src;
	memcpy(m->data, w->payload, w->payload_len);
	m->next = *pp;
	*pp = m;
}

/* Section 3.4 step 2, one window of the answer: the logged messages to
 * src with RSN >= from, at most REPLAY_WINDOW of them and about
 * REPLAY_WINDOW_BYTES, then REPLAY_END with their count and the RSN of
 * the next logged message (0: none, the answer is complete).  The
 * recovering process asks for the next window when this one is whole,
 * and again for this one when a packet of it was lost: a window, never
 * the whole answer, is what a request makes leave, so a log longer than
 * the socket buffer costs no more than one packet per message plus the
 * windows lost.  The send log to src holds its fully logged messages in
 * ascending RSN (src delivers a sender's messages in SSN order, and an
 * entry made partially logged again by a recovery of src -- step 5 --
 * gets an RSN above every RSN kept), so a window is a run of the log. */
#define REPLAY_WINDOW 16
#define REPLAY_WINDOW_BYTES (64u << 10)

static void
serve_replay_req(sbml *s, unsigned src, uint64_t from)
{
	struct sbml__peer *p = &s->peer[src];
	uint64_t n = 0, next = 0, bytes = 0;
	struct sbml__msg *m = p->log;

	/* the next window starts where the last one stopped: a walk of
	 * the log from its head for each would make the answer quadratic */
	if (p->replay_at && p->replay_at->rsn == from)
		m = p->replay_at;
	p->replay_at = NULL;
	for (; m; m = m->next) {
		if (m->rsn == 0 || m->rsn < from)
			continue;
		if (n == REPLAY_WINDOW || bytes >= REPLAY_WINDOW_BYTES) {
			next = m->rsn;
			p->replay_at = m;
			break;
		}
		struct sbml__wire w = {
			.type = SBML_PKT_REPLAY,
			.ssn = m->ssn,
			.sii = m->sii,
			.arg = m->rsn,
			.payload_len = m->len,
		};
		sbml__send_pkt(s, src, &w, m->data);
		n++;
		bytes += m->len;
	}
	struct sbml__wire e = {
		.type = SBML_PKT_REPLAY_END,
		.flags = s->recovering ? SBML_PKT_F_RECOVERING : 0,
		.ssn = next,
		.sii = p->dv,
		.arg = n,
	};
	sbml__send_pkt(s, src, &e, NULL);
}

/* Step 5: messages src will not re-create the RSNs of are partially
 * logged again, and are sent again. */
static void
serve_replay_done(sbml *s, unsigned src, uint64_t last)
{
	struct sbml__peer *p = &s->peer[src];
	struct sbml__wire a = { .type = SBML_PKT_REPLAY_DONE_ACK };

	for (struct sbml__msg *m = p->log; m; m = m->next) {
		if (m->rsn > last) {
			m->rsn = 0;
			m->last_tx = 0;
			p->partial++;
		}
	}
	p->first_partial = next_partial(p->log);
	sbml__send_pkt(s, src, &a, NULL);
}

static bool
from_member(const sbml *s, unsigned src, const struct sockaddr_storage *ss)
{
	const struct sbml__peer *p = &s->peer[src];

	if (ss->ss_family != p->addr.ss_family)
		return false;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss,
					 *b = (const void *)&p->addr;
		return a->sin_port == b->sin_port &&
			a->sin_addr.s_addr == b->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *a = (const void *)ss,
				  *b = (const void *)&p->addr;
	return a->sin6_port == b->sin6_port &&
		memcmp(&a->sin6_addr, &b->sin6_addr, 16) == 0;
}

static void
on_packet(sbml *s, const uint8_t *buf, size_t len,
	const struct sockaddr_storage *from)
{
	struct sbml__wire w;
	struct sbml__peer *p;

	switch (sbml__wire_parse(buf, len, s->o.max_message, &w)) {
	case SBML__WIRE_OK:
		break;
	case SBML__WIRE_TRUNCATED:
		s->st.drop_truncated++;
		return;
	case SBML__WIRE_MALFORMED:
		s->st.drop_malformed++;
		return;
	case SBML__WIRE_CHECKSUM:
		s->st.drop_checksum++;
		return;
	}
	if (w.group != s->o.group || w.dst != s->self || w.src >= s->n ||
	    !from_member(s, w.src, from)) {
		s->st.drop_foreign++;
		return;
	}
	p = &s->peer[w.src];
	/* P5 */
	if (w.inc < p->inc) {
		s->st.drop_stale++;
		return;
	}
	p->inc = w.inc;
	s->st.packets_in++;
	if (w.ckpt > p->ckpt) {
		p->ckpt = w.ckpt;
		sbml__log_gc(s, w.src);
	}
	switch (w.type) {
	case SBML_PKT_DATA:
	case SBML_PKT_CTRL:
		/* P2: RSNs and acknowledgements before the message */
#ifndef SBML_BROKEN_DELIVER_BEFORE_RECORDED
		for (unsigned i = 0; i < w.nrsn; i++) {
			struct sbml_wire_rsn r;
			sbml__wire_rsn(&w, i, &r);
			on_rsn(s, w.src, r.ssn, r.rsn);
		}
#else
		/* broken: RSNs riding on a message are not recorded; the
		 * message is delivered while its sender's RSNs are still
		 * unrecorded here (they come again in a CTRL packet) */
		if (w.type == SBML_PKT_CTRL)
			for (unsigned i = 0; i < w.nrsn; i++) {
				struct sbml_wire_rsn r;
				sbml__wire_rsn(&w, i, &r);
				on_rsn(s, w.src, r.ssn, r.rsn);
			}
#endif
		for (unsigned i = 0; i < w.nack; i++)
			on_ack(s, w.src, sbml__wire_ack(&w, i));
		/* acknowledgements make room: more RSNs owed may leave */
		if (w.nack)
			s->next_tick = 0;
		if (w.type == SBML_PKT_DATA)
			on_data(s, &w);
		/* step 3: RSNs in a packet of their own are acknowledged at
		 * once; the answer carries only RSNs we owe, which the
		 * peer's acknowledgement ends (no ping-pong) */
		else if (w.nrsn && p->nacks)
			send_ctrl(s, w.src);
		break;
	case SBML_PKT_REPLAY_REQ:
		serve_replay_req(s, w.src, w.sii);
		break;
	case SBML_PKT_REPLAY_DONE:
		serve_replay_done(s, w.src, w.sii);
		break;
	case SBML_PKT_REPLAY:
	case SBML_PKT_REPLAY_END:
	case SBML_PKT_REPLAY_DONE_ACK:
		sbml__on_replay_pkt(s, &w);
		break;
	case SBML_PKT_DONE: {
		struct sbml__wire a = { .type = SBML_PKT_DONE_ACK };
		p->done_rcvd = true;
		sbml__send_pkt(s, w.src, &a, NULL);
		/* the peer does not have our DONE (arg 0): a recovery rolled
		 * it back past it; say it again until acknowledged */
		if (s->announcing && w.arg == 0 && p->done_acked) {
			p->done_acked = false;
			p->rec_tx = 0;
			s->next_tick = 0;
		}
		break;
	}
	case SBML_PKT_DONE_ACK:
		p->done_acked = true;
		break;
	}
}

/* ---- timers ---- */

static void
tick(sbml *s, uint64_t now)
{
	sbml__net_tick(s, now);
	if (now < s->next_tick)
		return;
	s->next_tick = now + delay_ns(s) / 2 + 50 * NS_US;
	/* partially logged messages: again every rto */
	for (unsigned d = 0; d < s->n; d++) {
		struct sbml__peer *p = &s->peer[d];
		if (p->partial == 0)
			continue;
		for (struct sbml__msg *m = p->first_partial; m; m = m->next)
			if (m->rsn == 0 && now >= m->last_tx + rto_ns(s))
				send_data(s, m, m->last_tx != 0);
	}
	/* RSNs owed (due), and acknowledgements waiting too long */
	for (unsigned d = 0; d < s->n; d++) {
		struct sbml__peer *p = &s->peer[d];
		bool due = p->nacks && now >= p->acks_since + delay_ns(s);
		for (size_t i = s->first_unacked; !due && i < s->nhist; i++)
			due = !s->hist[i].acked && s->hist[i].src == d &&
				now >= s->hist[i].last_tx;
		if (due)
			send_ctrl(s, d);
	}
	sbml__recover_tick(s, now);
	if (s->announcing) {
		for (unsigned d = 0; d < s->n; d++) {
			struct sbml__peer *p = &s->peer[d];
			if (d == s->self || p->done_acked ||
			    now < p->rec_tx + rto_ns(s))
				continue;
			struct sbml__wire w = { .type = SBML_PKT_DONE,
				.arg = p->done_rcvd };
			p->rec_tx = now;
			sbml__send_pkt(s, d, &w, NULL);
		}
	}
}

/* Make every RSN owed to a process other than dst (all, if dst < 0) and
 * every pending acknowledgement leave at the next tick. */
static void
hurry(sbml *s, int dst)
{
	for (size_t i = s->first_unacked; i < s->nhist; i++)
		if (!s->hist[i].acked && (int)s->hist[i].src != dst &&
		    s->hist[i].last_tx > sbml__now_ns())
			s->hist[i].last_tx = 0;
	for (unsigned d = 0; d < s->n; d++)
		if (s->peer[d].nacks)
			s->peer[d].acks_since = 0;
	s->next_tick = 0;
}

/* The datagrams that are there (at most 256), then the timers. */
static void
serve(sbml *s)
{
	for (int i = 0; i < 256; i++) {
		struct sockaddr_storage from;
		socklen_t fl = sizeof(from);
		ssize_t n = recvfrom(s->fd, s->rxbuf, s->bufsize, MSG_DONTWAIT,
			(struct sockaddr *)&from, &fl);
		if (n < 0)
			break;
		on_packet(s, s->rxbuf, (size_t)n, &from);
	}
	tick(s, sbml__now_ns());
}

/* One round: wait for datagrams (at most ~1 ms, or until deadline),
 * handle them all, run the timers.  Returns 0, or SBML_ETIMEDOUT once
 * deadline has passed. */
int
sbml__pump(sbml *s, uint64_t deadline)
{
	uint64_t now = sbml__now_ns();
	int ms = 0;
	struct pollfd pfd = { .fd = s->fd, .events = POLLIN };

	if (now >= deadline)
		return sbml__err(SBML_ETIMEDOUT, "process %u: no progress "
			"within the timeout", s->self);
	if (now < s->next_tick) {
		uint64_t until = s->next_tick < deadline ? s->next_tick
							 : deadline;
		ms = (int)((until - now + NS_MS - 1) / NS_MS);
		if (ms > 1)
			ms = 1;
	}
	if (poll(&pfd, 1, ms) < 0 && errno != EINTR)
		return sbml__errno("poll");
	serve(s);
	return 0;
}

int
sbml_poll(sbml *s)
{
	int rc = sbml__check(s);

	if (rc == 0)
		serve(s);
	return rc;
}

static uint64_t
deadline_of(const sbml *s, int timeout_ms)
{
	uint64_t t = timeout_ms < 0 ? s->o.timeout_ms : (unsigned)timeout_ms;

	return sbml__now_ns() + t * NS_MS;
}

/* ---- the API ---- */

int
sbml_open(const struct sbml_opts *o, sbml **out)
{
	sbml *s;
	int rc;
	struct timespec ts;

	*out = NULL;
	if (o == NULL || o->nprocs < 2 || o->nprocs > SBML_MAX_PROCS ||
	    o->self >= o->nprocs || o->addrs == NULL)
		return sbml__err(SBML_EADDR, "sbml_open: need 2..%d processes "
			"with addresses and self < nprocs", SBML_MAX_PROCS);
	if (o->max_message > SBML_MAX_MESSAGE)
		return sbml__err(-EINVAL, "sbml_open: max_message %u above %u",
			o->max_message, SBML_MAX_MESSAGE);
	if (o->faults && (o->faults->drop < 0 || o->faults->drop >= 1 ||
			  o->faults->delay < 0 || o->faults->delay > 1 ||
			  o->faults->reorder < 0 || o->faults->reorder > 1 ||
			  o->faults->duplicate < 0 ||
			  o->faults->duplicate > 1))
		return sbml__err(-EINVAL, "sbml_open: fault probabilities "
			"must be in [0, 1) (drop) and [0, 1]");
	s = calloc(1, sizeof(*s));
	if (s == NULL)
		return sbml__err(-ENOMEM, "sbml_open: no memory");
	s->o = *o;
	s->o.faults = NULL;
	if (!s->o.group)
		s->o.group = 1;
	if (!s->o.max_message)
		s->o.max_message = 4096;
	if (!s->o.rto_ms)
		s->o.rto_ms = 20;
	if (!s->o.rsn_delay_us)
		s->o.rsn_delay_us = 500;
	if (!s->o.timeout_ms)
		s->o.timeout_ms = 30000;
	if (!s->o.linger_ms)
		s->o.linger_ms = 1000;
	s->n = o->nprocs;
	s->self = o->self;
	s->fd = -1;
	if (o->faults) {
		s->f = *o->faults;
		s->faulty = true;
		s->rng = s->f.seed ^ ((uint64_t)o->self << 32);
	}
	for (unsigned i = 0; i < s->n; i++) {
		rc = sbml__parse_addr(o->addrs[i], &s->peer[i].addr,
			&s->peer[i].addrlen);
		if (rc)
			goto fail;
	}
	s->bufsize = sizeof(struct sbml_wire_hdr) +
		16 * SBML_WIRE_MAX_RSNS + 8 * SBML_WIRE_MAX_ACKS +
		s->o.max_message;
	s->rxbuf = malloc(s->bufsize);
	s->txbuf = malloc(s->bufsize);
	if (!s->rxbuf || !s->txbuf) {
		rc = sbml__err(-ENOMEM, "sbml_open: no memory");
		goto fail;
	}
	rc = sbml__net_open(s);
	if (rc)
		goto fail;
	/* An incarnation number greater than any before it, although the
	 * memory holding the last one is rolled back by a recovery. */
	clock_gettime(CLOCK_REALTIME, &ts);
	s->inc = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	if (dc_recovered()) {
		/* resumed from a checkpoint taken before this call: a
		 * fresh state that must be recovered as well */
		rc = sbml__recover(s);
		if (rc) {
			*out = s;
			return rc;
		}
	}
	*out = s;
	return 0;
fail:
	sbml_close(s);
	return rc;
}

void
sbml_close(sbml *s)
{
	if (s == NULL)
		return;
	if (s->fd >= 0)
		close(s->fd);
	sbml__net_drop_held(s);
	for (unsigned i = 0; i < s->n; i++) {
		sbml__free_list(&s->peer[i].log);
		sbml__free_list(&s->peer[i].queue);
	}
	sbml__free_list(&s->replay);
	free(s->hist);
	free(s->rxbuf);
	free(s->txbuf);
	free(s);
}

/* P1: can a message to dst leave now? */
static bool
may_send(const sbml *s, unsigned dst, unsigned *owed_dst)
{
	unsigned mine = 0;

	if (s->o.no_logging)
		return true;
	for (size_t i = s->first_unacked; i < s->nhist; i++) {
		if (s->hist[i].acked)
			continue;
		if (s->hist[i].src != dst)
			return false;
		mine++;
	}
	*owed_dst = mine;
	return mine <= SBML_WIRE_MAX_RSNS;
}

int
sbml_send(sbml *s, unsigned dst, const void *buf, size_t len)
{
	struct sbml__peer *p;
	struct sbml__msg *m;
	unsigned owed = 0;
	int rc = sbml__check(s);

	if (rc)
		return rc;
	if (dst >= s->n || dst == s->self)
		return sbml__err(SBML_EADDR, "sbml_send: process %u: no such "
			"peer (group of %u, self %u)", dst, s->n, s->self);
	if (len > s->o.max_message)
		return sbml__err(SBML_ETOOBIG, "sbml_send: %zu bytes, "
			"max_message is %u", len, s->o.max_message);
	if (s->recovering)
		return sbml__err(SBML_ESTATE, "sbml_send during recovery");
#ifndef SBML_BROKEN_SEND_UNACKED
	if (!may_send(s, dst, &owed)) {
		uint64_t deadline = deadline_of(s, -1);
		s->st.sends_waited++;
		hurry(s, (int)dst);
		while (!may_send(s, dst, &owed)) {
			rc = sbml__pump(s, deadline);
			if (rc)
				return sbml__err(rc, "process %u: sbml_send to "
					"%u: RSNs owed to other processes "
					"were not acknowledged in time",
					s->self, dst);
		}
	} else if (owed) {
		s->st.sends_piggybacked++;
	} else {
		s->st.sends_immediate++;
	}
#else
	/* broken: sends at once, RSNs owed to others unacknowledged */
	(void)may_send(s, dst, &owed);
	s->st.sends_immediate++;
#endif
	m = malloc(sizeof(*m) + len);
	if (m == NULL)
		return sbml__err(-ENOMEM, "sbml_send: no memory for the log");
	p = &s->peer[dst];
	memset(m, 0, sizeof(*m));
	m->ssn = ++p->ssn_to;
	m->sii = s->sii;
	m->len = (uint32_t)len;
	m->peer = dst;
	if (len)
		memcpy(m->data, buf, len);
	if (p->log_tail)
		p->log_tail->next = m;
	else
		p->log = m;
	p->log_tail = m;
	if (p->first_partial == NULL)
		p->first_partial = m;
	p->partial++;
	log_count(s, m, +1);
	s->st.sent++;
	send_data(s, m, false);
	return 0;
}

static void
hist_add(sbml *s, unsigned src, uint64_t ssn, uint64_t rsn, bool acked)
{
	if (s->o.no_logging && s->nhist >= 2 * HIST_KEEP_NOLOG &&
	    s->first_unacked >= HIST_KEEP_NOLOG) {
		/* no checkpoints purge it: keep the newest part */
		size_t cut = s->first_unacked;
		memmove(s->hist, s->hist + cut,
			(s->nhist - cut) * sizeof(*s->hist));
		s->nhist -= cut;
		s->first_unacked = 0;
	}
	if (s->nhist == s->caphist) {
		size_t c = s->caphist ? 2 * s->caphist : 64;
		struct sbml__hist *h = realloc(s->hist, c * sizeof(*h));
		if (h == NULL) {
			sbml__fatal(s, SBML_ELIMIT, "no memory for the RSN "
				"history");
			return;
		}
		s->hist = h;
		s->caphist = c;
	}
	struct sbml__hist *h = &s->hist[s->nhist++];
	h->src = src;
	h->ssn = ssn;
	h->rsn = rsn;
	h->acked = acked;
	h->last_tx = sbml__now_ns() + delay_ns(s);
	if (!acked)
		s->unacked++;
	advance_unacked(s);
	s->st.history_entries = s->nhist;
}

/* Step 2: the program receives m, which starts a new state interval. */
static void
deliver(sbml *s, struct sbml__msg *m, bool replayed)
{
	struct sbml__peer *p = &s->peer[m->peer];

	s->sii++;
	if (m->sii > p->dv)
		p->dv = m->sii;
	p->delivered = m->ssn;
	/* a replayed message's RSN is in its sender's log already */
	hist_add(s, m->peer, m->ssn, s->sii, replayed);
	s->st.received++;
	if (replayed)
		s->st.replayed++;
}

/* The next message for the program, if any (FIFO per sender, earliest
 * arrival among senders). */
static struct sbml__msg *
pick(sbml *s, int src)
{
	struct sbml__msg **best = NULL;

	for (unsigned i = 0; i < s->n; i++) {
		struct sbml__peer *p = &s->peer[i];
		if (src != SBML_ANY && (unsigned)src != i)
			continue;
		while (p->queue && p->queue->ssn <= p->delivered) {
			struct sbml__msg *old = p->queue;
			p->queue = old->next;
			free(old);
		}
		if (p->queue && p->queue->ssn == p->delivered + 1 &&
		    (best == NULL || p->queue->arrival < (*best)->arrival))
			best = &p->queue;
	}
	if (best == NULL)
		return NULL;
	struct sbml__msg *m = *best;
	*best = m->next;
	return m;
}

int
sbml_recv(sbml *s, int src, void *buf, size_t cap, size_t *len,
	unsigned *from, int timeout_ms)
{
	uint64_t deadline = deadline_of(s, timeout_ms);
	struct sbml__msg *m = NULL;
	bool replayed = false;
	int rc = sbml__check(s);

	if (rc)
		return rc;
	if (src != SBML_ANY && (src < 0 || (unsigned)src >= s->n ||
				       (unsigned)src == s->self))
		return sbml__err(SBML_EADDR, "sbml_recv: process %d: no such "
			"peer", src);
	for (;;) {
		if (s->replaying) {
			m = s->replay;
			if (m->rsn != s->sii + 1)
				return sbml__fatal(s, SBML_EREPLAY, "replay "
					"expected RSN %llu, the log has %llu",
					(unsigned long long)s->sii + 1,
					(unsigned long long)m->rsn);
			if (src != SBML_ANY && m->peer != (unsigned)src)
				return sbml__fatal(s, SBML_EREPLAY,
					"re-execution receives from process "
					"%d where the message of RSN %llu is "
					"from process %u", src,
					(unsigned long long)m->rsn, m->peer);
			s->replay = m->next;
			if (s->replay == NULL) {
				s->replaying = false;
				if (s->o.verbose)
					fprintf(stderr, "sbml: process %u: "
						"replay done at state "
						"interval %llu\n", s->self,
						(unsigned long long)m->rsn);
			}
			replayed = true;
			break;
		}
		m = pick(s, src);
		if (m)
			break;
		rc = sbml__pump(s, deadline);
		if (rc)
			return rc;
		rc = sbml__check(s);
		if (rc)
			return rc;
	}
	deliver(s, m, replayed);
	if (len)
		*len = m->len;
	if (from)
		*from = m->peer;
	memcpy(buf, m->data, m->len < cap ? m->len : cap);
	rc = m->len > cap ? sbml__err(SBML_ETOOBIG, "sbml_recv: message of "
		"%u bytes, buffer of %zu", m->len, cap) : 0;
	free(m);
	return rc;
}

int
sbml_call(sbml *s, unsigned dst, const void *req, size_t reqlen, void *rep,
	size_t cap, size_t *replen)
{
	int rc = sbml_send(s, dst, req, reqlen);

	if (rc)
		return rc;
	return sbml_recv(s, (int)dst, rep, cap, replen, NULL, -1);
}

static bool
all_logged(const sbml *s)
{
	if (s->unacked)
		return false;
	for (unsigned d = 0; d < s->n; d++)
		if (s->peer[d].partial || s->peer[d].nacks)
			return false;
	return true;
}

int
sbml_flush(sbml *s, int timeout_ms)
{
	uint64_t deadline = deadline_of(s, timeout_ms);
	int rc = sbml__check(s);

	/* once: what is owed leaves at the next tick, and then again every
	 * rto (a hurry per round would re-send it at every round, without
	 * waiting in poll, while the peer computes) */
	if (rc == 0 && !all_logged(s))
		hurry(s, -1);
	while (rc == 0 && !all_logged(s))
		rc = sbml__pump(s, deadline);
	return rc;
}

int
sbml_output(sbml *s, int fd, const void *buf, size_t len)
{
	uint64_t deadline = deadline_of(s, -1);
	const char *b = buf;
	int rc = sbml__check(s);

	/* Section 3.3: output waits for the acknowledgements, as a send */
	if (rc == 0 && s->unacked && !s->o.no_logging)
		hurry(s, -1); /* once, as in sbml_flush */
	while (rc == 0 && s->unacked && !s->o.no_logging)
		rc = sbml__pump(s, deadline);
	while (rc == 0 && len) {
		ssize_t n = write(fd, b, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return sbml__errno("sbml_output: write fd %d", fd);
		b += n;
		len -= (size_t)n;
	}
	return rc;
}

int
sbml_stats(const sbml *s, struct sbml_stats *out)
{
	*out = s->st;
	out->history_entries = s->nhist;
	out->state_interval = s->sii;
	out->ssn = 0;
	for (unsigned d = 0; d < s->n; d++)
		out->ssn += s->peer[d].ssn_to;
	return 0;
}

int
sbml_depvec(const sbml *s, uint64_t *out, unsigned n)
{
	for (unsigned i = 0; i < n && i < s->n; i++)
		out[i] = s->peer[i].dv;
	return 0;
}
