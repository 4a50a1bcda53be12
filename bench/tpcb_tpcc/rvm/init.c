/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * init.c -- rvm_initialize, rvm_terminate, the log's creation, options,
 * descriptors and statistics
 *
 * Design:
 *  1. The library is a process-wide singleton, as RVM is: one log, opened
 *     by rvm_initialize, which recovers it (truncate.c) before returning.
 *  2. States: UNINIT --rvm_initialize--> READY --rvm_terminate--> UNINIT;
 *     READY --I/O failure--> FAILED (sticky, rvm__fail) --rvm_terminate-->
 *     UNINIT.  rvm_terminate refuses while transactions are open.
 *  3. rvm_create_log writes the whole log (zeros, then both status blocks)
 *     and syncs before the log is usable; an existing file is never
 *     overwritten.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rvm_int.h"

struct rvm__state rvm__g = {
	.lock = PTHREAD_MUTEX_INITIALIZER,
	.log_fd = -1,
};

/* ---- descriptors ---- */

void
rvm_init_tid(rvm_tid_t *tid)
{
	memset(tid, 0, sizeof(*tid));
	tid->struct_id = rvm_tid_id;
}

rvm_tid_t *
rvm_malloc_tid(void)
{
	rvm_tid_t *t = malloc(sizeof(*t));
	if (t) {
		rvm_init_tid(t);
		t->from_heap = rvm_true;
	}
	return t;
}

rvm_tid_t *
rvm_copy_tid(rvm_tid_t *tid)
{
	rvm_tid_t *t = malloc(sizeof(*t));
	if (t) {
		*t = *tid;
		t->from_heap = rvm_true;
	}
	return t;
}

void
rvm_free_tid(rvm_tid_t *tid)
{
	if (tid && tid->from_heap)
		free(tid);
}

void
rvm_init_options(rvm_options_t *o)
{
	memset(o, 0, sizeof(*o));
	o->struct_id = rvm_options_id;
	o->truncate = TRUNCATE;
	o->flush_buf_len = FLUSH_BUF_LEN;
	o->create_log_mode = 0644;
}

rvm_options_t *
rvm_malloc_options(void)
{
	rvm_options_t *o = malloc(sizeof(*o));
	if (o) {
		rvm_init_options(o);
		o->from_heap = rvm_true;
	}
	return o;
}

rvm_options_t *
rvm_copy_options(rvm_options_t *options)
{
	rvm_options_t *o = malloc(sizeof(*o));
	if (o) {
		*o = *options;
		o->from_heap = rvm_true;
	}
	return o;
}

void
rvm_free_options(rvm_options_t *options)
{
	if (options && options->from_heap)
		free(options);
}

void
rvm_init_region(rvm_region_t *r)
{
	memset(r, 0, sizeof(*r));
	r->struct_id = rvm_region_id;
}

rvm_region_t *
rvm_malloc_region(void)
{
	rvm_region_t *r = malloc(sizeof(*r));
	if (r) {
		rvm_init_region(r);
		r->from_heap = rvm_true;
	}
	return r;
}

rvm_region_t *
rvm_copy_region(rvm_region_t *region)
{
	rvm_region_t *r = malloc(sizeof(*r));
	if (r) {
		*r = *region;
		r->from_heap = rvm_true;
	}
	return r;
}

void
rvm_free_region(rvm_region_t *region)
{
	if (region && region->from_heap)
		free(region);
}

/* ---- options ---- */

static rvm_return_t
check_options(const rvm_options_t *o)
{
	if (o->struct_id != rvm_options_id)
		return rvm__err(RVM_EOPTIONS, "options not initialized "
			"(rvm_init_options)");
	if (o->truncate < 0 || o->truncate > 100)
		return rvm__err(RVM_EOPTIONS, "truncate %ld%% is not 0..100",
			o->truncate);
	if (o->pager != NULL)
		return rvm__err(RVM_EPAGER, "external pagers are not supported");
	return RVM_SUCCESS;
}

/* lock held */
static rvm_return_t
apply_options(const rvm_options_t *o)
{
	rvm__g.truncate_pct = o->truncate ? o->truncate : TRUNCATE;
	size_t want = o->flush_buf_len ? o->flush_buf_len : FLUSH_BUF_LEN;
	if (want > rvm__g.buf_cap && rvm__g.buf_len == 0) {
		uint8_t *b = realloc(rvm__g.buf, want);
		if (b == NULL)
			return rvm__err(RVM_ENO_MEMORY, "log buffer of %zu", want);
		rvm__g.buf = b;
		rvm__g.buf_cap = want;
	}
	return RVM_SUCCESS;
}

rvm_return_t
rvm_set_options(rvm_options_t *options)
{
	if (options == NULL)
		return RVM_SUCCESS;
	rvm_return_t rc = check_options(options);
	if (rc)
		return rc;
	pthread_mutex_lock(&rvm__g.lock);
	rc = rvm__usable();
	if (rc == RVM_SUCCESS)
		rc = apply_options(options);
	pthread_mutex_unlock(&rvm__g.lock);
	return rc;
}

rvm_return_t
rvm_query(rvm_options_t *options, rvm_region_t *region)
{
	(void)region;
	if (options == NULL || options->struct_id != rvm_options_id)
		return rvm__err(RVM_EOPTIONS, "options not initialized");
	pthread_mutex_lock(&rvm__g.lock);
	rvm_return_t rc = rvm__usable();
	if (rc == RVM_SUCCESS) {
		options->truncate = rvm__g.truncate_pct;
		options->log_empty = rvm__g.tail == 0 && rvm__g.buf_len == 0 ?
			rvm_true : rvm_false;
		options->n_uncommit = rvm__g.n_uncommit;
		options->flush_buf_len = rvm__g.buf_cap;
	}
	pthread_mutex_unlock(&rvm__g.lock);
	return rc;
}

rvm_return_t
rvm_statistics(const char *version, rvm_statistics_t *statistics)
{
	if (version == NULL || strcmp(version, RVM_STATISTICS_VERSION) != 0)
		return rvm__err(RVM_ESTAT_VERSION_SKEW, "statistics version");
	if (statistics == NULL)
		return rvm__err(RVM_ESTATISTICS, "NULL statistics record");
	pthread_mutex_lock(&rvm__g.lock);
	*statistics = rvm__g.stats;
	pthread_mutex_unlock(&rvm__g.lock);
	statistics->struct_id = rvm_statistics_id;
	statistics->from_heap = rvm_false;
	return RVM_SUCCESS;
}

/* ---- the log ---- */

static rvm_return_t
create_log(const char *path, uint64_t log_size, long mode)
{
	if (log_size < RVM_LOG_MIN_SIZE || log_size % 8)
		return rvm__err(RVM_EOPTIONS, "log size %llu: at least %u and a "
			"multiple of 8", (unsigned long long)log_size,
			RVM_LOG_MIN_SIZE);
	int fd = rvm__io->open(path, O_RDWR | O_CREAT | O_EXCL,
		(mode_t)(mode ? mode : 0644));
	if (fd < 0)
		return rvm__err(fd == -EEXIST ? RVM_ELOG : RVM_EIO,
			"creating log %s: %s", path, strerror(-fd));
	struct rvm_log_status s[2];
	memset(s, 0, sizeof(s));
	for (int i = 0; i < 2; i++) {
		s[i].magic = RVM_LOG_MAGIC;
		s[i].major = RVM_LOG_MAJOR;
		s[i].minor = RVM_LOG_MINOR;
		s[i].log_size = log_size;
		s[i].status_seq = (uint64_t)i;
		s[i].generation = 1;
		s[i].first_seq = 1;
		s[i].checksum = rio_checksum(&s[i],
			offsetof(struct rvm_log_status, checksum), 0);
	}
	/* The record area is written out (zeros), not left sparse: RVM's log
	 * is a preallocated device, and a sync that must also allocate
	 * blocks would charge file-system metadata to every commit. */
	int e = rvm__io->ftruncate(fd, (off_t)(RVM_LOG_DATA_OFF + log_size));
	size_t chunk = 1 << 20;
	void *zero = e == 0 ? calloc(1, chunk) : NULL;
	if (e == 0 && zero == NULL)
		e = -ENOMEM;
	for (uint64_t off = 0; e == 0 && off < log_size; off += chunk)
		e = rvm__write_full(fd, zero, log_size - off < chunk ?
			(size_t)(log_size - off) : chunk, RVM_LOG_DATA_OFF + off);
	free(zero);
	if (e == 0)
		e = rvm__write_full(fd, s, sizeof(s), 0);
	/* The status blocks must be durable before the log is used. */
	if (e == 0)
		e = rvm__io->fdatasync(fd);
	rvm__io->close(fd);
	if (e) {
		rvm__io->unlink(path);
		return rvm__err(RVM_EIO, "writing log %s: %s", path, strerror(-e));
	}
	return RVM_SUCCESS;
}

rvm_return_t
rvm_create_log(rvm_options_t *options, rvm_offset_t *log_len, long mode)
{
	if (options == NULL || options->struct_id != rvm_options_id ||
	    options->log_dev == NULL)
		return rvm__err(RVM_EOPTIONS, "options without log_dev");
	if (log_len == NULL)
		return rvm__err(RVM_EOPTIONS, "NULL log length");
	return create_log(options->log_dev, log_len->low, mode);
}

static void
close_all(void)
{
	struct rvm__state *g = &rvm__g;
	for (int i = 0; i < RVM_MAX_SEGMENTS; i++) {
		if (g->segs[i].fd >= 0)
			rvm__io->close(g->segs[i].fd);
		g->segs[i].fd = -1;
		g->segs[i].dirty = false;
	}
	if (g->log_fd >= 0)
		rvm__io->close(g->log_fd);
	g->log_fd = -1;
	while (g->regions) {
		struct rvm__region *r = g->regions;
		g->regions = r->next;
		/* The memory stays (RVM leaves mapped regions to the program);
		 * only the bookkeeping goes. */
		free(r);
	}
	while (g->free_tx) {
		struct rvm__tx *t = g->free_tx;
		g->free_tx = t->next_free;
		free(t->ranges);
		free(t->undo);
		free(t);
	}
	free(g->buf);
	g->buf = NULL;
	g->buf_len = g->buf_cap = 0;
}

rvm_return_t
rvm_initialize(const char *version, rvm_options_t *opts)
{
	struct rvm__state *g = &rvm__g;
	if (version == NULL || strcmp(version, RVM_VERSION) != 0)
		return rvm__err(RVM_EVERSION_SKEW, "library is \"%s\"",
			RVM_VERSION);
	if (opts == NULL || opts->log_dev == NULL)
		return rvm__err(RVM_EOPTIONS, "options must name log_dev");
	rvm_return_t rc = check_options(opts);
	if (rc)
		return rc;
	if (strlen(opts->log_dev) >= sizeof(g->log_path))
		return rvm__err(RVM_ENAME_TOO_LONG, "log_dev");
	pthread_mutex_lock(&g->lock);
	if (g->initialized) {
		pthread_mutex_unlock(&g->lock);
		return rvm__err(RVM_EINIT, "already initialized");
	}
	if (opts->create_log_file && access(opts->log_dev, F_OK) != 0 &&
	    (rc = create_log(opts->log_dev, opts->create_log_size.low,
		     opts->create_log_mode)))
		goto out;
	int fd = rvm__io->open(opts->log_dev, O_RDWR, 0);
	if (fd < 0) {
		rc = rvm__err(RVM_ELOG, "opening log %s: %s", opts->log_dev,
			strerror(-fd));
		goto out;
	}
	memset(&g->stats, 0, sizeof(g->stats));
	g->fatal = RVM_SUCCESS;
	g->log_fd = fd;
	strcpy(g->log_path, opts->log_dev);
	for (int i = 0; i < RVM_MAX_SEGMENTS; i++)
		g->segs[i].fd = -1;
	off_t size = rvm__io->size(fd);
	if ((rc = rvm__status_read(fd, &g->status)))
		goto fail;
	if (size < 0 || (uint64_t)size < RVM_LOG_DATA_OFF + g->status.log_size) {
		rc = rvm__err(RVM_ELOG, "log %s is shorter than its status "
			"block says", opts->log_dev);
		goto fail;
	}
	g->tail = 0;
	g->next_seq = g->status.first_seq;
	if ((rc = apply_options(opts)) || (rc = rvm__recover()))
		goto fail;
	if (g->fatal) {
		rc = g->fatal;
		goto fail;
	}
	g->n_uncommit = 0;
	g->initialized = true;
	goto out;
fail:
	close_all();
	g->fatal = RVM_SUCCESS;
out:
	pthread_mutex_unlock(&g->lock);
	return rc;
}

rvm_return_t
rvm_terminate(void)
{
	struct rvm__state *g = &rvm__g;
	pthread_mutex_lock(&g->lock);
	rvm_return_t rc = RVM_SUCCESS;
	if (!g->initialized) {
		rc = rvm__err(RVM_EINIT, "rvm_initialize has not been called");
		goto out;
	}
	if (g->n_uncommit) {
		rc = rvm__err(RVM_EUNCOMMIT, "%ld transactions are open",
			g->n_uncommit);
		goto out;
	}
	/* Buffered no_flush commits become durable now (as in RVM). */
	if (!g->fatal)
		rc = rvm__log_write(true);
	else
		rc = g->fatal;
	close_all();
	g->initialized = false;
	g->fatal = RVM_SUCCESS;
out:
	pthread_mutex_unlock(&g->lock);
	return rc;
}
