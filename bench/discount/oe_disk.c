/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * oe_disk.c -- the order-entry server's database on disk: a data file in
 *              4 KiB blocks behind a CLOCK buffer, and a redo log with
 *              group commit (oe_server.c --disk; held_tpcc.sh's disk mode)
 *
 * Files in DIR:
 *   oe.data  the database (tpcbench's order-entry tables in the block
 *            layout, tb_opts.block: no row straddles a block), read and
 *            written in whole blocks with O_DIRECT pread / pwrite;
 *   oe.log   groups {magic, epoch, bytes} of redo records {offset,
 *            length, the bytes after the transaction}, written from
 *            offset 0 of each epoch on, one pwrite + fdatasync a group.
 *
 * Design (one thread):
 *  1. A row is read through the buffer (tb_rows.at): its block is found
 *     in the buffer, or read from the data file into a frame the CLOCK
 *     hand chose, after writing that frame's block back if it is dirty.
 *     Frames used by the running transaction are pinned (its rows stay
 *     where at() put them) until the workload's done().
 *  2. A transaction declares the ranges it writes (set_ranges) before it
 *     writes them: their blocks become dirty, and at its commit the bytes
 *     of each range are appended to the group's log records.
 *  3. Group commit (oe_disk_commit, once per round of the server's event
 *     loop): the group is written to the log and made durable before the
 *     answers of its transactions leave, as a database's log writer does.
 *  4. A full log starts a new epoch: every dirty block is written back
 *     and the data file made durable, then the log is written from 0
 *     again with epoch + 1.  So the data file with the current epoch's
 *     groups replayed over it, in order, is the database: the check
 *     (oe_disk_check) compares exactly that with buffer + data file.
 * The server is not recovered from this log: under dc-run it is the
 * process that is rolled back, and the log and data file with it (their
 * writes of a lost interval are held and dropped).  The log is what
 * makes the disk regime the paper's (a synchronous write per group),
 * and what the check holds the data file to.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "oe_disk.h"

#define BLK 4096u
#define LOG_MAX (64u << 20)
#define GRP_MAX (1u << 20)
#define GRP_MAGIC 0x70726730676f6c65ull /* "elog0grp" */

struct lgrp {
	uint64_t magic, epoch, bytes; /* bytes: the records after it */
};
struct lrec {
	uint64_t off;
	uint32_t len, pad; /* then len bytes, padded to 8 */
};

struct frame {
	int64_t block;    /* -1: empty */
	uint64_t pin;     /* == D.tx: used by the running transaction */
	bool ref, dirty;
};

static struct {
	int dfd, lfd, lrfd; /* data; log written, read (the check) */
	size_t nblk, nfr, hand;
	char *mem;        /* nfr frames of BLK bytes */
	struct frame *fr;
	int32_t *where;   /* block -> frame, -1 */
	uint64_t tx;
	struct tb_range pend[64]; /* the running transaction's ranges */
	size_t npend;
	char *grp;        /* the group: struct lgrp, then records */
	size_t grpl;
	uint64_t logpos, epoch;
	uint64_t reads, writes, groups; /* oe_disk_stats */
} D;

static void
die(const char *what)
{
	fprintf(stderr, "oe-server: disk: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void
io(bool wr, int fd, void *p, size_t n, uint64_t off)
{
	while (n > 0) {
		ssize_t r = wr ? pwrite(fd, p, n, (off_t)off) :
			pread(fd, p, n, (off_t)off);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			if (r == 0)
				errno = EIO;
			die(wr ? "pwrite" : "pread");
		}
		p = (char *)p + r;
		n -= (size_t)r;
		off += (uint64_t)r;
	}
}

static char *
frame_mem(size_t f)
{
	return D.mem + f * BLK;
}

/* Design 1: the CLOCK hand's next frame that is neither pinned nor
 * recently used. */
static size_t
victim(void)
{
	for (size_t k = 0; k < 2 * D.nfr + 1; k++) {
		size_t f = D.hand;
		D.hand = (D.hand + 1) % D.nfr;
		if (D.fr[f].block >= 0 && D.fr[f].pin == D.tx)
			continue;
		if (D.fr[f].ref) {
			D.fr[f].ref = false;
			continue;
		}
		return f;
	}
	fprintf(stderr, "oe-server: disk: every frame is pinned by one "
		"transaction (a larger --pool-mb)\n");
	exit(1);
}

static void
write_back(size_t f)
{
	if (!D.fr[f].dirty)
		return;
	io(true, D.dfd, frame_mem(f), BLK, (uint64_t)D.fr[f].block * BLK);
	D.fr[f].dirty = false;
	D.writes++;
}

static void *
rows_at(void *arg, size_t off, size_t len)
{
	(void)arg;
	size_t b = off / BLK;
	if (len == 0 || (off + len - 1) / BLK != b || b >= D.nblk) {
		fprintf(stderr, "oe-server: disk: row [%zu, +%zu) is not in "
			"one block of the database\n", off, len);
		exit(1);
	}
	int32_t f = D.where[b];
	if (f < 0) {
		f = (int32_t)victim();
		if (D.fr[f].block >= 0) {
			write_back((size_t)f);
			D.where[D.fr[f].block] = -1;
		}
		io(false, D.dfd, frame_mem((size_t)f), BLK, (uint64_t)b * BLK);
		D.reads++;
		D.fr[f] = (struct frame){ .block = (int64_t)b };
		D.where[b] = f;
	}
	D.fr[f].ref = true;
	D.fr[f].pin = D.tx;
	return frame_mem((size_t)f) + off % BLK;
}

static void
rows_done(void *arg)
{
	(void)arg;
	D.tx++;
}

static int
d_begin(void *ctx)
{
	(void)ctx;
	D.npend = 0;
	return 0;
}

/* Design 2: the ranges are in pinned frames; their blocks are dirty. */
static int
d_set_ranges(void *ctx, size_t n, const struct tb_range *r)
{
	(void)ctx;
	for (size_t i = 0; i < n; i++) {
		size_t o = (size_t)((char *)r[i].addr - D.mem);
		if ((char *)r[i].addr < D.mem || o >= D.nfr * BLK ||
		    o % BLK + r[i].len > BLK || D.npend == 64) {
			fprintf(stderr, "oe-server: disk: a range outside "
				"the buffer's frames\n");
			return -1;
		}
		D.fr[o / BLK].dirty = true;
		D.pend[D.npend++] = r[i];
	}
	return 0;
}

static int
d_commit(void *ctx)
{
	(void)ctx;
	size_t need = 0;
	for (size_t i = 0; i < D.npend; i++)
		need += sizeof(struct lrec) + ((D.pend[i].len + 7) & ~7ul);
	if (D.grpl + need > GRP_MAX && oe_disk_commit() != 0)
		return -1;
	for (size_t i = 0; i < D.npend; i++) {
		size_t o = (size_t)((char *)D.pend[i].addr - D.mem);
		struct lrec h = { .len = (uint32_t)D.pend[i].len,
			.off = (uint64_t)D.fr[o / BLK].block * BLK + o % BLK };
		memcpy(D.grp + D.grpl, &h, sizeof(h));
		memcpy(D.grp + D.grpl + sizeof(h), D.pend[i].addr, h.len);
		memset(D.grp + D.grpl + sizeof(h) + h.len, 0,
			((h.len + 7) & ~7u) - h.len);
		D.grpl += sizeof(h) + ((h.len + 7) & ~7u);
	}
	D.npend = 0;
	return 0;
}

static int
d_nop(void *ctx)
{
	(void)ctx;
	return 0;
}

const struct tb_backend oe_disk_backend = {
	.name = "disk",
	.begin = d_begin,
	.set_ranges = d_set_ranges,
	.commit = d_commit,
	.abort = d_nop,
};

int
oe_disk_commit(void)
{
	size_t rec = D.grpl - sizeof(struct lgrp);
	if (rec == 0)
		return 0;
	if (D.logpos + D.grpl > LOG_MAX) {
		/* Design 4: a new epoch.  First every dirty block is written
		 * back and made durable: the data file is the database, the
		 * old epoch's groups are no longer needed for it ... */
		for (size_t f = 0; f < D.nfr; f++)
			if (D.fr[f].block >= 0)
				write_back(f);
		if (fdatasync(D.dfd) != 0)
			die("fdatasync of the data file");
		/* ... then the log is written from its start again. */
		D.epoch++;
		D.logpos = 0;
	}
	struct lgrp g = { GRP_MAGIC, D.epoch, rec };
	memcpy(D.grp, &g, sizeof(g));
	io(true, D.lfd, D.grp, D.grpl, D.logpos);
	/* Design 3: the group is durable before any of its transactions'
	 * answers is sent (the server sends them after this returns). */
	if (fdatasync(D.lfd) != 0)
		die("fdatasync of the log");
	D.logpos += D.grpl;
	D.grpl = sizeof(struct lgrp);
	D.groups++;
	return 0;
}

static int
open_wl(size_t db_mib, void **wl)
{
	struct tb_opts o = { .workload = "order-entry", .backend = "disk",
		.db_size = db_mib << 20, .seed = 1, .block = BLK };
	return db_mib == 0 || tb_order_entry.init(&o, o.db_size, o.seed, wl) ?
		-1 : 0;
}

static void
path(char *buf, size_t n, const char *dir, const char *name)
{
	snprintf(buf, n, "%s/%s", dir, name);
}

int
oe_disk_create(const char *dir, size_t db_mib)
{
	void *wl;
	if (open_wl(db_mib, &wl))
		return -1;
	size_t size = db_mib << 20;
	char *db = mmap(NULL, size, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (db == MAP_FAILED)
		die("mmap");
	tb_order_entry.populate(wl, db);
	char p[4096];
	path(p, sizeof(p), dir, "oe.data");
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die(p);
	io(true, fd, db, size, 0);
	/* the database is on disk before a server may open it */
	if (fdatasync(fd) != 0)
		die("fdatasync of the data file");
	close(fd);
	path(p, sizeof(p), dir, "oe.log");
	fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die(p);
	close(fd);
	munmap(db, size);
	tb_order_entry.fini(wl);
	return 0;
}

int
oe_disk_open(const char *dir, size_t db_mib, double pool_mib, void **wl)
{
	if (open_wl(db_mib, wl))
		return -1;
	char p[4096];
	path(p, sizeof(p), dir, "oe.data");
	D.dfd = open(p, O_RDWR | O_DIRECT);
	struct stat st;
	if (D.dfd < 0 || fstat(D.dfd, &st) != 0)
		die(p);
	if ((size_t)st.st_size != db_mib << 20) {
		fprintf(stderr, "oe-server: disk: %s has %lld bytes, not %zu "
			"MiB (made with another size)\n", p,
			(long long)st.st_size, db_mib);
		return -1;
	}
	path(p, sizeof(p), dir, "oe.log");
	D.lfd = open(p, O_WRONLY);
	D.lrfd = open(p, O_RDONLY);
	if (D.lfd < 0 || D.lrfd < 0)
		die(p);
	D.nblk = (db_mib << 20) / BLK;
	D.nfr = (size_t)(pool_mib * (1 << 20)) / BLK;
	if (D.nfr < 64 || D.nfr > D.nblk) {
		fprintf(stderr, "oe-server: disk: a buffer of %g MiB: from "
			"0.25 MiB to the database's %zu\n", pool_mib, db_mib);
		return -1;
	}
	D.mem = mmap(NULL, D.nfr * BLK, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	D.fr = calloc(D.nfr, sizeof(*D.fr));
	D.where = malloc(D.nblk * sizeof(*D.where));
	D.grp = malloc(GRP_MAX);
	if (D.mem == MAP_FAILED || !D.fr || !D.where || !D.grp)
		die("memory");
	for (size_t f = 0; f < D.nfr; f++)
		D.fr[f].block = -1;
	memset(D.where, 0xff, D.nblk * sizeof(*D.where));
	D.tx = 1;
	D.grpl = sizeof(struct lgrp);
	struct tb_rows r = { rows_at, rows_done, NULL };
	tb_order_entry_rows(*wl, &r);
	tb_order_entry_adopt(*wl, NULL);
	return 0;
}

void
oe_disk_stats(uint64_t tx)
{
	fprintf(stderr, "oe-server: disk: %llu transactions, block reads "
		"%.2f, write-backs %.2f, log groups %.3f a transaction\n",
		(unsigned long long)tx, tx ? (double)D.reads / (double)tx : 0,
		tx ? (double)D.writes / (double)tx : 0,
		tx ? (double)D.groups / (double)tx : 0);
}

#define FAIL(...) (snprintf(why, n, __VA_ARGS__), rc = -1)

int
oe_disk_check(void *wl, char *why, size_t n)
{
	size_t size = D.nblk * BLK;
	char *img = mmap(NULL, size + BLK, PROT_READ | PROT_WRITE,
		MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (img == MAP_FAILED)
		return snprintf(why, n, "no memory for the check"), -1;
	char *tmp = img + size;
	int rc = 0;
	/* the data file, then the current epoch's groups over it */
	io(false, D.dfd, img, size, 0);
	char *log = mmap(NULL, D.logpos ? D.logpos : 1,
		PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (log == MAP_FAILED) {
		FAIL("cannot read the log");
		goto out;
	}
	if (D.logpos)
		io(false, D.lrfd, log, D.logpos, 0);
	for (uint64_t pos = 0; pos < D.logpos && rc == 0;) {
		struct lgrp g;
		memcpy(&g, log + pos, sizeof(g));
		if (g.magic != GRP_MAGIC || g.epoch != D.epoch ||
		    pos + sizeof(g) + g.bytes > D.logpos) {
			FAIL("log: no group of epoch %llu at %llu",
				(unsigned long long)D.epoch,
				(unsigned long long)pos);
			break;
		}
		uint64_t q = pos + sizeof(g), end = q + g.bytes;
		while (q < end) {
			struct lrec h;
			memcpy(&h, log + q, sizeof(h));
			if (h.off + h.len > size || q + sizeof(h) + h.len > end) {
				FAIL("log: a record at %llu out of bounds",
					(unsigned long long)q);
				break;
			}
			memcpy(img + h.off, log + q + sizeof(h), h.len);
			q += sizeof(h) + ((h.len + 7) & ~7ull);
		}
		pos = end;
	}
	munmap(log, D.logpos ? D.logpos : 1);
	/* buffer + data file == data file + log, block by block */
	for (size_t b = 0; b < D.nblk && rc == 0; b++) {
		const char *have = tmp;
		if (D.where[b] >= 0)
			have = frame_mem((size_t)D.where[b]);
		else
			io(false, D.dfd, tmp, BLK, (uint64_t)b * BLK);
		if (memcmp(have, img + (uint64_t)b * BLK, BLK) != 0)
			FAIL("block %zu (%s) differs from the data file with "
				"the log replayed", b, D.where[b] >= 0 ?
				"in the buffer" : "in the data file");
	}
	if (rc == 0) {
		/* the workload's conditions over that database */
		struct tb_rows r = { rows_at, rows_done, NULL };
		tb_order_entry_rows(wl, NULL);
		rc = tb_order_entry.check(wl, img, why, n);
		tb_order_entry_rows(wl, &r);
	}
out:
	munmap(img, size + BLK);
	return rc;
}
