/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * err.c -- return codes, their names and texts, and the thread-local message
 *
 * One thread-local buffer holds the message of the last failure on this
 * thread for the whole stack (librio and the libraries built on it, through
 * rio_seterr()).  It is set where the failure happens, with the context a
 * user needs: the call, the path, the offset or size.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "rio_int.h"

#define RIO__MSG_MAX 512

static __thread char msg[RIO__MSG_MAX];

const char *
rio_errormsg(void)
{
	return msg;
}

/*
 * Format into a scratch buffer first: callers often wrap the previous
 * message ("...: %s", rio_errormsg()), and vsnprintf into the buffer it
 * reads from is undefined behaviour (it garbles the text on glibc).
 */
static void
vset(const char *fmt, va_list ap)
{
	char line[RIO__MSG_MAX];

	vsnprintf(line, sizeof(line), fmt, ap);
	memcpy(msg, line, sizeof(msg));
}

int
rio_seterr(int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(fmt, ap);
	va_end(ap);
	return rc;
}

/* librio's own name for rio_seterr(): the same function. */
int rio__err(int rc, const char *fmt, ...)
	__attribute__((alias("rio_seterr")));

/* Set "<context>: <strerror(errno)>" and return -errno. */
int
rio__errno(const char *fmt, ...)
{
	int e = errno ? errno : EIO;
	char ctx[RIO__MSG_MAX - 64];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ctx, sizeof(ctx), fmt, ap);
	va_end(ap);
	snprintf(msg, sizeof(msg), "%s: %s", ctx, strerror(e));
	return -e;
}

void
rio__notice(const char *fmt, ...)
{
	char line[RIO__MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	fprintf(stderr, "rio: %s\n", line);
}

/* rc's row of the error table: its name, or its text; NULL if none. */
static const char *
row(int rc, bool name)
{
#define RIO__ERR_ROW(n, value, text) \
	case n:                      \
		return name ? #n : text;
	switch (rc) {
		RIO_ERRNO_MAP(RIO__ERR_ROW)
	default:
		return NULL;
	}
#undef RIO__ERR_ROW
}

const char *
rio_strerror(int rc)
{
	const char *s = rc == 0 ? "success" : row(rc, false);

	if (s == NULL && rc < 0 && rc > -4096)
		s = strerrordesc_np(-rc);
	return s ? s : "unknown error";
}

const char *
rio_err_name(int rc)
{
	const char *s = rc == 0 ? "OK" : row(rc, true);

	if (s == NULL && rc < 0 && rc > -4096)
		s = strerrorname_np(-rc);
	return s ? s : "UNKNOWN";
}
