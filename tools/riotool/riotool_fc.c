/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * riotool_fc.c -- `riotool fc PATH`: what a Rio file cache pool holds that
 * is not on disk yet
 *
 * Reads the pool file (a read-only mapping, no lock: it may be in use by
 * the process that owns the cache, and then the report is a snapshot) and
 * prints the cache's state, then one line per file record: its path, its
 * size, its blocks not yet written back, and whether a write-back of it
 * started and did not complete -- the trace a failing write-back (a full
 * disk, a file larger than its file system keeps, EIO) leaves in the pool:
 * the flag stays set until a write-back of the file succeeds.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fc_layout.h"
#include "riotool_fc.h"

/* The current file-state record of r (the valid one with the higher seq). */
static const struct rio_fc_fstate *
current_fstate(const struct rio_fc_frec *r)
{
	const struct rio_fc_fstate *best = NULL;

	for (int k = 0; k < 2; k++) {
		const struct rio_fc_fstate *s = &r->fst[k];
		if (s->seq == 0 || s->checksum != rio_checksum(s,
				offsetof(struct rio_fc_fstate, checksum),
				RIO_FC_FST_CSUM_SEED))
			continue;
		if (best == NULL || s->seq > best->seq)
			best = s;
	}
	return best;
}

static int
report(const char *path, const char *map, size_t len)
{
	const struct rio_fc_super *sb =
		(const void *)(map + RIO_POOL_HDR_SIZE);
	const struct rio_fc_frec *frecs;
	const struct rio_fc_desc *descs;
	uint64_t *dirty, files_dirty = 0, files_failed = 0, ndirty = 0;

	if (len < RIO_POOL_HDR_SIZE + sizeof(*sb) ||
	    memcmp(sb->magic, RIO_FC_MAGIC, sizeof(sb->magic)) != 0) {
		fprintf(stderr, "riotool: %s: not a Rio file cache pool\n",
			path);
		return 1;
	}
	if (sb->major != RIO_FC_MAJOR ||
	    sb->files_off + (uint64_t)sb->nfiles * RIO_FC_FREC_SIZE >
		    len - RIO_POOL_HDR_SIZE ||
	    sb->descs_off + sb->nblocks * RIO_FC_DESC_SIZE >
		    len - RIO_POOL_HDR_SIZE) {
		fprintf(stderr, "riotool: %s: file cache version %u.%u or "
				"geometry not understood\n", path, sb->major,
			sb->minor);
		return 1;
	}
	frecs = (const void *)(map + RIO_POOL_HDR_SIZE + sb->files_off);
	descs = (const void *)(map + RIO_POOL_HDR_SIZE + sb->descs_off);
	dirty = calloc(sb->nfiles ? sb->nfiles : 1, sizeof(*dirty));
	if (dirty == NULL) {
		fprintf(stderr, "riotool: out of memory\n");
		return 1;
	}
	for (uint64_t b = 0; b < sb->nblocks; b++) {
		const struct rio_fc_desc *d = &descs[b];
		if (d->state == RIO_FC_D_DIRTY && d->file < sb->nfiles &&
		    d->file_gen == frecs[d->file].gen) {
			dirty[d->file]++;
			ndirty++;
		}
	}
	printf("file cache  %s for %.*s\n", path, (int)sb->dir_len, sb->dir);
	printf("state       %s\n", sb->state == RIO_FC_SB_CLEAN ?
			"closed cleanly: everything is on disk" :
			"open, or not closed cleanly (the next open writes "
			"back what is listed below)");
	printf("blocks      %" PRIu64 " of %u bytes, %" PRIu64
	       " not written back\n", sb->nblocks, sb->block_size, ndirty);
	for (uint32_t s = 0; s < sb->nfiles; s++) {
		const struct rio_fc_frec *r = &frecs[s];
		const struct rio_fc_fstate *fs;
		bool failed;

		if (r->state != RIO_FC_F_LIVE && r->state != RIO_FC_F_UNLINKED)
			continue;
		fs = current_fstate(r);
		failed = (r->flags & RIO_FC_FF_WB_ACTIVE) != 0;
		files_dirty += dirty[s] > 0;
		files_failed += failed;
		printf("file        %.*s: %s, size %" PRIu64 ", %" PRIu64
		       " blocks not written back%s%s\n",
			(int)(r->path_len < RIO_FC_PATH_MAX ? r->path_len : 0),
			r->path, r->state == RIO_FC_F_LIVE ? "live" : "removed",
			fs ? fs->size : 0, dirty[s],
			failed ? "; write-back incomplete (failed, or "
				 "interrupted; retried)" : "",
			(r->flags & RIO_FC_FF_NEW) ? "; created, directory "
						    "not yet synced" : "");
	}
	printf("summary     %" PRIu64 " files with blocks not written back, %"
	       PRIu64 " with a write-back incomplete\n", files_dirty,
		files_failed);
	free(dirty);
	return 0;
}

int
riotool_fc(int argc, char **argv)
{
	struct stat st;
	void *map;
	int fd, rc;

	if (argc != 2)
		return -1;
	fd = open(argv[1], O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0) {
		perror(argv[1]);
		if (fd >= 0)
			close(fd);
		return 1;
	}
	map = st.st_size > 0 ? mmap(NULL, (size_t)st.st_size, PROT_READ,
				       MAP_SHARED, fd, 0) : MAP_FAILED;
	close(fd);
	if (map == MAP_FAILED) {
		fprintf(stderr, "riotool: %s: cannot map it\n", argv[1]);
		return 1;
	}
	rc = report(argv[1], map, (size_t)st.st_size);
	munmap(map, (size_t)st.st_size);
	return rc;
}
