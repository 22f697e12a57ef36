package revdist

import (
	"errors"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/revocation"
)

func TestTokensAuthority(t *testing.T) {
	root, alice, bob := testKey(t, 1), testKey(t, 2), testKey(t, 3)
	caps := []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}}
	tok, err := dct.Create(dct.CreateParams{Issuer: root, Delegatee: alice.ID(), Capabilities: caps,
		ContractID: "ct_000000000001", DelegationID: "del_000000000001", MaxChainDepth: 3,
		MaxBudgetMicrocents: 1000, ExpiresAt: time.Now().Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	tok2, err := dct.Attenuate(tok, dct.AttenuateParams{Attenuator: alice, Delegatee: bob.ID(), DelegationID: "del_000000000002"})
	if err != nil {
		t.Fatal(err)
	}
	var a Tokens
	a.AddString(tok2.String())
	a.AddString(tok2.String())
	a.AddString("not a token")
	if len(a.tokens) != 1 {
		t.Fatalf("%d tokens recorded, want 1", len(a.tokens))
	}
	ids := tok2.RevocationIDs()
	entry := func(k byte, block int) revocation.Entry {
		e, err := revocation.NewEntry(testKey(t, k), ids[block], revocation.ScopeChain, testTime)
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	for _, c := range []struct {
		name  string
		e     revocation.Entry
		allow bool
	}{
		{"root revokes the authority", entry(1, 0), true},
		{"root revokes alice's grant", entry(1, 1), true},
		{"alice revokes her grant", entry(2, 1), true},
		{"alice revokes the root's block", entry(2, 0), false},
		{"bob revokes alice's grant", entry(3, 1), false},
		{"eve revokes anything", entry(4, 1), false},
	} {
		err := a.Authorize(c.e)
		if (err == nil) != c.allow || (err != nil && !errors.Is(err, ErrNotAuthorized)) {
			t.Errorf("%s: %v", c.name, err)
		}
	}

	// AnyOf: the root by name, everyone else through the tokens.
	both := AnyOf{principals(t, root), &a}
	if err := both.Authorize(testEntry(t, root, "unknown block")); err != nil {
		t.Error(err)
	}
	if err := both.Authorize(entry(2, 1)); err != nil {
		t.Error(err)
	}
	if err := both.Authorize(entry(4, 1)); !errors.Is(err, ErrNotAuthorized) {
		t.Errorf("eve: %v", err)
	}
	if err := (AnyOf{}).Authorize(entry(1, 1)); !errors.Is(err, ErrNotAuthorized) {
		t.Errorf("empty AnyOf: %v", err)
	}
}

func TestTokensForgetsTheOldest(t *testing.T) {
	root, alice := testKey(t, 1), testKey(t, 2)
	a := Tokens{Max: 2}
	var toks []*dct.Token
	for i := range 3 {
		tok, err := dct.Create(dct.CreateParams{Issuer: root, Delegatee: alice.ID(),
			Capabilities: []dct.Capability{{Namespace: "mcp", Action: "echo", Resource: "*"}},
			ContractID:   "ct_000000000001", DelegationID: "del_00000000000" + string(rune('1'+i)),
			MaxChainDepth: 1, MaxBudgetMicrocents: 1, ExpiresAt: time.Now().Add(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		toks = append(toks, tok)
		a.Add(tok)
		a.Add(tok) // a repeat is not a new token
	}
	for i, tok := range toks {
		e, _ := revocation.NewEntry(root, tok.RevocationIDs()[0], revocation.ScopeChain, testTime)
		if err := a.Authorize(e); (err == nil) != (i > 0) {
			t.Errorf("token %d: %v", i, err)
		}
	}
}
