#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# fd_limits.sh DC_RUN PYTHON -- libdc's descriptor tables at their
# limits: the 1281st open file description and a descriptor numbered
# past 2047 (3000: libdc's own start at 2048) are refused with EMFILE and
# a message, number 2047 is not, and the program goes on (the run ends
# normally).
set -u
D=$(mktemp -d /dev/shm/dc-fd-limits-XXXXXX)
trap 'rm -rf "$D"' EXIT
"$1" --dir "$D/ck" -- "$2" -c '
import errno, os
fds = []
try:
    while True:
        fds.append(os.open("/dev/null", os.O_RDONLY))
except OSError as e:
    print("open", errno.errorcode[e.errno], len(fds))
os.close(fds.pop())
try:
    os.dup2(fds[0], 3000)
    print("dup2 3000 allowed")
except OSError as e:
    print("dup2 3000", errno.errorcode[e.errno])
print("dup2 2047", os.dup2(fds[0], 2047))
' > "$D/out" 2> "$D/err"
rc=$?
cat "$D/out" "$D/err"
[ $rc = 0 ] || { echo "the program exited $rc"; exit 1; }
grep -Eq "^open EMFILE (12[0-9][0-9])$" "$D/out" ||
	{ echo "open did not stop with EMFILE near 1280"; exit 1; }
grep -q "^dup2 3000 EMFILE$" "$D/out" ||
	{ echo "dup2 3000 not refused"; exit 1; }
grep -q "^dup2 2047 2047$" "$D/out" || { echo "dup2 2047 refused"; exit 1; }
grep -q "refused a 1281st open file" "$D/err" ||
	{ echo "no message for the open"; exit 1; }
grep -q "refused a descriptor numbered 2048 or above" "$D/err" ||
	{ echo "no message for the dup2"; exit 1; }
echo "dc-fd-limits: ok"
