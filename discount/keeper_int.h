/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * keeper_int.h -- libdc's side of dc-keeper (keeper.c) and the epoll
 *                 registrations recovery makes again (epoll.c)
 */
#ifndef DC_KEEPER_INT_H
#define DC_KEEPER_INT_H

#include <stdbool.h>
#include <stdint.h>

/* struct dc__desc.tcp */
enum { DC__TCP_NEW = 1, DC__TCP_BOUND, DC__TCP_LISTEN, DC__TCP_CONN };

/* In dc__vol: this incarnation's link to the keeper. */
struct dc__kp {
	int on;               /* 0 not asked yet, 1 $DC_KEEPER set, -1 not */
	int fd;               /* the control socket (own), or -1 */
	bool dirty;           /* a connection was written since the commit */
	uint64_t hash;        /* dc_kp_hash(dc__vol.dir) */
};

/* keeper.c */
long dc__kp_syscall(long nr, long *a, void *uc, bool *handled);
struct dc__desc;
int dc__kp_reopen(struct dc__desc *x);
void dc__kp_dropped(int fd, int d, bool last);
void dc__kp_committed(uint64_t gen);
void dc__kp_check(void);
struct dc_kp_ent;
uint32_t dc__kp_take(struct dc_kp_ent *e);
void dc__kp_send(uint64_t gen, const struct dc_kp_ent *e, uint32_t n);
int dc__kp_resumed(void);
void dc__kp_exit(void);
bool dc__kp_dirty(void);
/* epoll.c */
long dc__ep_syscall(long nr, long *a, bool *handled);
void dc__ep_dropped(int fd, bool last);
int dc__ep_restore(void);

#endif /* DC_KEEPER_INT_H */
