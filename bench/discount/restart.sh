#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# restart.sh -- restart to service of a server with a 10-100 MB heap
#               (dc-bench-restart, restart.c), and where the time goes
#
#   bench/discount/restart.sh [-r RUNS] [-c OTHER_PROG] [BUILD_DIR]
#
# -c: also an older build's dc-bench-restart (copied out with the libdc
# and librio next to it), its runs interleaved with this build's, one
# line per build and size ("this" / "other").
#
# For each heap size: the server fills its heap, checkpoints (directory on
# /dev/shm), is SIGKILLed and run again; the restart's exec to its "up"
# line is the restart to service.  libdc's phases ($DC_RECOVERY_TIMES,
# recover.c): redo (pending segments applied), checks (executable,
# objects, mappings), files (file undo, held output), prepare (tracking,
# dispatch, the fresh maps), memory (the address space rebuilt, the image
# copied in), kernel (descriptors, handlers, write protection); the rest
# of the total is exec, the dynamic loader and libdc's re-exec without
# address randomisation; read_ms, after the restart to service, the first
# read of every heap page.  One line per size: the median run's numbers
# (by total), ms.
set -euo pipefail
cd "$(dirname "$0")/../.."
RUNS=5
OTHER=
while [ $# -gt 0 ]; do
	case $1 in
	-r) RUNS=$2; shift 2 ;;
	-c) OTHER=$(realpath "$2"); shift 2 ;;
	*) break ;;
	esac
done
B=$(cd "${1:-build}" && pwd)
ninja -C "$B" bench/discount/dc-bench-restart > /dev/null
THIS=$B/bench/discount/dc-bench-restart
T=$(mktemp -d /dev/shm/dc-restart-XXXXXX)
trap 'rm -rf "$T"' EXIT
echo "build MB total_ms libdc_ms redo checks files prepare memory kernel exec_ms read_ms"
for mb in 10 50 100; do
	for r in $(seq 1 "$RUNS"); do
	    for P in "$THIS" $OTHER; do
		name=this
		[ "$P" = "$THIS" ] || name=other
		d=$(mktemp -d /dev/shm/dc-restart-XXXXXX)
		"$P" "$d/ck" "$mb" > "$d/o1" &
		pid=$!
		for i in $(seq 1 600); do
			grep -q ready "$d/o1" && break
			sleep 0.05
		done
		kill -9 $pid
		wait $pid 2> /dev/null || true
		t0=$(date +%s%N)
		DC_RECOVERY_TIMES=1 "$P" "$d/ck" "$mb" > "$d/o2" 2> "$d/e2"
		up=$(awk '/^up/ {print $2}' "$d/o2")
		rd=$(awk '/^read/ {print $2}' "$d/o2")
		awk -v t0="$t0" -v up="$up" -v mb="$mb" -v b="$name" -v rd="$rd" '
			/recovery times/ {
				for (i = 1; i <= NF; i++) v[$i] = $(i + 1)
				tot = (up - t0) / 1e6
				printf "%s %d %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f %.1f\n",
					b, mb, tot, v["total"] / 1e3,
					v["redo"] / 1e3, v["checks"] / 1e3,
					v["files"] / 1e3, v["prepare"] / 1e3,
					v["memory"] / 1e3, v["kernel"] / 1e3,
					tot - v["total"] / 1e3, rd / 1e6
			}' "$d/e2" >> "$T/runs"
		rm -rf "$d"
	    done
	done
	for name in this ${OTHER:+other}; do
		awk -v b="$name" '$1 == b' "$T/runs" | sort -n -k3 |
			sed -n "$(( (RUNS + 1) / 2 ))p"
	done
	rm -f "$T/runs"
done
