#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# netns.sh -- network faults between a primary and a backup in two network
# namespaces joined by a veth pair
#
#   netns.sh TOOL VR_DC
#
# Makes namespaces vrp-PID and vrb-PID, a veth pair between them with
# 10.211.0.1/24 (primary) and 10.211.0.2/24 (backup), and runs vr_dc
# primary in the first and vista-replica follow in the second.  Faults:
# a stall (a token-bucket filter that passes no data packet) and a cut
# (ip link set down), each lifted
# after a while.  Cases:
#   1. 2-safe, stall during commit: the primary's commits stop being
#      acknowledged (it reports "unreplicated": VR_ENOBACKUP), the backup
#      reports the primary lost; after the stall the backup rejoins from
#      its log tail (no full copy) and the primary's commits are
#      acknowledged again;
#   2. 1-safe, cut during commit: the primary goes on committing (its
#      acknowledgement log keeps growing), the backup reports the primary
#      lost; it rejoins (by a full copy if the ring filled meanwhile);
#   3. a cut during a full copy (rate-limited link): the backup's copy is
#      marked incomplete and refuses promotion; after the cut it is copied
#      again;
#   4. pipelined, a cut during a catch-up from the log tail (rate-limited
#      link): the backup keeps a consistent prefix and rejoins again.
# Each case ends with the primary killed, the backup promoted, and vr_dc
# check: the TPC-B invariants and, for 2-safe and pipelined, every
# acknowledged transaction present.  Needs root and ip(8)/tc(8): exits 77
# (skipped) otherwise.  Every loop is bounded; the namespaces go on every
# exit path.
set -u
TOOL=$(realpath "$1") DC=$(realpath "$2")
NP=vrp-$$ NB=vrb-$$ VP=vrp$$ VB=vrb$$
AP=10.211.0.1 AB=10.211.0.2
SIZE=8388608
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "not root: network namespaces need root"
command -v ip > /dev/null || skip "no ip(8)"
command -v tc > /dev/null || skip "no tc(8)"
T=$(mktemp -d /dev/shm/vrnetns-XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null; done
	wait 2>/dev/null
	ip netns del "$NP" 2>/dev/null
	ip netns del "$NB" 2>/dev/null
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
ip netns add "$NP" 2>/dev/null || skip "ip netns add not permitted"
ip netns add "$NB" || exit 1
ip link add "$VP" type veth peer name "$VB" || skip "no veth pairs here"
ip link set "$VP" netns "$NP" && ip link set "$VB" netns "$NB" || exit 1
inp() { ip netns exec "$NP" "$@"; }
inb() { ip netns exec "$NB" "$@"; }
inp ip addr add $AP/24 dev "$VP" && inb ip addr add $AB/24 dev "$VB" &&
inp ip link set "$VP" up && inb ip link set "$VB" up &&
inp ip link set lo up && inb ip link set lo up || exit 1

fail() { echo "FAILED: $*"; for f in "$T"/*.out; do echo "== $f"; tail -c 600 "$f"; echo; done; exit 1; }
# within TENTHS CMD...: up to TENTHS/10 s until CMD succeeds
within() {
	local n=$1 w
	shift
	for ((w = 0; w < n; w++)); do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}
# wait_for FILE PATTERN TENTHS: PATTERN appears in FILE
wait_for() { within "$3" grep -q "$2" "$1" 2>/dev/null; }
# wait_state FILE WORD TENTHS: the primary's last connection line (vr_dc:
# serving or lost) in FILE is WORD
state_is() {
	[ "$(grep -E '^(serving|lost)$' "$1" 2>/dev/null | tail -n 1)" = "$2" ]
}
wait_state() { within "$3" state_is "$1" "$2"; }
# acks_past FILE A TENTHS: more than A acks
acks_over() { [ "$(acks "$1")" -gt "$2" ]; }
acks_past() { within "$3" acks_over "$1" "$2"; }
# wait_exit PID TENTHS: the process has ended (and is reaped)
ended() { ! kill -0 "$1" 2>/dev/null && { wait "$1" 2>/dev/null; :; }; }
wait_exit() { within "$2" ended "$1"; }
acks() { echo $(($(stat -c %s "$1" 2>/dev/null || echo 0) / 8)); }
# A stall: the link stays up, the primary's packets are dropped (a token
# bucket whose burst is smaller than any data packet; netem may be absent).
stall() { inp tc qdisc replace dev "$VP" root tbf rate 1mbit burst 80 limit 80; }
cut() { inp ip link set "$VP" down; }
heal() {
	inp tc qdisc del dev "$VP" root 2>/dev/null
	inp ip link set "$VP" up
	# a packet both ways before going on (bounded)
	command -v ping > /dev/null || { sleep 0.3; return 0; }
	for ((w = 0; w < 50; w++)); do
		inb ping -c1 -W1 $AP > /dev/null 2>&1 && return 0
		sleep 0.1
	done
	fail "the link did not come back"
}
slow() { inp tc qdisc replace dev "$VP" root tbf rate "$1" burst 32kbit latency 400ms; }

# start_primary CASE MODE: sets PP, PORT
start_primary() {
	P=$T/p$1
	mkdir -p "$P"
	VR_DC_HOST=$AP ip netns exec "$NP" "$DC" primary "$P" 0 "$2" \
		"$P.ack" "$1" > "$T/p$1.out" 2>&1 &
	PP=$!
	PIDS+=("$PP")
	wait_for "$T/p$1.out" '^port ' 100 || fail "case $1: no primary"
	PORT=$(sed -n 's/^port //p' "$T/p$1.out")
}
# follow CASE N: backup process N of the case (its own output), sets BP
follow() {
	B=$T/b$1
	mkdir -p "$B"
	ip netns exec "$NB" "$TOOL" follow --dir "$B" --size $SIZE \
		--peer $AP:"$PORT" --timeout 300 > "$T/b$1.$2.out" 2>&1 &
	BP=$!
	PIDS+=("$BP")
}
# finish CASE MODE: kill the primary, promote the backup, check
finish() {
	kill -9 "$PP" 2>/dev/null
	wait "$PP" 2>/dev/null
	kill -9 "$BP" 2>/dev/null
	wait "$BP" 2>/dev/null
	"$TOOL" promote --dir "$T/b$1" --size $SIZE > "$T/b$1.promote.out" 2>&1 ||
		fail "case $1: promotion failed"
	out=$("$DC" check "$T/b$1" "$T/p$1.ack" "$2" 2>&1) ||
		fail "case $1: check: $out"
	echo "case $1 ($2): ok: $out"
}

# ---- 1. 2-safe, a stall during commit; rejoin from the log tail ----
start_primary 1 2safe
follow 1 1
wait_for "$T/p1.out" serving 150 || fail "case 1: no backup"
sleep 0.3
stall
wait_exit "$BP" 50 || fail "case 1: the backup did not notice the stall"
grep -q VR_EPEERLOST "$T/b1.1.out" || fail "case 1: backup did not report"
wait_for "$T/p1.out" unreplicated 50 ||
	fail "case 1: the primary did not report unacknowledged commits"
a0=$(acks "$T/p1.ack")
sleep 0.5
[ "$(acks "$T/p1.ack")" = "$a0" ] ||
	fail "case 1: 2-safe commits were acknowledged during the stall"
heal
# the primary gives the stalled connection up (timeout 1 s)
wait_state "$T/p1.out" lost 100 ||
	fail "case 1: the primary kept the stalled connection"
follow 1 2
acks_past "$T/p1.ack" "$a0" 100 || fail "case 1: no ack after the rejoin"
grep -q 'copy:' "$T/b1.2.out" && fail "case 1: rejoined by full copy"
echo "case 1: stall: primary unreplicated, $a0 acknowledged; rejoined" \
	"from the log tail"
finish 1 2safe

# ---- 2. 1-safe, a cut during commit; rejoin by full copy ----
start_primary 2 1safe
follow 2 1
wait_for "$T/p2.out" serving 150 || fail "case 2: no backup"
sleep 0.3
cut
a0=$(acks "$T/p2.ack")
wait_exit "$BP" 50 || fail "case 2: the backup did not notice the cut"
grep -q VR_EPEERLOST "$T/b2.1.out" || fail "case 2: backup did not report"
# a full ring waits for the primary's timeout (1 s), then drops
acks_past "$T/p2.ack" "$a0" 100 ||
	fail "case 2: 1-safe commits stopped during the cut"
wait_state "$T/p2.out" lost 100 ||
	fail "case 2: the primary kept the cut connection"
heal
follow 2 2
# By full copy if the ring filled meanwhile (it dropped its records),
# else from the log tail: either way the backup follows again.
wait_state "$T/p2.out" serving 300 ||
	fail "case 2: the backup did not rejoin"
grep -q 'copy: .*(100%)' "$T/b2.2.out" && how="full copy" ||
	how="the log tail"
kill -0 "$BP" 2>/dev/null || fail "case 2: the backup did not stay"
echo "case 2: cut: 1-safe went on ($a0 -> $(acks "$T/p2.ack")); rejoined" \
	"from $how"
finish 2 1safe

# ---- 3. a cut during the full copy ----
start_primary 3 2safe
slow 16mbit # 8 MiB: about 4 s
follow 3 1
wait_for "$T/b3.1.out" 'copy: ' 100 || fail "case 3: the copy did not start"
cut
wait_exit "$BP" 50 || fail "case 3: the backup did not notice the cut"
grep -q 'copy: .*(100%)' "$T/b3.1.out" && fail "case 3: the copy was not cut"
if "$TOOL" promote --dir "$T/b3" --size $SIZE > "$T/b3.p.out" 2>&1 ||
    ! grep -q VR_EINCOMPLETE "$T/b3.p.out"; then
	fail "case 3: an interrupted copy was promoted"
fi
heal
sleep 1.2
follow 3 2
wait_for "$T/p3.out" serving 150 || fail "case 3: no backup after the cut"
wait_for "$T/b3.2.out" 'copy: .*(100%)' 100 || fail "case 3: no copy again"
sleep 0.3
echo "case 3: cut during the full copy: promotion refused" \
	"(VR_EINCOMPLETE); copied again"
finish 3 2safe

# ---- 4. pipelined, a cut during a catch-up from the log tail ----
start_primary 4 pipelined
follow 4 1
wait_for "$T/p4.out" serving 150 || fail "case 4: no backup"
sleep 0.3
stall
wait_exit "$BP" 50 || fail "case 4: the backup did not notice the stall"
wait_for "$T/p4.out" unreplicated 50 || fail "case 4: window never filled"
heal
slow 200kbit # a window of records (about 180 KiB): several seconds
wait_state "$T/p4.out" lost 100 ||
	fail "case 4: the primary kept the stalled connection"
follow 4 2
sleep 1
cut
wait_exit "$BP" 50 || fail "case 4: the backup did not notice the cut"
grep -q 'copy:' "$T/b4.2.out" && fail "case 4: catch-up was a full copy"
"$TOOL" status --dir "$T/b4" --size $SIZE > "$T/b4.s.out" 2>&1
heal
wait_state "$T/p4.out" lost 100 ||
	fail "case 4: the primary kept the cut connection"
a0=$(acks "$T/p4.ack")
follow 4 3
acks_past "$T/p4.ack" "$a0" 100 || fail "case 4: no ack after the rejoin"
echo "case 4: cut during the catch-up at: $(cat "$T/b4.s.out"); rejoined"
finish 4 pipelined
echo "all cases passed"
