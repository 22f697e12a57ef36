#!/usr/bin/env bash
# A task handed from a router to one of two LDP delegates, each a
# delegateos serve in front of its own MCP server (the docserver), chosen
# by the reputation the router holds, run under an attenuated token through
# the delegate's gate, and fed back into that reputation. See README.md in
# this directory.
#
#   ./walkthrough.sh [DIR]
#
# Everything is written to DIR (default: a new temporary directory), which
# is left behind with the keys, tokens, policies, the delegates' logs and
# the router's workspace. delegateos and docserver must be on PATH, or
# named by $DELEGATEOS and $DOCSERVER. The two delegates listen on
# loopback ports of their choosing and are stopped when the script ends.
set -euo pipefail

dos=${DELEGATEOS:-delegateos}
docserver=${DOCSERVER:-docserver}
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/delegateos-ldp.XXXXXX")}
mkdir -p "$work"
cd "$work"

step() { printf '\n== %s\n' "$*"; }
# refused runs a command that must end with exit status WANT and shows
# what it printed; anything else stops the walk-through.
refused() {
	local want=$1 code=0
	shift
	"$@" >refused.out 2>refused.err || code=$?
	if [ "$code" -ne "$want" ]; then
		echo "walkthrough: expected exit $want, got $code: $*" >&2
		cat refused.out refused.err >&2
		exit 1
	fi
	sed 's/^/   /' refused.out refused.err
}

pids=()
stop() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
}
trap stop EXIT

step "1. Keys: the root operator, the router (an agent), and a key for each delegate"
for who in root router delegate-a delegate-b; do
	"$dos" keygen --out "$who.key" --name "$who" >/dev/null
done
ROOT=$("$dos" id --key root.key)
ROUTER=$("$dos" id --key router.key)
echo "root    $ROOT"
echo "router  $ROUTER"

step "2. Two delegates: delegate serve, each in front of a docserver, with an ldp section"
mkdir -p docs/public docs/private
printf 'Q3 notes: latency is within budget; two incidents, both closed.\n' >docs/public/notes.md
printf 'Payroll: not for agents.\n' >docs/private/payroll.md
for d in a b; do
	cat >"delegate-$d.yaml" <<POLICY
roots: ["$ROOT"]
tools:
  - {match: read_file, namespace: docs, action: read, resource: {arg: /path}, cost: 100}
ldp:
  delegate_id: ldp:delegate:docs-$d
  name: Docs delegate $d
  model_family: none
  model_version: docserver-1
  context_window: 8192
  trust_domain: {name: research}
  skills:
    - {name: notes, tool: read_file, arguments: {path: /public/notes.md}}
    - {name: payroll, tool: read_file, arguments: {path: /private/payroll.md}}
POLICY
	mkdir -p "state-$d"
	DELEGATEOS_STATE_DIR="$PWD/state-$d" "$dos" serve --listen 127.0.0.1:0 --policy "delegate-$d.yaml" \
		--key "delegate-$d.key" --json -- "$docserver" --root "$PWD/docs" >"delegate-$d.addr" 2>"delegate-$d.log" &
	pids+=($!)
done
for d in a b; do
	# serve prints {"address", "url"} once it listens.
	for _ in $(seq 600); do
		grep -q '^}' "delegate-$d.addr" 2>/dev/null && break
		kill -0 "${pids[0]}" "${pids[1]}" || { cat "delegate-$d.log" >&2; exit 1; }
		sleep 0.1
	done
	grep -q '^}' "delegate-$d.addr" || { echo "walkthrough: delegate $d did not start" >&2; cat "delegate-$d.log" >&2; exit 1; }
done
A="http://$(sed -n 's/.*"address": *"\([^"]*\)".*/\1/p' delegate-a.addr)"
B="http://$(sed -n 's/.*"address": *"\([^"]*\)".*/\1/p' delegate-b.addr)"
echo "delegate a  $A"
echo "delegate b  $B"

step "3. The router discovers both: identity cards, skills, capability and cost from each policy"
"$dos" ldp discover "$A" "$B"
DID_A=$("$dos" id --key delegate-a.key --did)
DID_B=$("$dos" id --key delegate-b.key --did)

step "4. What the router has observed before: a has done poorly on notes, b well"
mkdir -p ws
OBSERVER=$("$dos" id --key router.key --did)
for _ in 1 2 3 4; do
	"$dos" reputation signal --workspace ws --agent "$DID_A" --domain notes --score 0.3 --source "$OBSERVER" >/dev/null
	"$dos" reputation signal --workspace ws --agent "$DID_B" --domain notes --score 0.9 --source "$OBSERVER" >/dev/null
done
echo "4 signals each recorded in ws/"

step "5. Route: rank the delegates for skill notes by that reputation (each proves its did:key first)"
"$dos" ldp route --skill notes --trust-domain research --budget 1000 --workspace ws "$A" "$B" | tee route.out
CHOSEN=$(sed -n 's/^→ \([^ ]*\) .*/\1/p' route.out)
echo "chosen: $CHOSEN"

step "6. The root grants the router read on /public/**, 100000 microcents, 1 hour, 2 more hops"
"$dos" dct mint --key root.key --to "$ROUTER" --cap 'docs:read:/public/**' \
	--budget 100000 --ttl 1h --max-depth 2 >router.tok
echo "router.tok written"

step "7. Submit: session, TASK_SUBMIT with the token narrowed to the skill, the gate, the tool, TASK_RESULT with provenance, an RDP signal"
"$dos" ldp submit --key router.key --token @router.tok --trust-domain research --skill notes --budget 500 \
	--input '{"task_type":"summary","instruction":"Read the Q3 notes"}' \
	--record --score 0.9 --source "$OBSERVER" --workspace ws "$CHOSEN"

step "8. A skill the token does not cover: narrowed to what it holds, the delegate's gate refuses it (exit 1)"
refused 1 "$dos" ldp submit --key router.key --token @router.tok --trust-domain research --skill payroll \
	--cap 'docs:read:/public/**' --budget 500 --input '{"task_type":"summary","instruction":"Read the payroll"}' "$CHOSEN"

step "9. Nor can the router widen its token to the skill's capability (exit 2, nothing sent)"
refused 2 "$dos" ldp submit --key router.key --token @router.tok --trust-domain research --skill payroll \
	--budget 500 --input '{"task_type":"summary","instruction":"Read the payroll"}' "$CHOSEN"

step "10. The chosen delegate's gate decided each task and charged the one it ran"
if [ "$CHOSEN" = "$A" ]; then log=delegate-a.log; else log=delegate-b.log; fi
# The decision line may follow the reply: wait for both.
for _ in $(seq 600); do
	[ "$(grep -c '"msg":"decision"' "$log")" -ge 2 ] && break
	sleep 0.1
done
grep '"msg":"decision"' "$log" | sed 's/.*"tool"/   {"tool"/; s/,"latency".*/}/'

step "11. Route again: the result just recorded counts"
"$dos" ldp route --skill notes --trust-domain research --budget 1000 --workspace ws "$A" "$B"

step "Done. Everything is in $work"
