#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
#
# suite-targets.py -- print the ninja targets the tests of one suite need.
#
#   scripts/suite-targets.py BUILD_DIR SUITE
#
# Reads meson's introspection of a configured build directory and prints,
# one per line, the output files (relative to BUILD_DIR) of every target a
# test of SUITE depends on: its executable, the targets in its arguments and
# its `depends`.  ninja builds what those need in turn, so
# `ninja -C BUILD_DIR $(scripts/suite-targets.py BUILD_DIR SUITE)` followed by
# `meson test --no-rebuild --suite SUITE` runs the suite without building
# the rest of the tree.  Exits 1 if no test is in SUITE.
import json
import os
import subprocess
import sys


def introspect(build, what):
    out = subprocess.check_output(["meson", "introspect", what, build])
    return json.loads(out)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: suite-targets.py BUILD_DIR SUITE")
    build, suite = sys.argv[1], sys.argv[2]
    # meson names a test's suites "project:suite"
    tests = [t for t in introspect(build, "--tests")
             if any(s.split(":")[-1] == suite for s in t["suite"])]
    if not tests:
        sys.exit("suite-targets.py: no test in suite '%s'" % suite)
    need = {d for t in tests for d in t.get("depends", [])}
    root = os.path.abspath(build)
    for target in introspect(build, "--targets"):
        if target["id"] in need:
            for f in target["filename"]:
                print(os.path.relpath(f, root))


if __name__ == "__main__":
    main()
