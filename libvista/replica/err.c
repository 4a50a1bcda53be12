/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * err.c -- libvista_replica return codes, their names and texts
 *
 * The thread-local message is librio's (rio_seterr), shared by the stack.
 */
#include "vr_int.h"

#define VR__ERR_TEXT(name, value, text) \
	case name:                      \
		return text;
#define VR__ERR_NAME(name, value, text) \
	case name:                      \
		return #name;

const char *
vr_strerror(int rc)
{
	switch (rc) {
		VR_ERRNO_MAP(VR__ERR_TEXT)
	default:
		return vista_strerror(rc);
	}
}

const char *
vr_err_name(int rc)
{
	switch (rc) {
		VR_ERRNO_MAP(VR__ERR_NAME)
	default:
		return vista_err_name(rc);
	}
}

const char *
vr_errormsg(void)
{
	return rio_errormsg();
}
