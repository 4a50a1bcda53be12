/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend_none.c -- no atomicity, no durability: the floor
 *
 * Design:
 *  1. The database is plain anonymous memory, never made durable, and
 *     cannot be reopened.
 *  2. Every transaction call is an empty function reached through the same
 *     indirect call as the real backends, so "overhead per transaction"
 *     (time(backend) - time(none)) measures the backend and nothing else.
 *  3. There is nothing to roll back with (can_abort is false): workloads
 *     do not abort on it.
 */
#include <stdlib.h>
#include <sys/mman.h>

#include "tpcbench.h"

struct none_ctx {
	void *db;
	size_t size;
};

static int
none_open(const struct tb_opts *o, int stream, bool create, void **ctx,
	void **db)
{
	(void)stream;
	if (!create) {
		tb_err("none: a database in plain memory cannot be reopened");
		return -1;
	}
	struct none_ctx *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -1;
	c->size = o->db_size;
	c->db = mmap(NULL, c->size, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c->db == MAP_FAILED) {
		tb_err("none: %zu bytes of memory", c->size);
		free(c);
		return -1;
	}
	*ctx = c;
	*db = c->db;
	return 0;
}

static int
none_nop(void *ctx)
{
	(void)ctx;
	return 0;
}

static int
none_set_ranges(void *ctx, size_t n, const struct tb_range *r)
{
	(void)ctx;
	(void)n;
	(void)r;
	return 0;
}

static void
none_stats(void *ctx, struct tb_bstats *out)
{
	(void)ctx;
	*out = (struct tb_bstats){ 0 };
}

static int
none_close(void *ctx)
{
	struct none_ctx *c = ctx;
	munmap(c->db, c->size);
	free(c);
	return 0;
}

static int
none_files(void *ctx, const char **paths, int max)
{
	(void)ctx;
	(void)paths;
	(void)max;
	return 0;
}

const struct tb_backend tb_backend_none = {
	.name = "none",
	.open = none_open,
	.loaded = none_nop,
	.begin = none_nop,
	.set_ranges = none_set_ranges,
	.commit = none_nop,
	.abort = none_nop,
	.stats = none_stats,
	.close = none_close,
	.files = none_files,
};
