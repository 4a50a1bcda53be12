#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# sigterm.sh -- a program's signal handler ends the call it interrupted,
# whatever libdc does around it: sigterm_prog.c under `dc-run --protocol
# buffered` (its "waiting" held: the interval is a minute) waits in
# epoll_wait; SIGTERM's handler runs; with the test build's
# DC_TEST_SIG_TICK=1 a checkpoint tick is also missed in that call, the
# case where libdc makes a call interrupted by its tick again.  The
# program must see its EINTR, print "stopped" and end.  Made again, the
# call would wait for ever (stopped here after 20 s).
#
#   sigterm.sh DC_RUN LIBDC_TEST PROG
#
# Exit: 0 pass, 1 fail, 2 usage.
set -u
[ $# = 3 ] || { echo "usage: $0 DC_RUN LIBDC_TEST PROG" >&2; exit 2; }
T=$(mktemp -d /tmp/dc-sigterm.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "sigterm: $*" >&2; cat "$T/err" >&2; exit 1; }
DC_LIB=$2 DC_TEST_SIG_TICK=1 timeout -s KILL 20 "$1" --protocol buffered \
	--interval 60000 --dir "$T/ck" -- "$3" "$T/pid" >"$T/out" 2>"$T/err" &
run=$!
# the program (its pid file is output held too: found by its image),
# then the program in epoll_wait (232, epoll_pwait 281)
exe=$(readlink -f "$3")
t=0 p=
while [ $t -lt 100 ]; do
	p=
	for q in $(pgrep -f -- "$T/pid"); do
		[ "$(readlink "/proc/$q/exe" 2>/dev/null)" = "$exe" ] && p=$q
	done
	[ -n "$p" ] && case $(cut -d' ' -f1 "/proc/$p/syscall" 2>/dev/null) in
		232|281) break ;;
	esac
	sleep 0.05
	t=$((t + 1))
done
[ $t -lt 100 ] || fail "the program did not wait in epoll_wait in 5 s"
kill -TERM "$p"
wait $run
rc=$?
[ $rc = 0 ] || fail "dc-run ended with status $rc (137: the program still waiting after 20 s)"
[ "$(cat "$T/out")" = "$(printf 'waiting\nstopped')" ] ||
	fail "output '$(cat "$T/out")', not waiting/stopped"
echo "sigterm: pass" >&2
