/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * replica.c -- tpcbench --replica: each vista stream kept on a backup
 * process by libvista_replica (Amza, Cox & Zwaenepoel, Sections 5-6)
 *
 * Design:
 *  1. Modes: active 1safe, 2safe, pipelined (vr_open on the stream's vista
 *     instance: a redo record of the changed bytes per commit; 1safe-whole:
 *     of every declared byte, vr_opts.whole_ranges; 1safe-sdiff and
 *     pipelined-sdiff: diffed by the sender, vr_opts.sender_diff) and passive
 *     passive-1safe, passive-2safe (vr_passive on the instance's segment
 *     and log pools: every write-back travels).  The primary's commit
 *     (tb_repl_commit) is timed into a latency histogram.
 *  2. tb_repl_setup forks one backup process per stream before the
 *     primary maps anything, so the backup maps its own segment, log and
 *     state at the same addresses in an address space of its own.  Each
 *     backup waits on a pipe for its primary's port, follows the stream
 *     (vr_follow / vr_passive_follow, connecting to --peer) until the
 *     primary closes, and exits 0, or 1 after reporting an error.
 *  3. The primary attaches after the database is populated and durable
 *     (the backend's loaded()): it serves on --peer, writes the port to
 *     the pipe and waits for the backup's full copy.  So the population
 *     reaches the backup in the copy, not as records, and the byte counts
 *     of the runs are the transactions' alone.
 *  4. Detach: an active primary waits for every record to be acknowledged
 *     (vr_sync), closes, and waits for the backup, which applies its redo
 *     log before it exits.  Then the backup's copy of the database (its
 *     segment file; passive: its copy of the segment pool) must equal the
 *     primary's database byte for byte, or the run fails.  Passive 1-safe
 *     is not compared: closing drops what the sender had not sent.
 *  5. Bytes per transaction are split as Amza et al.'s Tables 5 and 7:
 *     modified data; undo/mirror (passive: the log pool's write-backs;
 *     active: none); metadata (active: record headers and piece
 *     descriptors; passive: the rest of the segment pool's write-backs
 *     plus the stream's headers and descriptors).
 */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tb_replica.h"
#include "vista_replica.h"

const char tb_repl_modes[] =
	"1safe,1safe-whole,1safe-sdiff,2safe,pipelined,pipelined-sdiff,"
	"passive-1safe,passive-2safe";

/* A throughput run on a loaded machine must not pass for a dead peer. */
#define TB_REPL_TIMEOUT_MS 5000
/* A 1 GB database's full copy over loopback takes seconds. */
#define TB_REPL_COPY_MS 600000

struct tb_repl {
	enum tb_repl_kind kind;
	int mode, stream;
	vr_node *n;
	vr_passive *p;
	vista *v;
	rio_pool *pool;             /* the segment's pool */
	char *db;
	size_t db_size;
	uint64_t db_lo;             /* the database's offset in the seg file */
	uint64_t lat[TB_LAT_BUCKETS];
	char copy[4200];            /* the backup's file holding the database */
};

static struct {
	bool forked;
	int threads;
	pid_t pid[TB_MAX_STREAMS];
	int port_fd[TB_MAX_STREAMS]; /* write end: the port, then closed */
	char copy[TB_MAX_STREAMS][4200];
} bk;

int
tb_repl_parse(const char *mode, enum tb_repl_kind *kind, int *vr_mode)
{
	static const struct {
		const char *name;
		enum tb_repl_kind kind;
		int mode;
	} m[] = {
		{ "1safe", TB_REPL_ACTIVE, VR_1SAFE },
		/* each declared range sent whole (vr_opts.whole_ranges) */
		{ "1safe-whole", TB_REPL_ACTIVE, VR_1SAFE },
		/* diffed by the sender thread (vr_opts.sender_diff) */
		{ "1safe-sdiff", TB_REPL_ACTIVE, VR_1SAFE },
		{ "2safe", TB_REPL_ACTIVE, VR_2SAFE },
		{ "pipelined", TB_REPL_ACTIVE, VR_PIPELINED },
		{ "pipelined-sdiff", TB_REPL_ACTIVE, VR_PIPELINED },
		{ "passive-1safe", TB_REPL_PASSIVE, VR_1SAFE },
		{ "passive-2safe", TB_REPL_PASSIVE, VR_2SAFE },
	};
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
		if (mode && !strcmp(mode, m[i].name)) {
			*kind = m[i].kind;
			*vr_mode = m[i].mode;
			return 0;
		}
	return -1;
}

static int
vrfail(const char *what, int rc)
{
	tb_err("replica: %s: %s: %s", what, vr_err_name(rc), vr_errormsg());
	return -1;
}

/* The state segment after the data segment, on a 2 MiB boundary. */
static void *
state_addr(const struct tb_vgeom *g)
{
	size_t fp = vista_segment_footprint(g->seg_size);
	return (char *)g->addr + ((fp + (1u << 21) - 1) &
		~(size_t)((1u << 21) - 1));
}

/* ---- the backup process ---- */

static int
backup_active(const struct tb_opts *o, const struct tb_vgeom *g,
	const char *state, unsigned port)
{
	struct vista_opts vo = { .log_path = g->log, .log_size = g->log_size,
		.lanes = g->lanes, .rio_flags = g->rio_flags };
	vista *v;
	vista_segment *seg;
	vr_node *n;
	int rc = vista_init(&vo, &v);
	if (rc)
		return vrfail("backup: vista_init", rc);
	if ((rc = vista_map(v, g->seg, g->addr, g->seg_size, VISTA_CREATE,
		     &seg))) {
		vista_fini(v);
		return vrfail("backup: vista_map", rc);
	}
	struct vr_opts ro = { .state_path = state, .state_addr = state_addr(g),
		.mode = VR_1SAFE, .timeout_ms = TB_REPL_TIMEOUT_MS };
	if ((rc = vr_open(v, seg, &ro, &n))) {
		vista_fini(v);
		return vrfail("backup: vr_open", rc);
	}
	rc = vr_follow(n, o->peer, port);
	if (rc != 0 && rc != VR_EPEERLOST)
		vrfail("backup: vr_follow", rc);
	int rc2 = vr_close(n);
	int rc3 = vista_fini(v);
	return (rc == 0 || rc == VR_EPEERLOST) && !rc2 && !rc3 ? 0 : -1;
}

static int
backup_passive(const struct tb_opts *o, const struct tb_vgeom *g,
	const char *state, unsigned port)
{
	struct vr_passive_opts po = { .state_path = state, .mode = VR_1SAFE,
		.timeout_ms = TB_REPL_TIMEOUT_MS, .rio_flags = g->rio_flags };
	const char *paths[2] = { g->seg, g->log };
	vr_passive *n;
	int rc = vr_passive_open(&po, &n);
	if (rc)
		return vrfail("backup: vr_passive_open", rc);
	rc = vr_passive_follow(n, o->peer, port, paths, 2);
	if (rc != 0 && rc != VR_EPEERLOST)
		vrfail("backup: vr_passive_follow", rc);
	int rc2 = vr_passive_close(n);
	return (rc == 0 || rc == VR_EPEERLOST) && !rc2 ? 0 : -1;
}

int
tb_repl_setup(const struct tb_opts *o, const char *dir, tb_vgeom_fn geom)
{
	enum tb_repl_kind kind;
	int mode;
	if (o->replica == NULL || bk.forked)
		return 0;
	if (tb_repl_parse(o->replica, &kind, &mode) || o->peer == NULL) {
		tb_err("replica: mode %s, peer %s", o->replica,
			o->peer ? o->peer : "(none)");
		return -1;
	}
	bk.forked = true;
	bk.threads = o->threads;
	for (int i = 0; i < o->threads; i++) {
		struct tb_vgeom g;
		char prefix[4200], state[4300];
		int fd[2];
		snprintf(prefix, sizeof(prefix), "%s/backup", dir);
		geom(o, i, prefix, &g);
		snprintf(state, sizeof(state), "%s/backup.%d.state", dir, i);
		snprintf(bk.copy[i], sizeof(bk.copy[i]), "%s", g.seg);
		if (pipe(fd)) {
			tb_err("replica: pipe: %s", strerror(errno));
			return -1;
		}
		fflush(NULL);
		pid_t pid = fork();
		if (pid < 0) {
			tb_err("replica: fork: %s", strerror(errno));
			return -1;
		}
		if (pid == 0) {
			unsigned port;
			close(fd[1]);
			for (int j = 0; j < i; j++)
				close(bk.port_fd[j]);
			if (read(fd[0], &port, sizeof(port)) != sizeof(port))
				_exit(0); /* the primary never attached */
			close(fd[0]);
			int rc = kind == TB_REPL_ACTIVE ?
				backup_active(o, &g, state, port) :
				backup_passive(o, &g, state, port);
			_exit(rc ? 1 : 0);
		}
		close(fd[0]);
		bk.pid[i] = pid;
		bk.port_fd[i] = fd[1];
	}
	return 0;
}

/* Wait up to 60 s for backup i to exit; 0 if it exited 0. */
static int
reap(int i)
{
	int st = 0;
	if (bk.pid[i] <= 0)
		return 0;
	if (bk.port_fd[i] >= 0) {
		close(bk.port_fd[i]);
		bk.port_fd[i] = -1;
	}
	for (int k = 0; k < 6000; k++) {
		pid_t r = waitpid(bk.pid[i], &st, WNOHANG);
		if (r == bk.pid[i]) {
			bk.pid[i] = 0;
			if (WIFEXITED(st) && WEXITSTATUS(st) == 0)
				return 0;
			tb_err("replica: the backup of stream %d failed "
				"(status %#x)", i, st);
			return -1;
		}
		if (r < 0 && errno != EINTR)
			break;
		usleep(10000);
	}
	kill(bk.pid[i], SIGKILL);
	waitpid(bk.pid[i], NULL, 0);
	bk.pid[i] = 0;
	tb_err("replica: the backup of stream %d did not stop", i);
	return -1;
}

void
tb_repl_teardown(void)
{
	for (int i = 0; i < bk.threads; i++)
		(void)reap(i);
}

/* ---- the primary ---- */

static unsigned
classify(void *arg, unsigned pool, uint64_t off, uint32_t len)
{
	const struct tb_repl *r = arg;
	(void)len;
	if (pool == 1)
		return 1; /* the log: undo records */
	if (off >= r->db_lo && off < r->db_lo + r->db_size)
		return 0; /* the database */
	return 2; /* the heap's metadata beside it */
}

int
tb_repl_attach(const struct tb_opts *o, int stream,
	const struct tb_vgeom *g, vista *v, vista_segment *seg, void *db,
	size_t db_size, struct tb_repl **out)
{
	char state[4300];
	int rc;
	struct tb_repl *r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -1;
	if (tb_repl_parse(o->replica, &r->kind, &r->mode) || !bk.forked ||
	    stream >= bk.threads || bk.port_fd[stream] < 0) {
		free(r);
		tb_err("replica: stream %d has no backup", stream);
		return -1;
	}
	r->stream = stream;
	r->v = v;
	r->pool = vista_segment_pool(seg);
	r->db = db;
	r->db_size = db_size;
	r->db_lo = (uint64_t)((char *)db - ((char *)rio_pool_base(r->pool) -
		RIO_POOL_HDR_SIZE));
	snprintf(r->copy, sizeof(r->copy), "%s", bk.copy[stream]);
	/* The primary's state file beside the backup's (same directory). */
	snprintf(state, sizeof(state), "%s", bk.copy[stream]);
	char *slash = strrchr(state, '/');
	snprintf(slash ? slash + 1 : state, sizeof(state) - (size_t)(slash ?
		slash + 1 - state : 0), "primary.%d.state", stream);
	unsigned port;
	if (r->kind == TB_REPL_ACTIVE) {
		struct vr_opts ro = { .state_path = state,
			.state_addr = state_addr(g), .mode = (enum vr_mode)r->mode,
			/* pipelined: commits in flight; 1-safe: the
			 * library's loss window (0: its default). */
			.window = r->mode == VR_PIPELINED ? 1024 : 0,
			.timeout_ms = TB_REPL_TIMEOUT_MS,
			.whole_ranges = !strcmp(o->replica, "1safe-whole"),
			.sender_diff = strstr(o->replica, "-sdiff") != NULL };
		if ((rc = vr_open(v, seg, &ro, &r->n)))
			goto fail_vr;
		if ((rc = vr_serve(r->n, o->peer, 0)))
			goto fail_serve;
		port = vr_port(r->n);
	} else {
		struct vr_passive_opts po = { .state_path = state,
			.mode = (enum vr_mode)r->mode,
			.timeout_ms = TB_REPL_TIMEOUT_MS, .classify = classify,
			.classify_arg = r };
		if ((rc = vr_passive_open(&po, &r->p)))
			goto fail_vr;
		if ((rc = vr_passive_add_pool(r->p, r->pool)) ||
		    (rc = vr_passive_add_pool(r->p, vista_log_pool(v))))
			goto fail_vr;
		if ((rc = vr_passive_serve(r->p, o->peer, 0)))
			goto fail_serve;
		port = vr_passive_port(r->p);
	}
	if (write(bk.port_fd[stream], &port, sizeof(port)) != sizeof(port)) {
		rc = -errno;
		goto fail_vr;
	}
	close(bk.port_fd[stream]);
	bk.port_fd[stream] = -1;
	rc = r->n ? vr_wait_backup(r->n, TB_REPL_COPY_MS) :
		vr_passive_wait_backup(r->p, TB_REPL_COPY_MS);
	if (rc) {
		tb_err("replica: stream %d: the backup did not connect to %s "
			"port %u: %s: %s", stream, o->peer, port, vr_err_name(rc),
			vr_errormsg());
		goto fail;
	}
	*out = r;
	return 0;
fail_serve:
	tb_err("replica: cannot listen on --peer %s: %s: %s", o->peer,
		vr_err_name(rc), vr_errormsg());
	goto fail;
fail_vr:
	vrfail(r->kind == TB_REPL_ACTIVE ? "vr_open" : "vr_passive_open", rc);
fail:
	if (r->n)
		vr_close(r->n);
	if (r->p)
		vr_passive_close(r->p);
	(void)reap(stream);
	free(r);
	return -1;
}

int
tb_repl_commit(struct tb_repl *r, vista *v)
{
	uint64_t t0 = tb_now_ns();
	int rc;
	if (r->n) {
		if ((rc = vr_commit(r->n)))
			return vrfail("vr_commit", rc);
	} else {
		if ((rc = vista_end_transaction(v))) {
			tb_err("vista: vista_end_transaction: %s: %s",
				vista_strerror(rc), vista_errormsg());
			return -1;
		}
		if ((rc = vr_passive_commit(r->p)))
			return vrfail("vr_passive_commit", rc);
	}
	r->lat[tb_lat_bucket(tb_now_ns() - t0)]++;
	return 0;
}

void
tb_repl_stats(struct tb_repl *r, struct tb_bstats *out)
{
	out->has_repl = true;
	memcpy(out->lat, r->lat, sizeof(r->lat));
	if (r->n) {
		struct vr_status st;
		vr_status(r->n, &st);
		out->repl_records = st.records;
		out->repl_data = st.data_bytes;
		out->repl_undo = 0;
		out->repl_meta = st.meta_bytes;
		out->repl_sent = st.bytes_sent;
	} else {
		struct vr_passive_status st;
		vr_passive_status(r->p, &st);
		out->repl_records = st.records;
		out->repl_data = st.class_bytes[0];
		out->repl_undo = st.class_bytes[1];
		out->repl_meta = st.class_bytes[2] + st.class_bytes[3] +
			st.meta_bytes;
		out->repl_sent = st.bytes_sent;
	}
}

/* The backup's copy of the database against ours; 0 or -1 (reported). */
static int
compare(const struct tb_repl *r)
{
	int fd = open(r->copy, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		tb_err("replica: %s: %s", r->copy, strerror(errno));
		return -1;
	}
	static char buf[1 << 20];
	int rc = 0;
	for (size_t off = 0; off < r->db_size && rc == 0;) {
		size_t n = r->db_size - off < sizeof(buf) ? r->db_size - off :
			sizeof(buf);
		ssize_t got = pread(fd, buf, n, (off_t)(r->db_lo + off));
		if (got != (ssize_t)n) {
			tb_err("replica: %s: short read at %zu", r->copy, off);
			rc = -1;
		} else if (memcmp(buf, r->db + off, n)) {
			size_t k = 0;
			while (buf[k] == r->db[off + k])
				k++;
			tb_err("replica: stream %d: the backup's copy differs "
				"from the primary's database at byte %zu",
				r->stream, off + k);
			rc = -1;
		}
		off += n;
	}
	close(fd);
	return rc;
}

int
tb_repl_detach(struct tb_repl *r)
{
	int rc = 0, e;
	if (r->n) {
		if ((e = vr_sync(r->n)))
			rc = vrfail("vr_sync", e);
		if ((e = vr_close(r->n)))
			rc = vrfail("vr_close", e);
	} else if ((e = vr_passive_close(r->p))) {
		rc = vrfail("vr_passive_close", e);
	}
	if (reap(r->stream))
		rc = -1;
	if (rc == 0 && !(r->p && r->mode == VR_1SAFE))
		rc = compare(r);
	free(r);
	return rc;
}

/* ---- the peer address ---- */

static int
resolve(const char *host, struct sockaddr_storage *sa, socklen_t *len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *res;
	int rc = getaddrinfo(host, NULL, &hints, &res);
	if (rc) {
		tb_err("--peer %s: %s", host, gai_strerror(rc));
		return -1;
	}
	memcpy(sa, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

int
tb_peer_check(const char *host)
{
	struct sockaddr_storage sa;
	socklen_t len;
	if (resolve(host, &sa, &len))
		return -1;
	int s = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, len)) {
		tb_err("--peer %s: unreachable: not an address of this host, "
			"where the primary listens and its backup runs (%s)",
			host, strerror(errno));
		if (s >= 0)
			close(s);
		return -1;
	}
	close(s);
	return 0;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

int
tb_rtt(const char *host, int n, double *med_us, double *p99_us)
{
	struct sockaddr_storage sa;
	socklen_t len;
	int one = 1, l, c, s;
	char buf[64] = { 0 };
	if (resolve(host, &sa, &len))
		return -1;
	l = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (l < 0 || bind(l, (struct sockaddr *)&sa, len) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&sa, &len)) {
		tb_err("round trip over %s: %s", host, strerror(errno));
		return -1;
	}
	c = socket(sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&sa, len) ||
	    (s = accept(l, NULL, NULL)) < 0) {
		tb_err("round trip over %s: %s", host, strerror(errno));
		close(l);
		return -1;
	}
	close(l);
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		close(c);
		while (read(s, buf, 64) == 64 && write(s, buf, 64) == 64)
			;
		_exit(0);
	}
	close(s);
	uint64_t *lat = malloc((size_t)n * sizeof(*lat));
	int k = 0;
	for (; lat && k < n; k++) {
		uint64_t t0 = tb_now_ns();
		if (write(c, buf, 64) != 64)
			break;
		size_t got = 0;
		while (got < 64) {
			ssize_t r = read(c, buf + got, 64 - got);
			if (r <= 0)
				break;
			got += (size_t)r;
		}
		if (got < 64)
			break;
		lat[k] = tb_now_ns() - t0;
	}
	close(c);
	waitpid(pid, NULL, 0);
	if (lat == NULL || k < n) {
		free(lat);
		tb_err("round trip over %s: the echo stopped", host);
		return -1;
	}
	qsort(lat, (size_t)n, sizeof(*lat), cmp_u64);
	*med_us = (double)lat[n / 2] / 1e3;
	*p99_us = (double)lat[(size_t)n * 99 / 100] / 1e3;
	free(lat);
	return 0;
}
