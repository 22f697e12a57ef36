package dct

import (
	"testing"
	"time"
)

// Each prefix of a token is byte for byte the token its ancestor held, and
// verifies on its own.
func TestPrefix(t *testing.T) {
	full := chain2(t)
	root := mustCreate(t, rootParams())
	one := mustAttenuate(t, root, AttenuateParams{
		Attenuator:          aliceKey,
		Delegatee:           bobKey.ID(),
		DelegationID:        "del_000000000002",
		ContractID:          "ct_000000000002",
		Capabilities:        &[]Capability{{Namespace: "docs", Action: "read", Resource: "/project/sub/**"}},
		MaxBudgetMicrocents: ptr[int64](500),
		ExpiresAt:           ptr(t0.Add(30 * time.Minute)),
		MaxChainDepth:       ptr[int64](1),
	})
	v := mustVerifier(t, Options{})
	for n, want := range map[int]*Token{1: root, 2: one, 3: full} {
		got, err := full.Prefix(n)
		if err != nil {
			t.Fatalf("Prefix(%d): %v", n, err)
		}
		if got.String() != want.String() {
			t.Fatalf("Prefix(%d) differs from the ancestor's token", n)
		}
		if _, err := v.VerifyChain(got.String(), t0.Add(time.Minute)); err != nil {
			t.Fatalf("Prefix(%d) does not verify: %v", n, err)
		}
	}
	for _, n := range []int{0, -1, 4} {
		if _, err := full.Prefix(n); err == nil {
			t.Fatalf("Prefix(%d) succeeded", n)
		}
	}
}

// A parsed token is unverified: one with fewer signatures than blocks gets
// an error from Prefix, not a panic.
func TestPrefixMissingSignatures(t *testing.T) {
	st := chain2(t).Unverified()
	st.Signatures = st.Signatures[:1]
	tok, err := Parse(serialize(t, st))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if _, err := tok.Prefix(2); err == nil {
		t.Fatal("Prefix(2) of a token with one signature succeeded")
	}
}
