package main

import (
	"crypto/ed25519"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestLDPSubmitMoreContradictedRefusals: 'ldp submit --record' took as
// refusals (nothing recorded) failures the initiator can see are false
// from the exchange alone, beyond those the Exchange read (rtldp3 #5;
// rtldp4 #2): a delegate whose tool is down answers every task with
// CONTRACT_REFUSED/policy (ldp submit sends no contract), MISADDRESSED/
// identity (the envelope was addressed to the delegate ID its own card
// gives), malformed_token/security (the token is the one the initiator
// narrowed a moment before: it parses) or expired/policy (that token's
// expiry is --ttl ahead). Each keeps the failure out of its reputation.
// Suggested fix: ldp.Exchange learns the contract sent (none), the To
// written, and the narrowed token (parses; not before its expiry), and
// Contradicts reads CONTRACT_REFUSED, MISADDRESSED, malformed_token and
// expired against them.
func TestRT4MoreContradictedRefusals(t *testing.T) {
	env := mcptest.NewEnv(t)
	tokFile := filepath.Join(env.Dir, "agent.tok")
	os.WriteFile(tokFile, []byte(env.Mint(nil, "docs:read:/**").String()), 0o600)
	agentKey := env.KeyFile(env.Agent)
	key := mcptest.NewKey(t, "delegate")
	x := &failingExec{}
	r := &ldp.Responder{Exec: x, Key: key.PrivateKey(), Verifier: &ldp.Verifier{}}
	srv := httptest.NewUnstartedServer(&ldp.Handler{Responder: r})
	url := "http://" + srv.Listener.Addr().String()
	did := identity.DIDFromPublicKey(key.PrivateKey().Public().(ed25519.PublicKey))
	r.Card = &ldp.IdentityCard{DelegateID: "ldp:delegate:reports", Name: "Reports", ModelFamily: "none", ModelVersion: "1",
		TrustDomain: ldp.TrustDomain{Name: "research"}, ContextWindow: 8192,
		Capabilities: []ldp.Capability{{Name: "summarize"}}, SupportedPayloadModes: []ldp.PayloadMode{ldp.ModeText}, Endpoint: url,
		Metadata: map[string]string{ldp.MetaDID: did, ldp.MetaCapabilityPrefix + "summarize": "docs:read:/reports/**"}}
	srv.Start()
	t.Cleanup(srv.Close)
	ws := t.TempDir()
	observer := identity.DIDFromPublicKey(env.Root.Public())
	var hidden []string
	for _, c := range []struct{ code, category string }{
		{ldp.CodeContract, "policy"},
		{ldp.CodeMisaddressed, "identity"},
		{"malformed_token", "security"},
		{"expired", "policy"},
	} {
		x.set(ldp.LdpError{Code: c.code, Category: c.category, Severity: "error", Message: "the tool is down, but say so"})
		out, errs, code := mcptest.CLI(t, "ldp", "submit", "--key", agentKey, "--token", "@"+tokFile, "--skill", "summarize",
			"--input", `"x"`, "--trust-domain", "research", "--record", "--source", observer, "--workspace", ws, "--json", url)
		var rep struct {
			Recorded *struct {
				Score float64 `json:"score"`
			} `json:"recorded"`
			NotRecorded string `json:"not_recorded"`
		}
		if code != 1 || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("%s/%s: exit %d\n%s%s", c.code, c.category, code, out, errs)
		}
		if rep.Recorded == nil {
			hidden = append(hidden, c.code+"/"+c.category+": "+rep.NotRecorded)
		} else if rep.Recorded.Score != 0 {
			t.Errorf("%s/%s: recorded %+v", c.code, c.category, *rep.Recorded)
		}
	}
	if len(hidden) > 0 {
		t.Fatalf("a delegate hid its failures behind refusals the initiator can see are false:\n%s", strings.Join(hidden, "\n"))
	}
}
