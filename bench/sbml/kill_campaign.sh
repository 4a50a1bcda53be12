#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kill_campaign.sh -- the sbml kill test with many kills: one of four
# processes (distributed nqueens, then a token ring, under Discount
# Checking) SIGKILLed at a time and restarted, every output compared with
# a failure-free run.  The suite's version (sbml-kill) makes 20 kills.
#
#   bench/sbml/kill_campaign.sh BUILD_DIR [KILLS [SEED]]
set -eu
build=${1:?usage: kill_campaign.sh BUILD_DIR [KILLS [SEED]]}
kills=${2:-200}
seed=${3:-$RANDOM}
ninja -C "$build" tests/sbml/sbml_kill tests/sbml/sbml-kill-prog >/dev/null
echo "sbml kill campaign: $kills kills, seed $seed"
SBML_KILLS=$kills SBML_SEED=$seed "$build/tests/sbml/sbml_kill" '[kill]' \
	--success 2>&1 | grep -E "kills in|FAILED|passed|failed" || true
exit "${PIPESTATUS[0]}"
