// SPDX-License-Identifier: BSD-3-Clause
// catch_main.cpp -- the Catch2 runner, compiled once for every test program
// Our libraries own the fatal-signal handlers; Catch2 must not take them.
#define CATCH_CONFIG_NO_POSIX_SIGNALS
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
