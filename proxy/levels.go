package proxy

import (
	"strconv"
	"sync/atomic"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
)

// budgetLevels names each level of the chain by its path of delegation IDs
// under the issuer, so two roots, or two parents, that happen to pick the
// same delegation ID never share a budget.
//
// Each ID is written with its length ("/16:del_a1b2c3d4e5f6"), since an ID
// may itself contain "/": "x/y" and "x" then "y" must not share a key.
func budgetLevels(s *dct.AuthorizedScope) []budget.Level {
	levels := make([]budget.Level, len(s.Chain))
	key := s.Issuer
	for i, l := range s.Chain {
		key += "/" + strconv.Itoa(len(l.DelegationID)) + ":" + l.DelegationID
		levels[i] = budget.Level{Key: key, Limit: l.MaxBudgetMicrocents}
	}
	return levels
}

// levelsMemo remembers the budget levels of the last chain the gate
// decided on. A session's calls mostly carry one token, so its levels are
// built once rather than per call. The memo keeps its own copy of what the
// levels derive from and compares it in full, so a hit is exactly the
// levels budgetLevels would build. The slice it returns is shared by every
// call with that chain: budget stores only read the levels they are given.
type levelsMemo struct{ last atomic.Pointer[memoLevels] }

type memoLevels struct {
	issuer string
	chain  []dct.ChainLink
	levels []budget.Level
}

func (m *levelsMemo) of(s *dct.AuthorizedScope) []budget.Level {
	if e := m.last.Load(); e != nil && e.issuer == s.Issuer && sameLevels(e.chain, s.Chain) {
		return e.levels
	}
	levels := budgetLevels(s)
	m.last.Store(&memoLevels{issuer: s.Issuer, chain: append([]dct.ChainLink(nil), s.Chain...), levels: levels})
	return levels
}

// sameLevels reports whether two chains have the same budget levels.
func sameLevels(a, b []dct.ChainLink) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].DelegationID != b[i].DelegationID || a[i].MaxBudgetMicrocents != b[i].MaxBudgetMicrocents {
			return false
		}
	}
	return true
}
