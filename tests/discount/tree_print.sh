#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# tree_print.sh -- a child prints a line to the standard output the tree
# inherited (a regular file in tree_finish.sh) and exits; its parent
# forks again and prints the next line.  With TREE_CRASH=exit init dies
# in the fork's round: the tree returns to the child's round, the child
# made again prints its line again, and the parent's line must follow
# it, not overwrite it (the two share one description, as in the first
# run).
#
#   tree_print.sh
set -e
tr a-z A-Z <<EOF
step 1
EOF
x=$(expr 1 + 1)
echo "after $x"
