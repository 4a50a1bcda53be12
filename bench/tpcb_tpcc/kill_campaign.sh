#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# kill_campaign.sh -- the long kill -9 campaigns of Trinity, Quadra and
# libvista's redo mode (the suite's tb-crash-trinity, tb-crash-quadra and
# tb-crash-vista-redo kill 12 times a workload)
#
#   bench/tpcb_tpcc/kill_campaign.sh [-n KILLS] [BUILD_DIR]
#
# For each design and each workload (debit-credit on 1 MiB, order-entry on
# 4 MiB for Trinity and Quadra, 1 MiB for redo mode): tb_crash runs
# transactions on one database and is SIGKILLed KILLS times (default 300)
# at random moments 20-200 ms into each run; after each kill the design's
# recovery must leave the workload's invariants intact and every
# acknowledged transaction committed (tests/bench/tb_crash_test.cpp).
# Then the broken builds must be caught (a commit acknowledged before its
# commit point; order-entry's words stored without their old value; redo
# mode with a transaction's last range undeclared).  Prints each test's
# result and seed; exit status 1 if any failed.
set -euo pipefail

cd "$(dirname "$0")/../.."
. bench/tpcb_tpcc/campaign.sh
campaign_args 300 19 "$@"
KILLS=$N
T=$B/tests/bench/tb_crash_test
export TB_CRASH=$B/bench/tpcb_tpcc/tb_crash
export TB_CRASH_PWORD_EARLY_ACK=$B/bench/tpcb_tpcc/tb_crash_broken_pword_early_ack
export TB_CRASH_PWORD_RAW_TAIL=$B/bench/tpcb_tpcc/tb_crash_broken_pword_raw_tail
export TB_CRASH_RANGE=$B/bench/tpcb_tpcc/tb_crash_broken_range
campaign_need "$T" "$TB_CRASH" "$TB_CRASH_PWORD_EARLY_ACK" \
	"$TB_CRASH_PWORD_RAW_TAIL" "$TB_CRASH_RANGE"
LOG=$(mktemp)
trap 'rm -f "$LOG"' EXIT
status=0
for tag in tb-crash-trinity tb-crash-quadra tb-crash-vista-redo \
	tb-crash-pword-early-ack tb-crash-pword-raw-tail \
	tb-crash-vista-redo-broken; do
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
