/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * map.c -- mapping regions: the segment is copied into process memory
 *
 * Design:
 *  1. rvm_map copies [offset, offset+length) of the data file into memory
 *     with read() (thesis section 3.2: RVM copies, it does not mmap).  The
 *     process then holds its own copy of the database while the file
 *     system caches the data file as well: the double buffering the thesis
 *     measured.
 *  2. Before the copy, the log must hold nothing for the segment that the
 *     data file lacks: if the log is not empty it is flushed and
 *     truncated first (a remap after unmap; recovery already did this at
 *     rvm_initialize).
 *  3. A segment (data file path) gets a slot in the status block the
 *     first time it is mapped; the status block is durable before any
 *     record names the slot.
 *  4. Regions do not overlap, neither in memory nor in their segment.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "rvm_int.h"

static rvm_return_t
seg_slot(const char *path, uint32_t *out)
{
	struct rvm__state *g = &rvm__g;
	for (uint32_t i = 0; i < g->status.nsegs; i++)
		if (strcmp(g->status.segs[i].path, path) == 0) {
			*out = i;
			return RVM_SUCCESS;
		}
	if (g->status.nsegs == RVM_MAX_SEGMENTS)
		return rvm__err(RVM_ETOO_BIG, "the log names %d segments "
			"already", RVM_MAX_SEGMENTS);
	uint32_t i = g->status.nsegs;
	memset(&g->status.segs[i], 0, sizeof(g->status.segs[i]));
	strcpy(g->status.segs[i].path, path);
	g->status.nsegs++;
	rvm_return_t rc = rvm__status_write();
	if (rc)
		return rc;
	*out = i;
	return RVM_SUCCESS;
}

static bool
overlaps(uint64_t a, uint64_t alen, uint64_t b, uint64_t blen)
{
	return a < b + blen && b < a + alen;
}

static rvm_return_t
check_region(const rvm_region_t *region)
{
	long page = sysconf(_SC_PAGESIZE);
	if (region == NULL || region->struct_id != rvm_region_id)
		return rvm__err(RVM_EREGION, "region not initialized "
			"(rvm_init_region)");
	if (region->data_dev == NULL || region->data_dev[0] == 0)
		return rvm__err(RVM_EREGION, "region has no data_dev");
	if (strlen(region->data_dev) >= RVM_SEG_PATH_MAX)
		return rvm__err(RVM_ENAME_TOO_LONG, "data_dev %s is longer than "
			"%d bytes", region->data_dev, RVM_SEG_PATH_MAX - 1);
	if (region->offset.high != 0 || region->offset.low % (unsigned long)page)
		return rvm__err(RVM_EOFFSET, "region offset must be page aligned");
	if (region->length == 0 || region->length % (unsigned long)page)
		return rvm__err(RVM_ERANGE, "region length %lu is not a "
			"positive multiple of the page size", region->length);
	if ((uintptr_t)region->vmaddr % (uintptr_t)page)
		return rvm__err(RVM_ERANGE, "vmaddr %p is not page aligned",
			(void *)region->vmaddr);
	return RVM_SUCCESS;
}

rvm_return_t
rvm_map(rvm_region_t *region, rvm_options_t *options)
{
	struct rvm__state *g = &rvm__g;
	(void)options;
	rvm_return_t rc = check_region(region);
	if (rc)
		return rc;
	pthread_mutex_lock(&g->lock);
	if ((rc = rvm__usable()))
		goto out;
	uint64_t off = region->offset.low;
	size_t len = region->length;
	char *want = region->vmaddr;
	uint32_t seg = 0;
	for (struct rvm__region *r = g->regions; r; r = r->next) {
		if (want && overlaps((uintptr_t)want, len, (uintptr_t)r->vmaddr,
				    r->length)) {
			rc = rvm__err(RVM_EVM_OVERLAP, "[%p, +%zu) overlaps a "
				"mapped region", (void *)want, len);
			goto out;
		}
		if (strcmp(g->status.segs[r->seg].path, region->data_dev) == 0 &&
		    overlaps(off, len, r->offset, r->length)) {
			rc = rvm__err(RVM_EOVERLAP, "%s [%llu, +%zu) is mapped "
				"already", region->data_dev,
				(unsigned long long)off, len);
			goto out;
		}
	}
	/* The data file must be current before it is copied (invariant 2). */
	if (g->tail || g->buf_len) {
		if ((rc = rvm__log_write(true)) || (rc = rvm__truncate_locked()))
			goto out;
	}
	if ((rc = seg_slot(region->data_dev, &seg)) ||
	    (rc = rvm__seg_open(seg, true)))
		goto out;
	int fd = g->segs[seg].fd;
	off_t size = rvm__io->size(fd);
	if (size >= 0 && (uint64_t)size < off + len)
		size = rvm__io->ftruncate(fd, (off_t)(off + len));
	if (size < 0) {
		rc = rvm__err(RVM_EIO, "sizing data file %s: %s",
			region->data_dev, strerror((int)-size));
		goto out;
	}
	struct rvm__region *rg = calloc(1, sizeof(*rg));
	char *mem = want;
	if (rg && mem == NULL) {
		mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (mem == MAP_FAILED)
			mem = NULL;
	}
	if (rg == NULL || mem == NULL) {
		free(rg);
		rc = rvm__err(RVM_ENO_MEMORY, "%zu bytes for region of %s", len,
			region->data_dev);
		goto out;
	}
	/* The copy: the database now lives in process memory. */
	if (!region->no_copy) {
		int e = rvm__read_full(fd, mem, len, off);
		if (e) {
			if (want == NULL)
				munmap(mem, len);
			free(rg);
			rc = rvm__err(RVM_EIO, "reading %s [%llu, +%zu): %s",
				region->data_dev, (unsigned long long)off, len,
				strerror(-e));
			goto out;
		}
	}
	rg->seg = seg;
	rg->vmaddr = mem;
	rg->length = len;
	rg->offset = off;
	rg->allocated = want == NULL;
	rg->next = g->regions;
	g->regions = rg;
	region->vmaddr = mem;
out:
	pthread_mutex_unlock(&g->lock);
	return rc;
}

rvm_return_t
rvm_unmap(rvm_region_t *region)
{
	struct rvm__state *g = &rvm__g;
	if (region == NULL || region->struct_id != rvm_region_id)
		return rvm__err(RVM_EREGION, "region not initialized");
	pthread_mutex_lock(&g->lock);
	rvm_return_t rc = RVM_SUCCESS;
	if (!g->initialized) {
		rc = rvm__err(RVM_EINIT, "rvm_initialize has not been called");
		goto out;
	}
	struct rvm__region **pp = &g->regions;
	while (*pp && !((*pp)->vmaddr == region->vmaddr &&
			       (*pp)->length == region->length))
		pp = &(*pp)->next;
	struct rvm__region *rg = *pp;
	if (rg == NULL) {
		rc = rvm__err(RVM_ENOT_MAPPED, "no region at %p, length %lu",
			(void *)region->vmaddr, region->length);
		goto out;
	}
	if (rg->busy) {
		rc = rvm__err(RVM_EUNCOMMIT, "an open transaction has ranges "
			"in the region at %p", (void *)rg->vmaddr);
		goto out;
	}
	*pp = rg->next;
	if (rg->allocated) {
		munmap(rg->vmaddr, rg->length);
		region->vmaddr = NULL;
	}
	free(rg);
out:
	pthread_mutex_unlock(&g->lock);
	return rc;
}
