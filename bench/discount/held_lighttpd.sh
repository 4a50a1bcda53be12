#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# held_lighttpd.sh -- ReViveI/O's latency workload: Debian's lighttpd,
#                     unmodified, serving static files under the buffered
#                     protocol (its connections held by dc-keeper)
#
#   bench/discount/held_lighttpd.sh [--quick] [--link] [BUILD_DIR]
#
# lighttpd (one process, epoll, keep-alive) alone (none) and under
# dc-run --protocol buffered at intervals of 5, 20, 50 and 120 ms
# (directory on tmpfs).  Rounds are interleaved (every mode once, then
# again), 3 of them; the table gives each point's mean over the rounds
# and its ratio to none with as many connections.  LT_MODES, LT_CONNS,
# LT_ROUNDS and LT_T (seconds a point) choose the points; a mode "50s"
# is 50 ms with every checkpoint written in place (DC_CKPT_SYNC=1),
# beside "50", written behind; "50t" is 50 ms with every system call
# trapped (DC_DIRECT=0), beside "50", whose hot calls are direct.
# LT_ENV: VAR=VALUE words for dc-run (e.g. DC_CKPT_TIMES=1); LT_LOG: a
# file dc-run's messages are appended to (else they are dropped).
#
# Loopback (the default; the worst case: CPU-bound small requests):
# one 10 KB file to ab (apache2-utils) with keep-alive and 8, 64, 256
# and 512 connections for 3 s: requests per second, mean and 99th
# percentile response time, failed requests.  Held output gives each
# connection one answer per interval, so a throughput of X needs about
# X x interval / 2 connections in flight (Little's law): 256 and 512 are
# there for that.  CSV in bench/results/held_lighttpd.csv.
# --quick: none and 50 ms, 8 and 256 connections, 1 round of 1.5 s.
#
# --link (the paper's WebStone setting, Table 1 and Section 6.1.4):
# the server and the client each in a network namespace made here
# (lts-PID, ltc-PID; 10.219.0.1 and .2), joined by a veth pair whose two
# ends are shaped to LT_RATE (1gbit) by a token-bucket filter (tc tbf;
# tests/discount/shaped_link.sh); both are removed on exit.  Documents as the paper's: 85 files f01-f85
# of random bytes, sizes drawn uniformly in 50-150 KiB with a fixed seed
# (mean about 100 KiB), made here.  The client is wrk (2 threads,
# webstone.lua) requesting them uniformly with no think time over C
# keep-alive connections (LT_CLOSE=1: a connection per request, as
# WebStone), 16, 64, 256 and 512 of them for 8 s: the link carries
# about 1,100 such requests a second, and held output bounds a closed
# loop to C / interval (50 ms: 320 with 16, 5,120 with 256; 120 ms:
# 2,133 with 256), so 256 and 512 put that bound above the link's at
# every interval, and 16 and 64 show the hold's bound.  Per point: requests and
# MB (10^6 bytes of bodies and headers) per second, mean and 99th
# percentile response time, bad answers (a status other than 200, a
# body not byte-identical to one of the files -- every response is
# compared -- or a socket error), and the machine's CPU use.  After
# each mode's points, curl fetches every file through the link at once
# and compares each by length and SHA-256 (a mismatch counts as bad).
# The link's capacity is measured first with iperf3 (if installed).
# Each point also gives the packets the server side's tbf dropped and
# the server namespace's TCP retransmissions and time-outs (nstat).
# LT_RATE (tc's rate), LT_QUEUE (the tbf's queue in bytes, 1514000: a
# NIC's 1000 full frames) and LT_SYSCTL (name=value words set in the
# server's namespace) change the link.
# CSV in bench/results/held_lighttpd_link.csv.  --quick: none and 50 ms,
# 256 connections, 1 round of 3 s.  Needs root, ip, tc and wrk (exit 77
# otherwise).
set -euo pipefail
cd "$(dirname "$0")/../.."
. tests/discount/shaped_link.sh
QUICK=0 LINK=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1; shift ;;
	--link) LINK=1; shift ;;
	*) break ;;
	esac
done
B=${1:-build}
LT=$(command -v lighttpd || echo /usr/sbin/lighttpd)
need() { echo "held_lighttpd.sh: needs $*" >&2; exit 77; }
[ -x "$LT" ] || need lighttpd
if [ "$LINK" = 1 ]; then
	[ "$(id -u)" = 0 ] || need root for network namespaces
	for t in ip tc wrk curl; do command -v $t > /dev/null || need $t; done
else
	command -v ab > /dev/null || need "ab (apache2-utils)"
fi
ninja -C "$B" discount/dc-run discount/dc-keeper > /dev/null
R=bench/results
mkdir -p "$R"
DCRUN=$(realpath "$B/discount/dc-run")
M=$(mktemp -d /dev/shm/dc-lt-XXXXXX)
SRV= NS_S= NS_C=
cleanup() {
	[ -n "$SRV" ] && kill -9 "$SRV" 2> /dev/null || true
	# what this script started in its namespaces (a keeper lingering)
	link_down $NS_S $NS_C
	[ -n "${LT_LOG:-}" ] && cat "$M/dc-run.log" >> "$LT_LOG" 2> /dev/null
	rm -rf "$M"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
export DC_KEEPER_LINGER=5
mkdir -p "$M/www"

MODES=${LT_MODES:-none 5 20 50 120}
if [ "$LINK" = 1 ]; then
	CONNS=${LT_CONNS:-16 64 256 512}; T=${LT_T:-8}
	if [ "$QUICK" = 1 ]; then MODES="none 50"; CONNS=256; T=3; fi
else
	CONNS=${LT_CONNS:-8 64 256 512}; T=${LT_T:-3}
	if [ "$QUICK" = 1 ]; then MODES="none 50"; CONNS="8 256"; T=1.5; fi
fi
ROUNDS=${LT_ROUNDS:-3}
[ "$QUICK" = 1 ] && ROUNDS=1
PORT=$((20000 + RANDOM % 12000))
ADDR=127.0.0.1
ins() { "$@"; }  # run in the server's namespace
inc() { "$@"; }  # ... in the client's

NDOC=85
if [ "$LINK" = 1 ]; then
	NS_S=lts-$$ NS_C=ltc-$$ ADDR=10.219.0.1
	# both directions shaped: a burst of 1 ms at 1 Gbit/s, a queue as a
	# NIC's (txqueuelen 1000 full frames: 12 ms at 1 Gbit/s)
	link_up "$NS_S" "$NS_C" 10.219.0 "${LT_RATE:-1gbit}" \
		"${LT_QUEUE:-1514000}" || case $? in
		1) NS_S= NS_C=; need "the right to make network namespaces" ;;
		*) echo "held_lighttpd.sh: could not make the link" >&2; exit 1 ;;
		esac
	for kv in ${LT_SYSCTL:-}; do ip netns exec "$NS_S" sysctl -qw "$kv"; done
	ins() { ip netns exec "$NS_S" "$@"; }
	inc() { ip netns exec "$NS_C" "$@"; }
	# WebStone's documents: 85 of about 100 KiB, fixed sizes
	awk -v n=$NDOC 'BEGIN { srand(22); for (i = 1; i <= n; i++)
		printf "f%02d %d\n", i, 51200 + int(rand() * 102400) }' |
	while read -r f s; do head -c "$s" /dev/urandom > "$M/www/$f"; done
	(cd "$M/www" && sha256sum f* > "$M/sums")
	echo "documents: $NDOC, mean $(cat "$M"/www/f* | wc -c |
		awk -v n=$NDOC '{ printf "%.0f", $1 / n }') bytes"
	if command -v iperf3 > /dev/null; then
		ins iperf3 -s -B "$ADDR" -p "$PORT" -1 > /dev/null 2>&1 &
		sleep 0.5
		echo "link capacity (iperf3, server to client, 3 s):" \
			"$(inc iperf3 -c "$ADDR" -p "$PORT" -R -t 3 -f m |
			awk '/receiver/ { print $7, $8 }')"
		wait
	fi
else
	head -c 10240 /dev/urandom > "$M/www/f10k"
fi

# A checkpoint directory per server: the keeper of the last one may still
# be there, sending what it holds, until it sees its directory gone.
start() { # MODE INTERVAL
	PORT=$((PORT + 1))
	lighttpd_conf "$M/l.conf" "$M/www" "$ADDR" "$PORT"
	case $1 in
	none) ins "$LT" -D -f "$M/l.conf" & ;;
	*) local sync=
		case $2 in *s) sync=DC_CKPT_SYNC=1 ;; *t) sync=DC_DIRECT=0 ;;
		esac
		ins env $sync ${LT_ENV:-} "$DCRUN" --dir "$M/ck$PORT" --protocol buffered \
		--interval "${2%[st]}" -- "$LT" -D -f "$M/l.conf" 2>> "$M/dc-run.log" & ;;
	esac
	SRV=$!
	sleep 0.7
}
stop() {
	kill -9 "$SRV" 2> /dev/null || true
	wait "$SRV" 2> /dev/null || true
	SRV=
	rm -rf "$M/ck$PORT"
}

# The server's end: packets its tbf dropped, TCP segments retransmitted,
# retransmission timeouts (the keeper's sockets, or lighttpd's alone).
net_stats() {
	echo "$(ins tc -s qdisc show dev "v$NS_S" | awk '/dropped/ { gsub(",", ""); print $7; exit }')" \
		"$(ins nstat -az TcpRetransSegs TcpExtTCPTimeouts | awk '$1 ~ /^Tcp/ { printf "%s ", $2 }')"
}
cpu_busy() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8, $5 + $6 }' /proc/stat; }

# One point on loopback: ab, keep-alive.
point_ab() { # ROUND MODE CONNS
	local out rps mean p99 fail
	out=$(ab -q -k -c "$3" -t "$T" -n 1000000 \
		"http://127.0.0.1:$PORT/f10k" 2>&1 || true)
	rps=$(echo "$out" | awk '/Requests per second/ {print $4}')
	mean=$(echo "$out" | awk '/Time per request.*\(mean\)$/ {print $4}')
	p99=$(echo "$out" | awk '$1 == "99%" {print $2}')
	fail=$(echo "$out" | awk '/Failed requests/ {print $3}')
	echo "$1,$2,$3,${rps:-0},${mean:-0},${p99:-0},${fail:-x}" >> "$CSV"
	echo "round $1 $2 c=$3: $rps req/s mean $mean ms p99 $p99 ms failed $fail"
}

# One point on the link: wrk, every body checked.
point_wrk() { # ROUND MODE CONNS
	local out ws c0 c1 net0 drops close=
	[ -n "${LT_CLOSE:-}" ] && close=close
	c0=$(cpu_busy)
	net0=$(net_stats)
	out=$(inc wrk -t 2 -c "$3" -d "${T}s" --timeout 10s \
		-s bench/discount/webstone.lua "http://$ADDR:$PORT/" \
		-- "$M/www" $NDOC 22 $close 2>&1 || true)
	c1=$(cpu_busy)
	drops=$(echo "$net0 $(net_stats)" | awk '{ print $4 - $1, $5 - $2, $6 - $3 }')
	ws=$(echo "$out" | grep '^WS ' || echo "WS requests=0")
	echo "$ws $c0 $c1" | awk -F'[ =]' -v r="$1" -v m="$2" -v c="$3" \
		-v drops="${drops%% *}" '{
		for (i = 2; i < NF - 3; i += 2) v[$i] = $(i + 1)
		s = v["duration_us"] / 1e6; if (s <= 0) s = 1
		if (v["checked"] == "") { v["bad"] = 1; v["checked"] = 0 }
		bu = $(NF - 1) - $(NF - 3); id = $NF - $(NF - 2)
		printf "%s,%s,%s,%.1f,%.2f,%.1f,%d,%.2f,%d,%.0f,%d\n", r, m, c,
			v["requests"] / s, v["mean_us"] / 1000, v["p99_us"] / 1000,
			v["bad"] + v["errors"], v["bytes"] / s / 1e6, v["checked"],
			(bu + id > 0 ? 100 * bu / (bu + id) : 0), drops
	}' | tee -a "$CSV" | awk -F, '{ printf "round %s %s c=%s: %s req/s " \
		"%s MB/s mean %s ms p99 %s ms bad %s of %s checked, cpu %s%%, " \
		"%s packets dropped\n", $1, $2, $3, $4, $8, $5, $6, $7, $9, $10, $11 }'
	set -- $drops
	echo "  server side: $2 segments retransmitted, $3 retransmission timeouts"
}

# Every file through the link at once, compared by length and hash; a
# mismatch is a bad answer of the point just measured.
check_files() { # ROUND MODE CONNS
	local d=$M/got n
	rm -rf "$d"
	mkdir -p "$d"
	inc curl -s --no-progress-meter -Z --parallel-max 100 --max-time 20 \
		"http://$ADDR:$PORT/f[01-$NDOC]" -o "$d/f#1" 2> /dev/null || true
	n=$( (cd "$d" && sha256sum -c --quiet "$M/sums" 2>&1 || true) |
		grep -c 'FAILED' || true)
	for f in "$M"/www/f*; do
		[ "$(stat -c %s "$f")" = "$(stat -c %s "$d/${f##*/}" 2> /dev/null)" ] ||
			n=$((n + 1))
	done
	echo "round $1 $2: $NDOC files fetched at once, $n not identical"
	if [ "$n" != 0 ]; then
		awk -F, -v OFS=, -v n="$n" 'NR == FNR { last = NR; next }
			FNR == last { $7 += n } 1' "$CSV" "$CSV" > "$M/csv"
		cat "$M/csv" > "$CSV"
	fi
}

if [ "$LINK" = 1 ]; then
	CSV=$R/held_lighttpd_link.csv
	echo "round,mode,conns,req_per_s,mean_ms,p99_ms,bad,mb_per_s,checked,cpu_pct,drops" > "$CSV"
else
	CSV=$R/held_lighttpd.csv
	echo "round,mode,conns,req_per_s,mean_ms,p99_ms,failed" > "$CSV"
fi
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$ROUNDS"); do
	for mode in $MODES; do
		if [ "$mode" = none ]; then start none; else start buffered "$mode"; fi
		for c in $CONNS; do
			if [ "$LINK" = 1 ]; then point_wrk "$round" "$mode" "$c"
			else point_ab "$round" "$mode" "$c"; fi
		done
		[ "$LINK" = 1 ] && check_files "$round" "$mode" "$c"
		stop
	done
	echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
done
echo "CSV: $CSV"
awk -F, -v modes="$MODES" -v conns="$CONNS" -f bench/discount/held_table.awk "$CSV"
