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
# (apache2-utils) with keep-alive and 1, 8 and 64 connections for 3 s:
# requests per second, mean and 99th percentile response time, failed
# requests.  CSV in bench/results/held_lighttpd.csv, a table on stdout.
# --quick: 20 and 50 ms, 1 and 8 connections, 1.5 s.
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

IVS="5 20 50 120"; CONNS="1 8 64"; T=3
if [ "$QUICK" = 1 ]; then IVS="20 50"; CONNS="1 8"; T=1.5; fi
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
EOC
	case $1 in
	none) "$LT" -D -f "$M/l.conf" & ;;
	*) "$DCRUN" --dir "$M/ck" --protocol buffered --interval "$2" -- \
		"$LT" -D -f "$M/l.conf" 2> /dev/null & ;;
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
echo "mode,interval_ms,conns,req_per_s,mean_ms,p99_ms,failed" > "$CSV"
printf "%-9s %5s %5s | %9s %9s %9s %6s\n" mode iv conns "req/s" \
	"mean ms" "p99 ms" failed
for mode in none buffered; do
	ivs=-
	[ $mode = buffered ] && ivs=$IVS
	for iv in $ivs; do
		start $mode "$iv"
		for c in $CONNS; do
			out=$(ab -q -k -c "$c" -t "$T" -n 1000000 \
				"http://127.0.0.1:$PORT/f10k" 2>&1 || true)
			rps=$(echo "$out" | awk '/Requests per second/ {print $4}')
			mean=$(echo "$out" | awk '/Time per request.*\(mean\)$/ {print $4}')
			p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
			fail=$(echo "$out" | awk '/Failed requests/ {print $3}')
			echo "$mode,$iv,$c,$rps,$mean,$p99,$fail" >> "$CSV"
			printf "%-9s %5s %5s | %9s %9s %9s %6s\n" $mode "$iv" \
				"$c" "$rps" "$mean" "$p99" "$fail"
		done
		stop
	done
done
echo "CSV: $CSV"
