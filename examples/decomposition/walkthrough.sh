#!/usr/bin/env bash
# A task split into a three-step plan (gather -> summarize -> review) and
# carried out through the proxy, which enforces the plan. See README.md in
# this directory.
#
#   ./walkthrough.sh [DIR]
#
# Everything is written to DIR (default: a new temporary directory), which
# is left behind. delegateos and docserver must be on PATH, or named by
# $DELEGATEOS and $DOCSERVER.
set -euo pipefail

dos=${DELEGATEOS:-delegateos}
docserver=${DOCSERVER:-docserver}
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/delegateos-decomposition.XXXXXX")}
mkdir -p "$work"
cd "$work"

step() { printf '\n== %s\n' "$*"; }
# session sends the JSON-RPC frames given as arguments to one proxy
# session in front of the docserver and prints its replies; the proxy's
# log goes to proxy.log. The proxy answers delegateos/complete while the
# session goes on, so a call that needs a completion goes in a later
# session.
session() {
	printf '%s\n' "$@" | "$dos" proxy --policy policy.yaml -- "$docserver" --root docs 2>>proxy.log
}
# call is a tools/call of read_file on PATH under the token in FILE.
call() {
	printf '{"jsonrpc":"2.0","id":"%s","method":"tools/call","params":{"name":"read_file","arguments":{"path":"%s"},"_delegateos":{"dct":"%s"}}}' \
		"$1" "$2" "$(cat "$3")"
}
# delegate is a delegateos/delegate of CONTRACT with the token in FILE.
delegate() {
	printf '{"jsonrpc":"2.0","id":"%s","method":"delegateos/delegate","params":{"contract":%s,"dct":"%s","dctFormat":"delegateos-sjt-v1","delegationId":"%s","parentDelegationId":"%s"}}' \
		"$1" "$(tr -d '\n' <"$2")" "$(cat "$3")" "$4" "$5"
}
# complete is a delegateos/complete of DELEGATION with the attestation FILE.
complete() {
	printf '{"jsonrpc":"2.0","id":"%s","method":"delegateos/complete","params":{"delegationId":"%s","attestation":%s}}' \
		"$1" "$2" "$(tr -d '\n' <"$3")"
}
# reply prints the reply to request ID from FILE.
reply() { grep -F "\"id\":\"$2\"" "$1"; }
# delegation prints sub-task N's (1, 2, 3) delegation ID from the plan.
delegation() { grep -o '"delegationId": "del_[0-9a-f]*"' plan/plan.json | sed -n "$1p" | grep -o 'del_[0-9a-f]*'; }

step "1. Keys, a document tree and the proxy's policy"
for who in root alice bob carol; do
	"$dos" keygen --out "$who.key" --name "$who" >/dev/null
done
ROOT=$("$dos" id --key root.key)
ALICE=$("$dos" id --key alice.key)
BOB=$("$dos" id --key bob.key)
CAROL=$("$dos" id --key carol.key)
mkdir -p docs/project/sub
echo "Week 12: the parser shipped; two bugs fixed." >docs/project/sub/notes.md
echo "Keep the report under a page." >docs/project/guide.md
cat >policy.yaml <<EOF
roots: [$ROOT]
tools:
  - match: read_file
    namespace: docs
    action: read
    resource: {arg: /path}
    cost: 100
spend_store: spend.log
workspace: ws
EOF
echo "policy.yaml: read_file costs 100 microcents; the workspace is ws/"

step "2. The root asks alice for a report and gives her a token for it (90000 microcents, 2 more hops)"
"$dos" contract create --key root.key --id ct_4e90471e0001 --title 'Report on the week' \
	--output-schema '{"type": "object"}' --verification '{"method": "schema_match", "schema": {"type": "object"}}' \
	--budget 90000 --ttl 1h --max-depth 2 --require docs:read --out report.json
"$dos" dct mint --key root.key --to "$ALICE" --cap 'docs:read:/project/**' \
	--contract ct_4e90471e0001 --delegation del_a11ce0000001 --budget 90000 --ttl 1h --max-depth 2 --out alice.tok

step "3. Alice splits the task: bob gathers, carol summarizes, bob reviews, each after the one before"
cat >plan.yaml <<EOF
strategy: sequential
subTasks:
  - id: gather
    title: Gather the notes
    capabilities: [{namespace: docs, action: read, resource: "/project/sub/*"}]
    budgetMicrocents: 20000
    assignee: $BOB
  - id: summarize
    title: Summarize them
    capabilities: [{namespace: docs, action: read, resource: "/project/**"}]
    budgetMicrocents: 30000
    assignee: $CAROL
  - id: review
    title: Review the summary
    capabilities: [{namespace: docs, action: read, resource: "/project/guide.md"}]
    budgetMicrocents: 10000
    assignee: $BOB
EOF
"$dos" contract decompose --contract report.json --token @alice.tok --plan plan.yaml --key alice.key \
	--workspace ws --out plan
GATHER=$(delegation 1)
SUMMARIZE=$(delegation 2)
REVIEW=$(delegation 3)
"$dos" contract show --plan plan/plan.json --workspace ws --format text --name bob="$BOB" --name carol="$CAROL" --name alice="$ALICE"

step "4. Alice delegates the plan through the proxy; carol cannot start before bob has gathered"
session "$(delegate p1 report.json alice.tok del_a11ce0000001 del_000000000000)" \
	"$(delegate p2 plan/gather.contract.json plan/gather.token "$GATHER" del_a11ce0000001)" \
	"$(delegate p3 plan/summarize.contract.json plan/summarize.token "$SUMMARIZE" del_a11ce0000001)" \
	"$(delegate p4 plan/review.contract.json plan/review.token "$REVIEW" del_a11ce0000001)" \
	"$(call c1 /project/sub/notes.md plan/summarize.token)" \
	"$(call c2 /project/sub/notes.md plan/gather.token)" >s1.jsonl
for id in p1 p2 p3 p4; do reply s1.jsonl "$id" | grep -q '"accepted":true' || { echo "walkthrough: $id not accepted" >&2; cat s1.jsonl >&2; exit 1; }; done
echo "carol's call before gather completed is refused:"
reply s1.jsonl c1 | grep -o 'dependency_pending — .*' | sed 's/ to complete.*/ to complete/' | tr -d '\\'
echo "bob's gather call:"
reply s1.jsonl c2 | grep -q '"result"' && echo "allowed"

step "5. Bob completes gather; carol's summary may start"
echo '{"notes": "Week 12: the parser shipped; two bugs fixed."}' >gather.out.json
"$dos" attest create --key bob.key --contract plan/gather.contract.json --delegation "$GATHER" \
	--token @plan/gather.token --output gather.out.json --cost 100 --out gather.att.json >/dev/null
session "$(complete d1 "$GATHER" gather.att.json)" >s2.jsonl
reply s2.jsonl d1 | grep -o '"status":"[a-z]*"'
session "$(call c3 /project/sub/notes.md plan/summarize.token)" >s3.jsonl
echo "carol's call now:"
reply s3.jsonl c3 | grep -q '"result"' && echo "allowed"

step "6. Carol completes summarize, bob reviews and completes"
echo '{"summary": "The parser shipped and two bugs were fixed."}' >summary.out.json
"$dos" attest create --key carol.key --contract plan/summarize.contract.json --delegation "$SUMMARIZE" \
	--token @plan/summarize.token --output summary.out.json --cost 100 --out summarize.att.json >/dev/null
echo '{"approved": true}' >review.out.json
"$dos" attest create --key bob.key --contract plan/review.contract.json --delegation "$REVIEW" \
	--token @plan/review.token --output review.out.json --cost 100 --out review.att.json >/dev/null
session "$(complete d2 "$SUMMARIZE" summarize.att.json)" >s4.jsonl
reply s4.jsonl d2 | grep -o '"status":"[a-z]*"'
session "$(call c4 /project/guide.md plan/review.token)" "$(complete d3 "$REVIEW" review.att.json)" >s5.jsonl
echo "bob's review call:"
reply s5.jsonl c4 | grep -q '"result"' && echo "allowed"
reply s5.jsonl d3 | grep -o '"status":"[a-z]*"'

step "7. Alice completes the report, citing the three sub-tasks' attestations"
att() { grep -o '"id": "att_[0-9a-f]*"' "$1" | head -1 | grep -o 'att_[0-9a-f]*'; }
echo '{"report": "The parser shipped and two bugs were fixed."}' >report.out.json
"$dos" attest create --key alice.key --contract report.json --delegation del_a11ce0000001 --token @alice.tok \
	--output report.out.json --cost 300 --child "$(att gather.att.json)" --child "$(att summarize.att.json)" \
	--child "$(att review.att.json)" --out report.att.json >/dev/null
session "$(complete d4 del_a11ce0000001 report.att.json)" >s6.jsonl
reply s6.jsonl d4 | grep -o '"status":"[a-z]*"'

step "8. Where the money went, and the plan as a diagram"
"$dos" spend --policy policy.yaml --format tree --name alice="$ALICE" --name bob="$BOB" --name carol="$CAROL"
"$dos" contract show --plan plan/plan.json --workspace ws --spend-store spend.log \
	--name bob="$BOB" --name carol="$CAROL" >plan.mmd
cat plan.mmd

step "Done. The keys, plan, contracts, tokens, attestations and workspace are in $work"
