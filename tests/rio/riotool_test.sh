#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# riotool_test.sh -- riotool's commands, outputs and exit codes
set -u
RIOTOOL=$1
dir=$(mktemp -d /dev/shm/riotool-XXXXXX)
trap 'rm -rf "$dir"' EXIT
fails=0

# expect CODE PATTERN -- CMD...: run, check the exit code and that the
# combined output matches PATTERN (grep -E).
expect() {
	local code=$1 pat=$2
	shift 3
	local out rc
	out=$("$@" 2>&1)
	rc=$?
	if [ "$rc" -ne "$code" ] || ! grep -qE -- "$pat" <<<"$out"; then
		echo "FAIL: $* -> exit $rc (want $code), output:"
		echo "$out" | sed 's/^/    /'
		echo "    (wanted /$pat/)"
		fails=$((fails + 1))
	fi
}

expect 0 'usage: riotool' -- "$RIOTOOL" --help
expect 2 'usage: riotool' -- "$RIOTOOL"
expect 2 "unknown command 'frob'" -- "$RIOTOOL" frob
expect 0 'NVDIMM regions' -- "$RIOTOOL" info
expect 0 "$dir: libpmem2 reports the page persistence domain" -- "$RIOTOOL" info "$dir"
expect 0 'domain     page' -- "$RIOTOOL" create -s 1M -S -l demo "$dir/p"
expect 1 'already exists' -- "$RIOTOOL" create -s 1M "$dir/p"
expect 2 'bad size' -- "$RIOTOOL" create -s 12Q "$dir/q"
expect 1 'must be a multiple' -- "$RIOTOOL" create -s 5000 "$dir/q"
expect 0 'image      ok: generation [0-9]+ in slot [01], 2 of 2 copies valid' -- "$RIOTOOL" check "$dir/p"
expect 0 'synced to .*generation' -- "$RIOTOOL" sync "$dir/p"
expect 0 '00000000  00 00' -- "$RIOTOOL" dump -n 32 "$dir/p"
expect 1 'past the user area' -- "$RIOTOOL" dump -o 4G "$dir/p"
expect 1 'No such file' -- "$RIOTOOL" check "$dir/none"
RIO_DOMAIN=cacheline expect 0 'domain     cacheline \(libpmem2 reports page\)' -- "$RIOTOOL" check "$dir/p"

# damage: a bad header byte is reported, nothing is written
printf 'X' | dd of="$dir/p" bs=1 seek=40 conv=notrunc status=none
sum=$(md5sum <"$dir/p")
expect 1 'RIO_EBADCSUM' -- "$RIOTOOL" check "$dir/p"
[ "$(md5sum <"$dir/p")" = "$sum" ] || { echo "FAIL: check modified the pool"; fails=$((fails + 1)); }

# a damaged image is reported by check
"$RIOTOOL" create -s 1M -S "$dir/r" >/dev/null
dd if=/dev/zero of="$dir/r.img" bs=4096 count=2 conv=notrunc status=none
expect 1 'RIO_EIMAGE' -- "$RIOTOOL" check "$dir/r"

# one bad copy: check fails with its own status and names what a restore
# would use; a page of the newest copy flipped is a silent rollback else
"$RIOTOOL" create -s 1M -S "$dir/d" >/dev/null
"$RIOTOOL" sync "$dir/d" >/dev/null
printf 'X' | dd of="$dir/d.img" bs=1 seek=$((8192 + 4096 + 100)) conv=notrunc status=none
printf 'X' | dd of="$dir/d.img" bs=1 seek=$((8192 + 2 * (4096 + 1048576) - 100)) conv=notrunc status=none
expect 1 'RIO_EIMAGE' -- "$RIOTOOL" check "$dir/d"
"$RIOTOOL" create -s 1M -S "$dir/e" >/dev/null
"$RIOTOOL" sync "$dir/e" >/dev/null
for slot in 0 1; do
	cp "$dir/e.img" "$dir/e.img.orig"
	printf 'X' | dd of="$dir/e.img" bs=1 seek=$((8192 + slot * (4096 + 1048576) + 4096 + 100)) conv=notrunc status=none
	expect 3 "DAMAGED: 1 of 2 copies torn or corrupt; a restore would use generation [0-9]+ in slot $((1 - slot))" -- "$RIOTOOL" check "$dir/e"
	mv "$dir/e.img.orig" "$dir/e.img"
	# a superblock torn or flipped is a bad copy too
	printf 'X' | dd of="$dir/e.img" bs=1 seek=$((slot * 4096 + 30)) conv=notrunc status=none
	expect 3 "DAMAGED: 1 of 2 copies" -- "$RIOTOOL" check "$dir/e"
	# the next sync writes the bad slot, so both verify again
	"$RIOTOOL" sync "$dir/e" >/dev/null
	expect 0 'image      ok: .* 2 of 2 copies valid' -- "$RIOTOOL" check "$dir/e"
done

# sizes that overflow, carry a sign or trail garbage are refused, not wrapped
expect 2 'bad size' -- "$RIOTOOL" create -s 17179869185G "$dir/q"
expect 2 'bad size' -- "$RIOTOOL" create -s -1 "$dir/q"
expect 2 'bad size' -- "$RIOTOOL" create -s ' 1M' "$dir/q"
expect 2 'bad size' -- "$RIOTOOL" create -s 18446744073709551616 "$dir/q"
expect 2 'bad size' -- "$RIOTOOL" create -s 1MB "$dir/q"
expect 2 'usage' -- "$RIOTOOL" dump -o -1 "$dir/p"
[ ! -e "$dir/q" ] || { echo "FAIL: a refused size made a pool"; fails=$((fails + 1)); }

# the reboot case: the pool file is gone, sync restores it first
rm "$dir/r"
"$RIOTOOL" create -s 1M -S "$dir/s" >/dev/null
rm "$dir/s"
expect 0 'restored from image' -- "$RIOTOOL" sync "$dir/s"

if [ "$fails" -ne 0 ]; then
	echo "$fails riotool checks failed"
	exit 1
fi
echo "all riotool checks passed"
