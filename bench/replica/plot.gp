# SPDX-License-Identifier: BSD-3-Clause
# plot.gp -- Amza et al. Figures 2-3 from tables.sh's fig23-*.csv
#   gnuplot -c bench/replica/plot.gp bench/results/replica
# Columns: 1 configuration, 2 tx/s with 1 stream, 3 tx/s with 2 streams.
dir = ARG1
set datafile separator ","
set grid ytics
set key top right
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.7 border -1
set boxwidth 0.9
set ylabel "aggregate transactions per second"
set xtics rotate by -25 left
set bmargin 6
set yrange [0:*]
do for [i = 2:3] {
	w = (i == 2) ? "debit-credit" : "order-entry"
	f = dir . "/fig23-" . w . ".csv"
	do for [t in "pngcairo svg"] {
		if (t eq "svg") {
			set terminal svg size 900,500 font "sans,11"
			set output dir . "/fig" . i . "-" . w . ".svg"
		} else {
			set terminal pngcairo size 900,500 font "sans,10"
			set output dir . "/fig" . i . "-" . w . ".png"
		}
		set title w . ": 1 and 2 independent streams on the primary, 10 MB each (Amza et al. Fig. " . i . ")\n2-vCPU VM, primary and backup processes on the same host, loopback TCP"
		plot f using 2:xtic(1) title "1 stream", \
		     f using 3 title "2 streams"
	}
}
