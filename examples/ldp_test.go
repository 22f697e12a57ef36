package examples

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// TestLDPWalkthrough runs ldp/walkthrough.sh against the delegateos and
// docserver built for these tests: two serve delegates, a router that
// chooses one by reputation, a task under a narrowed token through the
// chosen delegate's gate, two refusals, and the recorded result counted by
// the next route.
func TestLDPWalkthrough(t *testing.T) {
	script, err := os.ReadFile(filepath.Join("ldp", "walkthrough.sh"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(script), "\nset -euo pipefail\n") {
		t.Error("walkthrough.sh does not set -euo pipefail")
	}
	work := filepath.Join(t.TempDir(), "ldp")
	dir, err := filepath.Abs("ldp")
	if err != nil {
		t.Fatal(err)
	}
	docserver := mcptest.Docserver(t)
	out := runShell(t, dir, t.TempDir(), "unset DELEGATEOS; DOCSERVER="+shellQuote(docserver)+" ./walkthrough.sh "+shellQuote(work))

	at := 0
	for _, step := range []string{
		"\n== 1. Keys", "\n== 2. Two delegates", "\n== 3. The router discovers both", "\n== 4. What the router has observed",
		"\n== 5. Route", "\n== 6. The root grants the router", "\n== 7. Submit", "\n== 8. A skill the token does not cover",
		"\n== 9. Nor can the router widen", "\n== 10. The chosen delegate's gate", "\n== 11. Route again", "\n== Done.",
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
	addr := regexp.MustCompile(`(?m)^delegate ([ab])  (http://127\.0\.0\.1:[0-9]+)$`)
	urls := map[string]string{}
	for _, m := range addr.FindAllStringSubmatch(section("== 2.", "== 3."), -1) {
		urls[m[1]] = m[2]
	}
	if urls["a"] == "" || urls["b"] == "" || urls["a"] == urls["b"] {
		t.Fatalf("the delegates' addresses: %v\n%s", urls, out)
	}
	dids := map[string]string{}
	for _, d := range []string{"a", "b"} {
		dids[d] = strings.TrimSpace(run(t, 0, "id", "--did", "--key", filepath.Join(work, "delegate-"+d+".key")))
	}

	// Each card comes from its delegate's policy and names its key.
	mustContain("discover", section("== 3.", "== 4."),
		urls["a"]+": ldp:delegate:docs-a (Docs delegate a)\n", urls["b"]+": ldp:delegate:docs-b (Docs delegate b)\n",
		"delegateos.capability.notes=docs:read:/public/notes.md\n", "delegateos.cost.notes=100\n",
		"delegateos.did="+dids["a"]+"\n", "delegateos.did="+dids["b"]+"\n")

	// b is chosen by the reputation held for its key.
	mustContain("route", section("== 5.", "== 6."),
		"→ "+urls["b"]+" ldp:delegate:docs-b: rank 0.614: RDP notes score 0.90 with confidence 0.29 (4 signals); cost 100 microcents\n",
		"  "+urls["a"]+" ldp:delegate:docs-a: rank 0.443: RDP notes score 0.30 with confidence 0.29 (4 signals)",
		"chosen: "+urls["b"]+"\n")

	// The task ran through b's gate, was charged and recorded.
	mustContain("submit", section("== 7.", "== 8."),
		`"text":"Q3 notes: latency is within budget; two incidents, both closed.\n"`,
		"produced by ldp:delegate:docs-b (docserver-1, signed by "+dids["b"]+")",
		"cost charged: 100 microcents\n",
		"recorded: domain-competence notes 0.90 for "+dids["b"]+"\n")
	mustContain("gate refusal", section("== 8.", "== 9."),
		"task failed: capability_not_granted (policy): DCT verification failed: capability_not_granted — tool read_file needs docs:read:/private/payroll.md")
	mustContain("narrowing refusal", section("== 9.", "== 10."),
		"capability docs:read:/private/payroll.md is not within the parent's capabilities [docs:read:/public/**]")
	if strings.Contains(out, "Payroll: not for agents.") {
		t.Errorf("the payroll file was read:\n%s", out)
	}
	gate := section("== 10.", "== 11.")
	mustContain("decisions", gate,
		`{"tool":"read_file","allowed":true,"reason":"granted",`,
		`{"tool":"read_file","allowed":false,"reason":"capability_not_granted",`)
	if n := strings.Count(gate, `"tool"`); n != 2 {
		t.Errorf("b's gate decided %d calls, want 2:\n%s", n, gate)
	}
	mustContain("route again", section("== 11.", "== Done."),
		"→ "+urls["b"]+" ldp:delegate:docs-b: rank 0.633: RDP notes score 0.90 with confidence 0.33 (5 signals)")
}
