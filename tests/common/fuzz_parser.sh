#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# fuzz_parser.sh -- build a datagram parser's libFuzzer harness with clang
# and run it for a bounded time.  Exit 77 (skipped) without clang or its
# fuzzer runtime (Debian: clang, libclang-rt-14-dev).
#
#   fuzz_parser.sh SOURCE_ROOT WORK_DIR SECONDS SEEDS_MACRO HARNESS \
#       PARSER_SOURCE INCLUDE_DIR...
#
# HARNESS, PARSER_SOURCE and each INCLUDE_DIR are relative to SOURCE_ROOT;
# the harness built with -DSEEDS_MACRO writes the seed corpus instead.
set -u
src=$1 work=$2 secs=${3:-20} seeds_macro=$4 harness=$5 parser=$6
shift 6
CC=${FUZZ_CC:-clang}
command -v "$CC" >/dev/null || { echo "no $CC: skipped"; exit 77; }
mkdir -p "$work/corpus" "$work/seeds"
incs=(-I"$src/librio/include" -I"$src/librio")
for d in "$@"; do
	incs+=(-I"$src/$d")
done
srcs=("$src/$harness" "$src/$parser" "$src/librio/checksum.c")
flags=(-std=gnu11 -D_GNU_SOURCE -g -O1 -Wall -Werror)
if ! "$CC" "${flags[@]}" -fsanitize=fuzzer,address,undefined \
	-fno-sanitize-recover=all "${incs[@]}" "${srcs[@]}" -lxxhash \
	-o "$work/fuzz_wire" 2>"$work/build.log"; then
	if grep -q "libclang_rt.fuzzer\|cannot find.*fuzzer\|unsupported option" \
		"$work/build.log"; then
		echo "clang has no libFuzzer runtime: skipped"
		cat "$work/build.log"
		exit 77
	fi
	cat "$work/build.log"
	exit 1
fi
"$CC" "${flags[@]}" -D"$seeds_macro" "${incs[@]}" "${srcs[@]}" -lxxhash \
	-o "$work/fuzz_seeds" || exit 1
"$work/fuzz_seeds" "$work/seeds" || exit 1
# Fixed seed per run unless told: FUZZ_SEED=N to vary or replay.
exec "$work/fuzz_wire" -max_total_time="$secs" -max_len=1500 -timeout=10 \
	-seed="${FUZZ_SEED:-1}" -print_final_stats=1 \
	"$work/corpus" "$work/seeds"
