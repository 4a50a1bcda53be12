#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# tree_append.sh -- short-lived programs that append to a file, run by
# dc-run --tree (tree_kill.sh): each step execs a shell that appends its
# number to `spawned` and then computes for a moment with builtins only
# (no exec, no output: no round of the tree names it until it exits), and
# the root prints a line.  A kill while it computes (tree_kill.sh with
# TREE_AT_FILE=spawned) must not leave the number twice.
#
#   tree_append.sh STEPS
set -e
: > spawned
i=0
while [ "$i" -lt "${1:-4}" ]; do
	i=$((i + 1))
	sh -c "echo $i >> spawned; n=0; while [ \$n -lt 30000 ]; do n=\$((n + 1)); done"
	echo "step $i"
done
