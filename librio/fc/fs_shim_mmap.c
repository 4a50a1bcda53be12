/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fs_shim_mmap.c -- librio-fs.so: mmap of a cached file is refused;
 * sendfile, copy_file_range and splice with a cached end copy through the
 * cache
 */
#include "fs_shim_int.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/sendfile.h>
#include <unistd.h>

/* ---- what is refused ---- */

static void *
do_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	struct ofd *o;

	REAL(mmap);
	if (flags & MAP_ANONYMOUS)
		return rio__fs_real.mmap(addr, len, prot, flags, fd, off);
	o = rio__fs_ofd_get(fd);
	if (o == NULL)
		return rio__fs_real.mmap(addr, len, prot, flags, fd, off);
	rio__fs_ofd_put();
	rio__fs_refuse(ENODEV, "mmap (use rio_fc_mmap)", o->path);
	return MAP_FAILED;
}

SHIM_EXPORT void *
mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
	return do_mmap(addr, len, prot, flags, fd, off);
}

SHIM_EXPORT void *mmap64(void *addr, size_t len, int prot, int flags, int fd,
	off_t off) SHIM_ALIAS(mmap);

static bool
either_cached(int a, int b)
{
	return rio__fs_slot_get(a) != NULL || rio__fs_slot_get(b) != NULL;
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
	return rio__fs_real.sendfile(out, in, off, n);
}

SHIM_EXPORT ssize_t sendfile64(int out, int in, off_t *off, size_t n)
	SHIM_ALIAS(sendfile);

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
	return rio__fs_real.copy_file_range(in, inoff, out, outoff, n, flags);
}

SHIM_EXPORT ssize_t
splice(int in, off_t *inoff, int out, off_t *outoff, size_t n,
	unsigned flags)
{
	REAL(splice);
	if (either_cached(in, out))
		return copy_through(in, inoff, out, outoff, n);
	return rio__fs_real.splice(in, inoff, out, outoff, n, flags);
}
