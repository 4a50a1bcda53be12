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
#include "rio_clock.h"
#include "rio_testhook.h"

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
 * hdr.c: the one header check of every persistent format (docs/FORMAT.md,
 * "Header rules").  A format describes its header with a rule (static
 * const, one per format) and passes a view of the fields read from media;
 * rio__hdr_check() applies rules H1..H8 of hdr.c in order and returns 0 or
 * rule->code[verdict], the calling library's code, with the reason in
 * msg (no path: the caller adds it and sets its own library's message).
 * It reads only.  Exported for libvista, libvistagrams and libdc.
 */
#define RIO__HDR_INCOMPAT (1u << 0)  /* the format has an incompat mask */
#define RIO__HDR_RO_COMPAT (1u << 1) /* ... a ro_compat mask */
#define RIO__HDR_COMPAT (1u << 2)    /* ... a compat mask */
#define RIO__HDR_NRESERVED 3

enum rio__hdr_verdict {
	RIO__HDR_BADMAGIC, /* H1 */
	RIO__HDR_BADCSUM,  /* H2 */
	RIO__HDR_VERSION,  /* H3 */
	RIO__HDR_FEATURE,  /* H5, H6 */
	RIO__HDR_RESERVED, /* H8 */
	RIO__HDR_NVERDICTS
};

/* How the caller will use what the header describes (H6). */
#define RIO__HDR_READ 0u
#define RIO__HDR_WRITE 1u

struct rio__hdr_rule {
	const char *what;   /* "rio pool", "vista segment": for messages */
	const void *magic;  /* the bytes the magic field must hold */
	size_t magic_len;
	unsigned major, minor; /* this code's version of the format */
	unsigned fields;    /* RIO__HDR_*: the masks the format has */
	uint32_t incompat_known, ro_compat_known, compat_known;
	int code[RIO__HDR_NVERDICTS]; /* the library's code per verdict */
};

/* librio's code per verdict, for the pool header and the image superblock
 * (the file cache maps a bad checksum and reserved bytes to RIO_ECORRUPT). */
#define RIO__HDR_CODES                                \
	{                                             \
		[RIO__HDR_BADMAGIC] = RIO_EBADMAGIC,  \
		[RIO__HDR_BADCSUM] = RIO_EBADCSUM,    \
		[RIO__HDR_VERSION] = RIO_EVERSION,    \
		[RIO__HDR_FEATURE] = RIO_EFEATURE,    \
		[RIO__HDR_RESERVED] = RIO_EBADHDR,    \
	}

/* The fields as read from media; absent masks 0, unused reserved NULL. */
struct rio__hdr_view {
	const void *magic;
	bool csum_ok;       /* the format's own checksum matched */
	unsigned major, minor;
	uint32_t incompat, ro_compat, compat;
	struct {
		const void *p;
		size_t n;
	} reserved[RIO__HDR_NRESERVED]; /* must be zero (H8) */
};

RIO__SHARED int rio__hdr_check(const struct rio__hdr_rule *rule,
	const struct rio__hdr_view *h, unsigned mode, char *msg, size_t len);
/* True if the n bytes at p are all zero. */
RIO__SHARED bool rio__all_zero(const void *p, size_t n);

/*
 * System calls that tests replace to inject failures (sysops.c): the
 * pools' calls whose failure matters to durability, and every call the
 * file cache (librio/fc) makes on the files it caches.  The preload shim
 * points the table at libc's definitions (its own wrappers of the same
 * names would otherwise be called back).  One field per entry of
 * rio_testhook.h's list; tests swap entries through rio_testhook_swap(),
 * never by writing the table.
 */
struct rio__sysops {
#define RIO__SYSOPS_FIELD(NAME, name, ret, args) rio_sys_##name##_fn name;
	RIO_TESTHOOK_SYSCALLS(RIO__SYSOPS_FIELD)
#undef RIO__SYSOPS_FIELD
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
/* Read sections over pointers a writer may unpublish (registry.c): any
 * count of readers, async-signal-safe. */
void rio__rs_enter(int *count);
void rio__rs_exit(int *count);
void rio__rs_quiesce(int *count);

/* signals.c */
int rio__signals_install(void);
/* The fatal path: safe-sync every pool, then die of sig.  Never returns
 * unless the previous disposition was a handler that returned. */
void rio__fatal(int sig, siginfo_t *si, void *uc, bool wild_store);
void rio__chain_previous(int sig, siginfo_t *si, void *uc);

/* protect.c */
int rio__protect_init(rio_pool *p);
void rio__protect_fini(rio_pool *p);
/* Signal context: give this thread pool p's baseline rights for key `key`
 * in the frame's PKRU (*pkru); false if it has them already or the key is
 * not p's (protect.c). */
bool rio__pkey_grant(rio_pool *p, int key, uint32_t *pkru, bool write);
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

#ifdef __cplusplus
}
#endif

#endif /* RIO_INT_H */
