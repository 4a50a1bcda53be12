/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tcp_echo.h -- the messages of the TCP echo server (tcp_echo_prog.c) and
 *               its checking client (tcp_kill.c)
 *
 * The server keeps, per client id, a count of the requests it answered
 * and a hash chained over a random nonce it draws for each answer.  A
 * client that checks count == seq + 1 sees every request take effect
 * once; one that recomputes the chain from the nonces it was sent sees
 * an answer it was sent and the server then forgot (a rolled-back
 * interval's output that got out): the next answer's hash no longer
 * follows from the nonces the client saw.
 */
#ifndef TCP_ECHO_H
#define TCP_ECHO_H

#include <stdint.h>

#define TE_REQ 0x51524554u   /* "TERQ" */
#define TE_REP 0x50524554u   /* "TERP" */
#define TE_QUIT 0xffffffffu  /* cid: answer, then exit */
#define TE_MAXLEN 65536u
#define TE_MAXCID 256u

struct te_req {
	uint32_t magic, cid;
	uint64_t seq;
	uint32_t len, pad;
};

struct te_rep {
	uint32_t magic, cid;
	uint64_t seq, count, nonce, hash;
	uint32_t len, pad;
};

static inline uint64_t
te_chain(uint64_t h, uint64_t nonce, uint64_t seq)
{
	const uint64_t v[2] = { nonce, seq };
	const unsigned char *p = (const unsigned char *)v;
	for (int i = 0; i < 16; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

#define TE_HASH0 0xcbf29ce484222325ull

#endif /* TCP_ECHO_H */
