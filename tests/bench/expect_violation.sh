#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# expect_violation.sh -- run a command that must fail an invariant check:
# passes only if it exits non-zero AND says INVARIANT VIOLATED.
out=$("$@" 2>&1)
rc=$?
printf '%s\n' "$out"
[ "$rc" -ne 0 ] && printf '%s\n' "$out" | grep -q "INVARIANT VIOLATED"
