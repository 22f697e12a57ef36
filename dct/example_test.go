package dct_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/identity"
)

// key derives a fixed key, so the examples' tokens never change.
func key(b byte, name string) *identity.Keypair {
	k, err := identity.FromSeed(bytes.Repeat([]byte{b}, 32), name)
	if err != nil {
		panic(err)
	}
	return k
}

var (
	root  = key(1, "root")
	alice = key(2, "alice")
	bob   = key(3, "bob")
	now   = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
)

// mint is the root token of the examples: root lets alice read the project
// for an hour, with a budget of 1000 microcents and up to 2 re-delegations.
func mint() *dct.Token {
	tok, err := dct.Create(dct.CreateParams{
		Issuer:              root,
		Delegatee:           alice.ID(),
		Capabilities:        []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/**"}},
		ContractID:          "ct_a1b2c3d4e5f6",
		DelegationID:        "del_000000000001",
		MaxChainDepth:       2,
		MaxBudgetMicrocents: 1000,
		IssuedAt:            now,
		ExpiresAt:           now.Add(time.Hour),
	})
	if err != nil {
		panic(err)
	}
	return tok
}

func Example_mintAttenuateVerify() {
	tok := mint()

	// Alice passes a narrower token to bob: only the reports, a quarter of
	// the budget.
	reports := []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/reports/*"}}
	budget := int64(250)
	tok, err := dct.Attenuate(tok, dct.AttenuateParams{
		Attenuator:          alice,
		Delegatee:           bob.ID(),
		DelegationID:        "del_000000000002",
		Capabilities:        &reports,
		MaxBudgetMicrocents: &budget,
		Now:                 now,
	})
	if err != nil {
		panic(err)
	}

	// The service trusts root and checks every request bob makes.
	v, err := dct.NewVerifier(dct.Options{Roots: []string{root.ID()}})
	if err != nil {
		panic(err)
	}
	scope, err := v.Verify(tok.String(), dct.Request{
		Namespace: "docs", Action: "read", Resource: "/project/reports/q1.pdf",
		SpentMicrocents: 100, Now: now.Add(time.Minute),
	})
	if err != nil {
		panic(err)
	}
	fmt.Println("holder is bob:", scope.Delegatee == bob.ID())
	fmt.Println("capabilities:", scope.Capabilities)
	fmt.Println("remaining budget:", scope.RemainingBudgetMicrocents)
	fmt.Printf("depth: %d of %d\n", scope.ChainDepth, scope.MaxChainDepth)
	fmt.Println("expires:", scope.ExpiresAt)

	_, err = v.Verify(tok.String(), dct.Request{
		Namespace: "docs", Action: "read", Resource: "/project/secrets/key",
		Now: now.Add(time.Minute),
	})
	fmt.Println(err)
	fmt.Println(errors.Is(err, dct.ErrCapabilityNotGranted))
	// Output:
	// holder is bob: true
	// capabilities: [docs:read:/project/reports/*]
	// remaining budget: 150
	// depth: 1 of 2
	// expires: 2026-01-01T01:00:00.000Z
	// capability_not_granted: docs:read on "/project/secrets/key" is not granted by this token
	// true
}

func ExampleAttenuate_refused() {
	// Attenuation can only narrow: alice cannot give bob more than she has.
	everything := []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/**"}}
	_, err := dct.Attenuate(mint(), dct.AttenuateParams{
		Attenuator: alice, Delegatee: bob.ID(), DelegationID: "del_000000000002",
		Capabilities: &everything, Now: now,
	})
	fmt.Println(err)

	// Nor can bob attenuate a token that was given to alice.
	_, err = dct.Attenuate(mint(), dct.AttenuateParams{
		Attenuator: bob, Delegatee: bob.ID(), DelegationID: "del_000000000002", Now: now,
	})
	fmt.Println(err != nil)
	// Output:
	// capability docs:read:/** is not within the parent's capabilities [docs:read:/project/**]
	// true
}

// revokedBlocks is a revocation list of block IDs.
type revokedBlocks map[string]bool

func (r revokedBlocks) Revoked(ids, _ []string) (string, bool, error) {
	for _, id := range ids {
		if r[id] {
			return id, true, nil
		}
	}
	return "", false, nil
}

func ExampleVerifier_Verify_denials() {
	tok := mint()
	revoked := revokedBlocks{}
	v, err := dct.NewVerifier(dct.Options{Roots: []string{root.ID()}, Revocations: revoked})
	if err != nil {
		panic(err)
	}
	req := dct.Request{Namespace: "docs", Action: "read", Resource: "/project/a.md", Now: now.Add(time.Minute)}

	late := req
	late.Now = now.Add(2 * time.Hour)
	_, err = v.Verify(tok.String(), late)
	fmt.Println(err)

	spent := req
	spent.SpentMicrocents = 1000
	_, err = v.Verify(tok.String(), spent)
	fmt.Println(err)

	_, err = v.Verify(tok.String()[:40], req)
	fmt.Println(errors.Is(err, dct.ErrMalformed))

	revoked[tok.RevocationIDs()[0]] = true
	_, err = v.Verify(tok.String(), req)
	fmt.Println(errors.Is(err, dct.ErrRevoked))
	// Output:
	// expired: token expired at 2026-01-01T01:00:00.000Z
	// budget_exceeded: spent 1000 of a budget of 1000 microcents
	// true
	// true
}

func ExampleDenial() {
	v, err := dct.NewVerifier(dct.Options{Roots: []string{root.ID()}})
	if err != nil {
		panic(err)
	}
	_, err = v.Verify(mint().String(), dct.Request{Namespace: "web", Action: "search", Resource: "*", Now: now})
	// A denial carries what the MCP error response needs (§11.2).
	var d *dct.Denial
	if errors.As(err, &d) {
		b, _ := json.Marshal(d)
		fmt.Println(string(b))
	}
	// Output:
	// {"type":"capability_not_granted","detail":"web:search on \"*\" is not granted by this token","requested":{"namespace":"web","action":"search","resource":"*"},"granted":[{"namespace":"docs","action":"read","resource":"/project/**"}]}
}

func ExampleParseInput() {
	wrapped, err := json.Marshal(mint().Serialized())
	if err != nil {
		panic(err)
	}
	tok, err := dct.ParseInput(string(wrapped))
	if err != nil {
		panic(err)
	}
	fmt.Println(tok.String() == mint().String(), tok.Blocks(), tok.Delegatee() == alice.ID())

	_, err = dct.ParseInput(`{"token":"e30","format":"delegateos-sjt-v2"}`)
	fmt.Println(err)
	// Output:
	// true 1 true
	// malformed_token: unknown token format "delegateos-sjt-v2" (want "delegateos-sjt-v1")
}

func ExampleMatchResource() {
	for _, c := range [][2]string{
		{"/project/*", "/project/foo"},
		{"/project/*", "/project/foo/bar"},
		{"/project/**", "/project/foo/bar/baz"},
		{"/project/**", "/project"},
		{"/project/**", "/project/../secret"},
		{"*", "/anything/at/all"},
	} {
		fmt.Printf("%-12s %-22s %v\n", c[0], c[1], dct.MatchResource(c[0], c[1]))
	}
	// Output:
	// /project/*   /project/foo           true
	// /project/*   /project/foo/bar       false
	// /project/**  /project/foo/bar/baz   true
	// /project/**  /project               true
	// /project/**  /project/../secret     false
	// *            /anything/at/all       true
}

func ExampleResourceSubset() {
	fmt.Println(dct.ResourceSubset("/project/sub/*", "/project/**"))
	fmt.Println(dct.ResourceSubset("/projectX-secret/**", "/project/**"))
	fmt.Println(dct.ResourceSubset("/project/**", "/project/*"))
	fmt.Println(dct.ResourceSubset("/project/**", "*"))
	// Output:
	// true
	// false
	// false
	// true
}

func ExampleParseCapability() {
	c, err := dct.ParseCapability("web:fetch:https://example.com/docs/**")
	if err != nil {
		panic(err)
	}
	fmt.Printf("namespace %s, action %s, resource %s\n", c.Namespace, c.Action, c.Resource)
	// Output:
	// namespace web, action fetch, resource https://example.com/docs/**
}
