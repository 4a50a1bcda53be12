#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# churn.sh -- a program whose heap and mappings grow and shrink all the
#             time (tests/discount/churn_prog.c), killed at random
#
#   bench/discount/churn.sh [-n KILLS] [-i INTERVAL_MS] [BUILD_DIR]
#
# Each round starts dc-test-churn on the checkpoint directory the last
# round left (so every round but the first recovers), kills it with
# SIGKILL after 20-420 ms, and fails when a run exited on its own with
# another status than 0 or said anything: a recovery that failed (exit 70),
# a resumed run whose memory is not the checkpoint's (exit 3, the block
# named), or one that crashed (SIGSEGV).  A failing round's directory is
# kept under /tmp for a look.  Exit 0 when no round failed.  Defaults: 300
# kills, 1 ms interval (many folds, many regions turning cold).
set -uo pipefail
cd "$(dirname "$0")/../.."
N=300 IV=1
while [ $# -gt 0 ]; do
	case $1 in
	-n) N=$2; shift 2 ;;
	-i) IV=$2; shift 2 ;;
	*) break ;;
	esac
done
B=$(cd "${1:-build}" && pwd)
ninja -C "$B" tests/discount/dc-test-churn > /dev/null || exit 2
P=$B/tests/discount/dc-test-churn
d=$(mktemp -d /dev/shm/dc-churn-XXXXXX)
fails=0
for k in $(seq 1 "$N"); do
	"$P" "$d/ck" 100000000 7 "$IV" > "$d/out" 2>&1 &
	p=$!
	sleep "0.$(printf %03d $((RANDOM % 400 + 20)))"
	kill -9 $p 2> /dev/null
	wait $p 2> /dev/null
	st=$?
	if [ -s "$d/out" ] || { [ $st != 137 ] && [ $st != 0 ]; }; then
		fails=$((fails + 1))
		keep=$(mktemp -d /tmp/dc-churn-fail-XXXXXX)
		cp -a "$d/ck" "$keep/" 2> /dev/null
		echo "kill $k: status $st: $(head -c 300 "$d/out") (kept in $keep)"
		rm -rf "$d/ck"
	fi
	[ $st = 0 ] && rm -rf "$d/ck"
done
rm -rf "$d"
echo "churn: $N kills at a $IV ms interval, $fails failed"
[ $fails = 0 ]
