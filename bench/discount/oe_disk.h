/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * oe_disk.h -- the order-entry server's database on disk (oe_disk.c):
 *              a data file read and written in 4 KiB blocks through a
 *              buffer pool smaller than it, and a redo log written by
 *              group commit
 */
#ifndef OE_DISK_H
#define OE_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tpcbench.h"

/* Make DIR/oe.data (the order-entry database of DB_MIB MiB, populated,
 * in the block layout) and an empty DIR/oe.log.  0, or -1 (reported). */
int oe_disk_create(const char *dir, size_t db_mib);

/* Open the database DIR/oe.data that oe_disk_create made (and no server
 * changed since) with a buffer of POOL_MIB MiB (0.25, 64 frames, at
 * least): *wl is the workload, whose rows now come through the buffer.
 * 0, or -1 (reported). */
int oe_disk_open(const char *dir, size_t db_mib, double pool_mib,
	void **wl);

/* The backend the transactions run through: the ranges they declare are
 * the buffer's dirty bytes and, at their commit, the log's records. */
extern const struct tb_backend oe_disk_backend;

/* Group commit: the log records of the transactions run since the last
 * call, written and made durable in one write.  The answers of those
 * transactions may be sent after it, not before.  0, or -1 (reported). */
int oe_disk_commit(void);

/* The database as buffer + data file: consistent (the workload's
 * conditions) and equal to the data file with the log replayed over it.
 * 0, or -1 with a reason in why. */
int oe_disk_check(void *wl, char *why, size_t n);

/* On stderr: the block reads, write-backs and log groups (each a write +
 * fdatasync) per transaction, over TX transactions. */
void oe_disk_stats(uint64_t tx);

#endif /* OE_DISK_H */
