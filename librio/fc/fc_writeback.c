/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_writeback.c -- writing dirty blocks back to the real files: one file,
 * a pass over many, the background thread, and rio_fc_sync_all
 *
 * Write-back of file f (rio__fc_wb_file), the persist order:
 *   1. store RIO_FC_FF_WB_ACTIVE in f's record flags, persist: from here
 *      the disk copy may change under our hand, and recovery must not take
 *      that for a change made behind the cache;
 *   2. (f->lock shared) cut the disk file to disk_limit if longer (bytes
 *      past it are not file content, B1), pwrite every dirty block (the
 *      part inside the file's size), set the disk file's size;
 *   3. (no lock) fdatasync the file: the disk copy is durable;
 *   4. write a file-state record: the file's size, disk_limit = the size
 *      written, and the disk copy's new identity (fstat), persist -- after
 *      3, so the identity vouches for a durable disk copy, and before 5, so
 *      the size the descriptors carried (L5) survives their freeing;
 *   5. store CLEAN to each written descriptor still current and unchanged
 *      (same seq, not mapped writable), drain;
 *   6. clear RIO_FC_FF_WB_ACTIVE, persist.
 * A crash anywhere leaves the blocks DIRTY (or CLEAN with the disk holding
 * them) and WB_ACTIVE set, so recovery simply writes the dirty blocks again.
 * A failure (pwrite, ftruncate, fdatasync) leaves the blocks DIRTY; they
 * are rewritten in full next time (an fdatasync error may have dropped the
 * kernel's dirty pages, so the data is never assumed to be there).
 *
 * Invariants
 *   W1. A descriptor is marked CLEAN only after its bytes are durable on
 *       disk (fdatasync) and the file-state record that carries the size
 *       is durable in the pool.
 *   W2. WB_ACTIVE is durable before the disk copy changes and cleared only
 *       after the write-back is complete.
 *   W3. One write-back of a file at a time (f->wb_lock); writers are held
 *       off only while the blocks are copied to the kernel (f->lock
 *       shared), not during fdatasync.
 *   W4. A failing file fails alone: its blocks stay DIRTY (durable in the
 *       pool), its disk copy's identity is recorded as the cache's own
 *       (failed_identity), the disk space the attempt took past the old
 *       end is given back, the failure is said once on stderr and counted
 *       (stats.writeback_errors), and the thread's passes retry it with a
 *       back-off (writeback_ms doubled per failure, at most
 *       FC_WB_RETRY_MAX_MS; rio_fc_sync_all tries at once).  Other files
 *       are written back, read and written as before; only a writer that
 *       needs room the failing file's blocks hold sees its error.
 *
 * The background thread runs a pass every quarter of writeback_ms: it
 * writes back the files dirty for longer than writeback_ms, the files
 * whose last handle closed, and every dirty file when writers wait for
 * space or more than half the dirty limit is used.  Each pass ends by
 * settling directories: one fsync of the directory of every record that
 * is UNLINKED (then freed) or NEW (then no longer new).  Settling takes a
 * reference on each file it fsyncs for and skips busy ones (R1, R2).
 *
 * Deliberately broken build (lifetime test only): RIO_BROKEN_FC_LIFETIME
 * lets settling take busy files and frees a released record whatever
 * holds it (fc_file.c); tests/fc/fc_lifetime_test.cpp must catch it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fc_int.h"

bool
rio__fc_wb_needed(const struct fc_file *f)
{
	if (f->unlinked)
		return false;
	return f->dirty.n > 0 || f->size != f->fst.disk_size ||
		f->disk_limit != f->size;
}

static int
pwrite_all(int fd, const char *p, size_t n, uint64_t off, const char *path)
{
	int rc = rio__pwrite_all(fd, p, n, (off_t)off);

	if (rc)
		return rio__err(rc, "write back %s at %llu: %s", path,
			(unsigned long long)off, strerror(-rc));
	return 0;
}

int
rio__fc_fsync_dir(const char *path)
{
	char dir[PATH_MAX];
	const char *slash = strrchr(path, '/');
	size_t n = slash ? (size_t)(slash - path) : 0;
	int fd, rc = 0;

	if (n == 0 || n >= sizeof(dir))
		return -EINVAL;
	memcpy(dir, path, n);
	dir[n] = '\0';
	fd = rio__sys.open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (rio__sys.fsync(fd) != 0)
		rc = -errno;
	rio__sys.close(fd);
	return rc;
}

struct snap {
	uint32_t b;
	uint64_t seq;
};

/* Step 2, under f->lock shared. */
static int
write_disk(rio_fc_cache *c, struct fc_file *f, int fd, struct snap *s,
	uint64_t *ns)
{
	uint64_t size = f->size, limit = f->disk_limit, n = 0;
	struct stat st;

	if (rio__sys.fstat(fd, &st) != 0)
		return rio__errno("fstat %s", f->abs);
	if ((uint64_t)st.st_size > limit &&
	    rio__sys.ftruncate(fd, (off_t)limit) != 0)
		return rio__errno("truncate %s to %llu", f->abs,
			(unsigned long long)limit);
	pthread_mutex_lock(&c->lock);
	for (uint32_t b = f->dirty.head; b != FC_NONE; b = c->blks[b].next) {
		s[n].b = b;
		s[n].seq = c->blks[b].seq;
		n++;
	}
	pthread_mutex_unlock(&c->lock);
	for (uint64_t i = 0; i < n; i++) {
		uint64_t off = c->blks[s[i].b].fbn * FC_BS;
		int rc;
		if (off >= size)
			continue;
		rc = pwrite_all(fd, fc_data(c, s[i].b),
			size - off < FC_BS ? (size_t)(size - off) : FC_BS, off,
			f->abs);
		if (rc) {
			/* W4: give back the space this attempt took (bytes
			 * past limit are not content, B1; they are still
			 * dirty here), so that a full disk does not stay
			 * full for the other files. */
			(void)rio__sys.ftruncate(fd, (off_t)limit);
			return rc;
		}
	}
	if (rio__sys.ftruncate(fd, (off_t)size) != 0) {
		int rc = rio__errno("truncate %s to %llu", f->abs,
			(unsigned long long)size);
		(void)rio__sys.ftruncate(fd, (off_t)limit);
		return rc;
	}
	f->wb_low = size;
	*ns = n;
	return 0;
}

/*
 * A write-back of f failed part way (W4): the disk copy may hold some of
 * the new blocks.  Every block is still DIRTY and is rewritten in full
 * next time, so the disk copy's new identity is recorded as the cache's
 * own: the file must not look changed behind the cache (a conflict would
 * keep its data from the disk for good).  WB_ACTIVE stays set, so that
 * recovery redoes the write-back too.  f->lock held (shared or not).
 */
static void
failed_identity(rio_fc_cache *c, struct fc_file *f, int fd)
{
	struct stat st;

	if (rio__sys.fstat(fd, &st) == 0 &&
	    !rio__fc_fst_matches(&f->fst, &st))
		rio__fc_fst_write(c, f, f->size, f->disk_limit, &st);
}

/* W4: count the failure, say it once, and back off before the next
 * attempt of a pass that is not pressed for space. */
static void
wb_failed(rio_fc_cache *c, struct fc_file *f, int rc)
{
	uint64_t wait_ms;

	FC_STAT_ADD(c, writeback_errors, 1);
	pthread_mutex_lock(&c->lock);
	if (f->wb_error == 0)
		rio__notice("file cache: write-back of %s failed: %s; its %llu "
			    "dirty blocks stay in the cache (durable) and are "
			    "retried, and the other files are not held up",
			f->abs, rio_errormsg(),
			(unsigned long long)f->dirty.n);
	f->wb_error = rc;
	f->wb_failures++;
	wait_ms = (uint64_t)(c->wb_ms ? c->wb_ms : 1)
		<< (f->wb_failures < 8 ? f->wb_failures : 8);
	if (wait_ms > FC_WB_RETRY_MAX_MS)
		wait_ms = FC_WB_RETRY_MAX_MS;
	f->wb_retry_ns = rio_now_ns(CLOCK_MONOTONIC) + wait_ms * 1000000ull;
	pthread_mutex_unlock(&c->lock);
}

int
rio__fc_wb_file(rio_fc_cache *c, struct fc_file *f)
{
	struct snap *s = NULL;
	uint64_t n = 0, cleaned = 0;
	struct stat st;
	bool needed;
	int rc = 0, wfd = -1;

	pthread_mutex_lock(&f->wb_lock);
	pthread_rwlock_rdlock(&f->lock);
	pthread_mutex_lock(&c->lock);
	needed = rio__fc_wb_needed(f) && !f->conflict;
	if (needed) {
		s = malloc((f->dirty.n + 1) * sizeof(*s));
		if (s == NULL)
			rc = rio__err(-ENOMEM, "out of memory");
	}
	pthread_mutex_unlock(&c->lock);
	if (!needed || rc)
		goto out_locked;
	rc = rio__fc_file_fd(c, f, false);
	if (rc)
		goto out_locked;
	wfd = f->fd;
	if (f->fd_rdonly) {
		/* Opened read-only (then truncated through O_TRUNC): a
		 * descriptor of our own for this write-back. */
		wfd = rio__sys.open(f->abs, O_RDWR | O_CLOEXEC);
		if (wfd < 0) {
			rc = rio__errno("write back %s", f->abs);
			goto out_locked;
		}
	}
	/* Step 1: announce, durably, before the disk copy changes. */
	rio__fc_frec_set_flags(c, f, RIO_FC_FF_WB_ACTIVE, 0);
	rc = write_disk(c, f, wfd, s, &n);
	if (rc) {
		failed_identity(c, f, wfd);
		goto out_locked;
	}
	pthread_rwlock_unlock(&f->lock);
	/* Step 3, without the file lock: writers go on meanwhile. */
	if (rio__sys.fdatasync(wfd) != 0) {
		rc = rio__errno("fdatasync %s", f->abs);
		pthread_rwlock_rdlock(&f->lock);
		failed_identity(c, f, wfd);
		goto out_locked;
	}
	if (rio__sys.fstat(wfd, &st) != 0) {
		rc = rio__errno("fstat %s", f->abs);
		goto out;
	}
	pthread_rwlock_rdlock(&f->lock);
	/* Step 4: size and identity of the durable disk copy. */
	rio__fc_fst_write(c, f, f->size, f->wb_low, &st);
	/* Relaxed: one word readers take whole; the file-state record just
	 * written, not this copy, is what recovery trusts. */
	__atomic_store_n(&f->disk_limit, f->fst.disk_limit, __ATOMIC_RELAXED);
	/* Step 5. */
	pthread_mutex_lock(&c->lock);
	for (uint64_t i = 0; i < n; i++) {
		struct fc_blk *blk = &c->blks[s[i].b];
		struct rio_fc_desc *d = fc_desc(c, s[i].b);
		if (blk->state != FC_B_DIRTY || blk->seq != s[i].seq ||
		    blk->file != f->slot || blk->wpins > 0)
			continue; /* rewritten, dropped or mapped meanwhile */
		fc_store8(&d->state, RIO_FC_D_CLEAN);
		/* After the file-state record (step 4); durable at the drain
		 * below. */
		rio_flush(c->pool, &d->state, sizeof(d->state));
		rio__fc_mark_clean(c, f, s[i].b);
		cleaned++;
	}
	pthread_mutex_unlock(&c->lock);
	/* The CLEAN states are durable before WB_ACTIVE goes (step 6). */
	rio_drain(c->pool);
	rio__fc_frec_set_flags(c, f, 0, RIO_FC_FF_WB_ACTIVE);
	pthread_mutex_lock(&c->lock);
	if (f->wb_error)
		rio__notice("file cache: %s written back after %u failed "
			    "attempts", f->abs, f->wb_failures);
	f->wb_error = 0;
	f->wb_failures = 0;
	f->wb_retry_ns = 0;
	pthread_mutex_unlock(&c->lock);
	FC_STAT_ADD(c, writebacks, 1);
	FC_STAT_ADD(c, writeback_blocks, n);
	(void)cleaned;
out_locked:
	pthread_rwlock_unlock(&f->lock);
out:
	if (rc)
		wb_failed(c, f, rc);
	if (wfd >= 0 && wfd != f->fd)
		rio__sys.close(wfd);
	pthread_mutex_unlock(&f->wb_lock);
	free(s);
	return rc;
}

static int
by_age(const void *a, const void *b)
{
	const struct fc_file *x = *(struct fc_file *const *)a;
	const struct fc_file *y = *(struct fc_file *const *)b;

	return x->first_dirty_ns < y->first_dirty_ns ? -1 :
		x->first_dirty_ns > y->first_dirty_ns;
}

/* Close the descriptor of an idle, written file (c->lock held). */
static void
close_idle(struct fc_file *f)
{
	if (f->handles == 0 && f->refs == 0 && f->fd >= 0 &&
	    !rio__fc_wb_needed(f) && f->nmapped == 0) {
		rio__sys.close(f->fd);
		f->fd = -1;
	}
}

int
rio__fc_wb_pass(rio_fc_cache *c, bool all)
{
	uint64_t now = rio_now_ns(CLOCK_MONOTONIC);
	uint64_t age = (uint64_t)c->wb_ms * 1000000ull;
	struct fc_file **v;
	uint32_t n = 0;
	int first = 0, rc;
	bool pressure;

	v = malloc((c->nfiles + 1) * sizeof(*v));
	if (v == NULL)
		return rio__err(-ENOMEM, "out of memory");
	pthread_mutex_lock(&c->lock);
	pressure = all || c->space_waiters > 0 ||
		c->ndirty - (c->nwpinned < c->ndirty ? c->nwpinned : c->ndirty) >
			c->dirty_max / 2;
	for (uint32_t s = 0; s < c->nfiles; s++) {
		struct fc_file *f = c->files[s];
		if (f == NULL || f->busy || f->conflict || !rio__fc_wb_needed(f))
			continue;
		if (!pressure && !f->wb_wanted && now - f->first_dirty_ns < age)
			continue;
		if (!all && f->wb_error && now < f->wb_retry_ns)
			continue; /* W4: failing; retried after a while */
		rio__fc_file_get(f); /* R1, R2 */
		v[n++] = f;
	}
	pthread_mutex_unlock(&c->lock);
	qsort(v, n, sizeof(*v), by_age);
	for (uint32_t i = 0; i < n; i++) {
		rc = rio__fc_wb_file(c, v[i]);
		if (rc && first == 0)
			first = rc;
		pthread_mutex_lock(&c->lock);
		if (rc == 0)
			v[i]->wb_wanted = false;
		if (!rio__fc_file_put(c, v[i]) && rc == 0)
			close_idle(v[i]);
		pthread_cond_broadcast(&c->space_cond);
		pthread_mutex_unlock(&c->lock);
	}
	free(v);
	rc = rio__fc_settle_dirs(c);
	if (first == 0)
		first = rc;
	pthread_mutex_lock(&c->lock);
	c->wb_passes++;
	c->wb_pass_error = first;
	pthread_cond_broadcast(&c->space_cond);
	pthread_mutex_unlock(&c->lock);
	return first;
}

/* Same directory as the previous path?  (Paths are sorted by slot, not
 * by directory; this only saves the common case of one directory.) */
static bool
same_dir(const char *a, const char *b)
{
	const char *sa = strrchr(a, '/'), *sb = strrchr(b, '/');

	return sa - a == sb - b && strncmp(a, b, (size_t)(sa - a)) == 0;
}

/* A removed file whose blocks are gone, or a file the cache created: its
 * directory needs an fsync.  c->lock held. */
static bool
to_settle(rio_fc_cache *c, uint32_t s)
{
	struct fc_file *f = c->files[s];

	/* R2: a busy file belongs to its rename, unlink or forget, which
	 * may free it; it settles its directory itself. */
#ifndef RIO_BROKEN_FC_LIFETIME
	if (f == NULL || f->busy)
		return false;
#else
	if (f == NULL)
		return false; /* broken: busy files are taken too */
#endif
	if (f->unlinked)
		return f->handles == 0 && f->ncached == 0;
	return fc_load8(&c->frecs[s].flags) & RIO_FC_FF_NEW;
}

int
rio__fc_settle_dirs(rio_fc_cache *c)
{
	struct fc_file **v;
	uint32_t n = 0;
	const char *last = NULL;
	int rc = 0;

	pthread_mutex_lock(&c->lock);
	for (uint32_t s = 0; s < c->nfiles; s++)
		n += to_settle(c, s);
	if (n == 0) {
		pthread_mutex_unlock(&c->lock);
		return 0;
	}
	v = malloc(n * sizeof(*v));
	if (v == NULL) {
		pthread_mutex_unlock(&c->lock);
		return rio__err(-ENOMEM, "out of memory");
	}
	n = 0;
	for (uint32_t s = 0; s < c->nfiles; s++) {
		if (to_settle(c, s)) {
			rio__fc_file_get(c->files[s]); /* R1 */
			v[n++] = c->files[s];
		}
	}
	pthread_mutex_unlock(&c->lock);
	/* The directory entries (creations, removals) are durable on disk
	 * before the records that could redo them go. */
	for (uint32_t i = 0; i < n && rc == 0; i++) {
		if (last != NULL && same_dir(last, v[i]->abs))
			continue;
		last = v[i]->abs;
		rc = rio__fc_fsync_dir(v[i]->abs);
		if (rc)
			rc = rio__err(rc, "fsync directory of %s: %s",
				v[i]->abs, strerror(-rc));
	}
	pthread_mutex_lock(&c->lock);
	for (uint32_t i = 0; i < n; i++) {
		struct fc_file *f = v[i];
		if (rc == 0 && !f->released) {
			if (!f->unlinked) {
				rio__fc_frec_set_flags(c, f, 0, RIO_FC_FF_NEW);
			} else if (f->handles == 0 && f->ncached == 0 &&
				   f->refs == 1) {
				/* Ours is the last reference (R3). */
				f->refs = 0;
				rio__fc_file_release_record(c, f);
				continue;
			}
		}
		rio__fc_file_put(c, f);
	}
	pthread_cond_broadcast(&c->space_cond);
	pthread_mutex_unlock(&c->lock);
	free(v);
	return rc;
}

void
rio__fc_wb_kick(rio_fc_cache *c)
{
	c->wb_kick = true;
	if (c->wb_on)
		pthread_cond_signal(&c->wb_cond);
}

static void *
wb_main(void *arg)
{
	rio_fc_cache *c = arg;
	unsigned tick = c->wb_ms / 4 ? c->wb_ms / 4 : 1;

	pthread_mutex_lock(&c->lock);
	while (!c->wb_stop) {
		struct timespec ts;

		if (!c->wb_kick) {
			rio__fc_deadline(tick, &ts);
			pthread_cond_timedwait(&c->wb_cond, &c->lock, &ts);
		}
		if (c->wb_stop)
			break;
		c->wb_kick = false;
		pthread_mutex_unlock(&c->lock);
		(void)rio__fc_wb_pass(c, false); /* errors: stats, retried */
		pthread_mutex_lock(&c->lock);
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}

int
rio__fc_wb_start(rio_fc_cache *c)
{
	sigset_t all, old;
	int rc;

	/* The application's signals are not for this thread. */
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	c->wb_stop = false;
	rc = pthread_create(&c->wb_thread, NULL, wb_main, c);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc)
		return rio__err(-rc, "start the write-back thread: %s",
			strerror(rc));
	c->wb_on = true;
	return 0;
}

void
rio__fc_wb_stop(rio_fc_cache *c)
{
	if (!c->wb_on)
		return;
	pthread_mutex_lock(&c->lock);
	c->wb_stop = true;
	pthread_cond_signal(&c->wb_cond);
	pthread_mutex_unlock(&c->lock);
	pthread_join(c->wb_thread, NULL);
	pthread_mutex_lock(&c->lock);
	c->wb_on = false;
	pthread_cond_broadcast(&c->space_cond); /* waiters re-check */
	pthread_mutex_unlock(&c->lock);
}

int
rio_fc_sync_all(rio_fc_cache *c)
{
	int rc = rio__fc_check(c);

	if (rc)
		return rc;
	rc = rio__fc_wb_pass(c, true);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	for (uint32_t s = 0; s < c->nfiles && rc == 0; s++)
		if (c->files[s] != NULL && c->files[s]->conflict)
			rc = rio__err(RIO_ECHANGED,
				"%s changed on disk behind the file cache and "
				"was not written back (rio_fc_forget() drops "
				"the cache's copy)", c->files[s]->abs);
	pthread_mutex_unlock(&c->lock);
	return rc;
}
