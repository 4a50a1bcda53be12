#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# crash.sh -- SIGKILL campaign on a replicated debit-credit
#
#   crash.sh TOOL VR_DC ITERATIONS EXPECT MODES SCENARIOS
#
# Each iteration: a fresh primary (vr_dc) and backup (vista-replica
# follow --auto-promote) over loopback; the primary runs debit-credit and
# logs every acknowledged transaction; after a random 20-300 ms:
#   primary  SIGKILL the primary; the backup promotes itself;
#   both     SIGKILL the backup, then the primary; promote the backup by
#            command (vista-replica promote).
# Then vr_dc check on the backup's files: the TPC-B invariants; for
# 2safe every acknowledged transaction present; for 1safe at most the
# loss window the tool reported after the promotion missing
# (within_window).  MODES and SCENARIOS are comma lists, taken in turn.  EXPECT=pass: every iteration must pass;
# EXPECT=caught: a broken build, some iteration must fail the check.
set -u
TOOL=$1 DC=$2 N=$3 EXPECT=$4
IFS=, read -r -a MODES <<< "$5"
IFS=, read -r -a SCEN <<< "$6"
SIZE=8388608
T=$(mktemp -d /dev/shm/vrcrash-XXXXXX)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$T"' EXIT
fails=0 kills=0 skipped=0

. "$(dirname "$0")/window.sh"
for ((i = 0; i < N; i++)); do
	mode=${MODES[$((i % ${#MODES[@]}))]}
	scen=${SCEN[$(((i / ${#MODES[@]}) % ${#SCEN[@]}))]}
	P=$T/p$i B=$T/b$i
	mkdir -p "$P" "$B"
	"$DC" primary "$P" 0 "$mode" "$P.ack" $((i + 1)) > "$P.out" 2>&1 &
	pp=$!
	port=
	for ((w = 0; w < 500; w++)); do
		port=$(sed -n 's/^port //p' "$P.out" 2>/dev/null)
		[ -n "$port" ] && break
		sleep 0.01
	done
	if [ -z "$port" ]; then
		echo "iteration $i: the primary did not start"; cat "$P.out"
		exit 1
	fi
	"$TOOL" follow --dir "$B" --size $SIZE --peer 127.0.0.1:$port \
		--auto-promote --timeout 1000 > "$B.out" 2>&1 &
	bp=$!
	for ((w = 0; w < 1500; w++)); do
		grep -q serving "$P.out" && break
		sleep 0.01
	done
	if ! grep -q serving "$P.out"; then
		# The pair never came up (a loaded machine can starve the
		# full copy past the timeout): not a crash outcome.
		echo "iteration $i: setup failed, skipped: $(tail -1 "$P.out")"
		kill -9 $pp $bp 2>/dev/null; wait $pp $bp 2>/dev/null
		skipped=$((skipped + 1))
		rm -rf "$P" "$B"
		continue
	fi
	sleep "0.$(printf '%03d' $((20 + RANDOM % 280)))"
	if [ "$scen" = both ]; then
		kill -9 $bp 2>/dev/null; wait $bp 2>/dev/null
		sleep 0.02
		kill -9 $pp; wait $pp 2>/dev/null
		kills=$((kills + 2))
		"$TOOL" promote --dir "$B" --size $SIZE >> "$B.out" 2>&1
	else
		kill -9 $pp; wait $pp 2>/dev/null
		kills=$((kills + 1))
		wait $bp
		grep -q promoted "$B.out" || {
			echo "iteration $i: the backup did not promote"
			cat "$B.out"; exit 1; }
	fi
	win=$(sed -n 's/.*loss window \([0-9]*\).*/\1/p' "$B.out" | tail -1)
	if out=$("$DC" check "$B" "$P.ack" "$mode" 2>&1) &&
	    out="$out${win:+; reported loss window $win}" &&
	    out="$out$(within_window "$mode" "$out" "$win")"; then
		echo "iteration $i ($mode, $scen): ok: $out"
	else
		echo "iteration $i ($mode, $scen): FAILED: $out"
		fails=$((fails + 1))
		[ "$EXPECT" = caught ] && break
	fi
	rm -rf "$P" "$B"
done
echo "$kills kills, $fails failed, $skipped skipped"
if [ $skipped -gt $((N / 10)) ]; then
	echo "too many iterations could not set up"; exit 1
fi
if [ "$EXPECT" = caught ]; then
	[ $fails -gt 0 ] && { echo "broken build caught"; exit 0; }
	echo "broken build NOT caught"; exit 1
fi
[ $fails -eq 0 ]
