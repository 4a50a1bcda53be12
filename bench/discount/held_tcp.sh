#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# held_tcp.sh -- the buffered protocol's TCP network micro-benchmark: an
#                ordinary epoll echo server (dc-tcp-echo) whose connections
#                dc-keeper holds, and its recovery under load
#
#   bench/discount/held_tcp.sh [--quick] [BUILD_DIR]
#
# The server runs alone (none) and under buffered at intervals of 5, 20,
# 50 and 120 ms (checkpoint directory on tmpfs; there is no cpvs row: a
# TCP socket is refused outside the buffered protocol).  For payloads of
# 64 B, 1 KiB, 16 KiB and 64 KiB the client (dc-bench-tcpecho) measures
# on loopback:
#   latency     one connection, one request at a time, a pause drawn from
#               [0, P) after each answer (P = 2 x the interval, 20 ms
#               without one): mean, median, 99th percentile round trip;
#   throughput  8 connections with 8 requests in flight each: answers per
#               second and Mbit/s of answers.
# Then recovery: 20 ms, 4 connections with 4 requests in flight, the
# server SIGKILLed after 1 s and started again at once (the same
# command): the longest time without an answer (kill to service), and
# the clients' errors (resets, lost or malformed answers).
# CSV in bench/results/held_tcp.csv, a table on stdout.  --quick: 64 B
# and 16 KiB, 20 and 50 ms, 1.5 s per point.  $TCP_SERVER_MODE: the
# server's mode (dc-tcp-echo: epoll, the default; poll; threadsN, an
# acceptor thread and N workers), in the CSVs' names but for epoll.
set -euo pipefail
cd "$(dirname "$0")/../.."
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
B=${1:-build}
ninja -C "$B" discount/dc-run discount/dc-keeper tests/discount/dc-tcp-echo \
	bench/discount/dc-bench-tcpecho > /dev/null
R=bench/results
mkdir -p "$R"
DCRUN=$(realpath "$B/discount/dc-run")
SRVP=$(realpath "$B/tests/discount/dc-tcp-echo")
CL=$(realpath "$B/bench/discount/dc-bench-tcpecho")
M=$(mktemp -d /dev/shm/dc-tcp-XXXXXX)
SRV=
cleanup() {
	[ -n "$SRV" ] && kill -9 "$SRV" 2> /dev/null || true
	rm -rf "$M"
}
trap cleanup EXIT
export DC_KEEPER_LINGER=5
SM=${TCP_SERVER_MODE:-epoll}
SUF=
[ "$SM" = epoll ] || SUF=_$SM

SIZES="64 1024 16384 65536"; IVS="5 20 50 120"; LS=4; TS=3
if [ "$QUICK" = 1 ]; then SIZES="64 16384"; IVS="20 50"; LS=1.5; TS=1.5; fi
PORT=$((20000 + RANDOM % 12000))

launch() { # MODE INTERVAL (the same command again: a recovery)
	case $1 in
	none) "$SRVP" $PORT "$SM" 2> /dev/null & ;; # a client that ends resets
	*) "$DCRUN" --dir "$M/ck" --protocol buffered --interval "$2" -- \
		"$SRVP" $PORT "$SM" & ;;
	esac
	SRV=$!
}
start() {
	rm -rf "$M/ck"
	PORT=$((PORT + 1))
	launch "$@"
	sleep 0.5
}
stop() {
	kill -9 "$SRV" 2> /dev/null || true
	wait "$SRV" 2> /dev/null || true
	SRV=
	sleep 0.3 # the keeper's connections close
}
field() { echo "$1" | grep -o "$2=[0-9.]*" | cut -d= -f2; }

CSV=$R/held_tcp$SUF.csv
echo "mode,interval_ms,size,rtt_mean_us,rtt_p50_us,rtt_p99_us,conns,window,msgs_per_s,mbit_per_s,errors" > "$CSV"
printf "%-9s %5s %6s | %9s %9s %9s | %9s %9s\n" mode iv size \
	"mean us" "p50 us" "p99 us" "answers/s" "Mbit/s"
for mode in none buffered; do
	ivs=-
	[ $mode = buffered ] && ivs=$IVS
	for iv in $ivs; do
		start $mode "$iv"
		for size in $SIZES; do
			think=20000
			[ $mode = buffered ] && think=$((iv * 2000))
			lat=$("$CL" $PORT "$size" $LS 1 1 $think || true)
			tp=$("$CL" $PORT "$size" $TS 8 8 || true)
			err=$(( $(field "$lat" errors) + $(field "$tp" errors) ))
			echo "$mode,$iv,$size,$(field "$lat" rtt_mean_us),$(field "$lat" rtt_p50_us),$(field "$lat" rtt_p99_us),8,8,$(field "$tp" msgs_per_s),$(field "$tp" mbit_per_s),$err" >> "$CSV"
			printf "%-9s %5s %6s | %9s %9s %9s | %9s %9s %s\n" \
				$mode "$iv" "$size" "$(field "$lat" rtt_mean_us)" \
				"$(field "$lat" rtt_p50_us)" \
				"$(field "$lat" rtt_p99_us)" \
				"$(field "$tp" msgs_per_s)" \
				"$(field "$tp" mbit_per_s)" \
				"$([ $err = 0 ] || echo "errors=$err")"
		done
		stop
	done
done
echo "CSV: $CSV"

# recovery under load: kill to service
REC=$R/held_tcp${SUF}_recovery.csv
echo "round,max_gap_ms,msgs,errors" > "$REC"
for round in 1 2 3 4 5; do
	start buffered 20
	"$CL" $PORT 64 3 4 4 > "$M/out" &
	C=$!
	sleep 1
	kill -9 "$SRV"
	wait "$SRV" 2> /dev/null || true
	launch buffered 20
	wait $C || true
	out=$(cat "$M/out")
	echo "$round,$(field "$out" max_gap_ms),$(field "$out" msgs),$(field "$out" errors)" >> "$REC"
	echo "recovery $round: no answer for $(field "$out" max_gap_ms) ms," \
		"$(field "$out" msgs) answers, $(field "$out" errors) errors"
	stop
done
echo "CSV: $REC"
