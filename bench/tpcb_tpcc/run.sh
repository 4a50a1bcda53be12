#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run.sh -- the thesis comparison (section 3.5) on this machine
#
#   bench/tpcb_tpcc/run.sh [--full] [BUILD_DIR]
#
# Headline (under 5 minutes): debit-credit and order-entry on a 50 MB
# database across every backend -- none, vista, pmemobj and rvm-rio (RVM
# on the Rio file cache) in the byte, cacheline and page domains, rvm on
# disk -- 5 runs of 1 s each, best and worst dropped; prints the tables.
# --full adds RVM group commit 1/8/64, the synthetic transaction-size sweep
# (8 B .. 1 MB), one set_range call per range, and 2 streams.  Results:
# bench/results/*.csv and the figures as PNG (gnuplot).  RVM_DIR (default
# /var/tmp) must be on a disk, not tmpfs; rvm-rio's files go to RIO_DIR
# (default RVM_DIR), behind the cache, whose pool is on /dev/shm.
set -euo pipefail

cd "$(dirname "$0")/../.."
FULL=0
BUILD=build
for a in "$@"; do
	case $a in
	--full) FULL=1 ;;
	-h | --help) sed -n '3,15p' "$0"; exit 0 ;;
	*) BUILD=$a ;;
	esac
done
TB=$BUILD/bench/tpcb_tpcc/tpcbench
OUT=bench/results
RVM_DIR=${RVM_DIR:-/var/tmp}
RIO_DIR=${RIO_DIR:-$RVM_DIR}
[ -x "$TB" ] || { echo "run.sh: $TB not built (ninja -C $BUILD)" >&2; exit 1; }
mkdir -p "$OUT"
if [ "$(stat -f -c %T "$RVM_DIR")" = tmpfs ]; then
	echo "run.sh: warning: RVM_DIR=$RVM_DIR is tmpfs; rvm is meant to be on a disk" >&2
fi

tb() { nice -n 5 "$TB" --rvm-dir "$RVM_DIR" --rio-dir "$RIO_DIR" --quiet "$@"; }
status=0

# Only what this run writes again goes (the other benchmarks' results
# share the folder): the headline's files, and with --full all of ours.
rm -f "$OUT"/headline.csv "$OUT"/debit-credit.summary.csv \
	"$OUT"/order-entry.summary.csv "$OUT"/fig3.5a-*.png "$OUT"/fig3.6a-*.png
if [ $FULL = 1 ]; then
	rm -f "$OUT"/group.csv "$OUT"/synthetic*.csv "$OUT"/per-range.csv \
		"$OUT"/threads.csv "$OUT"/*-group.summary.csv \
		"$OUT"/*-per-range.summary.csv "$OUT"/*-threads2.summary.csv \
		"$OUT"/fig3.*.png
fi
echo "== headline: debit-credit and order-entry, 50 MB, 5 runs of 1 s =="
for w in debit-credit order-entry; do
	tb --workload $w --backend all --csv "$OUT/headline.csv" \
		--summary "$OUT/$w.summary.csv" || status=1
done

if [ $FULL = 1 ]; then
	echo "== RVM group commit 1 / 8 / 64 =="
	for w in debit-credit order-entry; do
		tb --workload $w --backend none,rvm,rvm-rio --group 1,8,64 \
			--csv "$OUT/group.csv" \
			--summary "$OUT/$w-group.summary.csv" || status=1
	done
	echo "== synthetic: 8 B .. 1 MB per transaction, 50 MB database =="
	tb --workload synthetic --backend all --tx-size sweep --seconds 0.5 \
		--csv "$OUT/synthetic.csv" \
		--summary "$OUT/synthetic.summary.csv" || status=1
	tb --workload synthetic --backend none,rvm,rvm-rio --group 1,8,64 \
		--tx-size sweep --seconds 0.5 --csv "$OUT/synthetic-group.csv" \
		--summary "$OUT/synthetic-group.summary.csv" || status=1
	echo "== one set_range call per range (the thesis' benchmarks) =="
	for w in debit-credit order-entry; do
		tb --workload $w --per-range \
			--backend none,vista:byte,vista:cacheline,pmemobj:byte,pmemobj:cacheline \
			--csv "$OUT/per-range.csv" \
			--summary "$OUT/$w-per-range.summary.csv" || status=1
	done
	echo "== 2 streams, each on its own database =="
	for w in debit-credit order-entry; do
		tb --workload $w --threads 2 \
			--backend none,vista:byte,vista:cacheline,pmemobj:cacheline,rvm-rio \
			--csv "$OUT/threads.csv" \
			--summary "$OUT/$w-threads2.summary.csv" || status=1
	done
fi

if command -v gnuplot >/dev/null; then
	gnuplot -c bench/tpcb_tpcc/plot.gp "$OUT" && ls "$OUT"/fig3.*.png
else
	echo "run.sh: gnuplot not installed; no figures" >&2
fi
exit $status
