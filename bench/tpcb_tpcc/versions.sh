#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# versions.sh -- Amza et al. Table 3 on this machine: Vista's Versions 0-3
#
#   bench/tpcb_tpcc/versions.sh [--quick] [BUILD_DIR]
#
# Debit-credit and order-entry on a 50 MB database (the paper's size) over
# vista:v0 (undo list in the heap), vista:v1 (mirror by copy), vista:v2
# (mirror by diff) and vista:v3 (libvista, the in-line undo log), in the
# byte domain (Rio's model: caches persistent) and the cacheline domain
# (clwb + sfence), 5 runs of 1 s each, best and worst dropped (--quick: 2
# runs of 0.3 s on 8 MB).  Rows go to bench/results/versions.csv; the
# tables (tx/s, fences/tx, lines/tx) to stdout.
set -euo pipefail

cd "$(dirname "$0")/../.."
BUILD=build
ARGS=(--db-size 50M --runs 5 --seconds 1)
for a in "$@"; do
	case $a in
	--quick) ARGS=(--db-size 8M --runs 2 --seconds 0.3) ;;
	-h | --help) sed -n '3,14p' "$0"; exit 0 ;;
	*) BUILD=$a ;;
	esac
done
TB=$BUILD/bench/tpcb_tpcc/tpcbench
[ -x "$TB" ] || { echo "versions.sh: $TB not built (ninja -C $BUILD)" >&2; exit 1; }
OUT=bench/results
mkdir -p "$OUT"
rm -f "$OUT/versions.csv"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
for w in debit-credit order-entry; do
	nice -n 5 "$TB" --workload $w --quiet "${ARGS[@]}" \
		--backend vista:v0:byte,vista:v1:byte,vista:v2:byte,vista:v3:byte,vista:v0:cacheline,vista:v1:cacheline,vista:v2:cacheline,vista:v3:cacheline \
		--csv "$OUT/versions.csv" || status=1
done
exit $status
