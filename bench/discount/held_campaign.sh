#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# held_campaign.sh -- the long version of tests/discount [held-crash]: the
#                     writer killed at random under Buffer and Rename
#
#   bench/discount/held_campaign.sh [-n KILLS] [BUILD_DIR]
#
# Runs the suite's campaign (held_test.cpp) with KILLS kills per scheme
# (default 200; the suite makes 12 on tmpfs, 3 on a disk file system),
# the datagram sender's campaign with KILLS / 2 kills per scheme (the
# suite makes 8), then the broken builds' campaigns, which must fail.  Exit 0 when every
# campaign of the real build passed and every broken one was caught.
set -euo pipefail
cd "$(dirname "$0")/../.."
N=200
if [ "${1:-}" = "-n" ]; then N=$2; shift 2; fi
B=${1:-build}
ninja -C "$B" tests/discount/dc_held tests/discount/dc-test-held \
	tests/discount/dc-test-held-cp tests/discount/dc-test-held-broken-early \
	tests/discount/dc-test-held-broken-order tests/discount/dc-test-udp \
	tests/discount/dc-test-udp-broken-early > /dev/null
T=$(realpath "$B/tests/discount")
export DC_TEST_HELD=$T/dc-test-held DC_TEST_HELD_CP=$T/dc-test-held-cp
export DC_TEST_HELD_BROKEN_EARLY=$T/dc-test-held-broken-early
export DC_TEST_HELD_BROKEN_ORDER=$T/dc-test-held-broken-order
export DC_TEST_UDP=$T/dc-test-udp DC_TEST_UDP_BROKEN_EARLY=$T/dc-test-udp-broken-early
export LD_LIBRARY_PATH=$(realpath "$B/discount"):$(realpath "$B/librio")
start=$(date +%s)
ND=$((N / 10 + 1)); [ $ND -ge 3 ] || ND=3 # the disk campaign wants 3
CRASH_ITERATIONS=$N "$T/dc_held" "[held-crash]" \
	-c "a writer killed at random under Buffer and Rename leaves the checkpoint's file plus the committed held writes, never torn"
CRASH_ITERATIONS=$ND "$T/dc_held" "[held-crash]" \
	-c "on a disk file system (every append synced) the same holds"
CRASH_ITERATIONS=$((N / 2 + 1)) "$T/dc_held" "[held-udp]"
"$T/dc_held" "[held-broken-early],[held-broken-order],[held-buffer],[held-udp-broken-early]"
echo "held campaign: $N kills per scheme on tmpfs, $ND on disk," \
	"broken builds caught: $(( $(date +%s) - start )) s"
