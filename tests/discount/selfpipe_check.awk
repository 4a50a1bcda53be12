# SPDX-License-Identifier: BSD-3-Clause
#
# selfpipe_check.awk -- the output of selfpipe_prog.c, checked: the
# numbers 0..N-1 once each and in order, every "names" line naming the
# threads sp-main and sp-prod after each 1000th number but the last, and
# the final "done N SUM" line with the eventfd's total SUM equal to N.
# Prints "ok N" or the first fault, and exits 1 on a fault.
#
#   awk -f selfpipe_check.awk OUTPUT
{
	if (done) { print "fault: a line after done: " $0; bad = 1; exit 1 }
	if ($1 == "done") {
		done = 1
		if ($2 != k || $3 != k) {
			print "fault: done " $2 " " $3 ", " k " numbers read"
			bad = 1; exit 1
		}
		next
	}
	if ($1 == "names") {
		if (k == 0 || k % 1000 != 0 || named == k) {
			print "fault: a names line after number " k
			bad = 1; exit 1
		}
		if ($2 != "sp-main" || $3 != "sp-prod") {
			print "fault: the threads are named " $2 " and " $3 \
				" after number " k
			bad = 1; exit 1
		}
		named = k
		next
	}
	if (NF != 1 || $1 != k) {
		print "fault: line " NR " is \"" $0 "\", number " k " expected"
		bad = 1; exit 1
	}
	if (k > 0 && k % 1000 == 0 && named != k) { # k < N here
		print "fault: no names line after number " k
		bad = 1; exit 1
	}
	k++
}
END {
	if (bad) exit 1
	if (!done) { print "fault: no done line after " k " numbers"; exit 1 }
	print "ok " k
}
