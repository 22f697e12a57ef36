//go:build unix

package oauth_test

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/mcptest"
)

// An issued token is recorded like any delegation: its chain in the
// workspace's delegation log, a receipt in the audit log. Revoking the
// consent delegation (the block the grant key signed) refuses its access
// tokens at the gate and its refresh.
func TestIssuedTokensRecordedAndRevocable(t *testing.T) {
	t.Parallel()
	var revs string
	a := startAS(t, func(e *mcptest.Env, p *mcptest.Policy) {
		revs = filepath.Join(e.Dir, "revocations.json")
		mcptest.WriteFile(t, revs, "[]\n")
		p.RevocationList = revs
		e.KeyFile(mcptest.NewKey(t, "proxy"))
		p.Extra = "workspace: ws\naudit_log: audit.log\nproxy_key: proxy.key\n"
	})
	c := a.register(t, "recorded client")
	tr := c.tokens("mcp:echo:*", "")
	tok := tr["access_token"].(string)
	approved := a.srv.WaitLog("oauth consent approved", nil)
	del := approved["delegation"].(string)
	log, err := os.ReadFile(filepath.Join(a.e.Dir, "ws", "delegations.jsonl"))
	if err != nil || !strings.Contains(string(log), `"id":"`+del+`"`) {
		t.Fatalf("the consent delegation %s is not in the delegation log: %v\n%s", del, err, log)
	}
	sid := a.srv.Initialize(bearer(tok))
	if r := a.srv.Post(sid, bearer(tok), mcptest.CallBody("1", "echo", map[string]any{"text": "hi"})); !strings.Contains(string(r.Body), `"hi"`) {
		t.Fatalf("echo: %s", r.Body)
	}

	tokFile := filepath.Join(a.e.Dir, "access.tok")
	mcptest.WriteFile(t, tokFile, tok)
	if _, stderr, code := mcptest.CLI(t, "revoke", "--key", filepath.Join(a.e.Dir, "agent.key"), "--token", "@"+tokFile,
		"--block", fmt.Sprint(a.grant.Blocks()), "--list", revs); code != 0 {
		t.Fatalf("revoke: %s", stderr)
	}
	if r := a.initialize(t, bearer(tok)); r.Status != http.StatusUnauthorized {
		t.Errorf("an access token of a revoked consent: HTTP %d, want 401", r.Status)
	}
	if st, m := c.refresh(tr["refresh_token"].(string), ""); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Errorf("refresh of a revoked consent: %d %v", st, m)
	}
	a.srv.Signal(os.Interrupt)
	a.srv.WaitExit(mcptest.CallTimeout)
	audit, err := os.ReadFile(filepath.Join(a.e.Dir, "audit.log"))
	if err != nil || !strings.Contains(string(audit), `"action":"mcp.oauth.token"`) || !strings.Contains(string(audit), `"resource":"recorded client"`) {
		t.Fatalf("no receipt of the issued token in the audit log: %v\n%s", err, audit)
	}
}
