//go:build unix

package serve_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/internal/redistest"
)

// Two servers sharing a Redis spend store hold one budget between them:
// of 12 parallel calls at 1000 microcents against a budget of 5000, spread
// over both servers, exactly 5 are forwarded, and a revocation written to
// Redis is in force at both.
func TestServeFleetSharesRedisStores(t *testing.T) {
	t.Parallel()
	e := mcptest.NewEnv(t)
	rs := redistest.Start(t)
	pol := e.Policy(mcptest.Priced("echo", 1000))
	pol.SpendStore = rs.URL()
	pol.RevocationList = rs.URL()
	tok := e.Mint(func(p *dct.CreateParams) { p.MaxBudgetMicrocents = 5000 }, "mcp:echo:*")
	hdr := mcptest.Bearer(tok)
	servers := []*mcptest.Server{e.StartServe(mcptest.ServeOptions{Policy: pol}), e.StartServe(mcptest.ServeOptions{Policy: pol})}
	sids := []string{servers[0].Initialize(hdr), servers[1].Initialize(hdr)}
	var mu sync.Mutex
	allowed, refused := 0, 0
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := i % 2
			r := servers[s].Post(sids[s], hdr, mcptest.CallBody(strings.Repeat("1", i+1), "echo", map[string]any{"text": "x"}))
			mu.Lock()
			defer mu.Unlock()
			switch body := string(r.Body); {
			case strings.Contains(body, `"result"`):
				allowed++
			case strings.Contains(body, "budget_exceeded"):
				refused++
			default:
				t.Errorf("call %d: %d %s", i, r.Status, body)
			}
		}()
	}
	wg.Wait()
	if allowed != 5 || refused != 7 {
		t.Fatalf("%d allowed and %d refused over budget, want 5 and 7", allowed, refused)
	}
	if _, stderr, code := mcptest.CLI(t, "revoke", "--key", e.KeyFile(e.Root), "--list", rs.URL(), "--id", tok.RevocationIDs()[0]); code != 0 {
		t.Fatalf("delegateos revoke --list redis: %d %s", code, stderr)
	}
	for s, srv := range servers {
		mcptest.Eventually(t, "the revocation in force", func() bool {
			r := srv.Post(sids[s], hdr, mcptest.CallBody("98", "echo", map[string]any{"text": "x"}))
			return strings.Contains(string(r.Body), "revoked")
		})
		// Refused as revoked, or, once the server's check of its sessions
		// has closed the revoked session, as a session that is gone.
		if r := srv.Post(sids[s], hdr, mcptest.CallBody("99", "echo", map[string]any{"text": "x"})); !strings.Contains(string(r.Body), "revoked") && !(r.Status == 404 && strings.Contains(string(r.Body), "no such session")) {
			t.Errorf("server %d after the revoke: %d %s", s, r.Status, r.Body)
		}
	}
}
