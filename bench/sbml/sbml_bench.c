/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * sbml_bench.c -- the paper's Table 1: communication operations with and
 * without sender-based message logging
 *
 *   sbml-bench [-n ITERATIONS] [-r REPS] [-q]
 *              [-A ADDR0,ADDR1 [-N NETNS] [-L LABEL]]
 *
 * Two processes (this one and a forked server), one sbml group of two,
 * on 127.0.0.1 (free ports), or on the addresses of -A; with -N the
 * server enters the network namespace NETNS (/run/netns/NETNS) first
 * (bench/sbml/veth_bench.sh: a veth pair between two namespaces).  Each
 * row runs once with logging (send log, RSNs and their
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
 *   moveto(1K), (64K)       1 or 64 messages of 1 KB to the server, the
 *                           last one a request, then its 0-byte reply
 *                           (moveto(1K) is the exchange of
 *                           send(1K)-receive-reply: sbml has no separate
 *                           data segment)
 *   movefrom(1K), (64K)     a 0-byte request, answered by 1 or 64
 *                           messages of 1 KB from the server
 * Without and with logging alternate REPS times (default 3); each row
 * reports the best time of the repetitions (packets: the last's).
 * -q: a smoke run (few iterations, one repetition).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sbml.h"

enum { OP_REPLY = 'R', OP_ONEWAY = 'D', OP_FROM = 'F', OP_QUIT = 'Q' };

static const char *fixed_addrs, *netns;

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
	if (fixed_addrs) {
		const char *comma = strchr(fixed_addrs, ',');
		if (!comma || comma - fixed_addrs >= 32 ||
		    strlen(comma + 1) >= 32) {
			fprintf(stderr, "sbml-bench: -A ADDR0,ADDR1\n");
			exit(2);
		}
		snprintf(a[0], 32, "%.*s", (int)(comma - fixed_addrs),
			fixed_addrs);
		snprintf(a[1], 32, "%s", comma + 1);
		return;
	}
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
	if (netns) {
		char path[300];
		snprintf(path, sizeof(path), "/run/netns/%s", netns);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0 || setns(fd, CLONE_NEWNET)) {
			perror(path);
			_exit(1);
		}
		close(fd);
	}
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
		if (buf[0] == OP_FROM)
			for (int m = 0; m < (unsigned char)buf[1]; m++)
				check(sbml_send(s, 0, buf, 1024), "server data");
	}
	check(sbml_finish(s), "server finish");
	if (getenv("SBML_BENCH_VERBOSE"))
		report("server", s);
	sbml_close(s);
	_exit(0);
}

/* the best of the repetitions: the load of a shared machine only adds */
static void
keep(double *slot, double v)
{
	if (*slot == 0 || v < *slot)
		*slot = v;
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
		keep(&rows[r].us[k], (now_us() - t) / iters);
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
	keep(&rows[2].us[k], (now_us() - t) / iters);
	sbml_stats(s, &st1);
	rows[2].packets[k] = (double)(st1.packets_out - st0.packets_out +
		st1.packets_in - st0.packets_in) / iters;
	/* moveto: 1 or 64 messages of 1 KB, the last a request, a reply */
	for (int r = 3; r < 5; r++) {
		unsigned kb = r == 3 ? 1 : 64;
		unsigned reps = kb == 1 ? iters : (iters / 16 ? iters / 16 : 1);
		sbml_stats(s, &st0);
		t = now_us();
		for (unsigned i = 0; i < reps; i++) {
			req[0] = OP_ONEWAY;
			for (unsigned m = 0; m + 1 < kb; m++)
				check(sbml_send(s, 1, req, 1024), "moveto");
			req[0] = OP_REPLY;
			check(sbml_call(s, 1, req, 1024, rep, sizeof(rep),
				&len), "moveto end");
		}
		keep(&rows[r].us[k], (now_us() - t) / reps);
		sbml_stats(s, &st1);
		rows[r].packets[k] = (double)(st1.packets_out -
			st0.packets_out + st1.packets_in - st0.packets_in) /
			reps;
	}
	/* movefrom: a 0-byte request, 1 or 64 messages of 1 KB back */
	for (int r = 5; r < 7; r++) {
		unsigned kb = r == 5 ? 1 : 64;
		unsigned reps = kb == 1 ? iters : (iters / 16 ? iters / 16 : 1);
		static char data[2048];
		sbml_stats(s, &st0);
		t = now_us();
		for (unsigned i = 0; i < reps; i++) {
			req[0] = OP_FROM;
			req[1] = (char)kb;
			check(sbml_send(s, 1, req, 2), "movefrom");
			for (unsigned m = 0; m < kb; m++)
				check(sbml_recv(s, 1, data, sizeof(data), &len,
					NULL, -1), "movefrom data");
		}
		keep(&rows[r].us[k], (now_us() - t) / reps);
		sbml_stats(s, &st1);
		rows[r].packets[k] = (double)(st1.packets_out -
			st0.packets_out + st1.packets_in - st0.packets_in) /
			reps;
	}

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
	unsigned iters = 5000, reps = 3;
	const char *label = "loopback";
	int c;
	while ((c = getopt(argc, argv, "n:r:qA:N:L:")) != -1) {
		if (c == 'n')
			iters = (unsigned)atoi(optarg);
		else if (c == 'r')
			reps = (unsigned)atoi(optarg);
		else if (c == 'q')
			iters = 64, reps = 1;
		else if (c == 'A')
			fixed_addrs = optarg;
		else if (c == 'N')
			netns = optarg;
		else if (c == 'L')
			label = optarg;
		else {
			fprintf(stderr, "usage: %s [-n ITERATIONS] [-q] "
				"[-r REPS] [-A ADDR0,ADDR1 [-N NETNS] [-L LABEL]]\n",
				argv[0]);
			return 2;
		}
	}
	if (iters == 0 || reps == 0 || (netns && !fixed_addrs)) {
		fprintf(stderr, "sbml-bench: -n 0, -r 0, or -N without -A\n");
		return 2;
	}
	struct row rows[7] = { { "send-receive-reply", { 0 }, { 0 } },
		{ "send(1K)-receive-reply", { 0 }, { 0 } },
		{ "datagram send", { 0 }, { 0 } },
		{ "moveto(1K)", { 0 }, { 0 } },
		{ "moveto(64K)", { 0 }, { 0 } },
		{ "movefrom(1K)", { 0 }, { 0 } },
		{ "movefrom(64K)", { 0 }, { 0 } } };
	for (unsigned r = 0; r < reps; r++) {
		run(rows, iters, false);
		run(rows, iters, true);
	}
	printf("sbml-bench: %s, %u iterations, best of %u, microseconds "
		"per operation\n", label, iters, reps);
	printf("%-24s %10s %10s %9s %8s %10s %10s\n", "operation", "with",
		"without", "overhead", "percent", "pkts with", "without");
	for (int r = 0; r < 7; r++)
		printf("%-24s %10.1f %10.1f %9.1f %7.0f%% %10.2f %10.2f\n",
			rows[r].name, rows[r].us[1], rows[r].us[0],
			rows[r].us[1] - rows[r].us[0],
			100.0 * (rows[r].us[1] - rows[r].us[0]) / rows[r].us[0],
			rows[r].packets[1], rows[r].packets[0]);
	return 0;
}
