#!/usr/bin/env bash
# A multi-hop delegation, root -> alice -> bob -> carol, using only the
# delegateos CLI. See README.md in this directory.
#
#   ./walkthrough.sh [DIR]
#
# Everything is written to DIR (default: a new temporary directory), which
# is left behind so you can look at the keys, tokens and files. delegateos
# must be on PATH, or named by $DELEGATEOS.
set -euo pipefail

dos=${DELEGATEOS:-delegateos}
work=${1:-$(mktemp -d "${TMPDIR:-/tmp}/delegateos-multihop.XXXXXX")}
mkdir -p "$work"
cd "$work"

step() { printf '\n== %s\n' "$*"; }
# denied runs a command that must be refused with exit status 1 and shows
# the reason it gives; anything else (success, or exit 2 for bad usage)
# stops the walk-through. The command's standard output is kept in
# denied.out.
denied() {
	local code=0
	"$@" >denied.out 2>denied.err || code=$?
	if [ "$code" -ne 1 ]; then
		echo "walkthrough: expected a denial (exit 1), got exit $code: $*" >&2
		cat denied.err >&2
		exit 1
	fi
	sed 's/^/   /' denied.err
}

step "1. Keys: a root operator and three agents"
for who in root alice bob carol; do
	"$dos" keygen --out "$who.key" --name "$who" >/dev/null
done
ROOT=$("$dos" id --key root.key)
ALICE=$("$dos" id --key alice.key)
BOB=$("$dos" id --key bob.key)
CAROL=$("$dos" id --key carol.key)
echo "root  $ROOT"
echo "alice $ALICE"
echo "bob   $BOB"
echo "carol $CAROL"

step "2. Hop 1: the root grants alice read on /project/** and write on /project/drafts/**, 1000000 microcents, 2 hours, 3 more hops"
"$dos" dct mint --key root.key --to "$ALICE" \
	--cap 'docs:read:/project/**' --cap 'docs:write:/project/drafts/**' \
	--contract ct_a11ce0000001 --delegation del_a11ce0000001 \
	--budget 1000000 --ttl 2h --max-depth 3 >alice.tok
echo "alice.tok written"

step "3. Hop 2: alice passes bob read only, 500000 microcents, 1 hour, 1 more hop"
"$dos" dct attenuate --key alice.key --token @alice.tok --to "$BOB" \
	--cap 'docs:read:/project/**' --budget 500000 --ttl 1h --max-depth 1 \
	--delegation del_b0b000000001 >bob.tok
echo "bob.tok written"
echo "bob cannot get write back by asking for it (refused, exit 1):"
denied "$dos" dct attenuate --key bob.key --token @bob.tok --to "$CAROL" --cap 'docs:write:/project/drafts/**'

step "4. Bob writes a task contract for carol: summarize /project/sub/notes.md"
echo '{"type": "object", "required": ["summary"], "properties": {"summary": {"type": "string"}}}' >summary.schema.json
"$dos" contract create --key bob.key --id ct_ca401000001a --title 'Summarize the notes' \
	--inputs '{"path": "/project/sub/notes.md"}' --output-schema @summary.schema.json \
	--verification '{"method": "deterministic_check", "checkName": "string_length", "checkParams": {"field": "summary", "min": 20}}' \
	--budget 50000 --ttl 30m --require docs:read --out contract.json
"$dos" contract verify contract.json

step "5. Hop 3: bob passes carol read on /project/sub/* only, 50000 microcents, 30 minutes, no further hops, bound to the contract"
"$dos" dct attenuate --key bob.key --token @bob.tok --to "$CAROL" \
	--cap 'docs:read:/project/sub/*' --budget 50000 --ttl 30m --max-depth 0 \
	--contract ct_ca401000001a --delegation del_ca4010000001 >carol.tok
echo "carol.tok written"

step "6. Carol's token as a tree: each hop narrower than the one above it"
"$dos" dct inspect --token @carol.tok --format tree \
	--name root="$ROOT" --name alice="$ALICE" --name bob="$BOB" --name carol="$CAROL"

"$dos" dct inspect --token @carol.tok --format mermaid \
	--name root="$ROOT" --name alice="$ALICE" --name bob="$BOB" --name carol="$CAROL" >carol-chain.mmd
echo "(the same chain as a Mermaid diagram for docs: carol-chain.mmd)"

step "7. What carol may do (verification needs only the token and the root's ID)"
echo "carol reads /project/sub/notes.md: allowed"
"$dos" dct verify --token @carol.tok --root "$ROOT" \
	--namespace docs --action read --resource /project/sub/notes.md >allowed.json
echo "allowed; remaining budget $(grep -o '"remainingBudgetMicrocents": [0-9]*' allowed.json | grep -o '[0-9]*$')"
echo "carol reads /project/secret.md: denied (exit 1)"
denied "$dos" dct verify --token @carol.tok --root "$ROOT" \
	--namespace docs --action read --resource /project/secret.md
echo "carol writes /project/drafts/x.md: denied (exit 1)"
denied "$dos" dct verify --token @carol.tok --root "$ROOT" \
	--namespace docs --action write --resource /project/drafts/x.md
echo "carol delegates onwards: refused (exit 1), no hops left"
denied "$dos" dct attenuate --key carol.key --token @carol.tok --to "$ALICE"

step "8. Carol does the work; her output is checked against the contract"
echo '{"summary": "Weekly notes: the team shipped the parser and fixed two bugs."}' >output.json
"$dos" verify-output --contract contract.json --output output.json
echo '{"summary": "Done."}' >short.json
echo "a one-word summary fails the contract's check (exit 1):"
denied "$dos" verify-output --contract contract.json --output short.json
cat denied.out

step "9. Carol signs an attestation of the work; bob verifies it"
"$dos" attest create --key carol.key --contract contract.json --delegation del_ca4010000001 \
	--output output.json --cost 1200 --out attestation.json
"$dos" attest verify attestation.json --contract contract.json

step "10. Alice revokes her grant to bob (block 1 of bob's token); carol's token is built on it"
"$dos" revoke --key alice.key --token @bob.tok --block 1 --list revocations.json
echo "carol reads /project/sub/notes.md again: denied (exit 1)"
denied "$dos" dct verify --token @carol.tok --root "$ROOT" --revocations revocations.json \
	--namespace docs --action read --resource /project/sub/notes.md
echo "bob's token is revoked too (exit 1):"
denied "$dos" dct verify --token @bob.tok --root "$ROOT" --revocations revocations.json \
	--namespace docs --action read --resource /project/sub/notes.md
echo "alice's own token, which does not contain the revoked block, still works:"
"$dos" dct verify --token @alice.tok --root "$ROOT" --revocations revocations.json \
	--namespace docs --action read --resource /project/sub/notes.md >/dev/null
echo "allowed"

step "Done. The keys, tokens, contract, attestation and revocation list are in $work"
