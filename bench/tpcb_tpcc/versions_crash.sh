#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# versions_crash.sh -- the long power-failure campaign of Vista's Versions
# 0-2 (the suite's tb-vv-pm runs debit-credit, 8 transactions)
#
#   bench/tpcb_tpcc/versions_crash.sh [-n TX] [BUILD_DIR]
#
# For each Version and each workload (debit-credit, order-entry): a 1 MiB
# database is created, then pmemtest traces TX transactions (default 6)
# of tb_crash on it and checks every crash image at every fence with
# tb_crash's checker module (the Version's recovery, then the workload's
# invariants from the database alone), exploring by what recovery
# reads.  Prints pmemtest's summary per run; exit status 1 if any image
# was inconsistent.
set -euo pipefail

cd "$(dirname "$0")/../.."
. bench/tpcb_tpcc/campaign.sh
campaign_args 6 15 "$@"
TX=$N
TBC=$B/bench/tpcb_tpcc/tb_crash
MOD=$B/bench/tpcb_tpcc/libtb_crash_check.so
PMT=$B/tools/pmemtest/pmemtest
campaign_need "$TBC" "$MOD" "$PMT"
export LD_LIBRARY_PATH=$B/libvista:$B/tools/pmemtest:$B/librio:$B/librio/fc
WORK=$(mktemp -d /dev/shm/versions_crash.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
status=0
for v in v0 v1 v2; do
	for w in debit-credit order-entry; do
		rm -rf "${WORK:?}"/*
		"$TBC" $w vista:$v "$WORK/db" create
		start=$(date +%s)
		rc=0
		"$PMT" run --seed 11 --workdir "$WORK" --out "$WORK/out" \
			--pool "$WORK/db/vista-$v.0.pool" \
			--check-lib "$MOD:tb_pm_check_${w/-/_}_$v" -- \
			"$TBC" $w vista:$v "$WORK/db" run "$TX" > "$WORK/log" 2>&1 || rc=$?
		echo "vista:$v $w, $TX transactions ($(( $(date +%s) - start )) s, pmemtest exit $rc):"
		grep -E "^images:|^pmemtest: (1 pool|crash states)" "$WORK/log" | sed 's/^/  /'
		[ $rc -eq 0 ] || status=1
	done
done
exit $status
