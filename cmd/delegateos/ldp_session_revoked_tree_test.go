package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/mcptest"
	"github.com/delegateos/delegateos/ldp"
	"github.com/delegateos/delegateos/revocation"
)

// TestLDPRevokedHolderGivesTheTreesSessionsBack: revoking a holder did
// not give its tree's session share back (rtldp4 #6). An orchestrator delegates
// its token to a worker; the worker (delegating on to 20 keys of its own,
// 64 sessions each) fills the tree's share (1,250 sessions, ttl a day).
// The operator revokes the worker's delegation (chain scope): the
// worker's tokens are refused, yet its sessions stay open and counted, so
// the orchestrator itself (same tree, token valid) is refused
// SESSIONS_FULL for up to a day — the per-tree share (rtldp3 #12) turns a
// revoked delegate's sessions into a lock on everyone above it. Now,
// before a tree is refused its share, the sessions of it whose token is
// no longer accepted are closed (ldp.Responder.TokenRefused, at most once
// a second per tree): the orchestrator opens its session.
func TestLDPRevokedHolderGivesTheTreesSessionsBack(t *testing.T) {
	env := mcptest.NewEnv(t)
	srv, list := startLDPServeRevocable(t, env, peerSection, mcptest.Priced("echo", 100))
	own := env.Mint(nil, "mcp:echo:*")
	worker := mcptest.NewKey(t, "worker")
	sub := mcptest.Attenuate(t, own, env.Agent, worker, 100_000)
	cfg := daySession()
	n, full := fillSessions(t, srv.Base, 40, func(k int) (*ldp.Client, *ldp.DelegateOSMember, error) {
		kp, err := identity.Generate(rand.Reader, fmt.Sprintf("w-%02d", k))
		if err != nil {
			return nil, nil, err
		}
		tok, err := dct.Attenuate(sub, dct.AttenuateParams{Attenuator: worker, Delegatee: kp.ID(), DelegationID: mcptest.NewDelegationID()})
		if err != nil {
			return nil, nil, err
		}
		return &ldp.Client{ID: fmt.Sprintf("ldp:delegate:w-%02d", k), TrustDomain: "research", Key: kp.PrivateKey(), Verifier: &ldp.Verifier{}},
			&ldp.DelegateOSMember{DCT: tok.String(), Format: dct.Format}, nil
	})
	if !full {
		t.Fatalf("the worker's keys opened %d sessions and were never refused", n)
	}
	e, err := revocation.NewEntry(env.Root, sub.RevocationIDs()[1], revocation.ScopeChain, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := revocation.Append(list, e); err != nil {
		t.Fatal(err)
	}
	probe := &ldp.Client{ID: "ldp:delegate:probe", TrustDomain: "research", Key: worker.PrivateKey(), Verifier: &ldp.Verifier{}}
	mcptest.Eventually(t, "the revocation taken", func() bool {
		_, err := probe.Open(context.Background(), srv.Base, "ldp:delegate:docs", ldp.SessionConfig{}, &ldp.DelegateOSMember{DCT: sub.String(), Format: dct.Format}, "", "")
		return err != nil && strings.Contains(err.Error(), "revoked")
	})
	orch := &ldp.Client{ID: "ldp:delegate:orchestrator", TrustDomain: "research", Key: env.Agent.PrivateKey(), Verifier: &ldp.Verifier{}}
	// A tree's sessions are checked again at most once a second (the
	// worker's last refused proposals checked them just before the
	// revocation): the orchestrator's proposal is taken once they are.
	mcptest.Eventually(t, "the orchestrator's session", func() bool {
		_, err = orch.Open(context.Background(), srv.Base, "ldp:delegate:docs", cfg, &ldp.DelegateOSMember{DCT: own.String(), Format: dct.Format}, "", "")
		if err != nil && !strings.Contains(err.Error(), ldp.CodeSessionsFull) {
			t.Fatalf("the orchestrator: %v", err)
		}
		return err == nil
	})
}
