/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fs_shim_stdio.c -- librio-fs.so: streams of cached files go through the
 * cache (fopencookie)
 */
#include "fs_shim_int.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

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
	if (!rio__fs_ours_at(AT_FDCWD, path, full))
		return rio__fs_real.fopen(path, mode);
	flags = stdio_flags(mode);
	if (flags < 0) {
		errno = EINVAL;
		return NULL;
	}
	fd = rio__fs_open_cached(full, flags, 0666);
	if (fd < 0)
		return NULL;
	if (rio__fs_slot_get(fd) == NULL) /* not a regular file: plain stream */
		return rio__fs_real.fdopen(fd, mode);
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

SHIM_EXPORT FILE *fopen64(const char *path, const char *mode)
	SHIM_ALIAS(fopen);

SHIM_EXPORT FILE *
fdopen(int fd, const char *mode)
{
	struct ofd *o;
	int kind;

	REAL(fdopen);
	o = rio__fs_ofd_get(fd);
	if (o == NULL)
		return rio__fs_real.fdopen(fd, mode);
	kind = o->kind;
	rio__fs_ofd_put();
	if (kind != OFD_FILE)
		return rio__fs_real.fdopen(fd, mode);
	return cookie_stream(fd, mode);
}

SHIM_EXPORT FILE *
freopen(const char *path, const char *mode, FILE *stream)
{
	char full[PATH_MAX];

	REAL(freopen);
	if (path != NULL && rio__fs_ours_at(AT_FDCWD, path, full)) {
		rio__fs_refuse(EOPNOTSUPP, "freopen", full);
		return NULL;
	}
	return rio__fs_real.freopen(path, mode, stream);
}

SHIM_EXPORT FILE *freopen64(const char *path, const char *mode, FILE *stream)
	SHIM_ALIAS(freopen);
