/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * err.c -- libckr's return codes, their names and texts, and its message
 *
 * The thread-local message is librio's (rio_seterr): one message serves the
 * whole stack, so a librio failure under a ckr call reads the same way.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "ckr_int.h"

const char *
ckr_strerror(int rc)
{
#define XX(name, value, msg) \
	if (rc == (value))   \
		return msg;
	CKR_ERRNO_MAP(XX)
#undef XX
	return rio_strerror(rc);
}

const char *
ckr_err_name(int rc)
{
#define XX(name, value, msg) \
	if (rc == (value))   \
		return #name;
	CKR_ERRNO_MAP(XX)
#undef XX
	return rio_err_name(rc);
}

const char *
ckr_errormsg(void)
{
	return rio_errormsg();
}

enum ckr_algo
ckr_algo_parse(const char *s)
{
	static const struct {
		const char *n;
		enum ckr_algo a;
	} t[] = { { "naive", CKR_NAIVE }, { "bacou", CKR_BACOU },
		{ "bazz", CKR_BAZZ }, { "ipp", CKR_IPP }, { "fork", CKR_FORK } };

	for (size_t i = 0; s != NULL && i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(s, t[i].n) == 0)
			return t[i].a;
	return (enum ckr_algo)0;
}

const char *
ckr_algo_name(enum ckr_algo a)
{
	switch (a) {
	case CKR_NAIVE: return "naive";
	case CKR_BACOU: return "bacou";
	case CKR_BAZZ: return "bazz";
	case CKR_IPP: return "ipp";
	case CKR_FORK: return "fork";
	}
	return "?";
}
