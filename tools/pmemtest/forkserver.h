/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * forkserver.h -- the messages between the driver (check.c) and a checker
 * command's fork server (preload.c)
 *
 * Driver to server: {seq, process group to join}; server to driver: once
 * {0, 0} when it is ready (before main), then per request {seq, wait
 * status of the checker it forked, or -1}.
 */
#ifndef PMT_FORKSERVER_H
#define PMT_FORKSERVER_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <unistd.h>

struct fs_msg {
	uint64_t seq;
	int32_t val;
	int32_t pad;
};

/* Read or write all n bytes; 0, or -1 at end of file or an error. */
static inline int
fs_io(int fd, void *buf, size_t n, bool wr)
{
	for (size_t done = 0; done < n;) {
		ssize_t k = wr ? write(fd, (char *)buf + done, n - done) :
			read(fd, (char *)buf + done, n - done);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		done += (size_t)k;
	}
	return 0;
}

#endif /* PMT_FORKSERVER_H */
