#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# apps_bench.sh -- the paper's Tables 2, 3 and 4 from sbml-apps: nqueens,
# tsp and gauss, four processes on 127.0.0.1, each size with and without
# sender-based message logging (no checkpoints, as in the paper).
#
#   bench/sbml/apps_bench.sh BUILD_DIR [REPS [APP:SIZE ...]]
#
# REPS (default 3) runs of each, with and without logging alternated;
# Table 2 gives the best and the median running time (process 0's, from
# the start barrier to its last answer): on a shared machine the load
# only adds, so the best is the steadier figure.  Tables 3 and 4 come from the counters of
# the first run with logging (struct sbml_stats, per process): the send
# log's size at the end (nothing is collected without checkpoints), and
# the share of sends that left at once with nothing unacknowledged, with
# the RSNs owed riding on them, or after waiting for acknowledgements,
# averaged over the processes as in the paper.
set -eu
build=${1:?usage: apps_bench.sh BUILD_DIR [REPS [APP:SIZE ...]]}
reps=${2:-3}
shift $(( $# >= 2 ? 2 : 1 ))
runs=("$@")
[ ${#runs[@]} -gt 0 ] || runs=(nqueens:12 nqueens:13 nqueens:14 tsp:16 \
	tsp:18 tsp:20 gauss:300 gauss:600 gauss:1000)
ninja -C "$build" bench/sbml/sbml-apps >/dev/null
app="$build/bench/sbml/sbml-apps"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# one run of the four processes: run1 APP:SIZE MODE(log|nolog) TAG
run1() {
	local base=$(( 20000 + (RANDOM * 7) % 40000 )) pids=() i
	local a=(127.0.0.1:$base 127.0.0.1:$((base + 1)) \
		127.0.0.1:$((base + 2)) 127.0.0.1:$((base + 3)))
	local flag=()
	[ "$2" = nolog ] && flag=(-n)
	for i in 0 1 2 3; do
		"$app" "${flag[@]}" "$1" $i "${a[@]}" \
			>"$tmp/$3.out.$i" 2>"$tmp/$3.err.$i" &
		pids+=($!)
	done
	for i in 0 1 2 3; do
		wait "${pids[$i]}" || {
			echo "apps_bench: $1 $2 process $i failed:" >&2
			cat "$tmp/$3.err.$i" >&2
			exit 1
		}
	done
	cmp -s "$tmp/$3.out.0" "$tmp/ref.$1.out.0" 2>/dev/null ||
		[ ! -e "$tmp/ref.$1.out.0" ] || {
		echo "apps_bench: $1 $2: another answer" >&2
		exit 1
	}
	[ -e "$tmp/ref.$1.out.0" ] || cp "$tmp/$3.out.0" "$tmp/ref.$1.out.0"
}

# a counter of the "done:" line of process $2 of run $1
stat() { sed -n "s/.* $3=\([0-9.]*\).*/\1/p" "$tmp/$1.err.$2"; }

median() { sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }
best() { sort -g | head -1; }

echo "sbml apps_bench: $reps runs each, $(date -u '+%F %H:%M') UTC," \
	"load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in "${runs[@]}"; do
	for k in $(seq 1 "$reps"); do
		run1 "$r" nolog "$r.nolog.$k"
		run1 "$r" log "$r.log.$k"
	done
	grep -E 'solutions|shortest|residual' "$tmp/ref.$r.out.0" |
		sed 's/^/  answer: /'
done

echo
echo "Table 2: running time (s), best and median of $reps"
echo
echo "| program | size | with | without | overhead s | overhead % | median with | median without | median overhead % |"
echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
for r in "${runs[@]}"; do
	tl() { for k in $(seq 1 "$reps"); do stat "$r.$1.$k" 0 time; done; }
	w=$(tl log | best) wo=$(tl nolog | best)
	mw=$(tl log | median) mwo=$(tl nolog | median)
	awk -v p="${r%%:*}" -v n="${r##*:}" -v w="$w" -v wo="$wo" \
		-v mw="$mw" -v mwo="$mwo" 'BEGIN {
		printf "| %s | %s | %.3f | %.3f | %.3f | %.1f | %.3f | %.3f | %.1f |\n",
			p, n, w, wo, w - wo, 100 * (w - wo) / wo, mw, mwo,
			100 * (mw - mwo) / mwo }'
done

echo
echo "Table 3: send log per process (average of the 4), first run with logging"
echo
echo "| program | size | messages | KB | messages/s | KB/s |"
echo "|---|---:|---:|---:|---:|---:|"
for r in "${runs[@]}"; do
	t=$(stat "$r.log.1" 0 time)
	for i in 0 1 2 3; do
		echo "$(stat "$r.log.1" $i log_max) $(stat "$r.log.1" $i log_bytes_max)"
	done | awk -v p="${r%%:*}" -v n="${r##*:}" -v t="$t" '
		{ m += $1; b += $2 }
		END { m /= 4; b /= 4 * 1024
		printf "| %s | %s | %.1f | %.1f | %.1f | %.2f |\n", p, n, m,
			b, m / t, b / t }'
done

echo
echo "Table 4: sends (% of messages sent, average over the processes), first run with logging"
echo
echo "| program | size | no RSN pending | RSNs piggybacked | waited for an ack | retransmits | RSN/ack packets of their own |"
echo "|---|---:|---:|---:|---:|---:|---:|"
for r in "${runs[@]}"; do
	for i in 0 1 2 3; do
		echo "$(stat "$r.log.1" $i sent) $(stat "$r.log.1" $i immediate)" \
			"$(stat "$r.log.1" $i piggybacked)" \
			"$(stat "$r.log.1" $i waited)" \
			"$(stat "$r.log.1" $i retransmits)" \
			"$(stat "$r.log.1" $i ctrl)"
	done | awk -v p="${r%%:*}" -v n="${r##*:}" '
		$1 > 0 { a += $2 / $1; b += $3 / $1; c += $4 / $1; k++ }
		{ re += $5; ct += $6 }
		END { printf "| %s | %s | %.1f | %.1f | %.1f | %d | %d |\n", p,
			n, 100 * a / k, 100 * b / k, 100 * c / k, re, ct }'
done
