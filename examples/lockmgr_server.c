/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lockmgr_server.c -- the lock server of thesis Figure 4.4
 *
 *   lockmgr_server DIR PORT      (PORT 0: any; the port is printed)
 *
 * One transaction per request: receive it, update the lock table, answer,
 * commit.  The server is "completely recoverable as is": after a crash it
 * is simply started again; requests whose transaction did not commit are
 * retransmitted by their clients, answered ones are answered again from
 * the response table, and none is executed twice.  SIGTERM prints the
 * table's counters and exits.
 *
 * Any client may send anything: a request that is not a well-formed
 * lm_msg (wrong length, unknown operation, lock out of range) gets an
 * LM_ERROR reply, is counted and logged, and the server goes on.  Only a
 * failure of the server's own state (Vista, the endpoint) ends it.
 */
#include <errno.h>
#include <signal.h>

#include "lockmgr.h"

struct server_data {
	uint64_t holder[LM_LOCKS]; /* client node, 0 = free */
	uint64_t grants;
	uint64_t releases;
};

static volatile sig_atomic_t stop;

static void
on_term(int sig)
{
	(void)sig;
	stop = 1;
}

int
main(int argc, char **argv)
{
	struct lm_node n;
	struct server_data *d;

	if (argc != 3) {
		fprintf(stderr, "usage: %s DIR PORT\n", argv[0]);
		return 2;
	}
	signal(SIGTERM, on_term);
	lm_open(&n, argv[1], 1, (uint16_t)atoi(argv[2]), sizeof(*d));
	d = n.data;
	struct sockaddr_storage self;
	socklen_t self_len;
	LM_CHECK(vg_endpoint_address(n.ep, &self, &self_len));
	printf("listening on port %u\n",
		ntohs(((struct sockaddr_in *)&self)->sin_port));
	fflush(stdout);

	uint64_t refused = 0;
	while (!stop) {
		struct lm_msg m, r;
		/* Room for the largest request the endpoint accepts
		 * (LM_MAX_MESSAGE), so no request is too big to take. */
		union {
			struct lm_msg m;
			unsigned char b[LM_MAX_MESSAGE];
		} in;
		size_t len;
		vg_reqid id;

		LM_CHECK(vg_begin(n.v, 0));
		int rc = vista_receive_request(n.ep, &id, &in, sizeof(in),
			&len, 100);
		if (rc == -ETIMEDOUT || rc == VG_EFULL || rc == -EMSGSIZE) {
			/* Nothing to take now (a full table keeps its requests
			 * for later); a too big one cannot happen with this
			 * buffer, and would be taken by no one: go on. */
			if (rc != -ETIMEDOUT)
				fprintf(stderr, "lockmgr_server: %s: %s\n",
					vg_err_name(rc), vg_errormsg());
			LM_CHECK(vg_abort(n.v));
			continue;
		}
		LM_CHECK(rc);
		if (len != sizeof(m) || (in.m.op != LM_ACQUIRE &&
		    in.m.op != LM_RELEASE) || in.m.lock >= LM_LOCKS) {
			/* A request this server does not understand: answer it
			 * (the client learns, the request is finished) and
			 * change nothing else. */
			r.op = LM_ERROR;
			r.lock = 0;
			refused++;
			fprintf(stderr, "lockmgr_server: refused request "
				"%llu:%llu (%zu bytes), %llu refused so far\n",
				(unsigned long long)id.node,
				(unsigned long long)id.seq, len,
				(unsigned long long)refused);
			LM_CHECK(vista_send_response(n.ep, &id, &r, sizeof(r)));
			LM_CHECK(vg_commit(n.v));
			continue;
		}
		m = in.m;
		r.lock = m.lock;
		LM_CHECK(vista_set_range(n.v, d, sizeof(*d)));
		uint64_t *h = &d->holder[r.lock];
		if (m.op == LM_ACQUIRE) {
			if (*h == 0) {
				*h = id.node;
				d->grants++;
			}
			r.op = *h == id.node ? LM_GRANTED : LM_BUSY;
		} else {
			if (*h == id.node) {
				*h = 0;
				d->releases++;
			}
			r.op = LM_RELEASED;
		}
		LM_CHECK(vista_send_response(n.ep, &id, &r, sizeof(r)));
		LM_CHECK(vg_commit(n.v));
	}
	printf("grants %llu releases %llu holder %llu refused %llu\n",
		(unsigned long long)d->grants, (unsigned long long)d->releases,
		(unsigned long long)d->holder[0], (unsigned long long)refused);
	lm_close(&n);
	return 0;
}
