#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# run.sh -- run vg-bench in the cacheline domain (ADR: clwb + sfence) and
# in the byte domain (eADR; the Rio model the thesis measured), and write
# bench/results/vistagrams.{md,csv,png} and vistagrams-byte.{md,csv,png}
#
#   bench/vistagrams/run.sh [BUILD_DIR] [vg-bench options]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
shift || true
mkdir -p bench/results
for domain in cacheline byte; do
	out=bench/results/vistagrams
	sys=udp,baseline,vistagrams,vistagrams-1tx,zeromq
	if [ $domain = byte ]; then
		out=$out-byte
		sys=udp,baseline,vistagrams,vistagrams-1tx # zeromq: no domain
	fi
	args=(-D "$domain" -S "$sys" -o "$out.csv" "$@")
	{
		echo "# vg-bench, $domain domain ($(date -u +%Y-%m-%d), $(nproc) CPUs, $(uname -r))"
		echo
		echo "Load average at the start (1, 5, 15 min): $(cut -d' ' -f1-3 /proc/loadavg)."
		echo
		echo "Command: \`nice $build/bench/vistagrams/vg-bench ${args[*]}\`"
		echo
		nice "$build/bench/vistagrams/vg-bench" "${args[@]}"
	} | tee "$out.md"
	if command -v gnuplot >/dev/null; then
		gnuplot -e "csv='$out.csv'; png='$out.png'; domain='$domain'" \
			bench/vistagrams/plot.gp
	fi
done
