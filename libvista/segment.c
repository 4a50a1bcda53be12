/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * segment.c -- segments: create, map at a fixed address, unmap, look up
 *
 * A segment is a rio pool mapped where it was created, so native pointers
 * stored in it stay valid across runs: its header (segment_layout.h)
 * records the address, and vista_map(addr = NULL) maps it there again.
 * Mapping a segment registers it in the log's segment table (records name
 * segments by table index), rolls back what unfinished transactions of an
 * earlier run did to it (recover.c), and builds its heap index (heap.c).
 *
 * Invariants
 *   S1. A segment is mapped at most once per system: the file is locked
 *       (flock) while mapped, and an instance refuses a second mapping of
 *       the same file or uuid (VISTA_EMAPPED).
 *   S2. A segment table entry is durable before any record can name it,
 *       and is reused for another segment only when no pending lane names
 *       it and the segment it describes is not mapped.
 *   S3. A segment is published in v->map (seqlock) only after its recovery
 *       is complete and durable: no transaction can see it half recovered.
 *   S4. The segment header is written once, at create, magic last; a
 *       header whose magic is zero belongs to an unfinished create.
 *   S5. A segment is bound to its log (segment_layout.h): its bind word
 *       names the log durably before any record can name the segment, and
 *       goes back to VISTA_SEG_CLEAN only at an unmap that leaves no record
 *       of any lane naming it.  A segment bound to another log, or whose
 *       log was lost, is refused before anything is written to it.
 *   S6. A vista_map(VISTA_CREATE) that fails leaves no file behind when
 *       it made the file.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rio_int.h"
#include "vista_int.h"

size_t
vista_segment_footprint(size_t size)
{
	uint64_t np = ((uint64_t)size + VISTA_PAGE - 1) / VISTA_PAGE;

	uint64_t fp;

	if (size > (SIZE_MAX / 2))
		return 0;
	fp = RIO_POOL_HDR_SIZE + VISTA_SEG_HDR_SIZE +
		vista_heap_meta_size(np) + np * VISTA_PAGE;
	/* A log descriptor holds an offset of 40 bits (log_layout.h). */
	return fp > VISTA_RDESC_MAX_OFF ? 0 : (size_t)fp;
}

/* Arena pages of a pool of pool_size bytes: the most that fit. */
static uint64_t
npages_for(uint64_t pool_size)
{
	uint64_t fixed = RIO_POOL_HDR_SIZE + VISTA_SEG_HDR_SIZE;
	uint64_t lo = 0, hi;

	if (pool_size <= fixed)
		return 0;
	hi = (pool_size - fixed) / VISTA_PAGE;
	while (lo < hi) { /* largest n with footprint(n pages) <= pool_size */
		uint64_t mid = lo + (hi - lo + 1) / 2;
		if (fixed + vista_heap_meta_size(mid) + mid * VISTA_PAGE <=
		    pool_size)
			lo = mid;
		else
			hi = mid - 1;
	}
	return lo;
}

/* Everything but bind (S5) and the checksum itself. */
static uint64_t
seg_hdr_checksum(const struct vista_seg_hdr *h)
{
	size_t b = offsetof(struct vista_seg_hdr, bind) + 8;
	uint64_t c = rio_checksum(h, offsetof(struct vista_seg_hdr, bind),
		VISTA_SEG_CSUM_SEED);
	return rio_checksum((const char *)h + b,
		offsetof(struct vista_seg_hdr, checksum) - b, c);
}

/* Write the header of a new (or unfinished) segment (S4). */
static int
seg_format(rio_pool *p)
{
	struct vista_seg_hdr *h = rio_pool_base(p), tmp;
	uint64_t map_size = rio_pool_size(p) + RIO_POOL_HDR_SIZE;
	uint64_t np = npages_for(map_size);

	if (np == 0)
		return vista__err(-EINVAL, "segment %s is too small",
			rio_pool_path(p));
	memset(&tmp, 0, sizeof(tmp));
	memcpy(tmp.magic, VISTA_SEG_MAGIC, sizeof(tmp.magic));
	tmp.major = VISTA_SEG_MAJOR;
	tmp.minor = VISTA_SEG_MINOR;
	tmp.hdr_size = VISTA_SEG_HDR_SIZE;
	tmp.page_size = VISTA_PAGE;
	tmp.base = (uint64_t)(uintptr_t)((char *)h - RIO_POOL_HDR_SIZE);
	tmp.map_size = map_size;
	tmp.heap_off = RIO_POOL_HDR_SIZE + VISTA_SEG_HDR_SIZE;
	tmp.heap_size = vista_heap_meta_size(np);
	tmp.user_off = tmp.heap_off + tmp.heap_size;
	tmp.user_size = np * VISTA_PAGE;
	tmp.npages = np;
	tmp.nclasses = VISTA_NCLASSES;
	tmp.bind = VISTA_SEG_CLEAN; /* nothing to roll back yet */
	tmp.checksum = seg_hdr_checksum(&tmp);
	/* The heap metadata of a new pool is zero: every page FREE. */
	vista__write_header(p, h, &tmp, sizeof(tmp));
	return 0;
}

/* The segment header's identity and versioning (librio/hdr.c, H1..H8):
 * the same verdicts as the log header's (vista.c). */
static const struct rio__hdr_rule seg_rule =
	VISTA__HDR_RULE("vista segment", SEG);

/* Checks that need only the header bytes.  Segments are always mapped
 * for writing (vista has no read-only mode): an unknown ro_compat
 * feature refuses the segment. */
static int
seg_check_hdr(const struct vista_seg_hdr *h, const char *path)
{
	struct rio__hdr_view v = VISTA__HDR_VIEW(h,
		h->checksum == seg_hdr_checksum(h));
	char why[160];
	int rc = rio__hdr_check(&seg_rule, &v, RIO__HDR_WRITE, why,
		sizeof(why));

	if (rc)
		return vista__err(rc, "segment %s: %s", path, why);
	/* Then this format's own fields. */
	if (h->nclasses != VISTA_NCLASSES)
		return vista__err(VISTA_ELAYOUT,
			"segment %s: %u size classes, this library has %u",
			path, h->nclasses, VISTA_NCLASSES);
	if (h->hdr_size != VISTA_SEG_HDR_SIZE || h->page_size != VISTA_PAGE ||
	    h->base % VISTA_PAGE || h->base == 0 ||
	    h->heap_off != RIO_POOL_HDR_SIZE + VISTA_SEG_HDR_SIZE ||
	    h->npages == 0 || h->npages > UINT32_MAX ||
	    h->heap_size != vista_heap_meta_size(h->npages) ||
	    h->user_off != h->heap_off + h->heap_size ||
	    h->user_size != h->npages * VISTA_PAGE ||
	    h->user_off + h->user_size > h->map_size)
		return vista__err(VISTA_ECORRUPT,
			"segment %s: invalid header fields", path);
	return 0;
}

/* ---- the log's segment table (S2) ---- */

static uint64_t
segent_checksum(const struct vista_segent *e, unsigned i)
{
	return rio_checksum(e, offsetof(struct vista_segent, checksum),
		VISTA_SEGENT_CSUM_SEED ^ i);
}

bool
vista__segent_valid(const vista *v, unsigned i)
{
	const struct vista_segent *e = &v->segtab[i];
	return e->checksum == segent_checksum(e, i) &&
		!rio__all_zero(e->uuid, 8);
}

static int
segtab_register(vista *v, struct vista_segment *seg)
{
	uint64_t refs[VISTA__SEGWORDS];
	struct vista_segent e;
	int pick = -1;

	for (unsigned i = 0; i < VISTA_MAX_SEGMENTS; i++) {
		if (vista__segent_valid(v, i) &&
		    memcmp(v->segtab[i].uuid, seg->uuid, 16) == 0) {
			seg->idx = (uint16_t)i;
			return 0;
		}
	}
	for (unsigned i = 0; i < VISTA_MAX_SEGMENTS && pick < 0; i++)
		if (!vista__segent_valid(v, i))
			pick = (int)i;
	if (pick < 0) {
		vista__pending_refs(v, refs);
		for (unsigned i = 0; i < VISTA_MAX_SEGMENTS && pick < 0; i++)
			if (v->byidx[i] == NULL && !vista__bit_test(refs, i))
				pick = (int)i;
	}
	if (pick < 0)
		return vista__err(-ENOSPC,
			"log %s: all %u segment table entries are in use",
			rio_pool_path(v->log), VISTA_MAX_SEGMENTS);
	memset(&e, 0, sizeof(e));
	memcpy(e.uuid, seg->uuid, 16);
	e.base = (uint64_t)(uintptr_t)seg->base;
	e.size = seg->hdr->map_size;
	e.serial = ++v->seg_serial;
	e.checksum = segent_checksum(&e, (unsigned)pick);
	memcpy(&v->segtab[pick], &e, sizeof(e));
	/* The entry must be durable before a record names it (S2). */
	rio_persist(v->log, &v->segtab[pick], sizeof(e));
	seg->idx = (uint16_t)pick;
	return 0;
}

/* ---- the segment map (seqlock) ----
 *
 * Writers (vista_map(), vista_unmap(), under v->lock) bump v->seq to odd,
 * change map[], nmap and byidx[], and bump it to even; readers
 * (vista__seg_lookup(), also from the fault hook in signal context) retry
 * while the count is odd or moved.  The fences are Boehm's seqlock
 * ("Can seqlocks get along with programming language memory models?",
 * 2012): every field is read and written with relaxed atomics, so a
 * reader racing a writer reads torn-free values it then discards, and
 *
 *   writer: seq = odd; release fence; fields...; seq = even (release)
 *   reader: s1 = seq (acquire); fields...; acquire fence; s2 = seq
 *
 * The release fence pairs with the reader's acquire fence: a reader that
 * saw any new field sees the odd count (or later) in s2.  The final
 * release store pairs with the reader's acquire load of s1: a reader that
 * saw the even count sees every field the writer stored, and the
 * segment's own contents, complete before map_publish() (S3).
 */

static void
map_write_begin(vista *v)
{
	/* relaxed: the fence below orders it before the field stores; the
	 * plain read of v->seq is safe, writers hold v->lock. */
	VISTA_ASSERT((v->seq & 1) == 0, "S3"); /* one writer at a time */
	__atomic_store_n(&v->seq, v->seq + 1, __ATOMIC_RELAXED);
	/* Pairs with the acquire fence in vista__seg_lookup(): makes the odd
	 * count visible before any field this writer changes, so a reader
	 * that read a new field sees s2 != s1 and retries. */
	__atomic_thread_fence(__ATOMIC_RELEASE);
}

static void
map_write_end(vista *v)
{
	/* Pairs with the acquire loads of v->seq in vista__seg_lookup() and
	 * vista__seg_find(): makes the fields stored since
	 * map_write_begin() visible before the even count. */
	VISTA_ASSERT((v->seq & 1) == 1, "S3");
	__atomic_store_n(&v->seq, v->seq + 1, __ATOMIC_RELEASE);
}

static void
map_publish(vista *v, struct vista_segment *seg)
{
	uint32_t n = v->nmap;

	/* S1: one mapping of a segment per instance.  S5: bound to this
	 * log, durably, before it is published and any record can name it
	 * (relaxed: the word is stored whole, by this thread). */
	VISTA_ASSERT(n < VISTA_MAX_SEGMENTS && v->byidx[seg->idx] == NULL,
		"S1");
	VISTA_ASSERT(__atomic_load_n(&seg->hdr->bind, __ATOMIC_RELAXED) ==
		vista_seg_bound(v->log_uuid), "S5");
	map_write_begin(v);
	/* relaxed: seqlock fields, ordered by map_write_begin() and
	 * map_write_end().  byidx[] is also read without the seqlock (tx.c,
	 * heap.c, auto.c), but only for a segment the reader's transaction
	 * holds, mapped before it began (API rule): atomic so that no
	 * access is a data race, with no order of its own. */
	__atomic_store_n(&v->map[n].lo, (uintptr_t)seg->user, __ATOMIC_RELAXED);
	__atomic_store_n(&v->map[n].hi, (uintptr_t)seg->user + seg->user_size,
		__ATOMIC_RELAXED);
	__atomic_store_n(&v->map[n].seg, seg, __ATOMIC_RELAXED);
	__atomic_store_n(&v->nmap, n + 1, __ATOMIC_RELAXED);
	__atomic_store_n(&v->byidx[seg->idx], seg, __ATOMIC_RELAXED);
	map_write_end(v);
}

static void
map_remove(vista *v, struct vista_segment *seg)
{
	uint32_t n = v->nmap;

	VISTA_ASSERT(v->byidx[seg->idx] == seg, "S1");
	map_write_begin(v);
	for (uint32_t i = 0; i < n; i++) {
		if (v->map[i].seg == seg) {
			/* relaxed: seqlock fields, as in map_publish(). */
			__atomic_store_n(&v->map[i].lo, v->map[n - 1].lo,
				__ATOMIC_RELAXED);
			__atomic_store_n(&v->map[i].hi, v->map[n - 1].hi,
				__ATOMIC_RELAXED);
			__atomic_store_n(&v->map[i].seg, v->map[n - 1].seg,
				__ATOMIC_RELAXED);
			__atomic_store_n(&v->nmap, n - 1, __ATOMIC_RELAXED);
			break;
		}
	}
	__atomic_store_n(&v->byidx[seg->idx], NULL, __ATOMIC_RELAXED);
	map_write_end(v);
}

struct vista_segment *
vista__seg_lookup(struct vista_lane *l, uintptr_t a, size_t len, bool cache)
{
	vista *v = l->v;
	/* Pairs with the release store in map_write_end(): an even s1 makes
	 * the fields (and the segment) of that write visible. */
	uint64_t s1 = __atomic_load_n(&v->seq, __ATOMIC_ACQUIRE), s2;
	struct vista_segment *found;
	uintptr_t lo = 0, hi = 0;
	int tries = 0;

	if (cache && s1 == l->cseq && a >= l->clo && a < l->chi &&
	    len <= l->chi - a)
		return l->cseg;
	for (;;) {
		found = NULL;
		if (!(s1 & 1)) {
			/* relaxed: seqlock fields; torn-free, and validated by
			 * the fence and the second count load below. */
			uint32_t n = __atomic_load_n(&v->nmap, __ATOMIC_RELAXED);
			for (uint32_t i = 0; i < n && i < VISTA_MAX_SEGMENTS;
				i++) {
				lo = __atomic_load_n(&v->map[i].lo,
					__ATOMIC_RELAXED);
				hi = __atomic_load_n(&v->map[i].hi,
					__ATOMIC_RELAXED);
				if (a >= lo && a < hi && len <= hi - a) {
					found = __atomic_load_n(&v->map[i].seg,
						__ATOMIC_RELAXED);
					break;
				}
			}
			/* Pairs with the release fence in map_write_begin():
			 * if a field load above saw a writer's store, s2 sees
			 * that writer's odd count or later.  s2 itself may be
			 * relaxed: the fence orders it after the fields. */
			__atomic_thread_fence(__ATOMIC_ACQUIRE);
			s2 = __atomic_load_n(&v->seq, __ATOMIC_RELAXED);
			if (s2 == s1)
				break;
		}
		/* A map or unmap is running; in signal context it could be
		 * this very thread's, so give up after a while. */
		if (++tries > 1000000)
			return NULL;
		__builtin_ia32_pause();
		/* As the first load of s1. */
		s1 = __atomic_load_n(&v->seq, __ATOMIC_ACQUIRE);
	}
	if (cache && found != NULL) {
		l->cseq = s1;
		l->clo = lo;
		l->chi = hi;
		l->cseg = found;
	}
	return found;
}

/* ---- map ---- */

static int
seg_lock_file(const char *path, int *fd)
{
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return vista__err(-errno, "open segment %s: %s", path,
			strerror(errno));
	if (flock(*fd, LOCK_EX | LOCK_NB) != 0) {
		int e = errno;
		close(*fd);
		*fd = -1;
		if (e == EWOULDBLOCK)
			return vista__err(VISTA_EMAPPED,
				"segment %s is mapped by another vista "
				"instance or process", path);
		return vista__err(-e, "flock %s: %s", path, strerror(e));
	}
	return 0;
}

static int
translate_open_error(int rc, const char *path)
{
	if (rc == RIO_ELAYOUT)
		return vista__err(VISTA_ELAYOUT, "%s is not an undo-mode "
			"vista segment (a redo-mode segment maps under "
			"VISTA_MODE_REDO): %s", path, rio_errormsg());
	return rc;
}

/*
 * Open an existing segment file at the address its header names (or, for
 * an unfinished create, at addr).  *fresh is set when the header must be
 * written.
 */
static int
seg_open_existing(vista *v, const char *path, int fd, void *addr,
	bool create, rio_pool **p, bool *fresh)
{
	struct vista_seg_hdr *h = malloc(sizeof(*h));
	struct rio_pool_opts po = { .layout = VISTA_SEG_LAYOUT };
	ssize_t n;
	int rc;

	if (h == NULL)
		return vista__err(-ENOMEM, "out of memory");
	n = pread(fd, h, sizeof(*h), RIO_POOL_HDR_SIZE);
	if (n != (ssize_t)sizeof(*h) || rio__all_zero(h->magic, 8)) {
		free(h);
		/* Too short for a header, or one that was never written:
		 * librio judges the pool; an unfinished create is finished
		 * where the caller asks (VISTA_CREATE gave addr). */
		po.addr = create ? addr : NULL;
		rc = rio_pool_open_opts(path, v->seg_rio_flags, &po, p);
		if (rc)
			return translate_open_error(rc, path);
		*fresh = true;
		return 0;
	}
	rc = seg_check_hdr(h, path);
	if (rc == VISTA_ECORRUPT &&
	    memcmp(h->magic, VISTA_SEG_MAGIC, sizeof(h->magic)) != 0) {
		/* Maybe not a segment at all: let librio say what it is. */
		rio_pool *q = NULL;
		int rrc = rio_pool_open_opts(path, RIO_RDONLY, &po, &q);
		if (rrc) {
			free(h);
			return translate_open_error(rrc, path);
		}
		rio_pool_close(q);
		rc = seg_check_hdr(h, path); /* restore its message */
	}
	if (rc == 0 && addr != NULL && (uint64_t)(uintptr_t)addr != h->base)
		rc = vista__err(-EINVAL,
			"segment %s lives at %p, not at the requested %p",
			path, (void *)(uintptr_t)h->base, addr);
	po.addr = (void *)(uintptr_t)h->base;
	free(h);
	if (rc)
		return rc;
	rc = rio_pool_open_opts(path, v->seg_rio_flags, &po, p);
	return translate_open_error(rc, path);
}

/* The mapped header must describe this very mapping. */
static int
seg_check_mapping(struct vista_segment *seg)
{
	const struct vista_seg_hdr *h = seg->hdr;
	const char *path = rio_pool_path(seg->pool);
	int rc = seg_check_hdr(h, path);

	if (rc)
		return rc;
	if (h->base != (uint64_t)(uintptr_t)seg->base ||
	    h->map_size != rio_pool_size(seg->pool) + RIO_POOL_HDR_SIZE)
		return vista__err(VISTA_ECORRUPT,
			"segment %s: header says %llu bytes at %p, the pool "
			"is %zu bytes at %p",
			path, (unsigned long long)h->map_size,
			(void *)(uintptr_t)h->base,
			rio_pool_size(seg->pool) + RIO_POOL_HDR_SIZE,
			(void *)seg->base);
	return 0;
}

/* Restore a missing segment file from its safe-sync image, if it has one. */
static int
seg_restore(vista *v, const char *path)
{
	struct rio_pool_opts po = { .layout = VISTA_SEG_LAYOUT };
	char img[4096];
	rio_pool *p = NULL;
	int rc;

	if ((size_t)snprintf(img, sizeof(img), "%s.img", path) >= sizeof(img) ||
	    access(img, F_OK) != 0)
		return 0;
	rc = rio_pool_open_opts(path, v->seg_rio_flags, &po, &p);
	if (rc)
		return translate_open_error(rc, path);
	return rio_pool_close(p);
}

/* S5: may this log map the segment?  0, VISTA_EOTHERLOG, VISTA_ECORRUPT. */
static int
seg_check_bind(vista *v, const struct vista_segment *seg, bool *clean)
{
	/* relaxed: one 8-byte word of the persistent header, read whole (it
	 * is stored whole, seg_set_bind()); no other thread stores it while
	 * the segment is being mapped (S1 lock). */
	uint64_t b = __atomic_load_n(&seg->hdr->bind, __ATOMIC_RELAXED);
	uint64_t mine = vista_seg_bound(v->log_uuid);
	const char *path = rio_pool_path(seg->pool);

	*clean = b == VISTA_SEG_CLEAN;
	if (b == mine || *clean)
		return 0;
	if ((unsigned)__builtin_popcountll(b ^ mine) <= VISTA_SEG_BIND_SLACK ||
	    (unsigned)__builtin_popcountll(b ^ VISTA_SEG_CLEAN) <=
		    VISTA_SEG_BIND_SLACK)
		return vista__err(VISTA_ECORRUPT,
			"segment %s: its log binding word has flipped bits",
			path);
	return vista__err(VISTA_EOTHERLOG,
		"segment %s was not unmapped cleanly under the log %s: it "
		"belongs to another log, or its log was lost or replaced; "
		"only that log can roll back what its last run left "
		"unfinished", path, rio_pool_path(v->log));
}

/* S5: set the bind word, durably. */
static void
seg_set_bind(const struct vista_segment *seg, uint64_t b)
{
	/* relaxed: an 8-byte store that must not tear (a crash keeps the old
	 * or the new word); its durability comes from the persist that
	 * follows. */
	__atomic_store_n(&seg->hdr->bind, b, __ATOMIC_RELAXED);
	rio_persist(seg->pool, &seg->hdr->bind, sizeof(b));
}

/* Does a lane of v hold records naming seg?  (then it is not clean) */
static bool
seg_named(vista *v, const struct vista_segment *seg)
{
	/* relaxed: the sticky error flag (vista__set_fatal()); no data is
	 * read on the strength of it, and a failure racing with this unmap
	 * belongs to a transaction on another segment (a segment is not
	 * unmapped while a transaction uses it). */
	if (__atomic_load_n(&v->fatal, __ATOMIC_RELAXED))
		return true; /* what the log holds is not known */
	for (unsigned i = 0; i < v->nlanes; i++) {
		const struct vista_lane *l = &v->lanes[i];
		if ((l->nrec > 0 && vista__bit_test(l->touched, seg->idx)) ||
		    (l->pending && vista__bit_test(l->pend_segs, seg->idx)))
			return true;
	}
	return false;
}

static void
seg_free(struct vista_segment *seg)
{
	if (seg->pool != NULL)
		rio_pool_close(seg->pool);
	if (seg->lock_fd >= 0)
		close(seg->lock_fd);
	free(seg);
}

/* S6: remove what a failed create made (the file, its safe-sync image). */
static void
seg_unlink(const char *path)
{
	char img[4096];

	(void)unlink(path);
	if ((size_t)snprintf(img, sizeof(img), "%s.img", path) < sizeof(img))
		(void)unlink(img);
}

static int
map_locked(vista *v, const char *path, void *addr, size_t size,
	unsigned flags, struct vista_segment **out)
{
	struct rio_pool_opts po = { .addr = addr, .layout = VISTA_SEG_LAYOUT };
	struct vista_segment *seg;
	bool fresh = false, clean = false, made = false;
	struct stat st;
	int rc;

	seg = calloc(1, sizeof(*seg));
	if (seg == NULL)
		return vista__err(-ENOMEM, "out of memory");
	seg->v = v;
	seg->lock_fd = -1;

	if (stat(path, &st) != 0 && errno == ENOENT) {
		/* The memory copy may be gone while its safe-sync image
		 * survives (a reboot): librio restores the file when it
		 * opens it. */
		rc = seg_restore(v, path);
		if (rc)
			goto fail;
	}
	if (stat(path, &st) != 0) {
		if (errno != ENOENT) {
			rc = vista__err(-errno, "stat %s: %s", path,
				strerror(errno));
			goto fail;
		}
		if (!(flags & VISTA_CREATE)) {
			rc = vista__err(-ENOENT,
				"segment %s does not exist (VISTA_CREATE "
				"makes it)", path);
			goto fail;
		}
		if (addr == NULL || size == 0) {
			rc = vista__err(-EINVAL,
				"creating segment %s needs an address and a "
				"size", path);
			goto fail;
		}
		if (vista_segment_footprint(size) == 0) {
			rc = vista__err(-EINVAL,
				"creating segment %s: %zu bytes is more than a "
				"segment holds (1 TiB with its metadata)", path,
				size);
			goto fail;
		}
		rc = rio_pool_create_opts(path, vista_segment_footprint(size),
			v->seg_rio_flags, &po, &seg->pool);
		if (rc == -EEXIST && !(flags & VISTA_EXCL)) {
			rc = 0; /* made meanwhile: open it below */
		} else if (rc) {
			/* S6: whatever the failed create left is ours. */
			made = rc != -EEXIST;
			goto fail;
		}
		fresh = made = seg->pool != NULL;
	} else if ((flags & VISTA_CREATE) && (flags & VISTA_EXCL)) {
		rc = vista__err(-EEXIST, "segment %s already exists", path);
		goto fail;
	}
	rc = seg_lock_file(path, &seg->lock_fd);
	if (rc)
		goto fail;
	if (fstat(seg->lock_fd, &st) != 0) {
		rc = vista__err(-errno, "fstat %s", path);
		goto fail;
	}
	for (uint32_t i = 0; i < v->nmap; i++) {
		struct vista_segment *o = v->map[i].seg;
		if (o->dev == st.st_dev && o->ino == st.st_ino) {
			rc = vista__err(VISTA_EMAPPED,
				"segment %s is already mapped by this instance",
				path);
			goto fail;
		}
	}
	seg->dev = st.st_dev;
	seg->ino = st.st_ino;
	if (seg->pool == NULL) {
		rc = seg_open_existing(v, path, seg->lock_fd, addr,
			(flags & VISTA_CREATE) != 0, &seg->pool, &fresh);
		if (rc == 0 && fresh && !(flags & VISTA_CREATE))
			rc = vista__err(VISTA_ECORRUPT,
				"segment %s: its creation never finished (the "
				"header is empty); map it with VISTA_CREATE to "
				"finish it", path);
		if (rc)
			goto fail;
	}
	seg->base = (char *)rio_pool_base(seg->pool) - RIO_POOL_HDR_SIZE;
	seg->hdr = rio_pool_base(seg->pool);
	if (fresh) {
		rc = seg_format(seg->pool);
		if (rc)
			goto fail;
	}
	rc = seg_check_mapping(seg);
	if (rc)
		goto fail;
	seg->user = seg->base + seg->hdr->user_off;
	seg->user_size = seg->hdr->user_size;
	rio_pool_uuid(seg->pool, seg->uuid);
	for (uint32_t i = 0; i < v->nmap; i++) {
		if (memcmp(v->map[i].seg->uuid, seg->uuid, 16) == 0) {
			rc = vista__err(VISTA_EMAPPED,
				"segment %s is a copy of a mapped segment "
				"(same uuid)", path);
			goto fail;
		}
	}
	rc = seg_check_bind(v, seg, &clean);
	if (rc == 0)
		rc = segtab_register(v, seg);
	if (rc == 0 && clean && seg_named(v, seg))
		rc = vista__err(VISTA_ECORRUPT,
			"segment %s says it was unmapped cleanly, but the log "
			"%s holds an unfinished transaction for it: an older "
			"copy of the segment?", path, rio_pool_path(v->log));
	if (rc == 0)
		rc = vista__recover_segment(v, seg);
	if (rc == 0)
		rc = vista__heap_open(seg);
	if (rc == 0 && (v->protect || v->auto_on))
		rc = vista__protect_segment(seg);
	if (rc) {
		vista__heap_close(seg);
		goto fail;
	}
	if (clean)
		/* S5: bound to this log before any record can name it (it
		 * is not published yet), after every check has passed. */
		seg_set_bind(seg, vista_seg_bound(v->log_uuid));
	map_publish(v, seg);
	*out = seg;
	return 0;
fail:
	seg_free(seg);
	if (made)
		seg_unlink(path);
	return rc;
}

int
vista_map(vista *v, const char *path, void *addr, size_t size,
	unsigned flags, vista_segment **seg)
{
	int rc;

	if (seg != NULL)
		*seg = NULL;
	if (v == NULL || path == NULL || *path == '\0' || seg == NULL)
		return vista__err(-EINVAL, "vista_map: NULL argument");
	if (flags & ~(VISTA_CREATE | VISTA_EXCL))
		return vista__err(-EINVAL, "vista_map: unknown flags 0x%x",
			flags);
	if ((uintptr_t)addr % VISTA_PAGE)
		return vista__err(-EINVAL,
			"vista_map: address %p is not page aligned", addr);
	/* relaxed: the sticky error flag, an early refusal only; nothing is
	 * read on the strength of it. */
	if (__atomic_load_n(&v->fatal, __ATOMIC_RELAXED))
		return vista__err(VISTA_EFATAL,
			"vista_map: the instance is in its error state");
	if (v->redo != NULL)
		return vista__redo_map(v, path, addr, size, flags, seg);
	pthread_mutex_lock(&v->lock);
	if (v->nmap == VISTA_MAX_SEGMENTS)
		rc = vista__err(-ENOSPC, "vista_map: %u segments are mapped",
			VISTA_MAX_SEGMENTS);
	else
		rc = map_locked(v, path, addr, size, flags, seg);
	pthread_mutex_unlock(&v->lock);
	return rc;
}

static bool
seg_in_use(vista *v, const struct vista_segment *seg)
{
	for (unsigned i = 0; i < v->nlanes; i++)
		if ((v->lanes[i].state != VISTA__TX_IDLE ||
			    v->lanes[i].held) &&
		    vista__bit_test(v->lanes[i].touched, seg->idx))
			return true;
	return false;
}

static int
unmap_locked(vista *v, struct vista_segment *seg)
{
	bool lazy = false;
	int rc;

	/* L6 (log.c): a lane's lazy truncation is durable before the segment
	 * can go (and its table entry be reused): records of the old
	 * generation, which may name it, must be dead on media first. */
	for (unsigned i = 0; i < v->nlanes; i++) {
		struct vista_lane *l = &v->lanes[i];
		/* acquire: as in vista__lazy_cover(). */
		if (__atomic_load_n(&l->lazy, __ATOMIC_ACQUIRE)) {
			/* One lane: the truncation was never stored (L7);
			 * relaxed lazy_gen: read after the acquire above. */
			if (v->solo)
				vista__floor_store(l, __atomic_load_n(
					&l->lazy_gen, __ATOMIC_RELAXED));
			rio_flush(v->log, l->hdr, sizeof(*l->hdr));
			lazy = true;
		}
	}
	if (lazy)
		/* The truncations written back above are durable now. */
		rio_drain(v->log);
	map_remove(v, seg);
	if (!seg_named(v, seg))
		/* S5: nothing of any lane names it: any log may map it. */
		seg_set_bind(seg, VISTA_SEG_CLEAN);
	vista__heap_close(seg);
	rc = rio_pool_close(seg->pool);
	seg->pool = NULL;
	seg_free(seg);
	return rc;
}

int
vista_unmap(vista_segment *seg)
{
	vista *v;
	int rc;

	if (seg == NULL)
		return vista__err(-EINVAL, "vista_unmap: NULL segment");
	v = seg->v;
	if (v->redo != NULL)
		return vista__redo_unmap(seg);
	pthread_mutex_lock(&v->lock);
	if (seg_in_use(v, seg)) {
		pthread_mutex_unlock(&v->lock);
		return vista__err(VISTA_EINTX,
			"vista_unmap(%s): a running transaction, or a no-flush "
			"group not yet flushed, has set ranges in it",
			rio_pool_path(seg->pool));
	}
	rc = unmap_locked(v, seg);
	pthread_mutex_unlock(&v->lock);
	return rc;
}

/* Under v->lock, every lane idle (vista_fini). */
int
vista__seg_unmap_all(vista *v)
{
	int rc = 0;

	while (v->nmap > 0) {
		int r = unmap_locked(v, v->map[v->nmap - 1].seg);
		if (rc == 0)
			rc = r;
	}
	return rc;
}

void *
vista_segment_base(const vista_segment *seg)
{
	return seg->user;
}

size_t
vista_segment_size(const vista_segment *seg)
{
	return seg->user_size;
}

rio_pool *
vista_segment_pool(const vista_segment *seg)
{
	return seg->pool;
}

int
vista_segment_persist(vista_segment *seg, const void *addr, size_t len)
{
	if (seg == NULL || (addr == NULL && len > 0))
		return vista__err(-EINVAL, "vista_segment_persist: NULL "
			"argument");
	if (seg->v->redo != NULL)
		return vista__redo_persist(seg, addr, len);
	if ((uintptr_t)addr < (uintptr_t)seg->user ||
	    len > seg->user_size ||
	    (uintptr_t)addr - (uintptr_t)seg->user > seg->user_size - len)
		return vista__err(VISTA_ERANGE, "vista_segment_persist: the "
			"range is not inside the segment's user area");
	/* The range, durable before this returns. */
	rio_persist(seg->pool, addr, len);
	return 0;
}

rio_pool *
vista_log_pool(const vista *v)
{
	return v->log;
}
