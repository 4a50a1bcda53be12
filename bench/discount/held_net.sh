#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# held_net.sh -- ReViveI/O's network micro-benchmark under the buffered
#                protocol: a UDP echo server (dc-bench-netecho)
#
#   bench/discount/held_net.sh [--quick] [BUILD_DIR]
#
# The echo server runs alone (no recovery), under cpvs (a checkpoint
# before every answer) and under buffered (answers held until the next
# checkpoint) at intervals of 5, 20, 50 and 120 ms, checkpoint directory
# on tmpfs.  For message sizes of 64 B, 1 KiB, 16 KiB and 65000 B (the
# largest UDP datagram is 65507) the client measures on loopback:
#   latency     one request at a time, a pause drawn from [0, P) after
#               each answer (P = 2 x the interval, 20 ms without one) so
#               requests fall anywhere between checkpoints: mean, median
#               and 99th percentile round trip;
#   throughput  W requests in flight (16; 2 of 65000 B, which the
#               server's receive buffer could otherwise drop): answers
#               per second and Mbit/s of answers.
# CSV in bench/results/held_net.csv, a table on stdout.  --quick: 64 B
# and 16 KiB, 20 and 50 ms, 1.5 s per point.
set -euo pipefail
cd "$(dirname "$0")/../.."
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
B=${1:-build}
ninja -C "$B" discount/dc-run bench/discount/dc-bench-netecho > /dev/null
R=bench/results
mkdir -p "$R"
DCRUN=$(realpath "$B/discount/dc-run")
NE=$(realpath "$B/bench/discount/dc-bench-netecho")
M=$(mktemp -d /dev/shm/dc-net-XXXXXX)
SRV=
cleanup() {
	[ -n "$SRV" ] && kill -9 "$SRV" 2> /dev/null || true
	rm -rf "$M"
}
trap cleanup EXIT

SIZES="64 1024 16384 65000"; IVS="5 20 50 120"; LS=4; TS=2
if [ "$QUICK" = 1 ]; then SIZES="64 16384"; IVS="20 50"; LS=1.5; TS=1.5; fi
PORT=$((30000 + RANDOM % 20000))

start() { # MODE INTERVAL
	rm -rf "$M/ck"
	PORT=$((PORT + 1))
	case $1 in
	none) "$NE" server $PORT & ;;
	cpvs) "$DCRUN" --dir "$M/ck" --protocol cpvs -- "$NE" server $PORT & ;;
	*) "$DCRUN" --dir "$M/ck" --protocol buffered --interval "$2" -- \
		"$NE" server $PORT & ;;
	esac
	SRV=$!
	sleep 0.5
}
stop() {
	kill -9 "$SRV" 2> /dev/null || true
	wait "$SRV" 2> /dev/null || true
	SRV=
}
field() { echo "$1" | grep -o "$2=[0-9.]*" | cut -d= -f2; }

CSV=$R/held_net.csv
echo "mode,interval_ms,size,rtt_mean_us,rtt_p50_us,rtt_p99_us,lost_lat,window,msgs_per_s,mbit_per_s,lost_tput" > "$CSV"
printf "%-9s %5s %6s | %9s %9s %9s | %3s %9s %9s\n" mode iv size \
	"mean us" "p50 us" "p99 us" W "answers/s" "Mbit/s"
for mode in none cpvs buffered; do
	ivs=-
	[ $mode = buffered ] && ivs=$IVS
	for iv in $ivs; do
		start $mode "$iv"
		for size in $SIZES; do
			think=20000
			[ $mode = buffered ] && think=$((iv * 2000))
			w=16
			[ "$size" -gt 16384 ] && w=2
			lat=$("$NE" client $PORT "$size" $LS 1 $think)
			tp=$("$NE" client $PORT "$size" $TS $w)
			echo "$mode,$iv,$size,$(field "$lat" rtt_mean_us),$(field "$lat" rtt_p50_us),$(field "$lat" rtt_p99_us),$(field "$lat" lost),$w,$(field "$tp" msgs_per_s),$(field "$tp" mbit_per_s),$(field "$tp" lost)" >> "$CSV"
			printf "%-9s %5s %6s | %9s %9s %9s | %3s %9s %9s\n" \
				$mode "$iv" "$size" "$(field "$lat" rtt_mean_us)" \
				"$(field "$lat" rtt_p50_us)" \
				"$(field "$lat" rtt_p99_us)" $w \
				"$(field "$tp" msgs_per_s)" \
				"$(field "$tp" mbit_per_s)"
		done
		stop
	done
done
echo "CSV: $CSV"
