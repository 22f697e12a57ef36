package serve_test

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// Red team (issue 26 item 3, bullet 4), held: after `delegateos revoke`
// nothing brings a revoked token's session back: a stateless (2026-07-28)
// ping or call with it is 401, a GET resuming its closed session's stream
// with Last-Event-ID is refused, and a new initialize is 401.
// (Was TestRedteamRevokedNoResurrection.)
func TestServeRevokedSessionNotResumed(t *testing.T) {
	e := mcptest.NewEnv(t)
	list := filepath.Join(e.Dir, "revocations.json")
	mcptest.WriteFile(t, list, "[]\n")
	pol := e.Policy()
	pol.RevocationList = list
	srv := e.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--recheck-interval", "1h"}})
	tok := e.Mint(nil, "mcp:echo:*")
	stateless := mcptest.Bearer(tok)
	stateless["Mcp-Protocol-Version"] = "2026-07-28"
	call := mcptest.CallBody("1", "echo", map[string]any{"text": "x"})
	if r := srv.Do(http.MethodPost, "/mcp", stateless, call); r.Status != http.StatusOK {
		t.Fatalf("stateless call before revocation: HTTP %d %s", r.Status, r.Body)
	}
	sid := srv.Initialize(mcptest.Bearer(tok))
	if out, errs, code := mcptest.CLI(t, "revoke", "--key", e.KeyFile(e.Root), "--token", tok.String(), "--block", "0", "--list", list); code != 0 {
		t.Fatalf("revoke: %d %s %s", code, out, errs)
	}
	for _, body := range []string{call, `{"jsonrpc":"2.0","id":"p","method":"ping"}`} {
		if r := srv.Do(http.MethodPost, "/mcp", stateless, body); r.Status != http.StatusUnauthorized {
			t.Fatalf("stateless %s after revocation: HTTP %d %s", body, r.Status, r.Body)
		}
	}
	hdr := mcptest.Bearer(tok)
	hdr["Mcp-Session-Id"] = sid
	hdr["Accept"] = "text/event-stream"
	hdr["Last-Event-ID"] = "1"
	if r := srv.Do(http.MethodGet, "/mcp", hdr, ""); r.Status != http.StatusUnauthorized && r.Status != http.StatusNotFound {
		t.Fatalf("GET resume of the revoked session: HTTP %d %s", r.Status, r.Body)
	}
	if r := srv.Do(http.MethodPost, "/mcp", mcptest.Bearer(tok), initializeBody); r.Status != http.StatusUnauthorized {
		t.Fatalf("initialize after revocation: HTTP %d %s", r.Status, r.Body)
	}
}
