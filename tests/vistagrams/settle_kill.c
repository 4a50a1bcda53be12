/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * settle_kill.c -- an acknowledged answer forgotten, then SIGKILL: the
 * transaction that answered stays committed (S9 in libvistagrams'
 * server.c, L8 in libvista's log.c)
 *
 *   settle_kill [DIR]
 *
 * A client and a server endpoint, each with its own Vista instance in the
 * cacheline domain (files in DIR, default a new directory in /dev/shm,
 * removed afterwards), for each lane count in {1, 2}:
 *   server tx:  receive request 1; count++; answer it       (commit)
 *   client:     receive the answer; send request 2, which carries the
 *               acknowledgement of 1
 *   server:     poll until it forgets the response of 1 -- a raw store
 *               into the slot its transaction declared -- and then the
 *               process is killed (SIGKILL), before the server's next
 *               transaction.
 * Recovery must keep the committed transaction: count == 1.  Vista's
 * lazy commit keeps the transaction judged by the bytes it declared until
 * its generation is ended on media; the build that stores over them
 * without vista_settle (no_settle) leaves them changed beside a live
 * commit record, and recovery rolls the answered transaction back
 * (count 0) -- with one lane even on a kill, since nothing ends the
 * generation but the next transaction's first record.  Built with
 * -DVG_BROKEN_NO_SETTLE (and linked with that build) it succeeds only if
 * the rollback is seen with one lane.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vistagrams.h>

#define OK(c) \
	do { \
		int r_ = (c); \
		if (r_) { \
			fprintf(stderr, "%s:%d: %s: %s %s\n", __FILE__, \
				__LINE__, #c, vg_err_name(r_), vg_errormsg()); \
			exit(2); \
		} \
	} while (0)

struct node {
	vista *v;
	vista_segment *seg;
	vg_endpoint *ep;
};

static size_t
tables(void)
{
	struct vg_endpoint_opts o = { .node_id = 1, .max_requests = 4,
		.max_responses = 4, .max_clients = 2, .max_message = 64 };
	size_t t;

	OK(vg_table_size(&o, &t));
	return (t + 4095) & ~(size_t)4095;
}

static const char *const files[] = { "client", "client.log", "server",
	"server.log" };

static void
node_open(struct node *n, const char *dir, const char *name,
	uint64_t node_id, unsigned lanes, unsigned flags)
{
	/* Fixed addresses: a segment maps where it was created. */
	void *addr = (void *)(node_id == 1 ? 0x5c4000000000ull
					   : 0x5c5000000000ull);
	char log[512], seg[512];
	struct vista_opts vo = { .log_path = log, .log_size = 1u << 20,
		.lanes = lanes, .rio_flags = RIO_FORCE_CACHELINE };
	struct vg_endpoint_opts o = { .node_id = node_id, .flags = flags,
		.max_requests = 4, .max_responses = 4, .max_clients = 2,
		.max_message = 64, .ack_delay_us = 100 };

	snprintf(log, sizeof(log), "%s/%s.log", dir, name);
	snprintf(seg, sizeof(seg), "%s/%s", dir, name);
	OK(vista_init(&vo, &n->v));
	OK(vista_map(n->v, seg, addr, tables() + 4096,
		(flags & VG_CREATE) ? VISTA_CREATE : 0, &n->seg));
	OK(vg_endpoint_open(n->v, n->seg, &o, &n->ep));
}

/* The server's program data: one counter after its tables. */
static uint64_t *
count_of(struct node *s)
{
	return (uint64_t *)((char *)vista_segment_base(s->seg) + tables());
}

static void
run(const char *dir, unsigned lanes)
{
	struct node c, s;
	struct sockaddr_storage to;
	socklen_t tolen;
	uint64_t seq, v;
	size_t len;
	vg_reqid id;
	char buf[64];
	struct vg_stats st;

	node_open(&c, dir, "client", 1, lanes, VG_CREATE);
	node_open(&s, dir, "server", 2, lanes, VG_CREATE);
	OK(vg_endpoint_address(s.ep, &to, &tolen));
	OK(vista_send_request(c.ep, (struct sockaddr *)&to, tolen, "q", 1,
		&seq));
	OK(vg_begin(s.v, 0));
	OK(vista_receive_request(s.ep, &id, buf, sizeof(buf), &len, 5000));
	OK(vista_set_range(s.v, count_of(&s), 8));
	++*count_of(&s);
	OK(vista_send_response(s.ep, &id, "a", 1));
	OK(vg_commit(s.v));
	OK(vista_receive_response(c.ep, &seq, &v, sizeof(v), &len, 5000));
	/* Request 2 carries the acknowledgement of 1. */
	OK(vista_send_request(c.ep, (struct sockaddr *)&to, tolen, "q", 1,
		&seq));
	for (int k = 0; k < 2000; k++) {
		OK(vg_poll(s.ep, 1));
		OK(vg_stats(s.ep, &st));
		if (st.responses_freed)
			break;
	}
	if (st.responses_freed == 0) {
		fprintf(stderr, "lanes %u: the server never forgot the "
			"acknowledged response\n", lanes);
		exit(2);
	}
	/* Killed: nothing closed, every store where the program left it. */
	kill(getpid(), SIGKILL);
}

int
main(int argc, char **argv)
{
	char tmp[] = "/dev/shm/vg-settle-XXXXXX";
	const char *top = argc > 1 ? argv[1] : mkdtemp(tmp);
	int bad = 0, lost1 = 0;

	if (top == NULL || argc > 2) {
		fprintf(stderr, argc > 2 ? "usage: settle_kill [DIR]\n"
					 : "mkdtemp /dev/shm: failed\n");
		return 2;
	}
	for (unsigned lanes = 1; lanes <= 2; lanes++) {
		char dir[512];
		int status;
		pid_t pid;

		snprintf(dir, sizeof(dir), "%s/lanes%u", top, lanes);
		if (mkdir(dir, 0700) != 0) {
			perror(dir);
			return 2;
		}
		pid = fork();
		if (pid < 0) {
			perror("fork");
			return 2;
		}
		if (pid == 0)
			run(dir, lanes);
		if (waitpid(pid, &status, 0) != pid || !WIFSIGNALED(status) ||
		    WTERMSIG(status) != SIGKILL) {
			fprintf(stderr, "lanes %u: the workload failed before "
				"the kill\n", lanes);
			return 2;
		}
		struct node s;
		node_open(&s, dir, "server", 2, lanes, 0);
		uint64_t n = *count_of(&s);
		printf("lanes %u: count after recovery %llu (1: the answered "
			"transaction kept)\n", lanes, (unsigned long long)n);
		bad |= n != 1;
		lost1 |= lanes == 1 && n == 0;
		if (argc == 1) {
			OK(vg_endpoint_close(s.ep));
			OK(vista_fini(s.v));
			for (size_t i = 0; i < sizeof(files) / sizeof(*files);
			     i++) {
				char f[600];
				snprintf(f, sizeof(f), "%s/%s", dir, files[i]);
				unlink(f);
			}
			rmdir(dir);
		}
	}
	if (argc == 1)
		rmdir(top);
#ifdef VG_BROKEN_NO_SETTLE
	/* Linked with the no_settle build: the test must catch it. */
	printf(lost1 ? "no_settle build caught: the answered transaction "
		       "was rolled back\n"
		     : "no_settle build NOT caught\n");
	return !lost1;
#else
	(void)lost1;
	return bad;
#endif
}
