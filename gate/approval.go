package gate

import (
	"fmt"
	"time"

	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/policy"
)

// Approval is the approval of the rule that decided a request of method;
// ok is false when no rule did, or the method asks for none.
func (g *Gate) Approval(method string, rule int) (a policy.Approval, ok bool) {
	a, _, ok = g.ApprovalRule(method, rule)
	return a, ok
}

// ApprovalRule is Approval, with the rule.
func (g *Gate) ApprovalRule(method string, rule int) (a policy.Approval, r *policy.Rule, ok bool) {
	var rules []policy.Rule
	switch method {
	case MethodToolsCall:
		rules = g.Policy.Tools
	case MethodPromptsGet:
		rules = g.Policy.Prompts
	case MethodResourcesRead:
		rules = g.Policy.Resources
	}
	if rule < 0 || rule >= len(rules) {
		return a, nil, false
	}
	return rules[rule].Approval, &rules[rule], true
}

// StillAuthorized checks the token of a call that waited for approval
// once more before it is forwarded: one revoked, expired, or whose
// delegation ended in the meantime no longer authorizes the call. A call
// made without a token (the policy allows it) has nothing to check.
func (g *Gate) StillAuthorized(token string, proven bool, now time.Time) *Denial {
	if token == "" {
		return nil
	}
	if g.Verifier == nil {
		return &Denial{Type: dct.InvalidSignature, Detail: "this proxy trusts no root"}
	}
	if g.Now != nil {
		now = g.Now()
	}
	scope, err := g.Verifier.VerifyChain(token, now)
	if err != nil {
		return denyFrom(Decision{}, err, nil).Denial
	}
	if g.Accept != nil {
		if err := g.Accept(token, scope, proven); err != nil {
			return &Denial{Type: dct.InvalidSignature, Detail: err.Error()}
		}
	}
	if g.Ended != nil {
		for _, l := range scope.Chain {
			if status, ended := g.Ended(l); ended {
				return &Denial{Type: dct.Expired, Detail: fmt.Sprintf("delegation %s has ended (%s): its token no longer authorizes calls", l.DelegationID, status)}
			}
		}
	}
	return nil
}
