package dct

import (
	"bytes"
	"testing"
	"time"

	"github.com/delegateos/delegateos/identity"
	"github.com/delegateos/delegateos/internal/canon"
)

func TestSmoke(t *testing.T) {
	root, _ := identity.FromSeed(bytes.Repeat([]byte{1}, 32), "root")
	a, _ := identity.FromSeed(bytes.Repeat([]byte{2}, 32), "a")
	b, _ := identity.FromSeed(bytes.Repeat([]byte{3}, 32), "b")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tok, err := Create(CreateParams{Issuer: root, Delegatee: a.DID(), Capabilities: []Capability{{"docs", "read", "/project/**"}},
		ContractID: "ct_000000000001", DelegationID: "del_000000000001", MaxChainDepth: 3, MaxBudgetMicrocents: 1000,
		ExpiresAt: now.Add(time.Hour), IssuedAt: now})
	if err != nil {
		t.Fatal(err)
	}
	caps := []Capability{{"docs", "read", "/project/sub/*"}}
	tok2, err := Attenuate(tok, AttenuateParams{Attenuator: a, Delegatee: b.ID(), DelegationID: "del_000000000002", Capabilities: &caps, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	c, err := canon.Marshal(tok2.Unverified())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(c, tok2.enc.all) {
		t.Fatalf("encoder differs from JCS:\n%s\n%s", c, tok2.enc.all)
	}
	v, _ := NewVerifier(Options{Roots: []string{root.ID()}})
	s, err := v.Verify(tok2.String(), Request{Namespace: "docs", Action: "read", Resource: "/project/sub/x", Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%+v", s)
	_, err = v.Verify(tok2.String(), Request{Namespace: "docs", Action: "read", Resource: "/project/x", Now: now})
	t.Log(err)
	if err == nil {
		t.Fatal("want denial")
	}
}
