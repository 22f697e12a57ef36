package serve_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// An --upstream-url that needs credentials gets them on every request:
// headers from a file (--upstream-headers) and from the environment
// (--upstream-header-env), none of them on the command line; headers the
// bridge sets itself, and a missing variable, stop serve at start.
func TestServeUpstreamURLHeaders(t *testing.T) {
	var mu sync.Mutex
	var seen []http.Header
	up := server.NewMCPServer("http-upstream", "1", server.WithToolCapabilities(true))
	up.AddTool(mcp.NewTool("echo", mcp.WithString("text")), func(ctx context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText("http says " + req.GetString("text", "")), nil
	})
	inner := server.NewStreamableHTTPServer(up)
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Clone())
		mu.Unlock()
		if r.Header.Get("Authorization") != "Bearer s3cret" || r.Header.Get("X-Tenant") != "acme" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(hs.Close)

	e := mcptest.NewEnv(t)
	headers := filepath.Join(e.Dir, "upstream.headers")
	if err := os.WriteFile(headers, []byte("# the upstream's credentials\nX-Tenant: acme\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("UPSTREAM_AUTH", "Bearer s3cret")
	srv := e.StartServe(mcptest.ServeOptions{Policy: e.Policy(), UpstreamURL: hs.URL + "/mcp",
		Flags: []string{"--upstream-headers", headers, "--upstream-header-env", "Authorization=UPSTREAM_AUTH"}})
	tok := mcptest.Bearer(e.Mint(nil, "mcp:echo:*"))
	sid := srv.Initialize(tok)
	r := srv.Post(sid, tok, mcptest.CallBody("1", "echo", map[string]any{"text": "hi"}))
	if !strings.Contains(string(r.Body), "http says hi") {
		t.Fatalf("echo through an upstream that wants credentials: %s", r.Body)
	}
	mu.Lock()
	if len(seen) == 0 {
		t.Fatal("the upstream saw no request")
	}
	for _, h := range seen {
		if h.Get("Authorization") != "Bearer s3cret" || h.Get("X-Tenant") != "acme" {
			t.Errorf("a request without the credentials: %v", h)
		}
	}
	mu.Unlock()

	for _, tc := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--upstream-header-env", "Authorization=NO_SUCH_VARIABLE_SET"}, "the environment variable NO_SUCH_VARIABLE_SET is not set"},
		{[]string{"--upstream-header-env", "Mcp-Session-Id=UPSTREAM_AUTH"}, "Mcp-Session-Id is set by the bridge"},
		{[]string{"--upstream-headers", filepath.Join(e.Dir, "missing")}, "--upstream-headers"},
	} {
		args := append([]string{"serve", "--root", e.Root.ID(), "--upstream-url", hs.URL + "/mcp"}, tc.flags...)
		_, stderr, code := mcptest.CLI(t, args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%q: exit %d, %q; want 2 and %q", tc.flags, code, stderr, tc.want)
		}
	}
	_, stderr, code := mcptest.CLI(t, "serve", "--root", e.Root.ID(), "--upstream-headers", headers, "--", "cat")
	if code != 2 || !strings.Contains(stderr, "are sent to --upstream-url") {
		t.Errorf("--upstream-headers without --upstream-url: exit %d, %q", code, stderr)
	}
}
