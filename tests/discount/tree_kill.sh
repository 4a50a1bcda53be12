#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# tree_kill.sh -- dc-run --tree on a process tree (tree_prog.c: a parent,
# its children and grandchildren talking over pipes and waiting for each
# other), SIGKILLed at random: each kill picks a process of the tree --
# the tree's init, the root, a child or a grandchild -- while it runs.
# dc-run recovers the whole tree each time.  The visible output must be
# equivalent (dc-equiv) to a failure-free run's, the run must end with
# status 0, and the checkpoint directory must be gone.
#
#   tree_kill.sh DCRUN EQUIV PROG PROTOCOL ROUNDS KILLS SEED
#
# ROUNDS is passed to PROG (tree_prog.c: "ROUNDS" or "ROUNDS PAUSE_MS").
#
# KILLS is a number of kills at random moments, or at:LINE -- one kill,
# of a process drawn at random, as soon as LINE is in the output (the
# first kill of a broken build's test, at the moment that shows it).
#
# TREE_AT_FILE=F: at:LINE waits for LINE in the file F the program writes
# in its working directory instead of in its output.
#
# Each run has a working directory of its own; TREE_FILES names files
# the program writes there (tree_pipeline.sh's out), which must be
# identical to the failure-free run's.
#
# With TREE_EXPECT=fail (a broken build), the campaign must fail;
# TREE_REF names the correct dc-run for the failure-free reference, and
# TREE_BROKEN_LIB a broken libdc for the run with kills ($DC_LIB).
#
# Exit: 0 pass, 1 fail (what failed on stderr), 2 usage.
set -u
[ $# -ge 7 ] || { echo "usage: $0 DCRUN EQUIV PROG PROTOCOL ROUNDS KILLS SEED" >&2; exit 2; }
DCRUN=$1 EQUIV=$2 PROG=$3 PROTO=$4 ROUNDS=$5 KILLS=$6 SEED=$7
REF=${TREE_REF:-$DCRUN}
EXPECT=${TREE_EXPECT:-}
LIMIT=${TREE_LIMIT:-60}
RANDOM=$SEED
T=$(mktemp -d /tmp/dc-tree.XXXXXX)
SHM=$(mktemp -d /dev/shm/dc-tree.XXXXXX)
mkdir "$T/ref.d" "$T/obs.d"
FILES=${TREE_FILES:-}
cleanup() {
	[ -n "${L:-}" ] && kill -9 "$L" 2>/dev/null
	[ -n "${TREE_KEEP:-}" ] && echo "kept $T $SHM" >&2 && return
	rm -rf "$T" "$SHM"
}
trap cleanup EXIT
verdict() { # $1: 0 the campaign passed its checks
	if [ -n "$EXPECT" ]; then
		[ "$1" -ne 0 ] && { echo "broken build caught" >&2; exit 0; }
		echo "FAIL: the broken build was not caught" >&2
		exit 1
	fi
	exit "$1"
}

# the failure-free reference
if ! (cd "$T/ref.d" && timeout "$LIMIT" "$REF" --tree --protocol "$PROTO" \
	--dir "$SHM/ref" -- "$PROG" $ROUNDS) > "$T/ref" 2> "$T/ref.err"; then
	echo "FAIL: the failure-free run failed" >&2
	cat "$T/ref.err" >&2
	exit 1
fi

# descendants of $1, one per line (ps: pid ppid)
descendants() {
	ps -e -o pid=,ppid= | awk -v root="$1" '
		{ p[$1] = $2 }
		END { for (x in p) { y = x; while (y in p && y != root && y > 1) y = p[y];
			if (y == root && x != root) print x } }'
}

# standard output and error through pipes: the program's writes to them
# are visible events (a regular file would be process state, rolled back)
( [ -n "${TREE_BROKEN_LIB:-}" ] && export DC_LIB=$TREE_BROKEN_LIB
  cd "$T/obs.d" || exit 1
  timeout "$LIMIT" "$DCRUN" --tree ${TREE_VERBOSE:+--verbose} \
	--protocol "$PROTO" --dir "$SHM/run" -- "$PROG" $ROUNDS \
	2> >(cat > "$T/obs.err") | cat > "$T/obs"
  echo "${PIPESTATUS[0]}" > "$T/rc" ) &
L=$!
# the launcher: dc-run itself, the user's process, never killed
launcher=
for ((i = 0; i < 200; i++)); do
	[ -n "$launcher" ] && break
	launcher=$(pgrep -f -- "--dir $SHM/run" | while read -r p; do
		c=$(tr '\0' ' ' < "/proc/$p/cmdline" 2>/dev/null)
		[[ "$c" == timeout* ]] && continue
		pp=$(awk '{print $4}' "/proc/$p/stat" 2>/dev/null)
		pc=$(tr '\0' ' ' < "/proc/$pp/cmdline" 2>/dev/null)
		[[ "$pc" == timeout* ]] && echo "$p"
	done | head -1)
	[ -z "$launcher" ] && sleep 0.01
done
done_kills=0
AT=
if [[ "$KILLS" == at:* ]]; then
	AT=${KILLS#at:}
	KILLS=1
fi
for ((k = 0; k < KILLS; k++)); do
	[ -n "$launcher" ] || break
	if [ -n "$AT" ]; then
		for ((w = 0; w < 2000; w++)); do
			grep -qxF -- "$AT" "$T/${TREE_AT_FILE:+obs.d/}${TREE_AT_FILE:-obs}" \
				2>/dev/null && break
			sleep 0.005
		done
	else
		sleep "0.0$(( RANDOM % 9 + 1 ))"
	fi
	kill -0 "$launcher" 2>/dev/null || break
	# init, the root, children, grandchildren
	mapfile -t vv < <(descendants "$launcher")
	v=
	[ ${#vv[@]} -gt 0 ] && v=${vv[$(( RANDOM % ${#vv[@]} ))]}
	if [ -n "$v" ] && kill -9 "$v" 2>/dev/null; then
		done_kills=$((done_kills + 1))
	elif [ -n "$AT" ] && [ "$k" -lt 50 ]; then
		KILLS=$((KILLS + 1)) # the one kill at LINE: another process
	fi
done
wait "$L"
rc=$(cat "$T/rc" 2>/dev/null || echo 99)
L=
echo "kills: $done_kills" >&2
if [ -n "$AT" ] && [ "$done_kills" -eq 0 ]; then
	echo "FAIL: no process of the tree was killed at \"$AT\"" >&2
	exit 1
fi
if [ "$rc" -ne 0 ]; then
	echo "FAIL: the run ended with status $rc" >&2
	tail -20 "$T/obs.err" >&2
	verdict 1
fi
if ! "$EQUIV" "$T/ref" "$T/obs" >&2; then
	echo "FAIL: the output is not equivalent to the failure-free run's" >&2
	verdict 1
fi
for f in $FILES; do
	if ! cmp -s "$T/ref.d/$f" "$T/obs.d/$f"; then
		echo "FAIL: $f differs from the failure-free run's" >&2
		verdict 1
	fi
done
if [ -e "$SHM/run" ]; then
	echo "FAIL: the tree's directory is left behind" >&2
	ls -R "$SHM/run" >&2
	verdict 1
fi
verdict 0
