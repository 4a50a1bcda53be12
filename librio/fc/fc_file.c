/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_file.c -- file records: open, close, unlink, rename, forget, and the
 * identity of a file's disk copy
 *
 * A file gets a record (struct rio_fc_frec, one slot of the file table)
 * the first time it is opened through the cache, and keeps it while the
 * cache holds blocks of it; an idle record (no handle, nothing dirty) is
 * reused when the table is full.
 *
 * Record states and transitions
 *   FREE     --rio_fc_open (record_create)-->   LIVE
 *   LIVE     --rio_fc_unlink-->                  UNLINKED
 *   LIVE     --eviction, rio_fc_forget, rio_fc_rename--> FREE
 *   UNLINKED --blocks dropped, directory fsynced (settle)--> FREE
 *
 * Invariants
 *   F1. (L1) A record is written while its state word is FREE, made
 *       durable, and published by storing LIVE: a crash leaves a FREE slot
 *       or a whole record.
 *   F2. A record becomes FREE only after every descriptor of it is durably
 *       FREE, so a live descriptor always names a live record (a
 *       descriptor naming a FREE record is corruption).
 *   F3. The identity (st_dev, st_ino, st_size, st_mtim) of the disk copy
 *       is recorded in the file-state record when the record is made and
 *       after every write-back.  At the first open of a file with a
 *       record, a different identity means the file was changed behind the
 *       cache: the cache's copy is dropped if it holds nothing unwritten,
 *       and the file is refused (RIO_ECHANGED, "conflict") otherwise.
 *   F4. Unlink stores UNLINKED durably before the name is removed on
 *       disk: after a crash, recovery finishes the unlink (only if the
 *       name still reaches the same inode) rather than resurrect the file.
 *       The record stays UNLINKED until its directory has been fsynced.
 *   F5. A record with RIO_FC_FF_NEW was created by the cache and its
 *       directory not yet fsynced: recovery recreates the file if the
 *       name is missing.
 *   F6. Only the first handle (0 -> 1) checks the identity, under the
 *       file's wb_lock, so write-back never runs during the check.
 *   F7. Times set on a cached file (utimensat, futimens through the shim)
 *       are set on a written-back disk copy, under the file's wb_lock and
 *       exclusive lock, and the identity is recorded after: a later
 *       write-back happens only for later writes (which move st_mtime on
 *       any file system), and the next open does not take the new mtime
 *       for a change behind the cache.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "fc_int.h"

/* ---- checksums and file-state records ---- */

uint64_t
rio__fc_frec_checksum(const struct rio_fc_frec *r)
{
	/* bytes 16..63 (gen, path_len, seq, ctime, reserved) and the path;
	 * the state and flags words and the fstate records are not summed. */
	uint64_t h = rio_checksum((const char *)r + 16, 48,
		RIO_FC_FREC_CSUM_SEED);
	return rio_checksum(r->path, sizeof(r->path), h);
}

uint64_t
rio__fc_fst_checksum(const struct rio_fc_fstate *s)
{
	return rio_checksum(s, offsetof(struct rio_fc_fstate, checksum),
		RIO_FC_FST_CSUM_SEED);
}

int
rio__fc_fst_pick(const struct rio_fc_frec *r, struct rio_fc_fstate *out)
{
	int best = -1;

	for (int k = 0; k < 2; k++) {
		const struct rio_fc_fstate *s = &r->fst[k];
		if (s->seq == 0 || s->checksum != rio__fc_fst_checksum(s) ||
		    s->disk_limit > s->size)
			continue;
		if (best < 0 || s->seq > r->fst[best].seq)
			best = k;
	}
	if (best >= 0)
		*out = r->fst[best];
	return best;
}

bool
rio__fc_fst_matches(const struct rio_fc_fstate *fs, const struct stat *st)
{
	uint64_t mt = (uint64_t)st->st_mtim.tv_sec * 1000000000ull +
		(uint64_t)st->st_mtim.tv_nsec;

	return fs->dev == (uint64_t)st->st_dev &&
		fs->ino == (uint64_t)st->st_ino &&
		fs->disk_size == (uint64_t)st->st_size && fs->mtime_ns == mt;
}

static void
fst_identity(struct rio_fc_fstate *s, const struct stat *st)
{
	s->dev = (uint64_t)st->st_dev;
	s->ino = (uint64_t)st->st_ino;
	s->disk_size = (uint64_t)st->st_size;
	s->mtime_ns = (uint64_t)st->st_mtim.tv_sec * 1000000000ull +
		(uint64_t)st->st_mtim.tv_nsec;
}

void
rio__fc_fst_write(rio_fc_cache *c, struct fc_file *f, uint64_t size,
	uint64_t disk_limit, const struct stat *st)
{
	struct rio_fc_frec *r = &c->frecs[f->slot];
	int k = 1 - f->fst_slot;
	struct rio_fc_fstate s = f->fst;

	s.seq = fc_next_seq(c);
	s.size = size;
	s.disk_limit = disk_limit < size ? disk_limit : size;
	if (st != NULL)
		fst_identity(&s, st);
	s.checksum = rio__fc_fst_checksum(&s);
	/* Into the slot that does not hold the current record: a torn write
	 * fails its checksum and the current one stays current. */
	rio_memcpy_persist(c->pool, &r->fst[k], &s, sizeof(s));
	f->fst = s;
	f->fst_slot = k;
}

void
rio__fc_frec_set_flags(rio_fc_cache *c, struct fc_file *f, uint64_t set,
	uint64_t clear)
{
	struct rio_fc_frec *r = &c->frecs[f->slot];
	uint64_t old = fc_load8(&r->flags), nv = (old | set) & ~clear;

	if (nv == old)
		return;
	fc_store8(&r->flags, nv);
	/* One word: durable before the disk work it announces starts. */
	rio_persist(c->pool, &r->flags, sizeof(r->flags));
}

/* ---- the in-memory file table ---- */

static uint32_t
path_hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s)
		h = (h ^ (uint8_t)*s++) * 16777619u;
	return h;
}

struct fc_file *
rio__fc_file_find(rio_fc_cache *c, const char *rel)
{
	struct fc_file *f = c->fhash[path_hash(rel) & c->fhash_mask];

	while (f != NULL && strcmp(f->rel, rel) != 0)
		f = f->hnext;
	return f;
}

void
rio__fc_file_hash_add(rio_fc_cache *c, struct fc_file *f)
{
	struct fc_file **h = &c->fhash[path_hash(f->rel) & c->fhash_mask];

	f->hnext = *h;
	*h = f;
}

void
rio__fc_file_hash_del(rio_fc_cache *c, struct fc_file *f)
{
	struct fc_file **h = &c->fhash[path_hash(f->rel) & c->fhash_mask];

	while (*h != NULL && *h != f)
		h = &(*h)->hnext;
	if (*h == f)
		*h = f->hnext;
	f->hnext = NULL;
}

struct fc_file *
rio__fc_file_new(rio_fc_cache *c, uint32_t slot, const char *rel)
{
	struct fc_file *f = calloc(1, sizeof(*f));

	if (f == NULL)
		return NULL;
	f->slot = slot;
	f->fd = -1;
	f->dirty.head = f->dirty.tail = FC_NONE;
	f->rel = strdup(rel);
	if (f->rel == NULL || asprintf(&f->abs, "%s/%s", c->dir, rel) < 0) {
		free(f->rel);
		free(f);
		return NULL;
	}
	pthread_rwlock_init(&f->lock, NULL);
	pthread_mutex_init(&f->wb_lock, NULL);
	pthread_mutex_init(&f->pop_lock, NULL);
	return f;
}

void
rio__fc_file_free(struct fc_file *f)
{
	if (f == NULL)
		return;
	if (f->fd >= 0)
		rio__sys.close(f->fd);
	pthread_rwlock_destroy(&f->lock);
	pthread_mutex_destroy(&f->wb_lock);
	pthread_mutex_destroy(&f->pop_lock);
	free(f->rel);
	free(f->abs);
	free(f);
}

int
rio__fc_file_fd(rio_fc_cache *c, struct fc_file *f, bool create)
{
	int fd;

	(void)c;
	if (f->fd >= 0)
		return 0;
	fd = rio__sys.open(f->abs, O_RDWR | O_CLOEXEC | (create ? O_CREAT : 0),
		0666);
	if (fd < 0 && errno == EACCES) {
		fd = rio__sys.open(f->abs, O_RDONLY | O_CLOEXEC);
		f->fd_rdonly = true;
	}
	if (fd < 0)
		return rio__errno("open %s", f->abs);
	f->fd = fd;
	return 0;
}

void
rio__fc_file_get(struct fc_file *f)
{
	f->refs++;
}

bool
rio__fc_file_put(rio_fc_cache *c, struct fc_file *f)
{
	if (--f->refs > 0)
		return false;
	pthread_cond_broadcast(&c->space_cond); /* claim() waits for this */
	if (!f->released)
		return false;
	rio__fc_file_free(f);
	return true;
}

int
rio__fc_size_limit(rio_fc_cache *c, struct fc_file *f, uint64_t end,
	const char *what)
{
	struct rlimit rl;
	int fd, rc = 0;

	(void)c;
	/* Relaxed: size_ok only grows, and a stale (smaller) value only
	 * makes the check below run again; the kernel checks the limit
	 * again at write-back. */
	if (end <= __atomic_load_n(&f->size_ok, __ATOMIC_RELAXED))
		return 0;
	/* The kernel's write checks, at the call rather than at write-back
	 * (where an error could no longer be returned to anyone): first the
	 * process's file size limit (the kernel also raises SIGXFSZ; the
	 * cache only fails the call)... */
	if (getrlimit(RLIMIT_FSIZE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
	    end > (uint64_t)rl.rlim_cur)
		return rio__err(-EFBIG, "%s %s: %llu bytes exceed the file "
					"size limit (RLIMIT_FSIZE %llu)", what,
			f->abs, (unsigned long long)end,
			(unsigned long long)rl.rlim_cur);
	/* ...then the file system's largest file: lseek(2) past it fails
	 * with EINVAL (it checks the same s_maxbytes -- per inode on ext4 --
	 * as write(2)), and costs no change to the file. */
	pthread_rwlock_rdlock(&f->lock);
	fd = f->fd;
	if (fd < 0)
		fd = rio__sys.open(f->abs, O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		off_t at = rio__sys.lseek(fd, (off_t)end, SEEK_SET);
		if (at < 0 && errno == EINVAL)
			rc = rio__err(-EFBIG, "%s %s: %llu bytes exceed the "
						"largest file its file system "
						"keeps", what, f->abs,
				(unsigned long long)end);
		if (fd != f->fd)
			rio__sys.close(fd);
	}
	pthread_rwlock_unlock(&f->lock);
	if (rc == 0) {
		/* Relaxed, as above: a monotonic maximum, nothing else
		 * published with it. */
		uint64_t ok = __atomic_load_n(&f->size_ok, __ATOMIC_RELAXED);
		while (ok < end && !__atomic_compare_exchange_n(&f->size_ok,
				&ok, end, false, __ATOMIC_RELAXED,
				__ATOMIC_RELAXED))
			;
	}
	return rc;
}

/* Release the record of an idle file whose blocks are all durably FREE
 * (F2).  c->lock held.  R3: a struct still referenced outlives its
 * record until the last rio__fc_file_put(). */
void
rio__fc_file_release_record(rio_fc_cache *c, struct fc_file *f)
{
	struct rio_fc_frec *r = &c->frecs[f->slot];

	fc_store8(&r->state, RIO_FC_F_FREE);
	/* The slot is free on media before it can be handed out again. */
	rio_persist(c->pool, &r->state, sizeof(r->state));
	if (!f->unlinked)
		rio__fc_file_hash_del(c, f);
	c->files[f->slot] = NULL;
	c->nfiles_used--;
#ifndef RIO_BROKEN_FC_LIFETIME
	if (f->refs > 0)
		f->released = true;
	else
#endif
		rio__fc_file_free(f); /* broken: whatever holds it */
}

/* Drop every block of f: f->lock held exclusively, c->lock held. */
static void
drop_all_blocks(rio_fc_cache *c, struct fc_file *f)
{
	rio__fc_reclaim_stale(c);
	rio__fc_drop_blocks(c, f, 0);
	/* F2: the descriptors are durably FREE before the record may go. */
	rio__fc_reclaim_stale(c);
}

void
rio__fc_file_drop(rio_fc_cache *c, struct fc_file *f, bool unlinked)
{
	pthread_rwlock_wrlock(&f->lock);
	pthread_mutex_lock(&c->lock);
	drop_all_blocks(c, f);
	f->size = 0;
	if (unlinked) {
		/* Settled (fsync of the directory, then FREE) by write-back,
		 * which may do so as soon as the reference goes (R1). */
		if (f->fd >= 0) {
			rio__sys.close(f->fd);
			f->fd = -1;
		}
		pthread_rwlock_unlock(&f->lock);
		rio__fc_file_put(c, f);
		pthread_mutex_unlock(&c->lock);
		return;
	}
	pthread_rwlock_unlock(&f->lock); /* nobody else can hold it: idle */
	rio__fc_file_release_record(c, f);
	pthread_mutex_unlock(&c->lock);
}

static bool
record_idle(const struct fc_file *f)
{
	return f->handles == 0 && f->refs == 0 && !f->busy && !f->unlinked &&
		!f->conflict && f->dirty.n == 0 && f->nmapped == 0 &&
		!rio__fc_wb_needed(f);
}

/* Free a slot by dropping an idle, settled file.  c->lock held. */
static bool
evict_idle_record(rio_fc_cache *c)
{
	for (uint32_t s = 0; s < c->nfiles; s++) {
		struct fc_file *f = c->files[s];
		if (f == NULL || !record_idle(f) ||
		    (fc_load8(&c->frecs[s].flags) & RIO_FC_FF_NEW))
			continue;
		if (pthread_rwlock_trywrlock(&f->lock) != 0)
			continue;
		drop_all_blocks(c, f);
		pthread_rwlock_unlock(&f->lock);
		rio__fc_file_release_record(c, f);
		return true;
	}
	return false;
}

/* Can some record become free without a file being closed?  c->lock. */
static bool
records_can_free(rio_fc_cache *c)
{
	for (uint32_t s = 0; s < c->nfiles; s++) {
		struct fc_file *f = c->files[s];
		if (f != NULL && f->handles == 0 && !f->conflict && !f->busy &&
		    f->nmapped == 0)
			return true;
	}
	return false;
}

static uint32_t
free_slot(rio_fc_cache *c)
{
	for (uint32_t s = 0; s < c->nfiles; s++)
		if (c->files[s] == NULL)
			return s;
	return FC_NONE;
}

/* Make a record for rel (F1).  c->lock held; may drop it while making
 * records idle. */
static int
record_create(rio_fc_cache *c, const char *rel, const struct stat *st,
	bool created, struct fc_file **out)
{
	struct rio_fc_frec n, *r;
	struct fc_file *f;
	uint32_t slot;

	for (int attempt = 0;; attempt++) {
		slot = free_slot(c);
		if (slot != FC_NONE)
			break;
		if (evict_idle_record(c))
			continue;
		if (!records_can_free(c) || attempt >= 100)
			return rio__err(-ENFILE,
				"file cache: all %u file records are in use "
				"by open or unwritten files", c->nfiles);
		/* Settle removed files' records (a directory fsync) first,
		 * then, if that is not enough, write files back so that
		 * their records become idle.  A pass of the write-back
		 * thread may hold some meanwhile: wait for it a little. */
		pthread_mutex_unlock(&c->lock);
		if (attempt % 2 == 0)
			rio__fc_settle_dirs(c);
		else
			rio__fc_wb_pass(c, true);
		pthread_mutex_lock(&c->lock);
		if (rio__fc_file_find(c, rel) != NULL)
			return -EAGAIN; /* another thread made it meanwhile */
		if (attempt >= 2 && free_slot(c) == FC_NONE) {
			struct timespec ts;
			rio__fc_deadline(10, &ts);
			pthread_cond_timedwait(&c->space_cond, &c->lock, &ts);
		}
	}
	r = &c->frecs[slot];
	memset(&n, 0, sizeof(n));
	n.flags = created ? RIO_FC_FF_NEW : 0;
	n.gen = r->gen + 1;
	n.path_len = (uint32_t)strlen(rel);
	n.seq = fc_next_seq(c);
	n.ctime_ns = rio_now_ns(CLOCK_MONOTONIC);
	n.fst[0].seq = fc_next_seq(c);
	n.fst[0].size = (uint64_t)st->st_size;
	n.fst[0].disk_limit = (uint64_t)st->st_size;
	fst_identity(&n.fst[0], st);
	n.fst[0].checksum = rio__fc_fst_checksum(&n.fst[0]);
	memcpy(n.path, rel, n.path_len);
	n.checksum = rio__fc_frec_checksum(&n);

	f = rio__fc_file_new(c, slot, rel);
	if (f == NULL)
		return rio__err(-ENOMEM, "out of memory");
	/* F1: everything but the state word, durable while it says FREE... */
	rio_memcpy_persist(c->pool, (char *)r + 8, (char *)&n + 8,
		sizeof(n) - 8);
	/* ...then one 8-byte store publishes the record. */
	fc_store8(&r->state, RIO_FC_F_LIVE);
	rio_persist(c->pool, &r->state, sizeof(r->state));

	f->gen = n.gen;
	f->rec_seq = n.seq;
	f->fst = n.fst[0];
	f->fst_slot = 0;
	f->size = f->disk_limit = (uint64_t)st->st_size;
	c->files[slot] = f;
	c->nfiles_used++;
	rio__fc_file_hash_add(c, f);
	*out = f;
	return 0;
}

/* F3 at the first open.  f->wb_lock and f->lock (exclusive) held. */
static int
check_identity(rio_fc_cache *c, struct fc_file *f, const struct stat *st)
{
	bool unwritten;

	if (rio__fc_fst_matches(&f->fst, st))
		return 0;
	pthread_mutex_lock(&c->lock);
	unwritten = f->dirty.n > 0 || rio__fc_wb_needed(f);
	if (!unwritten) {
		/* Nothing of ours is unwritten: the disk's copy wins. */
		drop_all_blocks(c, f);
		pthread_mutex_unlock(&c->lock);
		rio__fc_fst_write(c, f, (uint64_t)st->st_size,
			(uint64_t)st->st_size, st);
		f->size = f->disk_limit = (uint64_t)st->st_size;
		return 0;
	}
	f->conflict = true;
	FC_STAT_ADD(c, conflicts, 1);
	pthread_mutex_unlock(&c->lock);
	return rio__err(RIO_ECHANGED,
		"%s changed on disk behind the file cache (size %llu -> %lld, "
		"inode %llu -> %llu) while the cache holds %llu unwritten "
		"blocks; rio_fc_forget() drops the cache's copy",
		f->abs, (unsigned long long)f->fst.disk_size,
		(long long)st->st_size, (unsigned long long)f->fst.ino,
		(unsigned long long)st->st_ino,
		(unsigned long long)f->dirty.n);
}

static void
handle_link(rio_fc_cache *c, rio_fc_file *h)
{
	h->prev = NULL;
	h->next = c->handles;
	if (c->handles)
		c->handles->prev = h;
	c->handles = h;
}

static void
handle_unlink(rio_fc_cache *c, rio_fc_file *h)
{
	if (h->prev)
		h->prev->next = h->next;
	else if (c->handles == h)
		c->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	h->prev = h->next = NULL;
}

/* Open the disk file as open(2) would for these flags. */
static int
open_disk(const char *abs, int flags, unsigned mode, struct stat *st,
	bool *created)
{
	int acc = flags & O_ACCMODE, fd;
	bool existed = rio__sys.lstat(abs, st) == 0;

	fd = rio__sys.open(abs, (acc == O_RDONLY ? O_RDONLY : O_RDWR) |
			O_CLOEXEC | (flags & (O_CREAT | O_EXCL | O_NOFOLLOW)),
		mode);
	if (fd < 0 && errno == EACCES && acc == O_WRONLY)
		return rio__err(-EACCES,
			"open %s: the file cache needs read access to write "
			"part of a block", abs);
	if (fd < 0)
		return rio__errno("open %s", abs);
	if (rio__sys.fstat(fd, st) != 0) {
		int rc = rio__errno("fstat %s", abs);
		rio__sys.close(fd);
		return rc;
	}
	if (!S_ISREG(st->st_mode)) {
		rio__sys.close(fd);
		return rio__err(S_ISDIR(st->st_mode) ? -EISDIR : -EINVAL,
			"%s is not a regular file: the file cache keeps only "
			"regular files", abs);
	}
	*created = !existed && (flags & O_CREAT);
	return fd;
}

/* The checks open(2) would make, without opening another descriptor
 * (closing one would drop the process's POSIX locks on the file). */
static int
check_access(const char *abs, int flags, struct stat *st)
{
	int acc = flags & O_ACCMODE;
	int mode = acc == O_RDONLY ? R_OK : acc == O_WRONLY ? W_OK : R_OK | W_OK;

	if (rio__sys.stat(abs, st) != 0)
		return errno == ENOENT ? -ENOENT : rio__errno("stat %s", abs);
	if ((flags & O_CREAT) && (flags & O_EXCL))
		return rio__err(-EEXIST, "open %s: file exists", abs);
	if (faccessat(AT_FDCWD, abs, mode, AT_EACCESS) != 0)
		return rio__errno("open %s", abs);
	return 0;
}

int
rio_fc_open_mode(rio_fc_cache *c, const char *path, int flags, unsigned mode,
	rio_fc_file **out)
{
	int acc = flags & O_ACCMODE, fd = -1, rc;
	char *rel = NULL, *abs = NULL;
	struct fc_file *f = NULL;
	rio_fc_file *h = NULL;
	bool created = false, first = false, fresh = false, usable;
	struct stat st;

	*out = NULL;
	rc = rio__fc_check(c);
	if (rc)
		return rc;
	if (acc == O_ACCMODE || (flags & (O_DIRECTORY | O_PATH)) ||
	    (flags & __O_TMPFILE) == __O_TMPFILE)
		return rio__err(-EINVAL,
			"rio_fc_open %s: flags 0x%x: only regular files are "
			"cached", path, (unsigned)flags);
	rc = rio__fc_resolve(c, path, &rel, &abs);
	if (rc)
		return rc;
	h = calloc(1, sizeof(*h));
	if (h == NULL) {
		rc = rio__err(-ENOMEM, "out of memory");
		goto out;
	}
	h->c = c;
	h->accmode = acc;

	pthread_mutex_lock(&c->lock);
again:
	f = rio__fc_file_find(c, rel);
	if (f != NULL) {
		if (f->busy || f->conflict) {
			rc = f->busy ? rio__err(-EBUSY,
				"%s is being renamed or removed", abs) :
				rio__err(RIO_ECHANGED,
				"%s changed on disk behind the file cache; "
				"rio_fc_forget() drops the cache's copy", abs);
			pthread_mutex_unlock(&c->lock);
			goto out;
		}
		first = f->handles++ == 0;
		h->f = f;
		handle_link(c, h);
		/* handles > 0 from here: f stays, and write-back does not
		 * close f->fd (it does so only under c->lock, idle files). */
		usable = f->fd >= 0 && !(f->fd_rdonly && acc != O_RDONLY);
		pthread_mutex_unlock(&c->lock);
		if (usable)
			rc = check_access(abs, flags, &st);
		else
			rc = -ENOENT;
		if (rc == -ENOENT) {
			/* No usable descriptor yet, or the name is gone. */
			fd = open_disk(abs, flags, mode, &st, &created);
			rc = fd < 0 ? fd : 0;
		}
		if (rc)
			goto fail_handle;
	} else {
		pthread_mutex_unlock(&c->lock);
		fd = open_disk(abs, flags, mode, &st, &created);
		if (fd < 0) {
			rc = fd;
			goto out;
		}
		pthread_mutex_lock(&c->lock);
		if (rio__fc_file_find(c, rel) != NULL) {
			rio__sys.close(fd); /* lost a race: use theirs */
			fd = -1;
			goto again;
		}
		rc = record_create(c, rel, &st, created, &f);
		if (rc == -EAGAIN) {
			rio__sys.close(fd);
			fd = -1;
			goto again;
		}
		if (rc) {
			pthread_mutex_unlock(&c->lock);
			goto out;
		}
		f->handles = 1;
		h->f = f;
		handle_link(c, h);
		fresh = true;
		pthread_mutex_unlock(&c->lock);
	}

	/* F6: the identity check of the first handle, and the descriptor. */
	pthread_mutex_lock(&f->wb_lock);
	pthread_rwlock_wrlock(&f->lock);
	if (fd >= 0 && f->fd >= 0 &&
	    (f->fst.ino != (uint64_t)st.st_ino || f->fd_rdonly)) {
		/* The name reaches another file now, or we need write
		 * access: this descriptor replaces the old one. */
		rio__sys.close(f->fd);
		f->fd = -1;
	}
	if (f->fd < 0 && fd >= 0) {
		f->fd = fd;
		f->fd_rdonly = acc == O_RDONLY;
		fd = -1;
	}
	if (first && !fresh)
		rc = check_identity(c, f, &st);
	pthread_rwlock_unlock(&f->lock);
	pthread_mutex_unlock(&f->wb_lock);
	if (rc)
		goto fail_handle;
	if (fd >= 0) {
		rio__sys.close(fd);
		fd = -1;
	}
	/* O_RDONLY|O_TRUNC truncates too, as on Linux. */
	if ((flags & O_TRUNC) && f->size != 0 &&
	    (rc = rio__fc_truncate(c, f, 0)) != 0)
		goto fail_handle;
	*out = h;
	h = NULL;
	goto out;

fail_handle:
	if (fd >= 0)
		rio__sys.close(fd);
	fd = -1;
	rio_fc_close(h);
	h = NULL;
out:
	free(h);
	free(rel);
	free(abs);
	return rc;
}

int
rio_fc_open(rio_fc_cache *c, const char *path, int flags, rio_fc_file **file)
{
	return rio_fc_open_mode(c, path, flags, 0666, file);
}

int
rio_fc_close(rio_fc_file *h)
{
	rio_fc_cache *c;
	struct fc_file *f;
	bool drop = false;

	if (h == NULL)
		return 0;
	c = h->c;
	f = h->f;
	if (rio__fc_forked(c)) {
		free(h); /* the pool is the parent's: touch nothing */
		return 0;
	}
	rio__fc_unmap_handle(h);
	pthread_mutex_lock(&c->lock);
	handle_unlink(c, h);
	if (f != NULL && --f->handles == 0) {
		if (f->unlinked) {
			drop = true;
			rio__fc_file_get(f); /* R1: dropped by file_drop */
		}
		else if (f->dirty.n > 0 || rio__fc_wb_needed(f))
			/* Write-back "at close": handed to the thread's next
			 * pass, not started at once -- a file closed and
			 * removed at once (a journal) never costs a sync. */
			f->wb_wanted = true;
	}
	pthread_mutex_unlock(&c->lock);
	if (drop)
		rio__fc_file_drop(c, f, true);
	free(h);
	return 0;
}

/* Mark f busy (no open, no write-back pass) once no pass works on it. */
static int
claim(rio_fc_cache *c, struct fc_file *f, bool need_idle, const char *what)
{
	if (f->busy || (need_idle && f->handles > 0))
		return rio__err(-EBUSY, "%s %s: the file is %s", what, f->abs,
			f->busy ? "being renamed or removed" :
				  "open through the cache");
	f->busy = true;
	while (f->refs > 0)
		pthread_cond_wait(&c->space_cond, &c->lock);
	return 0;
}

/*
 * The name of busy f is gone on disk and its record says UNLINKED: out of
 * the path hash, no longer busy, and dropped now if no handle has it (the
 * last close does otherwise).  f->wb_lock held; released here.  The record
 * is settled (directory fsynced, slot freed) by the next write-back pass:
 * not at once, so that a program removing a file per transaction (a
 * journal) does not pay a sync for each.
 */
static void
finish_removal(rio_fc_cache *c, struct fc_file *f)
{
	bool drop;

	pthread_mutex_lock(&c->lock);
	rio__fc_file_hash_del(c, f);
	f->unlinked = true;
	f->busy = false;
	f->wb_wanted = false;
	drop = f->handles == 0;
	/* R1: no longer busy, and not yet dropped: settling (which frees an
	 * unlinked record with no handle) must wait for us. */
	rio__fc_file_get(f);
	pthread_mutex_unlock(&c->lock);
	pthread_mutex_unlock(&f->wb_lock);
	if (drop) {
		rio__fc_file_drop(c, f, true);
	} else {
		pthread_mutex_lock(&c->lock);
		rio__fc_file_put(c, f);
		pthread_mutex_unlock(&c->lock);
	}
}

int
rio_fc_unlink(rio_fc_cache *c, const char *path)
{
	char *rel = NULL, *abs = NULL;
	struct rio_fc_frec *r;
	struct fc_file *f;
	struct stat st;
	int rc;

	rc = rio__fc_check(c);
	if (rc)
		return rc;
	rc = rio__fc_resolve(c, path, &rel, &abs);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	f = rio__fc_file_find(c, rel);
	if (f == NULL) {
		pthread_mutex_unlock(&c->lock);
		if (rio__sys.unlink(abs) != 0)
			rc = rio__errno("unlink %s", abs);
		goto out;
	}
	rc = claim(c, f, false, "unlink");
	pthread_mutex_unlock(&c->lock);
	if (rc)
		goto out;

	pthread_mutex_lock(&f->wb_lock);
	r = &c->frecs[f->slot];
	/* F4: the record says UNLINKED, durably, before the name goes. */
	if (rio__sys.lstat(abs, &st) == 0 && S_ISREG(st.st_mode) &&
	    (uint64_t)st.st_ino != f->fst.ino) {
		/* The name reaches another inode than the one recorded (it
		 * was replaced behind the cache): remember that one. */
		pthread_rwlock_wrlock(&f->lock);
		rio__fc_fst_write(c, f, f->size, f->disk_limit, &st);
		pthread_rwlock_unlock(&f->lock);
	}
	fc_store8(&r->state, RIO_FC_F_UNLINKED);
	/* Durable before unlink(2): recovery finishes it, never undoes it. */
	rio_persist(c->pool, &r->state, sizeof(r->state));
	if (rio__sys.unlink(abs) != 0 && errno != ENOENT) {
		rc = rio__errno("unlink %s", abs);
		fc_store8(&r->state, RIO_FC_F_LIVE);
		/* Undone: the file stays, with every block it had. */
		rio_persist(c->pool, &r->state, sizeof(r->state));
		pthread_mutex_lock(&c->lock);
		f->busy = false;
		pthread_mutex_unlock(&c->lock);
		pthread_mutex_unlock(&f->wb_lock);
		goto out;
	}
	finish_removal(c, f);
out:
	free(rel);
	free(abs);
	return rc;
}

/* Write f back and drop it from the cache (rename, forget). */
static int
flush_and_forget(rio_fc_cache *c, struct fc_file *f, bool write_back)
{
	int rc = 0;

	if (write_back) {
		rc = rio__fc_wb_file(c, f);
		if (rc == 0 && (fc_load8(&c->frecs[f->slot].flags) &
				       RIO_FC_FF_NEW)) {
			rc = rio__fc_fsync_dir(f->abs);
			if (rc)
				rc = rio__err(rc, "fsync directory of %s: %s",
					f->abs, strerror(-rc));
		}
		if (rc)
			return rc;
	}
	rio__fc_file_drop(c, f, false);
	return 0;
}

/* Write f back and return with f->wb_lock and f->lock (exclusive) held
 * and nothing of f unwritten (a file in conflict: as it is).  A claim on
 * f is held (R1). */
static int
write_back_and_lock(rio_fc_cache *c, struct fc_file *f, const char *what)
{
	for (int attempt = 0;; attempt++) {
		bool written;
		int rc = rio__fc_wb_file(c, f);
		if (rc)
			return rc;
		pthread_mutex_lock(&f->wb_lock);
		pthread_rwlock_wrlock(&f->lock);
		pthread_mutex_lock(&c->lock);
		written = f->conflict ||
			!(rio__fc_wb_needed(f) || f->dirty.n > 0);
		pthread_mutex_unlock(&c->lock);
		if (written)
			return 0;
		/* Written to meanwhile through an open handle: again. */
		pthread_rwlock_unlock(&f->lock);
		pthread_mutex_unlock(&f->wb_lock);
		if (attempt >= 100)
			return rio__err(-EBUSY, "%s %s: the file is being "
						"written", what, f->abs);
	}
}

/*
 * Rename `from` over the cached file f (claimed): write f back, then,
 * with f's locks held so that nothing is written to it meanwhile, rename
 * on disk and turn f's record UNLINKED.  Handles of f keep the old file,
 * as descriptors of a replaced file do; the last close drops it.  A
 * crash before the disk rename leaves f complete under its name; after
 * it, a LIVE record whose name reaches another inode and that holds
 * nothing unwritten, which recovery and the next open drop (F3), and
 * recovery never removes the new file (F4 checks the inode).
 */
static int
replace_target(rio_fc_cache *c, struct fc_file *f, const char *from)
{
	struct rio_fc_frec *r = &c->frecs[f->slot];
	int rc;

	rc = write_back_and_lock(c, f, "rename over");
	if (rc)
		return rc;
	if (rio__sys.rename(from, f->abs) != 0) {
		rc = rio__errno("rename %s to %s", from, f->abs);
		pthread_rwlock_unlock(&f->lock);
		pthread_mutex_unlock(&f->wb_lock);
		return rc;
	}
	fc_store8(&r->state, RIO_FC_F_UNLINKED);
	/* The name reaches the new file: the old one's record is a removed
	 * file's, durably, before its writers go on (F4). */
	rio_persist(c->pool, &r->state, sizeof(r->state));
	pthread_rwlock_unlock(&f->lock);
	finish_removal(c, f);
	return 0;
}

int
rio_fc_rename(rio_fc_cache *c, const char *from, const char *to)
{
	char *rel[2] = { NULL, NULL }, *abs[2] = { NULL, NULL };
	const char *path[2] = { from, to };
	struct fc_file *f[2] = { NULL, NULL };
	int rc, inside = 0;

	rc = rio__fc_check(c);
	if (rc)
		return rc;
	for (int k = 0; k < 2; k++) {
		rc = rio__fc_resolve(c, path[k], &rel[k], &abs[k]);
		if (rc == 0)
			inside++;
		else if (rc != RIO_EOUTSIDE)
			goto out;
	}
	if (inside == 0) {
		rc = rio__err(RIO_EOUTSIDE,
			"rename %s to %s: neither is below the cache "
			"directory %s", from, to, c->dir);
		goto out;
	}
	rc = 0;
	if (rel[0] != NULL && rel[1] != NULL && strcmp(rel[0], rel[1]) == 0) {
		struct stat st; /* rename to itself: nothing to do */
		if (rio__sys.lstat(abs[0], &st) != 0)
			rc = rio__errno("rename %s", from);
		goto out;
	}
	pthread_mutex_lock(&c->lock);
	for (int k = 0; k < 2 && rc == 0; k++) {
		if (rel[k] == NULL)
			continue;
		f[k] = rio__fc_file_find(c, rel[k]);
		/* The target may be open (its handles keep the old file, as
		 * on disk); the source may not. */
		if (f[k] != NULL &&
		    (rc = claim(c, f[k], k == 0, "rename")) != 0)
			f[k] = NULL;
	}
	if (rc && f[0] != NULL)
		f[0]->busy = false;
	pthread_mutex_unlock(&c->lock);
	if (rc)
		goto out;
	/* Both files on disk, complete and synced, and out of the cache (an
	 * open target: its record removed once the name is gone): a crash
	 * at any point leaves the rename done or not done, with all
	 * acknowledged data in whichever file. */
	for (int k = 0; k < 2; k++) {
		if (f[k] == NULL)
			continue;
		rc = k == 1 ? replace_target(c, f[1], abs[0] ? abs[0] : from) :
			      flush_and_forget(c, f[k], true);
		if (rc) {
			pthread_mutex_lock(&c->lock);
			for (int j = k; j < 2; j++)
				if (f[j] != NULL)
					f[j]->busy = false;
			pthread_mutex_unlock(&c->lock);
			goto out;
		}
		if (k == 1)
			goto out; /* replace_target renamed */
	}
	if (rio__sys.rename(abs[0] ? abs[0] : from, abs[1] ? abs[1] : to))
		rc = rio__errno("rename %s to %s", from, to);
out:
	for (int k = 0; k < 2; k++) {
		free(rel[k]);
		free(abs[k]);
	}
	return rc;
}

/* The file record of path; on success c->lock is held. */
static int
lookup_locked(rio_fc_cache *c, const char *path, struct fc_file **f)
{
	char *rel = NULL;
	int rc = rio__fc_check(c);

	if (rc == 0)
		rc = rio__fc_resolve(c, path, &rel, NULL);
	if (rc)
		return rc;
	pthread_mutex_lock(&c->lock);
	*f = rio__fc_file_find(c, rel);
	free(rel);
	if (*f != NULL)
		return 0;
	pthread_mutex_unlock(&c->lock);
	return rio__err(-ENOENT, "%s: the file cache holds nothing for it",
		path);
}

int
rio_fc_forget(rio_fc_cache *c, const char *path)
{
	struct fc_file *f;
	int rc = lookup_locked(c, path, &f);

	if (rc)
		return rc;
	rc = claim(c, f, true, "forget");
	pthread_mutex_unlock(&c->lock);
	if (rc == 0) {
		/* No write-back in flight (claim waited for passes). */
		pthread_mutex_lock(&f->wb_lock);
		pthread_mutex_unlock(&f->wb_lock);
		flush_and_forget(c, f, false);
	}
	return rc;
}

/* F7, with a claim on f held (R1). */
static int
set_times(rio_fc_cache *c, struct fc_file *f, int (*apply)(void *), void *arg)
{
	struct stat st;
	int rc;

	rc = write_back_and_lock(c, f, "set the times of");
	if (rc)
		return rc;
	rc = apply(arg) == 0 ? 0 : -errno;
	if (rc == 0 && !f->conflict &&
	    (f->fd >= 0 ? rio__sys.fstat(f->fd, &st) :
			  rio__sys.stat(f->abs, &st)) == 0 &&
	    (uint64_t)st.st_ino == f->fst.ino)
		rio__fc_fst_write(c, f, f->size, f->disk_limit, &st);
	pthread_rwlock_unlock(&f->lock);
	pthread_mutex_unlock(&f->wb_lock);
	return rc;
}

int
rio__fc_set_times(rio_fc_file *h, int (*apply)(void *), void *arg)
{
	int rc = rio__fc_check(h->c);

	return rc ? rc : set_times(h->c, h->f, apply, arg);
}

int
rio__fc_set_times_path(rio_fc_cache *c, const char *path,
	int (*apply)(void *), void *arg)
{
	struct fc_file *f;
	int rc = lookup_locked(c, path, &f);

	if (rc == -ENOENT || (rc == 0 && (f->busy || f->conflict))) {
		if (rc == 0)
			pthread_mutex_unlock(&c->lock);
		return apply(arg) == 0 ? 0 : -errno; /* the disk's alone */
	}
	if (rc)
		return rc;
	rio__fc_file_get(f); /* R1 */
	pthread_mutex_unlock(&c->lock);
	rc = set_times(c, f, apply, arg);
	pthread_mutex_lock(&c->lock);
	rio__fc_file_put(c, f);
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int
rio_fc_stat_size(rio_fc_cache *c, const char *path, uint64_t *size)
{
	struct fc_file *f;
	int rc = lookup_locked(c, path, &f);

	if (rc)
		return rc;
	/* Relaxed: a snapshot of one word stored whole under f->lock. */
	*size = __atomic_load_n(&f->size, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

bool
rio__fc_size_by_id(rio_fc_cache *c, uint64_t dev, uint64_t ino,
	uint64_t *size)
{
	bool found = false;

	pthread_mutex_lock(&c->lock);
	for (uint32_t s = 0; s < c->nfiles && !found; s++) {
		struct fc_file *f = c->files[s];
		if (f != NULL && !f->unlinked && f->fst.ino == ino &&
		    f->fst.dev == dev) {
			/* Relaxed: a snapshot, as in rio_fc_size. */
			*size = __atomic_load_n(&f->size, __ATOMIC_RELAXED);
			found = true;
		}
	}
	pthread_mutex_unlock(&c->lock);
	return found;
}
