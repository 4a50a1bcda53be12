/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * epoll.c -- epoll instances and their registrations, made again at
 *            recovery
 *
 * An epoll instance is kernel state no checkpoint image holds.  Its
 * descriptor is recorded like any other (kind DC__K_EPOLL, reopened as a
 * new instance by kstate.c), and each registration (epoll_ctl ADD, MOD,
 * DEL) in a table rolled back with the process; recovery adds every
 * registration of the checkpoint again once all descriptors are back
 * (dc__ep_restore).
 *
 * Invariants:
 *  1. The table holds the registrations the kernel holds for the
 *     program's descriptors: a registration is recorded after the call
 *     succeeds, and dropped when its descriptor or its instance is
 *     closed (the kernel drops it with the file's last descriptor; a
 *     number closed while a dup stays open names nothing to register
 *     again).
 *  2. After a recovery the instance reports what is ready now: a level-
 *     triggered registration sees any input, and an edge-triggered one
 *     sees the edge of its re-registration, so a program that read up
 *     to EAGAIN before the checkpoint is woken for what came since.  An
 *     EPOLLONESHOT registration that had fired is armed again: one
 *     wake-up more, never one less.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <fcntl.h>

#include "dc_int.h"

#define MAX_REG 4096 /* a server of 1,024 connections and more */

static unsigned nreg;
static struct {
	int16_t ep, fd;
	uint32_t events;
	uint64_t data;
} reg[MAX_REG];

static int
find(long ep, long fd)
{
	for (unsigned i = 0; i < nreg; i++)
		if (reg[i].ep == ep && reg[i].fd == fd)
			return (int)i;
	return -1;
}

static void
drop(unsigned i)
{
	reg[i] = reg[--nreg];
}

long
dc__ep_syscall(long nr, long *a, bool *handled)
{
	*handled = true;
	long r;
	if (nr == SYS_epoll_create || nr == SYS_epoll_create1) {
		r = dc__sys6(nr, a[0], 0, 0, 0, 0, 0);
		if (r < 0)
			return r;
		int fl = nr == SYS_epoll_create1 && (a[0] & EPOLL_CLOEXEC) ?
			O_CLOEXEC : 0;
		r = dc__k_track_new((int)r, "", fl);
		if (r >= 0)
			dc__st.desc[dc__desc_of((int)r)].kind = DC__K_EPOLL;
		return r;
	}
	/* epoll_ctl */
	int i = find(a[0], a[2]);
	if (a[1] == EPOLL_CTL_ADD && i < 0 && nreg >= MAX_REG) {
		dc__refuse_call("a 4097th epoll registration", "libdc records "
			"4096", -ENOSPC);
		return -ENOSPC;
	}
	r = dc__sys6(nr, a[0], a[1], a[2], a[3], 0, 0);
	if (r != 0 || dc__desc_of((int)a[0]) < 0 || a[2] < 0 ||
	    a[2] >= DC__MAX_FD)
		return r;
	const struct epoll_event *ev = (const void *)a[3];
	if (a[1] == EPOLL_CTL_DEL) {
		if (i >= 0)
			drop((unsigned)i);
		return r;
	}
	if (i < 0) {
		i = (int)nreg++;
		reg[i].ep = (int16_t)a[0];
		reg[i].fd = (int16_t)a[2];
	}
	reg[i].events = ev->events;
	reg[i].data = ev->data.u64;
	return r;
}

/* kstate.c: descriptor fd is closed (invariant 1; a registration of a
 * number closed while a dup of its file stays open is dropped too: the
 * number would name nothing at recovery). */
void
dc__ep_dropped(int fd, bool last)
{
	(void)last;
	for (unsigned i = 0; i < nreg;)
		if (reg[i].fd == fd || reg[i].ep == fd)
			drop(i);
		else
			i++;
}

/* Recovery, every descriptor back: the registrations again. */
int
dc__ep_restore(void)
{
	for (unsigned i = 0; i < nreg; i++) {
		struct epoll_event ev = { .events = reg[i].events,
			.data.u64 = reg[i].data };
		long r = dc__sys6(SYS_epoll_ctl, reg[i].ep, EPOLL_CTL_ADD,
			reg[i].fd, (long)&ev, 0, 0);
		if (r != 0 && r != -EEXIST)
			return dc__err((int)r, "epoll %d: registering %d "
				"again: %s", reg[i].ep, reg[i].fd,
				strerror((int)-r));
	}
	return 0;
}
