/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * err.c -- sbml return codes, their names and texts, messages
 *
 * The thread-local message is librio's (rio_seterr), shared by the whole
 * stack.  A process that finds its own state uncertain (a recovery that
 * cannot be completed, a replay that diverged) keeps the cause and
 * refuses further work with SBML_EFATAL.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "dc.h"
#include "sbml_int.h"

#define SBML__ERR_TEXT(name, value, text) \
	case name:                        \
		return text;
#define SBML__ERR_NAME(name, value, text) \
	case name:                        \
		return #name;

const char *
sbml_strerror(int rc)
{
	switch (rc) {
		SBML_ERRNO_MAP(SBML__ERR_TEXT)
	default:
		return dc_strerror(rc);
	}
}

const char *
sbml_err_name(int rc)
{
	switch (rc) {
		SBML_ERRNO_MAP(SBML__ERR_NAME)
	default:
		return dc_err_name(rc);
	}
}

const char *
sbml_errormsg(void)
{
	return rio_errormsg();
}

int
sbml__fatal(sbml *s, int cause, const char *fmt, ...)
{
	va_list ap;

	/* The first cause sticks: later failures are its consequences. */
	if (!s->error) {
		va_start(ap, fmt);
		vsnprintf(s->errmsg, sizeof(s->errmsg), fmt, ap);
		va_end(ap);
		s->error = cause ? cause : SBML_EFATAL;
		if (s->o.verbose)
			fprintf(stderr, "sbml: process %u: %s\n", s->self,
				s->errmsg);
	}
	return rio_seterr(s->error, "process %u: %s (%s)", s->self, s->errmsg,
		sbml_err_name(s->error));
}

int
sbml__check(const sbml *s)
{
	if (SBML__UNLIKELY(s->error))
		return rio_seterr(SBML_EFATAL,
			"process %u is in its error state: %s (%s)", s->self,
			s->errmsg, sbml_err_name(s->error));
	return 0;
}
