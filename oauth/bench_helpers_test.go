package oauth

import (
	"crypto/rand"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
)

// benchServer is a server with one issued access token, and a token of
// another root.
func benchServer(b *testing.B) (s *Server, issued, other string) {
	root, _ := identity.Generate(rand.Reader, "root")
	gate, _ := identity.Generate(rand.Reader, "gate")
	caps := []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}}
	mint := func(to *identity.Keypair) *dct.Token {
		t, err := dct.Create(dct.CreateParams{Issuer: root, Delegatee: to.ID(), Capabilities: caps, ContractID: "ct_000000000001",
			DelegationID: "del_000000000001", MaxChainDepth: 3, MaxBudgetMicrocents: 1000, ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			b.Fatal(err)
		}
		return t
	}
	grant := mint(gate)
	s, err := New(Config{Grant: grant, GrantKey: gate, ConsentPassword: "a long enough password",
		GrantScope: &dct.AuthorizedScope{Capabilities: caps, RemainingBudgetMicrocents: 1000, MaxChainDepth: 3, ExpiresAt: time.Now().Add(time.Hour).UTC().Format(time.RFC3339Nano)}})
	if err != nil {
		b.Fatal(err)
	}
	now := time.Now()
	ck, _ := identity.Generate(rand.Reader, "consent")
	exp := now.Add(30 * time.Minute)
	ct, err := dct.Attenuate(grant, dct.AttenuateParams{Attenuator: gate, Delegatee: ck.ID(), DelegationID: "del_000000000002", ExpiresAt: &exp})
	if err != nil {
		b.Fatal(err)
	}
	fam := &family{id: "f", consent: &consent{caps: caps, expires: exp, token: ct, key: ck}}
	s.families[fam.id] = fam
	res, oe := s.issue(fam, nil, nil, now)
	if oe != nil {
		b.Fatal(oe)
	}
	other2, _ := identity.Generate(rand.Reader, "x")
	return s, res.AccessToken, mint(other2).String()
}
