/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tree_layout.h -- the tree record of `dc-run --tree` (TREE/tree)
 *
 * The tree's init (tools/dc-tree.c) is the coordinator of the processes
 * of one tree; the record is its durable state: the last round opened,
 * the last round committed, and the members of the committed tree.
 * Two slots of DC_TREE_SLOT bytes; the valid one with the higher seq is
 * current; a write goes to the other slot and is made durable, so a torn
 * write leaves the previous record.
 *
 *   slot (1088 bytes, at 0 and at DC_TREE_SLOT):
 *   +-------+---------+----------+-----+-----------+------+----------+
 *   | magic | version | nmembers | seq | committed | last | restarts |
 *   | 0     | 4       | 6        | 8   | 16        | 24   | 32       |
 *   +-------+---------+----------+-----+-----------+------+----------+
 *   | last_pid | finished | members[DC_TREE_MAX] (16 each) | checksum |
 *   | 40       | 48           | 56                             | 1080     |
 *   +--------------+--------------------------------+-----------------+
 */
#ifndef DC_TREE_LAYOUT_H
#define DC_TREE_LAYOUT_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "rio_assert.h"

#define DC_TREE_MAGIC 0x45525444u /* "DTRE" */
#define DC_TREE_VERSION 1u
#define DC_TREE_SEED 0x65657274u
#define DC_TREE_MAX 64          /* members of one tree */
#define DC_TREE_SLOT 1088

enum dc_tree_mstate {
	DC_TREE_RUNNING = 1, /* its checkpoint (TREE/p<pid>) is its part of
	                      * round `committed` */
	DC_TREE_EXITED = 2,  /* exited, not yet waited for by its parent:
	                      * recreated as a process that exits at once
	                      * with `status` */
};

struct dc_tree_member {
	int32_t pid;      /* 0: pid in the tree's namespace */
	int32_t ppid;     /* 4: the member that forked it (0: the root) */
	uint16_t state;   /* 8: enum dc_tree_mstate */
	uint16_t gen;     /* 10: its image: 0 the one it was forked (or
	                   * started) in, n after its n-th execve; its
	                   * directory is TREE/p<pid> (0) or TREE/p<pid>-e<n> */
	int32_t status;   /* 12: exit status (DC_TREE_EXITED) */
};
RIO_STATIC_ASSERT(sizeof(struct dc_tree_member) == 16, "tree member size");

struct dc_tree_rec {
	uint32_t magic;     /* 0: DC_TREE_MAGIC */
	uint16_t version;   /* 4: DC_TREE_VERSION */
	uint16_t nmembers;  /* 6: members[0 .. nmembers-1] valid */
	uint64_t seq;       /* 8: record number; slot seq & 1 */
	uint64_t committed; /* 16: last committed round */
	uint64_t last;      /* 24: last round opened (never reused) */
	uint64_t restarts;  /* 32: times the tree was recovered */
	uint64_t last_pid;  /* 40: the namespace's last pid at the commit
	                     * (recovery continues from it: a pid is not
	                     * used again soon) */
	uint64_t finished;  /* 48: 0 while the program runs; 0x100 | its
	                     * exit status once it ended (the directory is
	                     * being removed: a restart only finishes that) */
	struct dc_tree_member m[DC_TREE_MAX]; /* 56 */
	uint64_t checksum;  /* 1080: rio_checksum of bytes 0..1079 */
};
RIO_STATIC_ASSERT(sizeof(struct dc_tree_rec) == DC_TREE_SLOT,
	"tree record size");
RIO_STATIC_ASSERT(__builtin_offsetof(struct dc_tree_rec, checksum) ==
	DC_TREE_SLOT - 8, "tree record checksum last");

/*
 * The pipes of the tree at round R (TREE/pipes-R, written once, durable
 * before the record that commits R names it): a header, npipes entries,
 * then each pipe's unread bytes in entry order.  Recovery makes pipe k
 * again in init, filled with its bytes, its read end at descriptor
 * DC_TREE_PIPE_FD + 2k and its write end at DC_TREE_PIPE_FD + 2k + 1;
 * a member finds the pipe of its descriptor fd in the table f[], which
 * names, for each member's descriptor on a pipe at round R, the pipe.
 */
#define DC_TREE_PIPES_MAGIC 0x50525444u /* "DTRP" */
#define DC_TREE_MAX_PIPES 64
#define DC_TREE_MAX_PIPE_FDS 512
#define DC_TREE_PIPE_FD 100

struct dc_tree_pipes {
	uint32_t magic;     /* 0: DC_TREE_PIPES_MAGIC */
	uint16_t version;   /* 4: DC_TREE_VERSION */
	uint16_t npipes;    /* 6 */
	uint32_t nfds;      /* 8: entries of f[] */
	uint32_t reserved;  /* 12: zero */
	uint64_t round;     /* 16: the round these are the pipes of */
	uint64_t bytes;     /* 24: total bytes after the entries */
	uint64_t checksum;  /* 32: rio_checksum of p[], f[] and the bytes */
	uint64_t reserved2; /* 40: zero */
	struct dc_tree_pipe {
		uint64_t ino;   /* inode of the pipe in round R */
		uint32_t len;   /* unread bytes */
		uint32_t reserved;
	} p[DC_TREE_MAX_PIPES]; /* 48 */
	struct dc_tree_pipe_fd {
		int32_t pid;    /* a member */
		int16_t fd;     /* its descriptor */
		uint16_t pipe;  /* on pipe p[pipe] */
	} f[DC_TREE_MAX_PIPE_FDS]; /* 48 + 16 * DC_TREE_MAX_PIPES */
};
RIO_STATIC_ASSERT(sizeof(struct dc_tree_pipes) == 48 +
	16 * DC_TREE_MAX_PIPES + 8 * DC_TREE_MAX_PIPE_FDS,
	"tree pipes header size");

/*
 * A member's image (TREE/p<pid>[-e<n>]/image, written once, durable
 * before the image can take part in a round): what recovery executes to
 * make the member again -- the program, its arguments and its
 * environment (without the member's own DC_DIR, DC_2PC_ID, DC_2PC_COORD,
 * DC_TREE_FORKED, DC_TREE_GEN, DC_TREE_FDS, which the exec adds).
 *
 *   +-------+---------+----------+------+------+-----+----------+
 *   | magic | version | reserved | argc | envc | len | checksum |
 *   | 0     | 4       | 6        | 8    | 12   | 16  | 24       |
 *   +-------+---------+----------+------+------+-----+----------+
 *   then len bytes: the path\0, argc arguments\0, envc variables\0.
 * A torn file fails its checksum: recovery refuses the member (the tree
 * cannot have committed a round naming an image that is not durable).
 */
#define DC_TREE_IMAGE_MAGIC 0x49525444u /* "DTRI" */
#define DC_TREE_IMAGE_MAX (256u << 10)  /* bytes of strings */

struct dc_tree_image {
	uint32_t magic;    /* 0: DC_TREE_IMAGE_MAGIC */
	uint16_t version;  /* 4: DC_TREE_VERSION */
	uint16_t reserved; /* 6: zero */
	uint32_t argc;     /* 8 */
	uint32_t envc;     /* 12 */
	uint64_t len;      /* 16: bytes of strings after the header */
	uint64_t checksum; /* 24: rio_checksum of the strings, seeded with
	                    * rio_checksum of bytes 0..23 */
};
RIO_STATIC_ASSERT(sizeof(struct dc_tree_image) == 32, "tree image header");

/*
 * What a vfork child wrote to its parent's stack (TREE/p<pid>/vfork,
 * written once by the child before it exits without exec'ing, durable
 * before it says EXIT; tree.c V4): the bytes of the parent's stack from
 * its stack pointer at the clone (sp) up, at most DC_TREE_VFORK_MAX.
 * The parent, waiting in the clone call, copies them over its own stack
 * there (V5): posix_spawn's error reaches it as under vfork.
 *
 *   +-------+---------+----------+----+-----+----------+
 *   | magic | version | reserved | sp | len | checksum |
 *   | 0     | 4       | 6        | 8  | 16  | 24       |
 *   +-------+---------+----------+----+-----+----------+
 *   then len bytes.
 * The directory holds it while any recoverable round names the child;
 * a torn file fails its checksum and is taken for none (the child
 * cannot have said EXIT).
 */
#define DC_TREE_VFORK_MAGIC 0x56525444u /* "DTRV" */
#define DC_TREE_VFORK_MAX (512u << 10)

struct dc_tree_vfork {
	uint32_t magic;    /* 0: DC_TREE_VFORK_MAGIC */
	uint16_t version;  /* 4: DC_TREE_VERSION */
	uint16_t reserved; /* 6: zero */
	uint64_t sp;       /* 8: the parent's stack pointer at the clone */
	uint64_t len;      /* 16: bytes after the header */
	uint64_t checksum; /* 24: rio_checksum of the bytes, seeded with
	                    * rio_checksum of bytes 0..23 */
};
RIO_STATIC_ASSERT(sizeof(struct dc_tree_vfork) == 32, "tree vfork header");

/* Whether environment entry e is one of the member's own variables, which
 * an image leaves out and the exec adds (libdc's tree.c, dc-tree.c). */
static inline bool
dc_tree_member_var(const char *e)
{
	static const char *const own[] = { "DC_DIR=", "DC_2PC_ID=",
		"DC_TREE_FORKED=", "DC_2PC_COORD=", "DC_TREE_GEN=",
		"DC_TREE_FDS=" };
	for (unsigned i = 0; i < sizeof(own) / sizeof(own[0]); i++)
		if (!strncmp(e, own[i], strlen(own[i])))
			return true;
	return false;
}

#endif /* DC_TREE_LAYOUT_H */
