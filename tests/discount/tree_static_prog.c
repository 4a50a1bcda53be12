/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * tree_static_prog.c -- a statically linked program: a tree's process
 * that execs it is refused (libdc cannot be preloaded into it;
 * tree_refuse.sh)
 */
int
main(void)
{
	return 3;
}
