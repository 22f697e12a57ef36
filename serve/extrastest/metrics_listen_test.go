//go:build unix

package extrastest

import (
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// get fetches url with an optional Host header.
func get(t *testing.T, url, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// --metrics-listen moves /metrics to a listener of its own, behind the
// same Host check, and off the MCP listener; off serves it nowhere.
func TestMetricsListen(t *testing.T) {
	e := mcptest.NewEnv(t)
	tok := e.Mint(nil, "mcp:echo:*")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--metrics-listen", "127.0.0.1:0"}})
	at := srv.WaitLog("serving metrics", nil)
	url, _ := at["url"].(string)
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.HasSuffix(url, "/metrics") {
		t.Fatalf("serving metrics at %q", url)
	}
	bearer := mcptest.Bearer(tok)
	sid := srv.Initialize(bearer)
	srv.Post(sid, bearer, mcptest.CallBody("1", "echo", map[string]any{"text": "hi"}))
	if code, body := get(t, url, ""); code != 200 || !strings.Contains(body, `delegateos_decisions_total{method="tools/call",result="allowed"} 1`) {
		t.Fatalf("metrics listener: %d %s", code, mcptest.Clip([]byte(body)))
	}
	if code, _ := get(t, url, "evil.example"); code != http.StatusForbidden {
		t.Fatalf("metrics listener with a foreign Host: %d", code)
	}
	if r := srv.Do(http.MethodGet, "/metrics", nil, ""); r.Status != http.StatusNotFound {
		t.Fatalf("/metrics on the MCP listener with --metrics-listen: %d", r.Status)
	}

	off := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Flags: []string{"--metrics-listen", "off"}})
	if r := off.Do(http.MethodGet, "/metrics", nil, ""); r.Status != http.StatusNotFound {
		t.Fatalf("/metrics with --metrics-listen off: %d", r.Status)
	}
	if n := len(off.LogWith("serving metrics", nil)); n != 0 {
		t.Fatalf("--metrics-listen off still serves metrics: %v", off.LogWith("serving metrics", nil))
	}
}

// A --metrics-listen that is not HOST:PORT stops serve at start.
func TestMetricsListenBadAddress(t *testing.T) {
	e := mcptest.NewEnv(t)
	pol := filepath.Join(e.Dir, "policy.yaml")
	mcptest.WriteFile(t, pol, e.Policy().YAML())
	_, stderr, code := mcptest.CLI(t, "serve", "--listen", "127.0.0.1:0", "--policy", pol, "--metrics-listen", "nowhere", "--", "true")
	if code == 0 || !strings.Contains(stderr, "--metrics-listen nowhere") {
		t.Fatalf("serve --metrics-listen nowhere: exit %d, %s", code, stderr)
	}
}
