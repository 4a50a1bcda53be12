#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# held_lighttpd.sh -- ReViveI/O's latency workload: Debian's lighttpd,
#                     unmodified, serving a static file under the buffered
#                     protocol (its connections held by dc-keeper)
#
#   bench/discount/held_lighttpd.sh [--quick] [BUILD_DIR]
#
# lighttpd (one process, epoll, keep-alive) alone (none) and under
# dc-run --protocol buffered at intervals of 5, 20, 50 and 120 ms
# (directory on tmpfs), serving a 10 KB file on loopback to ab
# (apache2-utils) with keep-alive and 8, 64, 256 and 512 connections for
# 3 s: requests per second, mean and 99th percentile response time,
# failed requests.  Held output gives each connection one answer per
# interval, so a throughput of X needs about X x interval / 2
# connections in flight (Little's law): 256 and 512 are there for that.
# Rounds are interleaved (every mode once, then again), 3 of them; the
# table gives each point's mean over the rounds and its ratio to none
# with as many connections.  CSV in bench/results/held_lighttpd.csv.
# --quick: none and 50 ms, 8 and 256 connections, 1 round of 1.5 s.
# LT_MODES, LT_CONNS, LT_ROUNDS and LT_T choose the points; a mode "50s"
# is 50 ms with every checkpoint written in place (DC_CKPT_SYNC=1),
# beside "50", written behind; "50t" is 50 ms with every system call
# trapped (DC_DIRECT=0), beside "50", whose hot calls are direct.
set -euo pipefail
cd "$(dirname "$0")/../.."
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
B=${1:-build}
LT=$(command -v lighttpd || echo /usr/sbin/lighttpd)
command -v ab > /dev/null && [ -x "$LT" ] || {
	echo "held_lighttpd.sh: needs lighttpd and ab (apache2-utils)" >&2
	exit 77
}
ninja -C "$B" discount/dc-run discount/dc-keeper > /dev/null
R=bench/results
mkdir -p "$R"
DCRUN=$(realpath "$B/discount/dc-run")
M=$(mktemp -d /dev/shm/dc-lt-XXXXXX)
SRV=
cleanup() {
	[ -n "$SRV" ] && kill -9 "$SRV" 2> /dev/null || true
	rm -rf "$M"
}
trap cleanup EXIT
export DC_KEEPER_LINGER=5
mkdir -p "$M/www"
head -c 10240 /dev/urandom > "$M/www/f10k"

MODES=${LT_MODES:-none 5 20 50 120}; CONNS=${LT_CONNS:-8 64 256 512}
T=${LT_T:-3}; ROUNDS=${LT_ROUNDS:-3}
if [ "$QUICK" = 1 ]; then MODES="none 50"; CONNS="8 256"; T=1.5; ROUNDS=1; fi
PORT=$((20000 + RANDOM % 12000))

start() { # MODE INTERVAL
	rm -rf "$M/ck"
	PORT=$((PORT + 1))
	cat > "$M/l.conf" <<EOC
server.document-root = "$M/www"
server.port = $PORT
server.bind = "127.0.0.1"
server.errorlog = "$M/error.log"
server.max-worker = 0
server.max-keep-alive-requests = 1000000
server.max-connections = 2048
server.max-fds = 4096
EOC
	case $1 in
	none) "$LT" -D -f "$M/l.conf" & ;;
	*) local sync=
		case $2 in *s) sync=DC_CKPT_SYNC=1 ;; *t) sync=DC_DIRECT=0 ;;
		esac
		env $sync "$DCRUN" --dir "$M/ck" --protocol buffered \
		--interval "${2%[st]}" -- "$LT" -D -f "$M/l.conf" 2> /dev/null & ;;
	esac
	SRV=$!
	sleep 0.7
}
stop() {
	kill -9 "$SRV" 2> /dev/null || true
	wait "$SRV" 2> /dev/null || true
	SRV=
}

CSV=$R/held_lighttpd.csv
echo "round,mode,conns,req_per_s,mean_ms,p99_ms,failed" > "$CSV"
for round in $(seq "$ROUNDS"); do
	for mode in $MODES; do
		if [ "$mode" = none ]; then start none; else start buffered "$mode"; fi
		for c in $CONNS; do
			out=$(ab -q -k -c "$c" -t "$T" -n 1000000 \
				"http://127.0.0.1:$PORT/f10k" 2>&1 || true)
			rps=$(echo "$out" | awk '/Requests per second/ {print $4}')
			mean=$(echo "$out" | awk '/Time per request.*\(mean\)$/ {print $4}')
			p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
			fail=$(echo "$out" | awk '/Failed requests/ {print $3}')
			echo "$round,$mode,$c,${rps:-0},${mean:-0},${p99:-0},${fail:-x}" >> "$CSV"
			echo "round $round $mode c=$c: $rps req/s mean $mean ms p99 $p99 ms failed $fail"
		done
		stop
	done
done
echo "CSV: $CSV"
awk -F, -v modes="$MODES" -v conns="$CONNS" -v bad=failed \
	-f bench/discount/held_table.awk "$CSV"
