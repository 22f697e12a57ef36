package serve_test

import (
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// /readyz is ready only while the upstream can be reached: an
// --upstream-url whose host takes no connection makes it 503 with why,
// and it is ready once the host listens; an upstream command that can no
// longer be found makes it 503 too.
func TestServeReadyOnlyWithUpstream(t *testing.T) {
	e := mcptest.NewEnv(t)
	// A port that is free now and taken later.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), UpstreamURL: "http://" + addr + "/mcp"})
	r := srv.Do(http.MethodGet, "/readyz", nil, "")
	if r.Status != http.StatusServiceUnavailable || !strings.Contains(string(r.Body), "the upstream cannot be reached") {
		t.Fatalf("readyz with the upstream down: HTTP %d %s", r.Status, r.Body)
	}
	if r := srv.Do(http.MethodGet, "/healthz", nil, ""); r.Status != http.StatusOK {
		t.Fatalf("healthz with the upstream down: HTTP %d (alive all the same)", r.Status)
	}
	l, err = net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if r := srv.Do(http.MethodGet, "/readyz", nil, ""); r.Status != http.StatusOK {
		t.Fatalf("readyz with the upstream up: HTTP %d %s", r.Status, r.Body)
	}

	// A command upstream that is removed after the start.
	bin := filepath.Join(t.TempDir(), "upstream")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexec cat\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	srv2 := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), Upstream: []string{bin}})
	if r := srv2.Do(http.MethodGet, "/readyz", nil, ""); r.Status != http.StatusOK {
		t.Fatalf("readyz with the command there: HTTP %d %s", r.Status, r.Body)
	}
	os.Remove(bin)
	if r := srv2.Do(http.MethodGet, "/readyz", nil, ""); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("readyz with the command gone: HTTP %d %s", r.Status, r.Body)
	}
}
