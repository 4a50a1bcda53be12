#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tree_refuse.sh -- bad cases of dc-run --tree: each is refused with a
# clear message, the program goes on (or dc-run stops before running
# it), and no checkpoint directory is left behind.
#
#   tree_refuse.sh DCRUN BADPROG STATICPROG
#
# TREE_ONLY=NAME runs one case; with TREE_EXPECT=fail (a broken libdc in
# $DC_LIB) that case must fail.
#
# Exit: 0 pass, 1 fail (what failed on stderr), 2 usage.
set -u
[ $# -eq 3 ] || { echo "usage: $0 DCRUN BADPROG STATICPROG" >&2; exit 2; }
DCRUN=$1 BAD=$2 STATIC=$3
ONLY=${TREE_ONLY:-}
SHM=$(mktemp -d /dev/shm/dc-tree-bad.XXXXXX)
trap 'rm -rf "$SHM"' EXIT
fails=0
ncase=0
check() { # name, want-status, output-pattern, stderr-pattern, dir
	local name=$1 want=$2 out=$3 err=$4 dir=$5
	ncase=$((ncase + 1))
	if [ "$st" -ne "$want" ] || ! grep -q -- "$out" "$SHM/out" ||
	   { [ -n "$err" ] && ! grep -q -- "$err" "$SHM/err"; } ||
	   [ -e "$dir" ]; then
		echo "FAIL: $name: status $st (want $want)" >&2
		cat "$SHM/out" "$SHM/err" >&2
		[ -e "$dir" ] && echo "  $dir left behind" >&2
		fails=$((fails + 1))
	fi
}
run() { # dir, args...
	local dir=$1
	shift
	timeout 60 "$DCRUN" --tree --dir "$dir" "$@" 2> "$SHM/err" | cat > "$SHM/out"
	st=${PIPESTATUS[0]}
}

want() { [ -z "$ONLY" ] || [ "$ONLY" = "$1" ]; }

# a round's signal in a computing process leaves its errno alone (the
# program sets errno to 0, computes, and looks)
if want errno; then
run "$SHM/t0" --protocol cpv-2pc -- "$BAD" errno
check errno 0 "child: errno kept" "" "$SHM/t0"
fi
if [ -n "$ONLY" ]; then
	if [ -n "${TREE_EXPECT:-}" ]; then
		[ "$fails" -gt 0 ] && { echo "broken build caught" >&2; exit 0; }
		echo "FAIL: the broken build was not caught" >&2
		exit 1
	fi
	[ "$fails" -eq 0 ] || exit 1
	exit 0
fi

# a thread: refused (threads are checkpointed under the buffered and
# periodic protocols only), the program goes on
run "$SHM/t1" -- "$BAD" thread
check thread 0 "thread: " "dc: refused a second thread" "$SHM/t1"

# clone with CLONE_VM but without CLONE_VFORK (memory shared with a
# parent that goes on): refused, the program goes on (posix_spawn's
# CLONE_VM | CLONE_VFORK is a fork of the tree: tree_spawn_prog.c)
run "$SHM/t6" -- "$BAD" sharevm
check sharevm 0 "clone CLONE_VM: Function not implemented" \
	"dc: refused clone with shared memory" "$SHM/t6"

# execve of a statically linked program: refused (no libdc in it)
run "$SHM/t7" -- "$BAD" static "$STATIC"
check static 0 "execve .*: Operation not permitted" \
	"dc: refused execve of a statically linked program" "$SHM/t7"

# pipe2 with O_DIRECT
run "$SHM/t2" -- "$BAD" odirect
check odirect 0 "pipe2 O_DIRECT: Invalid argument" "dc: refused pipe2" "$SHM/t2"

# a tree too large ($DC_TREE_MAX, 64 at most; 6 here): the sixth fork
# fails with EAGAIN, the program goes on
DC_TREE_MAX=6 run "$SHM/t3" -- "$BAD" many
check many 0 "forked 5 children (5 ended well), then: Resource temporarily unavailable" \
	"dc: refused a fork in a tree of DC_TREE_MAX processes" "$SHM/t3"

# --tree with a protocol whose processes would commit alone
timeout 20 "$DCRUN" --tree --protocol cbndvs --dir "$SHM/t4" -- "$BAD" thread \
	> "$SHM/out" 2> "$SHM/err"
st=$?
echo "n/a" >> "$SHM/out"
check protocol 2 "n/a" "processes of a tree commit together" "$SHM/t4"

# pipes and fork without --tree are refused as before
timeout 20 "$DCRUN" --dir "$SHM/t5" -- "$BAD" many 2> "$SHM/err" | cat > "$SHM/out"
st=${PIPESTATUS[0]}
echo "n/a" >> "$SHM/out"
check no-tree 1 "n/a" "dc: refused a pipe inside one process" "$SHM/t5"

[ "$fails" -eq 0 ] || exit 1
echo "$ncase bad cases refused" >&2
