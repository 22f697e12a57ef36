package examples

import (
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// TestLibraryExample builds examples/library, runs it and checks each step
// of what it prints: the decisions, and that the IDs it names agree.
func TestLibraryExample(t *testing.T) {
	bin := mcptest.Build(t, "./examples/library", mcptest.RaceEnabled)
	cmd := exec.Command(bin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("the library example failed: %v\nstdout:\n%s\nstderr:\n%s", err, &stdout, &stderr)
	}
	out := stdout.String()
	if stderr.Len() > 0 {
		t.Errorf("the library example wrote to standard error:\n%s", &stderr)
	}

	const id = `[A-Za-z0-9_-]{43}`
	const ts = `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z`
	const req = `docs:read /project/reports/q3/summary\.md`
	want := []string{
		`== 1\. Generate an Ed25519 key.*`,
		`root  (?P<root>` + id + `)`, `alice (?P<alice>` + id + `)`, `bob   (?P<bob>` + id + `)`, `carol (?P<carol>` + id + `)`,
		`== 2\. The root mints a token for alice.*`,
		`a token of 1 block\(s\), \d+ characters, held by alice`,
		`grants \[docs:read:/project/\*\*\], 1000000 microcents, until (?P<aliceExpires>` + ts + `), depth 0 of at most 2`,
		`== 3\. Alice attenuates it for bob.*`,
		`a token of 2 block\(s\), \d+ characters, held by bob`,
		`grants \[docs:read:/project/reports/\*\*\], 250000 microcents, until (?P<bobExpires>` + ts + `), depth 1 of at most 2`,
		`== 4\. Bob tries to give carol the whole project.*`,
		`refused: capability docs:read:/project/\*\* is not within the parent's capabilities \[docs:read:/project/reports/\*\*\]`,
		`== 5\. Bob attenuates it for carol.*`,
		`a token of 3 block\(s\), \d+ characters, held by carol`,
		`grants \[docs:read:/project/reports/q3/\*\], 50000 microcents, until (?P<carolExpires>` + ts + `), depth 2 of at most 2`,
		`== 6\. A service that trusts the root verifies carol's requests.*`,
		`carol ` + req + `, spent 20000, at \+1m0s: ALLOWED, 30000 microcents left \(delegation del_ca4010000001, a chain of 3\)`,
		`carol docs:read /project/reports/q2/summary\.md, spent 0, at \+1m0s: DENIED, capability_not_granted: .*`,
		`carol ` + req + `, spent 50000, at \+1m0s: DENIED, budget_exceeded: .*`,
		`carol ` + req + `, spent 0, at \+11m0s: DENIED, expired: token expired at (?P<refusedAt>` + ts + `)`,
		`== 7\. Alice revokes her grant to bob \(block 1\).*`,
		`revoked (?P<revoked>` + id + `) \(scope chain\), signed by alice`,
		`== 8\. Carol asks again, and so does bob.*`,
		`carol ` + req + `, spent 20000, at \+3m0s: DENIED, revoked: block (?P<carolRevoked>` + id + `) of this token has been revoked`,
		`bob   ` + req + `, spent 20000, at \+3m0s: DENIED, revoked: block (?P<bobRevoked>` + id + `) of this token has been revoked`,
		`alice ` + req + `, spent 20000, at \+3m0s: ALLOWED, 980000 microcents left \(delegation del_a11ce0000001, a chain of 1\)`,
	}
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l != "" {
			lines = append(lines, l)
		}
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), out)
	}
	got := map[string]string{} // the named groups of every line
	for i, w := range want {
		re := regexp.MustCompile(`^` + w + `$`)
		m := re.FindStringSubmatch(lines[i])
		if m == nil {
			t.Fatalf("line %d is %q, want it to match %q\n%s", i+1, lines[i], w, out)
		}
		for j, name := range re.SubexpNames() {
			if name != "" {
				got[name] = m[j]
			}
		}
	}

	// The four keys differ; alice and bob keep the root's expiry, carol's
	// is earlier and is the one her late request is refused at.
	if keys := map[string]bool{got["root"]: true, got["alice"]: true, got["bob"]: true, got["carol"]: true}; len(keys) != 4 {
		t.Errorf("the example's keys are not four different keys:\n%s", out)
	}
	if got["aliceExpires"] != got["bobExpires"] || got["carolExpires"] >= got["bobExpires"] || got["refusedAt"] != got["carolExpires"] {
		t.Errorf("expiries: %v", got)
	}
	// The block alice revoked is the one both refusals name.
	if got["carolRevoked"] != got["revoked"] || got["bobRevoked"] != got["revoked"] {
		t.Errorf("revoked %s, but the refusals name %s and %s", got["revoked"], got["carolRevoked"], got["bobRevoked"])
	}
}
