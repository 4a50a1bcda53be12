/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * rio_fsbench.c -- rio-fsbench: what the Rio file cache saves
 *
 *   rio-fsbench [-n N] [-N NDISK] [-d DISKDIR] [-t TMPFSDIR] [-q SQLN]
 *
 * 1. Latency of write + fsync of 4096-byte and 64-byte writes, at random
 *    block-aligned offsets of a 4 MiB file, in one run:
 *      disk     pwrite + fsync on a file in DISKDIR (default /var/tmp: a
 *               real disk file system)
 *      tmpfs    the same on TMPFSDIR (default /dev/shm): memory, no
 *               durability at all
 *      cache    rio_fc_pwrite + rio_fc_fsync, the file in DISKDIR, the
 *               cache pool on TMPFSDIR, in each persistence domain
 *               (byte, cacheline, page); background write-back on
 *      shim     plain pwrite + fsync by a child process run under
 *               librio-fs.so (LD_PRELOAD), default domain
 *    printed as median / p99 / mean in microseconds, with the ratio of the
 *    disk's median to each row's.
 * 2. sqlite3 inserts per second, one row per transaction, PRAGMA
 *    synchronous=FULL (the sqlite3 CLI, a script of SQLN inserts): the
 *    database on DISKDIR, and the same through librio-fs.so.  Skipped if
 *    /usr/bin/sqlite3 is missing.
 *
 * Durations are wall-clock (CLOCK_MONOTONIC); the machine should be quiet.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "rio_clock.h"
#include "rio_fc.h"

#define FILE_SIZE (4u << 20)
#define SQLITE "/usr/bin/sqlite3"

/* LD_PRELOAD for the shim; in a build with AddressSanitizer, meson names
 * the ASan runtime in RIO_FS_PRELOAD_FIRST: it must come before the
 * (sanitized) shim, in this program's children and in sqlite3 alike. */
static const char *
shim_preload(void)
{
	return RIO_FS_PRELOAD_FIRST[0] ? RIO_FS_PRELOAD_FIRST ":"
		RIO_FS_SHIM_PATH : RIO_FS_SHIM_PATH;
}

struct row {
	char name[64];
	double med[2], p99[2], mean[2]; /* [0] 4096 B, [1] 64 B */
	bool ok;
};

static const size_t sizes[2] = { 4096, 64 };

/* A path "<dir>/rio-fsbench-<what>-<pid>", for the caller to free. */
static char *
tmp_path(const char *dir, const char *what)
{
	char *s;

	if (asprintf(&s, "%s/rio-fsbench-%s-%d", dir, what, (int)getpid()) < 0)
		abort();
	return s;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static void
summarize(uint64_t *lat, int n, double *med, double *p99, double *mean)
{
	double sum = 0;

	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	for (int i = 0; i < n; i++)
		sum += (double)lat[i];
	*med = (double)lat[n / 2] / 1000.0;
	*p99 = (double)lat[(n * 99) / 100] / 1000.0;
	*mean = sum / n / 1000.0;
}

static uint64_t rng = 88172645463325252ull;

static uint64_t
next_off(size_t size)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (rng % (FILE_SIZE / 4096)) * 4096 + (size < 4096 ? rng % 64 * 64 % 4096 : 0);
}

/* write + fsync through the kernel (disk, tmpfs, or the shim). */
static int
posix_run(const char *path, int n, struct row *r)
{
	static char buf[4096];
	uint64_t *lat = calloc((size_t)n, sizeof(*lat));
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644);

	if (fd < 0 || lat == NULL) {
		fprintf(stderr, "rio-fsbench: %s: %s\n", path, strerror(errno));
		free(lat);
		return -1;
	}
	memset(buf, 'x', sizeof(buf));
	/* Allocate the file first, so the runs measure overwrites. */
	for (uint64_t off = 0; off < FILE_SIZE; off += sizeof(buf))
		if (pwrite(fd, buf, sizeof(buf), (off_t)off) < 0)
			goto fail;
	if (fsync(fd) != 0)
		goto fail;
	for (int s = 0; s < 2; s++) {
		for (int i = 0; i < n; i++) {
			uint64_t off = next_off(sizes[s]);
			uint64_t t0 = rio_now_ns(CLOCK_MONOTONIC);
			if (pwrite(fd, buf, sizes[s], (off_t)off) !=
				    (ssize_t)sizes[s] || fsync(fd) != 0)
				goto fail;
			lat[i] = rio_now_ns(CLOCK_MONOTONIC) - t0;
		}
		summarize(lat, n, &r->med[s], &r->p99[s], &r->mean[s]);
	}
	close(fd);
	unlink(path);
	free(lat);
	r->ok = true;
	return 0;
fail:
	fprintf(stderr, "rio-fsbench: %s: %s\n", path, strerror(errno));
	close(fd);
	free(lat);
	return -1;
}

/* rio_fc_pwrite + rio_fc_fsync in one persistence domain. */
static int
cache_run(const char *diskdir, const char *tmpfsdir, unsigned force, int n,
	struct row *r)
{
	static char buf[4096];
	char *pool = tmp_path(tmpfsdir, "cache.pool");
	char *path = tmp_path(diskdir, "cache");
	struct rio_fc_opts o = { 0 };
	uint64_t *lat = calloc((size_t)n, sizeof(*lat));
	rio_fc_cache *c = NULL;
	rio_fc_file *f = NULL;
	int rc;

	o.flags = RIO_FC_CREATE;
	o.pool_size = 64u << 20;
	o.pool_flags = force | RIO_NO_SIGNALS;
	unlink(pool);
	memset(buf, 'c', sizeof(buf));
	rc = rio_fc_cache_open(pool, diskdir, &o, &c);
	if (rc == 0)
		rc = rio_fc_open(c, path, O_RDWR | O_CREAT | O_TRUNC, &f);
	for (uint64_t off = 0; rc == 0 && off < FILE_SIZE; off += 4096)
		rc = rio_fc_pwrite(f, buf, 4096, off);
	if (rc == 0)
		rc = rio_fc_sync_all(c);
	for (int s = 0; rc == 0 && s < 2; s++) {
		for (int i = 0; rc == 0 && i < n; i++) {
			uint64_t off = next_off(sizes[s]);
			uint64_t t0 = rio_now_ns(CLOCK_MONOTONIC);
			rc = rio_fc_pwrite(f, buf, sizes[s], off);
			if (rc == 0)
				rc = rio_fc_fsync(f);
			lat[i] = rio_now_ns(CLOCK_MONOTONIC) - t0;
		}
		if (rc == 0)
			summarize(lat, n, &r->med[s], &r->p99[s], &r->mean[s]);
	}
	if (rc)
		fprintf(stderr, "rio-fsbench: cache: %s\n", rio_errormsg());
	if (f != NULL)
		rio_fc_close(f);
	if (c != NULL && rio_fc_cache_close(c) != 0 && rc == 0)
		rc = -1;
	unlink(path);
	unlink(pool);
	free(path);
	free(pool);
	free(lat);
	r->ok = rc == 0;
	return rc;
}

/* The same as posix_run, by a child under librio-fs.so. */
static int
shim_run(const char *self, const char *diskdir, const char *tmpfsdir, int n,
	struct row *r)
{
	char *pool, *path, *cmd, line[256];
	FILE *p;
	int got = 0;

	if (access(RIO_FS_SHIM_PATH, R_OK) != 0)
		return -1;
	pool = tmp_path(tmpfsdir, "shim.pool");
	path = tmp_path(diskdir, "shim");
	unlink(pool);
	if (asprintf(&cmd,
		    "RIO_FS_DIR='%s' RIO_FS_POOL='%s' RIO_FS_POOL_SIZE=64M "
		    "LD_PRELOAD='%s' '%s' --posix-child '%s' %d",
		    diskdir, pool, shim_preload(), self, path, n) < 0)
		cmd = NULL;
	p = cmd != NULL ? popen(cmd, "r") : NULL;
	free(cmd);
	while (p != NULL && fgets(line, sizeof(line), p) != NULL)
		if (sscanf(line, "%lf %lf %lf %lf %lf %lf", &r->med[0],
			    &r->p99[0], &r->mean[0], &r->med[1], &r->p99[1],
			    &r->mean[1]) == 6)
			got = 1;
	if (p != NULL && pclose(p) != 0)
		got = 0;
	unlink(pool);
	unlink(path);
	free(pool);
	free(path);
	r->ok = got;
	return got ? 0 : -1;
}

/* One transaction per insert, synchronous=FULL; returns inserts/s. */
static double
sqlite_run(const char *dbdir, const char *tmpfsdir, int n, bool shim)
{
	char *db = tmp_path(dbdir, "db"), *sql = tmp_path(tmpfsdir, "sql");
	char *pool = tmp_path(tmpfsdir, "sql.pool"), *cmd = NULL;
	uint64_t t0 = 0, t1 = 0;
	FILE *f;
	int st = -1, rc;

	unlink(db);
	unlink(pool);
	f = fopen(sql, "w");
	if (f == NULL)
		goto out;
	fprintf(f, "PRAGMA synchronous=FULL;\n"
		   "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);\n");
	for (int i = 0; i < n; i++)
		fprintf(f, "INSERT INTO t(v) VALUES('row %d of the benchmark');\n",
			i);
	fclose(f);
	if (shim)
		rc = asprintf(&cmd,
			"RIO_FS_DIR='%s' RIO_FS_POOL='%s' RIO_FS_POOL_SIZE=64M "
			"LD_PRELOAD='%s' " SQLITE " '%s' < '%s'",
			dbdir, pool, shim_preload(), db, sql);
	else
		rc = asprintf(&cmd, SQLITE " '%s' < '%s'", db, sql);
	if (rc < 0) {
		cmd = NULL;
		goto out;
	}
	t0 = rio_now_ns(CLOCK_MONOTONIC);
	st = system(cmd);
	t1 = rio_now_ns(CLOCK_MONOTONIC);
out:
	unlink(db);
	unlink(sql);
	unlink(pool);
	free(db);
	free(sql);
	free(pool);
	free(cmd);
	return st == 0 ? n / ((double)(t1 - t0) / 1e9) : -1;
}

static int
posix_child(const char *path, int n)
{
	struct row r = { .ok = false };

	if (posix_run(path, n, &r) != 0)
		return 1;
	printf("%.3f %.3f %.3f %.3f %.3f %.3f\n", r.med[0], r.p99[0],
		r.mean[0], r.med[1], r.p99[1], r.mean[1]);
	return 0;
}

static void
print_row(const struct row *r, const struct row *disk)
{
	if (!r->ok) {
		printf("%-30s   (failed or not available)\n", r->name);
		return;
	}
	printf("%-30s %9.1f %9.1f %9.1f  %9.1f %9.1f %9.1f  %8.0fx %8.0fx\n",
		r->name, r->med[0], r->p99[0], r->mean[0], r->med[1], r->p99[1],
		r->mean[1], disk->ok ? disk->med[0] / r->med[0] : 0,
		disk->ok ? disk->med[1] / r->med[1] : 0);
}

static void
usage(FILE *to, int code)
{
	fprintf(to,
		"usage: rio-fsbench [-n N] [-N NDISK] [-d DISKDIR] "
		"[-t TMPFSDIR] [-q SQLITE_INSERTS]\n"
		"  -n N       writes per size on tmpfs and the cache (5000)\n"
		"  -N NDISK   writes per size on the disk (300)\n"
		"  -d DISKDIR a directory on a disk file system (/var/tmp)\n"
		"  -t TMPFSDIR a directory on tmpfs, for the cache pool "
		"(/dev/shm)\n"
		"  -q SQLITE_INSERTS  sqlite3 inserts per run (1000)\n");
	exit(code);
}

int
main(int argc, char **argv)
{
	const char *diskdir = "/var/tmp", *tmpfsdir = "/dev/shm";
	int n = 5000, ndisk = 300, nsql = 1000, opt;
	char ddir[PATH_MAX], *path;
	struct row rows[7];
	static const struct {
		const char *name;
		unsigned force;
	} domains[3] = {
		{ "cache, byte domain", RIO_FORCE_BYTE },
		{ "cache, cacheline domain", RIO_FORCE_CACHELINE },
		{ "cache, page domain (msync)", RIO_FORCE_PAGE },
	};
	double sd, sc;

	if (argc == 4 && strcmp(argv[1], "--posix-child") == 0)
		return posix_child(argv[2], atoi(argv[3]));
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 ||
			  strcmp(argv[1], "-h") == 0))
		usage(stdout, 0);
	while ((opt = getopt(argc, argv, "n:N:d:t:q:")) != -1) {
		switch (opt) {
		case 'n': n = atoi(optarg); break;
		case 'N': ndisk = atoi(optarg); break;
		case 'd': diskdir = optarg; break;
		case 't': tmpfsdir = optarg; break;
		case 'q': nsql = atoi(optarg); break;
		default: usage(stderr, 2);
		}
	}
	if (n < 10 || ndisk < 10 || optind != argc)
		usage(stderr, 2);
	if (realpath(diskdir, ddir) == NULL) {
		fprintf(stderr, "rio-fsbench: %s: %s\n", diskdir,
			strerror(errno));
		return 1;
	}
	diskdir = ddir;
	memset(rows, 0, sizeof(rows));
	printf("rio-fsbench: write + fsync latency in microseconds (random "
	       "offsets of a 4 MiB file)\n"
	       "  disk = %s (%d writes per size), tmpfs = %s, cache pool on "
	       "tmpfs, files on disk (%d writes per size)\n\n",
		diskdir, ndisk, tmpfsdir, n);
	printf("%-30s %29s  %29s  %19s\n", "", "4096 B", "64 B",
		"disk median / this");
	printf("%-30s %9s %9s %9s  %9s %9s %9s  %9s %9s\n", "where", "median",
		"p99", "mean", "median", "p99", "mean", "4096 B", "64 B");

	snprintf(rows[0].name, sizeof(rows[0].name), "disk (fsync)");
	path = tmp_path(diskdir, "disk");
	posix_run(path, ndisk, &rows[0]);
	free(path);
	print_row(&rows[0], &rows[0]);
	snprintf(rows[1].name, sizeof(rows[1].name), "tmpfs (fsync, not durable)");
	path = tmp_path(tmpfsdir, "tmpfs");
	posix_run(path, n, &rows[1]);
	free(path);
	print_row(&rows[1], &rows[0]);
	for (int d = 0; d < 3; d++) {
		snprintf(rows[2 + d].name, sizeof(rows[2 + d].name), "%s",
			domains[d].name);
		cache_run(diskdir, tmpfsdir, domains[d].force, n, &rows[2 + d]);
		print_row(&rows[2 + d], &rows[0]);
	}
	snprintf(rows[5].name, sizeof(rows[5].name), "shim (LD_PRELOAD), page");
	shim_run(argv[0], diskdir, tmpfsdir, n, &rows[5]);
	print_row(&rows[5], &rows[0]);

	printf("\nsqlite3 inserts/s, one row per transaction, PRAGMA "
	       "synchronous=FULL (%d inserts)\n", nsql);
	if (access(SQLITE, X_OK) != 0) {
		printf("  skipped: %s is not installed\n", SQLITE);
		return 0;
	}
	sd = sqlite_run(diskdir, tmpfsdir, nsql, false);
	sc = sqlite_run(diskdir, tmpfsdir, nsql, true);
	printf("  %-40s %10.0f\n", "database on disk", sd);
	printf("  %-40s %10.0f", "through librio-fs.so (Rio file cache)", sc);
	if (sd > 0 && sc > 0)
		printf("   (%.1fx)", sc / sd);
	printf("\n");
	return rows[0].ok && rows[2].ok && sd > 0 && sc > 0 ? 0 : 1;
}
