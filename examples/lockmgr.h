/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * lockmgr.h -- the recoverable lock manager of thesis Figure 4.4: what
 * client and server share (messages, setting up Vista and an endpoint)
 *
 * Each process keeps its Vistagrams tables and its own data in one Vista
 * segment: the tables first (vg_table_size() bytes), the data after them.
 */
#ifndef LOCKMGR_H
#define LOCKMGR_H

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vistagrams.h>

#define LM_LOCKS 16

enum lm_op { LM_ACQUIRE = 1, LM_RELEASE = 2 };
/* LM_ERROR: the request was not a well-formed lm_msg; nothing changed. */
enum lm_reply { LM_GRANTED = 1, LM_BUSY = 2, LM_RELEASED = 3, LM_ERROR = 4 };

/* The endpoints' max_message: the largest request a server must take. */
#define LM_MAX_MESSAGE 64

struct lm_msg {
	uint32_t op;   /* enum lm_op, or enum lm_reply in a response */
	uint32_t lock;
};

struct lm_node {
	vista *v;
	vista_segment *seg;
	vg_endpoint *ep;
	void *data; /* the program's persistent data, after the tables */
};

#define LM_CHECK(call)                                                     \
	do {                                                               \
		int rc_ = (call);                                          \
		if (rc_) {                                                 \
			fprintf(stderr, "%s: %s: %s\n", #call,             \
				vg_strerror(rc_), vg_errormsg());          \
			exit(1);                                           \
		}                                                          \
	} while (0)

/* Open (or create) DIR/log and DIR/segment, and the endpoint on `port`
 * (0: any).  Recovery of Vista and of the tables happens here. */
static inline void
lm_open(struct lm_node *n, const char *dir, uint64_t node, uint16_t port,
	size_t data_size)
{
	char log[4096], seg[4096];
	struct vista_opts vo = { 0 };
	struct vg_endpoint_opts o = { 0 };
	size_t tables;

	snprintf(log, sizeof(log), "%s/log", dir);
	snprintf(seg, sizeof(seg), "%s/segment", dir);
	vo.log_path = log;
	LM_CHECK(vista_init(&vo, &n->v));
	o.node_id = node;
	o.port = port;
	o.flags = VG_CREATE;
	o.max_message = LM_MAX_MESSAGE;
	LM_CHECK(vg_table_size(&o, &tables));
	tables = (tables + 4095) & ~(size_t)4095;
	LM_CHECK(vista_map(n->v, seg, (void *)0x5c0000000000ull,
		tables + data_size, VISTA_CREATE, &n->seg));
	LM_CHECK(vg_endpoint_open(n->v, n->seg, &o, &n->ep));
	n->data = (char *)vista_segment_base(n->seg) + tables;
}

static inline void
lm_close(struct lm_node *n)
{
	LM_CHECK(vg_endpoint_close(n->ep));
	LM_CHECK(vista_fini(n->v));
}

#endif /* LOCKMGR_H */
