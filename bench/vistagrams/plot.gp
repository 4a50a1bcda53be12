# SPDX-License-Identifier: BSD-3-Clause
# plot.gp -- thesis Figure 4.6 from vg-bench's CSV (smallest median per
# size and system):  gnuplot -e "csv='IN'; png='OUT'; domain='D'" plot.gp
set terminal pngcairo size 900,560 font ",11"
set output png
set datafile separator ","
set title "Request/response cycle on the loopback (Vistagrams in the ".domain." domain)"
set xlabel "message size (bytes)"
set ylabel "microseconds per cycle"
set logscale x 2
set key top left
set grid
best(sys) = sprintf("< awk -F, '$3==\"%s\" { k=$2; if (!(k in m) || $4 < m[k]) m[k]=$4 } END { for (k in m) print k \",\" m[k] }' %s | sort -t, -n -k1", sys, csv)
plot best("udp") using 1:2 with linespoints title "raw UDP echo", \
     best("baseline") using 1:2 with linespoints title "baseline (volatile, same protocol)", \
     best("vistagrams") using 1:2 with linespoints title "Vistagrams (recoverable)", \
     best("vistagrams-1tx") using 1:2 with linespoints title "Vistagrams, pipelined client", \
     best("zeromq") using 1:2 with linespoints title "ZeroMQ REQ/REP (TCP)"
