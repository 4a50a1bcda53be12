#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# kill_campaign.sh -- the sbml kill test with many kills: one of four
# processes of the paper's programs (bench/sbml/apps.c: nqueens, tsp,
# gauss, and request/reply nqueens with a token ring, in turn, under
# Discount Checking) SIGKILLed at a time and restarted, every output
# compared with a failure-free run.  The suite's version (sbml-kill) makes
# 200 kills.
#
#   bench/sbml/kill_campaign.sh BUILD_DIR [KILLS [SEED [PROGRAMS]]]
#
# PROGRAMS: a comma list of nqcalls, nqueens, tsp, gauss (default all).
set -eu
build=${1:?usage: kill_campaign.sh BUILD_DIR [KILLS [SEED [PROGRAMS]]]}
kills=${2:-1000}
seed=${3:-$RANDOM}
progs=${4:-nqcalls,nqueens,tsp,gauss}
ninja -C "$build" tests/sbml/sbml_kill tests/sbml/sbml-kill-prog >/dev/null
echo "sbml kill campaign: $kills kills over $progs, seed $seed"
SBML_KILLS=$kills SBML_SEED=$seed SBML_PROGS=$progs \
	"$build/tests/sbml/sbml_kill" '[kill]' --success 2>&1 |
	grep -E "kills in|every output|FAILED|passed|failed" || true
exit "${PIPESTATUS[0]}"
