# SPDX-License-Identifier: BSD-3-Clause
#
# thread_check.awk -- the output of thread_prog.c, checked: line k is
# update k, each worker's updates 0..N-1 once each and in order, the hash
# chain recomputed over every line, and the final "done" line naming the
# number of updates and the last hash.  Prints "ok UPDATES THREADS" or
# the first fault, and exits 1 on a fault.
#
#   awk -f thread_check.awk OUTPUT
{
	if ($1 == "done") {
		if (done) { print "fault: two done lines"; bad = 1; exit 1 }
		done = 1
		if ($2 != k || $3 != h) {
			print "fault: done " $2 " " $3 ", lines say " k " " h
			bad = 1; exit 1
		}
		next
	}
	if (done) { print "fault: a line after done: " $0; bad = 1; exit 1 }
	if (NF != 4 || $1 != k) {
		print "fault: line " NR " is \"" $0 "\", update " k " expected"
		bad = 1; exit 1
	}
	t = $2; i = $3
	if (i != next_i[t] + 0) {
		print "fault: thread " t " update " i ", expected " (next_i[t] + 0)
		bad = 1; exit 1
	}
	next_i[t] = i + 1
	h = (h * 31 + t * 100003 + i) % 1000000007
	if ($4 != h) {
		print "fault: update " k " hash " $4 ", chain says " h
		bad = 1; exit 1
	}
	k++
}
END {
	if (bad) exit 1
	if (!done) { print "fault: no done line after " k " updates"; exit 1 }
	n = 0
	for (t in next_i) n++
	print "ok " k " " n
}
