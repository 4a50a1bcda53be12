#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# held.sh -- ReViveI/O's disk micro-benchmarks under the buffered protocol
#            (Table 1, Figure 7) and the time from restart to service
#
#   bench/discount/held.sh [--quick] [BUILD_DIR]
#
# 1. RandomWrite and SequentialWrite (dc-bench-diskio): O_DSYNC writes of
#    4, 16 and 64 KiB to a file on the disk (/var/tmp), each acknowledged
#    on standard output, for 1 s each, under: no recovery (the program
#    alone); cpvs (a checkpoint before every acknowledgement); buffered
#    with Buffer and with Rename, the checkpoint directory on tmpfs (Rio's
#    model: the buffer is memory that outlives the process), at intervals
#    of 5, 20, 50 and 120 ms; and buffered with Buffer and Rename, the
#    directory on the disk (every held write fdatasync'ed to the buffer,
#    the files synced at release), at 20, 50 and 120 ms.  Writes per
#    second.
# 2. Restart to service: the writer under buffered (Buffer, 20 ms) is
#    SIGKILLed after 0.5 s and the same command run again; the time from
#    the exec of dc-run to the first acknowledgement the recovered process
#    releases (so it includes up to one interval), against the program's
#    own start to its first acknowledgement without recovery.  Median of 5.
# CSV under bench/results/ (held_diskio.csv, held_restart.csv), a table on
# stdout.  --quick: 4 and 64 KiB, fewer intervals, 0.5 s per point.
set -euo pipefail
cd "$(dirname "$0")/../.."
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
B=${1:-build}
R=bench/results
mkdir -p "$R"
DCRUN=$(realpath "$B/discount/dc-run")
IO=$(realpath "$B/bench/discount/dc-bench-diskio")
M=$(mktemp -d /dev/shm/dc-held-XXXXXX)
D=$(mktemp -d /var/tmp/dc-held-XXXXXX)
trap 'rm -rf "$M" "$D"' EXIT
q() { [ "$QUICK" = 1 ]; }

SECS=1; SIZES="4 16 64"; IVM="5 20 50 120"; IVD="20 50 120"
if q; then SECS=0.5; SIZES="4 64"; IVM="5 50"; IVD="50"; fi
F=$D/file
"$IO" seq 64 0.01 "$F" > /dev/null 2>&1 # the file exists

# point NAME CMD...: writes/s of one run
point() {
	local out
	out=$("$@" 2>&1 >/dev/null | grep -o 'writes=[0-9]* seconds=[0-9.]*' ||
		echo "writes=0 seconds=1")
	echo "$out" | awk -F'[= ]' '{ printf "%.0f", $2 / $4 }'
}

CSV=$R/held_diskio.csv
echo "mode,size_kb,scheme,dir,interval_ms,writes_per_s" > "$CSV"
for mode in random seq; do
	for kb in $SIZES; do
		row() { echo "$mode,$kb,$1,$2,$3,$4" >> "$CSV"; }
		row none - - "$(point "$IO" $mode $kb $SECS "$F")"
		rm -rf "$M/ck"
		row cpvs tmpfs - "$(point "$DCRUN" --dir "$M/ck" --protocol cpvs \
			-- "$IO" $mode $kb $SECS "$F")"
		for s in buffer rename; do
			for iv in $IVM; do
				rm -rf "$M/ck"
				row $s tmpfs $iv "$(point "$DCRUN" --dir "$M/ck" \
					--protocol buffered --interval $iv \
					--disk $s -- "$IO" $mode $kb $SECS "$F")"
			done
			for iv in $IVD; do
				rm -rf "$D/ck"
				row $s disk $iv "$(point "$DCRUN" --dir "$D/ck" \
					--protocol buffered --interval $iv \
					--disk $s -- "$IO" $mode $kb $SECS "$F")"
			done
		done
	done
done
echo "== writes per second (file on the disk, O_DSYNC, each acknowledged)"
column -s, -t < "$CSV"

# restart to service
RS=$R/held_restart.csv
python3 - "$DCRUN" "$IO" "$M/rk" "$F" "$RS" <<'PY'
import os, signal, statistics, subprocess, sys, time
dcrun, io, ck, f, out = sys.argv[1:6]
def first_ack(cmd):
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdout.read(1)
    t = time.monotonic() - t0
    return p, t
plain, rec = [], []
for i in range(5):
    p, t = first_ack([io, "random", "4", "1", f])
    plain.append(t * 1000); p.kill(); p.wait()
    cmd = [dcrun, "--dir", ck, "--protocol", "buffered", "--interval", "20",
           "--", io, "random", "4", "30", f]
    subprocess.run([dcrun, "--discard", "--dir", ck, "--", io], check=False)
    p, _ = first_ack(cmd)
    time.sleep(0.5)
    p.kill(); p.wait()
    p, t = first_ack(cmd)
    rec.append(t * 1000); p.kill(); p.wait()
subprocess.run([dcrun, "--discard", "--dir", ck, "--", io], check=False)
with open(out, "w") as o:
    o.write("what,median_ms,min_ms,max_ms\n")
    for name, v in (("fresh start (no recovery)", plain),
                    ("restart + recovery (buffered 20 ms)", rec)):
        o.write("%s,%.1f,%.1f,%.1f\n" % (name, statistics.median(v), min(v), max(v)))
PY
echo "== time to the first acknowledgement (ms)"
column -s, -t < "$RS"
