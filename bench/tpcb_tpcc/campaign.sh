# SPDX-License-Identifier: BSD-3-Clause
#
# campaign.sh -- sourced by the long crash campaigns (kill_campaign.sh,
# versions_crash.sh), from the top of the tree: their arguments and the
# binaries they need
#
#   campaign_args DEFAULT_N LAST_HELP_LINE "$@"
#       sets N (-n N, else DEFAULT_N) and B (BUILD_DIR, default build, as
#       an absolute path) from [-n N] [BUILD_DIR]; -h prints lines
#       3..LAST_HELP_LINE of the calling script (its header comment)
#   campaign_need FILE...
#       each FILE is built (executable), or the script says which is not
#       and exits 1

campaign_args() {
	local dflt=$1 last=$2 build=build
	shift 2
	N=$dflt
	while [ $# -gt 0 ]; do
		case $1 in
		-n) N=$2; shift ;;
		-h | --help) sed -n "3,${last}p" "$0"; exit 0 ;;
		*) build=$1 ;;
		esac
		shift
	done
	B=$(cd "$build" && pwd)
}

campaign_need() {
	local x
	for x in "$@"; do
		[ -x "$x" ] || {
			echo "$(basename "$0"): $x not built" >&2
			exit 1
		}
	done
}
