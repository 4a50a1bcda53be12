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
 *
 * Files: this one holds the state (the real functions, the descriptor
 * table, the cache, the configuration, paths); the interposers are
 * grouped as the calls go, each twin (open64 of open, ...) an alias of
 * one body: fs_shim_open.c (open), fs_shim_io.c (data), fs_shim_fd.c
 * (close and dup), fs_shim_stat.c (stat), fs_shim_mmap.c (mmap refused,
 * copies), fs_shim_names.c (unlink, rename, link, mkdir), fs_shim_times.c
 * (times), fs_shim_stdio.c (streams); fs_shim_int.h is what they share.
 */
#include "fs_shim_int.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the real functions ---- */

struct rio__fs_libc rio__fs_real;

/* ---- state ---- */

struct ofd **rio__fs_tab[TAB_PAGES];
pthread_rwlock_t rio__fs_tab_lock = PTHREAD_RWLOCK_INITIALIZER;
rio_fc_cache *rio__fs_cache;
pthread_rwlock_t rio__fs_cache_lock = PTHREAD_RWLOCK_INITIALIZER;
static bool cache_failed;
static bool release_idle;   /* RIO_FS_RELEASE=idle */
bool rio__fs_forked;
static char *dir;      /* RIO_FS_DIR, canonical */
static size_t dir_len;
static char *pool_path;
static struct rio_fc_opts cfg; /* from the environment (config_numbers) */
unsigned long rio__fs_meta_dirty; /* directory changes the disk must sync */
/* Open cache handles: relaxed counts, tested for zero at exit. */
static unsigned long open_files;
__thread int rio__fs_depth;      /* S3 */
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

void
rio__fs_say(const char *fmt, ...)
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
	if (rio__fs_real.write != NULL)
		(void)!rio__fs_real.write(2, line, (size_t)n);
}

/* A cache call failed: set errno (library codes loudly). */
int
rio__fs_fail(int rc, const char *what, const char *path)
{
	if (rc > -4096) {
		errno = -rc;
		return -1;
	}
	rio__fs_say("librio-fs: %s %s: %s", what, path ? path : "",
		rio_errormsg());
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
int
rio__fs_refuse(int err, const char *what, const char *path)
{
	rio__fs_say("librio-fs: %s %s: not supported on files of the Rio "
		    "file cache directory %s (refused rather than bypass the "
		    "cache)", what, path ? path : "", dir);
	errno = err;
	return -1;
}

/* ---- the descriptor table ---- */

struct ofd *
rio__fs_slot_get(int fd)
{
	struct ofd **page;

	if (fd < 0 || fd >= TAB_PAGE * TAB_PAGES)
		return NULL;
	/* Acquire, both: pair with the release stores in rio__fs_slot_set,
	 * so the page's zeroed slots and the ofd's fields are seen before
	 * their pointers (lookups take no lock). */
	page = __atomic_load_n(&rio__fs_tab[fd / TAB_PAGE], __ATOMIC_ACQUIRE);
	if (page == NULL)
		return NULL;
	return __atomic_load_n(&page[fd % TAB_PAGE], __ATOMIC_ACQUIRE);
}

/* tab_lock held exclusively. */
int
rio__fs_slot_set(int fd, struct ofd *o)
{
	struct ofd **page;

	if (fd < 0 || fd >= TAB_PAGE * TAB_PAGES)
		return -EMFILE;
	page = rio__fs_tab[fd / TAB_PAGE];
	if (page == NULL) {
		page = calloc(TAB_PAGE, sizeof(*page));
		if (page == NULL)
			return -ENOMEM;
		/* Release: the zeroed page before its pointer (pairs with
		 * the acquire in the lookup above). */
		__atomic_store_n(&rio__fs_tab[fd / TAB_PAGE], page,
			__ATOMIC_RELEASE);
	}
	/* Release: the ofd, made by this thread, before its pointer. */
	__atomic_store_n(&page[fd % TAB_PAGE], o, __ATOMIC_RELEASE);
	return 0;
}

/* S4, S5: the entry of fd, with tab_lock held shared; NULL (and no lock
 * held) if fd is not ours. */
struct ofd *
rio__fs_ofd_get(int fd)
{
	struct ofd *o;

	if (rio__fs_slot_get(fd) == NULL)
		return NULL;
	pthread_rwlock_rdlock(&rio__fs_tab_lock);
	o = rio__fs_slot_get(fd);
	if (o == NULL)
		pthread_rwlock_unlock(&rio__fs_tab_lock);
	return o;
}

void
rio__fs_ofd_put(void)
{
	pthread_rwlock_unlock(&rio__fs_tab_lock);
}

/* Drop one reference (tab_lock held exclusively). */
void
rio__fs_ofd_unref(struct ofd *o)
{
	if (--o->refs > 0)
		return;
	if (o->h != NULL) {
		rio__fs_depth++;
		rio_fc_close(o->h);
		rio__fs_depth--;
		/* Relaxed: a count tested only for zero at exit. */
		__atomic_sub_fetch(&open_files, 1, __ATOMIC_RELAXED);
	}
	pthread_mutex_destroy(&o->lock);
	free(o->path);
	free(o);
}

struct ofd *
rio__fs_ofd_new(int kind, rio_fc_file *h, const char *path, int flags)
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
		/* Relaxed: as in the put above. */
		__atomic_add_fetch(&open_files, 1, __ATOMIC_RELAXED);
	return o;
}

/* ---- set-up ---- */

#define LOAD(fn)                                                  \
	do {                                                      \
		void *p_ = dlsym(RTLD_NEXT, #fn);                 \
		memcpy(&rio__fs_real.fn, &p_, sizeof(p_));                \
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
		o = rio__fs_ofd_new(OFD_POISON, NULL, target, 0);
		if (o != NULL)
			rio__fs_slot_set(fd, o);
	}
	closedir(d);
}

static void
child_after_fork(void)
{
	rio__fs_forked = true;
}

/* The libc functions: may run very early (a sanitizer's start-up maps
 * memory through us), before libc has even set up the environment. */
static void
load_real(void)
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
	rio__sys.open = rio__fs_real.open;
	rio__sys.close = rio__fs_real.close;
	rio__sys.pread = rio__fs_real.pread;
	rio__sys.pwrite = rio__fs_real.pwrite;
	rio__sys.ftruncate = rio__fs_real.ftruncate;
	rio__sys.fdatasync = rio__fs_real.fdatasync;
	rio__sys.fsync = rio__fs_real.fsync;
	rio__sys.fstat = rio__fs_real.fstat;
	rio__sys.stat = rio__fs_real.stat;
	rio__sys.lstat = rio__fs_real.lstat;
	rio__sys.unlink = rio__fs_real.unlink;
	rio__sys.rename = rio__fs_real.rename;
	rio__sys.lseek = rio__fs_real.lseek;
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
			rio__fs_say("librio-fs: RIO_FS_POOL_SIZE=%s: not a "
			    "size (a positive number of bytes below 2^64, "
			    "with an optional K, M, G or T suffix); the file "
			    "cache is not opened and files below %s will "
			    "fail", e, dir);
			cache_failed = true;
			return;
		}
		cfg.pool_size = (size_t)size;
	}
	if ((e = getenv("RIO_FS_SAFE_SYNC")) != NULL && atoi(e))
		cfg.pool_flags |= RIO_SAFE_SYNC;
	if ((e = getenv("RIO_FS_WRITEBACK_MS")) != NULL &&
	    !parse_count(e, 3600000u, &cfg.writeback_ms)) {
		rio__fs_say("librio-fs: RIO_FS_WRITEBACK_MS=%s: not a number "
		    "of milliseconds (0 to 3600000); the file cache is not "
		    "opened and files below %s will fail", e, dir);
		cache_failed = true;
		return;
	}
	if ((e = getenv("RIO_FS_DIRTY_PCT")) != NULL &&
	    !parse_count(e, 100u, &cfg.dirty_max_pct)) {
		rio__fs_say("librio-fs: RIO_FS_DIRTY_PCT=%s: not a percentage "
		    "(0 to 100); the file cache is not opened and files "
		    "below %s will fail", e, dir);
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
		rio__fs_say("librio-fs: RIO_FS_DIR=%s: %s; files there will "
		    "fail", d, strerror(errno));
		dir = strdup(d);
		dir_len = strlen(d);
		cache_failed = true;
		return;
	}
	dir = strdup(buf);
	dir_len = strlen(buf);
	if (p == NULL || *p == '\0') {
		rio__fs_say("librio-fs: RIO_FS_DIR is set but RIO_FS_POOL is "
		    "not; files below %s will fail", dir);
		cache_failed = true;
	} else {
		pool_path = strdup(p);
		if (rio__fs_ours_at(AT_FDCWD, p, buf)) {
			rio__fs_say("librio-fs: the pool %s must not be below "
			    "the cached directory %s; files there will fail",
				p, dir);
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

void
rio__fs_load(void)
{
	pthread_once(&init_once, load_real);
}

__attribute__((constructor)) static void
shim_ctor(void)
{
	rio__fs_load();
	shim_config();
}

/* The cache, opened at the first use of a file below the directory.
 * Returned with cache_lock held shared (put_cache() releases it), so an
 * idle release (RIO_FS_RELEASE=idle) cannot close it in use; NULL (no
 * lock held, errno EIO, a line on stderr) if it cannot be opened. */
rio_fc_cache *
rio__fs_get_cache(const char *what, const char *path)
{
	struct rio_fc_opts o = { 0 };
	rio_fc_cache *c;
	int rc;

	pthread_rwlock_rdlock(&rio__fs_cache_lock);
	if (rio__fs_cache != NULL)
		return rio__fs_cache;
	pthread_rwlock_unlock(&rio__fs_cache_lock);
	pthread_rwlock_wrlock(&rio__fs_cache_lock);
	if (rio__fs_cache == NULL && !cache_failed) {
		o = cfg;
		o.flags = RIO_FC_CREATE;
		rio__fs_depth++;
		rc = rio_fc_cache_open(pool_path, dir, &o, &c);
		rio__fs_depth--;
		if (rc) {
			rio__fs_say("librio-fs: cannot open the Rio file cache "
			    "%s for %s: %s", pool_path, dir, rio_errormsg());
			/* Busy (another process) may clear; the rest not. */
			cache_failed = rc != -EBUSY;
		} else {
			rio__fs_cache = c;
		}
	}
	pthread_rwlock_unlock(&rio__fs_cache_lock);
	pthread_rwlock_rdlock(&rio__fs_cache_lock);
	if (rio__fs_cache != NULL)
		return rio__fs_cache;
	pthread_rwlock_unlock(&rio__fs_cache_lock);
	rio__fs_say("librio-fs: %s %s: the Rio file cache is not available",
		what, path);
	errno = EIO;
	return NULL;
}

void
rio__fs_put_cache(void)
{
	pthread_rwlock_unlock(&rio__fs_cache_lock);
}

static void
write_stats(void)
{
	struct rio_fc_stats s;
	const char *path = getenv("RIO_FS_STATS");
	FILE *f;

	if (path == NULL || rio__fs_cache == NULL ||
	    rio_fc_stats(rio__fs_cache, &s) != 0)
		return;
	f = rio__fs_real.fopen(path, "w");
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
		if (rio__fs_tab[p] == NULL)
			continue;
		for (int i = 0; i < TAB_PAGE; i++) {
			struct ofd *o = rio__fs_tab[p][i];
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

	rio__fs_depth++;
	write_stats();
	if (at_exit) {
		pthread_rwlock_wrlock(&rio__fs_tab_lock);
		orphan_descriptors();
		pthread_rwlock_unlock(&rio__fs_tab_lock);
	}
	rc = rio_fc_cache_close(rio__fs_cache);
	rio__fs_cache = NULL;
	if (rc)
		rio__fs_say("librio-fs: %s: %s (the data stays in the cache "
		    "pool %s and is written back by its next open)", when,
			rio_errormsg(), pool_path);
	cache_failed = at_exit; /* no reopening from late destructors */
	rio__fs_depth--;
}

__attribute__((destructor)) static void
shim_dtor(void)
{
	if (rio__fs_forked)
		return;
	pthread_rwlock_wrlock(&rio__fs_cache_lock);
	if (rio__fs_cache != NULL)
		release_cache("at exit", true);
	pthread_rwlock_unlock(&rio__fs_cache_lock);
}

/* RIO_FS_RELEASE=idle: the last cached file closed, let another process
 * have the cache.  No lock held. */
void
rio__fs_maybe_release(void)
{
	if (!release_idle || rio__fs_forked ||
	    __atomic_load_n(&open_files, __ATOMIC_RELAXED) != 0)
		return;
	pthread_rwlock_wrlock(&rio__fs_cache_lock);
	if (rio__fs_cache != NULL &&
	    __atomic_load_n(&open_files, __ATOMIC_RELAXED) == 0)
		release_cache("releasing the cache", false);
	pthread_rwlock_unlock(&rio__fs_cache_lock);
}

/* ---- paths ---- */

/* The absolute path of (dirfd, path), without resolving links. */
int
rio__fs_at_path(int dirfd, const char *path, char *out)
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
int
rio__fs_where_at(int dirfd, const char *path, char *full)
{
	char resolved[PATH_MAX];
	char *slash;

	if (dir == NULL || rio__fs_depth > 0 || path == NULL)
		return 0;
	if (rio__fs_at_path(dirfd, path, full) != 0)
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
int
rio__fs_ours_at(int dirfd, const char *path, char *full)
{
	return rio__fs_where_at(dirfd, path, full) == 1;
}
