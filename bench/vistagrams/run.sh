#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh -- run vg-bench with Vistagrams in the cacheline domain (ADR:
# clwb + sfence) and in the byte domain (eADR; the Rio model the thesis
# measured) side by side, and write bench/results/vistagrams.{md,csv,png}
#
#   bench/vistagrams/run.sh [BUILD_DIR] [vg-bench options]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
shift || true
mkdir -p bench/results
out=bench/results/vistagrams
args=(-D cacheline,byte -o "$out.csv" "$@")
{
	echo "# vg-bench ($(date -u +%Y-%m-%d), $(nproc) CPUs, $(uname -r))"
	echo
	echo "Load average at the start (1, 5, 15 min): $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "Command: \`nice $build/bench/vistagrams/vg-bench ${args[*]}\`"
	echo
	nice "$build/bench/vistagrams/vg-bench" "${args[@]}"
} | tee "$out.md"
if command -v gnuplot >/dev/null; then
	gnuplot -e "csv='$out.csv'; png='$out.png'" bench/vistagrams/plot.gp
fi
