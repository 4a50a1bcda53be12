/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * kill_prog.c -- a deterministic 4-process program for the kill test
 *
 *   sbml-kill-prog SELF DCDIR OUTFILE CKPT_EVERY NQUEENS ROUNDS WORK_US \
 *                  ADDR0 ADDR1 ADDR2 ADDR3
 *
 * Under Discount Checking (dc_init, protocol manual).  Two phases:
 *   1. nqueens, distributed: process 0 hands the placements of the first
 *      two queens to workers 1..3 in turn (request/reply, sbml_call);
 *      each worker counts the solutions below its placement and replies;
 *   2. a token ring of the four processes, ROUNDS rounds: each process
 *      folds its id into the token and passes it on (every send waits
 *      for the acknowledgement of the RSN it owes the previous process).
 * Every process writes what it did to OUTFILE (sbml_output) at the end of
 * each phase and takes a checkpoint every CKPT_EVERY receives; process 0
 * writes the totals.  A
 * failure-free run and a run with kills must write the same files.
 * WORK_US: sleep per task and per token, so that kills land inside.
 * $SBML_TIMEOUT_MS: how long a call waits for its peers (20000).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "dc.h"
#include "sbml.h"

static sbml *S;
static int out_fd;
static unsigned every, since;

static void
die(const char *what, int rc)
{
	fprintf(stderr, "kill_prog: %s: %s (%s): %s\n", what,
		sbml_err_name(rc), sbml_strerror(rc), sbml_errormsg());
	exit(3);
}

/* Lines are kept in memory and written at the end of each phase, as a
 * computation would print its results: between outputs, nothing waits
 * for acknowledgements but what the protocol's send rule makes wait. */
static char out_buf[1 << 16];
static size_t out_len;

static void
say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void
say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(out_buf + out_len, sizeof(out_buf) - out_len, fmt,
		ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(out_buf) - out_len)
		die("output buffer", -ENOSPC);
	out_len += (size_t)n;
}

static void
output(void)
{
	int rc = sbml_output(S, out_fd, out_buf, out_len);
	if (rc)
		die("output", rc);
	out_len = 0;
}

static void
received(void)
{
	if (++since < every)
		return;
	since = 0;
	int rc = sbml_checkpoint(S);
	if (rc < 0)
		die("checkpoint", rc);
}

static void
work(unsigned us)
{
	struct timespec ts = { 0, (long)us * 1000 };
	if (us)
		nanosleep(&ts, NULL);
}

static unsigned long
queens(unsigned n, unsigned row, unsigned cols, unsigned d1, unsigned d2)
{
	unsigned long c = 0;
	if (row == n)
		return 1;
	for (unsigned col = 0; col < n; col++) {
		unsigned a = 1u << col, b = 1u << (row + col),
			 d = 1u << (row + n - col);
		if ((cols & a) || (d1 & b) || (d2 & d))
			continue;
		c += queens(n, row + 1, cols | a, d1 | b, d2 | d);
	}
	return c;
}

struct task {
	int32_t c0, c1; /* -1: stop */
	uint32_t id, n;
};

int
main(int argc, char **argv)
{
	if (argc != 12) {
		fprintf(stderr, "usage: %s SELF DCDIR OUT CKPT_EVERY NQUEENS "
			"ROUNDS WORK_US ADDR0..ADDR3\n", argv[0]);
		return 2;
	}
	struct dc_opts dco = { .dir = argv[2], .protocol = DC_MANUAL };
	int rc = dc_init(&dco);
	if (rc)
		die("dc_init", rc);
	unsigned self = (unsigned)atoi(argv[1]);
	every = (unsigned)atoi(argv[4]);
	unsigned nq = (unsigned)atoi(argv[5]);
	unsigned rounds = (unsigned)atoi(argv[6]);
	unsigned work_us = (unsigned)atoi(argv[7]);
	out_fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out_fd < 0) {
		perror(argv[3]);
		return 2;
	}
	struct sbml_opts so = {
		.nprocs = 4,
		.self = self,
		.addrs = (const char *const *)&argv[8],
		.verbose = true,
		.timeout_ms = getenv("SBML_TIMEOUT_MS") ?
			(unsigned)atoi(getenv("SBML_TIMEOUT_MS")) : 20000,
		.linger_ms = 500,
	};
	rc = sbml_open(&so, &S);
	if (rc)
		die("sbml_open", rc);
	fprintf(stderr, "kill_prog: process %u started\n", self);

	/* phase 1: nqueens */
	if (self == 0) {
		unsigned long total = 0;
		uint32_t id = 0;
		for (unsigned c0 = 0; c0 < nq; c0++)
			for (unsigned c1 = 0; c1 < nq; c1++) {
				if (c1 + 1 >= c0 && c1 <= c0 + 1)
					continue; /* attacked */
				struct task t = { (int32_t)c0, (int32_t)c1,
					id, nq };
				uint64_t count;
				size_t len;
				unsigned w = 1 + id % 3;
				rc = sbml_call(S, w, &t, sizeof(t), &count,
					sizeof(count), &len);
				if (rc)
					die("call", rc);
				received();
				total += count;
				say("task %u (%u,%u) on %u: %llu\n", id, c0, c1,
					w, (unsigned long long)count);
				id++;
			}
		for (unsigned w = 1; w < 4; w++) {
			struct task t = { -1, -1, 0, 0 };
			rc = sbml_send(S, w, &t, sizeof(t));
			if (rc)
				die("send stop", rc);
		}
		say("nqueens %u: %lu solutions\n", nq, total);
		output();
	} else {
		for (;;) {
			struct task t;
			size_t len;
			rc = sbml_recv(S, 0, &t, sizeof(t), &len, NULL, -1);
			if (rc)
				die("recv task", rc);
			received();
			if (t.c0 < 0) {
				output();
				break;
			}
			unsigned n = t.n, c0 = (unsigned)t.c0,
				 c1 = (unsigned)t.c1;
			uint64_t count = queens(n, 2, (1u << c0) | (1u << c1),
				(1u << c0) | (1u << (1 + c1)),
				(1u << (n - c0)) | (1u << (1 + n - c1)));
			rc = sbml_send(S, 0, &count, sizeof(count));
			if (rc)
				die("reply", rc);
			say("worker %u task %u: %llu\n", self, t.id,
				(unsigned long long)count);
			work(work_us);
		}
	}

	/* phase 2: the token ring */
	uint64_t v = 1;
	if (self == 0) {
		rc = sbml_send(S, 1, &v, sizeof(v));
		if (rc)
			die("send token", rc);
	}
	for (unsigned r = 0; r < rounds; r++) {
		size_t len;
		rc = sbml_recv(S, (int)((self + 3) % 4), &v, sizeof(v), &len,
			NULL, -1);
		if (rc)
			die("recv token", rc);
		received();
		v = v * 31 + self;
		if (self != 0 || r + 1 < rounds) {
			rc = sbml_send(S, (self + 1) % 4, &v, sizeof(v));
			if (rc)
				die("send token", rc);
		}
		say("round %u process %u token %llu\n", r, self,
			(unsigned long long)v);
		work(work_us);
	}
	if (self == 0)
		say("ring %u rounds: %llu\n", rounds, (unsigned long long)v);
	output();

	rc = sbml_finish(S);
	if (rc)
		die("finish", rc);
	struct sbml_stats st;
	sbml_stats(S, &st);
	fprintf(stderr, "kill_prog: process %u done: sent %llu received %llu "
		"log now %llu entries (max %llu, %llu bytes max), %llu "
		"collected after checkpoints, history %llu, checkpoints %llu, "
		"recoveries %llu, replayed %llu; sends immediate %llu "
		"piggybacked %llu waited %llu\n", self,
		(unsigned long long)st.sent, (unsigned long long)st.received,
		(unsigned long long)st.log_entries,
		(unsigned long long)st.log_entries_max,
		(unsigned long long)st.log_bytes_max,
		(unsigned long long)st.log_gc_entries,
		(unsigned long long)st.history_entries,
		(unsigned long long)st.checkpoints,
		(unsigned long long)st.recoveries,
		(unsigned long long)st.replayed,
		(unsigned long long)st.sends_immediate,
		(unsigned long long)st.sends_piggybacked,
		(unsigned long long)st.sends_waited);
	sbml_close(S);
	close(out_fd);
	return 0;
}
