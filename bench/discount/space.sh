#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# space.sh -- the thesis' Figure 6.1 from the measured tables: the recovery
# protocols in the protocol space, each application at its best protocol
# with its overhead; and Figures 6.3-6.7 as one panel per application
#
#   bench/discount/space.sh [RESULTS_DIR]
#
# Reads RESULTS_DIR (bench/results)/discount/apps.csv (apps.sh),
# RESULTS_DIR/nbody.csv (nbody.sh) and RESULTS_DIR/discount/game.csv
# (game.sh), whichever exist; writes RESULTS_DIR/discount/space.dat (one
# row per application, protocol and file system) and, with gnuplot
# (bench/discount/space.gp), space.png (Figure 6.1) and protocols.png
# (Figures 6.3-6.7).
#
# The protocol space (thesis 2.3.1.7): x, the effort to convert
# non-determinism -- 0 none (CPVS, CPV-2PC), 1 identify it (CAND, CBNDVS,
# CBNDV-2PC), 2 also log input (CAND-LOG, CBNDVS-LOG); y, the effort to
# track visible events -- 0 none (CAND, CAND-LOG: commit after every
# non-deterministic event), 1 visible events and sends (CPVS, CBNDVS,
# CBNDVS-LOG), 2 visible events only, sends covered by two-phase commit
# (CPV-2PC, CBNDV-2PC).
# One overhead for every application, in percent:
#   nvi, sc, magic  CPU time added, as a share of the session's wall-clock
#                   time alone (apps.sh cpu_over_%)
#   nbody           CPU time added, as a share of its CPU time alone
#                   ((cpu_ratio - 1) x 100: the program computes all along)
#   game            CPU time added, as a share of the game's wall-clock time
#                   without dc-run; and its frame rate (fps)
# An application's best protocol on a file system: the lowest overhead.
set -euo pipefail
cd "$(dirname "$0")/../.."
R=${1:-bench/results}
D=$R/discount
mkdir -p "$D"
DAT=$D/space.dat
{
	echo "# app protocol fs x y commits overhead_pct fps"
	for f in "$D/apps.csv" "$R/nbody.csv" "$D/game.csv"; do
		[ -s "$f" ] || continue
		awk -F, -v src="$(basename "$f")" '
		BEGIN {
			x["cpvs"] = 0; y["cpvs"] = 1; x["cand"] = 1; y["cand"] = 0
			x["cbndvs"] = 1; y["cbndvs"] = 1
			x["cand-log"] = 2; y["cand-log"] = 0
			x["cbndvs-log"] = 2; y["cbndvs-log"] = 1
			x["cpv-2pc"] = 0; y["cpv-2pc"] = 2
			x["cbndv-2pc"] = 1; y["cbndv-2pc"] = 2
		}
		NR == 1 { for (i = 1; i <= NF; i++) c[$i] = i; next }
		src == "apps.csv" {
			p = $c["protocol"]
			if ((p in x) && $c["commits"] != "-")
				print $c["app"], p, $c["fs"], x[p], y[p],
					$c["commits"], $c["cpu_over_pct"], "-"
		}
		src == "nbody.csv" {
			p = $c["protocol"]
			if (p in x)
				printf "nbody %s %s %d %d %d %.1f -\n", p, $c["fs"],
					x[p], y[p], $c["commits"],
					100 * ($c["cpu_ratio"] - 1)
		}
		src == "game.csv" {
			p = $c["protocol"]
			if (p == "none") { c0 = $c["cpu_s"]; w0 = $c["wall_s"]; next }
			if ((p in x) && w0 > 0)
				printf "game %s %s %d %d %.0f/s %.2f %s\n", p,
					$c["fs"], x[p], y[p], $c["ckpt_per_s"],
					100 * ($c["cpu_s"] - c0) / w0, $c["fps"]
		}' "$f"
	done
} >"$DAT"
echo "space.sh: $DAT"
if command -v gnuplot >/dev/null; then
	gnuplot -c bench/discount/space.gp "$D"
	echo "space.sh: $D/space.png $D/protocols.png"
fi
