/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * err.c -- libvista's return codes and the stack's thread-local message
 *
 * The VISTA_E* band (-31000..-31999) is generated from VISTA_ERRNO_MAP in
 * vista.h; every other code is librio's or an errno, and is described by
 * rio_strerror()/rio_err_name().  There is one thread-local message for
 * the whole stack: libvista sets it with rio_seterr() where a failure
 * happens, and vista_errormsg() is rio_errormsg().
 */
#include "vista_int.h"

#define VISTA__ERR_TEXT(name, value, text) \
	case name:                         \
		return text;
#define VISTA__ERR_NAME(name, value, text) \
	case name:                         \
		return #name;

const char *
vista_strerror(int rc)
{
	switch (rc) {
		VISTA_ERRNO_MAP(VISTA__ERR_TEXT)
	default:
		return rio_strerror(rc);
	}
}

const char *
vista_err_name(int rc)
{
	switch (rc) {
		VISTA_ERRNO_MAP(VISTA__ERR_NAME)
	default:
		return rio_err_name(rc);
	}
}

const char *
vista_errormsg(void)
{
	return rio_errormsg();
}
