package main

import (
	"context"
	"crypto/rand"
	"fmt"
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
	cfg := daySession()
	n, _ := fillSessions(t, srv.Base, ldp.DefaultMaxSessions/ldp.DefaultMaxSessionsPerPeer+2, func(k int) (*ldp.Client, *ldp.DelegateOSMember, error) {
		sybil, err := identity.Generate(rand.Reader, fmt.Sprintf("sybil-%03d", k))
		if err != nil {
			return nil, nil, err
		}
		sub, err := dct.Attenuate(own, dct.AttenuateParams{Attenuator: env.Agent, Delegatee: sybil.ID(), DelegationID: mcptest.NewDelegationID()})
		if err != nil {
			return nil, nil, err
		}
		return &ldp.Client{ID: fmt.Sprintf("ldp:delegate:sybil-%03d", k), TrustDomain: "research", Key: sybil.PrivateKey(), Verifier: &ldp.Verifier{}},
			&ldp.DelegateOSMember{DCT: sub.String(), Format: dct.Format}, nil
	})
	victimKey := mcptest.NewKey(t, "victim")
	victim := &ldp.Client{ID: "ldp:delegate:victim", TrustDomain: "research", Key: victimKey.PrivateKey(), Verifier: &ldp.Verifier{}}
	_, err := victim.Open(context.Background(), srv.Base, "ldp:delegate:docs", cfg,
		&ldp.DelegateOSMember{DCT: env.Mint(func(p *dct.CreateParams) { p.Delegatee = victimKey.ID() }, "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatalf("one holder, delegating its token to keys of its own, opened %d sessions for a day; another holder's session: %v", n, err)
	}
	if n := n; n != ldp.DefaultMaxSessions/8 {
		t.Fatalf("one tree opened %d sessions, want its share of %d", n, ldp.DefaultMaxSessions/8)
	}
}
