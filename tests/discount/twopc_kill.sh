#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# twopc_kill.sh -- the N-body (nbody_prog.c) under CPV-2PC / CBNDV-2PC,
# four participants and dc-coord, each under a launcher that starts it
# again when a signal ended it (as a user would), with one of:
#
#   kill N SEED    SIGKILL a process drawn at random (a participant or the
#                  coordinator) N times while the computation runs;
#   abort          participant 2 dies after its prepared checkpoint of
#                  round 2 and before its vote (DC_CRASH_AT, test builds):
#                  the round aborts and every participant returns to
#                  round 1;
#   no-vote        participant 2 cannot commit (test builds: its hold
#                  fails while the file $DC_TEST_2PC_FAIL exists): it
#                  votes no, says why, and every round aborts until the
#                  file is removed;
#   slow-coord     the coordinator opens the round after round 1 only 2 s
#                  after round 1 committed: 1 s into that, rank 0 has
#                  released exactly one visible event (the first);
#   stop-coord     the coordinator is stopped (SIGSTOP) after the first
#                  visible event: no further visible event may appear
#                  until it runs again;
#   ended          ranks 1-3 end, then rank 0, held before its end (a gate
#                  of its own), is killed: it must recover without them,
#                  whose exits the coordinator knows as committed.
#
# Then rank 0's visible output (its events file, dc-equiv --events) must
# be equivalent to a failure-free run's, and every process must have
# ended normally.
#
#   twopc_kill.sh NBODY COORD EQUIV PROTOCOL MODE [N SEED]
#
# With TWOPC_NETNS=1 the computation runs on two hosts: network
# namespaces made here, joined by a veth pair (10.77.0.1 holds the
# coordinator and ranks 0-1, 10.77.0.2 ranks 2-3); they exist only inside
# the namespaces, removed on exit.  Without the right to make them the
# test is skipped (exit 77).
#
# TWOPC_ENV: VAR=VALUE words added to every participant's environment
# (e.g. DC_TEST_REDO_MAX=1: every commit's flush due, test builds).
#
# With TWOPC_EXPECT=TEXT (a broken build), the run must fail with a
# message containing TEXT, and that is a pass; TWOPC_REF names the
# correct build's NBODY for the failure-free reference run.
#
# Exit: 0 pass, 1 fail (what failed on stderr), 2 usage, 77 skipped.
set -u
[ $# -ge 5 ] || { echo "usage: $0 NBODY COORD EQUIV PROTOCOL MODE [N SEED]" >&2; exit 2; }
NBODY=$1 COORD=$2 EQUIV=$3 PROTO=$4 MODE=$5
KILLS=${6:-0} SEED=${7:-1}
BODIES=${NBODY_BODIES:-512} STEPS=${NBODY_STEPS:-120} EVERY=${NBODY_EVERY:-6}
LIMIT=${TWOPC_LIMIT:-150}     # seconds a computation may take at most
RANDOM=$SEED

T=$(mktemp -d /tmp/dc-2pc.XXXXXX)
SHM=$(mktemp -d /dev/shm/dc-2pc.XXXXXX)
# below the ephemeral range (32768..), where the 2PC sockets bind
PORT=$(( 20000 + ($$ * 7 + SEED * 131) % 12000 ))
CPORT=$(( PORT + 10 ))
pids=()
. "$(dirname "$0")/launcher.sh"
NSA= NSB=
cleanup() {
	for f in "$T"/pid.*; do
		[ -e "$f" ] && kill -CONT "$(cat "$f")" 2>/dev/null
	done
	stop_all
	[ -n "$NSA" ] && ip netns del "$NSA" 2>/dev/null
	[ -n "$NSB" ] && ip netns del "$NSB" 2>/dev/null
	[ -n "${TWOPC_KEEP:-}" ] && echo "kept $T" >&2 && return
	rm -rf "$T" "$SHM"
}
trap cleanup EXIT
EXPECT=${TWOPC_EXPECT:-}      # a broken build: the failure it must show
fail() {
	if [ -n "$EXPECT" ] && [[ "$*" == *"$EXPECT"* ]]; then
		echo "twopc_kill: $PROTO $MODE: caught the broken build: $*" >&2
		exit 0
	fi
	echo "twopc_kill: $PROTO $MODE: $*" >&2
	tail -n 30 "$T"/err.* >&2
	report
	exit 1
}

# Where each process runs: `on coord|RANK CMD...` runs CMD on its host.
CADDR=127.0.0.1 HOSTS=
on() { shift; exec "$@"; }
if [ -n "${TWOPC_NETNS:-}" ]; then
	NSA=dc2pc-a.$$ NSB=dc2pc-b.$$
	if ! ip netns add "$NSA" 2>/dev/null; then
		NSA=
		echo "twopc_kill: cannot make network namespaces (root and" \
			"iproute2 needed): skipped" >&2
		exit 77
	fi
	ip netns add "$NSB" &&
	ip -n "$NSA" link add veth0 type veth peer name veth1 netns "$NSB" &&
	ip -n "$NSA" addr add 10.77.0.1/24 dev veth0 &&
	ip -n "$NSB" addr add 10.77.0.2/24 dev veth1 &&
	for ns in "$NSA" "$NSB"; do
		ip -n "$ns" link set lo up && ip -n "$ns" link set up \
			dev "$( [ "$ns" = "$NSA" ] && echo veth0 || echo veth1)"
	done || fail "could not make the two hosts"
	CADDR=10.77.0.1 HOSTS=10.77.0.1,10.77.0.1,10.77.0.2,10.77.0.2
	on() {
		local ns=$NSA
		case $1 in 2|3) ns=$NSB ;; esac
		shift
		exec ip netns exec "$ns" "$@"
	}
fi

REF_NBODY=${TWOPC_REF:-$NBODY}
part() { # RANK LIB-ENV...: one participant
	local r=$1; shift
	local nb=$NBODY gate=$T/gate
	[ -n "${REFRUN:-}" ] && nb=$REF_NBODY
	[ "$MODE" = ended ] && [ $r = 0 ] && [ -z "${REFRUN:-}" ] &&
		gate=$T/gate0
	on $r env DC_DIR="$SHM/p$r" NBODY_PROTOCOL="$PROTO" \
		DC_2PC_COORD=$CADDR:$CPORT DC_2PC_ID=$r NBODY_HOSTS=$HOSTS \
		NBODY_EXIT_GATE="$gate" \
		${TWOPC_ENV:-} "$@" "$nb" $r 4 $PORT $BODIES $STEPS $EVERY
}

# The ranks end only once T/gate exists (NBODY_EXIT_GATE), so that each
# campaign's last kill lands in the computation and its rollback is over
# before the end: the kill mode opens it after its last kill, once the
# killed participant restarted and all four are joined in the
# coordinator's epoch.  Every other mode runs with it open (`ended` holds
# rank 0 at a gate of its own).
open_gate() {
	local t=0 who old new
	if [ -e "$T/lastkill" ]; then
		read -r who old <"$T/lastkill"
		while [ "$who" != coord ] && [ $t -lt 300 ]; do
			new=$(cat "$T/pid.$who" 2>/dev/null)
			[ -n "$new" ] && [ "$new" != "$old" ] &&
				grep -q "participant ${who#p} joined (pid $new," \
					"$T/err.coord" &&
				grep -q "^joined=4" "$T/coord.stats" && break
			sleep 0.1
			t=$((t + 1))
		done
	fi
	: >"$T/gate"
}

# A failure-free run: the reference.
run() { # EVENTS-FILE EXTRA-ENV-FOR-RANK-2
	local ev=$1 extra=$2
	rm -rf "$SHM"/* "$T"/pid.* "$T"/rc.* "$T"/restarts.* "$T/lastkill" \
		"$T/gate0"
	if [ "$MODE" = kill ] && [ -z "${REFRUN:-}" ]; then
		rm -f "$T/gate"
	else
		: >"$T/gate"
	fi
	launch coord on coord "$COORD" --bind $CADDR --port $CPORT \
		--parts 4 --dir "$SHM/coord" --vote-ms 2000 \
		--stats "$T/coord.stats" --verbose ${COORD_EXTRA:-} &
	pids+=($!)
	sleep 0.2
	for r in 0 1 2 3; do
		local e=""
		[ $r = 0 ] && e="DC_EVENTS=$ev"
		[ $r = 2 ] && e="$extra"
		launch p$r part $r $e > >(cat >/dev/null) &
		pids+=($!)
	done
}

wait_done() { # all four participants ended, within LIMIT seconds
	local t=0
	while [ $t -lt $((LIMIT * 10)) ]; do
		local n=0
		for r in 0 1 2 3; do
			[ -e "$T/rc.p$r" ] && n=$((n + 1))
			[ -e "$T/rc.p$r" ] && [ "$(cat "$T/rc.p$r")" != 0 ] &&
				fail "participant $r ended with status $(cat "$T/rc.p$r")"
		done
		[ $n = 4 ] && return 0
		sleep 0.1
		t=$((t + 1))
	done
	fail "the computation did not end in $LIMIT s"
}

# The reference is failure-free only if no round aborted (a vote late
# past --vote-ms on a loaded machine rolls the computation back, and its
# events then hold duplicates the observed run need not repeat): again
# until one is.
for try in 1 2 3 4; do
	rm -f "$T/ref.ev" "$T/coord.stats"
	REFRUN=1 run "$T/ref.ev" ""
	wait_done
	stop_all
	grep -q "^aborts=0" "$T/coord.stats" && grep -q "^rollbacks=0" "$T/coord.stats" && break
	[ $try = 4 ] && fail "no failure-free reference run in 4 tries"
done
[ -s "$T/ref.ev" ] || fail "the reference run wrote no visible event"
: >"$T/err.p0"

case $MODE in
kill)
	# computations one after the other until N kills have landed; each
	# must end equivalent to the reference
	n=0
	names=(coord p0 p1 p2 p3)
	while :; do
		run "$T/obs.ev" ""
		while [ $n -lt "$KILLS" ]; do
			sleep "0.$(( 10 + RANDOM % 30 ))"
			# the last report is out: the computation is done
			grep -q "^step $STEPS " "$T/obs.ev" 2>/dev/null && break
			who=${names[$((RANDOM % 5))]}
			[ -e "$T/pid.$who" ] || continue
			p=$(cat "$T/pid.$who")
			kill -9 "$p" 2>/dev/null && n=$((n + 1)) &&
				echo "$who $p" >"$T/lastkill"
		done
		open_gate
		[ $n -ge "$KILLS" ] && break
		wait_done
		"$EQUIV" --events "$T/ref.ev" "$T/obs.ev" >&2 ||
			fail "visible output not equivalent after $n kills"
		stop_all
		rm -f "$T/obs.ev"
	done
	echo "twopc_kill: $PROTO: $n kills" >&2
	;;
abort)
	run "$T/obs.ev" "DC_CRASH_AT=2pc-prepared:2"
	;;
no-vote)
	run "$T/obs.ev" "DC_TEST_2PC_FAIL=$T/no-vote"
	t=0
	while [ ! -s "$T/obs.ev" ] && [ $t -lt 300 ]; do sleep 0.05; t=$((t + 1)); done
	: >"$T/no-vote"
	t=0
	until grep -q "aborted (reason 2, participant 2)" "$T/err.coord" ||
		[ $t -ge 600 ]; do
		sleep 0.05
		t=$((t + 1))
	done
	rm -f "$T/no-vote"
	grep -q "aborted (reason 2, participant 2)" "$T/err.coord" ||
		fail "no round aborted by participant 2's no vote"
	grep -q "participant 2 cannot commit round" "$T/err.p2" ||
		fail "participant 2 did not say why it could not commit"
	;;
slow-coord)
	COORD_EXTRA="--defer-ms 2000 --defer-round 1" run "$T/obs.ev" ""
	t=0
	until grep -q "^commits=1" "$T/coord.stats" 2>/dev/null ||
		[ $t -ge 300 ]; do sleep 0.05; t=$((t + 1)); done
	sleep 1
	n=$(wc -l <"$T/obs.ev")
	[ "$n" -le 1 ] || fail "$n visible events with one round committed"
	;;
stop-coord)
	run "$T/obs.ev" ""
	t=0
	while [ ! -s "$T/obs.ev" ] && [ $t -lt 300 ]; do sleep 0.05; t=$((t + 1)); done
	kill -STOP "$(cat "$T/pid.coord")"
	sleep 0.3
	before=$(wc -l <"$T/obs.ev")
	sleep 1.5
	after=$(wc -l <"$T/obs.ev")
	kill -CONT "$(cat "$T/pid.coord")"
	[ "$after" = "$before" ] || fail "$((after - before)) visible events while the coordinator was stopped (no round could complete)"
	;;
ended)
	run "$T/obs.ev" ""
	t=0
	until [ -e "$T/rc.p1" ] && [ -e "$T/rc.p2" ] && [ -e "$T/rc.p3" ] ||
		[ $t -ge $((LIMIT * 10)) ]; do sleep 0.1; t=$((t + 1)); done
	counts="the coordinator counts $(grep "^ended=" "$T/coord.stats")"
	for r in 1 2 3; do
		[ "$(cat "$T/rc.p$r" 2>/dev/null)" = 0 ] || fail "rank $r did" \
			"not end (status '$(cat "$T/rc.p$r" 2>/dev/null)'); $counts"
	done
	grep -q "^ended=3" "$T/coord.stats" ||
		fail "ranks 1-3 ended, but $counts"
	kill -9 "$(cat "$T/pid.p0")" || fail "rank 0 was not running"
	: >"$T/gate0"
	;;
*) echo "unknown mode $MODE" >&2; exit 2 ;;
esac
wait_done
if [ "$MODE" = abort ]; then
	grep -q "aborts=[1-9]" "$T/coord.stats" || fail "no round aborted"
fi
"$EQUIV" --events "$T/ref.ev" "$T/obs.ev" >&2 ||
	fail "visible output not equivalent to the failure-free run's"
[ -z "$EXPECT" ] || fail "the broken build was not caught (expected: $EXPECT)"
echo "twopc_kill: $PROTO $MODE: pass ($(cat "$T"/restarts.* 2>/dev/null |
	awk '{ s += $1 } END { print s + 0 }') restarts)" >&2
exit 0
