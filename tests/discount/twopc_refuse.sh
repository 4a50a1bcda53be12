#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# twopc_refuse.sh -- bad settings of the 2PC protocols are refused by
# dc_init with a clear code and message, and leave no checkpoint behind.
#
# With STATE (dc-2pc-state): a directory whose state record has format
# 1 (it named a full copy in 2pc-held) is refused with DC_EVERSION's
# message, the record left as it was.
#
#   twopc_refuse.sh NBODY COORD [STATE]
set -u
NBODY=$1 COORD=$2 STATE=${3:-}
T=$(mktemp -d /dev/shm/dc-2pc-refuse.XXXXXX)
CP=
trap '[ -n "$CP" ] && kill $CP; wait 2>/dev/null; rm -rf "$T"' EXIT
PORT=$(( 20000 + ($$ * 13) % 12000 ))
bad=0
# expect NAME TEXT ENV...: nbody rank 0 exits 1, stderr has TEXT, no DIR
expect() {
	local name=$1 text=$2; shift 2
	local d="$T/$name"
	env NBODY_PROTOCOL=cpv-2pc DC_DIR="$d" "$@" \
		"$NBODY" 0 4 $PORT 8 1 1 >/dev/null 2>"$T/err"
	local rc=$?
	if [ $rc != 1 ] || ! grep -qF -- "$text" "$T/err" || [ -e "$d/ctl" ]; then
		echo "twopc_refuse: $name: status $rc, wanted 1 and '$text':" >&2
		cat "$T/err" >&2
		bad=1
	fi
}
expect no-coord "DC_2PC_COORD (host:port of dc-coord) and DC_2PC_ID" \
	DC_2PC_ID=0
expect no-id "must be set" DC_2PC_COORD=127.0.0.1:$((PORT + 9))
expect no-port "want host:port and 0..1023" DC_2PC_COORD=127.0.0.1 DC_2PC_ID=0
expect port-0 "want host:port" DC_2PC_COORD=127.0.0.1:0 DC_2PC_ID=0
expect bad-id "want host:port and 0..1023" DC_2PC_COORD=127.0.0.1:$((PORT + 9)) \
	DC_2PC_ID=x
expect host "is not an IPv4 address" DC_2PC_COORD=localhost:$((PORT + 9)) \
	DC_2PC_ID=0
expect undo "tracking \"undo\"" DC_2PC_COORD=127.0.0.1:$((PORT + 9)) \
	DC_2PC_ID=0 DC_TRACKING=undo
if [ -n "$STATE" ]; then
	mkdir -p "$T/old-state"
	"$STATE" "$T/old-state" 1 || bad=1
	cp "$T/old-state/2pc-state" "$T/old-record"
	expect old-state "state record format 1, this libdc reads format 2" \
		DC_2PC_COORD=127.0.0.1:$((PORT + 9)) DC_2PC_ID=0
	cmp -s "$T/old-state/2pc-state" "$T/old-record" ||
		{ echo "twopc_refuse: the format 1 record was changed" >&2; bad=1; }
fi
"$COORD" --port $((PORT + 9)) --parts 4 --dir "$T/coord" 2>/dev/null &
CP=$!
sleep 0.3
expect id-range "the coordinator refused participant 7 (4 participants)" \
	DC_2PC_COORD=127.0.0.1:$((PORT + 9)) DC_2PC_ID=7
# the coordinator's own arguments
for args in "--parts 4" "--port 1 --parts 0" "--port 70000 --parts 4" \
	"--port 1 --parts 65"; do
	"$COORD" $args 2>/dev/null
	[ $? = 2 ] || { echo "twopc_refuse: dc-coord $args not refused" >&2; bad=1; }
done
exit $bad
