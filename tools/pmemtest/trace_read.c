/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * trace_read.c -- open a trace, validate it, iterate its records
 *
 * Invariants
 *   V1. A trace whose header is bad (magic, version, size, checksum) is
 *       refused.  Records are walked once at open: the walk stops at the
 *       first record that does not fit (a trace cut short) and only whole
 *       records before it are ever returned.
 *   V2. `complete` is true only when an END record was found and the
 *       XXH3 of every byte before it matches its checksum (T4).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "pmemtest_int.h"

int
pmt_trace_open(const char *path, struct pmt_trace *t)
{
	const struct pmt_trace_hdr *h;
	struct stat st;
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	size_t off;

	memset(t, 0, sizeof(*t));
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return -errno;
	}
	t->size = (size_t)st.st_size;
	if (t->size < sizeof(*h)) {
		close(fd);
		return -EBADMSG;
	}
	t->data = mmap(NULL, t->size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (t->data == MAP_FAILED) {
		t->data = NULL;
		return -errno;
	}
	h = (const struct pmt_trace_hdr *)t->data;
	if (memcmp(h->magic, PMT_TRACE_MAGIC, sizeof(h->magic)) != 0 ||
	    h->major != PMT_TRACE_MAJOR || h->hdr_size != sizeof(*h) ||
	    h->line_size != PMT_LINE ||
	    h->checksum != rio_checksum(h,
		    offsetof(struct pmt_trace_hdr, checksum),
		    PMT_HDR_CSUM_SEED)) {
		pmt_trace_close(t);
		return -EBADMSG;
	}
	t->pid = h->pid;
	t->flags = h->flags;
	/* V1: find the last whole record. */
	off = sizeof(*h);
	while (off + sizeof(struct pmt_rec) <= t->size) {
		const struct pmt_rec *r = (const void *)(t->data + off);
		if (r->len % 8 || r->len > t->size - off - sizeof(*r))
			break;
		if (r->type == PMT_REC_END &&
		    r->len >= sizeof(struct pmt_rec_end)) {
			const struct pmt_rec_end *e = (const void *)(r + 1);
			/* V2 */
			t->complete = e->checksum ==
				XXH3_64bits_withSeed(t->data, off,
					PMT_END_CSUM_SEED);
			t->end_signal = r->aux;
			off += sizeof(*r) + r->len;
			break;
		}
		off += sizeof(*r) + r->len;
	}
	t->end = off;
	t->off = sizeof(*h);
	return 0;
}

void
pmt_trace_close(struct pmt_trace *t)
{
	if (t->data != NULL)
		munmap((void *)t->data, t->size);
	memset(t, 0, sizeof(*t));
}

void
pmt_trace_rewind(struct pmt_trace *t)
{
	t->off = sizeof(struct pmt_trace_hdr);
}

int
pmt_trace_next(struct pmt_trace *t, const struct pmt_rec **rec,
	const uint8_t **payload)
{
	const struct pmt_rec *r;

	if (t->off + sizeof(*r) > t->end)
		return 0;
	r = (const void *)(t->data + t->off);
	*rec = r;
	*payload = (const uint8_t *)(r + 1);
	t->off += sizeof(*r) + r->len;
	return 1;
}
