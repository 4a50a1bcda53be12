/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rio_testhook.h -- fault injection into librio's system calls (tests only)
 *
 * librio makes every system call whose failure matters to durability --
 * the pools' writes, reads, syncs, mprotect and msync, and every call the
 * file cache (librio-fc) makes on the files it caches -- through one table
 * of function pointers (sysops.c; SQLite's aSyscall[] idea).  A test
 * replaces one entry with a function of its own that fails (always, for
 * some files, after n calls) or waits, runs the code under test, and puts
 * the old entry back:
 *
 *	rio_sys_fdatasync_fn old = rio_testhook_fdatasync(fail_with_eio);
 *	REQUIRE(rio_safe_sync(p, NULL) == -EIO);
 *	rio_testhook_fdatasync(old);
 *
 * For tests and fault-injection tools only: a program that swaps an entry
 * changes what librio promises about durability.  Not synchronised with
 * librio's own threads: swap while no other thread may be inside a librio
 * call that makes the call swapped (a test's single thread, a cache opened
 * with RIO_FC_NO_THREAD, a pool without a sync thread), as for
 * rio_trace_set().
 *
 * The entries, each with its libc prototype: RIO_TESTHOOK_SYSCALLS below
 * (the one list; librio's table is built from it).
 */
#ifndef RIO_TESTHOOK_H
#define RIO_TESTHOOK_H

#include <sys/stat.h>
#include <sys/types.h>

#include "rio.h"

#ifdef __cplusplus
extern "C" {
#endif

/* X(NAME, name, return type, parameters): one entry per system call. */
#define RIO_TESTHOOK_SYSCALLS(X)                                              \
	X(PWRITE, pwrite, ssize_t,                                            \
		(int fd, const void *buf, size_t n, off_t off))               \
	X(PREAD, pread, ssize_t, (int fd, void *buf, size_t n, off_t off))    \
	X(FDATASYNC, fdatasync, int, (int fd))                                \
	X(FSYNC, fsync, int, (int fd))                                        \
	X(MPROTECT, mprotect, int, (void *addr, size_t len, int prot))        \
	X(MSYNC, msync, int, (void *addr, size_t len, int flags))             \
	/* the file cache's, on cached files and their directories */         \
	X(OPEN, open, int, (const char *path, int flags, ...))                \
	X(CLOSE, close, int, (int fd))                                        \
	X(FTRUNCATE, ftruncate, int, (int fd, off_t len))                     \
	X(FSTAT, fstat, int, (int fd, struct stat *st))                       \
	X(STAT, stat, int, (const char *path, struct stat *st))               \
	X(LSTAT, lstat, int, (const char *path, struct stat *st))             \
	X(UNLINK, unlink, int, (const char *path))                            \
	X(RENAME, rename, int, (const char *from, const char *to))            \
	/* the size limit probe */                                            \
	X(LSEEK, lseek, off_t, (int fd, off_t off, int whence))

/* RIO_SYS_PWRITE, ...: which entry. */
enum rio_testhook_call {
#define RIO__TESTHOOK_ENUM(NAME, name, ret, args) RIO_SYS_##NAME,
	RIO_TESTHOOK_SYSCALLS(RIO__TESTHOOK_ENUM)
#undef RIO__TESTHOOK_ENUM
	RIO_SYS_NCALLS
};

/* rio_sys_pwrite_fn, ...: the type of each entry. */
#define RIO__TESTHOOK_TYPE(NAME, name, ret, args) \
	typedef ret(*rio_sys_##name##_fn) args;
RIO_TESTHOOK_SYSCALLS(RIO__TESTHOOK_TYPE)
#undef RIO__TESTHOOK_TYPE

/* Any entry, as rio_testhook_swap() passes it. */
typedef void (*rio_testhook_fn)(void);

/*
 * Replace entry `which` by fn and return the entry it replaced; with fn
 * NULL, return the entry and change nothing.  fn must have the entry's
 * type (use the typed setters below).  Returns NULL for an unknown
 * `which`.  See the head of this file for when it may be called.
 */
RIO_EXPORT rio_testhook_fn rio_testhook_swap(enum rio_testhook_call which,
	rio_testhook_fn fn);

/* rio_testhook_pwrite(fn), ...: the typed setter of each entry. */
#define RIO__TESTHOOK_SETTER(NAME, name, ret, args)                    \
	static inline rio_sys_##name##_fn rio_testhook_##name(         \
		rio_sys_##name##_fn fn)                                 \
	{                                                               \
		return (rio_sys_##name##_fn)rio_testhook_swap(           \
			RIO_SYS_##NAME, (rio_testhook_fn)fn);            \
	}
RIO_TESTHOOK_SYSCALLS(RIO__TESTHOOK_SETTER)
#undef RIO__TESTHOOK_SETTER

#ifdef __cplusplus
}
#endif

#endif /* RIO_TESTHOOK_H */
