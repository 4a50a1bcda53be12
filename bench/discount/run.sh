#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run.sh -- Discount Checking benchmarks (thesis Figures 5.2-5.4, 6.3-6.5)
#
#   bench/discount/run.sh [--quick] [BUILD_DIR]
#
# 1. micro: overhead per checkpoint vs bytes touched, minimum checkpoint
#    (Figure 5.2): dc-bench-micro (libdc, every dirty-tracking mechanism
#    side by side: userfaultfd write protection + PAGEMAP_SCAN and a redo
#    log, mprotect + SIGSEGV and a redo log, and the thesis' design --
#    the memory moved into a persistent segment, mprotect + SIGSEGV and
#    an undo log) and dc-bench-wp (the same mechanism on libvista's
#    automatic ranges)
# 2. interval sweep: cjpeg and gzip under dc-run --protocol periodic,
#    relative run time and redo (undo-log) bytes per checkpoint vs the
#    checkpoint interval, 1 ms .. 10 s (Figures 5.3/5.4)
# 3. tracking: gzip -9 with a checkpoint every 1 and 10 ms under every
#    dirty-tracking mechanism (dc-run --tracking uffd|wp|undo)
# 4. protocols: bc, lua5.4 and ed fed a script at typing speed under every
#    protocol: checkpoints taken and run-time ratio (Figures 6.3-6.5)
# Tables on stdout; CSV and PNG (gnuplot) under bench/results/.  Run times
# are the CPU time (user + system) of the measured program, which other
# load on a shared machine does not inflate; wall-clock time is in the CSV
# too.  --quick: smaller inputs and fewer repetitions (about 2 minutes).
set -euo pipefail
cd "$(dirname "$0")/../.."
QUICK=0
if [ "${1:-}" = "--quick" ]; then QUICK=1; shift; fi
B=${1:-build}
R=bench/results
mkdir -p "$R"
DCRUN=$B/discount/dc-run
TYPIST=bench/discount/typist.py
W=$(mktemp -d /dev/shm/dc-bench-XXXXXX)
trap 'rm -rf "$W"' EXIT
N="nice -n 5"
q() { [ "$QUICK" = 1 ]; }

# measure CMD...: prints "wall cpu" (seconds) of CMD, its output discarded
measure() {
	python3 - "$@" <<'PY'
import resource, subprocess, sys, time
b = resource.getrusage(resource.RUSAGE_CHILDREN)
t = time.monotonic()
r = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL)
w = time.monotonic() - t
a = resource.getrusage(resource.RUSAGE_CHILDREN)
print("%.4f %.4f" % (w, a.ru_utime - b.ru_utime + a.ru_stime - b.ru_stime))
sys.exit(r.returncode)
PY
}
# stat FILE KEY: a counter from dc-run --stats
stat() { sed -n "s/^$2=//p" "$1"; }
ratio() { python3 -c "print('%.3f' % ($1 / $2))"; }

echo "== micro (Figure 5.2): us per checkpoint, uffd, wp and undo tracking"
$N "$B/bench/discount/dc-bench-micro" $(q && echo --quick) \
	--dir "$W/micro" --csv "$R/discount_micro.csv"
echo
echo "== the write-protect design's mechanism (libvista VISTA_TX_AUTO)"
LD_LIBRARY_PATH=$B/libvista:$B/librio $N "$B/bench/discount/dc-bench-wp" \
	$(q && echo --quick) --dir "$W/wp" --csv "$R/discount_wp.csv"

echo
echo "== interval sweep (Figures 5.3/5.4)"
if q; then SIDE=1536; TEXT=4; REP=3; IVS="1 10 100 1000";
else SIDE=4096; TEXT=32; REP=3; IVS="1 10 100 1000 10000"; fi
python3 - "$W" "$SIDE" "$TEXT" <<'PY'
import random, sys
w, side, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
random.seed(1)
# a gradient with noise; each row a shifted slice of one long pattern
pat = bytes(((x * 3 + random.randrange(24)) & 255)
            for x in range(side * 3 + 4096))
with open(w + "/in.ppm", "wb") as f:
    f.write(b"P6\n%d %d\n255\n" % (side, side))
    for y in range(side):
        o = (y * 37) % 4096
        f.write(pat[o:o + side * 3])
words = ["alpha", "beta", "gamma", "delta", "kappa", "omega", "sigma",
         "persistent", "memory", "checkpoint", "recovery", "vista"]
with open(w + "/in.txt", "w") as f:
    n = 0
    while n < mib << 20:
        line = " ".join(random.choice(words) for _ in range(12)) + "\n"
        f.write(line)
        n += len(line)
PY
# median of REP runs of a command: "wall cpu"
median() {
	local runs=()
	for _ in $(seq "$REP"); do runs+=("$(measure "$@")"); done
	printf '%s\n' "${runs[@]}" | sort -k2 -n | sed -n "$(( (REP + 1) / 2 ))p"
}
echo "program,interval_ms,wall_s,cpu_s,ratio,checkpoints,redo_bytes_per_ckpt,redo_bytes_max" \
	> "$R/discount_interval.csv"
printf "%-6s %9s %8s %8s %7s %11s %12s\n" program interval cpu_s wall_s ratio checkpoints redo_KB/ckpt
# xz is not used: it makes a pipe to itself for its signal handling, which
# Discount Checking refuses (docs/discount.md)
for prog in cjpeg gzip; do
	if [ $prog = cjpeg ]; then
		cmd=(cjpeg -quality 95 -optimize -progressive -dct float
			-outfile "$W/out.jpg" "$W/in.ppm")
	else
		cmd=(gzip -9 -c "$W/in.txt")
	fi
	read -r bw bc < <(median $N "${cmd[@]}")
	printf "%-6s %9s %8s %8s %7s\n" $prog none "$bc" "$bw" 1.000
	echo "$prog,0,$bw,$bc,1.000,0,0,0" >> "$R/discount_interval.csv"
	for iv in $IVS; do
		read -r w c < <(median $N "$DCRUN" --dir "$W/ck" \
			--protocol periodic --interval "$iv" \
			--stats "$W/stats" -- "${cmd[@]}")
		n=$(stat "$W/stats" checkpoints)
		tot=$(stat "$W/stats" redo_bytes_total)
		max=$(stat "$W/stats" redo_bytes_max)
		per=$(( tot / n ))
		r=$(ratio "$c" "$bc")
		printf "%-6s %9s %8s %8s %7s %11s %12s\n" "" "${iv}ms" "$c" \
			"$w" "$r" "$n" "$(( per / 1024 ))"
		echo "$prog,$iv,$w,$c,$r,$n,$per,$max" >> "$R/discount_interval.csv"
	done
done

echo
echo "== dirty tracking on a real program: gzip -9, periodic checkpoints"
echo "interval_ms,tracking,wall_s,cpu_s,ratio,checkpoints,pages_copied,wp_faults" \
	> "$R/discount_tracking.csv"
printf "%9s %8s %8s %8s %7s %11s %8s %9s\n" interval tracking cpu_s wall_s \
	ratio checkpoints pages wp_faults
cmd=(gzip -9 -c "$W/in.txt")
read -r bw bc < <(median $N "${cmd[@]}")
for iv in 1 10; do
	for tr in uffd wp undo; do
		read -r w c < <(median $N "$DCRUN" --dir "$W/ck" \
			--protocol periodic --interval "$iv" --tracking "$tr" \
			--stats "$W/stats" -- "${cmd[@]}")
		n=$(stat "$W/stats" checkpoints)
		pg=$(stat "$W/stats" pages_copied)
		wf=$(stat "$W/stats" wp_faults)
		r=$(ratio "$c" "$bc")
		printf "%9s %8s %8s %8s %7s %11s %8s %9s\n" "${iv}ms" "$tr" "$c" \
			"$w" "$r" "$n" "$pg" "$wf"
		echo "$iv,$tr,$w,$c,$r,$n,$pg,$wf" >> "$R/discount_tracking.csv"
	done
done

echo
echo "== protocols (Figures 6.3-6.5): scripted programs at typing speed"
if q; then LINES=40; MS=20; else LINES=150; MS=50; fi
for i in $(seq 1 "$LINES"); do
	echo "a[$i]=a[$((i-1))]+$i; a[$i]*3/7"
done > "$W/bc.in"
for i in $(seq 1 $((LINES / 2))); do
	echo "t[$i] = (t[$((i-1))] or 1) * 3 % 1000003"
	echo "t[$i] .. \":\" .. #t"
done > "$W/lua.in"
{ echo a; for i in $(seq 1 $((LINES / 3 - 1))); do echo "line $i"; done
  echo .
  for i in $(seq 1 $((LINES / 3 - 1))); do echo "${i}s/line/LINE/"; echo "${i}p"; done
  echo "w $W/ed.out"; echo q; } > "$W/ed.in"
REPL=tests/discount/repl.lua
echo "program,protocol,wall_s,cpu_s,wall_ratio,cpu_per_wall,checkpoints" \
	> "$R/discount_protocols.csv"
printf "%-5s %-11s %8s %8s %10s %12s %11s\n" program protocol wall_s cpu_s wall_ratio cpu/wall_% checkpoints
for prog in bc lua ed; do
	case $prog in
	bc) cmd=(bc -q) ;;
	lua) cmd=(lua5.4 "$REPL") ;;
	ed) cmd=(ed -s) ;;
	esac
	read -r bw bc < <($N python3 "$TYPIST" "$MS" "$W/$prog.in" -- "${cmd[@]}")
	printf "%-5s %-11s %8s %8s %10s %12s %11s\n" $prog none "$bw" "$bc" 1.000 \
		"$(python3 -c "print('%.2f' % (100 * $bc / $bw))")" 0
	echo "$prog,none,$bw,$bc,1.000,$(python3 -c "print('%.5f' % ($bc / $bw))"),0" \
		>> "$R/discount_protocols.csv"
	for p in cpvs cand cbndvs cand-log cbndvs-log; do
		rm -f "$W/ed.out"
		read -r w c < <($N python3 "$TYPIST" "$MS" "$W/$prog.in" -- \
			"$DCRUN" --dir "$W/ck-$prog" --protocol $p \
			--stats "$W/stats" -- "${cmd[@]}")
		n=$(stat "$W/stats" checkpoints)
		printf "%-5s %-11s %8s %8s %10s %12s %11s\n" "" $p "$w" "$c" \
			"$(ratio "$w" "$bw")" \
			"$(python3 -c "print('%.2f' % (100 * $c / $w))")" "$n"
		echo "$prog,$p,$w,$c,$(ratio "$w" "$bw"),$(python3 -c "print('%.5f' % ($c / $w))"),$n" \
			>> "$R/discount_protocols.csv"
	done
done

if command -v gnuplot > /dev/null; then
	gnuplot <<GP
set terminal pngcairo size 900,560 font "sans,11"
set datafile separator ","
set grid
set key top left

set output "$R/discount_micro.png"
set title "Discount Checking: cost per checkpoint vs bytes touched (Fig. 5.2)"
set logscale xy
set xlabel "bytes touched per checkpoint interval (0 plotted at 1 KiB)"
set ylabel "CPU microseconds per checkpoint"
set xtics ("0" 1024, "4K" 4096, "16K" 16384, "64K" 65536, "256K" 262144, "1M" 1048576)
plot "$R/discount_micro.csv" every ::1 using (\$1 > 0 ? \$1 : 1024):3 \
	with linespoints lw 2 pt 7 title "libdc --tracking uffd (uffd-wp + scan, redo): overhead (call + faults)", \
     "" every ::1 using (\$1 > 0 ? \$1 : 1024):7 \
	with linespoints lw 2 pt 5 title "libdc --tracking wp (mprotect + SIGSEGV, redo): overhead (call + faults)", \
     "" every ::1 using (\$1 > 0 ? \$1 : 1024):11 \
	with linespoints lw 2 pt 13 title "libdc --tracking undo (segment + SIGSEGV, undo log): overhead (call + faults)", \
     "$R/discount_wp.csv" every ::1 using (\$1 > 0 ? \$1 : 1024):3 \
	with linespoints lw 2 pt 9 dt 2 title "write protect + undo (libvista TX\\\\_AUTO): overhead"

set output "$R/discount_interval.png"
set title "Relative run time vs checkpoint interval (Fig. 5.3)"
unset logscale; set logscale x
set xtics auto
set xlabel "checkpoint interval (ms)"
set ylabel "run time under dc-run / run time alone (CPU)"
set key top right
plot "< grep ^cjpeg, $R/discount_interval.csv | grep -v ',0,'" using 2:5 \
	with linespoints lw 2 pt 7 title "cjpeg", \
     "< grep ^gzip, $R/discount_interval.csv | grep -v ',0,'" using 2:5 \
	with linespoints lw 2 pt 5 title "gzip -9"

set output "$R/discount_undo.png"
set title "Redo (undo-log) bytes per checkpoint vs interval (Fig. 5.4)"
set logscale xy
set ylabel "KiB logged per checkpoint"
plot "< grep ^cjpeg, $R/discount_interval.csv | grep -v ',0,'" using 2:(\$7/1024) \
	with linespoints lw 2 pt 7 title "cjpeg", \
     "< grep ^gzip, $R/discount_interval.csv | grep -v ',0,'" using 2:(\$7/1024) \
	with linespoints lw 2 pt 5 title "gzip -9"

set output "$R/discount_protocols.png"
set multiplot layout 1,2 title "Protocols at typing speed (Figs. 6.3-6.5)"
unset logscale
set style data histograms
set xlabel "protocol"
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set boxwidth 0.9
set xtics rotate by -30
set key top left
set title "checkpoints taken"
set ylabel "checkpoints (log scale)"
set logscale y
set yrange [0.8:*]
plot "< grep ^bc, $R/discount_protocols.csv | grep -v none" using 7:xtic(2) title "bc", \
     "< grep ^lua, $R/discount_protocols.csv | grep -v none" using 7 title "lua5.4", \
     "< grep ^ed, $R/discount_protocols.csv | grep -v none" using 7 title "ed"
set title "run time / run time alone (wall; target < 1.02)"
set ylabel "ratio"
unset logscale
set yrange [0.95:1.05]
plot "< grep ^bc, $R/discount_protocols.csv | grep -v none" using 5:xtic(2) title "bc", \
     "< grep ^lua, $R/discount_protocols.csv | grep -v none" using 5 title "lua5.4", \
     "< grep ^ed, $R/discount_protocols.csv | grep -v none" using 5 title "ed"
unset multiplot
GP
	echo
	echo "plots: $R/discount_{micro,interval,undo,protocols}.png"
fi
