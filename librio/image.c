/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * image.c -- safe sync: the crash-safe disk image of a pool
 *
 * Format and invariants I1-I3: image_layout.h and docs/FORMAT.md.  In short:
 * two slots, each a full copy of the pool with a table of per-page hashes,
 * and two superblocks, one per slot.  A sync rewrites the slot that does
 * not hold the newest generation -- only the pages whose hash differs from
 * what that slot holds -- makes it durable, and only then writes its
 * superblock with the next generation.
 *
 * The in-memory state mirrors the image: table[k] is the hash table slot k
 * holds on disk and gen[k] its superblock's generation (0 = not valid).
 * A failed sync forgets what the target slot holds (gen 0, every hash
 * unknown), so the next sync rewrites it completely.
 *
 * rio__image_sync() runs in ordinary threads and in fatal-signal handlers,
 * so it is async-signal-safe: no allocation (the bounce buffer and tables
 * are allocated at attach), pwrite/fdatasync only, and a lock word taken by
 * compare-and-swap instead of a mutex.  The pool may change while it is
 * copied: each page is copied to the bounce buffer first and hashed there,
 * so the image always matches its own hashes (a fuzzy snapshot, like
 * Rio's safe sync of a running system).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "image_layout.h"
#include "pool_layout.h"
#include "rio_int.h"

#define BOUNCE_BYTES (1u << 20)
#define HASH_UNKNOWN UINT64_MAX

struct rio__image {
	int fd;
	uint64_t npages;
	uint64_t pool_size;
	uint64_t *table[2];
	uint64_t gen[2];
	char *bounce;
	int busy;      /* 0 free, 1 a sync is running */
	pid_t owner;   /* thread running it */
};

static uint64_t
page_hash(const void *page, uint64_t index)
{
	return rio_checksum(page, RIO_IMG_PAGE, index);
}

static uint64_t
super_checksum(const struct rio_img_super *sb)
{
	return rio_checksum(sb, offsetof(struct rio_img_super, checksum),
		RIO_IMG_SUPER_CSUM_SEED);
}

static void
forget_slot(struct rio__image *im, int k)
{
	im->gen[k] = 0;
	for (uint64_t i = 0; i < im->npages; i++)
		im->table[k][i] = HASH_UNKNOWN;
}

/* A superblock's identity and versioning (hdr.c, H1..H8). */
static const struct rio__hdr_rule img_rule = {
	.what = "safe-sync image",
	.magic = RIO_IMG_MAGIC,
	.magic_len = 8,
	.major = RIO_IMG_MAJOR,
	.minor = RIO_IMG_MINOR,
	.fields = RIO__HDR_INCOMPAT,
	.incompat_known = 0,
	.code = RIO__HDR_CODES,
};

/* An image (or slot) this code must neither use nor write over. */
static bool
foreign(int rc)
{
	return rc == RIO_EVERSION || rc == RIO_EFEATURE;
}

/*
 * Read superblock k and its table; 0 if both are consistent with each
 * other and with `uuid` (NULL: any) and `pool_size` (0: any).  Otherwise
 * the header rule's code (foreign(): another format version) or
 * RIO_EBADHDR, with the reason in why[] and no message set: an unusable
 * slot is normal (torn, retracted) and the callers decide.
 */
static int
load_super(int fd, unsigned k, const uint8_t *uuid, uint64_t pool_size,
	uint64_t file_size, struct rio_img_super *sb, uint64_t **table,
	char why[160])
{
	uint64_t npages, tbytes;
	struct rio__hdr_view v;
	int rc;

	*table = NULL;
	why[0] = '\0';
	if (rio__pread_all(fd, sb, sizeof(*sb), (off_t)k * RIO_IMG_BLOCK))
		return RIO_EBADHDR;
	v = (struct rio__hdr_view){
		.magic = sb->magic,
		.csum_ok = sb->checksum == super_checksum(sb),
		.major = sb->major,
		.minor = sb->minor,
		.incompat = sb->incompat,
		.reserved = { { sb->reserved, sizeof(sb->reserved) } },
	};
	rc = rio__hdr_check(&img_rule, &v, RIO__HDR_WRITE, why, 160);
	if (rc)
		return rc;
	if (sb->slot != k || sb->generation == 0 ||
	    sb->page_size != RIO_IMG_PAGE)
		return RIO_EBADHDR;
	npages = sb->npages;
	if (npages == 0 || sb->pool_size != npages * RIO_IMG_PAGE ||
	    (pool_size && sb->pool_size != pool_size) ||
	    (uuid && memcmp(sb->pool_uuid, uuid, 16) != 0) ||
	    sb->table_off != rio_img_slot_off(npages, k) ||
	    sb->data_off != sb->table_off + rio_img_table_bytes(npages) ||
	    rio_img_file_size(npages) > file_size)
		return RIO_EBADHDR;
	tbytes = rio_img_table_bytes(npages);
	*table = malloc(tbytes);
	if (*table == NULL)
		return -ENOMEM;
	if (rio__pread_all(fd, *table, tbytes, (off_t)sb->table_off) ||
	    rio_checksum(*table, npages * sizeof(uint64_t),
		    RIO_IMG_TABLE_CSUM_SEED) != sb->table_csum) {
		free(*table);
		*table = NULL;
		return RIO_EBADHDR;
	}
	return 0;
}

int
rio__image_attach(rio_pool *p)
{
	struct rio__image *im;
	struct rio_img_super sb;
	struct stat st;
	uint64_t fsize;
	bool fresh;
	int rc;

	im = calloc(1, sizeof(*im));
	if (im == NULL)
		return rio__err(-ENOMEM, "out of memory");
	im->npages = p->map_size / RIO_IMG_PAGE;
	im->pool_size = p->map_size;
	fsize = rio_img_file_size(im->npages);
	im->table[0] = malloc(rio_img_table_bytes(im->npages));
	im->table[1] = malloc(rio_img_table_bytes(im->npages));
	im->bounce = aligned_alloc(RIO_IMG_PAGE, BOUNCE_BYTES);
	im->fd = open(p->image_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (!im->table[0] || !im->table[1] || !im->bounce) {
		rc = rio__err(-ENOMEM, "out of memory for the image of %s",
			p->path);
		goto fail;
	}
	/* Zero the unused tail of each table block: it is written to disk. */
	memset(im->table[0], 0, rio_img_table_bytes(im->npages));
	memset(im->table[1], 0, rio_img_table_bytes(im->npages));
	if (im->fd < 0 || fstat(im->fd, &st) != 0) {
		rc = rio__errno("open safe-sync image %s", p->image_path);
		goto fail;
	}
	/* Whatever its size, an image that another pool wrote is not ours
	 * to overwrite. */
	for (unsigned k = 0; k < 2; k++) {
		uint64_t *t;
		char why[160];
		rc = load_super(im->fd, k, NULL, 0, (uint64_t)st.st_size, &sb,
			&t, why);
		if (foreign(rc)) {
			rc = rio__err(rc, "%s: %s; move it away to open %s",
				p->image_path, why, p->path);
			goto fail;
		}
		if (rc) {
			forget_slot(im, k);
			continue;
		}
		if (memcmp(sb.pool_uuid, p->uuid, 16) != 0 ||
		    sb.pool_size != im->pool_size) {
			free(t);
			rc = rio__err(RIO_EIMAGE,
				"%s is the image of another pool; "
				"move it away to open %s",
				p->image_path, p->path);
			goto fail;
		}
		memcpy(im->table[k], t, im->npages * sizeof(uint64_t));
		im->gen[k] = sb.generation;
		free(t);
	}
	fresh = (uint64_t)st.st_size != fsize;
	if (fresh) {
		/* No usable image: build one from the pool (P5: the pool is
		 * the authoritative copy while it exists).  Allocate every
		 * block now so that a later sync cannot fail with ENOSPC. */
		if (st.st_size != 0)
			rio__notice("image %s does not match pool %s; "
				    "rebuilding it from the pool",
				p->image_path, p->path);
		forget_slot(im, 0);
		forget_slot(im, 1);
		rc = ftruncate(im->fd, 0) != 0 ? errno :
			posix_fallocate(im->fd, 0, (off_t)fsize);
		if (rc != 0) {
			errno = rc;
			rc = rio__errno("allocate %llu bytes for image %s",
				(unsigned long long)fsize, p->image_path);
			goto fail;
		}
	}
	p->img = im;
	if (fresh || (im->gen[0] == 0 && im->gen[1] == 0)) {
		rc = rio__image_sync(p, false, NULL);
		if (rc) {
			p->img = NULL;
			goto fail;
		}
	}
	return 0;
fail:
	if (im->fd >= 0)
		close(im->fd);
	free(im->table[0]);
	free(im->table[1]);
	free(im->bounce);
	free(im);
	return rc;
}

void
rio__image_detach(rio_pool *p)
{
	struct rio__image *im = p->img;

	if (im == NULL)
		return;
	p->img = NULL;
	close(im->fd);
	free(im->table[0]);
	free(im->table[1]);
	free(im->bounce);
	free(im);
}

static int
take(struct rio__image *im, bool signal_ctx)
{
	pid_t me = gettid();
	struct timespec ts = { 0, 200 * 1000 };
	long waited_us = 0;

	for (;;) {
		int expected = 0;
		/* Pairs with the release store in give(): makes the previous
		 * sync's table[], gen[] and bounce contents visible before
		 * this one reads them.  relaxed on failure: nothing is read
		 * then. */
		if (__atomic_compare_exchange_n(&im->busy, &expected, 1, false,
			    __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
			/* relaxed: read by take() racing for the lock,
			 * which only compares it with its own tid. */
			__atomic_store_n(&im->owner, me, __ATOMIC_RELAXED);
			return 0;
		}
		/* relaxed: only this thread ever stores `me` there, and it
		 * sees its own stores in order; another holder's tid or 0
		 * just means "wait". */
		if (__atomic_load_n(&im->owner, __ATOMIC_RELAXED) == me)
			return -EDEADLK; /* a signal interrupted our own sync */
		if (signal_ctx && waited_us > 5 * 1000 * 1000)
			return -EBUSY;
		nanosleep(&ts, NULL);
		waited_us += 200;
	}
}

static void
give(struct rio__image *im)
{
	__atomic_store_n(&im->owner, 0, __ATOMIC_RELAXED); /* as in take() */
	/* Pairs with the acquire compare-and-swap in take(): makes this
	 * sync's table[] and gen[] visible before the next holder reads
	 * them. */
	__atomic_store_n(&im->busy, 0, __ATOMIC_RELEASE);
}

/* Copy pages [first, first+n) to the bounce buffer, hash the copies into
 * slot k's table, and write them to slot k. */
static int
write_run(rio_pool *p, struct rio__image *im, unsigned k, uint64_t data_off,
	uint64_t first, uint64_t n)
{
	const char *src = p->map_base + first * RIO_IMG_PAGE;

	memcpy(im->bounce, src, n * RIO_IMG_PAGE);
	for (uint64_t i = 0; i < n; i++)
		im->table[k][first + i] = page_hash(
			im->bounce + i * RIO_IMG_PAGE, first + i);
	RIO__STAT_ADD(p, sync_pages_written, n);
	return rio__pwrite_all(im->fd, im->bounce, n * RIO_IMG_PAGE,
		(off_t)(data_off + first * RIO_IMG_PAGE));
}

/* The slot a sync writes: the one not holding the newest generation. */
static unsigned
older_slot(const struct rio__image *im)
{
#ifdef RIO_BROKEN_INPLACE_SYNC
	/* Broken on purpose (crash tests only): overwrite the newest copy. */
	return im->gen[0] > im->gen[1] ? 0 : 1;
#else
	return im->gen[0] > im->gen[1] ? 1 : 0;
#endif
}

static int
sync_locked(rio_pool *p, struct rio__image *im, unsigned k, uint64_t *gen_out)
{
	const uint64_t max_run = BOUNCE_BYTES / RIO_IMG_PAGE;
	uint64_t table_off = rio_img_slot_off(im->npages, k);
	uint64_t data_off = table_off + rio_img_table_bytes(im->npages);
	uint64_t newgen = (im->gen[0] > im->gen[1] ? im->gen[0] : im->gen[1]) + 1;
	struct rio_img_super sb;
	uint64_t i = 0;
	int rc;

#ifndef RIO_BROKEN_INPLACE_SYNC
	/* I2: never the slot holding the newest generation. */
	RIO_ASSERT(k < 2 && (im->gen[k] == 0 || im->gen[k] < im->gen[k ^ 1]),
		"I2");
#endif
	/* Slot k is about to change under its superblock.  Retract the
	 * superblock first, durably: otherwise a crash part-way through would
	 * leave a superblock vouching for pages it no longer describes, and
	 * the next open would trust its hash table (I1). */
	im->gen[k] = 0;
	memset(&sb, 0, sizeof(sb));
	rc = rio__pwrite_all(im->fd, &sb, sizeof(sb), (off_t)k * RIO_IMG_BLOCK);
	if (rc)
		return rc;
	if (rio__sys.fdatasync(im->fd) != 0)
		return -errno;
	while (i < im->npages) {
		uint64_t n = 0;
		while (i + n < im->npages && n < max_run &&
		       page_hash(p->map_base + (i + n) * RIO_IMG_PAGE, i + n) !=
			       im->table[k][i + n])
			n++;
		if (n == 0) {
			i++;
			continue;
		}
		rc = write_run(p, im, k, data_off, i, n);
		if (rc)
			return rc;
		i += n;
	}
	rc = rio__pwrite_all(im->fd, im->table[k],
		rio_img_table_bytes(im->npages), (off_t)table_off);
	if (rc)
		return rc;
	/* First make slot k's pages and hash table durable: its superblock,
	 * written next, vouches for them (I2). */
	if (rio__sys.fdatasync(im->fd) != 0)
		return -errno;

	memset(&sb, 0, sizeof(sb));
	memcpy(sb.magic, RIO_IMG_MAGIC, sizeof(sb.magic));
	sb.major = RIO_IMG_MAJOR;
	sb.minor = RIO_IMG_MINOR;
	sb.slot = k;
	sb.generation = newgen;
	memcpy(sb.pool_uuid, p->uuid, 16);
	sb.pool_size = im->pool_size;
	sb.page_size = RIO_IMG_PAGE;
	sb.npages = im->npages;
	sb.table_off = table_off;
	sb.data_off = data_off;
	sb.table_csum = rio_checksum(im->table[k],
		im->npages * sizeof(uint64_t), RIO_IMG_TABLE_CSUM_SEED);
	sb.sync_time_ns = rio_now_ns(CLOCK_REALTIME);
	sb.checksum = super_checksum(&sb);
	rc = rio__pwrite_all(im->fd, &sb, sizeof(sb),
		(off_t)k * RIO_IMG_BLOCK);
	if (rc)
		return rc;
	/* Then make the superblock durable before reporting the new
	 * generation: the caller may rely on it at once. */
	if (rio__sys.fdatasync(im->fd) != 0)
		return -errno;
	im->gen[k] = newgen;
	*gen_out = newgen;
	return 0;
}

int
rio__image_sync(rio_pool *p, bool signal_ctx, uint64_t *gen)
{
	struct rio__image *im = p->img;
	uint64_t g = 0;
	unsigned k;
	int rc;

	if (im == NULL)
		return RIO_ENOSYNC;
	rc = take(im, signal_ctx);
	if (rc)
		return rc;
	k = older_slot(im);
	rc = sync_locked(p, im, k, &g);
	if (rc) {
		/* Slot k is now in an unknown state: rewrite it all next
		 * time.  The newer slot was not touched (I2). */
		forget_slot(im, k);
	} else {
		RIO__STAT_ADD(p, syncs, 1);
		/* relaxed: a statistic for rio_stats(); the generation
		 * itself is durable in the superblock already. */
		__atomic_store_n(&p->stats.sync_generation, g,
			__ATOMIC_RELAXED);
		if (gen != NULL)
			*gen = g;
	}
	give(im);
	return rc;
}

int
rio_safe_sync(rio_pool *p, uint64_t *gen)
{
	int rc;

	if (p->img == NULL)
		return rio__err(RIO_ENOSYNC,
			"pool %s was not created with RIO_SAFE_SYNC", p->path);
	/* relaxed: the sticky error code (rio__msync()), read whole. */
	if (__atomic_load_n(&p->error, __ATOMIC_RELAXED))
		return rio__err(RIO_EFATAL,
			"pool %s is in an error state: not overwriting its "
			"image with data of uncertain durability", p->path);
	rc = rio__image_sync(p, false, gen);
	if (rc)
		return rio__err(rc, "safe sync of %s to %s: %s", p->path,
			p->image_path, rio_strerror(rc));
	return 0;
}

/* ---- reading images back ---- */

/*
 * Verify the data of the slot described by sb against table, copying it to
 * out_fd when out_fd >= 0.  true if every page matches (I1, I3).
 */
static bool
verify_slot(int fd, const struct rio_img_super *sb, const uint64_t *table,
	int out_fd, char *buf)
{
	const uint64_t max_run = BOUNCE_BYTES / RIO_IMG_PAGE;

	for (uint64_t i = 0; i < sb->npages;) {
		uint64_t n = sb->npages - i < max_run ? sb->npages - i : max_run;
		if (rio__pread_all(fd, buf, n * RIO_IMG_PAGE,
			    (off_t)(sb->data_off + i * RIO_IMG_PAGE)))
			return false;
		for (uint64_t j = 0; j < n; j++)
			if (page_hash(buf + j * RIO_IMG_PAGE, i + j) !=
			    table[i + j])
				return false;
		if (out_fd >= 0 &&
		    rio__pwrite_all(out_fd, buf, n * RIO_IMG_PAGE,
			    (off_t)(i * RIO_IMG_PAGE)))
			return false;
		i += n;
	}
	return true;
}

struct candidate {
	struct rio_img_super sb;
	uint64_t *table;
};

/* Load both superblocks; order the valid ones newest first. */
static int
load_candidates(int fd, const char *image, struct candidate c[2], int *n)
{
	struct stat st;
	uint8_t uuid[16];
	bool have_uuid = false;

	*n = 0;
	if (fstat(fd, &st) != 0)
		return rio__errno("fstat %s", image);
	for (unsigned k = 0; k < 2; k++) {
		char why[160];
		int rc = load_super(fd, k, have_uuid ? uuid : NULL, 0,
			(uint64_t)st.st_size, &c[*n].sb, &c[*n].table, why);
		if (foreign(rc)) {
			while (*n > 0)
				free(c[--(*n)].table);
			return rio__err(rc, "%s: %s", image, why);
		}
		if (rc)
			continue;
		memcpy(uuid, c[*n].sb.pool_uuid, 16);
		have_uuid = true;
		(*n)++;
	}
	if (*n == 2 && c[1].sb.generation > c[0].sb.generation) {
		struct candidate t = c[0];
		c[0] = c[1];
		c[1] = t;
	}
	return 0;
}

/*
 * Superblock k is blank: zeroed by a sync that retracted it (I2), or never
 * written.  Anything else is a copy the image claims to have, so if it
 * does not verify it is torn or corrupt.
 */
static bool
super_is_blank(int fd, unsigned k)
{
	uint64_t blk[RIO_IMG_BLOCK / sizeof(uint64_t)];

	if (rio__pread_all(fd, blk, sizeof(blk), (off_t)k * RIO_IMG_BLOCK))
		return true; /* short file: the slot was never written */
	for (size_t i = 0; i < sizeof(blk) / sizeof(blk[0]); i++)
		if (blk[i] != 0)
			return false;
	return true;
}

int
rio_image_check(const char *image, struct rio_image_info *info)
{
	struct candidate c[2];
	char *buf = NULL;
	int fd, n = 0, rc, best = -1, valid = 0;

	memset(info, 0, sizeof(*info));
	fd = open(image, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rio__errno("open image %s", image);
	rc = load_candidates(fd, image, c, &n);
	buf = aligned_alloc(RIO_IMG_PAGE, BOUNCE_BYTES);
	if (rc == 0 && buf == NULL)
		rc = rio__err(-ENOMEM, "out of memory");
	for (int i = 0; rc == 0 && i < n; i++) {
		if (!verify_slot(fd, &c[i].sb, c[i].table, -1, buf))
			continue;
		valid++;
		if (best < 0)
			best = i;
	}
	for (unsigned k = 0; rc == 0 && k < 2; k++)
		if (!super_is_blank(fd, k))
			info->present_slots++;
	if (rc == 0 && best < 0)
		rc = rio__err(RIO_EIMAGE, "%s: no valid copy in the image",
			image);
	if (rc == 0) {
		info->generation = c[best].sb.generation;
		info->pool_size = c[best].sb.pool_size;
		memcpy(info->pool_uuid, c[best].sb.pool_uuid, 16);
		info->slot = (int)c[best].sb.slot;
		info->valid_slots = valid;
	}
	for (int i = 0; i < n; i++)
		free(c[i].table);
	free(buf);
	close(fd);
	return rc;
}

int
rio__image_restore(const char *image, const char *path, uint64_t *gen)
{
	struct candidate c[2];
	char *tmp = NULL, *buf = NULL;
	int fd, out = -1, n = 0, rc;
	bool done = false;

	fd = open(image, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rio__errno("open image %s", image);
	rc = load_candidates(fd, image, c, &n);
	buf = aligned_alloc(RIO_IMG_PAGE, BOUNCE_BYTES);
	if (rc == 0 && (buf == NULL ||
			asprintf(&tmp, "%s.restore-%d", path, getpid()) < 0)) {
		tmp = NULL;
		rc = rio__err(-ENOMEM, "out of memory");
	}
	for (int i = 0; rc == 0 && i < n && !done; i++) {
		out = open(tmp, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (out < 0) {
			rc = rio__errno("create %s", tmp);
			break;
		}
		if (verify_slot(fd, &c[i].sb, c[i].table, out, buf)) {
			/* The restored copy must be durable before it is
			 * published under the pool's name. */
			if (rio__sys.fsync(out) != 0) {
				rc = rio__errno("fsync %s", tmp);
			} else {
				done = true;
				*gen = c[i].sb.generation;
			}
		} else if (i + 1 < n) {
			rio__notice("image %s: generation %llu is damaged; "
				    "trying generation %llu",
				image,
				(unsigned long long)c[i].sb.generation,
				(unsigned long long)c[i + 1].sb.generation);
		}
		close(out);
	}
	if (rc == 0 && !done)
		rc = rio__err(RIO_EIMAGE,
			"cannot restore %s: image %s has no valid copy", path,
			image);
	if (rc == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, path,
			       RENAME_NOREPLACE) != 0)
		rc = rio__errno("rename %s to %s", tmp, path);
	if (rc == 0)
		rc = rio__fsync_dir_of(path); /* the rename, durable */
	else if (tmp != NULL)
		unlink(tmp);
	for (int i = 0; i < n; i++)
		free(c[i].table);
	free(tmp);
	free(buf);
	close(fd);
	return rc;
}
