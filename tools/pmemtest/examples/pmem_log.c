/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pmem_log.c -- an append log written against plain libpmem
 *
 * Like append_log, but the program knows nothing of librio: it maps its
 * file with pmem_map_file and persists with pmem_memcpy_persist /
 * pmem_persist (pmem_msync when the file is not pmem).  pmemtest traces it
 * through the libpmem functions its preload library interposes.
 * Invariant: every entry below the tail verifies.
 *
 *   PROG run FILE      create FILE (1 MiB) and append
 *   PROG check FILE    check (also the library checker pmemtest_check)
 *
 * Variants:
 *   BUG_MARKER_FIRST     the tail is made durable before the entry
 *   BUG_MISSING_FLUSH    the entry is copied with memcpy, never flushed
 */
#include <errno.h>
#include <libpmem.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <xxhash.h>

#define EX_EXPORT __attribute__((visibility("default")))
#define SIZE (1u << 20)
#define STEPS 16

struct entry {
	uint64_t seq;
	uint64_t payload[6];
	uint64_t csum;
};

struct log {
	uint64_t tail;
	uint8_t pad[56];
	struct entry e[];
};

static int is_pmem;

static __attribute__((unused)) void
persist(const void *p, size_t n)
{
	if (is_pmem)
		pmem_persist(p, n);
	else
		pmem_msync(p, n);
}

EX_EXPORT int pmemtest_check(const char *image, const char *dir);

EX_EXPORT int
pmemtest_check(const char *image, const char *dir)
{
	size_t len;
	struct log *l;
	int rc = 0;

	(void)dir;
	l = pmem_map_file(image, 0, 0, 0, &len, NULL);
	if (l == NULL) {
		fprintf(stderr, "pmem_log: cannot map %s: %s\n", image,
			strerror(errno));
		return 1;
	}
	if (l->tail > (len - sizeof(*l)) / sizeof(struct entry))
		rc = 1;
	for (uint64_t i = 0; rc == 0 && i < l->tail; i++) {
		const struct entry *e = &l->e[i];
		if (e->seq != i || e->csum != XXH3_64bits(e, 56)) {
			fprintf(stderr, "pmem_log: entry %llu of %llu torn\n",
				(unsigned long long)i,
				(unsigned long long)l->tail);
			rc = 1;
		}
	}
	pmem_unmap(l, len);
	return rc;
}

#ifndef EX_MODULE
int
main(int argc, char **argv)
{
	size_t len;
	struct log *l;

	if (argc == 3 && strcmp(argv[1], "check") == 0)
		return pmemtest_check(argv[2], NULL) ? 1 : 0;
	if (argc != 3 || strcmp(argv[1], "run") != 0) {
		fprintf(stderr, "usage: %s run|check FILE\n", argv[0]);
		return 2;
	}
	unlink(argv[2]);
	l = pmem_map_file(argv[2], SIZE, PMEM_FILE_CREATE | PMEM_FILE_EXCL,
		0644, &len, &is_pmem);
	if (l == NULL) {
		fprintf(stderr, "pmem_map_file %s: %s\n", argv[2],
			strerror(errno));
		return 1;
	}
	for (uint64_t i = 0; i < STEPS; i++) {
		struct entry e = { .seq = i };
		for (int k = 0; k < 6; k++)
			e.payload[k] = i * 10 + (uint64_t)k;
		e.csum = XXH3_64bits(&e, 56);
#ifdef BUG_MARKER_FIRST
		l->tail = i + 1;
		persist(&l->tail, sizeof(l->tail));
		pmem_memcpy_persist(&l->e[i], &e, sizeof(e));
		continue;
#endif
#ifdef BUG_MISSING_FLUSH
		memcpy(&l->e[i], &e, sizeof(e));
#else
		/* The entry is durable before the tail covers it. */
		pmem_memcpy_persist(&l->e[i], &e, sizeof(e));
#endif
		l->tail = i + 1;
		persist(&l->tail, sizeof(l->tail));
	}
	pmem_unmap(l, len);
	return 0;
}
#endif
