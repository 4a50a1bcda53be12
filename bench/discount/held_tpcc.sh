#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# held_tpcc.sh -- the buffered protocol's TPC-C-like throughput workload:
#                 an order-entry server over TCP (dc-bench-oe-server,
#                 tpcbench's order-entry tables and transaction mix in
#                 memory, or on disk behind a buffer) and its client
#                 driver (dc-bench-oe-client)
#
#   bench/discount/held_tpcc.sh [--quick] [BUILD_DIR]
#   bench/discount/held_tpcc.sh --kill BUILD_DIR   (the suite's smoke run)
#
# Benchmark: the server runs alone (none) and under dc-run --protocol
# buffered --disk buffer at intervals of 5, 20, 50 and 120 ms (checkpoint
# directory on tmpfs), the server (with dc-run and the keeper) on CPU 0,
# the client on CPU 1 (TPCC_SRV_CPU, TPCC_CL_CPU), with databases of 4
# and 16 MiB in memory and 256 MiB on disk ("256d").  No cpvs row: a TCP
# socket is refused outside the buffered protocol.  Rounds are
# interleaved (round 1 of every mode, then round 2, ...); per point the
# client measures, on loopback, for T seconds, transactions per second
# and mean / 99th percentile response time with
#   few   4 connections x 4 requests in flight (16 outstanding), and
#   many  32 connections x 256 requests in flight (8192 outstanding),
#   deep  48 connections x 1024 (49152 outstanding);
# on disk, after TPCC_DWARM (4) seconds that fill the buffer, for
# TPCC_DT (8) seconds with
#   paper 32 connections x 16 (512 outstanding).
# Held output bounds a closed-loop client to (outstanding / interval)
# transactions per second: an answer leaves at the commit after its
# transaction, and the next request of its slot comes after it.  "few"
# shows that bound; "deep" keeps more transactions outstanding than the
# server under dc-run runs in 120 ms (its response time is several
# intervals long), the regime of the paper's TPC-C runs (30 clients whose
# 600 ms response time is many intervals long), where throughput is the
# server's; "many" is between.  On disk (oe_disk.c: a copy of the
# database --create made, in a directory under TPCC_DISK_DIR, /var/tmp, a
# buffer of TPCC_POOL MiB, 16) the server waits on its block reads,
# write-backs and log writes, the paper's disk-bound regime; "paper"
# keeps its response time near the paper's 600 ms.  A table of mean
# tx/s, each mode's ratio to none beside it, the load average beside
# each point; CSV in bench/results/held_tpcc.csv.  --quick: 1 round of
# 1.5 s (disk: 3 s).
#
# Kill check (both forms; --kill does only it): buffered at 20 ms, 8
# connections x 16 requests in flight for 5 s, the server SIGKILLed 5
# times (OE_KILLS) under load (every 0.7 s) and started again at once by
# the same command.  The client fails on a connection that ends or
# resets, an answer whose count is not its sequence number + 1 (a
# transaction lost or run twice), a hash that does not follow from the
# nonces it received (an answer of a lost interval got out), a request
# never answered, or a database whose order-entry consistency conditions
# fail (checked by the server after the last answer; on disk over buffer
# + data file, which must also equal the data file with the log replayed
# over it).  OE_DB is the database (4; "8d": 8 MiB on disk, with
# TPCC_POOL=0.25 a buffer of 64 blocks, the suite's
# dc-held-tpcc-disk-kill).  TPCC_MODES, TPCC_DBS, TPCC_LOADS and
# TPCC_DLOADS choose the points (a mode "50s" is 50 ms with every
# checkpoint written in place, DC_CKPT_SYNC=1, beside "50": written
# behind; "50t" is 50 ms with every system call trapped, DC_DIRECT=0);
# TPCC_ROUNDS and TPCC_T the rounds and seconds; DC_CKPT_TIMES=1 leaves
# the checkpoints' breakdown, and the disk server's reads, write-backs
# and log groups a transaction, in bench/results/held_tpcc.times.
# OE_EXPECT=fail (a broken keeper through DC_KEEPER_BIN, a broken libdc
# through DC_LIB): the check must fail with output matching OE_CAUGHT.
# OE_CONNS and OE_WINDOW change the client's shape, OE_KILL_EVERY the
# seconds between kills (the suite's dc-held-tpcc-conns: 400 connections
# x 2, a kill every 1.2 s, through the keeper's and libdc's tables of
# more than a thousand).
set -euo pipefail
cd "$(dirname "$0")/../.."
QUICK=0 KILL=0
case "${1:-}" in
--quick) QUICK=1; shift ;;
--kill) KILL=1; shift ;;
esac
B=${1:-build}
[ "$KILL" = 1 ] || ninja -C "$B" discount/dc-run discount/dc-keeper \
	bench/discount/dc-bench-oe-server bench/discount/dc-bench-oe-client \
	> /dev/null
DCRUN=$(realpath "$B/discount/dc-run")
SRVP=$(realpath "$B/bench/discount/dc-bench-oe-server")
CL=$(realpath "$B/bench/discount/dc-bench-oe-client")
M=$(mktemp -d /dev/shm/dc-tpcc-XXXXXX)
# the disk mode's database: on a disk (not tmpfs), as the paper's was
DK=$(mktemp -d "${TPCC_DISK_DIR:-/var/tmp}/dc-tpcc-XXXXXX")
SRV=
cleanup() {
	[ -n "$SRV" ] && kill -9 "$SRV" 2> /dev/null || true
	rm -rf "$M" "$DK"
}
trap cleanup EXIT
export DC_KEEPER_LINGER=5
PORT=$((20000 + RANDOM % 12000))

SRVCPU=${TPCC_SRV_CPU:-0} CLCPU=${TPCC_CL_CPU:-1}
POOL=${TPCC_POOL:-$([ "$KILL" = 1 ] && echo 1 || echo 16)}
# DB: N (MiB in memory) or Nd (N MiB on disk behind a buffer of $POOL
# MiB, a copy of the database --create made, in $DK/db)
srvargs() { case $1 in *d) echo "$PORT ${1%d} --disk $DK/db --pool-mb $POOL" ;;
	*) echo "$PORT $1" ;; esac; }
launch() { # MODE DB (the same command again: a recovery)
	local a
	a=$(srvargs "$2")
	case $1 in
	none) echo "== $1 $2" >> "$M/server.err"
		taskset -c "$SRVCPU" "$SRVP" $a 2>> "$M/server.err" & ;;
	*s) echo "== $1 $2" >> "$M/server.err"
		DC_CKPT_SYNC=1 taskset -c "$SRVCPU" "$DCRUN" --dir "$M/ck" \
		--protocol buffered --interval "${1%s}" -- "$SRVP" $a 2>> "$M/server.err" & ;;
	*t) echo "== $1 $2" >> "$M/server.err"
		DC_DIRECT=0 taskset -c "$SRVCPU" "$DCRUN" --dir "$M/ck" \
		--protocol buffered --interval "${1%t}" -- "$SRVP" $a 2>> "$M/server.err" & ;;
	*) echo "== $1 $2" >> "$M/server.err"
		taskset -c "$SRVCPU" "$DCRUN" --dir "$M/ck" --protocol \
		buffered --interval "$1" \
		--disk buffer -- "$SRVP" $a 2>> "$M/server.err" & ;;
	esac
	SRV=$!
}
start() {
	rm -rf "$M/ck"
	PORT=$((PORT + 1))
	case $2 in *d)
		# a fresh copy of the made database, on the disk before the
		# server reads it with O_DIRECT
		[ -e "$DK/made-$2/oe.data" ] || { mkdir -p "$DK/made-$2" &&
			"$SRVP" --create "$DK/made-$2" "${2%d}"; }
		rm -rf "$DK/db"
		cp -r "$DK/made-$2" "$DK/db"
		sync "$DK/db/oe.data" ;;
	esac
	launch "$@"
	# populate (memory) or the buffer's first reads (disk), keeper
	local i
	for i in $(seq 100); do
		sleep 0.2
		(exec 3<> "/dev/tcp/127.0.0.1/$PORT") 2> /dev/null && break
	done
	sleep 0.3
}
stop() {
	# a normal end first: the server's figures (--disk) on its stderr
	kill -TERM "$SRV" 2> /dev/null || true
	local k
	for k in $(seq 30); do
		kill -0 "$SRV" 2> /dev/null || break
		sleep 0.1
	done
	kill -9 "$SRV" 2> /dev/null || true
	wait "$SRV" 2> /dev/null || true
	SRV=
	sleep 0.3 # the keeper's connections close
}
field() { echo "$1" | grep -o "$2=[0-9.a-z]*" | cut -d= -f2; }

KCONNS=${OE_CONNS:-8} KWIN=${OE_WINDOW:-16} KDB=${OE_DB:-4}
KILLS=${OE_KILLS:-5}
killcheck() { # prints the client's line; 0 if it passed
	start 20 "$KDB"
	taskset -c "$CLCPU" "$CL" $PORT 5 "$KCONNS" "$KWIN" check 10 \
		> "$M/out" 2> "$M/cl.err" &
	local c=$! k
	for k in $(seq "$KILLS"); do
		sleep "${OE_KILL_EVERY:-0.7}"
		kill -9 "$SRV" 2> /dev/null || true
		wait "$SRV" 2> /dev/null || true
		launch 20 "$KDB"
	done
	local rc=0
	wait $c || rc=$?
	stop # a normal end: the server's reason for a failed check, on its
	     # stderr, is released
	cat "$M/out" "$M/cl.err"
	grep -h "^oe-server:" "$M/server.err" 2> /dev/null | tail -3 || true
	# a run in which no transaction was answered proves nothing
	if [ "$(field "$(cat "$M/out")" answered)" = 0 ]; then
		echo "held_tpcc: no transaction answered"
		rc=1
	fi
	return $rc
}

if [ "$KILL" = 1 ]; then
	rc=0
	out=$(killcheck) || rc=$?
	echo "$out"
	if [ "${OE_EXPECT:-pass}" = fail ]; then
		if [ $rc = 0 ]; then
			echo "held_tpcc: the broken build was not caught"
			exit 1
		fi
		if ! echo "$out" | grep -Eq "${OE_CAUGHT:-.}"; then
			echo "held_tpcc: failed, but not as expected" \
				"(${OE_CAUGHT:-})"
			exit 1
		fi
		echo "held_tpcc: caught, as expected"
		exit 0
	fi
	[ $rc = 0 ] || { echo "held_tpcc: kill check failed"; exit 1; }
	echo "held_tpcc: $KILLS kills, database $KDB, $KCONNS connections x" \
		"$KWIN, every answer exactly once, consistent"
	exit 0
fi

R=bench/results
mkdir -p "$R"
ROUNDS=${TPCC_ROUNDS:-3}; T=${TPCC_T:-3}
MODES=${TPCC_MODES:-none 5 20 50 120}; DBS=${TPCC_DBS:-4 16 256d}
LOADS=${TPCC_LOADS:-few many deep}; DLOADS=${TPCC_DLOADS:-paper}
DT=${TPCC_DT:-8} DWARM=${TPCC_DWARM:-4}
if [ "$QUICK" = 1 ]; then ROUNDS=1; T=1.5; DT=3; DWARM=2; fi
CONF_few="4 4"; CONF_many="32 256"; CONF_deep="48 1024"; CONF_paper="32 16"
CSV=$R/held_tpcc.csv
echo "round,db_mib,mode,load,conns,window,tx_per_s,lat_mean_us,lat_p99_us,"\
"errors,loadavg" > "$CSV"
for round in $(seq "$ROUNDS"); do
	for db in $DBS; do
		for mode in $MODES; do
			start "$mode" "$db"
			ls=$LOADS t=$T
			case $db in *d) ls=$DLOADS t=$DT
				# the buffer filled before the measurement
				taskset -c "$CLCPU" "$CL" $PORT "$DWARM" \
					$CONF_paper > /dev/null || true ;;
			esac
			for load in $ls; do
				v=CONF_$load
				out=$(taskset -c "$CLCPU" "$CL" $PORT "$t" ${!v} ||
					true)
				la=$(cut -d' ' -f1 /proc/loadavg)
				echo "$round,$db,$mode,$load,${!v// /,},$(field "$out" tx_per_s),$(field "$out" lat_mean_us),$(field "$out" lat_p99_us),$(field "$out" errors),$la" >> "$CSV"
				echo "round $round db ${db} $mode $load (load $la): $out"
			done
			stop
		done
	done
done
echo "CSV: $CSV"
[ -s "$M/server.err" ] && grep -E "^==|checkpoint times|oe-server: disk" \
	"$M/server.err" \
	> "$R/held_tpcc.times" || true
# means over the rounds, ratios to none side by side
echo "server (and dc-run, keeper) on CPU $SRVCPU, client on CPU $CLCPU;" \
	"load average over the points: $(awk -F, 'NR > 1 { s += $11; n++ }
	END { if (n) printf "%.1f-%.1f mean %.1f", lo, hi, s / n }
	NR == 2 { lo = hi = $11 } NR > 2 { if ($11 < lo) lo = $11
	if ($11 > hi) hi = $11 }' "$CSV")"
awk -F, -v modes="$MODES" -v dbs="$DBS" 'NR > 1 { k = $2 "," $4 "," $3; n[k]++; tp[k] += $7;
		lm[k] += $8; lp[k] += $9; e[k] += $10 }
	END {
		nm = split(modes, m, " ")
		nd = split(dbs, dd, " ")
		for (di = 1; di <= nd; di++)
		for (li = 1; li <= 4; li++) {
			db = dd[di]
			load = li == 1 ? "few" : li == 2 ? "many" :
				li == 3 ? "deep" : "paper"
			if (!n[db "," load ",none"]) continue
			printf "\n%s MiB%s, %s:\n", db + 0, db ~ /d$/ ?
				" on disk" : "", load
			printf "%-8s %9s %6s %10s %10s %s\n", "mode", "tx/s",
				"ratio", "mean ms", "p99 ms", "errors"
			b = db "," load ",none"
			if (!n[b]) continue
			for (i = 1; i <= nm; i++) {
				k = db "," load "," m[i]
				if (!n[k]) continue
				printf "%-8s %9.0f %6.3f %10.2f %10.2f %d\n",
					m[i] == "none" ? "none" : m[i] " ms",
					tp[k] / n[k], tp[k] / tp[b],
					lm[k] / n[k] / 1e3, lp[k] / n[k] / 1e3,
					e[k]
			}
		}
	}' "$CSV"
echo
echo "kill check (20 ms, 4 MiB, 8 x 16, 5 SIGKILLs in 5 s):"
killcheck || echo "kill check FAILED"
