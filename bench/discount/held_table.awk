# SPDX-License-Identifier: BSD-3-Clause
#
# held_table.awk -- the table of a held-output server benchmark
#                   (held_lighttpd.sh, held_memcached.sh) from its CSV
#                   "round,mode,conns,req_per_s,mean_ms,p99_ms,BAD": each
#                   point's mean over the rounds, its ratio to "none"
#                   with as many connections, and the sum of BAD
#
#   awk -F, -v modes="none 20 50" -v conns="8 64" -v bad=failed \
#       -f held_table.awk CSV
NR > 1 {
	k = $2 "," $3; n[k]++
	r[k] += $4; m[k] += $5; p[k] += $6; f[k] += $7
}
END {
	nm = split(modes, M, " "); nc = split(conns, C, " ")
	printf "%-8s %5s | %9s %6s %9s %9s %6s\n", "mode", "conns",
		"req/s", "ratio", "mean ms", "p99 ms", bad
	for (j = 1; j <= nc; j++)
		for (i = 1; i <= nm; i++) {
			k = M[i] "," C[j]; b = "none," C[j]
			if (!n[k]) continue
			printf "%-8s %5s | %9.0f %6.3f %9.2f %9.1f %6d\n",
				M[i] == "none" ? "none" : M[i] " ms", C[j],
				r[k] / n[k], n[b] ? r[k] / n[k] / (r[b] / n[b]) : 0,
				m[k] / n[k], p[k] / n[k], f[k]
		}
}
