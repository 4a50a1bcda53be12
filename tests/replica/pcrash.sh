#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# pcrash.sh -- SIGKILL campaign on debit-credit with a passive backup
#
#   pcrash.sh TOOL VR_DC ITERATIONS EXPECT MODES SCENARIOS [KIND]
#
# Each iteration: a fresh primary (vr_dc pprimary: libvista's log and
# segment pools replicated by vr_passive) and a passive backup
# (vista-replica passive-follow) over loopback; the primary runs
# debit-credit and logs every acknowledged transaction; after a random
# 20-300 ms:
#   primary  SIGKILL the primary; the backup promotes itself;
#   backup   SIGKILL the backup alone; the primary goes on without it; a
#            new backup process rejoins on the same files (by the
#            primary's log tail, or a full copy if the tail is gone);
#            then SIGKILL the primary; the backup promotes itself;
#   both     SIGKILL the backup, then the primary; promote the backup by
#            command (vista-replica passive-promote);
#   rejoin   SIGKILL the backup; a new backup process rejoins; SIGKILL it
#            again 0-30 ms after its rejoin line (inside the tail's
#            catch-up), then the primary; promote by command (a full copy
#            cut short is refused, VR_EINCOMPLETE: nothing to check).
# Then vr_dc pcheck on the backup's copies (libvista's recovery runs when
# it opens them): the TPC-B invariants; for 2safe every acknowledged
# transaction present; for 1safe at most the loss window the tool reported
# after the promotion missing (within_window).  A backup that fails to
# rejoin or to promote fails its iteration.  A passive campaign with the
# `backup` scenario must rejoin by the log tail at least once.  MODES and
# SCENARIOS are comma lists, taken in turn.  EXPECT=pass: every iteration
# must pass; EXPECT=caught: a broken build, some iteration must fail.  KIND=active runs the same
# scenarios on the active backup (vr_dc primary/check, vista-replica
# follow/promote; a rejoining backup may resume from the ring's tail, so
# it is given up to 0.5 s, not a progress line); crash.sh has the active
# campaign's other scenarios.
set -u
TOOL=$1 DC=$2 N=$3 EXPECT=$4 KIND=${7:-passive}
# The passive backup refuses the byte domain: cacheline unless told.
export RIO_DOMAIN=${RIO_DOMAIN:-cacheline}
SIZE=8388608
if [ "$KIND" = active ]; then
	PRI=primary CHK=check FOLLOW=follow PROMOTE=promote SZ="--size $SIZE"
else
	PRI=pprimary CHK=pcheck FOLLOW=passive-follow PROMOTE=passive-promote SZ=
fi
IFS=, read -r -a MODES <<< "$5"
IFS=, read -r -a SCEN <<< "$6"
T=$(mktemp -d /dev/shm/vrpcrash-XXXXXX)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
fails=0 kills=0 skipped=0

. "$(dirname "$0")/window.sh"
tails=0 rejoins=0

# wait_for FILE PATTERN TRIES: 0 once PATTERN is in FILE.
wait_for() {
	for ((w = 0; w < $3; w++)); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		sleep 0.01
	done
	return 1
}

follow() { # DIR PORT OUT
	"$TOOL" $FOLLOW --dir "$1" $SZ --peer 127.0.0.1:$2 \
		--auto-promote --timeout 1000 >> "$3" 2>&1 &
	bp=$!
}

# SIGKILL the backup, start a new backup process on its files and wait for
# its rejoin line.  1: it did not rejoin (the iteration failed).
rejoin_backup() {
	kill -9 $bp 2>/dev/null; wait $bp 2>/dev/null
	kills=$((kills + 1))
	sleep "0.$(printf '%03d' $((20 + RANDOM % 100)))"
	: > "$B.out2"
	follow "$B" "$port" "$B.out2"
	if [ "$KIND" = active ]; then
		wait_for "$B.out2" '100%' 50
		return 0
	fi
	if ! wait_for "$B.out2" '100%\|log tail' 1500; then
		echo "iteration $i ($mode, $scen): FAILED: the backup did not rejoin: $(tail -2 "$B.out2")"
		fails=$((fails + 1))
		kill -9 $pp $bp 2>/dev/null; wait $pp $bp 2>/dev/null
		return 1
	fi
	rejoins=$((rejoins + 1))
	grep -q 'log tail' "$B.out2" && tails=$((tails + 1))
	return 0
}

for ((i = 0; i < N; i++)); do
	mode=${MODES[$((i % ${#MODES[@]}))]}
	scen=${SCEN[$(((i / ${#MODES[@]}) % ${#SCEN[@]}))]}
	P=$T/p$i B=$T/b$i
	mkdir -p "$P" "$B"
	"$DC" $PRI "$P" 0 "$mode" "$P.ack" $((i + 1)) > "$P.out" 2>&1 &
	pp=$!
	if ! wait_for "$P.out" '^port ' 500; then
		echo "iteration $i: the primary did not start"; cat "$P.out"
		exit 1
	fi
	port=$(sed -n 's/^port //p' "$P.out")
	follow "$B" "$port" "$B.out"
	if ! wait_for "$P.out" serving 1500; then
		# The pair never came up (a loaded machine can starve the
		# full copy past the timeout): not a crash outcome.
		echo "iteration $i: setup failed, skipped: $(tail -1 "$P.out")"
		kill -9 $pp $bp 2>/dev/null; wait $pp $bp 2>/dev/null
		skipped=$((skipped + 1))
		rm -rf "$P" "$B" "$P.ack"
		continue
	fi
	sleep "0.$(printf '%03d' $((20 + RANDOM % 280)))"
	case $scen in
	rejoin)
		if ! rejoin_backup; then
			[ "$EXPECT" = caught ] && break
			continue
		fi
		sleep "0.0$(printf '%02d' $((RANDOM % 30)))"
		kill -9 $bp 2>/dev/null; wait $bp 2>/dev/null
		kill -9 $pp; wait $pp 2>/dev/null
		kills=$((kills + 2))
		cat "$B.out2" >> "$B.out"
		"$TOOL" $PROMOTE --dir "$B" $SZ >> "$B.out" 2>&1
		if grep -q VR_EINCOMPLETE "$B.out"; then
			echo "iteration $i ($mode, $scen): ok: the full copy was cut short, promotion refused"
			rm -rf "$P" "$B" "$P.ack"
			continue
		fi
		;;
	both)
		kill -9 $bp 2>/dev/null; wait $bp 2>/dev/null
		sleep 0.02
		kill -9 $pp; wait $pp 2>/dev/null
		kills=$((kills + 2))
		"$TOOL" $PROMOTE --dir "$B" $SZ >> "$B.out" 2>&1
		;;
	backup)
		if ! rejoin_backup; then
			[ "$EXPECT" = caught ] && break
			continue
		fi
		sleep "0.$(printf '%03d' $((20 + RANDOM % 200)))"
		kill -9 $pp; wait $pp 2>/dev/null
		kills=$((kills + 1))
		wait $bp
		cat "$B.out2" >> "$B.out"
		grep -q promoted "$B.out" || {
			echo "iteration $i ($mode, $scen): FAILED: the backup did not promote: $(tail -2 "$B.out")"
			fails=$((fails + 1))
			[ "$EXPECT" = caught ] && break
			continue; }
		;;
	*)
		kill -9 $pp; wait $pp 2>/dev/null
		kills=$((kills + 1))
		wait $bp
		grep -q promoted "$B.out" || {
			echo "iteration $i: the backup did not promote"
			cat "$B.out"; exit 1; }
		;;
	esac
	win=$(sed -n 's/.*loss window \([0-9]*\).*/\1/p' "$B.out" | tail -1)
	if out=$("$DC" $CHK "$B" "$P.ack" "$mode" 2>&1) &&
	    out="$out${win:+; reported loss window $win}" &&
	    out="$out$(within_window "$mode" "$out" "$win")"; then
		echo "iteration $i ($mode, $scen): ok: $out"
	else
		echo "iteration $i ($mode, $scen): FAILED: $out"
		fails=$((fails + 1))
		[ "$EXPECT" = caught ] && break
	fi
	rm -rf "$P" "$B" "$P.ack"
done
echo "$kills kills, $fails failed, $skipped skipped, $tails of $rejoins rejoins by the log tail"
if [ $skipped -gt $((N / 10)) ]; then
	echo "too many iterations could not set up"; exit 1
fi
if [ "$EXPECT" = caught ]; then
	[ $fails -gt 0 ] && { echo "broken build caught"; exit 0; }
	echo "broken build NOT caught"; exit 1
fi
if [ "$KIND" = passive ] && [ $rejoins -gt 0 ] && [ $tails -eq 0 ]; then
	echo "no rejoin by the log tail"; exit 1
fi
[ $fails -eq 0 ]
