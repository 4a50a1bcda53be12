# SPDX-License-Identifier: BSD-3-Clause
#
# launcher.sh -- sourced by the 2PC kill tests (twopc_kill.sh,
# game_2pc_kill.sh): each process of a computation under a launcher that
# starts it again when a signal ended it, as a user would.  The caller
# sets T (a scratch directory) and the array pids (the launchers).
#
#   launch NAME CMD...  run CMD until it ends other than by a signal;
#                       T/pid.NAME is its current pid, T/restarts.NAME
#                       counts its restarts, T/rc.NAME its final status,
#                       T/err.NAME its standard error
#   stop_all            end the launchers, then what they ran
#   report              (on a failure) the coordinator's counters, and
#                       each process's state and restarts

launch() {
	local name=$1 rc
	shift
	while :; do
		"$@" 2>>"$T/err.$name" &
		put "$T/pid.$name" $!
		{ wait $!; } 2>/dev/null
		rc=$?
		[ $rc -ge 128 ] || break
		put "$T/restarts.$name" \
			$(( $(cat "$T/restarts.$name" 2>/dev/null || echo 0) + 1 ))
	done
	put "$T/rc.$name" $rc
}

# FILE VALUE: FILE holds VALUE, whole, from the moment it exists (the
# tests poll for these files and read them at once: a file made by `>`
# is seen empty before its write)
put() {
	local tmp=$T/.put.$BASHPID # a dot name: no glob of T matches it
	echo "$2" >"$tmp" && mv -f "$tmp" "$1"
}

# the launchers first, then what they ran (twice: one may have started
# a process as it was stopped); only the launchers are waited for
stop_all() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
	for i in 1 2; do
		for f in "$T"/pid.*; do
			[ -e "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null
		done
		sleep 0.1
	done
	[ ${#pids[@]} -gt 0 ] && wait "${pids[@]}" 2>/dev/null
	pids=()
}

# On a failure: the coordinator's counters (T/coord.stats), and each
# process's state (alive or not, what it waits in, how often it was
# restarted).
report() {
	[ -e "$T/coord.stats" ] && tr '\n' ' ' <"$T/coord.stats" >&2 && echo >&2
	local f p name
	for f in "$T"/pid.*; do
		[ -e "$f" ] || continue
		p=$(cat "$f") name=${f##*/pid.}
		printf '%s: pid %s, restarts %s, ' "$name" "$p" \
			"$(cat "$T/restarts.$name" 2>/dev/null || echo 0)" >&2
		if [ -r "/proc/$p/stat" ]; then
			echo "state $(cut -d' ' -f3 "/proc/$p/stat"), in" \
				"$(cat "/proc/$p/wchan" 2>/dev/null)" >&2
		else
			echo "ended (rc $(cat "$T/rc.$name" 2>/dev/null || echo '?'))" >&2
		fi
	done
}
