#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# nbody.sh -- the thesis' Figure 6.6: a Barnes-Hut N-body of 4 processes
# exchanging its bodies over UDP (tests/discount/nbody_prog.c, dc_init in
# main) under every recovery protocol, the checkpoints in memory (tmpfs,
# Discount Checking) and on disk (ext4, fdatasync: Discount
# Checking-disk); and the kill campaign of the two 2PC protocols.
#
#   bench/discount/nbody.sh [--quick] [--kills N] [BUILD_DIR]
#
# For each protocol: commits (checkpoints of the 4 processes, first ones
# included), and the run-time ratio
# against the run without libdc -- of the CPU time (user + system of the
# 4 processes and the coordinator), which other load on a shared machine
# inflates less, and of the wall-clock time.  Medians of REPS runs
# ($NBODY_REPS, 5; --quick: 1 run of 20 steps).  manual: libdc with its
# first checkpoint only -- the cost of running under it at all.
# --kills N: then N random SIGKILLs per 2PC protocol
# (tests/discount/twopc_kill.sh, participants and coordinator).
# Table on stdout; CSV in bench/results/nbody.csv.
set -euo pipefail
cd "$(dirname "$0")/../.."
QUICK=0 KILLS=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1; shift ;;
	--kills) KILLS=$2; shift 2 ;;
	*) break ;;
	esac
done
B=${1:-build}
NB=$B/tests/discount/dc-nbody
CO=$B/discount/dc-coord
for x in "$NB" "$CO"; do
	[ -x "$x" ] || { echo "nbody.sh: build $x first (ninja -C $B tests/discount/dc-nbody discount/dc-coord)" >&2; exit 2; }
done
BODIES=${NBODY_BODIES:-8000} STEPS=${NBODY_STEPS:-40} EVERY=${NBODY_EVERY:-10}
REPS=${NBODY_REPS:-5}
[ $QUICK = 1 ] && { REPS=1; STEPS=20; }
PROTOS="${NBODY_PROTOS:-none manual cpvs cand cbndvs cand-log cbndvs-log cpv-2pc cbndv-2pc}"
mkdir -p bench/results
CSV=bench/results/nbody.csv
W=$(mktemp -d /tmp/dc-nbody.XXXXXX)
trap 'rm -rf "$W" /dev/shm/dc-nbody.$$ /var/tmp/dc-nbody.$$' EXIT
PORT=$(( 21000 + $$ % 10000 ))

# one run: prints "cpu_s wall_ms commits"
one() { # PROTO BASE_DIR
	local p=$1 d=$2 cp=""
	rm -rf "$d"; mkdir -p "$d"
	rm -f "$W"/t.* "$W"/s.*
	if [[ $p == *2pc ]]; then
		"$CO" --port $((PORT + 10)) --parts 4 --dir "$d/coord" 2>/dev/null &
		cp=$!
		sleep 0.2
	fi
	local t0; t0=$(date +%s%N)
	for r in 0 1 2 3; do
		env NBODY_PROTOCOL=$p DC_DIR="$d/p$r" DC_STATS="$W/s.$r" \
			DC_2PC_COORD=127.0.0.1:$((PORT + 10)) DC_2PC_ID=$r \
			/usr/bin/time -f "%U %S" -o "$W/t.$r" \
			"$NB" $r 4 $PORT $BODIES $STEPS $EVERY >/dev/null &
	done
	wait $(jobs -p | grep -v "^${cp:-x}$")
	local t1; t1=$(date +%s%N)
	if [ -n "$cp" ]; then
		# the coordinator's CPU time (user + system ticks), then stop it
		awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f 0\n", ($14 + $15) / hz }' \
			"/proc/$cp/stat" >"$W/t.9"
		kill -TERM "$cp"; wait "$cp" 2>/dev/null || true
	fi
	local cpu; cpu=$({ cat "$W"/t.[0-9] 2>/dev/null || true; } | awk '{ s += $1 + $2 } END { printf "%.3f", s }')
	local commits; commits=$({ cat "$W"/s.* 2>/dev/null || true; } | awk -F= '$1 == "checkpoints" { s += $2 } END { print s + 0 }')
	echo "$cpu $(( (t1 - t0) / 1000000 )) $commits"
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

echo "protocol,fs,commits,cpu_s,wall_ms,cpu_ratio,wall_ratio" >"$CSV"
printf "N-body: %d bodies, %d steps, 4 processes, rank 0 prints every %d steps; medians of %d\n" \
	"$BODIES" "$STEPS" "$EVERY" "$REPS"
printf "%-11s %-6s %8s %9s %9s %10s %10s\n" protocol fs commits cpu_s wall_ms cpu_ratio wall_ratio
# The protocols take turns within each repetition, so a change of the
# machine's load spreads over all of them alike.
for fs in tmpfs ext4; do
	[ $fs = tmpfs ] && base=/dev/shm/dc-nbody.$$ || base=/var/tmp/dc-nbody.$$
	for i in $(seq $REPS); do
		for p in $PROTOS; do
			one $p "$base" >>"$W/r.$fs.$p"
		done
	done
	cpu0=$(awk '{ print $1 }' "$W/r.$fs.none" | median)
	wall0=$(awk '{ print $2 }' "$W/r.$fs.none" | median)
	for p in $PROTOS; do
		c=$(awk '{ print $1 }' "$W/r.$fs.$p" | median)
		w=$(awk '{ print $2 }' "$W/r.$fs.$p" | median)
		n=$(awk '{ print $3 }' "$W/r.$fs.$p" | median)
		rc=$(awk -v a="$c" -v b="$cpu0" 'BEGIN { printf "%.2f", a / b }')
		rw=$(awk -v a="$w" -v b="$wall0" 'BEGIN { printf "%.2f", a / b }')
		printf "%-11s %-6s %8s %9s %9s %10s %10s\n" $p $fs "$n" "$c" "$w" "$rc" "$rw"
		echo "$p,$fs,$n,$c,$w,$rc,$rw" >>"$CSV"
	done
	rm -rf "$base"
done

if [ "$KILLS" -gt 0 ]; then
	for p in cpv-2pc cbndv-2pc; do
		NBODY_BODIES=512 NBODY_STEPS=120 NBODY_EVERY=6 \
			tests/discount/twopc_kill.sh "$NB" "$CO" "$B/discount/dc-equiv" \
			$p kill "$KILLS" $RANDOM
	done
fi
