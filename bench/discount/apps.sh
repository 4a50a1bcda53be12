#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# apps.sh -- the thesis' Figures 6.3-6.5: nvi, sc (the spreadsheet in the
# place of oleo) and magic (the VLSI layout editor), unmodified, on a
# pseudo-terminal, fed a script at typing speed, under every recovery
# protocol, the checkpoints in memory (tmpfs: Discount Checking) and on
# disk (ext4, fdatasync: Discount Checking-disk)
#
#   bench/discount/apps.sh [--quick] [--check] [BUILD_DIR]
#
# nvi and sc are typed at 100 ms a key (APPS_KEYS keys, 300), magic
# (magicdnull -dnull -noconsole -T scmos, the interpreter /usr/bin/magic
# execs) at 1 s a command (APPS_CMDS, 30); the scripts are
# bench/discount/apps_keys.py's.  Protocols: none (alone), the five
# single-process ones, and the two 2PC ones with the program as the only
# participant of a dc-coord of its own (a fresh one per run).
#
# For each: commits (checkpoints, the first one included), and against the
# run alone
#   wall_ratio   wall-clock time (mostly the script's length: the
#                program waits for its typist)
#   cpu_ratio    CPU time, user + system, of the program -- libdc's work
#                is in the process -- and of dc-coord
#   cpu_over_%   the CPU time added, as a share of the run's wall-clock
#                time alone: the part of the processor that Discount
#                Checking takes from an interactive session (the thesis'
#                overhead of an idle program)
# Medians of APPS_REPS runs (1), the protocols taking turns within each
# repetition.  A run that has not ended APPS_WAIT (300) seconds after its
# last key (it did not keep up with its typist) is killed and shown as
# "did not end".  APPS_FS: the file systems (tmpfs ext4).  Every run's files (nvi's f.txt, sc's vals.txt and out.sc,
# magic's t1.mag without its timestamp line) must equal the run alone's.
# Table on stdout; CSV in bench/results/discount/apps.csv (APPS_CSV).
# --quick: 40 keys at 20 ms, 6 commands at 200 ms, tmpfs only (a smoke
# run, about 2 minutes; its CSV only with APPS_CSV).
# --check: tests/discount's check (apps.sh in meson's suite discount):
# --quick without the table; fails when a program's files under a
# protocol differ from its files alone, when a run does not end, or
# commits nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$(pwd)
QUICK=0 CHECK=0
while [ $# -gt 0 ]; do
	case $1 in
	--quick) QUICK=1; shift ;;
	--check) QUICK=1; CHECK=1; shift ;;
	*) break ;;
	esac
done
B=$(cd "${1:-build}" && pwd)
DCRUN=$B/discount/dc-run
CO=$B/discount/dc-coord
for x in "$DCRUN" "$CO"; do
	[ -x "$x" ] || { echo "apps.sh: build $x first" >&2; exit 2; }
done
MAGIC=/usr/lib/x86_64-linux-gnu/magic/tcl/magicdnull
APPS=${APPS_APPS:-nvi sc magic}
KEYS=${APPS_KEYS:-300} CMDS=${APPS_CMDS:-30} REPS=${APPS_REPS:-1}
KMS=100 CMS=1000 FSS=${APPS_FS:-tmpfs ext4} WAIT=${APPS_WAIT:-300}
if [ $QUICK = 1 ]; then KEYS=40 CMDS=6 KMS=20 CMS=200 FSS=tmpfs WAIT=20; fi
PROTOS=${APPS_PROTOS:-none cpvs cand cbndvs cand-log cbndvs-log cpv-2pc cbndv-2pc}
TYPIST=$SRC/bench/discount/typist.py
W=$(mktemp -d /tmp/dc-apps.XXXXXX)
trap 'rm -rf "$W" /dev/shm/dc-apps.$$ /var/tmp/dc-apps.$$' EXIT
PORT=$(( 24000 + $$ % 8000 ))

missing=
for a in $APPS; do
	case $a in
	magic) [ -x $MAGIC ] || missing="$missing magic" ;;
	*) command -v $a >/dev/null || missing="$missing $a" ;;
	esac
done
if [ -n "$missing" ]; then
	echo "apps.sh: not installed:$missing" >&2
	exit 77
fi
for a in nvi sc; do python3 "$SRC/bench/discount/apps_keys.py" $a "$KEYS" "$W/$a.k"; done
python3 "$SRC/bench/discount/apps_keys.py" magic "$CMDS" "$W/magic.k"

# the files a run leaves, compared with the run alone's
files() { # APP RUN_DIR
	case $1 in
	nvi) cat "$2/f.txt" ;;
	sc) cat "$2/vals.txt" "$2/out.sc" ;;
	magic) grep -v '^timestamp ' "$2/t1.mag" ;;
	esac
}

# one run: prints "wall_s cpu_s commits"
one() { # APP PROTO BASE_DIR
	local a=$1 p=$2 d=$3 cp="" cpu dc=() opt=()
	rm -rf "$d" "$W/run" "$W/stats"; mkdir -p "$d" "$W/run"
	if [ "$p" != none ]; then
		dc=("$DCRUN" --dir "$d/ck" --protocol "$p" --stats "$W/stats" --)
	fi
	if [[ $p == *2pc ]]; then
		# a round waits 20 s for a vote, not 2: on a loaded disk a
		# prepare's copies and fdatasyncs take seconds, and an
		# aborted round ends the participant (twopc.c P5), which
		# only a launcher would restart
		PORT=$(( PORT + 1 ))
		"$CO" --port $PORT --parts 1 --dir "$d/coord" --vote-ms 20000 2>/dev/null &
		cp=$!
		sleep 0.2
	fi
	case $a in
	nvi) opt=(--keys --prompt f.txt "$KMS" "$W/nvi.k" -- "${dc[@]}" nvi f.txt) ;;
	sc) opt=(--keys --prompt "Type '?'" "$KMS" "$W/sc.k" -- "${dc[@]}" sc) ;;
	magic) opt=(--prompt "% " "$CMS" "$W/magic.k" -- "${dc[@]}" $MAGIC
		-nowrapper -dnull -noconsole -T scmos) ;;
	esac
	local out rc=0
	out=$(cd "$W/run" && HOME="$W/run" NEXINIT="set recdir=$W/run/rec" \
		DC_2PC_COORD=127.0.0.1:$PORT DC_2PC_ID=0 \
		python3 "$TYPIST" --pty --timeout "$WAIT" --screen "$W/screen" \
		"${opt[@]}") || rc=$?
	cpu=0
	if [ -n "$cp" ]; then
		cpu=$(awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f", ($14 + $15) / hz }' \
			"/proc/$cp/stat")
		kill -TERM "$cp"; wait "$cp" 2>/dev/null || true
	fi
	if [ $rc != 0 ]; then
		echo "apps.sh: $a under $p failed; its terminal:" >&2
		tail -c 600 "$W/screen" | tr -c '[:print:]\n' ' ' >&2
		echo >&2
		[ $CHECK = 1 ] && return 1
		echo "- - -"
		return 0
	fi
	if [ "$p" = none ]; then
		files $a "$W/run" >"$W/ref.$a"
	elif ! files $a "$W/run" | cmp -s - "$W/ref.$a"; then
		echo "apps.sh: $a under $p left other files than alone" >&2
		files $a "$W/run" | diff "$W/ref.$a" - | head -20 >&2 || true
		return 1
	fi
	local n=0
	[ "$p" = none ] || n=$(sed -n 's/^checkpoints=//p' "$W/stats")
	if [ "$p" != none ] && [ "${n:-0}" -lt 1 ]; then
		echo "apps.sh: $a under $p committed nothing" >&2
		return 1
	fi
	read -r w c <<<"$out"
	echo "$w $(awk -v a="$c" -v b="$cpu" 'BEGIN { printf "%.4f", a + b }') $n"
}

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

CSV=${APPS_CSV:-bench/results/discount/apps.csv}
# a quick run does not replace the full run's table
[ $QUICK = 1 ] && CSV=${APPS_CSV:-$W/apps.csv}
[ $CHECK = 1 ] || { mkdir -p "$(dirname "$CSV")"; echo "app,protocol,fs,commits,wall_s,cpu_s,wall_ratio,cpu_ratio,cpu_over_pct" >"$CSV"; }
[ $CHECK = 1 ] || printf "%d keys at %d ms (nvi, sc), %d commands at %d ms (magic); medians of %d\n" \
	"$KEYS" "$KMS" "$CMDS" "$CMS" "$REPS"
[ $CHECK = 1 ] || printf "%-5s %-11s %-6s %8s %8s %8s %10s %10s %10s\n" app protocol fs \
	commits wall_s cpu_s wall_ratio cpu_ratio cpu_over_%
for a in $APPS; do
	for fs in $FSS; do
		[ $fs = tmpfs ] && base=/dev/shm/dc-apps.$$ || base=/var/tmp/dc-apps.$$
		for i in $(seq "$REPS"); do
			for p in $PROTOS; do
				one $a $p "$base" >>"$W/r.$a.$fs.$p"
			done
		done
		rm -rf "$base"
		[ $CHECK = 1 ] && continue
		w0=$(awk '{ print $1 }' "$W/r.$a.$fs.none" | median)
		c0=$(awk '{ print $2 }' "$W/r.$a.$fs.none" | median)
		for p in $PROTOS; do
			w=$(awk '{ print $1 }' "$W/r.$a.$fs.$p" | median)
			c=$(awk '{ print $2 }' "$W/r.$a.$fs.$p" | median)
			n=$(awk '{ print $3 }' "$W/r.$a.$fs.$p" | median)
			if [ "$w" = - ]; then
				printf "%-5s %-11s %-6s %s\n" $a $p $fs "did not end"
				echo "$a,$p,$fs,-,-,-,-,-,-" >>"$CSV"
				continue
			fi
			read -r rw rc ov < <(awk -v w="$w" -v c="$c" -v w0="$w0" -v c0="$c0" \
				'BEGIN { printf "%.3f %.2f %.2f\n", w / w0, c / c0, 100 * (c - c0) / w0 }')
			printf "%-5s %-11s %-6s %8s %8s %8s %10s %10s %10s\n" $a $p $fs \
				"$n" "$w" "$c" "$rw" "$rc" "$ov"
			echo "$a,$p,$fs,$n,$w,$c,$rw,$rc,$ov" >>"$CSV"
		done
	done
done
[ $CHECK = 1 ] && echo "apps.sh: $APPS: the same files under $PROTOS"
exit 0
