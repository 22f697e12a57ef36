package gate

import (
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
)

// BudgetLevels names each level of the chain by its path of delegation IDs
// under the issuer, so two roots, or two parents, that happen to pick the
// same delegation ID never share a budget.
//
// Each ID is written with its length ("/16:del_a1b2c3d4e5f6"), since an ID
// may itself contain "/": "x/y" and "x" then "y" must not share a key.
//
// Known limitation (issue 26.1): a level is named by IDs, not by its
// delegation key, so two root tokens one issuer mints under one ID share
// their root level. Naming levels by key renames every spend-store entry
// and needs a migration of existing stores, not done yet.
func BudgetLevels(s *dct.AuthorizedScope) []budget.Level {
	levels := make([]budget.Level, len(s.Chain))
	key := s.Issuer
	for i, l := range s.Chain {
		key += "/" + strconv.Itoa(len(l.DelegationID)) + ":" + l.DelegationID
		levels[i] = budget.Level{Key: key, Limit: l.MaxBudgetMicrocents}
	}
	return levels
}

// ParseBudgetKey reads a budget key as the gate writes it (an issuer, then
// "/LEN:ID" for each delegation of the chain, root first) and returns the
// issuer and the delegation IDs. ok is false for a key the gate cannot have
// written: no delegation, an empty issuer, a length that is not a decimal
// without leading zeros or does not fit, or more delegations than a
// reservation has levels. (An issuer is a principal ID, which holds no
// '/'.)
func ParseBudgetKey(key string) (issuer string, ids []string, ok bool) {
	issuer, _, _ = strings.Cut(key, "/")
	if issuer == "" {
		return "", nil, false
	}
	rest := key[len(issuer):]
	for rest != "" {
		if len(ids) == budget.MaxLevels || rest[0] != '/' {
			return "", nil, false
		}
		digits, after, found := strings.Cut(rest[1:], ":")
		n, err := strconv.Atoi(digits)
		if !found || err != nil || n < 0 || digits != strconv.Itoa(n) || n > len(after) {
			return "", nil, false
		}
		ids = append(ids, after[:n])
		rest = after[n:]
	}
	return issuer, ids, len(ids) > 0
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
	levels := BudgetLevels(s)
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
