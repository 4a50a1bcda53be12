/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lockmgr_client.c -- the lock client of thesis Figure 4.4
 *
 *   lockmgr_client DIR NODE SERVER_PORT TIMES HOLDER_FILE
 *
 * Acquires lock 0 TIMES times.  A request is sent at commit, so acquiring
 * takes two transactions (thesis 4.3):
 *
 *   FREE      --tx: status = PENDING; send ACQUIRE-->          PENDING
 *   PENDING   --tx: receive the reply; GRANTED: status = LOCKED,
 *                   BUSY: status = FREE (try again)-->         LOCKED
 *   LOCKED    (the visible event: HOLDER_FILE names this node while it
 *              holds the lock; another name there means two holders)
 *             --tx: status = RELEASING; send RELEASE-->        RELEASING
 *   RELEASING --tx: receive the reply; status = FREE; count-->  FREE
 *
 * Recovery is just starting again: the status is persistent, and a client
 * that crashed in PENDING or RELEASING redoes the receive (the request was
 * committed, so its response will come, exactly once) -- unless it stayed
 * away past the server's horizon while the server needed the room: then
 * the receive says VG_EEXPIRED, the request may or may not have taken
 * effect, and the client gives the lock up to be sure (RELEASE is
 * idempotent: the server frees the lock only if this node holds it),
 * without counting an acquisition for an ACQUIRE whose outcome it never
 * learnt.
 */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "lockmgr.h"

enum status { FREE = 0, PENDING = 1, LOCKED = 2, RELEASING = 3 };

struct client_data {
	uint32_t status;   /* enum status */
	uint32_t uncounted; /* RELEASING after an expired ACQUIRE */
	uint64_t seq;      /* the request waiting for its reply */
	uint64_t acquired; /* times the lock was held and given back */
};

/* Send `op` in a transaction that also moves to `next`. */
static void
request(struct lm_node *n, struct client_data *d,
	const struct sockaddr_in *to, uint32_t op, enum status next)
{
	struct lm_msg m = { op, 0 };
	uint64_t seq;

	LM_CHECK(vg_begin(n->v, 0));
	LM_CHECK(vista_set_range(n->v, d, sizeof(*d)));
	LM_CHECK(vista_send_request(n->ep, (const struct sockaddr *)to,
		sizeof(*to), &m, sizeof(m), &seq));
	d->status = next;
	d->seq = seq;
	LM_CHECK(vg_commit(n->v));
}

/* The visible event: claim HOLDER_FILE, which must be free or ours.  The
 * file is written under another name and linked into place, so it is
 * never seen empty. */
static void
announce(const char *path, uint64_t node)
{
	char buf[32], tmp[4096];
	int len = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)node);

	snprintf(tmp, sizeof(tmp), "%s.%llu", path, (unsigned long long)node);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, buf, (size_t)len) != len || close(fd) != 0)
		exit(1);
	int rc = link(tmp, path);
	unlink(tmp);
	if (rc == 0)
		return;
	fd = open(path, O_RDONLY);
	ssize_t got = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	/* Ours: we crashed while holding the lock, and still hold it. */
	if (got > 0 && (buf[got] = 0, strtoull(buf, NULL, 10) == node))
		return;
	printf("VIOLATION: node %llu holds the lock, %s says %s\n",
		(unsigned long long)node, path, got > 0 ? buf : "?");
	exit(3);
}

int
main(int argc, char **argv)
{
	struct lm_node n;
	struct client_data *d;
	struct sockaddr_in to = { 0 };

	if (argc != 6) {
		fprintf(stderr, "usage: %s DIR NODE SERVER_PORT TIMES "
			"HOLDER_FILE\n", argv[0]);
		return 2;
	}
	uint64_t node = strtoull(argv[2], NULL, 10);
	uint64_t times = strtoull(argv[4], NULL, 10);
	to.sin_family = AF_INET;
	to.sin_port = htons((uint16_t)atoi(argv[3]));
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	lm_open(&n, argv[1], node, 0, sizeof(*d));
	d = n.data;

	while (d->acquired < times || d->status != FREE) {
		struct lm_msg r;
		size_t len;
		uint64_t seq = d->seq;

		switch (d->status) {
		case FREE:
			request(&n, d, &to, LM_ACQUIRE, PENDING);
			break;
		case PENDING:
		case RELEASING:
			LM_CHECK(vg_begin(n.v, 0));
			int rc = vista_receive_response(n.ep, &seq, &r,
				sizeof(r), &len, -1);
			if (rc == VG_EEXPIRED) {
				/* Outcome unknown: release, in the transaction
				 * that takes the expired request. */
				struct lm_msg m = { LM_RELEASE, 0 };
				fprintf(stderr, "lockmgr_client: %s\n",
					vg_errormsg());
				LM_CHECK(vista_set_range(n.v, d, sizeof(*d)));
				if (d->status == PENDING)
					d->uncounted = 1;
				LM_CHECK(vista_send_request(n.ep,
					(const struct sockaddr *)&to,
					sizeof(to), &m, sizeof(m), &d->seq));
				d->status = RELEASING;
				LM_CHECK(vg_commit(n.v));
				break;
			}
			LM_CHECK(rc);
			LM_CHECK(vista_set_range(n.v, d, sizeof(*d)));
			if (d->status == RELEASING) {
				d->status = FREE;
				d->acquired += d->uncounted ? 0 : 1;
				d->uncounted = 0;
			} else {
				d->status = r.op == LM_GRANTED ? LOCKED : FREE;
			}
			LM_CHECK(vg_commit(n.v));
			if (d->status == FREE && r.op == LM_BUSY)
				usleep(500);
			break;
		case LOCKED:
			announce(argv[5], node);
			usleep(200); /* the critical section */
			/* Give the lock up before asking the server to: a
			 * crash in between re-announces (we still hold it). */
			if (unlink(argv[5]) != 0 && errno != ENOENT)
				exit(1);
			request(&n, d, &to, LM_RELEASE, RELEASING);
			break;
		}
	}
	printf("node %llu acquired the lock %llu times\n",
		(unsigned long long)node, (unsigned long long)d->acquired);
	lm_close(&n);
	return 0;
}
