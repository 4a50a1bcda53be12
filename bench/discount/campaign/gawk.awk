# campaign program for gawk: one input line (a number) per step
{
	s = 0
	for (i = 1; i <= 120000; i++)
		s = (s * 7 + i * $1) % 1000003
	sum += s
	printf "%2d %7d %d\n", NR, s, sum
	fflush()
	print NR, s, sum > "out.txt"
}
END { close("out.txt") }
