/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rvm_io.h -- the RVM baseline's file-access seam (an extension: RVM 1.3
 * has no such interface)
 *
 * Every open, read, write, sync, size change, close and removal of the log
 * and the data files goes through one table of operations.  The default is
 * POSIX (rvm_io_posix); rvm_set_io() installs another table before
 * rvm_initialize(): the crash test's model of a power failure, or the Rio
 * file cache ("RVM-Rio", bench/tpcb_tpcc/backend_rvm.c).  With the real
 * RVM, which has no seam, RVM-Rio is RVM run under librio-fs.so.
 *
 * A descriptor is whatever non-negative int the table's open returns; the
 * library only hands it back to the same table.
 */
#ifndef RVM_IO_H
#define RVM_IO_H

#include <sys/types.h>

#include "rvm.h"

#ifdef __cplusplus
extern "C" {
#endif

struct rvm_io_ops {
	/* open(2)'s flags and mode; a descriptor >= 0, or -errno */
	int (*open)(const char *path, int flags, mode_t mode);
	/* as pread(2)/pwrite(2): bytes transferred, or -1 with errno set */
	ssize_t (*pread)(int fd, void *buf, size_t len, off_t off);
	ssize_t (*pwrite)(int fd, const void *buf, size_t len, off_t off);
	int (*fdatasync)(int fd);            /* 0 or -errno */
	int (*ftruncate)(int fd, off_t len); /* 0 or -errno */
	off_t (*size)(int fd);               /* bytes, or -errno */
	int (*close)(int fd);                /* 0 or -errno */
	int (*unlink)(const char *path);     /* 0 or -errno */
};

/* The default table: open(2) with O_CLOEXEC, pread, pwrite, fdatasync,
 * ftruncate, fstat's size, close, unlink. */
RVM_EXPORT extern const struct rvm_io_ops rvm_io_posix;

/* Use `ops` (NULL: rvm_io_posix) for every later file access.  Returns
 * RVM_SUCCESS, or RVM_EINIT while RVM is initialized (its files are open
 * through the table in force). */
RVM_EXPORT rvm_return_t rvm_set_io(const struct rvm_io_ops *ops);

#ifdef __cplusplus
}
#endif

#endif /* RVM_IO_H */
