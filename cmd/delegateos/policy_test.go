package main

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/delegateos/delegateos/policy"
)

// TestPolicyScripts runs the scripts in testdata/policy: 'policy check' on
// good and bad files, and 'policy init' against a real MCP server over
// stdio (policy/internal/testupstream, built here; $TESTUPSTREAM names it).
func TestPolicyScripts(t *testing.T) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("the go command is needed to build the test MCP server")
	}
	upstream := filepath.Join(t.TempDir(), "testupstream")
	build := exec.Command(goTool, "build", "-o", upstream, "github.com/delegateos/delegateos/policy/internal/testupstream")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the test MCP server: %v\n%s", err, out)
	}
	testscript.Run(t, testscript.Params{
		Dir: "testdata/policy",
		Setup: func(e *testscript.Env) error {
			e.Setenv("TESTUPSTREAM", upstream)
			return nil
		},
	})
}

// TestREADMEPolicyReference parses the policy file reference (docs/policy.md), so
// that every key it shows is one the policy reads, with a value it accepts,
// and checks the mappings its resource and prompt examples describe.
func TestREADMEPolicyReference(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "policy.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "# Policy file reference\n")
	_, rest, ok1 := strings.Cut(rest, "```yaml\n")
	block, _, ok2 := strings.Cut(rest, "```\n")
	if !ok || !ok1 || !ok2 {
		t.Fatal("no yaml block under # Policy file reference in docs/policy.md")
	}
	block = strings.Replace(block, "did:key:z6Mk...", "iojj3XQJ8ZX9UtstPLpdcspnCb8dlBIb83SIAbQPb1w", 1)
	p, err := policy.Parse([]byte(block), "/etc/delegateos")
	if err != nil {
		t.Fatalf("the README's policy reference does not parse: %v\n%s", err, block)
	}
	for _, c := range []struct {
		got  func() (policy.Call, error)
		want policy.Call
	}{
		{func() (policy.Call, error) { return p.MapResource("file:///srv/docs/a/b.md") },
			policy.Call{Namespace: "docs", Action: "read", Resource: "file:///srv/docs/a/b.md", Cost: 10, MaxCost: 10}},
		{func() (policy.Call, error) { return p.MapResource("file:///etc/passwd") },
			policy.Call{Namespace: "mcp-resource", Action: "read", Resource: "file:///etc/passwd", Rule: -1}},
		{func() (policy.Call, error) { return p.MapPrompt("review-code", nil) },
			policy.Call{Namespace: "prompts", Action: "get", Resource: "*"}},
		{func() (policy.Call, error) { return p.MapPrompt("summarize", nil) },
			policy.Call{Namespace: "mcp-prompt", Action: "get", Resource: "summarize", Rule: -1}},
		{func() (policy.Call, error) {
			c, ok := p.MapMethod("acme/search")
			if !ok {
				return c, errors.New("acme/search is not mapped")
			}
			return c, nil
		}, policy.Call{Namespace: "acme", Action: "search", Resource: "*", Cost: 5, MaxCost: 5, Rule: -1}},
		{func() (policy.Call, error) { return p.Map("read_file", []byte(`{"path": "/a"}`)) },
			policy.Call{Namespace: "docs", Action: "read", Resource: "/a", Cost: 100, MaxCost: 1000}},
	} {
		if got, err := c.got(); err != nil || got != c.want {
			t.Errorf("got %+v, %v; want %+v", got, err, c.want)
		}
	}
}
