/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * keeper_proto.h -- the messages between libdc and dc-keeper, the process
 *                   that holds a buffered program's TCP connections
 *                   (docs/ARCHITECTURE.md, "TCP through the keeper";
 *                   docs/FORMAT.md, "keeper messages")
 *
 * A wire protocol between a libdc and the dc-keeper of the same build,
 * over a Unix sequenced-packet socket (abstract name DC_KP_NAME, one
 * message per packet, descriptors as SCM_RIGHTS): nothing of it is
 * persistent, and both ends are always of one build (no version field
 * beyond DC_KP_MAGIC).
 *
 *   message = struct dc_kp_msg, then n struct dc_kp_ent
 *
 * Positions are byte offsets in a connection's two streams: rpos, the
 * bytes of the client's input the program has read; wpos, the bytes of
 * output the program has written.  The 8-byte-aligned header a
 * connection starts with when the program accepts it (struct dc_kp_hello)
 * is in neither.
 */
#ifndef DC_KEEPER_PROTO_H
#define DC_KEEPER_PROTO_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>

#define DC_KP_MAGIC 0x504b4344u  /* "DCKP" */
/* the keeper's control socket: "\0" DC_KP_NAME "<16 hex digits: FNV-1a
 * of the checkpoint directory>"; a program listener's socket:
 * "\0" DC_KP_LNAME "<the same 16 digits>-<listener id>" */
#define DC_KP_NAME "dc-keeper-"
#define DC_KP_LNAME "dc-kl-"
#define DC_KP_MAX_ENTS 2048

enum dc_kp_op {
	DC_KP_HELLO = 1,   /* libdc: an incarnation starts (a: 1 fresh run,
	                    * 0 recovery); reply: err */
	DC_KP_BIND = 2,    /* libdc: listener id, addr; reply: err, addr as
	                    * bound (port 0: the one chosen) */
	DC_KP_LISTEN = 3,  /* libdc: listener id, a = backlog: the program
	                    * listens on DC_KP_LNAME..id; reply: err */
	DC_KP_COMMIT = 4,  /* libdc, after a commit record: gen, the live
	                    * connections and those closed in the interval
	                    * (ents); no reply */
	DC_KP_ATTACH = 5,  /* libdc at recovery: id, a = rpos, b = wpos of a
	                    * connection of the checkpoint; reply: err, and
	                    * the program's end of a new stream socket whose
	                    * input starts at rpos */
	DC_KP_RESUMED = 6, /* libdc at recovery, every descriptor back: the
	                    * connections not attached are offered again
	                    * (accepted in the lost interval); no reply */
	DC_KP_BYE = 7,     /* libdc: the program ended; all its output is
	                    * final; no reply */
	DC_KP_REPLY = 8,
	DC_KP_RUN = 9,     /* a keeper dc-run started for the same directory,
	                    * on a connection of its own: a = the pid of a
	                    * run of the program (dc-run, which becomes the
	                    * program); reply: err, then the connection ends */
};

enum dc_kp_ent_type {
	DC_KPE_CONN = 1,   /* open at the commit: id, rpos, wpos, flags */
	DC_KPE_CLOSED = 2, /* closed in the interval: id, wpos (final) */
};
#define DC_KPE_SHUT_WR 1u /* the program shut its sending side down */

struct dc_kp_msg {
	uint32_t magic;    /* DC_KP_MAGIC */
	uint32_t op;       /* enum dc_kp_op */
	uint32_t n;        /* entries that follow */
	int32_t err;       /* reply: 0 or -errno */
	uint64_t id;       /* listener or connection id */
	uint64_t gen;      /* COMMIT: the generation committed */
	uint64_t a, b;
	uint32_t addr_len;
	uint32_t pad;
	struct sockaddr_storage addr;
};

struct dc_kp_ent {
	uint32_t type;     /* enum dc_kp_ent_type */
	uint32_t flags;    /* DC_KPE_* */
	uint64_t id;
	uint64_t rpos, wpos;
};

/* What a connection's socket says first when the program's listener
 * accepts it; read by libdc's accept, never by the program. */
struct dc_kp_hello {
	uint64_t magic;    /* DC_KP_MAGIC */
	uint64_t id;       /* the connection's id (the keeper's) */
	uint32_t peer_len, local_len;
	struct sockaddr_storage peer, local;
};

_Static_assert(sizeof(struct dc_kp_msg) == 184, "keeper message size");
_Static_assert(sizeof(struct dc_kp_ent) == 32, "keeper entry size");
_Static_assert(sizeof(struct dc_kp_hello) == 280, "keeper hello size");

/* FNV-1a of the checkpoint directory's path: the sockets' names. */
static inline uint64_t
dc_kp_hash(const char *dir)
{
	uint64_t h = 0xcbf29ce484222325ull;
	for (; *dir; dir++)
		h = (h ^ (unsigned char)*dir) * 0x100000001b3ull;
	return h;
}

/* The abstract name pre<hash>[-id] in a, both ends alike; its length. */
static inline socklen_t
dc_kp_addr(struct sockaddr_un *a, const char *pre, uint64_t hash,
	const uint64_t *id)
{
	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	int n = id ?
		snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1,
			"%s%016llx-%llu", pre, (unsigned long long)hash,
			(unsigned long long)*id) :
		snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "%s%016llx",
			pre, (unsigned long long)hash);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
		(size_t)n);
}

#endif /* DC_KEEPER_PROTO_H */
