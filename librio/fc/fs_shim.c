/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fs_shim.c -- librio-fs.so: an unmodified program on the Rio file cache
 *
 *   RIO_FS_DIR=/some/dir RIO_FS_POOL=/dev/shm/cache LD_PRELOAD=librio-fs.so prog
 *
 * The regular files below RIO_FS_DIR are read and written through a Rio
 * file cache kept in the pool RIO_FS_POOL (created if missing), so a
 * write is durable once it returns and fsync costs nothing.  Everything
 * else passes through untouched.  docs/librio-fc.3.md lists what is
 * intercepted, and what is refused (with errno set and a line on stderr)
 * rather than silently bypassing the cache.
 *
 * How: the program's descriptor for a cached file is a real descriptor of
 * the real file (so fcntl locks, fchmod, fstat's identity, close-on-exec
 * behave as the kernel makes them), but its data calls -- read, write,
 * pread, pwrite, lseek, ftruncate, fsync, fstat's size -- are served by a
 * cache handle kept in a table indexed by descriptor; the kernel's file
 * offset of it is never used.  dup'ed descriptors share the table entry
 * (an "open file description": offset and flags).
 *
 * Invariants
 *   S1. A descriptor is in the table iff the program got it from an
 *       intercepted open of a path below the directory (or dup'ed one):
 *       FILE (a cached regular file), DIR (a directory below or at the
 *       directory: fsync decides whether the disk needs it), or POISON
 *       (inherited over exec: unusable, every use fails).
 *   S2. The cache itself never calls the interposed functions on cached
 *       files: its system calls go through rio__sys, pointed at libc's
 *       definitions (dlsym RTLD_NEXT) before the cache is opened.
 *   S3. A thread inside the shim (opening the cache) passes its own calls
 *       straight to libc (depth counter), so the shim never recurses.
 *   S4. The fast path of a call on a descriptor that is not cached is one
 *       atomic load of its table slot.
 *   S5. A descriptor's entry is looked up and used under tab_lock (shared),
 *       so a concurrent close cannot free it in use.
 */
/* Our own open64, stat64, ...: no redirection of the plain names. */
#undef _FILE_OFFSET_BITS
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>
#include <utime.h>

#include "fc_int.h"

#define SHIM_EXPORT __attribute__((visibility("default")))
#define SHIM_COMMA ,

/* glibc entry points that its headers do not declare. */
int __open_2(const char *path, int flags);
int __open64_2(const char *path, int flags);
int __openat_2(int dirfd, const char *path, int flags);
int __openat64_2(int dirfd, const char *path, int flags);
ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen);
ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen);
ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off,
	size_t buflen);
int __fxstat(int ver, int fd, struct stat *st);
int __fxstat64(int ver, int fd, struct stat64 *st);
int __xstat(int ver, const char *path, struct stat *st);
int __xstat64(int ver, const char *path, struct stat64 *st);
int __lxstat(int ver, const char *path, struct stat *st);
int __lxstat64(int ver, const char *path, struct stat64 *st);
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st,
	int flags);
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st,
	int flags);

/* x86-64 (LP64): off_t and off64_t, struct stat and struct stat64 are
 * the same; the 64 variants share the plain ones' code. */
_Static_assert(sizeof(off_t) == sizeof(off64_t), "LP64 only");
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "LP64 only");
#define ST(p) ((struct stat *)(void *)(p))

/* ---- the real functions ---- */

static struct {
	int (*open)(const char *, int, ...);
	int (*openat)(int, const char *, int, ...);
	int (*close)(int);
	ssize_t (*read)(int, void *, size_t);
	ssize_t (*write)(int, const void *, size_t);
	ssize_t (*pread)(int, void *, size_t, off_t);
	ssize_t (*pwrite)(int, const void *, size_t, off_t);
	ssize_t (*readv)(int, const struct iovec *, int);
	ssize_t (*writev)(int, const struct iovec *, int);
	ssize_t (*preadv)(int, const struct iovec *, int, off_t);
	ssize_t (*pwritev)(int, const struct iovec *, int, off_t);
	ssize_t (*preadv2)(int, const struct iovec *, int, off_t, int);
	ssize_t (*pwritev2)(int, const struct iovec *, int, off_t, int);
	off_t (*lseek)(int, off_t, int);
	int (*fsync)(int);
	int (*fdatasync)(int);
	int (*ftruncate)(int, off_t);
	int (*truncate)(const char *, off_t);
	int (*fstat)(int, struct stat *);
	int (*stat)(const char *, struct stat *);
	int (*lstat)(const char *, struct stat *);
	int (*fstatat)(int, const char *, struct stat *, int);
	int (*statx)(int, const char *, int, unsigned, struct statx *);
	int (*dup)(int);
	int (*dup2)(int, int);
	int (*dup3)(int, int, int);
	int (*fcntl)(int, int, ...);
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	int (*unlink)(const char *);
	int (*unlinkat)(int, const char *, int);
	int (*remove)(const char *);
	int (*rename)(const char *, const char *);
	int (*renameat)(int, const char *, int, const char *);
	int (*renameat2)(int, const char *, int, const char *, unsigned);
	int (*link)(const char *, const char *);
	int (*linkat)(int, const char *, int, const char *, int);
	int (*mkdir)(const char *, mode_t);
	int (*rmdir)(const char *);
	int (*utimensat)(int, const char *, const struct timespec *, int);
	int (*futimens)(int, const struct timespec *);
	ssize_t (*sendfile)(int, int, off_t *, size_t);
	ssize_t (*copy_file_range)(int, off_t *, int, off_t *, size_t,
		unsigned);
	ssize_t (*splice)(int, off_t *, int, off_t *, size_t, unsigned);
	int (*fallocate)(int, int, off_t, off_t);
	int (*posix_fallocate)(int, off_t, off_t);
	int (*sync_file_range)(int, off_t, off_t, unsigned);
	FILE *(*fopen)(const char *, const char *);
	FILE *(*fdopen)(int, const char *);
	FILE *(*freopen)(const char *, const char *, FILE *);
	int (*close_range)(unsigned, unsigned, int);
} real;

/* ---- state ---- */

enum ofd_kind { OFD_FILE = 1, OFD_DIR, OFD_POISON };

/* An open file description of a cached file (shared by dup'ed fds). */
struct ofd {
	int refs;
	int kind;
	rio_fc_file *h;
	char *path;          /* for messages */
	pthread_mutex_t lock; /* pos, flags */
	uint64_t pos;
	int flags;           /* O_ACCMODE | O_APPEND */
};

#define TAB_PAGE 1024
#define TAB_PAGES 1024 /* descriptors up to 1M */

static struct ofd **tab[TAB_PAGES];
static pthread_rwlock_t tab_lock = PTHREAD_RWLOCK_INITIALIZER;
static rio_fc_cache *cache;
static pthread_rwlock_t cache_lock = PTHREAD_RWLOCK_INITIALIZER;
static bool cache_failed;
static bool release_idle;   /* RIO_FS_RELEASE=idle */
static bool forked;
static char *dir;      /* RIO_FS_DIR, canonical */
static size_t dir_len;
static char *pool_path;
static struct rio_fc_opts cfg; /* from the environment (config_numbers) */
static unsigned long meta_dirty; /* directory changes the disk must sync */
static unsigned long open_files;
static __thread int depth;      /* S3 */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void shim_init(void);
static int ours_at(int dirfd, const char *path, char *full);
static int where_at(int dirfd, const char *path, char *full);

#define REAL(fn)                                              \
	do {                                                  \
		if (real.fn == NULL)                          \
			pthread_once(&init_once, shim_init);  \
	} while (0)

static void
say(const char *fmt, ...)
{
	char line[768];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(line, sizeof(line) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	if (real.write != NULL)
		(void)!real.write(2, line, (size_t)n);
}

/* A cache call failed: set errno (library codes loudly). */
static int
fail(int rc, const char *what, const char *path)
{
	if (rc > -4096) {
		errno = -rc;
		return -1;
	}
	say("librio-fs: %s %s: %s", what, path ? path : "", rio_errormsg());
	switch (rc) {
	case RIO_EOUTSIDE:
		errno = EXDEV;
		break;
	case RIO_ECHANGED:
		errno = ESTALE;
		break;
	default:
		errno = EIO;
		break;
	}
	return -1;
}

/* Refuse an operation the shim cannot route through the cache (loudly). */
static int
refuse(int err, const char *what, const char *path)
{
	say("librio-fs: %s %s: not supported on files of the Rio file cache "
	    "directory %s (refused rather than bypass the cache)", what,
		path ? path : "", dir);
	errno = err;
	return -1;
}

/* ---- the descriptor table ---- */

static struct ofd *
slot_get(int fd)
{
	struct ofd **page;

	if (fd < 0 || fd >= TAB_PAGE * TAB_PAGES)
		return NULL;
	page = __atomic_load_n(&tab[fd / TAB_PAGE], __ATOMIC_ACQUIRE);
	if (page == NULL)
		return NULL;
	return __atomic_load_n(&page[fd % TAB_PAGE], __ATOMIC_ACQUIRE);
}

/* tab_lock held exclusively. */
static int
slot_set(int fd, struct ofd *o)
{
	struct ofd **page;

	if (fd < 0 || fd >= TAB_PAGE * TAB_PAGES)
		return -EMFILE;
	page = tab[fd / TAB_PAGE];
	if (page == NULL) {
		page = calloc(TAB_PAGE, sizeof(*page));
		if (page == NULL)
			return -ENOMEM;
		__atomic_store_n(&tab[fd / TAB_PAGE], page, __ATOMIC_RELEASE);
	}
	__atomic_store_n(&page[fd % TAB_PAGE], o, __ATOMIC_RELEASE);
	return 0;
}

/* S4, S5: the entry of fd, with tab_lock held shared; NULL (and no lock
 * held) if fd is not ours. */
static struct ofd *
ofd_get(int fd)
{
	struct ofd *o;

	if (slot_get(fd) == NULL)
		return NULL;
	pthread_rwlock_rdlock(&tab_lock);
	o = slot_get(fd);
	if (o == NULL)
		pthread_rwlock_unlock(&tab_lock);
	return o;
}

static void
ofd_put(void)
{
	pthread_rwlock_unlock(&tab_lock);
}

/* Drop one reference (tab_lock held exclusively). */
static void
ofd_unref(struct ofd *o)
{
	if (--o->refs > 0)
		return;
	if (o->h != NULL) {
		depth++;
		rio_fc_close(o->h);
		depth--;
		__atomic_sub_fetch(&open_files, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_destroy(&o->lock);
	free(o->path);
	free(o);
}

static struct ofd *
ofd_new(int kind, rio_fc_file *h, const char *path, int flags)
{
	struct ofd *o = calloc(1, sizeof(*o));

	if (o == NULL)
		return NULL;
	o->refs = 1;
	o->kind = kind;
	o->h = h;
	o->path = strdup(path ? path : "");
	o->flags = flags & (O_ACCMODE | O_APPEND);
	pthread_mutex_init(&o->lock, NULL);
	if (h != NULL)
		__atomic_add_fetch(&open_files, 1, __ATOMIC_RELAXED);
	return o;
}

/* ---- set-up ---- */

#define LOAD(fn)                                                  \
	do {                                                      \
		void *p_ = dlsym(RTLD_NEXT, #fn);                 \
		memcpy(&real.fn, &p_, sizeof(p_));                \
	} while (0)

/*
 * A size from the environment: decimal digits, then an optional K, M, G or
 * T (binary multiples).  Anything else -- empty, a sign, other characters,
 * zero, a value that does not fit in 64 bits -- is refused (false), so
 * that a typo never silently becomes the default.
 */
static bool
parse_size(const char *s, unsigned long long *out)
{
	unsigned long long v = 0;
	unsigned shift = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return false;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');
		if (v > (ULLONG_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	switch (*p) {
	case 't': case 'T': shift = 40; p++; break;
	case 'g': case 'G': shift = 30; p++; break;
	case 'm': case 'M': shift = 20; p++; break;
	case 'k': case 'K': shift = 10; p++; break;
	default: break;
	}
	if (*p != '\0' || v == 0 || v > (ULLONG_MAX >> shift))
		return false;
	*out = v << shift;
	return true;
}

/* A count from the environment (RIO_FS_WRITEBACK_MS, ...): decimal digits
 * below `max`, nothing else. */
static bool
parse_count(const char *s, unsigned max, unsigned *out)
{
	unsigned long long v = 0;

	if (*s == '\0')
		return false;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return false;
		v = v * 10 + (unsigned)(*s - '0');
		if (v > max)
			return false;
	}
	*out = (unsigned)v;
	return true;
}

static bool
below_dir(const char *full)
{
	return dir != NULL && strncmp(full, dir, dir_len) == 0 &&
		full[dir_len] == '/';
}

/* Descriptors inherited over exec that reach into the directory: their
 * offset and the cache's data are the old process's; refuse them. */
static void
poison_inherited(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL) {
		char link[64], target[PATH_MAX];
		int fd = atoi(e->d_name);
		ssize_t n;
		struct ofd *o;

		if (e->d_name[0] < '0' || e->d_name[0] > '9' || fd == dirfd(d))
			continue;
		snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
		n = readlink(link, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		if (!below_dir(target))
			continue;
		o = ofd_new(OFD_POISON, NULL, target, 0);
		if (o != NULL)
			slot_set(fd, o);
	}
	closedir(d);
}

static void
child_after_fork(void)
{
	forked = true;
}

/* The libc functions: may run very early (a sanitizer's start-up maps
 * memory through us), before libc has even set up the environment. */
static void
shim_init(void)
{
	LOAD(open); LOAD(openat); LOAD(close); LOAD(read); LOAD(write);
	LOAD(pread); LOAD(pwrite); LOAD(readv); LOAD(writev); LOAD(preadv);
	LOAD(pwritev); LOAD(preadv2); LOAD(pwritev2); LOAD(lseek);
	LOAD(fsync); LOAD(fdatasync); LOAD(ftruncate); LOAD(truncate);
	LOAD(fstat); LOAD(stat); LOAD(lstat); LOAD(fstatat); LOAD(statx);
	LOAD(dup); LOAD(dup2); LOAD(dup3); LOAD(fcntl); LOAD(mmap);
	LOAD(unlink); LOAD(unlinkat); LOAD(remove); LOAD(rename);
	LOAD(renameat); LOAD(renameat2); LOAD(link); LOAD(linkat);
	LOAD(mkdir); LOAD(rmdir); LOAD(sendfile); LOAD(copy_file_range);
	LOAD(utimensat); LOAD(futimens);
	LOAD(splice); LOAD(fallocate); LOAD(posix_fallocate);
	LOAD(sync_file_range); LOAD(fopen); LOAD(fdopen); LOAD(freopen);
	LOAD(close_range);

	/* S2: the cache's own calls go to libc. */
	rio__sys.open = real.open;
	rio__sys.close = real.close;
	rio__sys.pread = real.pread;
	rio__sys.pwrite = real.pwrite;
	rio__sys.ftruncate = real.ftruncate;
	rio__sys.fdatasync = real.fdatasync;
	rio__sys.fsync = real.fsync;
	rio__sys.fstat = real.fstat;
	rio__sys.stat = real.stat;
	rio__sys.lstat = real.lstat;
	rio__sys.unlink = real.unlink;
	rio__sys.rename = real.rename;
	rio__sys.lseek = real.lseek;
}

/* The numbers of the configuration (at load time): a bad one is an
 * error, said once, and the cache is not opened (files below the
 * directory fail with EIO) rather than run with a default. */
static void
config_numbers(void)
{
	const char *e;
	unsigned long long size;

	if ((e = getenv("RIO_FS_POOL_SIZE")) != NULL) {
		if (!parse_size(e, &size) || size > SIZE_MAX) {
			say("librio-fs: RIO_FS_POOL_SIZE=%s: not a size (a "
			    "positive number of bytes below 2^64, with an "
			    "optional K, M, G or T suffix); the file cache is "
			    "not opened and files below %s will fail", e, dir);
			cache_failed = true;
			return;
		}
		cfg.pool_size = (size_t)size;
	}
	if ((e = getenv("RIO_FS_SAFE_SYNC")) != NULL && atoi(e))
		cfg.pool_flags |= RIO_SAFE_SYNC;
	if ((e = getenv("RIO_FS_WRITEBACK_MS")) != NULL &&
	    !parse_count(e, 3600000u, &cfg.writeback_ms)) {
		say("librio-fs: RIO_FS_WRITEBACK_MS=%s: not a number of "
		    "milliseconds (0 to 3600000); the file cache is not "
		    "opened and files below %s will fail", e, dir);
		cache_failed = true;
		return;
	}
	if ((e = getenv("RIO_FS_DIRTY_PCT")) != NULL &&
	    !parse_count(e, 100u, &cfg.dirty_max_pct)) {
		say("librio-fs: RIO_FS_DIRTY_PCT=%s: not a percentage (0 to "
		    "100); the file cache is not opened and files below %s "
		    "will fail", e, dir);
		cache_failed = true;
	}
}

/* The configuration, from the environment: at load time. */
static void
shim_config(void)
{
	const char *d, *p;
	char buf[PATH_MAX];

	d = getenv("RIO_FS_DIR");
	p = getenv("RIO_FS_POOL");
	if (d == NULL || *d == '\0')
		return; /* nothing to cache: pass everything through */
	if (realpath(d, buf) == NULL) {
		say("librio-fs: RIO_FS_DIR=%s: %s; files there will fail", d,
			strerror(errno));
		dir = strdup(d);
		dir_len = strlen(d);
		cache_failed = true;
		return;
	}
	dir = strdup(buf);
	dir_len = strlen(buf);
	if (p == NULL || *p == '\0') {
		say("librio-fs: RIO_FS_DIR is set but RIO_FS_POOL is not; "
		    "files below %s will fail", dir);
		cache_failed = true;
	} else {
		pool_path = strdup(p);
		if (ours_at(AT_FDCWD, p, buf)) {
			say("librio-fs: the pool %s must not be below the "
			    "cached directory %s; files there will fail", p,
				dir);
			cache_failed = true;
		}
	}
	if (!cache_failed)
		config_numbers();
	p = getenv("RIO_FS_RELEASE");
	release_idle = p != NULL && strcmp(p, "idle") == 0;
	pthread_atfork(NULL, NULL, child_after_fork);
	poison_inherited();
}

__attribute__((constructor)) static void
shim_ctor(void)
{
	pthread_once(&init_once, shim_init);
	shim_config();
}

/* The cache, opened at the first use of a file below the directory.
 * Returned with cache_lock held shared (put_cache() releases it), so an
 * idle release (RIO_FS_RELEASE=idle) cannot close it in use; NULL (no
 * lock held, errno EIO, a line on stderr) if it cannot be opened. */
static rio_fc_cache *
get_cache(const char *what, const char *path)
{
	struct rio_fc_opts o = { 0 };
	rio_fc_cache *c;
	int rc;

	pthread_rwlock_rdlock(&cache_lock);
	if (cache != NULL)
		return cache;
	pthread_rwlock_unlock(&cache_lock);
	pthread_rwlock_wrlock(&cache_lock);
	if (cache == NULL && !cache_failed) {
		o = cfg;
		o.flags = RIO_FC_CREATE;
		depth++;
		rc = rio_fc_cache_open(pool_path, dir, &o, &c);
		depth--;
		if (rc) {
			say("librio-fs: cannot open the Rio file cache %s for "
			    "%s: %s", pool_path, dir, rio_errormsg());
			/* Busy (another process) may clear; the rest not. */
			cache_failed = rc != -EBUSY;
		} else {
			cache = c;
		}
	}
	pthread_rwlock_unlock(&cache_lock);
	pthread_rwlock_rdlock(&cache_lock);
	if (cache != NULL)
		return cache;
	pthread_rwlock_unlock(&cache_lock);
	say("librio-fs: %s %s: the Rio file cache is not available", what,
		path);
	errno = EIO;
	return NULL;
}

static void
put_cache(void)
{
	pthread_rwlock_unlock(&cache_lock);
}

static void
write_stats(void)
{
	struct rio_fc_stats s;
	const char *path = getenv("RIO_FS_STATS");
	FILE *f;

	if (path == NULL || cache == NULL || rio_fc_stats(cache, &s) != 0)
		return;
	f = real.fopen(path, "w");
	if (f == NULL)
		return;
	fprintf(f, "writes %llu\nblock_writes %llu\nreads %llu\n"
		   "read_hits %llu\nread_misses %llu\nfsyncs %llu\n"
		   "writebacks %llu\nwriteback_blocks %llu\nevictions %llu\n"
		   "waits %llu\nrecovered_blocks %llu\nrecovered_files %llu\n"
		   "conflicts %llu\nrecovered %d\nfiles %llu\n"
		   "writeback_errors %llu\n",
		(unsigned long long)s.writes, (unsigned long long)s.block_writes,
		(unsigned long long)s.reads, (unsigned long long)s.read_hits,
		(unsigned long long)s.read_misses, (unsigned long long)s.fsyncs,
		(unsigned long long)s.writebacks,
		(unsigned long long)s.writeback_blocks,
		(unsigned long long)s.evictions, (unsigned long long)s.waits,
		(unsigned long long)s.recovered_blocks,
		(unsigned long long)s.recovered_files,
		(unsigned long long)s.conflicts, (int)s.recovered,
		(unsigned long long)s.files,
		(unsigned long long)s.writeback_errors);
	fclose(f);
}

/* Descriptors still open at exit: their handles go with the cache, and
 * a use of them afterwards (another library's destructor) fails loudly.
 * tab_lock held exclusively. */
static void
orphan_descriptors(void)
{
	for (int p = 0; p < TAB_PAGES; p++) {
		if (tab[p] == NULL)
			continue;
		for (int i = 0; i < TAB_PAGE; i++) {
			struct ofd *o = tab[p][i];
			if (o != NULL && o->kind == OFD_FILE) {
				o->h = NULL; /* freed by rio_fc_cache_close */
				o->kind = OFD_POISON;
			}
		}
	}
	__atomic_store_n(&open_files, 0, __ATOMIC_RELAXED);
}

/* Write everything back and close the cache.  cache_lock held
 * exclusively; at_exit: descriptors may still be open. */
static void
release_cache(const char *when, bool at_exit)
{
	int rc;

	depth++;
	write_stats();
	if (at_exit) {
		pthread_rwlock_wrlock(&tab_lock);
		orphan_descriptors();
		pthread_rwlock_unlock(&tab_lock);
	}
	rc = rio_fc_cache_close(cache);
	cache = NULL;
	if (rc)
		say("librio-fs: %s: %s (the data stays in the cache pool %s "
		    "and is written back by its next open)", when,
			rio_errormsg(), pool_path);
	cache_failed = at_exit; /* no reopening from late destructors */
	depth--;
}

__attribute__((destructor)) static void
shim_dtor(void)
{
	if (forked)
		return;
	pthread_rwlock_wrlock(&cache_lock);
	if (cache != NULL)
		release_cache("at exit", true);
	pthread_rwlock_unlock(&cache_lock);
}

/* RIO_FS_RELEASE=idle: the last cached file closed, let another process
 * have the cache.  No lock held. */
static void
maybe_release(void)
{
	if (!release_idle || forked ||
	    __atomic_load_n(&open_files, __ATOMIC_RELAXED) != 0)
		return;
	pthread_rwlock_wrlock(&cache_lock);
	if (cache != NULL && __atomic_load_n(&open_files, __ATOMIC_RELAXED) == 0)
		release_cache("releasing the cache", false);
	pthread_rwlock_unlock(&cache_lock);
}

/* ---- paths ---- */

/* The absolute path of (dirfd, path), without resolving links. */
static int
at_path(int dirfd, const char *path, char *out)
{
	char link[64];
	ssize_t n;

	if (path[0] == '/' || dirfd == AT_FDCWD) {
		if (strlen(path) >= PATH_MAX)
			return -1;
		strcpy(out, path);
		return 0;
	}
	snprintf(link, sizeof(link), "/proc/self/fd/%d", dirfd);
	n = readlink(link, out, PATH_MAX - 1);
	if (n <= 0 || (size_t)n + 1 + strlen(path) >= PATH_MAX)
		return -1;
	out[n] = '\0';
	strcat(out, "/");
	strcat(out, path);
	return 0;
}

/* Where (dirfd, path) is: 1 below the directory, 2 the directory
 * itself, 0 elsewhere. */
static int
where_at(int dirfd, const char *path, char *full)
{
	char resolved[PATH_MAX];
	char *slash;

	if (dir == NULL || depth > 0 || path == NULL)
		return 0;
	if (at_path(dirfd, path, full) != 0)
		return 0;
	/* The directory part resolved as the kernel would; the last
	 * component too if it is a symbolic link. */
	if (realpath(full, resolved) != NULL) {
		strcpy(full, resolved);
	} else {
		slash = strrchr(full, '/');
		if (slash == NULL)
			return 0;
		if (slash == full) {
			strcpy(resolved, "/");
		} else {
			*slash = '\0';
			if (realpath(full, resolved) == NULL)
				return 0;
			*slash = '/';
		}
		if (strlen(resolved) + strlen(slash) >= PATH_MAX)
			return 0;
		strcat(resolved, slash);
		strcpy(full, resolved);
	}
	if (below_dir(full))
		return 1;
	return strcmp(full, dir) == 0 ? 2 : 0;
}

/* Is (dirfd, path) a file below the directory? */
static int
ours_at(int dirfd, const char *path, char *full)
{
	return where_at(dirfd, path, full) == 1;
}

/* ---- open ---- */

/* Open a path below the directory through the cache. */
static int
open_cached(const char *full, int flags, mode_t mode)
{
	struct stat st;
	rio_fc_cache *c;
	rio_fc_file *h = NULL;
	struct ofd *o;
	int fd, rc;

	if ((flags & __O_TMPFILE) == __O_TMPFILE)
		return refuse(EOPNOTSUPP, "open(O_TMPFILE)", full);
	/* Directories, devices, FIFOs, O_PATH: not file data. */
	if ((flags & (O_DIRECTORY | O_PATH)) ||
	    (real.stat(full, &st) == 0 && !S_ISREG(st.st_mode))) {
		fd = real.open(full, flags, mode);
		if (fd >= 0 && real.fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
			o = ofd_new(OFD_DIR, NULL, full, flags);
			pthread_rwlock_wrlock(&tab_lock);
			if (o == NULL || slot_set(fd, o) != 0)
				free(o); /* then a plain directory fd */
			pthread_rwlock_unlock(&tab_lock);
		}
		return fd;
	}
	c = get_cache("open", full);
	if (c == NULL)
		return -1;
	/* The cache does O_CREAT, O_EXCL and O_TRUNC (through itself); the
	 * program's descriptor is opened on the existing file. */
	depth++;
	rc = rio_fc_open_mode(c, full, flags, mode, &h);
	depth--;
	if (rc) {
		put_cache();
		return fail(rc, "open", full);
	}
	fd = real.open(full, flags & ~(O_CREAT | O_EXCL | O_TRUNC), mode);
	if (fd < 0) {
		int e = errno;
		depth++;
		rio_fc_close(h);
		depth--;
		put_cache();
		errno = e;
		return -1;
	}
	o = ofd_new(OFD_FILE, h, full, flags);
	pthread_rwlock_wrlock(&tab_lock);
	rc = o == NULL ? -ENOMEM : slot_set(fd, o);
	if (rc) {
		if (o != NULL) {
			ofd_unref(o);
		} else {
			depth++;
			rio_fc_close(h);
			depth--;
		}
	}
	pthread_rwlock_unlock(&tab_lock);
	put_cache();
	if (rc) {
		real.close(fd);
		errno = -rc;
		return -1;
	}
	return fd;
}

static int
do_openat(int dirfd, const char *path, int flags, mode_t mode)
{
	char full[PATH_MAX];

	REAL(openat);
	switch (where_at(dirfd, path, full)) {
	case 1:
		return open_cached(full, flags, mode);
	case 2:
		/* The directory itself: an unnamed file there is refused;
		 * its fsync is the cache's business (open_cached records
		 * the descriptor as a directory's). */
		if ((flags & __O_TMPFILE) == __O_TMPFILE)
			return refuse(EOPNOTSUPP, "open(O_TMPFILE)", full);
		return open_cached(full, flags, mode);
	default:
		break;
	}
	return real.openat(dirfd, path, flags, mode);
}

static mode_t
mode_arg(int flags, va_list ap)
{
	return (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ?
		(mode_t)va_arg(ap, int) : 0;
}

/* open, open64, openat, openat64 (the same on LP64). */
#define SHIM_OPENAT(name, dirfd_param, dirfd_arg)                       \
	SHIM_EXPORT int name(dirfd_param const char *path, int flags, ...) \
	{                                                               \
		va_list ap;                                             \
		mode_t m;                                               \
		va_start(ap, flags);                                    \
		m = mode_arg(flags, ap);                                \
		va_end(ap);                                             \
		return do_openat(dirfd_arg, path, flags, m);            \
	}
SHIM_OPENAT(open, , AT_FDCWD)
SHIM_OPENAT(open64, , AT_FDCWD)
SHIM_OPENAT(openat, int dirfd SHIM_COMMA, dirfd)
SHIM_OPENAT(openat64, int dirfd SHIM_COMMA, dirfd)

SHIM_EXPORT int
__open_2(const char *path, int flags)
{
	return do_openat(AT_FDCWD, path, flags, 0);
}

SHIM_EXPORT int
__open64_2(const char *path, int flags)
{
	return do_openat(AT_FDCWD, path, flags, 0);
}

SHIM_EXPORT int
__openat_2(int dirfd, const char *path, int flags)
{
	return do_openat(dirfd, path, flags, 0);
}

SHIM_EXPORT int
__openat64_2(int dirfd, const char *path, int flags)
{
	return do_openat(dirfd, path, flags, 0);
}

SHIM_EXPORT int
creat(const char *path, mode_t mode)
{
	return do_openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}

SHIM_EXPORT int
creat64(const char *path, mode_t mode)
{
	return do_openat(AT_FDCWD, path, O_WRONLY | O_CREAT | O_TRUNC, mode);
}

/* ---- data ---- */

/* A poisoned or foreign-process descriptor: every data call fails. */
static bool
unusable(struct ofd *o, const char *what)
{
	if (o->kind == OFD_POISON) {
		ofd_put();
		refuse(EBADF, what, o->path);
		say("librio-fs: (the descriptor was inherited over exec from "
		    "the process that opened it through the cache, or the "
		    "cache was closed at exit)");
		return true;
	}
	return false;
}

static ssize_t
cached_pread(struct ofd *o, void *buf, size_t n, uint64_t off)
{
	size_t got = 0;
	int rc;

	if ((o->flags & O_ACCMODE) == O_WRONLY) {
		errno = EBADF;
		return -1;
	}
	depth++;
	rc = rio_fc_pread(o->h, buf, n, off, &got);
	depth--;
	if (rc)
		return fail(rc, "read", o->path);
	return (ssize_t)got;
}

static ssize_t
cached_pwrite(struct ofd *o, const void *buf, size_t n, uint64_t off)
{
	int rc;

	if ((o->flags & O_ACCMODE) == O_RDONLY) {
		errno = EBADF;
		return -1;
	}
	depth++;
	rc = rio_fc_pwrite(o->h, buf, n, off);
	depth--;
	if (rc)
		return fail(rc, "write", o->path);
	return (ssize_t)n;
}

static uint64_t
file_size(struct ofd *o)
{
	uint64_t size = 0;

	rio_fc_size(o->h, &size);
	return size;
}

SHIM_EXPORT ssize_t
read(int fd, void *buf, size_t n)
{
	struct ofd *o;
	ssize_t r;

	REAL(read);
	o = ofd_get(fd);
	if (o == NULL)
		return real.read(fd, buf, n);
	if (o->kind == OFD_DIR) {
		ofd_put();
		return real.read(fd, buf, n);
	}
	if (unusable(o, "read"))
		return -1;
	pthread_mutex_lock(&o->lock);
	r = cached_pread(o, buf, n, o->pos);
	if (r > 0)
		o->pos += (uint64_t)r;
	pthread_mutex_unlock(&o->lock);
	ofd_put();
	return r;
}

SHIM_EXPORT ssize_t
write(int fd, const void *buf, size_t n)
{
	struct ofd *o;
	ssize_t r;

	REAL(write);
	o = ofd_get(fd);
	if (o == NULL)
		return real.write(fd, buf, n);
	if (o->kind == OFD_DIR) {
		ofd_put();
		return real.write(fd, buf, n);
	}
	if (unusable(o, "write"))
		return -1;
	pthread_mutex_lock(&o->lock);
	if (o->flags & O_APPEND)
		o->pos = file_size(o);
	r = cached_pwrite(o, buf, n, o->pos);
	if (r > 0)
		o->pos += (uint64_t)r;
	pthread_mutex_unlock(&o->lock);
	ofd_put();
	return r;
}

static ssize_t
do_pread(int fd, void *buf, size_t n, off_t off)
{
	struct ofd *o;
	ssize_t r;

	REAL(pread);
	o = ofd_get(fd);
	if (o == NULL)
		return real.pread(fd, buf, n, off);
	if (unusable(o, "pread"))
		return -1;
	if (o->kind == OFD_DIR || off < 0) {
		ofd_put();
		errno = o->kind == OFD_DIR ? EISDIR : EINVAL;
		return -1;
	}
	r = cached_pread(o, buf, n, (uint64_t)off);
	ofd_put();
	return r;
}

static ssize_t
do_pwrite(int fd, const void *buf, size_t n, off_t off)
{
	struct ofd *o;
	ssize_t r;
	uint64_t at;

	REAL(pwrite);
	o = ofd_get(fd);
	if (o == NULL)
		return real.pwrite(fd, buf, n, off);
	if (unusable(o, "pwrite"))
		return -1;
	if (o->kind == OFD_DIR || off < 0) {
		ofd_put();
		errno = o->kind == OFD_DIR ? EISDIR : EINVAL;
		return -1;
	}
	/* Linux appends a pwrite to an O_APPEND file; so do we. */
	at = (o->flags & O_APPEND) ? file_size(o) : (uint64_t)off;
	r = cached_pwrite(o, buf, n, at);
	ofd_put();
	return r;
}

SHIM_EXPORT ssize_t
pread(int fd, void *buf, size_t n, off_t off)
{
	return do_pread(fd, buf, n, off);
}

SHIM_EXPORT ssize_t
pread64(int fd, void *buf, size_t n, off_t off)
{
	return do_pread(fd, buf, n, off);
}

SHIM_EXPORT ssize_t
pwrite(int fd, const void *buf, size_t n, off_t off)
{
	return do_pwrite(fd, buf, n, off);
}

SHIM_EXPORT ssize_t
pwrite64(int fd, const void *buf, size_t n, off_t off)
{
	return do_pwrite(fd, buf, n, off);
}

SHIM_EXPORT ssize_t
__read_chk(int fd, void *buf, size_t n, size_t buflen)
{
	if (n > buflen)
		abort(); /* as glibc's __chk_fail */
	return read(fd, buf, n);
}

SHIM_EXPORT ssize_t
__pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
	if (n > buflen)
		abort();
	return do_pread(fd, buf, n, off);
}

SHIM_EXPORT ssize_t
__pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
	if (n > buflen)
		abort();
	return do_pread(fd, buf, n, off);
}

/* Vectors: one call per element, at consecutive offsets (each block of
 * each element atomic, as a sequence of pwrites would be). */
static ssize_t
vec_io(struct ofd *o, const struct iovec *iov, int cnt, uint64_t off,
	bool wr, bool move)
{
	ssize_t total = 0;

	if (cnt < 0 || cnt > IOV_MAX) {
		errno = EINVAL;
		return -1;
	}
	for (int i = 0; i < cnt; i++) {
		ssize_t r = wr ? cached_pwrite(o, iov[i].iov_base,
					 iov[i].iov_len, off + (uint64_t)total) :
				 cached_pread(o, iov[i].iov_base, iov[i].iov_len,
					 off + (uint64_t)total);
		if (r < 0)
			return total > 0 ? total : -1;
		total += r;
		if ((size_t)r < iov[i].iov_len)
			break;
	}
	if (move)
		o->pos = off + (uint64_t)total;
	return total;
}

static ssize_t
do_rwv(int fd, const struct iovec *iov, int cnt, off_t off, bool wr,
	bool positional, int vflags)
{
	struct ofd *o;
	ssize_t r;
	uint64_t at;

	REAL(readv);
	o = ofd_get(fd);
	if (o == NULL) {
		if (positional && vflags != 0)
			return wr ? real.pwritev2(fd, iov, cnt, off, vflags) :
				    real.preadv2(fd, iov, cnt, off, vflags);
		if (positional)
			return wr ? real.pwritev(fd, iov, cnt, off) :
				    real.preadv(fd, iov, cnt, off);
		return wr ? real.writev(fd, iov, cnt) : real.readv(fd, iov, cnt);
	}
	if (unusable(o, wr ? "writev" : "readv"))
		return -1;
	if (o->kind == OFD_DIR) {
		ofd_put();
		errno = EISDIR;
		return -1;
	}
	/* preadv2/pwritev2 with offset -1 use and move the file offset. */
	if (positional && off == -1 && vflags != -1)
		positional = false;
	pthread_mutex_lock(&o->lock);
	if (wr && (o->flags & O_APPEND))
		at = file_size(o);
	else
		at = positional ? (uint64_t)off : o->pos;
	r = vec_io(o, iov, cnt, at, wr, !positional);
	pthread_mutex_unlock(&o->lock);
	ofd_put();
	return r;
}

SHIM_EXPORT ssize_t
readv(int fd, const struct iovec *iov, int cnt)
{
	return do_rwv(fd, iov, cnt, 0, false, false, 0);
}

SHIM_EXPORT ssize_t
writev(int fd, const struct iovec *iov, int cnt)
{
	return do_rwv(fd, iov, cnt, 0, true, false, 0);
}

SHIM_EXPORT ssize_t
preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return do_rwv(fd, iov, cnt, off, false, true, -1);
}

SHIM_EXPORT ssize_t
preadv64(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return do_rwv(fd, iov, cnt, off, false, true, -1);
}

SHIM_EXPORT ssize_t
pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return do_rwv(fd, iov, cnt, off, true, true, -1);
}

SHIM_EXPORT ssize_t
pwritev64(int fd, const struct iovec *iov, int cnt, off_t off)
{
	return do_rwv(fd, iov, cnt, off, true, true, -1);
}

SHIM_EXPORT ssize_t
preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	return do_rwv(fd, iov, cnt, off, false, true, flags);
}

SHIM_EXPORT ssize_t
preadv64v2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	return do_rwv(fd, iov, cnt, off, false, true, flags);
}

SHIM_EXPORT ssize_t
pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	return do_rwv(fd, iov, cnt, off, true, true, flags);
}

SHIM_EXPORT ssize_t
pwritev64v2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
	return do_rwv(fd, iov, cnt, off, true, true, flags);
}

static off_t
do_lseek(int fd, off_t off, int whence)
{
	struct ofd *o;
	int64_t base, pos;
	uint64_t size;

	REAL(lseek);
	o = ofd_get(fd);
	if (o == NULL)
		return real.lseek(fd, off, whence);
	if (unusable(o, "lseek"))
		return -1;
	if (o->kind == OFD_DIR) {
		ofd_put();
		return real.lseek(fd, off, whence);
	}
	pthread_mutex_lock(&o->lock);
	size = file_size(o);
	switch (whence) {
	case SEEK_SET:
		base = 0;
		break;
	case SEEK_CUR:
		base = (int64_t)o->pos;
		break;
	case SEEK_END:
		base = (int64_t)size;
		break;
	case SEEK_DATA: /* the whole file is data */
	case SEEK_HOLE:
		if (off < 0 || (uint64_t)off >= size) {
			pthread_mutex_unlock(&o->lock);
			ofd_put();
			errno = ENXIO;
			return -1;
		}
		base = 0;
		if (whence == SEEK_HOLE)
			off = (off_t)size;
		break;
	default:
		pthread_mutex_unlock(&o->lock);
		ofd_put();
		errno = EINVAL;
		return -1;
	}
	pos = base + off;
	if (pos < 0) {
		pthread_mutex_unlock(&o->lock);
		ofd_put();
		errno = EINVAL;
		return -1;
	}
	o->pos = (uint64_t)pos;
	pthread_mutex_unlock(&o->lock);
	ofd_put();
	return (off_t)pos;
}

SHIM_EXPORT off_t
lseek(int fd, off_t off, int whence)
{
	return do_lseek(fd, off, whence);
}

SHIM_EXPORT off_t
lseek64(int fd, off_t off, int whence)
{
	return do_lseek(fd, off, whence);
}

/* fsync and fdatasync: free for cached files; a directory's is real only
 * if the directory changed in a way the cache does not record. */
static int
do_sync(int fd, bool data)
{
	struct ofd *o;
	int rc;

	REAL(fsync);
	o = ofd_get(fd);
	if (o == NULL)
		return data ? real.fdatasync(fd) : real.fsync(fd);
	if (unusable(o, "fsync"))
		return -1;
	if (o->kind == OFD_DIR) {
		unsigned long m = __atomic_load_n(&meta_dirty, __ATOMIC_ACQUIRE);
		ofd_put();
		if (m == 0)
			return 0; /* creations/removals are the cache's */
		rc = data ? real.fdatasync(fd) : real.fsync(fd);
		if (rc == 0)
			__atomic_compare_exchange_n(&meta_dirty, &m, 0, false,
				__ATOMIC_RELEASE, __ATOMIC_RELAXED);
		return rc;
	}
	depth++;
	rc = rio_fc_fsync(o->h);
	depth--;
	ofd_put();
	return rc ? fail(rc, "fsync", o->path) : 0;
}

SHIM_EXPORT int
fsync(int fd)
{
	return do_sync(fd, false);
}

SHIM_EXPORT int
fdatasync(int fd)
{
	return do_sync(fd, true);
}

SHIM_EXPORT int
sync_file_range(int fd, off_t off, off_t n, unsigned flags)
{
	struct ofd *o;

	REAL(sync_file_range);
	o = ofd_get(fd);
	if (o == NULL)
		return real.sync_file_range(fd, off, n, flags);
	ofd_put();
	return 0;
}

static int
do_ftruncate(int fd, off_t len)
{
	struct ofd *o;
	int rc;

	REAL(ftruncate);
	o = ofd_get(fd);
	if (o == NULL)
		return real.ftruncate(fd, len);
	if (unusable(o, "ftruncate"))
		return -1;
	if (o->kind == OFD_DIR || len < 0 ||
	    (o->flags & O_ACCMODE) == O_RDONLY) {
		ofd_put();
		errno = len < 0 ? EINVAL : o->kind == OFD_DIR ? EISDIR : EINVAL;
		return -1;
	}
	depth++;
	rc = rio_fc_truncate(o->h, (uint64_t)len);
	depth--;
	ofd_put();
	return rc ? fail(rc, "ftruncate", o->path) : 0;
}

SHIM_EXPORT int
ftruncate(int fd, off_t len)
{
	return do_ftruncate(fd, len);
}

SHIM_EXPORT int
ftruncate64(int fd, off_t len)
{
	return do_ftruncate(fd, len);
}

static int
do_truncate(const char *path, off_t len)
{
	char full[PATH_MAX];
	rio_fc_cache *c;
	rio_fc_file *h;
	int rc;

	REAL(truncate);
	if (!ours_at(AT_FDCWD, path, full))
		return real.truncate(path, len);
	if (len < 0) {
		errno = EINVAL;
		return -1;
	}
	c = get_cache("truncate", full);
	if (c == NULL)
		return -1;
	depth++;
	rc = rio_fc_open(c, full, O_WRONLY, &h);
	if (rc == 0) {
		rc = rio_fc_truncate(h, (uint64_t)len);
		rio_fc_close(h);
	}
	depth--;
	put_cache();
	return rc ? fail(rc, "truncate", full) : 0;
}

SHIM_EXPORT int
truncate(const char *path, off_t len)
{
	return do_truncate(path, len);
}

SHIM_EXPORT int
truncate64(const char *path, off_t len)
{
	return do_truncate(path, len);
}

static int
do_fallocate(int fd, int mode, off_t off, off_t len, bool posix)
{
	struct ofd *o;
	int rc = 0;

	REAL(fallocate);
	o = ofd_get(fd);
	if (o == NULL)
		return posix ? real.posix_fallocate(fd, off, len) :
			       real.fallocate(fd, mode, off, len);
	if (unusable(o, "fallocate"))
		return posix ? EBADF : -1;
	if (mode != 0 || o->kind != OFD_FILE) {
		ofd_put();
		rc = refuse(EOPNOTSUPP, "fallocate (with a mode)", o->path);
		return posix ? EOPNOTSUPP : rc;
	}
	/* Mode 0 only promises the space and the size; the cache has the
	 * space by construction. */
	if (off < 0 || len <= 0) {
		ofd_put();
		errno = EINVAL;
		return posix ? EINVAL : -1;
	}
	depth++;
	if ((uint64_t)(off + len) > file_size(o))
		rc = rio_fc_truncate(o->h, (uint64_t)(off + len));
	depth--;
	ofd_put();
	if (rc) {
		fail(rc, "fallocate", o->path);
		return posix ? errno : -1;
	}
	return 0;
}

SHIM_EXPORT int
fallocate(int fd, int mode, off_t off, off_t len)
{
	return do_fallocate(fd, mode, off, len, false);
}

SHIM_EXPORT int
fallocate64(int fd, int mode, off_t off, off_t len)
{
	return do_fallocate(fd, mode, off, len, false);
}

SHIM_EXPORT int
posix_fallocate(int fd, off_t off, off_t len)
{
	return do_fallocate(fd, 0, off, len, true);
}

SHIM_EXPORT int
posix_fallocate64(int fd, off_t off, off_t len)
{
	return do_fallocate(fd, 0, off, len, true);
}

/* ---- close and dup ---- */

SHIM_EXPORT int
close(int fd)
{
	struct ofd *o;
	int r;

	REAL(close);
	if (slot_get(fd) == NULL)
		return real.close(fd);
	pthread_rwlock_wrlock(&tab_lock);
	o = slot_get(fd);
	if (o != NULL) {
		slot_set(fd, NULL);
		ofd_unref(o);
	}
	pthread_rwlock_unlock(&tab_lock);
	r = real.close(fd);
	maybe_release();
	return r;
}

SHIM_EXPORT int
close_range(unsigned first, unsigned last, int flags)
{
	REAL(close_range);
	if (!(flags & CLOSE_RANGE_CLOEXEC)) {
		pthread_rwlock_wrlock(&tab_lock);
		for (unsigned fd = first; fd <= last &&
		     fd < TAB_PAGE * TAB_PAGES; fd++) {
			struct ofd *o;
			if (tab[fd / TAB_PAGE] == NULL) {
				fd |= TAB_PAGE - 1; /* skip the page */
				continue;
			}
			o = slot_get((int)fd);
			if (o != NULL) {
				slot_set((int)fd, NULL);
				ofd_unref(o);
			}
		}
		pthread_rwlock_unlock(&tab_lock);
		maybe_release();
	}
	return real.close_range(first, last, flags);
}

/* newfd now shares fd's entry (after the real dup succeeded). */
static int
dup_entry(int fd, int newfd)
{
	struct ofd *o, *old;

	if (newfd < 0 || slot_get(fd) == NULL)
		return newfd;
	pthread_rwlock_wrlock(&tab_lock);
	o = slot_get(fd);
	old = slot_get(newfd);
	if (old != o) {
		if (o != NULL)
			o->refs++;
		if (old != NULL)
			ofd_unref(old);
		slot_set(newfd, o);
	}
	pthread_rwlock_unlock(&tab_lock);
	if (old != NULL && old != o)
		maybe_release();
	return newfd;
}

/* An entry on newfd that dup2/dup3 is about to replace. */
static void
drop_entry(int newfd)
{
	struct ofd *o;

	if (slot_get(newfd) == NULL)
		return;
	pthread_rwlock_wrlock(&tab_lock);
	o = slot_get(newfd);
	if (o != NULL) {
		slot_set(newfd, NULL);
		ofd_unref(o);
	}
	pthread_rwlock_unlock(&tab_lock);
	maybe_release();
}

SHIM_EXPORT int
dup(int fd)
{
	REAL(dup);
	return dup_entry(fd, real.dup(fd));
}

SHIM_EXPORT int
dup2(int fd, int newfd)
{
	int r;

	REAL(dup2);
	if (fd == newfd)
		return real.dup2(fd, newfd);
	r = real.dup2(fd, newfd);
	if (r < 0)
		return r;
	if (slot_get(fd) == NULL)
		drop_entry(newfd);
	return dup_entry(fd, r);
}

SHIM_EXPORT int
dup3(int fd, int newfd, int flags)
{
	int r;

	REAL(dup3);
	r = real.dup3(fd, newfd, flags);
	if (r < 0)
		return r;
	if (slot_get(fd) == NULL)
		drop_entry(newfd);
	return dup_entry(fd, r);
}

static int
do_fcntl(int fd, int cmd, va_list ap)
{
	long arg = va_arg(ap, long);
	struct ofd *o;
	int r;

	REAL(fcntl);
	r = real.fcntl(fd, cmd, arg);
	if (r < 0)
		return r;
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		return dup_entry(fd, r);
	case F_SETFL:
		o = ofd_get(fd);
		if (o != NULL) {
			pthread_mutex_lock(&o->lock);
			o->flags = (o->flags & ~O_APPEND) | ((int)arg & O_APPEND);
			pthread_mutex_unlock(&o->lock);
			ofd_put();
		}
		return r;
	default:
		return r;
	}
}

SHIM_EXPORT int
fcntl(int fd, int cmd, ...)
{
	va_list ap;
	int r;

	va_start(ap, cmd);
	r = do_fcntl(fd, cmd, ap);
	va_end(ap);
	return r;
}

SHIM_EXPORT int
fcntl64(int fd, int cmd, ...)
{
	va_list ap;
	int r;

	va_start(ap, cmd);
	r = do_fcntl(fd, cmd, ap);
	va_end(ap);
	return r;
}

/* ---- stat: the size of a cached file is the cache's ---- */

static void
patch_size(struct stat *st)
{
	uint64_t size;

	if (forked || !S_ISREG(st->st_mode) ||
	    __atomic_load_n(&cache, __ATOMIC_RELAXED) == NULL)
		return;
	pthread_rwlock_rdlock(&cache_lock);
	if (cache != NULL &&
	    rio__fc_size_by_id(cache, (uint64_t)st->st_dev,
		    (uint64_t)st->st_ino, &size)) {
		st->st_size = (off_t)size;
		st->st_blocks = (blkcnt_t)((size + 511) / 512);
	}
	pthread_rwlock_unlock(&cache_lock);
}

static int
do_fstat(int fd, struct stat *st)
{
	struct ofd *o;
	int r;

	REAL(fstat);
	r = real.fstat(fd, st);
	if (r != 0)
		return r;
	o = ofd_get(fd);
	if (o != NULL) {
		if (o->kind == OFD_FILE) {
			uint64_t size = file_size(o);
			st->st_size = (off_t)size;
			st->st_blocks = (blkcnt_t)((size + 511) / 512);
		}
		ofd_put();
	}
	return 0;
}

SHIM_EXPORT int
fstat(int fd, struct stat *st)
{
	return do_fstat(fd, st);
}

SHIM_EXPORT int
fstat64(int fd, struct stat64 *st)
{
	return do_fstat(fd, ST(st));
}

static int
do_statat(int dirfd, const char *path, struct stat *st, int flags)
{
	int r;

	REAL(fstatat);
	if (path != NULL && path[0] == '\0' && (flags & AT_EMPTY_PATH))
		return do_fstat(dirfd, st);
	r = real.fstatat(dirfd, path, st, flags);
	if (r == 0 && depth == 0)
		patch_size(st);
	return r;
}

SHIM_EXPORT int
stat(const char *path, struct stat *st)
{
	return do_statat(AT_FDCWD, path, st, 0);
}

SHIM_EXPORT int
stat64(const char *path, struct stat64 *st)
{
	return do_statat(AT_FDCWD, path, ST(st), 0);
}

SHIM_EXPORT int
lstat(const char *path, struct stat *st)
{
	return do_statat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

SHIM_EXPORT int
lstat64(const char *path, struct stat64 *st)
{
	return do_statat(AT_FDCWD, path, ST(st), AT_SYMLINK_NOFOLLOW);
}

SHIM_EXPORT int
fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
	return do_statat(dirfd, path, st, flags);
}

SHIM_EXPORT int
fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
	return do_statat(dirfd, path, ST(st), flags);
}

/* The pre-2.33 glibc entry points, still called by older binaries. */
SHIM_EXPORT int
__fxstat(int ver, int fd, struct stat *st)
{
	(void)ver;
	return do_fstat(fd, st);
}

SHIM_EXPORT int
__fxstat64(int ver, int fd, struct stat64 *st)
{
	(void)ver;
	return do_fstat(fd, ST(st));
}

SHIM_EXPORT int
__xstat(int ver, const char *path, struct stat *st)
{
	(void)ver;
	return do_statat(AT_FDCWD, path, st, 0);
}

SHIM_EXPORT int
__xstat64(int ver, const char *path, struct stat64 *st)
{
	(void)ver;
	return do_statat(AT_FDCWD, path, ST(st), 0);
}

SHIM_EXPORT int
__lxstat(int ver, const char *path, struct stat *st)
{
	(void)ver;
	return do_statat(AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

SHIM_EXPORT int
__lxstat64(int ver, const char *path, struct stat64 *st)
{
	(void)ver;
	return do_statat(AT_FDCWD, path, ST(st), AT_SYMLINK_NOFOLLOW);
}

SHIM_EXPORT int
__fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
	(void)ver;
	return do_statat(dirfd, path, st, flags);
}

SHIM_EXPORT int
__fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st,
	int flags)
{
	(void)ver;
	return do_statat(dirfd, path, ST(st), flags);
}

SHIM_EXPORT int
statx(int dirfd, const char *path, int flags, unsigned mask,
	struct statx *stx)
{
	struct stat st;
	int r;

	REAL(statx);
	r = real.statx(dirfd, path, flags, mask, stx);
	if (r != 0 || depth > 0 || !S_ISREG(stx->stx_mode))
		return r;
	st.st_mode = stx->stx_mode;
	st.st_dev = makedev(stx->stx_dev_major, stx->stx_dev_minor);
	st.st_ino = (ino_t)stx->stx_ino;
	st.st_size = -1;
	patch_size(&st);
	if (st.st_size >= 0) {
		stx->stx_size = (uint64_t)st.st_size;
		stx->stx_blocks = (uint64_t)st.st_blocks;
	}
	return r;
}

/* ---- what is refused ---- */

static void *
do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct ofd *o;

	REAL(mmap);
	if (flags & MAP_ANONYMOUS)
		return real.mmap(addr, len, prot, flags, fd, off);
	o = ofd_get(fd);
	if (o == NULL)
		return real.mmap(addr, len, prot, flags, fd, off);
	ofd_put();
	refuse(ENODEV, "mmap (use rio_fc_mmap)", o->path);
	return MAP_FAILED;
}

SHIM_EXPORT void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return do_mmap(addr, len, prot, flags, fd, off);
}

SHIM_EXPORT void *
mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return do_mmap(addr, len, prot, flags, fd, off);
}

static bool
either_cached(int a, int b)
{
	return slot_get(a) != NULL || slot_get(b) != NULL;
}

/* copy_file_range, sendfile, splice with a cached end: copied through a
 * buffer with our own read/write, so the cache sees every byte. */
static ssize_t
copy_through(int in, off_t *inoff, int out, off_t *outoff, size_t n)
{
	char buf[65536];
	size_t total = 0;

	while (total < n) {
		size_t want = n - total < sizeof(buf) ? n - total : sizeof(buf);
		ssize_t r, w;

		r = inoff ? pread(in, buf, want, *inoff) : read(in, buf, want);
		if (r < 0)
			return total ? (ssize_t)total : -1;
		if (r == 0)
			break;
		w = outoff ? pwrite(out, buf, (size_t)r, *outoff) :
			     write(out, buf, (size_t)r);
		if (w < 0)
			return total ? (ssize_t)total : -1;
		if (inoff)
			*inoff += w;
		if (outoff)
			*outoff += w;
		total += (size_t)w;
		if (w < r) {
			if (!inoff)
				break; /* the unwritten bytes are consumed */
			break;
		}
	}
	return (ssize_t)total;
}

SHIM_EXPORT ssize_t
sendfile(int out, int in, off_t *off, size_t n)
{
	REAL(sendfile);
	if (either_cached(out, in))
		return copy_through(in, off, out, NULL, n);
	return real.sendfile(out, in, off, n);
}

SHIM_EXPORT ssize_t
sendfile64(int out, int in, off_t *off, size_t n)
{
	return sendfile(out, in, off, n);
}

SHIM_EXPORT ssize_t
copy_file_range(int in, off_t *inoff, int out, off_t *outoff, size_t n,
	unsigned flags)
{
	REAL(copy_file_range);
	if (either_cached(in, out)) {
		if (flags != 0) {
			errno = EINVAL;
			return -1;
		}
		return copy_through(in, inoff, out, outoff, n);
	}
	return real.copy_file_range(in, inoff, out, outoff, n, flags);
}

SHIM_EXPORT ssize_t
splice(int in, off_t *inoff, int out, off_t *outoff, size_t n,
	unsigned flags)
{
	REAL(splice);
	if (either_cached(in, out))
		return copy_through(in, inoff, out, outoff, n);
	return real.splice(in, inoff, out, outoff, n, flags);
}

/* ---- names ---- */

static void
meta_changed(void)
{
	__atomic_add_fetch(&meta_dirty, 1, __ATOMIC_RELEASE);
}

static int
do_unlinkat(int dirfd, const char *path, int flags)
{
	char full[PATH_MAX];
	struct stat st;
	rio_fc_cache *c;
	bool in;
	int rc;

	REAL(unlinkat);
	in = ours_at(dirfd, path, full);
	if (!in || (flags & AT_REMOVEDIR) ||
	    (real.lstat(full, &st) == 0 && !S_ISREG(st.st_mode))) {
		/* Not a cached file's data: the disk's business, and the
		 * directory's next fsync must be real. */
		rc = real.unlinkat(dirfd, path, flags);
		if (rc == 0 && in)
			meta_changed();
		return rc;
	}
	c = get_cache("unlink", full);
	if (c == NULL)
		return -1;
	depth++;
	rc = rio_fc_unlink(c, full);
	depth--;
	put_cache();
	return rc ? fail(rc, "unlink", full) : 0;
}

SHIM_EXPORT int
unlink(const char *path)
{
	return do_unlinkat(AT_FDCWD, path, 0);
}

SHIM_EXPORT int
unlinkat(int dirfd, const char *path, int flags)
{
	return do_unlinkat(dirfd, path, flags);
}

SHIM_EXPORT int
remove(const char *path)
{
	struct stat st;

	REAL(lstat);
	if (real.lstat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return do_unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
	return do_unlinkat(AT_FDCWD, path, 0);
}

SHIM_EXPORT int
rmdir(const char *path)
{
	return do_unlinkat(AT_FDCWD, path, AT_REMOVEDIR);
}

SHIM_EXPORT int
mkdir(const char *path, mode_t mode)
{
	char full[PATH_MAX];
	int rc;

	REAL(mkdir);
	rc = real.mkdir(path, mode);
	if (rc == 0 && ours_at(AT_FDCWD, path, full))
		meta_changed();
	return rc;
}

/* ---- times ---- */

/* One utimensat or futimens, applied by rio__fc_set_times* once the
 * cached file is written back (F7 in fc_file.c). */
struct times_call {
	int fd;                   /* futimens, or -1 */
	const char *path;         /* utimensat: absolute */
	const struct timespec *ts;
	int flags;
};

static int
apply_times(void *arg)
{
	const struct times_call *t = arg;

	return t->fd >= 0 ? real.futimens(t->fd, t->ts) :
			    real.utimensat(AT_FDCWD, t->path, t->ts, t->flags);
}

static int
do_futimens(int fd, const struct timespec *ts)
{
	struct times_call t = { fd, NULL, ts, 0 };
	struct ofd *o;
	int rc;

	REAL(futimens);
	o = ofd_get(fd);
	if (o == NULL)
		return real.futimens(fd, ts);
	if (unusable(o, "futimens"))
		return -1;
	if (o->kind != OFD_FILE) {
		ofd_put();
		return real.futimens(fd, ts);
	}
	depth++;
	rc = rio__fc_set_times(o->h, apply_times, &t);
	depth--;
	ofd_put();
	return rc ? fail(rc, "futimens", o->path) : 0;
}

static int
do_utimensat(int dirfd, const char *path, const struct timespec *ts,
	int flags)
{
	char full[PATH_MAX];
	struct times_call t = { -1, full, ts, flags };
	struct stat st;
	rio_fc_cache *c;
	int rc;

	REAL(utimensat);
	if (path == NULL) /* Linux: the file of dirfd itself */
		return do_futimens(dirfd, ts);
	if (!ours_at(dirfd, path, full) || real.lstat(full, &st) != 0 ||
	    !S_ISREG(st.st_mode))
		return real.utimensat(dirfd, path, ts, flags);
	c = get_cache("utimensat", full);
	if (c == NULL)
		return -1;
	depth++;
	rc = rio__fc_set_times_path(c, full, apply_times, &t);
	depth--;
	put_cache();
	return rc ? fail(rc, "utimensat", full) : 0;
}

/* The older calls, as timespecs (glibc implements them with an internal
 * utimensat that the shim would not see). */
static const struct timespec *
from_timevals(const struct timeval *tv, struct timespec ts[2])
{
	if (tv == NULL)
		return NULL;
	for (int i = 0; i < 2; i++) {
		ts[i].tv_sec = tv[i].tv_sec;
		ts[i].tv_nsec = tv[i].tv_usec * 1000;
	}
	return ts;
}

SHIM_EXPORT int
utimensat(int dirfd, const char *path, const struct timespec ts[2],
	int flags)
{
	return do_utimensat(dirfd, path, ts, flags);
}

SHIM_EXPORT int
futimens(int fd, const struct timespec ts[2])
{
	return do_futimens(fd, ts);
}

SHIM_EXPORT int
utimes(const char *path, const struct timeval tv[2])
{
	struct timespec ts[2];

	return do_utimensat(AT_FDCWD, path, from_timevals(tv, ts), 0);
}

SHIM_EXPORT int
lutimes(const char *path, const struct timeval tv[2])
{
	struct timespec ts[2];

	return do_utimensat(AT_FDCWD, path, from_timevals(tv, ts),
		AT_SYMLINK_NOFOLLOW);
}

SHIM_EXPORT int
futimes(int fd, const struct timeval tv[2])
{
	struct timespec ts[2];

	return do_futimens(fd, from_timevals(tv, ts));
}

SHIM_EXPORT int
futimesat(int dirfd, const char *path, const struct timeval tv[2])
{
	struct timespec ts[2];

	return do_utimensat(dirfd, path, from_timevals(tv, ts), 0);
}

SHIM_EXPORT int
utime(const char *path, const struct utimbuf *b)
{
	struct timespec ts[2];

	if (b == NULL)
		return do_utimensat(AT_FDCWD, path, NULL, 0);
	ts[0].tv_sec = b->actime;
	ts[1].tv_sec = b->modtime;
	ts[0].tv_nsec = ts[1].tv_nsec = 0;
	return do_utimensat(AT_FDCWD, path, ts, 0);
}

static int
do_renameat2(int fa, const char *from, int fb, const char *to, unsigned flags)
{
	char a[PATH_MAX], b[PATH_MAX];
	bool oa, ob;
	rio_fc_cache *c;
	int rc;

	REAL(renameat2);
	oa = ours_at(fa, from, a);
	ob = ours_at(fb, to, b);
	if (!oa && !ob)
		return flags ? real.renameat2(fa, from, fb, to, flags) :
			       real.renameat(fa, from, fb, to);
	if (flags != 0)
		return refuse(EINVAL, "renameat2 with flags", oa ? a : b);
	if (!oa)
		at_path(fa, from, a);
	if (!ob)
		at_path(fb, to, b);
	c = get_cache("rename", oa ? a : b);
	if (c == NULL)
		return -1;
	depth++;
	rc = rio_fc_rename(c, a, b);
	depth--;
	put_cache();
	if (rc)
		return fail(rc, "rename", a);
	meta_changed();
	return 0;
}

SHIM_EXPORT int
rename(const char *from, const char *to)
{
	return do_renameat2(AT_FDCWD, from, AT_FDCWD, to, 0);
}

SHIM_EXPORT int
renameat(int fa, const char *from, int fb, const char *to)
{
	return do_renameat2(fa, from, fb, to, 0);
}

SHIM_EXPORT int
renameat2(int fa, const char *from, int fb, const char *to, unsigned flags)
{
	return do_renameat2(fa, from, fb, to, flags);
}

SHIM_EXPORT int
link(const char *from, const char *to)
{
	char a[PATH_MAX], b[PATH_MAX];

	REAL(link);
	if (ours_at(AT_FDCWD, from, a) || ours_at(AT_FDCWD, to, b))
		return refuse(EPERM, "link", from);
	return real.link(from, to);
}

SHIM_EXPORT int
linkat(int fa, const char *from, int fb, const char *to, int flags)
{
	char a[PATH_MAX], b[PATH_MAX];

	REAL(linkat);
	if (ours_at(fa, from, a) || ours_at(fb, to, b))
		return refuse(EPERM, "link", from);
	return real.linkat(fa, from, fb, to, flags);
}

/* ---- stdio: streams of cached files go through the cache ---- */

struct cookie {
	int fd;
};

static ssize_t
ck_read(void *p, char *buf, size_t n)
{
	return read(((struct cookie *)p)->fd, buf, n);
}

static ssize_t
ck_write(void *p, const char *buf, size_t n)
{
	return write(((struct cookie *)p)->fd, buf, n);
}

static int
ck_seek(void *p, off64_t *off, int whence)
{
	off_t r = lseek(((struct cookie *)p)->fd, (off_t)*off, whence);

	if (r < 0)
		return -1;
	*off = r;
	return 0;
}

static int
ck_close(void *p)
{
	int r = close(((struct cookie *)p)->fd);

	free(p);
	return r;
}

static int
stdio_flags(const char *mode)
{
	int f;

	switch (mode[0]) {
	case 'r':
		f = O_RDONLY;
		break;
	case 'w':
		f = O_WRONLY | O_CREAT | O_TRUNC;
		break;
	case 'a':
		f = O_WRONLY | O_CREAT | O_APPEND;
		break;
	default:
		return -1;
	}
	for (const char *m = mode + 1; *m && *m != ','; m++) {
		if (*m == '+')
			f = (f & ~O_ACCMODE) | O_RDWR;
		else if (*m == 'x')
			f |= O_EXCL;
		else if (*m == 'e')
			f |= O_CLOEXEC;
	}
	return f;
}

/* A stream on a cached descriptor; fileno() of it is -1. */
static FILE *
cookie_stream(int fd, const char *mode)
{
	static const cookie_io_functions_t io = {
		.read = ck_read,
		.write = ck_write,
		.seek = ck_seek,
		.close = ck_close,
	};
	struct cookie *ck = malloc(sizeof(*ck));
	FILE *f;

	if (ck == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	ck->fd = fd;
	f = fopencookie(ck, mode, io);
	if (f == NULL)
		free(ck);
	return f;
}

static FILE *
do_fopen(const char *path, const char *mode)
{
	char full[PATH_MAX];
	int flags, fd;
	FILE *f;

	REAL(fopen);
	if (!ours_at(AT_FDCWD, path, full))
		return real.fopen(path, mode);
	flags = stdio_flags(mode);
	if (flags < 0) {
		errno = EINVAL;
		return NULL;
	}
	fd = open_cached(full, flags, 0666);
	if (fd < 0)
		return NULL;
	if (slot_get(fd) == NULL) /* not a regular file: plain stream */
		return real.fdopen(fd, mode);
	f = cookie_stream(fd, mode);
	if (f == NULL)
		close(fd);
	return f;
}

SHIM_EXPORT FILE *
fopen(const char *path, const char *mode)
{
	return do_fopen(path, mode);
}

SHIM_EXPORT FILE *
fopen64(const char *path, const char *mode)
{
	return do_fopen(path, mode);
}

SHIM_EXPORT FILE *
fdopen(int fd, const char *mode)
{
	struct ofd *o;
	int kind;

	REAL(fdopen);
	o = ofd_get(fd);
	if (o == NULL)
		return real.fdopen(fd, mode);
	kind = o->kind;
	ofd_put();
	if (kind != OFD_FILE)
		return real.fdopen(fd, mode);
	return cookie_stream(fd, mode);
}

SHIM_EXPORT FILE *
freopen(const char *path, const char *mode, FILE *stream)
{
	char full[PATH_MAX];

	REAL(freopen);
	if (path != NULL && ours_at(AT_FDCWD, path, full)) {
		refuse(EOPNOTSUPP, "freopen", full);
		return NULL;
	}
	return real.freopen(path, mode, stream);
}

SHIM_EXPORT FILE *
freopen64(const char *path, const char *mode, FILE *stream)
{
	return freopen(path, mode, stream);
}
