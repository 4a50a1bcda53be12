/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * err.c -- RVM return codes, their names, and the failure message
 *
 * Design:
 *  1. Codes are RVM 1.3's (RVM_SUCCESS, RVM_E*), so callers written for the
 *     real RVM see the same values; rvm_return() names them.
 *  2. Every failure also sets the stack's thread-local message (librio's
 *     rio_seterr), read back with rvm_errormsg().
 *  3. A failure that leaves durability uncertain (a log or data write or
 *     sync failed) sticks: rvm__fail() records RVM_ETERMINATED and every
 *     later call returns it until rvm_terminate() and rvm_initialize().
 */
#include <stdarg.h>
#include <stdio.h>

#include "rvm_int.h"

static const char *const names[] = {
	[RVM_EINIT - rvm_first_code] = "RVM_EINIT",
	[RVM_EINTERNAL - rvm_first_code] = "RVM_EINTERNAL",
	[RVM_EIO - rvm_first_code] = "RVM_EIO",
	[RVM_ELOG - rvm_first_code] = "RVM_ELOG",
	[RVM_ELOG_VERSION_SKEW - rvm_first_code] = "RVM_ELOG_VERSION_SKEW",
	[RVM_EMODE - rvm_first_code] = "RVM_EMODE",
	[RVM_ENAME_TOO_LONG - rvm_first_code] = "RVM_ENAME_TOO_LONG",
	[RVM_ENO_MEMORY - rvm_first_code] = "RVM_ENO_MEMORY",
	[RVM_ENOT_MAPPED - rvm_first_code] = "RVM_ENOT_MAPPED",
	[RVM_EOFFSET - rvm_first_code] = "RVM_EOFFSET",
	[RVM_EOPTIONS - rvm_first_code] = "RVM_EOPTIONS",
	[RVM_EOVERLAP - rvm_first_code] = "RVM_EOVERLAP",
	[RVM_EPAGER - rvm_first_code] = "RVM_EPAGER",
	[RVM_ERANGE - rvm_first_code] = "RVM_ERANGE",
	[RVM_EREGION - rvm_first_code] = "RVM_EREGION",
	[RVM_EREGION_DEF - rvm_first_code] = "RVM_EREGION_DEF",
	[RVM_ESRC - rvm_first_code] = "RVM_ESRC",
	[RVM_ESTATISTICS - rvm_first_code] = "RVM_ESTATISTICS",
	[RVM_ESTAT_VERSION_SKEW - rvm_first_code] = "RVM_ESTAT_VERSION_SKEW",
	[RVM_ETERMINATED - rvm_first_code] = "RVM_ETERMINATED",
	[RVM_ETHREADS - rvm_first_code] = "RVM_ETHREADS",
	[RVM_ETID - rvm_first_code] = "RVM_ETID",
	[RVM_ETOO_BIG - rvm_first_code] = "RVM_ETOO_BIG",
	[RVM_EUNCOMMIT - rvm_first_code] = "RVM_EUNCOMMIT",
	[RVM_EVERSION_SKEW - rvm_first_code] = "RVM_EVERSION_SKEW",
	[RVM_EVM_OVERLAP - rvm_first_code] = "RVM_EVM_OVERLAP",
};

const char *
rvm_return(rvm_return_t code)
{
	if (code == RVM_SUCCESS)
		return "RVM_SUCCESS";
	if (code > rvm_first_code && code < rvm_last_code &&
	    names[code - rvm_first_code] != NULL)
		return names[code - rvm_first_code];
	return "RVM_UNKNOWN";
}

const char *
rvm_mode(rvm_mode_t mode)
{
	switch (mode) {
	case restore:
		return "restore";
	case no_restore:
		return "no_restore";
	case flush:
		return "flush";
	case no_flush:
		return "no_flush";
	default:
		return "invalid mode";
	}
}

const char *
rvm_type(rvm_struct_id_t id)
{
	switch (id) {
	case rvm_region_id:
		return "rvm_region_t";
	case rvm_options_id:
		return "rvm_options_t";
	case rvm_tid_id:
		return "rvm_tid_t";
	case rvm_statistics_id:
		return "rvm_statistics_t";
	default:
		return "invalid struct id";
	}
}

const char *
rvm_errormsg(void)
{
	return rio_errormsg();
}

rvm_offset_t
rvm_mk_offset(rvm_length_t x, rvm_length_t y)
{
	rvm_offset_t o = { x, y };
	return o;
}

static rvm_return_t
verr(rvm_return_t code, const char *fmt, va_list ap)
{
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	rio_seterr(code, "%s: %s", rvm_return(code), msg);
	return code;
}

rvm_return_t
rvm__err(rvm_return_t code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	verr(code, fmt, ap);
	va_end(ap);
	return code;
}

rvm_return_t
rvm__fail(const char *fmt, ...)
{
	va_list ap;
	rvm__g.fatal = RVM_ETERMINATED;
	va_start(ap, fmt);
	verr(RVM_ETERMINATED, fmt, ap);
	va_end(ap);
	return RVM_ETERMINATED;
}

rvm_return_t
rvm__usable(void)
{
	if (!rvm__g.initialized)
		return rvm__err(RVM_EINIT, "rvm_initialize has not been called");
	if (rvm__g.fatal)
		return rvm__err(rvm__g.fatal,
			"an earlier log or data I/O failed; durability is "
			"uncertain until rvm_terminate and rvm_initialize");
	return RVM_SUCCESS;
}
