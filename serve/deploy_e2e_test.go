package serve_test

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// A start that fails on its address or its certificate writes nothing to
// the audit log: it was opened (and a start recorded) before serve tried
// to listen, so every failed restart of a unit left a line.
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
		"busy port":        {[]string{"--listen", busy.Addr().String()}, "address already in use"},
		"missing TLS file": {[]string{"--listen", "127.0.0.1:0", "--tls-cert", filepath.Join(e.Dir, "none.crt"), "--tls-key", filepath.Join(e.Dir, "none.key")}, "none.crt"},
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
