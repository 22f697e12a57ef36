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
	_, den := g.stillAuthorized(token, proven, now)
	return den
}

func (g *Gate) stillAuthorized(token string, proven bool, now time.Time) (*dct.AuthorizedScope, *Denial) {
	if token == "" {
		return nil, nil
	}
	if g.Verifier == nil {
		return nil, &Denial{Type: dct.InvalidSignature, Detail: "this proxy trusts no root"}
	}
	if g.Now != nil {
		now = g.Now()
	}
	scope, err := g.Verifier.VerifyChain(token, now)
	if err != nil {
		return nil, denyFrom(Decision{}, err, nil).Denial
	}
	if g.Accept != nil {
		if err := g.Accept(token, scope, proven); err != nil {
			return nil, &Denial{Type: dct.InvalidSignature, Detail: err.Error()}
		}
	}
	if g.Ended != nil {
		for _, l := range scope.Chain {
			if status, ended := g.Ended(l); ended {
				return nil, &Denial{Type: dct.Expired, Detail: fmt.Sprintf("delegation %s has ended (%s): its token no longer authorizes calls", l.DelegationID, status)}
			}
		}
	}
	return scope, nil
}

// StillGranted is StillAuthorized for a call that waited for approval
// while the policy was reloaded (g is the policy in force, not the one
// that decided the call): the policy in force must still map req to a
// capability its token grants, or the call is refused — a reload that
// takes a tool away stops the calls held for it too. The rate limits and
// the budget are not asked again: the call keeps the reservation it was
// decided with, and settles under the policy that decided it.
func (g *Gate) StillGranted(req *CallRequest, now time.Time) *Denial {
	scope, den := g.stillAuthorized(req.Token, req.Proven, now)
	if den != nil {
		return den
	}
	if scope == nil {
		// No token: allowed unauthenticated, which a reload cannot change,
		// and then the gate maps nothing.
		return nil
	}
	call, mapErr := g.mapRequest(req)
	if den := g.eachTarget(req, call, mapErr, scope, false); den != nil {
		return den
	}
	return g.eachTarget(req, call, mapErr, scope, true)
}
