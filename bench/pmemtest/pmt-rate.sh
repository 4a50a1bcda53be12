#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# pmt-rate.sh -- crash images checked per second by pmemtest on a 4 MiB pool
#
#   bench/pmemtest/pmt-rate.sh BUILD_DIR [EXTRA PMEMTEST OPTIONS...]
#
# Runs `pmemtest run --jobs 2 --check-lib` on every example's correct
# program with EX_POOL_KB=4096 (append_log with EX_STEPS=400) and prints,
# per example: images checked, wall seconds of the checking phase (what
# pmemtest prints), images per wall second, and the CPU seconds (user +
# system of pmemtest, the traced program and every checker) per image, with
# the images per CPU second.  On a shared machine the CPU figure is the one
# to compare; 2 jobs on 2 idle cores check about twice that per wall second.
# The pools live in /dev/shm (where per-store capture works; elsewhere the
# tracer scans).  PMEMTEST=path runs another driver on the same examples
# (an older build, for a before/after table).
set -eu
B=${1:?usage: pmt-rate.sh BUILD_DIR [OPTIONS]}
shift
B=$(cd "$B" && pwd)/tools/pmemtest
W=$(mktemp -d /dev/shm/pmt-rate-XXXXXX)
P=${PMEMTEST:-$B/pmemtest}
trap 'rm -rf "$W"' EXIT
# The machine's load beside the figures: wall rates mean little on a
# loaded machine, CPU rates less so.
echo "load before: $(uptime)"
printf '%-18s %7s %7s %9s %9s %9s\n' example images wall_s img/wall cpu_ms/img img/cpu_s
for ex in counter_pair append_log list_insert undo_log redo_log ring_buffer \
	pointer_swap multi_line_record kv_hash bitmap_alloc sorted_array \
	memcpy_batch; do
	steps=
	[ "$ex" = append_log ] && steps=400
	EX_STEPS=${steps:-} EX_POOL_KB=4096 /usr/bin/time -f '%U %S' -o "$W/time" \
		"$P" run --jobs 2 --seed 1 --no-lints --workdir "$W" \
		--out "$W/out" "$@" --check-lib "$B/examples/libex_$ex.so:pmemtest_check" \
		-- "$B/examples/ex_$ex" run "$W/pool" >"$W/log" 2>&1 || true
	imgs=$(sed -n 's/^images: \([0-9]*\) checked.*/\1/p' "$W/log")
	wall=$(sed -n 's/.*checked in \([0-9.]*\) s.*/\1/p' "$W/log")
	cpu=$(awk '{print $1 + $2}' "$W/time")
	awk -v ex="$ex" -v n="$imgs" -v w="$wall" -v c="$cpu" 'BEGIN {
		printf "%-18s %7d %7.2f %9.0f %9.2f %9.0f\n", ex, n, w,
			(w > 0 ? n / w : 0), (n > 0 ? c * 1000 / n : 0),
			(c > 0 ? n / c : 0) }'
done
echo "load after: $(uptime)"
