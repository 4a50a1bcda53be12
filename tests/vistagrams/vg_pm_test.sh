#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# vg_pm_test.sh -- libvistagrams under pmemtest: every power-failure crash
# image of every fence of the vg_pm workload must recover to a consistent
# state; the broken build that does not flush request payloads must be
# caught.
#
#   vg_pm_test.sh PMEMTEST VG_PM VG_PM_BROKEN_NO_PAYLOAD_FLUSH
set -u
PMT=$1 VGPM=$2 BROKEN=$3
dir=$(mktemp -d /dev/shm/vg-pm-XXXXXX)
trap 'rm -rf "$dir"' EXIT
rc=0

run() { # NAME PROGRAM
	mkdir -p "$dir/$1"
	"$PMT" run --seed 11 --timeout 60 --jobs 2 --max-failures 5 \
		--workdir "$dir/$1" --out "$dir/$1/out" \
		--check "$2 check {dir}" -- "$2" run "$dir/$1" \
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

code=$(run broken "$BROKEN")
summary=$(grep -E '^images: ' "$dir/broken.log")
echo "broken (payloads not flushed): $summary (exit $code)"
if ! [[ $summary =~ ,\ ([1-9][0-9]*)\ inconsistent ]]; then
	echo "FAIL: the broken build was not caught"
	tail -40 "$dir/broken.log"
	rc=1
else
	grep -m3 -E "payload|VG_ECORRUPT" "$dir/broken.log"
fi
exit $rc
