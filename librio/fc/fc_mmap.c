/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_mmap.c -- mapping cached blocks straight into the caller's address
 * space, as Rio's mmap did
 *
 * A file's blocks are scattered over the pool, so a mapping of a file
 * range is assembled page by page: an anonymous PROT_NONE reservation of
 * the whole range, then, over it, MAP_FIXED | MAP_SHARED mappings of the
 * pool file at the offsets of the blocks that hold the range (one mmap per
 * run of consecutive blocks).  A store through the mapping is a store into
 * the pool's page: the same physical memory as the cache's own mapping,
 * so it is durable under the pool's persistence domain (at once in the
 * byte domain; after rio_fc_msync -- cache-line flushes or msync of the
 * pool's page -- otherwise).  On DAX pools the pages are mapped with
 * MAP_SYNC, so no file-system metadata stands between a flushed store and
 * the media.  This needs a pool file that can be mapped at 4 KiB
 * granularity: a DAX or tmpfs file, not a device-DAX node (2 MiB).
 *
 * Invariants
 *   M1. A mapped block is pinned (fc_blk.pins): never evicted, never
 *       superseded (a write into it goes in place, fc_block.c B2), never
 *       truncated away (-EBUSY).
 *   M2. A block with a writable mapping (wpins > 0) is DIRTY for as long
 *       as it is mapped: stores may come at any time.  Write-back writes
 *       it but does not mark it CLEAN; munmap flushes it, and it is
 *       cleaned by the next write-back.
 *   M3. Mappings belong to a handle and end with it (rio_fc_close).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "fc_int.h"

struct fc_map {
	struct fc_map *next;
	rio_fc_file *h;
	char *addr;
	size_t len;   /* n blocks */
	uint64_t fbn0;
	uint32_t n;
	int prot;
	uint32_t blks[];
};

static int
map_blocks(rio_fc_cache *c, struct fc_map *m)
{
	bool dax = rio_pool_native_domain(c->pool) != RIO_DOMAIN_PAGE;
	int flags = dax ? MAP_SHARED_VALIDATE | MAP_SYNC : MAP_SHARED;

	for (uint32_t i = 0; i < m->n;) {
		uint32_t run = 1;
		void *got;

		while (i + run < m->n && m->blks[i + run] == m->blks[i] + run)
			run++;
		got = mmap(m->addr + (uint64_t)i * FC_BS, run * FC_BS, m->prot,
			flags | MAP_FIXED, c->pool_fd,
			(off_t)(c->data_file_off + (uint64_t)m->blks[i] * FC_BS));
		if (got == MAP_FAILED) {
			if (errno == EINVAL || errno == EOPNOTSUPP)
				return rio__err(-ENOTSUP,
					"map cached blocks of %s: the pool "
					"cannot be mapped 4 KiB at a time "
					"(device-DAX?): %s",
					rio_pool_path(c->pool), strerror(errno));
			return rio__errno("map cached blocks of %s",
				rio_pool_path(c->pool));
		}
		i += run;
	}
	return 0;
}

/* Pin (or unpin, d = -1) the blocks of m.  c->lock held. */
static void
pin(rio_fc_cache *c, struct fc_file *f, struct fc_map *m, int d)
{
	bool w = m->prot & PROT_WRITE;

	for (uint32_t i = 0; i < m->n; i++) {
		struct fc_blk *blk = &c->blks[m->blks[i]];
		blk->pins += (uint32_t)d;
		if (w) {
			blk->wpins += (uint32_t)d;
			if (blk->wpins == (d > 0 ? 1u : 0u))
				c->nwpinned += (uint64_t)(int64_t)d;
		}
	}
	f->nmapped += (uint64_t)(int64_t)d * m->n;
}

int
rio_fc_mmap(rio_fc_file *h, uint64_t off, size_t len, int prot, void **addr)
{
	rio_fc_cache *c = h->c;
	struct fc_file *f = h->f;
	bool w = prot & PROT_WRITE;
	uint32_t n, used = 0, k = 0, *res = NULL, *fresh = NULL;
	struct fc_map *m = NULL;
	int rc;

	rc = rio__fc_check(c);
	if (rc)
		return rc;
	if (addr == NULL || len == 0 || off % FC_BS ||
	    (prot & ~(PROT_READ | PROT_WRITE)) || !(prot & PROT_READ))
		return rio__err(-EINVAL, "rio_fc_mmap %s: offset %llu, length "
					 "%zu, prot 0x%x", f->abs,
			(unsigned long long)off, len, (unsigned)prot);
	*addr = NULL;
	if (h->accmode == O_WRONLY || (w && h->accmode == O_RDONLY))
		return rio__err(-EACCES, "rio_fc_mmap %s: the handle's access "
					 "mode does not allow prot 0x%x",
			f->abs, (unsigned)prot);
	if (len / FC_BS + 1 > c->nblocks / 2)
		return rio__err(-ENOSPC, "rio_fc_mmap %s: %zu bytes is more "
					 "than half of the cache", f->abs, len);
	n = (uint32_t)((len + FC_BS - 1) / FC_BS);
	m = calloc(1, sizeof(*m) + n * sizeof(m->blks[0]));
	res = malloc(n * sizeof(*res));
	fresh = malloc(n * sizeof(*fresh));
	if (m == NULL || res == NULL || fresh == NULL) {
		rc = rio__err(-ENOMEM, "out of memory");
		goto out_free;
	}
	rc = rio__fc_reserve(c, n, false, res);
	if (rc)
		goto out_free;
	m->h = h;
	m->n = n;
	m->len = (size_t)n * FC_BS;
	m->fbn0 = off / FC_BS;
	m->prot = prot;
	m->addr = mmap(NULL, m->len, PROT_NONE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m->addr == MAP_FAILED) {
		rc = rio__errno("reserve %zu bytes of address space", m->len);
		m->addr = NULL;
		goto out_unreserve;
	}

	pthread_rwlock_wrlock(&f->lock);
	if (off + len > (f->size + FC_BS - 1) / FC_BS * FC_BS) {
		rc = rio__err(-ENXIO, "rio_fc_mmap %s: [%llu, %llu) is past "
				      "the end of the file (%llu bytes)",
			f->abs, (unsigned long long)off,
			(unsigned long long)(off + len),
			(unsigned long long)f->size);
		goto out_unlock;
	}
	for (uint32_t i = 0; i < n; i++) {
		uint32_t b = rio__fc_lookup(c, f->slot, m->fbn0 + i);
		if (b == FC_NONE) {
			b = res[used++];
			rc = rio__fc_fill_from_disk(c, f, m->fbn0 + i, b);
			if (rc) {
				used = 0; /* nothing committed */
				goto out_unlock;
			}
			rio__fc_desc_fill(c, f, b, m->fbn0 + i, f->size);
			fresh[k++] = b;
		}
		m->blks[i] = b;
	}
	/* Fence 1: the copies read in and their descriptor fields are
	 * durable before their state words name them. */
	rio_drain(c->pool);
	for (uint32_t i = 0; i < n; i++) {
		struct rio_fc_desc *d = fc_desc(c, m->blks[i]);
		uint64_t want = w ? RIO_FC_D_DIRTY : fc_load8(&d->state);
		if (want == RIO_FC_D_FREE)
			want = RIO_FC_D_CLEAN; /* read in, read-only */
		if (fc_load8(&d->state) != want) {
			fc_store8(&d->state, want);
			/* Durable at fence 2 below. */
			rio_flush(c->pool, &d->state, sizeof(d->state));
		}
	}
	/* Fence 2: M2 -- a writable mapping's blocks are DIRTY on media
	 * before the first store through it can happen. */
	rio_drain(c->pool);
	for (uint32_t i = 0; i < k; i++)
		rio__fc_index_add(c, fresh[i]);
	if (m->fbn0 + n > f->fbn_end)
		f->fbn_end = m->fbn0 + n;
	pthread_mutex_lock(&c->lock);
	for (uint32_t i = 0; i < n; i++) {
		uint32_t b = m->blks[i];
		bool isnew = c->blks[b].state == FC_B_RESERVED;
		if (isnew)
			f->ncached++;
		if (w && c->blks[b].state != FC_B_DIRTY)
			rio__fc_mark_dirty(c, f, b);
		else if (isnew)
			rio__fc_mark_clean(c, f, b);
	}
	pin(c, f, m, 1);
	pthread_mutex_unlock(&c->lock);
	rc = map_blocks(c, m);
	if (rc) {
		pthread_mutex_lock(&c->lock);
		pin(c, f, m, -1);
		pthread_mutex_unlock(&c->lock);
		goto out_unlock;
	}
	m->next = f->maps;
	f->maps = m;
	*addr = m->addr;
	m = NULL;
out_unlock:
	pthread_rwlock_unlock(&f->lock);
out_unreserve:
	rio__fc_unreserve(c, res + used, n - used);
out_free:
	if (m != NULL && m->addr != NULL)
		munmap(m->addr, m->len);
	free(m);
	free(res);
	free(fresh);
	return rc;
}

/* Remove m (f->lock held exclusively): unmap, make its stores durable,
 * unpin. */
static void
unmap_one(rio_fc_cache *c, struct fc_file *f, struct fc_map *m)
{
	munmap(m->addr, m->len);
	if (m->prot & PROT_WRITE) {
		/* Whatever the program stored through the mapping... */
		for (uint32_t i = 0; i < m->n; i++)
			rio_flush(c->pool, fc_data(c, m->blks[i]), FC_BS);
		/* The mapping's last stores are durable before the blocks
		 * can be written back and cleaned (M2). */
		rio_drain(c->pool);
	}
	pthread_mutex_lock(&c->lock);
	pin(c, f, m, -1);
	pthread_mutex_unlock(&c->lock);
	free(m);
}

int
rio_fc_munmap(rio_fc_file *h, void *addr, size_t len)
{
	rio_fc_cache *c = h->c;
	struct fc_file *f = h->f;
	struct fc_map **pp;
	int rc = rio__fc_check(c);

	if (rc)
		return rc;
	pthread_rwlock_wrlock(&f->lock);
	for (pp = &f->maps; *pp != NULL; pp = &(*pp)->next) {
		struct fc_map *m = *pp;
		if (m->h == h && m->addr == addr &&
		    (len + FC_BS - 1) / FC_BS == m->n) {
			*pp = m->next;
			unmap_one(c, f, m);
			pthread_rwlock_unlock(&f->lock);
			return 0;
		}
	}
	pthread_rwlock_unlock(&f->lock);
	return rio__err(-EINVAL, "rio_fc_munmap %s: %p (%zu bytes) is not a "
				 "mapping of this handle", f->abs, addr, len);
}

int
rio_fc_msync(rio_fc_file *h, void *addr, size_t len)
{
	rio_fc_cache *c = h->c;
	struct fc_file *f = h->f;
	char *a = addr;
	int rc = rio__fc_check(c);

	if (rc)
		return rc;
	pthread_rwlock_rdlock(&f->lock);
	for (struct fc_map *m = f->maps; m != NULL; m = m->next) {
		if (m->h != h || a < m->addr || a + len > m->addr + m->len)
			continue;
		/* The mapping and the pool map the same pages: flushing the
		 * pool's address of a byte flushes it. */
		while (len > 0) {
			uint64_t o = (uint64_t)(a - m->addr);
			size_t in = FC_BS - o % FC_BS;
			if (in > len)
				in = len;
			/* Durable at the drain after the loop. */
			rio_flush(c->pool,
				fc_data(c, m->blks[o / FC_BS]) + o % FC_BS, in);
			a += in;
			len -= in;
		}
		/* The stores flushed above are durable when we return. */
		rio_drain(c->pool);
		pthread_rwlock_unlock(&f->lock);
		return 0;
	}
	pthread_rwlock_unlock(&f->lock);
	return rio__err(-EINVAL, "rio_fc_msync %s: %p (%zu bytes) is not "
				 "inside a mapping of this handle", f->abs,
		addr, len);
}

void
rio__fc_unmap_handle(rio_fc_file *h)
{
	struct fc_file *f = h->f;
	struct fc_map **pp;

	if (f == NULL || f->maps == NULL)
		return;
	pthread_rwlock_wrlock(&f->lock);
	pp = &f->maps;
	while (*pp != NULL) {
		struct fc_map *m = *pp;
		if (m->h == h) {
			*pp = m->next;
			unmap_one(h->c, f, m);
		} else {
			pp = &m->next;
		}
	}
	pthread_rwlock_unlock(&f->lock);
}
