/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recover.c -- checkpoints through libdc, recovery (Section 3.4), the
 * consistency check of concurrent failures (Section 6), termination
 *
 * A checkpoint is dc_checkpoint(): the library's state is memory of the
 * process.  Before it, every RSN this process returned is acknowledged
 * (so the checkpoint owes none) and the RSN history is purged (Section
 * 3.2); the checkpoint's state interval index then rides on every packet,
 * and each peer drops from its send log the messages received before it
 * (Section 4.3).
 *
 * Recovery of process Y, when dc_checkpoint() returns 1 (or sbml_open
 * finds the process resumed from a checkpoint taken before it):
 *   1. the state is the checkpoint's (libdc reloaded it); a new
 *      incarnation number makes every packet of the dead life stale;
 *   2. the logged messages from every peer, window by window: REPLAY_REQ
 *      (first = rec_from, at first sii + 1) is answered by at most a
 *      window of them (proto.c: 16 messages, about 64 KiB) in RSN order
 *      and REPLAY_END(count, the sender's next logged RSN or 0 for
 *      none).  A whole window is followed at once by the request from
 *      that next RSN; a window with a packet lost is asked again every
 *      rto, keeping what came.  A request never makes more than one
 *      window leave, so the socket buffer is not overrun and the cost
 *      is about one packet per logged message, whatever the length of
 *      the log: a peer's resume point is its own next RSN, never one
 *      the receiver guesses, so the RSNs of other peers and a gap in
 *      the RSNs (a message that died with a second failure) are
 *      crossed like any other step;
 *   3. L = the end of the run of consecutive RSNs from first; every
 *      peer's REPLAY_END names its dependency-vector entry for Y, and a
 *      peer depending on an interval above L cannot be made consistent:
 *      recovery is refused (SBML_ECONCURRENT, stderr names the
 *      processes), the handle goes to its error state;
 *   4. the messages up to L are delivered by sbml_recv first, in RSN
 *      order, before any other; duplicates of Y's re-execution are
 *      answered by the receivers with their original RSN (proto.c P4);
 *   5. REPLAY_DONE(L) to every peer (until acknowledged): their messages
 *      with an RSN above L are partially logged again and are sent again,
 *      to be received after the replay.
 *
 * Invariants
 *   R1. No message is delivered while the replay list is being collected,
 *       and none but the replay list's until it is empty.
 *   R2. A refused recovery delivers nothing and sends nothing new.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dc.h"
#include "sbml_int.h"

#define NS_MS 1000000ull

static void
ask(sbml *s, unsigned d, uint64_t now)
{
	struct sbml__wire w = { .type = SBML_PKT_REPLAY_REQ,
		.sii = s->peer[d].rec_from };

	s->peer[d].rec_tx = now;
	sbml__send_pkt(s, d, &w, NULL);
}

void
sbml__on_replay_pkt(sbml *s, const struct sbml__wire *w)
{
	struct sbml__peer *p = &s->peer[w->src];

	if (w->type == SBML_PKT_REPLAY_DONE_ACK) {
		p->rec_done_acked = true;
		return;
	}
	if (!s->recovering || s->replay_last != UINT64_MAX)
		return; /* late: stale for this recovery, or after step 2 */
	if (w->type == SBML_PKT_REPLAY_END) {
		/* the window asked from rec_from: arg messages, and the
		 * sender's next logged RSN is ssn (0: none).  An answer to
		 * an earlier window ends at or below rec_from. */
		if (w->ssn != 0 && w->ssn <= p->rec_from)
			return;
		p->rec_dv = w->sii;
		p->rec_recovering = (w->flags & SBML_PKT_F_RECOVERING) != 0;
		if (p->rec_end || p->rec_got < w->arg)
			return; /* lost some: asked again at rto */
		if (w->ssn == 0) {
			p->rec_end = true;
			return;
		}
		/* whole: the next window at once (the pace of the answer
		 * is the receiver's) */
		p->rec_from = w->ssn;
		p->rec_got = 0;
		ask(s, w->src, sbml__now_ns());
		return;
	}
	/* REPLAY: keep by RSN, once; a sender's answer comes in ascending
	 * RSN, so its place is searched from its last one */
	struct sbml__msg **pp, *m;
	if (w->arg <= s->sii)
		return;
	pp = p->rec_last && p->rec_last->rsn < w->arg ? &p->rec_last->next
						       : &s->replay;
	for (; *pp && (*pp)->rsn < w->arg; pp = &(*pp)->next)
		;
	if (*pp && (*pp)->rsn == w->arg)
		return;
	m = malloc(sizeof(*m) + w->payload_len);
	if (m == NULL)
		return; /* asked again */
	memset(m, 0, sizeof(*m));
	m->ssn = w->ssn;
	m->sii = w->sii;
	m->rsn = w->arg;
	m->len = w->payload_len;
	m->peer = w->src;
	memcpy(m->data, w->payload, w->payload_len);
	m->next = *pp;
	*pp = m;
	p->rec_last = m;
	if (w->arg >= p->rec_from)
		p->rec_got++;
}

static bool
collected(const sbml *s, unsigned d)
{
	return s->peer[d].rec_end;
}

void
sbml__recover_tick(sbml *s, uint64_t now)
{
	uint64_t rto = (uint64_t)s->o.rto_ms * NS_MS;

	if (!s->recovering)
		return;
	for (unsigned d = 0; d < s->n; d++) {
		struct sbml__peer *p = &s->peer[d];
		if (d == s->self || now < p->rec_tx + rto)
			continue;
		if (s->replay_last == UINT64_MAX) {
			/* step 2: no answer yet, or (part of) the window was
			 * lost: the same window again, keeping what came */
			if (!collected(s, d))
				ask(s, d, now);
		} else if (!p->rec_done_acked) {
			/* step 5 */
			struct sbml__wire w = { .type = SBML_PKT_REPLAY_DONE,
				.sii = s->replay_last };
			p->rec_tx = now;
			sbml__send_pkt(s, d, &w, NULL);
		}
	}
}

static int
wait_for(sbml *s, bool (*done)(const sbml *))
{
	uint64_t deadline = sbml__now_ns() + (uint64_t)s->o.timeout_ms * NS_MS;
	int rc = 0;

	while (rc == 0 && !done(s))
		rc = sbml__pump(s, deadline);
	return rc;
}

static bool
all_collected(const sbml *s)
{
	for (unsigned d = 0; d < s->n; d++)
		if (d != s->self && !collected(s, d))
			return false;
	return true;
}

static bool
all_done_acked(const sbml *s)
{
	for (unsigned d = 0; d < s->n; d++)
		if (d != s->self && !s->peer[d].rec_done_acked)
			return false;
	return true;
}

int
sbml__recover(sbml *s)
{
	struct timespec ts;
	uint64_t first = s->sii + 1, last;
	bool at_finish = s->finishing;
	int rc;

	/* 1. a new incarnation: the dead life's packets are stale */
	clock_gettime(CLOCK_REALTIME, &ts);
	s->inc = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
	sbml__net_drop_held(s);
	sbml__free_list(&s->replay);
	s->recovering = true;
	s->replaying = false;
	s->replay_last = UINT64_MAX;
	s->finishing = s->announcing = false;
	s->st.recoveries++;
	for (unsigned d = 0; d < s->n; d++) {
		struct sbml__peer *p = &s->peer[d];
		p->rec_end = p->rec_recovering = p->rec_done_acked = false;
		p->rec_got = p->rec_tx = 0;
		p->rec_from = s->sii + 1;
		p->rec_last = NULL;
		p->done_rcvd = p->done_acked = false;
	}
	s->next_tick = 0;
	if (at_finish) {
		/* resumed at sbml_finish's checkpoint: everything received
		 * was fully logged before it and nothing is received after
		 * it, so nothing is replayed and nobody depends on a later
		 * interval (the peers may have left already) */
		s->recovering = false;
		s->finishing = true;
		if (s->o.verbose)
			fprintf(stderr, "sbml: process %u recovered at its "
				"finishing checkpoint (state interval %llu)\n",
				s->self, (unsigned long long)s->sii);
		return 0;
	}

	/* 2. the logged messages from every sender */
	rc = wait_for(s, all_collected);
	if (rc)
		return sbml__fatal(s, rc, "recovery: the logged messages "
			"were not all collected in time (a peer is down?)");

	/* 3. the consistency check */
	last = s->sii;
	for (struct sbml__msg *m = s->replay; m && m->rsn == last + 1;
		m = m->next)
		last++;
	char who[200] = "", failed[200] = "";
	size_t wl = 0, fl = 0;
	for (unsigned d = 0; d < s->n; d++) {
		struct sbml__peer *p = &s->peer[d];
		if (d == s->self)
			continue;
		if (p->rec_recovering && fl < sizeof(failed))
			fl += (size_t)snprintf(failed + fl, sizeof(failed) - fl,
				" %u", d);
		if (p->rec_dv > last && wl < sizeof(who))
			wl += (size_t)snprintf(who + wl, sizeof(who) - wl,
				" %u (on interval %llu)", d,
				(unsigned long long)p->rec_dv);
	}
	if (wl) {
		s->recovering = false;
		sbml__free_list(&s->replay);
		rc = sbml__fatal(s, SBML_ECONCURRENT, "recovery refused: "
			"processes%s depend on state intervals of process %u "
			"above %llu, the last one that can be re-created "
			"(its messages after that died with another failure; "
			"processes recovering too:%s)", who, s->self,
			(unsigned long long)last, fl ? failed : " none");
		if (!s->o.verbose) /* sbml__fatal said it already */
			fprintf(stderr, "sbml: process %u: %s\n", s->self,
				s->errmsg);
		return rc;
	}
	/* a message beyond a gap cannot be replayed: step 5 resends it */
	for (unsigned d = 0; d < s->n; d++)
		s->peer[d].rec_last = NULL;
	for (struct sbml__msg **pp = &s->replay; *pp;) {
		if ((*pp)->rsn > last) {
			struct sbml__msg *m = *pp;
			*pp = m->next;
			free(m);
		} else {
			pp = &(*pp)->next;
		}
	}

	/* 5. (announced before 4 runs: it only re-sends what comes after) */
	s->replay_last = last;
	for (unsigned d = 0; d < s->n; d++)
		s->peer[d].rec_tx = 0;
	rc = wait_for(s, all_done_acked);
	if (rc)
		return sbml__fatal(s, rc, "recovery: REPLAY_DONE was not "
			"acknowledged in time");
	s->recovering = false;
	/* 4. R1: the replay list first */
	s->replaying = s->replay != NULL;
	if (s->o.verbose)
		fprintf(stderr, "sbml: process %u recovered from state "
			"interval %llu: %llu logged messages to replay "
			"(through %llu), incarnation %llu\n", s->self,
			(unsigned long long)first - 1,
			(unsigned long long)(last - (first - 1)),
			(unsigned long long)last, (unsigned long long)s->inc);
	if (s->o.verbose && !s->replaying)
		fprintf(stderr, "sbml: process %u: replay done at state "
			"interval %llu\n", s->self, (unsigned long long)last);
	return 0;
}

static void
advance_unacked_all(sbml *s)
{
	while (s->first_unacked < s->nhist &&
	       s->hist[s->first_unacked].acked)
		s->first_unacked++;
}

static bool
none_owed(const sbml *s)
{
	if (s->unacked)
		return false;
	for (unsigned d = 0; d < s->n; d++)
		if (s->peer[d].nacks)
			return false;
	return true;
}

int
sbml_checkpoint(sbml *s)
{
	int rc = sbml__check(s);
	uint64_t old = s->ckpt_sii;

	if (rc)
		return rc;
	/* A checkpoint in the middle of a replay is fine: the rest of the
	 * replay list has RSNs above it, which the senders keep, and a
	 * recovery from it collects them again. */
	if (s->o.no_logging)
		return sbml__err(SBML_ESTATE, "sbml_checkpoint: no_logging "
			"processes cannot be recovered");
	/* every RSN returned acknowledged: the history can go */
	for (unsigned d = 0; d < s->n; d++)
		s->peer[d].acks_since = 0;
	s->next_tick = 0;
	uint64_t deadline = sbml__now_ns() + (uint64_t)s->o.timeout_ms * NS_MS;
	while (rc == 0 && !none_owed(s)) {
		for (size_t i = s->first_unacked; i < s->nhist; i++)
			if (!s->hist[i].acked)
				s->hist[i].last_tx = 0;
		s->next_tick = 0;
		rc = sbml__pump(s, deadline);
	}
	if (rc)
		return rc;
	/* the history is empty in the checkpoint, and stays empty only if
	 * the checkpoint was taken */
	size_t nhist = s->nhist;
	s->nhist = s->first_unacked = 0;
	s->ckpt_sii = s->sii;
	rc = dc_checkpoint();
	if (rc == 1) {
		rc = sbml__recover(s);
		return rc ? rc : 1;
	}
	if (rc < 0) {
		s->ckpt_sii = old;
		s->nhist = s->first_unacked = nhist;
		advance_unacked_all(s);
		if (rc == DC_ENOTINIT)
			return sbml__err(rc, "sbml_checkpoint: Discount "
				"Checking is not running (dc_init or dc-run)");
		return sbml__fatal(s, rc, "dc_checkpoint failed: %s",
			dc_errormsg());
	}
	s->st.checkpoints++;
	/* tell every peer now, not with the next packet only */
	for (unsigned d = 0; d < s->n; d++) {
		if (d == s->self)
			continue;
		struct sbml__wire w = { .type = SBML_PKT_CTRL };
		sbml__send_pkt(s, d, &w, NULL);
	}
	return 0;
}

int
sbml_finish(sbml *s)
{
	uint64_t deadline, quiet_since, linger;
	uint64_t last_in;
	bool recovered = false;
	int rc = sbml_flush(s, -1);

	if (rc)
		return rc;
	/* in the checkpoint: a recovery there needs no replay */
	s->finishing = true;
	if (!s->o.no_logging) {
		rc = sbml_checkpoint(s);
		if (rc == 1)
			recovered = true;
		else if (rc == DC_ENOTINIT)
			rc = 0;
		if (rc < 0)
			return rc;
	}
	for (unsigned d = 0; d < s->n; d++)
		s->peer[d].rec_tx = 0;
	s->announcing = true;
	s->next_tick = 0;
	deadline = sbml__now_ns() + (uint64_t)s->o.timeout_ms * NS_MS;
	linger = (uint64_t)s->o.linger_ms * NS_MS;
	last_in = s->st.packets_in;
	quiet_since = sbml__now_ns();
	for (;;) {
		bool all_rcvd = true, all_acked = true;
		for (unsigned d = 0; d < s->n; d++) {
			if (d == s->self)
				continue;
			all_rcvd &= s->peer[d].done_rcvd;
			all_acked &= s->peer[d].done_acked;
		}
		uint64_t now = sbml__now_ns();
		if (s->st.packets_in != last_in) {
			last_in = s->st.packets_in;
			quiet_since = now;
		}
		/* Everyone is done: nobody needs this log any more.  A
		 * peer that missed our DONE may have left; after a quiet
		 * linger, so do we.  A process recovered at its finishing
		 * checkpoint needs nothing and is needed by nobody who left
		 * -- but a peer that acknowledged our DONE and has not
		 * finished is there and may still need us: its own recovery
		 * can forget our DONE, and only we can say it again. */
		if (all_rcvd && (all_acked || now - quiet_since >= linger))
			break;
		if (recovered && now - quiet_since >= linger) {
			bool needed = false;
			for (unsigned d = 0; d < s->n; d++)
				needed |= d != s->self &&
					s->peer[d].done_acked &&
					!s->peer[d].done_rcvd;
			if (!needed)
				break;
		}
		rc = sbml__pump(s, deadline);
		if (rc) {
			char st[256];
			size_t l = 0;
			for (unsigned d = 0; d < s->n && l < sizeof(st); d++)
				l += (size_t)snprintf(st + l, sizeof(st) - l,
					" %u:%s%s", d,
					s->peer[d].done_rcvd ? "R" : "-",
					s->peer[d].done_acked ? "A" : "-");
			return sbml__err(rc, "sbml_finish: process %u: not "
				"every peer finished in time (DONE received/"
				"acknowledged by peer:%s)", s->self, st);
		}
	}
	/* the last answers: acknowledgements still owed */
	for (unsigned d = 0; d < s->n; d++)
		if (s->peer[d].nacks && d != s->self) {
			struct sbml__wire w = { .type = SBML_PKT_CTRL };
			sbml__send_pkt(s, d, &w, NULL);
		}
	return 0;
}
