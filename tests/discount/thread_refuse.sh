#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# thread_refuse.sh DC_RUN DC_TEST_THREAD -- where threads are not
# checkpointed (a protocol other than buffered or periodic, --tree), the
# program's pthread_create fails with the refusal said on stderr, and a
# single-threaded run under those settings is unaffected.
set -u
D=$(mktemp -d /dev/shm/dc-thread-refuse-XXXXXX)
trap 'rm -rf "$D"' EXIT
fail() { echo "FAIL: $*"; cat "$D/err" 2>/dev/null; exit 1; }
# cpvs: pthread_create fails (the program says so and exits 3)
"$1" --dir "$D/ck" --protocol cpvs -- "$2" 2 10 > "$D/out" 2> "$D/err"
rc=$?
[ $rc = 3 ] || fail "cpvs: exit $rc, not 3"
grep -q "refused a second thread (threads are checkpointed under the buffered and periodic protocols only)" "$D/err" ||
	fail "cpvs: no refusal message"
grep -q "check failed: pthread_create" "$D/err" ||
	fail "cpvs: pthread_create did not fail"
# --tree: the same, said for trees
"$1" --tree --dir "$D/tk" --protocol cpv-2pc -- "$2" 2 10 > "$D/out" \
	2> "$D/err"
rc=$?
[ $rc = 3 ] || fail "tree: exit $rc, not 3"
grep -q "refused a second thread" "$D/err" || fail "tree: no refusal message"
echo "dc-thread-refuse: ok"
