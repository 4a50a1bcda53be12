/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * util.c -- small helpers of the pmemtest driver (allocation that dies on
 * failure: the driver is a command-line tool, out of memory ends the run)
 */
#include <errno.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "pmemtest_int.h"

void
pmt_die(const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fprintf(stderr, "pmemtest: ");
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(2);
}

void *
pmt_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (p == NULL)
		pmt_die("out of memory (%zu bytes)", n);
	return p;
}

void *
pmt_xcalloc(size_t n, size_t sz)
{
	void *p = calloc(n ? n : 1, sz ? sz : 1);
	if (p == NULL)
		pmt_die("out of memory (%zu x %zu bytes)", n, sz);
	return p;
}

void *
pmt_xrealloc(void *p, size_t n)
{
	p = realloc(p, n ? n : 1);
	if (p == NULL)
		pmt_die("out of memory (%zu bytes)", n);
	return p;
}

char *
pmt_xstrdup(const char *s)
{
	char *d = strdup(s);
	if (d == NULL)
		pmt_die("out of memory");
	return d;
}

char *
pmt_xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&s, fmt, ap);
	va_end(ap);
	if (n < 0)
		pmt_die("out of memory");
	return s;
}

int
pmt_mkdir_p(const char *path)
{
	char *p = pmt_xstrdup(path);

	for (char *s = p + 1; *s; s++) {
		if (*s != '/')
			continue;
		*s = '\0';
		if (mkdir(p, 0755) != 0 && errno != EEXIST) {
			free(p);
			return -errno;
		}
		*s = '/';
	}
	if (mkdir(p, 0755) != 0 && errno != EEXIST) {
		free(p);
		return -errno;
	}
	free(p);
	return 0;
}

static int
rm_one(const char *p, const struct stat *st, int flag, struct FTW *f)
{
	(void)st;
	(void)flag;
	(void)f;
	return remove(p);
}

int
pmt_rm_rf(const char *path)
{
	return nftw(path, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

uint64_t
pmt_rand(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/*
 * Zeroed memory for the model's per-line arrays, in transparent huge pages
 * where the kernel allows: the driver forks once per crash image, and
 * fork copies a page table entry (and takes a page reference) for every
 * 4 KiB of memory -- for a 4 MiB pool's arrays that was most of the cost
 * of an image.
 */
#define BIG_ALIGN (2u << 20)

void *
pmt_xbig(size_t n)
{
	size_t len = (n + BIG_ALIGN - 1) & ~(size_t)(BIG_ALIGN - 1);
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		pmt_die("out of memory (%zu bytes)", n);
	madvise(p, len, MADV_HUGEPAGE);
	return p;
}

void
pmt_big_free(void *p, size_t n)
{
	if (p != NULL)
		munmap(p, (n + BIG_ALIGN - 1) & ~(size_t)(BIG_ALIGN - 1));
}
