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
 * with an aborted send and an aborted receive in between; in odd cycles
 * client tx 2 also sends request i + 1 (a pipelined client), whose cycle
 * then has no tx 1.  Because the
 * three transactions follow each other, every crash state satisfies:
 *   - both endpoints open (the tables verify: checksums, states, op log);
 *   - done <= count <= done + 1, and count == done unless a request is
 *     pending;
 *   - rec[j] == j for every finished cycle j;
 *   - a pending request is outstanding in the client's table, and a
 *     finished cycle's request is not.
 * vg_pm_test.sh runs it under pmemtest, and the same program linked with
 * the no_payload_flush build, whose crash images must fail the check (a
 * committed request slot whose payload never reached memory).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <vistagrams.h>

#define CYCLES 4
#define SEG_SIZE (256u * 1024)

struct client_data {
	uint64_t done;     /* last finished cycle */
	uint64_t pending;  /* cycle waiting for its answer, 0 = none */
	uint64_t seq;      /* ... its request */
	uint64_t rec[CYCLES + 1];
};

struct server_data {
	uint64_t count; /* requests answered */
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

static int
open_node(vista *v, const char *dir, const char *name, uint64_t id,
	void *addr, unsigned flags, struct node *n)
{
	char path[4096];
	struct vg_endpoint_opts o = { 0 };
	size_t tables;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	o.node_id = id;
	o.flags = flags;
	o.max_requests = 4;
	o.max_responses = 8;
	o.max_clients = 2;
	o.max_message = 64;
	o.max_ops = 4;
	o.rx_buffers = 8;
	OK(vg_table_size(&o, &tables));
	tables = (tables + 4095) & ~(size_t)4095;
	/* VISTA_CREATE also at recovery, as a restarting program maps:
	 * it finishes a segment whose creation a crash cut short. */
	OK(vista_map(v, path, addr, SEG_SIZE, VISTA_CREATE, &n->seg));
	int rc = vg_endpoint_open(v, n->seg, &o, &n->ep);
	if (rc == VG_ENOTABLES)
		return 2; /* crashed before the tables were made */
	OK(rc);
	n->data = (char *)vista_segment_base(n->seg) + tables;
	return 0;
}

static int
open_all(const char *dir, unsigned flags, vista **v, struct node *c,
	struct node *s)
{
	char log[4096];
	struct vista_opts vo = { .log_path = log, .log_size = 1u << 20,
		.lanes = 2 };

	snprintf(log, sizeof(log), "%s/log", dir);
	OK(vista_init(&vo, v));
	int rc = open_node(*v, dir, "client", 1, (void *)0x5c4000000000ull,
		flags, c);
	if (rc == 0)
		rc = open_node(*v, dir, "server", 2, (void *)0x5c5000000000ull,
			flags, s);
	return rc;
}

static int
run(const char *dir)
{
	vista *v;
	struct node c, s;
	struct sockaddr_storage to;
	socklen_t tolen;
	char buf[64];
	size_t len;
	vg_reqid id;

	if (open_all(dir, VG_CREATE, &v, &c, &s))
		return 1;
	struct client_data *cd = c.data;
	struct server_data *sd = s.data;
	OK(vg_endpoint_address(s.ep, &to, &tolen));

	bool sent = false; /* request i went with the receive of i - 1 */
	for (uint64_t i = 1; i <= CYCLES; i++) {
		uint64_t seq;
		if (!sent) {
			/* An aborted send: nothing may come of it. */
			OK(vg_begin(v, 0));
			OK(vista_send_request(c.ep, (struct sockaddr *)&to,
				tolen, "x", 1, &seq));
			OK(vg_abort(v));

			OK(vg_begin(v, 0));
			OK(vista_set_range(v, cd, sizeof(*cd)));
			OK(vista_send_request(c.ep, (struct sockaddr *)&to,
				tolen, &i, sizeof(i), &cd->seq));
			cd->pending = i;
			OK(vg_commit(v));
		}

		OK(vg_begin(v, 0));
		OK(vista_receive_request(s.ep, &id, buf, sizeof(buf), &len,
			5000));
		OK(vista_set_range(v, sd, sizeof(*sd)));
		sd->count++;
		OK(vista_send_response(s.ep, &id, &sd->count,
			sizeof(sd->count)));
		OK(vg_commit(v));

		/* An aborted receive: the answer comes again. */
		seq = cd->seq;
		OK(vg_begin(v, 0));
		OK(vista_receive_response(c.ep, &seq, buf, sizeof(buf), &len,
			5000));
		OK(vg_abort(v));

		uint64_t val;
		seq = cd->seq;
		OK(vg_begin(v, 0));
		OK(vista_receive_response(c.ep, &seq, &val, sizeof(val), &len,
			5000));
		OK(vista_set_range(v, cd, sizeof(*cd)));
		cd->rec[i] = val;
		cd->done = i;
		cd->pending = 0;
		/* Odd cycles pipeline: the next request leaves in the
		 * transaction that receives this answer. */
		sent = i % 2 == 1 && i < CYCLES;
		if (sent) {
			uint64_t next = i + 1;
			OK(vista_send_request(c.ep, (struct sockaddr *)&to,
				tolen, &next, sizeof(next), &cd->seq));
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
	char buf[64];
	size_t len;

	/* The tables verify, the op logs replay.  A crash before both
	 * tables existed has nothing to check. */
	int rc = open_all(dir, 0, &v, &c, &s);
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
		if (cd->rec[j] != j)
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
	OK(vg_endpoint_close(c.ep));
	OK(vg_endpoint_close(s.ep));
	OK(vista_fini(v));
	return 0;
}

int
main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "run") == 0)
		return run(argv[2]);
	if (argc == 3 && strcmp(argv[1], "check") == 0)
		return check(argv[2]);
	fprintf(stderr, "usage: %s run|check DIR\n", argv[0]);
	return 2;
}
