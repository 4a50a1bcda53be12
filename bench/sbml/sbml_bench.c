/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sbml_bench.c -- the paper's Table 1 on loopback: communication
 * operations with and without sender-based message logging
 *
 *   sbml-bench [-n ITERATIONS] [-q]
 *
 * Two processes (this one and a forked server), one sbml group of two on
 * 127.0.0.1.  Each row runs once with logging (send log, RSNs and their
 * acknowledgements, the send rule) and once with opts.no_logging (the
 * same transport: the message is kept until delivered, the receiver's
 * acknowledgement rides on the reply), and prints the mean time per
 * operation in microseconds, the overhead, and the packets per operation.
 *   send-receive-reply      0-byte request, 0-byte reply (sbml_call)
 *   send(1K)-receive-reply  1 KB request, 0-byte reply
 *   datagram send           0-byte one-way messages (sbml_send) in
 *                           bursts of 32, each burst then waited for
 *                           until fully logged (sbml_flush): the time
 *                           per message
 *   moveto(64K)             64 messages of 1 KB, then a 0-byte reply
 * -q: a smoke run (few iterations).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sbml.h"

enum { OP_REPLY = 'R', OP_ONEWAY = 'D', OP_QUIT = 'Q' };

static double
now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static void
check(int rc, const char *what)
{
	if (rc) {
		fprintf(stderr, "sbml-bench: %s: %s: %s\n", what,
			sbml_err_name(rc), sbml_errormsg());
		exit(1);
	}
}

static void
free_ports(char a[2][32])
{
	int fds[2];
	for (int i = 0; i < 2; i++) {
		struct sockaddr_in s = { .sin_family = AF_INET };
		socklen_t l = sizeof(s);
		s.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		fds[i] = socket(AF_INET, SOCK_DGRAM, 0);
		if (fds[i] < 0 || bind(fds[i], (void *)&s, sizeof(s)) ||
		    getsockname(fds[i], (void *)&s, &l)) {
			perror("port");
			exit(1);
		}
		snprintf(a[i], 32, "127.0.0.1:%u", ntohs(s.sin_port));
	}
	close(fds[0]);
	close(fds[1]);
}

static sbml *
open_one(char a[2][32], unsigned self, bool logging)
{
	const char *addrs[2] = { a[0], a[1] };
	struct sbml_opts o = {
		.nprocs = 2,
		.self = self,
		.addrs = addrs,
		.max_message = 2048,
		.no_logging = !logging,
		.timeout_ms = 20000,
		.linger_ms = 100,
	};
	sbml *s;
	check(sbml_open(&o, &s), "open");
	return s;
}

static void
report(const char *who, const sbml *s)
{
	struct sbml_stats st;
	sbml_stats(s, &st);
	fprintf(stderr, "%s: sent %llu immediate %llu piggybacked %llu "
		"waited %llu; packets out %llu ctrl %llu retransmits %llu "
		"duplicates %llu; log max %llu entries\n", who,
		(unsigned long long)st.sent,
		(unsigned long long)st.sends_immediate,
		(unsigned long long)st.sends_piggybacked,
		(unsigned long long)st.sends_waited,
		(unsigned long long)st.packets_out,
		(unsigned long long)st.ctrl_packets,
		(unsigned long long)st.retransmits,
		(unsigned long long)st.duplicates,
		(unsigned long long)st.log_entries_max);
}

static void
serve(char a[2][32], bool logging)
{
	sbml *s = open_one(a, 1, logging);
	char buf[2048];
	for (;;) {
		size_t len;
		check(sbml_recv(s, 0, buf, sizeof(buf), &len, NULL, -1),
			"server recv");
		if (buf[0] == OP_QUIT)
			break;
		if (buf[0] == OP_REPLY)
			check(sbml_send(s, 0, "", 0), "server reply");
	}
	check(sbml_finish(s), "server finish");
	if (getenv("SBML_BENCH_VERBOSE"))
		report("server", s);
	sbml_close(s);
	_exit(0);
}

struct row {
	const char *name;
	double us[2];       /* [0] without, [1] with logging */
	double packets[2];  /* per operation, both directions */
};

static void
run(struct row *rows, unsigned iters, bool logging)
{
	char a[2][32];
	free_ports(a);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0)
		serve(a, logging);
	sbml *s = open_one(a, 0, logging);
	char req[1024] = { OP_REPLY }, rep[16];
	size_t len;
	struct sbml_stats st0, st1;
	int k = logging ? 1 : 0;

	/* warm up (the server may start late) */
	for (unsigned i = 0; i < 50; i++)
		check(sbml_call(s, 1, req, 1, rep, sizeof(rep), &len), "warm");

	size_t sizes[2] = { 1, 1024 };
	for (int r = 0; r < 2; r++) {
		sbml_stats(s, &st0);
		double t = now_us();
		for (unsigned i = 0; i < iters; i++)
			check(sbml_call(s, 1, req, sizes[r], rep, sizeof(rep),
				&len), "call");
		rows[r].us[k] = (now_us() - t) / iters;
		sbml_stats(s, &st1);
		rows[r].packets[k] = 2.0 *
			(double)(st1.packets_out - st0.packets_out) / iters;
	}
	/* datagrams */
	req[0] = OP_ONEWAY;
	sbml_stats(s, &st0);
	double t = now_us();
	for (unsigned i = 0; i < iters; i++) {
		check(sbml_send(s, 1, req, 1), "datagram");
		if (i % 32 == 31)
			check(sbml_flush(s, -1), "flush");
	}
	check(sbml_flush(s, -1), "flush");
	rows[2].us[k] = (now_us() - t) / iters;
	sbml_stats(s, &st1);
	rows[2].packets[k] = (double)(st1.packets_out - st0.packets_out +
		st1.packets_in - st0.packets_in) / iters;
	/* 64 KB: 64 messages of 1 KB and a reply */
	unsigned bulk = iters / 16 ? iters / 16 : 1;
	sbml_stats(s, &st0);
	t = now_us();
	for (unsigned i = 0; i < bulk; i++) {
		for (unsigned m = 0; m < 63; m++)
			check(sbml_send(s, 1, req, 1024), "bulk");
		req[0] = OP_REPLY;
		check(sbml_call(s, 1, req, 1024, rep, sizeof(rep), &len),
			"bulk end");
		req[0] = OP_ONEWAY;
	}
	rows[3].us[k] = (now_us() - t) / bulk;
	sbml_stats(s, &st1);
	rows[3].packets[k] = (double)(st1.packets_out - st0.packets_out +
		st1.packets_in - st0.packets_in) / bulk;

	req[0] = OP_QUIT;
	check(sbml_send(s, 1, req, 1), "quit");
	check(sbml_finish(s), "finish");
	if (getenv("SBML_BENCH_VERBOSE"))
		report("client", s);
	sbml_close(s);
	int status;
	waitpid(pid, &status, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		fprintf(stderr, "sbml-bench: the server failed\n");
		exit(1);
	}
}

int
main(int argc, char **argv)
{
	unsigned iters = 5000;
	int c;
	while ((c = getopt(argc, argv, "n:q")) != -1) {
		if (c == 'n')
			iters = (unsigned)atoi(optarg);
		else if (c == 'q')
			iters = 64;
		else {
			fprintf(stderr, "usage: %s [-n ITERATIONS] [-q]\n",
				argv[0]);
			return 2;
		}
	}
	struct row rows[4] = { { "send-receive-reply", { 0 }, { 0 } },
		{ "send(1K)-receive-reply", { 0 }, { 0 } },
		{ "datagram send", { 0 }, { 0 } },
		{ "moveto(64K)", { 0 }, { 0 } } };
	run(rows, iters, false);
	run(rows, iters, true);
	printf("sbml-bench: loopback, %u iterations, microseconds per "
		"operation\n", iters);
	printf("%-24s %10s %10s %9s %8s %10s %10s\n", "operation", "with",
		"without", "overhead", "percent", "pkts with", "without");
	for (int r = 0; r < 4; r++)
		printf("%-24s %10.1f %10.1f %9.1f %7.0f%% %10.2f %10.2f\n",
			rows[r].name, rows[r].us[1], rows[r].us[0],
			rows[r].us[1] - rows[r].us[0],
			100.0 * (rows[r].us[1] - rows[r].us[0]) / rows[r].us[0],
			rows[r].packets[1], rows[r].packets[0]);
	return 0;
}
