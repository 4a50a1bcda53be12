#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tree_refuse.sh -- bad cases of dc-run --tree: each is refused with a
# clear message, the program goes on (or dc-run stops before running
# it), and no checkpoint directory is left behind.
#
#   tree_refuse.sh DCRUN BADPROG
#
# Exit: 0 pass, 1 fail (what failed on stderr), 2 usage.
set -u
[ $# -eq 2 ] || { echo "usage: $0 DCRUN BADPROG" >&2; exit 2; }
DCRUN=$1 BAD=$2
SHM=$(mktemp -d /dev/shm/dc-tree-bad.XXXXXX)
trap 'rm -rf "$SHM"' EXIT
fails=0
check() { # name, want-status, output-pattern, stderr-pattern, dir
	local name=$1 want=$2 out=$3 err=$4 dir=$5
	if [ "$st" -ne "$want" ] || ! grep -q -- "$out" "$SHM/out" ||
	   ! grep -q -- "$err" "$SHM/err" || [ -e "$dir" ]; then
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

# a thread: clone with CLONE_VM is refused, the program goes on
run "$SHM/t1" -- "$BAD" thread
check thread 0 "thread: " "dc: refused clone with shared memory" "$SHM/t1"

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
echo "5 bad cases refused" >&2
