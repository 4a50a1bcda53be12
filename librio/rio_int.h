/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rio_int.h -- librio internals shared between its source files
 */
#ifndef RIO_INT_H
#define RIO_INT_H

#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "rio.h"
#include "rio_assert.h"

#ifdef __cplusplus
extern "C" {
#endif

struct pmem2_source;
struct pmem2_map;

#define RIO__PAGE 4096u
#define RIO__MAX_POOLS 256 /* open pools per process (signal registry) */

/* Statistics counters.  relaxed: a count orders nothing, it only must not
 * lose increments from threads and handlers (read by rio_stats()). */
#define RIO__STAT_ADD(p, field, n) \
	__atomic_fetch_add(&(p)->stats.field, (n), __ATOMIC_RELAXED)

/* Safe-sync state of one pool (image.c). */
struct rio__image;

struct rio_pool {
	struct rio__pool_hot hot; /* must stay first: the inline API reads it */

	char *map_base;   /* whole mapping, header included */
	size_t map_size;
	char *base;       /* user area */
	size_t size;

	enum rio_domain domain;
	enum rio_domain native_domain;
	unsigned flags;   /* open flags */
	uint32_t hdr_flags;
	int fd;
	bool restored;
	int error;        /* sticky: 0 or a failure code (RIO_EFATAL state) */

	struct pmem2_source *src;
	struct pmem2_map *map; /* NULL when fixed */
	bool fixed;  /* mapped at a caller-chosen address (move_to_fixed) */

	char *path;
	char *image_path;
	uint8_t uuid[16];

	/* protection (protect.c) */
	pthread_mutex_t prot_lock;
	bool prot_on;
	int pkey;            /* -1: mprotect mode */
	uint16_t *win_count; /* per user page, mprotect mode */

	/* safe sync (image.c, sync.c) */
	struct rio__image *img;
	pthread_t sync_thread;
	bool sync_thread_on;
	pthread_mutex_t sync_thread_lock;
	pthread_cond_t sync_thread_cond;
	bool sync_thread_stop;
	unsigned sync_interval_ms;

	int reg_slot; /* index in the registry (registry.c) */

	struct rio_stats stats;
};

/*
 * The internals that librio-fc (the file cache, librio/fc, a library built
 * on this one) shares: exported from librio.so under their rio__ names, so
 * that the cache sets librio's thread-local message and makes its system
 * calls through librio's one table.  Declared here only, not in rio.h:
 * not API.
 */
#define RIO__SHARED __attribute__((visibility("default")))

/* err.c */
RIO__SHARED int rio__err(int rc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
RIO__SHARED int rio__errno(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));
RIO__SHARED void rio__notice(const char *fmt, ...)
	__attribute__((format(printf, 1, 2)));

/*
 * System calls that tests replace to inject failures (sysops.c): the
 * pools' calls whose failure matters to durability, and every call the
 * file cache (librio/fc) makes on the files it caches.  The preload shim
 * points the table at libc's definitions (its own wrappers of the same
 * names would otherwise be called back).
 */
struct rio__sysops {
	ssize_t (*pwrite)(int fd, const void *buf, size_t n, off_t off);
	ssize_t (*pread)(int fd, void *buf, size_t n, off_t off);
	int (*fdatasync)(int fd);
	int (*fsync)(int fd);
	int (*mprotect)(void *addr, size_t len, int prot);
	int (*msync)(void *addr, size_t len, int flags);
	/* the file cache's, on cached files and their directories */
	int (*open)(const char *path, int flags, ...);
	int (*close)(int fd);
	int (*ftruncate)(int fd, off_t len);
	int (*fstat)(int fd, struct stat *st);
	int (*stat)(const char *path, struct stat *st);
	int (*lstat)(const char *path, struct stat *st);
	int (*unlink)(const char *path);
	int (*rename)(const char *from, const char *to);
	off_t (*lseek)(int fd, off_t off, int whence); /* size limit probe */
};
RIO__SHARED extern struct rio__sysops rio__sys;
/* Write/read all of buf or fail with -errno (EIO for a short transfer). */
RIO__SHARED int rio__pwrite_all(int fd, const void *buf, size_t n, off_t off);
int rio__pread_all(int fd, void *buf, size_t n, off_t off);
/* fsync the directory holding path. */
int rio__fsync_dir_of(const char *path);

/* domain.c */
void rio__cpu_init(void);
uint32_t rio__flush_kind_for(enum rio_domain d);
enum rio_domain rio__effective_domain(enum rio_domain native, unsigned flags);
enum rio_domain rio__domain_of_map(struct pmem2_map *map);
int rio__pmem2_errno(int pmem2_rc);

/* registry.c: open pools, readable from signal handlers */
int rio__registry_add(rio_pool *p);
void rio__registry_remove(rio_pool *p);
/* A reader brackets its use of registered pools with enter/exit; close
 * waits for readers before freeing.  find() only inside the bracket. */
void rio__registry_enter(void);
void rio__registry_exit(void);
rio_pool *rio__registry_find(const void *addr);
/* Call fn for each registered pool; safe in signal context. */
void rio__registry_foreach(void (*fn)(rio_pool *p, void *arg), void *arg);

/* signals.c */
int rio__signals_install(void);
/* The fatal path: safe-sync every pool, then die of sig.  Never returns
 * unless the previous disposition was a handler that returned. */
void rio__fatal(int sig, siginfo_t *si, void *uc, bool wild_store);
void rio__chain_previous(int sig, siginfo_t *si, void *uc);

/* protect.c */
int rio__protect_init(rio_pool *p);
void rio__protect_fini(rio_pool *p);
bool rio__fault_hooks_run(void *addr);

/* image.c */
/* Open (or create and fill) the pool's image; ready for syncs after. */
int rio__image_attach(rio_pool *p);
void rio__image_detach(rio_pool *p);
/* Write the pool to the image.  signal_ctx: async-signal-safe mode (no
 * waiting for locks held by this thread, no messages). */
int rio__image_sync(rio_pool *p, bool signal_ctx, uint64_t *gen);
/* Rebuild pool file `path` from the newest valid copy in `image`. */
int rio__image_restore(const char *image, const char *path, uint64_t *gen);

/* sync.c */
int rio__sync_thread_start(rio_pool *p);
void rio__sync_thread_stop(rio_pool *p);

/* trace.c */
void rio__trace_mapped(rio_pool *p);
void rio__trace_unmapping(rio_pool *p);

/* time */
uint64_t rio__now_ns(void);

#ifdef __cplusplus
}
#endif

#endif /* RIO_INT_H */
