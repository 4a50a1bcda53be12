#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# direct.sh -- the direct path (discount/direct.c, sud.c invariant 8) is
# taken, and does what the trapped one does: dd, unmodified, copies 4 MiB
# from a file to its standard output, a file, 64 KiB a call (its read and
# write bound to libdc's wrappers) under the buffered protocol with a
# tick every 5 ms, so its output is held and released at the
# checkpoints, once with DC_DIRECT unset and once with DC_DIRECT=0.  Both
# outputs must be the input, byte for byte; the run with the path on
# must have made its calls directly (DC_STATS direct_calls at least one
# per 64 KiB read), the one with it off none.
#
#   direct.sh DC_RUN
#
# Exit: 0 pass, 1 fail, 2 usage.
set -u
[ $# = 1 ] || { echo "usage: $0 DC_RUN" >&2; exit 2; }
T=$(mktemp -d /tmp/dc-direct.XXXXXX)
trap 'rm -rf "$T"' EXIT
DCRUN=$1
head -c 3145728 /dev/urandom | base64 -w 76 >"$T/in"
calls() { sed -n 's/^direct_calls=//p' "$1"; }
for mode in on off; do
	rm -rf "$T/ck"
	if [ $mode = on ]; then
		unset DC_DIRECT
	else
		export DC_DIRECT=0
	fi
	if ! DC_STATS="$T/st.$mode" timeout 30 "$DCRUN" --protocol buffered \
		--interval 5 --dir "$T/ck" -- dd if="$T/in" bs=64k status=none \
		>"$T/out.$mode" 2>"$T/err"; then
		echo "direct: FAIL: the run with the path $mode failed:" >&2
		cat "$T/err" >&2
		exit 1
	fi
	if ! cmp -s "$T/in" "$T/out.$mode"; then
		echo "direct: FAIL: the output with the path $mode differs" >&2
		exit 1
	fi
	grep -q '^checkpoints=' "$T/st.$mode" ||
		{ echo "direct: FAIL: no statistics" >&2; exit 1; }
done
on=$(calls "$T/st.on") off=$(calls "$T/st.off")
ckpts=$(sed -n 's/^checkpoints=//p' "$T/st.on")
min=$(( $(stat -c %s "$T/in") / 65536 ))
if [ "${on:-0}" -lt "$min" ] || [ "${off:-1}" != 0 ]; then
	echo "direct: FAIL: direct calls on $on (want >= $min), off $off" \
		"(want 0)" >&2
	exit 1
fi
echo "direct: ok: the same $(stat -c %s "$T/in") bytes both ways;" \
	"$on direct calls with the path on ($ckpts checkpoints), none off"
