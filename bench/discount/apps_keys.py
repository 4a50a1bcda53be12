#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
#
# apps_keys.py -- the scripts a typist feeds to the interactive programs of
#                 the application study (apps.sh, tests/discount apps.sh)
#
#   apps_keys.py nvi|sc|magic UNITS OUT
#
# About UNITS keys (nvi, sc) or commands (magic), deterministic, written
# to OUT; each ends with the program writing its files and quitting:
#   nvi    f.txt: lines of words typed in insert mode; after every fifth
#          line, Escape, a word of the line above changed (k0cw), the file
#          written (:w), and insert mode again at the end (Go); :wq
#   sc     column A: numbers typed one a cell (=N Enter, then j); every
#          tenth row, in column B, the sum of column A so far; then the
#          values written as text (W vals.txt) and the sheet saved
#          (P out.sc); q
#   magic  boxes painted on layers in the scmos technology, some erased,
#          labelled, copied; the cell saved (save t1); quit -noprompt
# Keys are raw bytes: Enter is "\r", Escape "\x1b".
import random
import sys

WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf",
         "hotel", "india", "juliet", "kilo", "lima", "mike", "november"]


def nvi(units):
    r = random.Random(1)
    k = "i"
    n = 0
    while len(k) < units:
        n += 1
        k += " ".join(r.choice(WORDS) for _ in range(5)) + "\r"
        if n % 5 == 0:
            k += "\x1bk0cw" + r.choice(WORDS).upper() + "\x1b:w\rGo"
    return k + "\x1b:wq\r"


def sc(units):
    r = random.Random(2)
    k = ""
    row = 0
    while len(k) < units:
        k += "=%d\rj" % r.randrange(1, 1000)
        row += 1
        if row % 10 == 0:
            k += "l=@sum(A0:A%d)\rh" % (row - 1)
    return k + "Wvals.txt\rPout.sc\rq"


def magic(units):
    r = random.Random(3)
    layers = ["metal1", "metal2", "poly", "ndiffusion", "pdiffusion"]
    cmds = []
    while len(cmds) < units - 2:
        x, y = r.randrange(0, 200), r.randrange(0, 200)
        w, h = r.randrange(2, 40), r.randrange(2, 40)
        cmds.append("box %d %d %d %d" % (x, y, x + w, y + h))
        c = r.randrange(10)
        if c < 6:
            cmds.append("paint " + r.choice(layers))
        elif c < 8:
            cmds.append("erase " + r.choice(layers))
        elif c < 9:
            cmds.append("label L%d" % len(cmds))
        else:
            cmds.append("select area; copy e 50; select clear")
    return "\n".join(cmds) + "\nsave t1\nquit -noprompt\n"


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("nvi", "sc", "magic"):
        sys.stderr.write("usage: apps_keys.py nvi|sc|magic UNITS OUT\n")
        return 2
    text = globals()[sys.argv[1]](int(sys.argv[2]))
    with open(sys.argv[3], "wb") as f:
        f.write(text.encode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
