# SPDX-License-Identifier: BSD-3-Clause
#
# shaped_link.sh -- sourced by lighttpd_link.sh and
#                   bench/discount/held_lighttpd.sh --link: two network
#                   namespaces joined by a shaped veth pair, and
#                   lighttpd's configuration
#
#   link_up NS_S NS_C NET RATE QUEUE
#       makes the namespaces NS_S (NET.1) and NS_C (NET.2), joined by a
#       veth pair (NET a /24 of addresses that exist only in them) whose
#       two ends a token-bucket filter shapes to RATE (tc's units) with a
#       burst of 125,000 bytes and a queue of QUEUE bytes; returns 1 when
#       the namespaces cannot be made (no right to), 2 when a later step
#       fails
#   link_down NS...
#       SIGKILLs what still runs in each namespace (started by the caller
#       there) and removes it, with its end of the pair
#   lighttpd_conf FILE ROOT ADDR PORT
#       writes a configuration for one lighttpd process (no workers)
#       serving ROOT on ADDR:PORT, keep-alive without a limit

link_up() {
	local s=$1 c=$2 net=$3
	ip netns add "$s" 2> /dev/null || return 1
	ip netns add "$c" || return 2
	ip link add "v$s" netns "$s" type veth peer name "v$c" netns "$c" \
		2> /dev/null &&
	ip -n "$s" addr add "$net.1/24" dev "v$s" &&
	ip -n "$c" addr add "$net.2/24" dev "v$c" &&
	ip -n "$s" link set lo up && ip -n "$c" link set lo up &&
	ip -n "$s" link set "v$s" up && ip -n "$c" link set "v$c" up &&
	ip netns exec "$s" tc qdisc add dev "v$s" root tbf rate "$4" \
		burst 125000 limit "$5" 2> /dev/null &&
	ip netns exec "$c" tc qdisc add dev "v$c" root tbf rate "$4" \
		burst 125000 limit "$5" 2> /dev/null || return 2
}

link_down() {
	local ns p
	for ns in "$@"; do
		for p in $(ip netns pids "$ns" 2> /dev/null); do
			kill -9 "$p" 2> /dev/null
		done
		ip netns del "$ns" 2> /dev/null
	done
	return 0
}

lighttpd_conf() {
	cat > "$1" <<EOC
server.document-root = "$2"
server.port = $4
server.bind = "$3"
server.errorlog = "$2/../error.log"
server.max-worker = 0
server.max-keep-alive-requests = 1000000
server.max-connections = 2048
server.max-fds = 4096
EOC
}
