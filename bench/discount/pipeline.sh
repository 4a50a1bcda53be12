#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# pipeline.sh -- a shell pipeline of unmodified programs under
# dc-run --tree: `sh -c 'sort big | uniq -c | sort -n > out'` (dash,
# sort and uniq as Debian ships them; big: LINES generated lines) with
# the checkpoints in memory (tmpfs, Discount Checking) and on disk
# (ext4, fdatasync: Discount Checking-disk), under the two protocols a
# tree runs (cpv-2pc, cbndv-2pc), against the same command without
# libdc.
#
#   bench/discount/pipeline.sh [--quick] [BUILD_DIR]
#
# For each: the rounds of the tree (dc-run --verbose), and the run-time
# ratio against the plain run -- of the wall-clock time and of the CPU
# time (user + system of every process, children included).  Medians of
# REPS runs ($PIPE_REPS, 5; --quick: 1).  LINES: $PIPE_LINES (100000:
# below GNU sort's 131072 lines from which it would start threads, which
# a tree refuses; sort then sorts in one thread and says so).  The output
# file of every run is compared with the plain run's.  Table on stdout;
# CSV in bench/results/discount/pipeline.csv.
set -euo pipefail
cd "$(dirname "$0")/../.."
QUICK=0
[ "${1:-}" = --quick ] && { QUICK=1; shift; }
B=$(cd "${1:-build}" && pwd)
DCRUN=$B/discount/dc-run
[ -x "$DCRUN" ] || { echo "pipeline.sh: build $DCRUN first (ninja -C $B discount/dc-run discount/libdc.so.0.1.0)" >&2; exit 2; }
LINES=${PIPE_LINES:-100000} REPS=${PIPE_REPS:-5}
[ $QUICK = 1 ] && REPS=1
EXT4=${PIPE_EXT4:-/var/tmp}
W=$(mktemp -d /tmp/dc-pipe.XXXXXX)
SHM=$(mktemp -d /dev/shm/dc-pipe.XXXXXX)
DISK=$(mktemp -d "$EXT4/dc-pipe.XXXXXX")
trap 'rm -rf "$W" "$SHM" "$DISK"' EXIT
cd "$W"
awk -v n="$LINES" 'BEGIN { srand(7); for (i = 0; i < n; i++)
	printf "w%d %d\n", int(rand() * 30000), int(rand() * 5) }' > big
CMD='sort big | uniq -c | sort -n > out'
sh -c "$CMD" && mv out out.ref

# one run: wall seconds, CPU seconds, rounds
one() { # label, dir ("" plain), protocol
	local t0 t1 c0 c1 rounds=0 me=$BASHPID
	rm -f out
	read -r c0 < <(awk '{ print $14 + $15 + $16 + $17 }' /proc/$me/stat)
	t0=$(date +%s%N)
	if [ -z "$2" ]; then
		sh -c "$CMD"
	else
		rounds=$("$DCRUN" --tree --verbose --protocol "$3" --dir "$2/t" \
			-- sh -c "$CMD" 2>&1 >/dev/null | grep -c "committed (" || true)
	fi
	t1=$(date +%s%N)
	read -r c1 < <(awk '{ print $14 + $15 + $16 + $17 }' /proc/$me/stat)
	cmp -s out out.ref || { echo "pipeline.sh: $1: out differs" >&2; exit 1; }
	echo "$(( (t1 - t0) / 1000000 )) $(( (c1 - c0) * 1000 / $(getconf CLK_TCK) )) $rounds"
}
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

mkdir -p "$OLDPWD/bench/results/discount"
CSV=$OLDPWD/bench/results/discount/pipeline.csv
echo "fs,protocol,rounds,wall_ms,cpu_ms,wall_ratio,cpu_ratio" > "$CSV"
declare -A WALL CPU ROUNDS
for cfg in "plain::none" "tmpfs:$SHM:cpv-2pc" "tmpfs:$SHM:cbndv-2pc" \
	   "ext4:$DISK:cpv-2pc" "ext4:$DISK:cbndv-2pc"; do
	fs=${cfg%%:*} rest=${cfg#*:}
	dir=${rest%%:*} proto=${rest#*:}
	ws=() cs=() r=0
	for ((i = 0; i < REPS; i++)); do
		read -r w c r < <(one "$fs $proto" "$dir" "$proto")
		ws+=("$w") cs+=("$c")
	done
	WALL[$fs/$proto]=$(printf '%s\n' "${ws[@]}" | median)
	CPU[$fs/$proto]=$(printf '%s\n' "${cs[@]}" | median)
	ROUNDS[$fs/$proto]=$r
done
pw=${WALL[plain/none]} pc=${CPU[plain/none]}
printf '%-6s %-10s %6s %9s %8s %10s %9s\n' fs protocol rounds wall_ms cpu_ms wall_ratio cpu_ratio
for k in plain/none tmpfs/cpv-2pc tmpfs/cbndv-2pc ext4/cpv-2pc \
	 ext4/cbndv-2pc; do
	fs=${k%/*} proto=${k#*/}
	wr=$(awk -v a="${WALL[$k]}" -v b="$pw" 'BEGIN { printf "%.2f", a / b }')
	cr=$(awk -v a="${CPU[$k]}" -v b="$pc" 'BEGIN { printf "%.2f", (b ? a / b : 0) }')
	printf '%-6s %-10s %6s %9s %8s %10s %9s\n' "$fs" "$proto" \
		"${ROUNDS[$k]}" "${WALL[$k]}" "${CPU[$k]}" "$wr" "$cr"
	echo "$fs,$proto,${ROUNDS[$k]},${WALL[$k]},${CPU[$k]},$wr,$cr" >> "$CSV"
done
