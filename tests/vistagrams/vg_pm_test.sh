#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# vg_pm_test.sh -- libvistagrams under pmemtest: every power-failure crash
# image of every fence of the vg_pm workload must recover to a consistent
# state; the broken builds that do not flush raw payloads, reclaim
# responses before the expired words are durable, leave the raw writes
# to Vista's one commit fence, or leave a request's payload and record,
# or an answer and its record, out of the declared batch (and undrained),
# must be caught, and so must the build that declares a request's slot
# new (no before-image) like its payload.
#
#   vg_pm_test.sh PMEMTEST VG_PM VG_PM_BROKEN_NO_PAYLOAD_FLUSH \
#       VG_PM_BROKEN_RECLAIM_NO_DRAIN VG_PM_BROKEN_NO_RAW_DRAIN \
#       VG_PM_BROKEN_SEND_UNDECLARED VG_PM_BROKEN_RESP_UNDECLARED \
#       VG_PM_BROKEN_SLOT_NEW
set -u
PMT=$1 VGPM=$2 BROKEN=$3 BROKEN_RECLAIM=$4 BROKEN_DRAIN=$5 BROKEN_UNDECL=$6
BROKEN_RESP=$7 BROKEN_SLOT_NEW=$8
dir=$(mktemp -d /dev/shm/vg-pm-XXXXXX)
trap 'rm -rf "$dir"' EXIT
export VG_PM_LOCK_DIR=$dir # the checks' port locks (vg_pm.c)
rc=0

run() { # NAME PROGRAM [MODE]
	mkdir -p "$dir/$1"
	"$PMT" run --seed 11 --timeout 60 --jobs 2 --max-failures 5 \
		--workdir "$dir/$1" --out "$dir/$1/out" \
		--check "$2 check {dir}" -- "$2" "${3:-run}" "$dir/$1" \
		>"$dir/$1.log" 2>&1
	echo $?
}

code=$(run good "$VGPM")
summary=$(grep -E '^images: ' "$dir/good.log")
echo "good: $summary (exit $code)"
if [ "$code" -ne 0 ] || ! [[ $summary =~ ^images:\ ([0-9]+)\ checked,\ 0\ inconsistent ]] ||
	[ "${BASH_REMATCH[1]}" -lt 50 ]; then
	echo "FAIL: crash images of the workload"
	tail -60 "$dir/good.log"
	rc=1
fi

# A broken build must leave inconsistent images; show what the check said.
require_caught() { # NAME PROGRAM MODE WHAT PATTERN
	code=$(run "$1" "$2" "$3")
	summary=$(grep -E '^images: ' "$dir/$1.log")
	echo "$1 ($4): $summary (exit $code)"
	if ! [[ $summary =~ ,\ ([1-9][0-9]*)\ inconsistent ]]; then
		echo "FAIL: the broken build $1 was not caught"
		tail -40 "$dir/$1.log"
		rc=1
	else
		grep -m3 -E "$5" "$dir/$1.log"
	fi
}

require_caught broken "$BROKEN" run "payloads not flushed" \
	"payload|VG_ECORRUPT"
require_caught broken_reclaim "$BROKEN_RECLAIM" run-reclaim \
	"reclaimed before the expired word is durable" "delivered again"
require_caught broken_drain "$BROKEN_DRAIN" run \
	"raw writes not drained before the commit" "payload|VG_ECORRUPT"
require_caught broken_undeclared "$BROKEN_UNDECL" run \
	"request payload and record neither declared nor drained" \
	"payload|VG_ECORRUPT"
require_caught broken_resp "$BROKEN_RESP" run \
	"answer and its record neither declared nor drained" \
	"payload|VG_ECORRUPT"
require_caught broken_slot_new "$BROKEN_SLOT_NEW" run \
	"a request's slot declared new, with no before-image" \
	"VG_ECORRUPT|sequence|slot|request"
exit $rc
