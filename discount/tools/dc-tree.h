/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * dc-tree.h -- dc-run --tree (dc-tree.c)
 */
#ifndef DC_TREE_H
#define DC_TREE_H

#include <stdbool.h>

/* Run argv as the root of a process tree checkpointed in dir, recovering
 * the tree after any failure of its processes (docs/ARCHITECTURE.md,
 * "process trees").  The environment already holds libdc's options.
 * Returns the root's exit status, or 70 when the tree cannot start. */
int dc_tree_launch(const char *dir, char **argv, bool verbose);

#endif /* DC_TREE_H */
