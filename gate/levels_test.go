package gate

import (
	"reflect"
	"strings"
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
		if got, want := m.of(s), BudgetLevels(s); !reflect.DeepEqual(got, want) {
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
	if got, want := m.of(a), BudgetLevels(a); !reflect.DeepEqual(got, want) {
		t.Errorf("after the chain changed the memo gives %v, want %v", got, want)
	}
}

// ParseBudgetKey reads back the key of every level budgetLevels writes,
// IDs holding '/' and ':' included, and refuses what it cannot have written.
func TestParseBudgetKey(t *testing.T) {
	for _, ids := range [][]string{
		{"del_a11ce0000001"},
		{"del_a11ce0000001", "del_b0b000000001", "del_c0c000000001"},
		{"x/y", "x", "3:abc", ""},
		{"\n\"é"},
	} {
		links := make([]dct.ChainLink, len(ids))
		for i, id := range ids {
			links[i] = dct.ChainLink{DelegationID: id}
		}
		levels := BudgetLevels(&dct.AuthorizedScope{Issuer: "ISSUER", Chain: links})
		for i, l := range levels {
			issuer, got, ok := ParseBudgetKey(l.Key)
			if !ok || issuer != "ISSUER" || !reflect.DeepEqual(got, ids[:i+1]) {
				t.Errorf("ParseBudgetKey(%q) = %q, %q, %v; want ISSUER, %q", l.Key, issuer, got, ok, ids[:i+1])
			}
		}
	}
	for _, key := range []string{
		"", "ISSUER", "/5:del_a", "ISSUER/", "ISSUER//5:del_a", "ISSUER/5del_a", "ISSUER/6:del_a",
		"ISSUER/05:del_a", "ISSUER/+5:del_a", "ISSUER/-1:del_a", "ISSUER/5:del_ax", "ISSUER/99999999999999999999:x",
		"ISSUER" + strings.Repeat("/1:x", 65),
	} {
		if issuer, ids, ok := ParseBudgetKey(key); ok {
			t.Errorf("ParseBudgetKey(%q) = %q, %q: want it refused", key, issuer, ids)
		}
	}
	if _, ids, ok := ParseBudgetKey("ISSUER" + strings.Repeat("/1:x", 64)); !ok || len(ids) != 64 {
		t.Errorf("a key of 64 levels: %d IDs, %v", len(ids), ok)
	}
}

// FuzzParseBudgetKey: a key ParseBudgetKey accepts is the key budgetLevels
// writes for what it returns, and the leaf key budgetLevels writes for any
// issuer without '/' and any IDs reads back as them.
func FuzzParseBudgetKey(f *testing.F) {
	f.Add("ISSUER/16:del_a11ce0000001/16:del_b0b000000001", "del_x", "3:a/b")
	f.Add("ISSUER/3:x/y/1:x", "", "")
	f.Add("ISSUER/1:", "\xff", "/")
	f.Fuzz(func(t *testing.T, key, id1, id2 string) {
		build := func(issuer string, ids []string) string {
			links := make([]dct.ChainLink, len(ids))
			for i, id := range ids {
				links[i] = dct.ChainLink{DelegationID: id}
			}
			if len(ids) == 0 {
				return issuer
			}
			levels := BudgetLevels(&dct.AuthorizedScope{Issuer: issuer, Chain: links})
			return levels[len(levels)-1].Key
		}
		if issuer, ids, ok := ParseBudgetKey(key); ok {
			if issuer == "" || strings.Contains(issuer, "/") {
				t.Fatalf("ParseBudgetKey(%q): issuer %q", key, issuer)
			}
			if back := build(issuer, ids); back != key {
				t.Fatalf("ParseBudgetKey(%q) = %q, %q, which is written %q", key, issuer, ids, back)
			}
		}
		issuer, _, _ := strings.Cut(key, "/")
		if issuer == "" {
			return
		}
		want := []string{id1, id2}
		if got, gotIDs, ok := ParseBudgetKey(build(issuer, want)); !ok || got != issuer || !reflect.DeepEqual(gotIDs, want) {
			t.Fatalf("the key of %q, %q reads back as %q, %q, %v", issuer, want, got, gotIDs, ok)
		}
	})
}
