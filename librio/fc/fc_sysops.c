/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_sysops.c -- the system calls the file cache makes on cached files
 *
 * Behind a table for two reasons: the preload shim (fs_shim.c) defines
 * open, pwrite, ... itself and points this table at the next definitions
 * (libc's), so the cache never calls back into the shim; and tests replace
 * entries to make the disk fail (a full disk during write-back, an EIO
 * from fdatasync).
 *
 * Invariant
 *   Y1. Every system call the cache makes on a cached file or its
 *       directory goes through rio__fcsys (realpath(3) and faccessat(2)
 *       excepted: the shim does not interpose them).
 */
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fc_int.h"

struct rio__fc_sysops rio__fcsys = {
	.open = open,
	.close = close,
	.pread = pread,
	.pwrite = pwrite,
	.ftruncate = ftruncate,
	.fdatasync = fdatasync,
	.fsync = fsync,
	.fstat = fstat,
	.stat = stat,
	.lstat = lstat,
	.unlink = unlink,
	.rename = rename,
	.lseek = lseek,
};
