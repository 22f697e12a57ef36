package contract

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
)

// scopeFor mints a root token from root to alice for the contract ID with
// the given capabilities, optionally attenuates it from alice to bob, and
// returns the scope a verifier trusting root grants it.
func scopeFor(t *testing.T, contractID string, caps []dct.Capability, attenuate bool, subContract string) *dct.AuthorizedScope {
	t.Helper()
	tok, err := dct.Create(dct.CreateParams{
		Issuer:              rootKey,
		Delegatee:           aliceKey.ID(),
		Capabilities:        caps,
		ContractID:          contractID,
		DelegationID:        "del_000000000001",
		MaxChainDepth:       2,
		MaxBudgetMicrocents: 5000,
		IssuedAt:            t0,
		ExpiresAt:           t0.Add(time.Hour),
	})
	if err != nil {
		t.Fatal(err)
	}
	if attenuate {
		tok, err = dct.Attenuate(tok, dct.AttenuateParams{
			Attenuator:   aliceKey,
			Delegatee:    bobKey.ID(),
			DelegationID: "del_000000000002",
			ContractID:   subContract,
			Now:          t0,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	v, err := dct.NewVerifier(dct.Options{Roots: []string{rootKey.ID()}})
	if err != nil {
		t.Fatal(err)
	}
	scope, err := v.VerifyChain(tok.Serialized().Token, t0.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	return scope
}

var (
	docsRead  = dct.Capability{Namespace: "docs", Action: "read", Resource: "/project/papers/*"}
	webSearch = dct.Capability{Namespace: "web", Action: "search", Resource: "*"}
)

func TestCheckBinding(t *testing.T) {
	c := testContract(t) // requires docs:read and web:search
	tests := []struct {
		name    string
		caps    []dct.Capability
		want    error
		missing []string
	}{
		{"exact", []dct.Capability{docsRead, webSearch}, nil, nil},
		{"extra capabilities", []dct.Capability{webSearch, {Namespace: "docs", Action: "write", Resource: "/x"}, docsRead}, nil, nil},
		// A requirement names no resource: a grant on any resource counts.
		{"narrow resource", []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/papers/one.pdf"}, webSearch}, nil, nil},
		{"wildcard action", []dct.Capability{{Namespace: "docs", Action: "*", Resource: "/p/**"}, webSearch}, nil, nil},
		{"wildcard namespace and action", []dct.Capability{{Namespace: "*", Action: "*", Resource: "**"}}, nil, nil},
		{"wildcard namespace", []dct.Capability{{Namespace: "*", Action: "read", Resource: "**"}, webSearch}, nil, nil},
		{"one missing", []dct.Capability{docsRead}, ErrCapabilityMismatch, []string{"web:search"}},
		{"both missing", []dct.Capability{{Namespace: "docs", Action: "write", Resource: "**"}}, ErrCapabilityMismatch, []string{"docs:read", "web:search"}},
		{"other action", []dct.Capability{{Namespace: "docs", Action: "write", Resource: "**"}, webSearch}, ErrCapabilityMismatch, []string{"docs:read"}},
		{"other namespace", []dct.Capability{{Namespace: "doc", Action: "read", Resource: "**"}, webSearch}, ErrCapabilityMismatch, []string{"docs:read"}},
		{"wildcard action elsewhere", []dct.Capability{{Namespace: "web", Action: "*", Resource: "*"}, {Namespace: "data", Action: "read", Resource: "*"}}, ErrCapabilityMismatch, []string{"docs:read"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckBinding(c, scopeFor(t, c.ID, tt.caps, false, ""))
			if tt.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			var be *BindingError
			if !errors.Is(err, tt.want) || !errors.As(err, &be) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			if !slices.Equal(be.Missing, tt.missing) {
				t.Errorf("missing %v, want %v", be.Missing, tt.missing)
			}
			if errors.Is(err, ErrContractMismatch) {
				t.Error("a capability mismatch matches ErrContractMismatch")
			}
		})
	}
}

// A "*" in a requirement is literal: only a "*" grant covers it.
func TestCheckBindingWildcardRequirement(t *testing.T) {
	p := testParams()
	p.RequiredCapabilities = []string{"docs:*"}
	c, err := Create(rootKey, p, t0)
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckBinding(c, scopeFor(t, c.ID, []dct.Capability{docsRead}, false, "")); !errors.Is(err, ErrCapabilityMismatch) {
		t.Errorf("docs:read for docs:*: got %v, want capability_mismatch", err)
	}
	if err := CheckBinding(c, scopeFor(t, c.ID, []dct.Capability{{Namespace: "docs", Action: "*", Resource: "/p"}}, false, "")); err != nil {
		t.Errorf("docs:* for docs:*: %v", err)
	}
}

// Custom namespaces contain colons; the action follows the last one.
func TestCheckBindingCustomNamespace(t *testing.T) {
	p := testParams()
	p.RequiredCapabilities = []string{"acme:billing:charge"}
	c, err := Create(rootKey, p, t0)
	if err != nil {
		t.Fatal(err)
	}
	ok := dct.Capability{Namespace: "acme:billing", Action: "charge", Resource: "*"}
	if err := CheckBinding(c, scopeFor(t, c.ID, []dct.Capability{ok}, false, "")); err != nil {
		t.Error(err)
	}
	wrong := dct.Capability{Namespace: "acme", Action: "billing:charge", Resource: "*"}
	if err := CheckBinding(c, scopeFor(t, c.ID, []dct.Capability{wrong}, false, "")); !errors.Is(err, ErrCapabilityMismatch) {
		t.Errorf("got %v, want capability_mismatch", err)
	}
}

func TestCheckBindingContractMismatch(t *testing.T) {
	c := testContract(t)
	caps := []dct.Capability{docsRead, webSearch}
	err := CheckBinding(c, scopeFor(t, "ct_000000000009", caps, false, ""))
	var be *BindingError
	if !errors.Is(err, ErrContractMismatch) || !errors.As(err, &be) || be.TokenContractID != "ct_000000000009" || be.ContractID != c.ID {
		t.Errorf("got %v (%+v), want contract_mismatch naming both contracts", err, be)
	}
	if errors.Is(err, ErrCapabilityMismatch) {
		t.Error("a contract mismatch matches ErrCapabilityMismatch")
	}
	// The effective contract is the last block's: a token attenuated to a
	// sub-contract is no longer bound to the parent's.
	if err := CheckBinding(c, scopeFor(t, c.ID, caps, true, "ct_0000000000aa")); !errors.Is(err, ErrContractMismatch) {
		t.Errorf("attenuated to another contract: got %v, want contract_mismatch", err)
	}
}

// The contract must come from a principal that signed a block of the token.
func TestCheckBindingIssuer(t *testing.T) {
	caps := []dct.Capability{docsRead, webSearch}
	contractBy := func(k interface{ ID() string }) *TaskContract {
		key := rootKey
		switch k.ID() {
		case aliceKey.ID():
			key = aliceKey
		case bobKey.ID():
			key = bobKey
		case evilKey.ID():
			key = evilKey
		}
		p := testParams()
		p.ID = "ct_0000000000bb"
		c, err := Create(key, p, t0)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// root → alice → bob, bound to alice's sub-contract: alice signed the
	// attenuation, so her contract binds; root signed the authority.
	scope := scopeFor(t, "ct_0000000000bb", caps, true, "ct_0000000000bb")
	for _, k := range []interface{ ID() string }{rootKey, aliceKey} {
		if err := CheckBinding(contractBy(k), scope); err != nil {
			t.Errorf("contract by %s: %v", k.ID(), err)
		}
	}
	// bob, the presenter, signed no block; evil is a stranger.
	for _, k := range []interface{ ID() string }{bobKey, evilKey} {
		if err := CheckBinding(contractBy(k), scope); !errors.Is(err, ErrContractMismatch) {
			t.Errorf("contract by %s: got %v, want contract_mismatch", k.ID(), err)
		}
	}
	// A root token to alice: alice signed nothing.
	if err := CheckBinding(contractBy(aliceKey), scopeFor(t, "ct_0000000000bb", caps, false, "")); !errors.Is(err, ErrContractMismatch) {
		t.Errorf("contract by the delegatee of a root token: got %v, want contract_mismatch", err)
	}
}

func TestCheckBindingNil(t *testing.T) {
	c := testContract(t)
	if err := CheckBinding(nil, &dct.AuthorizedScope{ContractID: c.ID}); err == nil {
		t.Error("nil contract: want an error")
	}
	if err := CheckBinding(c, nil); err == nil {
		t.Error("nil scope: want an error")
	}
	// A zero scope grants nothing and names no contract.
	if err := CheckBinding(c, &dct.AuthorizedScope{}); err == nil {
		t.Error("zero scope: want an error")
	}
}

func TestParseRequirement(t *testing.T) {
	for s, want := range map[string]Requirement{
		"docs:read":           {"docs", "read"},
		"acme:billing:charge": {"acme:billing", "charge"},
		"*:*":                 {"*", "*"},
	} {
		got, err := ParseRequirement(s)
		if err != nil || got != want || got.String() != s {
			t.Errorf("ParseRequirement(%q) = %+v, %v", s, got, err)
		}
	}
	for _, bad := range []string{"", ":", "docs", "docs:", ":read", "a\xff:b"} {
		if _, err := ParseRequirement(bad); err == nil {
			t.Errorf("ParseRequirement(%q): want an error", bad)
		}
	}
}

// A capability without a resource grants nothing (a verified token never
// holds one, but GrantedBy does not rely on that).
func TestGrantedByEmptyResource(t *testing.T) {
	r := Requirement{Namespace: "docs", Action: "read"}
	if r.GrantedBy(dct.Capability{Namespace: "docs", Action: "read"}) {
		t.Error("granted by a capability without a resource")
	}
	if !r.GrantedBy(dct.Capability{Namespace: "docs", Action: "read", Resource: "/x"}) {
		t.Error("not granted by docs:read:/x")
	}
}
