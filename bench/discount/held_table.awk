# SPDX-License-Identifier: BSD-3-Clause
#
# held_table.awk -- the table of a held-output server benchmark
#                   (held_lighttpd.sh, held_memcached.sh) from its CSV
#                   "round,mode,conns,req_per_s,mean_ms,p99_ms,BAD[,X...]":
#                   each point's mean over the rounds, its ratio to
#                   "none" with as many connections, the sum of BAD (its
#                   name the header's), and the mean of every further
#                   column X (named by the header)
#
#   awk -F, -v modes="none 20 50" -v conns="8 64" -f held_table.awk CSV
NR == 1 { nx = NF; for (i = 1; i <= NF; i++) H[i] = $i; next }
{
	k = $2 "," $3; n[k]++
	r[k] += $4; m[k] += $5; p[k] += $6; f[k] += $7
	for (i = 8; i <= nx; i++) x[k, i] += $i
}
END {
	nm = split(modes, M, " "); nc = split(conns, C, " ")
	printf "%-8s %5s | %9s %6s %9s %9s %6s", "mode", "conns",
		"req/s", "ratio", "mean ms", "p99 ms", H[7]
	for (i = 8; i <= nx; i++) printf " %9s", H[i]
	printf "\n"
	for (j = 1; j <= nc; j++)
		for (i = 1; i <= nm; i++) {
			k = M[i] "," C[j]; b = "none," C[j]
			if (!n[k]) continue
			printf "%-8s %5s | %9.0f %6.3f %9.2f %9.1f %6d",
				M[i] == "none" ? "none" : M[i] " ms", C[j],
				r[k] / n[k], n[b] ? r[k] / n[k] / (r[b] / n[b]) : 0,
				m[k] / n[k], p[k] / n[k], f[k]
			for (c = 8; c <= nx; c++) printf " %9.1f", x[k, c] / n[k]
			printf "\n"
		}
}
