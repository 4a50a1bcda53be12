# SPDX-License-Identifier: BSD-3-Clause
# space.gp -- the thesis' Figure 6.1 and Figures 6.3-6.7 from space.sh's
# table (bench/discount/space.sh runs it)
#   gnuplot -c bench/discount/space.gp DIR
# Reads DIR/space.dat; writes DIR/space.png (the protocol space, each
# application at its best protocol on tmpfs -- filled -- and on ext4 --
# open -- with its overhead) and DIR/protocols.png (one panel per
# application: at each protocol its commits and its overhead on tmpfs and
# on ext4; the game: its frame rate and checkpoints a second).
dir = ARG1
dat = dir . "/space.dat"
set terminal pngcairo size 1000,760 font "sans,10"
set xrange [-0.6:2.6]
set yrange [-0.65:2.65]
set xtics ("none\n(CPVS, CPV-2PC)" 0, "identify\n(CAND, CBNDVS,\nCBNDV-2PC)" 1, \
	"identify and log input\n(-LOG)" 2)
set ytics ("none: commit after\nnon-determinism\n(CAND, CAND-LOG)" 0, \
	"visible events\nand sends\n(CPVS, CBNDVS,\nCBNDVS-LOG)" 1, \
	"visible events only\n(2PC)" 2)
set xlabel "effort to convert non-determinism"
set ylabel "effort to track visible events"
set grid
set key outside right top
set bmargin 8
set xlabel offset 0,-1.5

$protos << EOD
0 1 CPVS
1 0 CAND
1 1 CBNDVS
2 0 CAND-LOG
2 1 CBNDVS-LOG
0 2 CPV-2PC
1 2 CBNDV-2PC
2 2 "(CBNDV-2PC-LOG)"
EOD

apps = system("awk '!/^#/ && !s[$1]++ { printf \"%s \", $1 }' " . dat)
# the best protocol of app a on file system fs: "x y label"
best(a, fs) = sprintf("< awk '$1 == \"%s\" && $3 == \"%s\" && \
	(b == \"\" || $7 + 0 < b + 0) { b = $7; l = $0 } \
	END { if (l != \"\") { split(l, f, \" \"); \
	printf \"%%s %%s \\\"%%s %%s:%%s\\\"\\n\", f[4], f[5], f[1], f[2], \
	(f[8] != \"-\" ? \" \" f[8] \" fps,\" : \"\") \" \" f[7] \"%%\" } }' %s", \
	a, fs, dat)

set output dir . "/space.png"
set title "Recovery protocols in the protocol space (Figure 6.1): each application's best protocol and its overhead\n(filled, below: Discount Checking, tmpfs; open, above: Discount Checking-disk, ext4; overhead: CPU time added, see bench/RESULTS.md)"
n = words(apps)
# below each protocol the applications whose best it is on tmpfs, above
# it those on ext4, one row per application
plot $protos using 1:2 with points pt 4 ps 3 lc rgb "gray50" notitle, \
	'' using 1:2:3 with labels offset -2.5,0 right tc rgb "gray30" notitle, \
	for [i = 1:n] best(word(apps, i), "tmpfs") using \
		($1 + 0.02):($2 - 0.05 - 0.085 * i):3 with labels point pt 7 ps 1.2 \
		lc i offset 0.8,0 left font ",8" title word(apps, i) . " (tmpfs)", \
	for [i = 1:n] best(word(apps, i), "ext4") using \
		($1 + 0.02):($2 + 0.05 + 0.085 * i):3 with labels point pt 6 ps 1.2 \
		lc i offset 0.8,0 left font ",8" title word(apps, i) . " (ext4)"

# Figures 6.3-6.7: app a's rows, "x y protocol commits tmpfs/ext4"
panel(a) = sprintf("< awk '$1 == \"%s\" { k = $2; x[k] = $4; y[k] = $5; \
	if ($3 == \"tmpfs\") { c[k] = $6; t[k] = ($8 != \"-\" ? $8 \"fps \" : \"\") $7 \"%%\" } \
	else e[k] = ($8 != \"-\" ? $8 \"fps \" : \"\") $7 \"%%\" } \
	END { for (k in x) printf \"%%s %%s %%s %%s \\\"%%s / %%s\\\"\\n\", x[k], y[k], k, \
	c[k], (k in t ? t[k] : \"-\"), (k in e ? e[k] : \"-\") }' %s", a, dat)
set output dir . "/protocols.png"
set terminal pngcairo size 1500,1000 font "sans,9"
unset key
unset xlabel
unset ylabel
set xtics ("none" 0, "identify" 1, "log" 2)
set ytics ("after ND" 0, "vis+send" 1, "2PC" 2)
unset xlabel
set xlabel offset 0,0
set bmargin
set multiplot layout 2,3 title "Figures 6.3-6.7: commits (game: checkpoints/s) and overhead tmpfs/ext4 (game: fps and CPU overhead)"
do for [i = 1:n] {
	a = word(apps, i)
	set title a
	plot panel(a) using 1:2 with points pt 7 ps 1.2 lc rgb "gray40", \
		'' using 1:2:3 with labels offset 0,1.6 font ",9", \
		'' using 1:2:4 with labels offset 0,-1.2 font ",8", \
		'' using 1:2:5 with labels offset 0,-2.2 font ",8"
}
unset multiplot
