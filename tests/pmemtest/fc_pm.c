/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * fc_pm.c -- the Rio file cache under pmemtest (suite crash-pm)
 *
 *   fc_pm setup DIR         DIR/files/{a,b,c} with known contents, and an
 *                           empty cache DIR/cache.pool for DIR/files
 *   fc_pm run DIR           M block writes through rio_fc_pwrite, then
 *                           _exit (a crash: nothing written back)
 *   fc_pm check IMAGE DIR   put DIR/files back as `setup` left them, open
 *                           the cache image (its recovery writes the dirty
 *                           blocks back), check the files
 *
 * The writes are a fixed sequence W1..WM: whole blocks, two blocks at
 * once, parts of a block, and whole-block appends that grow file c.  After
 * each returns, the writer declares a durability point
 * (rio_durable_point): pmemtest warns if any line of the pool is then not
 * yet durable -- an acknowledged write that a power failure could lose.
 *
 * The checker replays the sequence in memory.  After any crash the files
 * must be exactly S_K, the state after the first K writes, for some K --
 * or, while a multi-block write W_K+1 was in flight, S_K with each block
 * of W_K+1 either old or new (each block of a write is atomic; the write
 * as a whole is not).  Anything else is a torn block, a lost or reordered
 * write, or a wrong size: inconsistent.
 *
 * The writer never writes back (no thread, a cache with room to spare, no
 * close), so the disk files stay as `setup` left them; each check restores
 * them to that state -- contents, size and modification time, the identity
 * the cache checks -- before recovery.  Checks must run one at a time
 * (pmemtest --jobs 1): they share DIR/files.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <rio_fc.h>

#define NFILES 3
#define BLK RIO_FC_BLOCK
#define AB_BLOCKS 4     /* files a and b */
#define C_BLOCKS 1      /* file c at first; appends grow it */
#define NWRITES 16
#define MAX_SIZE ((AB_BLOCKS + NWRITES) * BLK)

static const char *const names[NFILES] = { "a", "b", "c" };

#define FAIL(...)                                     \
	do {                                          \
		fprintf(stderr, "fc_pm: " __VA_ARGS__); \
		fputc('\n', stderr);                  \
		return 1;                             \
	} while (0)

/* ---- the write sequence and the model ---- */

struct wr {
	int file;
	uint64_t off;
	size_t len;
};

struct state {
	uint8_t data[NFILES][MAX_SIZE];
	uint64_t size[NFILES];
};

/* The word written at `pos` of `file` by write k (k = 0: setup). */
static uint64_t
word(unsigned k, int file, uint64_t pos)
{
	return (uint64_t)k << 40 | (uint64_t)file << 32 | pos >> 3;
}

static void
fill(uint8_t *buf, unsigned k, int file, uint64_t off, size_t len)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t w = word(k, file, off + i);
		memcpy(buf + i, &w, 8);
	}
}

/* W_k, k = 1..NWRITES, given the sizes before it. */
static struct wr
write_of(unsigned k, const uint64_t *size)
{
	switch (k % 4) {
	case 0: /* one whole block */
		return (struct wr){ (int)(k / 4 % 2), (k * 5 % AB_BLOCKS) * BLK,
			BLK };
	case 1: /* two whole blocks */
		return (struct wr){ (int)(k % 2),
			(k * 3 % (AB_BLOCKS - 1)) * BLK, 2 * BLK };
	case 2: { /* part of a block */
		uint64_t in = (k * 40u % 3584u) & ~7u;
		size_t len = (64 + k * 24u % 448u) & ~(size_t)7;
		return (struct wr){ (int)(k / 4 % 2),
			(k * 7 % AB_BLOCKS) * BLK + in, len };
	}
	default: /* a whole block appended to c */
		return (struct wr){ 2, size[2], BLK };
	}
}

static void
initial(struct state *s)
{
	memset(s, 0, sizeof(*s));
	for (int f = 0; f < NFILES; f++) {
		s->size[f] = (f == 2 ? C_BLOCKS : AB_BLOCKS) * BLK;
		fill(s->data[f], 0, f, 0, s->size[f]);
	}
}

static void
apply(struct state *s, unsigned k, struct wr w)
{
	fill(s->data[w.file] + w.off, k, w.file, w.off, w.len);
	if (w.off + w.len > s->size[w.file])
		s->size[w.file] = w.off + w.len;
}

/* ---- setup ---- */

static char *
path_of(const char *dir, const char *rel)
{
	char *p;
	if (asprintf(&p, "%s/%s", dir, rel) < 0)
		abort();
	return p;
}

/* Write DIR/files as `setup` makes them, keeping each file's inode; with
 * times, also set the modification times recorded at setup. */
static int
put_files(const char *dir, const struct timespec *times)
{
	static struct state s;
	initial(&s);
	for (int f = 0; f < NFILES; f++) {
		char rel[16];
		snprintf(rel, sizeof(rel), "files/%s", names[f]);
		char *p = path_of(dir, rel);
		int fd = open(p, O_WRONLY | O_CREAT, 0644);
		free(p);
		if (fd < 0)
			FAIL("open %s: %s", rel, strerror(errno));
		int bad = ftruncate(fd, 0) ||
			pwrite(fd, s.data[f], s.size[f], 0) != (ssize_t)s.size[f] ||
			fsync(fd);
		if (!bad && times != NULL) {
			struct timespec ts[2] = { times[f], times[f] };
			bad = futimens(fd, ts) != 0;
		}
		close(fd);
		if (bad)
			FAIL("writing %s: %s", rel, strerror(errno));
	}
	return 0;
}

static int
setup(const char *dir)
{
	char *files = path_of(dir, "files"), *pool = path_of(dir, "cache.pool");
	mkdir(dir, 0755);
	mkdir(files, 0755);
	unlink(pool);
	if (put_files(dir, NULL))
		return 1;
	/* The modification times the cache will record, for the checks. */
	struct timespec times[NFILES];
	for (int f = 0; f < NFILES; f++) {
		char rel[16];
		snprintf(rel, sizeof(rel), "files/%s", names[f]);
		char *p = path_of(dir, rel);
		struct stat st;
		int e = stat(p, &st);
		free(p);
		if (e)
			FAIL("stat: %s", strerror(errno));
		times[f] = st.st_mtim;
	}
	char *tp = path_of(dir, "times");
	FILE *t = fopen(tp, "w");
	free(tp);
	if (t == NULL || fwrite(times, sizeof(times), 1, t) != 1 || fclose(t))
		FAIL("writing the times: %s", strerror(errno));
	struct rio_fc_opts o = { .flags = RIO_FC_CREATE | RIO_FC_NO_THREAD,
		.pool_size = 1u << 20, .pool_flags = RIO_NO_SIGNALS };
	rio_fc_cache *c;
	if (rio_fc_cache_open(pool, files, &o, &c) || rio_fc_cache_close(c))
		FAIL("creating the cache: %s", rio_errormsg());
	free(files);
	free(pool);
	return 0;
}

/* ---- the writer ---- */

static int
run(const char *dir)
{
	char *pool = path_of(dir, "cache.pool");
	/* No write-back: the disk files must stay as setup left them. */
	struct rio_fc_opts o = { .flags = RIO_FC_NO_THREAD,
		.pool_flags = RIO_NO_SIGNALS, .dirty_max_pct = 90 };
	rio_fc_cache *c;
	rio_fc_file *fh[NFILES];
	if (rio_fc_cache_open(pool, NULL, &o, &c))
		FAIL("opening the cache: %s", rio_errormsg());
	for (int f = 0; f < NFILES; f++) {
		char rel[16];
		snprintf(rel, sizeof(rel), "files/%s", names[f]);
		char *p = path_of(dir, rel);
		int rc = rio_fc_open(c, p, O_RDWR, &fh[f]);
		free(p);
		if (rc)
			FAIL("open %s: %s", rel, rio_errormsg());
	}
	static struct state s;
	static uint8_t buf[2 * BLK];
	initial(&s);
	for (unsigned k = 1; k <= NWRITES; k++) {
		struct wr w = write_of(k, s.size);
		fill(buf, k, w.file, w.off, w.len);
		if (rio_fc_pwrite(fh[w.file], buf, w.len, w.off))
			FAIL("write %u: %s", k, rio_errormsg());
		/* Acknowledged: every line of the pool it needs is durable. */
		rio_durable_point(rio_fc_pool(c), "rio_fc_pwrite returned");
		apply(&s, k, w);
	}
	_exit(0); /* a crash after the last write: nothing written back */
}

/* ---- the checker ---- */

static int
read_files(const char *dir, struct state *got)
{
	memset(got, 0, sizeof(*got));
	for (int f = 0; f < NFILES; f++) {
		char rel[16];
		snprintf(rel, sizeof(rel), "files/%s", names[f]);
		char *p = path_of(dir, rel);
		int fd = open(p, O_RDONLY);
		free(p);
		struct stat st;
		if (fd < 0 || fstat(fd, &st))
			FAIL("%s: %s", rel, strerror(errno));
		if (st.st_size > MAX_SIZE) {
			close(fd);
			FAIL("%s: %lld bytes, more than any write makes", rel,
				(long long)st.st_size);
		}
		got->size[f] = (uint64_t)st.st_size;
		ssize_t n = pread(fd, got->data[f], got->size[f], 0);
		close(fd);
		if (n != (ssize_t)got->size[f])
			FAIL("reading %s", rel);
	}
	return 0;
}

static bool
same(const struct state *a, const struct state *b)
{
	for (int f = 0; f < NFILES; f++)
		if (a->size[f] != b->size[f] ||
		    memcmp(a->data[f], b->data[f], a->size[f]))
			return false;
	return true;
}

/* got == s with each block of w either as in s or as write k made it? */
static bool
mix_of(const struct state *got, const struct state *s, unsigned k,
	struct wr w)
{
	static struct state m;
	static uint8_t nb[BLK];
	for (int f = 0; f < NFILES; f++)
		if (f != w.file && (got->size[f] != s->size[f] ||
		    memcmp(got->data[f], s->data[f], s->size[f])))
			return false;
	if (got->size[w.file] != s->size[w.file])
		return false;
	m = *s;
	for (uint64_t b = w.off / BLK; b * BLK < w.off + w.len; b++) {
		uint64_t lo = b * BLK > w.off ? b * BLK : w.off;
		uint64_t hi = (b + 1) * BLK < w.off + w.len ? (b + 1) * BLK :
			w.off + w.len;
		memcpy(nb, m.data[w.file] + b * BLK, BLK);
		fill(nb + (lo - b * BLK), k, w.file, lo, hi - lo);
		const uint8_t *g = got->data[w.file] + b * BLK;
		if (memcmp(g, m.data[w.file] + b * BLK, BLK) &&
		    memcmp(g, nb, BLK))
			return false; /* neither old nor new: torn */
	}
	return true;
}

static int
check(const char *image, const char *dir)
{
	struct timespec times[NFILES];
	char *tp = path_of(dir, "times");
	FILE *t = fopen(tp, "r");
	free(tp);
	if (t == NULL || fread(times, sizeof(times), 1, t) != 1)
		FAIL("reading the times of setup");
	fclose(t);
	if (put_files(dir, times))
		return 1;
	struct rio_fc_opts o = { .flags = RIO_FC_NO_THREAD,
		.pool_flags = RIO_NO_SIGNALS };
	rio_fc_cache *c;
	if (rio_fc_cache_open(image, NULL, &o, &c))
		FAIL("recovery of %s: %s", image, rio_errormsg());
	if (rio_fc_cache_close(c))
		FAIL("closing the recovered cache: %s", rio_errormsg());

	static struct state got, s, next;
	if (read_files(dir, &got))
		return 1;
	initial(&s);
	for (unsigned k = 0;; k++) {
		if (same(&got, &s))
			return 0; /* S_k */
		if (k == NWRITES)
			break;
		struct wr w = write_of(k + 1, s.size);
		next = s;
		apply(&next, k + 1, w);
		if (w.len > BLK && mix_of(&got, &s, k + 1, w))
			return 0; /* inside W_k+1, block by block */
		s = next;
	}
	FAIL("the files are no state a prefix of the %d writes leaves "
		"(sizes %llu %llu %llu): a torn block, or a lost write",
		NWRITES, (unsigned long long)got.size[0],
		(unsigned long long)got.size[1],
		(unsigned long long)got.size[2]);
}

int
main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "setup"))
		return setup(argv[2]);
	if (argc == 3 && !strcmp(argv[1], "run"))
		return run(argv[2]);
	if (argc == 4 && !strcmp(argv[1], "check"))
		return check(argv[2], argv[3]);
	fprintf(stderr, "usage: fc_pm setup|run DIR | fc_pm check IMAGE DIR\n");
	return 2;
}
