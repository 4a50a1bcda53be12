/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * held_prog.c -- a writer under the buffered protocol, killed at random
 *                (held_test.cpp, [held-*])
 *
 *   dc-test-held DIR FILE N SEED INTERVAL_MS STOP REPORT [big]
 *
 * Makes writes 0..N-1 of held_gen.h to FILE (which must exist), with
 * checkpoints every INTERVAL_MS (the disk scheme is $DC_DISK), and keeps
 * the file's contents in memory: every 16th write it reads a range back
 * (pread, or lseek + read) and compares, so reads over held writes are
 * checked in every run.  A run resumed from a checkpoint that finds the
 * file STOP writes the number of writes it had made at the checkpoint to
 * REPORT, takes a checkpoint (which performs that write) and waits to
 * be killed: the file must then be the failure-free file after that many
 * writes (the report is made again by a later run resumed after it,
 * see report()).  $HELD_TICK_AFTER_REPORT: a second checkpoint right
 * after the report's (the interval's timer falling due during it).
 * "forced": two writes, the second forcing a checkpoint that grows the
 * file (run with DC_HELD_MAX=150), then the size and bytes it must see.
 * "big": one write larger than $DC_HELD_MAX instead, which
 * must fail with ENOSPC.  $HELD_PROTOCOL names another protocol (the
 * comparisons of bench/discount).
 *
 * Exit: 0 done, 1 dc_init failed (its message on stderr), 2 bad
 * arguments or I/O error, 3 a read did not see the bytes written.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <dc.h>

#include "held_gen.h"
#include "held_report.h"

static unsigned char model[HELD_FSIZE];
static unsigned char buf[HELD_MAXLEN];
static unsigned char back[HELD_MAXLEN];
static uint64_t msize; /* the model's size */

int
main(int argc, char **argv)
{
	if (argc < 8)
		return 2;
	struct dc_opts o = { .dir = argv[1], .protocol = DC_BUFFERED,
		.interval_ms = (unsigned)atoi(argv[5]) };
	const char *p = getenv("HELD_PROTOCOL");
	int rc = p && dc_protocol_parse(p, &o.protocol) ? 2 : 0;
	if (rc == 0)
		rc = dc_init(&o);
	if (rc) {
		fprintf(stderr, "dc_init: %s: %s\n", dc_strerror(rc),
			dc_errormsg());
		return 1;
	}
	int fd = open(argv[2], O_RDWR);
	if (fd < 0)
		return 2;
	if (argc > 8 && !strcmp(argv[8], "forced")) {
		/* with DC_HELD_MAX=150: the second write forces a checkpoint
		 * that performs the first, which makes the file 1100 bytes
		 * long; the program must still see 1100 bytes and read them */
		static unsigned char a[100], b[60], r[100];
		memset(a, 'a', sizeof(a));
		memset(b, 'b', sizeof(b));
		struct stat st;
		if (pwrite(fd, a, sizeof(a), 1000) != 100 ||
		    pwrite(fd, b, sizeof(b), 0) != 60)
			return 2;
		off_t end = lseek(fd, 0, SEEK_END);
		ssize_t k = pread(fd, r, sizeof(r), 1000);
		int ok = end == 1100 && k == 100 && !memcmp(r, a, 100) &&
			fstat(fd, &st) == 0 && st.st_size == 1100;
		printf("forced: end %ld, read %zd, size %ld\n", (long)end, k,
			(long)st.st_size);
		return ok ? 0 : 3;
	}
	if (argc > 8 && !strcmp(argv[8], "big")) {
		static char huge[1 << 20];
		ssize_t r = write(fd, huge, sizeof(huge));
		printf("big write: %zd %s\n", r, r < 0 ? strerror(errno) : "");
		return r < 0 && errno == ENOSPC ? 0 : 3;
	}
	uint64_t n = strtoull(argv[3], NULL, 10);
	struct held_gen g;
	held_init(&g, strtoull(argv[4], NULL, 10));
	if (access(argv[6], F_OK) == 0)
		report(argv[7], argv[6], 0); /* a fresh run: nothing written yet */
	for (uint64_t i = 0; i < n; i++) {
		if (dc_recovered() && access(argv[6], F_OK) == 0)
			report(argv[7], argv[6], i);
		struct held_w w = held_write(&g, i, buf);
		ssize_t r;
		if (w.seq) {
			if (w.rewind && lseek(fd, 0, SEEK_SET) != 0)
				return 2;
			r = write(fd, buf, w.len);
		} else {
			r = pwrite(fd, buf, w.len, (off_t)w.off);
		}
		if (r != (ssize_t)w.len) {
			printf("write %lu: %zd of %lu bytes: %s\n",
				(unsigned long)i, r, (unsigned long)w.len,
				r < 0 ? strerror(errno) : "short");
			return 2;
		}
		memcpy(model + w.off, buf, w.len);
		if (w.off + w.len > msize)
			msize = w.off + w.len;
		if (i % 16 != 15)
			continue;
		/* read back a range over this and earlier writes */
		uint64_t at = (w.off * 7 + i) % HELD_FSIZE;
		uint64_t len = HELD_MAXLEN;
		uint64_t want = at >= msize ? 0 : msize - at;
		if (want > len)
			want = len;
		if (i % 32 == 31) {
			off_t keep = lseek(fd, 0, SEEK_CUR);
			if (lseek(fd, (off_t)at, SEEK_SET) != (off_t)at)
				return 2;
			r = read(fd, back, len);
			if (lseek(fd, keep, SEEK_SET) != keep)
				return 2;
		} else {
			r = pread(fd, back, len, (off_t)at);
		}
		struct stat st;
		if (r != (ssize_t)want || memcmp(back, model + at, want) ||
		    fstat(fd, &st) != 0 || (uint64_t)st.st_size != msize ||
		    lseek(fd, 0, SEEK_END) != (off_t)msize) {
			printf("write %lu: read back %zd of %lu bytes at %lu, "
			       "size %lu: not what was written\n",
				(unsigned long)i, r, (unsigned long)want,
				(unsigned long)at, (unsigned long)msize);
			return 3;
		}
		if (lseek(fd, (off_t)g.pos, SEEK_SET) != (off_t)g.pos)
			return 2;
	}
	return 0;
}
