#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# bootstrap.sh -- install what the project needs (Debian 12) and build it.
# Idempotent: packages already present are not reinstalled, and an existing
# build directory is reconfigured, not recreated.
#
#   ./scripts/bootstrap.sh [BUILD_DIR] [-- extra meson setup options]
#
# With BUILD_SUITE=NAME only the targets that suite's tests need are built
# (scripts/suite-targets.py); run it with `meson test --no-rebuild`.
set -euo pipefail

cd "$(dirname "$0")/.."
BUILD=${1:-build}
shift || true
[ "${1:-}" = "--" ] && shift

# Every Debian package the project uses, one per line, grouped by user.
PACKAGES=(
	# toolchain and build
	build-essential
	meson
	ninja-build
	pkg-config
	# librio, libvista: persistent memory and checksums
	libpmem-dev
	libpmem2-dev
	libpmemobj-dev
	libndctl-dev
	libxxhash-dev
	# the Rio file cache (index; sqlite3 is the unmodified program tested)
	liburcu-dev
	sqlite3
	# libvista
	# libvistagrams (clang + libclang-rt-14-dev: the parser's libFuzzer
	# harness; libzmq3-dev: the ZeroMQ peer in vg-bench; gnuplot-nox: its plot)
	clang
	libclang-rt-14-dev
	libzmq3-dev
	gnuplot-nox
	# discount (the crash tests run these unmodified; benchmarks use cjpeg, gzip)
	bc
	lua5.4
	ed
	libjpeg-turbo-progs
	gzip
	# discount: the kill campaign (bench/discount/campaign.sh) adds gawk
	gawk
	# python3 with C extensions (_bz2, _lzma) loaded by dlopen: the
	# discount [dlopen] test
	python3
	# discount: terminal programs recovered in a tmux pane (sc, nvi)
	tmux
	sc
	nvi
	# discount: the application study (bench/discount/apps.sh; magic -dnull)
	magic
	# discount: a TCP server under dc-run --protocol buffered (lighttpd,
	# unmodified) and its client (ab) (bench/discount/held_lighttpd.sh)
	lighttpd
	apache2-utils
	# discount: a threaded server under dc-run --protocol buffered
	# (memcached -t 4, unmodified: dc-held-memcached, held_memcached.sh)
	memcached
	# tools/pmemtest (addr2line symbolizes call sites)
	binutils
	# bench/tpcb_tpcc
	gnuplot-nox
	# tests
	catch2
	libclang-rt-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
		missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "bootstrap: installing ${missing[*]}"
	SUDO=
	[ "$(id -u)" -eq 0 ] || SUDO=sudo
	export DEBIAN_FRONTEND=noninteractive
	$SUDO apt-get update -qq
	$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [ -f "$BUILD/build.ninja" ]; then
	meson configure "$BUILD" "$@" >/dev/null
else
	meson setup "$BUILD" "$@"
fi
if [ -n "${BUILD_SUITE:-}" ]; then
	# introspection is only as new as the last generation: regenerate
	# first if a meson.build changed since
	ninja -C "$BUILD" build.ninja >/dev/null
	mapfile -t targets < <(scripts/suite-targets.py "$BUILD" "$BUILD_SUITE")
	[ ${#targets[@]} -gt 0 ] || exit 1
	ninja -C "$BUILD" "${targets[@]}"
else
	ninja -C "$BUILD"
fi
