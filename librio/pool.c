/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * pool.c -- pool create, open, validate, map and close
 *
 * Invariants
 *   P1. A pool file is visible under its name only when its header is
 *       complete and durable: create builds it under a temporary name,
 *       fsyncs it, and renames it into place with RENAME_NOREPLACE (never
 *       replacing anything), then fsyncs the directory.
 *   P2. Open validates the whole header by reading it with pread() before
 *       mapping, and writes nothing until every check has passed; a failed
 *       open leaves the file as it found it.
 *   P3. The header is never written after P1; the user area is the only
 *       part of the mapping that changes.
 *   P4. A fixed-address mapping never replaces an existing one: the range
 *       is claimed with MAP_FIXED_NOREPLACE before anything is mapped there
 *       (move_to_fixed).
 *   P5. While the pool file exists it is the authoritative copy; the
 *       safe-sync image is only read when the pool file is missing.
 *
 * Pool lifecycle: create/open -> MAPPED -> (rio_pool_close) -> freed.
 * A failure that leaves data of uncertain durability (msync error) moves the
 * pool to its error state (p->error != 0): rio_pool_error() reports it and
 * rio_safe_sync refuses to copy uncertain data over a good image.
 */
#include <errno.h>
#include <fcntl.h>
#include <libpmem2.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "pool_layout.h"
#include "rio_int.h"

static uint64_t
hdr_checksum(const struct rio_pool_hdr *h)
{
	return rio_checksum(h, offsetof(struct rio_pool_hdr, checksum),
		RIO_POOL_CSUM_SEED);
}

/* The pool header's identity and versioning (hdr.c, H1..H8). */
static const struct rio__hdr_rule pool_rule = {
	.what = "rio pool",
	.magic = RIO_POOL_MAGIC,
	.magic_len = 8,
	.major = RIO_POOL_MAJOR,
	.minor = RIO_POOL_MINOR,
	.fields = RIO__HDR_INCOMPAT | RIO__HDR_RO_COMPAT | RIO__HDR_COMPAT,
	.incompat_known = RIO_FEAT_INCOMPAT_KNOWN,
	.ro_compat_known = RIO_FEAT_RO_COMPAT_KNOWN,
	.compat_known = RIO_FEAT_COMPAT_KNOWN,
	.code = RIO__HDR_CODES,
};

static char *
default_image_path(const char *path, const struct rio_pool_opts *opts)
{
	char *s;

	if (opts != NULL && opts->image_path != NULL)
		return strdup(opts->image_path);
	if (asprintf(&s, "%s.img", path) < 0)
		return NULL;
	return s;
}

static bool
file_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* Check everything in the header that does not need the file (P2). */
static int
validate_hdr(const struct rio_pool_hdr *h, const char *path, off_t file_size,
	unsigned flags, const struct rio_pool_opts *opts)
{
	struct rio__hdr_view v = {
		.magic = h->magic,
		.csum_ok = h->checksum == hdr_checksum(h),
		.major = h->major,
		.minor = h->minor,
		.incompat = h->incompat,
		.ro_compat = h->ro_compat,
		.compat = h->compat,
		.reserved = { { h->reserved, sizeof(h->reserved) } },
	};
	char why[160];
	int rc;

	rc = rio__hdr_check(&pool_rule, &v,
		(flags & RIO_RDONLY) ? RIO__HDR_READ : RIO__HDR_WRITE, why,
		sizeof(why));
	if (rc)
		return rio__err(rc, "%s: %s", path, why);
	/* Then this format's own fields. */
	if (h->hdr_size != RIO_POOL_HDR_SIZE)
		return rio__err(RIO_EBADHDR, "%s: invalid header size %u",
			path, h->hdr_size);
	if (!(h->compat & ~RIO_FEAT_COMPAT_KNOWN) &&
	    ((h->flags & ~RIO_HDR_F_KNOWN) ||
		    h->layout[RIO_LAYOUT_MAX - 1] != '\0'))
		return rio__err(RIO_EBADHDR,
			"%s: header has non-zero reserved bits", path);
	if (h->pool_size != (uint64_t)file_size)
		return rio__err(RIO_ESIZE,
			"%s: header says %llu bytes but the file has %lld",
			path, (unsigned long long)h->pool_size,
			(long long)file_size);
	if (h->pool_size < RIO_POOL_MIN_SIZE || h->pool_size % RIO__PAGE)
		return rio__err(RIO_EBADHDR, "%s: invalid pool size %llu",
			path, (unsigned long long)h->pool_size);
	if (opts != NULL && opts->layout != NULL &&
	    strncmp(opts->layout, h->layout, RIO_LAYOUT_MAX) != 0)
		return rio__err(RIO_ELAYOUT,
			"%s: pool layout is \"%.31s\", expected \"%s\"", path,
			h->layout, opts->layout);
	return 0;
}

/* Translate a libpmem2 failure into our codes with a message. */
static int
pmem2_fail(int rc, const char *what, const char *path)
{
	int e;

	if (rc == PMEM2_E_MAPPING_EXISTS)
		return rio__err(RIO_EADDRINUSE,
			"%s: cannot map %s at the requested address: "
			"the range is already mapped (%s)",
			what, path, pmem2_errormsg());
	e = rio__pmem2_errno(rc);
	return rio__err(e, "%s %s: %s", what, path, pmem2_errormsg());
}

/*
 * Move libpmem2's mapping of the pool to the fixed address `addr` (P4).
 *
 * libpmem2 1.12's address reservations claim more than the requested
 * range and leave part of it mapped after they are deleted, so a fixed
 * address is obtained this way instead:
 *   1. claim exactly [addr, addr+size) with a PROT_NONE placeholder,
 *      MAP_FIXED_NOREPLACE: an existing mapping there means RIO_EADDRINUSE;
 *   2. let libpmem2 map the file wherever it likes (its flags, MAP_SYNC on
 *      DAX, and its granularity answer all stay libpmem2's);
 *   3. mremap() that mapping over the placeholder (atomic, same VMA flags);
 *   4. put a placeholder where libpmem2's mapping was, so that deleting
 *      libpmem2's map object unmaps only our placeholder.
 * The moved mapping is then ours (p->fixed, unmapped by pool_free) and
 * has no libpmem2 map object: librio asks libpmem2 nothing about a
 * mapping after map_pool has read its granularity, and
 * pmem2_map_from_existing() would cost 144 bytes per open that 1.12's
 * pmem2_map_delete() never frees.
 */
static int
move_to_fixed(rio_pool *p, void *addr)
{
	void *old = pmem2_map_get_address(p->map);
	void *hole;
	int rc;

	if (mremap(old, p->map_size, p->map_size, MREMAP_MAYMOVE | MREMAP_FIXED,
		    addr) == MAP_FAILED) {
		rc = rio__errno("mremap pool %s to %p", p->path, addr);
		munmap(addr, p->map_size); /* our placeholder */
		return rc;
	}
	hole = mmap(old, p->map_size, PROT_NONE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
		-1, 0);
	if (hole == old)
		pmem2_map_delete(&p->map); /* unmaps the placeholder at old */
	else if (hole != MAP_FAILED)
		munmap(hole, p->map_size);
	/* else another thread mapped at `old` meanwhile: leak libpmem2's
	 * small map object rather than unmap somebody else's memory. */
	p->map = NULL;
	p->map_base = addr;
	p->fixed = true;
	return 0;
}

static int
map_pool(rio_pool *p, const struct rio_pool_opts *opts)
{
	struct pmem2_config *cfg = NULL;
	void *want = opts != NULL ? opts->addr : NULL;
	int rc;

	if (want != NULL) {
		void *got = mmap(want, p->map_size, PROT_NONE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE |
				MAP_FIXED_NOREPLACE,
			-1, 0);
		if (got == MAP_FAILED && errno == EEXIST)
			return rio__err(RIO_EADDRINUSE,
				"cannot map %s at %p: [%p, %p) overlaps an "
				"existing mapping",
				p->path, want, want,
				(void *)((char *)want + p->map_size));
		if (got == MAP_FAILED)
			return rio__errno("reserve %p for %s", want, p->path);
		if (got != want) { /* kernel without MAP_FIXED_NOREPLACE */
			munmap(got, p->map_size);
			return rio__err(RIO_EADDRINUSE,
				"cannot map %s at %p", p->path, want);
		}
	}
	rc = pmem2_source_from_fd(&p->src, p->fd);
	if (rc == 0)
		rc = pmem2_config_new(&cfg);
	/* Ask for the weakest guarantee so that any file maps; the real
	 * granularity is read back from the mapping below. */
	if (rc == 0)
		rc = pmem2_config_set_required_store_granularity(cfg,
			PMEM2_GRANULARITY_PAGE);
	if (rc == 0 && (p->flags & RIO_RDONLY))
		rc = pmem2_config_set_protection(cfg, PMEM2_PROT_READ);
	if (rc == 0)
		rc = pmem2_map_new(&p->map, cfg, p->src);
	if (cfg != NULL)
		pmem2_config_delete(&cfg);
	if (rc) {
		if (want != NULL)
			munmap(want, p->map_size);
		return pmem2_fail(rc, "map", p->path);
	}
	p->map_base = pmem2_map_get_address(p->map);
	p->native_domain = rio__domain_of_map(p->map);
	if (want != NULL && (rc = move_to_fixed(p, want)) != 0)
		return rc;
	p->base = p->map_base + RIO_POOL_HDR_SIZE;
	p->size = p->map_size - RIO_POOL_HDR_SIZE;
	p->domain = rio__effective_domain(p->native_domain, p->flags);
	p->hot.domain = p->domain;
	p->hot.flush_kind = rio__flush_kind_for(p->domain);
	return 0;
}

static void
pool_free(rio_pool *p)
{
	if (p == NULL)
		return;
	if (p->fixed) /* moved: ours to unmap, no libpmem2 map object */
		munmap(p->map_base, p->map_size);
	else if (p->map != NULL)
		pmem2_map_delete(&p->map);
	if (p->src)
		pmem2_source_delete(&p->src);
	if (p->fd >= 0)
		close(p->fd);
	pthread_mutex_destroy(&p->prot_lock);
	pthread_mutex_destroy(&p->sync_thread_lock);
	pthread_cond_destroy(&p->sync_thread_cond);
	free(p->win_count);
	free(p->path);
	free(p->image_path);
	free(p);
}

static rio_pool *
pool_alloc(const char *path, unsigned flags, const struct rio_pool_opts *opts)
{
	rio_pool *p = calloc(1, sizeof(*p));

	if (p == NULL)
		return NULL;
	p->fd = -1;
	p->pkey = -1;
	p->reg_slot = -1;
	p->flags = flags;
	pthread_mutex_init(&p->prot_lock, NULL);
	pthread_mutex_init(&p->sync_thread_lock, NULL);
	pthread_cond_init(&p->sync_thread_cond, NULL);
	p->path = strdup(path);
	p->image_path = default_image_path(path, opts);
	if (opts != NULL)
		p->sync_interval_ms = opts->sync_interval_ms;
	if (p->path == NULL || p->image_path == NULL) {
		pool_free(p);
		return NULL;
	}
	return p;
}

/* After the mapping exists: registry, tracing, image, signals, protection. */
static int
pool_activate(rio_pool *p)
{
	int rc;

	rc = rio__registry_add(p);
	if (rc)
		return rc;
	rio__trace_mapped(p);
	rc = rio__protect_init(p);
	if (rc)
		return rc;
	if ((p->hdr_flags & RIO_HDR_F_SAFE_SYNC) && !(p->flags & RIO_RDONLY)) {
		rc = rio__image_attach(p);
		if (rc)
			return rc;
		if (!(p->flags & RIO_NO_SIGNALS)) {
			rc = rio__signals_install();
			if (rc)
				return rc;
		}
		if (p->sync_interval_ms) {
			rc = rio__sync_thread_start(p);
			if (rc)
				return rc;
		}
	}
	if (p->flags & RIO_PROTECT)
		return rio_protect(p);
	return 0;
}

/* Undo pool_activate() and free; no final sync. */
static void
pool_teardown(rio_pool *p)
{
	rio__sync_thread_stop(p);
	if (p->reg_slot >= 0) {
		rio__trace_unmapping(p);
		rio__registry_remove(p);
	}
	rio__image_detach(p);
	rio__protect_fini(p);
	pool_free(p);
}

static int
validate_opts(const char *path, const struct rio_pool_opts *opts)
{
	if (path == NULL || *path == '\0')
		return rio__err(-EINVAL, "pool path is empty");
	if (opts == NULL)
		return 0;
	if ((uintptr_t)opts->addr % RIO__PAGE)
		return rio__err(-EINVAL, "address %p is not page aligned",
			opts->addr);
	if (opts->layout != NULL && strlen(opts->layout) >= RIO_LAYOUT_MAX)
		return rio__err(-EINVAL, "layout name longer than %d bytes",
			RIO_LAYOUT_MAX - 1);
	return 0;
}

/* Write the header and size of a new pool file under a temporary name,
 * make it durable, and rename it into place (P1). */
static int
build_pool_file(const char *path, size_t size, unsigned flags,
	const struct rio_pool_opts *opts)
{
	struct rio_pool_hdr *h;
	char *tmp = NULL;
	uint32_t rnd = 0;
	int fd = -1, rc;

	if (getrandom(&rnd, sizeof(rnd), 0) < 0)
		rnd = (uint32_t)rio_now_ns(CLOCK_REALTIME);
	if (asprintf(&tmp, "%s.tmp-%d-%08x", path, (int)getpid(), rnd) < 0)
		return rio__err(-ENOMEM, "out of memory");
	h = calloc(1, sizeof(*h));
	if (h == NULL) {
		free(tmp);
		return rio__err(-ENOMEM, "out of memory");
	}
	fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		rc = rio__errno("create %s", path);
		goto out;
	}
	rc = posix_fallocate(fd, 0, (off_t)size);
	if (rc) {
		errno = rc;
		rc = rio__errno("allocate %zu bytes for %s", size, path);
		goto out;
	}
	memcpy(h->magic, RIO_POOL_MAGIC, sizeof(h->magic));
	h->major = RIO_POOL_MAJOR;
	h->minor = RIO_POOL_MINOR;
	h->hdr_size = RIO_POOL_HDR_SIZE;
	h->flags = (flags & RIO_SAFE_SYNC) ? RIO_HDR_F_SAFE_SYNC : 0;
	if (getrandom(h->uuid, sizeof(h->uuid), 0) != sizeof(h->uuid)) {
		rc = rio__errno("getrandom for the pool uuid");
		goto out;
	}
	h->uuid[6] = (uint8_t)((h->uuid[6] & 0x0f) | 0x40); /* RFC 4122 v4 */
	h->uuid[8] = (uint8_t)((h->uuid[8] & 0x3f) | 0x80);
	h->pool_size = size;
	h->ctime_ns = rio_now_ns(CLOCK_REALTIME);
	h->map_addr = opts ? (uint64_t)(uintptr_t)opts->addr : 0;
	if (opts != NULL && opts->layout != NULL)
		strncpy(h->layout, opts->layout, RIO_LAYOUT_MAX - 1);
	h->checksum = hdr_checksum(h);
	rc = rio__pwrite_all(fd, h, sizeof(*h), 0);
	if (rc) {
		rc = rio__err(rc, "write header of %s: %s", path,
			strerror(-rc));
		goto out;
	}
	/* The header and the allocation must be durable before the rename
	 * publishes the file under its real name (P1). */
	if (rio__sys.fsync(fd) != 0) {
		rc = rio__errno("fsync %s", tmp);
		goto out;
	}
	if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) != 0) {
		rc = rio__errno("rename %s to %s", tmp, path);
		goto out;
	}
	free(tmp);
	tmp = NULL;
	/* And the rename itself must survive a crash. */
	rc = rio__fsync_dir_of(path);
	if (rc)
		rc = rio__err(rc, "fsync directory of %s: %s", path,
			strerror(-rc));
out:
	if (tmp != NULL) {
		unlink(tmp);
		free(tmp);
	}
	if (fd >= 0)
		close(fd);
	free(h);
	return rc;
}

int
rio_pool_create_opts(const char *path, size_t size, unsigned flags,
	const struct rio_pool_opts *opts, rio_pool **pool)
{
	char *img;
	int rc;

	*pool = NULL;
	rc = validate_opts(path, opts);
	if (rc)
		return rc;
	if (size < RIO_POOL_MIN_SIZE || size % RIO__PAGE)
		return rio__err(-EINVAL,
			"pool size %zu must be a multiple of %u and at least "
			"%u", size, RIO__PAGE, RIO_POOL_MIN_SIZE);
	if (flags & RIO_RDONLY)
		return rio__err(-EINVAL, "cannot create a read-only pool");
	if (file_exists(path))
		return rio__err(-EEXIST, "%s already exists", path);
	if (flags & RIO_SAFE_SYNC) {
		img = default_image_path(path, opts);
		if (img == NULL)
			return rio__err(-ENOMEM, "out of memory");
		rc = file_exists(img) ? -EEXIST : 0;
		if (rc)
			rio__err(rc,
				"safe-sync image %s exists: open the pool to "
				"restore it, or remove the image first", img);
		free(img);
		if (rc)
			return rc;
	}
	rc = build_pool_file(path, size, flags, opts);
	if (rc)
		return rc;
	/* The file is complete; open it the ordinary way (which also makes
	 * its first image).  If this fails, the new, empty pool stays: it is
	 * valid, and removing it could race with another opener. */
	return rio_pool_open_opts(path, flags | RIO_NO_RESTORE, opts, pool);
}

int
rio_pool_create(const char *path, size_t size, unsigned flags,
	rio_pool **pool)
{
	return rio_pool_create_opts(path, size, flags, NULL, pool);
}

int
rio_pool_open_opts(const char *path, unsigned flags,
	const struct rio_pool_opts *opts, rio_pool **pool)
{
	struct rio_pool_hdr *h = NULL;
	struct stat st;
	rio_pool *p;
	bool restored = false;
	int rc;

	*pool = NULL;
	rc = validate_opts(path, opts);
	if (rc)
		return rc;
	p = pool_alloc(path, flags, opts);
	if (p == NULL)
		return rio__err(-ENOMEM, "out of memory");

	p->fd = open(path, ((flags & RIO_RDONLY) ? O_RDONLY : O_RDWR) |
			O_CLOEXEC);
	if (p->fd < 0 && errno == ENOENT &&
	    !(flags & (RIO_NO_RESTORE | RIO_RDONLY)) &&
	    file_exists(p->image_path)) {
		uint64_t gen = 0;
		/* The memory copy is gone but its image survives: the
		 * "reboot" case (P5). */
		rc = rio__image_restore(p->image_path, path, &gen);
		if (rc)
			goto fail;
		rio__notice("pool %s was missing; restored from image %s "
			    "(generation %llu)",
			path, p->image_path, (unsigned long long)gen);
		restored = true;
		p->fd = open(path, O_RDWR | O_CLOEXEC);
	}
	if (p->fd < 0) {
		rc = rio__errno("open pool %s", path);
		goto fail;
	}
	if (fstat(p->fd, &st) != 0) {
		rc = rio__errno("fstat %s", path);
		goto fail;
	}
	if (st.st_size < (off_t)RIO_POOL_HDR_SIZE) {
		rc = rio__err(RIO_ESHORT,
			"%s: %lld bytes is smaller than a pool header (%u)",
			path, (long long)st.st_size, RIO_POOL_HDR_SIZE);
		goto fail;
	}
	h = malloc(sizeof(*h));
	if (h == NULL) {
		rc = rio__err(-ENOMEM, "out of memory");
		goto fail;
	}
	rc = rio__pread_all(p->fd, h, sizeof(*h), 0);
	if (rc) {
		rc = rio__err(rc, "read header of %s: %s", path,
			strerror(-rc));
		goto fail;
	}
	rc = validate_hdr(h, path, st.st_size, flags, opts);
	if (rc)
		goto fail;
	memcpy(p->uuid, h->uuid, sizeof(p->uuid));
	p->hdr_flags = h->flags;
	p->map_size = h->pool_size;
	p->restored = restored;
	free(h);
	h = NULL;

	rc = map_pool(p, opts);
	if (rc)
		goto fail;
	rc = pool_activate(p);
	if (rc) {
		pool_teardown(p);
		return rc;
	}
	*pool = p;
	return 0;
fail:
	free(h);
	pool_free(p);
	return rc;
}

int
rio_pool_open(const char *path, unsigned flags, rio_pool **pool)
{
	return rio_pool_open_opts(path, flags, NULL, pool);
}

int
rio_pool_close(rio_pool *p)
{
	int rc = 0;

	if (p == NULL)
		return 0;
	rio__sync_thread_stop(p);
	/* relaxed: the sticky error code (rio__msync()), read whole. */
	if (p->img != NULL &&
	    __atomic_load_n(&p->error, __ATOMIC_RELAXED) == 0) {
		rc = rio_safe_sync(p, NULL);
	}
	pool_teardown(p);
	return rc;
}

int
rio_pool_error(const rio_pool *p)
{
	/* Pairs with the release store in rio__msync(): nothing is
	 * published with the code (its message is thread-local), so acquire
	 * is stronger than needed; relaxed would do. */
	int e = __atomic_load_n(&p->error, __ATOMIC_ACQUIRE);
	return e ? RIO_EFATAL : 0;
}

void *
rio_pool_base(const rio_pool *p)
{
	return p->base;
}

size_t
rio_pool_size(const rio_pool *p)
{
	return p->size;
}

enum rio_domain
rio_pool_domain(const rio_pool *p)
{
	return p->domain;
}

enum rio_domain
rio_pool_native_domain(const rio_pool *p)
{
	return p->native_domain;
}

void
rio_pool_uuid(const rio_pool *p, uint8_t uuid[16])
{
	memcpy(uuid, p->uuid, 16);
}

const char *
rio_pool_path(const rio_pool *p)
{
	return p->path;
}

const char *
rio_pool_image_path(const rio_pool *p)
{
	return (p->hdr_flags & RIO_HDR_F_SAFE_SYNC) ? p->image_path : NULL;
}

bool
rio_pool_restored(const rio_pool *p)
{
	return p->restored;
}

int
rio_stats(const rio_pool *p, struct rio_stats *out)
{
	/* relaxed: statistics counters (RIO__STAT_ADD), each read whole;
	 * the snapshot is not consistent across counters and need not be. */
	out->window_opens = __atomic_load_n(&p->stats.window_opens,
		__ATOMIC_RELAXED);
	out->window_closes = __atomic_load_n(&p->stats.window_closes,
		__ATOMIC_RELAXED);
	out->protect_calls = __atomic_load_n(&p->stats.protect_calls,
		__ATOMIC_RELAXED);
	out->mprotect_calls = __atomic_load_n(&p->stats.mprotect_calls,
		__ATOMIC_RELAXED);
	out->syncs = __atomic_load_n(&p->stats.syncs, __ATOMIC_RELAXED);
	out->sync_pages_written = __atomic_load_n(&p->stats.sync_pages_written,
		__ATOMIC_RELAXED);
	out->sync_generation = __atomic_load_n(&p->stats.sync_generation,
		__ATOMIC_RELAXED);
	return 0;
}
