package proxy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/delegateos/delegateos/budget"
	"github.com/delegateos/delegateos/dct"
	"github.com/delegateos/delegateos/policy"
)

// Gate makes every allow/deny decision for a tools/call. Logging, spend
// recording and, later, signed decision receipts hang off its Decision.
type Gate struct {
	Policy   *policy.Policy
	Verifier *dct.Verifier
	Budget   budget.Store
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// Ended, when set, reports whether a delegation has ended (completed,
	// failed or revoked) and how. A call under a token whose chain passes
	// through an ended delegation is refused: the work it was for is over.
	Ended func(delegationID string) (status string, ended bool)

	levels levelsMemo
}

// CallRequest is a tools/call as the gate sees it.
type CallRequest struct {
	Tool      string
	Arguments json.RawMessage
	// Token is the DCT presented with the call (params._delegateos.dct) or,
	// failing that, the session's; empty if there is none.
	Token string
	// ContractID and DelegationID, when the call names them in
	// _delegateos, must match the token.
	ContractID, DelegationID string
}

// Decision is the gate's answer. When Allowed, Reservation holds the
// call's cost until Settle. Scope is shared with every decision on the same
// token (dct.Verifier.VerifyChain): read it, do not change it.
type Decision struct {
	Allowed     bool
	Denial      *Denial
	Call        policy.Call
	Scope       *dct.AuthorizedScope
	Reservation *budget.Reservation
	// Unauthenticated is set when the policy let a call without a token through.
	Unauthenticated bool
	Latency         time.Duration
}

// Denial is a refused call, rendered as DelegateOS §11.2's JSON-RPC error.
type Denial struct {
	Type      dct.DenialType   `json:"type"`
	Detail    string           `json:"detail,omitempty"`
	Requested *dct.Capability  `json:"requested,omitempty"`
	Granted   []dct.Capability `json:"granted,omitempty"`
}

// DenialCode and DenialMessage are the JSON-RPC error of §11.2.
const (
	DenialCode    = -32001
	DenialMessage = "DCT verification failed"
)

func (g *Gate) now() time.Time {
	if g.Now != nil {
		return g.Now()
	}
	return time.Now()
}

// Decide runs the checks in order: the tool must be visible to the token,
// the call must map to a capability, the token must verify for it
// (DelegateOS §10.1, including revocation), the contract named in the call
// must be the token's, and the cost must fit the budget at every level of
// the delegation chain, where it is reserved before the call is forwarded.
func (g *Gate) Decide(req CallRequest) Decision { return g.decideAt(req, time.Now()) }

// decideAt is Decide for a call that arrived at start: the relay has read
// the clock already.
func (g *Gate) decideAt(req CallRequest, start time.Time) (d Decision) {
	defer func() { d.Latency = time.Since(start) }()
	now := start
	if g.Now != nil {
		now = g.Now()
	}
	call, mapErr := g.Policy.Map(req.Tool, req.Arguments)
	d.Call = call
	deny := func(t dct.DenialType, granted []dct.Capability, format string, args ...any) Decision {
		d.Denial = &Denial{Type: t, Detail: fmt.Sprintf(format, args...), Requested: requested(call), Granted: granted}
		return d
	}
	if req.Token == "" {
		if g.Policy.AllowUnauthenticated {
			d.Allowed, d.Unauthenticated = true, true
			return d
		}
		return deny(dct.Malformed, nil, "no DCT: pass one in params._delegateos.dct or start the proxy with --token")
	}
	if g.Verifier == nil {
		return deny(dct.InvalidSignature, nil, "this proxy trusts no root, so no token can be accepted")
	}
	scope, err := g.Verifier.VerifyChain(req.Token, now)
	if err != nil {
		return denyFrom(d, err, requested(call))
	}
	d.Scope = scope
	if g.Ended != nil {
		for _, l := range scope.Chain {
			if status, ended := g.Ended(l.DelegationID); ended {
				return deny(dct.Expired, scope.Capabilities, "delegation %s has ended (%s): its token no longer authorizes calls", l.DelegationID, status)
			}
		}
	}
	if !g.Policy.Visible(req.Tool, scope.Capabilities) {
		return deny(dct.CapabilityNotGranted, scope.Capabilities, "tool %q is not available to this token", req.Tool)
	}
	if mapErr != nil {
		return deny(dct.CapabilityNotGranted, scope.Capabilities, "%v", mapErr)
	}
	if what := suspectResource(call.Resource); what != "" {
		return deny(dct.CapabilityNotGranted, scope.Capabilities, "resource %q contains %s, which a server may read differently from the gate", call.Resource, what)
	}
	if req.ContractID != "" && req.ContractID != scope.ContractID {
		return deny(dct.CapabilityNotGranted, scope.Capabilities, "the call names contract %s but the token is bound to %s", req.ContractID, scope.ContractID)
	}
	if req.DelegationID != "" && req.DelegationID != scope.DelegationID {
		return deny(dct.CapabilityNotGranted, scope.Capabilities, "the call names delegation %s but the token is for %s", req.DelegationID, scope.DelegationID)
	}
	// §10.1 steps 6 and 7 on the verified chain: the leaf's spend, then the
	// capability. Reserve below then checks the cost at every level.
	levels := g.levels.of(scope)
	if spent, limit := g.Budget.Spent(levels[len(levels)-1].Key), scope.RemainingBudgetMicrocents; spent >= limit {
		return deny(dct.BudgetExceeded, scope.Capabilities, "spent %d of a budget of %d microcents", spent, limit)
	}
	if !covered(scope.Capabilities, call) {
		return deny(dct.CapabilityNotGranted, scope.Capabilities, "%s:%s on %q is not granted by this token", call.Namespace, call.Action, call.Resource)
	}
	r, err := g.Budget.Reserve(levels, call.Cost)
	if err != nil {
		var ex *budget.ExceededError
		if errors.As(err, &ex) {
			return deny(dct.BudgetExceeded, scope.Capabilities, "this call costs %d microcents; delegation %s has spent %d of %d", ex.Cost, displayKey(scope, levels, ex.Key), ex.Spent, ex.Limit)
		}
		// The spend could not be recorded: refuse rather than run unmetered.
		return deny(dct.BudgetExceeded, scope.Capabilities, "the spend store cannot record this call: %v", err)
	}
	d.Allowed, d.Reservation = true, r
	return d
}

// Refuse is the decision for a call the relay cannot hand to Decide (its
// params._delegateos is unreadable): a denial of type t that still names
// the capability the call requested.
func (g *Gate) Refuse(req CallRequest, t dct.DenialType, detail string) Decision {
	call, _ := g.Policy.Map(req.Tool, req.Arguments)
	return Decision{Call: call, Denial: &Denial{Type: t, Detail: detail, Requested: requested(call)}}
}

// requested is the capability a call needs, as a denial names it.
func requested(call policy.Call) *dct.Capability {
	return &dct.Capability{Namespace: call.Namespace, Action: call.Action, Resource: call.Resource}
}

// denyFrom turns a verifier error into a denial.
func denyFrom(d Decision, err error, requested *dct.Capability) Decision {
	var dd *dct.Denial
	if errors.As(err, &dd) {
		d.Denial = &Denial{Type: dd.Type, Detail: dd.Detail, Requested: requested, Granted: dd.Granted}
		return d
	}
	d.Denial = &Denial{Type: dct.Malformed, Detail: err.Error(), Requested: requested}
	return d
}

// displayKey names the delegation a budget key belongs to.
func displayKey(scope *dct.AuthorizedScope, levels []budget.Level, key string) string {
	for i, l := range levels {
		if l.Key == key {
			return scope.Chain[i].DelegationID
		}
	}
	return key
}

// suspectResource names what in a mapped resource a server might decode
// into a path separator or a dot segment after the gate has matched it
// literally: a backslash, a percent-encoded '.', '/' or '\', or a control
// character.
func suspectResource(r string) string {
	for i := 0; i < len(r); i++ {
		switch c := r[i]; {
		case c == '\\':
			return "a backslash"
		case c < 0x20 || c == 0x7f:
			return "a control character"
		case c == '%' && i+2 < len(r):
			switch strings.ToLower(r[i+1 : i+3]) {
			case "2e", "2f", "5c":
				return "a percent-encoded '.', '/' or '\\'"
			}
		}
	}
	return ""
}

// Settle records what an allowed call cost once its response is known:
// actual is the reserved cost unless the upstream reported one the policy
// trusts. release drops the reservation instead (the upstream refused the
// call with a JSON-RPC error before running it).
func (g *Gate) Settle(d *Decision, actual int64, release bool) error {
	if d.Reservation == nil {
		return nil
	}
	r := d.Reservation
	d.Reservation = nil
	if release {
		return g.Budget.Release(r)
	}
	return g.Budget.Commit(r, actual)
}

// ListView reports which tools a token may see; an empty token sees
// everything only when the policy allows unauthenticated calls.
func (g *Gate) ListView(token string) (func(tool string) bool, error) {
	if token == "" {
		if g.Policy.AllowUnauthenticated {
			return func(string) bool { return true }, nil
		}
		return func(string) bool { return false }, nil
	}
	if g.Verifier == nil {
		return func(string) bool { return false }, errors.New("no trusted roots")
	}
	scope, err := g.Verifier.VerifyChain(token, g.now())
	if err != nil {
		return func(string) bool { return false }, err
	}
	return func(tool string) bool { return g.Policy.Visible(tool, scope.Capabilities) }, nil
}

func covered(caps []dct.Capability, c policy.Call) bool {
	for i := range caps {
		if caps[i].Covers(c.Namespace, c.Action, c.Resource) {
			return true
		}
	}
	return false
}
