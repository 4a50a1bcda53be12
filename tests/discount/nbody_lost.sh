#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# nbody_lost.sh -- the N-body's resend rule (nbody_prog.c), without
# libdc: four ranks, each losing the first message of step 1 from the
# next rank (NBODY_LOSE=1), a ring in which every rank already holds the
# message of the rank that lacks its own.  The computation must still
# end, with rank 0's last report; a rule that only resends to the ranks
# it lacks leaves all four waiting for ever (stopped here after 20 s).
#
#   nbody_lost.sh NBODY
#
# Exit: 0 pass, 1 fail, 2 usage.
set -u
[ $# = 1 ] || { echo "usage: $0 NBODY" >&2; exit 2; }
T=$(mktemp -d /tmp/dc-nbody-lost.XXXXXX)
PORT=$(( 20000 + ($$ * 7) % 12000 ))
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; rm -rf "$T"' EXIT
for r in 0 1 2 3; do
	NBODY_PROTOCOL=none NBODY_LOSE=1 timeout -s KILL 20 \
		"$1" $r 4 $PORT 64 4 1 >"$T/out.$r" 2>"$T/err.$r" &
	pids+=($!)
done
rc=0
for r in 0 1 2 3; do
	wait "${pids[$r]}" || { echo "nbody_lost: rank $r: status $?" \
		"(137: still waiting after 20 s)" >&2; rc=1; }
done
grep -q "^step 4 " "$T/out.0" || { echo "nbody_lost: no report of the" \
	"last step" >&2; rc=1; }
[ $rc = 0 ] && echo "nbody_lost: pass" >&2
exit $rc
