package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestLDPSessionsCappedPerTree: the session table holds 10,000
// sessions, 64 per peer key (the first LDP red team's fix), for up to 24
// hours each (ttl_secs 86400). A holder multiplies keys by delegating its
// token on (offline, free: 157 attenuations) and fills the table: every
// other holder is refused SESSIONS_FULL for a day. The same per-key
// counting bounds the replay store (12,500 per signer of 100,000) and the
// approvals (TestLDPApprovalCapPerTree). The victim's SESSION_PROPOSE was
// rejected SESSIONS_FULL (rtldp3 #12). Now sessions are counted per
// delegation tree (the token's root delegation): the holder's keys get an
// eighth of the table between them, and another holder opens its session.
func TestLDPSessionsCappedPerTree(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv, _ := peerServe(t, env, mcptest.NewKey(t, "server"), "")
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
	if n := opened.Load(); n != ldp.DefaultMaxSessions/8 {
		t.Fatalf("one tree opened %d sessions, want its share of %d", n, ldp.DefaultMaxSessions/8)
	}
}
