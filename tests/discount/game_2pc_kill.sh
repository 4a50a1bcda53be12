#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# game_2pc_kill.sh -- the game (game_prog.c) as one computation under
#                     CPV-2PC or CBNDV-2PC: the server, the three clients
#                     and dc-coord SIGKILLed at random and restarted, as a
#                     user would; what the clients drew must be one game
#
#   game_2pc_kill.sh GAME DC_RUN COORD PROTOCOL KILLS SEED [defer|broken]
#
# The four processes run under dc-run --protocol PROTOCOL (checkpoints on
# tmpfs) with a dc-coord, each under a launcher that starts it again when
# a signal ended it.  KILLS times, after a random 0.3-1.2 s, a process
# drawn at random -- the server, a client, the coordinator -- is
# SIGKILLed; the computation returns to its last committed round and
# goes on.  The game is long enough for the kills (15 frames a second,
# 1.5 s a kill and 4 s more) and every process lingers 2 s at its end
# (game_prog.c LINGER_MS), so none exits while the others may still roll
# back.  Then:
#   - every process ended with status 0 (each client's own checks, from
#     its checkpoint on, passed; the game reached its last frame);
#   - each client's screen -- its standard output, one pipe across its
#     incarnations: visible output is never taken back -- passes
#     `dc-game check` (frame numbers never go back, a frame drawn again is
#     the same line, each frame follows the one before by the physics).
#
# defer: dc-coord opens the round after round 3 only 3 s after round 3
# committed (--defer-ms), and 1 s into that the server is SIGKILLed
# first: the clients, whose next frames wait for that round, must have
# drawn nothing the rollback takes back.  broken: the same with $DC_LIB,
# a libdc that releases a visible event before its round (the build
# broken_2pc_visible): the clients draw frames of the execution the
# rollback discards, then the frames of the new one, and the check must
# fail.
# Exit 0 when the result is the expected one, 1 otherwise, 2 usage.
set -uo pipefail
[ $# -ge 6 ] || { sed -n '9p' "$0" >&2; exit 2; }
GAME=$1 DCRUN=$2 COORD=$3 PROTO=$4 KILLS=$5 SEED=$6 MODE=${7:-kill}
RANDOM=$SEED
T=$(mktemp -d /dev/shm/dc-game-2pc.XXXXXX)
# below the ephemeral range (32768..), where the 2PC sockets bind
PORT=$(( 20000 + ($$ * 7 + SEED * 131) % 12000 ))
CPORT=$((PORT + 1))
FRAMES=$(( 15 * (3 * KILLS / 2 + 4) ))
LIMIT=$(( FRAMES / 15 + 60 ))
pids=()
. "$(dirname "$0")/launcher.sh"

cleanup() {
	stop_all
	[ -n "${GAME_KEEP:-}" ] && echo "kept $T" >&2 && return
	rm -rf "$T"
}
trap cleanup EXIT

fail() {
	echo "game_2pc_kill: $PROTO $MODE: $*"
	tail -n 5 "$T"/err.* 2>/dev/null
	[ "$MODE" = broken ] || report 2>&1
	if [ "$MODE" = broken ]; then
		echo "game_2pc_kill: the broken build caught"
		exit 0
	fi
	exit 1
}

coord_extra=()
[ "$MODE" = kill ] || coord_extra=(--defer-ms 3000 --defer-round 3)
launch coord "$COORD" --bind 127.0.0.1 --port $CPORT --parts 4 \
	--dir "$T/coord" --vote-ms 5000 --stats "$T/coord.stats" \
	"${coord_extra[@]}" &
pids+=($!)
sleep 0.2
for r in 0 1 2 3; do
	if [ $r = 0 ]; then
		args=(server $PORT $FRAMES 15 2000)
	else
		args=(client $((r - 1)) $PORT 30 20 2000)
	fi
	# one pipe for every incarnation of the process: the screen
	DC_2PC_COORD=127.0.0.1:$CPORT DC_2PC_ID=$r launch p$r \
		"$DCRUN" --dir "$T/p$r" --protocol "$PROTO" -- \
		"$GAME" "${args[@]}" > >(cat >"$T/out.$r") &
	pids+=($!)
done

killed=0
if [ "$MODE" != kill ]; then
	t=0
	until grep -q "^commits=[3-9]" "$T/coord.stats" 2>/dev/null ||
		[ $t -ge 300 ]; do sleep 0.05; t=$((t + 1)); done
	sleep 1
	kill -9 "$(cat "$T/pid.p0")" 2>/dev/null && killed=$((killed + 1))
fi
names=(coord p0 p1 p2 p3)
while [ $killed -lt "$KILLS" ]; do
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", 0.3 + 0.9 * r / 32768 }')"
	# a process that ended cannot roll back: no kill once one has
	compgen -G "$T/rc.p*" >/dev/null && break
	who=${names[$((RANDOM % 5))]}
	[ -e "$T/pid.$who" ] || continue
	kill -9 "$(cat "$T/pid.$who")" 2>/dev/null && killed=$((killed + 1))
done

t=0
while :; do
	n=0
	for r in 0 1 2 3; do [ -e "$T/rc.p$r" ] && n=$((n + 1)); done
	[ $n = 4 ] && break
	[ $t -ge $((LIMIT * 10)) ] && fail "the game did not end in $LIMIT s"
	sleep 0.1
	t=$((t + 1))
done
sleep 0.2 # the screens' last bytes
for r in 0 1 2 3; do
	rc=$(cat "$T/rc.p$r")
	[ "$rc" = 0 ] || fail "process $r ended with status $rc"
done
for i in 0 1 2; do
	"$GAME" check $i "$T/out.$((i + 1))" || fail "client $i's screen"
done
restarts=$(cat "$T"/restarts.* 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
echo "game_2pc_kill: $PROTO $MODE: $killed kills, $restarts restarts," \
	"$FRAMES frames"
grep -h "^client" "$T"/err.p[123] | tail -n 3
if [ "$MODE" = broken ]; then
	echo "game_2pc_kill: the broken build was not caught"
	exit 1
fi
[ $killed -ge "$KILLS" ] || fail "only $killed kills landed"
exit 0
