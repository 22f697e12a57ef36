package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
)

// TestLDPHMACPeersAreOneTree: the per-tree share of the session table
// (rtldp3 #12) was void for peers that sign with the shared secret
// (rtldp4 #1): a tokenless HMAC peer's "tree" was "hmac:"+its from, and from is
// whatever the sender writes (the shared secret authenticates the secret's
// holders as a group, not a delegate ID). One holder of the secret writes
// 157 delegate IDs (64 sessions each, the per-peer cap, also counted by
// from) and fills all 10,000 places for a day: a token holder's
// SESSION_PROPOSE is refused SESSIONS_FULL, which the per-tree counting was
// to prevent. Now every tokenless HMAC peer is counted in one tree (the
// secret's holders get an eighth of the table between them), as every
// other tokenless peer is.
func TestLDPHMACPeersAreOneTree(t *testing.T) {
	env := mcptest.NewEnv(t)
	const secret = "a shared secret of 32 characters"
	pol := env.Policy(mcptest.Priced("echo", 100))
	pol.AllowUnauthenticated = true
	pol.Extra = strings.Replace(peerSection, "  skills:", "  hmac_secret: \""+secret+"\"\n  skills:", 1)
	srv := env.StartServe(mcptest.ServeOptions{Policy: pol, Flags: []string{"--key", env.KeyFile(mcptest.NewKey(t, "server"))}})
	cfg := daySession()
	n, _ := fillSessions(t, srv.Base, ldp.DefaultMaxSessions/ldp.DefaultMaxSessionsPerPeer+2, func(k int) (*ldp.Client, *ldp.DelegateOSMember, error) {
		return &ldp.Client{ID: fmt.Sprintf("ldp:delegate:hmac-%03d", k), TrustDomain: "research", HMACSecret: secret,
			Verifier: &ldp.Verifier{HMACSecret: secret}}, nil, nil
	})
	victimKey := mcptest.NewKey(t, "victim")
	victim := &ldp.Client{ID: "ldp:delegate:victim", TrustDomain: "research", Key: victimKey.PrivateKey(), Verifier: &ldp.Verifier{}}
	_, err := victim.Open(context.Background(), srv.Base, "ldp:delegate:docs", cfg,
		&ldp.DelegateOSMember{DCT: env.Mint(func(p *dct.CreateParams) { p.Delegatee = victimKey.ID() }, "mcp:echo:*").String(), Format: dct.Format}, "", "")
	if err != nil {
		t.Fatalf("one holder of the shared secret, writing %d delegate IDs, opened %d sessions for a day; a token holder's session: %v",
			ldp.DefaultMaxSessions/ldp.DefaultMaxSessionsPerPeer+2, n, err)
	}
	if n := n; n > ldp.DefaultMaxSessions/8 {
		t.Fatalf("the shared secret's holders opened %d sessions, more than a tree's share %d", n, ldp.DefaultMaxSessions/8)
	}
}
