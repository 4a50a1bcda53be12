#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tree_finish.sh -- dc-run --tree whose init dies at one of the test
# build's crash points, once (DC_TREE_CRASH=POINT:FILE; TREE_CRASH, default
# finish):
#   finish  the program ended, the directories removed, the record not
#           yet: the launcher starts init again, which must only finish
#           the removal;
#   commit  in the first round a member that was waited for leaves,
#           before the record: the tree returns to the previous round,
#           whose members' directories must all still be there;
#   exit    in the first round after a member other than the root said
#           EXIT: the tree returns to a round that member ran in, and
#           it is made again (tree_print.sh).
# Either way: the program's output exactly once (no member fails, so no
# visible event is repeated), its exit status, no directory left.
#
#   tree_finish.sh DCRUN_TEST PROG ARGS...
#
# With TREE_EXPECT=fail (a broken build) the check must fail.  TREE_LIMIT:
# seconds the run with the crash may take (60).  TREE_BROKEN_LIB: a broken
# libdc for the run with the crash ($DC_LIB).
# Exit: 0 pass, 1 fail, 2 usage.
set -u
[ $# -ge 2 ] || { echo "usage: $0 DCRUN_TEST PROG ARGS..." >&2; exit 2; }
DCRUN=$1
shift
T=$(mktemp -d /tmp/dc-tree-fin.XXXXXX)
SHM=$(mktemp -d /dev/shm/dc-tree-fin.XXXXXX)
trap 'rm -rf "$T" "$SHM"' EXIT
mkdir "$T/ref.d" "$T/obs.d"
(cd "$T/ref.d" && timeout 60 "$DCRUN" --tree --protocol cpv-2pc --dir "$SHM/ref" \
	-- "$@" > "$T/ref" 2> "$T/ref.err")
ref_st=$?
(cd "$T/obs.d" && { [ -z "${TREE_BROKEN_LIB:-}" ] || export DC_LIB=$TREE_BROKEN_LIB; } &&
	DC_TREE_CRASH="${TREE_CRASH:-finish}:$T/crashed" timeout "${TREE_LIMIT:-60}" "$DCRUN" --tree \
	--protocol cpv-2pc --dir "$SHM/run" -- "$@" > "$T/obs" 2> "$T/obs.err")
st=$?
fail=
[ -e "$T/crashed" ] || { echo "the crash point was not reached" >&2; exit 1; }
[ "$st" -eq "$ref_st" ] || fail="status $st, failure-free $ref_st"
cmp -s "$T/ref" "$T/obs" || fail="${fail:+$fail; }the output differs from the failure-free run's"
[ -e "$SHM/run" ] && fail="${fail:+$fail; }the directory is left behind"
if [ -n "${TREE_EXPECT:-}" ]; then
	[ -n "$fail" ] && { echo "broken build caught: $fail" >&2; exit 0; }
	echo "FAIL: the broken build was not caught" >&2
	exit 1
fi
if [ -n "$fail" ]; then
	echo "FAIL: $fail" >&2
	diff "$T/ref" "$T/obs" | head -20 >&2
	tail -5 "$T/obs.err" >&2
	exit 1
fi
echo "init restarted at ${TREE_CRASH:-finish}: output once, status $st" >&2
