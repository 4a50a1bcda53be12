# SPDX-License-Identifier: BSD-3-Clause
# plot.gp -- Cao et al. (SIGMOD'11) Figures 5-14 from bench/ckr/run.sh
#   gnuplot -c bench/ckr/plot.gp OUT_DIR
# Reads OUT_DIR/fig5-file.txt, fig5-vista.txt, fig5-pool.txt,
# fig14-huge.txt, fig14-{4k,thp,hugetlb}.txt, fig10-mmo.txt (ckr-zipf's
# output), series-*.dat, sweep-*.dat, fig12-tpcc-{shm,file}.txt and
# tpcc-*.dat (ckr-tpcc's); writes OUT_DIR/fig*.png.  Every figure: the mutator on one
# core and the writer on the other of a 2-core VM shared with other load.
dir = ARG1
set terminal pngcairo size 1000,600 font "sans,10"
set grid
set key below
nonempty(f) = int(system("test -s " . f . " && echo 1 || echo 0"))
# the first table of a ckr-zipf output (rate, raw, one column per algorithm)
table(f) = sprintf("< awk '/updates\\/s +raw_ms/ {t = 1; next} t && NF == 0 {exit} t' '%s'", f)
# the algorithm names of that table and of a series/sweep file
tnames(f) = system(sprintf("awk '/updates\\/s +raw_ms/ {for (i = 3; i <= NF; i++) printf \"%%s \", $i; exit}' '%s'", f))
snames(f) = system(sprintf("head -1 '%s' | cut -d' ' -f4-", f))
note = "mutator and writer share 2 vCPUs with other load"

# Figure 5 (and its pool, huge-page and Vista companions): overhead per
# checkpoint period against the update rate.
set logscale xy
set xlabel "updates per second"
set ylabel "overhead per checkpoint period, ms (log)"
do for [s in "file pool"] {
	f = dir . "/fig5-" . s . ".txt"
	if (nonempty(f)) {
		n = tnames(f)
		v = dir . "/fig5-vista.txt"
		set output dir . "/fig5-" . s . ".png"
		set title "Zipf, 200 MB, " . s . " storage: overhead (paper Fig. 5); " . note
		if (s eq "file" && nonempty(v)) {
			plot for [i = 1:words(n)] table(f) using 1:(column(i + 2) > 0 ? column(i + 2) : 1/0) with linespoints title word(n, i), \
			     table(v) using 1:3 with linespoints title "vista"
		} else {
			plot for [i = 1:words(n)] table(f) using 1:(column(i + 2) > 0 ? column(i + 2) : 1/0) with linespoints title word(n, i)
		}
	}
}

# Figure 14: huge pages against small pages, per algorithm.
f = dir . "/fig14-huge.txt"
g = dir . "/fig5-file.txt"
if (nonempty(f) && nonempty(g)) {
	n = tnames(f)
	set output dir . "/fig14-huge.png"
	set title "Zipf, 200 MB: 4 KB pages (dashed) and transparent huge pages (solid) (paper Fig. 14); " . note
	plot for [i = 1:words(n)] table(f) using 1:(column(i + 2) > 0 ? column(i + 2) : 1/0) with linespoints lc i dt 1 title word(n, i) . " huge", \
	     for [i = 1:words(n)] table(g) using 1:(column(i + 2) > 0 ? column(i + 2) : 1/0) with linespoints lc i dt 2 title word(n, i) . " 4 KB"
}

# Figures 6 and 7: overhead against the state size.
unset logscale x
set xlabel "state size, MB"
do for [p in "0.08 2.56"] {
	f = dir . "/sweep-" . p . ".dat"
	if (nonempty(f)) {
		n = snames(f)
		set output dir . "/fig" . (p eq "0.08" ? "6" : "7") . "-sweep-" . p . ".png"
		set title "Zipf, " . p . "% of the state updated per second (paper Fig. " . (p eq "0.08" ? "6" : "7") . "); " . note
		plot for [i = 1:words(n)] f using 1:(column(i + 2) > 0 ? column(i + 2) : 1/0) with linespoints title word(n, i)
	}
}

# Figures 8, 9 and 11: mutator time per 0.1 s interval over time.
unset logscale
set logscale y
set xlabel "0.1 s interval"
set ylabel "mutator time per interval, ms (log)"
do for [s in "cpu-320000 cpu-1280000 file-320000 file-1280000 vista-320000 pool-320000 pool-1280000 huge-320000 huge-1280000 mmo-0"] {
	f = dir . "/series-" . s . ".dat"
	if (nonempty(f)) {
		n = system("head -1 '" . f . "' | cut -d' ' -f3-")
		fig = (s eq "mmo-0") ? "11" : (strstrt(s, "1280000") ? "9" : "8")
		set output dir . "/fig" . fig . "-series-" . s . ".png"
		set title "mutator time per 0.1 s interval, " . s . " (paper Fig. " . fig . "); " . note
		plot for [i = 1:words(n)] f using 1:(column(i + 1)) with linespoints title word(n, i)
	}
}

# Figure 10: MMO overhead per checkpoint period, one bar per algorithm.
f = dir . "/fig10-mmo.txt"
if (nonempty(f)) {
	unset logscale
	set logscale y
	n = tnames(f)
	set output dir . "/fig10-mmo.png"
	set title "MMO, 2,000 players: overhead per checkpoint period (paper Fig. 10); " . note
	set style fill solid 0.6 border -1
	set boxwidth 0.6
	set xlabel ""
	set ylabel "overhead per checkpoint period, ms (log)"
	set xrange [-0.5:words(n) - 0.5]
	set xtics () 
	do for [i = 1:words(n)] { set xtics add (word(n, i) i - 1) }
	plot for [i = 1:words(n)] table(f) using (i - 1):(column(i + 2) > 0 ? column(i + 2) : 1/0) with boxes lc i notitle
}

# Figure 14 again, the three page sizes measured side by side
# (run.sh pages): 4 KB dotted, THP dashed, hugetlb solid.
f4 = dir . "/fig14-4k.txt"
ft = dir . "/fig14-thp.txt"
fh = dir . "/fig14-hugetlb.txt"
if (nonempty(f4) && nonempty(ft) && nonempty(fh)) {
	unset xrange
	set xtics auto
	set logscale xy
	set xlabel "updates per second"
	set ylabel "overhead per checkpoint period, ms (log)"
	n = tnames(f4)
	set output dir . "/fig14-pages.png"
	set title "Zipf, 200 MB: 4 KB (dotted), THP (dashed), hugetlb (solid) (paper Fig. 14); " . note
	plot for [i = 1:words(n)] table(fh) using 1:(column(i + 2) > 0 ? column(i + 2) : 1/0) with linespoints lc i dt 1 title word(n, i) . " hugetlb", \
	     for [i = 1:words(n)] table(ft) using 1:(column(i + 2) > 0 ? column(i + 2) : 1/0) with linespoints lc i dt 2 title word(n, i) . " THP", \
	     for [i = 1:words(n)] table(f4) using 1:(column(i + 2) > 0 ? column(i + 2) : 1/0) with linespoints lc i dt 3 title word(n, i) . " 4 KB"
}

# Figure 12: TPC-C throughput against warehouses, per mode and storage
# (ckr-tpcc's table: W mode MB tx/s neword/s ... cpu_tx/s).  The paper
# plots new-orders per second of wall-clock time; on this shared VM the
# wall clock measures the other load, so the plot is the transactions per
# second of the mutator's own CPU time (column 18).  fig12-tpcc-shm*.txt:
# every file of one storage (a warehouse count may have run apart).
unset logscale
unset xrange
set xtics auto
set xlabel "warehouses (about 113 MB each)"
set ylabel "transactions per second of mutator CPU time"
modes = "none naive bacou bazz ipp fork aries"
do for [s in "shm file"] {
	f = dir . "/fig12-tpcc-" . s . ".txt"
	if (nonempty(f)) {
		set output dir . "/fig12-tpcc-" . s . ".png"
		set title "TPC-C, groups of 500, checkpoints as often as the writer allows, " . s . " (paper Fig. 12); mutator+logger on CPU 0, writer on CPU 1, shared VM"
		plot for [m in modes] sprintf("< cat '%s'* | awk '$2 == \"%s\"' | sort -n", dir . "/fig12-tpcc-" . s, m) using 1:18 with linespoints title m
	}
}

# Figure 13: TPC-C response time of each group of 500 over time.
set xlabel "time, s"
set ylabel "group response time, ms (log)"
set logscale y
do for [s in "shm file"] {
	do for [w in "1 4"] {
		g = dir . "/tpcc-" . s . "-" . w . "-naive.dat"
		if (nonempty(g)) {
			set output dir . "/fig13-tpcc-" . s . "-" . w . ".png"
			set title "TPC-C, " . w . " warehouse(s), " . s . ": response time per group of 500 (paper Fig. 13); mutator+logger on CPU 0, writer on CPU 1, shared VM"
			plot for [m in "naive ipp aries"] dir . "/tpcc-" . s . "-" . w . "-" . m . ".dat" using 2:3 with lines title m
		}
	}
}

# Figure 7 again (run.sh sweep3): medians of three interleaved rounds,
# bars from the least to the most.
f = dir . "/sweep3-2.56.dat"
if (nonempty(f)) {
	unset logscale
	set logscale xy
	set xlabel "state size, MB"
	set ylabel "overhead per checkpoint period, ms (log)"
	unset key
	set key below
	n = "naive bacou bazz ipp fork"
	set output dir . "/fig7-sweep3-2.56.png"
	set title "Zipf, 2.56% of the state per second, median and range of 3 rounds (paper Fig. 7); " . note
	plot for [i = 1:5] f using 1:(column(2 + 3 * i)):(column(3 + 3 * i)):(column(4 + 3 * i)) with yerrorlines title word(n, i)
}
