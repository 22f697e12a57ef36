//go:build unix

package oauth_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
)

// Token exchange: an agent holding an access token gets, over OAuth, an
// attenuation of it for a sub-agent: a child of its token, narrowed to
// the scope asked for; asking for more is refused; the child ends with
// its parent's authorization.
func TestTokenExchangeNarrows(t *testing.T) {
	t.Parallel()
	a := startAS(t, nil)
	c := a.register(t, "agent")
	tr := c.tokens("mcp:echo:* docs:read:/project/**", "")
	parent := tr["access_token"].(string)
	exchange := func(subject, scope string, hdr map[string]string) (int, map[string]any) {
		form := url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:token-exchange"}, "subject_token": {subject},
			"subject_token_type": {"urn:ietf:params:oauth:token-type:access_token"}, "scope": {scope}, "budget": {"1000"}}
		return a.post(t, "/token", "application/x-www-form-urlencoded", form.Encode(), hdr)
	}
	if st, m := exchange(parent, "mcp:echo:* docs:write:/project/**", nil); st != http.StatusBadRequest || m["error"] != "invalid_scope" {
		t.Errorf("an exchange asking for more than the subject token holds: %d %v", st, m)
	}
	other := mcptest.Attenuate(t, a.grant, a.e.Agent, mcptest.NewKey(t, "x"), 10, "mcp:echo:*")
	if st, m := exchange(other.String(), "mcp:echo:*", nil); st != http.StatusBadRequest || m["error"] != "invalid_grant" {
		t.Errorf("an exchange of a token this server did not issue: %d %v", st, m)
	}
	st, m := exchange(parent, "mcp:echo:*", nil)
	if st != http.StatusOK || m["issued_token_type"] != "urn:ietf:params:oauth:token-type:access_token" || m["refresh_token"] != nil {
		t.Fatalf("exchange: %d %v", st, m)
	}
	child := m["access_token"].(string)
	pt, _ := dct.ParseInput(parent)
	ct, _ := dct.ParseInput(child)
	if prefix, err := ct.Prefix(pt.Blocks()); err != nil || ct.Blocks() != pt.Blocks()+1 || prefix.String() != pt.String() {
		t.Fatalf("the exchanged token is not a child of its subject: %d blocks, parent %d", ct.Blocks(), pt.Blocks())
	}
	sid := a.srv.Initialize(bearer(child))
	if r := a.srv.Post(sid, bearer(child), mcptest.CallBody("1", "echo", map[string]any{"text": "sub"})); !strings.Contains(string(r.Body), `"sub"`) {
		t.Fatalf("echo with the exchanged token: %s", r.Body)
	}
	r := a.srv.Post(sid, bearer(child), mcptest.CallBody("2", "read_file", map[string]any{"path": "/project/README.md"}))
	if !strings.Contains(string(r.Body), "capability_not_granted") {
		t.Fatalf("read_file, which the parent may and the child may not: %s", r.Body)
	}
	// Ending the parent's authorization (a rotated refresh token presented
	// again) ends the child.
	c.refresh(tr["refresh_token"].(string), "")
	c.refresh(tr["refresh_token"].(string), "")
	if r := a.initialize(t, bearer(child)); r.Status != http.StatusUnauthorized {
		t.Errorf("the exchanged token after its authorization ended: HTTP %d", r.Status)
	}
	// A DPoP-bound subject token needs its key's proof.
	key := newDPoPKey(t)
	tr = c.tokens("mcp:echo:*", key.proof("POST", a.srv.Base+"/token", "", time.Now()))
	if st, m := exchange(tr["access_token"].(string), "mcp:echo:*", nil); st != http.StatusBadRequest || m["error"] != "invalid_dpop_proof" {
		t.Errorf("an exchange of a DPoP-bound token without its proof: %d %v", st, m)
	}
	if st, m := exchange(tr["access_token"].(string), "mcp:echo:*", map[string]string{"DPoP": key.proof("POST", a.srv.Base+"/token", "", time.Now())}); st != http.StatusOK || m["token_type"] != "DPoP" {
		t.Errorf("an exchange of a DPoP-bound token with its proof: %d %v", st, m)
	}
}
