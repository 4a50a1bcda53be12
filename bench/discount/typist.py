#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
#
# typist.py -- feed a script to a program one line at a time, at typing
#              speed, and measure it
#
#   typist.py MS_PER_LINE SCRIPT -- command args...
#
# The command's standard input is a pipe the lines are written to, one
# every MS_PER_LINE milliseconds; its output goes to /dev/null (a character
# device: a visible event for Discount Checking).  Prints one line:
#   wall_seconds cpu_seconds
# where cpu is the user + system time of the command (and its children).
import os
import resource
import subprocess
import sys
import time


def main():
    if len(sys.argv) < 5 or sys.argv[3] != "--":
        sys.stderr.write("usage: typist.py MS_PER_LINE SCRIPT -- cmd...\n")
        return 2
    period = float(sys.argv[1]) / 1000.0
    with open(sys.argv[2], "rb") as f:
        lines = f.read().splitlines(keepends=True)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(sys.argv[4:], stdin=subprocess.PIPE,
                             stdout=null, stderr=null)
        nxt = t0
        for line in lines:
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                p.stdin.write(line)
                p.stdin.flush()
            except BrokenPipeError:
                break
        p.stdin.close()
        p.wait()
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + \
        (after.ru_stime - before.ru_stime)
    print("%.4f %.4f" % (wall, cpu))
    return 0 if p.returncode == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
