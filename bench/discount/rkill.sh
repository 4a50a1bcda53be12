#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# rkill.sh -- kills inside recovery: the long campaign
#
#   bench/discount/rkill.sh [--quick] [--part files|sqlite] [BUILD_DIR]
#
# The suite's [rkill] test sweeps one configuration; this sweeps them all
# and adds a real program.  Needs the crash-point build of libdc
# (libdc_test.so, DC_CRASH_AT=rstep:N kills at recovery step N).
#
# 1. dc-test-files (every logged file operation: overwrite, extend,
#    truncate, create, unlink, rename, rename over a file, O_TRUNC, a
#    journal created and deleted twice, a deleted file held open) kills
#    itself after its checkpoint; its recovery run is killed at step N,
#    for every N, under every dirty tracking, on tmpfs and on a disk file
#    system, with the redo log kept or flushed at every commit.  After
#    each kill the program is run until it finishes: its files must be
#    as at the checkpoint, with no hidden file left.
# 2. sqlite3 with its rollback journal under cand-log and cbndvs (tracking
#    wp), fed a transaction every 5 ms: killed at a random time, its
#    recovery run killed at a random step, then run to the end on the
#    input it had not consumed.  The database must pass integrity_check
#    and hold rows 1..n exactly (count, sum), with no journal or hidden
#    file left.
# Prints one line per configuration: kill points, failures.  Exit 1 on a
# failure.  --quick: fewer configurations and sqlite rounds.
set -uo pipefail
cd "$(dirname "$0")/../.."
QUICK=0 PART=all
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
if [ "${1:-}" = "--part" ]; then PART=$2; shift 2; fi
B=$(cd "${1:-build}" && pwd)
PROG=$B/tests/discount/dc-test-files
DCRUN=$B/discount/dc-run
LIB=$B/discount/libdc_test.so
for f in "$PROG" "$DCRUN" "$LIB"; do
	[ -e "$f" ] || { echo "rkill.sh: $f missing (ninja -C $B)" >&2; exit 2; }
done
FAIL=0
EXPECTED='resumed (held h)
emptied=full|
gone=still here|
grow=abc|
keep=original|
moved=m|
shrink=0123456789|
victim=v|'

# one_point DIRBASE STEP: 0 ok, 1 beyond the last step, 2 failure
one_point() {
	local d out st run
	d=$(mktemp -d "$1/dc-rkill-XXXXXX")
	mkdir "$d/work"
	("$PROG" "$d/ck" "$d/work") >/dev/null 2>&1
	out=$(DC_CRASH_AT=rstep:$2 "$PROG" "$d/ck" "$d/work" 2>&1)
	st=$?
	local beyond=0
	[ $st = 0 ] && beyond=1
	for run in 1 2 3; do
		[ $st = 0 ] && break
		out=$("$PROG" "$d/ck" "$d/work" 2>&1)
		st=$?
	done
	local rc=$beyond
	if [ $st != 0 ] || [ "$out" != "$EXPECTED" ] ||
	   ls -A "$d/work" | grep -q '^\.dc-del-'; then
		echo "  step $2: exit $st, output:"; echo "$out" | sed 's/^/    /'
		rc=2
	fi
	rm -rf "$d"
	return $rc
}

if [ $PART != sqlite ]; then
echo "== dc-test-files: a kill at every step of recovery"
TRACKINGS="uffd wp undo"
BASES="/dev/shm /var/tmp"
REDO="default 1"
if [ $QUICK = 1 ]; then TRACKINGS="uffd undo"; BASES="/dev/shm"; fi
for tr in $TRACKINGS; do
for base in $BASES; do
for rm in $REDO; do
	export DC_TRACKING=$tr
	if [ "$rm" = 1 ]; then export DC_TEST_REDO_MAX=1; else unset DC_TEST_REDO_MAX; fi
	points=0 bad=0 step=1
	while [ $step -lt 2000 ]; do
		one_point "$base" $step
		r=$?
		[ $r = 1 ] && break
		[ $r = 2 ] && bad=$((bad + 1))
		points=$((points + 1))
		step=$((step + 1))
	done
	printf "tracking %-4s %-9s redo_max %-7s  %4d kill points  %d failed\n" \
		"$tr" "$base" "$rm" $points $bad
	[ $bad = 0 ] || FAIL=1
done
done
done
unset DC_TRACKING DC_TEST_REDO_MAX
fi
[ $PART = files ] && exit $FAIL

echo
echo "== sqlite3, rollback journal: killed running, then inside recovery"
ROUNDS=20
[ $QUICK = 1 ] && ROUNDS=5
W=$(mktemp -d /dev/shm/dc-rkill-sq-XXXXXX)
trap 'rm -rf "$W"' EXIT
python3 -c '
for i in range(1, 301):
    print("insert into t values(%d);" % i)' > "$W/rows.sql"
# feed FROM_BYTE: the script from that byte, one line every 5 ms
feed() {
	tail -c +$(($1 + 1)) "$W/rows.sql" | python3 -c '
import sys, time
try:
    for l in sys.stdin.buffer:
        sys.stdout.buffer.write(l); sys.stdout.buffer.flush()
        time.sleep(0.005)
except BrokenPipeError:
    pass' 2>/dev/null
}
# run FROM_BYTE KILL_AFTER [VAR=VALUE...]: sqlite3 under dc-run on the
# script from that byte; SIGKILLed after KILL_AFTER seconds unless empty
run() {
	(cd "$W/work" && feed "$1" | env "${@:3}" DC_LIB="$LIB" \
		sh -c 'echo $$ > "$0"; exec "$@"' "$W/pid" "$DCRUN" \
		--dir "$W/ck" --protocol "$proto" --tracking wp -- \
		sqlite3 db.sqlite >>"$W/out" 2>&1) 2>/dev/null &
	local bg=$!
	if [ -n "$2" ]; then
		sleep "$2"
		kill -KILL "$(cat "$W/pid")" 2>/dev/null
	fi
	wait $bg 2>/dev/null
}
consumed() {
	"$DCRUN" --status --dir "$W/ck" -- sqlite3 db.sqlite |
		sed -n 's/^input_bytes=//p' | grep . || echo 0
}
for proto in cand-log cbndvs; do
	bad=0
	for round in $(seq 1 $ROUNDS); do
		rm -rf "$W/ck" "$W/work"; mkdir "$W/work"
		(cd "$W/work" && sqlite3 db.sqlite "create table t(a integer)")
		: >"$W/out"
		run 0 0.$((RANDOM % 8 + 2))
		run "$(consumed)" "" DC_CRASH_AT=rstep:$((RANDOM % 60 + 1))
		# the recovery run finished when its step was past the last
		if "$DCRUN" --status --dir "$W/ck" -- x >/dev/null; then
			run "$(consumed)" ""
		fi
		res=$(cd "$W/work" && sqlite3 db.sqlite \
			"pragma integrity_check; select count(*) = max(a), sum(a) = max(a) * (max(a) + 1) / 2 from t")
		if [ "$res" != "$(printf 'ok\n1|1')" ] ||
		   ls -A "$W/work" | grep -q -e '^\.dc-del-' -e journal; then
			bad=$((bad + 1))
			echo "  round $round: $res"; ls -A "$W/work" | sed 's/^/    /'
			tail -3 "$W/out" | sed 's/^/    /'
		fi
	done
	printf "sqlite3 %-9s %3d rounds  %d failed\n" $proto $ROUNDS $bad
	[ $bad = 0 ] || FAIL=1
done
exit $FAIL
