# Shows the progress of `go build -v` (which names each package as it is
# compiled, on standard error) as a count of the packages compiled out of
# at most `total` (the build's dependencies, standard library included: a
# warm cache compiles few or none of them). On a terminal (tty=1) one line
# is rewritten in place; elsewhere (a CI log) a line is written at every
# tenth of the total. Anything else go build writes (an error) is passed
# on to standard error as it is.
#
#   go build -v ... 2>&1 | awk -v total=N -v tty=0|1 -f scripts/buildprogress.awk
/^[^ \t#:]+$/ {
	n++
	if (tty) {
		printf "\r  compiled %d of at most %d packages", n, total
		fflush()
	} else if (total > 0 && int(n * 10 / total) > step) {
		step = int(n * 10 / total)
		printf "  compiled %d of at most %d packages\n", n, total
		fflush()
	}
	next
}
{
	if (tty && n && !broke) {
		printf "\n"
		broke = 1
	}
	print > "/dev/stderr"
}
END {
	if (tty && n && !broke) printf "\n"
}
