/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vg_pm.c -- a Vistagrams workload for pmemtest (power failure at every
 * fence; suite crash-pm)
 *
 *   vg_pm run DIR     create DIR/log, DIR/client, DIR/server and run
 *   vg_pm check DIR   recover both endpoints and check the invariants
 *
 * One process, one Vista instance, a client and a server endpoint, each in
 * its own segment with its program data after the tables.  CYCLES cycles,
 * each (thesis Fig. 4.4):
 *   client tx 1: pending = (i, seq); send request i             (commit)
 *   server tx:   receive; count++; answer count                 (commit)
 *   client tx 2: receive the answer v; rec[i] = v; done = i      (commit)
 * (requests and answers are short, declared with their slots, or long,
 * written raw and drained before the commit point: request_len,
 * answer_len)
 * with an aborted send and an aborted receive in between; in odd cycles
 * client tx 2 also sends request i + 1 (a pipelined client), whose cycle
 * then has no tx 1.  The last cycle is answered while the client is
 * away (its endpoint closed, as by a crash), and a volatile endpoint (no
 * persistence: no fences) fills the server's response table: the server
 * reclaims the client's response after its horizon (1 ms here), and the
 * client, back, takes VG_EEXPIRED instead of the answer (rec[i] = 0).
 * `vg_pm run-reclaim DIR` runs that cycle alone (a shorter campaign for
 * the broken reclaim build).  Because the
 * three transactions follow each other, every crash state satisfies:
 *   - both endpoints open (the tables verify: checksums, states, op log);
 *   - done <= count <= done + 1, and count == done unless a request is
 *     pending;
 *   - rec[j] == j for every finished cycle j;
 *   - a pending request is outstanding in the client's table, and a
 *     finished cycle's request is not;
 *   - a pending request that the server executed is never executed again:
 *     the check runs both endpoints on loopback until the client's
 *     retransmission is answered (from the table, or "expired").
 * vg_pm_test.sh runs it under pmemtest, and the same program linked with
 * the no_payload_flush build, whose crash images must fail the check (a
 * committed request slot whose payload never reached memory), and with
 * the reclaim_no_drain build (a reclaimed entry gone while its client's
 * expired word is not durable: the request runs again).
 *
 * The server's port is kept in the client's data, so that the check can
 * bind it again; checks of different images serialize on a lock file of
 * that port, in $VG_PM_LOCK_DIR if set.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vistagrams.h>

#define CYCLES 5
#define MAX_RESPONSES 4
#define MAX_MESSAGE 512
/* Even requests are this long: over the 128 bytes a request may have to
 * be declared with its slot, so they go raw (drained before the commit
 * point); odd ones are 8 bytes, declared. */
#define LONG_REQUEST 320
/* Answer 3 (mod 4) is this long: longer than the window its 8-byte
 * request declares (one line), so it goes raw, drained before the commit
 * point; the other odd answers are 8 bytes, stored in the window; even
 * answers answer long requests, which declare no window: raw. */
#define LONG_ANSWER 96

static size_t
request_len(uint64_t i)
{
	return i % 2 ? 8 : LONG_REQUEST;
}

static size_t
answer_len(uint64_t count)
{
	return count % 4 == 3 ? LONG_ANSWER : 8;
}

/* Request i: i, then a pattern. */
static int
send_cycle(vg_endpoint *ep, const struct sockaddr *to, socklen_t tolen,
	uint64_t i, uint64_t *seq)
{
	uint64_t msg[LONG_REQUEST / 8];

	for (size_t k = 0; k < LONG_REQUEST / 8; k++)
		msg[k] = i * 1000 + k;
	msg[0] = i;
	return vista_send_request(ep, to, tolen, msg, request_len(i), seq);
}
#define SEG_SIZE (256u * 1024)

struct client_data {
	uint64_t done;     /* last finished cycle */
	uint64_t pending;  /* cycle waiting for its answer, 0 = none */
	uint64_t seq;      /* ... its request */
	uint64_t port;     /* the server's, for the check */
	uint64_t reclaim;  /* the cycle whose answer is reclaimed */
	uint64_t rec[CYCLES + 1];
};

struct server_data {
	uint64_t count; /* requests of the client (node 1) answered */
};

struct node {
	vista_segment *seg;
	vg_endpoint *ep;
	void *data;
};

#define FAIL(...)                                     \
	do {                                          \
		fprintf(stderr, __VA_ARGS__);         \
		fputc('\n', stderr);                  \
		return 1;                             \
	} while (0)
#define OK(call)                                                      \
	do {                                                          \
		int rc_ = (call);                                     \
		if (rc_)                                              \
			FAIL("%s: %s: %s", #call, vg_err_name(rc_),   \
				vg_errormsg());                       \
	} while (0)

static struct vg_endpoint_opts
node_opts(uint64_t id, unsigned flags, uint16_t port)
{
	struct vg_endpoint_opts o = { 0 };

	o.node_id = id;
	o.flags = flags;
	o.max_requests = 4;
	o.max_responses = MAX_RESPONSES;
	o.max_clients = 2;
	o.max_message = MAX_MESSAGE;
	o.max_ops = 4;
	o.rx_buffers = 2 * MAX_RESPONSES;
	o.horizon_ms = 1;
	o.port = port;
	return o;
}

static int
open_node(vista *v, const char *dir, const char *name, uint64_t id,
	void *addr, unsigned flags, uint16_t port, struct node *n)
{
	char path[4096];
	struct vg_endpoint_opts o = node_opts(id, flags, port);
	size_t tables;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	OK(vg_table_size(&o, &tables));
	tables = (tables + 4095) & ~(size_t)4095;
	/* VISTA_CREATE also at recovery, as a restarting program maps:
	 * it finishes a segment whose creation a crash cut short. */
	OK(vista_map(v, path, addr, SEG_SIZE, VISTA_CREATE, &n->seg));
	int rc = vg_endpoint_open(v, n->seg, &o, &n->ep);
	if (rc == VG_ENOTABLES)
		return 2; /* crashed before the tables were made */
	if (rc == -EADDRINUSE && port) {
		/* Someone else took the port meanwhile: the caller maps the
		 * segment again, so let it go (a second mapping in this
		 * process would find it locked: VISTA_EMAPPED). */
		OK(vista_unmap(n->seg));
		return 3;
	}
	OK(rc);
	n->data = (char *)vista_segment_base(n->seg) + tables;
	return 0;
}

static bool port_lost; /* the check's server could not bind its port */

/* With server_at_client_port, the server binds the port the client's
 * data names (the check), else any. */
static int
open_all(const char *dir, unsigned flags, vista **v, struct node *c,
	struct node *s, bool server_at_client_port)
{
	char log[4096];
	struct vista_opts vo = { .log_path = log, .log_size = 1u << 20,
		.lanes = 2 };

	snprintf(log, sizeof(log), "%s/log", dir);
	OK(vista_init(&vo, v));
	int rc = open_node(*v, dir, "client", 1, (void *)0x5c4000000000ull,
		flags, 0, c);
	if (rc)
		return rc;
	uint16_t port = 0;
	if (server_at_client_port) {
		port = (uint16_t)((struct client_data *)c->data)->port;
		if (port) {
			/* Checks of other images want the same port.  The
			 * lock lives in $VG_PM_LOCK_DIR (the test's own
			 * directory, removed with it), else /dev/shm. */
			const char *ld = getenv("VG_PM_LOCK_DIR");
			char lock[4200];
			snprintf(lock, sizeof(lock), "%s/vg_pm-%u.lock",
				ld && *ld ? ld : "/dev/shm", port);
			int fd = open(lock, O_RDWR | O_CREAT, 0666);
			if (fd < 0 || flock(fd, LOCK_EX) != 0)
				FAIL("lock %s: %s", lock, strerror(errno));
		}
	}
	rc = open_node(*v, dir, "server", 2, (void *)0x5c5000000000ull,
		flags, port, s);
	if (rc == 3) {
		/* The check cannot run the network then: any port. */
		port_lost = true;
		rc = open_node(*v, dir, "server", 2,
			(void *)0x5c5000000000ull, flags, 0, s);
	}
	return rc;
}

/* Serve one request; a request of the client counts.  0, -ETIMEDOUT, or
 * 1 (failed, said on stderr). */
static int
serve(vista *v, struct node *s, int timeout_ms)
{
	struct server_data *sd = s->data;
	char buf[MAX_MESSAGE];
	size_t len;
	vg_reqid id;

	OK(vg_begin(v, 0));
	int rc = vista_receive_request(s->ep, &id, buf, sizeof(buf), &len,
		timeout_ms);
	if (rc == -ETIMEDOUT) {
		OK(vg_abort(v));
		return rc;
	}
	OK(rc);
	uint64_t answer[LONG_ANSWER / 8] = { 0 };
	if (id.node == 1) {
		OK(vista_set_range(v, sd, sizeof(*sd)));
		answer[0] = ++sd->count;
	}
	for (size_t k = 1; k < LONG_ANSWER / 8; k++)
		answer[k] = answer[0] * 1000 + k;
	OK(vista_send_response(s->ep, &id, answer, answer_len(answer[0])));
	OK(vg_commit(v));
	return 0;
}

/* Fill the server's table from a volatile client, until the table is
 * full and the silent client's response is reclaimed to make room. */
static int
fill_and_reclaim(vista *v, struct node *s, const struct sockaddr *to,
	socklen_t tolen)
{
	struct vg_endpoint_opts o = { 0 };
	struct vg_stats st;
	vg_endpoint *ep;

	o.node_id = 3;
	o.max_requests = MAX_RESPONSES;
	o.max_message = MAX_MESSAGE;
	OK(vg_endpoint_open(NULL, NULL, &o, &ep));
	for (int i = 0; i < MAX_RESPONSES; i++)
		OK(vista_send_request(ep, to, tolen, "v", 1, NULL));
	/* The MAX_RESPONSES - 1 that fit in one transaction (few fences);
	 * the last is retransmitted until the reclaim (1 ms after the
	 * client went silent) lets it in.  Bounded. */
	int served = 0;
	OK(vg_begin(v, 0));
	for (int tries = 0; served < MAX_RESPONSES - 1 && tries < 500;
	     tries++) {
		char buf[MAX_MESSAGE];
		size_t len;
		vg_reqid id;
		int rc = vista_receive_request(s->ep, &id, buf, sizeof(buf),
			&len, 2);
		if (rc == -ETIMEDOUT)
			continue;
		OK(rc);
		OK(vista_send_response(s->ep, &id, "v", 1));
		served++;
	}
	OK(vg_commit(v));
	for (int tries = 0; served < MAX_RESPONSES && tries < 500; tries++) {
		int rc = serve(v, s, 2);
		if (rc == 0)
			served++;
		else if (rc != -ETIMEDOUT)
			return 1;
		vg_poll(ep, 1);
	}
	OK(vg_stats(s->ep, &st));
	if (served != MAX_RESPONSES || st.responses_expired == 0)
		FAIL("reclaim: %d served, %llu expired", served,
			(unsigned long long)st.responses_expired);
	vg_endpoint_close(ep);
	return 0;
}

/* Cycles 1..ncycles, the last one reclaimed. */
static int
run(const char *dir, uint64_t ncycles)
{
	vista *v;
	struct node c, s;
	struct sockaddr_storage to;
	socklen_t tolen;
	char buf[MAX_MESSAGE];
	size_t len;

	if (open_all(dir, VG_CREATE, &v, &c, &s, false))
		return 1;
	struct client_data *cd = c.data;
	OK(vg_endpoint_address(s.ep, &to, &tolen));
	OK(vg_begin(v, 0));
	OK(vista_set_range(v, &cd->port, 2 * sizeof(cd->port)));
	cd->port = ntohs(((struct sockaddr_in *)&to)->sin_port);
	cd->reclaim = ncycles;
	OK(vg_commit(v));

	bool sent = false; /* request i went with the receive of i - 1 */
	for (uint64_t i = 1; i <= ncycles; i++) {
		uint64_t seq;
		if (!sent) {
			/* An aborted send: nothing may come of it. */
			OK(vg_begin(v, 0));
			OK(vista_send_request(c.ep, (struct sockaddr *)&to,
				tolen, "x", 1, &seq));
			OK(vg_abort(v));

			OK(vg_begin(v, 0));
			OK(vista_set_range(v, cd, sizeof(*cd)));
			OK(send_cycle(c.ep, (struct sockaddr *)&to, tolen, i,
				&cd->seq));
			cd->pending = i;
			OK(vg_commit(v));
		}

		if (i == ncycles) {
			/* The client goes away (a crash) before its answer
			 * reaches it, and stays silent while the server needs
			 * the room: the answer is reclaimed. */
			OK(vg_endpoint_close(c.ep));
			if (serve(v, &s, 5000) != 0)
				FAIL("cycle %llu: no request",
					(unsigned long long)i);
			if (fill_and_reclaim(v, &s, (struct sockaddr *)&to,
				    tolen))
				return 1;
			struct vg_endpoint_opts o = node_opts(1, 0, 0);
			OK(vg_endpoint_open(v, c.seg, &o, &c.ep));
			uint64_t val = 1;
			int rc = -ETIMEDOUT;
			seq = cd->seq;
			OK(vg_begin(v, 0));
			for (int t = 0; t < 500 && rc == -ETIMEDOUT; t++) {
				rc = vista_receive_response(c.ep, &seq, &val,
					sizeof(val), &len, 2);
				vg_poll(s.ep, 1);
			}
			if (rc != VG_EEXPIRED)
				FAIL("cycle %llu: %s, not VG_EEXPIRED",
					(unsigned long long)i, vg_err_name(rc));
			OK(vista_set_range(v, cd, sizeof(*cd)));
			cd->rec[i] = 0;
			cd->done = i;
			cd->pending = 0;
			OK(vg_commit(v));
			continue;
		}
		if (serve(v, &s, 5000) != 0)
			FAIL("cycle %llu: no request", (unsigned long long)i);

		/* An aborted receive: the answer comes again. */
		seq = cd->seq;
		OK(vg_begin(v, 0));
		OK(vista_receive_response(c.ep, &seq, buf, sizeof(buf), &len,
			5000));
		OK(vg_abort(v));

		uint64_t val;
		seq = cd->seq;
		OK(vg_begin(v, 0));
		uint64_t ans[MAX_MESSAGE / 8];
		OK(vista_receive_response(c.ep, &seq, ans, sizeof(ans), &len,
			5000));
		val = ans[0];
		if (len != answer_len(val) ||
		    (len > 8 && ans[len / 8 - 1] != val * 1000 + len / 8 - 1))
			FAIL("cycle %llu: answer of %zu bytes is damaged",
				(unsigned long long)i, len);
		OK(vista_set_range(v, cd, sizeof(*cd)));
		cd->rec[i] = val;
		cd->done = i;
		cd->pending = 0;
		/* Odd cycles pipeline: the next request leaves in the
		 * transaction that receives this answer. */
		sent = i % 2 == 1 && i + 1 < ncycles;
		if (sent) {
			uint64_t next = i + 1;
			OK(send_cycle(c.ep, (struct sockaddr *)&to, tolen,
				next, &cd->seq));
			cd->pending = next;
		}
		OK(vg_commit(v));
	}
	OK(vg_endpoint_close(c.ep));
	OK(vg_endpoint_close(s.ep));
	OK(vista_fini(v));
	return 0;
}

static int
check(const char *dir)
{
	vista *v;
	struct node c, s;
	char buf[MAX_MESSAGE];
	size_t len;

	/* The tables verify, the op logs replay.  A crash before both
	 * tables existed has nothing to check. */
	int rc = open_all(dir, 0, &v, &c, &s, true);
	if (rc)
		return rc == 2 ? 0 : 1;
	const struct client_data *cd = c.data;
	const struct server_data *sd = s.data;
	if (cd->done > CYCLES || cd->pending > CYCLES)
		FAIL("client data out of range");
	if (sd->count < cd->done || sd->count > cd->done + 1 ||
	    (!cd->pending && sd->count != cd->done))
		FAIL("server answered %llu, client finished %llu, pending %llu",
			(unsigned long long)sd->count,
			(unsigned long long)cd->done,
			(unsigned long long)cd->pending);
	for (uint64_t j = 1; j <= cd->done; j++)
		if (cd->rec[j] != (j == cd->reclaim ? 0 : j))
			FAIL("cycle %llu got answer %llu",
				(unsigned long long)j,
				(unsigned long long)cd->rec[j]);
	if (cd->pending || cd->done) {
		uint64_t seq = cd->seq;
		rc = vista_receive_response(c.ep, &seq, buf, sizeof(buf), &len,
			0);
		/* -ETIMEDOUT: outstanding (no answer here); ENOREQ: gone. */
		if (cd->pending && rc != -ETIMEDOUT)
			FAIL("pending request %llu is not outstanding: %s",
				(unsigned long long)cd->seq, vg_err_name(rc));
		if (!cd->pending && rc != VG_ENOREQ)
			FAIL("finished request %llu is still outstanding: %s",
				(unsigned long long)cd->seq, vg_err_name(rc));
	}
	/* Exactly once: the pending request, if the server executed it, is
	 * answered from the table or as expired, never delivered again.
	 * The client retransmits it at once (recovery); bounded wait. */
	if (cd->pending && cd->port && !port_lost) {
		vg_reqid id;
		rc = -ETIMEDOUT;
		for (int t = 0; t < 100 && rc == -ETIMEDOUT; t++) {
			OK(vg_begin(v, 0));
			int r = vista_receive_request(s.ep, &id, buf,
				sizeof(buf), &len, 2);
			OK(vg_abort(v));
			if (r == 0 && id.node == 1 && id.seq == cd->seq &&
			    sd->count == cd->done + 1)
				FAIL("request %llu (cycle %llu) was executed "
					"and is delivered again",
					(unsigned long long)cd->seq,
					(unsigned long long)cd->pending);
			if (r == 0)
				break; /* not executed yet: delivered, fine */
			uint64_t seq = cd->seq;
			OK(vg_begin(v, 0));
			rc = vista_receive_response(c.ep, &seq, buf,
				sizeof(buf), &len, 2);
			OK(vg_abort(v));
			if (rc == VG_EEXPIRED)
				rc = 0;
		}
	}
	OK(vg_endpoint_close(c.ep));
	OK(vg_endpoint_close(s.ep));
	OK(vista_fini(v));
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "run") == 0)
		return run(argv[2], CYCLES);
	if (argc == 3 && strcmp(argv[1], "run-reclaim") == 0)
		return run(argv[2], 1); /* the reclaimed cycle alone */
	if (argc == 3 && strcmp(argv[1], "check") == 0)
		return check(argv[2]);
	fprintf(stderr, "usage: %s run|run-reclaim|check DIR\n", argv[0]);
	return 2;
}
