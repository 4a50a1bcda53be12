#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# pmt-corpus.sh -- pmemtest on the store-level twins and the ports of
# published bug classes: found or not, images, seconds
#
#   bench/pmemtest/pmt-corpus.sh BUILD_DIR [EXTRA PMEMTEST OPTIONS...]
#
# For each program (fixed twin and buggy variants): the exit status (0
# clean, 1 inconsistent images, 3 lint only), images checked, inconsistent,
# failure groups, the first "likely missing" line, wall seconds of the
# whole run and CPU seconds (pmemtest, the program and every checker).
# Runs stop at 400 inconsistent images (--max-failures), as in the tests.
set -eu
B=${1:?usage: pmt-corpus.sh BUILD_DIR [OPTIONS]}
shift
B=$(cd "$B" && pwd)/tools/pmemtest
W=$(mktemp -d /dev/shm/pmt-corpus-XXXXXX)
trap 'rm -rf "$W"' EXIT
printf '%-36s %4s %7s %7s %6s %7s %7s  %s\n' program exit images bad groups \
	wall_s cpu_s 'likely missing'
for p in line_flag line_flag_flag_first parity_stripe parity_stripe_repair_self \
	neighbour_persist neighbour_persist_redundant_persist \
	flag_after_flush flag_after_flush_missing_fence \
	flag_after_flush_missing_flush pstack pstack_node_unpersisted \
	pstack_top_early cceh_split cceh_split_segment_unpersisted \
	cceh_split_key_first stripe_intent stripe_intent_unannounced \
	wide_record wide_record_wide_publish; do
	rc=0
	# The wide store's bug needs 8-byte tearing.
	case $p in wide_record*) tear=--tear ;; *) tear= ;; esac
	/usr/bin/time -f '%e %U %S' -o "$W/time" "$B/pmemtest" run --jobs 2 \
		--seed 7 --max-failures 400 --lints-fatal --workdir "$W" \
		--out "$W/out" $tear "$@" --check-lib "$B/examples/libex_$p.so:pmemtest_check" \
		-- "$B/examples/ex_$p" run "$W/pool" >"$W/log" 2>&1 || rc=$?
	sum=$(sed -n 's/^images: \([0-9]*\) checked, \([0-9]*\) inconsistent, \([0-9]*\) unique.*/\1 \2 \3/p' "$W/log")
	miss=$(grep -m1 -o 'likely missing: .*' "$W/log" | cut -c17-90 || true)
	[ -z "$miss" ] && grep -q 'warning: redundant flush' "$W/log" && \
		miss="lint: redundant flush"
	awk -v p="$p" -v rc="$rc" -v s="$sum" -v m="$miss" '
		{ split(s, a, " "); printf "%-36s %4d %7d %7d %6d %7.2f %7.2f  %s\n",
			p, rc, a[1], a[2], a[3], $1, $2 + $3, m }' <<EOT
$(tail -1 "$W/time")
EOT
	rm -rf "$W/out"
done
