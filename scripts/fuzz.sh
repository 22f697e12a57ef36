#!/usr/bin/env bash
# Runs every fuzz target in the module (or in $FUZZPKGS) for $FUZZTIME (default 5s) each.
# Go runs one fuzz target per invocation, so they are listed and run in turn.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
FUZZTIME=${FUZZTIME:-5s}
count=0
# fuzz runs one target once. Go's fuzzing coordinator can report its own
# -fuzztime deadline as the failure "context deadline exceeded" when the
# deadline lands while a worker is busy (the coordinator wakes on the expired
# context before the derived one is cancelled). That report comes with no
# failing input, and is not a finding: the target is run again, once. A real
# failure writes its input ("Failing input written to ...") and fails at once.
fuzz() {
	$GO test -run '^$' -fuzz "^${2}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime 1s "$1" 2>&1
}
for pkg in $($GO list ${FUZZPKGS:-./...}); do
	for target in $($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
		echo "fuzz $pkg $target ($FUZZTIME)"
		if ! out=$(fuzz "$pkg" "$target"); then
			if grep -q '^    context deadline exceeded$' <<<"$out" && ! grep -q 'Failing input written to' <<<"$out"; then
				echo "fuzz: $target: the engine reported its own deadline without a failing input; running it again"
				out=$(fuzz "$pkg" "$target") && { count=$((count + 1)); continue; }
			fi
			echo "$out"
			echo "fuzz: $pkg $target FAILED (a failing input is saved under testdata/fuzz)"
			exit 1
		fi
		count=$((count + 1))
	done
done
echo "fuzz: $count targets ran for $FUZZTIME each without a failure"
