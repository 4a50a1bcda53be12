# SPDX-License-Identifier: BSD-3-Clause
# plot.gp -- thesis Figure 4.6 from vg-bench's CSV, and Vistagrams' cost
# over the baseline with its 95% interval:
#   gnuplot -e "csv='IN'; png='OUT'" plot.gp
set terminal pngcairo size 1300,560 font ",11"
set output png
set datafile separator ","
set logscale x 2
set grid
set key top left
set xlabel "message size (bytes)"
# Rows of one system (and domain): size, median, cost, low, high.
sel(sys, dom) = sprintf("< awk -F, '$2==\"%s\" && $3==\"%s\" { print $1 \",\" $4 \",\" $7 \",\" $8 \",\" $9 }' %s", sys, dom, csv)
set multiplot layout 1,2
set title "Request/response cycle on the loopback (median)"
set ylabel "microseconds per cycle"
plot sel("udp", "") using 1:2 with linespoints title "raw UDP echo", \
     sel("baseline", "") using 1:2 with linespoints title "baseline (volatile, same protocol)", \
     sel("vistagrams", "cacheline") using 1:2 with linespoints title "Vistagrams, cacheline (ADR)", \
     sel("vistagrams", "byte") using 1:2 with linespoints title "Vistagrams, byte (eADR, Rio)", \
     sel("vistagrams-1tx", "cacheline") using 1:2 with linespoints title "Vistagrams pipelined, cacheline", \
     sel("vistagrams-1tx", "byte") using 1:2 with linespoints title "Vistagrams pipelined, byte", \
     sel("zeromq", "") using 1:2 with linespoints title "ZeroMQ REQ/REP (TCP)"
set title "Vistagrams minus the baseline, paired by round (95% interval)"
set ylabel "microseconds per cycle"
set key top right
plot sel("vistagrams", "cacheline") using 1:3:4:5 with yerrorlines title "cacheline", \
     sel("vistagrams", "byte") using 1:3:4:5 with yerrorlines title "byte", \
     sel("vistagrams-1tx", "cacheline") using 1:3:4:5 with yerrorlines title "pipelined, cacheline", \
     sel("vistagrams-1tx", "byte") using 1:3:4:5 with yerrorlines title "pipelined, byte", \
     2 with lines dashtype 2 lc rgb "black" title "2 us target"
unset multiplot
