#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# nbody_lost.sh -- the N-body's resend rule and its end (nbody_prog.c),
# without libdc, four ranks:
#
#   lost  each rank loses the first message of step 1 from the next rank
#         (NBODY_LOSE=1), a ring in which every rank already holds the
#         message of the rank that lacks its own.  A rule that only
#         resends to the ranks it lacks leaves all four waiting for ever.
#   end   rank 2 hears nothing from rank 3 in the first 500 ms of the
#         last step (NBODY_DEAF=500), while rank 3 has everything at
#         once.  An end that lets rank 3 go once rank 0 is done leaves
#         rank 2 asking an ended rank for ever.
#
# Each must still end, with rank 0's last report (stopped after 20 s).
#
#   nbody_lost.sh NBODY
#
# Exit: 0 pass, 1 fail, 2 usage.
set -u
[ $# = 1 ] || { echo "usage: $0 NBODY" >&2; exit 2; }
NBODY=$1
T=$(mktemp -d /tmp/dc-nbody-lost.XXXXXX)
PORT=$(( 20000 + ($$ * 7) % 12000 ))
pids=()
trap 'kill -9 "${pids[@]}" 2>/dev/null; rm -rf "$T"' EXIT
rc=0
for how in lost end; do
	pids=()
	for r in 0 1 2 3; do
		case $how in
		lost) set -- NBODY_LOSE=1 ;;
		end) set -- NBODY_DEAF=500 ;;
		esac
		env NBODY_PROTOCOL=none "$@" timeout -s KILL 20 \
			"$NBODY" $r 4 $PORT 64 4 1 >"$T/out.$r" 2>"$T/err.$r" &
		pids+=($!)
	done
	for r in 0 1 2 3; do
		wait "${pids[$r]}" || { echo "nbody_lost: $how: rank $r:" \
			"status $? (137: still waiting after 20 s)" >&2; rc=1; }
	done
	grep -q "^step 4 " "$T/out.0" || { echo "nbody_lost: $how: no" \
		"report of the last step" >&2; rc=1; }
done
[ $rc = 0 ] && echo "nbody_lost: pass" >&2
exit $rc
