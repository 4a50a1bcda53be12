#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# tables.sh -- Amza et al.'s Tables 6-8 and Figures 2-3 through tpcbench
#
#   bench/replica/tables.sh BUILD [OUTDIR] [SECONDS] [ROUNDS]
#
# Every configuration runs standalone vista (V3) and then replicated
# (tpcbench --replica ... --peer 127.0.0.1: the backup is a process of
# this host), one run of SECONDS (1) in each of ROUNDS rounds (5; 3 at
# 1 GB), the configurations in turn each round (tpcbench --rounds), so a
# load spike hits them alike; the report averages the middle rounds.
# Each backup's copy is compared with the primary's database at the end
# of each round.  Into OUTDIR (bench/results/replica):
#   tables67-WORKLOAD.txt   50 MB: every mode, bytes sent per tx split as
#                           Tables 5 and 7, commit latency, round trip
#   table8-WORKLOAD.txt     active 1-safe (also sender-diffed) at 10 MB, 100 MB and 1 GB
#                           (1 GB when free memory allows: two copies)
#   fig23-WORKLOAD.txt      1 and 2 streams of 10 MB each (Section 8)
#   *.summary.csv           tpcbench --summary of each
#   fig23-WORKLOAD.csv      configuration, tx/s 1 stream, tx/s 2 streams
#   fig2-debit-credit.png/.svg, fig3-order-entry.png/.svg (plot.gp)
set -eu
B=${1:?usage: tables.sh BUILD [OUTDIR] [SECONDS] [ROUNDS]}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${2:-$SRC/bench/results/replica}
S=${3:-1}
R=${4:-5}
T="$B/bench/tpcb_tpcc/tpcbench"
ninja -C "$B" bench/tpcb_tpcc/tpcbench > /dev/null
mkdir -p "$OUT"
ALL=1safe,1safe-sdiff,2safe,pipelined,pipelined-sdiff,passive-1safe,passive-2safe
run() { # name, tpcbench arguments...
	local name=$1
	shift
	echo "== $name: load $(cut -d' ' -f1-3 /proc/loadavg): tpcbench $*"
	"$T" --backend vista --peer 127.0.0.1 --seconds "$S" --runs 1 \
		--rounds "$R" \
		--quiet --summary "$OUT/$name.summary.csv" "$@" \
		> "$OUT/$name.txt"
	grep -A7 "replicated" "$OUT/$name.txt" | grep -v "^--" |
		grep -v "^$"
	grep "^round trip" "$OUT/$name.txt"
}
for w in debit-credit order-entry; do
	run "tables67-$w" --workload $w --db-size 50M --replica $ALL
done
for w in debit-credit order-entry; do
	run "table8-$w" --workload $w --db-size 10M --replica 1safe,1safe-sdiff
	run "table8-$w-100M" --workload $w --db-size 100M --replica 1safe,1safe-sdiff
	# 1 GB: the primary's segment and the backup's, both in /dev/shm.
	free_gb=$(free -g | awk '/^Mem:/ { print $7 }')
	if [ "$free_gb" -ge 6 ]; then
		R1=$R
		R=$(( R > 3 ? 3 : R ))
		run "table8-$w-1G" --workload $w --db-size 1G --replica 1safe,1safe-sdiff
		R=$R1
	else
		echo "== table8-$w-1G: not run, $free_gb GB available"
	fi
done
for w in debit-credit order-entry; do
	for t in 1 2; do
		run "fig23-$w-$t" --workload $w --db-size 10M --threads $t \
			--replica $ALL
	done
done
# Figures 2-3's data: each configuration's tx/s with 1 and 2 streams.
for w in debit-credit order-entry; do
	join -t, <(awk -F, 'NR > 1 { print $2 "," $8 }' \
			"$OUT/fig23-$w-1.summary.csv") \
		<(awk -F, 'NR > 1 { print $2 "," $8 }' \
			"$OUT/fig23-$w-2.summary.csv") |
		sed 's/ (cacheline)//' > "$OUT/fig23-$w.csv"
done
gnuplot -c "$SRC/bench/replica/plot.gp" "$OUT"
