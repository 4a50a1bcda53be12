#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tick_eintr.sh -- libdc's own signals never end a program's call (sud.c
# invariant 7): tick_eintr_prog.c, which has no signal handler and takes
# EINTR for an error, waits with timeouts in epoll_wait, poll, nanosleep,
# clock_nanosleep and sigtimedwait under `dc-run --interval 5` (a tick
# every 5 ms, six in each 30 ms wait, no output held meanwhile): under
# cbndvs, periodic and buffered, and with the waits in a second thread
# (stopped by every checkpoint) under buffered.  Every call must end by
# its own timeout.  $TICK_LIB: a broken libdc, which must fail the run
# of $TICK_CASE (the protocol, and "thread"): by an EINTR, or by waits
# made again with their whole timeout, which never end (stopped after
# 6 s, where 5 rounds take under 1 s); the test passes when it does.
#
#   tick_eintr.sh DC_RUN PROG
#
# Exit: 0 pass, 1 fail, 2 usage.
set -u
[ $# = 2 ] || { echo "usage: $0 DC_RUN PROG" >&2; exit 2; }
T=$(mktemp -d /tmp/dc-tick-eintr.XXXXXX)
trap 'rm -rf "$T"' EXIT
DCRUN=$1 PROG=$2
LIMIT=30
run() { # PROTOCOL [thread]
	rm -rf "$T/ck"
	timeout -s KILL $LIMIT "$DCRUN" --protocol "$1" --interval 5 \
		--dir "$T/ck" -- "$PROG" 5 ${2:-} >"$T/out" 2>"$T/err"
}
if [ -n "${TICK_LIB:-}" ]; then
	export DC_LIB=$TICK_LIB
	LIMIT=6
	# shellcheck disable=SC2086 # the protocol and "thread", two words
	run ${TICK_CASE:-periodic}
	st=$?
	if [ $st = 0 ] && grep -q '^ok 5$' "$T/out"; then
		echo "tick-eintr: the broken libdc was not caught" >&2
		exit 1
	fi
	if [ $st = 137 ]; then
		echo "tick-eintr: caught: the waits did not end in $LIMIT s"
		exit 0
	fi
	grep -q 'Interrupted system call' "$T/err" ||
		{ echo "tick-eintr: failed otherwise:" >&2; cat "$T/err" >&2;
		  exit 1; }
	echo "tick-eintr: caught: $(head -1 "$T/err")"
	exit 0
fi
for c in "cbndvs" "periodic" "buffered" "buffered thread"; do
	# shellcheck disable=SC2086 # the protocol and "thread", two words
	if ! run $c || ! grep -q '^ok 5$' "$T/out"; then
		echo "tick-eintr: FAIL under $c:" >&2
		cat "$T/out" "$T/err" >&2
		exit 1
	fi
done
echo "tick-eintr: ok: every wait ended by its timeout under cbndvs," \
	"periodic, buffered and buffered with a thread"
