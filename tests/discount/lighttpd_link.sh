#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# lighttpd_link.sh -- Debian's lighttpd, unmodified, under dc-run
#                     --protocol buffered behind a shaped link, killed
#                     while its clients download, every body compared
#
#   lighttpd_link.sh DC_RUN LIGHTTPD [KILLS]
#
# The server and the client each in a network namespace made here
# (ltk-s-PID, ltk-c-PID: 10.218.0.1 and .2), joined by a veth pair whose
# two ends a token-bucket filter shapes to 1 Gbit/s (a queue of 1000 full
# frames, as a NIC's); both go on every exit path, with what was started
# in them.  lighttpd serves 8 documents of random bytes, 50-150 KiB,
# under --interval 20.  A client loop (at most 400 rounds, 40 s) fetches
# each document 5 times a round, 8 transfers at once over keep-alive
# connections (curl --parallel, each transfer bounded to 20 s), and
# compares each body with its file byte for byte (cmp: length and
# content);
# meanwhile the server is SIGKILLed KILLS times (default 25), 100-300 ms
# after each start, and started again by the same command (dc-run
# recovers it), the downloads in flight through the keeper.  Fails on a
# body not byte-identical to its file, a transfer that fails (a reset, an
# error status, a time-out) or a recovery that does not serve again.
#
# With LINK_EXPECT=fail (a broken build: $DC_KEEPER_BIN a keeper that
# sends output before its commit) the run must fail on a body, and that
# is a pass.
#
# Exit: 0 pass, 1 fail (what failed on stderr), 2 usage, 77 skipped.
set -u
[ $# -ge 2 ] || { echo "usage: $0 DC_RUN LIGHTTPD [KILLS]" >&2; exit 2; }
DCRUN=$1 LT=$2 KILLS=${3:-25}
EXPECT=${LINK_EXPECT:-}
skip() { echo "lighttpd_link: skipped: $*" >&2; exit 77; }
[ "$(id -u)" = 0 ] || skip "network namespaces need root"
for t in ip tc curl cmp; do
	command -v $t > /dev/null || skip "no $t"
done
. "$(dirname "$0")/shaped_link.sh"
NS_S=ltk-s-$$ NS_C=ltk-c-$$ ADDR=10.218.0.1 PORT=8080
M=$(mktemp -d /dev/shm/dc-ltk-XXXXXX)
SRV= CLI=
cleanup() {
	[ -n "$CLI" ] && kill -9 "$CLI" 2> /dev/null
	[ -n "$SRV" ] && kill -9 "$SRV" 2> /dev/null
	link_down $NS_S $NS_C
	wait 2> /dev/null
	rm -rf "$M"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
link_up "$NS_S" "$NS_C" 10.218.0 1gbit 1514000 || case $? in
	1) NS_S= NS_C=; skip "ip netns add not permitted" ;;
	*) skip "no veth pairs or no tbf here" ;;
	esac

fail() {
	if [ "$EXPECT" = fail ]; then
		echo "lighttpd_link: caught the broken build: $*" >&2
		exit 0
	fi
	echo "lighttpd_link: $*" >&2
	tail -n 20 "$M/err" >&2
	exit 1
}

mkdir -p "$M/www"
for i in 1 2 3 4 5 6 7 8; do
	head -c $((51200 + RANDOM % 102400)) /dev/urandom > "$M/www/d$i"
done
lighttpd_conf "$M/l.conf" "$M/www" "$ADDR" "$PORT"
export DC_KEEPER_LINGER=30
start() {
	ip netns exec "$NS_S" "$DCRUN" --dir "$M/ck" --protocol buffered \
		--interval 20 -- "$LT" -D -f "$M/l.conf" 2>> "$M/err" &
	SRV=$!
}
fetch() { # DIR: each document 5 times, 8 at once, each compared; 0 when
	# all good, else why in DIR.why
	rm -rf "$1"
	mkdir -p "$1"
	ip netns exec "$NS_C" curl -s -f -Z --parallel-max 8 --max-time 20 \
		"http://$ADDR:$PORT/d[1-8]?r=[1-5]" -o "$1/d#1.#2" 2>> "$M/err" ||
		{ echo "a transfer failed (curl: $?)" > "$1.why"; return 1; }
	local f i
	for f in "$M"/www/d*; do
		for i in 1 2 3 4 5; do
			cmp -s "$f" "$1/${f##*/}.$i" || {
				echo "${f##*/}: a body differs from its file" \
					"($(stat -c %s "$1/${f##*/}.$i") bytes," \
					"the file $(stat -c %s "$f"))" > "$1.why"
				return 1
			}
		done
	done
}

start
for ((t = 0; t < 100; t++)); do
	fetch "$M/first" && break
	sleep 0.1
done
[ $t -lt 100 ] || fail "lighttpd does not serve under dc-run"
# The client: rounds until the stop file, at most 400 of them or 40 s.
(
	end=$((SECONDS + 40))
	for ((r = 0; r < 400 && SECONDS < end; r++)); do
		[ -e "$M/stop" ] && break
		fetch "$M/got" || { mv "$M/got.why" "$M/bad"; exit 1; }
		echo $r > "$M/rounds"
	done
) &
CLI=$!
for ((k = 0; k < KILLS; k++)); do
	sleep "0.$((100 + RANDOM % 200))"
	kill -0 "$CLI" 2> /dev/null || break
	kill -9 "$SRV" 2> /dev/null
	wait "$SRV" 2> /dev/null
	start
done
sleep 1
touch "$M/stop"
wait "$CLI"
rc=$?
CLI=
[ -e "$M/bad" ] && fail "after $k kills: $(cat "$M/bad")"
[ $rc = 0 ] || fail "the client ended with $rc"
fetch "$M/last" || fail "after the kills: $(cat "$M/last.why")"
[ "$EXPECT" = fail ] && { echo "lighttpd_link: the broken build was not caught" >&2; exit 1; }
echo "lighttpd_link: $k kills, $(($(cat "$M/rounds" 2> /dev/null || echo -1) + 1))" \
	"rounds of 40 transfers through the shaped link, every body identical"
