package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestMultihopWalkthrough runs multihop/walkthrough.sh against the
// delegateos built for these tests and checks that each step did what its
// narration says.
func TestMultihopWalkthrough(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("multihop", "walkthrough.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "\nset -euo pipefail\n") {
		t.Error("walkthrough.sh does not set -euo pipefail")
	}
	work := filepath.Join(t.TempDir(), "hops")
	dir, err := filepath.Abs("multihop")
	if err != nil {
		t.Fatal(err)
	}
	out := runShell(t, dir, t.TempDir(), "unset DELEGATEOS; ./walkthrough.sh "+shellQuote(work))

	// The steps, in order.
	at := 0
	for _, step := range []string{
		"\n== 1. Keys", "\n== 2. Hop 1", "\n== 3. Hop 2", "\n== 4. Bob writes a task contract", "\n== 5. Hop 3",
		"\n== 6. Carol's token as a tree", "\n== 7. What carol may do", "\n== 8. Carol does the work",
		"\n== 9. Carol signs an attestation", "\n== 10. Alice revokes her grant to bob", "\n== Done.",
	} {
		i := strings.Index(out[at:], step)
		if i < 0 {
			t.Fatalf("step %q is missing or out of order:\n%s", step, out)
		}
		at += i
	}
	section := func(from, to string) string {
		i, j := strings.Index(out, from), strings.Index(out, to)
		if i < 0 || j < i {
			t.Fatalf("no section %q .. %q in:\n%s", from, to, out)
		}
		return out[i:j]
	}
	mustContain := func(what, text string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(text, w) {
				t.Errorf("%s: %q is missing from:\n%s", what, w, text)
			}
		}
	}

	// The printed IDs are the keys' IDs.
	ids := map[string]string{}
	for _, who := range []string{"root", "alice", "bob", "carol"} {
		ids[who] = strings.TrimSpace(run(t, 0, "id", "--key", filepath.Join(work, who+".key")))
		mustContain("keys", section("== 1.", "== 2."), who+strings.Repeat(" ", 6-len(who))+ids[who]+"\n")
	}

	mustContain("hop 2", section("== 3.", "== 4."),
		"   delegateos dct attenuate: refused: capability docs:write:/project/drafts/** is not within the parent's capabilities")
	mustContain("contract", section("== 4.", "== 5."), `valid: contract ct_ca401000001a "Summarize the notes" signed by `+ids["bob"])

	// The tree narrows at each hop, down to carol.
	tree := section("== 6.", "== 7.")
	mustContain("tree", tree,
		"\nsignatures: consistent with the keys named in the token",
		"\nroot  (root issuer)\n",
		"\n└─ alice  [0] authority\n",
		"\n   │  capabilities  docs:read:/project/**, docs:write:/project/drafts/**\n",
		"\n   │  budget        1000000 microcents\n",
		"\n   │  depth         0 of at most 3\n",
		"\n   └─ bob  [1] attenuation\n",
		"\n      │  capabilities  docs:read:/project/**\n",
		"\n      │  budget        500000 microcents\n",
		"\n      │  further hops  1\n",
		"\n      └─ carol  [2] attenuation\n",
		"\n            delegation    del_ca4010000001\n",
		"\n            contract      ct_ca401000001a\n",
		"\n            capabilities  docs:read:/project/sub/*\n",
		"\n            budget        50000 microcents\n",
		"\n            further hops  0\n",
		"\neffective: carol may use docs:read:/project/sub/*\n",
		"(the same chain as a Mermaid diagram for docs: carol-chain.mmd)",
	)
	bobBlock := regexp.MustCompile(`\n      │  revocation id ([A-Za-z0-9_-]{43})\n`).FindStringSubmatch(tree)
	if bobBlock == nil {
		t.Fatalf("no revocation ID under bob in the tree:\n%s", tree)
	}
	mmd, err := os.ReadFile(filepath.Join(work, "carol-chain.mmd"))
	if err != nil {
		t.Fatal(err)
	}
	diagram := string(mmd)
	if !strings.HasPrefix(diagram, "graph TD\n") || strings.Count(diagram, " --> ") != 3 ||
		!strings.Contains(diagram, `  p3["carol<br/>block 2 #183; attenuation<br/>delegation del_ca4010000001<br/>`) {
		t.Errorf("carol-chain.mmd:\n%s", diagram)
	}

	mustContain("verify", section("== 7.", "== 8."),
		"allowed; remaining budget 50000\n",
		`   delegateos dct verify: denied: capability_not_granted: docs:read on "/project/secret.md" is not granted by this token`,
		`   delegateos dct verify: denied: capability_not_granted: docs:write on "/project/drafts/x.md" is not granted by this token`,
		"   delegateos dct attenuate: refused: the token allows no further delegation",
	)
	work8 := section("== 8.", "== 9.")
	mustContain("verify-output", work8, `"passed": true`, "   delegateos verify-output: the output fails the contract's verification", `"passed": false`)
	if strings.Index(work8, `"passed": true`) > strings.Index(work8, `"passed": false`) {
		t.Errorf("the good output should pass before the short one fails:\n%s", work8)
	}
	mustContain("attest", section("== 9.", "== 10."), "for contract ct_ca401000001a by "+ids["carol"]+": PASSED")

	revoked := section("== 10.", "== Done.")
	mustContain("revoke", revoked,
		"revoked "+bobBlock[1]+" (scope chain) in revocations.json\n",
		"carol reads /project/sub/notes.md again: denied (exit 1)\n   delegateos dct verify: denied: revoked: block "+bobBlock[1]+" of this token has been revoked\n",
		"bob's token is revoked too (exit 1):\n   delegateos dct verify: denied: revoked: block "+bobBlock[1],
		"still works:\nallowed\n",
	)
	mustContain("done", out, "The keys, tokens, contract, attestation and revocation list are in "+work+"\n")

	// What the script left behind stands on its own: carol's token is
	// revoked, and was good for her task before.
	root, carol, revs := ids["root"], "@"+filepath.Join(work, "carol.tok"), filepath.Join(work, "revocations.json")
	req := []string{"--namespace", "docs", "--action", "read", "--resource", "/project/sub/notes.md"}
	run(t, 0, append([]string{"dct", "verify", "--token", carol, "--root", root}, req...)...)
	if got := run(t, 1, append([]string{"dct", "verify", "--token", carol, "--root", root, "--revocations", revs}, req...)...); !strings.Contains(got, `"type": "revoked"`) {
		t.Errorf("carol's token after the walk-through: %s", got)
	}
	run(t, 0, "attest", "verify", filepath.Join(work, "attestation.json"), "--contract", filepath.Join(work, "contract.json"))
}
