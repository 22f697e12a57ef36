#!/usr/bin/env bash
# make demo: one delegation through delegateos from start to finish, narrated.
# It builds delegateos, the docserver example and the demo's MCP client
# (internal/cmd/demo) into bin/ (DEMO_BIN), saying how far the build is (a
# first build downloads and compiles every dependency: minutes; a warm one
# takes a second or two), then runs the client: keys, tokens, a task
# contract and an attestation made with the CLI; delegate, calls, complete
# and a revocation through `delegateos proxy` in front of the docserver. It
# needs only Go, leaves its directory behind and says where, and exits 1 if
# any step does not behave as it says. Arguments go to bin/demo (-dir DIR).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
go=${GO:-go}
bin=${DEMO_BIN:-bin}
pkgs=(./cmd/delegateos ./examples/docserver ./internal/cmd/demo)
say() { printf 'make demo: %s\n' "$*"; }
start=$SECONDS
say "resolving the build's packages (a first run downloads the Go modules it needs)"
total=$("$go" list -deps "${pkgs[@]}" | wc -l | tr -d ' ')
say "building $bin/delegateos, $bin/docserver and $bin/demo (a first build compiles up to $total packages: a few minutes; later ones reuse them)"
tty=0
[ -t 1 ] && tty=1
mkdir -p "$bin"
"$go" build -v -o "$bin/" "${pkgs[@]}" 2>&1 | awk -v total="$total" -v tty="$tty" -f scripts/buildprogress.awk
say "built in $((SECONDS - start))s; running the demo"
echo
exec "$bin/demo" -bin "$bin" "$@"
