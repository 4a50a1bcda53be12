/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * materialize.c -- write a crash image out as pool files (saved images)
 *
 * The checker's fast path fills mapped slot files (check.c); this is the
 * slow, careful path for images that are kept: each present pool becomes
 * dir/<name>, written with pwrite, zero pages left as holes.
 *
 * Invariant
 *   W1. dir holds exactly the image's pool files afterwards, each the
 *       pool's dur with the chosen lines at their cur value.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pmemtest_int.h"

#define PAGE 4096u

static bool
zero_page(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i])
			return false;
	return true;
}

int
pmt_image_write(struct pmt_model *m, const struct pmt_lref *chosen,
	size_t n, const char *dir)
{
	int rc = pmt_mkdir_p(dir);

	if (rc)
		return rc;
	for (unsigned i = 0; i < m->npools; i++) {
		struct pmt_pool *p = &m->pools[i];
		char *path = pmt_xasprintf("%s/%s", dir, p->name);
		uint8_t *img;
		int fd;

		unlink(path);
		if (!p->present) {
			free(path);
			continue;
		}
		img = pmt_xmalloc(p->size);
		memcpy(img, p->dur, p->size);
		for (size_t c = 0; c < n; c++)
			if (chosen[c].pool == p->id)
				memcpy(img + chosen[c].line * PMT_LINE,
					pmt_model_data(m, chosen[c]), PMT_LINE);
		fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		rc = fd < 0 ? -errno : 0;
		if (rc == 0 && ftruncate(fd, (off_t)p->size) != 0)
			rc = -errno;
		for (size_t off = 0; rc == 0 && off < p->size; off += PAGE) {
			size_t len = p->size - off < PAGE ? p->size - off : PAGE;
			if (zero_page(img + off, len))
				continue;
			if (pwrite(fd, img + off, len, (off_t)off) != (ssize_t)len)
				rc = -EIO;
		}
		if (fd >= 0)
			close(fd);
		free(img);
		free(path);
		if (rc)
			return rc;
	}
	return 0;
}
