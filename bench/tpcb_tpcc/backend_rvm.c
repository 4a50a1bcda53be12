/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * backend_rvm.c -- the RVM baseline, on disk ("rvm") and on the Rio file
 * cache ("rvm-rio")
 *
 * Design:
 *  1. Written against rvm.h (RVM 1.3's interface), so the real RVM could
 *     be linked instead of the baseline; rvm-rio also uses the baseline's
 *     file-access seam, rvm_io.h (with the real RVM, run rvm-rio under
 *     librio-fs.so instead).
 *  2. Configuration as in the thesis: one log whose record area is 10% of
 *     the database, truncated when it is full; every transaction begins in
 *     restore mode; commits are flush mode, or -- group commit of G --
 *     G-1 no_flush commits followed by one flush commit, which writes all
 *     G records with one write and one fdatasync.
 *  3. Each stream maps its own data file; the streams share the one log,
 *     as RVM's threads do.
 *  4. rvm-rio is the same RVM with its log and data files in the Rio file
 *     cache, as in the thesis: the files live in a directory under
 *     --rio-dir (a disk, behind the cache), the cache pool in --pmem-dir,
 *     in the persistence domain of --domain.  The table rio_ops maps the
 *     RVM library's descriptors to rio_fc_file handles: a log write is
 *     durable when rio_fc_pwrite returns, so RVM's fdatasync is free
 *     (rio_fc_fsync).  rvm_map still copies the data file into the
 *     process (RVM's architecture), so the database is held twice, in the
 *     process and in the cache -- and, once written back, a third time in
 *     the kernel's page cache: the RSS and footprint columns show it.
 *  5. The cache is sized to hold the log and every data file with room to
 *     spare (rio_pool_size_for), and may be 90% dirty, so truncation does
 *     not wait for the disk; the background thread writes blocks back
 *     about a second after they were dirtied, as Rio's cache did.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rio_fc.h"
#include "rvm.h"
#include "rvm_io.h"
#include "tpcbench.h"

static struct {
	char work[4096];  /* removed at teardown */
	char dir[4200];   /* the log and data files */
	char log[4300];
	char pool[4300];  /* rvm-rio: the cache pool */
	int group;
	size_t db_size;
	uint64_t log_size;
	int streams;
} R;

struct rvm_ctx {
	rvm_region_t region;
	rvm_tid_t tid;
	char path[4400];
	uint64_t commits;
	int stream;
};

static int
fail(const char *what, rvm_return_t rc)
{
	tb_err("rvm: %s: %s: %s", what, rvm_return(rc), rvm_errormsg());
	return -1;
}

/* RVM itself, with its log in R.dir (the directory exists). */
static int
setup_rvm(const struct tb_opts *o)
{
	snprintf(R.log, sizeof(R.log), "%s/log", R.dir);
	R.group = o->group > 0 ? o->group : 1;
	long page = sysconf(_SC_PAGESIZE);
	R.db_size = (o->db_size + (size_t)page - 1) / (size_t)page * (size_t)page;
	R.streams = o->threads;
	rvm_options_t opt;
	rvm_init_options(&opt);
	opt.log_dev = R.log;
	opt.truncate = 100; /* truncate when the next write does not fit */
	opt.create_log_file = rvm_true;
	uint64_t log = R.db_size * (uint64_t)R.streams / 10;
	log = log < 64 * 1024 ? 64 * 1024 : (log + 7) & ~7ull;
	opt.create_log_size = RVM_MK_OFFSET(0, log);
	R.log_size = log;
	rvm_return_t rc = RVM_INIT(&opt);
	return rc ? fail("rvm_initialize", rc) : 0;
}

static int
rvm_setup_disk(const struct tb_opts *o)
{
	if (tb_workdir(o, R.work, sizeof(R.work), o->rvm_dir))
		return -1;
	snprintf(R.dir, sizeof(R.dir), "%s", R.work);
	return setup_rvm(o);
}

static int
rvm_teardown_disk(bool remove)
{
	rvm_return_t rc = rvm_terminate();
	if (remove)
		tb_rmtree(R.work);
	return rc ? fail("rvm_terminate", rc) : 0;
}

/* ---- rvm-rio: RVM's file access through the Rio file cache ---- */

#define RIO_FDS 64 /* RVM_MAX_SEGMENTS data files + the log, with room */

static struct {
	rio_fc_cache *cache;
	pthread_mutex_t lock; /* slot allocation */
	rio_fc_file *fd[RIO_FDS];
} F = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* A librio code as an errno (RVM speaks errno); the message says more. */
static int
rio_errno(int rc)
{
	if (rc < 0 && rc > -4096)
		return -rc;
	tb_err("rvm-rio: %s", rio_errormsg());
	return EIO;
}

static rio_fc_file *
rio_file(int fd)
{
	return fd >= 0 && fd < RIO_FDS ? F.fd[fd] : NULL;
}

static int
rio_open(const char *path, int flags, mode_t mode)
{
	rio_fc_file *f;
	int rc = rio_fc_open_mode(F.cache, path, flags, mode, &f);
	if (rc)
		return -rio_errno(rc);
	pthread_mutex_lock(&F.lock);
	int fd = 0;
	while (fd < RIO_FDS && F.fd[fd] != NULL)
		fd++;
	if (fd < RIO_FDS)
		F.fd[fd] = f;
	pthread_mutex_unlock(&F.lock);
	if (fd == RIO_FDS) {
		rio_fc_close(f);
		return -EMFILE;
	}
	return fd;
}

static ssize_t
rio_pread(int fd, void *buf, size_t len, off_t off)
{
	rio_fc_file *f = rio_file(fd);
	size_t n = 0;
	int rc = f ? rio_fc_pread(f, buf, len, (uint64_t)off, &n) : -EBADF;
	if (rc) {
		errno = rio_errno(rc);
		return -1;
	}
	return (ssize_t)n;
}

/* Returns once the bytes are durable in the cache pool. */
static ssize_t
rio_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	rio_fc_file *f = rio_file(fd);
	int rc = f ? rio_fc_pwrite(f, buf, len, (uint64_t)off) : -EBADF;
	if (rc) {
		errno = rio_errno(rc);
		return -1;
	}
	return (ssize_t)len;
}

/* Free: every write was durable when it returned. */
static int
rio_fdatasync(int fd)
{
	rio_fc_file *f = rio_file(fd);
	int rc = f ? rio_fc_fsync(f) : -EBADF;
	return rc ? -rio_errno(rc) : 0;
}

static int
rio_ftruncate(int fd, off_t len)
{
	rio_fc_file *f = rio_file(fd);
	int rc = f ? rio_fc_truncate(f, (uint64_t)len) : -EBADF;
	return rc ? -rio_errno(rc) : 0;
}

static off_t
rio_size(int fd)
{
	rio_fc_file *f = rio_file(fd);
	uint64_t size;
	int rc = f ? rio_fc_size(f, &size) : -EBADF;
	return rc ? -rio_errno(rc) : (off_t)size;
}

static int
rio_close(int fd)
{
	rio_fc_file *f = rio_file(fd);
	if (f == NULL)
		return -EBADF;
	pthread_mutex_lock(&F.lock);
	F.fd[fd] = NULL;
	pthread_mutex_unlock(&F.lock);
	int rc = rio_fc_close(f);
	return rc ? -rio_errno(rc) : 0;
}

static int
rio_unlink(const char *path)
{
	int rc = rio_fc_unlink(F.cache, path);
	return rc ? -rio_errno(rc) : 0;
}

#ifndef TB_BROKEN_RIO_LAZY
static const struct rvm_io_ops rio_ops = {
	.open = rio_open,
	.pread = rio_pread,
	.pwrite = rio_pwrite,
	.fdatasync = rio_fdatasync,
	.ftruncate = rio_ftruncate,
	.size = rio_size,
	.close = rio_close,
	.unlink = rio_unlink,
};
#else
/* Broken on purpose (tests/bench/tb_crash_test.cpp must catch it): a
 * write is acknowledged at once but reaches the cache only with the next
 * call, so a crash loses the last acknowledged write.  The process itself
 * sees every write: reads, size changes and closes settle it first.  One
 * thread only. */
static struct {
	int fd;
	void *buf;
	size_t len;
	off_t off;
} late = { .fd = -1 };

static int
settle(void)
{
	int fd = late.fd;
	late.fd = -1;
	ssize_t n = fd < 0 ? 0 : rio_pwrite(fd, late.buf, late.len, late.off);
	free(late.buf);
	late.buf = NULL;
	return n < 0 ? -errno : 0;
}

static ssize_t
lazy_pwrite(int fd, const void *buf, size_t len, off_t off)
{
	int rc = settle();
	if (rc == 0 && (late.buf = malloc(len)) == NULL)
		rc = -ENOMEM;
	if (rc) {
		errno = -rc;
		return -1;
	}
	memcpy(late.buf, buf, len);
	late.fd = fd;
	late.len = len;
	late.off = off;
	return (ssize_t)len;
}

static ssize_t
lazy_pread(int fd, void *buf, size_t len, off_t off)
{
	int rc = settle();
	if (rc) {
		errno = -rc;
		return -1;
	}
	return rio_pread(fd, buf, len, off);
}

static int
lazy_ftruncate(int fd, off_t len)
{
	int rc = settle();
	return rc ? rc : rio_ftruncate(fd, len);
}

static off_t
lazy_size(int fd)
{
	int rc = settle();
	return rc ? rc : rio_size(fd);
}

static int
lazy_close(int fd)
{
	int rc = settle();
	int e = rio_close(fd);
	return rc ? rc : e;
}

static const struct rvm_io_ops rio_ops = {
	.open = rio_open,
	.pread = lazy_pread,
	.pwrite = lazy_pwrite,
	.fdatasync = rio_fdatasync,
	.ftruncate = lazy_ftruncate,
	.size = lazy_size,
	.close = lazy_close,
	.unlink = rio_unlink,
};
#endif

/* Every data file and the log, each block once more for the copy a write
 * makes before it commits, and 8 MiB for the cache's own tables. */
static size_t
rio_pool_size_for(const struct tb_opts *o)
{
	uint64_t files = (uint64_t)o->db_size * (uint64_t)o->threads * 11 / 10;
	uint64_t size = files + files / 4 + (8u << 20);
	return (size_t)((size + 4095) & ~4095ull);
}

static int
rvm_setup_rio(const struct tb_opts *o)
{
	char pooldir[4096];
	if (tb_workdir(o, R.work, sizeof(R.work), o->rio_dir) ||
	    tb_workdir(o, pooldir, sizeof(pooldir), o->pmem_dir))
		return -1;
	/* The files one level down: the pool must not be inside the cache's
	 * directory, and --rio-dir may be --pmem-dir. */
	snprintf(R.dir, sizeof(R.dir), "%s/rvm-rio", R.work);
	snprintf(R.pool, sizeof(R.pool), "%s/rvm-rio.fc", pooldir);
	if (tb_mkdirs(R.dir))
		return -1;
	struct rio_fc_opts co = {
		.flags = RIO_FC_CREATE,
		.pool_size = rio_pool_size_for(o),
		.pool_flags = tb_rio_force_flag(o->domain) | RIO_NO_SIGNALS,
		.dirty_max_pct = 90,
	};
	int rc = rio_fc_cache_open(R.pool, R.dir, &co, &F.cache);
	if (rc) {
		tb_err("rvm-rio: opening the file cache %s for %s: %s", R.pool,
			R.dir, rio_errormsg());
		return -1;
	}
	rvm_return_t rrc = rvm_set_io(&rio_ops);
	if (rrc)
		return fail("rvm_set_io", rrc);
	return setup_rvm(o);
}

static int
rvm_teardown_rio(bool remove)
{
	int rc = 0;
	rvm_return_t rrc = rvm_terminate();
	if (rrc)
		rc = fail("rvm_terminate", rrc);
	if (remove && rrc == RVM_SUCCESS) {
		/* Nothing left to write back: drop the files from the cache. */
		char path[4400];
		for (int i = 0; i < R.streams; i++) {
			snprintf(path, sizeof(path), "%s/data.%d", R.dir, i);
			rio_fc_unlink(F.cache, path);
		}
		rio_fc_unlink(F.cache, R.log);
	}
	rvm_set_io(NULL);
	if (F.cache) {
		/* Everything written back to the disk files, the cache clean. */
		int e = rio_fc_cache_close(F.cache);
		if (e) {
			tb_err("rvm-rio: closing the file cache: %s",
				rio_errormsg());
			rc = -1;
		}
		F.cache = NULL;
	}
	if (remove) {
		unlink(R.pool);
		tb_rmtree(R.work);
		char *slash = strrchr(R.pool, '/');
		if (slash) {
			*slash = 0;
			rmdir(R.pool); /* the pool's work directory, if empty */
		}
	}
	return rc;
}

static int
rvm_open(const struct tb_opts *o, int stream, bool create, void **ctx,
	void **db)
{
	(void)o;
	(void)create; /* the data file is the database either way */
	struct rvm_ctx *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return -1;
	snprintf(c->path, sizeof(c->path), "%s/data.%d", R.dir, stream);
	rvm_init_region(&c->region);
	c->region.data_dev = c->path;
	c->region.length = R.db_size;
	rvm_init_tid(&c->tid);
	c->stream = stream;
	rvm_return_t rc = rvm_map(&c->region, NULL);
	if (rc) {
		free(c);
		return fail("rvm_map", rc);
	}
	*ctx = c;
	*db = c->region.vmaddr;
	return 0;
}

/* The populated database goes to the data file through RVM itself:
 * no_restore transactions of 1 MiB, then a flush and a truncation. */
static int
rvm_loaded(void *ctx)
{
	struct rvm_ctx *c = ctx;
	/* Records well inside the log (it is 10% of the database). */
	size_t chunk = R.log_size / 4 < (1 << 20) ? R.log_size / 4 : 1 << 20;
	chunk &= ~(size_t)4095;
	for (size_t off = 0; off < R.db_size; off += chunk) {
		size_t n = R.db_size - off < chunk ? R.db_size - off : chunk;
		rvm_return_t rc = rvm_begin_transaction(&c->tid, no_restore);
		if (rc == RVM_SUCCESS)
			rc = rvm_set_range(&c->tid, c->region.vmaddr + off, n);
		if (rc == RVM_SUCCESS)
			rc = rvm_end_transaction(&c->tid, no_flush);
		if (rc)
			return fail("loading the database", rc);
	}
	rvm_return_t rc = rvm_truncate();
	return rc ? fail("rvm_truncate", rc) : 0;
}

static int
rvm_begin(void *ctx)
{
	struct rvm_ctx *c = ctx;
	rvm_return_t rc = rvm_begin_transaction(&c->tid, restore);
	return rc ? fail("rvm_begin_transaction", rc) : 0;
}

static int
rvm_ranges(void *ctx, size_t n, const struct tb_range *r)
{
	struct rvm_ctx *c = ctx;
	for (size_t i = 0; i < n; i++) {
		rvm_return_t rc = rvm_set_range(&c->tid, r[i].addr, r[i].len);
		if (rc)
			return fail("rvm_set_range", rc);
	}
	return 0;
}

static int
rvm_commit(void *ctx)
{
	struct rvm_ctx *c = ctx;
	rvm_mode_t mode = ++c->commits % (uint64_t)R.group == 0 ? flush :
		no_flush;
	rvm_return_t rc = rvm_end_transaction(&c->tid, mode);
	return rc ? fail("rvm_end_transaction", rc) : 0;
}

static int
rvm_abort(void *ctx)
{
	struct rvm_ctx *c = ctx;
#ifndef TB_BROKEN_NO_ABORT
	rvm_return_t rc = rvm_abort_transaction(&c->tid);
#else
	/* Broken on purpose (bench-smoke proves the invariant checks catch
	 * it): an "abort" that keeps the transaction's stores. */
	rvm_return_t rc = rvm_end_transaction(&c->tid, no_flush);
#endif
	return rc ? fail("rvm_abort_transaction", rc) : 0;
}

static void
rvm_stats(void *ctx, struct tb_bstats *out)
{
	struct rvm_ctx *c = ctx;
	*out = (struct tb_bstats){ 0 };
	rvm_statistics_t s;
	if (c->stream != 0 || rvm_statistics(RVM_STATISTICS_VERSION, &s))
		return; /* one log: stream 0 reports it */
	out->has_log = out->has_syncs = true;
	out->bytes_logged = s.bytes_logged;
	out->syncs = s.n_syncs;
	out->log_writes = s.n_flush;
	out->truncations = s.n_truncation;
}

static int
rvm_close(void *ctx)
{
	struct rvm_ctx *c = ctx;
	rvm_return_t rc = rvm_unmap(&c->region);
	free(c);
	return rc ? fail("rvm_unmap", rc) : 0;
}

static int
rvm_files(void *ctx, const char **paths, int max)
{
	struct rvm_ctx *c = ctx;
	int n = 0;
	if (max > n)
		paths[n++] = c->path;
	if (c->stream == 0 && max > n)
		paths[n++] = R.log;
	if (c->stream == 0 && F.cache != NULL && max > n)
		paths[n++] = R.pool; /* rvm-rio: the cache holds a copy too */
	return n;
}

/* rvm and rvm-rio differ only in where their files are. */
#define RVM_BACKEND(NAME, SETUP, TEARDOWN)                              \
	{                                                               \
		.name = NAME, .can_abort = true, .setup = SETUP,        \
		.teardown = TEARDOWN, .open = rvm_open,                 \
		.loaded = rvm_loaded, .begin = rvm_begin,               \
		.set_ranges = rvm_ranges, .commit = rvm_commit,         \
		.abort = rvm_abort, .stats = rvm_stats,                 \
		.close = rvm_close, .files = rvm_files,                 \
	}

const struct tb_backend tb_backend_rvm =
	RVM_BACKEND("rvm", rvm_setup_disk, rvm_teardown_disk);
const struct tb_backend tb_backend_rvm_rio =
	RVM_BACKEND("rvm-rio", rvm_setup_rio, rvm_teardown_rio);
