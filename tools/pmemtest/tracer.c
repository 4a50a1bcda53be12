/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tracer.c -- record what a process does to its pools, line by line
 *
 * The tracer keeps a shadow copy of every traced pool: the content the trace
 * has described so far.  At a flush it compares the flushed lines with the
 * shadow and logs the ones that changed (so the reader knows what the flush
 * wrote back), then logs the flush; at a fence (and a durability point, and
 * before an unmap) it compares every mapped page with the shadow -- all of
 * them (scan mode), or only the pages written since the last fence
 * (userfaultfd mode) -- logs the changed lines, then the fence.  Stores are
 * therefore known per line and per epoch, never per instruction: that is
 * all the persistence model needs (a line reaches memory whole, with the
 * content it had at its flush or later), and it keeps the traced program
 * fast.
 *
 * Invariants
 *   R1. After any entry point returns, shadow == pool content for every
 *       line the entry point examined, and every difference it found was
 *       logged as a LINE record before the FLUSH/FENCE/DPOINT/UNMAP record
 *       of that entry point (trace_layout.h T2).
 *   R2. One lock serializes the entry points: records of concurrent threads
 *       never interleave, and each fence's diff sees every store that
 *       happened before the fence on the thread issuing it.
 *   R3. The buffer is written out at every fence, so a program that dies
 *       leaves a trace complete up to its last fence.
 *   R4. A pool is identified by its canonical path: a pool closed and
 *       opened again keeps its id and its shadow, and the reopen logs only
 *       what changed while it was not mapped.
 *   R5. With userfaultfd, every page the program wrote is named by a TOUCH
 *       record before the next FLUSH covering it or the next FENCE,
 *       whichever comes first -- also when no line of it changed (a store
 *       that put back a line's old value).  The model needs this to tell
 *       a needed flush from a redundant one.  Scanning cannot see such
 *       stores: it emits no TOUCH.
 *   R6. With per-store capture (stores.c), every instruction that stores
 *       to a pool page is logged alone, in program order, as LINE records
 *       with PMT_LINE_STORE and its call stack: the lines it changed, or
 *       (a store of the old value) the line it wrote, unchanged.  A page
 *       that takes more than STEP_BUDGET stores in one epoch stops being
 *       stepped until the next fence: its stores are then described like
 *       userfaultfd's (LINE records without PMT_LINE_STORE at the next
 *       flush or fence, and a TOUCH), and the trace counts such pages in
 *       its END record's `coarse`.
 *
 * State machine: OFF --pmt_tracer_start--> ARMED --first traced pool
 * mapping (open_trace)--> ON --pmt_tracer_stop--> OFF.  The trace file is
 * created only in ON, so a wrapper (env, a shell) that loads the library
 * and execs the real program leaves nothing behind for the program to
 * trip on.  A fork()ed child goes OFF without writing (only the process
 * the driver started is traced).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "trace_layout.h"
#include "tracer_int.h"

#define MAX_REGIONS 128
#define PAGE 4096u
#define BUF_CAP (1u << 20)
#define STEP_BUDGET 256 /* stores stepped per page per epoch (R6) */

struct region {
	uint32_t pool;      /* trace pool id */
	bool mapped;
	bool uffd;          /* registered with userfaultfd */
	bool stores;        /* registered for per-store capture (R6) */
	uint64_t *open;     /* [page bit]: writable now (stores.c S1) */
	uint64_t *coarse;   /* [page bit]: over budget this epoch */
	uint16_t *steps;    /* [page]: stores stepped in epoch step_ep */
	uint32_t *step_ep;
	const void *handle; /* rio_pool, or NULL (libpmem) */
	char *base;
	size_t size;
	char *path;         /* canonical */
	uint8_t *shadow;
};

static struct {
	pthread_mutex_t lock;
	/* Stored under lock (relaxed atomic stores: the lock orders the
	 * tracer state), loaded unlocked by pmt_tracer_active() only as an
	 * early exit, plainly under lock elsewhere. */
	bool active;
	int fd;
	char *buf;
	size_t used;
	XXH3_state_t *xs;
	uint64_t records;
	struct region regions[MAX_REGIONS];
	unsigned nregions;
	char **filter;
	unsigned nfilter;
	struct timespec start;
	enum pmt_dirty_mode dirty;
	struct pmt_uffd *uffd;
	uint32_t next_thread;
	uint32_t epoch;     /* fences so far (step budgets) */
	uint64_t coarse;    /* pages x epochs over the step budget */
	uint64_t steps;     /* stores stepped */
	bool quiet;
	bool write_failed;
	char *path;   /* the trace, created at the first traced mapping */
} T = { .lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1 };

static __thread uint32_t my_thread;

static void
out_flush(void)
{
	size_t off = 0;

	while (off < T.used && !T.write_failed) {
		ssize_t n = write(T.fd, T.buf + off, T.used - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			/* The trace is incomplete; the driver sees no END. */
			T.write_failed = true;
			break;
		}
		off += (size_t)n;
	}
	XXH3_64bits_update(T.xs, T.buf, T.used);
	T.used = 0;
}

static void
emit(uint16_t type, uint16_t aux, const void *p1, size_t n1, const void *p2,
	size_t n2)
{
	size_t len = (n1 + n2 + 7) & ~(size_t)7;
	struct pmt_rec h = { .type = type, .aux = aux, .len = (uint32_t)len };

	if (T.used + sizeof(h) + len > BUF_CAP)
		out_flush();
	memcpy(T.buf + T.used, &h, sizeof(h));
	T.used += sizeof(h);
	if (n1)
		memcpy(T.buf + T.used, p1, n1);
	if (n2)
		memcpy(T.buf + T.used + n1, p2, n2);
	memset(T.buf + T.used + n1 + n2, 0, len - n1 - n2);
	T.used += len;
	T.records++;
}

static void
emit_line(struct region *r, size_t off, uint16_t aux)
{
	struct pmt_rec_line l = { .pool = r->pool, .line = off / PMT_LINE };
	emit(PMT_REC_LINE, aux, &l, sizeof(l), r->shadow + off, PMT_LINE);
}

static void
emit_store(struct region *r, size_t off, uint32_t stack)
{
	struct pmt_rec_line l = { .pool = r->pool, .stack = stack,
		.line = off / PMT_LINE };
	emit(PMT_REC_LINE, PMT_LINE_STORE, &l, sizeof(l), r->shadow + off,
		PMT_LINE);
}

static bool
bit_get(const uint64_t *b, size_t i)
{
	return b[i / 64] >> (i % 64) & 1;
}

static void
bit_set(uint64_t *b, size_t i, bool v)
{
	if (v)
		b[i / 64] |= 1ull << (i % 64);
	else
		b[i / 64] &= ~(1ull << (i % 64));
}

/* Log every line of [off, end) that differs from the shadow (R1). */
static void
diff_range(struct region *r, size_t off, size_t end)
{
	while (off < end) {
		size_t chunk = PAGE - off % PAGE;
		if (chunk > end - off)
			chunk = end - off;
		if (memcmp(r->base + off, r->shadow + off, chunk) != 0) {
			for (size_t l = off; l < off + chunk; l += PMT_LINE) {
				if (memcmp(r->base + l, r->shadow + l,
					    PMT_LINE) == 0)
					continue;
				memcpy(r->shadow + l, r->base + l, PMT_LINE);
				emit_line(r, l, 0);
			}
		}
		off += chunk;
	}
}

/* Pages written since userfaultfd last reported them, in runs: a TOUCH
 * record per run (R5). */
struct touch {
	struct region *r;
	size_t first, n; /* pages */
};

static void
touch_emit(struct touch *t)
{
	struct pmt_rec_touch rec;

	if (t->n == 0)
		return;
	rec = (struct pmt_rec_touch){ .pool = t->r->pool,
		.page = t->first, .npages = t->n };
	emit(PMT_REC_TOUCH, 0, &rec, sizeof(rec), NULL, 0);
	t->n = 0;
}

static void
touch_add(struct touch *t, size_t page)
{
	if (t->n > 0 && page == t->first + t->n) {
		t->n++;
		return;
	}
	touch_emit(t);
	t->first = page;
	t->n = 1;
}

static void
diff_page_cb(void *page, void *arg)
{
	struct touch *t = arg;
	size_t off = (size_t)((char *)page - t->r->base);
	diff_range(t->r, off, off + PAGE);
	touch_add(t, off / PAGE);
}

/*
 * Describe the pages of [off, end) of r written since they were last
 * looked at: with userfaultfd, only those pages are compared, and a TOUCH
 * record names them (R5).  Returns false if userfaultfd could not say
 * (the caller compares instead).
 */
static bool
collect(struct region *r, size_t off, size_t end)
{
	struct touch t = { .r = r };
	int rc;

	if (r->stores) {
		/* Only pages left writable hold stores not yet logged
		 * (stores.c S1): compare them, name them, protect them. */
		for (size_t pg = off / PAGE; pg * PAGE < end; pg++) {
			if (r->open[pg / 64] == 0) {
				pg |= 63;
				continue;
			}
			if (!bit_get(r->open, pg))
				continue;
			diff_range(r, pg * PAGE, pg * PAGE + PAGE);
			if (bit_get(r->coarse, pg))
				touch_add(&t, pg);
			pmt_stores_protect(r->base + pg * PAGE, PAGE);
			bit_set(r->open, pg, false);
			bit_set(r->coarse, pg, false);
		}
		touch_emit(&t);
		return true;
	}
	if (!r->uffd)
		return false;
	rc = pmt_uffd_collect(T.uffd, r->base + off, end - off, diff_page_cb,
		&t);
	touch_emit(&t);
	return rc == 0;
}

static void
diff_region(struct region *r)
{
	if (!collect(r, 0, r->size))
		diff_range(r, 0, r->size);
}

static void
diff_all(void)
{
	for (unsigned i = 0; i < T.nregions; i++)
		if (T.regions[i].mapped)
			diff_region(&T.regions[i]);
}

static struct region *
region_of(const void *addr)
{
	for (unsigned i = 0; i < T.nregions; i++) {
		struct region *r = &T.regions[i];
		if (r->mapped && (const char *)addr >= r->base &&
		    (const char *)addr < r->base + r->size)
			return r;
	}
	return NULL;
}

static uint32_t
thread_no(void)
{
	if (my_thread == 0)
		my_thread = ++T.next_thread;
	return my_thread;
}

/* realpath() of a file that may not exist yet: its directory's, + name. */
static char *
canonical(const char *path)
{
	char *r = realpath(path, NULL), *dir, *slash, *out;

	if (r != NULL)
		return r;
	dir = strdup(path);
	if (dir == NULL)
		return NULL;
	slash = strrchr(dir, '/');
	if (slash == NULL) {
		free(dir);
		dir = strdup(".");
		slash = NULL;
		r = realpath(".", NULL);
		if (r == NULL || asprintf(&out, "%s/%s", r, path) < 0)
			out = NULL;
	} else {
		*slash = '\0';
		r = realpath(*dir ? dir : "/", NULL);
		if (r == NULL || asprintf(&out, "%s/%s", r, slash + 1) < 0)
			out = NULL;
	}
	free(r);
	free(dir);
	return out;
}

static bool
wanted(const char *cpath)
{
	if (T.nfilter == 0)
		return true;
	for (unsigned i = 0; i < T.nfilter; i++)
		if (strcmp(T.filter[i], cpath) == 0)
			return true;
	return false;
}

static void
warn(const char *fmt, const char *arg)
{
	if (!T.quiet) {
		fprintf(stderr, "pmemtest-trace: ");
		fprintf(stderr, fmt, arg);
		fputc('\n', stderr);
	}
}

static void
on_fork_child(void)
{
	/* Only the process the driver started is traced (state machine). */
	if (T.fd >= 0)
		close(T.fd);
	T.fd = -1;
	__atomic_store_n(&T.active, false, __ATOMIC_RELAXED);
	pmt_stores_forked();
	pthread_mutex_init(&T.lock, NULL);
}

static int
parse_filter(const char *pools)
{
	const char *p = pools;

	while (p != NULL && *p) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		if (n > 0) {
			char *one = strndup(p, n), *c;
			char **f = realloc(T.filter,
				(T.nfilter + 1) * sizeof(*T.filter));
			if (one == NULL || f == NULL)
				return -ENOMEM;
			T.filter = f;
			c = canonical(one);
			free(one);
			if (c == NULL)
				return -ENOMEM;
			T.filter[T.nfilter++] = c;
		}
		p = nl ? nl + 1 : NULL;
	}
	return 0;
}

int
pmt_tracer_start(const struct pmt_tracer_cfg *cfg)
{
	struct pmt_trace_hdr h;
	int rc;

	pthread_mutex_lock(&T.lock);
	if (T.active) {
		pthread_mutex_unlock(&T.lock);
		return -EBUSY;
	}
	/* A new trace knows no pool yet (a process may trace twice: the
	 * driver's own tests do). */
	for (unsigned i = 0; i < T.nregions; i++) {
		free(T.regions[i].shadow);
		free(T.regions[i].path);
		free(T.regions[i].open);
		free(T.regions[i].coarse);
		free(T.regions[i].steps);
		free(T.regions[i].step_ep);
	}
	for (unsigned i = 0; i < T.nfilter; i++)
		free(T.filter[i]);
	free(T.filter);
	free(T.buf);
	if (T.xs != NULL)
		XXH3_freeState(T.xs);
	T.filter = NULL;
	T.buf = NULL;
	T.xs = NULL;
	T.nfilter = T.nregions = 0;
	T.records = 0;
	T.used = 0;
	T.epoch = 0;
	T.coarse = T.steps = 0;
	T.write_failed = false;
	rc = parse_filter(cfg->pools);
	if (rc)
		goto fail;
	T.buf = malloc(BUF_CAP);
	T.xs = XXH3_createState();
	if (T.buf == NULL || T.xs == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	XXH3_64bits_reset_withSeed(T.xs, PMT_END_CSUM_SEED);
	free(T.path);
	T.path = strdup(cfg->trace_path);
	if (T.path == NULL) {
		rc = -ENOMEM;
		goto fail;
	}
	T.quiet = cfg->quiet;
	T.dirty = cfg->dirty;
	if (T.dirty == PMT_DIRTY_STORES || T.dirty == PMT_DIRTY_AUTO) {
		if (pmt_stores_open() == 0) {
			T.dirty = PMT_DIRTY_STORES;
		} else if (T.dirty == PMT_DIRTY_STORES) {
			warn("per-store capture unavailable (%s); tracking "
			     "pages instead", "needs userfaultfd "
			     "write-protection and permission");
			T.dirty = PMT_DIRTY_AUTO;
		}
	}
	if (T.dirty == PMT_DIRTY_STORES) {
		/* no page tracker: the store capture knows every store */
	} else if (T.dirty != PMT_DIRTY_SCAN && pmt_uffd_open(&T.uffd) != 0) {
		if (T.dirty == PMT_DIRTY_UFFD)
			warn("userfaultfd write tracking unavailable (%s); "
			     "scanning pools instead", "needs kernel >= 6.7 "
			     "and CAP_SYS_PTRACE or "
			     "vm.unprivileged_userfaultfd=1");
		T.dirty = PMT_DIRTY_SCAN;
	} else if (T.dirty == PMT_DIRTY_AUTO) {
		T.dirty = PMT_DIRTY_UFFD;
	}
	clock_gettime(CLOCK_REALTIME, &T.start);
	memset(&h, 0, sizeof(h));
	memcpy(h.magic, PMT_TRACE_MAGIC, sizeof(h.magic));
	h.major = PMT_TRACE_MAJOR;
	h.minor = PMT_TRACE_MINOR;
	h.hdr_size = sizeof(h);
	h.line_size = PMT_LINE;
	h.pid = (uint32_t)getpid();
	h.flags = T.dirty == PMT_DIRTY_UFFD ? PMT_TRACE_UFFD :
		T.dirty == PMT_DIRTY_STORES ? PMT_TRACE_STORES : 0;
	h.start_ns = (uint64_t)T.start.tv_sec * 1000000000ull +
		(uint64_t)T.start.tv_nsec;
	/* rio_checksum() is XXH3-64; the tracer does not link librio. */
	h.checksum = XXH3_64bits_withSeed(&h,
		offsetof(struct pmt_trace_hdr, checksum), PMT_HDR_CSUM_SEED);
	memcpy(T.buf, &h, sizeof(h));
	T.used = sizeof(h);
	pmt_callsite_init(cfg->stack_depth, emit);
	pthread_atfork(NULL, NULL, on_fork_child);
	__atomic_store_n(&T.active, true, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&T.lock);
	return 0;
fail:
	pthread_mutex_unlock(&T.lock);
	return rc;
}

bool
pmt_tracer_active(void)
{
	/* An unlocked early exit for the hot entry points; every caller
	 * takes T.lock and tests T.active again before it reads tracer
	 * state, and the lock orders that state.  So acquire (which pairs
	 * with nothing: T.active is stored under T.lock, relaxed) is
	 * stronger than needed; relaxed would do. */
	return __atomic_load_n(&T.active, __ATOMIC_ACQUIRE);
}

/* Is [base, base+size) still mapped?  (The program may have unmapped a
 * libpmem mapping with munmap instead of pmem_unmap.) */
static bool
still_mapped(void *base, size_t size)
{
	unsigned char v;
	for (size_t off = 0; off < size; off += PAGE)
		if (mincore((char *)base + off, 1, &v) != 0)
			return false;
	return true;
}

void
pmt_tracer_stop(int sig)
{
	struct pmt_rec_end e;

	pthread_mutex_lock(&T.lock);
	if (!T.active || T.fd < 0) {
		/* ARMED, never ON: no trace to finish */
		__atomic_store_n(&T.active, false, __ATOMIC_RELAXED);
		pthread_mutex_unlock(&T.lock);
		return;
	}
	/* Stores after the last fence are part of the final crash state. */
	for (unsigned i = 0; i < T.nregions; i++) {
		struct region *r = &T.regions[i];
		if (r->mapped && still_mapped(r->base, r->size))
			diff_range(r, 0, r->size);
	}
	out_flush();
	e.records = T.records;
	e.checksum = XXH3_64bits_digest(T.xs);
	emit(PMT_REC_END, (uint16_t)sig, &e, sizeof(e), NULL, 0);
	out_flush();
	close(T.fd);
	T.fd = -1;
	__atomic_store_n(&T.active, false, __ATOMIC_RELAXED);
	if (T.uffd != NULL)
		pmt_uffd_close(T.uffd);
	T.uffd = NULL;
	for (unsigned i = 0; i < T.nregions; i++)
		T.regions[i].stores = false;
	pmt_stores_close(); /* unregisters every pool */
	pthread_mutex_unlock(&T.lock);
}

/* ARMED -> ON: create the trace (O_EXCL: never two writers). */
static bool
open_trace(void)
{
	if (T.fd >= 0)
		return true;
	T.fd = open(T.path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (T.fd < 0) {
		warn("cannot create the trace %s; not tracing", T.path);
		__atomic_store_n(&T.active, false, __ATOMIC_RELAXED);
		return false;
	}
	return true;
}

static bool
existed_before(const char *cpath)
{
	struct stat st;

	if (stat(cpath, &st) != 0)
		return false;
	return st.st_ctim.tv_sec < T.start.tv_sec ||
		(st.st_ctim.tv_sec == T.start.tv_sec &&
		 st.st_ctim.tv_nsec < T.start.tv_nsec);
}

static void
region_map(struct region *r, void *base)
{
	r->base = base;
	r->mapped = true;
	/* A region that cannot be registered is scanned (U2). */
	if (T.dirty == PMT_DIRTY_UFFD)
		r->uffd = pmt_uffd_register(T.uffd, r->base, r->size) == 0;
	if (T.dirty == PMT_DIRTY_STORES) {
		size_t np = (r->size + PAGE - 1) / PAGE, nw = (np + 63) / 64;
		if (r->open == NULL) {
			r->open = calloc(nw, sizeof(*r->open));
			r->coarse = calloc(nw, sizeof(*r->coarse));
			r->steps = calloc(np, sizeof(*r->steps));
			r->step_ep = calloc(np, sizeof(*r->step_ep));
		} else {
			memset(r->open, 0, nw * sizeof(*r->open));
			memset(r->coarse, 0, nw * sizeof(*r->coarse));
		}
		r->stores = r->open && r->coarse && r->steps && r->step_ep &&
			pmt_stores_register(r->base, r->size) == 0;
	}
}

void
pmt_tracer_mapped(const void *handle, void *base, size_t size,
	const char *path)
{
	char *cpath;
	struct region *r = NULL;

	if (!pmt_tracer_active())
		return;
	cpath = canonical(path);
	if (cpath == NULL)
		return;
	pthread_mutex_lock(&T.lock);
	if (!T.active || !wanted(cpath))
		goto out;
	for (unsigned i = 0; i < T.nregions; i++)
		if (strcmp(T.regions[i].path, cpath) == 0)
			r = &T.regions[i];
	if (r != NULL) {
		struct pmt_rec_poolref m = { .pool = r->pool };
		if (r->mapped || r->size != size) {
			warn("%s is mapped twice or changed size; only its "
			     "first mapping is traced", cpath);
			goto out;
		}
		r->handle = handle;
		region_map(r, base);
		emit(PMT_REC_MAP, 0, &m, sizeof(m), NULL, 0);
		/* What changed while it was not mapped (R4). */
		diff_range(r, 0, r->size);
		goto out;
	}
	if (T.nregions == MAX_REGIONS) {
		warn("too many pools; %s is not traced", cpath);
		goto out;
	}
	if (!open_trace())
		goto out;
	r = &T.regions[T.nregions];
	memset(r, 0, sizeof(*r));
	r->shadow = malloc(size);
	if (r->shadow == NULL) {
		warn("out of memory for the shadow of %s", cpath);
		goto out;
	}
	r->pool = T.nregions++;
	r->size = size;
	r->handle = handle;
	r->path = cpath;
	cpath = NULL;
	memcpy(r->shadow, base, size);
	{
		struct pmt_rec_pool pr = { .pool = r->pool, .size = size };
		uint16_t aux = existed_before(r->path) ? PMT_POOL_EXISTED : 0;
		emit(PMT_REC_POOL, aux, &pr, sizeof(pr), r->path,
			strlen(r->path) + 1);
	}
	for (size_t off = 0; off < size; off += PMT_LINE) {
		static const uint8_t zero[PMT_LINE];
		if (memcmp(r->shadow + off, zero, PMT_LINE) != 0)
			emit_line(r, off, PMT_LINE_INIT);
	}
	region_map(r, base);
out:
	pthread_mutex_unlock(&T.lock);
	free(cpath);
}

void
pmt_tracer_unmapping(void *base, size_t size)
{
	struct region *r;

	if (!pmt_tracer_active())
		return;
	pthread_mutex_lock(&T.lock);
	r = T.active ? region_of(base) : NULL;
	if (r != NULL && r->base == base && r->size == size) {
		struct pmt_rec_poolref m = { .pool = r->pool };
		diff_region(r);
		emit(PMT_REC_UNMAP, 0, &m, sizeof(m), NULL, 0);
		if (r->uffd)
			pmt_uffd_unregister(T.uffd, r->base, r->size);
		if (r->stores)
			pmt_stores_unregister(r->base, r->size);
		r->uffd = false;
		r->stores = false;
		r->mapped = false;
		r->handle = NULL;
	}
	pthread_mutex_unlock(&T.lock);
}

void
pmt_tracer_flush(const void *addr, size_t len)
{
	struct region *r;

	if (!pmt_tracer_active() || len == 0)
		return;
	pthread_mutex_lock(&T.lock);
	r = T.active ? region_of(addr) : NULL;
	if (r != NULL) {
		size_t off = (size_t)((const char *)addr - r->base);
		size_t end = off + len > r->size ? r->size : off + len;
		struct pmt_rec_flush f;
		size_t plo = off & ~(size_t)(PAGE - 1);
		size_t phi = (end + PAGE - 1) & ~(size_t)(PAGE - 1);
		off &= ~(size_t)(PMT_LINE - 1);
		end = (end + PMT_LINE - 1) & ~(size_t)(PMT_LINE - 1);
		/* R1: what this flush writes back.  R5: and which of its
		 * pages were written since they were last looked at. */
		if (r->stores) {
			collect(r, plo, phi > r->size ? r->size : phi);
			diff_range(r, off, end);
		} else if (!collect(r, plo, phi > r->size ? r->size : phi)) {
			struct touch t = { .r = r };
			diff_range(r, off, end);
			if (r->uffd) /* could not tell: maybe all of them */
				for (size_t p = plo; p < phi; p += PAGE)
					touch_add(&t, p / PAGE);
			touch_emit(&t);
		}
		f = (struct pmt_rec_flush){ .pool = r->pool,
			.thread = thread_no(), .line = off / PMT_LINE,
			.nlines = (end - off) / PMT_LINE,
			.stack = pmt_callsite_capture() };
		emit(PMT_REC_FLUSH, 0, &f, sizeof(f), NULL, 0);
	}
	pthread_mutex_unlock(&T.lock);
}

void
pmt_tracer_fence(void)
{
	struct pmt_rec_fence f;

	if (!pmt_tracer_active())
		return;
	pthread_mutex_lock(&T.lock);
	if (T.active && T.nregions > 0) {
		diff_all();
		f = (struct pmt_rec_fence){ .thread = thread_no(),
			.stack = pmt_callsite_capture() };
		emit(PMT_REC_FENCE, 0, &f, sizeof(f), NULL, 0);
		T.epoch++; /* new step budgets (R6) */
		out_flush(); /* R3 */
	}
	pthread_mutex_unlock(&T.lock);
}

void
pmt_tracer_dpoint(const void *handle, const char *what)
{
	struct pmt_rec_dpoint d = { .pool = PMT_ALL_POOLS };

	if (!pmt_tracer_active())
		return;
	pthread_mutex_lock(&T.lock);
	if (T.active && T.nregions > 0) {
		diff_all();
		for (unsigned i = 0; handle != NULL && i < T.nregions; i++)
			if (T.regions[i].mapped && T.regions[i].handle == handle)
				d.pool = T.regions[i].pool;
		if (handle == NULL || d.pool != PMT_ALL_POOLS) {
			d.stack = pmt_callsite_capture();
			what = what ? what : "";
			emit(PMT_REC_DPOINT, 0, &d, sizeof(d), what,
				strlen(what) + 1);
		}
	}
	pthread_mutex_unlock(&T.lock);
}

void
pmt_tracer_discard(const void *addr, size_t len)
{
	struct region *r;

	if (!pmt_tracer_active())
		return;
	pthread_mutex_lock(&T.lock);
	r = T.active ? region_of(addr) : NULL;
	if (r != NULL && len > 0) {
		size_t off = (size_t)((const char *)addr - r->base);
		size_t end = off + len > r->size ? r->size : off + len;
		struct pmt_rec_discard d;
		off &= ~(size_t)(PMT_LINE - 1);
		end = (end + PMT_LINE - 1) & ~(size_t)(PMT_LINE - 1);
		diff_range(r, off, end); /* R1: the content discarded */
		d = (struct pmt_rec_discard){ .pool = r->pool,
			.line = off / PMT_LINE, .nlines = (end - off) / PMT_LINE };
		emit(PMT_REC_DISCARD, 0, &d, sizeof(d), NULL, 0);
	}
	pthread_mutex_unlock(&T.lock);
}

/* ---- per-store capture (stores.c calls these from its handlers) ---- */

bool
pmt_tracer_step_begin(void *addr, void *pc)
{
	struct region *r;
	bool step = false;

	(void)pc;
	pthread_mutex_lock(&T.lock); /* S3: never held by this thread */
	r = T.active ? region_of(addr) : NULL;
	if (r != NULL && r->stores) {
		size_t pg = (size_t)((char *)addr - r->base) / PAGE;
		bit_set(r->open, pg, true);
		if (r->step_ep[pg] != T.epoch) {
			r->step_ep[pg] = T.epoch;
			r->steps[pg] = 0;
		}
		if (r->steps[pg] < STEP_BUDGET) {
			r->steps[pg]++;
			step = true;
		} else if (!bit_get(r->coarse, pg)) {
			bit_set(r->coarse, pg, true); /* R6 */
			T.coarse++;
		}
	}
	pthread_mutex_unlock(&T.lock);
	return step;
}

void
pmt_tracer_step_end(void *addr, void *pc, void *trap_pc, void *const *pages,
	unsigned n)
{
	uint32_t stack = 0;
	bool any = false;
	struct region *r;

	pthread_mutex_lock(&T.lock);
	if (!T.active) {
		pthread_mutex_unlock(&T.lock);
		return;
	}
	T.steps++;
	for (unsigned i = 0; i < n; i++) {
		size_t off, pg;
		r = region_of(pages[i]);
		if (r == NULL || !r->stores)
			continue;
		off = (size_t)((char *)pages[i] - r->base);
		pg = off / PAGE;
		if (memcmp(r->base + off, r->shadow + off, PAGE) != 0)
			for (size_t l = off; l < off + PAGE; l += PMT_LINE) {
				if (memcmp(r->base + l, r->shadow + l,
					    PMT_LINE) == 0)
					continue;
				if (stack == 0)
					stack = pmt_callsite_capture_store(pc,
						trap_pc);
				memcpy(r->shadow + l, r->base + l, PMT_LINE);
				emit_store(r, l, stack); /* R6 */
				any = true;
			}
		if (!bit_get(r->coarse, pg)) {
			pmt_stores_protect(pages[i], PAGE); /* S1 */
			bit_set(r->open, pg, false);
		}
	}
	r = any ? NULL : region_of(addr);
	if (r != NULL && r->stores) {
		/* The old value stored again: the line was written. */
		size_t l = (size_t)((char *)addr - r->base) &
			~(size_t)(PMT_LINE - 1);
		emit_store(r, l, pmt_callsite_capture_store(pc, trap_pc));
	}
	pthread_mutex_unlock(&T.lock);
}

/* ---- the librio hook table ---- */

static void
ops_flush(const rio_pool *p, const void *addr, size_t len, const void *caller)
{
	(void)p;
	(void)caller;
	pmt_tracer_flush(addr, len);
}

static void
ops_drain(const rio_pool *p, const void *caller)
{
	(void)p;
	(void)caller;
	pmt_tracer_fence();
}

static void
ops_discard(const rio_pool *p, const void *addr, size_t len,
	const void *caller)
{
	(void)p;
	(void)caller;
	pmt_tracer_discard(addr, len);
}

static void
ops_dpoint(const rio_pool *p, const char *what, const void *caller)
{
	(void)caller;
	pmt_tracer_dpoint(p, what);
}

static void
ops_mapped(const rio_pool *p, void *base, size_t size, const char *path)
{
	pmt_tracer_mapped(p, base, size, path);
}

static void
ops_unmapping(const rio_pool *p, void *base, size_t size)
{
	(void)p;
	pmt_tracer_unmapping(base, size);
}

const struct rio_trace_ops pmt_rio_ops = {
	.flush = ops_flush,
	.drain = ops_drain,
	.durable_point = ops_dpoint,
	.discard = ops_discard,
	.pool_mapped = ops_mapped,
	.pool_unmapping = ops_unmapping,
};
