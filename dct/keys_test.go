package dct

import (
	"slices"
	"testing"
)

// A delegation's key is the same in every token that carries its block
// (its prefix, or a token attenuated further), and differs between two
// delegations that share every ID: whoever attenuates chooses IDs, not
// keys.
func TestDelegationKeys(t *testing.T) {
	tok := chain2(t)
	keys := tok.DelegationKeys()
	if len(keys) != 3 {
		t.Fatalf("%d keys for 3 blocks", len(keys))
	}
	for _, k := range keys {
		if !ValidDelegationKey(k) {
			t.Errorf("key %q does not read as one", k)
		}
	}
	for n := 1; n <= 3; n++ {
		p, err := tok.Prefix(n)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.DelegationKeys(); !slices.Equal(got, keys[:n]) {
			t.Errorf("prefix %d has keys %v; want %v", n, got, keys[:n])
		}
	}
	// Another tree with the same IDs: root issues dave a token under
	// alice's root ID, and dave attenuates it under alice's IDs.
	p := rootParams()
	p.Delegatee = daveKey.ID()
	other := mustCreate(t, p)
	other = mustAttenuate(t, other, AttenuateParams{Attenuator: daveKey, Delegatee: bobKey.ID(), DelegationID: "del_000000000002", ContractID: "ct_000000000002"})
	ok := other.DelegationKeys()
	for i := range ok {
		if ok[i] == keys[i] {
			t.Errorf("block %d: two delegations share key %s", i, ok[i])
		}
	}
	for _, bad := range []string{"", "del_000000000001", keys[0][:42], keys[0] + "A", keys[0][:42] + "="} {
		if ValidDelegationKey(bad) {
			t.Errorf("ValidDelegationKey(%q) = true", bad)
		}
	}
}
