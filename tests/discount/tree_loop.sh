#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# tree_loop.sh -- a shell script that runs external commands in a loop,
# run by dc-run --tree (tree_kill.sh): each step forks and execs expr,
# tr, wc and awk, through pipes and command substitutions, appends to
# the file log, and prints a line (a visible event).
#
#   tree_loop.sh STEPS
set -e
i=0
: > log
while [ "$i" -lt "${1:-10}" ]; do
	i=$(expr "$i" + 1)
	echo "step $i" | tr a-z A-Z
	printf '%s\n' "$i" >> log
	echo "log: $(wc -l < log) lines, sum $(awk '{ s += $1 } END { print s }' log)"
done
