#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# syscost.sh -- the cost of one system call by kind (dc-bench-syscost):
#               natively, under dc-run trapped (DC_DIRECT=0) and through
#               libdc's direct path, buffered protocol at 50 ms
#
#   bench/discount/syscost.sh [BUILD_DIR]
#
# SC_ROUNDS interleaved rounds (default 5: native, trapped, direct, then
# again) of SC_N calls a kind (default 100,000); prints each kind's median
# ns per call and the load.  Checkpoint directory on /dev/shm.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
SC=$B/bench/discount/dc-bench-syscost DCRUN=$B/discount/dc-run
ROUNDS=${SC_ROUNDS:-5} N=${SC_N:-100000}
D=$(mktemp -d /dev/shm/dc-syscost.XXXXXX)
trap 'rm -rf "$D"' EXIT
echo "load before: $(uptime)"
for r in $(seq "$ROUNDS"); do
	"$SC" "$N" | sed 's/^/native /'
	for m in 0 1; do
		rm -rf "$D/ck"
		DC_DIRECT=$m "$DCRUN" --dir "$D/ck" --protocol buffered \
			--interval 50 -- "$SC" "$N" |
			sed "s/^/$( [ $m = 0 ] && echo trapped || echo direct) /"
	done
done | awk '{ v[$2 " " $1][++n[$2 " " $1]] = $3; k[$2] = 1 }
	function med(a, c,   i, j, t) {
		for (i = 1; i <= c; i++) for (j = i + 1; j <= c; j++)
			if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
		return c % 2 ? a[(c + 1) / 2] : (a[c / 2] + a[c / 2 + 1]) / 2
	}
	END {
		printf "%-12s %10s %10s %10s  (median ns per call)\n",
			"call", "native", "trapped", "direct"
		for (x in k)
			printf "%-12s %10d %10d %10d\n", x,
				med(v[x " native"], n[x " native"]),
				med(v[x " trapped"], n[x " trapped"]),
				med(v[x " direct"], n[x " direct"])
	}'
echo "load after: $(uptime)"
