/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * twopc_layout.h -- the two-phase-commit protocols' datagram and the
 *                   participant's state record (docs/FORMAT.md)
 *
 * One datagram format, 64 bytes, little-endian, for every message between
 * a participant (libdc, twopc.c) and the coordinator (tools/dc-coord.c):
 *
 *   0      4      6      8      12     16            24            32
 *   +------+------+------+------+------+-------------+-------------+
 *   |magic |versn |type  |part  |nparts|   round     |   epoch     |
 *   +------+------+------+------+------+-------------+-------------+
 *   32            40     44     48     52     56                   64
 *   +-------------+------+------+------+------+--------------------+
 *   |    gen      | pid  |status|reason|flags |     checksum       |
 *   +-------------+------+------+------+------+--------------------+
 *
 * The state record is the participant's own, beside its checkpoint
 * directory (DIR/2pc-state): two 64-byte slots, the valid one with the
 * higher seq is current; a write goes to the other slot, so a torn write
 * leaves the previous record.  Its format has a version of its own
 * (DC_2PC_STATE_VERSION): 2 since a prepare keeps no copy of the
 * directory (twopc.c); a record of another version is refused.
 */
#ifndef DC_TWOPC_LAYOUT_H
#define DC_TWOPC_LAYOUT_H

#include <stdint.h>

#include "rio_assert.h"

#define DC_2PC_MAGIC 0x43503244u    /* "D2PC" */
#define DC_2PC_STATE_MAGIC 0x53503244u /* "D2PS" */
#define DC_2PC_VERSION 1u       /* the datagram */
#define DC_2PC_STATE_VERSION 2u /* the state record (1: 2pc-held copies) */
#define DC_2PC_SEED 0x32706364u

enum dc_2pc_type {
	DC_2PC_JOIN = 1,     /* p->c: I run (status 1: recovered); pid */
	DC_2PC_WELCOME = 2,  /* c->p: joined, epoch; status < 0: refused */
	DC_2PC_REQUEST = 3,  /* p->c: I am about to do a visible event */
	DC_2PC_PREPARE = 4,  /* c->p: checkpoint for round */
	DC_2PC_VOTE = 5,     /* p->c: status 0 yes (gen prepared), else no
	                      * and reason */
	DC_2PC_DECISION = 6, /* c->p: status 1 commit, 0 abort (reason) */
	DC_2PC_ACK = 7,      /* p->c: decision of round applied */
	DC_2PC_ASK = 8,      /* p->c (recovery): what became of round? */
	DC_2PC_ANSWER = 9,   /* c->p: status 1 committed, 0 aborted */
	/* process trees (dc-run --tree, tree.c): the coordinator is the
	 * tree's init, a participant's index its pid */
	DC_2PC_FORK = 10,    /* p->c: code = the pid of a new child;
	                      * answered by ANSWER(round = that pid,
	                      * code = DC_2PC_FORK) */
	DC_2PC_EXIT = 11,    /* p->c: I exit (status); answered by
	                      * ANSWER(round = my pid, code = DC_2PC_EXIT) */
	DC_2PC_RESTORED = 12,/* p->c: recovered, my children made again
	                      * and my pipes open; ANSWER(round = my pid,
	                      * code = DC_2PC_RESTORED) */
	DC_2PC_ROLLBACK = 13, /* c->p: the computation rolled back to round
	                       * in epoch: a participant joined in an
	                       * earlier epoch ends (its launcher restarts
	                       * it) */
	DC_2PC_EXEC = 14,    /* p->c: I execve into image code (tree.c);
	                      * ANSWER(round = my pid, code = DC_2PC_EXEC):
	                      * no round opens until the new image joined */
};

/* Why a round aborted (reason of a DECISION with status 0). */
enum dc_2pc_reason {
	DC_2PC_R_NONE = 0,
	DC_2PC_R_TIMEOUT = 1,    /* a participant did not vote in time */
	DC_2PC_R_NO = 2,         /* a participant voted no (flags: its code) */
	DC_2PC_R_RECOVERED = 3,  /* a participant recovered while the round
	                          * was open */
	DC_2PC_R_COORD = 4,      /* the coordinator recovered in the round */
};

struct dc_2pc_msg {
	uint32_t magic;    /* 0: DC_2PC_MAGIC */
	uint16_t version;  /* 4: DC_2PC_VERSION */
	uint16_t type;     /* 6: enum dc_2pc_type */
	uint32_t part;     /* 8: participant index, 0 .. nparts-1 */
	uint32_t nparts;   /* 12: participants of the computation */
	uint64_t round;    /* 16: round (distributed checkpoint) number */
	uint64_t epoch;    /* 24: rollbacks of the computation so far */
	uint64_t gen;      /* 32: VOTE: a participant's local generation;
	                    * JOIN: its incarnation (random per start) */
	int32_t pid;       /* 40: the sender's process id (logs only) */
	int32_t status;    /* 44: vote / decision / answer, per type */
	int32_t reason;    /* 48: enum dc_2pc_reason */
	int32_t code;      /* 52: a no vote's error code (DC_E*, -errno);
	                    * an abort's: the participant it blames */
	uint64_t checksum; /* 56: rio_checksum of bytes 0..55, DC_2PC_SEED */
};
RIO_STATIC_ASSERT(sizeof(struct dc_2pc_msg) == 64, "2pc datagram size");
RIO_STATIC_ASSERT(__builtin_offsetof(struct dc_2pc_msg, checksum) == 56,
	"2pc checksum last");

/* Participant state (DIR/2pc-state). */
enum dc_2pc_pstate {
	DC_2PC_IDLE = 1,     /* no undecided round: the checkpoint in DIR is
	                      * the participant's part of the committed
	                      * distributed checkpoint `committed` */
	DC_2PC_HOLDING = 2,  /* round `round` undecided: DIR may hold its
	                      * prepared generation gen_prep beside gen_base,
	                      * the part of round `committed` */
	DC_2PC_ABORTED = 3,  /* round aborted: the commit records past
	                      * gen_base must be cleared before recovery */
};

struct dc_2pc_state {
	uint32_t magic;    /* 0: DC_2PC_STATE_MAGIC */
	uint16_t version;  /* 4: DC_2PC_STATE_VERSION */
	uint16_t state;    /* 6: enum dc_2pc_pstate */
	uint64_t seq;      /* 8: record number; slot seq & 1 */
	uint64_t round;    /* 16: the undecided or aborted round */
	uint64_t committed;/* 24: last committed round this participant is in */
	uint64_t gen_base; /* 32: HOLDING, ABORTED: the local generation that
	                    * is the part of `committed` */
	uint64_t gen_prep; /* 40: HOLDING, ABORTED: gen_base + 1, the prepared
	                    * generation; 0 otherwise */
	uint64_t reserved; /* 48: zero */
	uint64_t checksum; /* 56: rio_checksum of bytes 0..55, DC_2PC_SEED */
};
RIO_STATIC_ASSERT(sizeof(struct dc_2pc_state) == 64, "2pc state size");

#endif /* DC_TWOPC_LAYOUT_H */
