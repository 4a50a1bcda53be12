#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# test.sh -- set everything up, build, and run every test suite.
#
# 1. scripts/bootstrap.sh (packages + build/)
# 2. meson test over every suite in build/
# 3. the unit suite again under AddressSanitizer + UBSan (build-asan/, only
#    the targets that suite needs), unless SKIP_ASAN=1
# Ends with one line "N passed, N failed[, N skipped]" over both passes.
set -uo pipefail

cd "$(dirname "$0")/.."
./scripts/bootstrap.sh build || { echo "0 passed, 1 failed"; exit 1; }

passed=0 failed=0 skipped=0
failures=() # "DIR NAME" of each test that failed, for the summary
saved=$(mktemp -d)
trap 'rm -rf "$saved"' EXIT

# Run meson test and add its counts to the totals.
run_suite() {
	local dir=$1
	shift
	local log
	log=$(mktemp)
	meson test -C "$dir" --print-errorlogs "$@" 2>&1 | tee "$log"
	local ok fail skip expfail unexp timeout
	ok=$(awk '/^Ok:/ {print $2}' "$log")
	expfail=$(awk '/^Expected Fail:/ {print $3}' "$log")
	fail=$(awk '/^Fail:/ {print $2}' "$log")
	unexp=$(awk '/^Unexpected Pass:/ {print $3}' "$log")
	skip=$(awk '/^Skipped:/ {print $2}' "$log")
	timeout=$(awk '/^Timeout:/ {print $2}' "$log")
	# meson prints a failed test twice (as it ends, and in its summary)
	local name
	while IFS= read -r name; do
		failures+=("$dir $name")
	done < <(sed -nE 's/^ *[0-9]+\/[0-9]+ +(.+ \/ )?([^ ]+) +(FAIL|TIMEOUT|UNEXPECTEDPASS) .*/\2/p' "$log" | sort -u)
	# this run's outputs, for the summary (a later meson test replaces it)
	cp "$dir/meson-logs/testlog.json" "$saved/$dir.json" 2>/dev/null
	rm -f "$log"
	if [ -z "$ok" ]; then
		failed=$((failed + 1)) # meson test itself failed
		return
	fi
	passed=$((passed + ok + ${expfail:-0}))
	failed=$((failed + ${fail:-0} + ${unexp:-0} + ${timeout:-0}))
	skipped=$((skipped + ${skip:-0}))
}

run_suite build --num-processes "$(nproc)"

if [ "${SKIP_ASAN:-0}" != 1 ]; then
	echo "== unit suite under AddressSanitizer + UndefinedBehaviorSanitizer =="
	# only what the unit suite needs: the rest of the tree is not run here
	if BUILD_SUITE=unit ./scripts/bootstrap.sh build-asan -- \
		-Db_sanitize=address,undefined -Dbuildtype=debug -Db_lundef=false; then
		run_suite build-asan --suite unit --no-rebuild \
			--num-processes "$(nproc)"
	else
		failed=$((failed + 1))
	fi
fi

# The failures again at the very end, each with the tail of its output
# (from meson's log): a run read from its last lines names them.
for f in "${failures[@]}"; do
	dir=${f%% *} name=${f#* }
	echo "== failed: $name ($dir) =="
	python3 - "$saved/$dir.json" "$name" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    t = json.loads(line)
    if t.get("name", "").split(" / ")[-1] == sys.argv[2]:
        out = (t.get("stdout") or "") + (t.get("stderr") or "")
        print("\n".join(out.splitlines()[-40:]))
PY
done

if [ "$skipped" -gt 0 ]; then
	echo "$passed passed, $failed failed, $skipped skipped"
else
	echo "$passed passed, $failed failed"
fi
[ "$failed" -eq 0 ]
