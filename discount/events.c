/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * events.c -- the visible events of a run, as the program made them
 *
 * dc-run --events FILE (DC_EVENTS): every write to a terminal, pipe,
 * socket or character device -- a visible event of the theory, the unit
 * its equivalence (Definition 2, dc-equiv) compares -- is appended to
 * FILE as one line: the bytes written, C-escaped (\n \r \t \\ and \xHH
 * for the other bytes outside printable ASCII).  A program that writes
 * one line in several calls (a prompt, then the number, then the newline)
 * makes several events; a recovered run that writes the prompt again
 * makes a duplicate of an earlier event, not a different line.
 *
 * Invariants:
 *  1. One line per call that wrote something, in the order of the calls,
 *     holding exactly the bytes the call wrote (its return value).
 *  2. The file is opened by every incarnation in append mode: the runs of
 *     one observed execution, crashes included, follow each other.
 *  3. Its descriptor is libdc's own (never in the program's table, never
 *     closed by recovery).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dc_int.h"

int
dc__events_open(const char *path)
{
	dc__vol.events_fd = -1;
	if (path == NULL || *path == '\0')
		return 0;
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return dc__err(-errno, "--events %s: %s", path,
			strerror(errno));
	dc__vol.events_fd = dc__own_fd(fd);
	return 0;
}

/* Escape p[0..n) into the line being built in out (flushed when full). */
static void
put(char *out, size_t *o, size_t cap, const unsigned char *p, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		if (*o + 4 > cap) {
			dc__sys6(SYS_write, dc__vol.events_fd, (long)out,
				(long)*o, 0, 0, 0);
			*o = 0;
		}
		unsigned char c = p[i];
		if (c == '\\' || c == '\n' || c == '\r' || c == '\t') {
			out[(*o)++] = '\\';
			out[(*o)++] = c == '\\' ? '\\' : c == '\n' ? 'n' :
				c == '\r' ? 'r' : 't';
		} else if (c >= 0x20 && c < 0x7f) {
			out[(*o)++] = (char)c;
		} else {
			out[(*o)++] = '\\';
			out[(*o)++] = 'x';
			out[(*o)++] = hex[c >> 4];
			out[(*o)++] = hex[c & 15];
		}
	}
}

/* A visible call (write, writev, sendto ...) returned r: its event. */
void
dc__event(long nr, const long *a, long r)
{
	if (dc__vol.events_fd < 0 || r <= 0)
		return;
	char out[4096];
	size_t o = 0, left = (size_t)r;
	switch (nr) {
	case SYS_write:
	case SYS_sendto:
		put(out, &o, sizeof(out), (const void *)a[1], left);
		break;
	case SYS_writev: {
		const struct iovec *v = (const void *)a[1];
		for (long i = 0; i < a[2] && left > 0; i++) {
			size_t k = v[i].iov_len < left ? v[i].iov_len : left;
			put(out, &o, sizeof(out), v[i].iov_base, k);
			left -= k;
		}
		break;
	}
	case SYS_sendmsg: {
		const struct msghdr *m = (const void *)a[1];
		for (size_t i = 0; i < m->msg_iovlen && left > 0; i++) {
			const struct iovec *v = &m->msg_iov[i];
			size_t k = v->iov_len < left ? v->iov_len : left;
			put(out, &o, sizeof(out), v->iov_base, k);
			left -= k;
		}
		break;
	}
	default:
		return;
	}
	out[o++] = '\n';
	dc__sys6(SYS_write, dc__vol.events_fd, (long)out, (long)o, 0, 0, 0);
}
