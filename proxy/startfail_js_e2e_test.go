//go:build unix

package proxy_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/revocation"
)

// connectReport is what connect.mjs writes.
type connectReport struct {
	Connected bool `json:"connected"`
	Error     *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// connectJS has the TypeScript SDK's stdio client start argv itself, as
// a desktop client does, and returns what connecting showed it.
func connectJS(t *testing.T, argv ...string) connectReport {
	t.Helper()
	out := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command("node", append([]string{"connect.mjs", out}, argv...)...)
	cmd.Dir = jsApprover(t)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node connect.mjs: %v\n%s", err, stderr.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatalf("node connect.mjs wrote no report: %v\n%s", err, stderr.String())
	}
	var rep connectReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("report %s: %v", b, err)
	}
	t.Logf("TypeScript SDK client: %s\nproxy's standard error: %s", b, strings.TrimSpace(stderr.String()))
	return rep
}

// A proxy that cannot start used to exit with its reason on standard error
// only, which an MCP client does not show: the person saw "Connection
// closed". Now it answers the client's initialize with a JSON-RPC error
// that says what is wrong and what to do, then exits; the TypeScript SDK's
// client, starting the real binary as a desktop client does, is given
// that reason.
func TestStartFailureShownInTypeScriptSDK(t *testing.T) {
	e := mcptest.NewEnv(t)
	bin := mcptest.Delegateos(t)
	docserver := mcptest.Docserver(t)
	writeToken := func(name string, tok *dct.Token) string {
		path := filepath.Join(e.Dir, name)
		mcptest.WriteFile(t, path, tok.String())
		return "@" + path
	}
	good := e.Mint(nil, "docs:read:/**")
	expired := e.Mint(func(p *dct.CreateParams) {
		p.IssuedAt = time.Now().Add(-2 * time.Hour)
		p.ExpiresAt = time.Now().Add(-time.Hour)
	}, "docs:read:/**")
	revoked := e.Mint(nil, "docs:read:/**")
	revs := filepath.Join(e.Dir, "revocations.json")
	mcptest.WriteFile(t, revs, "[]")
	entry, err := revocation.NewEntry(e.Root, revoked.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := revocation.Append(revs, entry); err != nil {
		t.Fatal(err)
	}
	pol := e.Policy()
	pol.RevocationList = revs
	policyPath := filepath.Join(e.Dir, "policy.yaml")
	mcptest.WriteFile(t, policyPath, pol.YAML())
	badPolicy := filepath.Join(e.Dir, "bad.yaml")
	mcptest.WriteFile(t, badPolicy, "roots: [\"a\",\ntools: {\n")
	upstream := []string{"--", docserver, "--root", e.Docs}

	for _, c := range []struct {
		name string
		args []string
		want []string // in the message the client is given
	}{
		{"expired token", []string{"--policy", policyPath, "--token", writeToken("expired.tok", expired)},
			[]string{"delegateos proxy cannot start: the session token is not valid: expired", "mint or attenuate a new one"}},
		{"revoked token", []string{"--policy", policyPath, "--token", writeToken("revoked.tok", revoked)},
			[]string{"delegateos proxy cannot start: the session token is not valid: revoked", "ask its issuer for a new one"}},
		{"bad policy", []string{"--policy", badPolicy, "--token", writeToken("good.tok", good)},
			[]string{"delegateos proxy cannot start: " + badPolicy + ":", "not valid YAML", "'delegateos policy check " + badPolicy + "' lists every problem"}},
		{"unknown flag", []string{"--polcy", policyPath},
			[]string{"delegateos proxy cannot start: unknown flag: --polcy; run 'delegateos proxy --help'"}},
		{"upstream missing", []string{"--policy", policyPath, "--token", writeToken("good.tok", good), "--", filepath.Join(e.Dir, "no-such-server")},
			[]string{"delegateos proxy cannot start: cannot start the upstream MCP server", "no-such-server"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{bin, "proxy"}, c.args...)
			if c.name != "upstream missing" {
				args = append(args, upstream...)
			}
			rep := connectJS(t, args...)
			if rep.Connected || rep.Error == nil {
				t.Fatalf("the client connected: %+v", rep)
			}
			for _, w := range c.want {
				if !strings.Contains(rep.Error.Message, w) {
					t.Errorf("the client was shown %q; want it to contain %q", rep.Error.Message, w)
				}
			}
			if strings.Contains(rep.Error.Message, "Connection closed") {
				t.Errorf("the client was shown %q", rep.Error.Message)
			}
		})
	}
	// The same proxy with a good token starts: the client connects.
	if rep := connectJS(t, append([]string{bin, "proxy", "--policy", policyPath, "--token", writeToken("good.tok", good)}, upstream...)...); !rep.Connected {
		t.Fatalf("a proxy that can start: %+v", rep)
	}
}

// The same for delegateos serve at session start: the TypeScript SDK's
// Streamable HTTP client is shown why its session was refused (a revoked
// or expired token, an upstream that exits as it starts) and what to do.
func TestSessionStartFailureShownInTypeScriptSDK(t *testing.T) {
	e := mcptest.NewEnv(t)
	expired := e.Mint(func(p *dct.CreateParams) {
		p.IssuedAt = time.Now().Add(-2 * time.Hour)
		p.ExpiresAt = time.Now().Add(-time.Hour)
	}, "mcp:echo:*")
	revoked := e.Mint(nil, "mcp:echo:*")
	revs := filepath.Join(e.Dir, "revocations.json")
	mcptest.WriteFile(t, revs, "[]")
	entry, err := revocation.NewEntry(e.Root, revoked.RevocationIDs()[0], revocation.ScopeChain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := revocation.Append(revs, entry); err != nil {
		t.Fatal(err)
	}
	pol := e.Policy()
	pol.RevocationList = revs
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol})
	dying := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(),
		Upstream: []string{"/bin/sh", "-c", "echo 'Error: Cannot find module server.js' >&2; exit 3"}})
	good := e.Mint(nil, "mcp:echo:*")
	for _, c := range []struct {
		name, url string
		tok       *dct.Token
		want      []string
	}{
		{"expired token", srv.URL, expired, []string{"not valid: expired", "get a new one"}},
		{"revoked token", srv.URL, revoked, []string{"not valid: revoked", "ask its issuer for a new one"}},
		// The relay's answer to the pending initialize, or the session's
		// end, whichever comes first: both say how the upstream ended.
		{"upstream exits", dying.URL, good, []string{"upstream MCP server exited", "exit status 3"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "report.json")
			cmd := exec.Command("node", "httpcall.mjs", c.url, c.tok.String(), out, "echo", `{"text":"hi"}`)
			cmd.Dir = jsApprover(t)
			if b, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("node httpcall.mjs: %v\n%s", err, b)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("TypeScript SDK client: %s", b)
			var rep jsReport
			if err := json.Unmarshal(b, &rep); err != nil {
				t.Fatalf("report %s: %v", b, err)
			}
			if rep.Error == nil {
				t.Fatalf("the session started: %s", b)
			}
			if c.url == srv.URL && rep.Error.Code != 401 {
				t.Errorf("the client's error code is %d; want 401 (the HTTP status)", rep.Error.Code)
			}
			for _, w := range c.want {
				if !strings.Contains(rep.Error.Message, w) {
					t.Errorf("the client was shown %q; want it to contain %q", rep.Error.Message, w)
				}
			}
		})
	}
}

// inspectorVersion is the @modelcontextprotocol/inspector version that
// interop/inspector-cli pins.
const inspectorVersion = "2.12.0"

// inspectorCLI installs interop/inspector-cli's pinned packages once and
// returns the Inspector's launcher.
func inspectorCLI(t *testing.T) string {
	t.Helper()
	dir := mcptest.NodePackages(t, "interop/inspector-cli", "@modelcontextprotocol/inspector", inspectorVersion)
	return filepath.Join(dir, "node_modules", ".bin", "mcp-inspector")
}

// The MCP Inspector's CLI, starting a proxy whose policy does not parse,
// shows why (it said "Connection closed").
func TestStartFailureShownInInspectorCLI(t *testing.T) {
	e := mcptest.NewEnv(t)
	bad := filepath.Join(e.Dir, "bad.yaml")
	mcptest.WriteFile(t, bad, "roots: [\n  - x\n")
	cmd := exec.Command(inspectorCLI(t), "--cli", "--method", "tools/list", "--",
		mcptest.Delegateos(t), "proxy", "--policy", bad, "--", mcptest.Docserver(t), "--root", e.Docs)
	out, err := cmd.CombinedOutput()
	t.Logf("mcp-inspector --cli: %v\n%s", err, out)
	want := `{"error":{"code":"error","message":"delegateos proxy cannot start: ` + bad + `:1:8: not valid YAML`
	if !strings.Contains(string(out), want) {
		t.Fatalf("the Inspector showed\n%s\nwant it to contain %s", out, want)
	}
}
