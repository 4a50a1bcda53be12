/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * held_report.h -- how a resumed run of held_prog.c or udp_prog.c
 *                  reports the count of its checkpoint (held_test.cpp)
 */
#ifndef DC_TEST_HELD_REPORT_H
#define DC_TEST_HELD_REPORT_H

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <dc.h>

/* The kernel's process id of this run (getpid() answers the checkpointed
 * program's id in every run). */
static inline long
run_id(void)
{
	char b[32];
	ssize_t n = readlink("/proc/self", b, sizeof(b) - 1);
	if (n <= 0)
		exit(2);
	b[n] = '\0';
	return atol(b);
}

/* Write the number of writes made and take a checkpoint, which performs
 * that write; the test kills the run once it has read it.  A checkpoint
 * may be taken anywhere in here after the report's (the interval's timer
 * falls due during a checkpoint, and fires as soon as it returns): a
 * later run resumed from it is another run, seen by its process id, and
 * it reports again if asked to (STOP), else goes on.  The run does not
 * kill itself: a later run resumed between the test of its id and the
 * kill would die without a report. */
static inline void
report(const char *path, const char *stop, uint64_t done)
{
	for (;;) {
		/* the report names the request (STOP's contents): a
		 * report performed again by a later recovery is told from
		 * the one asked for */
		char s[96], tag[48] = "";
		int fd = open(stop, O_RDONLY);
		ssize_t t = fd >= 0 ? read(fd, tag, sizeof(tag) - 1) : 0;
		if (fd >= 0)
			close(fd);
		tag[t > 0 ? t : 0] = '\0';
		int n = snprintf(s, sizeof(s), "%s %lu\n", tag,
			(unsigned long)done);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		if (fd < 0 || write(fd, s, (size_t)n) != n)
			exit(2);
		close(fd);
		long me = run_id();
		if (dc_checkpoint() < 0)
			exit(2);
		if (getenv("HELD_TICK_AFTER_REPORT") && dc_checkpoint() < 0)
			exit(2); /* the interval's tick, at its worst moment */
		while (run_id() == me) {
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
		}
		if (access(stop, F_OK) != 0)
			return;
	}
}

#endif /* DC_TEST_HELD_REPORT_H */
