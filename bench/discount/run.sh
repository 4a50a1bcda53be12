#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
#
# run.sh -- Discount Checking benchmarks (thesis Figures 5.2-5.4, 6.3-6.5)
#
#   bench/discount/run.sh [BUILD_DIR]
#
# 1. micro: overhead per checkpoint vs bytes touched (Figure 5.2)
# 2. interval sweep: cjpeg and xz under dc-run --protocol periodic,
#    relative run time vs checkpoint interval 1 ms .. 10 s (Figures 5.3/5.4)
# 3. protocols: bc fed a script at typing speed, checkpoints and run-time
#    ratio per protocol (Figures 6.3-6.5)
# Tables on stdout, CSV under bench/results/, PNGs when gnuplot exists.
set -euo pipefail
cd "$(dirname "$0")/../.."
B=${1:-build}
R=bench/results
mkdir -p "$R"
DCRUN=$B/discount/dc-run
W=$(mktemp -d /dev/shm/dc-bench-XXXXXX)
trap 'rm -rf "$W"' EXIT

echo "== micro (Figure 5.2)"
nice "$B/bench/discount/dc-bench-micro" "$W/micro" "$R/discount_micro.csv"

echo "== interval sweep (Figures 5.3/5.4)"
# inputs: a 2 MiB test image for cjpeg, 8 MiB of text for xz
python3 - "$W" <<'PY'
import sys, random
w = sys.argv[1]
random.seed(1)
W, H = 1024, 683
with open(w + "/in.ppm", "wb") as f:
    f.write(b"P6\n%d %d\n255\n" % (W, H))
    f.write(bytes((x * 7 + y * 3 + random.randrange(16)) & 255
                  for y in range(H) for x in range(W * 3)))
words = ["alpha", "beta", "gamma", "delta", "kappa", "omega", "sigma"]
with open(w + "/in.txt", "w") as f:
    f.write(" ".join(random.choice(words) for _ in range(1400000)))
PY
t() { /usr/bin/time -f %e "$@" 2>&1 >/dev/null | tail -1; }
echo "program,interval_ms,seconds,ratio,checkpoints" > "$R/discount_interval.csv"
for prog in cjpeg xz; do
	if [ $prog = cjpeg ]; then cmd=(cjpeg -quality 90 -outfile "$W/out.jpg" "$W/in.ppm");
	else cmd=(xz -T1 -6 -c -k "$W/in.txt"); fi
	base=$( { /usr/bin/time -f %e "${cmd[@]}" > /dev/null; } 2>&1 | tail -1)
	printf "%-6s %10s %10s %8s\n" "$prog" "interval" "seconds" "ratio"
	printf "%-6s %10s %10s %8s\n" "" "none" "$base" "1.000"
	for iv in 1 10 100 1000 10000; do
		s=$( { /usr/bin/time -f %e "$DCRUN" --dir "$W/ck-$prog-$iv" \
			--protocol periodic --interval $iv -- "${cmd[@]}" > /dev/null; } 2>&1 | tail -1)
		ratio=$(python3 -c "print('%.3f' % ($s / $base))")
		printf "%-6s %10s %10s %8s\n" "" "${iv}ms" "$s" "$ratio"
		echo "$prog,$iv,$s,$ratio," >> "$R/discount_interval.csv"
	done
done

echo "== protocols (Figures 6.3-6.5): bc at typing speed"
for i in $(seq 1 100); do echo "a[$i]=a[$((i-1))]+$i; a[$i]*3/7"; done > "$W/bc.in"
slow() { while IFS= read -r l; do printf '%s\n' "$l"; sleep 0.01; done < "$W/bc.in"; }
base=$( { /usr/bin/time -f %e bash -c "$(declare -f slow); W=$W slow | bc -q > /dev/null"; } 2>&1 | tail -1)
echo "protocol,seconds,ratio" > "$R/discount_protocols.csv"
printf "%-12s %8s %8s\n" protocol seconds ratio
printf "%-12s %8s %8s\n" none "$base" 1.000
for p in cpvs cand cbndvs cand-log cbndvs-log; do
	s=$( { /usr/bin/time -f %e bash -c "$(declare -f slow); W=$W slow | $DCRUN --dir $W/ck-bc-$p --protocol $p -- bc -q > /dev/null"; } 2>&1 | tail -1)
	ratio=$(python3 -c "print('%.3f' % ($s / $base))")
	printf "%-12s %8s %8s\n" "$p" "$s" "$ratio"
	echo "$p,$s,$ratio" >> "$R/discount_protocols.csv"
done

if command -v gnuplot >/dev/null; then
	gnuplot <<GP
set terminal png size 800,500
set datafile separator ","
set output "$R/discount_micro.png"
set logscale x
set xlabel "bytes touched per checkpoint interval"
set ylabel "microseconds per checkpoint"
plot "$R/discount_micro.csv" every ::1 using (\$1 > 0 ? \$1 : 1024):2 with linespoints title "uffd-wp async + redo/shadow"
GP
fi
