#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# run.sh -- the libckr experiments of Cao et al. (SIGMOD'11) and their plots
#
#   bench/ckr/run.sh BUILD_DIR OUT_DIR [what ...]
#
# what: fig5 (Zipf overhead per rate, all algorithms and Vista, file
# storage, with the per-interval series of Figures 8-9), pool (the same on
# rio pools), huge (the same with transparent huge pages, Figure 14),
# mmo (Figures 10-11), sweep (state size 100 MB - 1.6 GB at 0.08% and
# 2.56% of the state per second, Figures 6-7), sweep3 (the 2.56% sweep in
# three interleaved rounds: medians and ranges), pages (4 KB pages, THP
# and hugetlb side by side at four rates, Figure 14: reserves
# vm.nr_hugepages for the run if root, and puts it back), tpcc (TPC-C
# with logical logging under each algorithm against the ARIES-style
# baseline on /dev/shm and on CKR_DISK_DIR, Figures 12-13), tpccipp (IPP's
# TPC-C loss taken apart: one checkpoint only, THP).  Default: all of
# them but tpccipp.
# Storage goes to /dev/shm (CKR_DIR overrides); then gnuplot -c
# bench/ckr/plot.gp OUT_DIR draws the figures.  The mutator runs on one
# core and the writer on the other of whatever the machine has.
set -e
build=${1:?build dir}
out=${2:?output dir}
shift 2
what=${*:-fig5 pool huge mmo sweep pages tpcc}
t=$build/bench/ckr/ckr-tpcc
disk=${CKR_DISK_DIR:-/var/tmp}
z=$build/bench/ckr/ckr-zipf
d=${CKR_DIR:-/dev/shm}
R=${CKR_REPS:-3}
ckr=naive,bacou,bazz,ipp,fork
all=$ckr,vista
mkdir -p "$out"

for w in $what; do
	case $w in
	fig5)
		$z -a $ckr -R $R -d "$d" -T "$out/series-file" \
			>"$out/fig5-file.txt"
		$z -a vista -t 320000 -R $R -d "$d" \
			-T "$out/series-vista" >"$out/fig5-vista.txt" ;;
	pool)
		$z -a $ckr -R $R -d "$d" -S pool -T "$out/series-pool" \
			>"$out/fig5-pool.txt" ;;
	huge)
		$z -a $ckr -R $R -d "$d" -H -T "$out/series-huge" \
			>"$out/fig14-huge.txt" ;;
	mmo)
		$z -w mmo -a $all -R $R -d "$d" -T "$out/series-mmo" \
			>"$out/fig10-mmo.txt" ;;
	sweep)
		# 0.08% and 2.56% of the state's words per second, as in the
		# paper (40,960 and 1,310,720 updates/s at 200 MB)
		for pct in 0.08 2.56; do
			f=$out/sweep-$pct.dat
			algos=$ckr
			[ $pct = 0.08 ] && algos=$all
			echo "# MB raw $(echo $algos | tr , ' ')" >"$f"
			for n in 12500 25000 50000 100000 200000; do
				rate=$(awk "BEGIN{printf \"%d\", $n*2048*$pct/100}")
				$z -o $n -r $rate -t 0 -a $algos -R 2 -n 2 -d "$d" \
					>"$out/sweep-$pct-$n.txt"
				awk -v mb=$((n * 8192 / 1000000)) \
					'/^ *updates\/s +raw_ms/ { getline; $1 = mb; print; exit }' \
					"$out/sweep-$pct-$n.txt" >>"$f"
			done
		done ;;
	sweep3)
		# Figure 7 again: 2.56% of the state per second, three
		# repetitions interleaved (each size once per round, so a
		# burst of load hits one round), then per size and algorithm
		# the median and the range of the three
		f=$out/sweep3-2.56.dat
		raw=$out/sweep3-2.56-runs.dat
		: >"$raw"
		for rep in 1 2 3; do
			for n in 12500 25000 50000 100000 200000; do
				rate=$(awk "BEGIN{printf \"%d\", $n*2048*2.56/100}")
				$z -o $n -r $rate -t 0 -a $ckr -R 1 -n 2 -d "$d" \
					>"$out/sweep3-$n-r$rep.txt"
				awk -v mb=$((n * 8192 / 1000000)) -v rep=$rep \
					'/^ *updates\/s +raw_ms/ { getline; $1 = mb " " rep; print; exit }' \
					"$out/sweep3-$n-r$rep.txt" >>"$raw"
			done
		done
		# MB, then median min max of raw and each algorithm
		echo "# MB raw(med min max) $(echo $ckr | tr , ' ') (med min max each)" >"$f"
		sort -n -k1,1 -k2,2 "$raw" | awk '
			{ k = $1; n[k]++; for (i = 3; i <= NF; i++) v[k, n[k], i] = $i; nf = NF; keys[k] = 1 }
			END {
				for (k in keys) {
					line = k
					for (i = 3; i <= nf; i++) {
						a = v[k, 1, i]; b = v[k, 2, i]; c = v[k, 3, i]
						lo = a; if (b < lo) lo = b; if (c < lo) lo = c
						hi = a; if (b > hi) hi = b; if (c > hi) hi = c
						med = a + b + c - lo - hi
						line = line " " med " " lo " " hi
					}
					print line
				}
			}' | sort -n >>"$f" ;;
	pages)
		# 205 MB of state: IPP's records and copy plus the raw array
		# need about 620 pages of 2 MiB
		old=$(cat /proc/sys/vm/nr_hugepages)
		if [ "$(id -u)" = 0 ] && [ "$old" -lt 700 ]; then
			echo 700 >/proc/sys/vm/nr_hugepages
		fi
		r=80000,320000,1280000,5120000
		for p in 4k thp hugetlb; do
			f=
			[ $p = thp ] && f=-H
			[ $p = hugetlb ] && f=-G
			$z -a naive,bacou,bazz,ipp -r $r -t 0 -R $R -d "$d" $f \
				>"$out/fig14-$p.txt" || true
		done
		[ "$(id -u)" = 0 ] && echo "$old" >/proc/sys/vm/nr_hugepages
		;;
	tpcc)
		$t -w 1,2,4 -t 5 -R $R -d "$d" -T "$out/tpcc-shm" \
			>"$out/fig12-tpcc-shm.txt"
		$t -w 1,2,4 -t 5 -R $R -d "$disk" -T "$out/tpcc-file" \
			>"$out/fig12-tpcc-file.txt" ;;
	tpccipp)
		# where IPP's TPC-C loss comes from: one checkpoint only (-i:
		# no writer after the first), 4 KB pages and THP
		$t -a none,naive,ipp -w 1 -t 4 -R $R -i 100000 -d "$d" \
			>"$out/tpcc-ipp-1ck.txt"
		$t -a none,naive,ipp -w 1 -t 4 -R $R -i 100000 -H thp -d "$d" \
			>"$out/tpcc-ipp-1ck-thp.txt"
		$t -a none,naive,ipp -w 1 -t 4 -R $R -H thp -d "$d" \
			>"$out/tpcc-ipp-thp.txt" ;;
	*) echo "run.sh: unknown experiment $w" >&2; exit 2 ;;
	esac
done
