#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# campaign.sh -- unmodified programs SIGKILLed at random points under
#                Discount Checking, recovered, and judged
#
#   bench/discount/campaign.sh [-n KILLS] [-p PROGRAMS] [-P PROTOCOLS]
#       [-t TRACKING] [-b BUILD_DIR] [-s SEED] [-o CSV] [--quick]
#
# For each program (-p, comma-separated; default bc, lua5.4, ed, gawk,
# python3, sqlite3, sc), dirty tracking (-t, comma-separated: uffd, wp,
# undo; default: dc-run's, uffd) and protocol (-P; default cbndvs,cpvs):
#
# 1. reference: the program under dc-run, not killed, fed its input
#    script (bench/discount/campaign/) through a pipe, its output and
#    errors into a pipe, in an empty working directory; its visible
#    events (dc-run --events), exit status and the files it leaves.  The
#    same program without dc-run must leave the same output and files.
# 2. kills: the same command in a fresh directory, SIGKILLed after a
#    random time (uniform, 20 ms .. max(300 ms, 3 x reference time /
#    max(KILLS, 10))), then run again -- recovery -- fed the script
#    from the byte its checkpoint had consumed (dc-run --status:
#    input_bytes; from the start when there is no checkpoint yet; the
#    progress line names the checkpoint's generation), until KILLS kills
#    have happened; then it runs to its end.  A program that ends before its
#    kills are used up starts a new round, from scratch.  A kill that
#    lands after the exiting program removed its checkpoint ends the
#    round: the program had finished.
# 3. each round is judged against the reference: completed (the last run
#    exits with the reference's status, 0), equivalent at event level
#    (dc-equiv --events: the reference's events, except for duplicates of
#    events observed earlier) and files identical (the same names in the
#    working directory, each equal by cmp; "-" for a program that saves
#    none).
#
# The programs and what they compute (a few seconds each):
#   bc       bc -q: 40 lines, each sum(sqrt(1..300)) at scale 60
#   lua5.4   lua5.4 - (the script on standard input): 40 modular loops,
#            a line each on standard output and into out.txt
#   ed       ed -s: 40 lines doubled 9 times, then 20 global
#            substitutions, each printing lines and saving out.txt
#   gawk     gawk -f campaign/gawk.awk: 40 input numbers, a modular loop
#            each, a line on standard output and into out.txt
#   python3  python3 - (the script on standard input): 40 modular loops,
#            a line each on standard output and into out.txt
#   sqlite3  sqlite3 db.sqlite: 50000 rows, then 15 rounds of an update, a
#            query, an index created and dropped (rollback journal)
#   sc       sc -q (non-interactive: commands from standard input, no
#            curses): 4000 rows of formulas, each row's @sum over the
#            column above; recalc, put "out.sc" and write "values.txt"
#            every 200 rows
# Progress (one line per kill) on standard error; the table on standard
# output, and as CSV in bench/results/discount_campaign.csv (-o CSV;
# --quick writes none unless -o is given).  A failing round is kept
# under /dev/shm/dc-campaign-keep-* (input offsets and kill times in
# trace.txt) and named on standard error.  Exit 1 when a round failed,
# 77 when a program is not installed.
# --quick: 3 kills, bc and lua5.4 (a smoke run).
set -euo pipefail
cd "$(dirname "$0")/../.."
SRC=$(pwd)
KILLS=20 PROGRAMS=bc,lua5.4,ed,gawk,python3,sqlite3,sc PROTOCOLS=cbndvs,cpvs
TRACKING= B=build SEED=1 CSV= QUICK=0
usage() {
	sed -n '7,8p' "$0" | sed 's/^# *//' >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	-n) KILLS=$2; shift 2 ;;
	-p) PROGRAMS=$2; shift 2 ;;
	-P) PROTOCOLS=$2; shift 2 ;;
	-t) TRACKING=$2; shift 2 ;;
	-b) B=$2; shift 2 ;;
	-s) SEED=$2; shift 2 ;;
	-o) CSV=$2; shift 2 ;;
	--quick) QUICK=1; shift ;;
	*) usage ;;
	esac
done
case $KILLS in ''|*[!0-9]*) usage ;; esac
if [ $QUICK = 1 ]; then
	KILLS=3 PROGRAMS=bc,lua5.4
elif [ -z "$CSV" ]; then
	CSV=bench/results/discount_campaign.csv
fi
B=$(cd "$B" && pwd)
DCRUN=$B/discount/dc-run
DCEQUIV=$B/discount/dc-equiv
for f in "$DCRUN" "$DCEQUIV" "$B/discount/libdc.so"; do
	[ -e "$f" ] || { echo "campaign.sh: $f missing (ninja -C $B)" >&2; exit 2; }
done
IN_DIR=$SRC/bench/discount/campaign
W=$(mktemp -d /dev/shm/dc-campaign-XXXXXX)
trap 'rm -rf "$W"' EXIT
RANDOM=$SEED
# the same environment in every run (python3: no hash randomisation,
# no bytecode files written next to nothing)
export PYTHONHASHSEED=0 PYTHONDONTWRITEBYTECODE=1 LC_ALL=C

# prog NAME: CMD (the command), IN (its input script)
prog() {
	case $1 in
	bc) CMD=(bc -q) IN=bc.in ;;
	lua5.4) CMD=(lua5.4 -) IN=lua.lua ;;
	ed) CMD=(ed -s) IN=ed.in ;;
	gawk) CMD=(gawk -f "$IN_DIR/gawk.awk") IN=gawk.in ;;
	# the interpreter itself (dc-run refuses exec: no wrapper script)
	python3) CMD=("$(readlink -f /usr/bin/python3)" -) IN=python.py ;;
	sqlite3) CMD=(sqlite3 db.sqlite) IN=sqlite.sql ;;
	sc) CMD=(sc -q) IN=sc.in ;;
	*) echo "campaign.sh: unknown program $1" >&2; exit 2 ;;
	esac
	IN=$IN_DIR/$IN
	# 77: skipped (meson test), the program is not installed
	command -v "${CMD[0]}" >/dev/null ||
		{ echo "campaign.sh: ${CMD[0]} not installed" >&2; exit 77; }
}

now() { date +%s.%N; }
elapsed() { python3 -c "print('%.3f' % ($(now) - $1))"; }

# start DIR OFFSET CMD...: CMD in DIR/work, fed the input script from
# byte OFFSET, output and errors appended to DIR/out through a pipe; its
# process id in DIR/pid, its exit status in DIR/rc when it ends
start() {
	local d=$1 off=$2
	shift 2
	rm -f "$d/pid" "$d/rc"
	(
		set +e +o pipefail
		cd "$d/work"
		tail -c +$((off + 1)) "$IN" 2>/dev/null |
			sh -c 'echo $$ >"$0.tmp"; mv "$0.tmp" "$0"; exec "$@"' \
				"$d/pid" "$@" 2>&1 | cat >>"$d/out"
		echo "${PIPESTATUS[1]}" >"$d/rc.tmp"
		mv "$d/rc.tmp" "$d/rc"
	) &
	BG=$!
}
# finish DIR MS: wait up to MS milliseconds for the run of start to end;
# 0 when it did
finish() {
	local i
	for ((i = 0; i < $2 / 10; i++)); do
		[ -e "$1/rc" ] && { wait "$BG" || true; return 0; }
		sleep 0.01
	done
	return 1
}
# dc ARGS...: dc-run on the program (the checkpoint in $CK)
dcargs() {
	DC=("$DCRUN" --dir "$CK" --protocol "$proto")
	[ -n "$tracking" ] && DC+=(--tracking "$tracking")
	DC+=(--events "$1" --)
	DC+=("${CMD[@]}")
}
has_ckpt() { "$DCRUN" --status --dir "$CK" -- "${CMD[@]}" >/dev/null 2>&1; }
# resume_point: the checkpoint the next run resumes: its generation GEN
# and the standard-input bytes it had consumed OFF (0 0 without one)
resume_point() {
	local s
	s=$("$DCRUN" --status --dir "$CK" -- "${CMD[@]}" 2>/dev/null) || s=
	OFF=$(sed -n 's/^input_bytes=//p' <<<"$s")
	GEN=$(sed -n 's/^generation=//p' <<<"$s")
	OFF=${OFF:-0} GEN=${GEN:-0}
}
# same_files A B: the same names in the two directories, equal by cmp
same_files() {
	[ "$(ls -A "$1")" = "$(ls -A "$2")" ] || return 1
	local f
	for f in $(ls -A "$1"); do
		cmp -s "$1/$f" "$2/$f" || return 1
	done
}

ROWS=()
FAIL=0
IFS=, read -ra PLIST <<<"$PROGRAMS"
IFS=, read -ra QLIST <<<"$PROTOCOLS"
IFS=, read -ra TLIST <<<"$TRACKING"
[ ${#TLIST[@]} = 0 ] && TLIST=("")
COMBOS=()
for t in "${TLIST[@]}"; do
	for q in "${QLIST[@]}"; do COMBOS+=("$q/$t"); done
done
for name in "${PLIST[@]}"; do
	prog "$name"
	# the program alone: its output and files
	P=$W/plain
	rm -rf "$P"; mkdir -p "$P/work"; : >"$P/out"
	start "$P" 0 "${CMD[@]}"
	finish "$P" 600000 || { kill -KILL "$(cat "$P/pid")"; wait "$BG" || true; }
	for combo in "${COMBOS[@]}"; do
		proto=${combo%%/*} tracking=${combo#*/}
		TR=${tracking:-uffd}
		label="$name $proto $TR"
		# the reference: under dc-run, not killed
		R=$W/ref
		rm -rf "$R"; mkdir -p "$R/work"; : >"$R/out"
		CK=$R/ck
		dcargs "$R/events"
		t0=$(now)
		start "$R" 0 "${DC[@]}"
		if ! finish "$R" 600000; then
			kill -KILL "$(cat "$R/pid")"; wait "$BG" || true
		fi
		tref=$(elapsed "$t0")
		rrc=$(cat "$R/rc" 2>/dev/null || echo timeout)
		echo "$label: reference $tref s, exit $rrc" >&2
		if [ "$rrc" != 0 ] || [ "$(cat "$P/rc")" != 0 ]; then
			echo "$label: the reference run failed (exit $rrc, without dc-run $(cat "$P/rc")):" >&2
			tail -5 "$R/out" >&2
			ROWS+=("$name,$proto,$TR,0,0,reference-failed,-,-")
			FAIL=1
			continue
		fi
		if ! cmp -s "$P/out" "$R/out" || ! same_files "$P/work" "$R/work"; then
			echo "$label: under dc-run, not killed, the output or files differ from the program's alone" >&2
			ROWS+=("$name,$proto,$TR,0,0,reference-differs,-,-")
			FAIL=1
			continue
		fi
		saves=1
		[ -z "$(ls -A "$R/work")" ] && saves=0
		# the longest time before a kill, in ms
		maxd=$(python3 -c "print(max(300, int(3000 * $tref / max($KILLS, 10))))")
		kills=0 rounds=0 ncomp=0 nequiv=0 nfiles=0 runs=0
		final_to=$(python3 -c "print(int(20000 * $tref) + 60000)")
		while { [ $kills -lt "$KILLS" ] || [ $rounds = 0 ]; } &&
			[ $runs -le $((4 * KILLS + 20)) ]; do
			rounds=$((rounds + 1))
			O=$W/obs
			rm -rf "$O"; mkdir -p "$O/work"; : >"$O/out"
			: >"$O/trace.txt"
			CK=$O/ck
			dcargs "$O/events"
			ended=0 rc=
			while [ $ended = 0 ]; do
				runs=$((runs + 1))
				if [ $runs -gt $((4 * KILLS + 20)) ]; then
					echo "$label: more than $((4 * KILLS + 20)) runs: stopped" >&2
					rc=too-many-runs
					break
				fi
				resume_point
				off=$OFF
				from="generation $GEN, input byte $OFF"
				start "$O" "$off" "${DC[@]}"
				ts=$(now)
				if [ $kills -ge "$KILLS" ]; then
					# the last run: to its end
					if finish "$O" "$final_to"; then
						rc=$(cat "$O/rc")
					else
						kill -KILL "$(cat "$O/pid")"
						wait "$BG" || true
						rc="timeout-${final_to}ms"
					fi
					echo "  run from $from to the end: exit $rc" >>"$O/trace.txt"
					break
				fi
				d=$((20 + RANDOM % (maxd - 20)))
				ds=$(printf '%d.%03d' $((d / 1000)) $((d % 1000)))
				if finish "$O" "$d"; then
					# ended before its kill
					rc=$(cat "$O/rc")
					echo "  run from $from ended before its kill at $ds s: exit $rc" >>"$O/trace.txt"
					break
				fi
				had=0
				has_ckpt && had=1
				for ((i = 0; i < 100; i++)); do
					[ -e "$O/pid" ] && break
					sleep 0.01
				done
				tk=$(now)
				kill -KILL "$(cat "$O/pid")" 2>/dev/null || true
				wait "$BG" || true
				ds=$(python3 -c "print('%.3f' % ($tk - $ts))")
				rc=$(cat "$O/rc" 2>/dev/null || echo 0)
				if [ "$rc" != 137 ]; then
					echo "  run from $from ended before its kill at $ds s: exit $rc" >>"$O/trace.txt"
					break
				fi
				kills=$((kills + 1))
				echo "  run from $from killed at $ds s" >>"$O/trace.txt"
				printf '%s: kill %d/%d at %s s (round %d, run from %s)\n' \
					"$label" $kills "$KILLS" "$ds" $rounds "$from" >&2
				if [ $had = 1 ] && ! has_ckpt; then
					# killed exiting, its checkpoint removed
					rc=0
					echo "  (killed while exiting: finished)" >>"$O/trace.txt"
					break
				fi
			done
			ok=1
			if [ "$rc" = 0 ]; then
				ncomp=$((ncomp + 1))
			else
				ok=0
			fi
			if "$DCEQUIV" --events "$R/events" "$O/events" >"$O/equiv.txt" 2>&1; then
				nequiv=$((nequiv + 1))
			else
				ok=0
			fi
			if same_files "$R/work" "$O/work"; then
				nfiles=$((nfiles + 1))
			else
				ok=0
			fi
			if [ $ok = 0 ]; then
				FAIL=1
				keep=/dev/shm/dc-campaign-keep-$name-$proto-$TR-$rounds-$$
				rm -rf "$keep"
				cp -a "$O" "$keep"
				cp -a "$R" "$keep/reference"
				printf '%s: round %d FAILED (exit %s); kept in %s:\n' \
					"$label" $rounds "$rc" "$keep" >&2
				sed 's/^/    /' "$O/trace.txt" "$O/equiv.txt" >&2
			fi
		done
		fcol=$nfiles/$rounds
		[ $saves = 0 ] && fcol=-
		ROWS+=("$name,$proto,$TR,$rounds,$kills,$ncomp/$rounds,$nequiv/$rounds,$fcol")
	done
done

HEAD="program,protocol,tracking,rounds,kills,completed,equivalent,files_identical"
FMT="%-8s %-8s %-8s %6s %5s %9s %18s %15s\n"
printf "$FMT" program protocol tracking rounds kills completed \
	"equivalent(events)" files_identical
for r in "${ROWS[@]}"; do
	IFS=, read -ra c <<<"$r"
	printf "$FMT" "${c[@]}"
done
if [ -n "$CSV" ]; then
	{ echo "$HEAD"; printf '%s\n' "${ROWS[@]}"; } >"$CSV"
fi
exit $FAIL
