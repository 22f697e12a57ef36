#!/usr/bin/env bash
# make demo: a narrated delegation chain using only the delegateos CLI.
# It leaves its workspace behind and says where, so you can look at the files.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
export PATH="$repo/bin:$PATH"
work=$(mktemp -d "${TMPDIR:-/tmp}/delegateos-demo.XXXXXX")
cd "$work"

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold='' plain=''; fi
say() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
run() { printf '$ %s\n' "$*" >&2; "$@"; }
# expect_denied runs a command that must be refused (exit 1) and shows why.
expect_denied() {
	printf '$ %s\n' "$*"
	if "$@"; then echo "demo: expected a denial, got success" >&2; exit 1; fi
}

say "1. Keys: a root operator and three agents (Ed25519; IDs are base64url public keys)"
for who in root alice bob carol; do
	delegateos keygen --out "$who.key" --name "$who" >/dev/null
	printf '%-6s %s\n' "$who" "$(delegateos id --key "$who.key")"
done
ROOT=$(delegateos id --key root.key)
ALICE=$(delegateos id --key alice.key --did)
BOB=$(delegateos id --key bob.key)
CAROL=$(delegateos id --key carol.key)

say "2. The root grants Alice docs:read on /project/** with 1,000,000 microcents for an hour"
run delegateos dct mint --key root.key --to "$ALICE" --cap 'docs:read:/project/**' \
	--contract ct_a1b2c3d4e5f6 --budget 1000000 --ttl 1h --max-depth 2 >alice.tok
echo "-> alice.tok ($(wc -c <alice.tok) bytes)"

say "3. Alice narrows it to /project/sub/* and 500,000 microcents for Bob"
run delegateos dct attenuate --key alice.key --token @alice.tok --to "$BOB" \
	--cap 'docs:read:/project/sub/*' --budget 500000 >bob.tok

say "4. Bob's token, as a person reads it"
run delegateos dct inspect --token @bob.tok

say "5. Bob reads a file in /project/sub: allowed"
run delegateos dct verify --token @bob.tok --root "$ROOT" \
	--namespace docs --action read --resource /project/sub/notes.md

say "6. Bob reads /project/secret.md: denied, out of scope"
expect_denied delegateos dct verify --token @bob.tok --root "$ROOT" \
	--namespace docs --action read --resource /project/secret.md

say "7. Bob tries to hand Carol more than he has: refused"
expect_denied delegateos dct attenuate --key bob.key --token @bob.tok --to "$CAROL" --cap 'docs:read:/project/**'

say "8. Bob delegates a 10-minute slice with 100,000 microcents to Carol"
run delegateos dct attenuate --key bob.key --token @bob.tok --to "$CAROL" --budget 100000 --ttl 10m >carol.tok
run delegateos dct verify --token @carol.tok --root "$ROOT" --spent 40000 \
	--namespace docs --action read --resource /project/sub/notes.md

say "9. Carol has spent her budget: the next call is refused"
expect_denied delegateos dct verify --token @carol.tok --root "$ROOT" --spent 100000 \
	--namespace docs --action read --resource /project/sub/notes.md

say "10. Alice revokes her grant to Bob; Carol's token, built on it, dies with it"
run delegateos revoke --key alice.key --token @bob.tok --block 1 --list revocations.json
expect_denied delegateos dct verify --token @carol.tok --root "$ROOT" --revocations revocations.json \
	--namespace docs --action read --resource /project/sub/notes.md
echo "Alice's own token is untouched:"
run delegateos dct verify --token @alice.tok --root "$ROOT" --revocations revocations.json \
	--namespace docs --action read --resource /project/secret.md >/dev/null && echo "allowed"

say "Done. The keys, tokens and revocation list are in $work"
