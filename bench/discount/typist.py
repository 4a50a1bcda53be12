#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
#
# typist.py -- feed a script to a program at typing speed, and measure it
#
#   typist.py [--pty] [--keys] [--screen FILE] [--prompt STR] [--timeout S]
#             MS_PER_UNIT SCRIPT -- command args...
#
# By default the command's standard input is a pipe the script's lines are
# written to, one every MS_PER_UNIT milliseconds; its output goes to
# /dev/null (a character device: a visible event for Discount Checking).
#
#   --pty     the command runs on a pseudo-terminal of 80x24 (its standard
#             input, output and error, and its controlling terminal, in a
#             session of its own), as a user's terminal program would;
#             what it writes is read from the master side and discarded
#             (or kept, --screen).  TERM is xterm unless set.
#   --keys    one byte of the script every MS_PER_UNIT milliseconds (a
#             key), not one line
#   --screen FILE   the bytes the program wrote to its terminal
#   --prompt STR    (--pty) the first unit is typed MS_PER_UNIT after the
#             program first wrote STR (its prompt: a user waits for it);
#             the run fails if that takes more than the timeout
#   --timeout S     seconds the program has to end after the last unit
#             (default 20); then it is killed and the run fails
#
# Prints one line:
#   wall_seconds cpu_seconds
# where cpu is the user + system time of the command (and its waited-for
# children): for a program under dc-run, which execs it, that includes
# libdc's own work in the process.  Exit status 1 when the command failed
# or did not end in time.
import os
import resource
import select
import signal
import subprocess
import sys
import time


def usage():
    sys.stderr.write("usage: typist.py [--pty] [--keys] [--screen FILE] "
                     "[--prompt STR] [--timeout S] MS SCRIPT -- cmd...\n")
    return 2


def main():
    args = sys.argv[1:]
    pty_mode = keys = False
    screen = prompt = None
    timeout = 20.0
    while args and args[0].startswith("--") and args[0] != "--":
        a = args.pop(0)
        if a == "--pty":
            pty_mode = True
        elif a == "--keys":
            keys = True
        elif a == "--screen" and args:
            screen = args.pop(0)
        elif a == "--prompt" and args:
            prompt = args.pop(0).encode()
        elif a == "--timeout" and args:
            timeout = float(args.pop(0))
        else:
            return usage()
    if len(args) < 4 or args[2] != "--":
        return usage()
    period = float(args[0]) / 1000.0
    with open(args[1], "rb") as f:
        data = f.read()
    units = [data[i:i + 1] for i in range(len(data))] if keys \
        else data.splitlines(keepends=True)
    cmd = args[3:]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    if pty_mode:
        rc = run_pty(cmd, units, period, t0, screen, prompt, timeout)
    else:
        rc = run_pipe(cmd, units, period, t0, timeout)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + \
        (after.ru_stime - before.ru_stime)
    print("%.4f %.4f" % (wall, cpu))
    return 0 if rc == 0 else 1


def run_pipe(cmd, units, period, t0, timeout):
    with open(os.devnull, "wb") as null:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE,
                             stdout=null, stderr=null)
        nxt = t0
        for u in units:
            nxt += period
            delay = nxt - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            try:
                p.stdin.write(u)
                p.stdin.flush()
            except BrokenPipeError:
                break
        p.stdin.close()
        try:
            return p.wait(timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
            sys.stderr.write("typist.py: %s did not end\n" % cmd[0])
            return 1


def run_pty(cmd, units, period, t0, screen, prompt, timeout):
    import fcntl
    import pty
    import struct
    import termios
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 80, 0, 0))
    env = dict(os.environ)
    env.setdefault("TERM", "xterm")

    def child_setup():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    p = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave,
                         env=env, preexec_fn=child_setup, close_fds=True)
    os.close(slave)
    out = open(screen, "wb") if screen else None
    i = 0
    nxt = t0 + period
    deadline = None
    dead = False
    seen = b""
    if prompt:
        nxt = float("inf")
        deadline = t0 + timeout
    # The master side is read whenever the program writes (a terminal
    # that is not read would block it); a unit is written at its time.
    while True:
        now = time.monotonic()
        if i < len(units) and now >= nxt:
            try:
                os.write(master, units[i])
            except OSError:
                i = len(units)
            i += 1
            nxt += period
            continue
        if i >= len(units) and deadline is None:
            deadline = now + timeout
        if deadline is not None and (dead or now >= deadline):
            break
        wait = min(nxt - now, 0.05)
        if deadline is not None:
            wait = min(wait, deadline - now)
        r, _, _ = select.select([master], [], [], max(0.0, wait))
        if r:
            try:
                b = os.read(master, 65536)
            except OSError:  # EIO: every slave descriptor closed
                b = b""
            if not b:
                dead = True
            else:
                if out:
                    out.write(b)
                if prompt:
                    seen = (seen + b)[-4096:]
                    if prompt in seen:
                        prompt = None
                        deadline = None
                        nxt = time.monotonic() + period
        if p.poll() is not None and not r:
            dead = True
    if out:
        out.close()
    os.close(master)
    if p.poll() is None:
        try:
            p.wait(0.5)
        except subprocess.TimeoutExpired:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
            sys.stderr.write("typist.py: %s did not end\n" % cmd[0])
            return 1
    if i < len(units):
        sys.stderr.write("typist.py: %s ended (status %d) before its "
                         "script, or never showed its prompt\n"
                         % (cmd[0], p.returncode))
        return 1
    return p.returncode


if __name__ == "__main__":
    sys.exit(main())
