#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# thread_kill.sh -- a multi-threaded program (thread_prog.c) under dc-run
# --protocol buffered, SIGKILLed at random moments and run again each
# time (dc-run recovers it), until it ends.  Its standard output goes
# through a pipe: the lines are visible output, held until the interval
# commits.  The output of all the runs together must pass
# thread_check.awk -- every update exactly once, in one chain, the last
# line naming all of them -- as the failure-free run's must; and at
# least one kill must have left a checkpoint to recover from (each kill
# comes 5-200 ms after its run has one, however slow dc-run's start).
#
#   thread_kill.sh DCRUN PROG CHECK THREADS N KILLS SEED [INTERVAL_MS]
#
# With THREAD_EXPECT=fail (a broken build), the campaign must fail;
# THREAD_BROKEN_LIB names the broken libdc for the runs with kills
# ($DC_LIB).  THREAD_LIMIT: seconds for the whole campaign (60).
#
# Exit: 0 pass, 1 fail (what failed on stderr), 2 usage.
set -u
[ $# -ge 7 ] || { echo "usage: $0 DCRUN PROG CHECK THREADS N KILLS SEED [MS]" >&2; exit 2; }
DCRUN=$1 PROG=$2 CHECK=$3 NT=$4 N=$5 KILLS=$6 SEED=$7 MS=${8:-5}
EXPECT=${THREAD_EXPECT:-}
LIMIT=${THREAD_LIMIT:-60}
RANDOM=$SEED
T=$(mktemp -d /tmp/dc-thread.XXXXXX)
SHM=$(mktemp -d /dev/shm/dc-thread.XXXXXX)
cleanup() {
	[ -n "${P:-}" ] && kill -9 "$P" 2>/dev/null
	[ -n "${THREAD_KEEP:-}" ] && echo "kept $T $SHM" >&2 && return
	rm -rf "$T" "$SHM"
}
trap cleanup EXIT
verdict() { # $1: 0 the campaign passed its checks
	if [ -n "$EXPECT" ]; then
		[ "$1" -ne 0 ] && { echo "broken build caught" >&2; exit 0; }
		echo "FAIL: the broken build was not caught" >&2
		exit 1
	fi
	exit "$1"
}

# the failure-free run, under dc-run (and the correct libdc)
if ! timeout 30 "$DCRUN" --protocol buffered --interval "$MS" \
	--dir "$SHM/ref" -- "$PROG" "$NT" "$N" 2> "$T/ref.err" | cat > "$T/ref" ||
   ! awk -f "$CHECK" "$T/ref" > "$T/ref.chk"; then
	echo "FAIL: the failure-free run failed" >&2
	cat "$T/ref.err" "$T/ref.chk" >&2
	exit 1
fi
ref_time=$(date +%s%N)

[ -n "${THREAD_BROKEN_LIB:-}" ] && export DC_LIB=$THREAD_BROKEN_LIB
# the runs' checkpoint is there (dc-run --status)
has_ckpt() {
	"$DCRUN" --status --dir "$SHM/run" -- "$PROG" "$NT" "$N" \
		>/dev/null 2>&1
}
start=$(date +%s)
kills=0 runs=0 rc=1 resumed=0
: > "$T/obs"
while :; do
	if [ $(( $(date +%s) - start )) -ge "$LIMIT" ]; then
		echo "FAIL: no end within ${LIMIT}s ($kills kills, $runs runs)" >&2
		verdict 1
	fi
	"$DCRUN" --protocol buffered --interval "$MS" --dir "$SHM/run" \
		-- "$PROG" "$NT" "$N" 2>> "$T/obs.err" >> "$T/obs" &
	P=$!
	runs=$((runs + 1))
	if [ "$kills" -lt "$KILLS" ]; then
		# once the run has a checkpoint (a recovery has one from its
		# start; a fresh run commits one before the program's first
		# instruction), however long dc-run takes to start (bounded:
		# 10 s), 5-200 ms: kills early in the run, in intervals, in
		# commits
		t=0
		while [ $t -lt 1000 ] && kill -0 "$P" 2>/dev/null &&
		      ! has_ckpt; do
			sleep 0.01
			t=$((t + 1))
		done
		sleep "$(printf '0.%03d' $(( RANDOM % 195 + 5 )))"
		if kill -9 "$P" 2>/dev/null; then
			wait "$P" 2>/dev/null
			P=
			kills=$((kills + 1))
			# killed after its end had committed (its directory
			# may be gone): the run is over, as when it exits
			if ! grep -q '^done ' "$T/obs"; then
				has_ckpt && resumed=$((resumed + 1))
				continue
			fi
			[ "$kills" -ge "$KILLS" ] && break
			rm -rf "$SHM/run"
			: > "$T/obs"
			continue
		fi
	fi
	# bounded: a run that hangs fails the campaign within its limit
	while kill -0 "$P" 2>/dev/null &&
	      [ $(( $(date +%s) - start )) -lt "$LIMIT" ]; do
		sleep 0.02
	done
	if kill -0 "$P" 2>/dev/null; then
		kill -9 "$P" 2>/dev/null
		wait "$P" 2>/dev/null
		echo "FAIL: a run did not end within ${LIMIT}s ($kills kills)" >&2
		verdict 1
	fi
	wait "$P"
	rc=$?
	P=
	[ "$rc" -eq 0 ] && [ "$kills" -ge "$KILLS" ] && break
	if [ "$rc" -ne 0 ]; then
		echo "FAIL: a run ended with status $rc after $kills kills" >&2
		tail -5 "$T/obs.err" >&2
		verdict 1
	fi
	# ended before the kills were done: the next campaign round
	rm -rf "$SHM/run"
	: > "$T/obs"
done
echo "kills: $kills ($resumed with a checkpoint to recover), runs: $runs" >&2
if [ "$KILLS" -gt 0 ] && [ "$resumed" -lt 1 ]; then
	# not a verdict: nothing was tried, a broken build not caught either
	echo "FAIL: no kill left a checkpoint to recover from" >&2
	exit 1
fi
if ! awk -f "$CHECK" "$T/obs" > "$T/obs.chk"; then
	echo "FAIL: the output of the runs with kills: $(cat "$T/obs.chk")" >&2
	verdict 1
fi
if ! cmp -s "$T/ref.chk" "$T/obs.chk"; then
	echo "FAIL: the failure-free run says $(cat "$T/ref.chk"), the runs" \
		"with kills $(cat "$T/obs.chk")" >&2
	verdict 1
fi
if [ -e "$SHM/run" ]; then
	echo "FAIL: the checkpoint directory is left behind" >&2
	verdict 1
fi
verdict 0
