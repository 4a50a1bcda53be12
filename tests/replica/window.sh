# SPDX-License-Identifier: BSD-3-Clause
# window.sh -- sourced by crash.sh and pcrash.sh
#
# within_window MODE CHECK_OUTPUT WINDOW: a 1-safe promotion of the active
# or the passive backup loses at most the loss window the tool reported:
# vr_dc check's "missing N" against the window, which the backup holds
# durably (the primary returns no 1-safe commit past the limit the backup
# has granted).  Prints why not, and fails, otherwise.
within_window() {
	case $1 in 1safe | 1safe-whole | 1safe-sdiff) ;; *) return 0 ;; esac
	local miss
	miss=$(sed -n 's/.*missing \([0-9]*\).*/\1/p' <<< "$2")
	if [ -z "$3" ]; then
		echo "; BAD: no loss window reported"; return 1
	fi
	if [ "${miss:-0}" -gt "$3" ]; then
		echo "; BAD: $miss acknowledged transaction(s) lost, more than the reported loss window"
		return 1
	fi
}
