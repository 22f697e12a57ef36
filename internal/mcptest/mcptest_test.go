package mcptest_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/policy"
)

func TestMain(m *testing.M) { os.Exit(mcptest.Run(m)) }

func TestFrameChecker(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	c := mcptest.NewFrameChecker(r)
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,                   // request
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,     // notification
		`{"jsonrpc":"2.0","id":1,"result":{}}` + "\r",                // response, CRLF
		`{"jsonrpc":"2.0","id":2,"error":{"code":-1,"message":"x"}}`, // error response
		`not json`,
		`{"jsonrpc":"1.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"result":{},"error":{}}`,
		`{"jsonrpc":"2.0","id":1}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
	}
	all := strings.Join(lines, "\n") + "\n" + `{"jsonrpc":"2.0","id":3,"method":"ping"}`
	// Written in small pieces, so that frames span reads.
	go func() {
		for b := []byte(all); len(b) > 0; b = b[min(len(b), 7):] {
			_, _ = w.Write(b[:min(len(b), 7)])
		}
		w.Close()
	}()
	got, err := readAll(c)
	if err != nil || got != all {
		t.Errorf("read %q, %v; want every byte written", got, err)
	}
	if !c.WaitEOF(time.Second) {
		t.Fatal("no EOF")
	}
	if n := c.Frames(); n != 4 {
		t.Errorf("%d frames, want 4", n)
	}
	bad := c.Violations()
	if len(bad) != 6 || !strings.Contains(bad[5], "unterminated last line") {
		t.Errorf("violations: %q; want 5 bad lines and the unterminated last one", bad)
	}
}

func readAll(c *mcptest.FrameChecker) (string, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(c)
	return b.String(), err
}

// TestPolicyYAML: what Policy writes is what the proxy's policy package
// reads.
func TestPolicyYAML(t *testing.T) {
	e := mcptest.NewEnv(t)
	pol := e.Policy(mcptest.Priced("echo", 100))
	pol.DefaultCost = 7
	pol.AllowUnauthenticated = true
	pol.HonourUpstreamCost = true
	pol.RevocationList = filepath.Join(e.Dir, "revocations.json")
	pol.SpendStore = filepath.Join(e.Dir, "spend.log")
	pol.MaxFrameBytes = 1 << 20
	path := filepath.Join(e.Dir, "policy.yaml")
	mcptest.WriteFile(t, path, pol.YAML())
	p, err := policy.Load(path)
	if err != nil {
		t.Fatalf("%v\n%s", err, pol.YAML())
	}
	if !slices.Equal(p.Roots, []string{e.Root.ID()}) || !p.AllowUnauthenticated || !p.HonourUpstreamCost || p.DefaultCost != 7 ||
		p.RevocationList != pol.RevocationList || p.SpendStore != pol.SpendStore || p.MaxFrameBytes != 1<<20 {
		t.Errorf("policy read back as %+v\nfrom\n%s", p, pol.YAML())
	}
	for tool, want := range map[string]policy.Call{
		"read_file":  {Namespace: "docs", Action: "read", Resource: "/a", Cost: 7, MaxCost: 7},
		"write_file": {Namespace: "docs", Action: "write", Resource: "/a", Cost: 7, MaxCost: 7},
		"echo":       {Namespace: "mcp", Action: "echo", Resource: "*", Cost: 100, MaxCost: 100},
	} {
		got, err := p.Map(tool, []byte(`{"path":"/a"}`))
		got.Rule = 0
		if err != nil || got != want {
			t.Errorf("%s maps to %+v, %v; want %+v", tool, got, err, want)
		}
	}
}
