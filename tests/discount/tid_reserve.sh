#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tid_reserve.sh -- a thread made after a recovery never gets the id of a
# recovered thread (thread.c invariant 3): tid_prog.c under `dc-run
# --protocol periodic --interval 5` makes thread A and is SIGKILLed
# once a checkpoint holds A (dc-run --status: two commits later); the
# recovery runs in a pid and mount namespace of its own (unshare); once
# it has made A again, the namespace's ns_last_pid is set (nsenter) so
# that the program's next thread gets, from the kernel, the id A had in
# the first run.  That thread's gettid and a signal sent to it must be
# its own.  Skipped (77) where a pid namespace cannot be made (not root).
# $TID_EXPECT=fail ($DC_LIB a broken libdc): the test passes when the
# program finds the thread with a recovered thread's id.
#
#   tid_reserve.sh DC_RUN PROG
#
# Exit: 0 pass, 1 fail, 2 usage, 77 skip.
set -u
[ $# = 2 ] || { echo "usage: $0 DC_RUN PROG" >&2; exit 2; }
[ "$(id -u)" = 0 ] && unshare -pf --mount-proc true 2>/dev/null ||
	{ echo "tid-reserve: no pid namespace here"; exit 77; }
T=$(mktemp -d /tmp/dc-tid.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "tid-reserve: $*" >&2; cat "$T/out" "$T/err" >&2; exit 1; }
DCRUN=$1 PROG=$2
run() {
	timeout -s KILL 30 "$@" --protocol periodic --interval 5 \
		--dir "$T/ck" -- "$PROG" "$T" >"$T/out" 2>"$T/err"
}
# the program's pid, by its executable, once it has N threads
find_prog() {
	local exe q
	exe=$(readlink -f "$PROG")
	for q in $(pgrep -f -- "$T"); do
		[ "$(readlink "/proc/$q/exe" 2>/dev/null)" = "$exe" ] &&
		[ "$(ls "/proc/$q/task" 2>/dev/null | wc -l)" = "$1" ] &&
		echo "$q"
	done
}
run "$DCRUN" &
pid=$!
t=0
while [ ! -s "$T/armed" ] && [ $t -lt 200 ]; do sleep 0.05; t=$((t + 1)); done
[ -s "$T/armed" ] || fail "the first run did not make its thread"
a=$(cat "$T/armed")
# the kill must follow a checkpoint that holds A: two commits after the
# one the status names once A exists (the program is stopped while a
# checkpoint is taken), however slow the commits come (bounded: 20 s)
# (a status not read, an empty answer, is "not yet", never "reached")
gen() { "$DCRUN" --status --dir "$T/ck" -- "$PROG" "$T" |
	sed -n 's/^generation=//p'; }
g0= t=0
while [ -z "$g0" ] && [ $t -lt 400 ]; do
	g0=$(gen)
	[ -n "$g0" ] || sleep 0.05
	t=$((t + 1))
done
g=
while { [ -z "$g" ] || [ "$g" -lt $((g0 + 2)) ]; } && [ $t -lt 400 ]; do
	sleep 0.05
	t=$((t + 1))
	g=$(gen)
done
[ $t -lt 400 ] || fail "no checkpoint holds A after 20 s"
p=$(find_prog 2)
[ -n "$p" ] || fail "the first run's program is not found"
kill -KILL "$p"
wait $pid 2>/dev/null
# the recovery, a child of the namespace's first process
run unshare -pf --mount-proc sh -c '"$0" "$@"; exit $?' "$DCRUN" &
pid=$!
t=0 p=
while [ -z "$p" ] && [ $t -lt 200 ]; do
	sleep 0.05
	t=$((t + 1))
	p=$(find_prog 2)
done
[ -n "$p" ] || { kill -KILL $pid; fail "the recovery did not make A again"; }
nsenter -t "$p" -p -m sh -c "echo $((a - 1)) > /proc/sys/kernel/ns_last_pid" ||
	{ kill -KILL $pid; fail "cannot set ns_last_pid"; }
touch "$T/go"
wait $pid
st=$?
[ $st = 3 ] && { cat "$T/err"; echo "tid-reserve: case not made"; exit 77; }
if [ "${TID_EXPECT:-}" = fail ]; then
	grep -q 'the id of\|signal ran in' "$T/err" ||
		fail "the broken build was not caught (status $st)"
	echo "tid-reserve: caught: $(grep tid: "$T/err")"
	exit 0
fi
[ $st = 0 ] && grep -q '^ok$' "$T/out" || fail "status $st"
cat "$T/out"
