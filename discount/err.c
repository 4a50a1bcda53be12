/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * err.c -- error codes, messages, and what libdc says on stderr
 *
 * Invariants:
 *  1. The enum, dc_strerror() and dc_err_name() come from DC_ERRNO_MAP;
 *     other codes are librio's (which also knows -errno).
 *  2. Messages to the user are one write(2) of one line starting "dc: ",
 *     made through the raw system call so that they work in any context
 *     (signal handlers, dispatch handler, recovery stack).
 *  3. A refusal says what was refused, why, and what it means: a refused
 *     call (dc__refuse_call) fails with an errno and changes nothing, so
 *     the program goes on and stays recoverable; only state that cannot
 *     be checkpointed (dc__refuse) ends the checkpoints.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>

#include "dc_int.h"

const char *
dc_strerror(int rc)
{
#define XX(name, value, msg) \
	if (rc == (value))   \
		return msg;
	DC_ERRNO_MAP(XX)
#undef XX
	return rio_strerror(rc);
}

const char *
dc_err_name(int rc)
{
#define XX(name, value, msg) \
	if (rc == (value))   \
		return #name;
	DC_ERRNO_MAP(XX)
#undef XX
	return rio_err_name(rc);
}

const char *
dc_errormsg(void)
{
	return rio_errormsg();
}

void
dc__say(const char *fmt, ...)
{
	char buf[1200];
	va_list ap;
	int n;

	memcpy(buf, "dc: ", 4);
	va_start(ap, fmt);
	n = vsnprintf(buf + 4, sizeof(buf) - 6, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	n += 4;
	if (n > (int)sizeof(buf) - 2)
		n = (int)sizeof(buf) - 2;
	buf[n++] = '\n';
	dc__sys6(SYS_write, 2, (long)buf, n, 0, 0, 0);
}

void
dc__assert_fail(const char *label, const char *cond, const char *file,
	int line)
{
	char buf[512];
	size_t n = rio__assert_format(buf, sizeof(buf), "libdc", label, cond,
		file, line);

	dc__sys6(SYS_write, 2, (long)buf, (long)n, 0, 0, 0);
	for (;;) /* 134: as a shell reports a death by SIGABRT */
		dc__sys6(SYS_exit_group, 134, 0, 0, 0, 0, 0);
}

/* The name of a refusal's errno, as the program will see it. */
static const char *
err_name(int err)
{
	switch (-err) {
	case EPERM: return "EPERM";
	case EACCES: return "EACCES";
	case EINVAL: return "EINVAL";
	case EMFILE: return "EMFILE";
	case ENOSPC: return "ENOSPC";
	default: return "an error";
	}
}

/*
 * Invariant 3: a refused call changed nothing -- the program sees an
 * ordinary error and goes on, and its checkpoints stay valid.  The
 * message says so, with what was refused and why.
 */
void
dc__refuse_call(const char *what, const char *why, int err)
{
	dc__say("refused %s (%s): the call fails with %s; the program goes "
		"on and stays recoverable", what, why, err_name(err));
}

/* What cannot be checkpointed at all: no checkpoint is taken from here
 * on, a crash returns to the last one. */
void
dc__refuse(const char *what)
{
	dc__say("refused: %s cannot be checkpointed; no further checkpoint "
		"is taken, a crash returns to the last one", what);
}
