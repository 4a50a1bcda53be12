/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rio.h -- librio: reliable memory on persistent or emulated memory
 *
 * A *pool* is a file mapped into the process through libpmem2: a file on a
 * DAX file system, a device-DAX node, or (emulated mode) a file on tmpfs or
 * any other file system.  librio
 *   - finds the pool's persistence domain (byte, cacheline or page) from
 *     libpmem2 and provides inline persist/flush/drain primitives for it;
 *   - protects pool pages against wild stores (write windows);
 *   - keeps, on request, a crash-safe disk image of an emulated pool
 *     ("safe sync") and restores it when the memory copy is gone.
 *
 * Conventions (the same in every library of the stack):
 *   - every function that can fail returns int: 0 on success, -errno for an
 *     OS failure, or a library code from its own band (RIO_E*, -30000..-30999);
 *   - on failure a thread-local message with context is available from
 *     rio_errormsg() until the next failing call on that thread;
 *   - rio_strerror()/rio_err_name() describe any such code.
 *
 * Thread safety: pool create/open/close must not race with other calls on the
 * same pool.  Persistence primitives, windows, safe sync and stats may be
 * called from any thread.  See docs/librio.3.md for the full manual.
 *
 * The Rio file cache, built on pools, is a library of its own: rio_fc.h,
 * librio-fc.
 */
#ifndef RIO_H
#define RIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RIO_EXPORT __attribute__((visibility("default")))

/* Layout headers pin sizes and offsets in both C and C++ (the tests). */
#ifdef __cplusplus
#define RIO_STATIC_ASSERT static_assert
#else
#define RIO_STATIC_ASSERT _Static_assert
#endif

#define RIO_VERSION_MAJOR 0
#define RIO_VERSION_MINOR 1

/* ------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------ */

/*
 * XX(name, value, message).  The enum, rio_strerror() and rio_err_name() are
 * all generated from this one table.  RIO_EOUTSIDE .. RIO_EFORKED are the
 * file cache's (rio_fc.h, librio-fc): they stay in this one table so that
 * every code of the stack keeps its value and its text.
 */
#define RIO_ERRNO_MAP(XX)                                                     \
	XX(RIO_ESHORT, -30001, "file is smaller than a pool header")          \
	XX(RIO_EBADMAGIC, -30002, "not a rio pool (bad magic)")               \
	XX(RIO_EBADCSUM, -30003, "pool header checksum mismatch")             \
	XX(RIO_EVERSION, -30004, "pool was made by a newer major version")    \
	XX(RIO_EFEATURE, -30005, "pool uses an unsupported incompat feature") \
	XX(RIO_ESIZE, -30006, "pool size does not match its file")            \
	XX(RIO_EADDRINUSE, -30007, "requested address range is in use")       \
	XX(RIO_ELAYOUT, -30008, "pool layout name does not match")            \
	XX(RIO_EIMAGE, -30009, "safe-sync image has no valid copy")           \
	XX(RIO_EFATAL, -30010, "pool is in an error state; reopen it")        \
	XX(RIO_ERANGE, -30011, "address range is outside the pool")           \
	XX(RIO_EWINDOW, -30012, "write window calls out of order")            \
	XX(RIO_EBADHDR, -30013, "pool header has invalid fields")             \
	XX(RIO_ENOSYNC, -30014, "pool has no safe-sync image")                \
	XX(RIO_EOUTSIDE, -30015, "path is outside the file cache directory")  \
	XX(RIO_ECHANGED, -30016, "file changed on disk behind the cache")     \
	XX(RIO_ECORRUPT, -30017, "file cache metadata is corrupt")            \
	XX(RIO_EOTHERDIR, -30018, "file cache belongs to another directory")  \
	XX(RIO_EFORKED, -30019, "file cache was opened by a parent process")

#define RIO__ERRNO_ENUM(name, value, msg) name = (value),
enum rio_errno { RIO_ERRNO_MAP(RIO__ERRNO_ENUM) };
#undef RIO__ERRNO_ENUM

/* Text for any return code of the stack: RIO_E*, -errno, or 0. */
RIO_EXPORT const char *rio_strerror(int rc);
/* Symbolic name ("RIO_EBADMAGIC", "ENOENT", "OK") of a return code. */
RIO_EXPORT const char *rio_err_name(int rc);
/* The calling thread's message for its last failure ("" if none). */
RIO_EXPORT const char *rio_errormsg(void);
/*
 * Set the calling thread's message and return rc unchanged: for libraries
 * built on librio, so one thread-local message serves the whole stack.
 */
RIO_EXPORT int rio_seterr(int rc, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* ------------------------------------------------------------------------
 * Pools
 * ------------------------------------------------------------------------ */

typedef struct rio_pool rio_pool;

enum rio_domain {
	RIO_DOMAIN_NONE = 0,
	/* Caches are inside the persistence domain (eADR; Rio's own model):
	 * a store is durable once it is visible; persist only orders. */
	RIO_DOMAIN_BYTE = 1,
	/* ADR: a store is durable once its line is flushed (clwb/clflushopt)
	 * and the flush is fenced (sfence). */
	RIO_DOMAIN_CACHELINE = 2,
	/* An ordinary file: a store is durable after msync of its page. */
	RIO_DOMAIN_PAGE = 3,
};

/* Flags for rio_pool_create*() and rio_pool_open*(). */
#define RIO_SAFE_SYNC (1u << 0)     /* keep a disk image (create only)   */
#define RIO_PROTECT (1u << 1)       /* rio_protect() right after mapping */
#define RIO_NO_RESTORE (1u << 2)    /* open: never restore from image    */
#define RIO_FORCE_BYTE (1u << 3)    /* use this domain whatever libpmem2 */
#define RIO_FORCE_CACHELINE (1u << 4) /* reports (emulation: documented) */
#define RIO_FORCE_PAGE (1u << 5)
#define RIO_RDONLY (1u << 6) /* open read-only (inspection)      */
#define RIO_NO_SIGNALS (1u << 7) /* do not sync from fatal signals */

/* Optional settings; zero-initialize and set what you need. */
struct rio_pool_opts {
	/* Map the pool so that its first byte is at this address (page
	 * aligned).  An address range that is already mapped is never
	 * clobbered: the call fails with RIO_EADDRINUSE. */
	void *addr;
	/* Safe-sync image path; NULL means "<path>.img". */
	const char *image_path;
	/* Safe-sync every this many milliseconds from a background thread
	 * (only pages changed since the last syncs are written); 0 = off. */
	unsigned sync_interval_ms;
	/* Up to 31 bytes naming the user of the pool (e.g. "vista.segment");
	 * stored at create, checked at open when non-NULL. */
	const char *layout;
};

#define RIO_POOL_HDR_SIZE 4096u /* bytes before rio_pool_base() */
#define RIO_POOL_MIN_SIZE (2 * RIO_POOL_HDR_SIZE)

/*
 * Create a pool file of `size` bytes (a multiple of the page size, at least
 * RIO_POOL_MIN_SIZE; the first RIO_POOL_HDR_SIZE bytes hold the header) and
 * map it.  The file appears under `path` only once it is complete (it is
 * built under a temporary name and renamed), so a crash during create leaves
 * nothing half-made behind.  The user area, rio_pool_base() ..
 * + rio_pool_size(), starts zeroed.
 * Returns 0, -EEXIST (path exists), -EROFS, -ENOSPC, -EINVAL,
 * RIO_EADDRINUSE, or another -errno.
 */
RIO_EXPORT int rio_pool_create(const char *path, size_t size, unsigned flags,
	rio_pool **pool);
RIO_EXPORT int rio_pool_create_opts(const char *path, size_t size,
	unsigned flags, const struct rio_pool_opts *opts, rio_pool **pool);

/*
 * Open and map an existing pool.  The header is validated before anything
 * is written; a failure changes nothing on disk.  If the pool file is
 * missing but its safe-sync image exists (the "reboot" case), the pool is
 * restored from the newest valid image copy first (rio_pool_restored()
 * then returns true and a notice is printed on stderr).
 * Returns 0, -ENOENT (no pool and no image), RIO_ESHORT, RIO_EBADMAGIC,
 * RIO_EBADCSUM, RIO_EVERSION, RIO_EFEATURE, RIO_EBADHDR, RIO_ESIZE,
 * RIO_ELAYOUT, RIO_EADDRINUSE, RIO_EIMAGE, -EROFS, or another -errno.
 */
RIO_EXPORT int rio_pool_open(const char *path, unsigned flags,
	rio_pool **pool);
RIO_EXPORT int rio_pool_open_opts(const char *path, unsigned flags,
	const struct rio_pool_opts *opts, rio_pool **pool);

/*
 * Stop background sync, safe-sync (if the pool has an image and is not in
 * an error state), unmap and free.  Returns the safe-sync's result; the pool
 * is closed in every case.
 */
RIO_EXPORT int rio_pool_close(rio_pool *pool);

RIO_EXPORT void *rio_pool_base(const rio_pool *pool); /* first user byte */
RIO_EXPORT size_t rio_pool_size(const rio_pool *pool); /* user bytes */
RIO_EXPORT enum rio_domain rio_pool_domain(const rio_pool *pool);
/* What libpmem2 reported for the mapping, before any forcing. */
RIO_EXPORT enum rio_domain rio_pool_native_domain(const rio_pool *pool);
RIO_EXPORT void rio_pool_uuid(const rio_pool *pool, uint8_t uuid[16]);
RIO_EXPORT const char *rio_pool_path(const rio_pool *pool);
RIO_EXPORT const char *rio_pool_image_path(const rio_pool *pool);
RIO_EXPORT bool rio_pool_restored(const rio_pool *pool);
/*
 * 0, or RIO_EFATAL once a persistence operation on the pool has failed
 * (an msync error in the page domain): data believed durable may not be.
 * The state sticks until the pool is closed and reopened.
 */
RIO_EXPORT int rio_pool_error(const rio_pool *pool);
RIO_EXPORT const char *rio_domain_name(enum rio_domain d);
/* Parse "byte" | "cacheline" | "page"; RIO_DOMAIN_NONE if not one. */
RIO_EXPORT enum rio_domain rio_domain_parse(const char *s);

/*
 * The domain libpmem2 reports for a mapping of `path` (an existing file or
 * device), without treating it as a pool.  For riotool info.
 */
RIO_EXPORT int rio_domain_of_path(const char *path, enum rio_domain *out);

/* ------------------------------------------------------------------------
 * Persistence primitives: the single choke point of the stack.
 *
 * rio_flush() starts write-back of the lines covering [addr, addr+len),
 * rio_drain() waits for every flush issued before it by this thread, and
 * rio_persist() is both.  The cost depends on the pool's domain:
 *   byte       flush: nothing; drain: compiler barrier (x86 keeps stores in
 *              order; nothing needs to leave the cache)
 *   cacheline  flush: clwb (or clflushopt, or clflush) per line;
 *              drain: sfence
 *   page       flush: msync(MS_SYNC) of the covering pages; drain: nothing
 * addr/len must lie inside the pool; nothing is checked on this path.
 *
 * Tracing (tools/pmemtest) hooks these functions at load time; when no
 * tracer is installed the cost is one predictable branch.
 * ------------------------------------------------------------------------ */

/* Installed by a tracer (see rio_trace_set); NULL when off. */
struct rio_trace_ops {
	void (*flush)(const rio_pool *p, const void *addr, size_t len,
		const void *caller);
	void (*drain)(const rio_pool *p, const void *caller);
	void (*durable_point)(const rio_pool *p, const char *what,
		const void *caller);
	void (*pool_mapped)(const rio_pool *p, void *map_base, size_t map_size,
		const char *path);
	void (*pool_unmapping)(const rio_pool *p, void *map_base,
		size_t map_size);
	/* May be NULL: a tracer that does not model discarded memory. */
	void (*discard)(const rio_pool *p, const void *addr, size_t len,
		const void *caller);
};

/*
 * Install (or, with NULL, remove) the tracer.  pool_mapped() is replayed
 * for every pool already open.  Returns 0.  Call it while no other thread
 * uses librio (a preload library's constructor or destructor): the inline
 * primitives read the hook with a plain load, and a pool opened while it
 * runs may be missed by the replay.
 */
RIO_EXPORT int rio_trace_set(const struct rio_trace_ops *ops);

/*
 * A per-pool write tap: told of every range the primitives below write back
 * and of every fence, for a library that copies a pool's writes elsewhere
 * (libvista_replica's passive backup).  flush() is called by rio_flush()
 * (so also rio_persist() and rio_memcpy_nodrain()) with the range as the
 * caller gave it, before the write-back starts; drain() by rio_drain()
 * before the fence.  Both run on the flushing thread and must not call
 * librio's primitives on the same pool.  In the byte domain the program
 * may skip rio_flush() (nothing needs it), so the tap sees only what the
 * program chose to flush.
 */
struct rio_persist_tap {
	void (*flush)(void *arg, const rio_pool *p, const void *addr,
		size_t len);
	void (*drain)(void *arg, const rio_pool *p);
	void *arg;
};

/*
 * Install (or, with NULL, remove) the tap of `pool`; `tap` must stay valid
 * until it is removed.  Returns 0.  The primitives read the tap with one
 * relaxed load: install and remove it while no other thread flushes the
 * pool (before the first transaction, after the last one), or from the
 * only thread that does.
 */
RIO_EXPORT int rio_set_persist_tap(rio_pool *pool,
	const struct rio_persist_tap *tap);

/* Implementation details the inline functions need; do not use. */
enum rio__flush_kind {
	RIO__FLUSH_NONE = 0, /* byte domain */
	RIO__FLUSH_CLWB = 1,
	RIO__FLUSH_CLFLUSHOPT = 2,
	RIO__FLUSH_CLFLUSH = 3,
	RIO__FLUSH_MSYNC = 4, /* page domain */
};
struct rio__pool_hot {
	uint32_t flush_kind; /* enum rio__flush_kind */
	uint32_t domain;     /* enum rio_domain */
	const struct rio_persist_tap *tap; /* rio_set_persist_tap; NULL: off */
};
RIO_EXPORT extern const struct rio_trace_ops *rio__trace;
RIO_EXPORT void rio__msync(const rio_pool *p, const void *addr, size_t len);
RIO_EXPORT void rio__memcpy_nt(void *dst, const void *src, size_t len);

#define RIO__CACHELINE 64u
#define RIO__UNLIKELY(x) __builtin_expect(!!(x), 0)

static inline const struct rio__pool_hot *
rio__hot(const rio_pool *p)
{
	return (const struct rio__pool_hot *)(const void *)p;
}

/* The pool's tap (rio_set_persist_tap), or NULL: one relaxed load. */
static inline const struct rio_persist_tap *
rio__tap(const rio_pool *p)
{
	return __atomic_load_n(&rio__hot(p)->tap, __ATOMIC_RELAXED);
}

/*
 * Every line from the one holding addr to the one holding addr+len-1.
 * (RIO_BROKEN_FLUSH_SKIP_LAST: a deliberately broken build for
 * tests/rio/isa_test.cpp, whose loops stop one line short.)
 */
#ifdef RIO_BROKEN_FLUSH_SKIP_LAST
#define RIO__LINES_LEFT(p, end) ((p) + RIO__CACHELINE < (end))
#else
#define RIO__LINES_LEFT(p, end) ((p) < (end))
#endif

static inline void
rio__flush_lines(uint32_t kind, const void *addr, size_t len)
{
	uintptr_t p = (uintptr_t)addr & ~(uintptr_t)(RIO__CACHELINE - 1);
	uintptr_t end = (uintptr_t)addr + len;

	switch (kind) {
	case RIO__FLUSH_CLWB:
		for (; RIO__LINES_LEFT(p, end); p += RIO__CACHELINE)
			__asm__ volatile("clwb %0" : "+m"(*(volatile char *)p));
		break;
	case RIO__FLUSH_CLFLUSHOPT:
		for (; RIO__LINES_LEFT(p, end); p += RIO__CACHELINE)
			__asm__ volatile("clflushopt %0"
				: "+m"(*(volatile char *)p));
		break;
	default:
		for (; RIO__LINES_LEFT(p, end); p += RIO__CACHELINE)
			__asm__ volatile("clflush %0" : "+m"(*(volatile char *)p));
		break;
	}
}

/* Start making [addr, addr+len) durable; rio_drain() completes it. */
static inline void
rio_flush(const rio_pool *p, const void *addr, size_t len)
{
	uint32_t kind = rio__hot(p)->flush_kind;
	const struct rio_persist_tap *tap = rio__tap(p);

	if (RIO__UNLIKELY(rio__trace != NULL))
		rio__trace->flush(p, addr, len, __builtin_return_address(0));
	if (RIO__UNLIKELY(tap != NULL) && len != 0)
		tap->flush(tap->arg, p, addr, len);
	if (kind == RIO__FLUSH_NONE || len == 0)
		return;
	if (RIO__UNLIKELY(kind == RIO__FLUSH_MSYNC)) {
		rio__msync(p, addr, len);
		return;
	}
	rio__flush_lines(kind, addr, len);
}

/* Wait until every earlier rio_flush() of this thread is durable. */
static inline void
rio_drain(const rio_pool *p)
{
	const struct rio_persist_tap *tap = rio__tap(p);

	if (RIO__UNLIKELY(rio__trace != NULL))
		rio__trace->drain(p, __builtin_return_address(0));
	if (RIO__UNLIKELY(tap != NULL))
		tap->drain(tap->arg, p);
	if (rio__hot(p)->flush_kind == RIO__FLUSH_NONE ||
	    rio__hot(p)->flush_kind == RIO__FLUSH_MSYNC) {
		/* byte: stores reach the persistence domain in program order
		 * (x86-TSO); only the compiler must not reorder them.
		 * page: msync in rio_flush() already waited. */
		__asm__ volatile("" ::: "memory");
		return;
	}
#ifdef RIO_BROKEN_DRAIN_NO_SFENCE
	/* A deliberately broken build (tests/rio/isa_test.cpp): the tracer
	 * above is told of a drain that never happens. */
	__asm__ volatile("" ::: "memory");
#else
	/* Waits for this thread's earlier clwb/clflushopt and non-temporal
	 * stores: they are durable before any later store is visible. */
	__asm__ volatile("sfence" ::: "memory");
#endif
}

/* rio_flush() + rio_drain(). */
static inline void
rio_persist(const rio_pool *p, const void *addr, size_t len)
{
	rio_flush(p, addr, len);
	rio_drain(p);
}

#define RIO__NT_THRESHOLD 256u

/*
 * Copy len bytes to pool memory and flush them, without the final drain:
 * several copies can then share one rio_drain().  Large copies in the
 * cacheline domain use non-temporal stores (no flush needed; the drain
 * orders them).
 */
static inline void *
rio_memcpy_nodrain(const rio_pool *p, void *dst, const void *src, size_t len)
{
	uint32_t kind = rio__hot(p)->flush_kind;

	if (kind != RIO__FLUSH_NONE && kind != RIO__FLUSH_MSYNC &&
	    len >= RIO__NT_THRESHOLD) {
		const struct rio_persist_tap *tap = rio__tap(p);
		rio__memcpy_nt(dst, src, len);
		if (RIO__UNLIKELY(rio__trace != NULL))
			rio__trace->flush(p, dst, len,
				__builtin_return_address(0));
		if (RIO__UNLIKELY(tap != NULL))
			tap->flush(tap->arg, p, dst, len);
		return dst;
	}
	memcpy(dst, src, len);
	rio_flush(p, dst, len);
	return dst;
}

/* Copy and make durable. */
static inline void *
rio_memcpy_persist(const rio_pool *p, void *dst, const void *src, size_t len)
{
	rio_memcpy_nodrain(p, dst, src, len);
	rio_drain(p);
	return dst;
}

/*
 * Is a tracer installed (rio_trace_set)?  For a library that tells the
 * tracer more than its flushes and drains do -- durability points over many
 * pools, for instance -- and must not pay for gathering them otherwise.
 */
static inline bool
rio_tracing(void)
{
	return RIO__UNLIKELY(rio__trace != NULL);
}

/*
 * Declare a durability point: everything the program stored to the pool so
 * far is meant to be durable now (a transaction commit, for instance).
 * Costs nothing unless a tracer is installed; pmemtest reports lines that
 * were modified but not made durable by such a point.
 */
static inline void
rio_durable_point(const rio_pool *p, const char *what)
{
	if (RIO__UNLIKELY(rio__trace != NULL))
		rio__trace->durable_point(p, what, __builtin_return_address(0));
}

/*
 * Declare that [addr, addr+len) of the pool holds no state any more: memory
 * an allocator has just given back, whose content nobody reads until it is
 * written again, so that after a crash it may hold anything.  Nothing is
 * stored or flushed.  A tracer stops expecting those lines durable (at a
 * durability point, at program end) until they are stored to again.  Costs
 * nothing unless a tracer is installed.
 */
static inline void
rio_durable_discard(const rio_pool *p, const void *addr, size_t len)
{
	if (RIO__UNLIKELY(rio__trace != NULL) && rio__trace->discard != NULL)
		rio__trace->discard(p, addr, len, __builtin_return_address(0));
}

/* The cache-line flush instruction the cacheline domain uses here. */
RIO_EXPORT const char *rio_flush_instruction(void);

/* 64-bit checksum used by every persistent format of the stack (XXH3). */
RIO_EXPORT uint64_t rio_checksum(const void *buf, size_t len, uint64_t seed);

/* A fast bijective mix of 64 bits (MurmurHash3's finalizer): for hash
 * table slots and cheap seals of a few words, not a checksum of data. */
static inline uint64_t
rio_mix64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	x ^= x >> 33;
	return x;
}

/* ------------------------------------------------------------------------
 * Protection against wild stores
 *
 * rio_protect() makes the whole pool read-only; a store outside a write
 * window then raises SIGSEGV, which librio catches: it prints the faulting
 * address and the pool, safe-syncs every pool that has an image, and lets
 * the process die of the signal.  The pool content stays intact.
 * Memory protection keys are used when the CPU and kernel offer them (then
 * a window is per thread and costs a PKRU write); otherwise mprotect (a
 * window is process-wide, reference-counted per page).
 * ------------------------------------------------------------------------ */

RIO_EXPORT int rio_protect(rio_pool *pool);
RIO_EXPORT int rio_unprotect(rio_pool *pool);
/*
 * Open a write window over [addr, addr+len) (rounded out to pages).
 * Windows nest and overlap; every begin needs a matching end with the same
 * range.  Returns 0, RIO_ERANGE, or -errno from mprotect.  When the pool is
 * not protected the calls only count.
 */
RIO_EXPORT int rio_write_begin(rio_pool *pool, void *addr, size_t len);
/*
 * Close a window; RIO_EWINDOW if no window covers the range.  Under
 * protection keys a window opens the whole pool to the calling thread and
 * only the count of open windows is kept, so RIO_EWINDOW then means "no
 * window open on this thread" and the range itself is not checked.
 */
RIO_EXPORT int rio_write_end(rio_pool *pool, void *addr, size_t len);
RIO_EXPORT bool rio_pool_protected(const rio_pool *pool);
RIO_EXPORT bool rio_pkeys_available(void);

/*
 * Fault hooks for libraries that use write protection themselves (libvista
 * automatic ranges, discount): librio owns the SIGSEGV handler and calls
 * each hook, newest first, for a write fault; a hook that returns true has
 * resolved the fault and the store is retried.  Hooks run in signal
 * context on an alternate stack: async-signal-safe code only.
 * rio_fault_hook_remove() returns once no handler still runs the hook, so
 * ctx may be freed then; it must not be called from the hook itself.
 */
typedef bool (*rio_fault_fn)(void *addr, void *ctx);
RIO_EXPORT int rio_fault_hook_add(rio_fault_fn fn, void *ctx);
RIO_EXPORT int rio_fault_hook_remove(rio_fault_fn fn, void *ctx);
/* Give the calling thread an alternate signal stack if it has none. */
RIO_EXPORT int rio_sigaltstack_ensure(void);

/* ------------------------------------------------------------------------
 * Safe sync
 *
 * A pool created with RIO_SAFE_SYNC keeps a disk image "<path>.img" (or
 * opts.image_path).  The image has two slots and two superblocks; a sync
 * writes the slot not in use, makes it durable, then switches superblocks,
 * so a crash at any point leaves the previous image intact
 * (docs/FORMAT.md).  Syncs happen at rio_pool_close(), on request, from
 * the fatal-signal handlers (SIGSEGV, SIGBUS, SIGABRT, SIGILL, SIGFPE;
 * async-signal-safe code) and, optionally, periodically.
 * ------------------------------------------------------------------------ */

/*
 * Write the pool to its image and make it durable.  Returns 0 (and the new
 * image generation in *gen if gen != NULL), RIO_ENOSYNC, RIO_EFATAL, or
 * -errno (the image keeps its previous generation).
 */
RIO_EXPORT int rio_safe_sync(rio_pool *pool, uint64_t *gen);

struct rio_image_info {
	uint64_t generation; /* of the copy that would be restored */
	uint64_t pool_size;
	uint8_t pool_uuid[16];
	int slot;            /* 0 or 1 */
	int valid_slots;     /* how many slots verified */
	int present_slots;   /* slots whose superblock is not blank; any of
	                        them beyond valid_slots is torn or corrupt */
};
/*
 * Verify an image file and describe its newest valid copy.  Returns 0 when
 * at least one copy verifies (a restore would use it: check
 * present_slots > valid_slots for a bad copy beside it), RIO_EIMAGE when
 * none does, RIO_EVERSION or RIO_EFEATURE when a copy is of another major
 * version or uses an unknown incompat feature (docs/FORMAT.md, Header
 * rules: such an image is neither used nor synced over), -errno when the
 * file cannot be read.
 */
RIO_EXPORT int rio_image_check(const char *image_path,
	struct rio_image_info *info);

/* ------------------------------------------------------------------------
 * Statistics
 * ------------------------------------------------------------------------ */

struct rio_stats {
	uint64_t window_opens;
	uint64_t window_closes;
	uint64_t protect_calls;
	uint64_t mprotect_calls;   /* system calls issued for protection */
	uint64_t syncs;            /* completed safe syncs */
	uint64_t sync_pages_written;
	uint64_t sync_generation;  /* image generation after the last sync */
};
RIO_EXPORT int rio_stats(const rio_pool *pool, struct rio_stats *out);

#ifdef __cplusplus
}
#endif

#endif /* RIO_H */
