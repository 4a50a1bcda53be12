# SPDX-License-Identifier: BSD-3-Clause
# plot.gp -- thesis Figures 3.4-3.6 from tpcbench's summary files
#   gnuplot -c bench/tpcb_tpcc/plot.gp bench/results
# Summary columns: 1 workload, 2 label, 3 backend, 4 domain, 5 group,
# 6 threads, 7 tx_size, 8 tx_per_s, 9 ns_per_tx, 10 overhead_ns, ...
dir = ARG1
set datafile separator ","
set terminal pngcairo size 1000,600 font "sans,10"
set grid ytics
set key below

nonempty(f) = int(system("test -s " . f . " && echo 1 || echo 0"))

# Throughput per configuration, log scale (Figures 3.5, 3.6): a and b.
set style fill solid 0.6 border -1
set boxwidth 0.6
set logscale y
set ylabel "transactions per second (log)"
set xtics rotate by -30 left
set bmargin 9
do for [w in "debit-credit order-entry"] {
	fig = (w eq "debit-credit") ? "3.5" : "3.6"
	do for [part in "a b"] {
		f = dir . "/" . w . (part eq "a" ? "" : "-group") . ".summary.csv"
		if (nonempty(f)) {
			set output dir . "/fig" . fig . part . "-" . w . (part eq "a" ? "" : "-group") . ".png"
			set title w . (part eq "a" ? ": throughput per backend" : ": RVM with group commit 1 / 8 / 64") . " (thesis Fig. " . fig . part . ")"
			plot f using 0:8:xtic(2) skip 1 with boxes notitle, \
			     f using 0:8:(sprintf("%.0f", column(8))) skip 1 with labels offset 0,0.7 notitle
		}
	}
}

# Overhead per transaction against transaction size, log-log (Fig. 3.4).
unset xtics
set xtics nomirror rotate by 0
set bmargin
set logscale xy
set format x "%.0s%cB"
set xlabel "bytes modified per transaction"
set ylabel "overhead per transaction, ns (log)"
# Rows of one configuration: grep on ",backend,domain,group," columns.
keys = "vista,byte vista,cacheline vista,page pmemobj,byte pmemobj,cacheline pmemobj,page rvm,-,1 rvm-rio,byte,1 rvm-rio,cacheline,1 rvm-rio,page,1"
names = "vista/byte vista/cacheline vista/page pmemobj/byte pmemobj/cacheline pmemobj/page rvm rvm-rio/byte rvm-rio/cacheline rvm-rio/page"
rows(f, k) = sprintf("< grep -F ',%s,' '%s'", k, f)
f = dir . "/synthetic.summary.csv"
if (nonempty(f)) {
	set output dir . "/fig3.4a-synthetic-overhead.png"
	set title "synthetic: overhead per transaction (thesis Fig. 3.4a)"
	plot for [i = 1:words(keys)] rows(f, word(keys, i)) \
		using 7:($10 > 0 ? $10 : NaN) with linespoints title word(names, i)
}
g = dir . "/synthetic-group.summary.csv"
if (nonempty(g)) {
	set output dir . "/fig3.4b-rvm-group-overhead.png"
	set title "synthetic: RVM overhead with group commit (thesis Fig. 3.4b)"
	plot for [b in "rvm,- rvm-rio,cacheline"] for [n in "1 8 64"] \
		rows(g, b . "," . n) using 7:($10 > 0 ? $10 : NaN) \
		with linespoints title (b eq "rvm,-" ? "rvm" : "rvm-rio (cacheline)") . " group " . n
}
