/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * recovery_bench.c -- recovery time of one failed process against the
 * length of its log since its checkpoint
 *
 *   sbml-recovery-bench [-l L1,L2,...] [-s BYTES] [-r REPS] [-d DIR]
 *
 * Two processes on 127.0.0.1.  The receiver (under Discount Checking,
 * checkpoints in DIR, default /tmp) takes a checkpoint, receives L
 * messages of BYTES from the sender, and is SIGKILLed; the sender has
 * them in its send log, fully logged.  The receiver is started again
 * with the same command: libdc reloads its checkpoint, sbml collects the
 * L logged messages from the sender and checks the dependency vectors
 * (sbml_checkpoint returns 1: "recovered"), then the program receives
 * the L messages again from the replay list ("replayed"), and sends the
 * sender one new message.  Times are from the fork of the new life, on
 * the monotonic clock, the median of REPS runs (default 3), in ms.
 *
 * The roles run as this program again: -R recv|send DIR ADDR0 ADDR1 L B.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "dc.h"
#include "sbml.h"

static double
now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void
check(int rc, const char *what)
{
	if (rc < 0) {
		fprintf(stderr, "sbml-recovery-bench: %s: %s: %s\n", what,
			sbml_err_name(rc), sbml_errormsg());
		exit(1);
	}
}

static int
role(char **argv)
{
	bool recv_role = !strcmp(argv[0], "recv");
	const char *addrs[2] = { argv[2], argv[3] };
	unsigned L = (unsigned)atoi(argv[4]);
	size_t bytes = (size_t)atoi(argv[5]);
	static char buf[SBML_MAX_MESSAGE];
	size_t len;
	sbml *s;
	int rc;

	if (recv_role) {
		struct dc_opts dco = { .dir = argv[1],
			.protocol = DC_MANUAL };
		check(dc_init(&dco), "dc_init");
	}
	struct sbml_opts o = {
		.nprocs = 2,
		.self = recv_role ? 1 : 0,
		.addrs = addrs,
		.max_message = SBML_MAX_MESSAGE,
		.timeout_ms = 120000,
		.linger_ms = 100,
	};
	check(sbml_open(&o, &s), "open");
	if (!recv_role) {
		memset(buf, 's', bytes);
		for (unsigned i = 0; i < L; i++)
			check(sbml_send(s, 1, buf, bytes), "send");
		check(sbml_flush(s, -1), "flush");
		fprintf(stderr, "logged %u\n", L);
		check(sbml_recv(s, 1, buf, sizeof(buf), &len, NULL, -1),
			"recv end");
		check(sbml_finish(s), "finish");
		sbml_close(s);
		return 0;
	}
	rc = sbml_checkpoint(s);
	check(rc, "checkpoint");
	if (rc == 1)
		fprintf(stderr, "recovered %.3f\n", now_ms());
	for (unsigned i = 0; i < L; i++)
		check(sbml_recv(s, 0, buf, sizeof(buf), &len, NULL, -1),
			"recv");
	if (rc == 1) {
		fprintf(stderr, "replayed %.3f\n", now_ms());
		check(sbml_send(s, 0, "", 0), "send end");
		check(sbml_finish(s), "finish");
		sbml_close(s);
		return 0;
	}
	check(sbml_flush(s, -1), "flush");
	fprintf(stderr, "received %u\n", L);
	/* killed here: the sender sends nothing more until we answer */
	check(sbml_recv(s, 0, buf, sizeof(buf), &len, NULL, -1), "wait");
	return 1;
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

static pid_t
spawn(const char *self, char *const args[], const char *errfile)
{
	pid_t p = fork();
	if (p < 0) {
		perror("fork");
		exit(1);
	}
	if (p == 0) {
		int fd = open(errfile, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd < 0)
			_exit(120);
		dup2(fd, 2);
		execv(self, args);
		_exit(121);
	}
	return p;
}

/* The value after the last line of errfile that starts with `what`;
 * waits up to 120 s. */
static double
wait_line(const char *errfile, const char *what, pid_t pid)
{
	for (int t = 0; t < 120000; t++) {
		FILE *f = fopen(errfile, "r");
		char line[256];
		double v = -1;
		bool seen = false;
		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, what, strlen(what))) {
				seen = true;
				v = atof(line + strlen(what));
			}
		if (f)
			fclose(f);
		if (seen)
			return v;
		if (pid > 0 && waitpid(pid, NULL, WNOHANG) == pid) {
			fprintf(stderr, "sbml-recovery-bench: a role ended "
				"early; see %s\n", errfile);
			exit(1);
		}
		usleep(1000);
	}
	fprintf(stderr, "sbml-recovery-bench: no '%s' in %s\n", what,
		errfile);
	exit(1);
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

int
main(int argc, char **argv)
{
	char lens[256] = "0,10,100,300,1000";
	const char *dirbase = "/tmp";
	unsigned bytes = 64, reps = 3;
	int c;
	if (argc > 1 && !strcmp(argv[1], "-R")) {
		if (argc != 8) {
			fprintf(stderr, "bad role arguments\n");
			return 2;
		}
		return role(argv + 2);
	}
	while ((c = getopt(argc, argv, "l:s:r:d:")) != -1) {
		if (c == 'l')
			snprintf(lens, sizeof(lens), "%s", optarg);
		else if (c == 's')
			bytes = (unsigned)atoi(optarg);
		else if (c == 'r')
			reps = (unsigned)atoi(optarg);
		else if (c == 'd')
			dirbase = optarg;
		else {
			fprintf(stderr, "usage: %s [-l L1,L2,...] [-s BYTES] "
				"[-r REPS] [-d DIR]\n", argv[0]);
			return 2;
		}
	}
	if (bytes > SBML_MAX_MESSAGE || reps == 0 || reps > 50) {
		fprintf(stderr, "sbml-recovery-bench: bad -s or -r\n");
		return 2;
	}
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0) {
		perror("/proc/self/exe");
		return 1;
	}
	self[n] = '\0';
	printf("sbml-recovery-bench: %u-byte messages, median of %u runs, "
		"ms from the restart\n", bytes, reps);
	printf("%8s %12s %12s %12s\n", "log", "recovered", "replayed",
		"replay only");
	for (char *save = NULL, *tok = strtok_r(lens, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		double rec[50], rep[50];
		for (unsigned r = 0; r < reps; r++) {
			char dir[4096], dc[4200], e0[4200], e1[4200];
			char a[2][32], bs[16];
			snprintf(dir, sizeof(dir), "%s/sbml-recovery.XXXXXX",
				dirbase);
			if (!mkdtemp(dir)) {
				perror(dir);
				return 1;
			}
			snprintf(dc, sizeof(dc), "%s/dc", dir);
			snprintf(e0, sizeof(e0), "%s/err.0", dir);
			snprintf(e1, sizeof(e1), "%s/err.1", dir);
			snprintf(bs, sizeof(bs), "%u", bytes);
			free_ports(a);
			char *sa[] = { self, "-R", "send", dc, a[0], a[1], tok,
				bs, NULL };
			char *ra[] = { self, "-R", "recv", dc, a[0], a[1], tok,
				bs, NULL };
			pid_t ps = spawn(self, sa, e0);
			pid_t pr = spawn(self, ra, e1);
			wait_line(e1, "received", pr);
			wait_line(e0, "logged", ps);
			kill(pr, SIGKILL);
			waitpid(pr, NULL, 0);
			double t0 = now_ms();
			pr = spawn(self, ra, e1);
			rec[r] = wait_line(e1, "recovered", pr) - t0;
			rep[r] = wait_line(e1, "replayed", pr) - t0;
			int st1, st0;
			waitpid(pr, &st1, 0);
			waitpid(ps, &st0, 0);
			if (!WIFEXITED(st1) || WEXITSTATUS(st1) ||
			    !WIFEXITED(st0) || WEXITSTATUS(st0)) {
				fprintf(stderr, "sbml-recovery-bench: a role "
					"failed; see %s\n", dir);
				return 1;
			}
			(void)dc_discard(dc);
			unlink(e0);
			unlink(e1);
			rmdir(dir);
		}
		double rr[50];
		for (unsigned r = 0; r < reps; r++)
			rr[r] = rep[r] - rec[r];
		qsort(rec, reps, sizeof(double), cmp);
		qsort(rep, reps, sizeof(double), cmp);
		qsort(rr, reps, sizeof(double), cmp);
		printf("%8s %12.1f %12.1f %12.1f\n", tok, rec[reps / 2],
			rep[reps / 2], rr[reps / 2]);
		fflush(stdout);
	}
	return 0;
}
