#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# game_kill.sh -- the game's server (game_prog.c) SIGKILLed at random under
#                 dc-run and restarted as a user would; its three clients
#                 must see the game go on
#
#   game_kill.sh GAME DC_RUN PROTOCOL KILLS SEED [broken]
#
# The server runs under dc-run --protocol PROTOCOL (checkpoints on tmpfs),
# the three clients without it: they are the users watching.  KILLS times,
# after a random 0.3-1.5 s, the server is SIGKILLed and the same command
# run again (its recovery).  The game is long enough for the kills (15
# frames a second, 2 s a kill and 3 s more); after the last kill it runs
# to its end.  Every client must then end at the last frame with no frame
# gone back and none inconsistent with the one before (game_prog.c's
# checks 1 and 2): exit 0.  A client that hears nothing for 20 s ends
# (exit 4), so every loop here is bounded in time; the kills also.
#
# broken: the run must fail instead -- with $DC_LIB, a broken libdc (the
# build whose CBNDVS does not commit before a visible event: a recovered
# server goes back to an older frame than the clients saw), at least one
# client must end in error.
# Exit 0 when the result is the expected one, 1 otherwise.
set -euo pipefail
[ $# -ge 5 ] || { sed -n '8p' "$0" >&2; exit 2; }
GAME=$1 DCRUN=$2 PROTO=$3 KILLS=$4 SEED=$5 MODE=${6:-ok}
RANDOM=$SEED
W=$(mktemp -d /dev/shm/dc-game-kill.XXXXXX)
PORT=$(( 26000 + ($$ + SEED * 97) % 6000 ))
FRAMES=$(( 15 * (2 * KILLS + 3) ))
server_pid=
cleanup() {
	[ -n "$server_pid" ] && kill -KILL "$server_pid" 2>/dev/null || true
	for c in "${cl[@]:-}"; do [ -n "$c" ] && kill -KILL "$c" 2>/dev/null || true; done
	rm -rf "$W"
}
trap cleanup EXIT
cl=()

start_server() {
	"$DCRUN" --dir "$W/ck" --protocol "$PROTO" -- \
		"$GAME" server $PORT $FRAMES >>"$W/server.out" 2>&1 &
	server_pid=$!
}

start_server
for i in 0 1 2; do
	"$GAME" client $i $PORT 30 20 >"$W/client.$i" 2>"$W/err.$i" &
	cl+=($!)
done
killed=0
for k in $(seq "$KILLS"); do
	sleep "$(awk -v r=$RANDOM 'BEGIN { printf "%.3f", 0.3 + 1.2 * r / 32768 }')"
	# the game over already: nothing left to kill
	kill -0 "$server_pid" 2>/dev/null || break
	kill -KILL "$server_pid"
	wait "$server_pid" 2>/dev/null || true
	killed=$((killed + 1))
	start_server
done
st=0
for i in 0 1 2; do
	rc=0
	wait "${cl[$i]}" || rc=$?
	cl[$i]=
	[ $rc = 0 ] || st=1
	echo "client $i exit $rc: $(tail -n 1 "$W/err.$i")"
	[ $rc = 0 ] || sed -n '1,5p' "$W/err.$i"
done
kill -KILL "$server_pid" 2>/dev/null || true
wait "$server_pid" 2>/dev/null || true
server_pid=
echo "game_kill: $PROTO, $killed kills of the server, $FRAMES frames"
if [ "$MODE" = broken ]; then
	if [ $st = 0 ]; then
		echo "game_kill: the broken build was not caught"
		exit 1
	fi
	echo "game_kill: the broken build caught"
	exit 0
fi
if [ $st != 0 ] || [ $killed -lt "$KILLS" ]; then
	echo "game_kill: FAILED"
	tail -n 20 "$W/server.out"
	exit 1
fi
exit 0
