#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
# replica_smoke.sh -- tpcbench --replica in a few seconds
#
#   replica_smoke.sh TPCBENCH TPCBENCH_BROKEN_REPL_ATTACH_EARLY
#
# 1. Every mode on debit-credit and order-entry, one and two streams,
#    over loopback: exit 0 (invariants after the run and after reopening;
#    each backup's copy equal to the primary's database), and the report's
#    replicated table names each mode.
# 2. Bad input: an unknown mode, --replica without --peer, --peer without
#    --replica, a peer that is not an address of this host or not a
#    name at all, passive modes in the byte domain, a backend
#    that is not vista: exit 2 and a message that says which.
# 3. The broken build: its backup misses the population; the comparison
#    must fail the run (exit 2, "differs").
set -u
T=${1:?usage: replica_smoke.sh TPCBENCH BROKEN}
B=${2:?usage: replica_smoke.sh TPCBENCH BROKEN}
OUT=$(mktemp /tmp/tb-replica-smoke.XXXXXX)
trap 'rm -f "$OUT" "$OUT.csv"' EXIT
fail=0
MODES=1safe,1safe-whole,2safe,pipelined,passive-1safe,passive-2safe
COMMON=(--db-size 2M --seconds 0.1 --runs 1 --quiet)

ok() { # what, command...
	local what=$1
	shift
	if ! "$@" > "$OUT" 2>&1; then
		echo "FAIL: $what: exit $?"
		cat "$OUT"
		fail=1
		return
	fi
	for m in ${MODES//,/ }; do
		if ! grep -q "^vista+$m (cacheline) .*us *$" "$OUT"; then
			echo "FAIL: $what: no replicated row for $m"
			cat "$OUT"
			fail=1
			return
		fi
	done
	grep -q "^round trip over 127.0.0.1" "$OUT" ||
		{ echo "FAIL: $what: no round trip"; fail=1; }
	echo "ok: $what"
}

refused() { # what, expected message, command...
	local what=$1 msg=$2 rc
	shift 2
	"$@" > "$OUT" 2>&1
	rc=$?
	if [ $rc -ne 2 ] || ! grep -q -- "$msg" "$OUT"; then
		echo "FAIL: $what: exit $rc, want 2 and \"$msg\""
		cat "$OUT"
		fail=1
		return
	fi
	echo "ok: $what refused ($(grep -m1 -- "$msg" "$OUT"))"
}

for w in debit-credit order-entry; do
	ok "$w, every mode" "$T" --workload $w --backend vista \
		--replica $MODES --peer 127.0.0.1 "${COMMON[@]}"
done
ok "order-entry, two streams" "$T" --workload order-entry --backend vista \
	--threads 2 --replica $MODES --peer 127.0.0.1 "${COMMON[@]}"
# Two rounds: every configuration runs twice, in turn (two CSV rows each,
# the second round after the first).
CSV=$OUT.csv
ok "debit-credit, two rounds" "$T" --workload debit-credit --backend vista \
	--rounds 2 --replica $MODES --peer 127.0.0.1 --csv "$CSV" \
	"${COMMON[@]}"
order=$(cut -d, -f3 "$CSV" | tail -n +2 | tr '\n' ' ')
want="vista (cacheline) $(for m in ${MODES//,/ }; do printf 'vista+%s (cacheline) ' $m; done)"
if [ "$order" != "$want$want" ]; then
	echo "FAIL: two rounds: rows in the order: $order"
	fail=1
fi
rm -f "$CSV"

refused "unknown mode" 'unknown mode "3safe"' "$T" --workload debit-credit \
	--backend vista --replica 1safe,3safe --peer 127.0.0.1 "${COMMON[@]}"
refused "missing peer" "needs --peer" "$T" --workload debit-credit \
	--backend vista --replica 1safe "${COMMON[@]}"
refused "peer without mode" "needs --replica" "$T" --workload debit-credit \
	--backend vista --peer 127.0.0.1 "${COMMON[@]}"
# 192.0.2.1 (TEST-NET-1) is no address of this host.
refused "unreachable peer" "unreachable" "$T" --workload debit-credit \
	--backend vista --replica 2safe --peer 192.0.2.1 "${COMMON[@]}"
refused "unresolvable peer" "no-such-host.invalid:" "$T" \
	--workload debit-credit --backend vista --replica 1safe \
	--peer no-such-host.invalid "${COMMON[@]}"
refused "backend not vista" "only vista" "$T" --workload debit-credit \
	--backend rvm --replica 1safe --peer 127.0.0.1 "${COMMON[@]}"
refused "no-flush groups" "not with --group" "$T" --workload debit-credit \
	--backend vista --group 8 --replica 1safe --peer 127.0.0.1 \
	"${COMMON[@]}"

refused "passive in the byte domain" "not in the byte domain" "$T" \
	--workload debit-credit --backend vista:byte \
	--replica 1safe,passive-2safe --peer 127.0.0.1 "${COMMON[@]}"
refused "zero rounds" "usage:" "$T" --workload debit-credit \
	--backend vista --rounds 0 "${COMMON[@]}"
refused "broken build (backup without the population)" \
	"copy differs from the primary" "$B" --workload debit-credit \
	--backend vista --replica 1safe --peer 127.0.0.1 "${COMMON[@]}"
exit $fail
