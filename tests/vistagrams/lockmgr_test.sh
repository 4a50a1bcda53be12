#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# lockmgr_test.sh -- run the lock manager example (thesis Fig. 4.4): two
# clients contend for one lock; each is SIGKILLed and restarted a few times
# (often while PENDING), the server too; every client must finish, never
# two holders at once, and the server's grants must equal the clients'
# acquisitions (no grant lost or repeated).
#
#   lockmgr_test.sh SERVER CLIENT
set -u
SERVER=$1 CLIENT=$2
TIMES=${LOCKMGR_TIMES:-300}
dir=$(mktemp -d /dev/shm/vg-lockmgr-XXXXXX)
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	rm -rf "$dir"
}
trap cleanup EXIT
mkdir -p "$dir/s" "$dir/c1" "$dir/c2"
port=0
kills=0

start_server() {
	# The old server's "listening" line must not be read as the new one's:
	# the shell truncates server.out only once the child runs.
	rm -f "$dir/server.out"
	"$SERVER" "$dir/s" "$port" >"$dir/server.out" 2>"$dir/server.err" &
	spid=$!
	pids+=("$spid")
	local p=
	# Up to 15 s: its recovery shares the machine with the whole suite.
	for _ in $(seq 750); do
		p=$(sed -n 's/listening on port //p' "$dir/server.out" 2>/dev/null)
		[ -n "$p" ] && break
		kill -0 "$spid" 2>/dev/null || break
		sleep 0.02
	done
	if [ -z "$p" ]; then
		echo "server did not start:"; cat "$dir/server.out" "$dir/server.err"
		exit 1
	fi
	port=$p
}
start_client() { # N
	"$CLIENT" "$dir/c$1" "1$1" "$port" "$TIMES" "$dir/holder" \
		>>"$dir/c$1.out" 2>>"$dir/c$1.err" &
	eval "c$1=$!"
	pids+=("$!")
}

start_server
start_client 1
start_client 2
for round in $(seq 12); do
	sleep 0.0$((RANDOM % 5 + 1))
	victim=$((RANDOM % 3))
	case $victim in
	0) kill -9 "$spid"; wait "$spid" 2>/dev/null; start_server
	   kills=$((kills + 1)) ;;
	*) eval "p=\$c$victim"
	   if kill -9 "$p" 2>/dev/null; then
		wait "$p" 2>/dev/null
		start_client "$victim"
		kills=$((kills + 1))
	   fi ;;
	esac
done
echo "$kills kills"
[ "$kills" -ge 6 ] || { echo "too few kills landed"; exit 1; }
rc=0
for n in 1 2; do
	eval "p=\$c$n"
	for _ in $(seq 600); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$p" 2>/dev/null; then
		echo "client $n is stuck"; rc=1
	fi
	wait "$p"; code=$?
	if [ "$code" -ne 0 ] && [ "$code" -ne 137 ]; then
		echo "client $n failed ($code):"; cat "$dir/c$n.out" "$dir/c$n.err"
		rc=1
	fi
done
kill -TERM "$spid"; wait "$spid"
cat "$dir/c1.out" "$dir/c2.out" "$dir/server.out"
grep -q "node 11 acquired the lock $TIMES times" "$dir/c1.out" || rc=1
grep -q "node 12 acquired the lock $TIMES times" "$dir/c2.out" || rc=1
want="grants $((2 * TIMES)) releases $((2 * TIMES)) holder 0 refused 0"
grep -q "^$want\$" "$dir/server.out" || { echo "server: want '$want'"; rc=1; }
exit $rc
