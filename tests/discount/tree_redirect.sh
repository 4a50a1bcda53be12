#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
#
# tree_redirect.sh -- a shell's redirection of a group of commands, run
# by dc-run --tree (tree_kill.sh, killed at "inside"): while the group
# runs, the shell's standard output is the file f and the original is
# saved at another number (dash: 10); every round in the group commits
# that.  Recovered there, the shell must get both back, so that "after"
# goes to the original standard output again.
echo before
exec 4>&1
{ /bin/true; echo inside >&4; sleep 1; echo done; } > f
echo after
