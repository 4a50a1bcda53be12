/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * err.c -- libvistagrams return codes, their names and texts, messages
 *
 * The thread-local message is librio's (rio_seterr), shared by the whole
 * stack.  An endpoint that hits a failure leaving its state uncertain (a
 * failed commit, corrupt tables found while running) keeps the cause and
 * refuses further work with VG_EFATAL until it is closed and reopened.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "vg_int.h"

#define VG__ERR_TEXT(name, value, text) \
	case name:                      \
		return text;
#define VG__ERR_NAME(name, value, text) \
	case name:                      \
		return #name;

const char *
vg_strerror(int rc)
{
	switch (rc) {
		VG_ERRNO_MAP(VG__ERR_TEXT)
	default:
		return vista_strerror(rc);
	}
}

const char *
vg_err_name(int rc)
{
	switch (rc) {
		VG_ERRNO_MAP(VG__ERR_NAME)
	default:
		break;
	}
#define VG__VISTA_NAME(name, value, text) \
	case name:                        \
		return #name;
	switch (rc) {
		VISTA_ERRNO_MAP(VG__VISTA_NAME)
	default:
		return rio_err_name(rc);
	}
#undef VG__VISTA_NAME
}

const char *
vg_errormsg(void)
{
	return rio_errormsg();
}

int
vg__fatal(vg_endpoint *ep, int cause, const char *fmt, ...)
{
	va_list ap;

	/* The first cause sticks: later failures are its consequences. */
	if (!ep->error) {
		va_start(ap, fmt);
		vsnprintf(ep->errmsg, sizeof(ep->errmsg), fmt, ap);
		va_end(ap);
		ep->error = cause ? cause : VG_EFATAL;
	}
	return rio_seterr(VG_EFATAL, "endpoint %llu: %s (%s)",
		(unsigned long long)ep->node, ep->errmsg,
		vg_err_name(ep->error));
}

int
vg__check(const vg_endpoint *ep)
{
	if (VG__UNLIKELY(ep->error))
		return rio_seterr(VG_EFATAL,
			"endpoint %llu is in its error state: %s (%s)",
			(unsigned long long)ep->node, ep->errmsg,
			vg_err_name(ep->error));
	return 0;
}
