#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bg_ckpt.sh -- the buffered protocol's checkpoint written behind
# (ckpt.c invariant 8), killed inside its writer (the test build's crash
# points, DC_CRASH_AT):
#
#   bg_ckpt.sh image DC_RUN LIB PROG
#       PROG is dc-test-bgimage (bgimage_prog.c), which stores into 4 MiB
#       all the time, under `--interval 5`.  For each crash point --
#       redo-part (the segment half written), redo (written, no commit
#       record), committed (the record durable, the keeper not told) --
#       the first run is killed at generation 8 (one written behind: the
#       first checkpoint is written in place); the same command again
#       must recover from generation 7 (redo-part, redo: the segment
#       whose record never got written is not there) or 8 (committed),
#       and the program must find every page as its counter says.  The
#       writer starts 3 ms late (DC_TEST_BG_DELAY_US), as on a loaded
#       machine: the program stores meanwhile.
#   bg_ckpt.sh early DC_RUN LIB ECHO
#       ECHO is dc-tcp-echo, under `--interval 10`, killed at crash point
#       redo of generation 60 (0.6 s at least) while a client sends one request after the
#       other over one connection (through dc-keeper); run again, it
#       recovers and the client goes on: every answer must have the
#       count (seq + 1) and the hash chained from the nonces the client
#       received.  An answer of the lost interval that got out breaks
#       the chain.
#
# LIB is the libdc to use (DC_LIB): libdc_test, or a broken build, which
# must fail: BG_EXPECT=fail.  Exit: 0 pass, 1 fail, 2 usage.
set -u
[ $# = 4 ] || { echo "usage: $0 image|early DC_RUN LIB PROG" >&2; exit 2; }
MODE=$1 DCRUN=$2 PROG=$4
export DC_LIB=$3
T=$(mktemp -d /dev/shm/dc-bg-ckpt.XXXXXX)
SRV=
cleanup() {
	[ -n "$SRV" ] && kill -9 "$SRV" 2> /dev/null
	rm -rf "$T"
}
trap cleanup EXIT
fail() {
	if [ "${BG_EXPECT:-pass}" = fail ]; then
		echo "bg-ckpt: caught: $*"
		exit 0
	fi
	echo "bg-ckpt: FAIL: $*" >&2
	exit 1
}

image() { # POINT GEN_AFTER
	rm -rf "$T/ck"
	DC_CRASH_AT=$1:8 DC_TEST_BG_DELAY_US=3000 timeout -s KILL 60 \
		"$DCRUN" --protocol buffered --interval 5 --dir "$T/ck" -- \
		"$PROG" 1500 > "$T/out1" 2> "$T/err1"
	local st=$?
	grep -q '^ok' "$T/out1" && fail "$1: the first run was not killed"
	[ $st = 0 ] && fail "$1: the first run ended well"
	timeout -s KILL 120 "$DCRUN" --protocol buffered --interval 5 \
		--verbose --dir "$T/ck" -- "$PROG" 1500 \
		> "$T/out2" 2> "$T/err2"
	st=$?
	grep -q "from generation $2\$" "$T/err2" ||
		fail "$1: not recovered from generation $2: $(head -3 "$T/err2")"
	[ $st = 0 ] && grep -q '^ok$' "$T/out2" ||
		fail "$1: after the recovery (exit $st): $(cat "$T/out2")" \
			"$(head -3 "$T/err2")"
	echo "bg-ckpt: $1: recovered from generation $2, every page right"
}

early() {
	rm -rf "$T/ck"
	local port=$((20000 + RANDOM % 12000))
	DC_CRASH_AT=redo:60 "$DCRUN" --protocol buffered --interval 10 \
		--dir "$T/ck" -- "$PROG" $port epoll > "$T/srv1" 2>&1 &
	SRV=$!
	python3 - "$port" "$T/cl" << 'PY' &
import socket, struct, sys, time
port, out = int(sys.argv[1]), open(sys.argv[2], 'w')
for _ in range(200):
    try:
        s = socket.create_connection(('127.0.0.1', port), timeout=30)
        break
    except OSError:
        time.sleep(0.05)
else:
    print('cannot connect', file=out); sys.exit(1)
M = (1 << 64) - 1
h = 0xcbf29ce484222325
t0 = time.time()
seq = 0
while time.time() - t0 < 4:
    s.sendall(struct.pack('<IIQII', 0x51524554, 0, seq, 0, 0))
    b = b''
    while len(b) < 48:
        x = s.recv(48 - len(b))
        if not x:
            print('closed at %d' % seq, file=out); sys.exit(1)
        b += x
    _, _, rseq, count, nonce, hsh, _, _ = struct.unpack('<IIQQQQII', b)
    for byte in struct.pack('<QQ', nonce, seq):
        h = ((h ^ byte) * 0x100000001b3) & M
    if rseq != seq or count != seq + 1 or hsh != h:
        print('answer %d: count %d, hash %s: an answer of a rolled-back '
              'interval got out' % (seq, count, 'ok' if hsh == h else
                                    'broken'), file=out)
        sys.exit(1)
    seq += 1
print('ok %d' % seq, file=out)
PY
	local cl=$!
	wait "$SRV"
	# killed by its crash point: the same command recovers it
	"$DCRUN" --protocol buffered --interval 10 --verbose --dir "$T/ck" \
		-- "$PROG" $port epoll > "$T/srv2" 2>&1 &
	SRV=$!
	wait $cl
	local st=$?
	kill -9 "$SRV" 2> /dev/null
	wait "$SRV" 2> /dev/null
	SRV=
	[ $st = 0 ] || fail "client: $(cat "$T/cl"); server: $(head -3 \
		"$T/srv2")"
	grep -q "from generation 59$" "$T/srv2" ||
		fail "not recovered from generation 59: $(head -3 "$T/srv2")"
	echo "bg-ckpt: early: recovered from generation 59; client: $(cat "$T/cl")"
}

case $MODE in
image)
	# A broken build's fault shows only when the program stored between
	# the stop and the writer's read of the same pages, which the
	# scheduler decides (about one pass in two on a loaded machine): up
	# to 8 passes for it, each ended by the first failure (caught).
	passes=1
	[ "${BG_EXPECT:-pass}" = fail ] && passes=8
	for _ in $(seq $passes); do
		image redo-part 7
		image redo 7
		image committed 8
	done ;;
early) early ;;
*) echo "usage: $0 image|early DC_RUN LIB PROG" >&2; exit 2 ;;
esac
[ "${BG_EXPECT:-pass}" = fail ] && { echo "bg-ckpt: the broken build" \
	"was not caught" >&2; exit 1; }
exit 0
