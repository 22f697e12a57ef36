//go:build redteam

package main

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// Attacks of the third LDP red team (rtldp3) that BREAK the product: each
// test states the secure behaviour and fails on main at 7a2218c.

// TestRT3DelegateHidesFailureAsRefusal: 'ldp submit --record' takes a
// failure as a refusal (nothing recorded) whenever its code is one the
// table gives the category sent. A delegate that fails every task (its
// tool is broken) answers each with a genuine refusal code the initiator
// can itself see is false: capability_not_granted to a token narrowed to
// exactly the capability the delegate's card names for the skill,
// SKILL_UNKNOWN for a skill its card and manifest list, SESSION_UNKNOWN in
// the session it has just accepted, envelope_stale to an envelope signed a
// moment ago; and a made-up code, which the table says is counted, passes
// as a refusal when it starts with signature_. Its reputation never sees a
// failure. BROKE: all five "not recorded".
func TestRT3DelegateHidesFailureAsRefusal(t *testing.T) {
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
		}
	}
	if len(hidden) > 0 {
		t.Fatalf("a delegate hid its failures behind refusals the initiator can see are false:\n%s", strings.Join(hidden, "\n"))
	}
}

// TestRT3SessionsFilledBySubDelegatedKeys: the session table holds 10,000
// sessions, 64 per peer key (the first LDP red team's fix), for up to 24
// hours each (ttl_secs 86400). A holder multiplies keys by delegating its
// token on (offline, free: 157 attenuations) and fills the table: every
// other holder is refused SESSIONS_FULL for a day. The same per-key
// counting bounds the replay store (12,500 per signer of 100,000) and the
// approvals (TestRT3ApprovalCapPerKeyNotPerTree). BROKE: the victim's
// SESSION_PROPOSE is rejected SESSIONS_FULL.
func TestRT3SessionsFilledBySubDelegatedKeys(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv, _ := rt3Serve(t, env, mcptest.NewKey(t, "server"), "")
	own := env.Mint(nil, "mcp:echo:*")
	day := uint64(86400)
	cfg := ldp.SessionConfig{PreferredPayloadModes: []ldp.PayloadMode{ldp.ModeText}, TTLSecs: &day}
	var opened atomic.Int64
	var full atomic.Bool
	keys := make(chan int)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range keys {
				sybil, err := identity.Generate(rand.Reader, fmt.Sprintf("sybil-%03d", k))
				if err != nil {
					t.Error(err)
					return
				}
				p := dct.AttenuateParams{Attenuator: env.Agent, Delegatee: sybil.ID(), DelegationID: mcptest.NewDelegationID()}
				sub, err := dct.Attenuate(own, p)
				if err != nil {
					t.Error(err)
					return
				}
				c := &ldp.Client{ID: fmt.Sprintf("ldp:delegate:sybil-%03d", k), TrustDomain: "research", Key: sybil.PrivateKey(), Verifier: &ldp.Verifier{}}
				m := &ldp.DelegateOSMember{DCT: sub.String(), Format: dct.Format}
				for range ldp.DefaultMaxSessionsPerPeer {
					if _, err := c.Open(context.Background(), srv.Base, "ldp:delegate:docs", cfg, m, "", ""); err != nil {
						if strings.Contains(err.Error(), ldp.CodeSessionsFull) {
							full.Store(true)
							break
						}
						t.Error(err)
						return
					}
					opened.Add(1)
				}
			}
		}()
	}
	for k := 0; !full.Load() && k < ldp.DefaultMaxSessions/ldp.DefaultMaxSessionsPerPeer+2; k++ {
		keys <- k
	}
	close(keys)
	wg.Wait()
	victimKey := mcptest.NewKey(t, "victim")
	victim := &ldp.Client{ID: "ldp:delegate:victim", TrustDomain: "research", Key: victimKey.PrivateKey(), Verifier: &ldp.Verifier{}}
	_, err := victim.Open(context.Background(), srv.Base, "ldp:delegate:docs", cfg,
		&ldp.DelegateOSMember{DCT: env.Mint(func(p *dct.CreateParams) { p.Delegatee = victimKey.ID() }, "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatalf("one holder, delegating its token to keys of its own, opened %d sessions for a day; another holder's session: %v", opened.Load(), err)
	}
}
