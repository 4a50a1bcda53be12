/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fs_shim_int.h -- librio-fs.so internals shared between the fs_shim*.c files
 *
 * The shim's state and helpers (fs_shim.c: the real functions, the
 * descriptor table, the cache, paths, loud failures), used by the files of
 * interposers.  Its invariants, S1-S5, are in fs_shim.c.  Included first
 * in each of those files, before any system header.
 */
#ifndef RIO_FS_SHIM_INT_H
#define RIO_FS_SHIM_INT_H

/* Our own open64, stat64, ...: no redirection of the plain names. */
#undef _FILE_OFFSET_BITS
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

#include "fc_int.h"

#define SHIM_EXPORT __attribute__((visibility("default")))
/* A twin of the same signature (open64 of open, ...): one body, two
 * exported names. */
#define SHIM_ALIAS(of) __attribute__((alias(#of)))

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
 * the same; the 64 variants share the plain ones' code (an alias where
 * the signatures match, else a thin caller of the same static function
 * with its struct stat64 cast by ST). */
_Static_assert(sizeof(off_t) == sizeof(off64_t), "LP64 only");
_Static_assert(sizeof(struct stat) == sizeof(struct stat64), "LP64 only");
#define ST(p) ((struct stat *)(void *)(p))

/* ---- the real functions (fs_shim.c) ---- */

struct rio__fs_libc {
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
};
extern struct rio__fs_libc rio__fs_real;
/* Fill rio__fs_real (once; may run very early, see fs_shim.c). */
void rio__fs_load(void);
#define REAL(fn)                                \
	do {                                    \
		if (rio__fs_real.fn == NULL)    \
			rio__fs_load();         \
	} while (0)

/* ---- the descriptor table (fs_shim.c) ---- */

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

extern struct ofd **rio__fs_tab[TAB_PAGES];
extern pthread_rwlock_t rio__fs_tab_lock;
struct ofd *rio__fs_slot_get(int fd);
/* tab_lock held exclusively. */
int rio__fs_slot_set(int fd, struct ofd *o);
/* S4, S5: the entry of fd, with tab_lock held shared; NULL (and no lock
 * held) if fd is not ours.  rio__fs_ofd_put() releases it. */
struct ofd *rio__fs_ofd_get(int fd);
void rio__fs_ofd_put(void);
/* Drop one reference (tab_lock held exclusively). */
void rio__fs_ofd_unref(struct ofd *o);
struct ofd *rio__fs_ofd_new(int kind, rio_fc_file *h, const char *path,
	int flags);

/* ---- the cache (fs_shim.c) ---- */

extern rio_fc_cache *rio__fs_cache;
extern pthread_rwlock_t rio__fs_cache_lock;
extern bool rio__fs_forked;
extern unsigned long rio__fs_meta_dirty; /* directory changes to sync */
extern __thread int rio__fs_depth;       /* S3 */
/* The cache, opened at the first use of a file below the directory, with
 * cache_lock held shared (rio__fs_put_cache() releases it); NULL (no lock
 * held, errno EIO, a line on stderr) if it cannot be opened. */
rio_fc_cache *rio__fs_get_cache(const char *what, const char *path);
void rio__fs_put_cache(void);
/* RIO_FS_RELEASE=idle: close the cache once no cached file is open. */
void rio__fs_maybe_release(void);

/* ---- paths (fs_shim.c) ---- */

/* The absolute path of (dirfd, path), without resolving links. */
int rio__fs_at_path(int dirfd, const char *path, char *out);
/* Where (dirfd, path) is: 1 below the directory, 2 the directory itself,
 * 0 elsewhere; full gets its absolute path. */
int rio__fs_where_at(int dirfd, const char *path, char *full);
/* Is (dirfd, path) a file below the directory? */
int rio__fs_ours_at(int dirfd, const char *path, char *full);

/* ---- failures (fs_shim.c) ---- */

/* A line on stderr. */
void rio__fs_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A cache call failed: set errno (library codes loudly); returns -1. */
int rio__fs_fail(int rc, const char *what, const char *path);
/* Refuse an operation the shim cannot route through the cache (loudly). */
int rio__fs_refuse(int err, const char *what, const char *path);

/* fs_shim_open.c: open a path below the directory through the cache. */
int rio__fs_open_cached(const char *full, int flags, mode_t mode);

/* fs_shim_io.c */
/* A poisoned descriptor: every data call fails (o released, true). */
bool rio__fs_unusable(struct ofd *o, const char *what);
uint64_t rio__fs_file_size(struct ofd *o);

#endif /* RIO_FS_SHIM_INT_H */
