/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * example.h -- the frame every pmemtest example shares
 *
 * An example defines
 *   static int ex_run(rio_pool *p, uint8_t *base);   the writer
 *   static int ex_check(rio_pool *p, uint8_t *base); recovery + invariants:
 *                                                    0 = consistent
 * and includes this file, which adds
 *   main: `PROG run POOL` creates POOL (removing an old one) and runs the
 *         writer; `PROG check POOL` runs the checker (pmemtest --check);
 *   pmemtest_check(image, dir): the library checker (--check-lib), built
 *         into a shared module from the same source (-DEX_MODULE).
 * Buggy variants are the same source built with -DBUG_<NAME>.
 * ex_maybe_stop(step) ends the writer abruptly (a process crash: every
 * store stays in the pool) at step $EX_STOP_AT, leaving work for recovery,
 * so the recovery itself can be traced: `pmemtest run --pool POOL ...
 * -- PROG check POOL`.
 * The pool's user area is EX_POOL_SIZE bytes (64 KiB, or $EX_POOL_KB).
 */
#ifndef PMEMTEST_EXAMPLE_H
#define PMEMTEST_EXAMPLE_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <rio.h>

#define EX_EXPORT __attribute__((visibility("default")))
#define EX_LINE 64

/* Report an invariant violation from ex_check. */
#define EX_FAIL(...)                                  \
	do {                                          \
		fprintf(stderr, __VA_ARGS__);         \
		fputc('\n', stderr);                  \
		return 1;                             \
	} while (0)

/* The 64-bit checksum of the stack, for records in the examples. */
static inline uint64_t
ex_csum(const void *p, size_t n)
{
	return rio_checksum(p, n, 0x4558);
}

static int ex_run(rio_pool *p, uint8_t *base) __attribute__((unused));

/* 0 if the n words of a record all hold the same version, else say so. */
static inline __attribute__((unused)) int
ex_words_equal(const char *who, const uint64_t *w, int n)
{
	for (int i = 1; i < n; i++)
		if (w[i] != w[0])
			EX_FAIL("%s: record torn: word 0 = %llu, word %d = %llu",
				who, (unsigned long long)w[0], i,
				(unsigned long long)w[i]);
	return 0;
}

static inline __attribute__((unused)) void
ex_maybe_stop(uint64_t step)
{
	const char *s = getenv("EX_STOP_AT");
	if (s != NULL && strtoull(s, NULL, 0) == step)
		_exit(0);
}
static int ex_check(rio_pool *p, uint8_t *base);

EX_EXPORT int pmemtest_check(const char *image, const char *dir);

EX_EXPORT int
pmemtest_check(const char *image, const char *dir)
{
	rio_pool *p;
	int rc;

	(void)dir;
	rc = rio_pool_open(image, 0, &p);
	if (rc) {
		fprintf(stderr, "open %s: %s: %s\n", image, rio_strerror(rc),
			rio_errormsg());
		return 1;
	}
	rc = ex_check(p, rio_pool_base(p));
	rio_pool_close(p);
	return rc;
}

#ifndef EX_MODULE
int
main(int argc, char **argv)
{
	rio_pool *p;
	const char *kb = getenv("EX_POOL_KB");
	size_t size = RIO_POOL_HDR_SIZE +
		(kb ? (size_t)atol(kb) : 64) * 1024;
	int rc;

	if (argc == 3 && strcmp(argv[1], "check") == 0)
		return pmemtest_check(argv[2], NULL) ? 1 : 0;
	if (argc != 3 || strcmp(argv[1], "run") != 0) {
		fprintf(stderr, "usage: %s run|check POOL\n", argv[0]);
		return 2;
	}
	unlink(argv[2]);
	rc = rio_pool_create(argv[2], size, 0, &p);
	if (rc) {
		fprintf(stderr, "create %s: %s: %s\n", argv[2],
			rio_strerror(rc), rio_errormsg());
		return 1;
	}
	rc = ex_run(p, rio_pool_base(p));
	rio_pool_close(p);
	return rc ? 1 : 0;
}
#endif

#endif /* PMEMTEST_EXAMPLE_H */
