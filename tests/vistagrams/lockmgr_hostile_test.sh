#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# lockmgr_hostile_test.sh -- the lock server survives clients that send
# what it does not understand (lm_probe: empty, short, 9- and 64-byte,
# unknown operation, lock out of range, non-Vistagrams datagrams): each is
# refused with a reply, the server keeps running, and then serves a genuine
# client exactly as before.
#
#   lockmgr_hostile_test.sh SERVER CLIENT PROBE
set -u
SERVER=$1 CLIENT=$2 PROBE=$3
TIMES=5
dir=$(mktemp -d /dev/shm/vg-lmhostile-XXXXXX)
spid=
cleanup() {
	[ -n "$spid" ] && kill -9 "$spid" 2>/dev/null
	rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/s" "$dir/c"

"$SERVER" "$dir/s" 0 >"$dir/server.out" 2>"$dir/server.err" &
spid=$!
for _ in $(seq 750); do # up to 15 s on a loaded machine
	grep -q "listening" "$dir/server.out" 2>/dev/null && break
	kill -0 "$spid" 2>/dev/null || break
	sleep 0.02
done
port=$(sed -n 's/listening on port //p' "$dir/server.out")
[ -n "$port" ] || { echo "server did not start:"; cat "$dir/server.err"; exit 1; }

rc=0
timeout 30 "$PROBE" "$port" || { echo "FAIL: the probe's requests were not all refused"; rc=1; }
if ! kill -0 "$spid" 2>/dev/null; then
	echo "FAIL: the server died:"; cat "$dir/server.err"; exit 1
fi
grep -c "refused request" "$dir/server.err" | sed 's/^/server log lines: /'

timeout 60 "$CLIENT" "$dir/c" 11 "$port" "$TIMES" "$dir/holder" \
	>"$dir/c.out" 2>"$dir/c.err" || { echo "FAIL: genuine client:"; cat "$dir/c.err"; rc=1; }
kill -TERM "$spid"
wait "$spid"; code=$?
spid=
cat "$dir/c.out" "$dir/server.out"
[ "$code" -eq 0 ] || { echo "FAIL: server exit $code"; rc=1; }
want="grants $TIMES releases $TIMES holder 0 refused 6"
grep -q "^$want\$" "$dir/server.out" || { echo "FAIL: server: want '$want'"; rc=1; }
exit $rc
