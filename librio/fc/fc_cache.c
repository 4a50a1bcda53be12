/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_cache.c -- a file cache: create, format, validate, open, close, stats
 *
 * A cache is a rio pool with the layout name "rio.fc" (fc_layout.h), one
 * directory whose files it caches, and the volatile state of fc_int.h.
 *
 * Cache lifecycle
 *   rio_fc_cache_open:  pool open (or create + format), flock, validate
 *                       the superblock, rio__fc_load (validates the rest,
 *                       writes nothing), rio__fc_recover (first write:
 *                       superblock MOUNTED), write-back thread  -> OPEN
 *   rio_fc_cache_close: thread stopped, handles closed, everything written
 *                       back, superblock CLEAN, pool closed     -> freed
 *
 * Invariants
 *   C1. The geometry is a function of the pool size only (fc_geometry), so
 *       a superblock torn while formatting is recognised: the file table
 *       and descriptors it would describe are all zero, and formatting is
 *       simply done again.  Anything else that fails validation is
 *       RIO_ECORRUPT and nothing is written.
 *   C2. One process at a time: the pool file is flock()ed for as long as
 *       the cache is open.
 *   C3. A cache used in the child of a fork fails every call with
 *       RIO_EFORKED and writes nothing (the pool is the parent's).
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "fc_int.h"

#define FC_DEFAULT_POOL (64ull << 20)
#define FC_MIN_POOL (256u << 10)
#define FC_DEFAULT_WB_MS 1000u
#define FC_DEFAULT_DIRTY_PCT 50u

RIO_STATIC_ASSERT(offsetof(struct rio_fc_stats, recovered) ==
	21 * sizeof(uint64_t), "counters first, all uint64_t");

/* Bumped in the child after fork (single-threaded then), compared by the
 * cache's calls: relaxed everywhere, the child's own thread is the only
 * one that can see the new value. */
static uint64_t fork_gen;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void
after_fork_child(void)
{
	__atomic_add_fetch(&fork_gen, 1, __ATOMIC_RELAXED);
}

static void
register_atfork(void)
{
	/* urcu-bp keeps a registry lock that a fork must not catch held. */
	pthread_atfork(urcu_bp_before_fork, urcu_bp_after_fork_parent,
		urcu_bp_after_fork_child);
	pthread_atfork(NULL, NULL, after_fork_child);
}

bool
rio__fc_forked(const rio_fc_cache *c)
{
	return c->fork_gen != __atomic_load_n(&fork_gen, __ATOMIC_RELAXED);
}

int
rio__fc_check(const rio_fc_cache *c)
{
	if (c == NULL)
		return rio__err(-EINVAL, "file cache is NULL");
	if (rio__fc_forked(c))
		return rio__err(RIO_EFORKED,
			"file cache %s was opened by a parent process: a "
			"child must open its own", rio_pool_path(c->pool));
	if (rio_pool_error(c->pool))
		return rio__err(RIO_EFATAL,
			"file cache %s: the pool's persistence failed; data "
			"may not be durable: close and reopen",
			rio_pool_path(c->pool));
	return 0;
}

void
rio__fc_deadline(unsigned ms, struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += ms / 1000;
	ts->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

static uint64_t
round_up(uint64_t v, uint64_t a)
{
	return (v + a - 1) / a * a;
}

int
rio__fc_geometry(uint64_t user, struct fc_geometry *g)
{
	uint64_t nf = user >> 18, avail, nb;

	if (user < FC_MIN_POOL - RIO_POOL_HDR_SIZE)
		return -EINVAL;
	if (nf < 64)
		nf = 64;
	if (nf > 65536)
		nf = 65536;
	g->nfiles = (uint32_t)nf;
	g->files_off = RIO_FC_SB_SIZE;
	g->descs_off = g->files_off + round_up(nf * RIO_FC_FREC_SIZE, 4096);
	avail = user - g->descs_off;
	nb = avail / (FC_BS + RIO_FC_DESC_SIZE);
	while (nb > 0 && round_up(nb * RIO_FC_DESC_SIZE, 4096) + nb * FC_BS > avail)
		nb--;
	if (nb < FC_MIN_BLOCKS || nb >= FC_NONE)
		return -EINVAL;
	g->nblocks = nb;
	g->data_off = g->descs_off + round_up(nb * RIO_FC_DESC_SIZE, 4096);
	return 0;
}

static uint64_t
sb_checksum(const struct rio_fc_super *sb)
{
	/* Everything but the state word (a commit word of its own). */
	uint64_t h = rio_checksum(sb, offsetof(struct rio_fc_super, state),
		RIO_FC_SB_CSUM_SEED);
	return rio_checksum(sb->dir,
		offsetof(struct rio_fc_super, checksum) -
			offsetof(struct rio_fc_super, dir), h);
}

/* The superblock's identity and versioning (librio/hdr.c, H1..H8). */
static const struct rio__hdr_rule sb_rule = {
	.what = "file cache",
	.magic = RIO_FC_MAGIC,
	.magic_len = 8,
	.major = RIO_FC_MAJOR,
	.minor = RIO_FC_MINOR,
	.fields = RIO__HDR_INCOMPAT | RIO__HDR_COMPAT,
	.incompat_known = RIO_FC_INCOMPAT_KNOWN,
	.compat_known = RIO_FC_COMPAT_KNOWN,
	.code = {
		[RIO__HDR_BADMAGIC] = RIO_EBADMAGIC,
		[RIO__HDR_BADCSUM] = RIO_ECORRUPT,
		[RIO__HDR_VERSION] = RIO_EVERSION,
		[RIO__HDR_FEATURE] = RIO_EFEATURE,
		[RIO__HDR_RESERVED] = RIO_ECORRUPT,
	},
};

/* Write the superblock of an empty cache (C1). */
static int
format(rio_fc_cache *c, const struct fc_geometry *g, const char *dir)
{
	struct rio_fc_super *sb = calloc(1, sizeof(*sb));

	if (sb == NULL)
		return rio__err(-ENOMEM, "out of memory");
	memcpy(sb->magic, RIO_FC_MAGIC, sizeof(sb->magic));
	sb->major = RIO_FC_MAJOR;
	sb->minor = RIO_FC_MINOR;
	sb->block_size = RIO_FC_BLOCK;
	sb->nfiles = g->nfiles;
	sb->dir_len = (uint32_t)strlen(dir);
	sb->nblocks = g->nblocks;
	sb->files_off = g->files_off;
	sb->descs_off = g->descs_off;
	sb->data_off = g->data_off;
	sb->user_size = rio_pool_size(c->pool);
	{
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		sb->format_ns = (uint64_t)ts.tv_sec * 1000000000ull +
			(uint64_t)ts.tv_nsec;
	}
	sb->state = RIO_FC_SB_CLEAN;
	strcpy(sb->dir, dir);
	sb->checksum = sb_checksum(sb);
	/* One page; a torn copy fails its checksum while the tables are
	 * still zero, and formatting is redone (C1). */
	rio_memcpy_persist(c->pool, c->sb, sb, sizeof(*sb));
	free(sb);
	return 0;
}

static int
validate_sb(rio_fc_cache *c, const struct fc_geometry *g)
{
	const struct rio_fc_super *sb = c->sb;
	const char *path = rio_pool_path(c->pool);
	struct rio__hdr_view v = {
		.magic = sb->magic,
		.csum_ok = sb->checksum == sb_checksum(sb),
		.major = sb->major,
		.minor = sb->minor,
		.incompat = sb->incompat,
		.compat = sb->compat,
		.reserved = { { sb->reserved0, sizeof(sb->reserved0) },
			{ sb->reserved1, sizeof(sb->reserved1) } },
	};
	char why[160];
	int rc = rio__hdr_check(&sb_rule, &v, RIO__HDR_WRITE, why,
		sizeof(why));

	if (rc)
		return rio__err(rc, "%s: %s", path, why);
	/* Then the geometry this cache was configured with. */
	if (sb->block_size != RIO_FC_BLOCK ||
	    sb->nfiles != g->nfiles || sb->nblocks != g->nblocks ||
	    sb->files_off != g->files_off || sb->descs_off != g->descs_off ||
	    sb->data_off != g->data_off ||
	    sb->user_size != rio_pool_size(c->pool) ||
	    sb->dir_len == 0 || sb->dir_len >= RIO_FC_DIR_MAX ||
	    sb->dir[0] != '/' || strlen(sb->dir) != sb->dir_len ||
	    !rio__all_zero(sb->dir + sb->dir_len,
		    RIO_FC_DIR_MAX - sb->dir_len) ||
	    (sb->state != RIO_FC_SB_CLEAN && sb->state != RIO_FC_SB_MOUNTED))
		return rio__err(RIO_ECORRUPT, "%s: file cache superblock has "
					      "invalid fields", path);
	return 0;
}

static int
canonical_dir(const char *dir, char *out)
{
	struct stat st;

	if (realpath(dir, out) == NULL)
		return rio__errno("file cache directory %s", dir);
	if (stat(out, &st) != 0)
		return rio__errno("file cache directory %s", dir);
	if (!S_ISDIR(st.st_mode))
		return rio__err(-ENOTDIR, "file cache directory %s is not a "
					  "directory", dir);
	if (strlen(out) >= RIO_FC_DIR_MAX)
		return rio__err(-ENAMETOOLONG, "file cache directory %s: "
					       "longer than %u bytes", dir,
			RIO_FC_DIR_MAX - 1);
	if (strcmp(out, "/") == 0)
		return rio__err(-EINVAL, "the root directory cannot be "
					 "cached");
	return 0;
}

static int
setup_volatile(rio_fc_cache *c)
{
	uint32_t hs = 1;

	pthread_mutex_init(&c->lock, NULL);
	pthread_cond_init(&c->space_cond, NULL);
	pthread_cond_init(&c->wb_cond, NULL);
	c->free.head = c->free.tail = FC_NONE;
	c->clean = c->stale = c->dropped = c->free;
	c->blks = calloc(c->nblocks, sizeof(*c->blks));
	c->files = calloc(c->nfiles, sizeof(*c->files));
	while (hs < c->nfiles)
		hs <<= 1;
	c->fhash = calloc(hs, sizeof(*c->fhash));
	c->fhash_mask = hs - 1;
	if (c->blks == NULL || c->files == NULL || c->fhash == NULL)
		return rio__err(-ENOMEM, "out of memory for a cache of %llu "
					 "blocks", (unsigned long long)c->nblocks);
	return rio__fc_index_init(c);
}

static void
free_volatile(rio_fc_cache *c)
{
	if (c->files != NULL)
		for (uint32_t s = 0; s < c->nfiles; s++)
			rio__fc_file_free(c->files[s]);
	rio__fc_index_fini(c);
	free(c->blks);
	free(c->files);
	free(c->fhash);
	free(c->dir);
	pthread_mutex_destroy(&c->lock);
	pthread_cond_destroy(&c->space_cond);
	pthread_cond_destroy(&c->wb_cond);
}

static int
open_pool(rio_fc_cache *c, const char *pool_path, const char *dir,
	const struct rio_fc_opts *o, bool *created)
{
	struct rio_pool_opts po = { 0 };
	unsigned pf = o->pool_flags;
	int rc;

	if (o->pool_opts != NULL)
		po = *o->pool_opts;
	po.layout = RIO_FC_LAYOUT;
	*created = false;
	rc = rio_pool_open_opts(pool_path, pf & ~RIO_SAFE_SYNC, &po, &c->pool);
	if (rc == -ENOENT && (o->flags & RIO_FC_CREATE)) {
		size_t size = o->pool_size ? o->pool_size : FC_DEFAULT_POOL;
		struct fc_geometry g;
		if (dir == NULL)
			return rio__err(-EINVAL, "creating file cache %s needs "
						 "its directory", pool_path);
		if (size % 4096 ||
		    rio__fc_geometry(size - RIO_POOL_HDR_SIZE, &g) != 0)
			return rio__err(-EINVAL, "file cache pool size %zu: "
						 "must be a multiple of 4096 "
						 "and at least %u", size,
				FC_MIN_POOL);
		rc = rio_pool_create_opts(pool_path, size, pf, &po, &c->pool);
		*created = rc == 0;
	}
	return rc;
}

int
rio_fc_cache_open(const char *pool_path, const char *dir,
	const struct rio_fc_opts *opts, rio_fc_cache **out)
{
	struct rio_fc_opts o = { 0 };
	char want[PATH_MAX];
	struct fc_geometry g;
	rio_fc_cache *c;
	bool created;
	int rc;

	*out = NULL;
	if (opts != NULL)
		o = *opts;
	if (pool_path == NULL)
		return rio__err(-EINVAL, "file cache pool path is NULL");
	if (o.pool_flags & (RIO_PROTECT | RIO_RDONLY))
		return rio__err(-ENOTSUP, "file cache pools cannot be opened "
					  "protected or read-only");
	if (o.dirty_max_pct > 90 || (o.flags & ~(RIO_FC_CREATE |
						  RIO_FC_NO_THREAD)))
		return rio__err(-EINVAL, "file cache options: dirty_max_pct "
					 "%u (at most 90), flags 0x%x",
			o.dirty_max_pct, o.flags);
	if (dir != NULL && (rc = canonical_dir(dir, want)) != 0)
		return rc;
	pthread_once(&atfork_once, register_atfork);
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return rio__err(-ENOMEM, "out of memory");
	c->pool_fd = -1;
	c->fork_gen = __atomic_load_n(&fork_gen, __ATOMIC_RELAXED);
	c->flags = o.flags;
	c->wb_ms = o.writeback_ms ? o.writeback_ms : FC_DEFAULT_WB_MS;

	rc = open_pool(c, pool_path, dir ? want : NULL, &o, &created);
	if (rc)
		goto fail_nopool;
	c->restored = rio_pool_restored(c->pool);
	c->pool_fd = c->pool->fd;
	/* C2 */
	if (flock(c->pool_fd, LOCK_EX | LOCK_NB) != 0) {
		rc = errno == EWOULDBLOCK ?
			rio__err(-EBUSY, "file cache %s is open in another "
					 "process", pool_path) :
			rio__errno("flock %s", pool_path);
		goto fail;
	}
	if (rio__fc_geometry(rio_pool_size(c->pool), &g) != 0) {
		rc = rio__err(RIO_ECORRUPT, "%s: a pool of %zu bytes is too "
					    "small for a file cache",
			pool_path, rio_pool_size(c->pool));
		goto fail;
	}
	c->base = rio_pool_base(c->pool);
	c->sb = (struct rio_fc_super *)(void *)c->base;
	c->frecs = (struct rio_fc_frec *)(void *)(c->base + g.files_off);
	c->descs = (struct rio_fc_desc *)(void *)(c->base + g.descs_off);
	c->data = c->base + g.data_off;
	c->nblocks = g.nblocks;
	c->nfiles = g.nfiles;
	c->data_file_off = RIO_POOL_HDR_SIZE + g.data_off;

	rc = validate_sb(c, &g);
	/* A superblock of another version or with features this code does
	 * not know is some other writer's: never formatted over. */
	if (rc && rc != RIO_EVERSION && rc != RIO_EFEATURE && (created ||
		    (rio__all_zero(c->frecs,
			     (size_t)g.nfiles * RIO_FC_FREC_SIZE) &&
			    rio__all_zero(c->descs,
				    (size_t)g.nblocks * RIO_FC_DESC_SIZE)))) {
		/* C1: never formatted, or formatting was interrupted. */
		if (dir == NULL) {
			rc = rio__err(-EINVAL, "file cache %s is not formatted "
					       "yet: give its directory",
				pool_path);
			goto fail;
		}
		rc = format(c, &g, want);
	}
	if (rc)
		goto fail;
	if (dir != NULL && strcmp(want, c->sb->dir) != 0) {
		rc = rio__err(RIO_EOTHERDIR, "file cache %s caches %s, not %s",
			pool_path, c->sb->dir, want);
		goto fail;
	}
	c->dir = strdup(c->sb->dir);
	if (c->dir == NULL) {
		rc = rio__err(-ENOMEM, "out of memory");
		goto fail;
	}
	c->dir_len = strlen(c->dir);
	{
		uint64_t pct = o.dirty_max_pct ? o.dirty_max_pct :
						  FC_DEFAULT_DIRTY_PCT;
		c->dirty_max = c->nblocks * pct / 100;
		if (c->dirty_max < 2 * FC_RESERVE_CHUNK)
			c->dirty_max = 2 * FC_RESERVE_CHUNK;
	}
	c->stats.blocks = c->nblocks;
	c->stats.file_slots = c->nfiles;
	rc = setup_volatile(c);
	if (rc == 0)
		rc = rio__fc_load(c); /* writes nothing */
	if (rc)
		goto fail;
	rc = rio__fc_recover(c);
	if (rc)
		goto fail;
	if (!(c->flags & RIO_FC_NO_THREAD) && (rc = rio__fc_wb_start(c)) != 0)
		goto fail;
	*out = c;
	return 0;
fail:
	free_volatile(c);
	rio_pool_close(c->pool);
fail_nopool:
	free(c);
	return rc;
}

int
rio_fc_cache_close(rio_fc_cache *c)
{
	int rc;

	if (c == NULL)
		return 0;
	if (rio__fc_forked(c))
		return rio__err(RIO_EFORKED, "file cache %s belongs to the "
					     "parent process: left alone",
			rio_pool_path(c->pool));
	rio__fc_wb_stop(c);
	while (c->handles != NULL)
		rio_fc_close(c->handles);
	rc = rio__fc_check(c);
	if (rc == 0)
		rc = rio_fc_sync_all(c);
	if (rc == 0) {
		pthread_mutex_lock(&c->lock);
		rio__fc_reclaim_stale(c);
		pthread_mutex_unlock(&c->lock);
		/* Everything is on disk: the next open needs no recovery. */
		fc_store8(&c->sb->state, RIO_FC_SB_CLEAN);
		rio_persist(c->pool, &c->sb->state, sizeof(c->sb->state));
	}
	free_volatile(c);
	{
		int rc2 = rio_pool_close(c->pool);
		if (rc == 0)
			rc = rc2;
	}
	free(c);
	return rc;
}

rio_pool *
rio_fc_pool(const rio_fc_cache *c)
{
	return c->pool;
}

const char *
rio_fc_dir(const rio_fc_cache *c)
{
	return c->dir;
}

int
rio_fc_stats(const rio_fc_cache *cc, struct rio_fc_stats *out)
{
	rio_fc_cache *c = (rio_fc_cache *)(uintptr_t)cc;

	const uint64_t *src = (const uint64_t *)(const void *)&c->stats;
	uint64_t *dst = (uint64_t *)(void *)out;

	/* The counters are bumped with atomic adds, without c->lock; relaxed:
	 * statistics, each word read whole, no order among them. */
	for (size_t i = 0; i < offsetof(struct rio_fc_stats, recovered) / 8; i++)
		dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
	out->recovered = c->stats.recovered;
	pthread_mutex_lock(&c->lock);
	out->blocks = c->nblocks;
	out->blocks_free = c->free.n;
	out->blocks_dirty = c->ndirty;
	out->blocks_clean = c->clean.n;
	out->blocks_stale = c->stale.n + c->dropped.n;
	out->files = c->nfiles_used;
	out->file_slots = c->nfiles;
	pthread_mutex_unlock(&c->lock);
	return 0;
}
