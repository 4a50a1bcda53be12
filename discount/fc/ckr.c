/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * ckr.c -- open (with recovery), the point of consistency, close
 *
 * A handle's life, with the function behind each step:
 *
 *   ckr_open            recover: newest valid slot -> state, replay the log
 *                       after it; start logger and writer (busy = 0)
 *   ckr_point_of_consistency, busy == 0
 *                       PrepareForNextCheckpoint (NAIVE: copy the state to
 *                       the shadow; BACOU: reset the block states; BAZZ:
 *                       MW = ~MR; IPP: swap Odd/Even; FORK: fork), epoch++,
 *                       busy = 1, wake the writer
 *   writer (ckpt.c)     W1..W5, busy = 0
 *   ckr_close           wait busy == 0, stop writer, commit and stop logger
 *
 * The mutator synchronizes with the writer only at the point of
 * consistency (an acquire load of busy; a mutex to wake it): the handlers
 * take no lock except BACOU's per-object one.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ckr_int.h"
#include "rio_int.h"

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define HUGE_SZ (2ul << 20)

/* Bytes of [p, p + n) the kernel backs with transparent huge pages, from
 * /proc/self/smaps (0 if it cannot be read). */
static uint64_t
huge_bytes(const void *p, size_t n)
{
	char line[512];
	uintptr_t lo, hi, a = (uintptr_t)p;
	unsigned long long kb;
	bool in = false;
	uint64_t sum = 0;
	FILE *f = fopen("/proc/self/smaps", "re");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 &&
		    strchr(line, '-') < strchr(line, ' '))
			in = lo < a + n && hi > a;
		else if (in && sscanf(line, "AnonHugePages: %llu kB", &kb) == 1)
			sum += kb * 1024;
	}
	fclose(f);
	return sum;
}

/* HugePages_Free and Hugepagesize (bytes) from /proc/meminfo. */
static void
hugetlb_free(uint64_t *free_pages, uint64_t *page)
{
	char line[256];
	unsigned long long v;
	FILE *f = fopen("/proc/meminfo", "re");

	*free_pages = 0;
	*page = HUGE_SZ;
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		if (sscanf(line, "HugePages_Free: %llu", &v) == 1)
			*free_pages = v;
		else if (sscanf(line, "Hugepagesize: %llu kB", &v) == 1)
			*page = v * 1024;
	}
	fclose(f);
}

/*
 * Populated at once: no page fault on the hot path, in any period.  With
 * CKR_HUGETLB the mapping comes from the kernel's reserved pool of huge
 * pages (MAP_HUGETLB, vm.nr_hugepages), all of it or nothing (NULL, errno
 * ENOMEM when the pool is short).  With CKR_HUGEPAGES the mapping is aligned to 2 MiB and advised huge before it
 * is populated, so the kernel faults it in as huge pages where it can.
 */
static void *
alloc(ckr *c, int i, size_t n)
{
	char *p;
	size_t len = n, lead;

	if (c->opts.flags & CKR_HUGETLB) {
		len = (n + HUGE_SZ - 1) & ~(HUGE_SZ - 1);
		p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE |
			MAP_ANONYMOUS | MAP_HUGETLB | MAP_POPULATE, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		c->mem[i] = p;
		c->memsz[i] = len;
		c->st.huge_bytes += len;
		return p;
	}
	if (!(c->opts.flags & CKR_HUGEPAGES)) {
		p = mmap(NULL, n, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
		if (p == MAP_FAILED)
			return NULL;
		c->mem[i] = p;
		c->memsz[i] = n;
		return p;
	}
	len = (n + HUGE_SZ - 1) & ~(HUGE_SZ - 1);
	p = mmap(NULL, len + HUGE_SZ, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	lead = (HUGE_SZ - ((uintptr_t)p & (HUGE_SZ - 1))) & (HUGE_SZ - 1);
	if (lead > 0)
		munmap(p, lead);
	munmap(p + lead + len, HUGE_SZ - lead);
	p += lead;
	c->mem[i] = p;
	c->memsz[i] = len;
	/* advice only: without THP the state stays in small pages */
	(void)madvise(p, len, MADV_HUGEPAGE);
	if (madvise(p, len, MADV_POPULATE_WRITE) != 0)
		memset(p, 0, len);
	c->st.huge_bytes += huge_bytes(p, len);
	return p;
}

/* Lay out the algorithm's copies and give them the state in `init`. */
static int
setup_state(ckr *c, const uint32_t *init)
{
	struct ckr__hot *h = &c->hot;
	uint64_t nw = h->nwords;

	switch (h->algo) {
	case CKR_NAIVE:
	case CKR_BACOU:
	case CKR_FORK:
		if ((h->as = alloc(c, 0, nw * 4)) == NULL)
			break;
		memcpy(h->as, init, nw * 4);
		if (h->algo == CKR_FORK)
			return 0;
		if ((c->shadow = alloc(c, 1, nw * 4)) == NULL)
			break;
		if (h->algo == CKR_NAIVE)
			return 0;
		if ((h->blk = alloc(c, 2, c->nobjs)) == NULL)
			break;
		/* no period runs before the first point of consistency */
		memset(h->blk, CKR__BLK_WRITTEN, c->nobjs);
		return 0;
	case CKR_BAZZ: {
		uint64_t ng = (nw + 255) / 256;

		if ((h->zz[0] = alloc(c, 0, nw * 4)) == NULL ||
		    (h->zz[1] = alloc(c, 1, nw * 4)) == NULL ||
		    (h->bits = alloc(c, 2, ng * sizeof(*h->bits))) == NULL)
			break;
		memcpy(h->zz[0], init, nw * 4);
		memcpy(h->zz[1], init, nw * 4);
		/* MR = 0, MW = 1 (Algorithm 1) */
		for (uint64_t g = 0; g < ng; g++)
			for (int j = 0; j < 4; j++)
				h->bits[g].mw[j] = ~0ull;
		return 0;
	}
	case CKR_IPP:
		if ((h->ipp = alloc(c, 0, nw * sizeof(*h->ipp))) == NULL ||
		    (c->ck = alloc(c, 1, nw * 4)) == NULL)
			break;
		/* the writer's copy starts as the state; marks all clear:
		 * the first period's writes are merged into it */
		for (uint64_t i = 0; i < nw; i++)
			h->ipp[i].as = h->ipp[i].cp[0] = h->ipp[i].cp[1] =
				c->ck[i] = init[i];
		h->cur = 0;
		return 0;
	}
	if (c->opts.flags & CKR_HUGETLB) {
		uint64_t fr, pg;

		hugetlb_free(&fr, &pg);
		return ckr__err(CKR_ENOHUGE, "state of %llu words for %s: "
			"mmap(MAP_HUGETLB) failed (%s); %llu huge pages of %llu "
			"KiB free: reserve more with sysctl vm.nr_hugepages",
			(unsigned long long)nw, ckr_algo_name(h->algo),
			strerror(errno), (unsigned long long)fr,
			(unsigned long long)(pg >> 10));
	}
	return ckr__err(-ENOMEM, "state of %llu words for %s",
		(unsigned long long)nw, ckr_algo_name(h->algo));
}

static void
free_all(ckr *c)
{
	for (int i = 0; i < 4; i++)
		if (c->mem[i] != NULL)
			munmap(c->mem[i], c->memsz[i]);
	free(c->stage);
	free(c->lbuf[0]);
	free(c->lbuf[1]);
	if (c->lock_fd >= 0)
		close(c->lock_fd);
	ckr__media_close(&c->ckpt);
	ckr__media_close(&c->logm);
	pthread_mutex_destroy(&c->wlock);
	pthread_cond_destroy(&c->wcond);
	pthread_mutex_destroy(&c->llock);
	pthread_cond_destroy(&c->lcond);
	pthread_cond_destroy(&c->ldone);
	free(c);
}

/*
 * One handle per directory: an exclusive flock on "<dir>/lock", held by
 * the handle and by a fork snapshot child (it inherits the descriptor), so
 * a directory is reopened only once every writer of the last run is gone.
 * Waits up to about 2 s for such a child to die, then -EBUSY.
 */
static int
lock_dir(ckr *c)
{
	char path[4200];

	snprintf(path, sizeof(path), "%s/lock", c->dir);
	c->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (c->lock_fd < 0)
		return ckr__errno("open %s", path);
	for (int i = 0; flock(c->lock_fd, LOCK_EX | LOCK_NB) != 0; i++) {
		if (errno != EWOULDBLOCK)
			return ckr__errno("flock %s", path);
		if (i == 2000)
			return ckr__err(-EBUSY, "%s: the directory is in use by "
				"another handle", path);
		usleep(1000);
	}
	return 0;
}

static int
check_opts(const struct ckr_opts *o)
{
	if (o == NULL)
		return ckr__err(CKR_EINVAL, "ckr_open: no options");
	if (o->algo < CKR_NAIVE || o->algo > CKR_FORK)
		return ckr__err(CKR_EINVAL, "ckr_open: unknown algorithm %d",
			(int)o->algo);
	if (o->storage != CKR_STORAGE_FILE && o->storage != CKR_STORAGE_POOL)
		return ckr__err(CKR_EINVAL, "ckr_open: unknown storage %d",
			(int)o->storage);
	if (o->obj_size < 4 || o->obj_size > CKR_CHUNK ||
	    (o->obj_size & (o->obj_size - 1)))
		return ckr__err(CKR_EINVAL, "ckr_open: object size %u is not "
			"a power of two in 4..%u", o->obj_size, CKR_CHUNK);
	if (o->flags & ~(CKR_HUGEPAGES | CKR_HUGETLB))
		return ckr__err(CKR_EINVAL, "ckr_open: unknown flags 0x%x",
			o->flags);
	if ((o->flags & CKR_HUGEPAGES) && (o->flags & CKR_HUGETLB))
		return ckr__err(CKR_EINVAL, "ckr_open: CKR_HUGEPAGES and "
			"CKR_HUGETLB are exclusive");
	/* a fork child's copies on write would draw on the same reserve,
	 * and a process that finds it empty then dies of SIGBUS */
	if ((o->flags & CKR_HUGETLB) && o->algo == CKR_FORK)
		return ckr__err(CKR_EINVAL, "ckr_open: CKR_HUGETLB with the "
			"fork snapshot (its copies on write could exhaust the "
			"reserved huge pages)");
	if (o->nobjs == 0 || o->nobjs > (1ull << 40) / o->obj_size)
		return ckr__err(CKR_EINVAL, "ckr_open: %llu objects",
			(unsigned long long)o->nobjs);
	return 0;
}

/* Choose the newest complete slot; fills *slot (-1: none) and *h. */
static int
choose_slot(ckr *c, int *slot, struct ckr_slot_hdr *best,
	struct ckr_slot_hdr *oldest, bool *two)
{
	struct ckr_slot_hdr h[2];
	int rc[2], empty = 0;

	*slot = -1;
	memset(h, 0, sizeof(h));
	for (int s = 0; s < 2; s++) {
		rc[s] = ckr__slot_read_hdr(&c->ckpt, c->hot.nwords,
			c->opts.obj_size, s, &h[s],
			c->log_id, true);
		/* another configuration or log: refuse, change nothing */
		if (rc[s] == CKR_ESIZE || rc[s] == CKR_EMISMATCH ||
		    rc[s] == CKR_EVERSION || (rc[s] < 0 && rc[s] > -4096))
			return rc[s];
		if (rc[s] == CKR_EBADMAGIC && rio__all_zero(&h[s], sizeof(h[s])))
			empty++;
		else if (rc[s] != 0)
			c->st.bad_slots++;
		if (rc[s] == 0 && (*slot < 0 || h[s].epoch > best->epoch)) {
			*slot = s;
			*best = h[s];
		}
	}
	*two = rc[0] == 0 && rc[1] == 0;
	if (*slot >= 0)
		*oldest = *two ? h[*slot ^ 1] : *best;
	/*
	 * Neither slot complete.  With one slot never written, the other is
	 * the first checkpoint, torn by a crash in its W1..W4 (I4: a slot is
	 * rewritten only after the other completed): no checkpoint was ever
	 * complete, and recovery replays the log from its start.  Both
	 * written and neither valid is damage no crash leaves.
	 */
	if (*slot < 0 && empty == 0)
		return ckr__err(CKR_ECORRUPT, "%s: no valid checkpoint slot "
			"(slot 0: %s, slot 1: %s)", c->ckpt.path,
			ckr_err_name(rc[0]), ckr_err_name(rc[1]));
	return 0;
}

int
ckr_open(const char *dir, const struct ckr_opts *opts, ckr **out)
{
	struct ckr_slot_hdr h, old;
	uint32_t *init = NULL;
	bool created, two = false;
	ckr *c;
	int rc, slot = -1;

	*out = NULL;
	if ((rc = check_opts(opts)) != 0)
		return rc;
	if (dir == NULL || strlen(dir) > 4000)
		return ckr__err(CKR_EINVAL, "ckr_open: bad directory");
	if (mkdir(dir, 0755) != 0 && errno != EEXIST)
		return ckr__errno("mkdir %s", dir);
	c = calloc(1, sizeof(*c));
	if (c == NULL)
		return ckr__err(-ENOMEM, "ckr_open");
	c->ckpt.fd = c->logm.fd = -1;
	c->lock_fd = -1;
	c->child_pipe = -1;
	pthread_mutex_init(&c->wlock, NULL);
	pthread_cond_init(&c->wcond, NULL);
	pthread_mutex_init(&c->llock, NULL);
	pthread_cond_init(&c->lcond, NULL);
	pthread_cond_init(&c->ldone, NULL);
	c->opts = *opts;
	if (c->opts.log_capacity == 0)
		c->opts.log_capacity = 64ull << 20;
	snprintf(c->dir, sizeof(c->dir), "%s", dir);
	c->obj_words = opts->obj_size / 4;
	c->nobjs = opts->nobjs;
	c->hot.algo = opts->algo;
	c->hot.obj_shift = (uint32_t)__builtin_ctz(c->obj_words);
	c->hot.nwords = c->nobjs * c->obj_words;
	c->st.recovered_slot = -1;

	rc = lock_dir(c);
	if (rc == 0)
		rc = ckr__media_open(&c->ckpt, dir, "ckpt", opts->storage,
			2 * ckr__slot_size(c->hot.nwords), opts->rio_flags,
			true, &created);
	if (rc == 0 && c->ckpt.size != 2 * ckr__slot_size(c->hot.nwords))
		rc = ckr__err(CKR_ESIZE, "%s holds %llu bytes: made for "
			"another state size than %llu objects of %u bytes "
			"(%llu bytes)", c->ckpt.path,
			(unsigned long long)c->ckpt.size,
			(unsigned long long)c->nobjs, opts->obj_size,
			(unsigned long long)(2 * ckr__slot_size(c->hot.nwords)));
	if (rc == 0)
		rc = ckr__log_open(c, true);
	if (rc == 0)
		rc = choose_slot(c, &slot, &h, &old, &two);
	if (rc == 0)
		rc = ckr__log_recover(c, slot >= 0 ? &old : NULL,
			slot >= 0 ? &h : NULL);
	if (rc == 0 && slot >= 0 && h.log_seq > c->durable)
		rc = ckr__err(CKR_ECORRUPT, "%s: slot %d (epoch %llu) is at "
			"action %llu, the log holds only %llu", c->ckpt.path,
			slot, (unsigned long long)h.epoch,
			(unsigned long long)h.log_seq,
			(unsigned long long)c->durable);
	if (rc == 0 && (init = calloc(c->hot.nwords, 4)) == NULL)
		rc = ckr__err(-ENOMEM, "ckr_open: state");
	if (rc == 0 && slot >= 0)
		rc = ckr__slot_load(&c->ckpt, c->hot.nwords, slot, &h, init);
	if (rc == 0)
		rc = setup_state(c, init);
	free(init);
	if (rc == 0 && slot >= 0) {
		c->epoch = h.epoch;
		c->st.recovered_epoch = h.epoch;
		c->st.recovered_slot = slot;
	}
	c->next_slot = slot >= 0 ? slot ^ 1 : 0;
	if (rc == 0)
		rc = ckr__log_replay(c, slot >= 0 ? &h : NULL);
	if (rc == 0 && opts->storage == CKR_STORAGE_FILE &&
	    (c->stage = malloc(CKR_CHUNK)) == NULL)
		rc = ckr__err(-ENOMEM, "ckr_open: writer buffer");
	if (rc == 0)
		rc = ckr__log_start(c);
	if (rc != 0) {
		free_all(c);
		return rc;
	}
	rc = pthread_create(&c->writer, NULL, ckr__writer_main, c);
	if (rc != 0) {
		ckr__log_stop(c);
		free_all(c);
		return ckr__err(-rc, "writer thread: %s", strerror(rc));
	}
	/* named, so a tool can place it (ps -L, /proc/PID/task/TID/comm) */
	pthread_setname_np(c->writer, "ckr-writer");
	*out = c;
	return 0;
}

int
ckr_checkpoint_wait(ckr *c)
{
	int rc;

	pthread_mutex_lock(&c->wlock);
	while (atomic_load(&c->busy) != 0)
		pthread_cond_wait(&c->wcond, &c->wlock);
	pthread_mutex_unlock(&c->wlock);
	rc = ckr__sticky(c);
	if (rc != 0)
		return ckr__err(rc, "%s: the writer failed: %s", c->dir,
			ckr__fail_msg(c));
	return 0;
}

int
ckr_point_of_consistency(ckr *c, unsigned flags)
{
	struct ckr__hot *h = &c->hot;
	uint64_t t0 = now_ns(), t1;
	int rc;

	if ((rc = ckr__sticky(c)) != 0)
		return ckr__err(rc, "%s: handle failed: %s", c->dir,
			ckr__fail_msg(c));
	/* acquire: the writer's reads of the last period are done (W5) */
	if (atomic_load_explicit(&c->busy, memory_order_acquire) != 0) {
		if (!(flags & CKR_POC_WAIT)) {
			c->st.poc_ns += now_ns() - t0;
			return 0;
		}
		if ((rc = ckr_checkpoint_wait(c)) != 0)
			return rc;
	}
	/* PrepareForNextCheckpoint */
	switch (h->algo) {
	case CKR_NAIVE:
		memcpy(c->shadow, h->as, h->nwords * 4);
		break;
	case CKR_BACOU:
		memset(h->blk, CKR__BLK_CLEAN, c->nobjs);
		break;
	case CKR_BAZZ:
		for (uint64_t g = 0; g < (h->nwords + 255) / 256; g++)
			for (int j = 0; j < 4; j++)
				h->bits[g].mw[j] = ~h->bits[g].mr[j];
		break;
	case CKR_IPP:
		h->cur ^= 1;
		break;
	default:
		break;
	}
	c->epoch++;
	pthread_mutex_lock(&c->llock);
	c->ck_log_seq = c->appended;
	c->ck_lpos = c->app_lpos;
	pthread_mutex_unlock(&c->llock);
	if (h->algo == CKR_FORK) {
		uint64_t f0 = now_ns();

		rc = ckr__fork_start(c);
		c->st.fork_ns += now_ns() - f0;
		if (rc != 0) {
			c->epoch--;
			return ckr__fail(c, rc);
		}
	}
	pthread_mutex_lock(&c->wlock);
	atomic_store(&c->busy, 1);
	pthread_cond_signal(&c->wcond);
	pthread_mutex_unlock(&c->wlock);
	t1 = now_ns();
	c->st.poc_ns += t1 - t0;
	return 1;
}

int
ckr_close(ckr *c)
{
	int rc;

	if (c == NULL)
		return 0;
	pthread_mutex_lock(&c->wlock);
	while (atomic_load(&c->busy) != 0)
		pthread_cond_wait(&c->wcond, &c->wlock);
	c->wstop = true;
	pthread_cond_broadcast(&c->wcond);
	pthread_mutex_unlock(&c->wlock);
	pthread_join(c->writer, NULL);
	if (ckr__sticky(c) == 0)
		ckr_log_commit(c);
	ckr__log_stop(c);
	rc = ckr__sticky(c);
	if (rc != 0)
		ckr__err(rc, "ckr_close: %s", ckr__fail_msg(c));
	free_all(c);
	return rc;
}

void
ckr_stats(const ckr *c, struct ckr_stats *st)
{
	ckr *m = (ckr *)c;

	pthread_mutex_lock(&m->wlock);
	*st = c->st;
	st->epoch = c->epoch;
	pthread_mutex_unlock(&m->wlock);
	pthread_mutex_lock(&m->llock);
	st->log_appended = c->appended;
	st->log_durable = c->durable;
	st->log_free = c->opts.log_capacity - (c->app_lpos - c->head_lpos);
	st->group_commits = c->st.group_commits;
	pthread_mutex_unlock(&m->llock);
}

int
ckr_slot_check(const char *dir, enum ckr_storage storage, int slot,
	uint64_t *epoch, uint64_t *log_seq)
{
	struct ckr_media m;
	struct ckr_slot_hdr h;
	bool created;
	int rc;

	if (slot < 0 || slot > 1)
		return ckr__err(CKR_EINVAL, "slot %d", slot);
	rc = ckr__media_open(&m, dir, "ckpt", storage, 0, 0, false, &created);
	if (rc != 0)
		return rc;
	rc = ckr__slot_read_hdr(&m, 0, 0, slot, &h, 0, false);
	ckr__media_close(&m);
	if (rc == 0) {
		if (epoch != NULL)
			*epoch = h.epoch;
		if (log_seq != NULL)
			*log_seq = h.log_seq;
	}
	return rc;
}
