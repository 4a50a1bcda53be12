#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# held_memcached.sh -- a packaged threaded server under the buffered
#                      protocol: Debian's memcached -t 4, unmodified
#
#   bench/discount/held_memcached.sh [--quick] [BUILD_DIR]
#
# memcached with four worker threads (and its five others; libevent's
# self-pipes and memcached's eventfds between them: kstate.c invariant 8)
# alone (none) and under dc-run --protocol buffered at intervals of 20
# and 50 ms (directory on tmpfs), driven on loopback by dc-bench-mcload
# (mcload.c: 10,000 keys of 100 bytes set first, then 90% gets and 10%
# sets, one request in flight a connection, every answer checked) with
# 8, 64, 256 and 1,024 connections for 3 s: requests per second, mean and 99th
# percentile response time, wrong answers.  Held output gives each
# connection about one answer per interval.  Rounds are interleaved
# (every mode once, then again), 3 of them; the table gives each point's
# mean over the rounds and its ratio to none with as many connections.
# CSV in bench/results/held_memcached.csv.
# --quick: none and 50 ms, 8 and 256 connections, 1 round of 1.5 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
B=${1:-build}
MC=$(command -v memcached || echo /usr/bin/memcached)
[ -x "$MC" ] || { echo "held_memcached.sh: needs memcached" >&2; exit 77; }
ninja -C "$B" discount/dc-run discount/dc-keeper bench/discount/dc-bench-mcload \
	> /dev/null
R=bench/results
mkdir -p "$R"
DCRUN=$(realpath "$B/discount/dc-run")
LOAD=$(realpath "$B/bench/discount/dc-bench-mcload")
M=$(mktemp -d /dev/shm/dc-mc-XXXXXX)
SRV=
cleanup() {
	[ -n "$SRV" ] && kill -9 "$SRV" 2> /dev/null || true
	rm -rf "$M"
}
trap cleanup EXIT
export DC_KEEPER_LINGER=5
ulimit -n 4096 2> /dev/null || true # the client's 1,024 connections
U=(); [ "$(id -u)" = 0 ] && U=(-u root) # memcached: root must name a user

MODES="none 20 50"; CONNS="8 64 256 1024"; T=3; ROUNDS=3
if [ "$QUICK" = 1 ]; then MODES="none 50"; CONNS="8 256"; T=1.5; ROUNDS=1; fi
PORT=$((20000 + RANDOM % 12000))

start() { # MODE
	rm -rf "$M/ck"
	PORT=$((PORT + 1))
	local args=(-t 4 -p "$PORT" -U 0 -l 127.0.0.1 -c 4096 "${U[@]}")
	case $1 in
	none) "$MC" "${args[@]}" & ;;
	*) "$DCRUN" --dir "$M/ck" --protocol buffered --interval "$1" -- \
		"$MC" "${args[@]}" 2> /dev/null & ;;
	esac
	SRV=$!
	sleep 0.7
}
stop() {
	kill -9 "$SRV" 2> /dev/null || true
	wait "$SRV" 2> /dev/null || true
	SRV=
}

CSV=$R/held_memcached.csv
echo "round,mode,conns,req_per_s,mean_ms,p99_ms,errors" > "$CSV"
for round in $(seq "$ROUNDS"); do
	for mode in $MODES; do
		for c in $CONNS; do
			# a fresh server for each point: its keys set by the
			# client first
			start "$mode"
			out=$("$LOAD" "$PORT" "$c" "$T" 2>&1 || true)
			stop
			rps=$(echo "$out" | awk '{print $2}')
			mean=$(echo "$out" | awk '{print $4}')
			p99=$(echo "$out" | awk '{print $6}')
			err=$(echo "$out" | awk '{print $8}')
			echo "$round,$mode,$c,${rps:-0},${mean:-0},${p99:-0},${err:-x}" >> "$CSV"
			echo "round $round $mode c=$c: $rps req/s mean $mean ms p99 $p99 ms errors $err"
		done
	done
done
echo "CSV: $CSV"
awk -F, -v modes="$MODES" -v conns="$CONNS" \
	-f bench/discount/held_table.awk "$CSV"
