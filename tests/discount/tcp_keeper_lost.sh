#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tcp_keeper_lost.sh DC_RUN DC_TCP_ECHO -- a keeper lost with the program:
# the echo server under dc-run --protocol buffered answers a client; the
# keeper and the server are SIGKILLed, the same command run again (a new
# keeper, a recovery).  The old client must see its connection end (the
# connection is gone with the keeper), with the reason said on stderr
# (by the recovery, or by the old server if it saw the keeper go first);
# a new client must be served on the same port (recovery bound and
# listened again through the new keeper).
set -u
D=$(mktemp -d /dev/shm/dc-tcp-lost-XXXXXX)
S=
trap '[ -n "$S" ] && kill -9 $S 2> /dev/null; rm -rf "$D"' EXIT
PORT=$((20000 + $$ % 12000))
export DC_KEEPER_LINGER=10
run() { "$1" --dir "$D/ck" --protocol buffered --interval 20 -- "$2" \
	$PORT epoll 2>> "$D/err" & S=$!; }
run "$1" "$2"
PYTHONPATH=$(dirname "$0") python3 - "$PORT" "$D" <<'EOP' &
import os, sys, time
from te_client import dial as dial_port, req
port, d = int(sys.argv[1]), sys.argv[2]
def dial():
    return dial_port(port)
a = dial()
r1 = req(a, 1, 0)
open(d + '/go', 'w').close()
while os.path.exists(d + '/go'):
    time.sleep(0.05)
try:
    r2 = req(a, 1, 1)
except OSError as e:
    r2 = 'error ' + str(e)
b = dial()
r3 = req(b, 2, 0)
print('first', r1, 'old', r2, 'new', r3)
sys.exit(0 if (r1, r2, r3) == (1, 'EOF', 1) else 1)
EOP
C=$!
for i in $(seq 200); do [ -e "$D/go" ] && break; sleep 0.05; done
[ -e "$D/go" ] || { echo "no first answer"; exit 1; }
K=$(pgrep -f "dc-keeper --dir $D/ck")
[ -n "$K" ] || { echo "no keeper"; exit 1; }
kill -9 $K $S
wait $S
# the old keeper's end first (not this shell's child: polled): a keeper
# still dying could answer the recovery's first questions
for i in $(seq 100); do kill -0 $K 2> /dev/null || break; sleep 0.05; done
run "$1" "$2"
sleep 0.5
rm -f "$D/go"
wait $C
rc=$?
kill -TERM $S
wait $S
S=
cat "$D/err"
[ $rc = 0 ] || { echo "tcp_keeper_lost: the clients' view is wrong"; exit 1; }
# said by the recovery, or by the old server: it may outlive its keeper
# by a tick, see the connection hang up, close it and commit that (then
# the recovered image has no connection left to lose)
grep -q -e "is gone (the keeper does not hold it" -e "dc-keeper is gone" \
	"$D/err" ||
	{ echo "tcp_keeper_lost: the lost connection was not said"; exit 1; }
echo "tcp_keeper_lost: ok"
