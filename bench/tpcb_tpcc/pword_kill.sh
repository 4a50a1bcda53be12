#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# pword_kill.sh -- the long kill -9 campaign of Trinity and Quadra (the
# suite's tb-crash-trinity and tb-crash-quadra kill 12 times a workload)
#
#   bench/tpcb_tpcc/pword_kill.sh [-n KILLS] [BUILD_DIR]
#
# For each design and each workload (debit-credit on 1 MiB, order-entry on
# 4 MiB): tb_crash runs transactions on one database and is SIGKILLed
# KILLS times (default 300) at random moments 20-200 ms into each run;
# after each kill the design's recovery must leave the workload's
# invariants intact and every acknowledged transaction committed
# (tests/bench/tb_crash_test.cpp).  Then the two broken builds must be
# caught (a commit acknowledged before its commit point; order-entry's
# words stored without their old value).  Prints each test's result and
# seed; exit status 1 if any failed.
set -euo pipefail

cd "$(dirname "$0")/../.."
BUILD=build
KILLS=300
while [ $# -gt 0 ]; do
	case $1 in
	-n) KILLS=$2; shift ;;
	-h | --help) sed -n '3,17p' "$0"; exit 0 ;;
	*) BUILD=$1 ;;
	esac
	shift
done
B=$(cd "$BUILD" && pwd)
T=$B/tests/bench/tb_crash_test
export TB_CRASH=$B/bench/tpcb_tpcc/tb_crash
export TB_CRASH_PWORD_EARLY_ACK=$B/bench/tpcb_tpcc/tb_crash_broken_pword_early_ack
export TB_CRASH_PWORD_RAW_TAIL=$B/bench/tpcb_tpcc/tb_crash_broken_pword_raw_tail
for x in "$T" "$TB_CRASH" "$TB_CRASH_PWORD_EARLY_ACK" "$TB_CRASH_PWORD_RAW_TAIL"; do
	[ -x "$x" ] || { echo "pword_kill.sh: $x not built" >&2; exit 1; }
done
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
status=0
for tag in tb-crash-trinity tb-crash-quadra tb-crash-pword-early-ack \
	tb-crash-pword-raw-tail; do
	start=$(date +%s)
	rc=0
	CRASH_ITERATIONS=$KILLS "$T" "[$tag]" > "$LOG" 2>&1 || rc=$?
	seed=$(grep -o 'TEST_SEED=[0-9]*' "$LOG" | head -1)
	echo "$tag, $KILLS kills a workload: $([ $rc -eq 0 ] && echo passed ||
		echo FAILED) ($(( $(date +%s) - start )) s, $seed)"
	grep -E "VIOLATED" "$LOG" | sed 's/^/  /' | head -4 || true
	[ $rc -eq 0 ] || { status=1; tail -30 "$LOG"; }
done
exit $status
