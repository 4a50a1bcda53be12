#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# veth_bench.sh -- the paper's Table 1 (sbml-bench) on loopback and on a
# veth pair between two network namespaces, in one run.
#
#   bench/sbml/veth_bench.sh BUILD_DIR [ITERATIONS [REPS]]
#
# Needs root (ip netns add, ip link add ... type veth).  Creates the
# namespaces sbml-a-PID and sbml-b-PID joined by a veth pair with
# 10.213.PID%250.1/24 and .2/24, runs sbml-bench in the first with its
# server in the second (sbml-bench -N), and deletes both namespaces (and
# with them the pair) on exit, whatever happens.
set -eu
build=${1:?usage: veth_bench.sh BUILD_DIR [ITERATIONS [REPS]]}
iters=${2:-5000}
reps=${3:-3}
ninja -C "$build" bench/sbml/sbml-bench >/dev/null
bench=$(realpath "$build/bench/sbml/sbml-bench")
a=sbml-a-$$ b=sbml-b-$$ net=10.213.$(( $$ % 250 ))
cleanup() {
	ip netns del "$a" 2>/dev/null || true
	ip netns del "$b" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$a"
ip netns add "$b"
ip link add "va$$" netns "$a" type veth peer name "vb$$" netns "$b"
ip -n "$a" addr add "$net.1/24" dev "va$$"
ip -n "$b" addr add "$net.2/24" dev "vb$$"
for ns in "$a" "$b"; do
	ip -n "$ns" link set lo up
done
ip -n "$a" link set "va$$" up
ip -n "$b" link set "vb$$" up

echo "sbml veth_bench: $(date -u '+%F %H:%M') UTC," \
	"load $(cut -d' ' -f1-3 /proc/loadavg)"
"$bench" -n "$iters" -r "$reps"
echo
ip netns exec "$a" "$bench" -n "$iters" -r "$reps" -L "veth between namespaces" \
	-A "$net.1:7001,$net.2:7001" -N "$b"
