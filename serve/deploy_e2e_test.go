package serve_test

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// A start that fails on its address, its certificate, its metrics
// address, its body limits or its tracing setting writes nothing to the audit log: it was opened (and a start
// recorded) before serve tried to listen, so every failed restart of a
// unit left a line.
func TestServeFailedStartLeavesNoAuditTrace(t *testing.T) {
	e := mcptest.NewEnv(t)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	keyFile := e.KeyFile(mcptest.NewKey(t, "server"))
	for name, c := range map[string]struct {
		flags []string
		want  string
	}{
		"busy port":               {[]string{"--listen", busy.Addr().String()}, "address already in use"},
		"missing TLS file":        {[]string{"--listen", "127.0.0.1:0", "--tls-cert", filepath.Join(e.Dir, "none.crt"), "--tls-key", filepath.Join(e.Dir, "none.key")}, "none.crt"},
		"body limits":             {[]string{"--listen", "127.0.0.1:0", "--max-body-bytes-in-flight", "1"}, "--max-body-bytes-in-flight 1 is below the largest body accepted"},
		"busy metrics port":       {[]string{"--listen", "127.0.0.1:0", "--metrics-listen", busy.Addr().String()}, "--metrics-listen " + busy.Addr().String() + ": listen tcp " + busy.Addr().String() + ": bind: address already in use"},
		"bad revocation peer":     {[]string{"--listen", "127.0.0.1:0", "--revocation-peer", "::bad"}, "--revocation-peer"},
		"authorize without grant": {[]string{"--listen", "127.0.0.1:0", "--authorize"}, "--authorize needs --grant"},
	} {
		logPath := filepath.Join(e.Dir, strings.ReplaceAll(name, " ", "-")+".audit.jsonl")
		pol := e.Policy()
		pol.Extra = "proxy_key: " + keyFile + "\naudit_log: " + logPath + "\n"
		polPath := filepath.Join(e.Dir, strings.ReplaceAll(name, " ", "-")+".yaml")
		mcptest.WriteFile(t, polPath, pol.YAML())
		args := append([]string{"serve", "--policy", polPath}, c.flags...)
		_, stderr, code := mcptest.CLI(t, append(args, "--", "true")...)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: exit %d, %q; want 2 naming %q", name, code, stderr, c.want)
		}
		if b, err := os.ReadFile(logPath); err == nil && len(b) > 0 {
			t.Errorf("%s: the failed start wrote the audit log:\n%s", name, b)
		}
	}
	// A tracing setting that cannot be honoured (the binary inherits the
	// test's environment).
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:1")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")
	logPath := filepath.Join(e.Dir, "tracing.audit.jsonl")
	pol := e.Policy()
	pol.Extra = "proxy_key: " + keyFile + "\naudit_log: " + logPath + "\n"
	polPath := filepath.Join(e.Dir, "tracing.yaml")
	mcptest.WriteFile(t, polPath, pol.YAML())
	_, stderr, code := mcptest.CLI(t, "serve", "--policy", polPath, "--listen", "127.0.0.1:0", "--", "true")
	if code != 2 || !strings.Contains(stderr, "tracing: ") || !strings.Contains(stderr, "http/json") {
		t.Errorf("bad tracing setting: exit %d, %q; want 2 naming it", code, stderr)
	}
	if b, err := os.ReadFile(logPath); err == nil && len(b) > 0 {
		t.Errorf("bad tracing setting: the failed start wrote the audit log:\n%s", b)
	}
}

// /readyz is ready only while the upstream can be reached: the
// --upstream-url server accepts connections, or the upstream command can
// still be run.
func TestServeReadyzFollowsTheUpstream(t *testing.T) {
	e := mcptest.NewEnv(t)
	up, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), UpstreamURL: "http://" + up.Addr().String() + "/mcp"})
	ready := func(srv *mcptest.Server) int { return srv.Do("GET", "/readyz", nil, "").Status }
	if s := ready(srv); s != 200 {
		t.Fatalf("readyz with the upstream listening: HTTP %d", s)
	}
	up.Close()
	mcptest.Eventually(t, "readyz 503 once the upstream stops listening", func() bool { return ready(srv) == 503 })
	srv.WaitLog("not ready: the upstream cannot be reached", nil)

	bin := filepath.Join(e.Dir, "upstream")
	docserver, err := os.ReadFile(mcptest.Docserver(t))
	if err != nil {
		t.Fatal(err)
	}
	mcptest.WriteFile(t, bin, string(docserver))
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Upstream: []string{bin, "--root", e.Docs}})
	if s := ready(cmd); s != 200 {
		t.Fatalf("readyz with the upstream command there: HTTP %d", s)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	mcptest.Eventually(t, "readyz 503 once the upstream command is gone", func() bool { return ready(cmd) == 503 })
}

// --upstream-header sends the upstream's credentials with every request
// to --upstream-url, from a file or the environment; an upstream that
// needs them refuses a server that has none.
func TestServeUpstreamHeaderCredentials(t *testing.T) {
	up := server.NewMCPServer("guarded", "1", server.WithToolCapabilities(true))
	up.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("guarded says " + req.GetString("text", "")), nil
	})
	var refused atomic.Int64
	h := server.NewStreamableHTTPServer(up)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer upstream-secret" || r.Header.Get("X-Tenant") != "acme" {
			refused.Add(1)
			http.Error(w, "who are you", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	e := mcptest.NewEnv(t)
	secret := filepath.Join(e.Dir, "upstream.token")
	mcptest.WriteFile(t, secret, "Bearer upstream-secret\n")
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	call := mcptest.CallBody("1", "echo", map[string]any{"text": "hi"})

	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), UpstreamURL: hs.URL + "/mcp",
		Flags: []string{"--upstream-header", "Authorization: @" + secret, "--upstream-header", "X-Tenant: $UPSTREAM_TENANT"},
		Env:   []string{"UPSTREAM_TENANT=acme"}})
	sid := srv.Initialize(tok)
	if r := srv.Post(sid, tok, call); !strings.Contains(string(r.Body), "guarded says hi") {
		t.Fatalf("a call with the upstream's credentials: HTTP %d %s", r.Status, r.Body)
	}
	if n := refused.Load(); n != 0 {
		t.Fatalf("the upstream refused %d requests of the server with its credentials", n)
	}

	bare := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), UpstreamURL: hs.URL + "/mcp"})
	r := bare.Do(http.MethodPost, "/mcp", tok, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
	if strings.Contains(string(r.Body), `"guarded"`) || !strings.Contains(string(r.Body), "error") {
		t.Fatalf("a server without the upstream's credentials: HTTP %d %s; want the initialize refused", r.Status, r.Body)
	}
	if refused.Load() == 0 {
		t.Fatal("the upstream saw no request without credentials")
	}

	for _, c := range []struct{ flag, want string }{
		{"Mcp-Session-Id: x", "sets this header itself"},
		{"X-Tenant: $NOT_SET_ANYWHERE", "not set"},
		{"Bad Name: x", "NAME: VALUE"},
		{"X-File: @" + filepath.Join(e.Dir, "missing"), "missing"},
	} {
		_, stderr, code := mcptest.CLI(t, "serve", "--root", e.Root.ID(), "--upstream-url", hs.URL+"/mcp", "--upstream-header", c.flag)
		if code != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("--upstream-header %q: exit %d %q; want 2 and %q", c.flag, code, stderr, c.want)
		}
	}
}

// A container configures serve by DELEGATEOS_<FLAG> variables alone: the
// address, the policy and the output come from the environment, and the
// log says which flags did.
func TestServeConfiguredByEnvironment(t *testing.T) {
	e := mcptest.NewEnv(t)
	polPath := filepath.Join(e.Dir, "env-policy.yaml")
	mcptest.WriteFile(t, polPath, e.Policy().YAML())
	cmd := exec.Command(mcptest.Delegateos(t), "serve", "--", mcptest.Docserver(t), "--root", e.Docs)
	cmd.Env = append(os.Environ(), "DELEGATEOS_LISTEN=127.0.0.1:0", "DELEGATEOS_POLICY="+polPath, "DELEGATEOS_JSON=true",
		"DELEGATEOS_STATE_DIR="+filepath.Join(e.Dir, "state"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Signal(syscall.SIGTERM); _ = cmd.Wait() }()
	var where struct{ Address string }
	if err := json.NewDecoder(out).Decode(&where); err != nil || !strings.HasPrefix(where.Address, "127.0.0.1:") {
		t.Fatalf("serve from the environment: %v %q %s", err, where.Address, stderr.String())
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+where.Address+"/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Errorf("the policy from DELEGATEOS_POLICY needs a token: HTTP %d without one", r.StatusCode)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	_ = cmd.Wait()
	if log := stderr.String(); !strings.Contains(log, "flags taken from the environment") || !strings.Contains(log, "DELEGATEOS_POLICY") {
		t.Errorf("the log does not say which flags came from the environment:\n%s", log)
	}
}
