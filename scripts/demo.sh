#!/usr/bin/env bash
# make demo: one delegation through delegateos from start to finish, narrated.
# It builds delegateos, the docserver example and the demo's MCP client
# (internal/cmd/demo) into bin/, then runs the client: keys, tokens, a task
# contract and an attestation made with the CLI; delegate, calls, complete
# and a revocation through `delegateos proxy` in front of the docserver. It
# needs only Go, leaves its directory behind and says where, and exits 1 if
# any step does not behave as it says. Arguments go to bin/demo (-dir DIR).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
cd "$repo"
go=${GO:-go}
"$go" build -o bin/delegateos ./cmd/delegateos
"$go" build -o bin/docserver ./examples/docserver
"$go" build -o bin/demo ./internal/cmd/demo
exec bin/demo -bin bin "$@"
