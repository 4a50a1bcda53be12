/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fs_shim_fd.c -- librio-fs.so: close, dup and fcntl: the descriptor table
 * follows the kernel's descriptors
 */
#include "fs_shim_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <unistd.h>

/* ---- close and dup ---- */

/* Take fd's entry, if any, out of the table. */
static void
unslot(int fd)
{
	struct ofd *o;

	pthread_rwlock_wrlock(&rio__fs_tab_lock);
	o = rio__fs_slot_get(fd);
	if (o != NULL) {
		rio__fs_slot_set(fd, NULL);
		rio__fs_ofd_unref(o);
	}
	pthread_rwlock_unlock(&rio__fs_tab_lock);
}

SHIM_EXPORT int
close(int fd)
{
	int r;

	REAL(close);
	if (rio__fs_slot_get(fd) == NULL)
		return rio__fs_real.close(fd);
	unslot(fd);
	r = rio__fs_real.close(fd);
	rio__fs_maybe_release();
	return r;
}

SHIM_EXPORT int
close_range(unsigned first, unsigned last, int flags)
{
	REAL(close_range);
	if (!(flags & CLOSE_RANGE_CLOEXEC)) {
		pthread_rwlock_wrlock(&rio__fs_tab_lock);
		for (unsigned fd = first; fd <= last &&
		     fd < TAB_PAGE * TAB_PAGES; fd++) {
			struct ofd *o;
			if (rio__fs_tab[fd / TAB_PAGE] == NULL) {
				fd |= TAB_PAGE - 1; /* skip the page */
				continue;
			}
			o = rio__fs_slot_get((int)fd);
			if (o != NULL) {
				rio__fs_slot_set((int)fd, NULL);
				rio__fs_ofd_unref(o);
			}
		}
		pthread_rwlock_unlock(&rio__fs_tab_lock);
		rio__fs_maybe_release();
	}
	return rio__fs_real.close_range(first, last, flags);
}

/* newfd now shares fd's entry (after the real dup succeeded). */
static int
dup_entry(int fd, int newfd)
{
	struct ofd *o, *old;

	if (newfd < 0 || rio__fs_slot_get(fd) == NULL)
		return newfd;
	pthread_rwlock_wrlock(&rio__fs_tab_lock);
	o = rio__fs_slot_get(fd);
	old = rio__fs_slot_get(newfd);
	if (old != o) {
		if (o != NULL)
			o->refs++;
		if (old != NULL)
			rio__fs_ofd_unref(old);
		rio__fs_slot_set(newfd, o);
	}
	pthread_rwlock_unlock(&rio__fs_tab_lock);
	if (old != NULL && old != o)
		rio__fs_maybe_release();
	return newfd;
}

/* An entry on newfd that dup2/dup3 is about to replace. */
static void
drop_entry(int newfd)
{
	if (rio__fs_slot_get(newfd) == NULL)
		return;
	unslot(newfd);
	rio__fs_maybe_release();
}

SHIM_EXPORT int
dup(int fd)
{
	REAL(dup);
	return dup_entry(fd, rio__fs_real.dup(fd));
}

/* dup2 and dup3 once the real call returned r: newfd now is what fd is
 * (an entry of ours, or none). */
static int
dup_onto(int fd, int newfd, int r)
{
	if (r < 0)
		return r;
	if (rio__fs_slot_get(fd) == NULL)
		drop_entry(newfd);
	return dup_entry(fd, r);
}

SHIM_EXPORT int
dup2(int fd, int newfd)
{
	REAL(dup2);
	if (fd == newfd)
		return rio__fs_real.dup2(fd, newfd);
	return dup_onto(fd, newfd, rio__fs_real.dup2(fd, newfd));
}

SHIM_EXPORT int
dup3(int fd, int newfd, int flags)
{
	REAL(dup3);
	return dup_onto(fd, newfd, rio__fs_real.dup3(fd, newfd, flags));
}

static int
do_fcntl(int fd, int cmd, va_list ap)
{
	long arg = va_arg(ap, long);
	struct ofd *o;
	int r;

	REAL(fcntl);
	r = rio__fs_real.fcntl(fd, cmd, arg);
	if (r < 0)
		return r;
	switch (cmd) {
	case F_DUPFD:
	case F_DUPFD_CLOEXEC:
		return dup_entry(fd, r);
	case F_SETFL:
		o = rio__fs_ofd_get(fd);
		if (o != NULL) {
			pthread_mutex_lock(&o->lock);
			o->flags = (o->flags & ~O_APPEND) |
				((int)arg & O_APPEND);
			pthread_mutex_unlock(&o->lock);
			rio__fs_ofd_put();
		}
		return r;
	default:
		return r;
	}
}

SHIM_EXPORT int
fcntl(int fd, int cmd, ...)
{
	va_list ap;
	int r;

	va_start(ap, cmd);
	r = do_fcntl(fd, cmd, ap);
	va_end(ap);
	return r;
}

SHIM_EXPORT int fcntl64(int fd, int cmd, ...) SHIM_ALIAS(fcntl);
