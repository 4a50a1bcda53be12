/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * oe_proto.h -- the messages of the order-entry server (oe_server.c) and
 *               its client driver (oe_client.c)
 *
 * One request is one transaction of tpcbench's order-entry mix (the
 * server draws new-order, payment or delivery); the answer comes after
 * the transaction ran.  The server keeps, per connection, the count of
 * transactions it ran for it and a hash chained over a random nonce it
 * draws for each answer.  A client that checks count == seq + 1 sees
 * every answered request take effect exactly once; one that recomputes
 * the chain (te_chain, as the TCP echo server's) from the nonces it
 * received sees an answer that escaped from an interval the server then
 * lost (the next hash no longer follows).
 * OE_CHECK runs the workload's consistency conditions over the whole
 * database and answers 0 (they hold) or 1 in `result`.
 */
#ifndef OE_PROTO_H
#define OE_PROTO_H

#include <stdint.h>

#include "tcp_echo.h" /* te_chain, TE_HASH0: the echo server's chain */

#define OE_REQ 0x51524f45u  /* "EORQ" */
#define OE_REP 0x50524f45u  /* "EORP" */
#define OE_TX 1u
#define OE_CHECK 2u

struct oe_req {
	uint32_t magic, op;
	uint64_t seq;
};

struct oe_rep {
	uint32_t magic, op;
	uint64_t seq;
	uint64_t count;   /* OE_TX: this connection's transactions so far */
	uint64_t total;   /* all transactions the server ran */
	uint64_t nonce, hash;
	uint32_t result;  /* OE_TX: 0 committed, 1 rolled back (never: the
			   * "none" backend cannot roll back, so TPC-C's 1%
			   * commit); OE_CHECK: 0 consistent, 1 not */
	uint32_t pad;
};

#endif /* OE_PROTO_H */
