#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh -- replication benchmarks and the long SIGKILL campaign
#
#   bench/replica/run.sh BUILD [SECONDS] [KILL_ITERATIONS]
#
# vr-bench (standalone vs active 1-safe, 2-safe, pipelined; 2-safe latency
# beside the loopback round trip; failover) at 10 MB and 100 MB databases,
# its floor runs (-o floor: standalone, the floor, the hook, 1-safe diffed,
# with whole ranges and diffed by the sender, pipelined; unpinned and -p),
# then tests/replica/crash.sh for KILL_ITERATIONS iterations (default 200:
# 300 kills) over 1-safe (diffed, whole ranges, diffed by the sender) and
# 2-safe, killing the primary or both.
# Then the passive backup: vrp-bench (Versions 0-3 standalone, passive
# 1-safe and 2-safe, bytes per transaction: Tables 4 and 5) on a 50 MB
# database, the rejoin by the log tail against a full copy (vrp-bench -j),
# and tests/replica/pcrash.sh for KILL_ITERATIONS iterations (2 kills
# each) killing the primary, the backup alone, both, or the backup twice
# (the second time inside its catch-up) and then the primary.
# Last, tables.sh: tpcbench --replica on both workloads (Tables 6-8,
# Figures 2-3) into bench/results/replica.
set -eu
B=${1:?usage: run.sh BUILD [SECONDS] [KILL_ITERATIONS]}
S=${2:-1}
K=${3:-200}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
ninja -C "$B" bench/replica/vr-bench bench/replica/vrp-bench \
	libvista/replica/vista-replica tests/replica/vr_dc > /dev/null
echo "== load: $(cut -d' ' -f1-3 /proc/loadavg)"
for acc in 1000000 12000000; do
	echo "== vr-bench -t $S -r 3 -a $acc"
	"$B/bench/replica/vr-bench" -t "$S" -r 3 -a $acc
done
for pin in "" -p; do
	echo "== vr-bench $pin -o floor -r 5 -t 0.5 (1-safe and pipelined)"
	"$B/bench/replica/vr-bench" $pin -o floor -r 5 -t 0.5
done
echo "== crash campaign: $K iterations"
cd "$B"
"$SRC/tests/replica/crash.sh" libvista/replica/vista-replica \
	tests/replica/vr_dc "$K" pass 1safe,2safe,1safe-whole,1safe-sdiff \
	primary,both |
	tail -3
cd - > /dev/null
echo "== vrp-bench -t $S -r 3 (passive, 50 MB)"
"$B/bench/replica/vrp-bench" -t "$S" -r 3
echo "== vrp-bench -j 20000 -r 3 (passive rejoin: log tail, full copy)"
"$B/bench/replica/vrp-bench" -j 20000 -r 3
echo "== passive crash campaign: $K iterations"
cd "$B"
"$SRC/tests/replica/pcrash.sh" libvista/replica/vista-replica \
	tests/replica/vr_dc "$K" pass 1safe,2safe primary,backup,both,rejoin |
	tail -3
cd - > /dev/null
echo "== tpcbench --replica: Tables 6-8, Figures 2-3 (tables.sh)"
"$SRC/bench/replica/tables.sh" "$B" "$SRC/bench/results/replica" "$S"
