#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# keeper_life.sh -- dc-keeper ends with its run, and never while a
# recovery may need it (dc-keeper.c K6), under dc-run --protocol
# buffered with DC_KEEPER_LINGER=60:
#   1. a program that makes no connection runs to its end: its keeper is
#      gone within 3 s;
#   2. dc-run whose program cannot be run (exec fails): the same;
#   3. the TCP echo server answers a client and is SIGKILLed: the keeper
#      is still there 1 s later; the same command recovers the server,
#      whose new dc-run's keeper names its run to the first one and
#      leaves (the first one is the only keeper); the client's connection
#      is answered again; a quit request ends the server (exit 0) and the
#      keeper is gone within 3 s;
#   4. the server SIGKILLed again, then dc-run --discard: the keeper is
#      gone within 3 s;
#   5. a keeper SIGKILLed under the running server once it is idle, its
#      client gone and nothing left to commit (keeper.c invariant 4):
#      the server ends by itself as at a crash (SIGKILL) within 3 s,
#      saying why; the same command recovers it with a new keeper, and
#      the client, on a new connection, finds its committed request in
#      effect (the next one is answered with count 2).
#
#   keeper_life.sh DC_RUN DC_TCP_ECHO PYTHON3
#
# $KEEPER_EXPECT=fail ($DC_KEEPER_BIN a broken keeper): the test passes
# when it fails with one of the |-separated words of $KEEPER_CAUGHT.
#
# Exit: 0 pass, 1 fail, 2 usage.
set -u
[ $# = 3 ] || { echo "usage: $0 DC_RUN DC_TCP_ECHO PYTHON3" >&2; exit 2; }
DCRUN=$1 ECHO=$2 PY=$3
D=$(mktemp -d /dev/shm/dc-keeper-life-XXXXXX)
S= C=
# at the end, the keepers this test started that are left (a broken one)
trap '[ -n "$S" ] && kill -9 $S 2>/dev/null; [ -n "$C" ] && kill $C 2>/dev/null
	for k in $(pgrep -f -- "dc-keeper[-a-z]* --dir $D/"); do kill $k; done
	rm -rf "$D"' EXIT
export DC_KEEPER_LINGER=60
fail() {
	if [ "${KEEPER_EXPECT:-}" = fail ]; then
		echo "$*" | grep -Eq "${KEEPER_CAUGHT:-.}" &&
			{ echo "keeper-life: caught: $*"; exit 0; }
		echo "keeper-life: failed otherwise than expected: $*" >&2
		exit 1
	fi
	echo "keeper-life: FAIL: $*" >&2
	cat "$D/err" 2>/dev/null >&2
	exit 1
}
keepers() { pgrep -f -- "dc-keeper[-a-z]* --dir $1 " | sort; }
# DIR PIDS: the keepers there come to be exactly PIDS within 3 s (a
# process that dc-run starts and that ends at once, on finding the keeper
# alive, may be seen for a moment; bounded: 30 looks)
keepers_settle() {
	local i
	for i in $(seq 30); do
		[ "$(keepers "$1")" = "$2" ] && return 0
		sleep 0.1
	done
	return 1
}
gone_within() { # DIR SECONDS: the keepers there now all end
	local t=0 k left
	local ks
	ks=$(keepers "$1")
	while :; do
		left=
		for k in $ks; do kill -0 "$k" 2>/dev/null && left=1; done
		[ -z "$left" ] && return 0
		[ $t -ge $(($2 * 10)) ] && return 1
		sleep 0.1
		t=$((t + 1))
	done
}

# 1, 2
"$DCRUN" --dir "$D/c1" --protocol buffered --interval 20 -- true ||
	fail "true under dc-run"
gone_within "$D/c1" 3 || fail "the keeper outlived a run without connections"
"$DCRUN" --dir "$D/c2" --protocol buffered --interval 20 -- "$D/none" \
	2>/dev/null && fail "a missing program ran"
gone_within "$D/c2" 3 || fail "the keeper outlived dc-run's failed exec"

# 3: a client over the recovery; its requests on stdin (one word each:
# ask, quit, new: a new connection, again: a new connection, the same
# sequence, drop: hang up), its answers on stdout, through fifos
PORT=$((20000 + $$ % 12000))
run() { "$DCRUN" --dir "$D/c3" --protocol buffered --interval 20 -- \
	"$ECHO" $PORT epoll 2>>"$D/err" & S=$!; }
mkfifo "$D/in" "$D/out"
cat >"$D/cl.py" <<'EOP'
import sys
from te_client import dial, req, TE_QUIT
port = int(sys.argv[1])
a, seq = dial(port), 0
for line in sys.stdin:
    if line.strip() in ('new', 'again'):
        a, seq = dial(port), seq if line.strip() == 'again' else 0
    elif line.strip() == 'drop':
        a.close()
    elif line.strip() == 'ask':
        print(req(a, 1, seq), flush=True)
        seq += 1
    else:
        print(req(dial(port), TE_QUIT, 0), flush=True)
EOP
run
PYTHONPATH=$(dirname "$0") "$PY" "$D/cl.py" "$PORT" <"$D/in" >"$D/out" &
C=$!
exec 3>"$D/in" 4<"$D/out"
echo ask >&3
read -r -t 20 r <&4 && [ "$r" = 1 ] || fail "first answer: '${r:-}'"
K=$(keepers "$D/c3")
[ -n "$K" ] || fail "no keeper for the server"
kill -9 $S
wait $S 2>/dev/null
sleep 1
[ "$(keepers "$D/c3")" = "$K" ] ||
	fail "the keeper ended with a connection a recovery needs"
run
echo ask >&3
read -r -t 20 r <&4 && [ "$r" = 2 ] ||
	fail "answer after the recovery: '${r:-}'"
keepers_settle "$D/c3" "$K" ||
	fail "keepers after the recovery: '$(keepers "$D/c3")', not $K"
echo quit >&3
read -r -t 20 r <&4 || fail "no answer to the quit request"
wait $S || fail "the server did not exit 0 at quit"
S=
gone_within "$D/c3" 3 || fail "the keeper outlived the server's exit"

# 4
run
printf 'new\nask\n' >&3
read -r -t 20 r <&4 && [ "$r" = 1 ] || fail "a fresh run's answer: '${r:-}'"
K=$(keepers "$D/c3")
kill -9 $S
wait $S 2>/dev/null
S=
sleep 0.3
[ "$(keepers "$D/c3")" = "$K" ] || fail "the keeper ended at the kill"
"$DCRUN" --dir "$D/c3" --discard -- "$ECHO" || fail "dc-run --discard"
gone_within "$D/c3" 3 || fail "the keeper outlived dc-run --discard"

# 5
run
printf 'new\nask\n' >&3
read -r -t 20 r <&4 && [ "$r" = 1 ] || fail "a fresh run's answer: '${r:-}'"
# the answer got out after the commit that holds it: in effect.  The
# client hangs up, and the keeper dies once the server has closed its
# end and committed that: the server waits with nothing to commit, so
# only a tick can find the keeper gone
K=$(keepers "$D/c3")
echo drop >&3
sleep 0.5
kill -9 $K
t=0
while kill -0 $S 2>/dev/null && [ $t -lt 30 ]; do
	sleep 0.1
	t=$((t + 1))
done
kill -0 $S 2>/dev/null && fail "the server did not end when its keeper died"
wait $S
st=$?
S=
[ $st = 137 ] || fail "the server ended with status $st, not as at a crash"
grep -q "dc-keeper is gone" "$D/err" || fail "the keeper's loss was not said"
run
printf 'again\nask\n' >&3
read -r -t 20 r <&4 && [ "$r" = 2 ] ||
	fail "after the recovery, the next request's count: '${r:-}'"
echo quit >&3
read -r -t 20 r <&4 || fail "no answer to the quit request"
wait $S || fail "the server did not exit 0 at quit"
S=
gone_within "$D/c3" 3 || fail "the new keeper outlived the server's exit"

exec 3>&-
[ "${KEEPER_EXPECT:-}" = fail ] &&
	{ echo "keeper-life: the broken keeper was not caught" >&2; exit 1; }
echo "keeper-life: ok: the keeper ended with each run, lived through a" \
	"crash until the recovery; its own crash ended the run, recovered"
