/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dlopen_lib.c -- the library dlopen_prog.c loads after its first
 *                 checkpoint
 *
 * What the dynamic loader relocates and then makes read-only (RELRO): a
 * table of function pointers (.data.rel.ro) and, the library being linked
 * with -z now, the GOT entries of the libc functions it calls.  Mapped
 * again from the file instead of restored, both hold unrelocated values.
 */
#include <stdio.h>
#include <string.h>

#define DL_EXPORT __attribute__((visibility("default")))

struct dc_dl_ops {
	const char *name;
	int (*twice)(int);
	size_t (*len)(const char *);
};

static int
twice(int x)
{
	return 2 * x;
}

static size_t
len(const char *s)
{
	return strlen(s); /* through the GOT */
}

DL_EXPORT extern const struct dc_dl_ops dc_dl_ops;
DL_EXPORT extern int dc_dl_counter;
DL_EXPORT int dc_dl_format(char *buf, size_t n, int x);

const struct dc_dl_ops dc_dl_ops = { "ops", twice, len };

int dc_dl_counter; /* .bss: written by the library */

int
dc_dl_format(char *buf, size_t n, int x)
{
	return snprintf(buf, n, "%s %d %zu %d", dc_dl_ops.name,
		dc_dl_ops.twice(x), dc_dl_ops.len("abcdef"), ++dc_dl_counter);
}
