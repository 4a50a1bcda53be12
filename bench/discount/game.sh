#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# game.sh -- the thesis' Figure 6.7: an xpilot-like game
# (tests/discount/game_prog.c: a server and 3 clients over UDP on
# loopback, 15 frames a second, each client sending 30 inputs a second and
# drawing every frame) with all four processes under dc-run, under every
# recovery protocol, the checkpoints on tmpfs (Discount Checking) and on
# ext4 (fdatasync: Discount Checking-disk)
#
#   bench/discount/game.sh [--quick] [BUILD_DIR]
#
# For each protocol (none: without dc-run; the five single-process ones;
# cpv-2pc and cbndv-2pc: the four processes one computation, with a
# dc-coord): the frame rate the clients sustain (the lowest of the three:
# distinct frames a second between their first and last frame), the
# frames they missed (gaps), the checkpoints a second of the whole game
# (the four processes' commits over the run's wall-clock time, without the
# 2PC runs' linger at the end: game_prog.c's LINGER_MS) and of the
# server alone, and the CPU time (user + system) of the processes and
# the coordinator.  GAME_FRAMES frames (300: 20 s); --quick: 90.  Every
# client must end the game with its checks passed (game_prog.c).
# Table on stdout; CSV in bench/results/discount/game.csv (GAME_CSV;
# --quick: only with GAME_CSV).
set -euo pipefail
cd "$(dirname "$0")/../.."
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
B=${1:-build}
G=$B/tests/discount/dc-game DCRUN=$B/discount/dc-run CO=$B/discount/dc-coord
for x in "$G" "$DCRUN" "$CO"; do
	[ -x "$x" ] || { echo "game.sh: build $x first" >&2; exit 2; }
done
FRAMES=${GAME_FRAMES:-300}
[ $QUICK = 1 ] && FRAMES=90
FSS=${GAME_FS:-tmpfs ext4}
PROTOS=${GAME_PROTOS:-none cpvs cand cbndvs cand-log cbndvs-log cpv-2pc cbndv-2pc}
W=$(mktemp -d /tmp/dc-game.XXXXXX)
trap 'rm -rf "$W" /dev/shm/dc-game.$$ /var/tmp/dc-game.$$' EXIT
PORT=$(( 30000 + $$ % 8000 ))

# one run: prints "fps frames gaps ckpt_per_s server_ckpt_per_s cpu_s wall_s"
one() { # PROTO BASE_DIR
	local p=$1 d=$2 cp="" dc=() pids=()
	rm -rf "$d" "$W"/t.* "$W"/s.* "$W"/e.*; mkdir -p "$d"
	PORT=$(( PORT + 2 ))
	if [[ $p == *2pc ]]; then
		# a round waits 20 s for a vote, not 2: on a loaded disk a
		# prepare's copies and fdatasyncs take seconds, and an
		# aborted round ends the participant (twopc.c P5), which
		# only a launcher would restart
		"$CO" --port $((PORT + 1)) --parts 4 --dir "$d/coord" --vote-ms 20000 2>/dev/null &
		cp=$!
		sleep 0.2
	fi
	local t0; t0=$(date +%s%N)
	for r in 0 1 2 3; do
		[ $p = none ] || dc=("$DCRUN" --dir "$d/p$r" --protocol $p --stats "$W/s.$r" --)
		# 2PC: every process lingers 2 s at its end, so that
		# none exits while the others' last rounds need it
		# (game_prog.c)
		local lg=0
		[[ $p == *2pc ]] && lg=2000
		if [ $r = 0 ]; then
			args=(server $PORT $FRAMES 15 $lg)
		else
			args=(client $((r - 1)) $PORT 30 20 $lg)
		fi
		DC_2PC_COORD=127.0.0.1:$((PORT + 1)) DC_2PC_ID=$r \
			/usr/bin/time -f "%U %S" -o "$W/t.$r" \
			"${dc[@]}" "$G" "${args[@]}" >/dev/null 2>"$W/e.$r" &
		pids+=($!)
	done
	local st=0
	for x in "${pids[@]}"; do wait "$x" || st=1; done
	local t1; t1=$(date +%s%N)
	if [ -n "$cp" ]; then
		awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f 0\n", ($14 + $15) / hz }' \
			"/proc/$cp/stat" >"$W/t.9"
		kill -TERM "$cp"; wait "$cp" 2>/dev/null || true
	fi
	if [ $st != 0 ]; then
		echo "game.sh: the game under $p failed:" >&2
		tail -n 5 "$W"/e.* "$W"/t.* >&2
		return 1
	fi
	# the game's time: without the linger at its end
	local wall; wall=$(awk -v a="$t0" -v b="$t1" -v l="$lg" \
		'BEGIN { printf "%.3f", (b - a) / 1e9 - l / 1000 }')
	cat "$W"/e.[123] | awk -v wall="$wall" \
		-v all="$({ cat "$W"/s.[0-3] 2>/dev/null || true; } | awk -F= '$1 == "checkpoints" { s += $2 } END { print s + 0 }')" \
		-v srv="$({ cat "$W"/s.0 2>/dev/null || true; } | awk -F= '$1 == "checkpoints" { print $2 }')" \
		-v cpu="$(cat "$W"/t.[0-9] | awk '{ s += $1 + $2 } END { printf "%.3f", s }')" '
		/^client .*: frames/ { f = $NF; if (min == "" || f < min) min = f;
			if (fr == "" || $4 < fr) fr = $4; g += $8 }
		END { printf "%.2f %d %d %.1f %.1f %s %s\n", min, fr, g,
			all / wall, srv / wall, cpu, wall }'
}

mkdir -p bench/results/discount
CSV=${GAME_CSV:-bench/results/discount/game.csv}
# a quick run does not replace the full run's table
[ $QUICK = 1 ] && CSV=${GAME_CSV:-$W/game.csv}
echo "protocol,fs,fps,frames,gaps,ckpt_per_s,server_ckpt_per_s,cpu_s,wall_s" >"$CSV"
printf "game: a server and 3 clients, %d frames at 15 frames a second\n" "$FRAMES"
printf "%-11s %-6s %6s %7s %5s %10s %10s %7s %7s\n" protocol fs fps frames gaps \
	ckpt/s srv_ckpt/s cpu_s wall_s
for fs in $FSS; do
	[ $fs = tmpfs ] && base=/dev/shm/dc-game.$$ || base=/var/tmp/dc-game.$$
	for p in $PROTOS; do
		[ $p = none ] && [ $fs = ext4 ] && continue
		read -r fps fr g cps sps cpu wall < <(one $p "$base")
		printf "%-11s %-6s %6s %7s %5s %10s %10s %7s %7s\n" $p $fs \
			"$fps" "$fr" "$g" "$cps" "$sps" "$cpu" "$wall"
		echo "$p,$fs,$fps,$fr,$g,$cps,$sps,$cpu,$wall" >>"$CSV"
	done
	rm -rf "$base"
done
