#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# tcp_bad.sh DC_RUN DC_TCP_BAD -- dc-tcp-bad under the buffered protocol
# (a free loopback port, a directory of its own): every check passes, the
# refused connect is said on stderr, and the keeper leaves with the run.
set -u
D=$(mktemp -d /dev/shm/dc-tcp-bad-XXXXXX)
trap 'rm -rf "$D"' EXIT
PORT=$((20000 + $$ % 12000))
"$1" --dir "$D/ck" --protocol buffered --interval 20 -- "$2" $PORT \
	> "$D/out" 2> "$D/err"
rc=$?
cat "$D/out" "$D/err"
[ $rc = 0 ] || { echo "dc-tcp-bad exited $rc"; exit 1; }
[ "$(grep -c '^ok ' "$D/out")" = 6 ] || { echo "not 6 checks ok"; exit 1; }
grep -q "refused an outgoing TCP connection" "$D/err" ||
	{ echo "no refusal message"; exit 1; }
echo "dc-held-tcp-bad: ok"
