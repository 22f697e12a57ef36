package gate

import (
	"testing"
	"time"

	"github.com/delegateos/delegateos/dct"
)

// Red team (issue 26.1), held: budget levels are named by issuer + path of
// delegation IDs, not by delegation keys, yet a sybil's tree never shares
// a level with the victim's, whatever IDs she picks. (Two roots one issuer
// mints under one ID do share: levels_redteam_test.go, a documented known
// limitation.)
func TestBudgetLevelsSybilNeverSharesVictims(t *testing.T) {
	f := newDelegationFixture(t)
	levels := func(tok *dct.Token) []string {
		s, err := f.d.Verifier.VerifyChain(tok.String(), f.now)
		if err != nil {
			t.Fatal(err)
		}
		var keys []string
		for _, l := range BudgetLevels(s) {
			keys = append(keys, l.Key)
		}
		return keys
	}
	caps := []dct.Capability{{Namespace: "docs", Action: "read", Resource: "/project/**"}}
	root := func(to, id string) *dct.Token {
		tok, err := dct.Create(dct.CreateParams{
			Issuer: f.root, Delegatee: to, Capabilities: caps, ContractID: "ct_cccccccccccc", DelegationID: id,
			MaxChainDepth: 2, MaxBudgetMicrocents: 10000, ExpiresAt: f.now.Add(2 * time.Hour), IssuedAt: f.now,
		})
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	victim := levels(f.bTok)

	// Held: Mallory's own root (its own ID), attenuated under B's ID.
	mRoot := root(f.mallory.ID(), "del_cccccccccccc")
	mTok, err := dct.Attenuate(mRoot, dct.AttenuateParams{
		Attenuator: f.mallory, Delegatee: f.mallory.ID(), DelegationID: "del_bbbbbbbbbbbb", ContractID: "ct_dddddddddddd", Now: f.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	for i, k := range levels(mTok) {
		for _, v := range victim {
			if k == v {
				t.Errorf("held check: Mallory's level %d shares budget key %s with B's chain", i, k)
			}
		}
	}
	// Held: Mallory inside A's tree (A delegated to her), under B's ID.
	aToM, err := dct.Attenuate(f.aTok, dct.AttenuateParams{
		Attenuator: f.a, Delegatee: f.mallory.ID(), DelegationID: "del_eeeeeeeeeeee", ContractID: "ct_eeeeeeeeeeee", Now: f.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	mInTree, err := dct.Attenuate(aToM, dct.AttenuateParams{
		Attenuator: f.mallory, Delegatee: f.mallory.ID(), DelegationID: "del_bbbbbbbbbbbb", ContractID: "ct_ffffffffffff", Now: f.now,
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := levels(mInTree); got[len(got)-1] == victim[len(victim)-1] {
		t.Errorf("held check: Mallory in A's tree shares B's budget key %s", victim[len(victim)-1])
	}
}
