/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * held.c -- output commit without a commit per output: the buffered
 *           protocol's held output (ReViveI/O, disk and stream output)
 *
 * Under the buffered protocol (dc-run --protocol buffered --interval MS)
 * checkpoints are taken at the interval only.  What the program makes
 * visible in between -- writes to regular files, terminals, pipes and
 * character devices; not a pipe inside the process, an eventfd or a file
 * on /proc or /sys (kstate.c invariants 8 and 9) -- is not performed but
 * held, and performed
 * ("released") once the checkpoint that follows it has committed.  A
 * crash before that commit rolls the program back to the checkpoint
 * before the output: the output disappears with the interval that made
 * it, and no one has seen it.  A crash after the commit finds it in the
 * persistent buffer and performs it (again): each record says where its
 * bytes go, so performing it twice writes the same bytes at the same
 * place.
 *
 * Datagrams (sendto, sendmsg, sendmmsg, write on a connected datagram
 * socket) are held with their destination and sent after the commit;
 * dropped with a lost interval; sent again when a crash interrupts the
 * release (at least once, never from a lost interval).
 *
 * Two ways to hold a write to a file (DC_DISK, dc-run --disk):
 *   buffer  the record -- metadata and data -- is appended to `held`, one
 *           record after the other, before the call returns;
 *   rename  the data alone is appended to the rename area (`rename`), the
 *           mapping (file, offset, length, place in the area) is kept in
 *           memory and written to `held` by the commit, in one write.
 * Output to a stream is held the same way (the schemes differ only for
 * files).  On tmpfs (the default checkpoint directory) the files are
 * memory that survives the process, Rio's model; on a disk file system
 * every append is fdatasync'ed before the call returns.
 *
 * Persist order of a commit of generation g with held records
 * (docs/FORMAT.md, "held"):
 *   H1 (Rename) the interval's records are appended to `held`, synced;
 *      (Buffer) they already are, one sync per write;
 *   H2 the header {gen g, end, nrec} is written and synced: it vouches
 *      for [64, end) (dc__held_seal); before the commit slot is written
 *      at all, since on tmpfs its stores are durable as they are made;
 *   H3 the commit record of g (ckpt.c): THE OUTPUT IS COMMITTED HERE;
 *   H4 every record is performed in request order, the files written are
 *      synced (dc__held_release; a commit with records is made in place,
 *      one written behind only tells the keeper, from its writer thread:
 *      ckpt.c invariant 8);
 *   H5 the header {gen g, end 64, nrec 0} is written and synced; then
 *      the files are cut back (`held` to 64 bytes, `rename` to 0).
 *
 * Invariants:
 *  1. A held write is durable in the buffer (H1) before the call returns,
 *     and its output is performed only after the commit of the interval
 *     that made it (H4 after H3).
 *  2. Records are performed in the order the program made the calls:
 *     overlapping writes leave the bytes of the last one.
 *  3. Recovery performs the records of the header iff its gen <= the
 *     committed generation (a crash in H4 or between H3 and H5), else
 *     none (a crash before H3); then empties the buffer (H5).  It
 *     performs them once the program's descriptors are restored, since
 *     streams and datagrams are written to the program's descriptors.  Records
 *     past the header's end (an interval cut short) are never read.
 *  4. A record below the header's end that fails its checks is
 *     corruption (DC_ECORRUPT, nothing performed), never a torn tail:
 *     H2 wrote the header after the records were durable.
 *  5. The program sees its held writes: a read of a held range returns
 *     the held bytes (in request order over the file's own); the size it
 *     sees (fstat, SEEK_END, O_APPEND) counts them.  Calls that act on a
 *     file's bytes behind the program's back (truncate, rename, unlink,
 *     mmap, readv, sendfile ...) first take a checkpoint, which releases
 *     the held writes.  fsync does not: a held write is durable already
 *     (in the buffer), as the paper's synchronous writes are.
 *  6. A full buffer (DC_HELD_MAX bytes, or its record table) takes a
 *     checkpoint before the write that would not fit; a single write
 *     larger than the buffer fails with ENOSPC and a message.
 *
 *  7. Output is never held for a program that waits: a blocking call
 *     made while output is held is interrupted by the interval's tick,
 *     which then takes its checkpoint and makes the call again (sud.c
 *     blocking).  Otherwise a server blocked in recv would hold the
 *     answer to the request it is waiting after until another request
 *     came.
 *
 * State (dc__vol.held): EMPTY --hold--> HOLDING --seal (H2)--> SEALED
 * --commit (H3)--> COMMITTED --release (H4, H5)--> EMPTY.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "dc_int.h"

#define H (dc__vol.held)
#define SYSC(nr, a0, a1, a2, a3) dc__sys6((nr), (long)(a0), (long)(a1), \
	(long)(a2), (long)(a3), 0, 0)

static uint64_t
pad8(uint64_t n)
{
	return (n + 7) & ~7ull;
}

bool
dc__held_on(void)
{
	return H.scheme != 0 && dc__vol.active;
}

/* Output is held now (the program is about to wait: sud.c blocking). */
bool
dc__held_waiting(void)
{
	return dc__held_on() && (H.nrec > 0 || dc__kp_dirty());
}

static char *
own_path(char *buf, size_t n, const char *name)
{
	snprintf(buf, n, "%s/%s", dc__vol.dir, name);
	return buf;
}

static int
open_own(const char *name, int flags)
{
	char p[PATH_MAX];
	int fd = open(own_path(p, sizeof(p), name),
		flags | O_RDWR | O_CLOEXEC, 0600);
	if (fd < 0)
		return dc__err(-errno, "open %s: %s", p, strerror(errno));
	return dc__own_fd(fd);
}

static int
pwrite_all(int fd, const void *p, uint64_t n, uint64_t off, const char *what)
{
	while (n > 0) {
		long r = SYSC(SYS_pwrite64, fd, p, n, off);
		if (r == -EINTR)
			continue;
		if (r <= 0)
			return dc__err(r < 0 ? (int)r : -ENOSPC,
				"%s/%s: write of %lu bytes at %lu: %s",
				dc__vol.dir, what, (unsigned long)n,
				(unsigned long)off, strerror(r < 0 ? (int)-r :
					ENOSPC));
		p = (const char *)p + r;
		n -= (uint64_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static int
pread_all(int fd, void *p, uint64_t n, uint64_t off, const char *what)
{
	while (n > 0) {
		long r = SYSC(SYS_pread64, fd, p, n, off);
		if (r == -EINTR)
			continue;
		if (r <= 0)
			return dc__err(r < 0 ? (int)r : DC_ECORRUPT,
				"%s/%s: %lu bytes at %lu: %s", dc__vol.dir,
				what, (unsigned long)n, (unsigned long)off,
				r < 0 ? strerror((int)-r) : "past the end");
		p = (char *)p + r;
		n -= (uint64_t)r;
		off += (uint64_t)r;
	}
	return 0;
}

static int
hdr_write(uint64_t gen, uint64_t end, uint64_t nrec)
{
	struct dc_held_hdr h = { .magic = DC_HELD_MAGIC,
		.major = DC_HELD_MAJOR, .minor = DC_HELD_MINOR,
		.scheme = (uint32_t)H.scheme, .gen = gen, .end = end,
		.nrec = nrec };
	h.checksum = rio_checksum(&h, 56, DC_HELD_SEED);
	int rc = pwrite_all(H.fd, &h, sizeof(h), 0, "held");
	if (rc)
		return rc;
	/* The header is what recovery believes: durable before the step
	 * that relies on it (the commit record after a seal, the cut of
	 * the files after a reset). */
	return dc__sync_fd(H.fd);
}

static void
reset_mem(void)
{
	for (unsigned i = 0; i < H.nfile; i++)
		if (H.file[i].wfd >= 0)
			close(H.file[i].wfd);
	H.nfile = H.nrec = 0;
	H.end = DC_HELD_HDR_SIZE;
	H.ren_end = 0;
	H.bytes = 0;
}

static void
read_env(void)
{
	const char *m = getenv("DC_HELD_MAX");
	H.cap = m && *m ? strtoull(m, NULL, 10) : DC__HELD_MAX_DEFAULT;
	if (H.cap == 0)
		H.cap = DC__HELD_MAX_DEFAULT;
}

/* A new run: an empty buffer of the scheme DC_DISK names. */
int
dc__held_start(bool on)
{
	char p[PATH_MAX];
	H.fd = H.ren_fd = -1;
	H.scheme = 0;
	H.nfile = H.nrec = 0;
	if (!on) {
		unlink(own_path(p, sizeof(p), "held"));
		unlink(own_path(p, sizeof(p), "rename"));
		return 0;
	}
	const char *d = getenv("DC_DISK");
	if (d == NULL || *d == '\0' || !strcasecmp(d, "buffer"))
		H.scheme = DC_HELD_BUFFER;
	else if (!strcasecmp(d, "rename"))
		H.scheme = DC_HELD_RENAME;
	else
		return dc__err(-EINVAL, "DC_DISK=%s: the disk scheme is "
			"buffer or rename", d);
	read_env();
	int rc = H.fd = open_own("held", O_CREAT | O_TRUNC);
	if (rc < 0)
		goto fail;
	if (H.scheme == DC_HELD_RENAME) {
		rc = H.ren_fd = open_own("rename", O_CREAT | O_TRUNC);
		if (rc < 0)
			goto fail;
	} else {
		unlink(own_path(p, sizeof(p), "rename"));
	}
	reset_mem();
	/* An empty buffer before the first checkpoint can name it. */
	if ((rc = hdr_write(0, DC_HELD_HDR_SIZE, 0)))
		goto fail;
	return 0;
fail:
	H.scheme = 0;
	return rc;
}

/* ---- the data checksum: rio_checksum chained over 64 KiB pieces ---- */

struct chain {
	uint64_t h;
	uint32_t fill;
};

static void
chain_add(struct chain *c, const char *p, uint64_t n)
{
	char *piece = H.buf; /* the first 64 KiB of the scratch */
	while (n > 0) {
		uint64_t k = DC_HDATA_CHUNK - c->fill;
		if (k > n)
			k = n;
		memcpy(piece + c->fill, p, k);
		c->fill += (uint32_t)k;
		p += k;
		n -= k;
		if (c->fill == DC_HDATA_CHUNK) {
			c->h = rio_checksum(piece, DC_HDATA_CHUNK, c->h);
			c->fill = 0;
		}
	}
}

static uint64_t
chain_end(struct chain *c)
{
	if (c->fill)
		c->h = rio_checksum(H.buf, c->fill, c->h);
	return c->h;
}

static uint64_t
iov_csum(const struct iovec *v, int n)
{
	struct chain c = { DC_HDATA_SEED, 0 };
	for (int i = 0; i < n; i++)
		chain_add(&c, v[i].iov_base, v[i].iov_len);
	return chain_end(&c);
}

/* The checksum of n bytes of fd at off (read through the scratch). */
static int
file_csum(int fd, uint64_t off, uint64_t n, const char *what, uint64_t *out)
{
	uint64_t h = DC_HDATA_SEED;
	while (n > 0) {
		uint64_t k = n < DC_HDATA_CHUNK ? n : DC_HDATA_CHUNK;
		int rc = pread_all(fd, H.buf, k, off, what);
		if (rc)
			return rc;
		h = rio_checksum(H.buf, k, h);
		off += k;
		n -= k;
	}
	*out = h;
	return 0;
}

/* ---- holding ---- */

static void
fill_rec(struct dc_held_rec *r, const struct dc__hrec *m, uint64_t gen,
	uint64_t seq)
{
	memset(r, 0, sizeof(*r));
	r->magic = DC_HREC_MAGIC;
	r->type = m->type;
	r->file = m->file;
	r->gen = gen;
	r->seq = seq;
	r->off = m->off;
	r->len = m->len;
	r->loc = m->loc;
	r->dcsum = m->dcsum;
	r->checksum = rio_checksum(r, 56, DC_HREC_SEED);
}

/* Append record m with its payload v[0..n) to `held` (Buffer, and the
 * PATH records of both schemes when made at the write). */
static int
append_inline(struct dc__hrec *m, const struct iovec *v, int n)
{
	struct dc_held_rec r;
	m->loc = H.end + sizeof(r);
	m->dcsum = iov_csum(v, n);
	fill_rec(&r, m, dc__open_gen(), H.nrec);
	int rc = pwrite_all(H.fd, &r, sizeof(r), H.end, "held");
	uint64_t at = m->loc;
	for (int i = 0; rc == 0 && i < n; i++) {
		rc = pwrite_all(H.fd, v[i].iov_base, v[i].iov_len, at, "held");
		at += v[i].iov_len;
	}
	if (rc)
		return rc;
	H.end = m->loc + pad8(m->len);
	H.rec[H.nrec++] = *m;
	return 0;
}

/* Append m's payload to the rename area (Rename: data only). */
static int
append_rename(struct dc__hrec *m, const struct iovec *v, int n)
{
	m->loc = H.ren_end;
	m->dcsum = iov_csum(v, n);
	uint64_t at = m->loc;
	for (int i = 0; i < n; i++) {
		int rc = pwrite_all(H.ren_fd, v[i].iov_base, v[i].iov_len, at,
			"rename");
		if (rc)
			return rc;
		at += v[i].iov_len;
	}
	H.ren_end = pad8(at);
	H.rec[H.nrec++] = *m;
	return 0;
}

static int
find_file(int fd, const struct stat *st)
{
	for (unsigned i = 0; i < H.nfile; i++)
		if (H.file[i].dev == st->st_dev && H.file[i].ino == st->st_ino)
			return (int)i;
	(void)fd;
	return -1;
}

/* The file table entry of fd, made (with its PATH record, Buffer) at the
 * first held write of the interval.  -1 and the message on failure. */
static int
file_of(int fd, const struct stat *st)
{
	int i = find_file(fd, st);
	if (i >= 0)
		return i;
	struct dc__hfile *f = &H.file[H.nfile];
	char lnk[64];
	snprintf(lnk, sizeof(lnk), "/proc/self/fd/%d", fd);
	ssize_t n = readlink(lnk, f->path, sizeof(f->path) - 1);
	if (n <= 0 || n >= (ssize_t)sizeof(f->path) - 1 || f->path[0] != '/' ||
	    (n > 10 && !strcmp(f->path + n - 10, " (deleted)"))) {
		dc__err(DC_EUNSUPPORTED, "a held write to descriptor %d: its "
			"file has no path to write it to later", fd);
		return -1;
	}
	f->path[n] = '\0';
	f->dev = st->st_dev;
	f->ino = st->st_ino;
	f->vsize = st->st_size;
	f->wfd = -1;
	if (H.scheme == DC_HELD_BUFFER) {
		struct dc__hrec m = { .type = DC_HREC_PATH,
			.file = (uint16_t)H.nfile, .len = (uint64_t)n + 1 };
		struct iovec v = { f->path, (size_t)n + 1 };
		if (append_inline(&m, &v, 1) != 0)
			return -1;
	}
	return (int)H.nfile++;
}

static int
want_fd(struct dc__hfile *f)
{
	if (f->wfd >= 0)
		return f->wfd;
	int fd = open(f->path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return dc__err(-errno, "held output for %s: %s", f->path,
			strerror(errno));
	f->wfd = dc__own_fd(fd);
	return f->wfd;
}

#ifdef DC_BROKEN_HELD_EARLY
/* Deliberately broken: the output is performed at once as well as held,
 * before the commit of its interval (invariant 1; caught by
 * [held-broken-early]). */
static void
perform_now(const struct dc__hrec *m, const struct iovec *v, int n, int fd)
{
	if (m->type == DC_HREC_STREAM) {
		SYSC(SYS_writev, fd, v, n, 0);
		return;
	}
	if (m->type == DC_HREC_DGRAM) {
		socklen_t alen = (socklen_t)(m->off & 0xffffffff);
		struct msghdr h = { .msg_name = alen ? v[0].iov_base : NULL,
			.msg_namelen = alen,
			.msg_iov = (struct iovec *)v + (alen ? 1 : 0),
			.msg_iovlen = (size_t)(n - (alen ? 1 : 0)) };
		SYSC(SYS_sendmsg, fd, &h, MSG_DONTWAIT, 0);
		return;
	}
	int w = want_fd(&H.file[m->file]);
	if (w >= 0)
		SYSC(SYS_pwritev, w, v, n, m->off);
}
#endif

/* Make room for a record of len payload bytes (invariant 6): 0, or
 * -errno for the program. */
static long
room(uint64_t len)
{
	if (len > H.cap) {
		dc__err(DC_ELIMIT, "a write of %lu bytes is larger than the "
			"held-output buffer (%lu bytes, DC_HELD_MAX)",
			(unsigned long)len, (unsigned long)H.cap);
		dc__say("%s", rio_errormsg());
		return -ENOSPC;
	}
	if (H.bytes + len <= H.cap && H.nrec + 2 <= DC__HELD_RECS &&
	    H.nfile < DC__HELD_FILES)
		return 0;
	H.forced++;
	int rc = dc__commit(); /* 1: recovered here, the buffer is empty */
	if (rc < 0)
		return -EIO;
	return 0;
}

static int
kind(int fd, struct stat *st)
{
	if (fstat(fd, st) != 0)
		return 0;
	if (S_ISREG(st->st_mode))
		return DC__K_FILE;
	if (S_ISFIFO(st->st_mode) || S_ISCHR(st->st_mode))
		return DC__K_PIPE;
	int type = 0;
	socklen_t tl = sizeof(type);
	if (S_ISSOCK(st->st_mode) &&
	    dc__sys6(SYS_getsockopt, fd, SOL_SOCKET, SO_TYPE, (long)&type,
		    (long)&tl, 0) == 0 && type == SOCK_DGRAM)
		return DC__K_SOCK; /* a datagram socket (UDP, Unix) */
	return 0;
}

/*
 * A datagram (sendto, sendmsg, sendmmsg, or write on a connected datagram
 * socket): held like a stream's bytes, with its destination, and sent
 * after the commit (DC_HREC_DGRAM).  What the kernel would refuse at the
 * send is refused here, before anything is held: no destination, a
 * datagram too large, ancillary data (descriptors or credentials cannot
 * be held past the call).  A datagram sent after its commit may still be
 * lost by the network, as any datagram may.
 */
static long
hold_dgram(int fd, int flags, const void *addr, socklen_t alen,
	const struct iovec *v, int n, bool *handled)
{
	uint64_t len = 0;
	for (int i = 0; i < n; i++)
		len += v[i].iov_len;
	*handled = true;
	if (alen > sizeof(struct sockaddr_storage))
		return -EINVAL;
	if (len > 65535 - 8)
		return -EMSGSIZE;
	if (alen == 0) {
		struct sockaddr_storage peer;
		socklen_t pl = sizeof(peer);
		if (dc__sys6(SYS_getpeername, fd, (long)&peer, (long)&pl, 0, 0,
			    0) != 0)
			return -EDESTADDRREQ;
	}
	long r = room(len + alen);
	if (r)
		return r;
	dc__st.stats.visible_events++;
	struct iovec w[1 + UIO_MAXIOV];
	int k = 0;
	if (alen)
		w[k++] = (struct iovec){ (void *)addr, alen };
	for (int i = 0; i < n && k < 1 + UIO_MAXIOV; i++)
		w[k++] = v[i];
	struct dc__hrec m = { .type = DC_HREC_DGRAM, .file = (uint16_t)fd,
		.off = (int64_t)alen |
			(int64_t)((uint64_t)(uint32_t)flags << 32),
		.len = len + alen };
	int rc = H.scheme == DC_HELD_RENAME ? append_rename(&m, w, k) :
		append_inline(&m, w, k);
	/* Invariant 1: the datagram is durable in the buffer before the
	 * program is told it was sent. */
	if (rc == 0)
		rc = dc__sync_fd(H.scheme == DC_HELD_RENAME ? H.ren_fd : H.fd);
	if (rc) {
		dc__say("cannot hold a datagram: %s", rio_errormsg());
		return -EIO;
	}
	H.bytes += len + alen;
#ifdef DC_BROKEN_HELD_EARLY
	perform_now(&m, w, k, fd);
#endif
	return (long)len;
}

static bool
is_dgram(int fd)
{
	struct stat st;
	return fd >= 0 && fd <= UINT16_MAX && kind(fd, &st) == DC__K_SOCK;
}

/* sendto, sendmsg, sendmmsg on a datagram socket: held. */
static long
hold_send(long nr, const long *a, bool *handled)
{
	int fd = (int)a[0];
	if (!is_dgram(fd))
		return 0;
	if (nr == SYS_sendto) {
		struct iovec one = { (void *)a[1], (size_t)a[2] };
		return hold_dgram(fd, (int)a[3], (const void *)a[4],
			a[4] ? (socklen_t)a[5] : 0, &one, 1, handled);
	}
	struct mmsghdr *mm = (struct mmsghdr *)a[1];
	unsigned cnt = nr == SYS_sendmsg ? 1 : (unsigned)a[2];
	int flags = (int)(nr == SYS_sendmsg ? a[2] : a[3]);
	*handled = true;
	if (cnt > UIO_MAXIOV)
		cnt = UIO_MAXIOV;
	unsigned i;
	for (i = 0; i < cnt; i++) {
		const struct msghdr *h = nr == SYS_sendmsg ?
			(const struct msghdr *)a[1] : &mm[i].msg_hdr;
		long r;
		if (h->msg_controllen > 0) {
			dc__err(DC_EUNSUPPORTED, "a datagram with ancillary "
				"data cannot be held past its commit (the "
				"buffered protocol)");
			dc__say("%s", rio_errormsg());
			r = -EOPNOTSUPP;
		} else if (h->msg_iovlen > UIO_MAXIOV) {
			r = -EMSGSIZE;
		} else {
			r = hold_dgram(fd, flags, h->msg_name,
				h->msg_name ? h->msg_namelen : 0, h->msg_iov,
				(int)h->msg_iovlen, handled);
		}
		if (r < 0)
			return i > 0 ? (long)i : r;
		if (nr == SYS_sendmsg)
			return r;
		mm[i].msg_len = (unsigned)r;
	}
	return (long)i;
}

/* write, writev, pwrite64, pwritev to a file or stream: held. */
static long
hold(long nr, const long *a, bool *handled)
{
	int fd = (int)a[0];
	/* a pipe inside the process, an eventfd, /proc and /sys: no output
	 * (kstate.c invariants 8 and 9) */
	if (dc__k_internal(fd))
		return 0;
#ifndef DC_BROKEN_PROC_HELD /* broken build: /proc writes held as a file's */
	if (dc__k_proc(fd))
		return 0;
#endif
	struct stat st;
	int k = kind(fd, &st);
	if (k == 0 || fd < 0 || fd > UINT16_MAX)
		return 0;
	if (k != DC__K_FILE && (nr == SYS_pwrite64 || nr == SYS_pwritev))
		return 0; /* ESPIPE from the kernel */
	int fl = (int)SYSC(SYS_fcntl, fd, F_GETFL, 0, 0);
	if (fl < 0 || (fl & O_ACCMODE) == O_RDONLY)
		return 0; /* EBADF from the kernel */
	struct iovec one, *v = &one;
	int n = 1;
	if (nr == SYS_writev || nr == SYS_pwritev) {
		if (a[2] < 0 || a[2] > IOV_MAX)
			return 0;
		v = (struct iovec *)a[1];
		n = (int)a[2];
	} else {
		one.iov_base = (void *)a[1];
		one.iov_len = (size_t)a[2];
	}
	if (k == DC__K_SOCK) /* write(2) on a connected datagram socket */
		return hold_dgram(fd, 0, NULL, 0, v, n, handled);
	uint64_t len = 0;
	for (int i = 0; i < n; i++)
		len += v[i].iov_len;
	*handled = true;
	if (len == 0)
		return 0;
	uint64_t forced = H.forced;
	long r = room(len);
	if (r)
		return r;
	/* a checkpoint forced by room() has performed the held writes:
	 * the file's size is the one after them (invariant 5) */
	if (H.forced != forced && fstat(fd, &st) != 0)
		return -errno;
	dc__st.stats.visible_events++;
	struct dc__hrec m = { .len = len };
	if (k == DC__K_PIPE) {
		m.type = DC_HREC_STREAM;
		m.file = (uint16_t)fd;
	} else {
		int f = file_of(fd, &st);
		if (f < 0) {
			dc__say("%s", rio_errormsg());
			return -EIO;
		}
		m.type = DC_HREC_WRITE;
		m.file = (uint16_t)f;
		if (nr == SYS_pwrite64 || nr == SYS_pwritev)
			m.off = a[3];
		else if (fl & O_APPEND)
			m.off = H.file[f].vsize;
		else
			m.off = SYSC(SYS_lseek, fd, 0, SEEK_CUR, 0);
		if (m.off < 0)
			return -EINVAL;
	}
	int rc = H.scheme == DC_HELD_RENAME ? append_rename(&m, v, n) :
		append_inline(&m, v, n);
	/* Invariant 1: the record (Buffer) or the data (Rename) is durable
	 * before the program is told the write is done. */
	if (rc == 0)
		rc = dc__sync_fd(H.scheme == DC_HELD_RENAME ? H.ren_fd : H.fd);
	if (rc) {
		dc__say("cannot hold a write: %s", rio_errormsg());
		return -EIO;
	}
	H.bytes += len;
#ifdef DC_BROKEN_HELD_EARLY
	perform_now(&m, v, n, fd);
#endif
	if (m.type == DC_HREC_WRITE) {
		struct dc__hfile *f = &H.file[m.file];
		if (m.off + (int64_t)len > f->vsize)
			f->vsize = m.off + (int64_t)len;
		if (nr == SYS_write || nr == SYS_writev)
			SYSC(SYS_lseek, fd, m.off + (int64_t)len, SEEK_SET, 0);
	}
	return (long)len;
}

/* ---- reading held data (invariant 5) ---- */

static int
held_file_of_fd(int fd)
{
	struct stat st;
	if (H.nfile == 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		return -1;
	return find_file(fd, &st);
}

static long
read_over(long nr, const long *a, int f)
{
	int fd = (int)a[0];
	char *dst = (char *)a[1];
	int64_t pos = nr == SYS_pread64 ? a[3] :
		SYSC(SYS_lseek, fd, 0, SEEK_CUR, 0);
	if (pos < 0)
		return pos;
	int64_t vs = H.file[f].vsize;
	uint64_t want = (uint64_t)a[2];
	uint64_t n = pos >= vs ? 0 : (uint64_t)(vs - pos);
	if (n > want)
		n = want;
	if (n == 0)
		return 0;
	long r = SYSC(SYS_pread64, fd, dst, n, pos);
	if (r < 0)
		return r;
	if ((uint64_t)r < n)
		memset(dst + r, 0, n - (uint64_t)r); /* held past the real end */
	/* Invariant 2: the held writes over the range, in request order */
	for (unsigned i = 0; i < H.nrec; i++) {
		const struct dc__hrec *m = &H.rec[i];
		if (m->type != DC_HREC_WRITE || m->file != f)
			continue;
		int64_t lo = m->off > pos ? m->off : pos;
		int64_t hi = m->off + (int64_t)m->len;
		if (hi > pos + (int64_t)n)
			hi = pos + (int64_t)n;
		if (lo >= hi)
			continue;
		int src = H.scheme == DC_HELD_RENAME ? H.ren_fd : H.fd;
		int rc = pread_all(src, dst + (lo - pos), (uint64_t)(hi - lo),
			m->loc + (uint64_t)(lo - m->off),
			H.scheme == DC_HELD_RENAME ? "rename" : "held");
		if (rc) {
			dc__say("%s", rio_errormsg());
			return -EIO;
		}
	}
	if (nr == SYS_read)
		SYSC(SYS_lseek, fd, pos + (int64_t)n, SEEK_SET, 0);
	return (long)n;
}

static void
fix_size(uint64_t dev, uint64_t ino, int64_t *size)
{
	for (unsigned i = 0; i < H.nfile; i++)
		if (H.file[i].dev == dev && H.file[i].ino == ino &&
		    H.file[i].vsize > *size)
			*size = H.file[i].vsize;
}

/* A call that would see or change a file's bytes behind the held
 * writes: a checkpoint first, which performs them (invariant 5). */
static bool
needs_release(long nr, const long *a)
{
	switch (nr) {
	case SYS_truncate:
	case SYS_ftruncate:
	case SYS_fallocate:
	case SYS_rename:
	case SYS_renameat:
	case SYS_renameat2:
	case SYS_unlink:
	case SYS_unlinkat:
	case SYS_link:
	case SYS_linkat:
	case SYS_readv:
	case SYS_preadv:
	case SYS_preadv2:
	case SYS_sendfile:
	case SYS_copy_file_range:
	case SYS_splice:
		return true;
	case SYS_mmap:
		return !(a[3] & MAP_ANONYMOUS) && a[4] >= 0;
	case SYS_open:
		return (a[1] & O_TRUNC) != 0;
	case SYS_openat:
		return (a[2] & O_TRUNC) != 0;
	case SYS_lseek:
		return a[2] == SEEK_DATA || a[2] == SEEK_HOLE;
	default:
		return false;
	}
}

long
dc__held_syscall(long nr, long *a, bool *handled)
{
	*handled = false;
	switch (nr) {
	case SYS_write:
	case SYS_writev:
	case SYS_pwrite64:
	case SYS_pwritev:
		return hold(nr, a, handled);
	case SYS_sendto:
	case SYS_sendmsg:
	case SYS_sendmmsg:
		return hold_send(nr, a, handled);
	case SYS_read:
	case SYS_pread64: {
		int f = held_file_of_fd((int)a[0]);
		if (f < 0)
			return 0;
		*handled = true;
		return read_over(nr, a, f);
	}
	case SYS_lseek: {
		if (a[2] != SEEK_END)
			break;
		int f = held_file_of_fd((int)a[0]);
		if (f < 0)
			return 0;
		*handled = true;
		int64_t p = H.file[f].vsize + a[1];
		if (p < 0)
			return -EINVAL;
		return SYSC(SYS_lseek, a[0], p, SEEK_SET, 0);
	}
	case SYS_fstat:
	case SYS_stat:
	case SYS_lstat:
	case SYS_newfstatat: {
		if (H.nfile == 0)
			return 0;
		long r = dc__sys6(nr, a[0], a[1], a[2], a[3], 0, 0);
		*handled = true;
		struct stat *st = (struct stat *)(nr == SYS_newfstatat ? a[2] :
			a[1]);
		if (r == 0 && S_ISREG(st->st_mode)) {
			int64_t s = st->st_size;
			fix_size(st->st_dev, st->st_ino, &s);
			st->st_size = s;
		}
		return r;
	}
	case SYS_statx: {
		if (H.nfile == 0)
			return 0;
		long r = dc__sys6(nr, a[0], a[1], a[2], a[3], a[4], 0);
		*handled = true;
		struct statx *sx = (struct statx *)a[4];
		if (r == 0 && (sx->stx_mask & STATX_SIZE)) {
			int64_t s = (int64_t)sx->stx_size;
			fix_size(makedev(sx->stx_dev_major, sx->stx_dev_minor),
				sx->stx_ino, &s);
			sx->stx_size = (uint64_t)s;
		}
		return r;
	}
	default:
		break;
	}
	if (H.nfile > 0 && needs_release(nr, a) && dc__commit() < 0)
		return (*handled = true), -EIO;
	return 0;
}

/* ---- sealing and releasing ---- */

/* H1, H2: the records are durable and the header vouches for them. */
int
dc__held_seal(uint64_t gen)
{
	H.tick_missed = false; /* this checkpoint is the tick's */
	if (H.scheme == 0 || H.nrec == 0)
		return 0;
	uint64_t nrec = H.nrec;
	if (H.scheme == DC_HELD_RENAME) {
		/* H1: the mapping, in one pass: PATH records (with their
		 * payload), then the held records, in request order */
		struct dc_held_rec *out = (struct dc_held_rec *)(void *)H.buf;
		const unsigned per = sizeof(H.buf) / sizeof(*out) / 2;
		uint64_t seq = 0, at = H.end;
		int rc;
		for (unsigned i = 0; i < H.nfile; i++) {
			struct dc__hfile *f = &H.file[i];
			uint64_t l = strlen(f->path) + 1;
			struct dc__hrec m = { .type = DC_HREC_PATH,
				.file = (uint16_t)i, .len = l,
				.loc = at + sizeof(*out) };
			struct iovec v = { f->path, l };
			m.dcsum = iov_csum(&v, 1);
			fill_rec(out, &m, gen, seq++);
			if ((rc = pwrite_all(H.fd, out, sizeof(*out), at,
				     "held")) ||
			    (rc = pwrite_all(H.fd, f->path, l, m.loc, "held")))
				return rc;
			at = m.loc + pad8(l);
		}
		for (unsigned i = 0; i < H.nrec; i += per) {
			unsigned k = H.nrec - i < per ? H.nrec - i : per;
			for (unsigned j = 0; j < k; j++)
				fill_rec(&out[j], &H.rec[i + j], gen, seq++);
			if ((rc = pwrite_all(H.fd, out, k * sizeof(*out), at,
				     "held")))
				return rc;
			at += k * sizeof(*out);
		}
		H.end = at;
		nrec = seq;
		/* H1: the mapping is durable before the header (H2) vouches
		 * for it; the data it points to was synced by each write. */
		if ((rc = dc__sync_fd(H.fd)))
			return rc;
	}
	/* H2, synced in hdr_write: durable before the commit record (H3)
	 * makes gen the checkpoint, so recovery knows these records are
	 * gen's and whole (invariants 3, 4). */
	int rc = hdr_write(gen, H.end, nrec);
	dc__crashpoint("held-sealed", gen);
	return rc;
}

static int
perform_stream(int fd, int src, uint64_t loc, uint64_t len, const char *what)
{
	while (len > 0) {
		uint64_t k = len < sizeof(H.buf) ? len : sizeof(H.buf);
		int rc = pread_all(src, H.buf, k, loc, what);
		if (rc)
			return rc;
		uint64_t done = 0;
		while (done < k) {
			long r = SYSC(SYS_write, fd, H.buf + done, k - done, 0);
			if (r == -EINTR)
				continue;
			if (r == -EAGAIN) {
				struct pollfd p = { .fd = fd, .events = POLLOUT };
				SYSC(SYS_poll, &p, 1, 1000, 0);
				continue;
			}
			if (r <= 0) /* the reader is gone: nothing to say */
				return 0;
			long ev[3] = { fd, (long)(H.buf + done), 0 };
			dc__event(SYS_write, ev, r);
			done += (uint64_t)r;
		}
		loc += k;
		len -= k;
	}
	return 0;
}

/* A held datagram, sent: whatever the network makes of it (a refused or
 * unreachable destination, a full buffer for a second) is what it would
 * have made of it at the call. */
static int
perform_dgram(const struct dc__hrec *m, int src, const char *what)
{
	socklen_t alen = (socklen_t)(m->off & 0xffffffff);
	int flags = (int)((uint64_t)m->off >> 32) & ~MSG_DONTWAIT;
	int rc = pread_all(src, H.buf, m->len, m->loc, what);
	if (rc)
		return rc;
	for (int tries = 0; tries < 100; tries++) {
		long r = dc__sys6(SYS_sendto, m->file, (long)(H.buf + alen),
			(long)(m->len - alen), flags | MSG_DONTWAIT | MSG_NOSIGNAL,
			alen ? (long)H.buf : 0, alen);
		if (r == -EINTR)
			continue;
		if (r == -EAGAIN) {
			struct pollfd p = { .fd = m->file, .events = POLLOUT };
			SYSC(SYS_poll, &p, 1, 10, 0);
			continue;
		}
		if (r >= 0) {
			long ev[3] = { m->file, (long)(H.buf + alen), 0 };
			dc__event(SYS_sendto, ev, r);
		}
		break;
	}
	return 0;
}

static int
perform_write(const struct dc__hrec *m, int src, const char *what)
{
	struct dc__hfile *f = &H.file[m->file];
	int w = want_fd(f);
	if (w < 0) {
		/* removed by another process meanwhile: nowhere to go */
		dc__say("%s", rio_errormsg());
		return 0;
	}
	uint64_t done = 0;
	while (done < m->len) {
		uint64_t k = m->len - done;
		if (k > sizeof(H.buf))
			k = sizeof(H.buf);
		int rc = pread_all(src, H.buf, k, m->loc + done, what);
		if (rc == 0)
			rc = pwrite_all(w, H.buf, k, (uint64_t)m->off + done,
				f->path);
		if (rc)
			return rc;
		done += k;
	}
	return 0;
}

/* H4, H5: perform every record in request order, then empty the
 * buffer under the header of gen. */
static int
perform_all(uint64_t gen)
{
	int src = H.scheme == DC_HELD_RENAME ? H.ren_fd : H.fd;
	const char *what = H.scheme == DC_HELD_RENAME ? "rename" : "held";
	for (unsigned j = 0; j < H.nrec; j++) {
#ifdef DC_BROKEN_HELD_REORDER
		/* Deliberately broken: the records are performed newest
		 * first (invariant 2; caught by [held-broken-order]). */
		unsigned i = H.nrec - 1 - j;
#else
		unsigned i = j;
#endif
		const struct dc__hrec *m = &H.rec[i];
		int rc = 0;
		if (m->type == DC_HREC_WRITE)
			rc = perform_write(m, src, what);
		else if (m->type == DC_HREC_STREAM)
			rc = perform_stream(m->file, src, m->loc, m->len, what);
		else if (m->type == DC_HREC_DGRAM)
			rc = perform_dgram(m, src, what);
		if (rc)
			return rc;
		if (j == H.nrec / 2)
			dc__crashpoint("held-apply", gen);
	}
	/* H4: the files' new bytes reach the device before H5 forgets the
	 * records that would write them again (disk variant). */
	for (unsigned i = 0; i < H.nfile; i++)
		if (H.file[i].wfd >= 0 && !dc__vol.dir_is_mem &&
		    fdatasync(H.file[i].wfd) != 0)
			return dc__err(-errno, "fdatasync %s: %s",
				H.file[i].path, strerror(errno));
	dc__crashpoint("held-applied", gen);
	/* H5: the header forgets the records (synced in hdr_write) before
	 * the files are cut: a header that still named them must never
	 * point into a cut rename area. */
	int rc = hdr_write(gen, DC_HELD_HDR_SIZE, 0);
	if (rc)
		return rc;
	if (H.end > DC_HELD_HDR_SIZE)
		(void)!ftruncate(H.fd, DC_HELD_HDR_SIZE);
	if (H.ren_fd >= 0 && H.ren_end > 0)
		(void)!ftruncate(H.ren_fd, 0);
	reset_mem();
	return 0;
}

/* After the commit record of gen (H3). */
int
dc__held_release(uint64_t gen)
{
	/* the TCP connections' positions: the keeper releases their
	 * output (keeper.c invariant 1) */
	dc__kp_committed(gen);
	if (H.scheme == 0 || H.nrec == 0)
		return 0;
	return perform_all(gen);
}

/* Records are held: a commit must seal and perform them in place
 * (ckpt.c invariant 8). */
bool
dc__held_records(void)
{
	return H.scheme != 0 && H.nrec > 0;
}

/* The run ends: a last checkpoint performs what is held. */
void
dc__held_exit(void)
{
	if (H.scheme != 0 && (H.nrec > 0 || dc__kp_dirty()) &&
	    dc__commit() < 0)
		dc__say("the held output of the last interval is lost: %s",
			rio_errormsg());
	/* the keeper is told of that commit (by the checkpoint writer,
	 * ckpt.c invariant 8) before it hears the run end */
	if (dc__bg_wait() != 0)
		dc__say("the last checkpoint failed: %s", rio_errormsg());
	dc__kp_exit(); /* the keeper sends the rest and closes */
}

/* Recovery, the descriptors restored: the committed records loaded by
 * dc__held_recover performed.  A crash before or during this leaves the
 * header naming them: the next recovery performs them again. */
int
dc__held_recover_finish(void)
{
	/* epoll registrations, then the keeper's connections the
	 * checkpoint does not have (keeper.c invariant 2) */
	int rc = dc__kp_resumed();
	if (rc)
		return rc;
	if (H.pending == 0)
		return 0;
	uint64_t gen = H.pending;
	H.pending = 0;
	return perform_all(gen);
}

/* ---- recovery (invariants 3, 4) ---- */

static int
corrupt(const char *fmt, unsigned long a, unsigned long b)
{
	char m[160];
	snprintf(m, sizeof(m), fmt, a, b);
	return dc__err(DC_ECORRUPT, "%s/held: %s", dc__vol.dir, m);
}

static int
load(const struct dc_held_hdr *h)
{
	uint64_t at = DC_HELD_HDR_SIZE;
	unsigned npath = 0;
	for (uint64_t s = 0; s < h->nrec; s++) {
		struct dc_held_rec r;
		if (at + sizeof(r) > h->end)
			return corrupt("record %lu at %lu: past the end",
				(unsigned long)s, (unsigned long)at);
		int rc = pread_all(H.fd, &r, sizeof(r), at, "held");
		if (rc)
			return rc;
		if (r.magic != DC_HREC_MAGIC ||
		    r.checksum != rio_checksum(&r, 56, DC_HREC_SEED))
			return corrupt("record %lu at %lu: bad magic or "
				"checksum", (unsigned long)s,
				(unsigned long)at);
		if (r.gen != h->gen || r.seq != s)
			return corrupt("record %lu at %lu: of another "
				"interval", (unsigned long)s, (unsigned long)at);
		bool inl = r.type == DC_HREC_PATH ||
			h->scheme == DC_HELD_BUFFER;
		int src = inl ? H.fd : H.ren_fd;
		if ((inl && r.loc != at + sizeof(r)) ||
		    H.nrec >= DC__HELD_RECS || src < 0)
			return corrupt("record %lu at %lu: payload misplaced",
				(unsigned long)s, (unsigned long)at);
		uint64_t c;
		if ((rc = file_csum(src, r.loc, r.len, inl ? "held" : "rename",
			     &c)))
			return rc;
		if (c != r.dcsum)
			return corrupt("record %lu at %lu: payload checksum "
				"mismatch", (unsigned long)s,
				(unsigned long)at);
		if (r.type == DC_HREC_PATH) {
			if (npath >= DC__HELD_FILES || r.file != npath ||
			    r.len < 2 || r.len > DC__HELD_PATH)
				return corrupt("record %lu at %lu: bad path "
					"record", (unsigned long)s,
					(unsigned long)at);
			struct dc__hfile *f = &H.file[npath++];
			if ((rc = pread_all(H.fd, f->path, r.len, r.loc,
				     "held")))
				return rc;
			f->path[r.len - 1] = '\0';
			f->wfd = -1;
			H.nfile = npath;
		} else if ((r.type == DC_HREC_WRITE && r.file >= npath) ||
			   (r.type == DC_HREC_DGRAM &&
			    ((uint64_t)r.off & 0xffffffff) > r.len) ||
			   (r.type == DC_HREC_DGRAM &&
			    r.len > sizeof(struct sockaddr_storage) + 65535) ||
			   (r.type != DC_HREC_WRITE &&
			    r.type != DC_HREC_STREAM &&
			    r.type != DC_HREC_DGRAM)) {
			return corrupt("record %lu at %lu: bad type or file",
				(unsigned long)s, (unsigned long)at);
		}
		H.rec[H.nrec++] = (struct dc__hrec){ .type = r.type,
			.file = r.file, .off = r.off, .len = r.len,
			.loc = r.loc, .dcsum = r.dcsum };
		at += sizeof(r) + (inl ? pad8(r.len) : 0);
	}
	if (at != h->end)
		return corrupt("records end at %lu, header says %lu",
			(unsigned long)at, (unsigned long)h->end);
	return 0;
}

int
dc__held_recover(void)
{
	char p[PATH_MAX];
	H.scheme = 0;
	H.fd = H.ren_fd = -1;
	H.nfile = H.nrec = 0;
	int fd = open(own_path(p, sizeof(p), "held"), O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? 0 : dc__err(-errno, "open %s: %s", p,
			strerror(errno));
	H.fd = dc__own_fd(fd);
	read_env();
	struct dc_held_hdr h;
	int rc = pread_all(H.fd, &h, sizeof(h), 0, "held");
	if (rc)
		return dc__err(DC_ECORRUPT, "%s: no header", p);
	if (h.magic != DC_HELD_MAGIC ||
	    h.checksum != rio_checksum(&h, 56, DC_HELD_SEED))
		return dc__err(DC_ECORRUPT, "%s: bad magic or header checksum",
			p);
	if (h.major != DC_HELD_MAJOR)
		return dc__err(DC_EVERSION, "%s: format %u.%u, this libdc "
			"reads %u.x", p, h.major, h.minor, DC_HELD_MAJOR);
	if ((h.scheme != DC_HELD_BUFFER && h.scheme != DC_HELD_RENAME) ||
	    h.end < DC_HELD_HDR_SIZE ||
	    memcmp(h.reserved, (char[16]){ 0 }, 16))
		return dc__err(DC_ECORRUPT, "%s: bad scheme, end or reserved "
			"bytes", p);
	H.scheme = (int)h.scheme;
	if (H.scheme == DC_HELD_RENAME) {
		rc = H.ren_fd = open_own("rename", O_CREAT);
		if (rc < 0)
			goto fail;
	}
	H.end = h.end;
	H.ren_end = 1; /* cut at the reset below */
	H.pending = 0;
	if (h.gen <= dc__vol.committed && h.nrec > 0) {
		/* committed, perhaps partly performed: all of it again,
		 * once every record has been checked, and once the
		 * program's descriptors are back (streams and datagrams
		 * go to them): dc__held_recover_finish */
		if ((rc = load(&h)) == 0)
			H.pending = h.gen;
	} else {
		/* a header sealed for an interval that never committed, or
		 * nothing held: the records (if any) disappear */
		H.nrec = 0;
		rc = hdr_write(dc__vol.committed, DC_HELD_HDR_SIZE, 0);
		if (rc == 0) {
			(void)!ftruncate(H.fd, DC_HELD_HDR_SIZE);
			if (H.ren_fd >= 0)
				(void)!ftruncate(H.ren_fd, 0);
		}
		reset_mem();
	}
	if (rc)
		goto fail;
	return 0;
fail:
	H.scheme = 0;
	H.nrec = H.nfile = 0;
	return rc;
}
