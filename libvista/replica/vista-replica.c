/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * vista-replica.c -- run a backup node, promote it, show a node's state
 *
 *   vista-replica follow  --dir D --size N --peer HOST:PORT [--auto-promote]
 *                         [--timeout MS] [--heartbeat MS]
 *   vista-replica promote --dir D --size N
 *   vista-replica status  --dir D --size N
 *   vista-replica passive-follow  --dir D --peer HOST:PORT [--files F,G]
 *                         [--auto-promote] [--timeout MS] [--heartbeat MS]
 *   vista-replica passive-promote --dir D
 *
 * A node's files are D/log (the vista log), D/seg (the data segment) and
 * D/state (the node state); the data segment maps at --addr (default
 * 0x7e0000000000) and the state right after it.  follow applies the
 * primary's stream until the primary is lost; a full copy prints a
 * progress line.  After a promotion (follow --auto-promote, or promote) it
 * prints the epoch and the 1-safe loss window: at most that many
 * transactions whose 1-safe commit returned on the old primary are
 * missing here (the limit this node granted, durably, minus its applied
 * seq; vista_replica.h vr_status).
 *
 * passive-follow keeps byte copies of the primary's pools (a passive
 * backup: vr_passive_follow) in D/seg and D/log (--files: other names, in
 * the primary's vr_passive_add_pool order), its node state in D/pstate;
 * passive-promote makes it the primary (then open the copies with libvista,
 * whose recovery runs at vista_init and vista_map).  A passive backup that
 * comes back rejoins by the primary's log tail when it still has it
 * ("log tail after fence record N") or by a full copy (the progress line).
 * After a passive promotion it prints the 1-safe loss window: the 1-safe
 * limit this node granted, durably, minus the last fence record its copies
 * hold (vista_replica.h vr_passive_status).
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vista_replica.h"

#define VRP_TOOL_MAX 4

struct node_args {
	const char *dir;
	size_t size;
	unsigned long long addr;
	unsigned timeout_ms, heartbeat_ms;
	bool auto_promote;
};

static void
usage(void)
{
	fprintf(stderr,
		"usage: vista-replica follow  --dir D --size N --peer HOST:PORT "
		"[--auto-promote] [--timeout MS] [--heartbeat MS]\n"
		"       vista-replica promote --dir D --size N\n"
		"       vista-replica status  --dir D --size N\n"
		"       vista-replica passive-follow --dir D --peer HOST:PORT "
		"[--files F,G] [--auto-promote] [--timeout MS] "
		"[--heartbeat MS]\n"
		"       vista-replica passive-promote --dir D\n");
	exit(2);
}

static int
fail(const char *what, int rc)
{
	fprintf(stderr, "vista-replica: %s: %s (%s): %s\n", what,
		vr_err_name(rc), vr_strerror(rc), vr_errormsg());
	return 1;
}

static void
progress(void *arg, uint64_t done, uint64_t total)
{
	static unsigned last = 101;
	unsigned pct = (unsigned)(total ? done * 100 / total : 100);

	(void)arg;
	if (pct / 10 == last / 10 && done < total)
		return; /* a line every 10% */
	last = pct;
	fprintf(stderr, "\rcopy: %llu/%llu KiB (%u%%)",
		(unsigned long long)(done >> 10),
		(unsigned long long)(total >> 10),
		pct);
	if (done >= total)
		fputc('\n', stderr);
}

static int
open_node(const struct node_args *a, vista **v, vista_segment **seg,
	vr_node **n)
{
	char lp[4096], sp[4096], tp[4096];
	struct vista_opts vo = { lp, 0, 0, 0 };
	struct vr_opts ro;
	char *addr = (char *)(uintptr_t)a->addr;
	size_t fp = vista_segment_footprint(a->size);
	int rc;

	snprintf(lp, sizeof(lp), "%s/log", a->dir);
	snprintf(sp, sizeof(sp), "%s/seg", a->dir);
	snprintf(tp, sizeof(tp), "%s/state", a->dir);
	rc = vista_init(&vo, v);
	if (rc)
		return fail("vista_init", rc);
	rc = vista_map(*v, sp, addr, a->size, VISTA_CREATE, seg);
	if (rc) {
		vista_fini(*v);
		return fail("vista_map", rc);
	}
	memset(&ro, 0, sizeof(ro));
	ro.state_path = tp;
	ro.state_addr = addr + ((fp + (1u << 21) - 1) & ~(size_t)((1u << 21) - 1));
	ro.timeout_ms = a->timeout_ms;
	ro.heartbeat_ms = a->heartbeat_ms;
	ro.auto_promote = a->auto_promote;
	ro.progress = progress;
	rc = vr_open(*v, *seg, &ro, n);
	if (rc) {
		vista_fini(*v);
		return fail("vr_open", rc);
	}
	return 0;
}

static void
print_status(vr_node *n)
{
	static const char *roles[] = { "fresh", "primary", "backup", "stale" };
	struct vr_status st;

	(void)vr_status(n, &st);
	printf("role %s epoch %llu applied %llu set ",
		roles[st.role & 3], (unsigned long long)st.epoch,
		(unsigned long long)st.seq);
	for (int i = 0; i < 16; i++)
		printf("%02x", st.set_uuid[i]);
	printf("\n");
}

/* The line a promotion prints, for either backup: `applied` names what
 * its position counts (tests/replica/window.sh reads the window). */
static void
print_promoted(const char *applied, uint64_t epoch, uint64_t pos,
	uint64_t limit, uint64_t announced, uint64_t window)
{
	printf("promoted: epoch %llu, applied %s %llu, granted limit %llu, "
		"primary announced %llu: 1-safe loss window %llu "
		"transaction(s)\n", (unsigned long long)epoch, applied,
		(unsigned long long)pos, (unsigned long long)limit,
		(unsigned long long)announced, (unsigned long long)window);
}

static void
tail_line(void *arg, uint64_t seq)
{
	(void)arg;
	fprintf(stderr, "log tail after fence record %llu (no copy)\n",
		(unsigned long long)seq);
}


static int
passive(const char *cmd, const struct node_args *a, const char *peer,
	const char *files)
{
	static const char *roles[] = { "fresh", "primary", "backup", "stale" };
	char sp[4096], paths[VRP_TOOL_MAX][4096], fl[1024], *save = NULL;
	const char *pp[VRP_TOOL_MAX];
	struct vr_passive_opts po;
	struct vr_passive_status st;
	vr_passive *n;
	unsigned np = 0;
	int rc, ret = 0;

	snprintf(sp, sizeof(sp), "%s/pstate", a->dir);
	snprintf(fl, sizeof(fl), "%s", files);
	for (char *f = strtok_r(fl, ",", &save); f && np < VRP_TOOL_MAX;
	     f = strtok_r(NULL, ",", &save)) {
		snprintf(paths[np], sizeof(paths[np]), "%s/%s", a->dir, f);
		pp[np] = paths[np];
		np++;
	}
	memset(&po, 0, sizeof(po));
	po.state_path = sp;
	po.timeout_ms = a->timeout_ms;
	po.heartbeat_ms = a->heartbeat_ms;
	po.progress = progress;
	po.tail = tail_line;
	if ((rc = vr_passive_open(&po, &n)))
		return fail("vr_passive_open", rc);
	if (strcmp(cmd, "passive-follow") == 0) {
		char host[256];
		const char *colon;
		if (peer == NULL || (colon = strrchr(peer, ':')) == NULL ||
		    (size_t)(colon - peer) >= sizeof(host))
			usage();
		memcpy(host, peer, (size_t)(colon - peer));
		host[colon - peer] = '\0';
		rc = vr_passive_follow(n, host, (unsigned)atoi(colon + 1), pp,
			np);
		/* lost between records or inside one (VR_ETRUNC: the
		 * part that came was never stored); a full copy cut short
		 * is refused by the promotion itself */
		if ((rc == VR_EPEERLOST || rc == VR_ETRUNC) &&
		    a->auto_promote) {
			fprintf(stderr, "vista-replica: primary lost: %s\n",
				vr_errormsg());
			rc = vr_passive_promote(n);
			(void)vr_passive_status(n, &st);
			if (rc == 0)
				print_promoted("fence record", st.epoch,
					st.pos, st.limit, st.announced,
					st.window);
		}
		if (rc)
			ret = fail("passive-follow", rc);
	} else if (strcmp(cmd, "passive-promote") == 0) {
		rc = vr_passive_promote(n);
		if (rc) {
			ret = fail("vr_passive_promote", rc);
		} else {
			(void)vr_passive_status(n, &st);
			print_promoted("fence record", st.epoch, st.pos, st.limit,
				st.announced, st.window);
		}
	} else {
		usage();
	}
	(void)vr_passive_status(n, &st);
	printf("role %s epoch %llu\n", roles[st.role & 3],
		(unsigned long long)st.epoch);
	fflush(stdout);
	(void)vr_passive_close(n);
	return ret;
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "dir", required_argument, NULL, 'd' },
		{ "size", required_argument, NULL, 's' },
		{ "addr", required_argument, NULL, 'a' },
		{ "peer", required_argument, NULL, 'p' },
		{ "timeout", required_argument, NULL, 't' },
		{ "heartbeat", required_argument, NULL, 'h' },
		{ "auto-promote", no_argument, NULL, 'A' },
		{ "files", required_argument, NULL, 'f' },
		{ NULL, 0, NULL, 0 },
	};
	const char *files = "seg,log";
	struct node_args a = { NULL, 0, 0x7e0000000000ull, 0, 0, false };
	const char *cmd, *peer = NULL;
	vista *v;
	vista_segment *seg;
	vr_node *n;
	int c, rc, ret = 0;

	if (argc < 2)
		usage();
	cmd = argv[1];
	optind = 2;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd': a.dir = optarg; break;
		case 's': a.size = strtoull(optarg, NULL, 0); break;
		case 'a': a.addr = strtoull(optarg, NULL, 0); break;
		case 'p': peer = optarg; break;
		case 't': a.timeout_ms = (unsigned)atoi(optarg); break;
		case 'h': a.heartbeat_ms = (unsigned)atoi(optarg); break;
		case 'A': a.auto_promote = true; break;
		case 'f': files = optarg; break;
		default: usage();
		}
	}
	if (a.dir != NULL && strncmp(cmd, "passive-", 8) == 0)
		return passive(cmd, &a, peer, files);
	if (a.dir == NULL || a.size == 0)
		usage();
	if (strcmp(cmd, "follow") == 0) {
		char host[256];
		const char *colon;
		struct vr_status st;
		if (peer == NULL || (colon = strrchr(peer, ':')) == NULL ||
		    (size_t)(colon - peer) >= sizeof(host))
			usage();
		memcpy(host, peer, (size_t)(colon - peer));
		host[colon - peer] = '\0';
		if (open_node(&a, &v, &seg, &n))
			return 1;
		rc = vr_follow(n, host, (unsigned)atoi(colon + 1));
		(void)vr_status(n, &st);
		if (st.role == VR_PRIMARY) {
			print_promoted("seq", st.epoch, st.seq, st.limit,
				st.announced, st.window);
		} else if (rc) {
			ret = fail("vr_follow", rc);
		}
		print_status(n);
	} else if (strcmp(cmd, "promote") == 0) {
		if (open_node(&a, &v, &seg, &n))
			return 1;
		rc = vr_promote(n);
		if (rc) {
			ret = fail("vr_promote", rc);
		} else {
			struct vr_status st;
			(void)vr_status(n, &st);
			print_promoted("seq", st.epoch, st.seq, st.limit,
				st.announced, st.window);
		}
		print_status(n);
	} else if (strcmp(cmd, "status") == 0) {
		if (open_node(&a, &v, &seg, &n))
			return 1;
		print_status(n);
	} else {
		usage();
	}
	fflush(stdout);
	(void)vr_close(n);
	(void)vista_fini(v);
	return ret;
}
