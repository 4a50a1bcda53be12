#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# versions.sh -- Amza et al. Table 3 on this machine: Vista's Versions 0-3
#
#   bench/tpcb_tpcc/versions.sh [--quick] [--rounds R] [BUILD_DIR]
#
# Debit-credit and order-entry on a 50 MB database (the paper's size) over
# vista:v0 (undo list in the heap), vista:v1 (mirror by copy), vista:v2
# (mirror by diff) and vista:v3 (libvista, the in-line undo log), in the
# byte domain (Rio's model: caches persistent) and the cacheline domain
# (clwb + sfence).  R rounds (default 3), each every configuration once
# with 3 runs of 0.5 s, so that the Versions share the machine's moods;
# the table is each configuration's median run (tx/s) over all rounds,
# with fences and flushed lines per transaction (--quick: 1 round of 2
# runs of 0.2 s on 8 MB).  Rows: bench/results/versions.csv.
set -euo pipefail

cd "$(dirname "$0")/../.."
BUILD=build
ROUNDS=3
ARGS=(--db-size 50M --runs 3 --seconds 0.5)
while [ $# -gt 0 ]; do
	case $1 in
	--quick) ROUNDS=1; ARGS=(--db-size 8M --runs 2 --seconds 0.2) ;;
	--rounds) ROUNDS=$2; shift ;;
	-h | --help) sed -n '3,17p' "$0"; exit 0 ;;
	*) BUILD=$1 ;;
	esac
	shift
done
TB=$BUILD/bench/tpcb_tpcc/tpcbench
[ -x "$TB" ] || { echo "versions.sh: $TB not built (ninja -C $BUILD)" >&2; exit 1; }
OUT=bench/results
CSV=$OUT/versions.csv
mkdir -p "$OUT"
rm -f "$CSV"
BACKENDS=vista:v0:byte,vista:v1:byte,vista:v2:byte,vista:v3:byte
BACKENDS=$BACKENDS,vista:v0:cacheline,vista:v1:cacheline,vista:v2:cacheline,vista:v3:cacheline
echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
status=0
for r in $(seq "$ROUNDS"); do
	for w in debit-credit order-entry; do
		nice -n 5 "$TB" --workload $w --quiet "${ARGS[@]}" \
			--backend "$BACKENDS" --csv "$CSV" >/dev/null || status=1
	done
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

# Median tx/s of every run of a configuration; fences and lines per tx
# over all its runs.  Columns of the CSV: tpcbench_int.h (report.c).
awk -F, 'NR > 1 {
	k = $1 SUBSEP $3
	if (!(k in n)) order[++nk] = k
	v[k, ++n[k]] = $13; tx[k] += $10; fe[k] += $15; li[k] += $16
}
END {
	printf "%-14s %-22s %12s %10s %9s %6s\n", "workload", "version (domain)",
		"median tx/s", "min", "fences/tx", "lines/tx"
	for (i = 1; i <= nk; i++) {
		k = order[i]; m = n[k]
		for (a = 1; a <= m; a++) s[a] = v[k, a]
		for (a = 1; a <= m; a++) for (b = a + 1; b <= m; b++)
			if (s[b] + 0 < s[a] + 0) { t = s[a]; s[a] = s[b]; s[b] = t }
		med = m % 2 ? s[(m + 1) / 2] : (s[m / 2] + s[m / 2 + 1]) / 2
		split(k, p, SUBSEP)
		printf "%-14s %-22s %12.0f %10.0f %9.2f %6.1f\n", p[1], p[2], med,
			s[1], fe[k] / tx[k], li[k] / tx[k]
	}
}' "$CSV"
exit $status
