#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bench.sh -- set everything up, build, and run the main benchmark on
# emulated pmem (/dev/shm): the thesis' debit-credit and order-entry
# comparison (bench/tpcb_tpcc/run.sh; --full runs everything).
set -euo pipefail

cd "$(dirname "$0")/.."
./scripts/bootstrap.sh build
echo "== the machine's persistence domains (riotool info) =="
./build/tools/riotool/riotool info /dev/shm "${TMPDIR:-/tmp}"
echo
echo "== debit-credit and order-entry: vista, pmemobj, rvm, rvm-rio (bench/tpcb_tpcc/run.sh) =="
./bench/tpcb_tpcc/run.sh "$@" build
