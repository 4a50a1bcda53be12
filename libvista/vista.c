/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vista.c -- the instance: its log pool, its lanes, and the threads on them
 *
 * vista_init() opens (or creates) the log pool, checks its header, and
 * scans every lane for transactions a previous run left behind
 * (recover.c); their before-images go back when the segments they touched
 * are mapped.  Each thread that begins a transaction is given a lane of its
 * own, which it keeps until it exits (or calls vista_thread_detach): the
 * transaction calls then find their lane through a one-entry thread-local
 * cache, with no lock and no atomic instruction.
 *
 * Invariants
 *   V1. A lane has at most one owner (a thread token); only the owner
 *       changes its transaction state.  Owners are set and cleared under
 *       v->lock; a lane that holds an unrecovered transaction (pending) is
 *       never given to a thread.
 *   V2. A thread's cache (vista__tls.v, vid, lane) is trusted only when
 *       both the instance pointer and its id match: instance ids are never
 *       reused, so a cache entry of a finished instance never matches.
 *   V3. Thread exit releases the thread's lanes (aborting a transaction it
 *       left open) under the global lock, which vista_fini also takes, so
 *       an instance is never freed under a releasing thread.
 *   V4. Every pool of an instance has the log's persistence domain
 *       (segments are opened with the matching RIO_FORCE_* flag), so one
 *       rio_drain() on the log is a persist barrier for all of them.
 *
 * Lock order: glock -> v->lock -> heap locks (by segment index).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <unistd.h>

#include "rio_int.h"
#include "vista_int.h"

__thread struct vista__tls vista__tls
	__attribute__((tls_model("initial-exec")));

static pthread_mutex_t glock = PTHREAD_MUTEX_INITIALIZER;
static struct vista *instances; /* under glock */
static uint64_t next_id = 1;    /* under glock */
static uint64_t next_token;     /* atomic */
static pthread_key_t thread_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;

#define VISTA__DEFAULT_LOG_SIZE (8u << 20)
#define VISTA__DEFAULT_LANES 8u
#define VISTA__MAX_LANES 4096u

/* Lanes a thread owns, so that thread exit can give them back. */
struct vista__thread {
	uint64_t token;
	uint32_t n, cap;
	struct {
		uint64_t vid;
		unsigned idx;
	} *own;
};

static uint64_t
my_token(void)
{
	if (vista__tls.token == 0)
		/* relaxed: a unique number is all it gives; nothing is
		 * published with it. */
		vista__tls.token =
			__atomic_add_fetch(&next_token, 1, __ATOMIC_RELAXED);
	return vista__tls.token;
}

static vista *
find_instance(uint64_t id)
{
	for (vista *v = instances; v != NULL; v = v->gnext)
		if (v->id == id)
			return v;
	return NULL;
}

static void
thread_exit(void *arg)
{
	struct vista__thread *t = arg;

	pthread_mutex_lock(&glock);
	for (uint32_t i = 0; i < t->n; i++) {
		vista *v = find_instance(t->own[i].vid);
		struct vista_lane *l;

		if (v == NULL)
			continue;
		l = &v->lanes[t->own[i].idx];
		/* relaxed: only this thread stores its own token, and it
		 * sees its own stores; any other value means "not ours". */
		if (__atomic_load_n(&l->owner, __ATOMIC_RELAXED) != t->token)
			continue;
		/* A thread that dies inside a transaction leaves nothing
		 * half done: the transaction is rolled back. */
		if (l->state == VISTA__TX_ACTIVE)
			(void)vista__tx_abort_lane(l);
		/* Its no-flush group becomes durable (N2). */
		(void)vista__flush_held(l);
		/* relaxed: v->lock orders the hand-over of the lane to the
		 * next owner (vista__lane_get()); atomic only for the
		 * unlocked owner loads of vista__lane_peek(). */
		pthread_mutex_lock(&v->lock);
		__atomic_store_n(&l->owner, 0, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&v->lock);
	}
	pthread_mutex_unlock(&glock);
	free(t->own);
	free(t);
}

static void
key_init(void)
{
	(void)pthread_key_create(&thread_key, thread_exit);
}

/* Remember that this thread owns lane idx of v. */
static int
thread_note(vista *v, unsigned idx)
{
	struct vista__thread *t = vista__tls.rec;

	pthread_once(&key_once, key_init);
	if (t == NULL) {
		t = calloc(1, sizeof(*t));
		if (t == NULL)
			return -ENOMEM;
		t->token = my_token();
		vista__tls.rec = t;
		pthread_setspecific(thread_key, t);
	}
	for (uint32_t i = 0; i < t->n; i++) {
		if (t->own[i].vid == v->id) {
			t->own[i].idx = idx;
			return 0;
		}
	}
	if (t->n == t->cap) {
		uint32_t cap = t->cap ? 2 * t->cap : 4;
		void *nv = realloc(t->own, cap * sizeof(t->own[0]));
		if (nv == NULL)
			return -ENOMEM;
		t->own = nv;
		t->cap = cap;
	}
	t->own[t->n].vid = v->id;
	t->own[t->n].idx = idx;
	t->n++;
	return 0;
}

static void
thread_forget(const vista *v)
{
	struct vista__thread *t = vista__tls.rec;

	for (uint32_t i = 0; t != NULL && i < t->n; i++) {
		if (t->own[i].vid == v->id) {
			t->own[i] = t->own[--t->n];
			return;
		}
	}
}

static void
cache_set(const vista *v, struct vista_lane *l)
{
	vista__tls.v = v;
	vista__tls.vid = v->id;
	vista__tls.lane = l;
}

struct vista_lane *
vista__lane_peek(const vista *v)
{
	struct vista_lane *l = vista__lane_fast(v);
	uint64_t tok = vista__tls.token;

	if (l != NULL || v == NULL || tok == 0)
		return l;
	for (unsigned i = 0; i < v->nlanes; i++) {
		/* relaxed: looking for this thread's own token, which only
		 * this thread stores; no other lane's state is read. */
		if (__atomic_load_n(&v->lanes[i].owner, __ATOMIC_RELAXED) ==
		    tok) {
			cache_set(v, &v->lanes[i]);
			return &v->lanes[i];
		}
	}
	return NULL;
}

struct vista_lane *
vista__lane_get(vista *v, int *rc)
{
	struct vista_lane *l = vista__lane_peek(v);
	uint64_t tok = my_token();
	bool pending = false;

	if (l != NULL)
		return l;
	pthread_mutex_lock(&v->lock);
	for (unsigned i = 0; i < v->nlanes && l == NULL; i++) {
		struct vista_lane *c = &v->lanes[i];
		if (c->owner == 0 && c->pending)
			pending = true;
		else if (c->owner == 0)
			l = c;
	}
	if (l == NULL) {
		pthread_mutex_unlock(&v->lock);
		if (pending)
			*rc = vista__err(VISTA_EPENDING,
				"every free log lane of %s holds a transaction "
				"of an earlier run that touched a segment not "
				"mapped yet: map it to finish its recovery",
				rio_pool_path(v->log));
		else
			*rc = vista__err(VISTA_ENOLANE,
				"all %u log lanes of %s are owned by other "
				"threads", v->nlanes, rio_pool_path(v->log));
		return NULL;
	}
	*rc = 0;
	if (l->open.slot == NULL)
		*rc = vista__pageset_init(&l->open,
			(uint32_t)(v->lane_size / VISTA_PAGE));
	if (*rc == 0)
		*rc = thread_note(v, l->idx);
	if (*rc == 0 && !vista__tls.altstack) {
		/* Write faults of automatic transactions are taken on the
		 * alternate stack (librio's handler runs SA_ONSTACK). */
		*rc = rio_sigaltstack_ensure();
		vista__tls.altstack = *rc == 0;
	}
	if (*rc) {
		pthread_mutex_unlock(&v->lock);
		*rc = vista__err(*rc, "cannot give this thread a log lane: %s",
			vista_strerror(*rc));
		return NULL;
	}
	if (l->idx >= v->lanes_seen)
		/* relaxed: read by vista__lazy_cover() (log.c), which needs
		 * only the lanes that committed before its transaction. */
		__atomic_store_n(&v->lanes_seen, l->idx + 1, __ATOMIC_RELAXED);
	if (l->lazy)
		/* The previous owner's lazy truncation, written back by it on
		 * another CPU: durable before this thread's fences count on
		 * it (L6 in log.c). */
		vista__lazy_settle(l);
	/* relaxed: v->lock (held since the lane was found free) orders the
	 * previous owner's last use of the lane before ours. */
	__atomic_store_n(&l->owner, tok, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&v->lock);
	cache_set(v, l);
	return l;
}

int
vista_thread_detach(vista *v)
{
	struct vista_lane *l;

	if (v == NULL)
		return vista__err(-EINVAL, "vista_thread_detach: NULL instance");
	l = vista__lane_peek(v);
	if (l == NULL)
		return 0;
	if (l->state != VISTA__TX_IDLE)
		return vista__err(VISTA_EINTX,
			"vista_thread_detach: a transaction is active on this "
			"thread");
	/* N2: a held no-flush group commits before the lane goes. */
	int frc = vista__flush_held(l);
	if (frc)
		return frc;
	/* relaxed: as in thread_exit(). */
	pthread_mutex_lock(&v->lock);
	__atomic_store_n(&l->owner, 0, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&v->lock);
	thread_forget(v);
	if (vista__tls.v == v)
		vista__tls.v = NULL;
	return 0;
}

void
vista__tx_pop_slow(struct vista_lane *l)
{
	for (struct vista_lane **pp = &vista__tls.txs; *pp != NULL;
		pp = &(*pp)->tnext) {
		if (*pp == l) {
			*pp = l->tnext;
			return;
		}
	}
}

struct vista_lane *
vista__tx_first(void)
{
	return vista__tls.txs;
}

int
vista__set_fatal(vista *v, int rc, const char *what)
{
	int expect = 0;

	/* The first cause sticks.  Every reader loads the flag relaxed and
	 * nothing is published with it (the message is thread-local), so
	 * release is stronger than needed; relaxed would do. */
	__atomic_compare_exchange_n(&v->fatal, &expect, rc ? rc : -EIO, false,
		__ATOMIC_RELEASE, __ATOMIC_RELAXED);
	return vista__err(VISTA_EFATAL,
		"%s failed (%s): durability is uncertain; the instance refuses "
		"further transactions until it is reopened",
		what, vista_err_name(rc));
}

/* ---- the log pool ---- */

/* The log header's identity and versioning (librio/hdr.c, H1..H8): the
 * same verdicts as the segment header's (segment.c). */
static const struct rio__hdr_rule log_rule =
	VISTA__HDR_RULE("vista log", LOG);

static uint64_t
log_hdr_checksum(const struct vista_log_hdr *h)
{
	return rio_checksum(h, offsetof(struct vista_log_hdr, checksum),
		VISTA_LOG_CSUM_SEED);
}

/*
 * Lay out a new log: lane headers and an empty segment table first, then
 * the header, whose magic is stored last: a log whose magic is zero was
 * never finished and is laid out again.
 */
static int
log_format(vista *v, unsigned nlanes)
{
	struct vista_log_hdr *h = rio_pool_base(v->log), tmp;
	size_t user = rio_pool_size(v->log);
	size_t lane_size;
	uint64_t salt;

	if (nlanes == 0)
		nlanes = VISTA__DEFAULT_LANES;
	if (nlanes > VISTA__MAX_LANES)
		return vista__err(-EINVAL, "%u lanes: at most %u", nlanes,
			VISTA__MAX_LANES);
	lane_size = user > VISTA_LANES_OFF ?
		((user - VISTA_LANES_OFF) / nlanes) & ~(size_t)(VISTA_PAGE - 1) :
		0;
	if (lane_size < VISTA_MIN_LANE_SIZE)
		return vista__err(-EINVAL,
			"log %s: %zu bytes is too small for %u lanes of at "
			"least %u bytes",
			rio_pool_path(v->log), user, nlanes,
			VISTA_MIN_LANE_SIZE);
	if (getrandom(&salt, sizeof(salt), 0) != sizeof(salt))
		salt = (uint64_t)(uintptr_t)&tmp ^ 0x5bd1e9955bd1e995ull;
	memset((char *)h + VISTA_SEGTAB_OFF, 0, VISTA_LANES_OFF - VISTA_SEGTAB_OFF);
	for (unsigned i = 0; i < nlanes; i++) {
		struct vista_lane_hdr *lh = (void *)((char *)h + VISTA_LANES_OFF +
			(size_t)i * lane_size);
		uint64_t seed = vista__log_seed(salt, i);
		/* The lane header and an empty commit record (its check
		 * fails: no commit). */
		memset(lh, 0, sizeof(*lh) + sizeof(struct vista_lane_commit));
		lh->gen = 1;
		lh->gen_check = vista_lane_gen_check(seed, 1);
		lh->done_check = vista_lane_done_check(seed, 0, lh->done);
		/* Lane headers and the empty table: durable at the header's
		 * first drain, before the magic makes the log valid. */
		rio_flush(v->log, lh, sizeof(*lh) +
			sizeof(struct vista_lane_commit));
	}
	rio_flush(v->log, (char *)h + VISTA_SEGTAB_OFF,
		VISTA_LANES_OFF - VISTA_SEGTAB_OFF);
	memset(&tmp, 0, sizeof(tmp));
	memcpy(tmp.magic, VISTA_LOG_MAGIC, sizeof(tmp.magic));
	tmp.major = VISTA_LOG_MAJOR;
	tmp.minor = VISTA_LOG_MINOR;
	tmp.incompat = VISTA_LOG_INCOMPAT_NEW;
	tmp.hdr_size = VISTA_LOG_HDR_SIZE;
	tmp.nlanes = nlanes;
	tmp.lane_size = lane_size;
	tmp.lanes_off = VISTA_LANES_OFF;
	tmp.segtab_off = VISTA_SEGTAB_OFF;
	tmp.segtab_len = VISTA_MAX_SEGMENTS;
	tmp.salt = salt;
	tmp.checksum = log_hdr_checksum(&tmp);
	/* Its first drain also makes the lanes and the table durable. */
	vista__write_header(v->log, h, &tmp, sizeof(tmp));
	return 0;
}

static int
log_check(vista *v)
{
	const struct vista_log_hdr *h = rio_pool_base(v->log);
	const char *path = rio_pool_path(v->log);
	size_t user = rio_pool_size(v->log);

	struct rio__hdr_view hv = VISTA__HDR_VIEW(h,
		h->checksum == log_hdr_checksum(h));
	char why[160];
	/* The log is always written (vista has no read-only mode). */
	int rc = rio__hdr_check(&log_rule, &hv, RIO__HDR_WRITE, why,
		sizeof(why));

	if (rc)
		return vista__err(rc, "log %s: %s", path, why);
	/* Then this format's own fields. */
	if (h->hdr_size != VISTA_LOG_HDR_SIZE || h->nlanes == 0 ||
	    h->nlanes > VISTA__MAX_LANES || h->lane_size % VISTA_PAGE ||
	    h->lane_size < VISTA_MIN_LANE_SIZE ||
	    h->lane_size > UINT32_MAX || h->lanes_off != VISTA_LANES_OFF ||
	    h->segtab_off != VISTA_SEGTAB_OFF ||
	    h->segtab_len != VISTA_MAX_SEGMENTS ||
	    h->lanes_off + (uint64_t)h->nlanes * h->lane_size > user)
		return vista__err(VISTA_ECORRUPT,
			"log %s: invalid header fields (%u lanes of %llu bytes)",
			path, h->nlanes, (unsigned long long)h->lane_size);
	return 0;
}

static unsigned
force_flag(enum rio_domain d)
{
	switch (d) {
	case RIO_DOMAIN_BYTE:
		return RIO_FORCE_BYTE;
	case RIO_DOMAIN_CACHELINE:
		return RIO_FORCE_CACHELINE;
	default:
		return RIO_FORCE_PAGE;
	}
}

int
vista__log_pool_open(const struct vista_opts *o, const char *layout,
	const char *other, rio_pool **pool, int *lock_fd)
{
	struct rio_pool_opts po = { .layout = layout };
	unsigned rf = o->rio_flags & ~RIO_PROTECT;
	size_t size = o->log_size ? o->log_size : VISTA__DEFAULT_LOG_SIZE;
	int rc;

	rc = rio_pool_open_opts(o->log_path, rf, &po, pool);
	if (rc == -ENOENT) {
		rc = rio_pool_create_opts(o->log_path, size, rf, &po, pool);
		if (rc == -EEXIST) /* somebody else made it meanwhile */
			rc = rio_pool_open_opts(o->log_path, rf, &po, pool);
	}
	if (rc == RIO_ELAYOUT)
		return vista__err(VISTA_ELAYOUT, "%s is not a %s: %s",
			o->log_path, other, rio_errormsg());
	if (rc)
		return rc;
	*lock_fd = open(o->log_path, O_RDONLY | O_CLOEXEC);
	if (*lock_fd < 0)
		return vista__err(-errno, "open %s: %s", o->log_path,
			strerror(errno));
	if (flock(*lock_fd, LOCK_EX | LOCK_NB) != 0)
		return vista__err(errno == EWOULDBLOCK ? -EBUSY : -errno,
			"log %s is in use by another vista instance or process",
			o->log_path);
	return 0;
}

static int
log_open(vista *v, const struct vista_opts *o)
{
	int rc = vista__log_pool_open(o, VISTA_LOG_LAYOUT,
		"undo-mode vista log (a redo-mode log opens with "
		"VISTA_MODE_REDO)", &v->log, &v->log_lock_fd);

	if (rc)
		return rc;
	if (rio__all_zero(rio_pool_base(v->log), 8)) {
		rc = log_format(v, o->lanes);
		if (rc)
			return rc;
	}
	return log_check(v);
}

static void
lane_init(vista *v, unsigned i)
{
	struct vista_lane *l = &v->lanes[i];
	char *base = (char *)v->lhdr + v->lhdr->lanes_off + (size_t)i * v->lane_size;

	l->v = v;
	l->idx = i;
	l->hdr = (void *)base;
	l->cl = (void *)(base + sizeof(struct vista_lane_hdr));
	l->rec0 = base + sizeof(struct vista_lane_hdr) +
		sizeof(struct vista_lane_commit);
	l->end = base + v->lane_size;
	l->cur = l->start = l->rec0;
	l->clean = l->rec0; /* what earlier processes left: not known durable */
	l->gen = l->hdr->gen;
	l->seed = vista__log_seed(v->salt, i);
	l->open_runs_limit = v->vma_limit;
	vista__ranges_init(&l->ranges);
}

static void
instance_free(vista *v)
{
	vista__redo_free(v);
	if (v->lanes != NULL) {
		for (unsigned i = 0; i < v->nlanes; i++) {
			vista__ranges_fini(&v->lanes[i].ranges);
			vista__pageset_fini(&v->lanes[i].open);
			free(v->lanes[i].undo);
			free(v->lanes[i].vu);
			free(v->lanes[i].vub);
		}
		free(v->lanes);
	}
	if (v->log != NULL)
		rio_pool_close(v->log);
	if (v->log_lock_fd >= 0)
		close(v->log_lock_fd);
	pthread_mutex_destroy(&v->lock);
	free(v);
}

/* Protection budget: how many isolated open pages a lane may have before
 * opening them in aligned groups (each isolated page costs up to two VMAs
 * against vm.max_map_count). */
static uint32_t
vma_limit(unsigned nlanes)
{
	const char *env = getenv("VISTA_VMA_LIMIT");
	long max = 65530;
	FILE *f;

	if (env != NULL && *env)
		return (uint32_t)strtoul(env, NULL, 0);
	f = fopen("/proc/sys/vm/max_map_count", "r");
	if (f != NULL) {
		if (fscanf(f, "%ld", &max) != 1)
			max = 65530;
		fclose(f);
	}
	max = max / 4 / (long)nlanes;
	return max < 64 ? 64 : (uint32_t)max;
}

int
vista_init(const struct vista_opts *o, vista **out)
{
	vista *v;
	int rc;

	if (out == NULL || o == NULL || o->log_path == NULL ||
	    *o->log_path == '\0')
		return vista__err(-EINVAL, "vista_init: opts->log_path is "
					   "required");
	*out = NULL;
	if (o->rio_flags & RIO_RDONLY)
		return vista__err(-EINVAL,
			"vista_init: RIO_RDONLY is not supported");
	if (posix_memalign((void **)&v, 64, sizeof(*v)) != 0)
		return vista__err(-ENOMEM, "out of memory");
	memset(v, 0, sizeof(*v));
	v->log_lock_fd = -1;
	pthread_mutex_init(&v->lock, NULL);

	if (o->mode > VISTA_MODE_REDO) {
		rc = vista__err(-EINVAL, "vista_init: unknown mode %u",
			o->mode);
		goto fail;
	}
	rc = o->mode == VISTA_MODE_REDO ? vista__redo_init(v, o) :
		log_open(v, o);
	if (rc)
		goto fail;
	if (v->redo != NULL)
		goto registered;
	v->lhdr = rio_pool_base(v->log);
	v->segtab = (void *)((char *)v->lhdr + v->lhdr->segtab_off);
	v->nlanes = v->lhdr->nlanes;
	v->lane_size = v->lhdr->lane_size;
	v->salt = v->lhdr->salt;
	rio_pool_uuid(v->log, v->log_uuid);
	v->sealed = rio_pool_domain(v->log) == RIO_DOMAIN_BYTE;
	v->page_domain = rio_pool_domain(v->log) == RIO_DOMAIN_PAGE;
	/* L7 (log.c): with one lane no other thread can change what a
	 * commit record vouches for before the lane writes again (the
	 * one-fence commit runs in the cacheline domain only). */
	v->solo = v->nlanes == 1 && !v->sealed && !v->page_domain;
	/* A log of format 5.0 stays readable by its readers: new ranges
	 * are logged there with their before-images. */
	v->new_ok = (v->lhdr->incompat & VISTA_LOG_INCOMPAT_NEW) != 0;
	v->seg_rio_flags = (o->rio_flags & ~(RIO_PROTECT | RIO_FORCE_BYTE |
				   RIO_FORCE_CACHELINE | RIO_FORCE_PAGE)) |
		force_flag(rio_pool_domain(v->log));
	v->protect = (o->rio_flags & RIO_PROTECT) != 0;
	v->vma_limit = vma_limit(v->nlanes);
	if (posix_memalign((void **)&v->lanes, 64,
		    sizeof(*v->lanes) * v->nlanes) != 0) {
		rc = vista__err(-ENOMEM, "out of memory");
		goto fail;
	}
	memset(v->lanes, 0, sizeof(*v->lanes) * v->nlanes);
	for (unsigned i = 0; i < v->nlanes; i++)
		lane_init(v, i);
	rc = vista__recover_scan(v);
	if (rc)
		goto fail;

registered:
	pthread_mutex_lock(&glock);
	v->id = next_id++;
	v->gnext = instances;
	instances = v;
	pthread_mutex_unlock(&glock);
	*out = v;
	return 0;
fail:
	instance_free(v);
	return rc;
}

int
vista_fini(vista *v)
{
	int rc;

	if (v == NULL)
		return 0;
	if (v->redo != NULL) {
		rc = vista__redo_fini(v);
		if (rc == VISTA_EINTX)
			return rc;
	}
	pthread_mutex_lock(&glock);
	pthread_mutex_lock(&v->lock);
	for (unsigned i = 0; i < v->nlanes; i++) {
		if (v->lanes[i].state != VISTA__TX_IDLE) {
			pthread_mutex_unlock(&v->lock);
			pthread_mutex_unlock(&glock);
			return vista__err(VISTA_EINTX,
				"vista_fini: lane %u has an active transaction",
				i);
		}
	}
	/* N2: held no-flush groups commit before the segments go. */
	rc = 0;
	for (unsigned i = 0; i < v->nlanes; i++) {
		int frc = vista__flush_held(&v->lanes[i]);
		if (frc && rc == 0)
			rc = frc;
	}
	int urc = vista__seg_unmap_all(v);
	if (rc == 0)
		rc = urc;
	for (vista **pp = &instances; *pp != NULL; pp = &(*pp)->gnext) {
		if (*pp == v) {
			*pp = v->gnext;
			break;
		}
	}
	pthread_mutex_unlock(&v->lock);
	pthread_mutex_unlock(&glock);
	thread_forget(v);
	if (vista__tls.v == v)
		vista__tls.v = NULL;
	instance_free(v);
	return rc;
}

bool
vista_in_transaction(const vista *v)
{
	if (v != NULL && v->redo != NULL)
		return vista__redo_in_tx(v);
	struct vista_lane *l = vista__lane_peek(v);
	return l != NULL && l->state != VISTA__TX_IDLE;
}

unsigned
vista_pending_lanes(const vista *v)
{
	unsigned n = 0;

	if (v == NULL)
		return 0;
	if (v->redo != NULL)
		return vista__redo_pending(v);
	pthread_mutex_lock((pthread_mutex_t *)&v->lock);
	for (unsigned i = 0; i < v->nlanes; i++)
		n += v->lanes[i].pending;
	pthread_mutex_unlock((pthread_mutex_t *)&v->lock);
	return n;
}

/* ---- statistics ---- */

/* relaxed: per-lane counters (VISTA__STAT_ADD), each read whole; the sum
 * is not a consistent snapshot and need not be. */
#define VISTA__SUM(f) \
	out->f += __atomic_load_n(&l->st.f, __ATOMIC_RELAXED)

int
vista_stats(const vista *v, struct vista_stats *out)
{
	if (v == NULL || out == NULL)
		return vista__err(-EINVAL, "vista_stats: NULL argument");
	memset(out, 0, sizeof(*out));
	if (v->redo != NULL)
		vista__redo_stats(v, out);
	for (unsigned i = 0; i < v->nlanes; i++) {
		const struct vista_lane *l = &v->lanes[i];
		VISTA__SUM(tx_begun);
		VISTA__SUM(tx_committed);
		VISTA__SUM(tx_aborted);
		VISTA__SUM(set_ranges);
		VISTA__SUM(ranges_coalesced);
		VISTA__SUM(bytes_logged);
		VISTA__SUM(fences);
		VISTA__SUM(flushes);
		VISTA__SUM(auto_faults);
		VISTA__SUM(recovered_tx);
		VISTA__SUM(heap_allocs);
		VISTA__SUM(heap_frees);
		VISTA__SUM(auto_kept);
	}
	return 0;
}
