/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vr_dc.c -- debit-credit on a replicated segment, and its checker
 *
 *   vr_dc primary DIR PORT MODE ACKLOG RUN   serve, wait for a backup, run
 *        transactions until killed; every transaction whose vr_commit
 *        returned 0 is appended (its id, 8 bytes) to ACKLOG
 *   vr_dc check DIR ACKLOG MODE              the TPC-B invariants; for
 *        2safe (and pipelined: the ids up to the last acknowledged one)
 *        every acknowledged transaction must be in the history
 *   vr_dc pprimary DIR PORT MODE ACKLOG RUN  the same on a passive
 *        primary: libvista's log and segment pools replicated by
 *        vr_passive (state DIR/pstate), vr_passive_commit after each
 *        commit
 *   vr_dc pcheck DIR ACKLOG MODE             check a passive backup's
 *        copies: opened with libvista alone (its recovery runs)
 *
 * The primary listens on $VR_DC_HOST (127.0.0.1 if unset), waits up to
 * a minute for its first backup, and prints "unreplicated" the first
 * time a commit returns VR_ENOBACKUP; a replicated primary also prints
 * "lost" each time it gives its backup's connection up and "serving"
 * each time a backup is connected again, from a thread of its own
 * (netns.sh waits for these instead of sleeping for the timeout).
 * Node files and addresses as vista-replica's (DIR/log, DIR/seg,
 * DIR/state; data at 0x7e0000000000, state after it).
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vista_replica.h"

#define SIZE (8u << 20)
#define ADDR ((char *)0x7e0000000000ull)
#define NBRANCH 4
#define NTELLER 40
#define NACCOUNT 4000
#define NHIST 200000

struct hist {
	uint64_t txid;
	int64_t delta;
	uint32_t account;
	uint16_t teller, branch;
};

struct db {
	int64_t branch[NBRANCH];
	int64_t teller[NTELLER];
	int64_t account[NACCOUNT];
	uint64_t nhist;
	struct hist hist[NHIST];
};

static vista *v;
static vista_segment *seg;
static vr_node *node;
static vr_passive *pnode;

static int
die(const char *what, int rc)
{
	fprintf(stderr, "vr_dc: %s: %s: %s\n", what, vr_err_name(rc),
		vr_errormsg());
	exit(3);
}

/* Mode "1safe-whole": 1-safe with vr_opts.whole_ranges; "1safe-sdiff":
 * with vr_opts.sender_diff (mode_of). */
static bool whole, sdiff;

static void
open_node(const char *dir, enum vr_mode mode)
{
	char lp[4096], sp[4096], tp[4096];
	struct vista_opts vo = { lp, 0, 0, 0 };
	struct vr_opts ro;
	size_t fp = vista_segment_footprint(SIZE);
	int rc;

	snprintf(lp, sizeof(lp), "%s/log", dir);
	snprintf(sp, sizeof(sp), "%s/seg", dir);
	snprintf(tp, sizeof(tp), "%s/state", dir);
	if ((rc = vista_init(&vo, &v)))
		die("vista_init", rc);
	if ((rc = vista_map(v, sp, ADDR, SIZE, VISTA_CREATE, &seg)))
		die("vista_map", rc);
	memset(&ro, 0, sizeof(ro));
	ro.state_path = tp;
	ro.state_addr = ADDR + ((fp + (1u << 21) - 1) &
		~(size_t)((1u << 21) - 1));
	ro.mode = mode;
	ro.whole_ranges = whole;
	ro.sender_diff = sdiff;
	ro.timeout_ms = 1000; /* a loaded machine is no dead peer */
	if ((rc = vr_open(v, seg, &ro, &node)))
		die("vr_open", rc);
}

/* libvista alone on the node's files (a passive node). */
static void
open_vista(const char *dir)
{
	char lp[4096], sp[4096];
	struct vista_opts vo = { lp, 0, 0, 0 };
	int rc;

	snprintf(lp, sizeof(lp), "%s/log", dir);
	snprintf(sp, sizeof(sp), "%s/seg", dir);
	if ((rc = vista_init(&vo, &v)))
		die("vista_init", rc);
	if ((rc = vista_map(v, sp, ADDR, SIZE, VISTA_CREATE, &seg)))
		die("vista_map", rc);
}

static void
open_passive(const char *dir, enum vr_mode mode)
{
	char tp[4096];
	struct vr_passive_opts po;
	int rc;

	open_vista(dir);
	snprintf(tp, sizeof(tp), "%s/pstate", dir);
	memset(&po, 0, sizeof(po));
	po.state_path = tp;
	po.mode = mode;
	po.timeout_ms = 1000; /* a loaded machine is no dead peer */
	/* A log tail of about a second of debit-credit: a backup killed and
	 * restarted (pcrash.sh) mostly rejoins by it. */
	po.ring_size = 64u << 20;
	if ((rc = vr_passive_open(&po, &pnode)) ||
	    (rc = vr_passive_add_pool(pnode, vista_segment_pool(seg))) ||
	    (rc = vr_passive_add_pool(pnode, vista_log_pool(v))))
		die("vr_passive", rc);
}

static enum vr_mode
mode_of(const char *s)
{
	whole = strcmp(s, "1safe-whole") == 0;
	sdiff = strcmp(s, "1safe-sdiff") == 0;
	if (strcmp(s, "1safe") == 0 || whole || sdiff)
		return VR_1SAFE;
	if (strcmp(s, "pipelined") == 0)
		return VR_PIPELINED;
	return VR_2SAFE;
}

static uint64_t
rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* A replicated primary's thread: prints "lost" or "serving" each time
 * the connection to its backup changes (looked at every 10 ms, whatever
 * the commits are doing: a 2-safe or pipelined one may be waiting). */
static void *
report_connection(void *arg)
{
	bool connected = true;

	(void)arg;
	for (;;) {
		struct vr_status st;

		if (vr_status(node, &st) == 0 && st.connected != connected) {
			connected = st.connected;
			printf("%s\n", connected ? "serving" : "lost");
			fflush(stdout);
		}
		usleep(10000);
	}
	return NULL;
}

static _Noreturn void
primary(const char *dir, unsigned port, enum vr_mode mode, const char *acklog,
	uint64_t run, bool passive)
{
	struct db *d;
	uint64_t s = run * 0x9e3779b97f4a7c15ull + 1, txid = run << 32;
	int fd, rc;

	if (passive)
		open_passive(dir, mode);
	else
		open_node(dir, mode);
	d = vista_segment_base(seg);
	fd = open(acklog, O_WRONLY | O_CREAT | O_APPEND, 0644);
	if (fd < 0)
		die("open acklog", -errno);
	const char *host = getenv("VR_DC_HOST") ? getenv("VR_DC_HOST") :
		"127.0.0.1";
	if ((rc = passive ? vr_passive_serve(pnode, host, port) :
		vr_serve(node, host, port)))
		die("vr_serve", rc);
	printf("port %u\n", passive ? vr_passive_port(pnode) :
		vr_port(node));
	fflush(stdout);
	/* bounded, and generous: a backup's full copy over a slow link on
	 * a loaded machine (netns.sh case 3) */
	if ((rc = passive ? vr_passive_wait_backup(pnode, 60000) :
		vr_wait_backup(node, 60000)))
		die("vr_wait_backup", rc);
	printf("serving\n");
	fflush(stdout);
	pthread_t reporter;
	if (!passive && (rc = -pthread_create(&reporter, NULL,
		report_connection, NULL)))
		die("pthread_create", rc);
	for (;;) {
		uint32_t a = (uint32_t)(rnd(&s) % NACCOUNT);
		uint16_t t = (uint16_t)(rnd(&s) % NTELLER);
		uint16_t b = t % NBRANCH;
		int64_t delta = (int64_t)(rnd(&s) % 1999) - 999;
		uint64_t h = d->nhist;
		struct vista_range r[5] = {
			{ &d->account[a], 8 }, { &d->teller[t], 8 },
			{ &d->branch[b], 8 }, { &d->hist[h % NHIST], 24 },
			{ &d->nhist, 8 },
		};
		if (h >= NHIST)
			pause(); /* full: wait for the kill */
		if ((rc = vista_begin_transaction(v, 0)) ||
		    (rc = vista_set_ranges(v, 5, r)))
			die("transaction", rc);
		txid++;
		d->account[a] += delta;
		d->teller[t] += delta;
		d->branch[b] += delta;
		d->hist[h] = (struct hist){ txid, delta, a, t, b };
		d->nhist = h + 1;
		if (passive) {
			rc = vista_end_transaction(v);
			if (rc == 0)
				rc = vr_passive_commit(pnode);
		} else {
			rc = vr_commit(node);
		}
		if (rc == 0) {
			if (write(fd, &txid, 8) != 8)
				die("write acklog", -errno);
		} else if (rc == VR_ENOBACKUP) {
			static bool told;
			if (!told) {
				printf("unreplicated\n");
				fflush(stdout);
				told = true;
			}
		} else {
			die("vr_commit", rc);
		}
	}
}

static int
check(const char *dir, const char *acklog, enum vr_mode mode, bool passive)
{
	struct db *d;
	int64_t sa = 0, st = 0, sb = 0, sh = 0;
	uint64_t *ids = NULL, id;
	size_t nids = 0, missing = 0;
	FILE *f;

	if (passive)
		open_vista(dir);
	else
		open_node(dir, mode);
	d = vista_segment_base(seg);
	for (int i = 0; i < NACCOUNT; i++)
		sa += d->account[i];
	for (int i = 0; i < NTELLER; i++)
		st += d->teller[i];
	for (int i = 0; i < NBRANCH; i++)
		sb += d->branch[i];
	if (d->nhist > NHIST) {
		printf("BAD: history count %llu\n",
			(unsigned long long)d->nhist);
		return 1;
	}
	ids = malloc(d->nhist * sizeof(*ids) + 8);
	for (uint64_t i = 0; i < d->nhist; i++) {
		sh += d->hist[i].delta;
		ids[i] = d->hist[i].txid;
	}
	if (sa != st || st != sb || sb != sh) {
		printf("BAD: accounts %lld tellers %lld branches %lld "
			"history %lld\n", (long long)sa, (long long)st,
			(long long)sb, (long long)sh);
		return 1;
	}
	/* History ids grow by one per transaction of the run. */
	nids = d->nhist;
	f = fopen(acklog, "rb");
	if (f != NULL) {
		size_t acked = 0;
		while (fread(&id, 8, 1, f) == 1) {
			bool found = false;
			acked++;
			/* The history's ids grow with its index (one run per
			 * node): a binary search, not a scan per id. */
			for (size_t lo = 0, hi = nids; lo < hi && !found;) {
				size_t mid = lo + (hi - lo) / 2;
				if (ids[mid] == id)
					found = true;
				else if (ids[mid] < id)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (!found)
				missing++;
		}
		fclose(f);
		printf("history %zu, acknowledged %zu, missing %zu\n", nids,
			acked, missing);
	}
	free(ids);
	if (missing && mode == VR_2SAFE) {
		printf("BAD: %zu acknowledged transaction(s) lost\n", missing);
		return 1;
	}
	return 0;
}

int
main(int argc, char **argv)
{
	bool passive = argc > 1 && argv[1][0] == 'p' && argv[1][1] != 'r';

	if (argc == 7 && (strcmp(argv[1], "primary") == 0 ||
	    strcmp(argv[1], "pprimary") == 0))
		primary(argv[2], (unsigned)atoi(argv[3]), mode_of(argv[4]),
			argv[5], strtoull(argv[6], NULL, 0), passive);
	if (argc == 5 && (strcmp(argv[1], "check") == 0 ||
	    strcmp(argv[1], "pcheck") == 0))
		return check(argv[2], argv[3], mode_of(argv[4]), passive);
	fprintf(stderr, "usage: vr_dc [p]primary DIR PORT MODE ACKLOG RUN | "
		"[p]check DIR ACKLOG MODE\n");
	return 2;
}
