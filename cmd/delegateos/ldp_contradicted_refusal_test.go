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

// TestLDPSubmitContradictedRefusalIsFailure: 'ldp submit --record' takes a
// failure as a refusal (nothing recorded) whenever its code is one the
// table gives the category sent. A delegate that fails every task (its
// tool is broken) answers each with a genuine refusal code the initiator
// can itself see is false: capability_not_granted to a token narrowed to
// exactly the capability the delegate's card names for the skill,
// SKILL_UNKNOWN for a skill its card and manifest list, SESSION_UNKNOWN in
// the session it has just accepted, envelope_stale to an envelope signed a
// moment ago; and a made-up code, which the table says is counted, passes
// as a refusal when it started with signature_ (rtldp3 #5). Now 'ldp
// submit --record' reads a refusal against the exchange (ldp.Exchange)
// and AVP-Sig's reasons are listed exactly: each is recorded 0.0. So are
// CONTRACT_REFUSED, MISADDRESSED, malformed_token and expired, which the
// exchange contradicts too (rtldp4 #2, was TestRT4MoreContradictedRefusals).
func TestLDPSubmitContradictedRefusalIsFailure(t *testing.T) {
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
		{"capability_not_granted", "policy"},
		{ldp.CodeSkillUnknown, "capability"},
		{ldp.CodeSessionUnknown, "session"},
		{string(ldp.ReasonStale), "security"},
		// A made-up code is the delegate's failure, says the table, except
		// that every signature_* is taken as a security refusal.
		{"signature_tool_crashed", "security"},
		// rtldp4 #2: ldp submit sends no contract; the envelope was
		// addressed to the delegate ID the card gives; the token is the
		// one narrowed a moment before (it parses, its expiry is --ttl
		// ahead).
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
				Score   float64 `json:"score"`
				Message string  `json:"message"`
			} `json:"recorded"`
			NotRecorded string `json:"not_recorded"`
		}
		if code != 1 || json.Unmarshal([]byte(out), &rep) != nil {
			t.Fatalf("%s/%s: exit %d\n%s%s", c.code, c.category, code, out, errs)
		}
		if rep.Recorded == nil {
			hidden = append(hidden, c.code+"/"+c.category+": "+rep.NotRecorded)
		} else if rep.Recorded.Score != 0 || !strings.Contains(rep.Recorded.Message, "counted as the delegate's failure") {
			t.Errorf("%s/%s: recorded %+v", c.code, c.category, *rep.Recorded)
		}
	}
	if len(hidden) > 0 {
		t.Fatalf("a delegate hid its failures behind refusals the initiator can see are false:\n%s", strings.Join(hidden, "\n"))
	}
}
