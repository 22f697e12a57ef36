#!/usr/bin/env bash
# Runs every fuzz target in the module for $FUZZTIME (default 5s) each.
# Go runs one fuzz target per invocation, so they are listed and run in turn.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5s}
count=0
for pkg in $($GO list ./...); do
	for target in $($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzz $pkg $target ($FUZZTIME)"
		# Minimizing a new interesting input may otherwise run for up to a
		# minute, past a short -fuzztime, and the engine then reports the
		# deadline as a failure; a crasher is still saved, only less minimal.
		if ! out=$($GO test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 1s "$pkg" 2>&1); then
			echo "$out"
			echo "fuzz: $pkg $target FAILED (the failing input is saved under testdata/fuzz)"
			exit 1
		fi
		count=$((count + 1))
	done
done
echo "fuzz: $count targets ran for $FUZZTIME each without a failure"
