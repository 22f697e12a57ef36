package proxy

import (
	"reflect"
	"testing"

	"github.com/delegateos/delegateos/dct"
)

// The memo returns exactly what budgetLevels builds, for the scope it is
// given, whatever it saw before.
func TestLevelsMemo(t *testing.T) {
	chain := func(ids ...string) []dct.ChainLink {
		links := make([]dct.ChainLink, len(ids))
		for i, id := range ids {
			links[i] = dct.ChainLink{DelegationID: id, MaxBudgetMicrocents: int64(100 * (i + 1))}
		}
		return links
	}
	a := &dct.AuthorizedScope{Issuer: "root1", Chain: chain("del_a", "del_b")}
	scopes := []*dct.AuthorizedScope{
		a, a,
		{Issuer: "root1", Chain: chain("del_a", "del_b")}, // equal, another slice
		{Issuer: "root2", Chain: chain("del_a", "del_b")}, // another issuer
		{Issuer: "root2", Chain: chain("del_a")},          // shorter
		{Issuer: "root2", Chain: chain("del_a", "del_c")}, // another leaf
		{Issuer: "root2", Chain: []dct.ChainLink{{DelegationID: "del_a", MaxBudgetMicrocents: 100}, {DelegationID: "del_c", MaxBudgetMicrocents: 1}}}, // another limit
		{Issuer: "root1", Chain: chain("del_a/1:x")},
		{Issuer: "root1", Chain: chain("del_a", "x")},
	}
	var m levelsMemo
	for i, s := range scopes {
		if got, want := m.of(s), budgetLevels(s); !reflect.DeepEqual(got, want) {
			t.Errorf("scope %d: memo gives %v, want %v", i, got, want)
		}
	}
	// A scope changed after the memo saw it is not answered from the memo.
	m.of(a)
	a.Chain[1].MaxBudgetMicrocents = 7
	if got := m.of(a); got[1].Limit != 7 {
		t.Errorf("after the chain changed the memo gives limit %d", got[1].Limit)
	}
	a.Chain[0].DelegationID = "del_z"
	if got, want := m.of(a), budgetLevels(a); !reflect.DeepEqual(got, want) {
		t.Errorf("after the chain changed the memo gives %v, want %v", got, want)
	}
}
