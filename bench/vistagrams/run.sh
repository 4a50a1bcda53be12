#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh -- run vg-bench and write bench/results/vistagrams.{md,csv,png}
#
#   bench/vistagrams/run.sh [BUILD_DIR] [vg-bench options]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
shift || true
mkdir -p bench/results
{
	echo "# vg-bench ($(date -u +%Y-%m-%d), $(nproc) CPUs, $(uname -r))"
	echo
	echo "Load average at the start (1, 5, 15 min): $(cut -d' ' -f1-3 /proc/loadavg)."
	echo
	echo "Command: \`nice $build/bench/vistagrams/vg-bench -o bench/results/vistagrams.csv $*\`"
	echo
	nice "$build/bench/vistagrams/vg-bench" -o bench/results/vistagrams.csv "$@"
} | tee bench/results/vistagrams.md
if command -v gnuplot >/dev/null; then
	gnuplot -e "csv='bench/results/vistagrams.csv'; png='bench/results/vistagrams.png'" \
		bench/vistagrams/plot.gp
fi
